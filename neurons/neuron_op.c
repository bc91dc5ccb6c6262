/*
 * neuron_op.c - the multi-step neuron op: argument checks, allocation, dispatch to the kernel
 * table, the tape record, and the backward that runs the fused BPTT kernel.
 *
 *   x (T, N, ...)  --[ one node: fused forward over all T ]-->  spikes (T, N, ...)
 *
 * What the node keeps (grad mode only; no-grad mode allocates nothing beyond the spikes):
 *   H (T, N, ...)  the membrane after charging, 4 bytes per element per step; in x's own
 *                  memory when the caller gives x up (snn_neuron_multistep_consume, IF / LIF)
 *   th (T, N, ...) ALIF only: each step's threshold V_th + beta A[t-1], 4 bytes more
 * and pointers to tensors the graph holds anyway (x, w, the spikes). Everything is a STEP
 * tensor, gone at snn_step_end().
 */
#include "neuron_op.h"
#include "kernels/kernels.h"
#include "tensor/arena.h"
#include "tensor/error.h"

typedef struct neuron_saved {
    snn_neuron_params params;
    snn_neuron_dims dims;
    snn_neuron_output out; /* what the node's output is: the spikes, or (single-step API) V or A */
    snn_tensor *h_seq;   /* (T, M) H[t] */
    snn_tensor *th_seq;  /* (T, M) ALIF's threshold th[t], or NULL */
    snn_tensor *spike;   /* (T, M) the forward's output spikes (ST-BIF rebuilds A from them) */
    snn_tensor *a_init;  /* (M) ST-BIF's A before the run, or NULL */
} neuron_saved;

const snn_neuron_kernels *snn_neuron_check_args(const char *fn, snn_tensor *x,
                                                const snn_neuron_config *cfg, snn_tensor *w)
{
    if (snn_check_tensor(fn, "x", x)) return NULL; /* first: keeps an earlier op's message */
    if (snn_neuron_config_check(fn, cfg) != SNN_OK) return NULL;
    if (cfg->kind == SNN_NEURON_PLIF || cfg->kind == SNN_NEURON_QCLIP) {
        const bool plif = cfg->kind == SNN_NEURON_PLIF;
        if (!w)
            return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument 'w' (expected %s 1-element "
                                  "parameter, got NULL); hint: make it with %s", fn,
                                  plif ? "PLIF's" : "QCLIP's step, a",
                                  plif ? "snn_plif_param_new(tau0, device)"
                                       : "snn_qclip_step_new(step, device)");
        if (w->numel != 1)
            return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument 'w' (expected 1 element, "
                                  "got %lld)", fn, (long long)w->numel);
        if (snn_check_same_device(fn, "x", x, "w", w)) return NULL;
    } else if (w) {
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument 'w' (expected NULL for a %s "
                              "neuron, got a tensor); hint: only plif and qclip learn a "
                              "parameter", fn, snn_neuron_kind_name(cfg->kind));
    }
    /* x exists, so its device has kernels (snn_tensor_new checks) */
    const snn_neuron_kernels *k = snn_neuron_kernels_for(x->device);
    /* a table without this kind's kernels is a clear error, never a call through NULL (the
     * ANN kinds go to snn_relu and snn_qclip, which check their own) */
    if (cfg->kind == SNN_NEURON_STBIF) {
        SNN_REQUIRE_KERNEL(k, fn, stbif_forward);
        SNN_REQUIRE_KERNEL(k, fn, stbif_backward);
    } else if (cfg->kind == SNN_NEURON_ALIF) {
        SNN_REQUIRE_KERNEL(k, fn, alif_forward);
        SNN_REQUIRE_KERNEL(k, fn, alif_backward);
    } else if (!snn_neuron_is_ann(cfg->kind)) {
        SNN_REQUIRE_KERNEL(k, fn, lif_forward);
        SNN_REQUIRE_KERNEL(k, fn, lif_backward);
    }
    return k;
}

snn_neuron_forward_fn snn_neuron_forward_of(const snn_neuron_kernels *k, snn_neuron_kind kind)
{
    SNN_ASSERT(kind != SNN_NEURON_ALIF); /* ALIF's kernels have their own signature */
    return kind == SNN_NEURON_STBIF ? k->stbif_forward : k->lif_forward;
}

