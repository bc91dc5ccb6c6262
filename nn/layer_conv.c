/*
 * layer_conv.c - the Conv2d layer: owns weight (C_out, C_in, K, K) and an optional bias (C_out),
 * and calls snn_conv2d. Initialised as PyTorch's default: U(-b, b), b = 1 / sqrt(C_in K K).
 * In evaluation a model runs a Conv2d and the BatchNorm2d after it as one op where its plan
 * says so (the rule conv -> bn, nn/fusion_rules.c).
 */
#include <math.h>

#include "nn.h"
#include "nn_internal.h"
#include "tensor/error.h"

static snn_tensor *conv_forward(snn_module *m, snn_tensor *x)
{
    snn_conv_impl *c = m->impl;
    snn_tensor *b = c->bias ? m->params[1].tensor : NULL;
    /* an output the batch-norm after it may keep as bf16 comes from the step pool
     * (autograd/bf16_keep.c) */
    if (snn_conv_output_to_pool(m, x))
        return snn_conv2d_to_pool(x, m->params[0].tensor, b, c->stride, c->pad);
    return snn_conv2d(x, m->params[0].tensor, b, c->stride, c->pad);
}

const snn_module_ops snn_conv2d_ops = {"Conv2d", conv_forward, NULL, NULL};

snn_module *snn_conv2d_new(int in_channels, int out_channels, int kernel, int stride, int pad,
                           bool bias, snn_rng *rng)
{
    if (in_channels < 1 || out_channels < 1 || kernel < 1 || stride < 1 || pad < 0 || !rng)
        return snn_error_null(SNN_ERR_ARGUMENT, "snn_conv2d_new: bad arguments (in %d, out %d, "
                              "kernel %d, stride %d, pad %d, rng %s)", in_channels, out_channels,
                              kernel, stride, pad, rng ? "set" : "NULL");
    const snn_conv_impl c = {in_channels, out_channels, kernel, stride, pad, bias};
    snn_module *m = snn_module_new_copy(&snn_conv2d_ops, &c, sizeof c);
    if (!m) return NULL;
    float bound = 1.0f / sqrtf((float)(in_channels * kernel * kernel));
    if (snn_module_add_uniform(m, "weight", SNN_SHAPE(out_channels, in_channels, kernel, kernel),
                               bound, rng) != SNN_OK ||
        (bias && snn_module_add_uniform(m, "bias", SNN_SHAPE(out_channels), bound, rng) != SNN_OK)) {
        snn_module_free(m);
        return NULL;
    }
    return m;
}
