/*
 * surrogate.h - the surrogate gradient functions as inline math, shared by the reference
 * kernels (kernels/ref/), the fast CPU kernels (kernels/cpu/) and the CUDA kernels
 * (kernels/cuda/), so that all of them compute the same function (internal).
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
 *
 * The exp of the Sigmoid's g' is SNN_SURROGATE_EXP: libm's expf unless the file that includes
 * this header has defined it before. The fast CPU and CUDA neuron kernels set it to
 * snn_expf_core (kernels/fast_expf.h), an exp within about 1 ulp of expf that lets their loops
 * vectorise; the reference kernels and the host functions (snn_surrogate_grad) keep expf.
 */
#ifndef SNN_SURROGATE_H
#define SNN_SURROGATE_H

#include <math.h>

#include "neurons/neurons.h"

#ifndef SNN_HD /* callable from host and device code (also defined by kernels/fast_expf.h) */
#if defined(__CUDACC__)
#define SNN_HD __host__ __device__
#else
#define SNN_HD
#endif
#endif

#define SNN_PI_F 3.14159265358979323846f

SNN_HD static inline float snn_sigmoidf(float x) { return 1.0f / (1.0f + expf(-x)); }

/* The exp the Sigmoid surrogate's g' calls (see the top of this file). */
#ifndef SNN_SURROGATE_EXP
#define SNN_SURROGATE_EXP expf
#endif

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
        const float e = SNN_SURROGATE_EXP(-z);
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
