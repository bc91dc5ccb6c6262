/*
 * lif.c - how a layer of IF, LIF and ParametricLIF neurons runs through time and how it trains:
 * the reference kernels, one plain time loop per element. The equations are written once, as
 * the inline functions of kernels/neuron_math.h that the fast CPU kernels (kernels/cpu/lif.c)
 * and the CUDA kernels (kernels/cuda/lif.cu) call too; kernels/neuron_kernels.h has the
 * arguments. Background and derivations: docs/neurons.md.
 *
 * Forward, per element, t = 0 .. T-1 (X input current, H membrane after charging, V membrane
 * after the reset, V[-1] = V_reset or the caller's state):
 *   charge  IF    H[t] = V[t-1] + X[t]
 *           LIF   H[t] = V[t-1] + (X[t] - (V[t-1] - V_reset)) / tau    (decay_input)
 *                 H[t] = V[t-1] - (V[t-1] - V_reset) / tau + X[t]      (no decay_input)
 *           PLIF  LIF with k = sigmoid(w) for 1/tau, w learned (one per layer)
 *   fire    S[t] = Heaviside(H[t] - V_th)            (1 when H[t] >= V_th, else 0)
 *   reset   hard  V[t] = H[t] (1 - S[t]) + V_reset S[t]
 *           soft  V[t] = H[t] - V_th S[t]
 *
 * Backward: backpropagation through time. The loss reaches each step's spikes (G_S[t] =
 * dL/dS[t]) and, through V[t], every later step. So the loop runs t = T-1 down to 0, carrying
 * G_V = dL/dV[t] backwards (0 after the last step, or dL/dV_last):
 *   g     = g'(H[t] - V_th)  the surrogate (kernels/surrogate.h): Heaviside's derivative is 0
 *                            almost everywhere, so backward uses the slope of a smooth step
 *   dV/dH = (1 - S) + (V_reset - H) g   hard reset     (1 - S with detach_reset)
 *           1 - V_th g                  soft reset     (1 with detach_reset)
 *   G_H   = G_S[t] g + G_V dV/dH
 *   dX[t] += G_H dH/dX     dH/dX = 1/tau (PLIF: k) with decay_input; IF, or no decay_input: 1
 *   G_V   = G_H dH/dV      dH/dV = 1 - 1/tau (PLIF: 1 - k); IF: 1         (now dL/dV[t-1])
 *   PLIF  dL/dk += G_H dH/dk,  dH/dk = X[t] - (V[t-1] - V_reset)   (no decay_input: no X[t]),
 *         and once at the end dL/dw = dL/dk k (1 - k), the derivative of k = sigmoid(w)
 * detach_reset treats the S[t] inside the reset as a constant: the reset's g term goes.
 *
 * What forward saves for backward: H[t] and nothing else, 4 bytes per element and step. The
 * rest follows from it: S[t] = fire(H[t]), g at H[t], and V[t-1] = reset(H[t-1], S[t-1]) for
 * PLIF's dH/dk. dH/dX and dH/dV are constants, so IF and LIF never read X again (PLIF's dH/dk
 * does; X is the op's input, which the graph keeps anyway).
 *
 * Memory traffic per element and step: forward reads X and writes S and H (12 B); backward
 * reads H and G_S and updates dX (16 B; PLIF also reads X and H[t-1]).
 */
#include "neuron_ref.h"
#include "kernels/neuron_math.h"

/* spike, h_seq (T, M); v_last, v_init (M); activity (T, N*C); x (T, M); M = N * C * plane */
void snn_lif_forward_ref(float *spike, float *h_seq, float *v_last, float *a_last,
                         float *activity, const float *x, const float *v_init,
                         const float *a_init, const float *w, const snn_neuron_params *p,
                         const snn_neuron_dims *d)
{
    (void)a_last; /* ST-BIF's spike count: IF and LIF have none */
    (void)a_init;
    const int64_t T = d->T, M = snn_neuron_dims_step(d), planes = d->N * d->C;
    const float k = snn_lif_decay(p, w); /* 1/tau, or sigmoid(w) for PLIF */
    if (activity)
        for (int64_t i = 0; i < T * planes; i++) activity[i] = 0.0f;

    for (int64_t e = 0; e < M; e++) {
        float v = v_init ? v_init[e] : p->v_reset; /* V[-1] */
        for (int64_t t = 0; t < T; t++) {
            const int64_t i = t * M + e; /* element e of step t */
            const float h = snn_lif_charge(p, k, v, x[i]);
            const float s = snn_lif_fire(p, h);
            v = snn_lif_reset(p, h, s);
            spike[i] = s;
            if (h_seq) h_seq[i] = h;
            if (activity) activity[t * planes + e / d->plane] += s; /* s is 0 or 1 */
        }
        if (v_last) v_last[e] = v; /* may alias v_init: v_init[e] was read above */
    }
}

/* dx, h_seq, dspike, x (T, M); dv_init, dv_last, v_init (M); dw, w [1] */
void snn_lif_backward_ref(float *dx, float *dv_init, float *dw, const float *dspike,
                          const float *dv_last, const float *h_seq, const float *spike,
                          const float *x, const float *v_init, const float *a_init,
                          const float *w, const snn_neuron_params *p, const snn_neuron_dims *d)
{
    (void)spike; /* S[t] = fire(H[t]): recomputed */
    (void)a_init;
    const int64_t T = d->T, M = snn_neuron_dims_step(d);
    const float k = snn_lif_decay(p, w);
    const float dh_dx = snn_lif_dh_dx(p, k), dh_dv = snn_lif_dh_dv(p, k);
    const bool want_dk = p->kind == SNN_NEURON_PLIF && dw;
    double dk = 0.0; /* dL/dk over every element and step */

    for (int64_t e = 0; e < M; e++) {
        float gv = dv_last ? dv_last[e] : 0.0f; /* G_V = dL/dV[T-1] */
        for (int64_t t = T - 1; t >= 0; t--) {
            const int64_t i = t * M + e;
            const float gs = dspike ? dspike[i] : 0.0f; /* G_S[t] */
            const float gh = snn_lif_grad_h(p, h_seq[i], gs, gv);
            if (dx) dx[i] += gh * dh_dx;
            if (want_dk) {
                float v_prev; /* V[t-1]: the reset of H[t-1], or the state before step 0 */
                if (t > 0) v_prev = snn_lif_reset(p, h_seq[i - M], snn_lif_fire(p, h_seq[i - M]));
                else v_prev = v_init ? v_init[e] : p->v_reset;
                dk += (double)(gh * snn_lif_dh_dk(p, x[i], v_prev));
            }
            gv = gh * dh_dv; /* now dL/dV[t-1] */
        }
        if (dv_init) dv_init[e] += gv;
    }
    if (want_dk) dw[0] += (float)(dk * (double)k * (1.0 - (double)k));
}
