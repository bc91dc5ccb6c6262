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
 * This file: the forward (plain, and fed by a batch-norm: lif_bn_forward) and the plain
 * backward. The batch-norm-fed backward, which recomputes H in registers, is
 * lif_bn_backward.cu; what the two share (the batch-norm's constants, the residual kinds, the
 * common neuron's compile-time instances) is lif_bn.cuh.
 */
#include "lif_bn.cuh"
#include "tensor/error.h"
#include "kernels_cuda.h"

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
