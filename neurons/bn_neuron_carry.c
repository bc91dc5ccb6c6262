/*
 * bn_neuron_carry.c - the fused batch-norm -> neuron op for a layer that carries its state
 * between calls (snn_batchnorm_neuron_carry, snn_batchnorm_neuron_state): online training
 * (SLTT) and BPTT with checkpoints over time (docs/temporal.md). The op itself, its kernels and
 * why it is one node: bn_neuron.c, whose forward (snn_bn_neuron_fused_forward) both variants run
 * from the state V_init to V_last. What this file adds: the set of carry calls whose backward
 * is still to come (their state holds V_init until then), and the state op's three nodes.
 * Their bits are those of the same ops ending in snn_neuron_multistep_carry / _state
 * (neurons/carry.c). Tests: tests/test_bn_neuron_carry.c, tests/test_cuda_bn_neuron.c.
 */
#include "bn_neuron.h"
#include "tensor/arena.h"
#include "tensor/error.h"
#include "kernels/kernels.h"

/* The states of taped carry calls whose backward has not run yet: each still holds the V_init
 * its backward reads, and will get V_last from it. A small set (one time step's layers), so a
 * linear search; a full set refuses the next taped call rather than grow. */
static const float *carry_pending[SNN_BN_CARRY_PENDING_MAX];
static int carry_pending_count;

int snn_bn_carry_pending_find(const float *state)
{
    for (int i = 0; i < carry_pending_count; i++)
        if (carry_pending[i] == state) return i;
    return -1;
}

void snn_bn_carry_pending_remove(int i)
{
    carry_pending[i] = carry_pending[--carry_pending_count];
}

bool snn_bn_carry_pending_full(void)
{
    return carry_pending_count == SNN_BN_CARRY_PENDING_MAX;
}

void snn_bn_carry_pending_add(const float *state)
{
    SNN_ASSERT(carry_pending_count < SNN_BN_CARRY_PENDING_MAX);
    carry_pending[carry_pending_count++] = state;
}

int snn_batchnorm_neuron_carry_pending(void)
{
    return carry_pending_count;
}

void snn_batchnorm_neuron_carry_forget(const snn_tensor *v_state)
{
    const int i = v_state ? snn_bn_carry_pending_find(v_state->data) : -1;
    if (i >= 0) snn_bn_carry_pending_remove(i);
}

/* ---- the carrying variants: a layer that keeps its state between calls ---------------------
 *
 * The carry op's state is no input of the graph: its node is snn_batchnorm_neuron's, which
 * saves the state's pointer, recomputes H from it in backward and then leaves V_last there.
 * The state op's is (dL/dV_in): three nodes, because a node has one output and the op has
 * two (the spikes and V_out), and the batch-norm's part hands its gradient to x in place:
 *   "snn_batchnorm_neuron (batch-norm)": (x, gamma, beta) -> X, the batch-norm's output, a
 *       view of x that only carries X's gradient (its values are never made: X is made again in
 *       the neuron kernel); backward is the batch-norm's, from dL/dX;
 *   "snn_batchnorm_neuron (neurons)":    (X, residual, V_in) -> spikes, backward recomputes H
 *       from V_in, then dL/dX, dL/dresidual, dL/dV_in (snn_bn_neuron_part_backward);
 *   "snn_batchnorm_neuron (state)":      (X, residual, V_in) -> V_out (the state op only).
 * The unfused state op's two nodes each run the BPTT; here the spikes' node runs it once with
 * both gradients: the V_out node, which the tape reaches first, leaves its gradient to it (V_out
 * keeps its gradient, retain_grad) unless no gradient reached the spikes, and then runs alone.
 * On the CPU (and past T = 64) that one backward is still two runs of lif_backward, the unfused
 * op's bits; CUDA's one-pass kernel takes both gradients in one recurrence, which equals the
 * two runs' sum up to rounding (where dX's two terms are added), not bit for bit. */

typedef struct bn_state_saved {
    snn_bn_neuron_saved bn;             /* params, dims, statistics */
    snn_tensor *x, *gamma, *beta;   /* what X is made of again */
    snn_tensor *spikes, *v_out;     /* the outputs */
    const float *v_init;            /* (M) the state that entered: v_in's data */
} bn_state_saved;

