/*
 * bf16.c - reference kernels that keep fp32 values as bfloat16: 2 bytes an element instead of
 * 4, which is how a BF16 training step keeps the conv outputs its batch-norms read in backward
 * (autograd/bf16_keep.c says when and why).
 *
 *   round   x[i] = bf16(x[i]) and bf16_out[i] = its top 16 bits
 *   unpack  x[i] = bf16_in[i] as fp32 (exact: a bf16 is the top half of an fp32)
 *
 * bf16(v) rounds to the nearest bf16, ties to even, as CUDA's __float2bfloat16_rn: add
 * 0x7FFF plus the lowest kept bit to the fp32 bits, then drop the low 16. Infinities stay
 * infinite, values past the largest bf16 round to infinity. A NaN stays a NaN (quieted; CUDA
 * gives its canonical 0x7FFF instead, the one place the two may differ in bits).
 * round writes the rounded value back into x, so that the forward that reads x next sees what
 * backward will read from bf16_out: both sides of the step use the same numbers.
 * Memory traffic: round reads 4 B and writes 4 + 2 B an element; unpack reads 2 and writes 4.
 */
#include <string.h>

#include "kernels_ref.h"

uint16_t snn_bf16_bits(float v)
{
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u); /* NaN */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

float snn_bf16_value(uint16_t bits)
{
    const uint32_t u = (uint32_t)bits << 16;
    float v;
    memcpy(&v, &u, sizeof v);
    return v;
}

void snn_round_bf16_ref(float *x, uint16_t *bf16_out, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        bf16_out[i] = snn_bf16_bits(x[i]);
        x[i] = snn_bf16_value(bf16_out[i]);
    }
}

void snn_unpack_bf16_ref(float *x, const uint16_t *bf16_in, int64_t n)
{
    for (int64_t i = 0; i < n; i++) x[i] = snn_bf16_value(bf16_in[i]);
}
