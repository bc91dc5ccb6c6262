/*
 * recurrent.c - a recurrent layer of spiking neurons (RLIF; with ALIF neurons, the recurrent
 * layer of an LSNN, Bellec et al. 2018): each neuron's input current adds the spikes the layer
 * itself emitted one step before, through a learned F x F weight matrix.
 *
 * Dimension glossary: T time steps, N batch, F features (neurons of the layer), M = N F.
 *
 * Forward, per step t = 0 .. T-1, with S[-1] = 0 and the neurons' state (V, and A for ALIF)
 * carried from step to step (V[-1] = V_reset, A[-1] = 0):
 *
 *   I[t] = X[t] + S[t-1] W_rec^T        (N, F): row n of S[t-1] times W_rec transposed, the
 *                                       input each neuron gets from the layer's last spikes
 *   then one step of the neuron on I[t] (kernels/neuron_math.h):
 *     charge  H[t] = f(V[t-1], I[t])    IF: V + I;  LIF / ALIF: V + (I - (V - V_reset)) / tau
 *     fire    S[t] = Heaviside(H[t] - th[t])     th = V_th (IF, LIF); V_th + beta A[t-1] (ALIF)
 *     reset   V[t] = H (1 - S) + V_reset S (hard)  or  H - th S (soft)
 *     adapt   A[t] = rho A[t-1] + (1 - rho) S[t]  (ALIF)
 *
 * It runs on every device with no kernel of its own: a loop over t that calls the device's
 * GEMM and axpy (kernels/kernels.h) for I[t], then the neuron table's forward kernel with
 * T = 1 dims and the state passed in and out (lif_forward's v_init / v_last; alif_forward's
 * v and a).
 *
 * Backward, backpropagation through time, t = T-1 .. 0, carrying G_V = dL/dV[t] (and G_A =
 * dL/dA[t] for ALIF) from step to step, 0 after the last step:
 *
 *   G_S[t]  = dL/dS[t] + G_I[t+1] W_rec    the output's gradient plus the recurrence's path
 *                                          (S[t] fed I[t+1]); no second term at t = T-1
 *   G_I[t], G_V[t-1] (G_A[t-1]) = the neuron's one-step backward (lif_backward /
 *             alif_backward with T = 1) from G_S[t], G_V[t] (G_A[t]) and the saved H[t] (th[t])
 *   dX[t]  += G_I[t]
 *   dW_rec += G_I[t]^T S[t-1]              for t >= 1 (S[-1] = 0 adds nothing)
 *
 * G_I is kept for every step in backward scratch (T, N, F), so dX is one axpy and dW_rec one
 * GEMM over all steps at the end: dW_rec += G_I[1..T-1]^T S[0..T-2], K = (T-1) N.
 *
 * Why one tape node: the recurrence makes every step depend on the step before, so the layer
 * cannot fold T into the batch as conv and linear layers do (one GEMM over T N rows); the T
 * small products run in order. Unrolled into per-step primitives (matmul, add, the single-step
 * neuron), the tape would hold about 2T + T x (the neuron's nodes) nodes and a state tensor
 * per step; one node holds the same numbers in the saved tensors below and runs BPTT in one
 * backward call. tests/test_recurrent.c checks it against exactly that unrolled version.
 *
 * What the node saves (grad mode only; no-grad mode allocates nothing beyond the spikes and
 * the step's scratch):
 *   H  (T, N, F)   the membrane after charging, 4 bytes per element and step
 *   th (T, N, F)   ALIF only: each step's threshold, 4 bytes more
 *   S  (T, N, F)   the spikes, which are the output (held by the graph anyway); backward reads
 *                  them for dW_rec (through snn_saved_values: they may be packed to bits)
 * so 4 B per element and step beyond the output (8 B for ALIF), as the feed-forward neurons.
 * Scratch (given back when the op returns): forward I[t] and V (and A), 2 (3) x N F floats;
 * backward G_I (T, N, F) plus G_S and two G_V (and two G_A), (T + 3) N F floats (T + 5: ALIF).
 * nn/memory_walk.c (snn_walk_recurrent) counts all of it for the memory estimate.
 *
 * Work per step: one (N x F) x (F x F) GEMM forward, two backward (G_S and, summed over the
 * steps, dW_rec); the neuron kernels read and write ~12-16 B per element and step.
 *
 * Test: tests/test_recurrent.c (CPU; against the unrolled primitives, hand-computed cases),
 * tests/test_cuda_recurrent.c (CUDA against the CPU).
 */
