/*
 * lif.c - the fused multi-step CPU kernels of IF, LIF and ParametricLIF (one kernel, the kind
 * picks the charge equation): kernels/ref/lif.c, the reference they must match, made fast
 * (chunks, specialisation, OpenMP). Equations: neuron_math.h (docs/neurons.md section 1).
 * Tests: tests/test_neurons_trace.c (hand-computed traces), tests/test_neurons_grad.c
 * (backward vs the same dynamics unrolled into primitive ops on the tape).
 *
 *   forward, per element, t = 0 .. T-1:
 *     H[t] = charge(V[t-1], X[t]);  S[t] = Heaviside(H[t] - V_th);  V[t] = reset(H[t], S[t])
 *   backward (BPTT), per element, t = T-1 .. 0, G_V = dL/dV_last (or 0):
 *     G_H = G_S[t] g'(H[t] - V_th) + G_V dV/dH;  dX[t] += G_H dH/dX;  G_V = G_H dH/dV
 *
 * lif_bn_forward (snn_batchnorm_neuron) runs the same forward on X made on the fly from a
 * batch-norm's input and statistics and a residual, which are then never stored, from the
 * state in->v_init to in->v_last (a carrying layer's); with spike NULL it is backward's
 * recompute of H.
 *
 * Saved for backward: H[t] only, 4 bytes per element per step (S is recomputed from H, and
 * V[t-1], which PLIF's dL/dk needs, is reset(H[t-1]); X is the op's input, alive anyway).
 * Memory traffic per element per step: forward reads X (4 B), writes S (4 B) and, in grad
 * mode, H (4 B); backward reads dS and H (8 B; PLIF also X) and updates dX (8 B). V never
 * leaves the chunk's local array.
 */
#include <string.h>

#include "neuron_cpu.h"
#include "kernels/neuron_math.h"
#include "cpu_threads.h"
#include "tensor/error.h"
#include "kernels_cpu.h"
#include "kernels/ref/kernels_ref.h"

/* Specialisation. The equations branch on the kind, the reset mode, decay_input and the
 * surrogate. Those are the same for every element, but a compiler will not hoist a handful of
 * branches out of a loop, and a branchy loop does not vectorise. So each chunk function below
 * takes them as arguments, is always inlined, and is called from a small dispatch tree with
 * literal constants: every combination compiles to its own branch-free inner loop, while the
 * equations stay written once (neuron_math.h). */

typedef struct lif_forward_args {
    float *spike, *h_seq, *v_last, *activity; /* outputs, (T, M) / (M) / (T, N*C); spike may
                                               * be NULL (lif_bn_forward's recompute) */
    const float *x, *v_init;                  /* (T, M), (M) */
    const snn_neuron_bn_input *bn;            /* or NULL: X is made from bn->x (lif_bn_forward) */
    int64_t C;                                /* channels, for bn */
    float k;                                  /* 1/tau or sigmoid(w) */
    int64_t T, M;
    snn_neuron_split split;
} lif_forward_args;

/* The batch-norm's per-element constants of a chunk (lif_bn_forward): batchnorm.c's normalise
 * takes the mean as a float head and tail, X = ((x - hi) - lo) (gamma invstd) + beta. */
typedef struct bn_chunk {
    float hi[SNN_NEURON_CHUNK], lo[SNN_NEURON_CHUNK];
    float scale[SNN_NEURON_CHUNK], shift[SNN_NEURON_CHUNK];
} bn_chunk;

/* The constants of the batch-norm (stats, invstd, gamma, beta) for the chunk [e0, e0 + n). */
static void bn_chunk_make(bn_chunk *b, const lif_forward_args *a, const double *stats,
                          const float *invstd, const float *gamma, const float *beta, int64_t e0,
                          int64_t n)
{
    /* the channel by counting, not dividing, and its constants made once per run of its
     * elements: a 64-bit division per element cost as much as the rest of a one-step (T = 1)
     * forward, which SLTT runs step by step */
    const int64_t plane = a->split.plane;
    int64_t c = e0 / plane % a->C, in_plane = e0 % plane, made = -1;
    float hi = 0.0f, lo = 0.0f, scale = 0.0f, shift = 0.0f; /* channel `made`'s */
    for (int64_t i = 0; i < n; i++, in_plane++) {
        if (in_plane == plane) {
            in_plane = 0;
            if (++c == a->C) c = 0;
        }
        if (c != made) {
            const double mean = stats[3 * c + 1];
            hi = (float)mean;
            lo = (float)(mean - (double)hi);
            scale = (gamma ? gamma[c] : 1.0f) * invstd[c];
            shift = beta ? beta[c] : 0.0f;
            made = c;
        }
        b->hi[i] = hi, b->lo[i] = lo, b->scale[i] = scale, b->shift[i] = shift;
    }
}

