/*
 * encode.cu - Poisson (rate) input encoding on the GPU, bit for bit the spikes of
 * kernels/cpu/encode.c (snn_poisson_encode_cpu), whose header gives the recipe followed here:
 *
 *     spikes (T, n), pixels (n):
 *     u               = (float)(snn_hash64(seed + t*n + i) >> 40) * 2^-24
 *     spikes[t*n + i] = u < pixels[i] ? 1 : 0
 *
 * Why it is exact: snn_hash64 (kernels.h, __host__ __device__) is integer arithmetic, the
 * same on both sides; the conversion of a 24-bit integer to float and the multiply by a power
 * of two are exact; and the comparison is exact. Nothing here depends on the rounding mode,
 * and the build keeps fp32 denormals (no -ftz), so even a subnormal pixel fires when u = 0, as
 * on the CPU.
 *
 * One thread per pixel in a grid-stride loop; each thread reads its pixel once and writes its
 * T spikes, one per step. Within a warp the 32 writes of a step hit consecutive addresses, so
 * every store is coalesced. The hash costs ~10 integer ops (a few 64-bit multiplies, which the
 * GPU emulates with 32-bit ones) per spike: still well under the memory time.
 *
 * Memory traffic: 4 B read per pixel, 4 B written per spike: 4 n (1 + T) bytes. With T = 4 and
 * a CIFAR batch of 256 (n = 786,432) that is 15.7 MB, about 5 us at the H100's ~3 TB/s.
 */
#include "cuda_common.cuh"
#include "kernels_cuda.h"

/* spikes[t*n + i] = u(seed + t*n + i) < pixels[i].  CPU: snn_poisson_encode_cpu. */
static __global__ void poisson_encode_forward_kernel(float *spikes, const float *pixels,
                                                     int64_t n, int T, uint64_t seed)
{
    SNN_GRID_STRIDE_LOOP(i, n) {
        const float p = pixels[i];
        for (int t = 0; t < T; t++) {
            const int64_t j = (int64_t)t * n + i; /* flat index in (T, n), also the key */
            const float u = (float)(snn_hash64(seed + (uint64_t)j) >> 40) * 0x1.0p-24f;
            spikes[j] = u < p ? 1.0f : 0.0f;
        }
    }
}

extern "C" void snn_poisson_encode_cuda(float *spikes, const float *pixels, int64_t n, int T,
                                        uint64_t seed)
{
    if (n <= 0 || T <= 0) return;
    SNN_CUDA_LAUNCH(poisson_encode_forward_kernel, snn_cuda_grid(n, SNN_CUDA_BLOCK),
                    SNN_CUDA_BLOCK, 0, spikes, pixels, n, T, seed);
}
