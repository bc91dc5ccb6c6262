/*
 * lif.cu - the fused multi-step CUDA kernels of IF, LIF and ParametricLIF: the port of lif.c
 * (snn_lif_forward_cpu / snn_lif_backward_cpu), same signatures, same order, same equations
 * (neuron_math.h; docs/neurons.md section 1). Work split and the bit-exact forward:
 * neuron_cuda.cuh.
 * Test: tests/test_cuda_neurons.c (on the GPU machine: ctest -R cuda_neurons). Bench:
 * bench/bench_neurons.c.
 *
 *   forward, per element, t = 0 .. T-1, V in a register:
 *     H[t] = charge(V, X[t]);  S[t] = Heaviside(H[t] - V_th);  V = reset(H[t], S[t])
 *   backward (BPTT), per element, t = T-1 .. 0, G_V = dL/dV_last (or 0) in a register:
 *     G_H = G_S[t] g'(H[t] - V_th) + G_V dV/dH;  dX[t] += G_H dH/dX;  G_V = G_H dH/dV
 *     PLIF: dL/dk += G_H dH/dk, dH/dk = X[t] - (V[t-1] - V_reset), V[t-1] = reset(H[t-1])
 *
 * Memory traffic per element per step (V never leaves the register file):
 *   forward   read X 4 B, write S 4 B, write H 4 B in grad mode: 12 B (8 B without H)
 *   bn forward (snn_batchnorm_neuron) read x 4 B (2 B where kept as bf16; and the residual
 *             4 B), write S 4 B (and, for a tape, S as bits: 1/8 B); its recompute in
 *             backward: read x (and the residual), write H. A residual of spikes kept as bits
 *             reads 1/8 B, not 4; a residual made by a batch-norm (residual_bn) reads that
 *             batch-norm's input rx, 4 B or 2 B as bf16, and its channel's constants once per
 *             element. The repeated stem (x_repeated) reads x once per element and STEPS steps
 *   backward  read dS 4 B and H 4 B, read + write dX 8 B: 16 B (PLIF also reads X, and
 *             H[t-1] once per BSTEPS steps: ~22 B)
 *   plus, once per element, V_init / V_last / dV_init when given.
 *
 * Two things make the batch-norm-fed kernels faster than the equations above suggest, both
 * for their readers to know: the common neuron (LIF, ATan, hard reset, input decay) runs in
 * instances with those choices fixed at compile time (fixed_params, params_fixed), whose
 * charge multiplies by 1/tau where tau is a power of two; and in TF32 / BF16 training the
 * backward also sums dX and dX (x - mean) per channel for the batch-norm's backward
 * (in->dy_sums: dy_sums_partials, dy_sums_finish_kernel), which then skips its own pass.
 */
#include "neuron_cuda.cuh"
#include "tensor/error.h"
#include "kernels_cuda.h"

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

/* Forward: see the file header. Writes spike, h_seq (if not NULL), v_last (if not NULL; may
 * alias v_init: each thread reads its v_init before writing its v_last) and adds the spike
 * counts to activity (if not NULL; zeroed by the launcher). CPU: snn_lif_forward_cpu.
 * h_seq may be x itself (snn_neuron_multistep_consume): every X[t] is read by the one thread
 * that then writes H[t] to the same address, and no thread reads an address another has
 * written, so neither the read-only load path nor reordering can see a written value.
 * BN (lif_bn_forward): X is made from bn (see snn_neuron_bn_input) as it is loaded, x is
 * unused, and spike may be NULL (backward's recompute of H: then activity is NULL too).
 * spike_bits (BN only; M a multiple of 32, so that a warp's 32 elements of one step are one
 * word): each warp's __ballot_sync of its spikes, written by lane 0.
 * E elements a thread: ELEMS, or BN_ELEMS with BN, whose residual and channel constants would
 * otherwise take the registers of two blocks an SM (79 a thread at 4: 37% occupancy). */
