/*
 * neuron_cuda.cuh - what the CUDA neuron kernels (lif.cu, alif.cu, stbif.cu, heaviside.cu, plane_norm.cu,
 * qclip.cu, running_pool.cu) share, and the launchers that make up snn_neuron_kernels_cuda
 * (neuron_kernels.cu). Internal; CUDA only.
 *
 * Dimension glossary: T time steps, N batch, C channels, plane elements per (n, c) (H * W or 1),
 * M = N * C * plane elements per time step. Every buffer is viewed as (T, M), time first.
 *
 * Work split of the fused kernels: one thread owns SNN_NEURON_CUDA_ELEMS
 * elements, 256 apart (i = block_base + j * 256 + threadIdx.x, j < ELEMS), so that each of its
 * loads is part of a fully coalesced 128-byte warp access and a thread keeps ELEMS independent
 * loads in flight per step; it also loads SNN_NEURON_CUDA_STEPS steps ahead (the inputs do not
 * depend on the state), so 16 loads per thread are in flight at once: enough to cover the
 * memory latency at full bandwidth, and to keep a tiny problem (M = 40) from paying one full
 * memory latency per time step. The state (V, and A for ST-BIF) stays in registers for the whole
 * run; t loops inside the thread. The grid is sized to the problem (ceil(M / (256 ELEMS))
 * blocks): with the state in registers a thread cannot hand its element over to another, so a
 * grid-stride loop would only lengthen each thread's serial chain.
 *
 * Bit-exact forward. The spikes and activity must equal the CPU's bit for bit, which holds when
 * H[t] is the same float: the same operations in the same order with the same rounding. nvcc
 * contracts a * b + c into one fma by default (-fmad=true), which rounds once instead of twice,
 * and the CPU build (gcc, -std=c11) never contracts. So the forward's charge and reset are
 * written here with the explicitly rounded intrinsics __fadd_rn, __fsub_rn, __fmul_rn and
 * __fdiv_rn, which nvcc never fuses; each device function names the CPU function of
 * neuron_math.h it must match operation for operation. The backward uses neuron_math.h's shared
 * SNN_HD functions directly: there contraction only moves the last bits, and the test compares
 * gradients to a tolerance.
 */
#ifndef SNN_NEURON_CUDA_CUH
#define SNN_NEURON_CUDA_CUH

/* The Sigmoid surrogate's exp (kernels/surrogate.h, SNN_SURROGATE_EXP): the fast CPU table's
 * (kernels/fast_expf.h), chosen before surrogate.h is read, so that the backward kernels do the
 * CPU's operations (the test's tolerance covers what contraction changes). */
#ifdef SNN_SURROGATE_H
#error "kernels/cuda/neuron_cuda.cuh must be included before kernels/surrogate.h"
#endif
#include "kernels/fast_expf.h"
#define SNN_SURROGATE_EXP snn_expf_core

#include "kernels/neuron_math.h"
#include "cuda_common.cuh"

/* Threads per block and elements per thread of the fused neuron kernels. */
#define SNN_NEURON_CUDA_BLOCK 256
#define SNN_NEURON_CUDA_ELEMS 4
/* Time steps whose loads a thread issues together before computing them (see the kernels). */
#define SNN_NEURON_CUDA_STEPS 4
/* The same for the backward kernels, which load three or four streams per step. */
#define SNN_NEURON_CUDA_BACKWARD_STEPS 2

/* ---- contraction-free forward math (must match neuron_math.h line for line) ---------------- */

/* k = 1/tau (LIF) or sigmoid(w) (PLIF). Matches snn_lif_decay: 1.0f / (1.0f + expf(-w)).
 * The CPU's expf is glibc's (error < 0.502 ulp: correctly rounded for all but rare inputs); the
 * device expf may be 2 ulp off. exp in double rounded to float is (all but never) correctly
 * rounded, so it gives glibc's float in all those cases; 1 + e and 1 / (...) are IEEE on both
 * sides. tests/test_cuda_neurons.c pins this for the w it uses (test_plif_precondition). */
