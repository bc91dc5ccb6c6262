/*
 * encode.c - reference Poisson (rate) coding of an image into T binary frames: at each step
 * each pixel fires with probability equal to its intensity (<= 0 never, >= 1 always).
 *
 *   u            = (snn_hash64(seed + t n + i) >> 40) * 2^-24      (uniform in [0, 1))
 *   spikes[t, i] = u < pixels[i] ? 1 : 0                            (a NaN pixel never fires)
 *
 * pixels (n), spikes (T, n). Each spike is a pure function of (seed, its flat index), so
 * every device and thread count draws the same spikes: this recipe is the definition, bit
 * for bit (kernels/cpu/encode.c says why the seed is not mixed again here).
 * Memory traffic: each pixel read T times, 4 B written per spike.
 */
#include "kernels_ref.h"

void snn_poisson_encode_ref(float *spikes, const float *pixels, int64_t n, int T, uint64_t seed)
{
    for (int t = 0; t < T; t++) {
        for (int64_t i = 0; i < n; i++) {
            const int64_t j = (int64_t)t * n + i;   /* the flat index in (T, n), also the key */
            const float u = (float)(snn_hash64(seed + (uint64_t)j) >> 40) * 0x1.0p-24f;
            spikes[j] = u < pixels[i] ? 1.0f : 0.0f;
        }
    }
}
