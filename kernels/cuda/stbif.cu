/*
 * stbif.cu - the fused multi-step CUDA kernels of ST-BIF, the spike-threshold bipolar IF neuron
 * of SpikeZIP-TF (You et al., ICML 2024, https://arxiv.org/abs/2406.03470): the port of stbif.c
 * (snn_stbif_forward_cpu / snn_stbif_backward_cpu), same signatures, same order, same equations
 * (neuron_math.h). Work split and the bit-exact forward: neuron_cuda.cuh.
 * Test: tests/test_cuda_neurons.c (on the GPU machine: ctest -R cuda_neurons).
 *
 *   forward, per element, V = theta/2 (or V_init), A = 0 (or A_init) in registers:
 *     H = V + X[t]
 *     S = +1 if H >= theta and A < A_max;  -1 if H < 0 and A > A_min;  else 0
 *     V = H - theta S;  A = A + S;  Y[t] = theta S
 *   backward (BPTT), per element, t = T-1 .. 0, with A[t-1] rebuilt from the outputs:
 *     dS/dH = [A[t-1] < A_max] g'(H - theta) + [A[t-1] > A_min] g'(H)
 *     G_H = G_Y theta dS/dH + G_V (1 - theta dS/dH)  (G_V alone with detach_reset)
 *     dX[t] += G_H;  G_V = G_H
 *
 * Every product above is by S in {-1, 0, 1} or is a single rounding, and A holds small integers,
 * so the forward has nothing for nvcc to contract; it still uses the _rn intrinsics so that this
 * holds by construction, as in lif.cu.
 *
 * Memory traffic per element per step:
 *   forward   read X 4 B, write Y 4 B, write H 4 B in grad mode: 12 B (8 B without H)
 *   backward  read Y twice (the first pass sums S to get A[T-1], the second walks A back) 8 B,
 *             read H and dY 8 B, read + write dX 8 B: 24 B
 */
#include "neuron_cuda.cuh"

#define BLOCK SNN_NEURON_CUDA_BLOCK
#define ELEMS SNN_NEURON_CUDA_ELEMS
#define STEPS SNN_NEURON_CUDA_STEPS
#define BSTEPS SNN_NEURON_CUDA_BACKWARD_STEPS

/* S from the output theta S (exact: theta S is +-theta or 0). Matches sign_of in stbif.c. */
static __device__ __forceinline__ float stbif_sign(float y)
{
    return y > 0.0f ? 1.0f : (y < 0.0f ? -1.0f : 0.0f);
}

/* Forward: see the file header. v_last / a_last may alias v_init / a_init (each thread reads
 * its initial state before it writes the final one). CPU: snn_stbif_forward_cpu. */