static __device__ __forceinline__ float snn_lif_decay_cuda(const snn_neuron_params &p,
                                                           const float *w)
{
    if (p.kind == SNN_NEURON_PLIF) {
        const float e = (float)exp(-(double)w[0]);
        return __fdiv_rn(1.0f, __fadd_rn(1.0f, e));
    }
    return __fdiv_rn(1.0f, p.tau);
}

/* Matches snn_lif_charge for the kinds lif.cu runs:
 *   LIF   decay_input  H = V + (X - (V - V_reset)) / tau     else  H = V - (V - V_reset) / tau + X
 *   PLIF  the same with "* k" for "/ tau"
 *   IF    H = V + X
 * Three bodies and a default, as it was before ALIF: inside the unrolled time loops of lif.cu a
 * longer switch (ALIF's case and a NaN default) made nvcc take 218 s on that file instead of
 * 29. ALIF charges with snn_alif_charge_cuda below (alif.cu). */
static __device__ __forceinline__ float snn_lif_charge_cuda(const snn_neuron_params &p, float k,
                                                            float v, float x)
{
    const float vr = p.v_reset;
    switch (p.kind) {
    case SNN_NEURON_LIF:
        return p.decay_input ? __fadd_rn(v, __fdiv_rn(__fsub_rn(x, __fsub_rn(v, vr)), p.tau))
                             : __fadd_rn(__fsub_rn(v, __fdiv_rn(__fsub_rn(v, vr), p.tau)), x);
    case SNN_NEURON_PLIF:
        return p.decay_input ? __fadd_rn(v, __fmul_rn(__fsub_rn(x, __fsub_rn(v, vr)), k))
                             : __fadd_rn(__fsub_rn(v, __fmul_rn(__fsub_rn(v, vr), k)), x);
    default: /* IF */
        return __fadd_rn(v, x);
    }
}

/* ALIF's charge: LIF's, with tau (snn_lif_charge's ALIF case), the same rounding. */
static __device__ __forceinline__ float snn_alif_charge_cuda(const snn_neuron_params &p, float v,
                                                             float x)
{
    const float vr = p.v_reset;
    return p.decay_input ? __fadd_rn(v, __fdiv_rn(__fsub_rn(x, __fsub_rn(v, vr)), p.tau))
                         : __fadd_rn(__fsub_rn(v, __fdiv_rn(__fsub_rn(v, vr), p.tau)), x);
}

/* Matches snn_lif_reset: hard V = H (1 - S) + V_reset S, soft V = H - V_th S. */
static __device__ __forceinline__ float snn_lif_reset_cuda(const snn_neuron_params &p, float h,
                                                           float s)
{
    return p.soft_reset ? __fsub_rn(h, __fmul_rn(p.v_th, s))
                        : __fadd_rn(__fmul_rn(h, __fsub_rn(1.0f, s)), __fmul_rn(p.v_reset, s));
}

/* Matches snn_alif_threshold: th = V_th + beta A[t-1]. */
static __device__ __forceinline__ float snn_alif_threshold_cuda(const snn_neuron_params &p,
                                                                float a_prev)
{
    return __fadd_rn(p.v_th, __fmul_rn(p.beta, a_prev));
}

/* Matches snn_alif_reset: hard V = H (1 - S) + V_reset S, soft V = H - th S. */
static __device__ __forceinline__ float snn_alif_reset_cuda(const snn_neuron_params &p, float h,
                                                            float s, float th)
{
    return p.soft_reset ? __fsub_rn(h, __fmul_rn(th, s))
                        : __fadd_rn(__fmul_rn(h, __fsub_rn(1.0f, s)), __fmul_rn(p.v_reset, s));
}