template <bool BN, int E, bool RBN = false, bool FIXED = false>
static __global__ void __launch_bounds__(BLOCK, FIXED ? 4 : 1)
lif_forward_kernel(float *__restrict__ spike, uint32_t *__restrict__ spike_bits,
                   float *__restrict__ h_seq, float *v_last,
                   float *__restrict__ activity, const float *__restrict__ x,
                   const float *v_init, const float *__restrict__ w, snn_neuron_bn_input bn,
                   snn_bn_residual rbn, bn_channels ch, snn_neuron_params p_in, int64_t T,
                   int64_t M, int64_t planes, int64_t plane)
{
    const snn_neuron_params p = fixed_params<FIXED>(p_in);
    const float k = p.kind == SNN_NEURON_IF ? 1.0f : snn_lif_decay_cuda(p, w);
    const int64_t base = (int64_t)blockIdx.x * (BLOCK * E) + threadIdx.x;

    float v[E];              /* V of each of this thread's elements */
    snn_plane_run run[E];    /* activity bookkeeping (only when activity != NULL) */
    bn_affine a[E];          /* BN: the constants of each element's channel */
    bn_affine ra[E];         /* RBN: the residual's batch-norm's (residual_bn) */
#pragma unroll
    for (int j = 0; j < E; j++) {
        const int64_t i = base + (int64_t)j * BLOCK;
        v[j] = i < M ? (v_init ? v_init[i] : p.v_reset) : 0.0f;
        if (activity) run[j] = snn_plane_run_make(i, i < M, plane);
        if (BN && bn.stats) a[j] = bn_affine_of(bn, ch, i < M ? i : 0);
        if (RBN) ra[j] = residual_affine_of(rbn, ch, i < M ? i : 0);
    }

    for (int64_t t0 = 0; t0 < T; t0 += STEPS) {
        /* STEPS * E loads in flight before the first use: hides the latency even at tiny M */
        float xv[STEPS][E], rv[STEPS][E];
        if (BN && bn.x_repeated) /* every step's x is the one x (the repeated stem) */
#pragma unroll
            for (int j = 0; j < E; j++) {
                const int64_t i = base + (int64_t)j * BLOCK;
                const float x0 = i < M ? x_at(bn, i) : 0.0f;
#pragma unroll
                for (int u = 0; u < STEPS; u++) xv[u][j] = x0;
            }
        else if (BN && !bn.x) /* x kept as bf16 */
            load_steps_of(xv, t0, T, M, base, [&](int64_t e) { return x_at(bn, e); });
        else
            snn_neuron_load_steps(xv, BN ? bn.x : x, t0, T, M, base);
        if (BN && !RBN && bn.residual) snn_neuron_load_steps(rv, bn.residual, t0, T, M, base);
        if (BN && (RBN || (!bn.residual && bn.residual_bits)))
#pragma unroll
            for (int u = 0; u < STEPS; u++)
#pragma unroll
                for (int j = 0; j < E; j++) {
                    const int64_t i = base + (int64_t)j * BLOCK;
                    rv[u][j] = t0 + u < T && i < M
                                   ? residual_at<RBN>(bn, rbn, ra[j], (t0 + u) * M + i) : 0.0f;
                }
#pragma unroll
        for (int u = 0; u < STEPS; u++) {
            const int64_t t = t0 + u;
            if (t >= T) break; /* uniform over the grid */
            const int64_t off = t * M;
#pragma unroll
            for (int j = 0; j < E; j++) {
                const int64_t i = base + (int64_t)j * BLOCK;
                float s = 0.0f;
                if (i < M) {
                    float xin = xv[u][j];
                    if (BN) { /* the batch-norm's expression, then the residual's add */
                        if (bn.stats) xin = (xin - a[j].mean) * a[j].scale + a[j].shift;
                        if (has_residual<RBN>(bn)) xin = xin + rv[u][j];
                    }
                    const float h = charge<FIXED>(p, k, v[j], xin);
                    s = snn_lif_fire(&p, h); /* a comparison: nothing to round */
                    if (h_seq) h_seq[off + i] = h;
                    if (!BN || spike) spike[off + i] = s;
                    v[j] = snn_lif_reset_cuda(p, h, s);
                }
                if (BN && spike_bits) { /* the whole warp is here: i < M is not a branch of it */
                    const uint32_t word = __ballot_sync(0xffffffffu, s != 0.0f);
                    if ((threadIdx.x & 31) == 0 && i < M) spike_bits[(off + i) >> 5] = word;
                }
                if (activity) snn_plane_run_count(activity + t * planes, run[j], s != 0.0f);
            }
        }
    }
    if (v_last) {
#pragma unroll
        for (int j = 0; j < E; j++) {
            const int64_t i = base + (int64_t)j * BLOCK;
            if (i < M) v_last[i] = v[j];
        }
    }
}

extern "C" void snn_lif_forward_cuda(float *spike, float *h_seq, float *v_last, float *a_last,
                                     float *activity, const float *x, const float *v_init,
                                     const float *a_init, const float *w,
                                     const snn_neuron_params *p, const snn_neuron_dims *d)
{
    (void)a_last;
    (void)a_init;
    const int64_t T = d->T, M = snn_neuron_dims_step(d), planes = d->N * d->C;
    /* the kernel adds counts, so activity starts at zero (all-zero bytes are 0.0f) */
    if (activity && T * planes > 0)
        SNN_CUDA_CHECK(cudaMemsetAsync(activity, 0, (size_t)(T * planes) * sizeof(float),
                                       snn_cuda_stream()));
    if (M <= 0) return;
    SNN_CUDA_LAUNCH((lif_forward_kernel<false, ELEMS>), snn_neuron_cuda_grid(M), BLOCK, 0, spike,
                    nullptr, h_seq, v_last, activity, x, v_init, w, snn_neuron_bn_input{},
                    snn_bn_residual{},
                    bn_channels{}, *p, T, M, planes, d->plane);
}

/* Whether in's residual is a batch-norm's output (the kernels' RBN instances) */
static bool residual_by_bn(const snn_neuron_bn_input *in)
{
    return !in->residual && !in->residual_bits && in->residual_bn;
}

/* IF / LIF on the batch-norm-fed input (snn_neuron_bn_input): the kernel above with X made as
 * it is loaded. CPU: snn_lif_bn_forward_cpu. */
