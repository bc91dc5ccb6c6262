/*
 * surrogate.h - the surrogate gradient functions as inline math, shared by the CPU kernels
 * (neurons/<name>.c) and the CUDA kernels (neurons/<name>.cu) so both compute the same
 * numbers (internal).
 *
 * A spike is S = Heaviside(x) with x = H - V_th. Its true derivative is a Dirac delta: zero
 * almost everywhere, which would stop every gradient. Surrogate-gradient training (Neftci,
 * Mostafa & Zenke 2019, https://arxiv.org/abs/1901.09948) keeps the exact step in the forward
 * pass and uses the slope g'(x) of a smooth step g in the backward pass:
 *
 *   Sigmoid  g(x) = sigmoid(alpha x)                     g'(x) = alpha s (1 - s), s = g(x)
 *            (computed as alpha e / (1 + e)^2, e = exp(-alpha |x|), the same function)
 *   ATan     g(x) = arctan(pi/2 alpha x) / pi + 1/2      g'(x) = (alpha/2) / (1 + (pi/2 alpha x)^2)
 *            (Fang et al. 2021, https://arxiv.org/abs/2007.05785)
 *   PiecewiseQuadratic (Esser et al. 2016)
 *            g(x) = 0                          x < -1/alpha
 *                   -alpha^2/2 x|x| + alpha x + 1/2   |x| <= 1/alpha
 *                   1                          x > 1/alpha
 *            g'(x) = max(0, alpha - alpha^2 |x|)   (a triangle of area 1)
 *
 * Each g' integrates to 1 over the real line, like the delta it stands for.
 */
#ifndef SNN_SURROGATE_H
#define SNN_SURROGATE_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "neurons/neurons.h"

#if defined(__CUDACC__)
#define SNN_HD __host__ __device__
#else
#define SNN_HD
#endif

#define SNN_PI_F 3.14159265358979323846f

SNN_HD static inline float snn_sigmoidf(float x) { return 1.0f / (1.0f + expf(-x)); }

/* exp(x) written so that a loop calling it vectorises: libm's expf is an opaque call, which
 * keeps the Sigmoid surrogate's backward loop scalar (measured 6 ns against 0.6 ns per element
 * for ATan). Cody-Waite reduction x = n ln2 + r with |r| <= ln2/2 (ln2 split in two parts so
 * that n * ln2 is exact), exp(r) by the degree-6 polynomial of Cephes' expf, then 2^n built
 * in the exponent bits. About 1 ulp from expf. x is clamped to [-87, 88] (NaN becomes -87), so
 * the result stays a normal float. No floorf and no float-to-int conversion: under the strict
 * floating-point model we build with (-ftrapping-math), GCC vectorises neither. Instead n is
 * rounded by adding 1.5 * 2^23, which leaves round(x / ln2) in the low mantissa bits of t. */
SNN_HD static inline float snn_expf_core(float x) /* x in [-87, 88] */
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

SNN_HD static inline float snn_expf_vec(float x)
{
    x = x > -87.0f ? x : -87.0f;
    x = x < 88.0f ? x : 88.0f;
    return snn_expf_core(x);
}

/* g(x) */
SNN_HD static inline float snn_surrogate_g_inline(snn_surrogate_kind kind, float alpha, float x)
{
    switch (kind) {
    case SNN_SURROGATE_SIGMOID:
        return snn_sigmoidf(alpha * x);
    case SNN_SURROGATE_ATAN:
        return atanf(0.5f * SNN_PI_F * alpha * x) / SNN_PI_F + 0.5f;
    case SNN_SURROGATE_PIECEWISE_QUADRATIC: {
        float inv = 1.0f / alpha;
        if (x < -inv) return 0.0f;
        if (x > inv) return 1.0f;
        return -0.5f * alpha * alpha * x * fabsf(x) + alpha * x + 0.5f;
    }
    default:
        return 0.0f;
    }
}

/* g'(x): what backward uses in place of dHeaviside/dx */
SNN_HD static inline float snn_surrogate_grad_inline(snn_surrogate_kind kind, float alpha, float x)
{
    switch (kind) {
    case SNN_SURROGATE_SIGMOID: {
        /* alpha s (1 - s) = alpha e / (1 + e)^2 with e = exp(-alpha |x|) <= 1 (g' is even):
         * no cancellation in 1 - s, and exactly 0 far from the threshold instead of a denormal,
         * which would cost ~100 cycles per element */
        float z = alpha * fabsf(x);
        z = z < 80.0f ? z : 80.0f; /* e >= exp(-80): g' stays a normal float, never denormal */
        const float e = snn_expf_core(-z);
        const float d = 1.0f + e;
        return alpha * e / (d * d);
    }
    case SNN_SURROGATE_ATAN: {
        float u = 0.5f * SNN_PI_F * alpha * x;
        return 0.5f * alpha / (1.0f + u * u);
    }
    case SNN_SURROGATE_PIECEWISE_QUADRATIC: {
        float d = alpha - alpha * alpha * fabsf(x);
        return d > 0.0f ? d : 0.0f;
    }
    default:
        return 0.0f;
    }
}

#endif /* SNN_SURROGATE_H */
