/*
 * gemm.c - single-precision matrix multiply on the CPU: a cache-blocked, register-tiled SGEMM
 * on one thread (the hot path of CPU training: every conv and linear layer ends up here;
 * gemm_threads.c shares it among threads, gemm_pack.c packs its blocks).
 *
 * It computes, row-major,
 *
 *     C (M, N) = alpha * op(A) (M, K) * op(B) (K, N) + beta * C (M, N)
 *
 * where op(A) = A stored (M, K) with row stride lda, or A^T with A stored (K, M) when trans_a;
 * likewise op(B) is B stored (K, N), or B^T with B stored (N, K) when trans_b. beta == 0 means
 * C is write-only: its old content (NaN included) is never read. The function it must match is
 * the reference triple loop, snn_gemm_ref (kernels/ref/gemm.c).
 *
 * Test: tests/test_gemm.c (fast and reference vs double on many shapes).
 * Bench: bench/bench_gemm.c.
 *
 * How the fast path works (the scheme of Goto & van de Geijn, "Anatomy of high-performance
 * matrix multiplication", ACM TOMS 2008, as used by BLIS):
 *
 *   for jc in N, step NC                          a panel of columns of C and B
 *     for pc in K, step KC                        a slice of the sum
 *       pack op(B)[pc:pc+KC, jc:jc+NC] -> Bp      (KC, NC) in NR-wide micro-panels; ~L3
 *       for ic in M, step MC
 *         pack op(A)[ic:ic+MC, pc:pc+KC] -> Ap    (MC, KC) in MR-tall micro-panels; ~L2
 *         for jr in NC, step NR
 *           for ir in MC, step MR
 *             micro-kernel: C[ir:ir+MR, jr:jr+NR] (+)= Ap panel (MR, KC) * Bp panel (KC, NR)
 *
 * Packing (gemm_pack.c) copies each block once into a contiguous, aligned buffer laid out in
 * exactly the order the micro-kernel reads it, so the inner loop streams unit-stride memory
 * whatever the transposes and leading dimensions were, and blocks past the matrix edge are
 * zero-padded so that the micro-kernel always computes a full tile. MR, NR and the block sizes
 * KC, MC, NC, and why they are what they are: gemm_blocking.h.
 *
 * Memory traffic: the micro-kernel does MR*NR FMAs per (MR + NR) floats loaded, i.e. 256 FMAs
 * per 40 floats for the AVX-512 tile. A is packed ceil(N / NC) times and B once per thread
 * that shares its columns; C is read and written ceil(K / KC) times. For large problems all of
 * this is O(MK + KN + MN) against O(MNK) arithmetic, which is why the kernel can run near the
 * FMA units' peak.
 *
 * Threads: gemm_threads.c cuts C into a grid of rectangles, one per thread, aligned to the
 * MR x NR tiles, and runs this file's serial algorithm on each (snn_gemm_rect_serial_cpu), every
 * thread with its own packing buffers.
 *
 * Without a packing buffer (gemm_pack.c) the blocked path still sums in the same slices with
 * the same roundings (gemm_blocked_unpacked, slowly), so no result depends on memory. Without
 * -march=native (no AVX2) a portable C micro-kernel is used.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif

#include "cpu_threads.h"
#include "gemm.h"
#include "gemm_blocking.h"
#include "kernels_cpu.h"

/* Problems below SMALL_FMAS multiply-adds skip packing (measured: packing into the kept buffer
 * wins from about 8x8x8 up), and below PARALLEL_FMAS (one grain of cpu_threads.h: ~1 M FMAs,
 * ~10-30 us of work on one core) waking the threads is not worth it. */
#define SMALL_FMAS (8 * 8 * 8)
#define PARALLEL_FMAS ((int64_t)SNN_CPU_GRAIN * SNN_CPU_FMAS_PER_UNIT)

/* ---------------------------------------------------------------------------------------------
 * Micro-kernels. All compute acc (MR, NR) = sum_p a[p, 0:MR]^T b[p, 0:NR] over kc steps, where
 *   a: (kc, MR) a packed A micro-panel (MR consecutive rows of op(A) per k step),
 *   b: (kc, NR) a packed B micro-panel (NR consecutive columns of op(B) per k step),
 * then store C (MR, NR) (row stride ldc) = alpha * acc + beta * C, never reading C when
 * beta == 0. Both panels are 64-byte aligned.
 * ------------------------------------------------------------------------------------------- */