/* out[i] = the batch-norm's expression on v[i] (batchnorm.c's normalise), i < n */
static void bn_chunk_apply(float *out, const float *v, const bn_chunk *b, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        out[i] = ((v[i] - b->hi[i]) - b->lo[i]) * b->scale[i] + b->shift[i];
}

/* X[t] of the chunk into xb: the batch-norm's expression, then the residual's add
 * (elementwise.c's a + b), each rounded as the separate ops round it; rb: the residual's
 * batch-norm (residual_bn), with rt's room for its values. */
static void bn_chunk_input(float *xb, float *rt, const bn_chunk *b, const bn_chunk *rb,
                           const lif_forward_args *a, int64_t t, int64_t e0, int64_t n)
{
    const snn_neuron_bn_input *in = a->bn;
    const int64_t at = (in->x_repeated ? 0 : t) * a->M + e0;
    const float *xt = in->x ? in->x + at : xb; /* (n) */
    if (!in->x) snn_unpack_bf16_ref(xb, in->x_bf16 + at, n); /* kept as bf16: exact */
    if (in->stats) bn_chunk_apply(xb, xt, b, n);
    else if (xt != xb) memcpy(xb, xt, (size_t)n * sizeof *xb);
    const float *residual = in->residual ? in->residual + t * a->M + e0 : NULL; /* (n) */
    if (!residual && !in->residual_bits && in->residual_bn) {
        const snn_bn_residual *r = in->residual_bn;
        const float *rx = r->x ? r->x + t * a->M + e0 : rt;
        if (!r->x) snn_unpack_bf16_ref(rt, r->x_bf16 + t * a->M + e0, n);
        bn_chunk_apply(rt, rx, rb, n);
        residual = rt;
    }
    if (residual) {
        for (int64_t i = 0; i < n; i++) xb[i] = xb[i] + residual[i];
    } else if (in->residual_bits) { /* spikes kept as bits: 0 or 1, the same sums */
        const uint32_t *bits = in->residual_bits;
        for (int64_t i = 0, e = t * a->M + e0; i < n; i++, e++)
            xb[i] = xb[i] + (float)((bits[e / 32] >> (e % 32)) & 1u);
    }
}

/* The whole time loop of the chunk [e0, e0 + n): V stays in v[]. */
static SNN_ALWAYS_INLINE void forward_chunk(snn_neuron_params q, snn_neuron_kind kind,
                                            bool decay_input, bool soft,
                                            const lif_forward_args *a, int64_t e0, int64_t n)
{
    q.kind = kind;
    q.decay_input = decay_input;
    q.soft_reset = soft;
    const snn_neuron_params *p = &q;
    float v[SNN_NEURON_CHUNK]; /* V of the chunk's elements, carried through time */
    float h[SNN_NEURON_CHUNK]; /* H of this step, copied out when backward needs it */
    float xb[SNN_NEURON_CHUNK], sb[SNN_NEURON_CHUNK]; /* X made from bn; S when not kept */
    float rt[SNN_NEURON_CHUNK];                       /* the residual made from residual_bn */
    bn_chunk b, rb;
    const snn_neuron_bn_input *in = a->bn;
    if (in && in->stats) bn_chunk_make(&b, a, in->stats, in->invstd, in->gamma, in->beta, e0, n);
    if (in && in->residual_bn)
        bn_chunk_make(&rb, a, in->residual_bn->stats, in->residual_bn->invstd,
                      in->residual_bn->gamma, in->residual_bn->beta, e0, n);
    for (int64_t i = 0; i < n; i++) v[i] = a->v_init ? a->v_init[e0 + i] : p->v_reset;

    for (int64_t t = 0; t < a->T; t++) {
        const float *xt = a->bn ? xb : a->x + t * a->M + e0;   /* (n) */
        float *st = a->spike ? a->spike + t * a->M + e0 : sb;  /* (n) */
        if (a->bn) bn_chunk_input(xb, rt, &b, &rb, a, t, e0, n);
        for (int64_t i = 0; i < n; i++) {
            h[i] = snn_lif_charge(p, a->k, v[i], xt[i]);
            st[i] = snn_lif_fire(p, h[i]);
            v[i] = snn_lif_reset(p, h[i], st[i]);
        }
        if (a->h_seq) memcpy(a->h_seq + t * a->M + e0, h, (size_t)n * sizeof *h);
        if (a->activity)
            snn_neuron_count_planes(a->activity + t * a->split.planes, st, e0, n, a->split.plane);
    }
    if (a->v_last)
        for (int64_t i = 0; i < n; i++) a->v_last[e0 + i] = v[i];
}

