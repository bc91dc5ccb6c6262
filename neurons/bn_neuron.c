/*
 * bn_neuron.c - snn_batchnorm_neuron: a training-mode batch-norm, an optional residual add and
 * a multi-step IF / LIF neuron layer as one tape node. And snn_neuron_multistep_residual, the
 * same kernel without the batch-norm, for inference: the neurons of a ResNet block's output
 * take the residual sum as they load their input, and the sum is never written.
 *
 *   spikes = neuron( bn_train(x) [+ residual] )          x, residual, spikes: (T, N, C, H, W)
 *
 * Why one node. Run as three ops, the batch-norm writes its output y (4 B per element and
 * step), the residual add reads y and the residual and writes y again, and the neuron reads y
 * and writes H (kept for backward, in y's memory) and the spikes. Here the neuron kernel makes
 * X = bn(x) + residual while it loads x (lif_bn_forward, lif.c / lif.cu), so the pass over
 * memory after the statistics reads x (and the residual) and writes the spikes: 8-12 B per
 * element against 20-32 B. Nothing is kept but the spikes and the per-channel statistics:
 * backward recomputes H from x with the same kernel (read x, write H to scratch), then runs the
 * neuron's BPTT and the batch-norm's backward. A step keeps one tensor per fused layer less
 * (4 B per element and step).
 *
 * Bits. The statistics come from batchnorm_stats and batchnorm_stats_merge with one rank, which
 * give forward_train's bits (kernels/kernels.h); X is the device's normalise expression, then the
 * add; the BPTT and the batch-norm backward are the kernels the separate ops run, on the same
 * values. So the spikes, running statistics and every gradient equal those of
 * snn_batchnorm2d -> snn_add_into -> snn_neuron_multistep on the same device, bit for bit
 * (tests/test_bn_neuron.c, tests/test_cuda_neurons.c).
 *
 * Backward scratch: dL/dX, 4 B per element and step, from the step arena, given back when the
 * node's backward ends. On CUDA (lif_bn_backward, T <= 16) the recompute and the BPTT are one
 * kernel that keeps H in registers; the CPU, or a longer run, writes H to scratch too (4 B
 * more) and runs lif_bn_forward, lif_backward and axpy.
 *
 * Without the fused kernel. A neuron table may lack lif_bn_forward: the reference table has
 * none (kernels/ref/neuron_table.c), the fusion being an optimisation. Both ops then run the
 * separate ops they stand for (batch-norm, add, multi-step neuron), the same function.
 */
#include "neuron_op.h"
#include "tensor/arena.h"
#include "tensor/error.h"
#include "kernels/kernels.h"

typedef struct bn_neuron_saved {
    snn_neuron_params params;
    snn_neuron_dims dims;   /* T, N, C, plane = H W */
    double *stats;          /* (C, 3) merged (count, mean, M2) */
    float *mean, *invstd;   /* (C) what the batch-norm backward reads */
} bn_neuron_saved;

