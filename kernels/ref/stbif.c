/*
 * stbif.c - the reference kernels of ST-BIF, the spike-threshold bipolar IF neuron of
 * SpikeZIP-TF (You et al., ICML 2024, https://arxiv.org/abs/2406.03470): a neuron that sends
 * +theta and -theta spikes and counts what it sent, so that a network trained with an L-level
 * activation quantizer (qclip.c) runs as an SNN whose summed output converges to the
 * quantizer's. One plain time loop per element over the equations of kernels/neuron_math.h.
 *
 * Forward, per element (V membrane, A signed count of spikes sent; V[-1] = theta/2, A[-1] = 0
 * or the caller's state), t = 0 .. T-1:
 *   H[t] = V[t-1] + X[t]
 *   S[t] = +1 if H[t] >= theta and A[t-1] < A_max;  -1 if H[t] < 0 and A[t-1] > A_min;  else 0
 *   V[t] = H[t] - theta S[t];  A[t] = A[t-1] + S[t];  output Y[t] = theta S[t]
 * Invariant: V/theta + A = 1/2 + (sum of X so far)/theta, so once the input stops, A walks one
 * level a step to clip(floor(X/theta + 1/2), A_min, A_max) and stays: the quantizer's level.
 *
 * Backward, t = T-1 down to 0, G_V = dL/dV[t] carried back (0 after the last step): the gates
 * [A[t-1] < A_max], [A[t-1] > A_min] are constants; each threshold gets a sigmoid surrogate of
 * slope alpha / theta (p->alpha already holds it):
 *   dS/dH = [A[t-1] < A_max] g'(H - theta) + [A[t-1] > A_min] g'(H)
 *   dV/dH = 1 - theta dS/dH   (1 with detach_reset)
 *   G_H = G_Y[t] theta dS/dH + G_V dV/dH;   dX[t] += G_H;   G_V = G_H   (dH/dX = dH/dV = 1)
 *
 * Saved for backward: H[t], 4 bytes per element and step. The gates need A[t-1], which
 * backward rebuilds from the output Y (kept by the graph anyway): it sums the spikes to the
 * final count A[T-1] = A[-1] + sum_t S[t], then steps down with A[t-1] = A[t] - S[t], exact
 * for these small integers.
 * Memory traffic per element and step: forward reads X, writes Y and H (12 B); backward reads
 * Y twice, H and G_Y, and updates dX (24 B).
 */
#include "neuron_ref.h"
#include "kernels/neuron_math.h"

/* S from the output Y = theta S (theta > 0): +1, -1 or 0 */
static float spike_sign(float y) { return y > 0.0f ? 1.0f : (y < 0.0f ? -1.0f : 0.0f); }

/* spike, h_seq, x (T, M); v_last, a_last, v_init, a_init (M); activity (T, N*C) */
void snn_stbif_forward_ref(float *spike, float *h_seq, float *v_last, float *a_last,
                           float *activity, const float *x, const float *v_init,
                           const float *a_init, const float *w, const snn_neuron_params *p,
                           const snn_neuron_dims *d)
{
    (void)w; /* PLIF's parameter */
    const int64_t T = d->T, M = snn_neuron_dims_step(d), planes = d->N * d->C;
    const float theta = p->theta;
    if (activity)
        for (int64_t i = 0; i < T * planes; i++) activity[i] = 0.0f;

    for (int64_t e = 0; e < M; e++) {
        float v = v_init ? v_init[e] : 0.5f * theta; /* V[-1] */
        float a = a_init ? a_init[e] : 0.0f;         /* A[-1] */
        for (int64_t t = 0; t < T; t++) {
            const int64_t i = t * M + e;
            const float h = v + x[i];
            const float s = snn_stbif_fire(p, h, a);
            v = h - theta * s;
            a += s;
            spike[i] = theta * s;
            if (h_seq) h_seq[i] = h;
            if (activity && s != 0.0f) activity[t * planes + e / d->plane] += 1.0f;
        }
        if (v_last) v_last[e] = v; /* may alias v_init (a_last a_init): read above */
        if (a_last) a_last[e] = a;
    }
}

/* dx, dspike, h_seq, spike (T, M); dv_init, dv_last, a_init (M) */
void snn_stbif_backward_ref(float *dx, float *dv_init, float *dw, const float *dspike,
                            const float *dv_last, const float *h_seq, const float *spike,
                            const float *x, const float *v_init, const float *a_init,
                            const float *w, const snn_neuron_params *p,
                            const snn_neuron_dims *d)
{
    (void)dw; /* nothing learned */
    (void)x;  /* dH/dX = 1: X is not needed */
    (void)v_init;
    (void)w;
    const int64_t T = d->T, M = snn_neuron_dims_step(d);

    for (int64_t e = 0; e < M; e++) {
        float a = a_init ? a_init[e] : 0.0f; /* A[-1], then the final count A[T-1] */
        for (int64_t t = 0; t < T; t++) a += spike_sign(spike[t * M + e]);
        float gv = dv_last ? dv_last[e] : 0.0f; /* G_V = dL/dV[T-1] */
        for (int64_t t = T - 1; t >= 0; t--) {
            const int64_t i = t * M + e;
            a -= spike_sign(spike[i]); /* now A[t-1], the count the gates saw */
            const float gy = dspike ? dspike[i] : 0.0f;
            const float gh = snn_stbif_grad_h(p, h_seq[i], a, gy, gv);
            if (dx) dx[i] += gh;
            gv = gh; /* now dL/dV[t-1] */
        }
        if (dv_init) dv_init[e] += gv;
    }
}