extern "C" void snn_lif_bn_forward_cuda(float *spike, uint32_t *spike_bits, float *h_seq,
                                        float *activity, const snn_neuron_bn_input *in,
                                        const snn_neuron_params *p, const snn_neuron_dims *d)
{
    SNN_ASSERT(p->kind == SNN_NEURON_IF || p->kind == SNN_NEURON_LIF); /* IF, LIF only */
    SNN_ASSERT(spike || !spike_bits);
    const int64_t T = d->T, M = snn_neuron_dims_step(d), planes = d->N * d->C;
    if (!spike) activity = NULL;
    if (activity && T * planes > 0)
        SNN_CUDA_CHECK(cudaMemsetAsync(activity, 0, (size_t)(T * planes) * sizeof(float),
                                       snn_cuda_stream()));
    if (M <= 0) return;
    /* the bits in the kernel where a warp's elements of a step are one word, else a pass */
    const bool ballot = M % 32 == 0;
    /* a carrying layer's state: the kernel's own v_init / v_last (the same instance) */
    const bn_channels ch = bn_channels_make(M, d->plane, d->C);
    uint32_t *bits = ballot ? spike_bits : nullptr;
    const unsigned grid = snn_neuron_cuda_grid(M, BN_ELEMS);
    const snn_bn_residual rbn = residual_by_bn(in) ? *in->residual_bn : snn_bn_residual{};
#define SNN_LIF_BN_FORWARD(RBN, FIXED)                                                          \
    SNN_CUDA_LAUNCH((lif_forward_kernel<true, BN_ELEMS, RBN, FIXED>), grid, BLOCK, 0, spike, bits, \
                    h_seq, in->v_last, activity, nullptr, in->v_init, nullptr, *in, rbn, ch, *p, \
                    T, M, planes, d->plane)
    if (residual_by_bn(in) && params_fixed(p)) SNN_LIF_BN_FORWARD(true, true);
    else if (residual_by_bn(in)) SNN_LIF_BN_FORWARD(true, false);
    else if (params_fixed(p)) SNN_LIF_BN_FORWARD(false, true);
    else SNN_LIF_BN_FORWARD(false, false);
#undef SNN_LIF_BN_FORWARD
    if (spike_bits && !ballot) snn_pack_bits_cuda(spike_bits, spike, T * M);
}

/* Backward (BPTT): see the file header. Accumulates into dx and dv_init (each NULL = not
 * wanted); with dk_sum != NULL (PLIF, dw wanted) adds this block's sum of G_H dH/dk, in double,
 * to *dk_sum with one atomicAdd. CPU: snn_lif_backward_cpu. */
static __global__ void __launch_bounds__(BLOCK)
lif_backward_kernel(float *__restrict__ dx, float *__restrict__ dv_init,
                    double *__restrict__ dk_sum, const float *__restrict__ dspike,
                    const float *__restrict__ dv_last, const float *__restrict__ h_seq,
                    const float *__restrict__ x, const float *__restrict__ v_init,
                    const float *__restrict__ w, snn_neuron_params p, int64_t T, int64_t M)
{
    const float k = p.kind == SNN_NEURON_IF ? 1.0f : snn_lif_decay_cuda(p, w);
    const float dh_dx = snn_lif_dh_dx(&p, k), dh_dv = snn_lif_dh_dv(&p, k);
    const bool want_dk = dk_sum != NULL;
    const int64_t base = (int64_t)blockIdx.x * (BLOCK * ELEMS) + threadIdx.x;

    float gv[ELEMS]; /* G_V = dL/dV[t], carried from t = T-1 down to 0 */
    double dk = 0.0; /* PLIF: this thread's share of dL/dk */
#pragma unroll
    for (int j = 0; j < ELEMS; j++) {
        const int64_t i = base + (int64_t)j * BLOCK;
        gv[j] = (i < M && dv_last) ? dv_last[i] : 0.0f;
    }

    for (int64_t t0 = T - 1; t0 >= 0; t0 -= BSTEPS) {
        /* the loads of BSTEPS steps (t = t0, t0 - 1, ...) first, in flight together; h[u] is
         * H[t0 - u], and PLIF also needs H[t0 - BSTEPS] for V[t-1] of the last step */
        float h[BSTEPS + 1][ELEMS], gs[BSTEPS][ELEMS], dxv[BSTEPS][ELEMS], xv[BSTEPS][ELEMS];
#pragma unroll
        for (int u = 0; u <= BSTEPS; u++)
#pragma unroll
            for (int j = 0; j < ELEMS; j++) {
                const int64_t i = base + (int64_t)j * BLOCK, t = t0 - u;
                const bool ok = i < M && t >= 0 && (u < BSTEPS || want_dk);
                h[u][j] = ok ? h_seq[t * M + i] : 0.0f;
                if (u == BSTEPS) continue;
                gs[u][j] = (ok && dspike) ? dspike[t * M + i] : 0.0f;
                dxv[u][j] = (ok && dx) ? dx[t * M + i] : 0.0f;
                xv[u][j] = (ok && want_dk) ? x[t * M + i] : 0.0f;
            }
#pragma unroll
        for (int u = 0; u < BSTEPS; u++) {
            const int64_t t = t0 - u;
            if (t < 0) break; /* uniform over the grid */
#pragma unroll
            for (int j = 0; j < ELEMS; j++) {
                const int64_t i = base + (int64_t)j * BLOCK;
                if (i >= M) continue;
                const float gh = snn_lif_grad_h(&p, h[u][j], gs[u][j], gv[j]);
                if (dx) dx[t * M + i] = dxv[u][j] + gh * dh_dx;
                gv[j] = gh * dh_dv;
                if (want_dk) {
                    /* V[t-1]: the reset of H[t-1], or the initial state at t = 0 */
                    const float hp = h[u + 1][j];
                    const float v_prev = t > 0 ? snn_lif_reset_cuda(p, hp, snn_lif_fire(&p, hp))
                                               : (v_init ? v_init[i] : p.v_reset);
                    dk += (double)(gh * snn_lif_dh_dk(&p, xv[u][j], v_prev));
                }
            }
        }
    }
    if (dv_init) {
#pragma unroll
        for (int j = 0; j < ELEMS; j++) {
            const int64_t i = base + (int64_t)j * BLOCK;
            if (i < M) dv_init[i] += gv[j];
        }
    }
    if (want_dk) { /* uniform over the grid: every thread of the block reaches the sum */
        const double block_dk = snn_block_sum(dk);
        if (threadIdx.x == 0 && block_dk != 0.0) atomicAdd(dk_sum, block_dk);
    }
}