/* Matches snn_alif_adapt: A = rho A[t-1] + (1 - rho) S. */
static __device__ __forceinline__ float snn_alif_adapt_cuda(const snn_neuron_params &p,
                                                            float a_prev, float s)
{
    return __fadd_rn(__fmul_rn(p.rho, a_prev), __fmul_rn(__fsub_rn(1.0f, p.rho), s));
}

/* ---- activity: spike counts per (t, n, c) plane ----------------------------------------------
 *
 * A warp's 32 lanes hold 32 consecutive elements (for one j), which fall into one or more
 * planes (plane q = element / plane). The lanes of one plane form a run of consecutive lanes;
 * the first lane of each run (its "leader") adds the run's count with one float atomicAdd.
 * Counts are integers below 2^24, so float atomics on them are exact and their order does not
 * matter: the result is the CPU's bit for bit. The run layout does not change with t, so it is
 * computed once (snn_plane_runs_make) and each step costs two ballots and a popcount.
 * ------------------------------------------------------------------------------------------- */

typedef struct snn_plane_run {
    int64_t q;     /* this lane's plane (valid lanes only) */
    unsigned mask; /* leader: the lanes of its run; 0 for the other lanes and invalid ones */
} snn_plane_run;

/* Every lane of the warp must call it (it uses warp shuffles). valid: the lane's element < M. */
static __device__ __forceinline__ snn_plane_run snn_plane_run_make(int64_t i, bool valid,
                                                                   int64_t plane)
{
    const unsigned lane = threadIdx.x & 31u;
    snn_plane_run r;
    int64_t rem;
    r.q = valid ? snn_divmod(i, plane, &rem) : -1;
    const long long q_left = __shfl_up_sync(0xffffffffu, (long long)r.q, 1);
    /* invalid lanes (the tail past M) start runs of their own, so no valid run includes them */
    const bool starts = lane == 0 || !valid || (long long)r.q != q_left;
    const unsigned starts_mask = __ballot_sync(0xffffffffu, starts);
    const unsigned above = starts_mask & ~((2u << lane) - 1u); /* run starts after this lane */
    const unsigned end = above ? (unsigned)(__ffs((int)above) - 1) : 32u;
    const unsigned upto_end = end == 32u ? 0xffffffffu : (1u << end) - 1u;
    r.mask = (starts && valid) ? upto_end & ~((1u << lane) - 1u) : 0u;
    return r;
}

/* act_row (N*C) += number of lanes of each run whose output is nonzero. All lanes call it. */
static __device__ __forceinline__ void snn_plane_run_count(float *act_row,
                                                           const snn_plane_run &r, bool nonzero)
{
    const unsigned hits = __ballot_sync(0xffffffffu, nonzero);
    if (r.mask) {
        const int count = __popc(hits & r.mask);
        if (count) atomicAdd(act_row + r.q, (float)count);
    }
}

/* The forward kernels' look-ahead: loads x for steps t0 .. t0 + STEPS - 1 of the thread's E
 * elements (i = base + j * BLOCK; E = ELEMS but where a kernel holds more per element) before
 * any of them is used, so STEPS * E loads are in flight together (the input does not depend on
 * the state); past T or M it stores 0. */
template <int E>
static __device__ __forceinline__ void snn_neuron_load_steps(
    float (&xv)[SNN_NEURON_CUDA_STEPS][E], const float *x, int64_t t0, int64_t T, int64_t M,
    int64_t base)
{
#pragma unroll
    for (int u = 0; u < SNN_NEURON_CUDA_STEPS; u++)
#pragma unroll
        for (int j = 0; j < E; j++) {
            const int64_t i = base + (int64_t)j * SNN_NEURON_CUDA_BLOCK;
            xv[u][j] = (t0 + u < T && i < M) ? x[(t0 + u) * M + i] : 0.0f;
        }
}