#if defined(__AVX512F__)

static void micro_kernel(int kc, const float *restrict a, const float *restrict b,
                         float *restrict c, int ldc, float alpha, float beta)
{
    __m512 acc0[MR], acc1[MR]; /* row r of the tile: columns 0-15 and 16-31 */
    for (int r = 0; r < MR; r++) acc0[r] = acc1[r] = _mm512_setzero_ps();

    for (int p = 0; p < kc; p++) {
        __m512 b0 = _mm512_load_ps(b);
        __m512 b1 = _mm512_load_ps(b + 16);
#pragma GCC unroll 8
        for (int r = 0; r < MR; r++) {
            __m512 ar = _mm512_set1_ps(a[r]);
            acc0[r] = _mm512_fmadd_ps(ar, b0, acc0[r]);
            acc1[r] = _mm512_fmadd_ps(ar, b1, acc1[r]);
        }
        a += MR;
        b += NR;
    }

    __m512 valpha = _mm512_set1_ps(alpha);
    if (beta == 0.0f) {
        for (int r = 0; r < MR; r++) {
            _mm512_storeu_ps(c + (int64_t)r * ldc, _mm512_mul_ps(valpha, acc0[r]));
            _mm512_storeu_ps(c + (int64_t)r * ldc + 16, _mm512_mul_ps(valpha, acc1[r]));
        }
    } else {
        __m512 vbeta = _mm512_set1_ps(beta);
        for (int r = 0; r < MR; r++) {
            float *cr = c + (int64_t)r * ldc;
            __m512 c0 = _mm512_mul_ps(vbeta, _mm512_loadu_ps(cr));
            __m512 c1 = _mm512_mul_ps(vbeta, _mm512_loadu_ps(cr + 16));
            _mm512_storeu_ps(cr, _mm512_fmadd_ps(valpha, acc0[r], c0));
            _mm512_storeu_ps(cr + 16, _mm512_fmadd_ps(valpha, acc1[r], c1));
        }
    }
}

#elif defined(__AVX2__) && defined(__FMA__)

/* The 12 accumulators are named variables, not arrays: with arrays GCC 12 kept them in
 * registers but also stored all 12 to the stack on every k step (one 256-bit store port on
 * Zen 3: 12 cycles of stores against 6 of FMAs), and the SGEMM ran at ~34% of peak. */
#define ROW_FMA(r, c0, c1)                                  \
    do {                                                    \
        __m256 ar = _mm256_broadcast_ss(a + (r));           \
        c0 = _mm256_fmadd_ps(ar, b0, c0);                   \
        c1 = _mm256_fmadd_ps(ar, b1, c1);                   \
    } while (0)

static void micro_kernel(int kc, const float *restrict a, const float *restrict b,
                         float *restrict c, int ldc, float alpha, float beta)
{
    /* cR0, cR1: row R of the tile, columns 0-7 and 8-15 */
    __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
    __m256 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
    for (int p = 0; p < kc; p++) {
        __m256 b0 = _mm256_load_ps(b);
        __m256 b1 = _mm256_load_ps(b + 8);
        ROW_FMA(0, c00, c01);
        ROW_FMA(1, c10, c11);
        ROW_FMA(2, c20, c21);
        ROW_FMA(3, c30, c31);
        ROW_FMA(4, c40, c41);
        ROW_FMA(5, c50, c51);
        a += MR;
        b += NR;
    }
    const __m256 acc[MR][2] = {{c00, c01}, {c10, c11}, {c20, c21},
                               {c30, c31}, {c40, c41}, {c50, c51}};

    __m256 valpha = _mm256_set1_ps(alpha);
    if (beta == 0.0f) {
        for (int r = 0; r < MR; r++) {
            _mm256_storeu_ps(c + (int64_t)r * ldc, _mm256_mul_ps(valpha, acc[r][0]));
            _mm256_storeu_ps(c + (int64_t)r * ldc + 8, _mm256_mul_ps(valpha, acc[r][1]));
        }
    } else {
        __m256 vbeta = _mm256_set1_ps(beta);
        for (int r = 0; r < MR; r++) {
            float *cr = c + (int64_t)r * ldc;
            __m256 v0 = _mm256_mul_ps(vbeta, _mm256_loadu_ps(cr));
            __m256 v1 = _mm256_mul_ps(vbeta, _mm256_loadu_ps(cr + 8));
            _mm256_storeu_ps(cr, _mm256_fmadd_ps(valpha, acc[r][0], v0));
            _mm256_storeu_ps(cr + 8, _mm256_fmadd_ps(valpha, acc[r][1], v1));
        }
    }
}
#undef ROW_FMA

