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
 * (tests/test_bn_neuron.c, test_bn_neuron_carry.c, test_cuda_bn_neuron.c). One exception:
 * CUDA's backward from 17 to SNN_NEURON_BN_BACKWARD_MAX_T steps
 * (lif_bn_backward_chunked_kernel, lif_bn_backward.cu), whose gradients equal them to rounding.
 *
 * Backward memory. dL/dX, 4 B per element and step, goes into x's gradient, which x (a conv's
 * output, with no other reader) has not had yet: the batch-norm's backward then replaces it by
 * dL/dx in place (batchnorm_backward_in_place), so dL/dX needs no buffer of its own (else it
 * is scratch from the step arena, given back when the node's backward ends). Where the conv
 * that made x can make dL/dx as it reads dL/dX (TF32 / BF16, autograd/grad_deferred.c), that
 * last step is left to it: the gradient stays dL/dX, with a record of x, the statistics and
 * the sums. x is read as the model kept it: floats, or a conv output's bf16 bits
 * (autograd/bf16_keep.c), never unpacked.
 * On CUDA (lif_bn_backward, T <= 64) the recompute and the BPTT are one kernel that keeps H in
 * registers; the CPU, or a longer run, writes H to scratch (4 B per element and step) and runs
 * lif_bn_forward, lif_backward and axpy.
 *
 * A residual made by a batch-norm (snn_batchnorm_neuron_bn_residual). A ResNet block that
 * downsamples adds bn_r(conv(x)) to its tail: run as its own op, that batch-norm writes its
 * output, which the fused neurons read in forward and again in backward's recompute of H, so a
 * step keeps it to the end (0.92 MB an image of a BF16 ResNet-18 step at T = 4, 7.3 at T = 32).
 * Here the node takes the conv's output rx and the batch-norm's parameters as inputs 3-5, the
 * neurons make the residual from rx as they load it (residual_bn, with the batch-norm's own
 * expression: the bits it would have written), and backward turns dL/dresidual = dX into rx's
 * gradient with batchnorm_backward_in_place in rx's first gradient. The step keeps rx, which
 * that batch-norm's backward reads anyway, and the statistics. The model takes it where the
 * tail's layer carries no state (nn/model_resnet.c). Bits: the separate ops'.
 *
 * Without the fused kernel. A neuron table may lack lif_bn_forward: the reference table has
 * none (kernels/ref/neuron_table.c), the fusion being an optimisation. Every op here then runs
 * the separate ops it stands for (batch-norm, add, multi-step neuron), the same function.
 *
 * The repeated stem (snn_batchnorm_neuron_repeat). A directly encoded image is the input of
 * every step, so the stem's conv and batch-norm run once on the N images and their output is
 * repeated over T: 4 B per element and step written, then read, then kept as H. Here the
 * kernel reads the one bn(x) at every step (x_repeated), and backward adds the steps' dL/dX
 * into one (N, C, H, W) gradient in the order the repeat's backward adds them, so the bits
 * are again those of the separate ops (batch-norm, snn_repeat_time, neurons).
 *
 * The carrying variants (bn_neuron_carry.c). snn_batchnorm_neuron_carry and _state run
 * the same kernel from a layer's carried state V_init and leave the state V_last: online
 * training (SLTT) and BPTT with time checkpoints (docs/temporal.md). Their bits are those of
 * the same ops ending in snn_neuron_multistep_carry / _state (neurons/carry.c). The carry op
 * with a tape leaves V_last in its backward, not its forward: the backward recomputes H from
 * V_init, which is then still the layer's state, so nothing is copied.
 */
#include "bn_neuron.h"
#include "tensor/arena.h"
#include "tensor/error.h"
#include "kernels/kernels.h"


/* The neuron part's backward on the batch-norm-fed input `in` (its state fields included):
 *   dX (T, M) = dL/dX, written ((M), the sum over t, for in->x_repeated);
 *   dresidual += dX when not NULL; in->dv_init += dL/dV_init;
 *   in->v_last = V_last when not NULL (it may alias in->v_init: the deferred carry).
 * On the device's one-pass kernel (H in registers) where it has one, else H recomputed into
 * scratch (taken after the caller's scratch mark), then lif_backward (twice with both dS and
 * dV_last, as the unfused state op's two nodes) and axpy. `spikes` is the op's output, for
 * lif_backward's spike argument. False when it could not run (reported to snn_backward). */
bool snn_bn_neuron_part_backward(const char *fn, const snn_neuron_params *p,
                                 const snn_neuron_dims *d, const snn_neuron_bn_input *in,
                                 float *dX, float *dresidual, const float *dspike,
                                 const snn_tensor *spikes)
{
    const snn_kernels *k = snn_kernels_for(spikes->device);
    const snn_neuron_kernels *nk = snn_neuron_kernels_for(spikes->device);
    SNN_ASSERT(k && nk);
    const int64_t n = spikes->numel;
    /* the one-pass kernel takes dS and dV_last together (one recurrence: G_H is linear in
     * both); the scratch path below runs lif_backward once for each, as the unfused op does */
    const bool one_pass = snn_bn_neuron_one_pass(nk, d);
    SNN_ASSERT(one_pass || dX != dspike);
    if (!one_pass && (!nk->lif_bn_forward || !nk->lif_backward)) {
        /* forward ran the fused kernel, so only a change of kernel set since gets here */
        snn_error(SNN_ERR_STATE, "%s: the %s neuron kernels have no '%s'; hint: keep one "
                  "kernel set (snn_set_kernels) from forward to backward", fn, nk->name,
                  nk->lif_bn_forward ? "lif_backward" : "lif_bn_forward");
        snn_backward_fail(snn_last_status());
        return false;
    }
    if (one_pass) {
        nk->lif_bn_backward(dX, dresidual, dspike, in, p, d);
        return true;
    }
    float *h = snn_step_alloc(fn, (size_t)n * sizeof(float), spikes->device); /* (T, M) H */
    /* the repeated stem's dX is (M): the steps' dL/dX[t] go to scratch, then their sum */
    float *dX_sum = in->x_repeated ? dX : NULL;
    if (h && dX_sum) dX = snn_step_alloc(fn, (size_t)n * sizeof(float), spikes->device);
    const float *spike = h && dX ? snn_saved_values(fn, spikes) : NULL;
    if (!spike) {
        snn_backward_out_of_memory();
        return false;
    }
    /* H, and V_last where in->v_last asks (a deferred carry: it may overwrite in->v_init,
     * which lif_backward then reads only for PLIF's dL/dk, and the fused kinds are IF / LIF) */
    nk->lif_bn_forward(NULL, NULL, h, NULL, in, p, d);
    k->fill(dX, 0.0f, n);
    /* the state op's two nodes (carry.c), the V's first: dL/dV_last, then dL/dS */
    if (in->dv_last)
        nk->lif_backward(dX, in->dv_init, NULL, NULL, in->dv_last, h, spike, NULL, in->v_init,
                         NULL, NULL, p, d);
    if (dspike || !in->dv_last)
        nk->lif_backward(dX, in->dv_init, NULL, dspike, NULL, h, spike, NULL, in->v_init, NULL,
                         NULL, p, d);
    if (dresidual) k->axpy(dresidual, 1.0f, dX, n); /* the add's backward */
    if (dX_sum) { /* the repeat's backward: from 0, one step at a time */
        const int64_t m = snn_neuron_dims_step(d);
        k->fill(dX_sum, 0.0f, m);
        for (int64_t t = 0; t < d->T; t++) k->axpy(dX_sum, 1.0f, dX + t * m, m);
    }
    return true;
}

/* What a backward reads of the op's input x and residual (into in->x or in->x_bf16,
 * in->residual, in->residual_bits): x as the model kept it, a conv's output as bf16
 * (autograd/bf16_keep.c) or as floats, and a shortcut of spikes kept as bits (spike_pack.c) as
 * bits, which both paths' kernels read (lif_bn_backward, lif_bn_forward,
 * batchnorm_backward_in_place); a float residual through snn_saved_values (scratch after the
 * caller's mark). False, reported, when memory runs out. */
bool snn_bn_neuron_read_saved_inputs(const char *fn, const snn_tensor *x,
                                     const snn_tensor *residual, snn_neuron_bn_input *in)
{
    const bool bits = residual && !residual->data && residual->spike_bits;
    in->x_bf16 = !x->data && x->bf16 ? x->bf16 : NULL;
    in->x = in->x_bf16 ? NULL : snn_saved_values(fn, x);
    in->residual = residual && !bits ? snn_saved_values(fn, residual) : NULL;
    in->residual_bits = bits ? residual->spike_bits : NULL;
    if ((!in->x && !in->x_bf16) || (residual && !bits && !in->residual)) {
        snn_backward_out_of_memory();
        return false;
    }
    return true;
}

/* The images a node's batch-norm normalised: T N, or N repeated over T */
static int64_t images_of(const snn_bn_neuron_saved *sv)
{
    return sv->x_repeated ? sv->dims.N : sv->dims.T * sv->dims.N;
}

/* snn_batchnorm_neuron_bn_residual's residual batch-norm's backward, from dL/dresidual = dX:
 * into rx's gradient, r_gamma's and r_beta's (node inputs 3-5), with the bits of the separate
 * ops, whose residual gradient is a zero-filled buffer plus dX (the add's axpy) and whose
 * batch-norm backward adds to rx's zero-filled gradient: here dX is added to zeros in rx's
 * first gradient (or scratch) and batchnorm_backward_in_place replaces it. False when it
 * could not run (reported). */
static bool shortcut_backward(const char *fn, snn_node *node, const snn_bn_residual *r,
                              const float *dX, float *drx_whole, int64_t images)
{
    const snn_bn_neuron_saved *sv = node->saved;
    snn_tensor *rx = node->inputs[3];
    const snn_kernels *k = snn_kernels_for(rx->device);
    const int64_t n = rx->numel;
    /* rx's first gradient (taken before the caller's scratch mark: a gradient's tensor struct
     * is step memory, which the mark's release gives back); else scratch, added into rx's
     * gradient where it wants one (which it has by then: snn_grad_for makes none here) */
    float *buf = drx_whole, *into = buf ? NULL : snn_grad_for(rx);
    if (!buf) buf = snn_step_alloc(fn, (size_t)n * sizeof(float), rx->device);
    if (!buf) {
        snn_backward_out_of_memory();
        return false;
    }
    k->fill(buf, 0.0f, n);
    k->axpy(buf, 1.0f, dX, n);
    k->batchnorm_backward_in_place(buf, snn_grad_for(node->inputs[4]),
                                   snn_grad_for(node->inputs[5]), r->x, r->x_bf16, r->gamma,
                                   sv->r_mean, sv->r_invstd, (int)images, (int)sv->dims.C,
                                   (int)sv->dims.plane);
    if (into) k->axpy(into, 1.0f, buf, n); /* as batchnorm_backward adds into it */
    return true;
}

static void bn_neuron_backward(snn_node *node)
{
    const char *fn = "snn_batchnorm_neuron (backward)";
    const snn_bn_neuron_saved *sv = node->saved;
    snn_tensor *x = node->inputs[0], *gamma = node->inputs[1], *beta = node->inputs[2];
    /* input 3: the residual, or (sv->r_stats) the residual's batch-norm's input rx */
    snn_tensor *residual = sv->r_stats ? NULL : node->inputs[3];
    snn_tensor *rx = sv->r_stats ? node->inputs[3] : NULL;
    if (!node->out->grad) return;
    const snn_kernels *k = snn_kernels_for(x->device);
    SNN_ASSERT(k);
    const float *dspike = node->out->grad->data;
    /* x's first gradient (a conv output has no other reader) takes dL/dX, which the
     * batch-norm's backward then replaces by dL/dx in place: no buffer of dL/dX's own. Where
     * the device's one-pass kernel runs, it is the spikes' gradient itself, handed over: the
     * kernel loads every dL/dS of its elements before it stores their dL/dX (lif_bn_backward.cu) */
    const bool one_pass = snn_bn_neuron_one_pass(snn_neuron_kernels_for(x->device), &sv->dims);
    float *dx_whole = !k->batchnorm_backward_in_place ? NULL
                      : one_pass && snn_grad_can_hand_over(node->out, x)
                          ? snn_grad_hand_over(node->out, x)
                          : snn_grad_unfilled(x);
    float *dx = dx_whole ? dx_whole : snn_grad_for(x);
    float *dgamma = snn_grad_for(gamma), *dbeta = snn_grad_for(beta);
    float *dresidual = snn_grad_for(residual);
    const bool r_grads = rx && (rx->requires_grad || node->inputs[4]->requires_grad ||
                                node->inputs[5]->requires_grad);
    if (!dx && !dgamma && !dbeta && !dresidual && !r_grads && !sv->v_state) return;
    /* the carry op's V_init is its layer's state: still there unless the layer reset or freed
     * it since the forward (snn_batchnorm_neuron_carry_forget), which would be a wrong H */
    const int pending = sv->v_state ? snn_bn_carry_pending_find(sv->v_state) : -1;
    if (sv->v_state && pending < 0) {
        snn_error(SNN_ERR_STATE, "snn_batchnorm_neuron_carry (backward): the state this call "
                  "started from was reset or freed before its backward ran; hint: run backward "
                  "before resetting a layer that carries its state");
        snn_backward_fail(SNN_ERR_STATE);
        return;
    }
    const int64_t n = x->numel;
    float *drx_whole = r_grads ? snn_grad_unfilled(rx) : NULL; /* likewise for rx (below) */
    /* TF32 / BF16: the batch-norm's sums made by the neuron kernel as it writes dL/dX. Where
     * the conv that made x takes a gradient with its last step left (grad_deferred.c), dL/dx
     * is left to it, and the sums it needs then outlive this backward: taken before the mark */
    const bool sums = dx_whole && snn_bn_neuron_folds_sums(k, snn_neuron_kernels_for(x->device),
                                                           &sv->dims);
    const bool defer = sums && x->grad_fn && x->grad_fn->takes_deferred_grad && !x->retain_grad;
    const size_t sums_bytes = 3 * (size_t)sv->dims.C * sizeof(double);
    double *dy_sums = defer ? snn_step_alloc(fn, sums_bytes, x->device) : NULL;
    snn_step_scratch mark = snn_step_scratch_mark(x->device);
    if (sums && !defer) dy_sums = snn_step_alloc(fn, sums_bytes, x->device);
    if (sums && !dy_sums) {
        snn_backward_out_of_memory();
        return;
    }
    float *dX = dx_whole ? dx_whole /* x's shape dL/dX */
                         : snn_step_alloc(fn, (size_t)n * sizeof(float), x->device);
    if (!dX) {
        snn_backward_out_of_memory();
        return;
    }
    /* the carry op's state: H recomputed from V_init, then V_last left in its place */
    snn_neuron_bn_input in = {.stats = sv->stats, .invstd = sv->invstd, .gamma = gamma->data,
                              .beta = beta->data, .v_init = sv->v_state, .v_last = sv->v_state,
                              .x_repeated = sv->x_repeated, .dy_sums = dy_sums};
    if (!snn_bn_neuron_read_saved_inputs(fn, x, residual, &in)) return;
    snn_bn_residual r_in;
    if (rx) {
        r_in = (snn_bn_residual){.x_bf16 = !rx->data && rx->bf16 ? rx->bf16 : NULL,
                                 .stats = sv->r_stats, .invstd = sv->r_invstd,
                                 .gamma = node->inputs[4]->data, .beta = node->inputs[5]->data};
        r_in.x = r_in.x_bf16 ? NULL : snn_saved_values(fn, rx);
        if (!r_in.x && !r_in.x_bf16) {
            snn_backward_out_of_memory();
            return;
        }
        in.residual_bn = &r_in;
    }
    if (!snn_bn_neuron_part_backward(fn, &sv->params, &sv->dims, &in, dX, dresidual, dspike,
                                     node->out))
        return;
    /* the residual's batch-norm, before dX becomes dL/dx below: dL/dresidual = dL/dX */
    if (r_grads && !shortcut_backward(fn, node, &r_in, dX, drx_whole, images_of(sv))) return;
    if (pending >= 0) snn_bn_carry_pending_remove(pending); /* V_last is in the state now */
    /* the batch-norm's backward over the images it normalised: T N, or N repeated */
    const int64_t images = images_of(sv);
    if (dx_whole && in.dy_sums) {
        /* dL/dx left to x's conv where x is read from its own memory (not unpacked to scratch,
         * which the release below gives back): dgamma and dbeta now, dx from the sums later */
        const snn_bn_dout later = {.x = in.x, .x_bf16 = in.x ? NULL : in.x_bf16,
                                   .gamma = gamma->data, .save_mean = sv->mean,
                                   .save_invstd = sv->invstd, .sums = in.dy_sums};
        const bool left = defer && (in.x ? in.x == x->data : in.x_bf16 == x->bf16) &&
                          snn_grad_defer_bn(x, &later, (int)images, (int)sv->dims.C,
                                            (int)sv->dims.plane);
        k->batchnorm_backward_in_place_sums(left ? NULL : dx_whole, dgamma, dbeta, in.x,
                                            in.x_bf16, gamma->data, sv->mean, sv->invstd,
                                            in.dy_sums, (int)images, (int)sv->dims.C,
                                            (int)sv->dims.plane);
    } else if (dx_whole) {
        k->batchnorm_backward_in_place(dx_whole, dgamma, dbeta, in.x, in.x_bf16, gamma->data,
                                       sv->mean, sv->invstd, (int)images, (int)sv->dims.C,
                                       (int)sv->dims.plane);
    } else if (dx || dgamma || dbeta) { /* it reads x as floats */
        const float *xv = in.x ? in.x : snn_saved_values(fn, x);
        if (!xv) {
            snn_backward_out_of_memory();
            return;
        }
        k->batchnorm_backward(dx, dgamma, dbeta, dX, xv, gamma->data, sv->mean, sv->invstd,
                              (int)images, (int)sv->dims.C, (int)sv->dims.plane);
    }
    snn_step_scratch_release(x->device, mark);
}

/* The arguments snn_batchnorm_neuron refuses, with the message naming the one at fault. x may
 * be kept as bf16 (snn_check_like). */
snn_status snn_bn_neuron_check_args(const char *fn, snn_tensor *x, snn_tensor *const params[4],
                                    float momentum, float eps, snn_tensor *residual,
                                    const snn_neuron_config *cfg, bool repeated)
{
    /* x may be a conv output kept as bf16 already (autograd/bf16_keep.c): the fused kernel
     * reads its bits (snn_neuron_bn_input.x_bf16); the separate ops, which need floats, say so */
    if (!(x && !x->data && x->bf16) && snn_check_tensor(fn, "x", x)) return snn_last_status();
    if (snn_neuron_config_check(fn, cfg) != SNN_OK) return snn_last_status();
    if (!snn_neuron_takes_bn_input(cfg->kind))
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad argument 'cfg' (expected an if or lif neuron, "
                         "got %s); hint: snn_batchnorm2d, then snn_neuron_multistep", fn,
                         snn_neuron_kind_name(cfg->kind));
    if (x->shape.ndim != (repeated ? 4 : 5)) {
        char buf[96];
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad argument 'x' (expected %s, got %s)", fn,
                         repeated ? "(N, C, H, W)" : "(T, N, C, H, W)",
                         snn_shape_str(x->shape, buf, sizeof buf));
    }
    const int64_t C = x->shape.dim[repeated ? 1 : 2];
    const char *names[4] = {"gamma", "beta", "running_mean", "running_var"};
    for (int i = 0; i < 4; i++)
        if (snn_check_rank(fn, names[i], params[i], 1, "(C)") ||
            snn_check_dim(fn, names[i], params[i], 0, C, "C (input channels)") ||
            snn_check_like(fn, "x", x, names[i], params[i], false))
            return snn_last_status();
    if (!(eps > 0.0f) || !(momentum >= 0.0f && momentum <= 1.0f))
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad arguments (expected eps > 0 and momentum in "
                         "[0, 1], got eps %g, momentum %g)", fn, (double)eps, (double)momentum);
    if (x->numel / (C > 0 ? C : 1) < 2)
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad argument 'x' (training needs more than one "
                         "value per channel to compute a variance, got %lld)", fn,
                         (long long)(x->numel / (C > 0 ? C : 1)));
    if (residual && snn_check_like(fn, "x", x, "residual", residual, true))
        return snn_last_status();
    if (snn_batchnorm_sync_enabled())
        return snn_error(SNN_ERR_UNSUPPORTED, "%s: the batch-norm is synced across ranks "
                         "(--sync-bn); hint: snn_batchnorm2d, then snn_neuron_multistep", fn);
    return SNN_OK;
}

