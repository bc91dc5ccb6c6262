/*
 * fn_reduce.c - sums and means over one dim or all, and repetition along a new time axis.
 *
 *   y[o, i] = s * sum_d x[o, d, i]   (x viewed as (outer, dim, inner)):  dx[o, d, i] += s dy[o, i]
 *   y[t, ...] = x[...]  (repeat over T):                                   dx += sum_t dy[t]
 */
#include "autograd.h"
#include "tensor/arena.h"
#include "tensor/error.h"
#include "kernels/kernels.h"

typedef struct reduce_saved {
    int64_t outer, dim, inner;
    float scale;
} reduce_saved;

static void reduce_backward(snn_node *node)
{
    reduce_saved *s = node->saved;
    snn_tensor *x = node->inputs[0];
    float *dx = snn_grad_for(x);
    if (!dx) return;
    snn_kernels_for(x->device)->expand_dim(dx, node->out->grad->data, s->outer, s->dim, s->inner,
                                           s->scale, true);
}

static snn_tensor *reduce(const char *fn, snn_tensor *x, int dim, bool keepdim, bool mean)
{
    if (snn_check_tensor(fn, "x", x)) return NULL;
    int ndim = x->shape.ndim;
    if (dim < 0) dim += ndim;
    if (dim < 0 || dim >= ndim) {
        char buf[96];
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument 'dim' (expected -%d..%d for "
                              "shape %s, got %d)", fn, ndim, ndim - 1,
                              snn_shape_str(x->shape, buf, sizeof buf), dim);
    }
    const snn_kernels *k = snn_kernels_for(x->device); /* a table: snn_tensor_new checks */
    SNN_REQUIRE_KERNEL(k, fn, sum_dim);
    SNN_REQUIRE_KERNEL(k, fn, expand_dim);
    int64_t outer = 1, inner = 1, size = x->shape.dim[dim];
    for (int d = 0; d < dim; d++) outer *= x->shape.dim[d];
    for (int d = dim + 1; d < ndim; d++) inner *= x->shape.dim[d];
    snn_shape shape = {0};
    for (int d = 0; d < ndim; d++) {
        if (d == dim && !keepdim) continue;
        shape.dim[shape.ndim++] = d == dim ? 1 : x->shape.dim[d];
    }
    float scale = mean ? (size ? 1.0f / (float)size : 0.0f) : 1.0f;
    snn_tensor *y = snn_step_tensor(fn, shape, x->device);
    if (!y) return NULL;
    k->sum_dim(y->data, x->data, outer, size, inner, scale);
    if (snn_should_record(1, &x)) {
        snn_node *node = snn_tape_record(fn, reduce_backward, y, 1, &x, sizeof(reduce_saved));
        if (!node) return NULL;
        *(reduce_saved *)node->saved = (reduce_saved){outer, size, inner, scale};
    }
    return y;
}

snn_tensor *snn_sum(snn_tensor *x, int dim, bool keepdim) { return reduce("snn_sum", x, dim, keepdim, false); }
snn_tensor *snn_mean(snn_tensor *x, int dim, bool keepdim) { return reduce("snn_mean", x, dim, keepdim, true); }

static snn_tensor *reduce_all(const char *fn, snn_tensor *x, bool mean)
{
    if (snn_check_tensor(fn, "x", x)) return NULL;
    snn_tensor *flat = snn_reshape(x, SNN_SHAPE(x->numel));
    return reduce(fn, flat, 0, true, mean);
}

snn_tensor *snn_sum_all(snn_tensor *x) { return reduce_all("snn_sum_all", x, false); }
snn_tensor *snn_mean_all(snn_tensor *x) { return reduce_all("snn_mean_all", x, true); }

/* ---- repeat over a new leading time axis -------------------------------------------------- */

static void repeat_backward(snn_node *node)
{
    snn_tensor *x = node->inputs[0], *y = node->out;
    float *dx = snn_grad_for(x);
    if (!dx) return;
    const snn_kernels *k = snn_kernels_for(x->device);
    int64_t T = y->shape.dim[0];
    for (int64_t t = 0; t < T; t++) k->axpy(dx, 1.0f, y->grad->data + t * x->numel, x->numel);
}

snn_tensor *snn_repeat_time(snn_tensor *x, int T)
{
    const char *fn = "snn_repeat_time";
    if (snn_check_tensor(fn, "x", x)) return NULL;
    if (T < 1)
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument 'T' (expected >= 1, got %d)", fn, T);
    if (x->shape.ndim >= SNN_MAX_DIMS)
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument 'x' (expected at most %d dims, "
                              "got %d)", fn, SNN_MAX_DIMS - 1, x->shape.ndim);
    const snn_kernels *k = snn_kernels_for(x->device); /* a table: snn_tensor_new checks */
    SNN_REQUIRE_KERNEL(k, fn, expand_dim);
    SNN_REQUIRE_KERNEL(k, fn, axpy);
    snn_shape shape = {.ndim = x->shape.ndim + 1};
    shape.dim[0] = T;
    for (int d = 0; d < x->shape.ndim; d++) shape.dim[d + 1] = x->shape.dim[d];
    snn_tensor *y = snn_step_tensor(fn, shape, x->device);
    if (!y) return NULL;
    k->expand_dim(y->data, x->data, 1, T, x->numel, 1.0f, false);
    if (snn_should_record(1, &x) && !snn_tape_record(fn, repeat_backward, y, 1, &x, 0)) return NULL;
    return y;
}
