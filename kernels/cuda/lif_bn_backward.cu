/*
 * lif_bn_backward.cu - BPTT of IF / LIF fed by a training-mode batch-norm (lif_bn_backward,
 * snn_neuron_bn_input): H recomputed in registers from x (never stored), then the backward of
 * lif.cu's file header, dX written for the batch-norm's backward. Up to 16 steps in one pass
 * (lif_bn_backward_kernel), past that in chunks of 16 (lif_bn_backward_chunked_kernel).
 * Its reference is the sequence it fuses: lif_bn_forward writing H, a zero fill, lif_backward,
 * an axpy into dresidual (the parity harness's lif_bn_backward cases, backend_ops_neuron_bn.h;
 * test_cuda_bn_neuron against the separate ops).
 *
 * In TF32 / BF16 training (in->dy_sums) the T <= 4 kernel also sums dX and dX (x - mean) per
 * channel for the batch-norm's backward (dy_sums_partials, dy_sums_finish_kernel), which then
 * skips its own pass over dX and x (batchnorm_backward_in_place_sums); where it cannot,
 * batch-norm's pass runs right after it. Test: tests/test_cuda_bn_sums.c.
 */
#include "lif_bn.cuh"
#include "tensor/error.h"
#include "kernels_cuda.h"

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
