/*
 * dropout.c - the reference dropout mask (inverted dropout: N. Srivastava et al., JMLR 2014).
 *
 *   key     = seed * 0xD1B54A32D192ED03 + i              (uint64_t, wrapping)
 *   u       = (snn_hash64(key) >> 40) * 2^-24            (24 random bits, uniform in [0, 1))
 *   mask[i] = u >= p ? 1 / (1 - p) : 0                   (p >= 1: all 0)
 *
 * mask (n). Each element is kept with probability 1 - p and scaled so that E[mask x] = x. The
 * mask is a pure function of (seed, i), so every device and thread count draws the same one:
 * this recipe is the definition, bit for bit (kernels/cpu/dropout.c says why each part).
 * Memory traffic: 4 B written per element, nothing read.
 */
#include "kernels_ref.h"

void snn_dropout_mask_ref(float *mask, int64_t n, float p, uint64_t seed)
{
    const float scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
    for (int64_t i = 0; i < n; i++) {
        const uint64_t key = seed * 0xD1B54A32D192ED03ull + (uint64_t)i;
        const float u = (float)(snn_hash64(key) >> 40) * 0x1.0p-24f;
        mask[i] = u >= p ? scale : 0.0f;
    }
}
