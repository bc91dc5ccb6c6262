/*
 * reduce.c - CPU kernels that sum along one axis, expand along one, and scan rows.
 *
 * A tensor is viewed as (outer, dim, inner): summing over `dim` reads outer*dim*inner floats
 * and writes outer*inner. Sums accumulate in double, so a mean over 10^6 floats keeps ~1e-7
 * relative accuracy, and each output is summed by one thread in index order, so the result does
 * not depend on the thread count. The sum of squares (the gradient norm) runs over
 * fixed slices (snn_cpu_sum_slices), each summed in order, then the slices in order: the same
 * bits for any thread count too (an OpenMP reduction combines the threads' sums in arrival
 * order).
 */
#include <math.h>

#include "cpu_threads.h"
#include "kernels_cpu.h"

void snn_sum_dim_cpu(float *out, const float *x, int64_t outer, int64_t dim, int64_t inner,
                     float scale)
{
    if (inner == 1) {
        /* contiguous rows: one dot-product-like pass per output */
#pragma omp parallel for num_threads(outer > 1 ? snn_cpu_threads(outer * dim) : 1)
        for (int64_t o = 0; o < outer; o++) {
            const float *row = x + o * dim;
            double acc = 0.0;
            for (int64_t d = 0; d < dim; d++) acc += (double)row[d];
            out[o] = (float)((double)scale * acc);
        }
        return;
    }
    /* strided sums: walk each (o, chunk of inner) block row by row, so every load is
     * contiguous, accumulating a chunk of `inner` in doubles on the stack */
    enum { CHUNK = 256 };
    int64_t chunks = (inner + CHUNK - 1) / CHUNK;
#pragma omp parallel for collapse(2) \
    num_threads(snn_cpu_threads(outer * dim * inner))
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t ch = 0; ch < chunks; ch++) {
            int64_t i0 = ch * CHUNK, len = inner - i0 < CHUNK ? inner - i0 : CHUNK;
            double acc[CHUNK];
            for (int64_t i = 0; i < len; i++) acc[i] = 0.0;
            for (int64_t d = 0; d < dim; d++) {
                const float *row = x + (o * dim + d) * inner + i0;
                for (int64_t i = 0; i < len; i++) acc[i] += (double)row[i];
            }
            for (int64_t i = 0; i < len; i++) out[o * inner + i0 + i] = (float)((double)scale * acc[i]);
        }
    }
}

void snn_expand_dim_cpu(float *out, const float *x, int64_t outer, int64_t dim, int64_t inner,
                        float scale, bool accumulate)
{
#pragma omp parallel for collapse(2) \
    num_threads(snn_cpu_threads(outer * dim * inner))
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t d = 0; d < dim; d++) {
            float *dst = out + (o * dim + d) * inner;
            const float *src = x + o * inner;
            if (accumulate)
                for (int64_t i = 0; i < inner; i++) dst[i] += scale * src[i];
            else
                for (int64_t i = 0; i < inner; i++) dst[i] = scale * src[i];
        }
    }
}

/* sum of x[i]^2 over the slice, in double */
static double sumsq_slice(void *ctx, int64_t begin, int64_t end)
{
    const float *x = ctx;
    double sumsq = 0.0;
    for (int64_t i = begin; i < end; i++) sumsq += (double)x[i] * (double)x[i];
    return sumsq;
}

void snn_sumsq_and_finite_cpu(float *out, const float *x, int64_t n)
{
    /* In double the sum of squares of finite floats stays finite (each term < 1.2e77), so it is
     * infinite or NaN exactly when some x[i] is. */
    const double sumsq = snn_cpu_sum_slices(n, n, sumsq_slice, (void *)x);
    const int nonfinite = !isfinite(sumsq);
    out[0] = (float)sumsq;
    out[1] = nonfinite ? 1.0f : 0.0f;
}

void snn_argmax_rows_cpu(float *out, const float *x, int N, int C)
{
    for (int n = 0; n < N; n++) {
        const float *row = x + (int64_t)n * C;
        int best = 0;
        for (int c = 1; c < C; c++)
            if (row[c] > row[best]) best = c;
        out[n] = (float)best;
    }
}