/* Without the fused kernel: the neurons' input as the separate ops make it, batch-norm then
 * the residual add in place (params: gamma, beta, running mean, running var). */
snn_tensor *snn_bn_neuron_separate_input(snn_tensor *x, snn_tensor *const params[4],
                                         float momentum, float eps, snn_tensor *residual)
{
    snn_tensor *y = snn_batchnorm2d(x, params[0], params[1], params[2], params[3], true,
                                    momentum, eps);
    return y && residual ? snn_add_into(y, residual) : y;
}

/* The ops snn_batchnorm_neuron stands for, for a device without the fused kernel: the
 * neurons read their input alone, so they may keep H in its memory (consume). */
static snn_tensor *separate_ops(snn_tensor *x, snn_tensor *const params[4], float momentum,
                                float eps, snn_tensor *residual, const snn_neuron_config *cfg,
                                snn_tensor **activity)
{
    snn_tensor *y = snn_bn_neuron_separate_input(x, params, momentum, eps, residual);
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
    if (snn_bn_neuron_check_args(fn, x, params, momentum, eps, residual, cfg, false) != SNN_OK)
        return NULL;
    const snn_neuron_kernels *nk = snn_neuron_kernels_or_error(fn, x->device);
    if (!nk) return NULL;
    if (!nk->lif_bn_forward) return separate_ops(x, params, momentum, eps, residual, cfg, activity);
    return snn_bn_neuron_fused_forward(fn, x, params, momentum, eps, residual, cfg, NULL, 0, NULL,
                                       activity);
}