static SNN_ALWAYS_INLINE void forward_chunk_decay(const snn_neuron_params *p, snn_neuron_kind kind,
                                                  const lif_forward_args *a, int64_t e0, int64_t n)
{
    if (p->decay_input) {
        if (p->soft_reset) forward_chunk(*p, kind, true, true, a, e0, n);
        else forward_chunk(*p, kind, true, false, a, e0, n);
    } else {
        if (p->soft_reset) forward_chunk(*p, kind, false, true, a, e0, n);
        else forward_chunk(*p, kind, false, false, a, e0, n);
    }
}

/* The forward over every item of the split, in parallel. */
static void forward_items(const snn_neuron_params *params, const lif_forward_args *args)
{
    const snn_neuron_params p = *params;
    const lif_forward_args a = *args;
    float *activity = a.activity;

#pragma omp parallel for schedule(static) num_threads(snn_cpu_threads(a.T * a.M))
    for (int64_t item = 0; item < a.split.items; item++) {
        int64_t q0, q1;
        snn_neuron_split_item(&a.split, item, &q0, &q1);
        if (activity)
            for (int64_t t = 0; t < a.T; t++)
                for (int64_t q = q0; q < q1; q++) activity[t * a.split.planes + q] = 0.0f;

        const int64_t e_end = q1 * a.split.plane;
        for (int64_t e0 = q0 * a.split.plane; e0 < e_end; e0 += SNN_NEURON_CHUNK) {
            const int64_t n = e_end - e0 < SNN_NEURON_CHUNK ? e_end - e0 : SNN_NEURON_CHUNK;
            switch (p.kind) {
            case SNN_NEURON_LIF: forward_chunk_decay(&p, SNN_NEURON_LIF, &a, e0, n); break;
            case SNN_NEURON_PLIF: forward_chunk_decay(&p, SNN_NEURON_PLIF, &a, e0, n); break;
            default: /* IF has no decay: decay_input does not matter */
                if (p.soft_reset) forward_chunk(p, SNN_NEURON_IF, false, true, &a, e0, n);
                else forward_chunk(p, SNN_NEURON_IF, false, false, &a, e0, n);
                break;
            }
        }
    }
}

void snn_lif_forward_cpu(float *spike, float *h_seq, float *v_last, float *a_last,
                         float *activity, const float *x, const float *v_init,
                         const float *a_init, const float *w, const snn_neuron_params *params,
                         const snn_neuron_dims *d)
{
    (void)a_last;
    (void)a_init;
    const lif_forward_args a = {spike, h_seq, v_last, activity, x, v_init, NULL, d->C,
                                snn_lif_decay(params, w), d->T, snn_neuron_dims_step(d),
                                snn_neuron_split_make(d)};
    forward_items(params, &a);
}

