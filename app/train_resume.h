/*
 * train_resume.h - the training configuration a checkpoint of snn-train records, and what
 * --resume does with it: every flag the command line leaves out is taken from the checkpoint,
 * and a flag given with another value than the checkpoint's is refused, all such flags listed
 * in one message (exit 2), unless the flag is one that may change.
 *
 * Each flag of snn-train is one of four kinds (docs/long-runs.md, "Resuming"):
 *   - the run itself: the model's flags (--model, --neuron, --surrogate, --tau, --T, --width,
 *     --hidden, --encoding, --levels, --symmetric, --dropout: the model's configuration,
 *     "snn.model.*", which every checkpoint holds), --dataset, --optimizer, --loss, --ema,
 *     --split-by and --downsample. They never change: the weights, the optimizer's state and
 *     the average belong to them (a run without an average may start one with --ema).
 *   - the recipe: the global batch (--batch-size times the ranks), --lr, --momentum,
 *     --weight-decay, --clip-grad, --schedule, --warmup, --min-lr, --label-smoothing,
 *     --tet-lambda, --augment, --crop-padding, --random-erasing, --activity-penalty, --seed and
 *     --limit-train. A new value needs --allow-changes (the run then differs from an unbroken
 *     one, and says so).
 *   - the plan: --epochs, --limit-test and --precision. Taken from the checkpoint unless given;
 *     a value given replaces it (a longer run; the device may change, and with it the
 *     precision).
 *   - this command line only, never recorded: --device, --kernels, --threads, --data, --out
 *     (default with --resume: the checkpoint's folder), --log-every, --checkpoint-every,
 *     --stop-after, --step-log, --explain, --gpus, --init, --sync-bn, --overwrite. They say where
 *     and how a run is computed and what it writes, so that a run split by --stop-after,
 *     --checkpoint-every or a signal ends with the same checkpoint, byte for byte, as an
 *     unbroken one.
 * The run itself and the recipe and the plan are recorded as flags and values in the
 * checkpoint's metadata ("snn.train.flags": "--dataset fashion-mnist --optimizer adam ...",
 * continued in "snn.train.flags.2", ... when longer than a metadata value). A checkpoint written
 * before they were recorded still resumes: its model, data set, optimizer, average, frames and
 * activity penalty are checked as before, and a note names the values that come from this
 * command line or the defaults.
 */
#ifndef SNN_APP_TRAIN_RESUME_H
#define SNN_APP_TRAIN_RESUME_H

#include <stdbool.h>

#include "app/options.h"
#include "app/train_options.h"
#include "snn.h"

/* Adds the recorded flags of *o to *meta ("snn.train.flags", ...). SNN_OK, or the error of
 * snn_metadata_set (no room). */
snn_status train_flags_to_metadata(const train_options *o, snn_metadata *meta);

/* Restores the flags of --resume from the checkpoint's metadata `meta` and model configuration
 * `config`: table[0..n) is snn-train's flag table pointing into *o, given[] says which flags the
 * command line named, `ranks` how many ranks this run trains on (the recorded batch is the
 * global one). A flag left out takes the checkpoint's value; one given with another value is
 * refused (all of them listed), or, for the recipe with --allow-changes, taken and named.
 * `quiet`: print no notes (a rank other than the first). 0, or 2 with the message printed. */
int train_resume_flags(train_options *o, option *table, int n, const bool *given, int ranks,
                       const snn_metadata *meta, const snn_model_config *config, bool quiet);

#endif /* SNN_APP_TRAIN_RESUME_H */