/* BPTT through the whole run: one kernel call. The tape calls it only when the output has a
 * gradient, and the forward's snn_neuron_check_args made sure the kernel exists. */
static void neuron_backward(snn_node *node)
{
    const neuron_saved *sv = node->saved;
    snn_tensor *x = node->inputs[0], *w = node->inputs[1], *v_init = node->inputs[2];
    float *dx = snn_grad_for(x), *dw = snn_grad_for(w), *dv_init = snn_grad_for(v_init);
    const snn_neuron_kernels *k = snn_neuron_kernels_for(x->device);
    const float *g = node->out->grad->data;
    if (sv->params.kind == SNN_NEURON_ALIF) {
        /* ALIF: the gradient of A[-1] too (inputs[3], the single-step state); no w */
        float *da_init = snn_grad_for(node->inputs[3]);
        if (!dx && !dv_init && !da_init) return;
        k->alif_backward(dx, dv_init, da_init, sv->out == SNN_NEURON_OUT_SPIKES ? g : NULL,
                         sv->out == SNN_NEURON_OUT_V ? g : NULL,
                         sv->out == SNN_NEURON_OUT_A ? g : NULL, sv->h_seq->data,
                         sv->th_seq->data, &sv->params, &sv->dims);
        return;
    }
    if (!dx && !dw && !dv_init) return;
    snn_neuron_backward_fn backward =
        sv->params.kind == SNN_NEURON_STBIF ? k->stbif_backward : k->lif_backward;
    const bool out_is_v = sv->out == SNN_NEURON_OUT_V;
    const char *fn = "snn_neuron_multistep (backward)";
    snn_step_scratch mark = snn_step_scratch_mark(x->device);
    const float *spike = snn_saved_values(fn, sv->spike), *xv = snn_saved_values(fn, x);
    if (!spike || !xv) {
        snn_backward_out_of_memory();
        return;
    }
    backward(dx, dv_init, dw, out_is_v ? NULL : g, out_is_v ? g : NULL,
             sv->h_seq->data, spike, xv, v_init ? v_init->data : NULL,
             sv->a_init ? sv->a_init->data : NULL, w ? w->data : NULL, &sv->params, &sv->dims);
    snn_step_scratch_release(x->device, mark); /* unpacked spikes, if any */
}

snn_node *snn_neuron_record(snn_tensor *out, snn_neuron_output which, snn_tensor *x,
                            snn_tensor *w, snn_tensor *v_init, snn_tensor *a_init,
                            snn_tensor *h_seq, snn_tensor *th_seq, snn_tensor *spike,
                            const snn_neuron_params *p, const snn_neuron_dims *d)
{
    /* ALIF's A is differentiable state, an input of the node; ST-BIF's spike count is not */
    const bool alif = p->kind == SNN_NEURON_ALIF;
    snn_tensor *inputs[4] = {x, w, v_init, alif ? a_init : NULL};
    static const char *const names[] = {"neuron", "neuron_step_v", "neuron_step_a"};
    snn_node *node = snn_tape_record(names[which], neuron_backward, out, 4, inputs,
                                     sizeof(neuron_saved));
    if (node)
        *(neuron_saved *)node->saved =
            (neuron_saved){*p, *d, which, h_seq, th_seq, spike, alif ? NULL : a_init};
    return node;
}

snn_neuron_dims snn_neuron_dims_of(const snn_tensor *x)
{
    snn_neuron_dims d = {x->shape.dim[0], x->shape.dim[1], 1, 1};
    if (x->shape.ndim >= 3) d.C = x->shape.dim[2];
    for (int i = 3; i < x->shape.ndim; i++) d.plane *= x->shape.dim[i];
    return d;
}

snn_tensor *snn_neuron_spikes_new(const char *fn, snn_shape shape, snn_device device,
                                  snn_neuron_kind kind, bool record)
{
    if (!record || !snn_neuron_spikes_are_binary(kind)) return snn_step_tensor(fn, shape, device);
    snn_tensor *spike = snn_step_pooled_tensor(fn, shape, device);
    if (spike) spike->spikes = true;
    return spike;
}

