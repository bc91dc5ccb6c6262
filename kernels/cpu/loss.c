/*
 * loss.c - fast CPU kernels of the classification losses (kernels/kernels.h): log-softmax,
 * threaded over rows, and one-hot encoding. The negative log-likelihood gathers one element a
 * row, which no blocking or threading speeds up: the fast table takes the reference's
 * (kernels/ref/loss.c).
 *
 * Dimensions: N rows (samples), C classes. labels (N) hold class indices stored as floats
 * (0.0f, 1.0f, ...); the op layer checks that they are whole numbers in [0, C), so the kernels
 * assume valid labels. Cross-entropy = nll(log_softmax(logits)).
 *
 * log-softmax, per row, stable form (the max is subtracted before exp, so exp never overflows
 * and the largest term is exp(0) = 1, so the log never sees 0):
 *     out[c] = x[c] - m - log(sum_j exp(x[j] - m)),       m = max_j x[j]
 *     dx[c] += dout[c] - exp(out[c]) sum_j dout[j]        (softmax = exp(out), saved by forward)
 *
 * Sums over a row run in double in index order; rows are independent, so the OpenMP loop over
 * rows gives the same bits for any number of threads.
 *
 * Test: tests/test_loss_kernels.c (ctest -R loss_kernels).
 */
#include <math.h>
#include <string.h>

#include "cpu_threads.h"
#include "kernels_cpu.h"

/*
 * log-softmax forward. Memory traffic per element: x read twice (max pass, exp-sum pass) and
 * once more to write the output (the row is in cache): 12 B read, 4 B written; one exp per
 * element plus one log per row.
 */
void snn_log_softmax_forward_cpu(float *out, const float *x, int N, int C)
{
#pragma omp parallel for schedule(static) \
    num_threads(snn_cpu_threads((int64_t)N * C))
    for (int n = 0; n < N; n++) {
        const float *xr = x + (int64_t)n * C;   // (C)
        float *orow = out + (int64_t)n * C;     // (C)
        float m = xr[0];
        for (int c = 1; c < C; c++) m = xr[c] > m ? xr[c] : m;
        double sum = 0.0;
        for (int c = 0; c < C; c++) sum += (double)expf(xr[c] - m);
        /* m + log(sum) in double, rounded once, then subtracted per element */
        const float lse = (float)((double)m + log(sum));
        for (int c = 0; c < C; c++) orow[c] = xr[c] - lse;
    }
}

/*
 * log-softmax backward. Memory traffic per element: dout read twice, out read once, dx
 * read-modify-written: 12 B + 4 B read, 4 B written; one exp per element.
 */
void snn_log_softmax_backward_cpu(float *dx, const float *dout, const float *out, int N, int C)
{
    if (!dx) return;
#pragma omp parallel for schedule(static) \
    num_threads(snn_cpu_threads((int64_t)N * C))
    for (int n = 0; n < N; n++) {
        const float *gr = dout + (int64_t)n * C;   // (C)
        const float *orow = out + (int64_t)n * C;  // (C)
        float *dxr = dx + (int64_t)n * C;          // (C)
        double sum = 0.0;
        for (int c = 0; c < C; c++) sum += (double)gr[c];
        const float s = (float)sum;
        for (int c = 0; c < C; c++) dxr[c] += gr[c] - expf(orow[c]) * s;
    }
}

/* one-hot: out (N, C) = 0 except out[n, label[n]] = 1. Memory traffic: 4 B written per
 * element, N labels read. */
void snn_one_hot_cpu(float *out, const float *labels, int N, int C)
{
    memset(out, 0, (size_t)N * (size_t)C * sizeof *out);
    for (int n = 0; n < N; n++) out[(int64_t)n * C + (int)labels[n]] = 1.0f;
}
