/*
 * fast_expf.h - an exp(x) that a loop calling it can vectorise, for the fast CPU kernels and
 * the CUDA kernels (internal). The reference kernels and the teaching header surrogate.h use
 * libm's expf; the fast neuron tables select this one for the Sigmoid surrogate's g' through the
 * hook SNN_SURROGATE_EXP (kernels/cpu/neuron_cpu.h, kernels/cuda/neuron_cuda.cuh).
 *
 * Why. libm's expf is an opaque call, so a loop that calls it stays scalar, and the Sigmoid
 * surrogate's backward loop with it (docs/neurons.md section 3 has the measured cost). Written
 * as below, with only adds, multiplies, compares and bit moves, the loop vectorises.
 *
 * How. Cody-Waite reduction x = n ln2 + r with |r| <= ln2/2 (ln2 split in two parts so that
 * n * ln2 is exact), exp(r) by the degree-6 polynomial of Cephes' expf, then 2^n built in the
 * exponent bits. About 1 ulp from expf (tests/test_neurons_surrogate.c measures it over the
 * whole range). No floorf and no float-to-int conversion: under the strict floating-point
 * model we build with (-ftrapping-math), GCC vectorises neither. Instead n is rounded by adding
 * 1.5 * 2^23, which leaves round(x / ln2) in the low mantissa bits of t.
 */
#ifndef SNN_FAST_EXPF_H
#define SNN_FAST_EXPF_H

#include <stdint.h>
#include <string.h>

#ifndef SNN_HD
#if defined(__CUDACC__)
#define SNN_HD __host__ __device__
#else
#define SNN_HD
#endif
#endif

/* exp(x) for x in [-87, 88], where the result is a normal float. */
SNN_HD static inline float snn_expf_core(float x)
{
    const float shifter = 12582912.0f;                        /* 1.5 * 2^23 */
    const float t = x * 1.44269504088896341f + shifter;       /* bits: 0x4B400000 + n */
    const float n = t - shifter;                              /* round(x / ln2) */
    float r = x - n * 0.693359375f;                           /* ln2, high part (exact) */
    r = r - n * -2.12194440e-4f;                              /* ln2, low part */
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;                                 /* exp(r) */
    uint32_t t_bits;
    memcpy(&t_bits, &t, sizeof t_bits);
    const uint32_t bits = (t_bits - 0x4B400000u + 127u) << 23; /* 2^n, n in [-126, 127] */
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

/* exp(x) for any x: clamped to [-87, 88] first (NaN becomes -87), so the result stays a
 * normal float. */
SNN_HD static inline float snn_expf_vec(float x)
{
    x = x > -87.0f ? x : -87.0f;
    x = x < 88.0f ? x : 88.0f;
    return snn_expf_core(x);
}

#endif /* SNN_FAST_EXPF_H */
