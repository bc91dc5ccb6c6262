/*
 * lif_bn.cuh - what lif.cu's forward and lif_bn_backward.cu's backward share for IF / LIF fed
 * by a training-mode batch-norm (snn_neuron_bn_input, kernels/neuron_kernels.h):
 *   - the work split (BLOCK threads, ELEMS / BN_ELEMS elements a thread, STEPS loads ahead);
 *   - element i's channel and that channel's batch-norm constants, X = (x - mean) scale +
 *     shift, computed as batchnorm_sync.cu's normalise rounds it (bn_channels, bn_affine_of);
 *   - x read as floats or as bf16 bits (x_at), and the residual's kinds: floats, spike bits, or
 *     a batch-norm's output made as it is loaded (residual_at, RBN instances);
 *   - the common neuron (LIF, ATan, hard reset, input decay) fixed at compile time
 *     (fixed_params, params_fixed), whose charge multiplies by 1/tau where tau is a power of
 *     two (charge): instances with fewer instructions and the same bits.
 * Internal: included by lif.cu and lif_bn_backward.cu only.
 */
#ifndef SNN_LIF_BN_CUH
#define SNN_LIF_BN_CUH

#include "neuron_cuda.cuh"

#define BLOCK SNN_NEURON_CUDA_BLOCK
#define ELEMS SNN_NEURON_CUDA_ELEMS
#define STEPS SNN_NEURON_CUDA_STEPS
#define BSTEPS SNN_NEURON_CUDA_BACKWARD_STEPS
#define BN_ELEMS 2 /* elements a thread of lif_forward_kernel<true, .>: see there */

/* The batch-norm constants of element i's channel c = (i / plane) % C (snn_neuron_bn_input):
 * the divisions by multiply and shift when M < 2^31 (every shape the models make: a 64-bit
 * division is a ~70-instruction routine), else by 64-bit division. */
struct bn_channels {
    snn_fast_divisor plane, C;
    int64_t plane64, C64;
    bool small;
};

static inline bn_channels bn_channels_make(int64_t M, int64_t plane, int64_t C)
{
    bn_channels b = {};
    b.plane64 = plane, b.C64 = C, b.small = M < ((int64_t)1 << 31);
    if (b.small) {
        b.plane = snn_fast_divisor_make((uint32_t)plane);
        b.C = snn_fast_divisor_make((uint32_t)C);
    }
    return b;
}

/* Element e of the batch-norm's input x: bn.x, or (bn.x NULL) bn.x_bf16's bits as fp32 (exact:
 * a bf16 is the top half of an fp32). A conv output kept as bf16 is read as it is, 2 B. */
static __device__ __forceinline__ float x_at(const snn_neuron_bn_input &bn, int64_t e)
{
    return bn.x ? bn.x[e] : __uint_as_float((uint32_t)bn.x_bf16[e] << 16);
}

/* snn_neuron_load_steps (neuron_cuda.cuh) for inputs that are not plain floats: v[u][j] =
 * value(e) of element base + j BLOCK at step t0 + u, 0 past T or M (x as bf16, spike bits) */
template <int E, typename F>
static __device__ __forceinline__ void load_steps_of(float (&v)[STEPS][E], int64_t t0, int64_t T,
                                                     int64_t M, int64_t base, F value)
{
#pragma unroll
    for (int u = 0; u < STEPS; u++)
#pragma unroll
        for (int j = 0; j < E; j++) {
            const int64_t i = base + (int64_t)j * BLOCK;
            v[u][j] = t0 + u < T && i < M ? value((t0 + u) * M + i) : 0.0f;
        }
}

/* X = (x - mean) scale + shift: batchnorm_sync.cu's normalise, the double mean rounded to float */
struct bn_affine {
    float mean, scale, shift;
};

/* The channel of element i, (i / plane) % C */
static __device__ __forceinline__ int64_t channel_of(const bn_channels &ch, int64_t i)
{
    if (!ch.small) return i / ch.plane64 % ch.C64;
    const int q = snn_fast_div((int)i, ch.plane);
    return q - snn_fast_div(q, ch.C) * (int)ch.C64;
}

/* A batch-norm's constants of channel c, from its merged (count, mean, M2), invstd, gamma and
 * beta (gamma, beta NULL: 1 and 0) */
static __device__ __forceinline__ bn_affine affine_of(const double *stats, const float *invstd,
                                                      const float *gamma, const float *beta,
                                                      int64_t c)
{
    bn_affine a;
    a.mean = (float)stats[3 * c + 1];
    a.scale = (gamma ? gamma[c] : 1.0f) * invstd[c];
    a.shift = beta ? beta[c] : 0.0f;
    return a;
}

