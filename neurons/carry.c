/*
 * carry.c - the multi-step neuron op that starts from a state it is given and leaves its last
 * state there: a model run one time step (or one segment of steps) per call, its neurons
 * remembering where they were. It is what online training through time runs (SLTT, Meng et
 * al., ICCV 2023; app/train_online.c and docs/temporal.md):
 *
 *   call t:  V_state --[ the kind's T-step forward on x ]--> spikes,  V_state <- V[last]
 *
 * For autograd the state that enters is a constant. So a gradient reaches this call's x (and
 * PLIF's w) through the charge of these steps only, and never flows back into the calls before:
 * SLTT's rule, "keep the spatial path, drop the temporal one", which is what makes its memory
 * independent of T (each call's graph can be freed by the next). In backward the op is the
 * plain multi-step node (neuron_op.c) with V_init a constant.
 *
 * What the node keeps: H (T, N, ...) (and ALIF's thresholds) as snn_neuron_multistep, in x's
 * memory for IF / LIF under snn_neuron_multistep_carry_consume; PLIF and
 * ST-BIF also a copy of the state that entered (N, ...) (PLIF's dH/dk at t = 0 reads V[-1],
 * ST-BIF's backward A[-1]; the state itself is overwritten). IF, LIF and ALIF keep no copy:
 * their backward reads H (and the thresholds) alone.
 * The state tensors are the caller's OWNED tensors (nn/layer_neuron.c keeps them in the layer),
 * so they outlive the step that updates them.
 *
 * snn_neuron_multistep_state is the same run as a function of its state, differentiable in it:
 *
 *   (x, V_in, A_in) --> (spikes, V_out, A_out)
 *
 * what BPTT with time checkpoints runs (app/train_segments.c): a segment of K steps recomputed
 * in backward from the state saved at its start, the gradient of the state at its end coming
 * from the next segment, the gradient of the state at its start going to the one before. It is
 * the single-step API's pair of nodes (single_step.c) over K steps: one node per output, all
 * reading the one saved H; a gradient that reaches V_out runs the BPTT kernel with dV_last.
 */
#include "neuron_op.h"
#include "tensor/arena.h"
#include "tensor/error.h"

/* The state must hold one value per neuron of one time step of x (x's shape without T), on
 * x's device; the carry op's needs no gradient (it is overwritten). */
bool snn_neuron_state_fits(const char *fn, const char *arg, const snn_tensor *state,
                           const snn_tensor *x, bool grad_ok)
{
    if (snn_check_tensor(fn, arg, state)) return false;
    const int64_t per_step = x->shape.dim[0] > 0 ? x->numel / x->shape.dim[0] : 0;
    const bool grad_bad = state->requires_grad && !grad_ok;
    if (state->numel != per_step || state->device != x->device || grad_bad) {
        char buf[96];
        snn_error(SNN_ERR_ARGUMENT, "%s: bad argument '%s' (expected %lld elements on %s%s: one "
                  "per neuron of one step of x %s, got %lld on %s%s)", fn, arg,
                  (long long)per_step, snn_device_name(x->device),
                  grad_ok ? "" : " that need no gradient", snn_shape_str(x->shape, buf, sizeof buf),
                  (long long)state->numel, snn_device_name(state->device),
                  grad_bad ? ", requires_grad" : "");
        return false;
    }
    return true;
}

/* A STEP copy of an OWNED state, so that backward still sees what entered. */
static snn_tensor *step_copy(const char *fn, const snn_tensor *state)
{
    snn_tensor *copy = snn_step_tensor(fn, state->shape, state->device);
    if (copy && snn_tensor_copy(copy, state) != SNN_OK) return NULL;
    return copy;
}