#else

static void micro_kernel(int kc, const float *restrict a, const float *restrict b,
                         float *restrict c, int ldc, float alpha, float beta)
{
    float acc[MR][NR] = {{0.0f}};
    for (int p = 0; p < kc; p++) {
        for (int r = 0; r < MR; r++) {
            float ar = a[r];
            for (int j = 0; j < NR; j++) acc[r][j] += ar * b[j];
        }
        a += MR;
        b += NR;
    }
    for (int r = 0; r < MR; r++) {
        float *cr = c + (int64_t)r * ldc;
        for (int j = 0; j < NR; j++)
            cr[j] = beta == 0.0f ? alpha * acc[r][j] : alpha * acc[r][j] + beta * cr[j];
    }
}

#endif

/* A tile that sticks out of C (mr < MR or nr < NR): the existing mr x nr part of C is copied
 * into a full scratch tile, the micro-kernel updates the scratch tile, and that part is copied
 * back. Same instructions as a full tile, so the result does not depend on where tile edges
 * fall (and so not on the thread count, which moves them). */
static void edge_kernel(int kc, const float *a, const float *b, float *c, int ldc, int mr,
                        int nr, float alpha, float beta)
{
    _Alignas(64) float tile[MR * NR]; /* (MR, NR) */
    if (beta != 0.0f) {
        memset(tile, 0, sizeof tile); /* the lanes past the edge are read, scaled, dropped */
        for (int r = 0; r < mr; r++)
            memcpy(tile + r * NR, c + (int64_t)r * ldc, (size_t)nr * sizeof *c);
    }
    micro_kernel(kc, a, b, tile, NR, alpha, beta);
    for (int r = 0; r < mr; r++)
        memcpy(c + (int64_t)r * ldc, tile + r * NR, (size_t)nr * sizeof *c);
}

/* ---------------------------------------------------------------------------------------------
 * Drivers.
 * ------------------------------------------------------------------------------------------- */

/* C = beta * C, where beta == 0 writes zeros without reading C. */
static void scale_c(int M, int N, float beta, float *C, int ldc)
{
    for (int i = 0; i < M; i++) {
        float *c = C + (int64_t)i * ldc;
        if (beta == 0.0f) {
            memset(c, 0, (size_t)N * sizeof *c);
        } else if (beta != 1.0f) {
            for (int j = 0; j < N; j++) c[j] *= beta;
        }
    }
}

/* sum_k a[k * a_stride] * b[k] with 16 running partial sums (a vector register's worth, so the
 * compiler can keep them in one; the order is fixed, so the result is reproducible). */
static float dot(int K, const float *a, int64_t a_stride, const float *restrict b)
{
    float part[16] = {0.0f};
    int k = 0;
    for (; k + 16 <= K; k += 16)
        for (int l = 0; l < 16; l++) part[l] += a[(k + l) * a_stride] * b[k + l];
    for (; k < K; k++) part[0] += a[k * a_stride] * b[k];
    float sum = 0.0f;
    for (int l = 0; l < 16; l++) sum += part[l];
    return sum;
}

/* The unpacked path, for tiny problems, for one or two rows of C (a vector times a matrix:
 * each element of B is used once or twice, so packing it buys nothing). Without trans_b, rows
 * of C are built in place with the k loop outside the j loop, so the j loop streams rows of B
 * and vectorises; with trans_b, each element is a dot product of two contiguous rows (when A
 * is not transposed). Only shapes use_small picks come here: a product the blocked path owns
 * must keep its grouping even when no packing buffer can be had (gemm_blocked_unpacked). */