void snn_lif_bn_forward_cpu(float *spike, uint32_t *spike_bits, float *h_seq, float *activity,
                            const snn_neuron_bn_input *in, const snn_neuron_params *params,
                            const snn_neuron_dims *d)
{
    SNN_ASSERT(params->kind == SNN_NEURON_IF || params->kind == SNN_NEURON_LIF);
    SNN_ASSERT(spike || !spike_bits);
    /* the state as lif_forward's: chunk by chunk, V_init read before V_last is written */
    const lif_forward_args a = {spike, h_seq, in->v_last, spike ? activity : NULL, NULL,
                                in->v_init, in, d->C, snn_lif_decay(params, NULL), d->T,
                                snn_neuron_dims_step(d), snn_neuron_split_make(d)};
    forward_items(params, &a);
    if (spike_bits) snn_pack_bits_cpu(spike_bits, spike, d->T * snn_neuron_dims_step(d));
}

typedef struct lif_backward_args {
    float *dx, *dv_init;                /* += (T, M), (M); either may be NULL */
    const float *dspike, *dv_last;      /* (T, M), (M); either may be NULL */
    const float *h_seq, *x, *v_init;    /* (T, M), (T, M), (M) */
    float dh_dx, dh_dv;
    bool want_dk;                       /* PLIF with a w that wants its gradient */
    int64_t T, M;
} lif_backward_args;

static const float zero_chunk[SNN_NEURON_CHUNK]; /* dL/dS when no gradient reached the spikes */

/* BPTT over the chunk [e0, e0 + n); returns its share of dL/dk (PLIF). */
static SNN_ALWAYS_INLINE double backward_chunk(snn_neuron_params q, snn_neuron_kind kind,
                                               bool soft, snn_surrogate_kind surrogate,
                                               const lif_backward_args *a, int64_t e0, int64_t n)
{
    q.kind = kind;
    q.soft_reset = soft;
    q.surrogate = surrogate;
    const snn_neuron_params *p = &q;
    const int64_t M = a->M;
    float gv[SNN_NEURON_CHUNK];      /* G_V = dL/dV[t], carried from t = T-1 down to 0 */
    float dx_sink[SNN_NEURON_CHUNK]; /* where dX goes when x wants no gradient */
    float v_prev[SNN_NEURON_CHUNK];  /* V[t-1], for PLIF's dL/dk */
    double dk_lane[SNN_NEURON_CHUNK]; /* dL/dk per element: one sum per lane vectorises, a
                                       * single running sum would not (no reassociation) */
    for (int64_t i = 0; i < n; i++) {
        gv[i] = a->dv_last ? a->dv_last[e0 + i] : 0.0f;
        dx_sink[i] = 0.0f;
        dk_lane[i] = 0.0;
    }
    for (int64_t t = a->T - 1; t >= 0; t--) {
        const float *ht = a->h_seq + t * M + e0;                            /* (n) */
        const float *gst = a->dspike ? a->dspike + t * M + e0 : zero_chunk; /* (n) */
        float *dxt = a->dx ? a->dx + t * M + e0 : dx_sink;                  /* (n) */
        if (a->want_dk) {
            /* dL/dk needs V[t-1]: the reset of H[t-1], or the initial state at t = 0 */
            if (t > 0) {
                const float *hp = a->h_seq + (t - 1) * M + e0; /* (n) */
                for (int64_t i = 0; i < n; i++)
                    v_prev[i] = snn_lif_reset(p, hp[i], snn_lif_fire(p, hp[i]));
            } else {
                for (int64_t i = 0; i < n; i++)
                    v_prev[i] = a->v_init ? a->v_init[e0 + i] : p->v_reset;
            }
            const float *xt = a->x + t * M + e0; /* (n) */
            for (int64_t i = 0; i < n; i++) {
                const float gh = snn_lif_grad_h(p, ht[i], gst[i], gv[i]);
                dk_lane[i] += (double)(gh * snn_lif_dh_dk(p, xt[i], v_prev[i]));
                dxt[i] += gh * a->dh_dx;
                gv[i] = gh * a->dh_dv;
            }
        } else {
            for (int64_t i = 0; i < n; i++) {
                const float gh = snn_lif_grad_h(p, ht[i], gst[i], gv[i]);
                dxt[i] += gh * a->dh_dx;
                gv[i] = gh * a->dh_dv;
            }
        }
    }
    if (a->dv_init)
        for (int64_t i = 0; i < n; i++) a->dv_init[e0 + i] += gv[i];
    double dk = 0.0;
    if (a->want_dk)
        for (int64_t i = 0; i < n; i++) dk += dk_lane[i];
    return dk;
}

