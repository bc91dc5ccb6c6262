/*
 * fuzz_nmnist.c - libFuzzer target for the N-MNIST reader (data/event_nmnist.c over data/zip.c).
 * The first input byte picks what the rest is:
 *     bits 0-1  0: a Train.zip-style archive, train split; 1: the same, test split;
 *               2, 3: one raw .bin file (40-bit events)
 * A loaded set must have 34 x 34 frames of 2 polarities and labels 0..9; on failure it must be
 * empty; nothing may leak.
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
    data++;
    size--;
    snn_event_frames f = {.frames = 3, .split_by = (mode & 1) ? SNN_SPLIT_BY_TIME : SNN_SPLIT_BY_NUMBER,
                          .downsample = 1};
    if (mode >= 2) {
        snn_event_list l = {0};
        if (snn_nmnist_decode(data, size, "fuzz.bin", &l) == SNN_OK) {
            SNN_ASSERT(l.count == (int64_t)(size / 5));
            uint8_t frames[3 * 2 * 34 * 34];
            snn_events_to_frames(frames, l.items, l.count, 34, 34, &f);
        }
        snn_event_list_free(&l);
    } else {
        snn_zip z;
        snn_dataset ds;
        memset(&ds, 0, sizeof ds);
        if (snn_zip_open_memory(&z, data, size, "fuzz.zip") == SNN_OK) {
            snn_status st = snn_nmnist_read_zip(&z, mode ? SNN_SPLIT_TEST : SNN_SPLIT_TRAIN, &f, &ds);
            snn_zip_close(&z);
            if (st == SNN_OK) {
                SNN_ASSERT(ds.count > 0 && ds.channels == 2 && ds.height == 34 && ds.time_steps == 3);
                for (int64_t i = 0; i < ds.count; i++) SNN_ASSERT(ds.labels[i] < 10);
                snn_dataset_free(&ds);
            } else {
                SNN_ASSERT(ds.images == NULL && ds.labels == NULL && ds.count == 0);
            }
        }
    }
    SNN_ASSERT(snn_live_bytes(SNN_CPU) == 0);
    return 0;
}
