/*
 * fuzz_idx.c - libFuzzer target for the IDX parser (data/idx.c) and the gzip stream under it
 * (data/gzip_stream.c): the input is an IDX file, plain or gzip-compressed, read as a label
 * file (1-D) and as an image file (3-D). Any outcome but a crash, a sanitizer report or memory
 * still held afterwards is fine.
 *
 *     .ci/fuzz.sh            (builds with clang and runs every target for a bounded time)
 */
#include <stddef.h>
#include <stdint.h>

#include "data/data_internal.h"
#include "tensor/error.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const int ranks[2] = {1, 3};
    for (int r = 0; r < 2; r++) {
        snn_stream s;
        if (snn_stream_open_memory(&s, data, size, "fuzz") != SNN_OK) continue;
        snn_idx idx;
        if (snn_idx_read(&s, ranks[r], &idx) == SNN_OK) {
            /* A successful read must be self-consistent. */
            uint64_t bytes = 1;
            for (int i = 0; i < idx.ndim; i++) bytes *= (uint64_t)idx.dim[i];
            SNN_ASSERT(bytes == idx.bytes && idx.data != NULL);
            snn_idx_free(&idx);
        }
        snn_stream_close(&s);
    }
    SNN_ASSERT(snn_live_bytes(SNN_CPU) == 0); /* nothing leaked on any path */
    return 0;
}
