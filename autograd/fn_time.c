/*
 * fn_time.c - the two time-axis ops a converted SNN needs (nn/ann2snn.c), where everything
 * that a QANN adds once must enter the network exactly once, at the first step:
 *
 *   snn_first_step(x, T):        y (T, ...) with y[0] = x and y[t] = 0 for t > 0
 *                                backward: dx += dy[0]
 *   snn_add_first_step(x, b):    y = x, plus b[c] added to x[0, n, c, ...] only
 *                                backward: dx += dy;  db[c] += sum over n, ... of dy[0, n, c, ...]
 *
 * The first presents the image as ST-BIF requires (the membrane sums its input over time, so
 * the image must be summed once, not T times); the second is a bias (a conv's folded
 * batch-norm shift, a linear layer's bias) added once in total. Both are composed of the
 * kernel table's copy, fill, axpy and bias entries: no kernel of their own.
 */
#include "autograd.h"
#include "tensor/arena.h"
#include "tensor/error.h"
#include "kernels/kernels.h"

/* ---- the input at the first step ---------------------------------------------------------- */

static void first_step_backward(snn_node *node)
{
    snn_tensor *x = node->inputs[0], *y = node->out;
    float *dx = snn_grad_for(x);
    if (!dx || !y->grad) return;
    snn_kernels_for(x->device)->axpy(dx, 1.0f, y->grad->data, x->numel); /* dy[0] */
}

snn_tensor *snn_first_step(snn_tensor *x, int T)
{
    const char *fn = "snn_first_step";
    if (snn_check_tensor(fn, "x", x)) return NULL;
    if (T < 1)
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument 'T' (expected >= 1, got %d)", fn, T);
    if (x->shape.ndim >= SNN_MAX_DIMS)
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument 'x' (expected at most %d dims, "
                              "got %d)", fn, SNN_MAX_DIMS - 1, x->shape.ndim);
    const snn_kernels *k = snn_kernels_for(x->device); /* a table: snn_tensor_new checks */
    SNN_REQUIRE_KERNEL(k, fn, copy);
    SNN_REQUIRE_KERNEL(k, fn, fill);
    SNN_REQUIRE_KERNEL(k, fn, axpy);
    snn_shape shape = {.ndim = x->shape.ndim + 1};
    shape.dim[0] = T;
    for (int d = 0; d < x->shape.ndim; d++) shape.dim[d + 1] = x->shape.dim[d];
    snn_tensor *y = snn_step_tensor(fn, shape, x->device); /* (T, ...) */
    if (!y) return NULL;
    if (x->numel > 0) {
        k->copy(y->data, x->data, (size_t)x->numel * sizeof(float),
                SNN_COPY_DEVICE_TO_DEVICE); /* same device (the CPU's copy is a memcpy) */
        if (T > 1) k->fill(y->data + x->numel, 0.0f, (int64_t)(T - 1) * x->numel);
    }
    if (snn_should_record(1, &x) && !snn_tape_record(fn, first_step_backward, y, 1, &x, 0))
        return NULL;
    return y;
}

/* ---- a bias added at the first step only -------------------------------------------------- */

typedef struct first_bias_saved {
    int64_t images, channels, inner; /* the first step viewed as (N, C, inner) */
} first_bias_saved;

static void add_first_step_backward(snn_node *node)
{
    const first_bias_saved *sv = node->saved;
    snn_tensor *x = node->inputs[0], *b = node->inputs[1], *y = node->out;
    if (!y->grad) return;
    const snn_kernels *k = snn_kernels_for(y->device);
    float *dx = snn_grad_for(x), *db = snn_grad_for(b);
    if (dx) k->axpy(dx, 1.0f, y->grad->data, x->numel);
    if (db) k->bias_backward(db, y->grad->data, sv->images, sv->channels, sv->inner);
}

snn_tensor *snn_add_first_step(snn_tensor *x, snn_tensor *bias)
{
    const char *fn = "snn_add_first_step";
    char buf[96];
    if (snn_check_tensor(fn, "x", x) || snn_check_tensor(fn, "bias", bias)) return NULL;
    if (x->shape.ndim < 3)
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument 'x' (expected (T, N, C, ...) with "
                              "at least 3 dims, got %s)", fn,
                              snn_shape_str(x->shape, buf, sizeof buf));
    if (bias->shape.ndim != 1 || bias->shape.dim[0] != x->shape.dim[2])
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument 'bias' (expected (%lld), one per "
                              "channel of x, got %s)", fn, (long long)x->shape.dim[2],
                              snn_shape_str(bias->shape, buf, sizeof buf));
    if (snn_check_same_device(fn, "x", x, "bias", bias)) return NULL;
    const snn_kernels *k = snn_kernels_for(x->device); /* a table: snn_tensor_new checks */
    SNN_REQUIRE_KERNEL(k, fn, copy);
    SNN_REQUIRE_KERNEL(k, fn, axpy);
    SNN_REQUIRE_KERNEL(k, fn, bias_forward);
    SNN_REQUIRE_KERNEL(k, fn, bias_backward);
    first_bias_saved sv = {x->shape.dim[1], x->shape.dim[2], 1};
    for (int d = 3; d < x->shape.ndim; d++) sv.inner *= x->shape.dim[d];
    snn_tensor *y = snn_step_tensor(fn, x->shape, x->device); /* (T, N, C, ...) */
    if (!y) return NULL;
    if (x->numel > 0) {
        k->copy(y->data, x->data, (size_t)x->numel * sizeof(float),
                SNN_COPY_DEVICE_TO_DEVICE); /* same device (the CPU's copy is a memcpy) */
        k->bias_forward(y->data, bias->data, sv.images, sv.channels, sv.inner); /* step 0 only */
    }
    snn_tensor *inputs[2] = {x, bias};
    if (snn_should_record(2, inputs)) {
        snn_node *node = snn_tape_record(fn, add_first_step_backward, y, 2, inputs, sizeof sv);
        if (!node) return NULL;
        *(first_bias_saved *)node->saved = sv;
    }
    return y;
}