/* Blocks for M elements per step, `elems` a thread (the kernels' ELEMS unless they say). M > 0. */
static inline unsigned snn_neuron_cuda_grid(int64_t M, int elems = SNN_NEURON_CUDA_ELEMS)
{
    const int64_t per_block = (int64_t)SNN_NEURON_CUDA_BLOCK * elems;
    return (unsigned)((M + per_block - 1) / per_block);
}

/* ---- launchers (same signatures as the CPU kernels of neuron_cpu.h) ------------------------- */

extern "C" {

/* lif.cu (snn_lif_bn_backward_cuda: lif_bn_backward.cu) */
void snn_lif_forward_cuda(float *spike, float *h_seq, float *v_last, float *a_last,
                          float *activity, const float *x, const float *v_init,
                          const float *a_init, const float *w, const snn_neuron_params *p,
                          const snn_neuron_dims *d);
void snn_lif_bn_forward_cuda(float *spike, uint32_t *spike_bits, float *h_seq, float *activity,
                             const snn_neuron_bn_input *in, const snn_neuron_params *p,
                             const snn_neuron_dims *d);
void snn_lif_bn_backward_cuda(float *dX, float *dresidual, const float *dspike,
                              const snn_neuron_bn_input *in, const snn_neuron_params *p,
                              const snn_neuron_dims *d);
void snn_lif_backward_cuda(float *dx, float *dv_init, float *dw, const float *dspike,
                           const float *dv_last, const float *h_seq, const float *spike,
                           const float *x, const float *v_init, const float *a_init,
                           const float *w, const snn_neuron_params *p, const snn_neuron_dims *d);

/* alif.cu */
void snn_alif_forward_cuda(float *spike, float *h_seq, float *th_seq, float *v_last,
                           float *a_last, float *activity, const float *x, const float *v_init,
                           const float *a_init, const snn_neuron_params *p,
                           const snn_neuron_dims *d);
void snn_alif_backward_cuda(float *dx, float *dv_init, float *da_init, const float *dspike,
                            const float *dv_last, const float *da_last, const float *h_seq,
                            const float *th_seq, const snn_neuron_params *p,
                            const snn_neuron_dims *d);

/* stbif.cu */
void snn_stbif_forward_cuda(float *spike, float *h_seq, float *v_last, float *a_last,
                            float *activity, const float *x, const float *v_init,
                            const float *a_init, const float *w, const snn_neuron_params *p,
                            const snn_neuron_dims *d);
void snn_stbif_backward_cuda(float *dx, float *dv_init, float *dw, const float *dspike,
                             const float *dv_last, const float *h_seq, const float *spike,
                             const float *x, const float *v_init, const float *a_init,
                             const float *w, const snn_neuron_params *p,
                             const snn_neuron_dims *d);

/* heaviside.cu */
void snn_heaviside_forward_cuda(float *out, const float *x, int64_t n);
void snn_heaviside_backward_cuda(float *dx, const float *dout, const float *x,
                                 snn_surrogate_kind kind, float alpha, int64_t n);

/* plane_norm.cu */
void snn_plane_norm_forward_cuda(float *norm, const float *x, int64_t planes, int64_t plane);
void snn_plane_norm_backward_cuda(float *dx, const float *dnorm, const float *x,
                                  const float *norm, int64_t planes, int64_t plane);

/* qclip.cu */
void snn_qclip_forward_cuda(float *y, const float *x, const float *step,
                            const snn_neuron_params *p, int64_t n);
void snn_qclip_backward_cuda(float *dx, float *dstep, const float *dy, const float *x,
                             const float *step, const snn_neuron_params *p, float grad_scale,
                             int64_t n);

/* running_pool.cu */
void snn_running_max_pool_forward_cuda(float *y, int32_t *argmax, const float *x,
                                       const snn_running_pool_dims *d);
void snn_running_max_pool_backward_cuda(float *dx, const float *dy, const int32_t *argmax,
                                        const snn_running_pool_dims *d);

} /* extern "C" */

#endif /* SNN_NEURON_CUDA_CUH */
