/*
 * comm.c - the process group: picks the communicator backend, runs the rendezvous, and
 * implements dist.h's group functions on top of the backend table (dist_internal.h).
 *
 * The one file of distributed/ that knows whether this build has NCCL (one #ifdef per folder, as
 * tensor/dispatch.c: docs/architecture.md, "Kernels and devices"): CUDA tensors go
 * through NCCL (comm_nccl.c), CPU tensors through the TCP backend (comm_tcp.c). A CUDA group
 * in a build without NCCL is a clear error.
 *
 * Test: tests/test_dist.c (ctest -R dist), tests/test_multigpu_train.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist_internal.h"
#include "tensor/error.h"
#include "kernels/kernels.h"

snn_dist_config snn_dist_config_default(void)
{
    snn_dist_config c;
    memset(&c, 0, sizeof c);
    c.world_size = 1;
    c.device = SNN_CPU;
    c.timeout_s = 300.0;
    c.bucket_bytes = (size_t)25 << 20;
    return c;
}

static const snn_comm_backend *backend_for(snn_device device)
{
    if (device == SNN_CPU) return &snn_comm_tcp;
#ifdef SNN_WITH_NCCL
    return &snn_comm_nccl;
#else
    return NULL;
#endif
}

bool snn_dist_nccl_compiled(void)
{
#ifdef SNN_WITH_NCCL
    return true;
#else
    return false;
#endif
}

/* ---- batch-norm sync callbacks (autograd.h) ------------------------------------------------ */

static snn_status bn_allgather(void *ctx, double *recv, const double *send, int64_t n)
{
    snn_dist *d = ctx;
    return d->backend->allgather(d->comm, recv, send, (size_t)n, SNN_COMM_DOUBLE);
}

static snn_status bn_allreduce(void *ctx, double *buf, int64_t n)
{
    snn_dist *d = ctx;
    return d->backend->allreduce_sum(d->comm, buf, (size_t)n, SNN_COMM_DOUBLE);
}

/* ---- the group ------------------------------------------------------------------------------ */

snn_dist *snn_dist_new(const snn_dist_config *config)
{
    const char *fn = "snn_dist_new";
    if (!config) return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument 'config' (got NULL)", fn);
    const snn_dist_config *c = config;
    if (c->world_size < 1 || c->rank < 0 || c->rank >= c->world_size || c->local_rank < 0)
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad rank %d / world size %d / local rank %d "
                              "(expected 0 <= rank < world size, local rank >= 0)", fn, c->rank,
                              c->world_size, c->local_rank);
    if (!(c->timeout_s > 0.0))
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument 'timeout_s' (expected > 0, got "
                              "%g)", fn, c->timeout_s);
    const snn_comm_backend *backend = backend_for(c->device);
    if (!backend)
        return snn_error_null(SNN_ERR_UNSUPPORTED, "%s: this build has no NCCL, so it cannot train "
                              "on several GPUs; hint: install NCCL (libnccl-dev, or the one under "
                              "the CUDA toolkit) and configure again with -DSNN_NCCL=ON", fn);
    snn_dist_init init;
    if (snn_dist_init_parse(c->init ? c->init : "tcp://127.0.0.1:0", &init) != SNN_OK) return NULL;

    snn_dist *d = snn_alloc(sizeof *d, SNN_CPU);
    if (!d) return snn_error_null(SNN_ERR_MEMORY, "%s: out of host memory", fn);
    memset(d, 0, sizeof *d);
    d->config = *c;
    d->config.init = NULL; /* the caller's string need not outlive the group */
    d->backend = backend;

    unsigned char id[512];
    SNN_ASSERT(backend->id_bytes <= sizeof id);
    memset(id, 0, sizeof id);
    snn_status st = SNN_OK;
    if (c->rank == 0 && backend->make_id) st = backend->make_id(id, c->local_rank);
    snn_dist_link *link = NULL;
    if (st == SNN_OK)
        st = snn_dist_rendezvous(&init, c->rank, c->world_size, c->timeout_s, id,
                                 backend->id_bytes, &link);
    if (st == SNN_OK) {
        d->comm = backend->open(id, link, c->rank, c->world_size, c->local_rank, c->timeout_s);
        if (!d->comm) st = snn_last_status();
    }
    if (st != SNN_OK) {
        snn_free(d, sizeof *d, SNN_CPU);
        return NULL;
    }
    d->bn_sync = (snn_batchnorm_sync){d, c->world_size, bn_allgather, bn_allreduce};
    return d;
}

