/*
 * layer_conv.c - the Conv2d layer: owns weight (C_out, C_in, K, K) and an optional bias (C_out),
 * and calls snn_conv2d. Initialised as PyTorch's default: U(-b, b), b = 1 / sqrt(C_in K K).
 * Also snn_conv_bn_forward, the conv -> batch-norm pair the models run, fused in eval mode, and
 * snn_modules_forward, which runs a list of modules with the pairs that fuse (conv -> batch-norm
 * in evaluation, batch-norm -> neuron in training: nn/layer_neuron.c) as one op each.
 */
#include <math.h>

#include "nn.h"
#include "nn_internal.h"
#include "tensor/error.h"

static snn_tensor *conv_forward(snn_module *m, snn_tensor *x)
{
    snn_conv_impl *c = m->impl;
    return snn_conv2d(x, m->params[0].tensor, c->bias ? m->params[1].tensor : NULL, c->stride, c->pad);
}

static void conv_free(snn_module *m) { snn_free(m->impl, sizeof(snn_conv_impl), SNN_CPU); }

const snn_module_ops snn_conv2d_ops = {"Conv2d", conv_forward, conv_free, NULL};

bool snn_conv_bn_fuses(const snn_module *conv, const snn_module *bn)
{
    return conv && bn && !bn->training && conv->ops == &snn_conv2d_ops &&
           bn->ops == &snn_batchnorm2d_ops;
}

snn_tensor *snn_conv_bn_forward(snn_module *conv, snn_module *bn, snn_tensor *x)
{
    /* a swapped module (the sparse pass's convs) or training mode: the two forwards */
    if (!x || !snn_conv_bn_fuses(conv, bn))
        return snn_module_forward(bn, snn_module_forward(conv, x));
    const snn_conv_impl *c = conv->impl;
    const snn_batchnorm_impl *b = bn->impl;
    return snn_conv2d_batchnorm_eval(x, conv->params[0].tensor,
                                     c->bias ? conv->params[1].tensor : NULL,
                                     bn->params[0].tensor, bn->params[1].tensor,
                                     bn->params[2].tensor, bn->params[3].tensor, b->eps,
                                     c->stride, c->pad);
}

snn_tensor *snn_modules_forward(snn_module *const *ch, int n, snn_tensor *x)
{
    snn_tensor *const caller = x; /* not this list's to give up, even passed on unchanged */
    for (int i = 0; i < n && x; i++) {
        if (i + 1 < n && snn_conv_bn_fuses(ch[i], ch[i + 1])) { /* evaluation */
            x = snn_conv_bn_forward(ch[i], ch[i + 1], x);
            i++;
        } else if (i + 1 < n && snn_bn_neuron_fuses(ch[i], ch[i + 1])) { /* training */
            x = snn_bn_neuron_forward(ch[i], ch[i + 1], x, NULL);
            i++;
        } else {
            snn_tensor *in = x;
            x = snn_module_forward(ch[i], x);
            /* spikes made in this list and read by a conv: its forward was their last reader */
            if (x && in != caller && ch[i]->ops == &snn_conv2d_ops &&
                snn_spikes_forward_done(in) != SNN_OK)
                return NULL;
        }
    }
    return x;
}

snn_module *snn_conv2d_new(int in_channels, int out_channels, int kernel, int stride, int pad,
                           bool bias, snn_rng *rng)
{
    if (in_channels < 1 || out_channels < 1 || kernel < 1 || stride < 1 || pad < 0 || !rng)
        return snn_error_null(SNN_ERR_ARGUMENT, "snn_conv2d_new: bad arguments (in %d, out %d, "
                              "kernel %d, stride %d, pad %d, rng %s)", in_channels, out_channels,
                              kernel, stride, pad, rng ? "set" : "NULL");
    snn_conv_impl *c = snn_alloc(sizeof *c, SNN_CPU);
    if (!c) return snn_error_null(SNN_ERR_MEMORY, "snn_conv2d_new: out of host memory");
    *c = (snn_conv_impl){in_channels, out_channels, kernel, stride, pad, bias};
    snn_module *m = snn_module_new(&snn_conv2d_ops, c);
    if (!m) {
        snn_free(c, sizeof *c, SNN_CPU);
        return NULL;
    }
    float bound = 1.0f / sqrtf((float)(in_channels * kernel * kernel));
    if (snn_module_add_uniform(m, "weight", SNN_SHAPE(out_channels, in_channels, kernel, kernel),
                               bound, rng) != SNN_OK ||
        (bias && snn_module_add_uniform(m, "bias", SNN_SHAPE(out_channels), bound, rng) != SNN_OK)) {
        snn_module_free(m);
        return NULL;
    }
    return m;
}