static snn_tensor *carry(const char *fn, snn_tensor *x, const snn_neuron_config *cfg,
                         snn_tensor *w, snn_tensor *v_state, snn_tensor *a_state,
                         snn_tensor **activity, bool consume_x)
{
    if (activity) *activity = NULL;
    const snn_neuron_kernels *k = snn_neuron_check_args(fn, x, cfg, w);
    if (!k) return NULL;
    if (snn_neuron_is_ann(cfg->kind))
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad cfg.kind (expected a spiking neuron, got "
                              "%s: an ANN activation has no state)", fn,
                              snn_neuron_kind_name(cfg->kind));
    if (x->shape.ndim < 2) {
        char buf[96];
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument 'x' (expected (T, N, ...) with "
                              "at least 2 dims, got %s)", fn,
                              snn_shape_str(x->shape, buf, sizeof buf));
    }
    const bool alif = cfg->kind == SNN_NEURON_ALIF, stbif = cfg->kind == SNN_NEURON_STBIF;
    const bool has_a = alif || stbif; /* the kinds with a second state variable A */
    if (!snn_neuron_state_fits(fn, "v_state", v_state, x, false)) return NULL;
    if (has_a && !snn_neuron_state_fits(fn, "a_state", a_state, x, false)) return NULL;
    if (!has_a && a_state)
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument 'a_state' (expected NULL for a "
                              "%s neuron, which has no second state variable)", fn,
                              snn_neuron_kind_name(cfg->kind));
    if (alif && !k->alif_forward)
        return snn_error_null(SNN_ERR_UNSUPPORTED, "%s: the %s neuron table has no alif_forward",
                              fn, k->name);

    const snn_neuron_dims d = snn_neuron_dims_of(x);
    const snn_neuron_params p = snn_neuron_params_from(cfg);
    snn_tensor *inputs[2] = {x, w};
    const bool record = snn_should_record(2, inputs);
    snn_tensor *spike = snn_neuron_spikes_new(fn, x->shape, x->device, cfg->kind, record);
    if (!spike) return NULL;
    snn_tensor *act = activity ? snn_neuron_activity_new(fn, &d, x->device) : NULL;
    if (activity && !act) return NULL;
    /* What entered is read by the kernel as it overwrites the state (v_last may alias v_init:
     * the kernels read V[-1] before writing V[T-1]). Backward reads it only for PLIF's dH/dk
     * (V[-1]) and ST-BIF's gates (A[-1]): those kinds keep a copy, the others nothing. */
    snn_tensor *v_keep = record && cfg->kind == SNN_NEURON_PLIF ? step_copy(fn, v_state) : NULL;
    snn_tensor *a_keep = record && stbif ? step_copy(fn, a_state) : NULL;
    if ((record && cfg->kind == SNN_NEURON_PLIF && !v_keep) || (record && stbif && !a_keep))
        return NULL;
    snn_tensor *v_in = v_keep ? v_keep : v_state, *a_in = a_keep ? a_keep : a_state;
    /* what backward reads: H, and ALIF's thresholds; IF / LIF may write H over x when the
     * caller gives x up (as snn_neuron_multistep_consume: neuron_op.c) */
    snn_tensor *h_seq = NULL, *th_seq = NULL;
    if (record) {
        const bool reuse = consume_x && x->lifetime == SNN_STEP && x->numel > 0 &&
                           (cfg->kind == SNN_NEURON_IF || cfg->kind == SNN_NEURON_LIF);
        h_seq = reuse ? snn_step_view(fn, x, x->shape) : snn_step_tensor(fn, x->shape, x->device);
        if (!h_seq || (alif && !(th_seq = snn_step_tensor(fn, x->shape, x->device)))) return NULL;
    }
    if (x->numel == 0) {
        if (act && snn_tensor_fill(act, 0.0f) != SNN_OK) return NULL;
    } else if (alif) {
        k->alif_forward(spike->data, h_seq ? h_seq->data : NULL,
                        th_seq ? th_seq->data : NULL, v_state->data, a_state->data,
                        act ? act->data : NULL, x->data, v_in->data, a_in->data, &p, &d);
    } else {
        snn_neuron_forward_of(k, cfg->kind)(spike->data, h_seq ? h_seq->data : NULL,
                                            v_state->data, stbif ? a_state->data : NULL,
                                            act ? act->data : NULL, x->data, v_in->data,
                                            stbif ? a_in->data : NULL, w ? w->data : NULL, &p, &d);
    }
    if (record && !snn_neuron_record(spike, SNN_NEURON_OUT_SPIKES, x, w, v_keep, a_keep, h_seq,
                                     th_seq, spike, &p, &d))
        return NULL;
    if (activity) *activity = act;
    return spike;
}

snn_tensor *snn_neuron_multistep_carry(snn_tensor *x, const snn_neuron_config *cfg, snn_tensor *w,
                                       snn_tensor *v_state, snn_tensor *a_state,
                                       snn_tensor **activity)
{
    return carry("snn_neuron_multistep_carry", x, cfg, w, v_state, a_state, activity, false);
}

snn_tensor *snn_neuron_multistep_carry_consume(snn_tensor *x, const snn_neuron_config *cfg,
                                               snn_tensor *w, snn_tensor *v_state,
                                               snn_tensor *a_state, snn_tensor **activity)
{
    return carry("snn_neuron_multistep_carry_consume", x, cfg, w, v_state, a_state, activity,
                 true);
}

