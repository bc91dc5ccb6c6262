/*
 * layer_pool.c - pooling layers: MaxPool2d and AvgPool2d (square window, no padding), and the
 * global average pool that ends a ResNet ((.., C, H, W) -> (.., C, 1, 1)).
 */
#include "nn.h"
#include "nn_internal.h"
#include "tensor/error.h"

static snn_tensor *max_forward(snn_module *m, snn_tensor *x)
{
    snn_pool_impl *p = m->impl;
    return snn_max_pool2d(x, p->kernel, p->stride, 0);
}

static snn_tensor *avg_forward(snn_module *m, snn_tensor *x)
{
    snn_pool_impl *p = m->impl;
    return snn_avg_pool2d(x, p->kernel, p->stride, 0);
}

const snn_module_ops snn_max_pool2d_ops = {"MaxPool2d", max_forward, NULL, NULL};
const snn_module_ops snn_avg_pool2d_ops = {"AvgPool2d", avg_forward, NULL, NULL};

static snn_module *pool_new(const char *fn, const snn_module_ops *ops, int kernel, int stride)
{
    if (kernel < 1 || stride < 1)
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad arguments (expected kernel, stride >= 1, "
                              "got %d, %d)", fn, kernel, stride);
    const snn_pool_impl p = {kernel, stride};
    return snn_module_new_copy(ops, &p, sizeof p);
}

snn_module *snn_max_pool2d_new(int kernel, int stride)
{
    return pool_new("snn_max_pool2d_new", &snn_max_pool2d_ops, kernel, stride);
}

snn_module *snn_avg_pool2d_new(int kernel, int stride)
{
    return pool_new("snn_avg_pool2d_new", &snn_avg_pool2d_ops, kernel, stride);
}

/* mean over H*W: a view (.., C, H*W), a mean over the last dim, a view back to (.., C, 1, 1) */
static snn_tensor *adaptive_forward(snn_module *m, snn_tensor *x)
{
    (void)m;
    if (snn_check_tensor("AdaptiveAvgPool", "x", x)) return NULL;
    if (x->shape.ndim < 3) {
        char buf[96];
        return snn_error_null(SNN_ERR_ARGUMENT, "AdaptiveAvgPool: bad argument 'x' (expected "
                              "(.., C, H, W), got %s)", snn_shape_str(x->shape, buf, sizeof buf));
    }
    snn_shape out = x->shape;
    out.dim[out.ndim - 2] = 1;
    out.dim[out.ndim - 1] = 1;
    snn_tensor *planes = snn_flatten(x, -2, -1);
    return snn_reshape(snn_mean(planes, -1, false), out);
}

const snn_module_ops snn_adaptive_avg_pool_ops = {"AdaptiveAvgPool2d", adaptive_forward, NULL, NULL};

snn_module *snn_adaptive_avg_pool_new(void) { return snn_module_new(&snn_adaptive_avg_pool_ops, NULL); }