static SNN_ALWAYS_INLINE double backward_chunk_surrogate(const snn_neuron_params *p,
                                                         snn_neuron_kind kind, bool soft,
                                                         const lif_backward_args *a, int64_t e0,
                                                         int64_t n)
{
    switch (p->surrogate) {
    case SNN_SURROGATE_ATAN:
        return backward_chunk(*p, kind, soft, SNN_SURROGATE_ATAN, a, e0, n);
    case SNN_SURROGATE_PIECEWISE_QUADRATIC:
        return backward_chunk(*p, kind, soft, SNN_SURROGATE_PIECEWISE_QUADRATIC, a, e0, n);
    default:
        return backward_chunk(*p, kind, soft, SNN_SURROGATE_SIGMOID, a, e0, n);
    }
}

static SNN_ALWAYS_INLINE double backward_chunk_reset(const snn_neuron_params *p,
                                                     snn_neuron_kind kind,
                                                     const lif_backward_args *a, int64_t e0,
                                                     int64_t n)
{
    return p->soft_reset ? backward_chunk_surrogate(p, kind, true, a, e0, n)
                         : backward_chunk_surrogate(p, kind, false, a, e0, n);
}

typedef struct lif_backward_slices {
    const snn_neuron_params *p;
    const lif_backward_args *a;
} lif_backward_slices;

/* BPTT over chunks [c0, c1); returns their share of dL/dk, summed chunk by chunk in order. */
static double backward_chunks(void *ctx, int64_t c0, int64_t c1)
{
    const lif_backward_slices *b = ctx;
    const lif_backward_args *a = b->a;
    double dk = 0.0;
    for (int64_t c = c0; c < c1; c++) {
        const int64_t e0 = c * SNN_NEURON_CHUNK;
        const int64_t n = a->M - e0 < SNN_NEURON_CHUNK ? a->M - e0 : SNN_NEURON_CHUNK;
        switch (b->p->kind) {
        case SNN_NEURON_LIF: dk += backward_chunk_reset(b->p, SNN_NEURON_LIF, a, e0, n); break;
        case SNN_NEURON_PLIF: dk += backward_chunk_reset(b->p, SNN_NEURON_PLIF, a, e0, n); break;
        default: dk += backward_chunk_reset(b->p, SNN_NEURON_IF, a, e0, n); break;
        }
    }
    return dk;
}

void snn_lif_backward_cpu(float *dx, float *dv_init, float *dw, const float *dspike,
                          const float *dv_last, const float *h_seq, const float *spike,
                          const float *x, const float *v_init, const float *a_init,
                          const float *w, const snn_neuron_params *params,
                          const snn_neuron_dims *d)
{
    (void)spike;
    (void)a_init;
    const snn_neuron_params p = *params;
    const float k = snn_lif_decay(&p, w);
    const lif_backward_args a = {dx, dv_init, dspike, dv_last, h_seq, x, v_init,
                                 snn_lif_dh_dx(&p, k), snn_lif_dh_dv(&p, k),
                                 p.kind == SNN_NEURON_PLIF && dw, d->T, snn_neuron_dims_step(d)};
    const int64_t chunks = (a.M + SNN_NEURON_CHUNK - 1) / SNN_NEURON_CHUNK;
    /* dL/dk summed over every element and step (PLIF), in fixed slices of the chunks
     * (snn_cpu_sum_slices): not an OpenMP reduction, whose combining order follows the threads'
     * arrival, so dw has the same bits for any thread count. */
    lif_backward_slices ctx = {&p, &a};
    const double dk = snn_cpu_sum_slices(chunks, a.T * a.M, backward_chunks, &ctx);
    /* dL/dw = dL/dk * dk/dw, k = sigmoid(w): dk/dw = k (1 - k) */
    if (a.want_dk) dw[0] += (float)(dk * (double)k * (1.0 - (double)k));
}
