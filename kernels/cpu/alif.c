/*
 * alif.c - the fused multi-step CPU kernels of adaptive LIF (ALIF, Bellec et al. 2018):
 * kernels/ref/alif.c, the reference they must match, made fast with lif.c's pattern (chunks of
 * SNN_NEURON_CHUNK elements whose state stays in local arrays, specialised branch-free inner
 * loops, OpenMP over items of whole planes). Equations: neuron_math.h (docs/neurons.md).
 * Tests: tests/test_neurons_alif.c (hand-computed trace, backward vs the same dynamics unrolled
 * into primitive ops, single-step vs multi-step), tests/backend_ops_neuron.h (vs the reference).
 *
 *   forward, per element, t = 0 .. T-1:
 *     H[t] = charge(V[t-1], X[t]);  th[t] = V_th + beta A[t-1];  S[t] = Heaviside(H[t] - th[t])
 *     V[t] = reset(H[t], S[t], th[t]);  A[t] = rho A[t-1] + (1 - rho) S[t]
 *   backward (BPTT), per element, t = T-1 .. 0, G_V = dL/dV_last, G_A = dL/dA_last (or 0):
 *     G_H, G_A[t-1] = snn_alif_grad_step(...);  dX[t] += G_H dH/dX;  G_V = G_H dH/dV
 *
 * Saved for backward: H[t] and th[t], 8 bytes per element per step (S = H >= th).
 * Memory traffic per element per step: forward reads X (4 B), writes S (4 B) and, in grad
 * mode, H and th (8 B); backward reads dS, H and th (12 B) and updates dX (8 B). V and A never
 * leave the chunk's local arrays.
 */
#include <string.h>

#include "neuron_cpu.h"
#include "kernels/neuron_math.h"
#include "cpu_threads.h"

typedef struct alif_forward_args {
    float *spike, *h_seq, *th_seq, *v_last, *a_last, *activity; /* (T, M) x3, (M) x2, (T, N*C) */
    const float *x, *v_init, *a_init;                           /* (T, M), (M), (M) */
    int64_t T, M;
    snn_neuron_split split;
} alif_forward_args;

/* The whole time loop of the chunk [e0, e0 + n): V and A stay in v[] and a[]. decay_input and
 * soft are literal constants at every call (see lif.c: each combination vectorises). */
static SNN_ALWAYS_INLINE void forward_chunk(snn_neuron_params q, bool decay_input, bool soft,
                                            const alif_forward_args *a, int64_t e0, int64_t n)
{
    q.kind = SNN_NEURON_ALIF; /* a constant: snn_lif_charge's switch folds away */
    q.decay_input = decay_input;
    q.soft_reset = soft;
    const snn_neuron_params *p = &q;
    const float k = 1.0f / p->tau;
    float v[SNN_NEURON_CHUNK], ad[SNN_NEURON_CHUNK]; /* V and A of the chunk's elements */
    float h[SNN_NEURON_CHUNK], th[SNN_NEURON_CHUNK]; /* this step's H and threshold */
    for (int64_t i = 0; i < n; i++) {
        v[i] = a->v_init ? a->v_init[e0 + i] : p->v_reset;
        ad[i] = a->a_init ? a->a_init[e0 + i] : 0.0f;
    }
    for (int64_t t = 0; t < a->T; t++) {
        const float *xt = a->x + t * a->M + e0; /* (n) */
        float *st = a->spike + t * a->M + e0;   /* (n) */
        for (int64_t i = 0; i < n; i++) {
            h[i] = snn_lif_charge(p, k, v[i], xt[i]);
            th[i] = snn_alif_threshold(p, ad[i]);
            st[i] = snn_alif_fire(h[i], th[i]);
            v[i] = snn_alif_reset(p, h[i], st[i], th[i]);
            ad[i] = snn_alif_adapt(p, ad[i], st[i]);
        }
        if (a->h_seq) memcpy(a->h_seq + t * a->M + e0, h, (size_t)n * sizeof *h);
        if (a->th_seq) memcpy(a->th_seq + t * a->M + e0, th, (size_t)n * sizeof *th);
        if (a->activity)
            snn_neuron_count_planes(a->activity + t * a->split.planes, st, e0, n, a->split.plane);
    }
    /* may alias v_init / a_init: this chunk read them above, and no other chunk reads these */
    if (a->v_last)
        for (int64_t i = 0; i < n; i++) a->v_last[e0 + i] = v[i];
    if (a->a_last)
        for (int64_t i = 0; i < n; i++) a->a_last[e0 + i] = ad[i];
}