/* The batch-norm backward's sums (in->dy_sums: sum dX and sum dX (x - mean) per channel), made
 * by lif_bn_backward_kernel<.., SUMS> as it writes dX, in two steps, deterministic (no atomics):
 *   1. each block: every thread's sums over its steps, the warps' by shuffles, then, for each
 *      group of `group` consecutive elements (a plane, or the block's share of a plane:
 *      group = min(plane, BLOCK E), which divides both), the sum of its warps in order, in
 *      float, to partial[e / group] (float2: sum dX, sum dX (x - mean)); planes smaller than
 *      a warp (16, 8, ..., which divide it) by shuffles within their lanes alone;
 *   2. dy_sums_finish_kernel: channel c's partials (its N planes' plane / group each) in double.
 * The whole warp reaches step 1 (no thread returned early), and a warp's 32 elements lie in
 * one group (group % 32 == 0) or hold whole groups (32 % group == 0). Floats inside a block,
 * over at most BLOCK E T values, then double: TF32 and BF16 training's sums (fp32 keeps
 * batch-norm's own pass, in double throughout). */
template <int E>
static __device__ __forceinline__ void dy_sums_partials(const float (&sum_dy)[E],
                                                        const float (&sum_dy_dev)[E],
                                                        float2 *__restrict__ partial, int group,
                                                        int64_t M)
{
    constexpr int WARPS = BLOCK / 32;
    __shared__ float2 warp_sums[E * WARPS]; /* in element order: j, then the warp */
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (group < 32) { /* planes of 16, 8, ...: a warp holds 32 / group of them, each summed by
                       * its own lanes and written by its first */
#pragma unroll
        for (int j = 0; j < E; j++) {
            float a = sum_dy[j], b = sum_dy_dev[j];
            for (int o = group / 2; o > 0; o >>= 1) {
                a += __shfl_xor_sync(0xffffffffu, a, o);
                b += __shfl_xor_sync(0xffffffffu, b, o);
            }
            const int64_t e = (int64_t)blockIdx.x * (BLOCK * E) + j * BLOCK + threadIdx.x;
            if (lane % group == 0 && e < M) partial[e / group] = make_float2(a, b);
        }
        return; /* the whole block takes this branch: no barrier is left waiting */
    }
#pragma unroll
    for (int j = 0; j < E; j++) {
        float a = sum_dy[j], b = sum_dy_dev[j];
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            a += __shfl_xor_sync(0xffffffffu, a, o);
            b += __shfl_xor_sync(0xffffffffu, b, o);
        }
        if (lane == 0) warp_sums[j * WARPS + warp] = make_float2(a, b);
    }
    __syncthreads();
    const int groups = BLOCK * E / group, warps_a_group = group / 32;
    if (threadIdx.x < groups) {
        float a = 0.0f, b = 0.0f;
        for (int w = threadIdx.x * warps_a_group; w < (threadIdx.x + 1) * warps_a_group; w++)
            a += warp_sums[w].x, b += warp_sums[w].y;
        const int64_t q = (int64_t)blockIdx.x * groups + threadIdx.x;
        if (q * group < M) partial[q] = make_float2(a, b);
    }
}

/* Step 2 of dy_sums_partials: block c adds channel c's partials, per_plane = plane / group for
 * each of the N images' planes (n C + c), in double (a strided share each, then the block's
 * fixed tree): sums[3 c ..] = (sum dX, sum dX (x - mean), count). */
static __global__ void dy_sums_finish_kernel(double *sums, const float2 *partial, int64_t N,
                                             int64_t C, int64_t per_plane, double count)
{
    const int64_t c = blockIdx.x;
    double a = 0.0, b = 0.0;
    for (int64_t r = threadIdx.x; r < N * per_plane; r += blockDim.x) {
        const int64_t n = r / per_plane, k = r - n * per_plane;
        const float2 v = partial[(n * C + c) * per_plane + k];
        a += (double)v.x, b += (double)v.y;
    }
    a = snn_block_sum(a);
    b = snn_block_sum(b);
    if (threadIdx.x == 0) sums[3 * c] = a, sums[3 * c + 1] = b, sums[3 * c + 2] = count;
}