static void bn_part_backward(snn_node *node)
{
    const char *fn = "snn_batchnorm_neuron (batch-norm backward)";
    const bn_state_saved *sv = node->saved;
    snn_tensor *x = node->inputs[0], *gamma = node->inputs[1], *beta = node->inputs[2];
    const snn_kernels *k = snn_kernels_for(x->device);
    SNN_ASSERT(k);
    const snn_neuron_dims *d = &sv->bn.dims;
    /* X's gradient becomes x's (x, a conv output, has no other reader) and the batch-norm's
     * backward replaces dL/dX by dL/dx in place, reading x as the model kept it (floats or
     * bf16): neither a buffer for dL/dx nor an fp32 copy of x */
    float *dx_whole = k->batchnorm_backward_in_place ? snn_grad_hand_over(node->out, x) : NULL;
    float *dgamma = snn_grad_for(gamma), *dbeta = snn_grad_for(beta);
    if (dx_whole) {
        const bool bf16 = !x->data && x->bf16;
        k->batchnorm_backward_in_place(dx_whole, dgamma, dbeta, bf16 ? NULL : x->data,
                                       bf16 ? x->bf16 : NULL, gamma->data, sv->bn.mean,
                                       sv->bn.invstd, (int)(d->T * d->N), (int)d->C,
                                       (int)d->plane);
        return;
    }
    float *dx = snn_grad_for(x);
    if (!dx && !dgamma && !dbeta) return;
    snn_step_scratch mark = snn_step_scratch_mark(x->device);
    const float *xv = snn_saved_values(fn, x);
    if (!xv) {
        snn_backward_out_of_memory();
        return;
    }
    k->batchnorm_backward(dx, dgamma, dbeta, node->out->grad->data, xv, gamma->data, sv->bn.mean,
                          sv->bn.invstd, (int)(d->T * d->N), (int)d->C, (int)d->plane);
    snn_step_scratch_release(x->device, mark);
}

static void state_neuron_backward(snn_node *node)
{
    const char *fn = "snn_batchnorm_neuron (neurons backward)";
    const bn_state_saved *sv = node->saved;
    snn_tensor *X = node->inputs[0], *residual = node->inputs[1], *v_in = node->inputs[2];
    const snn_tensor *dspike = sv->spikes->grad, *dv_last = sv->v_out ? sv->v_out->grad : NULL;
    /* the V_out node leaves its gradient to the spikes' node where that one runs */
    if (node->out == sv->v_out && dspike) return;
    /* dL/dX is written whole by the one node that runs this (the kernels write it; the CPU's
     * scratch path fills it first): X's first gradient need not be zeroed */
    float *dX = snn_grad_unfilled(X);
    if (!dX) dX = snn_grad_for(X);
    float *dresidual = snn_grad_for(residual), *dv_init = snn_grad_for(v_in);
    if (!dX && !dresidual && !dv_init) return;
    const snn_device dev = sv->spikes->device;
    snn_step_scratch mark = snn_step_scratch_mark(dev);
    const int64_t n = sv->spikes->numel;
    if (!dX) dX = snn_step_alloc(fn, (size_t)n * sizeof(float), dev); /* (T, M) unused */
    if (!dX) {
        snn_backward_out_of_memory();
        return;
    }
    snn_neuron_bn_input in = {.stats = sv->bn.stats, .invstd = sv->bn.invstd,
                              .gamma = sv->gamma->data, .beta = sv->beta->data,
                              .v_init = sv->v_init, .dv_last = dv_last ? dv_last->data : NULL,
                              .dv_init = dv_init};
    if (!snn_bn_neuron_read_saved_inputs(fn, sv->x, residual, &in)) return;
    if (!snn_bn_neuron_part_backward(fn, &sv->bn.params, &sv->bn.dims, &in, dX, dresidual,
                              dspike ? dspike->data : NULL, sv->spikes))
        return;
    snn_step_scratch_release(dev, mark);
}

