/*
 * train_checkpoint.h - what snn-train keeps in <out>/checkpoint.safetensors besides the
 * weights and the optimizer state: the position in the run (epochs done, or batches done of an
 * unfinished epoch with that epoch's running statistics), the model's random stream, the flags
 * a resumed run restores (app/train_resume.h: data set, optimizer, learning rate and schedule,
 * loss, augmentation, ...), the weights' moving average
 * ("ema.<name>" tensors, with --ema) and the best evaluation so far, so that --resume continues
 * bit-exactly; and <out>/best.safetensors, the evaluated weights of the best epoch.
 * Both are written atomically by snn_checkpoint_save (nn/checkpoint_save.c): a run killed
 * mid-save leaves the previous file.
 */
#ifndef SNN_APP_TRAIN_CHECKPOINT_H
#define SNN_APP_TRAIN_CHECKPOINT_H

#include <stdbool.h>
#include <stdint.h>

#include "app/train_options.h"
#include "snn.h"

/* The running statistics of one epoch (a mid-epoch checkpoint records them). */
typedef struct epoch_stats {
    double loss_sum;
    double penalty_sum;           /* the activity penalty (before LAMBDA), where the loss was
                                     read */
    int64_t correct, seen;        /* over the batches whose loss was read */
    int64_t images;
    double seconds;
    int64_t batches;              /* batches of the epoch done (a resumed epoch counts its
                                     first part) */
    bool diverged;
    bool save_failed;             /* a --checkpoint-every checkpoint could not be written */
    double grad_norm_sum;         /* --clip-grad: the gradients' norms before clipping, summed */
    int64_t grad_norms, clipped;  /* ... over this many steps (of this run), clipped in so many */
    int64_t skipped;              /* --clip-grad: steps left out, their gradient not finite */
} epoch_stats;

/* What a run trains and what its checkpoint saves besides the options and the position. */
typedef struct train_state {
    snn_module *model;
    snn_optimizer *opt;
    snn_ema *ema;                 /* --ema: the weights' moving average (nn/ema.c); else NULL */
    double last_accuracy;         /* of the last evaluation (-1: none yet) */
    int64_t best_epoch;           /* the epoch (from 1) of the best evaluation so far (0: none) */
    double best_accuracy;         /* its test accuracy (-1: none yet) */
} train_state;

/* The model that evaluation runs: the weights' moving average with --ema, else the model. */
snn_module *train_eval_model(const train_state *run);

/* The checkpoint, in <out>/checkpoint.safetensors. At an epoch's end (batches < 0) it records
 * the epoch as done; mid-epoch it records how many batches of epoch `epoch` are done and the
 * epoch's running statistics, so that --resume continues exactly there. 0, or 1 with the
 * message printed (the previous checkpoint is then left as it was). */
int save_checkpoint(const char *out_dir, const train_state *run, const train_options *o,
                    int64_t epoch, int64_t batches, const epoch_stats *st, int64_t images);

/* After an evaluation that beat every earlier one: <out>/best.safetensors gets the weights that
 * were evaluated (the moving average with --ema) as a model checkpoint snn-eval reads, without
 * optimizer state, with metadata naming the epoch and accuracy; written atomically like the
 * checkpoint. run->best_* are updated only once the file is written. 0, or 1 with the message
 * printed (the previous best file is then left as it was). */
int save_best(const char *out_dir, train_state *run, const train_options *o, int64_t epoch,
              double accuracy);

/* A SIGINT or SIGTERM came and the step it found running has finished: save exactly where the
 * run is (batch `st->batches` of epoch `epoch`) and say how to go on. RUN_EXIT_STOPPED, or 1
 * when the checkpoint cannot be written (the previous one is then left as it was). */
int stop_on_signal(const char *out_dir, const train_state *run, const train_options *o,
                   int64_t epoch, const epoch_stats *st, int64_t images, int64_t steps_per_epoch,
                   int64_t steps_at_start);

/* The output folder of a run into buf: --out; else, with --resume, the folder of the checkpoint
 * it continues; else runs/<dataset>-<model>. */
void train_out_dir(const train_options *o, char *buf, size_t size);

/* One run's files per folder: a new run (neither --resume nor --overwrite) is refused where
 * out_dir holds another run's checkpoint, naming the folder and both options. 0, or 2 with
 * the message printed. */
int train_out_check(const char *out_dir, const train_options *o);

/* Where a run starts: at the beginning, or where the checkpoint of --resume left off. */
typedef struct train_start {
    int64_t epoch;                /* epochs done */
    int64_t batch;                /* batches done of epoch `epoch` (a mid-epoch checkpoint) */
    epoch_stats resumed;          /* a checkpoint written mid-epoch: the epoch's first part */
    double accuracy;              /* of the last evaluation (-1: none yet) */
    int64_t best_epoch;           /* of the best evaluation so far (0: none yet) */
    double best_accuracy;         /* its accuracy (-1: none yet) */
    bool has_ema;                 /* the checkpoint holds a moving average of the weights */
} train_start;

/* Reads the checkpoint of --resume: its metadata into *meta, the model's configuration into
 * *config, and where it stopped into *start; checks that it is a training checkpoint (its
 * flags are train_resume_flags's, app/train_resume.h). 0, or the exit code with the message
 * printed (1: unreadable, 2: not a checkpoint this run can continue). */
int train_resume_read(train_options *o, snn_metadata *meta, snn_model_config *config,
                      train_start *start);

#endif /* SNN_APP_TRAIN_CHECKPOINT_H */