/* BPTT on the batch-norm-fed input (lif_bn_backward), E elements a thread, T <= TMAX steps:
 * every load first (x, the residual, dS and dresidual of all T steps: nothing is stored before
 * them, so all are in flight together), then the forward recurrence from V_init (bn.v_init, or
 * V_reset) with H[0..T) kept in registers, then t = T-1 .. 0 as lif_backward_kernel with
 * dX = 0 + G_H dH/dX (its accumulation into a zero-filled dX) and dresidual += 1 dX (axpy).
 * IF / LIF only (no dL/dk). A carrying layer's state: G_V starts from bn.dv_last (or 0), and
 * G_V[-1] is added into bn.dv_init. With dS and dV_last together (a time checkpoint's segment
 * that is not the last) the one recurrence carries both: G_H is linear in (dS, G_V), so this
 * is the sum of the two single-gradient runs the unfused state op makes, up to the rounding
 * of where the sum is taken (tests/test_cuda_bn_neuron.c compares that case to 1e-5). With
 * bn.v_last, the recurrence's last V is written there (the carry op's state, which advances in
 * its backward: neurons/bn_neuron.c).
 * With bn.x_repeated (the repeated stem: x and dX are (M)), dX is the sum of the steps'
 * dL/dX[t], added t = 0, 1, ... in registers after the recurrence.
 * Past 16 steps: lif_bn_backward_chunked_kernel, below.
 * dX may be dspike (neurons/bn_neuron.c hands the spikes' gradient over to x): every dS of
 * a thread's elements is loaded before any dX is stored, and no thread touches another's
 * elements, so neither pointer is __restrict__.
 * Traffic per element and step: read x, the residual and dS, write dX, read-modify-write
 * dresidual: 16-24 B (the unfused sequence: 44 B); once per element V_init, dV_last, dV_init
 * and V_last. The repeated stem: read dS, 4 B a step; x and dX once per element. */
template <int TMAX, int E, bool RBN, bool FIXED = false, bool SUMS = false>
static __global__ void __launch_bounds__(BLOCK, SUMS ? 4 : 1)
lif_bn_backward_kernel(float *dX, float *__restrict__ dres,
                       const float *dspike, snn_neuron_bn_input bn,
                       snn_bn_residual rbn, bn_channels ch,
                       snn_neuron_params p_in, int64_t T, int64_t M,
                       float2 *__restrict__ dy_partial, int dy_group)
{
    const snn_neuron_params p = fixed_params<FIXED>(p_in); /* FIXED: the common neuron */
    const float k = p.kind == SNN_NEURON_IF ? 1.0f : snn_lif_decay_cuda(p, NULL);
    const float dh_dx = snn_lif_dh_dx(&p, k), dh_dv = snn_lif_dh_dv(&p, k);
    const int64_t base = (int64_t)blockIdx.x * (BLOCK * E) + threadIdx.x;
    float xv[TMAX][E], rv[TMAX][E], gs[TMAX][E], dr[TMAX][E];
    bn_affine ra[E]; /* RBN: the residual's batch-norm's constants (residual_bn) */
#pragma unroll
    for (int j = 0; j < E; j++) {
        const int64_t i = base + (int64_t)j * BLOCK;
        if (RBN) ra[j] = residual_affine_of(rbn, ch, i < M ? i : 0);
    }
#pragma unroll
    for (int t = 0; t < TMAX; t++)
#pragma unroll
        for (int j = 0; j < E; j++) {
            const int64_t i = base + (int64_t)j * BLOCK;
            const bool ok = t < T && i < M;
            xv[t][j] = ok ? x_at(bn, (bn.x_repeated ? 0 : t) * M + i) : 0.0f;
            rv[t][j] = ok ? residual_at<RBN>(bn, rbn, ra[j], t * M + i) : 0.0f;
            gs[t][j] = ok && dspike ? dspike[t * M + i] : 0.0f;
            dr[t][j] = ok && dres ? dres[t * M + i] : 0.0f;
        }
    float sum_dy[E], sum_dy_dev[E]; /* SUMS: this thread's share of in->dy_sums, element j */
#pragma unroll
    for (int j = 0; j < E; j++) {
        const int64_t i = base + (int64_t)j * BLOCK;
        sum_dy[j] = 0.0f, sum_dy_dev[j] = 0.0f;
        if (i >= M) continue;
        const bn_affine a = bn_affine_of(bn, ch, i); /* as lif_forward_kernel<true, BN_ELEMS> */
        float h[TMAX], v = bn.v_init ? bn.v_init[i] : p.v_reset;
#pragma unroll
        for (int t = 0; t < TMAX; t++) {
            if (t >= T) break;
            float xin = (xv[t][j] - a.mean) * a.scale + a.shift;
            if (has_residual<RBN>(bn)) xin = xin + rv[t][j];
            h[t] = charge<FIXED>(p, k, v, xin);
            v = snn_lif_reset_cuda(p, h[t], snn_lif_fire(&p, h[t]));
        }
        if (bn.v_last) bn.v_last[i] = v; /* the deferred carry (may alias v_init: read above) */
        /* G_V starts from dL/dV_last (a differentiable carried state; then dS is NULL: the
         * state op's V node alone) or 0 */
        float gv = bn.dv_last ? bn.dv_last[i] : 0.0f;
        const float zero = 0.0f; /* what lif_backward adds G_H dH/dX to */
#pragma unroll
        for (int t = TMAX - 1; t >= 0; t--) {
            if (t >= T) continue;
            const float gh = snn_lif_grad_h(&p, h[t], gs[t][j], gv);
            const float d = zero + gh * dh_dx;
            if (bn.x_repeated) h[t] = d; /* H[t] is spent: keep dX[t] for the sum below */
            else dX[t * M + i] = d;
            if (dres) dres[t * M + i] = dr[t][j] + 1.0f * d;
            gv = gh * dh_dv;
            if (SUMS && !bn.x_repeated) { /* the batch-norm's sums: dL/dout = d, x xv[t][j] */
                sum_dy[j] += d;
                sum_dy_dev[j] += d * (xv[t][j] - a.mean);
            }
        }
        if (bn.x_repeated) { /* dX = sum over t, from 0 in the order t = 0, 1, ... (as the
                              * repeat's backward adds it: one axpy a step) */
            float sum = 0.0f;
#pragma unroll
            for (int t = 0; t < TMAX; t++)
                if (t < T) sum = sum + 1.0f * h[t];
            dX[i] = sum;
            if (SUMS) { /* the batch-norm's dL/dout is that sum, its input the one x */
                sum_dy[j] += sum;
                sum_dy_dev[j] += sum * (xv[0][j] - a.mean);
            }
        }
        if (bn.dv_init) bn.dv_init[i] += gv;
    }
    if (SUMS) dy_sums_partials<E>(sum_dy, sum_dy_dev, dy_partial, dy_group, M);
}