#include <limits.h>

#include "neuron_op.h"
#include "kernels/kernels.h"
#include "tensor/arena.h"
#include "tensor/error.h"

typedef struct recurrent_saved {
    snn_neuron_params params;
    int64_t T, N, F;
    snn_tensor *h_seq;   /* (T, N, F) H[t] */
    snn_tensor *th_seq;  /* (T, N, F) ALIF's threshold, or NULL */
    snn_tensor *spike;   /* (T, N, F) the output */
} recurrent_saved;

/* Checks the arguments; returns the neuron table (and *dev the device's table), or NULL with a
 * message naming fn and the argument. */
static const snn_neuron_kernels *check_args(const char *fn, snn_tensor *x, snn_tensor *w_rec,
                                            const snn_neuron_config *cfg, const snn_kernels **dev)
{
    char sx[96], sw[96];
    if (snn_check_tensor(fn, "x", x) || snn_check_tensor(fn, "w_rec", w_rec)) return NULL;
    if (x->shape.ndim != 3)
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument 'x' (expected 3-D (T, N, F) "
                              "input currents, got %s); hint: a (T, N, C, H, W) input goes "
                              "through a flatten to (T, N, C H W) first", fn,
                              snn_shape_str(x->shape, sx, sizeof sx));
    const int64_t F = x->shape.dim[2];
    if (w_rec->shape.ndim != 2 || w_rec->shape.dim[0] != F || w_rec->shape.dim[1] != F)
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument 'w_rec' (expected (F, F) = "
                              "[%lld, %lld] to match x %s, got %s)", fn, (long long)F, (long long)F,
                              snn_shape_str(x->shape, sx, sizeof sx),
                              snn_shape_str(w_rec->shape, sw, sizeof sw));
    if (snn_check_same_device(fn, "x", x, "w_rec", w_rec)) return NULL;
    if (!cfg)
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument 'cfg' (expected a neuron "
                              "config, got NULL)", fn);
    if (cfg->kind != SNN_NEURON_IF && cfg->kind != SNN_NEURON_LIF &&
        cfg->kind != SNN_NEURON_ALIF)
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument 'cfg' (expected an if, lif or "
                              "alif neuron, got %s); hint: the recurrent layer runs the neurons "
                              "whose state is V (and ALIF's A) only", fn,
                              snn_neuron_kind_name(cfg->kind));
    /* the GEMMs take int dims: T N rows for dW_rec's product */
    if (x->shape.dim[0] * x->shape.dim[1] > INT_MAX || F > INT_MAX)
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument 'x' (expected T N and F below "
                              "2^31, got %s)", fn, snn_shape_str(x->shape, sx, sizeof sx));
    /* the config's fields, and this kind's kernels on x's device (a clear error where the
     * table lacks them, e.g. ALIF before its port) */
    const snn_neuron_kernels *k = snn_neuron_check_args(fn, x, cfg, NULL);
    if (!k) return NULL;
    const snn_kernels *d = snn_kernels_for(x->device);
    SNN_REQUIRE_KERNEL(d, fn, gemm);
    SNN_REQUIRE_KERNEL(d, fn, axpy);
    SNN_REQUIRE_KERNEL(d, fn, fill);
    *dev = d;
    return k;
}

/* BPTT through the whole run (file header). The tape calls it only when the output has a
 * gradient. */
