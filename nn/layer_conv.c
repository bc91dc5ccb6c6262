/*
 * layer_conv.c - the Conv2d layer: owns weight (C_out, C_in, K, K) and an optional bias (C_out),
 * and calls snn_conv2d. Initialised as PyTorch's default: U(-b, b), b = 1 / sqrt(C_in K K).
 * In evaluation a model runs a Conv2d and the BatchNorm2d after it as one op where its plan
 * says so (the rule conv -> bn, nn/fusion_rules.c). With OTTT's trace on (nn/synapse_trace.c)
 * its weight gradient is taken against the trace.
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
    const bool to_pool = snn_conv_output_to_pool(m, x);
    snn_tensor *trace = NULL; /* OTTT's presynaptic trace, when on (nn/synapse_trace.c) */
    if (c->trace.on && snn_synapse_trace_step("Conv2d", &c->trace, x, &trace) != SNN_OK)
        return NULL;
    if (trace)
        return snn_conv2d_traced(x, trace, m->params[0].tensor, b, c->stride, c->pad, to_pool);
    if (to_pool) return snn_conv2d_to_pool(x, m->params[0].tensor, b, c->stride, c->pad);
    return snn_conv2d(x, m->params[0].tensor, b, c->stride, c->pad);
}

static void conv_free_impl(snn_module *m)
{
    snn_conv_impl *c = m->impl;
    if (c->trace.trace) snn_synapse_trace_free(&c->trace);
}

static void conv_reset_state(snn_module *m)
{
    snn_conv_impl *c = m->impl;
    if (c->trace.trace) snn_synapse_trace_reset(&c->trace);
}

const snn_module_ops snn_conv2d_ops = {"Conv2d", conv_forward, conv_free_impl, conv_reset_state};

snn_module *snn_conv2d_new(int in_channels, int out_channels, int kernel, int stride, int pad,
                           bool bias, snn_rng *rng)
{
    if (in_channels < 1 || out_channels < 1 || kernel < 1 || stride < 1 || pad < 0 || !rng)
        return snn_error_null(SNN_ERR_ARGUMENT, "snn_conv2d_new: bad arguments (in %d, out %d, "
                              "kernel %d, stride %d, pad %d, rng %s)", in_channels, out_channels,
                              kernel, stride, pad, rng ? "set" : "NULL");
    const snn_conv_impl c = {in_channels, out_channels, kernel, stride, pad, bias,
                             {NULL, 0.0f, false}};
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