/* X[t] of element i: the batch-norm's expression on x, then the residual's add (the rounding of
 * lif_forward_kernel<true, .>); xv and rv as loaded. */
template <bool RBN>
static __device__ __forceinline__ float bn_input_of(const snn_neuron_bn_input &bn,
                                                    const bn_affine &a, float xv, float rv)
{
    float xin = (xv - a.mean) * a.scale + a.shift;
    if (has_residual<RBN>(bn)) xin = xin + rv;
    return xin;
}

/* lif_bn_backward past 16 steps (16 < T <= SNN_NEURON_BN_BACKWARD_MAX_T), one element a
 * thread, in chunks of 16 steps from the last: the chunk's x (and residual) loaded, its H
 * from the V at its start, then its dS (and dresidual) loaded and its part of the BPTT as
 * lif_bn_backward_kernel's; G_V passes from chunk to chunk in a register. The V at a chunk's
 * start is the recurrence from V_init over the steps before it, run again, 16 loads in flight
 * at a time: no H in memory, and no V of each chunk kept in local memory (its reservation
 * would cost every thread the GPU can hold). The repeated stem's sum adds the chunks from the
 * last, each in step order. Its gradients equal the scratch path's to rounding, not bit for
 * bit (tests/test_cuda_bn_neuron.c: 1e-5): that sum's order, and ptxas fusing the surrogate
 * gradient's multiply-adds (neuron_math.h) as it sees fit in each kernel.
 * dX may be dspike, as there: a chunk's dS are all loaded before its dX are stored, and later
 * chunks (earlier steps) read other addresses.
 * Traffic per element and step as lif_bn_backward_kernel's, plus x (and the residual) read
 * again for the chunks' starts: C (C - 1) / 2 chunks of it for C chunks, at T = 32 16 steps
 * more (18-28 B a step at T = 32). The scratch path it replaces moves 28-44 B a step
 * (lif_bn_forward writing H, the fill, lif_backward, the residual's axpy) and keeps H, 4 B a
 * step, in scratch: at T = 32 the largest scratch of a ResNet-18 step. */
