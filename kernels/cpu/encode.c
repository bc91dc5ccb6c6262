/*
 * encode.c - CPU reference kernel of Poisson (rate) input encoding (kernels/kernels.h).
 *
 * Dimensions: T time steps, n pixels of one input (all of N, C, H, W flattened).
 *
 * A static image becomes T binary frames: at every step each pixel fires with probability equal
 * to its intensity in [0, 1], independently of the other steps and pixels, so that the mean
 * of the spike train over time estimates the pixel (rate coding; the "Poisson encoder" of
 * SpikingJelly and snnTorch's spikegen.rate, see e.g. P. U. Diehl and M. Cook, "Unsupervised
 * learning of digit recognition using spike-timing-dependent plasticity", Front. Comput.
 * Neurosci. 2015). Intensities <= 0 never fire and >= 1 always fire.
 *
 * The random numbers are counter-based, as in dropout.c: each spike is a pure function of
 * (seed, its flat index), with no generator state, so any thread count and any GPU launch
 * shape draw the same spikes. THE EXACT RECIPE, which the CUDA kernel (encode.cu) repeats bit
 * for bit and which nn/model.c used when it drew the spikes on the host (checkpoints and
 * resumed runs depend on it staying the same):
 *
 *     j            = t * n + i                          (int64_t, the flat index in (T, n))
 *     u            = (float)(snn_hash64(seed + (uint64_t)j) >> 40) * 2^-24
 *                                                       (24 random bits: exact in float,
 *                                                        uniform on {0, 2^-24, ..., 1 - 2^-24})
 *     spikes[j]    = u < pixels[i] ? 1.0f : 0.0f        (a NaN pixel never fires)
 *
 * Unlike dropout, the seed is not multiplied: the caller (snn_model_encode) passes a seed that
 * it has already mixed with snn_hash64, and successive calls hash it again, so the key ranges
 * of two calls are unrelated. The test checks the recipe against a plain loop, the firing
 * rate of a grey image, and the edge intensities.
 *
 * Memory traffic: 4 B read per pixel per step (the pixel row stays in cache when n is small;
 * otherwise it is re-read T times) and 4 B written per spike: about 8 T n bytes.
 *
 * Test: tests/test_dropout_kernels.c (ctest -R dropout_kernels), which holds both
 * hash-driven kernels.
 */
#include "cpu_threads.h"
#include "kernels_cpu.h"

void snn_poisson_encode_cpu(float *spikes, const float *pixels, int64_t n, int T, uint64_t seed)
{
    const int64_t total = (int64_t)T * n;
    /* collapse(2) splits the whole (T, n) output into one contiguous run of spikes per thread,
     * so the work spreads over every thread even when T is 4 and n is small. */
#pragma omp parallel for simd collapse(2) schedule(static) \
    num_threads(snn_cpu_threads(total))
    for (int t = 0; t < T; t++) {
        for (int64_t i = 0; i < n; i++) {
            const int64_t j = (int64_t)t * n + i;   /* flat index in (T, n), also the key */
            const float u = (float)(snn_hash64(seed + (uint64_t)j) >> 40) * 0x1.0p-24f;
            spikes[j] = u < pixels[i] ? 1.0f : 0.0f;
        }
    }
}
