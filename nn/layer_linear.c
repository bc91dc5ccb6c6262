/*
 * layer_linear.c - the Linear layer: y = x W^T + b with W (out, in), b (out), initialised as
 * PyTorch's default U(-1/sqrt(in), 1/sqrt(in)). Accepts (..., in): (T, N, in) works as is.
 */
#include <math.h>

#include "nn.h"
#include "nn_internal.h"
#include "tensor/error.h"

static snn_tensor *linear_forward(snn_module *m, snn_tensor *x)
{
    return snn_linear(x, m->params[0].tensor, m->n_params > 1 ? m->params[1].tensor : NULL);
}

const snn_module_ops snn_linear_ops = {"Linear", linear_forward, NULL, NULL};

snn_module *snn_linear_new(int in_features, int out_features, bool bias, snn_rng *rng)
{
    if (in_features < 1 || out_features < 1 || !rng)
        return snn_error_null(SNN_ERR_ARGUMENT, "snn_linear_new: bad arguments (in %d, out %d, "
                              "rng %s)", in_features, out_features, rng ? "set" : "NULL");
    snn_module *m = snn_module_new(&snn_linear_ops, NULL);
    if (!m) return NULL;
    float bound = 1.0f / sqrtf((float)in_features);
    if (snn_module_add_uniform(m, "weight", SNN_SHAPE(out_features, in_features), bound, rng) != SNN_OK ||
        (bias && snn_module_add_uniform(m, "bias", SNN_SHAPE(out_features), bound, rng) != SNN_OK)) {
        snn_module_free(m);
        return NULL;
    }
    return m;
}
