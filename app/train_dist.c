/*
 * train_dist.c - the data-parallel side of snn-train (train_dist.h): starting a rank or the
 * --gpus launcher, and the collectives that make a rank's loss, stop requests and evaluation
 * the job's.
 */
#include "app/train_dist.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Whether the command line names --device (the options take their value as the next word). */
static bool argv_names_device(int argc, char **argv)
{
    for (int a = 1; a < argc; a++)
        if (strcmp(argv[a], "--device") == 0) return true;
    return false;
}

void train_dist_default_device(const train_dist_options *o, int argc, char **argv,
                               const char **device)
{
    if (o->gpus > 0 && !argv_names_device(argc, argv)) *device = "cuda";
}

/* The environment variable `name` as seconds (> 0), else `fallback`. */
static double env_seconds(const char *name, double fallback)
{
    const char *v = getenv(name);
    char *end = NULL;
    double x = v ? strtod(v, &end) : 0.0;
    return v && *v && end && !*end && x > 0.0 ? x : fallback;
}

int train_dist_planned_ranks(const train_dist_options *o, int *rank)
{
    *rank = 0;
    if (o->gpus > 0) return o->gpus;
    snn_dist_env env;
    if (snn_dist_env_read(NULL, NULL, o->init, &env) != SNN_OK) { /* train_dist_start says why */
        snn_clear_error();
        return 1;
    }
    if (env.world_size == 0) return 1;
    *rank = env.rank;
    return env.world_size;
}

int train_dist_start(const train_dist_options *o, int argc, char **argv, snn_device device,
                     snn_dist **dist)
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

bool train_dist_rank0(const snn_dist *d)
{
    return snn_dist_rank(d) == 0;
}

void train_dist_shard(const snn_dist *d, snn_loader_config *lc)
{
    lc->shard = snn_dist_rank(d);
    lc->shards = snn_dist_world_size(d);
}

void train_dist_slice(const snn_dist *d, snn_dataset *ds)
{
    const int64_t r = snn_dist_rank(d), w = snn_dist_world_size(d);
    const int64_t begin = r * ds->count / w, end = (r + 1) * ds->count / w;
    ds->images += begin * snn_dataset_image_bytes(ds);
    ds->labels += begin;
    ds->count = end - begin;
}

snn_status train_dist_read(snn_dist *d, float *loss, int64_t *correct, int64_t *count,
                           bool *stop)
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

snn_status train_dist_stop(snn_dist *d, bool local, bool *stop)
{
    *stop = local;
    if (!d) return SNN_OK;
    double v = local ? 1.0 : 0.0;
    snn_status st = snn_dist_allreduce_host(d, &v, 1);
    if (st == SNN_OK) *stop = v > 0.0;
    return st;
}

snn_status train_dist_after_step(snn_dist *d, snn_module *model)
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

snn_status train_dist_epoch_end(snn_dist *d, snn_module *model, snn_module *average)
{
    if (!d) return SNN_OK;
    snn_status st = snn_dist_check_replicas(d, model);
    if (st == SNN_OK) st = snn_dist_broadcast_buffers(d, model);
    if (st == SNN_OK && average) st = snn_dist_broadcast_buffers(d, average);
    return st;
}

snn_status train_dist_eval(snn_dist *d, eval_result *ev)
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

void train_dist_end(snn_dist *d, int exit_code)
{
    if (exit_code != 1) snn_dist_free(d);
    else snn_dist_abort(d);
}
