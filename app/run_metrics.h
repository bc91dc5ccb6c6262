/*
 * run_metrics.h - the per-epoch files of snn-train: metrics.csv (one row per epoch: train and
 * test loss and accuracy, images per second, seconds, learning rate, then the firing rate of
 * every neuron layer), metrics.json (the same rows as JSON) and the curves loss.svg and
 * accuracy.svg, all redrawn from the CSV after each epoch.
 *
 * Every file is written to <file>.tmp and renamed over the old one (finish_file), so a run
 * killed mid-write leaves the previous epoch's file whole. A resumed run (--resume) continues
 * the same files: write_metrics keeps the rows of the epochs before its own and replaces any
 * row of this epoch or a later one that a run stopped before its checkpoint left behind.
 */
#ifndef SNN_APP_RUN_METRICS_H
#define SNN_APP_RUN_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "app/evaluate.h"

/* What one epoch of training measured, as metrics.csv records it: loss and accuracy over the
 * batches whose loss was read (NaN when none was), and the speed. */
typedef struct metrics_train {
    double loss, accuracy;        /* accuracy in [0, 1] */
    double images_per_second;     /* 0 when no time was measured */
    double seconds;               /* of training in this epoch */
} metrics_train;

/* <dir>/<file> into buf. */
void path_in(char *buf, size_t size, const char *dir, const char *file);

/* Writes epoch `epoch`'s (from 0) metrics: the training side *st, the evaluation *ev and the
 * learning rate. metrics.csv keeps the rows of the earlier epochs and gets this epoch's row (a
 * row of this epoch or a later one, left by a run that stopped before its checkpoint, is
 * replaced, and a cut-off last line dropped); metrics.json and the SVG curves are redrawn from
 * it, so a resumed run continues the same files. 0, or 1 with the message printed. */
int write_metrics(const char *out_dir, int64_t epoch, const metrics_train *st,
                  const eval_result *ev, float lr);

#endif /* SNN_APP_RUN_METRICS_H */
