/*
 * fuzz_cifar.c - libFuzzer target for the CIFAR readers (data/cifar.c). The first input byte
 * picks what the rest is:
 *     bits 0-1  0: CIFAR-10 archive, 1: CIFAR-100 archive (fine), 2: CIFAR-100 (coarse),
 *               3: raw batch-file records (kind from bit 3)
 *     bit 2     split: 0 train, 1 test
 * A loaded data set must hold labels in range; on failure it must be empty; nothing may leak.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "data/data_internal.h"
#include "tensor/error.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    const int mode = data[0] & 3;
    const snn_split split = (data[0] & 4) ? SNN_SPLIT_TEST : SNN_SPLIT_TRAIN;
    data++;
    size--;
    snn_dataset ds;
    snn_status st;
    if (mode == 3) {
        snn_cifar_kind kind = (data[-1] & 8) ? SNN_CIFAR100 : SNN_CIFAR10;
        st = snn_cifar_from_records(data, size, kind, (data[-1] & 16) != 0, "fuzz", &ds);
    } else {
        snn_stream s;
        st = snn_stream_open_memory(&s, data, size, "fuzz");
        if (st == SNN_OK) {
            st = snn_cifar_read_archive(&s, mode == 0 ? SNN_CIFAR10 : SNN_CIFAR100, mode == 2,
                                        split, &ds);
            snn_stream_close(&s);
        } else {
            memset(&ds, 0, sizeof ds);
        }
    }
    if (st == SNN_OK) {
        SNN_ASSERT(ds.count > 0 && ds.channels == 3 && ds.height == 32 && ds.width == 32);
        for (int64_t i = 0; i < ds.count; i++) SNN_ASSERT(ds.labels[i] < ds.classes);
        snn_dataset_free(&ds);
    } else {
        SNN_ASSERT(ds.images == NULL && ds.labels == NULL && ds.count == 0);
    }
    SNN_ASSERT(snn_live_bytes(SNN_CPU) == 0);
    return 0;
}
