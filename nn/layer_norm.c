/*
 * layer_norm.c - the BatchNorm2d layer: gamma (weight) = 1, beta (bias) = 0, running_mean = 0,
 * running_var = 1, momentum 0.1, eps 1e-5 (PyTorch's defaults and parameter names). In time-
 * folded multi-step use (T*N images) the statistics cover all time steps, as in SpikingJelly's
 * SeqToANNContainer(BatchNorm2d).
 */
#include "nn.h"
#include "nn_internal.h"
#include "tensor/error.h"

static snn_tensor *bn_forward(snn_module *m, snn_tensor *x)
{
    snn_batchnorm_impl *b = m->impl;
    return snn_batchnorm2d(x, m->params[0].tensor, m->params[1].tensor, m->params[2].tensor,
                           m->params[3].tensor, m->training, b->momentum, b->eps);
}

static void bn_free(snn_module *m) { snn_free(m->impl, sizeof(snn_batchnorm_impl), SNN_CPU); }

const snn_module_ops snn_batchnorm2d_ops = {"BatchNorm2d", bn_forward, bn_free, NULL};

snn_module *snn_batchnorm2d_new(int channels)
{
    if (channels < 1)
        return snn_error_null(SNN_ERR_ARGUMENT, "snn_batchnorm2d_new: bad argument 'channels' "
                              "(expected >= 1, got %d)", channels);
    snn_batchnorm_impl *b = snn_alloc(sizeof *b, SNN_CPU);
    if (!b) return snn_error_null(SNN_ERR_MEMORY, "snn_batchnorm2d_new: out of host memory");
    *b = (snn_batchnorm_impl){0.1f, 1e-5f};
    snn_module *m = snn_module_new(&snn_batchnorm2d_ops, b);
    if (!m) {
        snn_free(b, sizeof *b, SNN_CPU);
        return NULL;
    }
    const char *names[4] = {"weight", "bias", "running_mean", "running_var"};
    float init[4] = {1.0f, 0.0f, 0.0f, 1.0f};
    for (int i = 0; i < 4; i++) {
        snn_tensor *t = snn_tensor_new(SNN_SHAPE(channels), SNN_CPU);
        if (!t) {
            snn_module_free(m);
            return NULL;
        }
        snn_tensor_fill(t, init[i]);
        snn_module_add_param(m, names[i], t, i < 2);
    }
    return m;
}