bool snn_bn_neuron_record_state_op(const char *fn, snn_tensor *x, snn_tensor *gamma,
                                   snn_tensor *beta, snn_tensor *residual, snn_tensor *spike,
                                   const snn_bn_state *st, const snn_bn_neuron_saved *bn)
{
    const bn_state_saved saved = {*bn, x, gamma, beta, spike, st->v_last, st->v_in->data};
    snn_tensor *bn_inputs[3] = {x, gamma, beta};
    snn_tensor *X = NULL; /* X's gradient, when the batch-norm's inputs want one */
    if (snn_should_record(3, bn_inputs)) {
        X = snn_step_view(fn, x, x->shape);
        snn_node *node = X ? snn_tape_record("snn_batchnorm_neuron (batch-norm)", bn_part_backward,
                                             X, 3, bn_inputs, sizeof saved)
                           : NULL;
        if (!node) return false;
        *(bn_state_saved *)node->saved = saved;
    }
    snn_tensor *inputs[3] = {X, residual, st->v_in};
    snn_node *node = snn_tape_record("snn_batchnorm_neuron (neurons)", state_neuron_backward,
                                     spike, 3, inputs, sizeof saved);
    if (!node) return false;
    *(bn_state_saved *)node->saved = saved;
    st->v_last->retain_grad = true; /* read by the spikes' node after the V_out node's */
    node = snn_tape_record("snn_batchnorm_neuron (state)", state_neuron_backward, st->v_last, 3,
                           inputs, sizeof saved);
    if (!node) return false;
    *(bn_state_saved *)node->saved = saved;
    return true;
}

snn_tensor *snn_batchnorm_neuron_carry(snn_tensor *x, snn_tensor *gamma, snn_tensor *beta,
                                       snn_tensor *running_mean, snn_tensor *running_var,
                                       float momentum, float eps, snn_tensor *residual,
                                       const snn_neuron_config *cfg, snn_tensor *v_state,
                                       snn_tensor **activity)
{
    const char *fn = "snn_batchnorm_neuron_carry";
    if (activity) *activity = NULL;
    snn_tensor *params[4] = {gamma, beta, running_mean, running_var};
    if (snn_bn_neuron_check_args(fn, x, params, momentum, eps, residual, cfg, false) != SNN_OK ||
        !snn_neuron_state_fits(fn, "v_state", v_state, x, false))
        return NULL;
    if (snn_bn_carry_pending_find(v_state->data) >= 0) /* it still holds the last call's V_init */
        return snn_error_null(SNN_ERR_STATE, "%s: bad argument 'v_state' (the taped call before "
                              "has not run its backward, so the state has not advanced yet); "
                              "hint: run backward after each call, or call without a tape "
                              "(snn_no_grad_begin)", fn);
    const snn_neuron_kernels *nk = snn_neuron_kernels_or_error(fn, x->device);
    if (!nk) return NULL;
    if (!nk->lif_bn_forward) { /* the ops it stands for */
        snn_tensor *y = snn_bn_neuron_separate_input(x, params, momentum, eps, residual);
        return y ? snn_neuron_multistep_carry(y, cfg, NULL, v_state, NULL, activity) : NULL;
    }
    const snn_bn_state st = {v_state, v_state, false};
    return snn_bn_neuron_fused_forward(fn, x, params, momentum, eps, residual, cfg, &st, 0, NULL,
                                       activity);
}

snn_tensor *snn_batchnorm_neuron_state(snn_tensor *x, snn_tensor *gamma, snn_tensor *beta,
                                       snn_tensor *running_mean, snn_tensor *running_var,
                                       float momentum, float eps, snn_tensor *residual,
                                       const snn_neuron_config *cfg, snn_tensor *v_in,
                                       snn_tensor **v_out, snn_tensor **activity)
{
    const char *fn = "snn_batchnorm_neuron_state";
    if (activity) *activity = NULL;
    if (v_out) *v_out = NULL;
    snn_tensor *params[4] = {gamma, beta, running_mean, running_var};
    if (snn_bn_neuron_check_args(fn, x, params, momentum, eps, residual, cfg, false) != SNN_OK ||
        !snn_neuron_state_fits(fn, "v_in", v_in, x, true))
        return NULL;
    if (!v_out)
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument 'v_out' (expected where to put "
                              "the state after the last step, got NULL)", fn);
    const snn_neuron_kernels *nk = snn_neuron_kernels_or_error(fn, x->device);
    if (!nk) return NULL;
    if (!nk->lif_bn_forward) { /* the ops it stands for */
        snn_tensor *y = snn_bn_neuron_separate_input(x, params, momentum, eps, residual);
        return y ? snn_neuron_multistep_state(y, cfg, NULL, v_in, NULL, v_out, NULL, activity)
                 : NULL;
    }
    snn_tensor *v_last = snn_step_tensor(fn, v_in->shape, x->device);
    if (!v_last) return NULL;
    const snn_bn_state st = {v_in, v_last, true};
    snn_tensor *spike = snn_bn_neuron_fused_forward(fn, x, params, momentum, eps, residual, cfg,
                                                    &st, 0, NULL, activity);
    if (spike) *v_out = v_last;
    return spike;
}
