/*
 * single_step.c - the single-step neuron API: one time step per call, the state (V, and A for
 * ST-BIF and ALIF) kept by the caller in a snn_neuron_state between calls. It runs the multi-step kernel
 * with T = 1 and the state as its initial condition, so both APIs compute the same numbers.
 *
 * Differentiable step by step: in grad mode one call records two nodes that share one saved H,
 *     spikes = F_S(x, w, V_prev)     V = F_V(x, w, V_prev)
 * so a gradient reaching V from the next step flows back into this step's x, w and V_prev
 * (BPTT written out over calls). ALIF's adaptation A is differentiable state too: a third node
 * A = F_A(x, V_prev, A_prev), and every node has A_prev as an input, so gradients reach both V
 * and A of the previous step (ST-BIF's A, a spike count, is not differentiable). In no-grad mode nothing is saved and V, A are updated in place,
 * so a long simulation inside one step does not grow the arena by a state per call.
 *
 * Lifetimes: the state's tensors are STEP tensors of the step that made them. A state whose step
 * has closed (snn_step_is_open) is treated as reset, never read: its memory is gone.
 */
#include "neuron_op.h"
#include "tensor/arena.h"
#include "tensor/error.h"

void snn_neuron_state_reset(snn_neuron_state *state)
{
    if (!state) return;
    state->v = NULL;
    state->a = NULL;
    state->step_id = 0;
}

snn_tensor *snn_neuron_step(snn_tensor *x, const snn_neuron_config *cfg, snn_tensor *w,
                            snn_neuron_state *state, snn_tensor **activity)
{
    const char *fn = "snn_neuron_step";
    char sa[96], sb[96];
    if (activity) *activity = NULL;
    const snn_neuron_kernels *k = snn_neuron_check_args(fn, x, cfg, w);
    if (!k) return NULL;
    if (!state)
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument 'state' (expected a "
                              "snn_neuron_state, got NULL)", fn);
    if (x->shape.ndim < 1)
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument 'x' (expected (N, ...) with at "
                              "least 1 dim, got a 0-D tensor)", fn);
    if (cfg->kind == SNN_NEURON_RELU) return snn_relu(x); /* ANN kinds: stateless */
    if (cfg->kind == SNN_NEURON_QCLIP && x->shape.ndim < SNN_MAX_DIMS) {
        snn_shape one_step = {.ndim = x->shape.ndim + 1}; /* (1, N, ...), as the op expects */
        one_step.dim[0] = 1;
        for (int i = 0; i < x->shape.ndim; i++) one_step.dim[i + 1] = x->shape.dim[i];
        return snn_reshape(snn_qclip(snn_reshape(x, one_step), w, cfg), x->shape);
    }
    if (cfg->kind == SNN_NEURON_QCLIP) return snn_qclip(x, w, cfg);
    const bool stbif = cfg->kind == SNN_NEURON_STBIF, alif = cfg->kind == SNN_NEURON_ALIF;
    const bool has_a = stbif || alif; /* a state A beside V */

    /* A state from a closed step is a reset state (its tensors died with that step). */
    if (state->v && !snn_step_is_open(state->step_id)) snn_neuron_state_reset(state);
    if (state->v && (!snn_shape_equal(state->v->shape, x->shape) ||
                     state->v->device != x->device || (has_a && !state->a)))
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument 'x' (expected the state's shape "
                              "%s on %s, got %s on %s); hint: call snn_neuron_state_reset() "
                              "between batches", fn, snn_shape_str(state->v->shape, sa, sizeof sa),
                              snn_device_name(state->v->device),
                              snn_shape_str(x->shape, sb, sizeof sb), snn_device_name(x->device));

    snn_neuron_dims d = {1, x->shape.dim[0], 1, 1};
    if (x->shape.ndim >= 2) d.C = x->shape.dim[1];
    for (int i = 2; i < x->shape.ndim; i++) d.plane *= x->shape.dim[i];
    const snn_neuron_params p = snn_neuron_params_from(cfg);

    snn_tensor *spike = snn_step_tensor(fn, x->shape, x->device); /* (N, ...) */
    if (!spike) return NULL;
    snn_tensor *act = NULL;                                       /* (N, C) */
    if (activity) {
        act = snn_step_tensor(fn, SNN_SHAPE(d.N, d.C), x->device);
        if (!act) return NULL;
    }
    snn_tensor *v_in = state->v, *a_in = state->a;
    snn_tensor *inputs[4] = {x, w, v_in, alif ? a_in : NULL};
    const bool record = snn_should_record(4, inputs);

    /* Grad mode needs the old state kept (backward reads it): new tensors. No-grad: in place. */
    snn_tensor *h = NULL, *th = NULL, *v_out = v_in, *a_out = a_in;
    bool fresh = false;
    if (record) {
        h = snn_step_tensor(fn, x->shape, x->device);
        if (!h) return NULL;
    }
    if (record && alif) { /* ALIF's backward reads the threshold too */
        th = snn_step_tensor(fn, x->shape, x->device);
        if (!th) return NULL;
    }
    if (record || !v_out) {
        v_out = snn_step_tensor(fn, x->shape, x->device);
        if (!v_out) return NULL;
        fresh = true;
    }
    if (has_a && (record || !a_out)) {
        a_out = snn_step_tensor(fn, x->shape, x->device);
        if (!a_out) return NULL;
        fresh = true;
    }
    if (x->numel > 0 && alif)
        k->alif_forward(spike->data, h ? h->data : NULL, th ? th->data : NULL,
                        v_out->data, a_out->data, act ? act->data : NULL, x->data,
                        v_in ? v_in->data : NULL, a_in ? a_in->data : NULL, &p, &d);
    else if (x->numel > 0)
        snn_neuron_forward_of(k, cfg->kind)(spike->data, h ? h->data : NULL, v_out->data,
                                            stbif ? a_out->data : NULL, act ? act->data : NULL,
                                            x->data, v_in ? v_in->data : NULL,
                                            a_in ? a_in->data : NULL, w ? w->data : NULL, &p, &d);
    else if (act && snn_tensor_fill(act, 0.0f) != SNN_OK) /* planes of 0 elements fire 0 times */
        return NULL;
    if (record) {
        if (!snn_neuron_record(spike, SNN_NEURON_OUT_SPIKES, x, w, v_in, a_in, h, th, spike, &p,
                               &d) ||
            !snn_neuron_record(v_out, SNN_NEURON_OUT_V, x, w, v_in, a_in, h, th, spike, &p, &d))
            return NULL;
        if (alif &&
            !snn_neuron_record(a_out, SNN_NEURON_OUT_A, x, w, v_in, a_in, h, th, spike, &p, &d))
            return NULL;
    }
    if (fresh) {
        /* In-place updates keep the step id of the tensors they write into; new ones get ours.
         * (A fresh A with an in-place V cannot happen: V is in place only when A is too.) */
        state->step_id = snn_step_id();
    }
    state->v = v_out;
    state->a = has_a ? a_out : NULL;
    if (activity) *activity = act;
    return spike;
}