snn_tensor *snn_batchnorm_neuron_bn_residual(snn_tensor *x, const snn_batchnorm_args *bn,
                                             snn_tensor *rx, const snn_batchnorm_args *r,
                                             const snn_neuron_config *cfg, snn_tensor **activity)
{
    const char *fn = "snn_batchnorm_neuron_bn_residual";
    if (activity) *activity = NULL;
    if (!bn || !r)
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument '%s' (NULL)", fn,
                              bn ? "r" : "bn");
    snn_tensor *params[4] = {bn->gamma, bn->beta, bn->running_mean, bn->running_var};
    snn_tensor *r_params[4] = {r->gamma, r->beta, r->running_mean, r->running_var};
    /* rx may be kept as bf16 already: the op reads its bits (not as bits of spikes) */
    const bool rx_bf16 = rx && !rx->data && rx->bf16;
    if (snn_bn_neuron_check_args(fn, x, params, bn->momentum, bn->eps, NULL, cfg, false) ||
        (!rx_bf16 && snn_check_tensor(fn, "rx", rx)))
        return NULL;
    char sx[96], sr[96];
    if (rx->device != x->device || !snn_shape_equal(rx->shape, x->shape))
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument 'rx' (expected shape %s on "
                              "%s like 'x', got %s on %s)", fn,
                              snn_shape_str(x->shape, sx, sizeof sx), snn_device_name(x->device),
                              snn_shape_str(rx->shape, sr, sizeof sr),
                              snn_device_name(rx->device));
    const char *names[4] = {"r->gamma", "r->beta", "r->running_mean", "r->running_var"};
    for (int i = 0; i < 4; i++)
        if (snn_check_rank(fn, names[i], r_params[i], 1, "(C)") ||
            snn_check_dim(fn, names[i], r_params[i], 0, x->shape.dim[2], "C (input channels)") ||
            snn_check_like(fn, "x", x, names[i], r_params[i], false))
            return NULL;
    if (!(r->eps > 0.0f) || !(r->momentum >= 0.0f && r->momentum <= 1.0f))
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad arguments (expected r->eps > 0 and "
                              "r->momentum in [0, 1], got %g, %g)", fn, (double)r->eps,
                              (double)r->momentum);
    const snn_neuron_kernels *nk = snn_neuron_kernels_or_error(fn, x->device);
    if (!nk) return NULL;
    if (!nk->lif_bn_forward && rx_bf16)
        return snn_error_null(SNN_ERR_UNSUPPORTED, "%s: bad argument 'rx' (kept as bf16, which "
                              "only the fused kernel reads, and the %s neuron kernels have "
                              "none); hint: keep rx as bf16 after this op", fn, nk->name);
    if (!nk->lif_bn_forward) { /* the ops it stands for */
        snn_tensor *residual = snn_batchnorm2d(rx, r->gamma, r->beta, r->running_mean,
                                               r->running_var, true, r->momentum, r->eps);
        return residual ? separate_ops(x, params, bn->momentum, bn->eps, residual, cfg,
                                       activity)
                        : NULL;
    }
    const snn_kernels *k = snn_kernels_for(x->device);
    SNN_REQUIRE_KERNEL(k, fn, batchnorm_backward_in_place);
    const snn_bn_shortcut rb = {rx, r};
    return snn_bn_neuron_fused_forward(fn, x, params, bn->momentum, bn->eps, NULL, cfg, NULL, 0,
                                       &rb, activity);
}

