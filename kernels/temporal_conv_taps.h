/*
 * temporal_conv_taps.h - the causal temporal convolution of learnable delays as one GEMM per
 * tap, written once for every table that has a GEMM (internal header): the fast CPU table
 * (kernels/cpu/temporal_conv.c, with its blocked SGEMM) and CUDA (kernels/cuda/delay.cu, with
 * cuBLAS). The plain loops they must match are kernels/ref/delay.c.
 *
 * Dims: T steps, N batch, I inputs, O outputs, D taps; x, dx (T, N, I), y, dy (T, N, O),
 * K, dK (D, O, I). Time-major and contiguous, rows t = a..b-1 of x are one (b - a) N x I
 * matrix starting at x + a N I, so tap k, which moves x by k steps, is one GEMM over the rows
 * it reaches (t = k..T-1; taps k >= T reach none):
 *
 *   y[k:T]    += x[0:T-k] K[k]^T     ((T-k) N, I) x (I, O)        k = 0 overwrites (beta 0)
 *   dx[0:T-k] += dy[k:T] K[k]        ((T-k) N, O) x (O, I)
 *   dK[k]     += dy[k:T]^T x[0:T-k]  (O, (T-k) N) x ((T-k) N, I)
 *
 * Cost: D GEMMs of a linear layer's size (2 T N O I D FLOPs a pass, minus the causal cut);
 * each GEMM reads its x rows, K[k] and read-modify-writes its y rows, so x and y travel D
 * times. No scratch. Rows fit an int: the op checks T N I and T N O.
 */
#ifndef SNN_TEMPORAL_CONV_TAPS_H
#define SNN_TEMPORAL_CONV_TAPS_H

#include <stdbool.h>
#include <stdint.h>

/* a row-major GEMM with the signature of snn_kernels.gemm */
typedef void (*snn_temporal_conv_gemm_fn)(bool trans_a, bool trans_b, int M, int N, int K,
                                          float alpha, const float *A, int lda, const float *B,
                                          int ldb, float beta, float *C, int ldc);

static inline void snn_temporal_conv_forward_taps(snn_temporal_conv_gemm_fn gemm, float *y,
                                                  const float *x, const float *K, int T, int N,
                                                  int I, int O, int D)
{
    for (int k = 0; k < D && k < T; k++) {
        const int rows = (T - k) * N;
        gemm(false, true, rows, O, I, 1.0f, x, I, K + (int64_t)k * O * I, I, k == 0 ? 0.0f : 1.0f,
             y + (int64_t)k * N * O, O);
    }
}

static inline void snn_temporal_conv_backward_taps(snn_temporal_conv_gemm_fn gemm, float *dx,
                                                   float *dK, const float *dy, const float *x,
                                                   const float *K, int T, int N, int I, int O,
                                                   int D)
{
    for (int k = 0; k < D && k < T; k++) {
        const int rows = (T - k) * N;
        const float *dy_k = dy + (int64_t)k * N * O;   /* rows t = k..T-1 of dy */
        if (dx) gemm(false, false, rows, I, O, 1.0f, dy_k, O, K + (int64_t)k * O * I, I, 1.0f, dx, I);
        if (dK) gemm(true, false, O, I, rows, 1.0f, dy_k, O, x, I, 1.0f, dK + (int64_t)k * O * I, I);
    }
}

#endif /* SNN_TEMPORAL_CONV_TAPS_H */
