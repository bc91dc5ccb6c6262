/*
 * fn_linear.c - the fully connected layer snn_linear (the plain product snn_matmul is
 * fn_matmul.c).
 *
 *   Y = X W^T + b,   X (R, in), W (out, in), b (out)      R = every leading dim of X, folded
 *   dX += dY W,   dW += dY^T X,   db += sum over rows of dY
 *
 * snn_linear_traced takes dW against another tensor (OTTT's presynaptic trace) instead of X.
 *
 * Each product is one GEMM call of the device's table (the reference triple loop, the CPU's
 * own blocked SGEMM, cuBLAS on CUDA).
 */
#include "autograd.h"
#include "tensor/arena.h"
#include "tensor/error.h"
#include "kernels/kernels.h"

static void linear_backward(snn_node *node)
{
    snn_tensor *x = node->inputs[0], *w = node->inputs[1], *b = node->inputs[2], *y = node->out;
    const float *const *trace = node->saved; /* snn_linear_traced: dW against it, not x */
    int out = (int)w->shape.dim[0], in = (int)w->shape.dim[1];
    int rows = (int)(x->numel / in);
    const snn_kernels *k = snn_kernels_for(y->device);
    const float *dy = y->grad->data; /* (rows, out) */
    float *dx = snn_grad_for(x), *dw = snn_grad_for(w), *db = snn_grad_for(b);
    if (dx) k->gemm(false, false, rows, in, out, 1.0f, dy, out, w->data, in, 1.0f, dx, in);
    const float *xw = *trace ? *trace : x->data;
    if (dw) k->gemm(true, false, out, in, rows, 1.0f, dy, out, xw, in, 1.0f, dw, in);
    if (db) k->bias_backward(db, dy, rows, out, 1);
}

static snn_tensor *linear(const char *fn, snn_tensor *x, const snn_tensor *trace, snn_tensor *w,
                          snn_tensor *b)
{
    if (snn_check_tensor(fn, "x", x) || snn_check_tensor(fn, "weight", w) ||
        snn_check_rank(fn, "weight", w, 2, "(out, in)") ||
        snn_check_same_device(fn, "x", x, "weight", w))
        return NULL;
    int out = (int)w->shape.dim[0], in = (int)w->shape.dim[1];
    char bufx[96], bufw[96];
    if (x->shape.ndim < 1 || x->shape.dim[x->shape.ndim - 1] != in)
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument 'x' (expected (..., %d) to "
                              "match weight %s, got %s)", fn, in,
                              snn_shape_str(w->shape, bufw, sizeof bufw),
                              snn_shape_str(x->shape, bufx, sizeof bufx));
    if (b && (snn_check_rank(fn, "bias", b, 1, "(out)") ||
              snn_check_same_device(fn, "x", x, "bias", b) ||
              snn_check_dim(fn, "bias", b, 0, out, "out features")))
        return NULL;
    if (trace && (snn_check_tensor(fn, "trace", trace) ||
                  snn_check_same_shape(fn, "x", x, "trace", trace) ||
                  snn_check_same_device(fn, "x", x, "trace", trace)))
        return NULL;
    const snn_kernels *k = snn_kernels_for(x->device); /* a table: snn_tensor_new checks */
    SNN_REQUIRE_KERNEL(k, fn, gemm);
    SNN_REQUIRE_KERNEL(k, fn, bias_forward);
    SNN_REQUIRE_KERNEL(k, fn, bias_backward);
    int rows = (int)(x->numel / in);
    snn_shape shape = x->shape;
    shape.dim[shape.ndim - 1] = out;
    snn_tensor *y = snn_step_tensor(fn, shape, x->device);
    if (!y) return NULL;
    k->gemm(false, true, rows, out, in, 1.0f, x->data, in, w->data, in, 0.0f, y->data, out);
    if (b) k->bias_forward(y->data, b->data, rows, out, 1);
    snn_tensor *inputs[3] = {x, w, b};
    if (snn_should_record(3, inputs)) {
        snn_node *node = snn_tape_record(fn, linear_backward, y, 3, inputs, sizeof(float *));
        if (!node) return NULL;
        *(const float **)node->saved = trace ? trace->data : NULL;
    }
    return y;
}

snn_tensor *snn_linear(snn_tensor *x, snn_tensor *w, snn_tensor *b)
{
    return linear("snn_linear", x, NULL, w, b);
}

snn_tensor *snn_linear_traced(snn_tensor *x, const snn_tensor *trace, snn_tensor *w,
                              snn_tensor *b)
{
    const char *fn = "snn_linear_traced";
    if (!trace) return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument 'trace' (NULL)", fn);
    return linear(fn, x, trace, w, b);
}