/* x (N, C, H, W) seen as one step, dims (T, N, C, H W) with T = time_steps. */
static snn_neuron_dims repeated_dims(const snn_tensor *x, int time_steps)
{
    return (snn_neuron_dims){time_steps, x->shape.dim[0], x->shape.dim[1],
                             x->shape.dim[2] * x->shape.dim[3]};
}

snn_tensor *snn_batchnorm_neuron_repeat(snn_tensor *x, snn_tensor *gamma, snn_tensor *beta,
                                        snn_tensor *running_mean, snn_tensor *running_var,
                                        float momentum, float eps, int time_steps,
                                        const snn_neuron_config *cfg, snn_tensor **activity)
{
    const char *fn = "snn_batchnorm_neuron_repeat";
    if (activity) *activity = NULL;
    snn_tensor *params[4] = {gamma, beta, running_mean, running_var};
    if (snn_bn_neuron_check_args(fn, x, params, momentum, eps, NULL, cfg, true) != SNN_OK)
        return NULL;
    if (time_steps < 1 || time_steps > 1024)
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument 'time_steps' (expected "
                              "1..1024, got %d)", fn, time_steps);
    const snn_neuron_kernels *nk = snn_neuron_kernels_or_error(fn, x->device);
    if (!nk) return NULL;
    if (!nk->lif_bn_forward) { /* the ops it stands for */
        snn_tensor *y = snn_bn_neuron_separate_input(x, params, momentum, eps, NULL);
        y = y ? snn_repeat_time(y, time_steps) : NULL;
        return y ? snn_neuron_multistep_consume(y, cfg, NULL, activity) : NULL;
    }
    return snn_bn_neuron_fused_forward(fn, x, params, momentum, eps, NULL, cfg, NULL, time_steps,
                                       NULL, activity);
}

