/*
 * dropout.c - CPU reference kernel of the dropout mask (kernels/kernels.h).
 *
 * Inverted dropout (N. Srivastava et al., "Dropout", JMLR 2014, scaled at training time as
 * PyTorch does): each element is kept with probability 1 - p and scaled by 1 / (1 - p), so the
 * expected value of mask * x is x and evaluation needs no rescaling. The op multiplies x by the
 * mask in the forward and dout by the same mask in the backward.
 *
 * The mask is a pure function of (seed, i), with no generator state, so that every device, any
 * number of threads and any launch shape draw the very same mask. THE EXACT RECIPE, which the
 * CUDA kernel must reproduce bit for bit:
 *
 *     key     = seed * 0xD1B54A32D192ED03 + i             (uint64_t, wraps mod 2^64)
 *     u       = (float)(snn_hash64(key) >> 40) * 2^-24    (24 random bits: exact in float,
 *                                                          uniform on {0, 2^-24, ..., 1 - 2^-24})
 *     scale   = 1.0f / (1.0f - p)                         (IEEE float division, correctly rounded:
 *                                                          not __fdividef or fast-math)
 *     mask[i] = u >= p ? scale : 0.0f                     (p >= 1: every mask value is 0)
 *
 * This is counter-based random numbers (as Philox or Threefry, J. Salmon et al., SC 2011, but
 * with a cheaper mixer): any element is computed without its predecessors, which is what a GPU
 * thread needs. snn_hash64 (kernels.h) is the splitmix64 finaliser, a bijection on 64 bits in
 * which every input bit flips each output bit with probability close to 1/2, so consecutive
 * keys give unrelated u. The odd multiplier of the seed (from Steele & Vigna's tables of good
 * 64-bit multipliers) sends neighbouring seeds to far-apart key ranges, so the masks of seeds
 * s and s + 1 share no key for any tensor that fits in memory. The test checks the keep rate,
 * that neighbouring elements and neighbouring seeds are uncorrelated, and this recipe bit for bit.

 * Memory traffic per element: 4 B written, nothing read (the mask is computed, ~10 integer ops).
 *
 * Test: tests/test_dropout_kernels.c (ctest -R dropout_kernels).
 */
#include "cpu_threads.h"
#include "kernels_cpu.h"

void snn_dropout_mask_cpu(float *mask, int64_t n, float p, uint64_t seed)
{
    const uint64_t base = seed * 0xD1B54A32D192ED03ull;   /* key of element 0 */
    const float scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;

#pragma omp parallel for simd schedule(static) num_threads(snn_cpu_threads(n))
    for (int64_t i = 0; i < n; i++) {
        const uint64_t key = base + (uint64_t)i;
        const float u = (float)(snn_hash64(key) >> 40) * 0x1.0p-24f;   /* [0, 1), 24 bits */
        mask[i] = u >= p ? scale : 0.0f;
    }
}
