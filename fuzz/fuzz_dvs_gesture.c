/*
 * fuzz_dvs_gesture.c - libFuzzer target for the DVS128 Gesture reader (data/event_dvs.c over
 * data/event_aedat.c and data/tar.c). The first input byte picks what the rest is:
 *     bits 0-1  0: a DvsGesture tar(.gz) archive, train split; 1: the same, test split;
 *               2: one AEDAT 3.1 recording; 3: one label CSV
 * A loaded set must hold labels 0..10; on failure it must be empty; nothing may leak.
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
    /* small frames: 8 x 8 for the 128 x 128 sensor, so the fuzzer spends its time parsing */
    snn_event_frames f = {.frames = 2, .split_by = SNN_SPLIT_BY_TIME, .downsample = 16};
    if (mode == 2) {
        snn_event_list l = {0};
        if (snn_aedat3_decode(data, size, "fuzz.aedat", 128, 128, &l) == SNN_OK)
            for (int64_t i = 0; i < l.count; i++) SNN_ASSERT(l.items[i].x < 128 && l.items[i].y < 128);
        snn_event_list_free(&l);
    } else if (mode == 3) {
        snn_gesture_label *labels;
        int n;
        if (snn_gesture_labels_parse(data, size, "fuzz.csv", &labels, &n) == SNN_OK) {
            for (int i = 0; i < n; i++) SNN_ASSERT(labels[i].label >= 0 && labels[i].label < 11);
            snn_free(labels, (size_t)n * sizeof *labels, SNN_CPU);
        }
    } else {
        snn_dataset ds;
        snn_status st = snn_dvs_gesture_read_tar(NULL, data, size,
                                                 mode ? SNN_SPLIT_TEST : SNN_SPLIT_TRAIN, &f, &ds);
        if (st == SNN_OK) {
            SNN_ASSERT(ds.count > 0 && ds.channels == 2 && ds.height == 8 && ds.time_steps == 2);
            for (int64_t i = 0; i < ds.count; i++) SNN_ASSERT(ds.labels[i] < 11);
            snn_dataset_free(&ds);
        } else {
            SNN_ASSERT(ds.images == NULL && ds.labels == NULL && ds.count == 0);
        }
    }
    SNN_ASSERT(snn_live_bytes(SNN_CPU) == 0);
    return 0;
}
