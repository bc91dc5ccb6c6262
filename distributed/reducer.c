/*
 * reducer.c - the gradient side of data-parallel training: one contiguous gradient buffer for
 * the whole model, cut into buckets (buckets.c), each summed over the ranks as soon as the
 * backward pass is done with it.
 *
 *   attach     every trainable parameter's .grad becomes a view of the buffer, at the offset
 *              the bucket plan gives it; rank 0's parameters and buffers are copied to all
 *   backward   the backward runs with autograd's gradient-ready hook (autograd.h): each call
 *              counts one parameter of its bucket as done, and when the lowest bucket not yet
 *              sent has all its parameters, it and any complete ones after it are sent, in
 *              index order, on the backend's side stream (NCCL overlaps them with the rest of
 *              the backward); buckets left over (parameters the loss did not reach) go at the
 *              end; finally the device's next work waits for all of them
 *
 * The loss is seeded with count / global_count instead of 1, so the summed gradient is the
 * gradient of the mean over the global batch, also when the last batch splits unevenly.
 * Every rank sends the same buckets in the same order, because every rank runs the same graph.
 *
 * Memory: one buffer of the model's parameter count (+ alignment) in floats, as before (the
 * per-parameter gradients it replaces are gone); nothing else per step.
 *
 * Test: tests/test_dist.c (CPU, forked ranks), tests/test_multigpu_train.c (NCCL).
 */
#include <string.h>

#include "dist_internal.h"
#include "tensor/error.h"
#include "kernels/kernels.h"

/* Gradients start on 256-byte boundaries (64 floats): whole cache lines and DMA segments. */
#define GRAD_ALIGN 64

struct snn_reducer {
    snn_dist *d;
    snn_module *model;
    int n_train;
    snn_tensor **train;        /* (n_train) trainable parameters, in the model's order */
    snn_bucket_plan plan;
    snn_tensor *buffer;        /* (plan.total) the gradients, OWNED */
    int *pending;              /* (n_buckets) parameters each bucket still waits for */
    int next;                  /* the lowest bucket not yet sent */
    snn_status failed;         /* the first failure inside the hook */
};

static snn_status send_bucket(snn_reducer *r, int b)
{
    const int64_t begin = r->plan.bucket_begin[b], end = r->plan.bucket_begin[b + 1];
    if (end <= begin) return SNN_OK;
    return r->d->backend->allreduce_side(r->d->comm, r->buffer->data + begin, (size_t)(end - begin));
}

/* autograd's gradient-ready hook */
static void on_ready(void *ctx, snn_tensor *param)
{
    snn_reducer *r = ctx;
    int i = 0;
    while (i < r->n_train && r->train[i] != param) i++;
    if (i == r->n_train || r->failed != SNN_OK) return; /* not ours (another model's tensor) */
    r->pending[r->plan.bucket[i]]--;
    while (r->next < r->plan.n_buckets && r->pending[r->next] == 0) {
        if (send_bucket(r, r->next) != SNN_OK) {
            r->failed = snn_last_status();
            return;
        }
        r->next++;
    }
}

void snn_reducer_free(snn_reducer *r)
{
    if (!r) return;
    snn_free(r->pending, (size_t)(r->plan.n_buckets > 0 ? r->plan.n_buckets : 1) * sizeof *r->pending,
             SNN_CPU);
    snn_bucket_plan_free(&r->plan);
    snn_tensor_free(r->buffer);
    snn_free(r->train, (size_t)(r->n_train > 0 ? r->n_train : 1) * sizeof *r->train, SNN_CPU);
    snn_free(r, sizeof *r, SNN_CPU);
}

