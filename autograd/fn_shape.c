/*
 * fn_shape.c - views: reshape, flatten and detach share the input's data; nothing is copied.
 * Tensors are contiguous, so the gradient of a view is the output gradient read with the
 * input's shape: dx += dy, element for element.
 */
#include "autograd.h"
#include "tensor/arena.h"
#include "tensor/error.h"
#include "kernels/kernels.h"

static void view_backward(snn_node *node)
{
    snn_tensor *x = node->inputs[0];
    float *dx = snn_grad_for(x);
    if (!dx) return;
    snn_kernels_for(x->device)->axpy(dx, 1.0f, node->out->grad->data, x->numel);
}

static snn_tensor *view(const char *fn, snn_tensor *x, snn_shape shape)
{
    snn_tensor *y = snn_step_view(fn, x, shape);
    if (!y) return NULL;
    if (snn_should_record(1, &x) && !snn_tape_record(fn, view_backward, y, 1, &x, 0)) return NULL;
    return y;
}

snn_tensor *snn_reshape(snn_tensor *x, snn_shape shape)
{
    const char *fn = "snn_reshape";
    if (snn_check_tensor(fn, "x", x)) return NULL;
    char bufx[96], bufs[96];
    if (shape.ndim < 1 || shape.ndim > SNN_MAX_DIMS)
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument 'shape' (expected 1 to %d dims, "
                              "got %d)", fn, SNN_MAX_DIMS, shape.ndim);
    /* one dim may be -1: inferred from the others */
    int infer = -1;
    int64_t known = 1;
    for (int d = 0; d < shape.ndim; d++) {
        if (shape.dim[d] == -1 && infer < 0) infer = d;
        else if (shape.dim[d] < 0) known = -1;
        else known *= shape.dim[d];
    }
    if (infer >= 0 && known > 0 && x->numel % known == 0) shape.dim[infer] = x->numel / known;
    if (known < 0 || snn_shape_numel(shape) != x->numel)
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument 'shape' (%s cannot hold the %lld "
                              "elements of %s)", fn, snn_shape_str(shape, bufs, sizeof bufs),
                              (long long)x->numel, snn_shape_str(x->shape, bufx, sizeof bufx));
    return view(fn, x, shape);
}

snn_tensor *snn_flatten(snn_tensor *x, int start, int end)
{
    const char *fn = "snn_flatten";
    if (snn_check_tensor(fn, "x", x)) return NULL;
    int ndim = x->shape.ndim;
    if (start < 0) start += ndim;
    if (end < 0) end += ndim;
    if (start < 0 || end >= ndim || start > end) {
        char buf[96];
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad arguments 'start', 'end' (expected "
                              "0 <= start <= end < %d for shape %s, got %d, %d)", fn, ndim,
                              snn_shape_str(x->shape, buf, sizeof buf), start, end);
    }
    snn_shape shape = {0};
    for (int d = 0; d < ndim; d++) {
        if (d <= start || d > end) shape.dim[shape.ndim++] = x->shape.dim[d];
        else shape.dim[shape.ndim - 1] *= x->shape.dim[d];
    }
    return view(fn, x, shape);
}

snn_tensor *snn_detach(snn_tensor *x)
{
    if (snn_check_tensor("snn_detach", "x", x)) return NULL;
    return snn_step_view("snn_detach", x, x->shape); /* requires_grad stays false */
}