static void gemm_small(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                       const float *A, int lda, const float *B, int ldb, float beta, float *C,
                       int ldc)
{
    for (int i = 0; i < M; i++) {
        float *restrict c = C + (int64_t)i * ldc;
        /* row i of op(A): element k at a_row[k * a_stride] */
        const float *a_row = trans_a ? A + i : A + (int64_t)i * lda;
        int64_t a_stride = trans_a ? lda : 1;
        if (trans_b) {
            for (int j = 0; j < N; j++) {
                float sum = alpha * dot(K, a_row, a_stride, B + (int64_t)j * ldb);
                c[j] = beta == 0.0f ? sum : sum + beta * c[j];
            }
            continue;
        }
        scale_c(1, N, beta, c, ldc);
        for (int k = 0; k < K; k++) {
            float a = alpha * a_row[k * a_stride];
            const float *restrict b = B + (int64_t)k * ldb;
            for (int j = 0; j < N; j++) c[j] += a * b[j];
        }
    }
}

/* Which path a problem takes; a function of the shape alone, so that the threaded and the
 * serial entry points sum every element in the same order. */
static bool use_small(int M, int N, int K)
{
    return (int64_t)M * N * K < SMALL_FMAS || M <= 2;
}

/* The blocked algorithm of the file header on the rectangle rows [m0, m1) x cols [n0, n1) of C,
 * run by the calling thread with its own buffer `pack` (PACK_FLOATS floats). */
static void gemm_blocked(bool trans_a, bool trans_b, int m0, int m1, int n0, int n1, int K,
                         float alpha, const float *A, int lda, const float *B, int ldb,
                         float beta, float *C, int ldc, float *pack)
{
    float *a_pack = pack;                    /* (MC, KC) as MR-tall micro-panels */
    float *b_pack = pack + (size_t)MC * KC;  /* (KC, NC) as NR-wide micro-panels */
    /* K is cut into equal slices of at most KC (K = 576 -> 2 x 288, not 512 + 64), so no slice
     * is so short that loading and storing the C tile outweighs its FMAs. */
    int k_slices = (K + KC - 1) / KC;
    int kc_step = (K + k_slices - 1) / k_slices;

    for (int jc = n0; jc < n1; jc += NC) {
        int nc = min_int(NC, n1 - jc);
        for (int pc = 0; pc < K; pc += kc_step) {
            int kc = min_int(kc_step, K - pc);
            /* The first slice of the sum applies the caller's beta; later ones accumulate. */
            float beta_here = pc == 0 ? beta : 1.0f;
            snn_gemm_pack_b_cpu(trans_b, B, ldb, pc, jc, kc, nc, b_pack);
            for (int ic = m0; ic < m1; ic += MC) {
                int mc = min_int(MC, m1 - ic);
                snn_gemm_pack_a_cpu(trans_a, A, lda, ic, pc, mc, kc, a_pack);
                for (int jr = 0; jr < nc; jr += NR) {
                    int nr = min_int(NR, nc - jr);
                    const float *b_panel = b_pack + (size_t)jr * kc;
                    for (int ir = 0; ir < mc; ir += MR) {
                        int mr = min_int(MR, mc - ir);
                        const float *a_panel = a_pack + (size_t)ir * kc;
                        float *c = C + (int64_t)(ic + ir) * ldc + jc + jr;
                        if (mr == MR && nr == NR)
                            micro_kernel(kc, a_panel, b_panel, c, ldc, alpha, beta_here);
                        else
                            edge_kernel(kc, a_panel, b_panel, c, ldc, mr, nr, alpha, beta_here);
                    }
                }
            }
        }
    }
}

/* The micro-kernels add each term with one FMA, except the portable one (multiply, then add:
 * ISO C mode does not contract a * b + c). */
#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#define MICRO_FUSED 1
#else
#define MICRO_FUSED 0
#endif

