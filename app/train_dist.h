/*
 * train_dist.h - the data-parallel side of snn-train (docs/distributed.md): its options, the
 * start of a rank or of the --gpus launcher, and the few places where one rank's view of a
 * step differs from the job's: the loss and accuracy of the global batch, the evaluation
 * shards, and which rank writes files (rank 0). Every function is a no-op for dist = NULL, the
 * ordinary one-process run, so snn-train (examples/snn_train.c) calls them unconditionally.
 */
#ifndef SNN_APP_TRAIN_DIST_H
#define SNN_APP_TRAIN_DIST_H

#include <stdbool.h>
#include <stdint.h>

#include "app/evaluate.h"
#include "snn.h"

typedef struct train_dist_options {
    int gpus;             /* --gpus N: start N ranks on this host */
    const char *init;     /* --init tcp://HOST:PORT or file:PATH: this process is one rank */
    bool sync_bn;         /* --sync-bn */
} train_dist_options;

/* --gpus without --device means the GPUs: *device becomes "cuda" then; --device cpu --gpus N
 * runs N CPU ranks (TCP). */
void train_dist_default_device(const train_dist_options *o, int argc, char **argv,
                               const char **device);

/* The ranks this command line trains on, known before any starts: --gpus N, the world size
 * of a rank a launcher started (WORLD_SIZE and the like, or --init), else 1. *rank receives
 * this process's rank (0 for the --gpus launcher and for a one-process run). */
int train_dist_planned_ranks(const train_dist_options *o, int *rank);

/* Returns -1 to go on training, with *dist set when this process is one rank of a distributed
 * run (NULL otherwise); or the exit code main should return: the launcher's (every rank has
 * ended) or 1 / 2 for a failure, with a message printed. */
int train_dist_start(const train_dist_options *o, int argc, char **argv, snn_device device,
                     snn_dist **dist);

/* Whether this process writes the files: rank 0, or the only process. */
bool train_dist_rank0(const snn_dist *d);

/* Each rank's loader reads its shard of every global batch (data.h, snn_shard_slice). */
void train_dist_shard(const snn_dist *d, snn_loader_config *lc);

/* This rank's contiguous part of an evaluation set (the parts' sums make the whole's). */
void train_dist_slice(const snn_dist *d, snn_dataset *ds);

/* Turns this rank's loss (mean over count samples) and correct count into the global batch's,
 * and *stop (this rank's: a signal came) into "some rank was asked to stop", so that every rank
 * stops after the same step. Every rank calls it at the same steps. */
snn_status train_dist_read(snn_dist *d, float *loss, int64_t *correct, int64_t *count,
                           bool *stop);

/* *stop <- whether any rank was asked to stop (`local`: this one was; app/run_signals.h), so
 * that the ranks stop at the same point; *stop = local without a data-parallel run. Every rank
 * calls it at the same points. */
snn_status train_dist_stop(snn_dist *d, bool local, bool *stop);

/* After each optimizer step: with SNN_DIST_VERIFY=1, checks that every rank holds the same
 * parameters (the multigpu tests set it; it copies the model to the host every step).
 * SNN_DIST_KILL=R:S[:TERM] is a test hook: rank R kills itself (SIGKILL) after its S-th step in
 * this run, so that tests can watch the other ranks stop; with ":TERM" it sends itself SIGTERM
 * instead, a stop request that only this rank saw. */
snn_status train_dist_after_step(snn_dist *d, snn_module *model);

/* Before evaluating at the end of an epoch: the replicas must still agree, and rank 0's
 * batch-norm running statistics become everyone's (they differ with per-rank statistics), so
 * that the sharded evaluation and the checkpoint are rank 0's model. `average` (--ema's
 * averaged model, or NULL) gets rank 0's too: each rank averaged its own statistics. */
snn_status train_dist_epoch_end(snn_dist *d, snn_module *model, snn_module *average);

/* Sums the ranks' evaluation results. */
snn_status train_dist_eval(snn_dist *d, eval_result *ev);

/* The end of a rank: in order (waits for every rank) when every rank ends alike (success, a
 * diverged loss, which all ranks read together); at once after a failure of this rank (exit
 * code 1), so that the others see it leave and stop. */
void train_dist_end(snn_dist *d, int exit_code);

#endif /* SNN_APP_TRAIN_DIST_H */
