/*
 * stbif.c - the fused multi-step CPU kernels of ST-BIF, the spike-threshold bipolar IF neuron
 * of SpikeZIP-TF (You et al., ICML 2024, https://arxiv.org/abs/2406.03470). It lets a network
 * trained with an L-level activation quantizer run as an SNN: over time its summed output
 * converges to the quantizer's output. Reference: kernels/ref/stbif.c, which these must match.
 * Equations: neuron_math.h (docs/neurons.md section 1).
 * Tests: tests/test_neurons_trace.c, tests/test_neurons_stbif.c (the quantizer equivalence),
 * tests/test_neurons_grad.c.
 *
 *   forward, per element: V = theta/2, A = 0; for t = 0 .. T-1:
 *     H = V + X[t]
 *     S = +1 if H >= theta and A < A_max;  -1 if H < 0 and A > A_min;  else 0
 *     V = H - theta S;  A = A + S;  Y[t] = theta S
 *   Invariant: V / theta + A = 1/2 + (sum of X so far) / theta. Once the input stops, each step
 *   moves A one level towards clip(floor(X / theta + 1/2), A_min, A_max) and then stays.
 *
 * Saved for backward: H[t], 4 bytes per element per step. The gates need A[t-1]: backward
 * rebuilds it from the op's output Y (which the graph keeps anyway), running A down from its
 * final value A[T-1] = A_init + sum_t S[t] with A[t-1] = A[t] - S[t].
 * Memory traffic per element per step: forward reads X, writes Y and H (12 B); backward reads
 * Y twice, H and dY, and updates dX (24 B).
 */
#include "neuron_cpu.h"
#include "kernels/neuron_math.h"
#include "cpu_threads.h"

/* S from the output theta S (exact: theta S is +-theta or 0). */
static inline float sign_of(float y) { return y > 0.0f ? 1.0f : (y < 0.0f ? -1.0f : 0.0f); }

void snn_stbif_forward_cpu(float *spike, float *h_seq, float *v_last, float *a_last,
                           float *activity, const float *x, const float *v_init,
                           const float *a_init, const float *w, const snn_neuron_params *params,
                           const snn_neuron_dims *d)
{
    /* A local copy: the compiler then knows that stores through the float pointers cannot
     * change the params, so it keeps them in registers and hoists the branches on them. */
    const snn_neuron_params local = *params, *p = &local;
    (void)w;
    const int64_t T = d->T, M = snn_neuron_dims_step(d);
    const snn_neuron_split split = snn_neuron_split_make(d);
    const float theta = p->theta;

#pragma omp parallel for schedule(static) num_threads(snn_cpu_threads(T * M))
    for (int64_t item = 0; item < split.items; item++) {
        int64_t q0, q1;
        snn_neuron_split_item(&split, item, &q0, &q1);
        if (activity)
            for (int64_t t = 0; t < T; t++)
                for (int64_t q = q0; q < q1; q++) activity[t * split.planes + q] = 0.0f;

        const int64_t e_end = q1 * split.plane;
        for (int64_t e0 = q0 * split.plane; e0 < e_end; e0 += SNN_NEURON_CHUNK) {
            const int64_t n = e_end - e0 < SNN_NEURON_CHUNK ? e_end - e0 : SNN_NEURON_CHUNK;
            float v[SNN_NEURON_CHUNK], a[SNN_NEURON_CHUNK]; /* state of the chunk */
            for (int64_t i = 0; i < n; i++) {
                v[i] = v_init ? v_init[e0 + i] : 0.5f * theta;
                a[i] = a_init ? a_init[e0 + i] : 0.0f;
            }
            for (int64_t t = 0; t < T; t++) {
                const float *xt = x + t * M + e0;           /* (n) */
                float *yt = spike + t * M + e0;             /* (n) */
                float *ht = h_seq ? h_seq + t * M + e0 : 0; /* (n) */
                for (int64_t i = 0; i < n; i++) {
                    const float h = v[i] + xt[i];
                    const float s = snn_stbif_fire(p, h, a[i]);
                    if (ht) ht[i] = h;
                    yt[i] = theta * s;
                    v[i] = h - theta * s;
                    a[i] += s;
                }
                if (activity) snn_neuron_count_planes(activity + t * split.planes, yt, e0, n,
                                                      split.plane);
            }
            for (int64_t i = 0; i < n; i++) {
                if (v_last) v_last[e0 + i] = v[i];
                if (a_last) a_last[e0 + i] = a[i];
            }
        }
    }
}

