/*
 * gemm.h - internal extras of the CPU SGEMM of gemm.c, gemm_pack.c and gemm_threads.c (the
 * kernel-table entry itself, snn_gemm_cpu, is declared in kernels_cpu.h; the reference it must
 * match, snn_gemm_ref, in kernels/ref/kernels_ref.h).
 *
 *   snn_gemm_serial_cpu   the same SGEMM, run on the calling thread only. Callers that already
 *                         run one task per OpenMP thread (conv2d.c, one image group per thread)
 *                         use it so that the threads do not fight over the cores.
 *   snn_gemm_part_cpu     one part of the same SGEMM on the calling thread: the rectangle of C
 *                         that thread `part` computes when snn_gemm_cpu runs on `parts` threads.
 *                         Callers with fewer tasks than threads (conv2d.c at batch 1: fewer
 *                         image groups than threads) split each product among their threads
 *                         with it. The parts tile C (some are empty: small products go whole to
 *                         part 0), and each element is summed exactly as snn_gemm_cpu sums it.
 *   snn_gemm_release_cpu  frees the per-thread packing buffers the SGEMM keeps between calls;
 *                         snn_shutdown() calls it (the first buffer taken registers it with
 *                         snn_on_shutdown). A later SGEMM simply allocates them again.
 *   snn_gemm_pack_bytes_cpu  the size of one such buffer (nn/model_memory.c counts them).
 *   snn_gemm_k_slice_cpu  how the SGEMM groups the sum over k for an (M, N, K) product, so that
 *                         code which must reproduce it bit for bit (sparse/: skipping zero terms
 *                         is exact only with the same grouping) asks instead of copying
 *                         constants. A return L > 0: the blocked path; each element of C sums
 *                         ascending k in consecutive slices of L terms, each slice from zero
 *                         (one FMA per term), and stores C = alpha*slice + beta*C for the first
 *                         slice (C = alpha*slice when beta == 0), C = alpha*slice + C after.
 *                         0: the unpacked path; without trans_b, C = beta*C (0 when beta == 0)
 *                         then C += (alpha*a_k)*b_k term by term in ascending k; with trans_b,
 *                         a dot product of 16 interleaved partial sums. The grouping depends on
 *                         the shape only, never on the thread count.
 */
#ifndef SNN_GEMM_H
#define SNN_GEMM_H

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

void snn_gemm_serial_cpu(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                         const float *A, int lda, const float *B, int ldb, float beta, float *C,
                         int ldc);

/* A rectangle of C: rows [m0, m1) x columns [n0, n1); empty when m0 >= m1 or n0 >= n1. */
typedef struct snn_gemm_rect {
    int m0, m1, n0, n1;
} snn_gemm_rect;

/* Part `part` (0 <= part < parts) of C (M, N) = alpha op(A) op(B) + beta C, as snn_gemm_cpu;
 * *rect (may be NULL) gets the rectangle of C this part wrote (maybe empty). */
void snn_gemm_part_cpu(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                       const float *A, int lda, const float *B, int ldb, float beta, float *C,
                       int ldc, int part, int parts, snn_gemm_rect *rect);

void snn_gemm_release_cpu(void);

/* The pieces of gemm.c that gemm_threads.c shares among threads. */

/* The register tile: C is computed in mr x nr tiles. */
void snn_gemm_tile_cpu(int *mr, int *nr);

/* Whether the product goes the blocked path and is big enough (about one grain of
 * cpu_threads.h) to share among threads. */
bool snn_gemm_shareable_cpu(int M, int N, int K, float alpha);

/* Rectangle r of C (M, N) = alpha op(A) op(B) + beta C on the calling thread, by the blocked
 * path, each element summed as the whole product sums it. */
void snn_gemm_rect_serial_cpu(bool trans_a, bool trans_b, int K, float alpha, const float *A,
                              int lda, const float *B, int ldb, float beta, float *C, int ldc,
                              snn_gemm_rect r);

/* Bytes of one thread's packing buffer (each thread that runs the blocked SGEMM keeps one). */
size_t snn_gemm_pack_bytes_cpu(void);

int snn_gemm_k_slice_cpu(int M, int N, int K);

#ifdef __cplusplus
}
#endif

#endif /* SNN_GEMM_H */