static void bn_neuron_backward(snn_node *node)
{
    const char *fn = "snn_batchnorm_neuron (backward)";
    const bn_neuron_saved *sv = node->saved;
    snn_tensor *x = node->inputs[0], *gamma = node->inputs[1], *beta = node->inputs[2];
    snn_tensor *residual = node->inputs[3];
    if (!node->out->grad) return;
    float *dx = snn_grad_for(x), *dgamma = snn_grad_for(gamma), *dbeta = snn_grad_for(beta);
    float *dresidual = snn_grad_for(residual);
    if (!dx && !dgamma && !dbeta && !dresidual) return;
    const snn_kernels *k = snn_kernels_for(x->device);
    const snn_neuron_kernels *nk = snn_neuron_kernels_for(x->device);
    SNN_ASSERT(k && nk);
    const int64_t n = x->numel;
    /* the device's one-pass kernel (H in registers) where it has one, else H in scratch */
    const bool one_pass = nk->lif_bn_backward && sv->dims.T <= SNN_NEURON_BN_BACKWARD_MAX_T;
    if (!one_pass && (!nk->lif_bn_forward || !nk->lif_backward)) {
        /* forward ran the fused kernel, so only a change of kernel set since gets here */
        snn_error(SNN_ERR_STATE, "%s: the %s neuron kernels have no '%s'; hint: keep one "
                  "kernel set (snn_set_kernels) from forward to backward", fn, nk->name,
                  nk->lif_bn_forward ? "lif_backward" : "lif_bn_forward");
        snn_backward_fail(snn_last_status());
        return;
    }
    snn_step_scratch mark = snn_step_scratch_mark(x->device);
    float *dX = snn_step_alloc(fn, (size_t)n * sizeof(float), x->device); /* (T, M) dL/dX */
    float *h = dX && !one_pass ? snn_step_alloc(fn, (size_t)n * sizeof(float), x->device) : NULL;
    if (!dX || (!one_pass && !h)) {
        snn_backward_out_of_memory();
        return;
    }
    /* a shortcut of spikes the model kept as bits (spike_pack.c) is read as bits by both
     * paths' kernels (lif_bn_backward, lif_bn_forward) */
    const bool residual_bits = residual && !residual->data;
    const snn_neuron_bn_input in = {x->data, sv->stats, sv->invstd, gamma->data, beta->data,
                                    residual && !residual_bits ? residual->data : NULL,
                                    residual_bits ? residual->spike_bits : NULL};
    const float *dspike = node->out->grad->data;
    if (one_pass) {
        nk->lif_bn_backward(dX, dresidual, dspike, &in, &sv->params, &sv->dims);
    } else {
        nk->lif_bn_forward(NULL, NULL, h, NULL, &in, &sv->params, &sv->dims);  /* (T, M) H */
        const float *spike = snn_saved_values(fn, node->out);
        if (!spike) {
            snn_backward_out_of_memory();
            return;
        }
        k->fill(dX, 0.0f, n);
        nk->lif_backward(dX, NULL, NULL, dspike, NULL, h, spike, NULL, NULL, NULL, NULL,
                         &sv->params, &sv->dims);
        if (dresidual) k->axpy(dresidual, 1.0f, dX, n); /* the add's backward */
    }
    if (dx || dgamma || dbeta)
        k->batchnorm_backward(dx, dgamma, dbeta, dX, x->data, gamma->data, sv->mean, sv->invstd,
                              (int)(sv->dims.T * sv->dims.N), (int)sv->dims.C,
                              (int)sv->dims.plane);
    snn_step_scratch_release(x->device, mark);
}

/* The arguments snn_batchnorm_neuron refuses, with the message naming the one at fault. */
static snn_status check_args(const char *fn, snn_tensor *x, snn_tensor *const params[4],
                             float momentum, float eps, snn_tensor *residual,
                             const snn_neuron_config *cfg)
{
    if (snn_check_tensor(fn, "x", x)) return snn_last_status();
    if (snn_neuron_config_check(fn, cfg) != SNN_OK) return snn_last_status();
    if (!snn_neuron_takes_bn_input(cfg->kind))
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad argument 'cfg' (expected an if or lif neuron, "
                         "got %s); hint: snn_batchnorm2d, then snn_neuron_multistep", fn,
                         snn_neuron_kind_name(cfg->kind));
    if (x->shape.ndim != 5) {
        char buf[96];
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad argument 'x' (expected (T, N, C, H, W), got "
                         "%s)", fn, snn_shape_str(x->shape, buf, sizeof buf));
    }
    const int64_t C = x->shape.dim[2];
    const char *names[4] = {"gamma", "beta", "running_mean", "running_var"};
    for (int i = 0; i < 4; i++)
        if (snn_check_rank(fn, names[i], params[i], 1, "(C)") ||
            snn_check_dim(fn, names[i], params[i], 0, C, "C (input channels)") ||
            snn_check_same_device(fn, "x", x, names[i], params[i]))
            return snn_last_status();
    if (!(eps > 0.0f) || !(momentum >= 0.0f && momentum <= 1.0f))
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad arguments (expected eps > 0 and momentum in "
                         "[0, 1], got eps %g, momentum %g)", fn, (double)eps, (double)momentum);
    if (x->numel / (C > 0 ? C : 1) < 2)
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad argument 'x' (training needs more than one "
                         "value per channel to compute a variance, got %lld)", fn,
                         (long long)(x->numel / (C > 0 ? C : 1)));
    if (residual && (snn_check_same_device(fn, "x", x, "residual", residual) ||
                     snn_check_same_shape(fn, "x", x, "residual", residual)))
        return snn_last_status();
    if (snn_batchnorm_sync_enabled())
        return snn_error(SNN_ERR_UNSUPPORTED, "%s: the batch-norm is synced across ranks "
                         "(--sync-bn); hint: snn_batchnorm2d, then snn_neuron_multistep", fn);
    return SNN_OK;
}

