/*
 * fn_pool2d.c - max and average pooling over square windows.
 *
 *   max: y = max over the window of x;  dx[argmax] += dy   (argmax saved by the forward)
 *   avg: y = (1 / K^2) sum over the window (padding counts as zeros);  dx += dy / K^2 spread
 */
#include "autograd.h"
#include "image_layout.h"
#include "tensor/arena.h"
#include "tensor/error.h"
#include "kernels/kernels.h"

typedef struct pool_saved {
    snn_pool2d_dims dims;
    int32_t *argmax; /* (N, C, H_out, W_out), max-pool only */
} pool_saved;

static void max_pool_backward(snn_node *node)
{
    pool_saved *s = node->saved;
    float *dx = snn_grad_for(node->inputs[0]);
    if (dx) snn_kernels_for(node->out->device)->max_pool2d_backward(dx, node->out->grad->data,
                                                                    s->argmax, &s->dims);
}

static void avg_pool_backward(snn_node *node)
{
    pool_saved *s = node->saved;
    float *dx = snn_grad_for(node->inputs[0]);
    if (dx) snn_kernels_for(node->out->device)->avg_pool2d_backward(dx, node->out->grad->data, &s->dims);
}

static snn_tensor *pool(const char *fn, bool is_max, snn_tensor *x, int kernel, int stride, int pad)
{
    image_layout l;
    if (image_layout_read(fn, "input", x, &l)) return NULL;
    if (kernel < 1 || stride < 1 || pad < 0 || pad > kernel / 2)
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad arguments (expected kernel >= 1, stride "
                              ">= 1, 0 <= pad <= kernel/2, got kernel %d, stride %d, pad %d)", fn,
                              kernel, stride, pad);
    if (l.H + 2 * pad < kernel || l.W + 2 * pad < kernel)
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument 'kernel' (%d is larger than the "
                              "padded input %dx%d)", fn, kernel, l.H + 2 * pad, l.W + 2 * pad);
    const snn_kernels *k = snn_kernels_for(x->device); /* a table: snn_tensor_new checks */
    if (is_max) {
        SNN_REQUIRE_KERNEL(k, fn, max_pool2d_forward);
        SNN_REQUIRE_KERNEL(k, fn, max_pool2d_backward);
    } else {
        SNN_REQUIRE_KERNEL(k, fn, avg_pool2d_forward);
        SNN_REQUIRE_KERNEL(k, fn, avg_pool2d_backward);
    }
    snn_pool2d_dims d = {l.N, l.C, l.H, l.W, kernel, stride, pad, 0, 0};
    d.H_out = (l.H + 2 * pad - kernel) / stride + 1;
    d.W_out = (l.W + 2 * pad - kernel) / stride + 1;
    snn_tensor *y = snn_step_tensor(fn, image_layout_shape(&l, l.C, d.H_out, d.W_out), x->device);
    if (!y) return NULL;
    bool record = snn_should_record(1, &x);
    int32_t *argmax = NULL;
    if (is_max) {
        /* the kernel always writes argmax; without a tape it is scratch for this step */
        argmax = snn_step_alloc(fn, (size_t)y->numel * sizeof *argmax, x->device);
        if (!argmax) return NULL;
        k->max_pool2d_forward(y->data, argmax, x->data, &d);
    } else {
        k->avg_pool2d_forward(y->data, x->data, &d);
    }
    if (record) {
        snn_node *node = snn_tape_record(fn, is_max ? max_pool_backward : avg_pool_backward, y, 1,
                                         &x, sizeof(pool_saved));
        if (!node) return NULL;
        *(pool_saved *)node->saved = (pool_saved){d, argmax};
    }
    return y;
}

snn_tensor *snn_max_pool2d(snn_tensor *x, int kernel, int stride, int pad)
{
    return pool("snn_max_pool2d", true, x, kernel, stride, pad);
}

snn_tensor *snn_avg_pool2d(snn_tensor *x, int kernel, int stride, int pad)
{
    return pool("snn_avg_pool2d", false, x, kernel, stride, pad);
}
