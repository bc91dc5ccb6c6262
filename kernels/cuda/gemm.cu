/*
 * gemm.cu - row-major SGEMM through cuBLAS (column-major), for linear layers and conv2d.
 * Must match snn_gemm_cpu (kernels/cpu/gemm.c) to fp32 rounding: C = alpha op(A) op(B) + beta C.
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
 * TF32 tensor cores through the handle's math mode (cuda_context.cu). Work: 2 M N K flops;
 * traffic at least 4 (M K + K N + M N) bytes (plus M N more when beta != 0).
 *
 * BF16 comes in two forms here:
 *   - snn_gemm_bf16_cuda / snn_gemm_bf16_strided_batched_cuda take operands that already are
 *     bf16 (CUDA_R_16BF A and B, fp32 C, CUBLAS_COMPUTE_32F: bf16 x bf16 products are exact in
 *     fp32 and accumulate in fp32, so C is what an fp32 GEMM of the rounded operands gives, up
 *     to summation order). Traffic 2 (M K + K N) + 4 M N bytes: half of fp32's on the
 *     operands, and the tensor cores' BF16 rate, twice TF32's. The BF16 convolution of
 *     conv2d.cu writes its column matrix in bf16 and converts the weight (snn_to_bf16_cuda)
 *     to use them.
 *   - snn_gemm_cuda in BF16 precision (the linear layers) hands its fp32 operands to
 *     cublasGemmEx with CUBLAS_COMPUTE_32F_FAST_16BF. cuBLAS picks the same kernels as TF32 for
 *     that (same speed, same bits: docs/benchmarks.md, "Precision and accuracy"), so the
 *     linear layers compute at TF32 precision in BF16 mode. Converting their operands would
 *     need a bf16 scratch, and the table's gemm entry takes no workspace (kernels.h: kernels
 *     never allocate); the linear layers are a small part of the FLOPs (1e-5 of a ResNet-18
 *     step, ~3% of the Fashion-MNIST CNN's), so they are left so on purpose.
 */
#include <cuda_bf16.h>
#include <stdio.h>

#include "cuda_common.cuh"
#include "tensor/cuda_options.h"
#include "tensor/error.h"
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
    /* (conv2d.cu calls this in fp32 and TF32 only: its BF16 path converts its operands and
     * calls snn_gemm_bf16_strided_batched_cuda; this branch serves any other caller) */
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

/* ---- bf16 operands ------------------------------------------------------------------------ */

/* dst[i] = bf16(src[i]), rounded to nearest (ties to even; NaN stays NaN, overflow goes to
 * infinity): the operand conversion of the BF16 GEMMs (a conv's weight, once per call).
 * Traffic: 4 B read + 2 B written per element. */
static __global__ void to_bf16_kernel(__nv_bfloat16 *__restrict__ dst,
                                      const float *__restrict__ src, int64_t n)
{
    SNN_GRID_STRIDE_LOOP(i, n) dst[i] = __float2bfloat16_rn(src[i]);
}

extern "C" void snn_to_bf16_cuda(snn_bf16 *dst, const float *src, int64_t n)
{
    if (n <= 0) return;
    SNN_CUDA_LAUNCH(to_bf16_kernel, snn_cuda_grid(n, SNN_CUDA_BLOCK), SNN_CUDA_BLOCK, 0, dst,
                    src, n);
}

/* C (fp32) = alpha op(A) op(B) + beta C with A and B in bf16: the mapping of the file comment,
 * CUDA_R_16BF operands, CUDA_R_32F output, CUBLAS_COMPUTE_32F (fp32 accumulation; the handle's
 * default math mode lets cuBLAS use the tensor cores for bf16 operands). */
extern "C" void snn_gemm_bf16_cuda(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                                   const snn_bf16 *A, int lda, const snn_bf16 *B, int ldb,
                                   float beta, float *C, int ldc)
{
    if (M <= 0 || N <= 0) return;
    SNN_ASSERT(K > 0); /* conv2d, the only caller, always has C_in KH KW, C_out, g P >= 1 */
    const cublasStatus_t status = cublasGemmEx(
        snn_cuda_blas(), blas_op(trans_b), blas_op(trans_a), N, M, K, &alpha, B, CUDA_R_16BF, ldb,
        A, CUDA_R_16BF, lda, &beta, C, CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    check_blas(status, "cublasGemmEx (bf16 operands)", __LINE__, trans_a, trans_b, M, N, K, lda,
               ldb, ldc, 1);
}

extern "C" void snn_gemm_bf16_strided_batched_cuda(bool trans_a, bool trans_b, int M, int N,
                                                   int K, float alpha, const snn_bf16 *A,
                                                   int lda, int64_t stride_a, const snn_bf16 *B,
                                                   int ldb, int64_t stride_b, float beta,
                                                   float *C, int ldc, int64_t stride_c, int batch)
{
    if (M <= 0 || N <= 0 || batch <= 0) return;
    SNN_ASSERT(K > 0);
    const cublasStatus_t status = cublasGemmStridedBatchedEx(
        snn_cuda_blas(), blas_op(trans_b), blas_op(trans_a), N, M, K, &alpha, B, CUDA_R_16BF, ldb,
        (long long)stride_b, A, CUDA_R_16BF, lda, (long long)stride_a, &beta, C, CUDA_R_32F, ldc,
        (long long)stride_c, batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    check_blas(status, "cublasGemmStridedBatchedEx (bf16 operands)", __LINE__, trans_a, trans_b,
               M, N, K, lda, ldb, ldc, batch);
}