static void release(snn_dist *d)
{
    snn_backward_set_hook(NULL, NULL);
    if (d->config.sync_batchnorm) snn_batchnorm_set_sync(NULL);
    snn_reducer_free(d->reducer);
    snn_free(d->staging, d->staging_bytes, d->backend->device);
    snn_free(d, sizeof *d, SNN_CPU);
}

void snn_dist_free(snn_dist *d)
{
    if (!d) return;
    d->backend->close(d->comm);
    release(d);
}

void snn_dist_abort(snn_dist *d)
{
    if (!d) return;
    d->backend->abort(d->comm);
    release(d);
}

int snn_dist_rank(const snn_dist *d) { return d ? d->config.rank : 0; }
int snn_dist_world_size(const snn_dist *d) { return d ? d->config.world_size : 1; }
const char *snn_dist_backend(const snn_dist *d) { return d ? d->backend->name : "none"; }

snn_status snn_dist_attach(snn_dist *d, snn_module *model)
{
    const char *fn = "snn_dist_attach";
    if (!d || !model)
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad arguments (got NULL)", fn);
    if (d->reducer)
        return snn_error(SNN_ERR_STATE, "%s: a model is attached already (one per group)", fn);
    d->reducer = snn_reducer_new(d, model);
    if (!d->reducer) return snn_last_status();
    if (d->config.sync_batchnorm) snn_batchnorm_set_sync(&d->bn_sync);
    return SNN_OK;
}

snn_status snn_dist_backward(snn_dist *d, snn_tensor *loss, int count, int global_count)
{
    const char *fn = "snn_dist_backward";
    if (!d || !d->reducer)
        return snn_error(SNN_ERR_STATE, "%s: no model attached; hint: snn_dist_attach first", fn);
    if (snn_check_tensor(fn, "loss", loss)) return snn_last_status();
    if (count < 1 || global_count < count)
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad counts (expected 1 <= count <= global_count, "
                         "got %d and %d)", fn, count, global_count);
    return snn_reducer_backward(d->reducer, loss, (float)((double)count / (double)global_count));
}

/* A collective on host memory: staged through device memory for a device backend. */
static snn_status host_collective(snn_dist *d, bool gather, void *recv, const void *send,
                                  size_t count, snn_comm_type t)
{
    const size_t in_bytes = count * snn_comm_type_size(t);
    const size_t out_bytes = gather ? in_bytes * (size_t)d->config.world_size : in_bytes;
    if (d->backend->device == SNN_CPU)
        return gather ? d->backend->allgather(d->comm, recv, send, count, t)
                      : d->backend->allreduce_sum(d->comm, recv, count, t);
    const snn_kernels *k = snn_kernels_for(d->backend->device);
    const size_t need = out_bytes + in_bytes;
    if (need > d->staging_bytes) { /* grows rarely: the loss read and evaluation sizes repeat */
        snn_synchronize(d->backend->device);
        snn_free(d->staging, d->staging_bytes, d->backend->device);
        d->staging_bytes = need > 4096 ? need : 4096;
        d->staging = snn_alloc(d->staging_bytes, d->backend->device);
        if (!d->staging) {
            d->staging_bytes = 0;
            return snn_error(SNN_ERR_MEMORY, "snn_dist: out of device memory for %zu bytes", need);
        }
    }
    char *dev = d->staging;
    char *dev_in = gather ? dev + out_bytes : dev;
    k->copy(dev_in, send, in_bytes, SNN_COPY_HOST_TO_DEVICE);
    snn_status st = gather ? d->backend->allgather(d->comm, dev, dev_in, count, t)
                           : d->backend->allreduce_sum(d->comm, dev, count, t);
    if (st == SNN_OK) k->copy(recv, dev, out_bytes, SNN_COPY_DEVICE_TO_HOST); /* waits */
    return st;
}

