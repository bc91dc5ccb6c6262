/*
 * fn_transpose.c - the first two axes of a tensor swapped, a copy (tensors are contiguous, so
 * unlike reshape it cannot be a view):
 *
 *   y = snn_transpose01(x):   x (A, B, ...) -> y (B, A, ...),   y[b, a, ...] = x[a, b, ...]
 *   backward:                 dx[a, b, ...] += dy[b, a, ...]     (the same swap, accumulated)
 *
 * Why it exists: multi-step layers take time-major data (T, N, ...), and an image read as a
 * sequence (the recurrent SNN's rows and pixels encodings, nn/model_rsnn.c) is batch-major:
 * (N, C, H, W) viewed as (N*C, H, W) and swapped gives (H, N*C, W), the rows as time steps.
 * Any swap of two adjacent groups of axes is this op between two reshapes (views).
 * Kernel: transpose01 (kernels/ref/transpose.c); test: tests/test_transpose.c.
 */
#include "autograd.h"
#include "tensor/arena.h"
#include "tensor/error.h"
#include "kernels/kernels.h"

typedef struct transpose_saved {
    int64_t rows, cols, inner; /* x viewed as (rows, cols, inner) */
} transpose_saved;

static void transpose01_backward(snn_node *node)
{
    const transpose_saved *s = node->saved;
    snn_tensor *x = node->inputs[0];
    float *dx = snn_grad_for(x);
    if (!dx || !node->out->grad) return;
    /* dy is (cols, rows, inner): swapped back into dx (rows, cols, inner) */
    snn_kernels_for(x->device)->transpose01(dx, node->out->grad->data, s->cols, s->rows, s->inner,
                                            true);
}

snn_tensor *snn_transpose01(snn_tensor *x)
{
    const char *fn = "snn_transpose01";
    if (snn_check_tensor(fn, "x", x)) return NULL;
    if (x->shape.ndim < 2) {
        char buf[96];
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument 'x' (expected at least 2 dims "
                              "to swap, got %s)", fn, snn_shape_str(x->shape, buf, sizeof buf));
    }
    const snn_kernels *k = snn_kernels_for(x->device); /* a table: snn_tensor_new checks */
    SNN_REQUIRE_KERNEL(k, fn, transpose01);
    transpose_saved s = {x->shape.dim[0], x->shape.dim[1], 1};
    for (int d = 2; d < x->shape.ndim; d++) s.inner *= x->shape.dim[d];
    snn_shape shape = x->shape;
    shape.dim[0] = s.cols, shape.dim[1] = s.rows;
    snn_tensor *y = snn_step_tensor(fn, shape, x->device); // (B, A, ...)
    if (!y) return NULL;
    k->transpose01(y->data, x->data, s.rows, s.cols, s.inner, false);
    if (snn_should_record(1, &x)) {
        snn_node *node = snn_tape_record(fn, transpose01_backward, y, 1, &x, sizeof s);
        if (!node) return NULL;
        *(transpose_saved *)node->saved = s;
    }
    return y;
}
