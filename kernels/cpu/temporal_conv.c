/*
 * temporal_conv.c - the fast CPU causal temporal convolution of learnable delays: one call of
 * the blocked, threaded SGEMM (gemm.c) per tap, as kernels/temporal_conv_taps.h writes it.
 *
 *   y[t] = sum_{k=0}^{D-1} x[t - k] K[k]^T,  x[t < 0] = 0     x (T, N, I), K (D, O, I), y (T, N, O)
 *
 * Its reference, the same sums as plain loops, is kernels/ref/delay.c; tests/test_backend_ops.c
 * compares the two. The delay kernel's construction has no fast version: the table names the
 * reference loop (kernels/cpu/table.c says why).
 */
#include "kernels/temporal_conv_taps.h"
#include "kernels_cpu.h"

void snn_temporal_conv_forward_cpu(float *y, const float *x, const float *K, int T, int N, int I,
                                   int O, int D)
{
    snn_temporal_conv_forward_taps(snn_gemm_cpu, y, x, K, T, N, I, O, D);
}

void snn_temporal_conv_backward_cpu(float *dx, float *dK, const float *dy, const float *x,
                                    const float *K, int T, int N, int I, int O, int D)
{
    snn_temporal_conv_backward_taps(snn_gemm_cpu, dx, dK, dy, x, K, T, N, I, O, D);
}
