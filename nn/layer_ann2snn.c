/*
 * layer_ann2snn.c - the three layers that only a converted network has (nn/ann2snn.c makes them):
 *
 *   FirstStepBias     bias (C): added to the first time step only. It sits where the QANN had a
 *                     batch-norm, whose scale went into the conv before it; on the stem's
 *                     output, which has no time axis yet (it is placed at t = 0 afterwards, see
 *                     SNN_ENCODING_FIRST_STEP), it is a plain per-channel add.
 *   FirstStepLinear   y = x w^T at every step, + b at the first step only.
 *   RunningMaxPool2d  the max-pool of the running sums over time (snn_running_max_pool2d).
 *
 * Why the first step: an ST-BIF membrane integrates its input over time and its emitted spikes
 * converge to the quantized SUM of that input, so a constant the QANN adds once must be added
 * once in all, not at each of the T steps (docs/ann2snn.md).
 */
#include "nn.h"
#include "nn_internal.h"
#include "tensor/error.h"

/* ---- FirstStepBias ------------------------------------------------------------------------ */

static snn_tensor *first_bias_forward(snn_module *m, snn_tensor *x)
{
    snn_tensor *b = m->params[0].tensor; /* (C) */
    if (x->shape.ndim == 4) /* the stem, (N, C, H, W): all of it enters at t = 0 */
        return snn_add(x, snn_reshape(b, SNN_SHAPE(b->numel, 1, 1)));
    return snn_add_first_step(x, b);
}

const snn_module_ops snn_first_step_bias_ops = {"FirstStepBias", first_bias_forward, NULL, NULL};

snn_module *snn_first_step_bias_new(snn_tensor *bias)
{
    SNN_ASSERT(bias && bias->lifetime == SNN_OWNED && bias->shape.ndim == 1);
    snn_module *m = snn_module_new(&snn_first_step_bias_ops, NULL);
    if (!m) {
        snn_tensor_free(bias);
        return NULL;
    }
    snn_module_add_param(m, "bias", bias, true);
    return m;
}

/* ---- FirstStepLinear ---------------------------------------------------------------------- */

static snn_tensor *first_linear_forward(snn_module *m, snn_tensor *x)
{
    snn_tensor *w = m->params[0].tensor, *b = m->params[1].tensor;
    if (x->shape.ndim < 3) return snn_linear(x, w, b); /* no time axis: an ordinary linear */
    return snn_add_first_step(snn_linear(x, w, NULL), b);
}

const snn_module_ops snn_first_step_linear_ops = {"FirstStepLinear", first_linear_forward, NULL,
                                                  NULL};

snn_module *snn_first_step_linear_new(snn_tensor *weight, snn_tensor *bias)
{
    SNN_ASSERT(weight && bias && weight->lifetime == SNN_OWNED && bias->lifetime == SNN_OWNED);
    snn_module *m = snn_module_new(&snn_first_step_linear_ops, NULL);
    if (!m) {
        snn_tensor_free(weight);
        snn_tensor_free(bias);
        return NULL;
    }
    snn_module_add_param(m, "weight", weight, true);
    snn_module_add_param(m, "bias", bias, true);
    return m;
}

/* ---- RunningMaxPool2d --------------------------------------------------------------------- */

static snn_tensor *running_pool_forward(snn_module *m, snn_tensor *x)
{
    const snn_pool_impl *p = m->impl;
    return snn_running_max_pool2d(x, p->kernel, p->stride);
}

const snn_module_ops snn_running_max_pool2d_ops = {"RunningMaxPool2d", running_pool_forward,
                                                   NULL, NULL};

snn_module *snn_running_max_pool2d_new(int kernel, int stride)
{
    if (kernel < 1 || kernel > 4 || stride < kernel)
        return snn_error_null(SNN_ERR_ARGUMENT, "snn_running_max_pool2d_new: bad arguments "
                              "(expected 1 <= kernel <= 4 and stride >= kernel, got %d, %d)",
                              kernel, stride);
    const snn_pool_impl p = {kernel, stride};
    return snn_module_new_copy(&snn_running_max_pool2d_ops, &p, sizeof p);
}
