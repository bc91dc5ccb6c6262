/*
 * snn_dist.h - the data-parallel side of snn-train (docs/distributed.md): its options, the
 * start of a rank or of the --gpus launcher, and the few places where one rank's view of a
 * step differs from the job's: the loss and accuracy of the global batch, the evaluation
 * shards, and which rank writes files (rank 0). Every function is a no-op for dist = NULL, the
 * ordinary one-process run, so snn_train.c calls them unconditionally.
 */
#ifndef SNN_EXAMPLES_DIST_H
#define SNN_EXAMPLES_DIST_H

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "snn_common.h"

typedef struct train_dist_options {
    int gpus;             /* --gpus N: start N ranks on this host */
    const char *init;     /* --init tcp://HOST:PORT or file:PATH: this process is one rank */
    bool sync_bn;         /* --sync-bn */
} train_dist_options;

/* Whether the command line names --device (the options take their value as the next word). */
static UNUSED bool argv_names_device(int argc, char **argv)
{
    for (int a = 1; a < argc; a++)
        if (strcmp(argv[a], "--device") == 0) return true;
    return false;
}

/* --gpus without --device means the GPUs; --device cpu --gpus N runs N CPU ranks (TCP). */
static UNUSED void train_dist_default_device(const train_dist_options *o, int argc, char **argv,
                                             const char **device)
{
    if (o->gpus > 0 && !argv_names_device(argc, argv)) *device = "cuda";
}

static UNUSED double env_seconds(const char *name, double fallback)
{
    const char *v = getenv(name);
    char *end = NULL;
    double x = v ? strtod(v, &end) : 0.0;
    return v && *v && end && !*end && x > 0.0 ? x : fallback;
}

/*
 * Returns -1 to go on training, with *dist set when this process is one rank of a distributed
 * run (NULL otherwise); or the exit code main should return: the launcher's (every rank has
 * ended) or 1 / 2 for a failure, with a message printed.
 */
static UNUSED int train_dist_start(const train_dist_options *o, int argc, char **argv,
                                   snn_device device, snn_dist **dist)
{
    *dist = NULL;
    if (o->gpus > 0 && (getenv("WORLD_SIZE") || o->init)) {
        fprintf(stderr, "snn-train: --gpus starts the ranks itself, but this process was given "
                "%s; drop --gpus (a launcher started it) or those\n",
                o->init ? "--init" : "WORLD_SIZE");
        return 2;
    }
    snn_dist_env env;
    if (snn_dist_env_read(NULL, NULL, o->init, &env) != SNN_OK) {
        fprintf(stderr, "snn-train: %s\n", snn_last_error());
        return 2;
    }
    if (o->gpus > 0) {
        fprintf(stderr, "snn-train: starting %d rank(s) on this host, one per %s\n", o->gpus,
                device == SNN_CUDA ? "GPU" : "process (CPU, tcp backend)");
        /* A rank runs with this command line less --gpus N, so it would not see the device that
         * --gpus implied (train_dist_default_device) and would take the default, the CPU: say
         * the resolved device explicitly when the user did not. */
        const bool has_device = argv_names_device(argc, argv);
        char **rank_argv = malloc(((size_t)argc + 3) * sizeof *rank_argv);
        if (!rank_argv) {
            fprintf(stderr, "snn-train: out of memory\n");
            return 1;
        }
        int n = 0;
        for (int a = 0; a < argc; a++) rank_argv[n++] = argv[a];
        if (!has_device) {
            rank_argv[n++] = "--device";
            rank_argv[n++] = device == SNN_CUDA ? "cuda" : "cpu";
        }
        rank_argv[n] = NULL;
        int code = snn_dist_launch(o->gpus, n, rank_argv, "--gpus");
        free(rank_argv);
        return code;
    }
    if (env.world_size == 0) return -1;
    snn_dist_config c = snn_dist_config_default();
    c.rank = env.rank;
    c.world_size = env.world_size;
    c.local_rank = env.local_rank;
    c.init = env.init;
    c.device = device;
    c.sync_batchnorm = o->sync_bn;
    c.timeout_s = env_seconds("SNN_DIST_TIMEOUT", c.timeout_s);
    *dist = snn_dist_new(&c);
    if (!*dist) {
        fprintf(stderr, "snn-train: rank %d: %s\n", env.rank, snn_last_error());
        return 1;
    }
    if (env.rank == 0)
        fprintf(stderr, "snn-train: rank 0 of %d (%s backend; ranks from %s, rendezvous %s)%s\n",
                env.world_size, snn_dist_backend(*dist), env.source, env.init,
                o->sync_bn ? ", batch-norm statistics synced" : "");
    return -1;
}

static UNUSED bool train_dist_rank0(const snn_dist *d) { return snn_dist_rank(d) == 0; }

/* Each rank's loader reads its shard of every global batch (data.h, snn_shard_slice). */
static UNUSED void train_dist_shard(const snn_dist *d, snn_loader_config *lc)
{
    lc->shard = snn_dist_rank(d);
    lc->shards = snn_dist_world_size(d);
}

/* This rank's contiguous part of an evaluation set (the parts' sums make the whole's). */
static UNUSED void train_dist_slice(const snn_dist *d, snn_dataset *ds)
{
    const int64_t r = snn_dist_rank(d), w = snn_dist_world_size(d);
    const int64_t begin = r * ds->count / w, end = (r + 1) * ds->count / w;
    ds->images += begin * snn_dataset_image_bytes(ds);
    ds->labels += begin;
    ds->count = end - begin;
}