snn_tensor *snn_neuron_multistep_state(snn_tensor *x, const snn_neuron_config *cfg, snn_tensor *w,
                                       snn_tensor *v_in, snn_tensor *a_in, snn_tensor **v_out,
                                       snn_tensor **a_out, snn_tensor **activity)
{
    const char *fn = "snn_neuron_multistep_state";
    if (activity) *activity = NULL;
    if (v_out) *v_out = NULL;
    if (a_out) *a_out = NULL;
    const snn_neuron_kernels *k = snn_neuron_check_args(fn, x, cfg, w);
    if (!k) return NULL;
    if (snn_neuron_is_ann(cfg->kind) || x->shape.ndim < 2) {
        char buf[96];
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument '%s' (expected a spiking neuron "
                              "on (T, N, ...), got %s on %s)", fn,
                              x->shape.ndim < 2 ? "x" : "cfg", snn_neuron_kind_name(cfg->kind),
                              snn_shape_str(x->shape, buf, sizeof buf));
    }
    const bool alif = cfg->kind == SNN_NEURON_ALIF, stbif = cfg->kind == SNN_NEURON_STBIF;
    const bool has_a = alif || stbif;
    if (!v_out || (has_a && !a_out))
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument '%s' (expected where to put the "
                              "state after the last step, got NULL)", fn, !v_out ? "v_out" : "a_out");
    /* the state that enters: as the carry op's, except that it may need a gradient */
    if (!snn_neuron_state_fits(fn, "v_in", v_in, x, true) ||
        (has_a && !snn_neuron_state_fits(fn, "a_in", a_in, x, true)))
        return NULL;

    const snn_neuron_dims d = snn_neuron_dims_of(x);
    const snn_neuron_params p = snn_neuron_params_from(cfg);
    snn_tensor *inputs[4] = {x, w, v_in, alif ? a_in : NULL};
    const bool record = snn_should_record(4, inputs);
    snn_tensor *spike = snn_neuron_spikes_new(fn, x->shape, x->device, cfg->kind, record);
    snn_tensor *act = activity ? snn_neuron_activity_new(fn, &d, x->device) : NULL;
    snn_tensor *v_last = snn_step_tensor(fn, v_in->shape, x->device);
    snn_tensor *a_last = has_a ? snn_step_tensor(fn, a_in->shape, x->device) : NULL;
    if (!spike || (activity && !act) || !v_last || (has_a && !a_last)) return NULL;
    snn_tensor *h_seq = NULL, *th_seq = NULL;
    if (record) {
        h_seq = snn_step_tensor(fn, x->shape, x->device);
        if (!h_seq || (alif && !(th_seq = snn_step_tensor(fn, x->shape, x->device)))) return NULL;
    }
    if (x->numel == 0) {
        if ((act && snn_tensor_fill(act, 0.0f) != SNN_OK) || snn_tensor_copy(v_last, v_in) != SNN_OK ||
            (a_last && snn_tensor_copy(a_last, a_in) != SNN_OK))
            return NULL;
    } else if (alif) {
        k->alif_forward(spike->data, h_seq ? h_seq->data : NULL, th_seq ? th_seq->data : NULL,
                        v_last->data, a_last->data, act ? act->data : NULL, x->data, v_in->data,
                        a_in->data, &p, &d);
    } else {
        snn_neuron_forward_of(k, cfg->kind)(spike->data, h_seq ? h_seq->data : NULL,
                                            v_last->data, stbif ? a_last->data : NULL,
                                            act ? act->data : NULL, x->data, v_in->data,
                                            stbif ? a_in->data : NULL, w ? w->data : NULL, &p, &d);
    }
    if (record) {
        snn_tensor *a_rec = has_a ? a_in : NULL;
        if (!snn_neuron_record(spike, SNN_NEURON_OUT_SPIKES, x, w, v_in, a_rec, h_seq, th_seq,
                               spike, &p, &d) ||
            !snn_neuron_record(v_last, SNN_NEURON_OUT_V, x, w, v_in, a_rec, h_seq, th_seq, spike,
                               &p, &d) ||
            (alif && !snn_neuron_record(a_last, SNN_NEURON_OUT_A, x, w, v_in, a_rec, h_seq,
                                        th_seq, spike, &p, &d)))
            return NULL;
    }
    *v_out = v_last;
    if (a_out) *a_out = a_last;
    if (activity) *activity = act;
    return spike;
}
