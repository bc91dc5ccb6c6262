/*
 * gemm.h - internal extras of the CPU SGEMM in gemm.c (the kernel-table entries themselves,
 * snn_gemm_cpu and snn_gemm_naive_cpu, are declared in kernels_cpu.h).
 *
 *   snn_gemm_serial_cpu   the same SGEMM, run on the calling thread only. Callers that already
 *                         run one task per OpenMP thread (conv2d.c, one image group per thread)
 *                         use it so that the threads do not fight over the cores.
 *   snn_gemm_release_cpu  frees the per-thread packing buffers the SGEMM keeps between calls;
 *                         snn_shutdown() calls it. A later SGEMM simply allocates them again.
 */
#ifndef SNN_GEMM_H
#define SNN_GEMM_H

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

void snn_gemm_serial_cpu(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                         const float *A, int lda, const float *B, int ldb, float beta, float *C,
                         int ldc);

void snn_gemm_release_cpu(void);

#ifdef __cplusplus
}
#endif

#endif /* SNN_GEMM_H */
