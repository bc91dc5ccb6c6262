/*
 * reduce.cu - CUDA kernels that sum along one axis, expand along one, take the squared norm
 * and find row maxima. They must match kernels/cpu/reduce.c (snn_*_cpu of the same names).
 *
 * A tensor is viewed as (outer, dim, inner). Every sum runs in double, as on the CPU, so the
 * two devices agree to float rounding however the terms are grouped, and every sum is
 * deterministic: a fixed tree inside a block, then a second pass that adds the per-block
 * partials in index order (no atomics). The partials live in the context's scratch
 * (snn_cuda_scratch), which is safe because every kernel runs on the one stream.
 *
 * Parallelism is chosen by shape, so that one huge sum (a loss over a whole tensor: outer = 1,
 * inner = 1, dim = 10^7) fills the GPU as well as many small ones:
 *   inner == 1, long rows:  blocks reduce contiguous segments of a row (coalesced reads);
 *   otherwise:              one thread per (segment, o, i), reading along i (coalesced when
 *                           inner >= 32); segments of dim are added only when outer * inner
 *                           alone would leave the GPU idle.
 */
#include "cuda_common.cuh"
#include "kernels_cuda.h"

#define REDUCE_BLOCK 256

static __host__ __device__ int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* ---- sum_dim --------------------------------------------------------------------------------- */

/* Block b reduces segment s = b % S of row o = b / S of x (outer, dim) in double.
 * out[o] = scale * sum when S == 1, else partial[b] = sum (finished by sum_dim_finish_kernel).
 * Traffic: 4 B read per element; 4-8 B written per block.  CPU: snn_sum_dim_cpu (inner = 1). */
static __global__ void sum_dim_rows_kernel(float *out, double *partial, const float *x,
                                           int64_t outer, int64_t dim, int64_t segments,
                                           float scale)
{
    const int64_t seg_len = ceil_div(dim, segments);
    for (int64_t b = blockIdx.x; b < outer * segments; b += gridDim.x) {
        const int64_t o = b / segments, s = b % segments;
        const int64_t begin = s * seg_len;
        const int64_t end = begin + seg_len < dim ? begin + seg_len : dim;
        const float *row = x + o * dim;
        double acc = 0.0;
        for (int64_t d = begin + threadIdx.x; d < end; d += blockDim.x) acc += (double)row[d];
        acc = snn_block_sum(acc);
        if (threadIdx.x == 0) {
            if (segments == 1) out[o] = (float)((double)scale * acc);
            else partial[b] = acc;
        }
    }
}

/* Thread k = (s, o, i) (i fastest) sums x[o, d, i] over segment s of d in double.
 * out[o, i] = scale * sum when S == 1, else partial[k] = sum.
 * Traffic: 4 B read per element, coalesced along i; 4-8 B written per thread. */
static __global__ void sum_dim_columns_kernel(float *out, double *partial, const float *x,
                                              int64_t outer, int64_t dim, int64_t inner,
                                              int64_t segments, float scale)
{
    const int64_t seg_len = ceil_div(dim, segments);
    SNN_GRID_STRIDE_LOOP(k, segments * outer * inner) {
        const int64_t i = k % inner;
        const int64_t o = (k / inner) % outer;
        const int64_t s = k / (inner * outer);
        const int64_t begin = s * seg_len;
        const int64_t end = begin + seg_len < dim ? begin + seg_len : dim;
        const float *col = x + o * dim * inner + i; /* x[o, :, i], stride inner */
        double acc = 0.0;
        for (int64_t d = begin; d < end; d++) acc += (double)col[d * inner];
        if (segments == 1) out[o * inner + i] = (float)((double)scale * acc);
        else partial[k] = acc;
    }
}

/* out[j] = scale * sum_s partial[s * stride_s + j * stride_j], s in index order.
 * Traffic: S doubles read per output, 4 B written. */
static __global__ void sum_dim_finish_kernel(float *out, const double *partial, int64_t count,
                                             int64_t segments, int64_t stride_s, int64_t stride_j,
                                             float scale)
{
    SNN_GRID_STRIDE_LOOP(j, count) {
        double acc = 0.0;
        for (int64_t s = 0; s < segments; s++) acc += partial[s * stride_s + j * stride_j];
        out[j] = (float)((double)scale * acc);
    }
}

