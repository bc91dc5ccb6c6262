/*
 * spike_bits.c - spikes as bits, on the CPU: the packing that lets a training step keep a layer's
 * spikes for backward in 1 bit an element instead of a 4-byte float (autograd/spike_pack.c).
 *
 *   pack    bits[w] = sum_{j < 32, 32 w + j < n} [x[32 w + j] != 0] << j
 *   unpack  x[i]    = (bits[i / 32] >> (i % 32)) & 1
 *
 * A spike is exactly 0 or 1, so unpack(pack(x)) == x bit for bit; packing any other value keeps
 * only "nonzero", which is why autograd packs only tensors a neuron marked as spikes. The
 * unused high bits of the last word are 0, so a packed tensor has one byte pattern.
 * Traffic: pack reads 4 B and writes 1/8 B an element; unpack the reverse.
 * CUDA: spike_bits.cu. Test: tests/test_spike_pack.c (and test_cuda_spike_pack.c).
 */
#include "cpu_threads.h"
#include "kernels_cpu.h"

void snn_pack_bits_cpu(uint32_t *bits, const float *x, int64_t n)
{
    const int64_t words = (n + 31) / 32;
#pragma omp parallel for num_threads(snn_cpu_threads(n))
    for (int64_t w = 0; w < words; w++) {
        const int64_t start = 32 * w, end = start + 32 < n ? start + 32 : n;
        uint32_t word = 0;
        for (int64_t i = start; i < end; i++) word |= (uint32_t)(x[i] != 0.0f) << (i - start);
        bits[w] = word;
    }
}

void snn_unpack_bits_cpu(float *x, const uint32_t *bits, int64_t n)
{
#pragma omp parallel for simd num_threads(snn_cpu_threads(n))
    for (int64_t i = 0; i < n; i++) x[i] = (float)((bits[i / 32] >> (i % 32)) & 1u);
}
