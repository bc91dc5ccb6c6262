/*
 * bits.c - reference kernels that keep spikes as bits: 1 bit an element instead of a 4-byte
 * float, which is how a training step saves a layer's spikes for its backward.
 *
 *   pack    bit (i % 32) of bits[i / 32] = [x[i] != 0]     (unused bits of the last word: 0)
 *   unpack  x[i] = bit (i % 32) of bits[i / 32]
 *
 * x (n), bits (ceil(n / 32)). A spike is exactly 0 or 1, so unpack(pack(x)) == x; for any other
 * value only "nonzero" survives.
 * Memory traffic: pack reads 4 B and writes 1/8 B an element; unpack the reverse.
 */
#include "kernels_ref.h"

void snn_pack_bits_ref(uint32_t *bits, const float *x, int64_t n)
{
    for (int64_t w = 0; w < (n + 31) / 32; w++) bits[w] = 0;
    for (int64_t i = 0; i < n; i++)
        if (x[i] != 0.0f) bits[i / 32] |= 1u << (i % 32);
}

void snn_unpack_bits_ref(float *x, const uint32_t *bits, int64_t n)
{
    for (int64_t i = 0; i < n; i++) x[i] = (float)((bits[i / 32] >> (i % 32)) & 1u);
}
