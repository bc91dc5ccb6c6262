/*
 * delay_math.h - one synapse's delay kernel (DCLS-Delays), as inline functions that the
 * reference loop (kernels/ref/delay.c) and the CUDA kernel (kernels/cuda/delay.cu) share, so
 * the equations are written once (internal header).
 *
 * A synapse with weight w and real delay d spreads w over the taps k = 0..D-1 of a causal
 * temporal kernel as a Gaussian of width sigma centred at d, normalised to sum 1:
 *
 *   phi_k = exp(-(k - d)^2 / (2 sigma^2)),   p_k = phi_k / sum_k' phi_k',   K_k = w p_k
 *
 * Hammouamri, Khalfaoui-Hassani, Masquelier, "Learning delays in spiking neural networks using
 * dilated convolutions with learnable spacings", ICLR 2024 (https://arxiv.org/abs/2306.17670).
 *
 * The normaliser, done carefully. Every phi_k is divided by the largest one, the tap nearest
 * d, before the sum (the max-exponent trick of a softmax), so the sum is >= 1 and never 0 nor
 * inf. The exponent difference is written -((k - d)^2 - q_min) / (2 sigma^2) with q_min the
 * smallest (k - d)^2: the nearest tap's is exactly 0 and the others are >= 0, so even a sigma
 * so small that 1 / (2 sigma^2) is huge gives exp(-0) = 1 there and exp(-huge) = 0 elsewhere,
 * never inf - inf. 1 / (2 sigma^2) is capped at FLT_MAX (sigma below ~5e-20 acts as that), so
 * 0 * it is 0: every sigma > 0 gives finite taps, and a d halfway between two taps splits
 * the mass evenly between them.
 *
 * The gradient (mu = sum_k p_k k, the kernel's mean tap):
 *   dp_k / dd = p_k (k - mu) / sigma^2
 *   dL/dw    += sum_k dK_k p_k
 *   dL/dd    += w / sigma^2 sum_k dK_k p_k (k - mu)
 * When all the mass is on one tap, mu is that tap exactly and dL/dd is 0: a rounded delay
 * line has no gradient for its delays (its sigma must stay > 0.5-ish while d is learned).
 */
#ifndef SNN_DELAY_MATH_H
#define SNN_DELAY_MATH_H

#include <float.h>
#include <math.h>

#ifndef SNN_HD /* callable from host and device code (as in kernels/surrogate.h) */
#if defined(__CUDACC__)
#define SNN_HD __host__ __device__
#else
#define SNN_HD
#endif
#endif

/* 1 / (2 sigma^2) for sigma > 0, capped at FLT_MAX so that it is finite */
SNN_HD static inline float snn_delay_inv_two_sigma2(float sigma)
{
    const float v = 0.5f / (sigma * sigma);
    return v < FLT_MAX ? v : FLT_MAX;
}

/* (k - d)^2 */
SNN_HD static inline float snn_delay_sq_dist(int k, float d)
{
    const float u = (float)k - d;
    return u * u;
}

/* q_min = min over k in [0, D) of (k - d)^2: the nearest tap's, the largest exponent */
SNN_HD static inline float snn_delay_min_sq_dist(float d, int D)
{
    float q = snn_delay_sq_dist(0, d);
    for (int k = 1; k < D; k++) q = fminf(q, snn_delay_sq_dist(k, d));
    return q;
}

/* phi_k / phi_max = exp(-((k - d)^2 - q_min) / (2 sigma^2)), in (0, 1], 1 at the nearest tap */
SNN_HD static inline float snn_delay_phi(int k, float d, float q_min, float inv_two_sigma2)
{
    return expf(-(snn_delay_sq_dist(k, d) - q_min) * inv_two_sigma2);
}

/* What the taps of one synapse share: q_min, 1 / sum_k phi_k (sum >= 1) and the mean tap mu */
typedef struct snn_delay_taps {
    float q_min, inv_sum, mean;
} snn_delay_taps;

SNN_HD static inline snn_delay_taps snn_delay_taps_of(float d, int D, float inv_two_sigma2)
{
    snn_delay_taps t;
    t.q_min = snn_delay_min_sq_dist(d, D);
    float sum = 0.0f, first_moment = 0.0f;
    for (int k = 0; k < D; k++) {
        const float phi = snn_delay_phi(k, d, t.q_min, inv_two_sigma2);
        sum += phi;
        first_moment += phi * (float)k;
    }
    t.inv_sum = 1.0f / sum;
    t.mean = first_moment * t.inv_sum;
    return t;
}

/* p_k = phi_k / sum_k' phi_k' */
SNN_HD static inline float snn_delay_tap(int k, float d, const snn_delay_taps *t,
                                         float inv_two_sigma2)
{
    return snn_delay_phi(k, d, t->q_min, inv_two_sigma2) * t->inv_sum;
}

#endif /* SNN_DELAY_MATH_H */