static const float zero_chunk[SNN_NEURON_CHUNK]; /* dL/dY when no gradient reached the output */

/* BPTT over the chunk [e0, e0 + n). Called with the surrogate as a literal constant, so that
 * each surrogate compiles to its own branch-free loop (the same specialisation as lif.c). */
static SNN_ALWAYS_INLINE void backward_chunk(snn_neuron_params q,
                                            snn_surrogate_kind surrogate,
                                            float *dx, float *dv_init, const float *dspike,
                                            const float *dv_last, const float *h_seq,
                                            const float *spike, const float *a_init, int64_t T,
                                            int64_t M, int64_t e0, int64_t n)
{
    q.surrogate = surrogate;
    const snn_neuron_params *p = &q;
    float gv[SNN_NEURON_CHUNK], a[SNN_NEURON_CHUNK]; /* G_V and A[t], going back in time */
    float dx_sink[SNN_NEURON_CHUNK];                 /* where dX goes when x wants none */
    for (int64_t i = 0; i < n; i++) {
        gv[i] = dv_last ? dv_last[e0 + i] : 0.0f;
        a[i] = a_init ? a_init[e0 + i] : 0.0f;
        dx_sink[i] = 0.0f;
    }
    for (int64_t t = 0; t < T; t++) /* A[T-1] = A_init + sum_t S[t] */
        for (int64_t i = 0; i < n; i++) a[i] += sign_of(spike[t * M + e0 + i]);

    for (int64_t t = T - 1; t >= 0; t--) {
        const float *ht = h_seq + t * M + e0;                         /* (n) */
        const float *yt = spike + t * M + e0;                         /* (n) */
        const float *gyt = dspike ? dspike + t * M + e0 : zero_chunk; /* (n) */
        float *dxt = dx ? dx + t * M + e0 : dx_sink;                  /* (n) */
        for (int64_t i = 0; i < n; i++) {
            a[i] -= sign_of(yt[i]); /* now A[t-1], the count the gates saw */
            const float gh = snn_stbif_grad_h(p, ht[i], a[i], gyt[i], gv[i]);
            dxt[i] += gh; /* dH/dX = 1 */
            gv[i] = gh;   /* dH/dV = 1 */
        }
    }
    if (dv_init)
        for (int64_t i = 0; i < n; i++) dv_init[e0 + i] += gv[i];
}

void snn_stbif_backward_cpu(float *dx, float *dv_init, float *dw, const float *dspike,
                            const float *dv_last, const float *h_seq, const float *spike,
                            const float *x, const float *v_init, const float *a_init,
                            const float *w, const snn_neuron_params *params,
                            const snn_neuron_dims *d)
{
    (void)dw;
    (void)x;
    (void)v_init;
    (void)w;
    const snn_neuron_params p = *params;
    const int64_t T = d->T, M = snn_neuron_dims_step(d);
    const int64_t chunks = (M + SNN_NEURON_CHUNK - 1) / SNN_NEURON_CHUNK;

#pragma omp parallel for schedule(static) num_threads(snn_cpu_threads(T * M))
    for (int64_t c = 0; c < chunks; c++) {
        const int64_t e0 = c * SNN_NEURON_CHUNK;
        const int64_t n = M - e0 < SNN_NEURON_CHUNK ? M - e0 : SNN_NEURON_CHUNK;
        switch (p.surrogate) {
        case SNN_SURROGATE_ATAN:
            backward_chunk(p, SNN_SURROGATE_ATAN, dx, dv_init, dspike, dv_last, h_seq, spike,
                           a_init, T, M, e0, n);
            break;
        case SNN_SURROGATE_PIECEWISE_QUADRATIC:
            backward_chunk(p, SNN_SURROGATE_PIECEWISE_QUADRATIC, dx, dv_init, dspike, dv_last,
                           h_seq, spike, a_init, T, M, e0, n);
            break;
        default:
            backward_chunk(p, SNN_SURROGATE_SIGMOID, dx, dv_init, dspike, dv_last, h_seq, spike,
                           a_init, T, M, e0, n);
            break;
        }
    }
}
