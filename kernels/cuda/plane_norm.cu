/*
 * plane_norm.cu - the L2 norm of every (t, n, c) plane on the GPU: the port of the two kernels of
 * plane_norm.c (snn_plane_norm_forward_cpu / snn_plane_norm_backward_cpu).
 *
 *   forward   norm[g] = sqrt(sum_p x[g, p]^2)
 *   backward  dx[g, p] += dnorm[g] * x[g, p] / norm[g]        (nothing where norm[g] = 0)
 *
 * Work split. Planes of at least 32 elements: one warp per plane (8 per block of 256, a grid-
 * stride loop over planes), the lanes 32 apart along the plane (coalesced), the sum of squares
 * closed by a butterfly of shuffles. Smaller planes (the (T, N, F) output of an fc neuron layer,
 * P = 1): one thread per plane, summing sequentially as the CPU does. For spikes in {0, 1} every
 * partial sum is an integer below 2^24, so both give the CPU's norm bit for bit; other values
 * (ST-BIF's +-theta) agree to rounding (tests/test_cuda_activity_penalty.c).
 * Memory traffic: forward reads x once (4 B per element), backward reads x and dx and writes dx
 * (12 B per element); the per-plane scalars are negligible.
 */
#include "neuron_cuda.cuh"
#include "tensor/error.h"

#define PN_WARPS (SNN_CUDA_BLOCK / 32)

/* CPU: snn_plane_norm_forward_cpu. */
static __global__ void plane_norm_forward_kernel(float *__restrict__ norm,
                                                 const float *__restrict__ x, int64_t planes,
                                                 int plane)
{
    if (plane < 32) {   /* a thread per plane, the CPU's order and rounding (no fma) */
        SNN_GRID_STRIDE_LOOP(g, planes) {
            const float *xg = x + g * plane;
            float sum = 0.0f;
            for (int p = 0; p < plane; p++) sum = __fadd_rn(sum, __fmul_rn(xg[p], xg[p]));
            norm[g] = sqrtf(sum);
        }
        return;
    }
    const int lane = threadIdx.x & 31;
    /* g is the same for the whole warp, so every lane reaches the shuffles */
    for (int64_t g = (int64_t)blockIdx.x * PN_WARPS + (threadIdx.x >> 5); g < planes;
         g += (int64_t)gridDim.x * PN_WARPS) {
        const float *xg = x + g * plane;
        float sum = 0.0f;
        for (int p = lane; p < plane; p += 32) sum = fmaf(xg[p], xg[p], sum);
#pragma unroll
        for (int off = 16; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
        if (lane == 0) norm[g] = sqrtf(sum);
    }
}

extern "C" void snn_plane_norm_forward_cuda(float *norm, const float *x, int64_t planes,
                                            int64_t plane)
{
    if (planes <= 0) return;
    SNN_ASSERT(plane <= INT32_MAX);
    const int64_t threads = plane < 32 ? planes : planes * 32;
    SNN_CUDA_LAUNCH(plane_norm_forward_kernel, snn_cuda_grid(threads, SNN_CUDA_BLOCK),
                    SNN_CUDA_BLOCK, 0, norm, x, planes, (int)plane);
}

/* CPU: snn_plane_norm_backward_cpu. s = dnorm / norm once per plane, then dx += s x (nvcc may
 * contract that into an fma: the last bit can differ from the CPU, the test allows it). */
static __global__ void plane_norm_backward_kernel(float *__restrict__ dx,
                                                  const float *__restrict__ dnorm,
                                                  const float *__restrict__ x,
                                                  const float *__restrict__ norm, int64_t planes,
                                                  int plane)
{
    if (plane < 32) {
        SNN_GRID_STRIDE_LOOP(g, planes) {
            const float n = norm[g];
            if (!(n > 0.0f)) continue;   /* silent plane: subgradient 0 */
            const float s = dnorm[g] / n;
            for (int p = 0; p < plane; p++) dx[g * plane + p] += s * x[g * plane + p];
        }
        return;
    }
    const int lane = threadIdx.x & 31;
    for (int64_t g = (int64_t)blockIdx.x * PN_WARPS + (threadIdx.x >> 5); g < planes;
         g += (int64_t)gridDim.x * PN_WARPS) {
        const float n = norm[g];
        if (!(n > 0.0f)) continue;
        const float s = dnorm[g] / n;
        float *dxg = dx + g * plane;
        const float *xg = x + g * plane;
        for (int p = lane; p < plane; p += 32) dxg[p] += s * xg[p];
    }
}

extern "C" void snn_plane_norm_backward_cuda(float *dx, const float *dnorm, const float *x,
                                             const float *norm, int64_t planes, int64_t plane)
{
    if (planes <= 0) return;
    SNN_ASSERT(plane <= INT32_MAX);
    const int64_t threads = plane < 32 ? planes : planes * 32;
    SNN_CUDA_LAUNCH(plane_norm_backward_kernel, snn_cuda_grid(threads, SNN_CUDA_BLOCK),
                    SNN_CUDA_BLOCK, 0, dx, dnorm, x, norm, planes, (int)plane);
}
