/*
 * hash.h - the counter-based hash that every random draw made on a device goes through
 * (internal; kernels/kernels.h includes it for the kernels).
 *
 * Dropout masks and Poisson spikes are drawn on the tensor's own device, element by element,
 * from hash(seed + index) instead of a sequential generator: no state to carry between
 * threads or blocks, and the same bits on the CPU and on CUDA, since the hash is integer
 * arithmetic only. tensor/rng.c seeds its generator's state with it too.
 *
 *   snn_hash64(x)   the splitmix64 finaliser (S. Vigna), a bijection of 64-bit integers
 *   u = (snn_hash64(x) >> 40) * 2^-24   uniform in [0, 1), 24 bits: exact in a float
 */
#ifndef SNN_HASH_H
#define SNN_HASH_H

#include <stdint.h>

#if defined(__CUDACC__)
__host__ __device__
#endif
static inline uint64_t snn_hash64(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

#endif /* SNN_HASH_H */
