/*
 * running_pool.cu - the running max-pool of converted SNNs on the GPU: the port of the two
 * kernels of running_pool.c (snn_running_max_pool_forward_cpu / _backward_cpu), same signatures,
 * same order of operations. Test: tests/test_cuda_ann2snn.c.
 *
 *   forward, per output window, t = 0 .. T-1:  S[e] += x[t][e];  M = max_e S[e] (first wins);
 *                                              y[t] = M - M_prev;  argmax[t] = e of M
 *   backward, t = T-1 .. 0:                    g[argmax[t]] += dy[t] - dy[t+1];  dx[t][e] += g[e]
 *
 * One thread per output window, the window's running sums in registers for the whole run (t
 * loops inside the thread, as in the neuron kernels). Every sum is formed in the CPU's order with
 * the _rn intrinsics, so forward, argmax and backward are the CPU's bits. Windows do not overlap
 * (stride >= K), so no two threads write one dx element.
 * Memory traffic per step and window: forward reads K^2 inputs, writes y and (grad mode) argmax;
 * backward reads dy twice and argmax, reads + writes K^2 dx.
 */
#include "neuron_cuda.cuh"

#define WINDOW SNN_RUNNING_POOL_MAX_WINDOW

/* CPU: snn_running_max_pool_forward_cpu. The window loops run to WINDOW with a guard, so that
 * every index into sum[] is a constant and the array stays in registers. */
static __global__ void running_pool_forward_kernel(float *__restrict__ y,
                                                   int32_t *__restrict__ argmax,
                                                   const float *__restrict__ x,
                                                   snn_running_pool_dims d, int64_t outputs)
{
    const int K = d.K, KK = d.K * d.K;
    const int64_t in_step = d.planes * d.H * d.W; /* x: (T, planes, H, W); y: (T, outputs) */
    SNN_GRID_STRIDE_LOOP(o, outputs) {
        int64_t rem;
        const int64_t q = snn_divmod(o, (int64_t)d.H_out * d.W_out, &rem);
        const int oh = (int)rem / d.W_out, ow = (int)rem % d.W_out;
        const int64_t in0 = (q * d.H + (int64_t)oh * d.stride) * d.W + (int64_t)ow * d.stride;
        float sum[WINDOW];
#pragma unroll
        for (int e = 0; e < WINDOW; e++) sum[e] = 0.0f;
        float prev = 0.0f;
        for (int64_t t = 0; t < d.T; t++) {
            const float *xt = x + t * in_step + in0; /* (K, K) window at row stride W */
#pragma unroll
            for (int e = 0; e < WINDOW; e++)
                if (e < KK) sum[e] = __fadd_rn(sum[e], xt[(int64_t)(e / K) * d.W + e % K]);
            float m = sum[0];
            int best = 0;
#pragma unroll
            for (int e = 1; e < WINDOW; e++)
                if (e < KK && sum[e] > m) m = sum[e], best = e; /* the first maximum wins */
            y[t * outputs + o] = __fsub_rn(m, prev);
            prev = m;
            if (argmax) argmax[t * outputs + o] = best;
        }
    }
}

extern "C" void snn_running_max_pool_forward_cuda(float *y, int32_t *argmax, const float *x,
                                                  const snn_running_pool_dims *d)
{
    const int64_t outputs = d->planes * d->H_out * d->W_out;
    if (outputs <= 0 || d->T <= 0) return;
    SNN_CUDA_LAUNCH(running_pool_forward_kernel, snn_cuda_grid(outputs, SNN_CUDA_BLOCK),
                    SNN_CUDA_BLOCK, 0, y, argmax, x, *d, outputs);
}

/* CPU: snn_running_max_pool_backward_cpu. g[e] = sum over t' >= t of dL/dS[t'][e]. */
static __global__ void running_pool_backward_kernel(float *__restrict__ dx,
                                                    const float *__restrict__ dy,
                                                    const int32_t *__restrict__ argmax,
                                                    snn_running_pool_dims d, int64_t outputs)
{
    const int K = d.K, KK = d.K * d.K;
    const int64_t in_step = d.planes * d.H * d.W;
    SNN_GRID_STRIDE_LOOP(o, outputs) {
        int64_t rem;
        const int64_t q = snn_divmod(o, (int64_t)d.H_out * d.W_out, &rem);
        const int oh = (int)rem / d.W_out, ow = (int)rem % d.W_out;
        const int64_t in0 = (q * d.H + (int64_t)oh * d.stride) * d.W + (int64_t)ow * d.stride;
        float g[WINDOW];
#pragma unroll
        for (int e = 0; e < WINDOW; e++) g[e] = 0.0f;
        for (int64_t t = d.T - 1; t >= 0; t--) {
            const float next = t + 1 < d.T ? dy[(t + 1) * outputs + o] : 0.0f;
            const float delta = __fsub_rn(dy[t * outputs + o], next);
            const int a = argmax[t * outputs + o];
            float *dxt = dx + t * in_step + in0;
#pragma unroll
            for (int e = 0; e < WINDOW; e++) {
                if (e == a) g[e] = __fadd_rn(g[e], delta);
                if (e < KK) {
                    float *p = dxt + (int64_t)(e / K) * d.W + e % K;
                    *p = __fadd_rn(*p, g[e]);
                }
            }
        }
    }
}

extern "C" void snn_running_max_pool_backward_cuda(float *dx, const float *dy,
                                                   const int32_t *argmax,
                                                   const snn_running_pool_dims *d)
{
    const int64_t outputs = d->planes * d->H_out * d->W_out;
    if (outputs <= 0 || d->T <= 0) return;
    SNN_CUDA_LAUNCH(running_pool_backward_kernel, snn_cuda_grid(outputs, SNN_CUDA_BLOCK),
                    SNN_CUDA_BLOCK, 0, dx, dy, argmax, *d, outputs);
}
