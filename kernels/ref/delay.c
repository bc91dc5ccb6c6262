/*
 * delay.c - reference learnable synaptic delays (DCLS-Delays, Hammouamri et al., ICLR 2024):
 * the delay kernel built from weights and real-valued delays, and the causal temporal
 * convolution that applies it. Plain loops; the fast CPU conv (kernels/cpu/temporal_conv.c) and
 * the CUDA kernels (kernels/cuda/delay.cu) are checked against these.
 *
 * Dims: T time steps, N batch, I input features, O output features, D taps (the largest delay
 * is D - 1 steps). w, d, dw, dd (O, I); K, dK (D, O, I); x, dx (T, N, I); y, dy (T, N, O).
 *
 * Delay kernel (one synapse's math: kernels/delay_math.h)
 *   K[k, o, i] = w[o, i] p_k(d[o, i]),  p_k = phi_k / sum_k' phi_k',
 *   phi_k = exp(-(k - d)^2 / (2 sigma^2))
 *   dw[o, i] += sum_k dK[k, o, i] p_k
 *   dd[o, i] += w[o, i] / sigma^2 sum_k dK[k, o, i] p_k (k - mu),  mu = sum_k p_k k
 *   Memory traffic: reads w, d (2 O I floats), writes K (D O I); backward reads dK (D O I)
 *   and w, d, and read-modify-writes dw, dd. The D exponentials per synapse are recomputed in
 *   each pass (no scratch), 3 D a synapse in forward, 3 D in backward.
 *
 * Temporal convolution (causal: x[t < 0] = 0; taps k >= T never reach an output)
 *   y[t, n, o]       = sum_{k=0}^{min(D, t+1)-1} sum_i x[t - k, n, i] K[k, o, i]
 *   dx[t - k, n, i] += dy[t, n, o] K[k, o, i]                   for t >= k
 *   dK[k, o, i]     += sum_{t >= k} sum_n dy[t, n, o] x[t - k, n, i]
 *   FLOPs: 2 T N O I D (minus the taps cut by causality): D times a linear layer, in forward
 *   and in each of the two gradients. Memory traffic here: each y reads its min(D, t+1) input
 *   rows and K's D O I, writes y (T N O); the gemm-per-tap form reads x, K and y once per tap.
 */
#include "kernels/delay_math.h"
#include "kernels_ref.h"

void snn_delay_kernel_forward_ref(float *K, const float *w, const float *d, int O, int I, int D,
                                  float sigma)
{
    const float inv = snn_delay_inv_two_sigma2(sigma);
    const int64_t synapses = (int64_t)O * I;
    for (int64_t s = 0; s < synapses; s++) {
        const snn_delay_taps taps = snn_delay_taps_of(d[s], D, inv);
        for (int k = 0; k < D; k++)
            K[(int64_t)k * synapses + s] = w[s] * snn_delay_tap(k, d[s], &taps, inv);
    }
}

void snn_delay_kernel_backward_ref(float *dw, float *dd, const float *dK, const float *w,
                                   const float *d, int O, int I, int D, float sigma)
{
    const float inv = snn_delay_inv_two_sigma2(sigma);
    const int64_t synapses = (int64_t)O * I;
    for (int64_t s = 0; s < synapses; s++) {
        const snn_delay_taps taps = snn_delay_taps_of(d[s], D, inv);
        float grad_w = 0.0f, grad_moment = 0.0f; /* sum dK p,  sum dK p (k - mu) */
        for (int k = 0; k < D; k++) {
            const float g = dK[(int64_t)k * synapses + s] * snn_delay_tap(k, d[s], &taps, inv);
            grad_w += g;
            grad_moment += g * ((float)k - taps.mean);
        }
        if (dw) dw[s] += grad_w;
        if (dd) dd[s] += w[s] * 2.0f * inv * grad_moment; /* 1 / sigma^2 = 2 inv */
    }
}

void snn_temporal_conv_forward_ref(float *y, const float *x, const float *K, int T, int N, int I,
                                   int O, int D)
{
    for (int t = 0; t < T; t++) {
        for (int n = 0; n < N; n++) {
            for (int o = 0; o < O; o++) {
                float acc = 0.0f;
                for (int k = 0; k < D && k <= t; k++) {
                    const float *xr = x + ((int64_t)(t - k) * N + n) * I;   /* (I) */
                    const float *kr = K + ((int64_t)k * O + o) * I;         /* (I) */
                    for (int i = 0; i < I; i++) acc += xr[i] * kr[i];
                }
                y[((int64_t)t * N + n) * O + o] = acc;
            }
        }
    }
}

void snn_temporal_conv_backward_ref(float *dx, float *dK, const float *dy, const float *x,
                                    const float *K, int T, int N, int I, int O, int D)
{
    if (dx) {
        for (int s = 0; s < T; s++) {           /* dx[s] gathers dy[s + k] over taps k */
            for (int n = 0; n < N; n++) {
                for (int i = 0; i < I; i++) {
                    float acc = 0.0f;
                    for (int k = 0; k < D && s + k < T; k++)
                        for (int o = 0; o < O; o++)
                            acc += dy[((int64_t)(s + k) * N + n) * O + o] *
                                   K[((int64_t)k * O + o) * I + i];
                    dx[((int64_t)s * N + n) * I + i] += acc;
                }
            }
        }
    }
    if (dK) {
        for (int k = 0; k < D; k++) {
            for (int o = 0; o < O; o++) {
                for (int i = 0; i < I; i++) {
                    float acc = 0.0f;
                    for (int t = k; t < T; t++)
                        for (int n = 0; n < N; n++)
                            acc += dy[((int64_t)t * N + n) * O + o] *
                                   x[((int64_t)(t - k) * N + n) * I + i];
                    dK[((int64_t)k * O + o) * I + i] += acc;
                }
            }
        }
    }
}
