/*
 * train_options.h - snn-train's command line: the options with their defaults (the main job),
 * the flag table that parse_options reads and --help prints, the checks on values that need
 * neither data nor a device (ranges and names), each message naming its flag, and the few
 * lines that say which configuration a run trains.
 *
 * A new flag is a field of train_options, a default in train_defaults, a line of the table
 * and, when it has a range, a check in train_options_check.
 */
#ifndef SNN_APP_TRAIN_OPTIONS_H
#define SNN_APP_TRAIN_OPTIONS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "app/options.h"
#include "app/train_dist.h"
#include "snn.h"

typedef struct train_options {
    const char *dataset, *data, *model, *neuron, *surrogate, *loss, *encoding;
    const char *optimizer, *schedule, *device, *out, *resume, *precision, *split_by, *step_log;
    const char *kernels;     /* the CPU's kernel set, "fast" or "ref" (snn_set_kernels); NULL:
                                the library's choice ($SNN_KERNELS, else fast) */
    int time_steps, width, hidden, epochs, batch_size, warmup, seed, threads, log_every;
    const char *sequence;    /* rsnn: "rows" or "pixels", how an image becomes a sequence; NULL:
                                not given (rows for images) */
    int layers;              /* rsnn: recurrent layers (0: the model's default, 1) */
    int downsample, limit_train, limit_test, augment, stop_after, levels;
    int crop_padding;        /* --augment's random crop: pixels of padding on each side */
    int checkpoint_every;
    int world_size;          /* ranks of a data-parallel run (1 without one); not an option */
    bool tf32, symmetric;
    bool binarize;           /* shd / ssc: frames hold 0 / 1, not spike counts */
    float max_time;          /* shd / ssc: seconds the T frames cover; 0: 1 s */
    bool explain;            /* print the execution plan of the first step (snn_model_explain) */
    bool keep_bf16;          /* conv outputs kept for backward as bf16 (nn/plan.h keep_bf16) */
    bool overwrite;          /* a new run may replace the checkpoint in --out */
    bool allow_changes;      /* --resume may take a new learning rate, schedule, ... */
    float tau, lr, momentum, weight_decay, min_lr;
    float tau_adapt, beta;        /* alif: the threshold's time constant and rise per spike */
    train_dist_options dist;
    float activity_penalty;       /* LAMBDA of snn_activity_penalty; 0: off */
    float ema;                    /* decay of the weights' moving average (nn/ema.c); 0: off */
    float label_smoothing;        /* eps of the cross-entropy's smoothed targets; 0: off */
    float tet_lambda;             /* --loss tet: weight of TET's MSE regulariser */
    float dropout;                /* CNN / DVS net classifier, rsnn spikes: one mask over T; 0: off */
    float random_erasing;         /* probability of erasing a random rectangle (data/augment.c) */
    const char *train_mode;       /* "bptt", or "sltt" or "ottt" (online, app/train_online.c) */
    int sltt_k;                   /* --train-mode sltt / ottt: backward on K of the T steps;
                                   * 0: all */
    int time_checkpoint;          /* BPTT in segments of K steps, recomputed in backward; 0: off */
    float clip_grad;              /* clip the gradients' global L2 norm to this before each
                                     optimizer step (snn_clip_grad_norm); 0: off */
} train_options;

/* snn-train's defaults: the main job (app/train_options.c says where each number comes from). */
train_options train_defaults(void);

/* What --help prints above the flags. */
#define TRAIN_SUMMARY \
    "Trains a spiking neural network; writes metrics, curves, " \
    "a spike raster and checkpoints to the output folder.\n" \
    "SIGINT / SIGTERM: finish the current step, save a checkpoint that --resume " \
    "continues exactly\nthere (mid-epoch), exit 75; a second signal stops at once. " \
    "Sizes that do not fit in memory are\nrefused before allocating " \
    "(SNN_MEMORY_LIMIT=8G caps what is taken as available). One run per --out.\n" \
    "Exit codes: 0 done, 1 failure, 2 bad flags or too large, 3 loss diverged, " \
    "75 stopped by a signal."

/* The most flags the table holds (checked when it is built). */
#define TRAIN_MAX_OPTIONS 96

/* Fills table[] (TRAIN_MAX_OPTIONS entries) with snn-train's flags, each pointing into *o;
 * returns how many. */
int train_option_table(train_options *o, option *table);

/* Checks the values that need no data and fills *schedule from them: a message for each bad
 * one, naming the flag, the value and what was expected ("snn-train: --batch-size 0: expected
 * an integer >= 1"; a name that is none of the choices with the nearest one). 0, or 2 (a bad
 * command line) with the messages printed. */
int train_options_check(const train_options *o, snn_schedule *schedule);
/* Whether --train-mode is an online one (sltt or ottt: app/train_online.c). */
bool train_options_online(const train_options *o);

/* The defaults of --model where they differ from the main job's, for the flags not `given`
 * (table[] of n flags pointing into *o): rsnn trains 256 neurons a layer without augmentation
 * (app/train_options.c says why). */
void train_model_defaults(train_options *o, option *table, int n, const bool *given);

/* A new run's T from its data (rsnn, images read as --sequence rows / pixels: T = H / H*W):
 * sets c->time_steps. 0, or 2 with the message printed when --T was given (`steps_given`)
 * and differs, or --sequence was given for data that already has a time axis (`event_data`). */
int train_sequence_steps(const train_options *o, bool steps_given, bool event_data,
                         snn_model_config *c);

/* The model a new run builds from the flags (train_options_check passed): kind, neuron and its
 * constants, surrogate, T, width, hidden units, encoding, dropout and seed; the input and
 * classes come from the data. */
snn_model_config train_model_config(const train_options *o);

/* Prints, each line opening with `indent`, what a run trains with beyond its model (see
 * app/run_config.h for the model's lines): the loss, the optimizer with its learning rate and
 * schedule, the batch (`global_batch` images per step, over every rank) and the epochs. */
void train_options_print(FILE *out, const char *indent, const train_options *o,
                         const snn_schedule *schedule, int global_batch);

#endif /* SNN_APP_TRAIN_OPTIONS_H */
