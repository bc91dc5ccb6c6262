/*
 * gemm.c - reference matrix multiply (the triple loop) and the per-channel bias of conv and
 * linear layers.
 *
 *   gemm   C[i, j] = alpha sum_k op(A)[i, k] op(B)[k, j] + beta C[i, j]
 *          op(A) (M, K): A stored (M, K), row stride lda, or trans_a: A stored (K, M), A^T
 *          op(B) (K, N): B stored (K, N), row stride ldb, or trans_b: B stored (N, K), B^T
 *          C (M, N), row stride ldc. beta == 0 never reads C (its old content may be NaN).
 *   bias   out[o, c, i] += bias[c]                    out (outer, C, inner)
 *          dbias[c] += sum_{o, i} dout[o, c, i]       (conv: outer = N, inner = H*W;
 *                                                      linear: outer = rows, inner = 1)
 *
 * One dot product per element of C, summed in float in ascending k. The fast SGEMM
 * (kernels/cpu/gemm.c) computes the same products in blocks and vector registers.
 * Memory traffic: 2 M N K floats read (each element of A and B is read N or M times: nothing is
 * kept in cache on purpose), M N written; M N K multiply-adds.
 */
#include "kernels_ref.h"

void snn_gemm_ref(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float *A,
                  int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
    for (int i = 0; i < M; i++) {
        for (int j = 0; j < N; j++) {
            float sum = 0.0f;
            for (int k = 0; k < K; k++) {
                const float a = trans_a ? A[(int64_t)k * lda + i] : A[(int64_t)i * lda + k];
                const float b = trans_b ? B[(int64_t)j * ldb + k] : B[(int64_t)k * ldb + j];
                sum += a * b;
            }
            float *c = &C[(int64_t)i * ldc + j];
            *c = beta == 0.0f ? alpha * sum : alpha * sum + beta * *c;
        }
    }
}

void snn_bias_forward_ref(float *out, const float *bias, int64_t outer, int64_t channels,
                          int64_t inner)
{
    for (int64_t o = 0; o < outer; o++)
        for (int64_t c = 0; c < channels; c++)
            for (int64_t i = 0; i < inner; i++) out[(o * channels + c) * inner + i] += bias[c];
}

void snn_bias_backward_ref(float *dbias, const float *dout, int64_t outer, int64_t channels,
                           int64_t inner)
{
    for (int64_t c = 0; c < channels; c++) {
        double sum = 0.0;
        for (int64_t o = 0; o < outer; o++)
            for (int64_t i = 0; i < inner; i++) sum += (double)dout[(o * channels + c) * inner + i];
        dbias[c] += (float)sum;
    }
}
