/*
 * reduce.c - reference kernels that sum along one axis, copy along one, and scan rows.
 *
 * The tensor is viewed as x (outer, dim, inner):
 *   sum_dim      out[o, i] = scale sum_d x[o, d, i]                  out (outer, inner)
 *   expand_dim   out[o, d, i] (+)= scale x[o, i]                     out (outer, dim, inner)
 *                (= on the forward of a repeat, += as the backward of sum_dim)
 * and over flat arrays and rows:
 *   sumsq_and_finite  out[0] = sum_i x[i]^2,  out[1] = 1 if some x[i] is NaN or inf, else 0
 *   argmax_rows       out[n] = the first c with x[n, c] = max_c x[n, :]     x (N, C), out (N)
 *
 * Sums run in double: a mean over 10^6 floats then keeps float accuracy.
 * Memory traffic: each input element is read once; the outputs are written once.
 */
#include <math.h>

#include "kernels_ref.h"

void snn_sum_dim_ref(float *out, const float *x, int64_t outer, int64_t dim, int64_t inner,
                     float scale)
{
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t i = 0; i < inner; i++) {
            double sum = 0.0;
            for (int64_t d = 0; d < dim; d++) sum += (double)x[(o * dim + d) * inner + i];
            out[o * inner + i] = (float)((double)scale * sum);
        }
    }
}

void snn_expand_dim_ref(float *out, const float *x, int64_t outer, int64_t dim, int64_t inner,
                        float scale, bool accumulate)
{
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t d = 0; d < dim; d++) {
            float *dst = out + (o * dim + d) * inner;   // (inner)
            const float *src = x + o * inner;           // (inner)
            for (int64_t i = 0; i < inner; i++)
                dst[i] = accumulate ? dst[i] + scale * src[i] : scale * src[i];
        }
    }
}

void snn_sumsq_and_finite_ref(float *out, const float *x, int64_t n)
{
    double sumsq = 0.0;
    bool finite = true;
    for (int64_t i = 0; i < n; i++) {
        sumsq += (double)x[i] * (double)x[i];
        finite = finite && isfinite(x[i]);
    }
    out[0] = (float)sumsq;
    out[1] = finite ? 0.0f : 1.0f;
}

void snn_argmax_rows_ref(float *out, const float *x, int N, int C)
{
    for (int n = 0; n < N; n++) {
        const float *row = x + (int64_t)n * C;   // (C)
        int best = 0;
        for (int c = 1; c < C; c++)
            if (row[c] > row[best]) best = c;    /* strict: the first maximum wins ties */
        out[n] = (float)best;
    }
}
