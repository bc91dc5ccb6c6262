/*
 * gemm_threads.c - the CPU SGEMM of gemm.c shared among OpenMP threads.
 *
 * C is cut into a grid of rectangles, one per thread, aligned to the SGEMM's MR x NR register
 * tiles; each thread runs the serial blocked algorithm on its rectangle with its own packing
 * buffers (snn_gemm_rect_serial_cpu). No thread writes another's part of C, and every element
 * of C is summed in the same order whatever the grid (the K slices depend on K alone), so
 * results are bitwise identical for 1, 2 or 64 threads. The grid is also offered part by part
 * (snn_gemm_part_cpu), for callers that run their own threads and split one product among them
 * (conv2d.c, when a batch has fewer images than threads). A call runs on one thread or on the
 * whole team, never on a smaller one (cpu_threads.h says why).
 *
 * Test: tests/test_gemm.c (threaded vs double), tests/test_cpu_threads.c (the parts tile C and
 * give the whole product's bits).
 */
#include <stdint.h>

#include <omp.h>

#include "cpu_threads.h"
#include "gemm.h"
#include "kernels_cpu.h"

static inline int min_int(int a, int b) { return a < b ? a : b; }

/* Splits `tiles` tiles into `parts` contiguous runs; run `index` is [*begin, *end). */
static void split_range(int tiles, int parts, int index, int *begin, int *end)
{
    int base = tiles / parts, extra = tiles % parts;
    *begin = index * base + min_int(index, extra);
    *end = *begin + base + (index < extra ? 1 : 0);
}

/* The grid grid_rows x grid_cols of rectangles, aligned to the mr x nr register tiles of C,
 * that `parts` threads split C into: of the grids with at most `parts` rectangles, the one whose
 * largest rectangle holds the fewest tiles (ties: fewer rows, so that each thread packs less of
 * B twice). 1 x 1 when the product is too small to share or takes the small path. */
static void gemm_grid(int M, int N, int K, float alpha, int parts, int *grid_rows, int *grid_cols)
{
    *grid_rows = *grid_cols = 1;
    if (parts <= 1 || !snn_gemm_shareable_cpu(M, N, K, alpha)) return;
    int mr, nr;
    snn_gemm_tile_cpu(&mr, &nr);
    int m_tiles = (M + mr - 1) / mr, n_tiles = (N + nr - 1) / nr;
    int64_t best = INT64_MAX;
    for (int rows = 1; rows <= parts && rows <= m_tiles; rows++) {
        int cols = min_int(parts / rows, n_tiles);
        int64_t work = (int64_t)((m_tiles + rows - 1) / rows) * ((n_tiles + cols - 1) / cols);
        if (work < best) {
            best = work;
            *grid_rows = rows;
            *grid_cols = cols;
        }
    }
}

/* The rectangle of C that part `part` of a grid_rows x grid_cols grid computes (the whole of C
 * for a 1 x 1 grid; empty past the grid's last part). */
static snn_gemm_rect gemm_grid_rect(int M, int N, int grid_rows, int grid_cols, int part)
{
    snn_gemm_rect r = {0, 0, 0, 0};
    if (part >= grid_rows * grid_cols) return r;
    int mr, nr;
    snn_gemm_tile_cpu(&mr, &nr);
    int m_tiles = (M + mr - 1) / mr, n_tiles = (N + nr - 1) / nr;
    int row_begin, row_end, col_begin, col_end;
    split_range(m_tiles, grid_rows, part / grid_cols, &row_begin, &row_end);
    split_range(n_tiles, grid_cols, part % grid_cols, &col_begin, &col_end);
    r.m0 = row_begin * mr, r.m1 = min_int(row_end * mr, M);
    r.n0 = col_begin * nr, r.n1 = min_int(col_end * nr, N);
    return r;
}

void snn_gemm_part_cpu(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                       const float *A, int lda, const float *B, int ldb, float beta, float *C,
                       int ldc, int part, int parts, snn_gemm_rect *rect)
{
    int grid_rows, grid_cols;
    gemm_grid(M, N, K, alpha, parts, &grid_rows, &grid_cols);
    snn_gemm_rect r = gemm_grid_rect(M, N, grid_rows, grid_cols, part);
    if (rect) *rect = r;
    if (r.m0 >= r.m1 || r.n0 >= r.n1) return;
    if (grid_rows * grid_cols == 1) {   /* not shared: the serial SGEMM, any path */
        snn_gemm_serial_cpu(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    snn_gemm_rect_serial_cpu(trans_a, trans_b, K, alpha, A, lda, B, ldb, beta, C, ldc, r);
}

void snn_gemm_cpu(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float *A,
                  int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
    /* one thread, or the whole team (cpu_threads.h); gemm_grid leaves a team's surplus threads
     * without a rectangle when C has too few tiles for all of them */
    const int threads = snn_cpu_threads((int64_t)M * N * K / SNN_CPU_FMAS_PER_UNIT);
    int grid_rows, grid_cols;
    gemm_grid(M, N, K, alpha, threads, &grid_rows, &grid_cols);
    if (grid_rows * grid_cols == 1) {
        snn_gemm_serial_cpu(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
#pragma omp parallel num_threads(threads)
    snn_gemm_rect_serial_cpu(trans_a, trans_b, K, alpha, A, lda, B, ldb, beta, C, ldc,
                             gemm_grid_rect(M, N, grid_rows, grid_cols, omp_get_thread_num()));
}