/* gemm_blocked's result without a packing buffer (no memory, or more live threads than
 * slots): one element at a time, the same K slices, the same FMAs or multiply-adds and the
 * same stores as the micro-kernel, so the result is bit for bit the blocked one. Slow (no
 * tiling), but the result of a product never depends on whether memory could be had. */
static void gemm_blocked_unpacked(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                                  const float *A, int lda, const float *B, int ldb, float beta,
                                  float *C, int ldc)
{
    int k_slices = (K + KC - 1) / KC;  /* as gemm_blocked cuts K */
    int kc_step = (K + k_slices - 1) / k_slices;
    for (int pc = 0; pc < K; pc += kc_step) {
        int kc = min_int(kc_step, K - pc);
        float beta_here = pc == 0 ? beta : 1.0f;
        for (int i = 0; i < M; i++) {
            for (int j = 0; j < N; j++) {
                float acc = 0.0f;
                for (int p = pc; p < pc + kc; p++) {
                    float a = trans_a ? A[(int64_t)p * lda + i] : A[(int64_t)i * lda + p];
                    float b = trans_b ? B[(int64_t)j * ldb + p] : B[(int64_t)p * ldb + j];
#if MICRO_FUSED
                    acc = fmaf(a, b, acc);
#else
                    acc += a * b;
#endif
                }
                float *c = &C[(int64_t)i * ldc + j];
                if (beta_here == 0.0f) {
                    *c = alpha * acc;
                } else {
#if MICRO_FUSED
                    *c = fmaf(alpha, acc, beta_here * *c);
#else
                    *c = alpha * acc + beta_here * *c;
#endif
                }
            }
        }
    }
}

int snn_gemm_k_slice_cpu(int M, int N, int K)
{
    if (K <= 0 || use_small(M, N, K)) return 0;
    int k_slices = (K + KC - 1) / KC;                 /* as gemm_blocked cuts K */
    return (K + k_slices - 1) / k_slices;
}

/* Serial entry: handles the degenerate cases, then small or blocked. */
static void gemm_one_thread(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                            const float *A, int lda, const float *B, int ldb, float beta,
                            float *C, int ldc)
{
    if (M <= 0 || N <= 0) return;
    if (K <= 0 || alpha == 0.0f) {
        scale_c(M, N, beta, C, ldc);
        return;
    }
    if (use_small(M, N, K)) {
        gemm_small(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    float *pack = snn_gemm_pack_buffer_cpu();
    if (!pack) {
        gemm_blocked_unpacked(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    gemm_blocked(trans_a, trans_b, 0, M, 0, N, K, alpha, A, lda, B, ldb, beta, C, ldc, pack);
}

void snn_gemm_serial_cpu(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                         const float *A, int lda, const float *B, int ldb, float beta, float *C,
                         int ldc)
{
    gemm_one_thread(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void snn_gemm_tile_cpu(int *mr, int *nr)
{
    *mr = MR;
    *nr = NR;
}

bool snn_gemm_shareable_cpu(int M, int N, int K, float alpha)
{
    return M > 0 && N > 0 && K > 0 && alpha != 0.0f && (int64_t)M * N * K >= PARALLEL_FMAS &&
           !use_small(M, N, K);
}

void snn_gemm_rect_serial_cpu(bool trans_a, bool trans_b, int K, float alpha, const float *A,
                              int lda, const float *B, int ldb, float beta, float *C, int ldc,
                              snn_gemm_rect r)
{
    if (r.m0 >= r.m1 || r.n0 >= r.n1) return;
    float *pack = snn_gemm_pack_buffer_cpu();
    float *c = C + (int64_t)r.m0 * ldc + r.n0;
    const float *a = trans_a ? A + r.m0 : A + (int64_t)r.m0 * lda;
    const float *b = trans_b ? B + (int64_t)r.n0 * ldb : B + r.n0;
    if (pack)
        gemm_blocked(trans_a, trans_b, 0, r.m1 - r.m0, 0, r.n1 - r.n0, K, alpha, a, lda, b, ldb,
                     beta, c, ldc, pack);
    else
        gemm_blocked_unpacked(trans_a, trans_b, r.m1 - r.m0, r.n1 - r.n0, K, alpha, a, lda, b,
                              ldb, beta, c, ldc);
}
