/*
 * alif.c - how a layer of adaptive LIF neurons (ALIF; Bellec et al. 2018, the neurons of an
 * LSNN) runs through time and how it trains: the reference kernels, one plain time loop per
 * element. Each spike raises the neuron's threshold, which then decays back: a memory longer
 * than the membrane's. The equations are the inline functions of kernels/neuron_math.h, shared
 * with the fast CPU kernels (kernels/cpu/alif.c) and the CUDA ones (kernels/cuda/alif.cu);
 * kernels/neuron_kernels.h has the arguments; docs/neurons.md the derivation.
 *
 * Forward, per element, t = 0 .. T-1 (V[-1] = V_reset and A[-1] = 0, or the caller's state;
 * rho = exp(-1 / tau_adapt)):
 *   charge  H[t]  = V[t-1] + (X[t] - (V[t-1] - V_reset)) / tau      (decay_input)
 *                   V[t-1] - (V[t-1] - V_reset) / tau + X[t]        (no decay_input)
 *   thresh  th[t] = V_th + beta A[t-1]
 *   fire    S[t]  = Heaviside(H[t] - th[t])
 *   reset   hard  V[t] = H[t] (1 - S[t]) + V_reset S[t]     soft  V[t] = H[t] - th[t] S[t]
 *   adapt   A[t]  = rho A[t-1] + (1 - rho) S[t]
 *
 * Backward (BPTT), t = T-1 .. 0, carrying G_V = dL/dV[t] and G_A = dL/dA[t] (dL/dV_last,
 * dL/dA_last or 0 after the last step); g = g'(H[t] - th[t]), keep = 0 with detach_reset:
 *   G_S   = dL/dS[t] + (1 - rho) G_A + keep G_V dV/dS
 *   G_H   = G_S g + G_V dV/dH,      G_th = -G_S g + G_V dV/dth
 *           (hard: dV/dH = 1 - S, dV/dS = V_reset - H, dV/dth = 0;
 *            soft: dV/dH = 1,     dV/dS = -th,         dV/dth = -S)
 *   dX[t] += G_H dH/dX  (1/tau with decay_input, else 1)
 *   G_V   = G_H (1 - 1/tau)         G_A = rho G_A + beta G_th        (now at t-1)
 * and at the end dV_init += G_V, dA_init += G_A.
 *
 * What forward saves for backward: H[t] and th[t], 8 bytes per element and step; S[t] is
 * H[t] >= th[t]. Memory traffic per element and step: forward reads X and writes S, H and th
 * (16 B; 8 B without a tape); backward reads dS, H and th and updates dX (20 B).
 */
#include "neuron_ref.h"
#include "kernels/neuron_math.h"

/* spike, h_seq, th_seq, x (T, M); v_last, a_last, v_init, a_init (M); activity (T, N*C) */
void snn_alif_forward_ref(float *spike, float *h_seq, float *th_seq, float *v_last,
                          float *a_last, float *activity, const float *x, const float *v_init,
                          const float *a_init, const snn_neuron_params *p,
                          const snn_neuron_dims *d)
{
    const int64_t T = d->T, M = snn_neuron_dims_step(d), planes = d->N * d->C;
    const float k = 1.0f / p->tau;
    if (activity)
        for (int64_t i = 0; i < T * planes; i++) activity[i] = 0.0f;

    for (int64_t e = 0; e < M; e++) {
        float v = v_init ? v_init[e] : p->v_reset; /* V[-1] */
        float a = a_init ? a_init[e] : 0.0f;       /* A[-1] */
        for (int64_t t = 0; t < T; t++) {
            const int64_t i = t * M + e; /* element e of step t */
            const float h = snn_lif_charge(p, k, v, x[i]);
            const float th = snn_alif_threshold(p, a);
            const float s = snn_alif_fire(h, th);
            v = snn_alif_reset(p, h, s, th);
            a = snn_alif_adapt(p, a, s);
            spike[i] = s;
            if (h_seq) h_seq[i] = h;
            if (th_seq) th_seq[i] = th;
            if (activity) activity[t * planes + e / d->plane] += s;
        }
        /* may alias v_init, a_init: element e of those was read above */
        if (v_last) v_last[e] = v;
        if (a_last) a_last[e] = a;
    }
}

/* dx, dspike, h_seq, th_seq (T, M); dv_init, da_init, dv_last, da_last (M) */
void snn_alif_backward_ref(float *dx, float *dv_init, float *da_init, const float *dspike,
                           const float *dv_last, const float *da_last, const float *h_seq,
                           const float *th_seq, const snn_neuron_params *p,
                           const snn_neuron_dims *d)
{
    const int64_t T = d->T, M = snn_neuron_dims_step(d);
    const float k = 1.0f / p->tau;
    const float dh_dx = snn_lif_dh_dx(p, k), dh_dv = snn_lif_dh_dv(p, k);

    for (int64_t e = 0; e < M; e++) {
        float gv = dv_last ? dv_last[e] : 0.0f; /* G_V = dL/dV[T-1] */
        float ga = da_last ? da_last[e] : 0.0f; /* G_A = dL/dA[T-1] */
        for (int64_t t = T - 1; t >= 0; t--) {
            const int64_t i = t * M + e;
            const float gs = dspike ? dspike[i] : 0.0f;
            const float gh = snn_alif_grad_step(p, h_seq[i], th_seq[i], gs, gv, &ga);
            if (dx) dx[i] += gh * dh_dx;
            gv = gh * dh_dv; /* now dL/dV[t-1]; ga is dL/dA[t-1] */
        }
        if (dv_init) dv_init[e] += gv;
        if (da_init) da_init[e] += ga;
    }
}