extern "C" void snn_sum_dim_cuda(float *out, const float *x, int64_t outer, int64_t dim,
                                 int64_t inner, float scale)
{
    const int64_t count = outer * inner; /* outputs */
    if (count <= 0) return;
    if (dim <= 0) { /* an empty sum is 0 */
        snn_fill_cuda(out, 0.0f, count);
        return;
    }
    const int64_t max_partials = (int64_t)(SNN_CUDA_SCRATCH_BYTES / sizeof(double));
    const int sms = snn_cuda_sm_count();

    if (inner == 1 && dim >= 64) {
        /* rows: aim at ~8 blocks per SM; a segment keeps >= 2048 elements */
        const int64_t want_blocks = (int64_t)sms * 8;
        int64_t segments = 1;
        if (outer < want_blocks) {
            segments = ceil_div(want_blocks, outer);
            const int64_t by_len = ceil_div(dim, 2048);
            if (segments > by_len) segments = by_len;
            if (segments * outer > max_partials) segments = max_partials / outer;
            if (segments < 1) segments = 1;
        }
        double *partial =
            segments > 1 ? (double *)snn_cuda_scratch((size_t)(segments * outer) * sizeof(double))
                         : NULL;
        const int64_t blocks = outer * segments;
        const unsigned grid = (unsigned)(blocks < (int64_t)sms * 32 ? blocks : (int64_t)sms * 32);
        SNN_CUDA_LAUNCH(sum_dim_rows_kernel, grid, REDUCE_BLOCK, 0, out, partial, x, outer, dim,
                        segments, scale);
        if (segments > 1)
            SNN_CUDA_LAUNCH(sum_dim_finish_kernel, snn_cuda_grid(outer, REDUCE_BLOCK), REDUCE_BLOCK,
                            0, out, partial, outer, segments, 1, segments, scale);
        return;
    }

    /* columns: aim at ~2048 threads per SM; a segment keeps >= 64 elements */
    const int64_t want_threads = (int64_t)sms * 2048;
    int64_t segments = 1;
    if (count * 4 < want_threads) {
        segments = ceil_div(want_threads, count);
        const int64_t by_len = ceil_div(dim, 64);
        if (segments > by_len) segments = by_len;
        if (segments * count > max_partials) segments = max_partials / count;
        if (segments < 1) segments = 1;
    }
    double *partial =
        segments > 1 ? (double *)snn_cuda_scratch((size_t)(segments * count) * sizeof(double))
                     : NULL;
    SNN_CUDA_LAUNCH(sum_dim_columns_kernel, snn_cuda_grid(segments * count, REDUCE_BLOCK),
                    REDUCE_BLOCK, 0, out, partial, x, outer, dim, inner, segments, scale);
    if (segments > 1)
        SNN_CUDA_LAUNCH(sum_dim_finish_kernel, snn_cuda_grid(count, REDUCE_BLOCK), REDUCE_BLOCK, 0,
                        out, partial, count, segments, count, 1, scale);
}

/* ---- expand_dim ------------------------------------------------------------------------------ */

/* out[o, d, i] (+)= scale x[o, i], one thread per out element.
 * Traffic: 4 B written (8 B read-modify-write when accumulating) per out element, x read
 * through the cache.  CPU: snn_expand_dim_cpu. */
static __global__ void expand_dim_forward_kernel(float *out, const float *x, int64_t outer,
                                                 int64_t dim, int64_t inner, float scale,
                                                 bool accumulate)
{
    SNN_GRID_STRIDE_LOOP(k, outer * dim * inner) {
        int64_t i, d;
        const int64_t o = snn_divmod(snn_divmod(k, inner, &i), dim, &d);
        const float v = scale * x[o * inner + i];
        if (accumulate) out[k] += v;
        else out[k] = v;
    }
}

extern "C" void snn_expand_dim_cuda(float *out, const float *x, int64_t outer, int64_t dim,
                                    int64_t inner, float scale, bool accumulate)
{
    const int64_t n = outer * dim * inner;
    if (n <= 0) return;
    SNN_CUDA_LAUNCH(expand_dim_forward_kernel, snn_cuda_grid(n, SNN_CUDA_BLOCK), SNN_CUDA_BLOCK, 0,
                    out, x, outer, dim, inner, scale, accumulate);
}

/* ---- sum of squares and finiteness ---------------------------------------------------------- */

/* Pass 1: block b sums x^2 (double) and counts non-finite values over a grid-stride share;
 * partial[b] = sum, partial[blocks + b] = count.  Traffic: 4 B read per element. */
