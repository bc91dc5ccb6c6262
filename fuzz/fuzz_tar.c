/*
 * fuzz_tar.c - libFuzzer target for the streaming tar reader (data/tar.c) over the gzip stream:
 * the input is a .tar or .tar.gz; every member is listed and its data read in pieces.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "data/data_internal.h"
#include "tensor/error.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    snn_stream s;
    if (snn_stream_open_memory(&s, data, size, "fuzz") == SNN_OK) {
        snn_tar tar;
        snn_tar_init(&tar, &s);
        uint8_t buf[700];
        for (int members = 0; members < 10000; members++) {
            snn_tar_member m;
            bool end;
            if (snn_tar_next(&tar, &m, &end) != SNN_OK || end) break;
            SNN_ASSERT(memchr(m.name, '\0', sizeof m.name) != NULL);
            /* Read the first part of every other member; the rest is skipped by the reader. */
            if (members % 2 == 0) {
                uint64_t left = tar.left < 4096 ? tar.left : 4096;
                bool ok = true;
                while (left > 0 && ok) {
                    size_t n = left < sizeof buf ? (size_t)left : sizeof buf;
                    ok = snn_tar_read(&tar, buf, n) == SNN_OK;
                    left -= n;
                }
                if (!ok) break;
            }
        }
        snn_stream_close(&s);
    }
    SNN_ASSERT(snn_live_bytes(SNN_CPU) == 0);
    return 0;
}
