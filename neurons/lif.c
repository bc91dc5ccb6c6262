/*
 * lif.c - the fused multi-step CPU kernels of IF, LIF and ParametricLIF (one kernel, the kind
 * picks the charge equation). Equations: neuron_math.h (DESIGN.md section 4). Tests:
 * tests/test_neurons_trace.c (hand-computed traces), tests/test_neurons_grad.c (backward vs
 * the same dynamics unrolled into primitive ops on the tape).
 *
 *   forward, per element, t = 0 .. T-1:
 *     H[t] = charge(V[t-1], X[t]);  S[t] = Heaviside(H[t] - V_th);  V[t] = reset(H[t], S[t])
 *   backward (BPTT), per element, t = T-1 .. 0, G_V = dL/dV_last (or 0):
 *     G_H = G_S[t] g'(H[t] - V_th) + G_V dV/dH;  dX[t] += G_H dH/dX;  G_V = G_H dH/dV
 *
 * Saved for backward: H[t] only, 4 bytes per element per step (S is recomputed from H, and
 * V[t-1], which PLIF's dL/dk needs, is reset(H[t-1]); X is the op's input, alive anyway).
 * Memory traffic per element per step: forward reads X (4 B), writes S (4 B) and, in grad
 * mode, H (4 B); backward reads dS and H (8 B; PLIF also X) and updates dX (8 B). V never
 * leaves the chunk's local array.
 */
#include "neuron_cpu.h"
#include "neuron_math.h"

void snn_lif_forward_cpu(float *spike, float *h_seq, float *v_last, float *a_last,
                         float *activity, const float *x, const float *v_init,
                         const float *a_init, const float *w, const snn_neuron_params *params,
                         const snn_neuron_dims *d)
{
    /* A local copy: the compiler then knows that stores through the float pointers cannot
     * change the params, so it keeps them in registers and hoists the branches on them. */
    const snn_neuron_params local = *params, *p = &local;
    (void)a_last;
    (void)a_init;
    const int64_t T = d->T, M = snn_neuron_dims_step(d);
    const snn_neuron_split split = snn_neuron_split_make(d);
    const float k = snn_lif_decay(p, w);

#pragma omp parallel for schedule(static)
    for (int64_t item = 0; item < split.items; item++) {
        int64_t q0, q1;
        snn_neuron_split_item(&split, item, &q0, &q1);
        if (activity)
            for (int64_t t = 0; t < T; t++)
                for (int64_t q = q0; q < q1; q++) activity[t * split.planes + q] = 0.0f;

        const int64_t e_end = q1 * split.plane;
        for (int64_t e0 = q0 * split.plane; e0 < e_end; e0 += SNN_NEURON_CHUNK) {
            const int64_t n = e_end - e0 < SNN_NEURON_CHUNK ? e_end - e0 : SNN_NEURON_CHUNK;
            float v[SNN_NEURON_CHUNK]; /* V of the chunk's elements, carried through time */
            for (int64_t i = 0; i < n; i++) v[i] = v_init ? v_init[e0 + i] : p->v_reset;

            for (int64_t t = 0; t < T; t++) {
                const float *xt = x + t * M + e0;           /* (n) */
                float *st = spike + t * M + e0;             /* (n) */
                float *ht = h_seq ? h_seq + t * M + e0 : 0; /* (n) */
                for (int64_t i = 0; i < n; i++) {
                    const float h = snn_lif_charge(p, k, v[i], xt[i]);
                    const float s = snn_lif_fire(p, h);
                    if (ht) ht[i] = h;
                    st[i] = s;
                    v[i] = snn_lif_reset(p, h, s);
                }
                if (activity) snn_neuron_count_planes(activity + t * split.planes, st, e0, n,
                                                      split.plane);
            }
            if (v_last)
                for (int64_t i = 0; i < n; i++) v_last[e0 + i] = v[i];
        }
    }
}

void snn_lif_backward_cpu(float *dx, float *dv_init, float *dw, const float *dspike,
                          const float *dv_last, const float *h_seq, const float *spike,
                          const float *x, const float *v_init, const float *a_init,
                          const float *w, const snn_neuron_params *params,
                          const snn_neuron_dims *d)
{
    const snn_neuron_params local = *params, *p = &local; /* see the forward */
    (void)spike;
    (void)a_init;
    const int64_t T = d->T, M = snn_neuron_dims_step(d);
    const int64_t chunks = (M + SNN_NEURON_CHUNK - 1) / SNN_NEURON_CHUNK;
    const float k = snn_lif_decay(p, w);
    const float dh_dx = snn_lif_dh_dx(p, k), dh_dv = snn_lif_dh_dv(p, k);
    const bool want_dk = p->kind == SNN_NEURON_PLIF && dw;
    double dk = 0.0; /* dL/dk summed over every element and step (PLIF) */

#pragma omp parallel for schedule(static) reduction(+ : dk)
    for (int64_t c = 0; c < chunks; c++) {
        const int64_t e0 = c * SNN_NEURON_CHUNK;
        const int64_t n = M - e0 < SNN_NEURON_CHUNK ? M - e0 : SNN_NEURON_CHUNK;
        float gv[SNN_NEURON_CHUNK]; /* G_V = dL/dV[t], carried from t = T-1 down to 0 */
        for (int64_t i = 0; i < n; i++) gv[i] = dv_last ? dv_last[e0 + i] : 0.0f;

        for (int64_t t = T - 1; t >= 0; t--) {
            const float *ht = h_seq + t * M + e0;                 /* (n) */
            const float *gst = dspike ? dspike + t * M + e0 : 0;  /* (n) */
            float *dxt = dx ? dx + t * M + e0 : 0;                /* (n) */
            double dk_t = 0.0;
            for (int64_t i = 0; i < n; i++) {
                const float gh = snn_lif_grad_h(p, ht[i], gst ? gst[i] : 0.0f, gv[i]);
                if (dxt) dxt[i] += gh * dh_dx;
                gv[i] = gh * dh_dv;
                if (want_dk) {
                    /* V[t-1] is the reset of H[t-1], or the initial state at t = 0 */
                    float v_prev;
                    if (t > 0) {
                        const float hp = h_seq[(t - 1) * M + e0 + i];
                        v_prev = snn_lif_reset(p, hp, snn_lif_fire(p, hp));
                    } else {
                        v_prev = v_init ? v_init[e0 + i] : p->v_reset;
                    }
                    dk_t += (double)(gh * snn_lif_dh_dk(p, x[t * M + e0 + i], v_prev));
                }
            }
            dk += dk_t;
        }
        if (dv_init)
            for (int64_t i = 0; i < n; i++) dv_init[e0 + i] += gv[i];
    }
    /* dL/dw = dL/dk * dk/dw, k = sigmoid(w): dk/dw = k (1 - k) */
    if (want_dk) dw[0] += (float)(dk * (double)k * (1.0 - (double)k));
}