static void recurrent_backward(snn_node *node)
{
    const char *fn = "snn_recurrent_multistep (backward)";
    const recurrent_saved *sv = node->saved;
    snn_tensor *x = node->inputs[0], *w_rec = node->inputs[1];
    float *dx = snn_grad_for(x), *dw = snn_grad_for(w_rec);
    if (!dx && !dw) return;
    const snn_kernels *dev = snn_kernels_for(x->device);
    const snn_neuron_kernels *k = snn_neuron_kernels_for(x->device);
    const bool alif = sv->params.kind == SNN_NEURON_ALIF;
    const int64_t T = sv->T, M = sv->N * sv->F;
    const int N = (int)sv->N, F = (int)sv->F;
    const snn_neuron_dims one = {1, sv->N, sv->F, 1}; /* one step, (N, F) */
    const float *g = node->out->grad->data;            /* (T, N, F) dL/dS from the consumers */

    snn_step_scratch mark = snn_step_scratch_mark(x->device);
    const float *spike = snn_saved_values(fn, sv->spike); /* (T, N, F) */
    const size_t step_bytes = (size_t)M * sizeof(float);
    float *g_i = snn_step_alloc(fn, (size_t)T * step_bytes, x->device);   /* (T, N, F) G_I */
    float *g_s = snn_step_alloc(fn, step_bytes, x->device);               /* (N, F) G_S[t] */
    float *g_v[2] = {snn_step_alloc(fn, step_bytes, x->device),          /* (N, F) G_V */
                     snn_step_alloc(fn, step_bytes, x->device)};
    float *g_a[2] = {NULL, NULL};                                         /* (N, F) G_A */
    if (alif) {
        g_a[0] = snn_step_alloc(fn, step_bytes, x->device);
        g_a[1] = snn_step_alloc(fn, step_bytes, x->device);
    }
    if (!spike || !g_i || !g_s || !g_v[0] || !g_v[1] || (alif && (!g_a[0] || !g_a[1]))) {
        snn_step_scratch_release(x->device, mark);
        snn_backward_out_of_memory();
        return;
    }
    dev->fill(g_i, 0.0f, T * M); /* the neuron kernels accumulate into it */
    int cur = 0; /* g_v[cur] holds G_V[t] (and g_a[cur] G_A[t]) once t < T-1 */
    for (int64_t t = T - 1; t >= 0; t--) {
        const float *gs = g + t * M; /* G_S[t] = dL/dS[t] ... */
        if (t < T - 1) {             /* ... + G_I[t+1] W_rec, the path through I[t+1] */
            dev->gemm(false, false, N, F, F, 1.0f, g_i + (t + 1) * M, F, w_rec->data, F, 0.0f,
                      g_s, F);
            dev->axpy(g_s, 1.0f, g + t * M, M);
            gs = g_s;
        }
        /* the carry into step t-1 starts at 0: the kernels add to it */
        const float *gv_in = t < T - 1 ? g_v[cur] : NULL, *ga_in = t < T - 1 ? g_a[cur] : NULL;
        float *gv_out = g_v[1 - cur], *ga_out = g_a[1 - cur];
        dev->fill(gv_out, 0.0f, M);
        if (alif) {
            dev->fill(ga_out, 0.0f, M);
            k->alif_backward(g_i + t * M, gv_out, ga_out, gs, gv_in, ga_in,
                             sv->h_seq->data + t * M, sv->th_seq->data + t * M, &sv->params,
                             &one);
        } else {
            k->lif_backward(g_i + t * M, gv_out, NULL, gs, gv_in, sv->h_seq->data + t * M,
                            spike + t * M, NULL, NULL, NULL, NULL, &sv->params, &one);
        }
        cur = 1 - cur;
    }
    if (dx) dev->axpy(dx, 1.0f, g_i, T * M);
    /* dW_rec (F, F) += G_I[1..T-1]^T (F, (T-1) N) S[0..T-2] ((T-1) N, F) */
    if (dw && T > 1)
        dev->gemm(true, false, F, F, (int)((T - 1) * sv->N), 1.0f, g_i + M, F, spike, F, 1.0f,
                  dw, F);
    snn_step_scratch_release(x->device, mark);
}

