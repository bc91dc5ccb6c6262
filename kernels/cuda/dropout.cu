/*
 * dropout.cu - the dropout mask on the GPU, bit for bit the mask of kernels/cpu/dropout.c
 * (snn_dropout_mask_cpu), whose header gives the recipe this kernel follows exactly:
 *
 *     key = seed * 0xD1B54A32D192ED03 + i                (uint64_t, wraps)
 *     u   = (float)(snn_hash64(key) >> 40) * 2^-24       (24 bits: exact in float)
 *     mask[i] = u >= p ? scale : 0,  scale = 1 / (1 - p) (0 when p >= 1)
 *
 * Why it is exact: snn_hash64 (kernels.h, __host__ __device__) is integer arithmetic; the
 * conversion of a 24-bit integer to float and the multiply by a power of two are exact; and
 * `base` and `scale` are computed here on the host with the same C expressions as the CPU
 * code, so the device only compares and selects.
 *
 * Memory traffic per element: 4 B written, nothing read.
 */
#include "cuda_common.cuh"
#include "kernels_cuda.h"

/* mask[i] = u(base + i) >= p ? scale : 0.  CPU: snn_dropout_mask_cpu. */
static __global__ void dropout_mask_forward_kernel(float *mask, int64_t n, float p, uint64_t base,
                                                   float scale)
{
    SNN_GRID_STRIDE_LOOP(i, n) {
        const float u = (float)(snn_hash64(base + (uint64_t)i) >> 40) * 0x1.0p-24f;
        mask[i] = u >= p ? scale : 0.0f;
    }
}

extern "C" void snn_dropout_mask_cuda(float *mask, int64_t n, float p, uint64_t seed)
{
    if (n <= 0) return;
    const uint64_t base = seed * 0xD1B54A32D192ED03ull;
    const float scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
    SNN_CUDA_LAUNCH(dropout_mask_forward_kernel, snn_cuda_grid(n, SNN_CUDA_BLOCK), SNN_CUDA_BLOCK,
                    0, mask, n, p, base, scale);
}
