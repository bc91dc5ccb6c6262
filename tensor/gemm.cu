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
 * the kernel table requires. Math follows the precision (cuda_options.h): fp32 by default,
 * TF32 tensor cores through the handle's math mode (cuda_context.cu), BF16 tensor cores by
 * cublasGemmEx with CUBLAS_COMPUTE_32F_FAST_16BF, which rounds the fp32 operands to bf16 as it
 * loads them and accumulates in fp32 (the matrices stay fp32). Work: 2 M N K flops; traffic at least
 * 4 (M K + K N + M N) bytes (plus M N more when beta != 0).
 */
#include <stdio.h>

#include "cuda_common.cuh"
#include "cuda_options.h"
#include "error.h"
#include "kernels_cuda.h"

static cublasOperation_t blas_op(bool trans) { return trans ? CUBLAS_OP_T : CUBLAS_OP_N; }

/* K = 0: the product is empty, C = beta C (0 when beta = 0, whatever C held). cuBLAS would
 * reject the zero leading dimensions such a call may carry, so it never sees it.
 * Traffic: 4-8 B per element of C. */
static __global__ void gemm_empty_k_kernel(float *C, int ldc, int M, int N, float beta)
{
    SNN_GRID_STRIDE_LOOP(k, (int64_t)M * N) {
        float *c = C + (k / N) * ldc + k % N;
        *c = beta == 0.0f ? 0.0f : beta * *c;
    }
}

/* A failed cuBLAS call names the shapes, so the failing layer can be found. */
static void check_blas(cublasStatus_t status, const char *call, int line, bool trans_a,
                       bool trans_b, int M, int N, int K, int lda, int ldb, int ldc, int batch)
{
    if (status == CUBLAS_STATUS_SUCCESS) return;
    char message[256];
    snprintf(message, sizeof message,
             "%s (row-major trans_a=%d trans_b=%d M=%d N=%d K=%d lda=%d ldb=%d ldc=%d batch=%d)",
             cublasGetStatusString(status), trans_a, trans_b, M, N, K, lda, ldb, ldc, batch);
    snn_cuda_fail(call, __FILE__, line, message);
}

extern "C" void snn_gemm_cuda(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                              const float *A, int lda, const float *B, int ldb, float beta,
                              float *C, int ldc)
{
    if (M <= 0 || N <= 0) return;
    if (K <= 0) {
        SNN_CUDA_LAUNCH(gemm_empty_k_kernel, snn_cuda_grid((int64_t)M * N, SNN_CUDA_BLOCK),
                        SNN_CUDA_BLOCK, 0, C, ldc, M, N, beta);
        return;
    }
    /* C^T (N x M) = op(B)^T op(A)^T: B first, A second (file comment) */
    if (snn_cuda_precision() == SNN_PRECISION_BF16) {
        const cublasStatus_t status = cublasGemmEx(
            snn_cuda_blas(), blas_op(trans_b), blas_op(trans_a), N, M, K, &alpha, B, CUDA_R_32F,
            ldb, A, CUDA_R_32F, lda, &beta, C, CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F_FAST_16BF,
            CUBLAS_GEMM_DEFAULT);
        check_blas(status, "cublasGemmEx", __LINE__, trans_a, trans_b, M, N, K, lda, ldb, ldc, 1);
        return;
    }
    const cublasStatus_t status = cublasSgemm(snn_cuda_blas(), blas_op(trans_b), blas_op(trans_a),
                                              N, M, K, &alpha, B, ldb, A, lda, &beta, C, ldc);
    check_blas(status, "cublasSgemm", __LINE__, trans_a, trans_b, M, N, K, lda, ldb, ldc, 1);
}

extern "C" void snn_gemm_strided_batched_cuda(bool trans_a, bool trans_b, int M, int N, int K,
                                              float alpha, const float *A, int lda,
                                              int64_t stride_a, const float *B, int ldb,
                                              int64_t stride_b, float beta, float *C, int ldc,
                                              int64_t stride_c, int batch)
{
    if (M <= 0 || N <= 0 || batch <= 0) return;
    SNN_ASSERT(K > 0); /* conv2d, the only caller, always has C_in KH KW >= 1 */
    if (snn_cuda_precision() == SNN_PRECISION_BF16) {
        const cublasStatus_t status = cublasGemmStridedBatchedEx(
            snn_cuda_blas(), blas_op(trans_b), blas_op(trans_a), N, M, K, &alpha, B, CUDA_R_32F, ldb,
            (long long)stride_b, A, CUDA_R_32F, lda, (long long)stride_a, &beta, C, CUDA_R_32F, ldc,
            (long long)stride_c, batch, CUBLAS_COMPUTE_32F_FAST_16BF, CUBLAS_GEMM_DEFAULT);
        check_blas(status, "cublasGemmStridedBatchedEx", __LINE__, trans_a, trans_b, M, N, K, lda,
                   ldb, ldc, batch);
        return;
    }
    const cublasStatus_t status = cublasSgemmStridedBatched(
        snn_cuda_blas(), blas_op(trans_b), blas_op(trans_a), N, M, K, &alpha, B, ldb,
        (long long)stride_b, A, lda, (long long)stride_a, &beta, C, ldc, (long long)stride_c,
        batch);
    check_blas(status, "cublasSgemmStridedBatched", __LINE__, trans_a, trans_b, M, N, K, lda, ldb,
               ldc, batch);
}
