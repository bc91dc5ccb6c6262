/*
 * spike_bits.cu - spikes as bits, on CUDA; the same words as spike_bits.c (which has the
 * equations), bit for bit.
 *
 * pack: one thread per element, and a warp's 32 consecutive elements are one word, made by
 * __ballot_sync and written by lane 0. Traffic: 4 B read, 1/8 B written an element, so its
 * floor is the read: ~0.17 ms for the 506 MB of a BF16 ResNet-18 step's spikes at B = 64 on an
 * H100 (~3 TB/s). unpack: one thread per element, reading its word (a warp shares one, from
 * L1) and writing 4 B: the floor is the write.
 */
#include "cuda_common.cuh"
#include "kernels_cuda.h"

static __global__ void pack_bits_kernel(uint32_t *__restrict__ bits, const float *__restrict__ x,
                                        int64_t n)
{
    const int64_t words = (n + 31) / 32;
    const int lane = threadIdx.x & 31;
    /* a grid-stride loop over words, a warp per word, so every lane of a warp stays in the
     * loop together (the ballot needs the whole warp) */
    const int64_t warps = (int64_t)gridDim.x * (blockDim.x / 32);
    for (int64_t w = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32; w < words;
         w += warps) {
        const int64_t i = 32 * w + lane;
        const uint32_t word = __ballot_sync(0xffffffffu, i < n && x[i] != 0.0f);
        if (lane == 0) bits[w] = word;
    }
}

static __global__ void unpack_bits_kernel(float *__restrict__ x, const uint32_t *__restrict__ bits,
                                          int64_t n)
{
    SNN_GRID_STRIDE_LOOP(i, n) x[i] = (float)((bits[i / 32] >> (i % 32)) & 1u);
}

extern "C" void snn_pack_bits_cuda(uint32_t *bits, const float *x, int64_t n)
{
    if (n <= 0) return;
    SNN_CUDA_LAUNCH(pack_bits_kernel, snn_cuda_grid((n + 31) / 32 * 32, SNN_CUDA_BLOCK),
                    SNN_CUDA_BLOCK, 0, bits, x, n);
}

extern "C" void snn_unpack_bits_cuda(float *x, const uint32_t *bits, int64_t n)
{
    if (n <= 0) return;
    SNN_CUDA_LAUNCH(unpack_bits_kernel, snn_cuda_grid(n, SNN_CUDA_BLOCK), SNN_CUDA_BLOCK, 0, x,
                    bits, n);
}
