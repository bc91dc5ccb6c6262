/*
 * neuron_cpu.h - the CPU neuron kernels that make up snn_neuron_kernels_cpu, and how they split
 * work between OpenMP threads (internal).
 *
 * Work split. Each element's time loop is sequential (V[t] needs V[t-1]), elements are
 * independent. A thread takes an "item" of whole (n, c) planes, so that the activity count of a
 * plane is written by one thread only (no atomics, and the same sums on every run). Inside an
 * item, elements go in chunks of SNN_NEURON_CHUNK: the chunk's state V lives in a small local
 * array (stack, L1) and the inner loop over the chunk is contiguous, so it vectorises, while t
 * runs in the loop around it.
 */
#ifndef SNN_NEURON_CPU_H
#define SNN_NEURON_CPU_H

/* The Sigmoid surrogate's exp (kernels/surrogate.h, SNN_SURROGATE_EXP): the vectorisable one
 * of kernels/fast_expf.h, so that the backward loops vectorise. It must be chosen before
 * surrogate.h is read, so every kernel file here includes this header first. */
#ifdef SNN_SURROGATE_H
#error "kernels/cpu/neuron_cpu.h must be included before kernels/surrogate.h and neuron_math.h"
#endif
#include "kernels/fast_expf.h"
#define SNN_SURROGATE_EXP snn_expf_core

#include "kernels/neuron_kernels.h"

#define SNN_NEURON_CHUNK 256

/* For the specialised chunk loops of lif.c and stbif.c (see lif.c): inlined at every call so
 * that the constants passed in fold away. */
#if defined(__GNUC__)
#define SNN_ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define SNN_ALWAYS_INLINE inline
#endif

typedef struct snn_neuron_split {
    int64_t planes;         /* N * C */
    int64_t plane;          /* elements per plane */
    int64_t planes_per_item;
    int64_t items;
} snn_neuron_split;

static inline snn_neuron_split snn_neuron_split_make(const snn_neuron_dims *d)
{
    snn_neuron_split s;
    s.planes = d->N * d->C;
    s.plane = d->plane;
    s.planes_per_item = d->plane >= SNN_NEURON_CHUNK ? 1 : SNN_NEURON_CHUNK / d->plane;
    s.items = (s.planes + s.planes_per_item - 1) / s.planes_per_item;
    return s;
}

/* Planes [*q0, *q1) of an item. */
static inline void snn_neuron_split_item(const snn_neuron_split *s, int64_t item, int64_t *q0,
                                         int64_t *q1)
{
    *q0 = item * s->planes_per_item;
    *q1 = *q0 + s->planes_per_item < s->planes ? *q0 + s->planes_per_item : s->planes;
}

/* act_row (N*C) += number of nonzero out[0..n), the chunk starting at element e0 of a step. */
static inline void snn_neuron_count_planes(float *act_row, const float *out, int64_t e0,
                                           int64_t n, int64_t plane)
{
    int64_t j = 0;
    while (j < n) {
        int64_t q = (e0 + j) / plane;
        int64_t end = (q + 1) * plane - e0;
        if (end > n) end = n;
        int64_t count = 0;
        for (; j < end; j++) count += out[j] != 0.0f;
        act_row[q] += (float)count;
    }
}

/* alif.c */
void snn_alif_forward_cpu(float *spike, float *h_seq, float *th_seq, float *v_last,
                          float *a_last, float *activity, const float *x, const float *v_init,
                          const float *a_init, const snn_neuron_params *p,
                          const snn_neuron_dims *d);
void snn_alif_backward_cpu(float *dx, float *dv_init, float *da_init, const float *dspike,
                           const float *dv_last, const float *da_last, const float *h_seq,
                           const float *th_seq, const snn_neuron_params *p,
                           const snn_neuron_dims *d);

/* lif.c */
void snn_lif_forward_cpu(float *spike, float *h_seq, float *v_last, float *a_last,
                         float *activity, const float *x, const float *v_init,
                         const float *a_init, const float *w, const snn_neuron_params *p,
                         const snn_neuron_dims *d);
void snn_lif_bn_forward_cpu(float *spike, uint32_t *spike_bits, float *h_seq, float *activity,
                            const snn_neuron_bn_input *in, const snn_neuron_params *p,
                            const snn_neuron_dims *d);
void snn_lif_backward_cpu(float *dx, float *dv_init, float *dw, const float *dspike,
                          const float *dv_last, const float *h_seq, const float *spike,
                          const float *x, const float *v_init, const float *a_init,
                          const float *w, const snn_neuron_params *p, const snn_neuron_dims *d);

/* stbif.c */
void snn_stbif_forward_cpu(float *spike, float *h_seq, float *v_last, float *a_last,
                           float *activity, const float *x, const float *v_init,
                           const float *a_init, const float *w, const snn_neuron_params *p,
                           const snn_neuron_dims *d);
void snn_stbif_backward_cpu(float *dx, float *dv_init, float *dw, const float *dspike,
                            const float *dv_last, const float *h_seq, const float *spike,
                            const float *x, const float *v_init, const float *a_init,
                            const float *w, const snn_neuron_params *p,
                            const snn_neuron_dims *d);

/* heaviside.c */
void snn_heaviside_forward_cpu(float *out, const float *x, int64_t n);
void snn_heaviside_backward_cpu(float *dx, const float *dout, const float *x,
                                snn_surrogate_kind kind, float alpha, int64_t n);

/* plane_norm.c */
void snn_plane_norm_forward_cpu(float *norm, const float *x, int64_t planes, int64_t plane);
void snn_plane_norm_backward_cpu(float *dx, const float *dnorm, const float *x, const float *norm,
                                 int64_t planes, int64_t plane);

/* qclip.c */
void snn_qclip_forward_cpu(float *y, const float *x, const float *step,
                           const snn_neuron_params *p, int64_t n);
void snn_qclip_backward_cpu(float *dx, float *dstep, const float *dy, const float *x,
                            const float *step, const snn_neuron_params *p, float grad_scale,
                            int64_t n);

/* running_pool.c */
void snn_running_max_pool_forward_cpu(float *y, int32_t *argmax, const float *x,
                                      const snn_running_pool_dims *d);
void snn_running_max_pool_backward_cpu(float *dx, const float *dy, const int32_t *argmax,
                                       const snn_running_pool_dims *d);

#endif /* SNN_NEURON_CPU_H */
