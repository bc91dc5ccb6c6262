/*
 * fn_batchnorm.c - 2-D batch normalisation over the channel dim (Ioffe & Szegedy, 2015).
 *
 * training:  mu, var = mean and biased variance of x[:, c] over N*H*W
 *            y = gamma (x - mu) / sqrt(var + eps) + beta
 *            running <- (1 - momentum) running + momentum batch  (unbiased var, as PyTorch)
 * eval:      the same with the running statistics, which makes it an affine map per channel.
 *
 * Training mode is one fused node (forward saves mean and 1/std per channel: 8 B per channel).
 * Eval mode runs the fused eval kernel when nothing needs a gradient; when something does (a
 * frozen-statistics fine-tune), it is built from broadcasting primitives so that gradients
 * reach gamma and beta through the ordinary rules.
 *
 * Sync-BN (snn_batchnorm_set_sync, set by distributed/ for snn-train --sync-bn): in training the
 * statistics cover every data-parallel rank's batch; the forward and backward then run as
 * fn_batchnorm_sync.c's pieces with an exchange between them.
 */
#include <math.h>

#include "autograd.h"
#include "batchnorm_sync.h"
#include "image_layout.h"
#include "tensor/arena.h"
#include "tensor/error.h"
#include "kernels/kernels.h"

typedef struct bn_saved {
    int N, C, HW;
    float *mean, *invstd; /* (C) batch statistics on the device */
    bool synced;          /* statistics over every rank: the backward exchanges its sums too */
} bn_saved;

static bool sync_on;
static snn_batchnorm_sync sync;

void snn_batchnorm_set_sync(const snn_batchnorm_sync *s)
{
    sync_on = s != NULL;
    if (s) sync = *s;
}

bool snn_batchnorm_sync_enabled(void) { return sync_on; }

static void batchnorm_backward(snn_node *node)
{
    bn_saved *s = node->saved;
    snn_tensor *x = node->inputs[0], *gamma = node->inputs[1], *beta = node->inputs[2];
    float *dx = snn_grad_for(x), *dgamma = snn_grad_for(gamma), *dbeta = snn_grad_for(beta);
    /* A synced backward runs its exchange even with nothing to compute here: every rank must
     * make the same collectives, whatever its own graph needs. */
    if (s->synced) {
        snn_batchnorm_backward_synced(sync_on ? &sync : NULL, dx, dgamma, dbeta,
                                      node->out->grad->data, x, gamma->data, s->mean, s->invstd,
                                      s->N, s->C, s->HW);
        return;
    }
    if (!dx && !dgamma && !dbeta) return;
    /* x's values, or a conv output kept as bf16 unpacked into scratch (autograd/bf16_keep.c) */
    snn_step_scratch mark = snn_step_scratch_mark(x->device);
    const float *xv = snn_saved_values("snn_batchnorm2d (backward)", x);
    if (!xv) {
        snn_backward_out_of_memory();
        return;
    }
    snn_kernels_for(x->device)->batchnorm_backward(dx, dgamma, dbeta, node->out->grad->data, xv,
                                                   gamma->data, s->mean, s->invstd, s->N, s->C, s->HW);
    snn_step_scratch_release(x->device, mark);
}

/* Eval mode with gradients: y = x * scale + shift, scale = gamma / sqrt(rv + eps),
 * shift = beta - rm * scale, each (C, 1, 1) broadcast over (N, C, H, W). */
static snn_tensor *batchnorm_eval_composed(snn_tensor *x, snn_tensor *gamma, snn_tensor *beta,
                                           snn_tensor *running_mean, snn_tensor *running_var,
                                           float eps)
{
    snn_shape column = SNN_SHAPE(gamma->numel, 1, 1);
    snn_tensor *rv = snn_detach(running_var), *rm = snn_detach(running_mean);
    snn_tensor *invstd = snn_exp(snn_scale(snn_log(snn_add_scalar(rv, eps)), -0.5f));
    snn_tensor *scale = snn_reshape(snn_mul(gamma, invstd), column);
    snn_tensor *shift = snn_sub(snn_reshape(beta, column), snn_mul(snn_reshape(rm, column), scale));
    return snn_add(snn_mul(x, scale), shift);
}

snn_tensor *snn_batchnorm2d(snn_tensor *x, snn_tensor *gamma, snn_tensor *beta,
                            snn_tensor *running_mean, snn_tensor *running_var, bool training,
                            float momentum, float eps)
{
    const char *fn = "snn_batchnorm2d";
    image_layout l;
    if (image_layout_read(fn, "input", x, &l)) return NULL;
    const char *names[4] = {"gamma", "beta", "running_mean", "running_var"};
    snn_tensor *params[4] = {gamma, beta, running_mean, running_var};
    for (int i = 0; i < 4; i++)
        if (snn_check_rank(fn, names[i], params[i], 1, "(C)") ||
            snn_check_dim(fn, names[i], params[i], 0, l.C, "C (input channels)") ||
            snn_check_same_device(fn, "input", x, names[i], params[i]))
            return NULL;
    if (!(eps > 0.0f) || !(momentum >= 0.0f && momentum <= 1.0f))
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad arguments (expected eps > 0 and momentum "
                              "in [0, 1], got eps %g, momentum %g)", fn, (double)eps, (double)momentum);
    if (training && (int64_t)l.N * l.H * l.W < 2)
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument 'input' (training needs more than "
                              "one value per channel to compute a variance, got N*H*W = %lld)", fn,
                              (long long)l.N * l.H * l.W);
    const snn_kernels *k = snn_kernels_for(x->device); /* a table: snn_tensor_new checks */
    SNN_REQUIRE_KERNEL(k, fn, batchnorm_forward_train);
    SNN_REQUIRE_KERNEL(k, fn, batchnorm_forward_eval);
    SNN_REQUIRE_KERNEL(k, fn, batchnorm_backward);
    snn_tensor *inputs[3] = {x, gamma, beta};
    bool record = snn_should_record(3, inputs);
    int HW = l.H * l.W;

    if (!training) {
        if (record) return batchnorm_eval_composed(x, gamma, beta, running_mean, running_var, eps);
        snn_tensor *y = snn_step_tensor(fn, x->shape, x->device);
        if (!y) return NULL;
        k->batchnorm_forward_eval(y->data, x->data, gamma->data, beta->data, running_mean->data,
                                  running_var->data, l.N, l.C, HW, eps);
        return y;
    }

    snn_tensor *y = snn_step_tensor(fn, x->shape, x->device);
    float *mean = y ? snn_step_alloc(fn, (size_t)l.C * sizeof(float), x->device) : NULL;
    float *invstd = mean ? snn_step_alloc(fn, (size_t)l.C * sizeof(float), x->device) : NULL;
    if (!invstd) return NULL;
    if (sync_on) {
        if (snn_batchnorm_forward_synced(&sync, y->data, mean, invstd, running_mean, running_var,
                                         x, gamma->data, beta->data, l.N, l.C, HW, momentum,
                                         eps) != SNN_OK)
            return NULL;
    } else {
        k->batchnorm_forward_train(y->data, mean, invstd, running_mean->data, running_var->data,
                                   x->data, gamma->data, beta->data, l.N, l.C, HW, momentum, eps);
    }
    if (record) {
        snn_node *node = snn_tape_record(fn, batchnorm_backward, y, 3, inputs, sizeof(bn_saved));
        if (!node) return NULL;
        *(bn_saved *)node->saved = (bn_saved){l.N, l.C, HW, mean, invstd, sync_on};
    }
    return y;
}