/* Turns this rank's loss (mean over count samples) and correct count into the global batch's,
 * and *stop (this rank's: a signal came) into "some rank was asked to stop", so that every rank
 * stops after the same step. Every rank calls it at the same steps. */
static UNUSED snn_status train_dist_read(snn_dist *d, float *loss, int64_t *correct,
                                         int64_t *count, bool *stop)
{
    if (!d) return SNN_OK;
    double v[4] = {(double)*loss * (double)*count, (double)*correct, (double)*count,
                   *stop ? 1.0 : 0.0};
    snn_status st = snn_dist_allreduce_host(d, v, 4);
    if (st != SNN_OK) return st;
    *loss = (float)(v[0] / v[2]);
    *correct = (int64_t)v[1];
    *count = (int64_t)v[2];
    *stop = v[3] > 0.0;
    return SNN_OK;
}

/* *stop <- whether any rank was asked to stop (`local`: this one was; run_signals.h), so that
 * the ranks stop at the same point; *stop = local without a data-parallel run. Every rank calls
 * it at the same points. */
static UNUSED snn_status train_dist_stop(snn_dist *d, bool local, bool *stop)
{
    *stop = local;
    if (!d) return SNN_OK;
    double v = local ? 1.0 : 0.0;
    snn_status st = snn_dist_allreduce_host(d, &v, 1);
    if (st == SNN_OK) *stop = v > 0.0;
    return st;
}

/* After each optimizer step: with SNN_DIST_VERIFY=1, checks that every rank holds the same
 * parameters (the multigpu tests set it; it copies the model to the host every step).
 * SNN_DIST_KILL=R:S[:TERM] is a test hook: rank R kills itself (SIGKILL) after its S-th step in
 * this run, so that tests can watch the other ranks stop; with ":TERM" it sends itself SIGTERM
 * instead, a stop request that only this rank saw. */
static UNUSED snn_status train_dist_after_step(snn_dist *d, snn_module *model)
{
    static int verify = -1, kill_rank = -1, kill_step = -1, kill_signal = SIGKILL, steps = 0;
    if (!d) return SNN_OK;
    if (verify < 0) {
        const char *v = getenv("SNN_DIST_VERIFY"), *k = getenv("SNN_DIST_KILL");
        verify = v && *v && strcmp(v, "0") != 0;
        char how[8] = "";
        int fields = k ? sscanf(k, "%d:%d:%7s", &kill_rank, &kill_step, how) : 0;
        if (fields < 2) kill_rank = -1;
        if (fields == 3 && strcmp(how, "TERM") == 0) kill_signal = SIGTERM;
    }
    if (++steps == kill_step && snn_dist_rank(d) == kill_rank) {
        fprintf(stderr, "snn-train: rank %d: sending itself %s after step %d (SNN_DIST_KILL)\n",
                kill_rank, kill_signal == SIGTERM ? "SIGTERM" : "SIGKILL", steps);
        fflush(stderr);
        raise(kill_signal);
    }
    return verify ? snn_dist_check_replicas(d, model) : SNN_OK;
}

/* Before evaluating at the end of an epoch: the replicas must still agree, and rank 0's
 * batch-norm running statistics become everyone's (they differ with per-rank statistics), so
 * that the sharded evaluation and the checkpoint are rank 0's model. `average` (--ema's
 * averaged model, or NULL) gets rank 0's too: each rank averaged its own statistics. */
static UNUSED snn_status train_dist_epoch_end(snn_dist *d, snn_module *model, snn_module *average)
{
    if (!d) return SNN_OK;
    snn_status st = snn_dist_check_replicas(d, model);
    if (st == SNN_OK) st = snn_dist_broadcast_buffers(d, model);
    if (st == SNN_OK && average) st = snn_dist_broadcast_buffers(d, average);
    return st;
}

/* Sums the ranks' evaluation results. */
static UNUSED snn_status train_dist_eval(snn_dist *d, eval_result *ev)
{
    if (!d) return SNN_OK;
    enum { N = 3 + 2 * MAX_LAYERS };
    double v[N];
    const int L = ev->n_layers;
    v[0] = (double)ev->correct, v[1] = (double)ev->total, v[2] = ev->loss_sum;
    for (int l = 0; l < L; l++) v[3 + l] = ev->spikes[l], v[3 + L + l] = ev->elements[l];
    snn_status st = snn_dist_allreduce_host(d, v, 3 + 2 * L);
    if (st != SNN_OK) return st;
    ev->correct = (int64_t)v[0], ev->total = (int64_t)v[1], ev->loss_sum = v[2];
    for (int l = 0; l < L; l++) ev->spikes[l] = v[3 + l], ev->elements[l] = v[3 + L + l];
    return SNN_OK;
}

/* The end of a rank: in order (waits for every rank) when every rank ends alike (success, a
 * diverged loss, which all ranks read together); at once after a failure of this rank (exit
 * code 1), so that the others see it leave and stop. */
static UNUSED void train_dist_end(snn_dist *d, int exit_code)
{
    if (exit_code != 1) snn_dist_free(d);
    else snn_dist_abort(d);
}

#endif /* SNN_EXAMPLES_DIST_H */