void snn_alif_forward_cpu(float *spike, float *h_seq, float *th_seq, float *v_last,
                          float *a_last, float *activity, const float *x, const float *v_init,
                          const float *a_init, const snn_neuron_params *params,
                          const snn_neuron_dims *d)
{
    const snn_neuron_params p = *params;
    const alif_forward_args a = {spike, h_seq, th_seq, v_last, a_last, activity, x, v_init,
                                 a_init, d->T, snn_neuron_dims_step(d), snn_neuron_split_make(d)};

#pragma omp parallel for schedule(static) num_threads(snn_cpu_threads(a.T * a.M))
    for (int64_t item = 0; item < a.split.items; item++) {
        int64_t q0, q1;
        snn_neuron_split_item(&a.split, item, &q0, &q1);
        if (activity) /* this item's planes are counted by this thread only */
            for (int64_t t = 0; t < a.T; t++)
                for (int64_t q = q0; q < q1; q++) activity[t * a.split.planes + q] = 0.0f;
        const int64_t e_end = q1 * a.split.plane;
        for (int64_t e0 = q0 * a.split.plane; e0 < e_end; e0 += SNN_NEURON_CHUNK) {
            const int64_t n = e_end - e0 < SNN_NEURON_CHUNK ? e_end - e0 : SNN_NEURON_CHUNK;
            if (p.decay_input) {
                if (p.soft_reset) forward_chunk(p, true, true, &a, e0, n);
                else forward_chunk(p, true, false, &a, e0, n);
            } else {
                if (p.soft_reset) forward_chunk(p, false, true, &a, e0, n);
                else forward_chunk(p, false, false, &a, e0, n);
            }
        }
    }
}

typedef struct alif_backward_args {
    float *dx, *dv_init, *da_init;              /* += (T, M), (M), (M); each may be NULL */
    const float *dspike, *dv_last, *da_last;    /* (T, M), (M), (M); each may be NULL */
    const float *h_seq, *th_seq;                /* (T, M) */
    float dh_dx, dh_dv;
    int64_t T, M;
} alif_backward_args;

static const float zero_chunk[SNN_NEURON_CHUNK]; /* dL/dS when no gradient reached the spikes */

/* BPTT over the chunk [e0, e0 + n); soft and surrogate are literal constants at every call. */
static SNN_ALWAYS_INLINE void backward_chunk(snn_neuron_params q, bool soft,
                                             snn_surrogate_kind surrogate,
                                             const alif_backward_args *a, int64_t e0, int64_t n)
{
    q.soft_reset = soft;
    q.surrogate = surrogate;
    const snn_neuron_params *p = &q;
    const int64_t M = a->M;
    float gv[SNN_NEURON_CHUNK], ga[SNN_NEURON_CHUNK]; /* G_V, G_A, carried from T-1 down to 0 */
    float dx_sink[SNN_NEURON_CHUNK];                   /* where dX goes when x wants none */
    for (int64_t i = 0; i < n; i++) {
        gv[i] = a->dv_last ? a->dv_last[e0 + i] : 0.0f;
        ga[i] = a->da_last ? a->da_last[e0 + i] : 0.0f;
        dx_sink[i] = 0.0f;
    }
    for (int64_t t = a->T - 1; t >= 0; t--) {
        const float *ht = a->h_seq + t * M + e0, *tht = a->th_seq + t * M + e0; /* (n) */
        const float *gst = a->dspike ? a->dspike + t * M + e0 : zero_chunk;      /* (n) */
        float *dxt = a->dx ? a->dx + t * M + e0 : dx_sink;                       /* (n) */
        for (int64_t i = 0; i < n; i++) {
            const float gh = snn_alif_grad_step(p, ht[i], tht[i], gst[i], gv[i], &ga[i]);
            dxt[i] += gh * a->dh_dx;
            gv[i] = gh * a->dh_dv;
        }
    }
    if (a->dv_init)
        for (int64_t i = 0; i < n; i++) a->dv_init[e0 + i] += gv[i];
    if (a->da_init)
        for (int64_t i = 0; i < n; i++) a->da_init[e0 + i] += ga[i];
}

static SNN_ALWAYS_INLINE void backward_chunk_reset(const snn_neuron_params *p,
                                                   snn_surrogate_kind surrogate,
                                                   const alif_backward_args *a, int64_t e0,
                                                   int64_t n)
{
    if (p->soft_reset) backward_chunk(*p, true, surrogate, a, e0, n);
    else backward_chunk(*p, false, surrogate, a, e0, n);
}

void snn_alif_backward_cpu(float *dx, float *dv_init, float *da_init, const float *dspike,
                           const float *dv_last, const float *da_last, const float *h_seq,
                           const float *th_seq, const snn_neuron_params *params,
                           const snn_neuron_dims *d)
{
    const snn_neuron_params p = *params;
    const float k = 1.0f / p.tau;
    const alif_backward_args a = {dx, dv_init, da_init, dspike, dv_last, da_last, h_seq, th_seq,
                                  snn_lif_dh_dx(&p, k), snn_lif_dh_dv(&p, k), d->T,
                                  snn_neuron_dims_step(d)};
    const int64_t chunks = (a.M + SNN_NEURON_CHUNK - 1) / SNN_NEURON_CHUNK;

    /* every chunk owns its elements of every output: no sums across threads */
#pragma omp parallel for schedule(static) num_threads(snn_cpu_threads(a.T * a.M))
    for (int64_t c = 0; c < chunks; c++) {
        const int64_t e0 = c * SNN_NEURON_CHUNK;
        const int64_t n = a.M - e0 < SNN_NEURON_CHUNK ? a.M - e0 : SNN_NEURON_CHUNK;
        switch (p.surrogate) {
        case SNN_SURROGATE_ATAN: backward_chunk_reset(&p, SNN_SURROGATE_ATAN, &a, e0, n); break;
        case SNN_SURROGATE_PIECEWISE_QUADRATIC:
            backward_chunk_reset(&p, SNN_SURROGATE_PIECEWISE_QUADRATIC, &a, e0, n);
            break;
        default: backward_chunk_reset(&p, SNN_SURROGATE_SIGMOID, &a, e0, n); break;
        }
    }
}
