/*
 * alif.cu - the fused multi-step CUDA kernels of adaptive LIF (ALIF, Bellec et al. 2018): the
 * port of kernels/cpu/alif.c (snn_alif_forward_cpu / snn_alif_backward_cpu), same signatures,
 * same equations (neuron_math.h; docs/neurons.md). Work split and the bit-exact forward:
 * neuron_cuda.cuh (as lif.cu: a thread owns ELEMS elements 256 apart and loops over t, V and A
 * in registers, STEPS steps of loads in flight).
 * Test: tests/test_cuda_backend_ops.c (the parity cases of tests/backend_ops_neuron_alif.h, on
 * the GPU machine).
 *
 *   forward, per element, t = 0 .. T-1, V and A in registers:
 *     H[t] = charge(V, X[t]);  th[t] = V_th + beta A;  S[t] = Heaviside(H[t] - th[t])
 *     V = reset(H[t], S[t], th[t]);  A = rho A + (1 - rho) S[t]
 *   backward (BPTT), per element, t = T-1 .. 0, G_V = dL/dV_last and G_A = dL/dA_last (or 0)
 *   in registers:
 *     G_H, G_A = snn_alif_grad_step(H[t], th[t], G_S[t], G_V, G_A);  dX[t] += G_H dH/dX;
 *     G_V = G_H dH/dV
 *
 * Memory traffic per element per step:
 *   forward   read X 4 B, write S 4 B, and in grad mode H and th 8 B: 16 B (8 B without)
 *   backward  read dS, H and th 12 B, read + write dX 8 B: 20 B
 *   plus, once per element, V_init, A_init / V_last, A_last / dV_init, dA_init when given.
 */
#include "neuron_cuda.cuh"
#include "tensor/error.h"
#include "kernels_cuda.h"

#define BLOCK SNN_NEURON_CUDA_BLOCK
#define ELEMS SNN_NEURON_CUDA_ELEMS
#define STEPS SNN_NEURON_CUDA_STEPS
#define BSTEPS SNN_NEURON_CUDA_BACKWARD_STEPS

/* Forward: see the file header. Writes spike, h_seq and th_seq (if not NULL), v_last and a_last
 * (if not NULL; they may alias v_init and a_init: each thread reads its state before writing
 * it) and adds the spike counts to activity (if not NULL; zeroed by the launcher). The forward
 * math is neuron_cuda.cuh's explicitly rounded one: the CPU's bits. */
static __global__ void __launch_bounds__(BLOCK)
alif_forward_kernel(float *__restrict__ spike, float *__restrict__ h_seq,
                    float *__restrict__ th_seq, float *v_last, float *a_last,
                    float *__restrict__ activity, const float *__restrict__ x,
                    const float *v_init, const float *a_init, snn_neuron_params p, int64_t T,
                    int64_t M, int64_t planes, int64_t plane)
{
    const int64_t base = (int64_t)blockIdx.x * (BLOCK * ELEMS) + threadIdx.x;
    float v[ELEMS], a[ELEMS]; /* V and A of each of this thread's elements */
    snn_plane_run run[ELEMS]; /* activity bookkeeping (only when activity != NULL) */
#pragma unroll
    for (int j = 0; j < ELEMS; j++) {
        const int64_t i = base + (int64_t)j * BLOCK;
        v[j] = i < M ? (v_init ? v_init[i] : p.v_reset) : 0.0f;
        a[j] = i < M && a_init ? a_init[i] : 0.0f;
        if (activity) run[j] = snn_plane_run_make(i, i < M, plane);
    }

    for (int64_t t0 = 0; t0 < T; t0 += STEPS) {
        float xv[STEPS][ELEMS]; /* STEPS * ELEMS loads in flight before the first use */
        snn_neuron_load_steps(xv, x, t0, T, M, base);
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
                    const float h = snn_alif_charge_cuda(p, v[j], xv[u][j]);
                    const float th = snn_alif_threshold_cuda(p, a[j]);
                    s = snn_alif_fire(h, th); /* a comparison: nothing to round */
                    if (h_seq) h_seq[off + i] = h;
                    if (th_seq) th_seq[off + i] = th;
                    spike[off + i] = s;
                    v[j] = snn_alif_reset_cuda(p, h, s, th);
                    a[j] = snn_alif_adapt_cuda(p, a[j], s);
                }
                if (activity) snn_plane_run_count(activity + t * planes, run[j], s != 0.0f);
            }
        }
    }
#pragma unroll
    for (int j = 0; j < ELEMS; j++) {
        const int64_t i = base + (int64_t)j * BLOCK;
        if (i >= M) continue;
        if (v_last) v_last[i] = v[j];
        if (a_last) a_last[i] = a[j];
    }
}

