/*
 * layer_misc.c - the small layers that only route data: Flatten, Dropout and the Sequential
 * container (children run in the order they were added).
 */
#include "nn.h"
#include "nn_internal.h"
#include "tensor/error.h"
#include "kernels/kernels.h"

/* ---- Flatten ------------------------------------------------------------------------------ */

static snn_tensor *flatten_forward(snn_module *m, snn_tensor *x)
{
    snn_flatten_impl *f = m->impl;
    return snn_flatten(x, f->start, f->end);
}

const snn_module_ops snn_flatten_ops = {"Flatten", flatten_forward, NULL, NULL};

snn_module *snn_flatten_new(int start, int end)
{
    const snn_flatten_impl f = {start, end};
    return snn_module_new_copy(&snn_flatten_ops, &f, sizeof f);
}

/* ---- Dropout ------------------------------------------------------------------------------ */

static snn_tensor *dropout_forward(snn_module *m, snn_tensor *x)
{
    snn_dropout_impl *d = m->impl;
    if (m->training) d->seed = snn_hash64(d->seed); /* a fresh, reproducible mask per call */
    return snn_dropout_shared(x, d->p, m->training, d->seed, d->shared_dims);
}

const snn_module_ops snn_dropout_ops = {"Dropout", dropout_forward, NULL, NULL};

snn_module *snn_dropout_shared_new(float p, uint64_t seed, int shared_dims)
{
    const char *fn = shared_dims ? "snn_dropout_shared_new" : "snn_dropout_new";
    if (!(p >= 0.0f && p < 1.0f))
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument 'p' (expected 0 <= p < 1, got "
                              "%g)", fn, (double)p);
    if (shared_dims < 0 || shared_dims >= SNN_MAX_DIMS)
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument 'shared_dims' (expected 0..%d, "
                              "got %d)", fn, SNN_MAX_DIMS - 1, shared_dims);
    const snn_dropout_impl d = {p, seed, shared_dims};
    return snn_module_new_copy(&snn_dropout_ops, &d, sizeof d);
}

snn_module *snn_dropout_new(float p, uint64_t seed) { return snn_dropout_shared_new(p, seed, 0); }

/* ---- Sequential --------------------------------------------------------------------------- */

static snn_tensor *sequential_forward(snn_module *m, snn_tensor *x)
{
    /* a Conv2d -> BatchNorm2d pair runs as one op in eval mode (nn/layer_conv.c) */
    return snn_modules_forward(m->children, m->n_children, x);
}

const snn_module_ops snn_sequential_ops = {"Sequential", sequential_forward, NULL, NULL};

snn_module *snn_sequential_new(void) { return snn_module_new(&snn_sequential_ops, NULL); }