#define CHUNK 16
template <bool RBN>
static __global__ void __launch_bounds__(BLOCK)
lif_bn_backward_chunked_kernel(float *dX, float *__restrict__ dres,
                               const float *dspike, snn_neuron_bn_input bn,
                               snn_bn_residual rbn, bn_channels ch, snn_neuron_params p,
                               int64_t T, int64_t M)
{
    const int64_t i = (int64_t)blockIdx.x * BLOCK + threadIdx.x;
    if (i >= M) return; /* no warp-wide operation follows */
    const float k = p.kind == SNN_NEURON_IF ? 1.0f : snn_lif_decay_cuda(p, NULL);
    const float dh_dx = snn_lif_dh_dx(&p, k), dh_dv = snn_lif_dh_dv(&p, k);
    const bn_affine a = bn_affine_of(bn, ch, i);
    const bn_affine ra = RBN ? residual_affine_of(rbn, ch, i) : bn_affine{0.0f, 0.0f, 0.0f};
    const bool with_residual = has_residual<RBN>(bn);
    const int64_t x_step = bn.x_repeated ? 0 : M; /* x's stride between steps */
    /* V_init (read before V_last may overwrite it), G_V from dL/dV_last or 0 */
    const float v_init = bn.v_init ? bn.v_init[i] : p.v_reset;
    float gv = bn.dv_last ? bn.dv_last[i] : 0.0f, dsum = 0.0f;
    const int64_t chunks = (T + CHUNK - 1) / CHUNK;
    for (int64_t c = chunks - 1; c >= 0; c--) {
        const int64_t t0 = c * CHUNK;
        float v = v_init;
        for (int64_t s0 = 0; s0 < t0; s0 += CHUNK) { /* whole chunks: s0 + u < t0 <= T */
            float xs[CHUNK], rs[CHUNK];
#pragma unroll
            for (int u = 0; u < CHUNK; u++) {
                xs[u] = x_at(bn, (s0 + u) * x_step + i);
                rs[u] = with_residual ? residual_at<RBN>(bn, rbn, ra, (s0 + u) * M + i) : 0.0f;
            }
#pragma unroll
            for (int u = 0; u < CHUNK; u++) {
                const float h = snn_lif_charge_cuda(p, k, v, bn_input_of<RBN>(bn, a, xs[u], rs[u]));
                v = snn_lif_reset_cuda(p, h, snn_lif_fire(&p, h));
            }
        }
        /* the chunk's forward: its x (and residual) loads, then H[t0 ..] in registers */
        float h[CHUNK];
        {
            float xv[CHUNK], rv[CHUNK];
#pragma unroll
            for (int u = 0; u < CHUNK; u++) {
                const int64_t t = t0 + u;
                xv[u] = t < T ? x_at(bn, t * x_step + i) : 0.0f;
                rv[u] = t < T && with_residual ? residual_at<RBN>(bn, rbn, ra, t * M + i) : 0.0f;
            }
#pragma unroll
            for (int u = 0; u < CHUNK; u++) {
                if (t0 + u >= T) break;
                h[u] = snn_lif_charge_cuda(p, k, v, bn_input_of<RBN>(bn, a, xv[u], rv[u]));
                v = snn_lif_reset_cuda(p, h[u], snn_lif_fire(&p, h[u]));
            }
        }
        if (c == chunks - 1 && bn.v_last) bn.v_last[i] = v; /* the deferred carry */
        /* then its backward: dS (and dresidual) loads, t = t0 + CHUNK - 1 .. t0. The loads
         * in two groups keep fewer values live: 120 registers a thread, two blocks an SM (all
         * four groups first took 156, one block; three blocks' 80 spill) */
        float gs[CHUNK], dr[CHUNK];
#pragma unroll
        for (int u = 0; u < CHUNK; u++) {
            const int64_t t = t0 + u;
            gs[u] = t < T && dspike ? dspike[t * M + i] : 0.0f;
            dr[u] = t < T && dres ? dres[t * M + i] : 0.0f;
        }
        const float zero = 0.0f; /* what lif_backward adds G_H dH/dX to */
#pragma unroll
        for (int u = CHUNK - 1; u >= 0; u--) {
            const int64_t t = t0 + u;
            if (t >= T) continue;
            const float gh = snn_lif_grad_h(&p, h[u], gs[u], gv);
            const float d = zero + gh * dh_dx;
            if (bn.x_repeated) h[u] = d; /* H[t] is spent: keep dX[t] for the sum below */
            else dX[t * M + i] = d;
            if (dres) dres[t * M + i] = dr[u] + 1.0f * d;
            gv = gh * dh_dv;
        }
        if (bn.x_repeated)
#pragma unroll
            for (int u = 0; u < CHUNK; u++)
                if (t0 + u < T) dsum = dsum + 1.0f * h[u];
    }
    if (bn.x_repeated) dX[i] = dsum;
    if (bn.dv_init) bn.dv_init[i] += gv;
}

/* Where lif_bn_backward_kernel<4, 2, .., SUMS> makes in->dy_sums (dy_sums_partials): up to 4
 * steps, planes that divide or are divided by the 512 elements of a block and are a multiple
 * of 32 or divide it (2, 4, ..., 16; 1 would give one partial an element), and the partials
 * within the context's scratch. The group; 0: not here. */
static int dy_sums_group(const snn_neuron_bn_input *in, int64_t T, int64_t M, int64_t plane)
{
    const int64_t block = BLOCK * 2, group = plane < block ? plane : block;
    if (!in->dy_sums || T > 4 || plane < 2 || (plane % 32 != 0 && 32 % plane != 0) ||
        block % group != 0 || plane % group != 0 ||
        (size_t)(M / group) * sizeof(float2) > SNN_CUDA_SCRATCH_BYTES)
        return 0;
    return (int)group;
}