/* The fused forward (bn_neuron.h). */
snn_tensor *snn_bn_neuron_fused_forward(const char *fn, snn_tensor *x,
                                        snn_tensor *const params[4], float momentum, float eps,
                                        snn_tensor *residual, const snn_neuron_config *cfg,
                                        const snn_bn_state *st, int repeat,
                                        const snn_bn_shortcut *rb, snn_tensor **activity)
{
    snn_tensor *gamma = params[0], *beta = params[1];
    snn_tensor *running_mean = params[2], *running_var = params[3];
    const snn_kernels *k = snn_kernels_or_error(fn, x->device);
    const snn_neuron_kernels *nk = k ? snn_neuron_kernels_or_error(fn, x->device) : NULL;
    if (!nk) return NULL;
    SNN_REQUIRE_KERNEL(k, fn, batchnorm_stats);
    SNN_REQUIRE_KERNEL(k, fn, batchnorm_stats_merge);
    SNN_REQUIRE_KERNEL(k, fn, batchnorm_backward);
    SNN_REQUIRE_KERNEL(k, fn, fill);
    SNN_REQUIRE_KERNEL(k, fn, axpy);
    SNN_REQUIRE_KERNEL(nk, fn, lif_backward);

    /* x (T, N, C, H, W), or (N, C, H, W) read at each of `repeat` steps (the repeated stem) */
    SNN_ASSERT(!repeat || (!residual && !st));
    const snn_neuron_dims d = repeat ? repeated_dims(x, repeat) : snn_neuron_dims_of(x);
    const int C = (int)d.C;
    snn_shape out_shape = x->shape;
    if (repeat) out_shape = SNN_SHAPE(repeat, d.N, d.C, x->shape.dim[2], x->shape.dim[3]);
    const snn_neuron_params p = snn_neuron_params_from(cfg);
    /* with a residual made by a batch-norm (rb): x's three, then rx and its gamma and beta */
    SNN_ASSERT(!rb || (!residual && !st && !repeat));
    snn_tensor *inputs[6] = {x, gamma, beta, rb ? rb->rx : residual,
                             rb ? rb->bn->gamma : NULL, rb ? rb->bn->beta : NULL};
    const int n_inputs = rb ? 6 : 4;
    snn_tensor *v_grad = st && st->differentiable ? st->v_in : NULL;
    const bool record = snn_should_record(n_inputs, inputs) || snn_should_record(1, &v_grad);
    /* spikes from the step pool, with or without a tape: a training-mode forward (the only
     * kind this op runs) packs them where their last reader is done (snn_spikes_pack), so that
     * one without a tape (the online step's forward-only steps) holds their bits alone */
    snn_tensor *spike = snn_neuron_spikes_new(fn, out_shape, x->device, cfg->kind, true);
    snn_tensor *act = spike && activity ? snn_neuron_activity_new(fn, &d, x->device) : NULL;
    const size_t stats_bytes = (size_t)3 * (size_t)C * sizeof(double);
    double *merged = spike && (act || !activity) ? snn_step_alloc(fn, stats_bytes, x->device)
                                                 : NULL;
    float *mean = merged ? snn_step_alloc(fn, (size_t)C * sizeof(float), x->device) : NULL;
    float *invstd = mean ? snn_step_alloc(fn, (size_t)C * sizeof(float), x->device) : NULL;
    if (!invstd) return NULL;
    double *r_merged = NULL; /* the residual's batch-norm's, kept likewise */
    float *r_mean = NULL, *r_invstd = NULL;
    if (rb) {
        r_merged = snn_step_alloc(fn, stats_bytes, x->device);
        r_mean = r_merged ? snn_step_alloc(fn, (size_t)C * sizeof(float), x->device) : NULL;
        r_invstd = r_mean ? snn_step_alloc(fn, (size_t)C * sizeof(float), x->device) : NULL;
        if (!r_invstd) return NULL;
    }
    /* their bits too, written by the kernel, for snn_spikes_pack */
    if (spike->spikes) {
        const size_t words = (size_t)((spike->numel + 31) / 32);
        spike->spike_bits = snn_step_alloc(fn, words * sizeof(uint32_t), x->device);
        if (!spike->spike_bits) return NULL;
    }
    /* backward recomputes H from the state that entered: the state op's v_in is the graph's,
     * alive anyway; the carry op's, its layer's state, stays as it is until then, and the
     * backward leaves V_last in it (deferred) */
    const bool deferred = record && st && !st->differentiable;
    if (deferred && snn_bn_carry_pending_full())
        return snn_error_null(SNN_ERR_STATE, "%s: %d taped calls already wait for their "
                              "backward; hint: run backward after each time step's forward",
                              fn, SNN_BN_CARRY_PENDING_MAX);

    /* the statistics: this batch's (count, mean, M2) per channel, "merged" over one rank */
    snn_step_scratch mark = snn_step_scratch_mark(x->device);
    double *stats = snn_step_alloc(fn, stats_bytes, x->device);
    if (!stats) return NULL;
    const uint16_t *x_bf16 = x->data ? NULL : x->bf16; /* kept as bf16: read as it is */
    k->batchnorm_stats(stats, x->data, x_bf16, (int)(repeat ? d.N : d.T * d.N), C, (int)d.plane);
    k->batchnorm_stats_merge(merged, mean, invstd, running_mean->data, running_var->data, stats, 1,
                             C, momentum, eps);
    if (rb) { /* the residual's batch-norm's, as snn_batchnorm2d's forward would make them */
        const snn_batchnorm_args *r = rb->bn;
        const snn_tensor *rx = rb->rx; /* floats, or kept as bf16 (read as bits) */
        k->batchnorm_stats(stats, rx->data, rx->data ? NULL : rx->bf16, (int)(d.T * d.N), C,
                           (int)d.plane);
        k->batchnorm_stats_merge(r_merged, r_mean, r_invstd, r->running_mean->data,
                                 r->running_var->data, stats, 1, C, r->momentum, r->eps);
    }
    snn_step_scratch_release(x->device, mark);
    const snn_bn_residual r_in = {.x = rb ? rb->rx->data : NULL,
                                  .x_bf16 = rb && !rb->rx->data ? rb->rx->bf16 : NULL,
                                  .stats = r_merged,
                                  .invstd = r_invstd,
                                  .gamma = rb ? rb->bn->gamma->data : NULL,
                                  .beta = rb ? rb->bn->beta->data : NULL};

    /* the state: read as it is overwritten (v_last may alias v_init: the kernels read each
     * element's V_init before they write its V_last) */
    const snn_neuron_bn_input in = {.x = x->data, .x_bf16 = x_bf16, .stats = merged,
                                    .invstd = invstd,
                                    .gamma = gamma->data, .beta = beta->data,
                                    .residual = residual ? residual->data : NULL,
                                    .v_init = st ? st->v_in->data : NULL,
                                    .v_last = st && !deferred ? st->v_last->data : NULL,
                                    .x_repeated = repeat > 0, .residual_bn = rb ? &r_in : NULL};
    nk->lif_bn_forward(spike->data, spike->spike_bits, NULL, act ? act->data : NULL, &in, &p, &d);

    const snn_bn_neuron_saved saved = {p, d, merged, mean, invstd, deferred ? st->v_in->data : NULL,
                                   repeat > 0, r_merged, r_mean, r_invstd};
    if (record && st && st->differentiable) {
        if (!snn_bn_neuron_record_state_op(fn, x, gamma, beta, residual, spike, st, &saved))
            return NULL;
    } else if (record) { /* one node, the carry op's too (its state is no input of the graph) */
        snn_node *node = snn_tape_record(fn, bn_neuron_backward, spike, n_inputs, inputs,
                                         sizeof(snn_bn_neuron_saved));
        if (!node) return NULL;
        *(snn_bn_neuron_saved *)node->saved = saved;
        if (deferred) /* the backward advances the state */
            snn_bn_carry_pending_add(st->v_in->data);
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
        const snn_neuron_bn_input in = {.x = x->data, .residual = residual->data};
        nk->lif_bn_forward(spike->data, NULL, NULL, act ? act->data : NULL, &in, &p, &d);
    } else if (act && snn_tensor_fill(act, 0.0f) != SNN_OK) {
        return NULL;
    }
    if (activity) *activity = act;
    return spike;
}