/* The ops snn_batchnorm_neuron stands for, for a device without the fused kernel: the
 * batch-norm's output, summed with the residual in place, is read by the neuron alone, which
 * may then keep H in its memory (consume). */
static snn_tensor *separate_ops(snn_tensor *x, snn_tensor *const params[4], float momentum,
                                float eps, snn_tensor *residual, const snn_neuron_config *cfg,
                                snn_tensor **activity)
{
    snn_tensor *y = snn_batchnorm2d(x, params[0], params[1], params[2], params[3], true,
                                    momentum, eps);
    if (y && residual) y = snn_add_into(y, residual);
    return y ? snn_neuron_multistep_consume(y, cfg, NULL, activity) : NULL;
}

snn_tensor *snn_batchnorm_neuron(snn_tensor *x, snn_tensor *gamma, snn_tensor *beta,
                                 snn_tensor *running_mean, snn_tensor *running_var,
                                 float momentum, float eps, snn_tensor *residual,
                                 const snn_neuron_config *cfg, snn_tensor **activity)
{
    const char *fn = "snn_batchnorm_neuron";
    if (activity) *activity = NULL;
    snn_tensor *params[4] = {gamma, beta, running_mean, running_var};
    if (check_args(fn, x, params, momentum, eps, residual, cfg) != SNN_OK) return NULL;
    const snn_kernels *k = snn_kernels_or_error(fn, x->device);
    const snn_neuron_kernels *nk = k ? snn_neuron_kernels_or_error(fn, x->device) : NULL;
    if (!nk) return NULL;
    if (!nk->lif_bn_forward) return separate_ops(x, params, momentum, eps, residual, cfg, activity);
    SNN_REQUIRE_KERNEL(k, fn, batchnorm_stats);
    SNN_REQUIRE_KERNEL(k, fn, batchnorm_stats_merge);
    SNN_REQUIRE_KERNEL(k, fn, batchnorm_backward);
    SNN_REQUIRE_KERNEL(k, fn, fill);
    SNN_REQUIRE_KERNEL(k, fn, axpy);
    SNN_REQUIRE_KERNEL(nk, fn, lif_backward);

    const snn_neuron_dims d = snn_neuron_dims_of(x);
    const int C = (int)d.C;
    const snn_neuron_params p = snn_neuron_params_from(cfg);
    snn_tensor *inputs[4] = {x, gamma, beta, residual};
    const bool record = snn_should_record(4, inputs);
    snn_tensor *spike = snn_neuron_spikes_new(fn, x, cfg->kind, record);
    snn_tensor *act = spike && activity ? snn_neuron_activity_new(fn, &d, x->device) : NULL;
    const size_t stats_bytes = (size_t)3 * (size_t)C * sizeof(double);
    double *merged = spike && (act || !activity) ? snn_step_alloc(fn, stats_bytes, x->device)
                                                 : NULL;
    float *mean = merged ? snn_step_alloc(fn, (size_t)C * sizeof(float), x->device) : NULL;
    float *invstd = mean ? snn_step_alloc(fn, (size_t)C * sizeof(float), x->device) : NULL;
    if (!invstd) return NULL;
    /* a tape's spikes: their bits too, written by the kernel, for snn_spikes_pack */
    if (spike->spikes) {
        const size_t words = (size_t)((x->numel + 31) / 32);
        spike->spike_bits = snn_step_alloc(fn, words * sizeof(uint32_t), x->device);
        if (!spike->spike_bits) return NULL;
    }

    /* the statistics: this batch's (count, mean, M2) per channel, "merged" over one rank */
    snn_step_scratch mark = snn_step_scratch_mark(x->device);
    double *stats = snn_step_alloc(fn, stats_bytes, x->device);
    if (!stats) return NULL;
    k->batchnorm_stats(stats, x->data, (int)(d.T * d.N), C, (int)d.plane);
    k->batchnorm_stats_merge(merged, mean, invstd, running_mean->data, running_var->data, stats, 1,
                             C, momentum, eps);
    snn_step_scratch_release(x->device, mark);

    const snn_neuron_bn_input in = {x->data, merged, invstd, gamma->data, beta->data,
                                    residual ? residual->data : NULL, NULL};
    nk->lif_bn_forward(spike->data, spike->spike_bits, NULL, act ? act->data : NULL, &in, &p, &d);

    if (record) {
        snn_node *node = snn_tape_record(fn, bn_neuron_backward, spike, 4, inputs,
                                         sizeof(bn_neuron_saved));
        if (!node) return NULL;
        *(bn_neuron_saved *)node->saved = (bn_neuron_saved){p, d, merged, mean, invstd};
    }
    if (activity) *activity = act;
    return spike;
}