template <bool RBN>
static void launch_bn_backward(float *dX, float *dresidual, const float *dspike,
                               const snn_neuron_bn_input *in, const snn_bn_residual &rbn,
                               const bn_channels &ch, const snn_neuron_params *p, int64_t T,
                               int64_t M, float2 *partial, int group)
{
#define SNN_LIF_BN_BACKWARD(TMAX, E, FIXED, SUMS)                                                \
    SNN_CUDA_LAUNCH((lif_bn_backward_kernel<TMAX, E, RBN, FIXED, SUMS>),                         \
                    snn_neuron_cuda_grid(M, E), BLOCK, 0, dX, dresidual, dspike, *in, rbn, ch,   \
                    *p, T, M, partial, group)
    const bool fixed = params_fixed(p), sums = group > 0;
    if (T <= 4 && fixed && sums) SNN_LIF_BN_BACKWARD(4, 2, true, true);
    else if (T <= 4 && fixed) SNN_LIF_BN_BACKWARD(4, 2, true, false);
    else if (T <= 4 && sums) SNN_LIF_BN_BACKWARD(4, 2, false, true);
    else if (T <= 4) SNN_LIF_BN_BACKWARD(4, 2, false, false);
    else if (T <= 8) SNN_LIF_BN_BACKWARD(8, 1, false, false);
    else if (T <= CHUNK) SNN_LIF_BN_BACKWARD(16, 1, false, false);
    else
        SNN_CUDA_LAUNCH(lif_bn_backward_chunked_kernel<RBN>, snn_neuron_cuda_grid(M, 1), BLOCK, 0,
                        dX, dresidual, dspike, *in, rbn, ch, *p, T, M);
#undef SNN_LIF_BN_BACKWARD
}

extern "C" void snn_lif_bn_backward_cuda(float *dX, float *dresidual, const float *dspike,
                                         const snn_neuron_bn_input *in,
                                         const snn_neuron_params *p, const snn_neuron_dims *d)
{
    SNN_ASSERT(p->kind == SNN_NEURON_IF || p->kind == SNN_NEURON_LIF); /* IF, LIF only */
    SNN_ASSERT(d->T <= SNN_NEURON_BN_BACKWARD_MAX_T);
    const int64_t T = d->T, M = snn_neuron_dims_step(d);
    if (M <= 0 || T <= 0) return;
    const bn_channels ch = bn_channels_make(M, d->plane, d->C);
    /* in->dy_sums: made on the way where the kernel can (group > 0), else by a pass after */
    const int group = dy_sums_group(in, T, M, d->plane);
    float2 *partial =
        group ? (float2 *)snn_cuda_scratch((size_t)(M / group) * sizeof(float2)) : nullptr;
    /* E TMAX <= 16 values of each loaded tensor a thread; past 16 steps, chunks of 16 */
    if (residual_by_bn(in))
        launch_bn_backward<true>(dX, dresidual, dspike, in, *in->residual_bn, ch, p, T, M,
                                 partial, group);
    else
        launch_bn_backward<false>(dX, dresidual, dspike, in, snn_bn_residual{}, ch, p, T, M,
                                  partial, group);
    if (!in->dy_sums) return;
    const int64_t images = in->x_repeated ? d->N : T * d->N; /* what the batch-norm normalised */
    if (group)
        SNN_CUDA_LAUNCH(dy_sums_finish_kernel, (unsigned)d->C, BLOCK, 0, in->dy_sums, partial,
                        d->N, d->C, d->plane / group, (double)(images * d->plane));
    else
        snn_bn_neuron_dy_sums_cuda(in->dy_sums, dX, in->x, in->x_bf16, in->stats, (int)images,
                                   (int)d->C, (int)d->plane);
}

/* dw[0] += dL/dk * dk/dw with k = sigmoid(w): dk/dw = k (1 - k), in double as the CPU. */
static __global__ void plif_dw_finish_kernel(float *dw, const double *dk_sum, const float *w,
                                             snn_neuron_params p)
{
    const float k = snn_lif_decay_cuda(p, w);
    dw[0] += (float)(dk_sum[0] * (double)k * (1.0 - (double)k));
}

extern "C" void snn_lif_backward_cuda(float *dx, float *dv_init, float *dw, const float *dspike,
                                      const float *dv_last, const float *h_seq,
                                      const float *spike, const float *x, const float *v_init,
                                      const float *a_init, const float *w,
                                      const snn_neuron_params *p, const snn_neuron_dims *d)
{
    (void)spike; /* S is recomputed from H */
    (void)a_init;
    const int64_t T = d->T, M = snn_neuron_dims_step(d);
    if (M <= 0) return;
    /* PLIF's dL/dk is a sum over every element and step: each block adds its partial sum (a
     * fixed tree, in double) to one double in the context's scratch with an atomicAdd, then a
     * one-thread kernel scales it into dw. The blocks' order of arrival varies, so the double
     * sum may differ from run to run (and from the CPU's, which adds in another order) in its
     * last bits; rounded to float it nearly always comes out the same. Tests: 1e-4 relative. */
    const bool want_dk = p->kind == SNN_NEURON_PLIF && dw;
    double *dk_sum = NULL;
    if (want_dk) {
        dk_sum = (double *)snn_cuda_scratch(sizeof *dk_sum);
        SNN_CUDA_CHECK(cudaMemsetAsync(dk_sum, 0, sizeof *dk_sum, snn_cuda_stream()));
    }
    SNN_CUDA_LAUNCH(lif_backward_kernel, snn_neuron_cuda_grid(M), BLOCK, 0, dx, dv_init, dk_sum,
                    dspike, dv_last, h_seq, x, v_init, w, *p, T, M);
    if (want_dk) SNN_CUDA_LAUNCH(plif_dw_finish_kernel, 1, 1, 0, dw, dk_sum, w, *p);
}