static __global__ void __launch_bounds__(BLOCK)
stbif_forward_kernel(float *__restrict__ spike, float *__restrict__ h_seq, float *v_last,
                     float *a_last, float *__restrict__ activity, const float *__restrict__ x,
                     const float *v_init, const float *a_init, snn_neuron_params p, int64_t T,
                     int64_t M, int64_t planes, int64_t plane)
{
    const float theta = p.theta;
    const int64_t base = (int64_t)blockIdx.x * (BLOCK * ELEMS) + threadIdx.x;

    float v[ELEMS], a[ELEMS];   /* V and A of each of this thread's elements */
    snn_plane_run run[ELEMS];   /* activity bookkeeping (only when activity != NULL) */
#pragma unroll
    for (int j = 0; j < ELEMS; j++) {
        const int64_t i = base + (int64_t)j * BLOCK;
        v[j] = i < M ? (v_init ? v_init[i] : 0.5f * theta) : 0.0f; /* 0.5 theta: exact */
        a[j] = i < M && a_init ? a_init[i] : 0.0f;
        if (activity) run[j] = snn_plane_run_make(i, i < M, plane);
    }

    for (int64_t t0 = 0; t0 < T; t0 += STEPS) {
        /* STEPS * ELEMS loads in flight before the first use: hides the latency even at tiny M */
        float xv[STEPS][ELEMS];
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
                    const float h = __fadd_rn(v[j], xv[u][j]);
                    s = snn_stbif_fire(&p, h, a[j]); /* comparisons only */
                    if (h_seq) h_seq[off + i] = h;
                    spike[off + i] = __fmul_rn(theta, s);
                    v[j] = __fsub_rn(h, __fmul_rn(theta, s));
                    a[j] = __fadd_rn(a[j], s);
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

extern "C" void snn_stbif_forward_cuda(float *spike, float *h_seq, float *v_last, float *a_last,
                                       float *activity, const float *x, const float *v_init,
                                       const float *a_init, const float *w,
                                       const snn_neuron_params *p, const snn_neuron_dims *d)
{
    (void)w;
    const int64_t T = d->T, M = snn_neuron_dims_step(d), planes = d->N * d->C;
    if (activity && T * planes > 0)
        SNN_CUDA_CHECK(cudaMemsetAsync(activity, 0, (size_t)(T * planes) * sizeof(float),
                                       snn_cuda_stream()));
    if (M <= 0) return;
    SNN_CUDA_LAUNCH(stbif_forward_kernel, snn_neuron_cuda_grid(M), BLOCK, 0, spike, h_seq, v_last,
                    a_last, activity, x, v_init, a_init, *p, T, M, planes, d->plane);
}

/* Backward: see the file header. Accumulates into dx and dv_init (NULL = not wanted).
 * CPU: snn_stbif_backward_cpu. */
static __global__ void __launch_bounds__(BLOCK)
stbif_backward_kernel(float *__restrict__ dx, float *__restrict__ dv_init,
                      const float *__restrict__ dspike, const float *__restrict__ dv_last,
                      const float *__restrict__ h_seq, const float *__restrict__ spike,
                      const float *__restrict__ a_init, snn_neuron_params p, int64_t T,
                      int64_t M)
{
    const int64_t base = (int64_t)blockIdx.x * (BLOCK * ELEMS) + threadIdx.x;

    float gv[ELEMS], a[ELEMS]; /* G_V and A[t], going back in time */
#pragma unroll
    for (int j = 0; j < ELEMS; j++) {
        const int64_t i = base + (int64_t)j * BLOCK;
        gv[j] = (i < M && dv_last) ? dv_last[i] : 0.0f;
        a[j] = (i < M && a_init) ? a_init[i] : 0.0f;
    }
    /* first pass: A[T-1] = A_init + sum_t S[t] (small integers: exact in any order) */
    for (int64_t t0 = 0; t0 < T; t0 += STEPS) {
        float y[STEPS][ELEMS];
#pragma unroll
        for (int u = 0; u < STEPS; u++)
#pragma unroll
            for (int j = 0; j < ELEMS; j++) {
                const int64_t i = base + (int64_t)j * BLOCK;
                y[u][j] = (t0 + u < T && i < M) ? spike[(t0 + u) * M + i] : 0.0f;
            }
#pragma unroll
        for (int u = 0; u < STEPS; u++)
#pragma unroll
            for (int j = 0; j < ELEMS; j++) a[j] += stbif_sign(y[u][j]); /* 0 past the end */
    }

    for (int64_t t0 = T - 1; t0 >= 0; t0 -= BSTEPS) {
        /* the loads of BSTEPS steps (t = t0, t0 - 1, ...) first, in flight together */
        float h[BSTEPS][ELEMS], y[BSTEPS][ELEMS], gy[BSTEPS][ELEMS], dxv[BSTEPS][ELEMS];
#pragma unroll
        for (int u = 0; u < BSTEPS; u++)
#pragma unroll
            for (int j = 0; j < ELEMS; j++) {
                const int64_t i = base + (int64_t)j * BLOCK, t = t0 - u;
                const bool ok = i < M && t >= 0;
                h[u][j] = ok ? h_seq[t * M + i] : 0.0f;
                y[u][j] = ok ? spike[t * M + i] : 0.0f;
                gy[u][j] = (ok && dspike) ? dspike[t * M + i] : 0.0f;
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
                a[j] -= stbif_sign(y[u][j]); /* now A[t-1], the count the gates saw */
                const float gh = snn_stbif_grad_h(&p, h[u][j], a[j], gy[u][j], gv[j]);
                if (dx) dx[t * M + i] = dxv[u][j] + gh; /* dH/dX = 1 */
                gv[j] = gh;                             /* dH/dV = 1 */
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
}

extern "C" void snn_stbif_backward_cuda(float *dx, float *dv_init, float *dw, const float *dspike,
                                        const float *dv_last, const float *h_seq,
                                        const float *spike, const float *x, const float *v_init,
                                        const float *a_init, const float *w,
                                        const snn_neuron_params *p, const snn_neuron_dims *d)
{
    (void)dw;
    (void)x;
    (void)v_init;
    (void)w;
    const int64_t T = d->T, M = snn_neuron_dims_step(d);
    if (M <= 0) return;
    SNN_CUDA_LAUNCH(stbif_backward_kernel, snn_neuron_cuda_grid(M), BLOCK, 0, dx, dv_init, dspike,
                    dv_last, h_seq, spike, a_init, *p, T, M);
}
