/*
 * rng.c - xoshiro256** (D. Blackman, S. Vigna, "Scrambled linear pseudorandom number
 * generators", 2018), seeded through splitmix64. A plain 32-byte state, so a checkpoint can save
 * it and a resumed run draws the very same numbers.
 */
#include <math.h>

#include "hash.h"
#include "tensor.h"

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

void snn_rng_seed(snn_rng *rng, uint64_t seed)
{
    for (int i = 0; i < 4; i++) rng->s[i] = snn_hash64(seed + (uint64_t)i * 0x9E3779B97F4A7C15ull);
}

uint64_t snn_rng_u64(snn_rng *rng)
{
    uint64_t *s = rng->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

float snn_rng_uniform(snn_rng *rng) { return (float)(snn_rng_u64(rng) >> 40) * 0x1.0p-24f; }

float snn_rng_normal(snn_rng *rng)
{
    /* Box-Muller in double; u1 in (0, 1] keeps log finite. */
    double u1 = ((double)(snn_rng_u64(rng) >> 11) + 1.0) * 0x1.0p-53;
    double u2 = (double)(snn_rng_u64(rng) >> 11) * 0x1.0p-53;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

uint64_t snn_rng_below(snn_rng *rng, uint64_t n)
{
    /* Rejection of the short last interval keeps every value equally likely. */
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do x = snn_rng_u64(rng);
    while (x >= limit);
    return x % n;
}