static __device__ __forceinline__ bn_affine bn_affine_of(const snn_neuron_bn_input &bn,
                                                         const bn_channels &ch, int64_t i)
{
    return affine_of(bn.stats, bn.invstd, bn.gamma, bn.beta, channel_of(ch, i));
}

/* The residual's batch-norm's constants of element i's channel (r: snn_bn_residual) */
static __device__ __forceinline__ bn_affine residual_affine_of(const snn_bn_residual &r,
                                                               const bn_channels &ch, int64_t i)
{
    return affine_of(r.stats, r.invstd, r.gamma, r.beta, channel_of(ch, i));
}

/* Whether X has a residual. RBN: the kernel's instance for a residual made by a batch-norm
 * (residual_bn), the only kind it then reads; an instance of its own keeps the other kinds'
 * registers and loads as they were (the T > 16 backward: 128 registers against 174 with all
 * kinds in one instance, one block an SM instead of two). */
template <bool RBN>
static __device__ __forceinline__ bool has_residual(const snn_neuron_bn_input &bn)
{
    return RBN || bn.residual || bn.residual_bits;
}

/* Element e of a residual given as floats or as bits, or (RBN) as a batch-norm's output: its
 * input's value through ra, the constants of e's channel, with that batch-norm's expression and
 * rounding; 0 for none. A warp's 32 neighbouring bits share one word: one transaction,
 * broadcast. */
template <bool RBN>
static __device__ __forceinline__ float residual_at(const snn_neuron_bn_input &bn,
                                                    const snn_bn_residual &r, const bn_affine &ra,
                                                    int64_t e)
{
    if (RBN) {
        const float rx = r.x ? r.x[e] : __uint_as_float((uint32_t)r.x_bf16[e] << 16);
        return (rx - ra.mean) * ra.scale + ra.shift;
    }
    if (bn.residual) return bn.residual[e];
    if (bn.residual_bits) return (float)((bn.residual_bits[e >> 5] >> (e & 31)) & 1u);
    return 0.0f;
}

/* The common neuron fixed at compile time: LIF, the ATan surrogate, hard reset, input decay
 * (snn-train's default). An instance built with FIXED folds the switches on kind, surrogate,
 * reset and decay that every element-step otherwise runs (uniform branches, but issued
 * instructions all the same: the fused neuron backward's layer1 launches are bound by issue,
 * ~170 instructions an element-step, docs/benchmarks.md), and does the same arithmetic, so
 * the same bits. params_fixed says whether p is that neuron; the launchers pick the instance. */
template <bool FIXED>
static __device__ __forceinline__ snn_neuron_params fixed_params(snn_neuron_params p)
{
    if (FIXED) {
        p.kind = SNN_NEURON_LIF;
        p.surrogate = SNN_SURROGATE_ATAN;
        p.soft_reset = false;
        p.decay_input = true;
    }
    return p;
}

/* Whether p is that neuron, with tau a power of two (snn-train's default is 2) so that 1/tau
 * is exact: then (X - (V - V_reset)) / tau and (X - (V - V_reset)) * (1/tau) are the correctly
 * rounded values of one real number, the same float, and the charge multiplies (one
 * instruction) where snn_lif_charge_cuda divides (__fdiv_rn: a dozen, and a branch to its
 * slow path). */
static bool params_fixed(const snn_neuron_params *p)
{
    int e;
    return p->kind == SNN_NEURON_LIF && p->surrogate == SNN_SURROGATE_ATAN && !p->soft_reset &&
           p->decay_input && p->tau > 0.0f && frexpf(p->tau, &e) == 0.5f;
}

/* H = V + (X - (V - V_reset)) / tau (snn_lif_charge_cuda); FIXED: times k = 1/tau, exact */
template <bool FIXED>
static __device__ __forceinline__ float charge(const snn_neuron_params &p, float k, float v,
                                               float x)
{
    if (FIXED) return __fadd_rn(v, __fmul_rn(__fsub_rn(x, __fsub_rn(v, p.v_reset)), k));
    return snn_lif_charge_cuda(p, k, v, x);
}

/* Whether in's residual is a batch-norm's output (the kernels' RBN instances) */
static bool residual_by_bn(const snn_neuron_bn_input *in)
{
    return !in->residual && !in->residual_bits && in->residual_bn;
}

#endif /* SNN_LIF_BN_CUH */