static __global__ void sumsq_and_finite_partial_kernel(double *partial, const float *x, int64_t n)
{
    double sumsq = 0.0, bad = 0.0;
    SNN_GRID_STRIDE_LOOP(i, n) {
        const float v = x[i];
        sumsq += (double)v * (double)v;
        bad += isfinite(v) ? 0.0 : 1.0;
    }
    sumsq = snn_block_sum(sumsq);
    bad = snn_block_sum(bad);
    if (threadIdx.x == 0) {
        partial[blockIdx.x] = sumsq;
        partial[gridDim.x + blockIdx.x] = bad;
    }
}

/* Pass 2, one block: out[0] = sum of the partial sums, out[1] = 1 if any count > 0.
 * CPU: snn_sumsq_and_finite_cpu. */
static __global__ void sumsq_and_finite_finish_kernel(float *out, const double *partial, int blocks)
{
    double sumsq = 0.0, bad = 0.0;
    for (int b = threadIdx.x; b < blocks; b += blockDim.x) {
        sumsq += partial[b];
        bad += partial[blocks + b];
    }
    sumsq = snn_block_sum(sumsq);
    bad = snn_block_sum(bad);
    if (threadIdx.x == 0) {
        out[0] = (float)sumsq;
        out[1] = bad > 0.0 ? 1.0f : 0.0f;
    }
}

extern "C" void snn_sumsq_and_finite_cuda(float *out, const float *x, int64_t n)
{
    /* n = 0 still runs both passes, with empty loops: out = {0, 0} */
    int64_t blocks = ceil_div(n > 0 ? n : 1, (int64_t)REDUCE_BLOCK * 8);
    const int64_t cap = (int64_t)snn_cuda_sm_count() * 4;
    if (blocks > cap) blocks = cap;
    double *partial = (double *)snn_cuda_scratch((size_t)(2 * blocks) * sizeof(double));
    SNN_CUDA_LAUNCH(sumsq_and_finite_partial_kernel, (unsigned)blocks, REDUCE_BLOCK, 0, partial, x,
                    n);
    SNN_CUDA_LAUNCH(sumsq_and_finite_finish_kernel, 1, REDUCE_BLOCK, 0, out, partial, (int)blocks);
}

/* ---- argmax over rows ------------------------------------------------------------------------ */

/* (value, index) b replaces a when it is a candidate (index >= 0) and larger, or equal and
 * earlier: the first maximum wins, as the CPU's strict '>' scan. */
static __device__ __forceinline__ bool argmax_better(float vb, int ib, float va, int ia)
{
    return ib >= 0 && (ia < 0 || vb > va || (vb == va && ib < ia));
}

/* One warp per row of x (N, C): each lane scans a strided share, the warp combines.
 * NaNs are never candidates, and a NaN at x[n, 0] makes the answer 0, which is exactly what
 * the CPU's `if (row[c] > row[best])` from best = 0 returns.
 * Traffic: 4 B read per element, 4 B written per row.  CPU: snn_argmax_rows_cpu. */
static __global__ void argmax_rows_kernel(float *out, const float *x, int N, int C)
{
    const int lane = threadIdx.x & 31;
    const int warps_per_block = blockDim.x >> 5;
    for (int64_t n = (int64_t)blockIdx.x * warps_per_block + (threadIdx.x >> 5); n < N;
         n += (int64_t)gridDim.x * warps_per_block) {
        const float *row = x + n * C;
        float best = 0.0f;
        int at = -1;
        for (int c = lane; c < C; c += 32) {
            const float v = row[c];
            if (v == v && (at < 0 || v > best)) { /* v == v: not NaN */
                best = v;
                at = c;
            }
        }
        for (int offset = 16; offset > 0; offset >>= 1) {
            const float vo = __shfl_down_sync(0xffffffffu, best, offset);
            const int io = __shfl_down_sync(0xffffffffu, at, offset);
            if (argmax_better(vo, io, best, at)) {
                best = vo;
                at = io;
            }
        }
        if (lane == 0) {
            const bool first_is_nan = C > 0 && row[0] != row[0];
            out[n] = (float)(at < 0 || first_is_nan ? 0 : at);
        }
    }
}

extern "C" void snn_argmax_rows_cuda(float *out, const float *x, int N, int C)
{
    if (N <= 0) return;
    const int warps = REDUCE_BLOCK / 32;
    SNN_CUDA_LAUNCH(argmax_rows_kernel, snn_cuda_grid(N, warps), REDUCE_BLOCK, 0, out, x, N, C);
}