extern "C" void snn_alif_forward_cuda(float *spike, float *h_seq, float *th_seq, float *v_last,
                                      float *a_last, float *activity, const float *x,
                                      const float *v_init, const float *a_init,
                                      const snn_neuron_params *p, const snn_neuron_dims *d)
{
    const int64_t T = d->T, M = snn_neuron_dims_step(d), planes = d->N * d->C;
    /* the kernel adds counts, so activity starts at zero (all-zero bytes are 0.0f) */
    if (activity && T * planes > 0)
        SNN_CUDA_CHECK(cudaMemsetAsync(activity, 0, (size_t)(T * planes) * sizeof(float),
                                       snn_cuda_stream()));
    if (M <= 0) return;
    SNN_CUDA_LAUNCH(alif_forward_kernel, snn_neuron_cuda_grid(M), BLOCK, 0, spike, h_seq, th_seq,
                    v_last, a_last, activity, x, v_init, a_init, *p, T, M, planes, d->plane);
}

/* Backward (BPTT): see the file header. Accumulates into dx, dv_init and da_init (each NULL =
 * not wanted); dspike, dv_last, da_last NULL mean zero. CPU: snn_alif_backward_cpu. */
static __global__ void __launch_bounds__(BLOCK)
alif_backward_kernel(float *__restrict__ dx, float *__restrict__ dv_init,
                     float *__restrict__ da_init, const float *__restrict__ dspike,
                     const float *__restrict__ dv_last, const float *__restrict__ da_last,
                     const float *__restrict__ h_seq, const float *__restrict__ th_seq,
                     snn_neuron_params p, int64_t T, int64_t M)
{
    const float k = __fdiv_rn(1.0f, p.tau);
    const float dh_dx = snn_lif_dh_dx(&p, k), dh_dv = snn_lif_dh_dv(&p, k);
    const int64_t base = (int64_t)blockIdx.x * (BLOCK * ELEMS) + threadIdx.x;

    float gv[ELEMS], ga[ELEMS]; /* G_V, G_A, carried from t = T-1 down to 0 */
#pragma unroll
    for (int j = 0; j < ELEMS; j++) {
        const int64_t i = base + (int64_t)j * BLOCK;
        gv[j] = (i < M && dv_last) ? dv_last[i] : 0.0f;
        ga[j] = (i < M && da_last) ? da_last[i] : 0.0f;
    }

    for (int64_t t0 = T - 1; t0 >= 0; t0 -= BSTEPS) {
        /* the loads of BSTEPS steps (t = t0, t0 - 1, ...) first, in flight together */
        float h[BSTEPS][ELEMS], th[BSTEPS][ELEMS], gs[BSTEPS][ELEMS], dxv[BSTEPS][ELEMS];
#pragma unroll
        for (int u = 0; u < BSTEPS; u++)
#pragma unroll
            for (int j = 0; j < ELEMS; j++) {
                const int64_t i = base + (int64_t)j * BLOCK, t = t0 - u;
                const bool ok = i < M && t >= 0;
                h[u][j] = ok ? h_seq[t * M + i] : 0.0f;
                th[u][j] = ok ? th_seq[t * M + i] : 0.0f;
                gs[u][j] = (ok && dspike) ? dspike[t * M + i] : 0.0f;
                dxv[u][j] = (ok && dx) ? dx[t * M + i] : 0.0f;
            }
#pragma unroll
        for (int u = 0; u < BSTEPS; u++) {
            const int64_t t = t0 - u;
            if (t < 0) break; /* uniform over the grid */
#pragma unroll
            for (int j = 0; j < ELEMS; j++) {
                const int64_t i = base + (int64_t)j * BLOCK;
                if (i >= M) continue;
                const float gh = snn_alif_grad_step(&p, h[u][j], th[u][j], gs[u][j], gv[j],
                                                    &ga[j]);
                if (dx) dx[t * M + i] = dxv[u][j] + gh * dh_dx;
                gv[j] = gh * dh_dv;
            }
        }
    }
#pragma unroll
    for (int j = 0; j < ELEMS; j++) {
        const int64_t i = base + (int64_t)j * BLOCK;
        if (i >= M) continue;
        if (dv_init) dv_init[i] += gv[j];
        if (da_init) da_init[i] += ga[j];
    }
}

extern "C" void snn_alif_backward_cuda(float *dx, float *dv_init, float *da_init,
                                       const float *dspike, const float *dv_last,
                                       const float *da_last, const float *h_seq,
                                       const float *th_seq, const snn_neuron_params *p,
                                       const snn_neuron_dims *d)
{
    const int64_t T = d->T, M = snn_neuron_dims_step(d);
    if (M <= 0) return;
    SNN_CUDA_LAUNCH(alif_backward_kernel, snn_neuron_cuda_grid(M), BLOCK, 0, dx, dv_init,
                    da_init, dspike, dv_last, da_last, h_seq, th_seq, *p, T, M);
}
