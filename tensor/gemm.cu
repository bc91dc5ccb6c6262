/*
 * gemm.cu - row-major SGEMM through cuBLAS (column-major), for linear layers and conv2d.
 * Must match snn_gemm_cpu (tensor/gemm.c) to fp32 rounding: C = alpha op(A) op(B) + beta C.
 *
 * The mapping. cuBLAS reads every matrix column-major. A row-major (R, S) matrix with leading
 * dimension ld is, read column-major with the same ld, its transpose (S, R). So the row-major
 * product C = op(A) op(B) is, seen by cuBLAS, C^T = op(B)^T op(A)^T: we ask cuBLAS for
 *     (N x M) = op_b(B) (N x K) * op_a(A) (K x M)
 * passing B first and A second, with each one's own transpose flag unchanged:
 *     trans_b = false: B is stored (K, N) row-major = (N, K) column-major: CUBLAS_OP_N;
 *     trans_b = true:  B is stored (N, K) row-major = (K, N) column-major: CUBLAS_OP_T;
 * and likewise for A. Leading dimensions are passed through as they are.
 *
 * beta = 0 lets cuBLAS ignore C's content (NaN garbage in a fresh arena buffer included), as
 * the kernel table requires. Math is fp32 by default, TF32 tensor cores when
 * snn_cuda_set_tf32(true) (cuda_context.cu). Work: 2 M N K flops; traffic at least
 * 4 (M K + K N + M N) bytes (plus M N more when beta != 0).
 */
#include "cuda_common.cuh"
#include "error.h"
#include "kernels_cuda.h"

static cublasOperation_t blas_op(bool trans) { return trans ? CUBLAS_OP_T : CUBLAS_OP_N; }

/* K = 0: the product is empty, C = beta C (0 when beta = 0, whatever C held). cuBLAS would
 * reject the zero leading dimensions such a call may carry, so it never sees it.
 * Traffic: 4-8 B per element of C. */
static __global__ void gemm_scale_kernel(float *C, int ldc, int M, int N, float beta)
{
    SNN_GRID_STRIDE_LOOP(k, (int64_t)M * N) {
        float *c = C + (k / N) * ldc + k % N;
        *c = beta == 0.0f ? 0.0f : beta * *c;
    }
}

extern "C" void snn_gemm_cuda(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                              const float *A, int lda, const float *B, int ldb, float beta,
                              float *C, int ldc)
{
    if (M <= 0 || N <= 0) return;
    if (K <= 0) {
        SNN_CUDA_LAUNCH(gemm_scale_kernel, snn_cuda_grid((int64_t)M * N, SNN_CUDA_BLOCK),
                        SNN_CUDA_BLOCK, 0, C, ldc, M, N, beta);
        return;
    }
    SNN_CUBLAS_CHECK(cublasSgemm(snn_cuda_blas(), blas_op(trans_b), blas_op(trans_a), N, M, K,
                                 &alpha, B, ldb, A, lda, &beta, C, ldc));
}

extern "C" void snn_gemm_strided_batched_cuda(bool trans_a, bool trans_b, int M, int N, int K,
                                              float alpha, const float *A, int lda,
                                              int64_t stride_a, const float *B, int ldb,
                                              int64_t stride_b, float beta, float *C, int ldc,
                                              int64_t stride_c, int batch)
{
    if (M <= 0 || N <= 0 || batch <= 0) return;
    SNN_ASSERT(K > 0); /* conv2d, the only caller, always has C_in KH KW >= 1 */
    SNN_CUBLAS_CHECK(cublasSgemmStridedBatched(snn_cuda_blas(), blas_op(trans_b), blas_op(trans_a),
                                               N, M, K, &alpha, B, ldb, (long long)stride_b, A,
                                               lda, (long long)stride_a, &beta, C, ldc,
                                               (long long)stride_c, batch));
}
