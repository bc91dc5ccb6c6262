/*
 * env.c - who this process is in a distributed run, read from the environment the way the
 * launchers users already know set it, and the rendezvous address (see dist.h and
 * docs/distributed.md, "Launching").
 *
 *   torchrun, snn-train --gpus   RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR/PORT
 *   Open MPI (mpirun)            OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE
 *   MPICH, Intel MPI             PMI_RANK, PMI_SIZE, MPI_LOCALRANKID, MPI_LOCALNRANKS
 *   Slurm (srun)                 SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID
 *
 * Test: tests/test_dist.c (ctest -R dist) feeds made-up environments through the getter.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist.h"
#include "tensor/error.h"

static const char *plain_getenv(const char *name, void *ctx)
{
    (void)ctx;
    return getenv(name);
}

/* Parses variable `name` as an integer in [lo, hi]. 0: absent (*out untouched), 1: read,
 * -1: present but bad (message set). */
static int read_int(snn_getenv_fn get, void *ctx, const char *name, long lo, long hi, int *out)
{
    const char *v = get(name, ctx);
    if (!v) return 0;
    char *end = NULL;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (*v == '\0' || *end != '\0' || errno || x < lo || x > hi) {
        snn_error(SNN_ERR_ARGUMENT, "snn_dist_env_read: bad environment variable %s='%s' "
                  "(expected an integer in %ld..%ld)", name, v, lo, hi);
        return -1;
    }
    *out = (int)x;
    return 1;
}

/* One launcher's names: rank, size, local rank, local size. */
typedef struct env_names {
    const char *source, *rank, *size, *local_rank, *local_size;
} env_names;

static const env_names launchers[] = {
    {"RANK/WORLD_SIZE", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
    {"Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE"},
    {"PMI (MPICH)", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
    {"Slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"},
};

snn_status snn_dist_env_read(snn_getenv_fn get, void *ctx, const char *init_flag,
                             snn_dist_env *out)
{
    const char *fn = "snn_dist_env_read";
    memset(out, 0, sizeof *out);
    if (!get) get = plain_getenv;
    bool wanted = get("WORLD_SIZE", ctx) != NULL || (init_flag && *init_flag);
    if (!wanted) return SNN_OK;

    const env_names *found = NULL;
    for (size_t i = 0; i < sizeof launchers / sizeof launchers[0] && !found; i++)
        if (get(launchers[i].rank, ctx) && get(launchers[i].size, ctx)) found = &launchers[i];
    if (!found)
        return snn_error(SNN_ERR_ARGUMENT, "%s: a distributed run (--init or WORLD_SIZE given) "
                         "needs this process's rank and the world size; hint: set RANK and "
                         "WORLD_SIZE (torchrun does), or run under mpirun or srun, or use "
                         "snn-train --gpus N on one host", fn);
    int rank = -1, world = 0;
    if (read_int(get, ctx, found->size, 1, 1 << 20, &world) < 0 ||
        read_int(get, ctx, found->rank, 0, INT_MAX, &rank) < 0)
        return snn_last_status();
    if (rank >= world)
        return snn_error(SNN_ERR_ARGUMENT, "%s: %s=%d is out of range for %s=%d (expected "
                         "0..%d)", fn, found->rank, rank, found->size, world, world - 1);
    out->rank = rank;
    out->world_size = world;
    out->local_rank = rank;
    out->local_world_size = world;
    /* Slurm's SLURM_NTASKS_PER_NODE may read "4(x2)": only a plain number is used */
    const char *ls = get(found->local_size, ctx);
    if (read_int(get, ctx, found->local_rank, 0, INT_MAX, &out->local_rank) < 0) return snn_last_status();
    if (ls && strspn(ls, "0123456789") == strlen(ls) &&
        read_int(get, ctx, found->local_size, 1, 1 << 20, &out->local_world_size) < 0)
        return snn_last_status();
    snprintf(out->source, sizeof out->source, "%s", found->source);

    const char *init = init_flag && *init_flag ? init_flag : get("SNN_DIST_INIT", ctx);
    const char *addr = get("MASTER_ADDR", ctx), *port = get("MASTER_PORT", ctx);
    if (init && *init) {
        snprintf(out->init, sizeof out->init, "%s", init);
    } else if (addr && port) {
        snprintf(out->init, sizeof out->init, "tcp://%s:%s", addr, port);
    } else if (world > 1) {
        return snn_error(SNN_ERR_ARGUMENT, "%s: rank %d of %d has no rendezvous; hint: pass "
                         "--init tcp://HOST:PORT (HOST: where rank 0 runs) or --init file:PATH "
                         "(a path on a file system every rank sees), or set MASTER_ADDR and "
                         "MASTER_PORT", fn, rank, world);
    } else {
        /* one rank has nobody to meet: a loopback address it will not need to reach */
        snprintf(out->init, sizeof out->init, "tcp://127.0.0.1:0");
    }
    snn_dist_init check;
    return snn_dist_init_parse(out->init, &check);
}

snn_status snn_dist_init_parse(const char *text, snn_dist_init *out)
{
    const char *fn = "snn_dist_init_parse";
    memset(out, 0, sizeof *out);
    if (!text) return snn_error(SNN_ERR_ARGUMENT, "%s: bad rendezvous (got NULL)", fn);
    if (strncmp(text, "file:", 5) == 0) {
        const char *path = text + 5;
        if (strncmp(path, "//", 2) == 0) path += 2;
        if (!*path || strlen(path) >= sizeof out->path)
            return snn_error(SNN_ERR_ARGUMENT, "%s: bad rendezvous '%s' (expected file:PATH with a "
                             "path of 1..%zu characters)", fn, text, sizeof out->path - 1);
        out->kind = SNN_DIST_INIT_FILE;
        snprintf(out->path, sizeof out->path, "%s", path);
        return SNN_OK;
    }
    if (strncmp(text, "tcp://", 6) == 0) {
        const char *hp = text + 6, *colon;
        size_t host_len;
        if (*hp == '[') { /* [v6 address]:port */
            const char *close = strchr(hp, ']');
            if (!close || close[1] != ':') goto bad_tcp;
            hp++;
            host_len = (size_t)(close - hp);
            colon = close + 1;
        } else {
            colon = strrchr(hp, ':');
            if (!colon) goto bad_tcp;
            host_len = (size_t)(colon - hp);
        }
        if (host_len == 0 || host_len >= sizeof out->host) goto bad_tcp;
        char *end = NULL;
        errno = 0;
        long port = strtol(colon + 1, &end, 10);
        if (colon[1] == '\0' || *end != '\0' || errno || port < 0 || port > 65535) goto bad_tcp;
        out->kind = SNN_DIST_INIT_TCP;
        memcpy(out->host, hp, host_len);
        out->host[host_len] = '\0';
        out->port = (int)port;
        return SNN_OK;
    }
bad_tcp:
    return snn_error(SNN_ERR_ARGUMENT, "%s: bad rendezvous '%s' (expected tcp://HOST:PORT with a "
                     "port in 0..65535, or file:PATH)", fn, text);
}