snn_tensor *snn_neuron_multistep_residual(snn_tensor *x, snn_tensor *residual,
                                          const snn_neuron_config *cfg, snn_tensor **activity)
{
    const char *fn = "snn_neuron_multistep_residual";
    if (activity) *activity = NULL;
    if (snn_check_tensor(fn, "x", x) || snn_check_tensor(fn, "residual", residual) ||
        snn_check_same_device(fn, "x", x, "residual", residual) ||
        snn_check_same_shape(fn, "x", x, "residual", residual))
        return NULL;
    /* refused before anything is written (the fallback below adds into x) */
    if (snn_neuron_config_check(fn, cfg) != SNN_OK) return NULL;
    if (x->shape.ndim < 2) {
        char buf[96];
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument 'x' (expected (T, N, ...), got "
                              "%s)", fn, snn_shape_str(x->shape, buf, sizeof buf));
    }
    snn_tensor *inputs[2] = {x, residual};
    if (snn_should_record(2, inputs) || !snn_neuron_takes_bn_input(cfg->kind)) /* the two ops */
        return snn_neuron_multistep(snn_add_into(x, residual), cfg, NULL, activity);
    const snn_neuron_kernels *nk = snn_neuron_kernels_or_error(fn, x->device);
    if (!nk) return NULL;
    if (!nk->lif_bn_forward) /* no fused kernel (the reference table): the sum, then neurons */
        return snn_neuron_multistep(snn_add(x, residual), cfg, NULL, activity);
    const snn_neuron_dims d = snn_neuron_dims_of(x);
    const snn_neuron_params p = snn_neuron_params_from(cfg);
    snn_tensor *spike = snn_step_tensor(fn, x->shape, x->device);
    snn_tensor *act = spike && activity ? snn_neuron_activity_new(fn, &d, x->device) : NULL;
    if (!spike || (activity && !act)) return NULL;
    if (x->numel > 0) {
        const snn_neuron_bn_input in = {x->data, NULL, NULL, NULL, NULL, residual->data, NULL};
        nk->lif_bn_forward(spike->data, NULL, NULL, act ? act->data : NULL, &in, &p, &d);
    } else if (act && snn_tensor_fill(act, 0.0f) != SNN_OK) {
        return NULL;
    }
    if (activity) *activity = act;
    return spike;
}
