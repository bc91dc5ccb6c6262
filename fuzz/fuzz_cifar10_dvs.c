/*
 * fuzz_cifar10_dvs.c - libFuzzer target for the CIFAR10-DVS reader (data/event_dvs.c over
 * data/event_aedat.c and data/zip.c). The first input byte picks what the rest is:
 *     bit 0     0: one class zip of AEDAT 2.0 recordings (class = bits 4-7 mod 10), bit 1 the
 *               split; 1: one raw AEDAT 2.0 recording
 * A loaded set must hold that class's label; on failure it must be empty; nothing may leak.
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
    const int mode = data[0];
    data++;
    size--;
    snn_event_frames f = {.frames = 2, .split_by = SNN_SPLIT_BY_NUMBER, .downsample = 16};
    if (mode & 1) {
        snn_event_list l = {0};
        if (snn_aedat2_decode(data, size, "fuzz.aedat", &l) == SNN_OK)
            for (int64_t i = 0; i < l.count; i++) SNN_ASSERT(l.items[i].x < 128 && l.items[i].y < 128);
        snn_event_list_free(&l);
    } else {
        snn_zip z;
        int label = (mode >> 4) % 10;
        if (snn_zip_open_memory(&z, data, size, "fuzz.zip") == SNN_OK) {
            snn_dataset ds;
            snn_status st = snn_cifar10dvs_read_zips(&z, &label, 1, (mode & 2) ? SNN_SPLIT_TEST
                                                                               : SNN_SPLIT_TRAIN,
                                                     &f, &ds);
            snn_zip_close(&z);
            if (st == SNN_OK) {
                SNN_ASSERT(ds.count > 0 && ds.height == 8 && ds.time_steps == 2);
                for (int64_t i = 0; i < ds.count; i++) SNN_ASSERT(ds.labels[i] == label);
                snn_dataset_free(&ds);
            } else {
                SNN_ASSERT(ds.images == NULL && ds.labels == NULL && ds.count == 0);
            }
        }
    }
    SNN_ASSERT(snn_live_bytes(SNN_CPU) == 0);
    return 0;
}
