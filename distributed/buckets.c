/*
 * buckets.c - where each parameter's gradient goes in the one gradient buffer, and how the
 * buffer is cut into the buckets that are all-reduced while the backward pass runs.
 *
 * Why buckets: one all-reduce per parameter (62 for a ResNet-18) pays NCCL's launch and
 * latency cost 62 times, and one all-reduce of the whole buffer cannot start before the
 * backward pass ends. A few buckets of ~25 MiB (PyTorch DDP's default) start as soon as the
 * backward has finished with their parameters, so their transfer hides behind the backward of
 * the earlier layers.
 *
 * Why reverse order: the backward pass finishes the last layer's gradients first. Laid out from
 * the last parameter to the first, the gradients fill the buffer from its start, bucket 0 is
 * ready first, and the buckets are launched in index order, which every rank agrees on (NCCL
 * needs the same order of collectives on every rank).
 *
 * Test: tests/test_dist.c (ctest -R dist).
 */
#include <string.h>

#include "dist.h"
#include "tensor/error.h"

/* Arrays hold at least one element, so a plan of zero parameters is still a valid plan. */
static size_t cap(int n) { return (size_t)(n > 0 ? n : 1); }

void snn_bucket_plan_free(snn_bucket_plan *p)
{
    if (!p) return;
    const size_t n = cap(p->n_params);
    snn_free(p->offset, n * sizeof *p->offset, SNN_CPU);
    snn_free(p->bucket, n * sizeof *p->bucket, SNN_CPU);
    snn_free(p->bucket_begin, (n + 1) * sizeof *p->bucket_begin, SNN_CPU); /* worst case: one */
    snn_free(p->bucket_params, n * sizeof *p->bucket_params, SNN_CPU);     /* per parameter */
    memset(p, 0, sizeof *p);
}

snn_status snn_bucket_plan_make(const int64_t *numel, int n_params, int64_t bucket_floats,
                                int64_t align, snn_bucket_plan *out)
{
    const char *fn = "snn_bucket_plan_make";
    memset(out, 0, sizeof *out);
    if (n_params < 0 || (n_params > 0 && !numel) || bucket_floats < 1 || align < 1)
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad arguments (expected n_params >= 0, "
                         "bucket_floats >= 1, align >= 1; got %d, %lld, %lld)", fn, n_params,
                         (long long)bucket_floats, (long long)align);
    for (int i = 0; i < n_params; i++)
        if (numel[i] < 0)
            return snn_error(SNN_ERR_ARGUMENT, "%s: bad argument 'numel[%d]' (expected >= 0, got "
                             "%lld)", fn, i, (long long)numel[i]);
    out->n_params = n_params;
    const size_t n = cap(n_params);
    out->offset = snn_alloc(n * sizeof *out->offset, SNN_CPU);
    out->bucket = snn_alloc(n * sizeof *out->bucket, SNN_CPU);
    out->bucket_begin = snn_alloc((n + 1) * sizeof *out->bucket_begin, SNN_CPU);
    out->bucket_params = snn_alloc(n * sizeof *out->bucket_params, SNN_CPU);
    if (!out->offset || !out->bucket || !out->bucket_begin || !out->bucket_params) {
        snn_bucket_plan_free(out);
        return snn_error(SNN_ERR_MEMORY, "%s: out of host memory", fn);
    }
    int64_t at = 0, bucket_start = 0;
    int b = 0;
    out->bucket_begin[0] = 0;
    for (int i = n_params - 1; i >= 0; i--) {
        at = (at + align - 1) / align * align;
        out->offset[i] = at;
        out->bucket[i] = b;
        at += numel[i];
        /* close the bucket once it holds enough, unless this is the last gradient */
        if (at - bucket_start >= bucket_floats && i > 0) {
            at = (at + align - 1) / align * align;
            out->bucket_begin[++b] = at;
            bucket_start = at;
        }
    }
    at = (at + align - 1) / align * align;
    out->n_buckets = n_params > 0 ? b + 1 : 0;
    out->bucket_begin[out->n_buckets] = at;
    out->total = at;
    for (int k = 0; k < out->n_buckets; k++) out->bucket_params[k] = 0;
    for (int i = 0; i < n_params; i++) out->bucket_params[out->bucket[i]]++;
    return SNN_OK;
}
