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
 *   bn forward (snn_batchnorm_neuron) read x 4 B (and the residual 4 B), write S 4 B; its
 *             recompute in backward: read x (and the residual), write H
 *   backward  read dS 4 B and H 4 B, read + write dX 8 B: 16 B (PLIF also reads X, and
 *             H[t-1] once per BSTEPS steps: ~22 B)
 *   plus, once per element, V_init / V_last / dV_init when given.
 */
#include "neuron_cuda.cuh"
#include "tensor/error.h"

#define BLOCK SNN_NEURON_CUDA_BLOCK
#define ELEMS SNN_NEURON_CUDA_ELEMS
#define STEPS SNN_NEURON_CUDA_STEPS
#define BSTEPS SNN_NEURON_CUDA_BACKWARD_STEPS

/* Forward: see the file header. Writes spike, h_seq (if not NULL), v_last (if not NULL; may
 * alias v_init: each thread reads its v_init before writing its v_last) and adds the spike
 * counts to activity (if not NULL; zeroed by the launcher). CPU: snn_lif_forward_cpu.
 * h_seq may be x itself (snn_neuron_multistep_consume): every X[t] is read by the one thread
 * that then writes H[t] to the same address, and no thread reads an address another has
 * written, so neither the read-only load path nor reordering can see a written value. */
/* BN (lif_bn_forward): X is made from bn (see snn_neuron_bn_input) as it is loaded, x is
 * unused, and spike may be NULL (backward's recompute of H: then activity is NULL too). */
template <bool BN>
static __global__ void __launch_bounds__(BLOCK)
lif_forward_kernel(float *__restrict__ spike, float *__restrict__ h_seq, float *v_last,
                   float *__restrict__ activity, const float *__restrict__ x,
                   const float *v_init, const float *__restrict__ w, snn_neuron_bn_input bn,
                   snn_neuron_params p, int64_t T, int64_t M, int64_t planes, int64_t plane,
                   int64_t C)
{
    const float k = p.kind == SNN_NEURON_IF ? 1.0f : snn_lif_decay_cuda(p, w);
    const int64_t base = (int64_t)blockIdx.x * (BLOCK * ELEMS) + threadIdx.x;

    float v[ELEMS];              /* V of each of this thread's elements */
    snn_plane_run run[ELEMS];    /* activity bookkeeping (only when activity != NULL) */
    float mean[ELEMS], scale[ELEMS], shift[ELEMS]; /* BN: the element's channel's constants */
#pragma unroll
    for (int j = 0; j < ELEMS; j++) {
        const int64_t i = base + (int64_t)j * BLOCK;
        v[j] = i < M ? (v_init ? v_init[i] : p.v_reset) : 0.0f;
        if (activity) run[j] = snn_plane_run_make(i, i < M, plane);
        if (BN) { /* batchnorm_sync.cu's normalise: the double mean rounded to float */
            const int64_t c = i < M ? i / plane % C : 0;
            mean[j] = (float)bn.stats[3 * c + 1];
            scale[j] = (bn.gamma ? bn.gamma[c] : 1.0f) * bn.invstd[c];
            shift[j] = bn.beta ? bn.beta[c] : 0.0f;
        }
    }

    for (int64_t t0 = 0; t0 < T; t0 += STEPS) {
        /* STEPS * ELEMS loads in flight before the first use: hides the latency even at tiny M */
        float xv[STEPS][ELEMS], rv[STEPS][ELEMS];
        snn_neuron_load_steps(xv, BN ? bn.x : x, t0, T, M, base);
        if (BN && bn.residual) snn_neuron_load_steps(rv, bn.residual, t0, T, M, base);
#pragma unroll
        for (int u = 0; u < STEPS; u++) {
            const int64_t t = t0 + u;
            if (t >= T) break; /* uniform over the grid */
            const int64_t off = t * M;
#pragma unroll
            for (int j = 0; j < ELEMS; j++) {
                const int64_t i = base + (int64_t)j * BLOCK;
                float s = 0.0f;
                if (i < M) {
                    float xin = xv[u][j];
                    if (BN) { /* the batch-norm's expression, then the residual's add */
                        xin = (xin - mean[j]) * scale[j] + shift[j];
                        if (bn.residual) xin = xin + rv[u][j];
                    }
                    const float h = snn_lif_charge_cuda(p, k, v[j], xin);
                    s = snn_lif_fire(&p, h); /* a comparison: nothing to round */
                    if (h_seq) h_seq[off + i] = h;
                    if (!BN || spike) spike[off + i] = s;
                    v[j] = snn_lif_reset_cuda(p, h, s);
                }
                if (activity) snn_plane_run_count(activity + t * planes, run[j], s != 0.0f);
            }
        }
    }
    if (v_last) {
#pragma unroll
        for (int j = 0; j < ELEMS; j++) {
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
    SNN_CUDA_LAUNCH(lif_forward_kernel<false>, snn_neuron_cuda_grid(M), BLOCK, 0, spike, h_seq,
                    v_last, activity, x, v_init, w, snn_neuron_bn_input{}, *p, T, M, planes,
                    d->plane, d->C);
}

/* IF / LIF on the batch-norm-fed input (snn_neuron_bn_input): the kernel above with X made as
 * it is loaded. CPU: snn_lif_bn_forward_cpu. */
extern "C" void snn_lif_bn_forward_cuda(float *spike, float *h_seq, float *activity,
                                        const snn_neuron_bn_input *in,
                                        const snn_neuron_params *p, const snn_neuron_dims *d)
{
    SNN_ASSERT(p->kind == SNN_NEURON_IF || p->kind == SNN_NEURON_LIF);
    const int64_t T = d->T, M = snn_neuron_dims_step(d), planes = d->N * d->C;
    if (!spike) activity = NULL;
    if (activity && T * planes > 0)
        SNN_CUDA_CHECK(cudaMemsetAsync(activity, 0, (size_t)(T * planes) * sizeof(float),
                                       snn_cuda_stream()));
    if (M <= 0) return;
    SNN_CUDA_LAUNCH(lif_forward_kernel<true>, snn_neuron_cuda_grid(M), BLOCK, 0, spike, h_seq,
                    NULL, activity, NULL, NULL, NULL, *in, *p, T, M, planes, d->plane, d->C);
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