snn_status snn_dist_allreduce_host(snn_dist *d, double *values, int n)
{
    if (!d || !values || n < 0)
        return snn_error(SNN_ERR_ARGUMENT, "snn_dist_allreduce_host: bad arguments");
    if (n == 0) return SNN_OK;
    return host_collective(d, false, values, values, (size_t)n, SNN_COMM_DOUBLE);
}

snn_status snn_dist_allreduce(snn_dist *d, float *buf, int64_t n)
{
    if (!d || !buf || n < 0) return snn_error(SNN_ERR_ARGUMENT, "snn_dist_allreduce: bad arguments");
    return d->backend->allreduce_sum(d->comm, buf, (size_t)n, SNN_COMM_FLOAT);
}

snn_status snn_dist_broadcast_buffers(snn_dist *d, snn_module *model)
{
    snn_param_list list;
    if (!d) return snn_error(SNN_ERR_ARGUMENT, "snn_dist_broadcast_buffers: bad argument (NULL)");
    if (snn_module_parameters(model, &list) != SNN_OK) return snn_last_status();
    snn_status st = SNN_OK;
    for (int i = 0; i < list.count && st == SNN_OK; i++) {
        snn_tensor *t = list.items[i].tensor;
        if (!list.items[i].trainable)
            st = d->backend->broadcast(d->comm, t->data, (size_t)t->numel, SNN_COMM_FLOAT);
    }
    snn_param_list_free(&list);
    return st;
}

/* FNV-1a, 64 bits, over bytes: a fingerprint, not a cryptographic hash. */
static uint64_t fnv1a(uint64_t h, const void *p, size_t n)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++) h = (h ^ c[i]) * 0x100000001b3ull;
    return h;
}

snn_status snn_dist_check_replicas(snn_dist *d, snn_module *model)
{
    const char *fn = "snn_dist_check_replicas";
    snn_param_list list;
    if (!d) return snn_error(SNN_ERR_ARGUMENT, "%s: bad argument (NULL)", fn);
    if (snn_module_parameters(model, &list) != SNN_OK) return snn_last_status();
    uint64_t hash = 0xcbf29ce484222325ull;
    float *host = NULL;
    size_t cap = 0;
    snn_status st = SNN_OK;
    for (int i = 0; i < list.count && st == SNN_OK; i++) {
        snn_tensor *t = list.items[i].tensor;
        if (!list.items[i].trainable) continue;
        const size_t bytes = (size_t)t->numel * sizeof(float);
        if (bytes > cap) {
            snn_free(host, cap, SNN_CPU);
            host = snn_alloc(bytes, SNN_CPU);
            cap = host ? bytes : 0;
            if (!host) st = snn_error(SNN_ERR_MEMORY, "%s: out of host memory", fn);
        }
        if (st == SNN_OK) st = snn_tensor_copy_to_host(t, host);
        if (st == SNN_OK) hash = fnv1a(hash, host, bytes);
    }
    snn_free(host, cap, SNN_CPU);
    snn_param_list_free(&list);
    if (st != SNN_OK) return st;
    const int world = d->config.world_size;
    uint64_t *all = snn_alloc((size_t)world * sizeof *all, SNN_CPU);
    if (!all) return snn_error(SNN_ERR_MEMORY, "%s: out of host memory", fn);
    st = host_collective(d, true, all, &hash, sizeof hash, SNN_COMM_BYTE);
    for (int r = 1; r < world && st == SNN_OK; r++)
        if (all[r] != all[0])
            st = snn_error(SNN_ERR_STATE, "%s: the parameters of rank %d differ from rank 0's "
                           "(hash %016llx vs %016llx): the replicas drifted apart", fn, r,
                           (unsigned long long)all[r], (unsigned long long)all[0]);
    snn_free(all, (size_t)world * sizeof *all, SNN_CPU);
    return st;
}

double snn_dist_exposed_ms(snn_dist *d)
{
    return d && d->backend->exposed_ms ? d->backend->exposed_ms(d->comm) : -1.0;
}