snn_tensor *snn_recurrent_multistep(snn_tensor *x, snn_tensor *w_rec, const snn_neuron_config *cfg,
                                    snn_tensor **activity)
{
    const char *fn = "snn_recurrent_multistep";
    if (activity) *activity = NULL;
    const snn_kernels *dev = NULL;
    const snn_neuron_kernels *k = check_args(fn, x, w_rec, cfg, &dev);
    if (!k) return NULL;
    const bool alif = cfg->kind == SNN_NEURON_ALIF;
    const int64_t T = x->shape.dim[0], M = x->shape.dim[1] * x->shape.dim[2];
    const int N = (int)x->shape.dim[1], F = (int)x->shape.dim[2];
    const snn_neuron_dims all = {T, N, F, 1}, one = {1, N, F, 1};
    const snn_neuron_params p = snn_neuron_params_from(cfg);

    snn_tensor *inputs[2] = {x, w_rec};
    const bool record = snn_should_record(2, inputs);
    /* outputs and saved tensors first: the scratch below is given back before returning */
    /* (T, N, F) */
    snn_tensor *spike = snn_neuron_spikes_new(fn, x->shape, x->device, cfg->kind, record);
    if (!spike) return NULL;
    snn_tensor *act = NULL; /* (T N, F) */
    if (activity && !(act = snn_neuron_activity_new(fn, &all, x->device))) return NULL;
    snn_tensor *h_seq = NULL, *th_seq = NULL; /* (T, N, F) */
    if (record && !(h_seq = snn_step_tensor(fn, x->shape, x->device))) return NULL;
    if (record && alif && !(th_seq = snn_step_tensor(fn, x->shape, x->device))) return NULL;

    if (x->numel == 0) {
        if (act && snn_tensor_fill(act, 0.0f) != SNN_OK) return NULL; /* nothing fired */
    } else {
        snn_step_scratch mark = snn_step_scratch_mark(x->device);
        const size_t step_bytes = (size_t)M * sizeof(float);
        float *cur = snn_step_alloc(fn, step_bytes, x->device); /* (N, F) I[t] */
        float *v = snn_step_alloc(fn, step_bytes, x->device);   /* (N, F) V */
        float *a = alif ? snn_step_alloc(fn, step_bytes, x->device) : NULL; /* (N, F) A */
        if (!cur || !v || (alif && !a)) {
            snn_step_scratch_release(x->device, mark);
            return NULL;
        }
        for (int64_t t = 0; t < T; t++) {
            const float *in = x->data; /* I[0] = X[0]: S[-1] = 0 */
            if (t > 0) {               /* I[t] = S[t-1] W_rec^T + X[t] */
                dev->gemm(false, true, N, F, F, 1.0f, spike->data + (t - 1) * M, F,
                          w_rec->data, F, 0.0f, cur, F);
                dev->axpy(cur, 1.0f, x->data + t * M, M);
                in = cur;
            }
            /* the state enters from the step before (t = 0: NULL, the kernel's V_reset, 0) and
             * leaves in place: v_last may alias v_init */
            float *s_t = spike->data + t * M, *h_t = h_seq ? h_seq->data + t * M : NULL;
            float *act_t = act ? act->data + t * M : NULL; /* (N, F) counts of this step */
            if (alif)
                k->alif_forward(s_t, h_t, th_seq ? th_seq->data + t * M : NULL, v, a, act_t, in,
                                t > 0 ? v : NULL, t > 0 ? a : NULL, &p, &one);
            else
                k->lif_forward(s_t, h_t, v, NULL, act_t, in, t > 0 ? v : NULL, NULL, NULL, &p,
                               &one);
        }
        snn_step_scratch_release(x->device, mark);
    }
    if (record) {
        snn_node *node = snn_tape_record("recurrent", recurrent_backward, spike, 2, inputs,
                                         sizeof(recurrent_saved));
        if (!node) return NULL;
        *(recurrent_saved *)node->saved =
            (recurrent_saved){p, T, N, F, h_seq, th_seq, spike};
    }
    if (activity) *activity = act;
    return spike;
}