snn_tensor *snn_neuron_activity_new(const char *fn, const snn_neuron_dims *d, snn_device device)
{
    return snn_step_tensor(fn, SNN_SHAPE(d->T * d->N, d->C), device);
}

static snn_tensor *multistep(const char *fn, snn_tensor *x, const snn_neuron_config *cfg,
                             snn_tensor *w, snn_tensor **activity, bool consume_x)
{
    if (activity) *activity = NULL;
    const snn_neuron_kernels *k = snn_neuron_check_args(fn, x, cfg, w);
    if (!k) return NULL;
    if (cfg->kind == SNN_NEURON_RELU) return snn_relu(x); /* ANN kinds: no state, no spikes */
    if (cfg->kind == SNN_NEURON_QCLIP) return snn_qclip(x, w, cfg);
    if (x->shape.ndim < 2) {
        char buf[96];
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument 'x' (expected (T, N, ...) with "
                              "at least 2 dims, got %s); hint: a single time step goes to "
                              "snn_neuron_step", fn, snn_shape_str(x->shape, buf, sizeof buf));
    }
    const snn_neuron_dims d = snn_neuron_dims_of(x);
    const snn_neuron_params p = snn_neuron_params_from(cfg);

    snn_tensor *inputs[2] = {x, w};
    const bool record = snn_should_record(2, inputs);
    /* (T, N, ...) */
    snn_tensor *spike = snn_neuron_spikes_new(fn, x->shape, x->device, cfg->kind, record);
    if (!spike) return NULL;
    snn_tensor *act = NULL;                                       /* (T*N, C) */
    if (activity) {
        act = snn_neuron_activity_new(fn, &d, x->device);
        if (!act) return NULL;
    }
    snn_tensor *h_seq = NULL, *th_seq = NULL;                     /* (T, N, ...) */
    if (record && cfg->kind == SNN_NEURON_ALIF) {
        th_seq = snn_step_tensor(fn, x->shape, x->device);
        if (!th_seq) return NULL;
    }
    if (record) {
        /* IF / LIF: each element's X[t] is read before its H[t] is written, by the same thread
         * (lif.c, lif.cu), and their backward never reads X: H may take X's place */
        const bool reuse = consume_x && x->lifetime == SNN_STEP && x->numel > 0 &&
                           (cfg->kind == SNN_NEURON_IF || cfg->kind == SNN_NEURON_LIF);
        h_seq = reuse ? snn_step_view(fn, x, x->shape) : snn_step_tensor(fn, x->shape, x->device);
        if (!h_seq) return NULL;
    }
    if (x->numel > 0 && cfg->kind == SNN_NEURON_ALIF)
        k->alif_forward(spike->data, h_seq ? h_seq->data : NULL, th_seq ? th_seq->data : NULL,
                        NULL, NULL, act ? act->data : NULL, x->data, NULL, NULL, &p, &d);
    else if (x->numel > 0)
        snn_neuron_forward_of(k, cfg->kind)(spike->data, h_seq ? h_seq->data : NULL, NULL, NULL, act ? act->data : NULL,
                x->data, NULL, NULL, w ? w->data : NULL, &p, &d);
    else if (act && snn_tensor_fill(act, 0.0f) != SNN_OK) /* planes of 0 elements fire 0 times */
        return NULL;
    if (record && !snn_neuron_record(spike, SNN_NEURON_OUT_SPIKES, x, w, NULL, NULL, h_seq,
                                     th_seq, spike, &p, &d))
        return NULL;
    if (activity) *activity = act;
    return spike;
}

snn_tensor *snn_neuron_multistep(snn_tensor *x, const snn_neuron_config *cfg, snn_tensor *w,
                                 snn_tensor **activity)
{
    return multistep("snn_neuron_multistep", x, cfg, w, activity, false);
}

snn_tensor *snn_neuron_multistep_consume(snn_tensor *x, const snn_neuron_config *cfg, snn_tensor *w,
                                         snn_tensor **activity)
{
    return multistep("snn_neuron_multistep_consume", x, cfg, w, activity, true);
}