snn_reducer *snn_reducer_new(snn_dist *d, snn_module *model)
{
    const char *fn = "snn_dist_attach";
    snn_param_list list;
    if (snn_module_parameters(model, &list) != SNN_OK) return NULL;
    snn_reducer *r = snn_alloc(sizeof *r, SNN_CPU);
    if (!r) {
        snn_param_list_free(&list);
        return snn_error_null(SNN_ERR_MEMORY, "%s: out of host memory", fn);
    }
    memset(r, 0, sizeof *r);
    r->d = d;
    r->model = model;
    snn_status st = SNN_OK;
    for (int i = 0; i < list.count; i++) {
        snn_tensor *t = list.items[i].tensor;
        if (t->device != d->config.device)
            st = snn_error(SNN_ERR_ARGUMENT, "%s: '%s' is on %s, the group runs on %s; hint: "
                           "snn_module_to(model, device) first", fn, list.items[i].name,
                           snn_device_name(t->device), snn_device_name(d->config.device));
        if (list.items[i].trainable) r->n_train++;
    }
    int64_t *numel = NULL;
    const size_t n_alloc = (size_t)(r->n_train > 0 ? r->n_train : 1);
    if (st == SNN_OK) {
        r->train = snn_alloc(n_alloc * sizeof *r->train, SNN_CPU);
        numel = snn_alloc(n_alloc * sizeof *numel, SNN_CPU);
        if (!r->train || !numel) st = snn_error(SNN_ERR_MEMORY, "%s: out of host memory", fn);
    }
    if (st == SNN_OK) {
        int k = 0;
        for (int i = 0; i < list.count; i++)
            if (list.items[i].trainable) {
                r->train[k] = list.items[i].tensor;
                numel[k++] = list.items[i].tensor->numel;
            }
        size_t bucket_floats = d->config.bucket_bytes / sizeof(float);
        st = snn_bucket_plan_make(numel, r->n_train, bucket_floats > 0 ? (int64_t)bucket_floats : 1,
                                  GRAD_ALIGN, &r->plan);
    }
    snn_free(numel, n_alloc * sizeof *numel, SNN_CPU);
    if (st == SNN_OK) {
        r->pending = snn_alloc((size_t)(r->plan.n_buckets > 0 ? r->plan.n_buckets : 1) *
                               sizeof *r->pending, SNN_CPU);
        r->buffer = r->pending ? snn_tensor_new(SNN_SHAPE(r->plan.total > 0 ? r->plan.total : 1),
                                                d->config.device) : NULL;
        if (!r->buffer) st = snn_last_status() != SNN_OK ? snn_last_status() : SNN_ERR_MEMORY;
    }
    for (int i = 0; i < r->n_train && st == SNN_OK; i++)
        st = snn_tensor_set_grad_view(r->train[i], r->buffer, r->plan.offset[i]);
    /* one starting point for all: rank 0's parameters and buffers, in the model's order */
    for (int i = 0; i < list.count && st == SNN_OK; i++) {
        snn_tensor *t = list.items[i].tensor;
        st = d->backend->broadcast(d->comm, t->data, (size_t)t->numel, SNN_COMM_FLOAT);
    }
    snn_param_list_free(&list);
    if (st != SNN_OK) {
        /* gradients that became views of the buffer go back to none before it goes */
        for (int i = 0; i < r->n_train && r->train; i++)
            if (r->train[i]->grad && r->train[i]->grad->base == r->buffer) {
                snn_tensor_free(r->train[i]->grad);
                r->train[i]->grad = NULL;
            }
        snn_reducer_free(r);
        return NULL;
    }
    return r;
}

snn_status snn_reducer_backward(snn_reducer *r, snn_tensor *loss, float weight)
{
    for (int b = 0; b < r->plan.n_buckets; b++) r->pending[b] = r->plan.bucket_params[b];
    r->next = 0;
    r->failed = SNN_OK;
    snn_tensor *seed = snn_full(loss->shape, weight, loss->device);
    if (!seed) return snn_last_status();
    snn_backward_set_hook(on_ready, r);
    snn_status st = snn_backward_from(loss, seed);
    snn_backward_set_hook(NULL, NULL);
    if (st != SNN_OK) return st;
    if (r->failed != SNN_OK) return r->failed;
    /* buckets whose parameters the backward never reached (their gradients are what zero_grad
     * left), in order */
    for (; r->next < r->plan.n_buckets; r->next++) {
        st = send_bucket(r, r->next);
        if (st != SNN_OK) return st;
    }
    return r->d->backend->join_side(r->d->comm);
}
