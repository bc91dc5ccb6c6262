/*
 * loss.c - reference kernels of the classification losses: log-softmax, negative
 * log-likelihood and one-hot labels. Cross-entropy = nll(log_softmax(logits)).
 *
 * x, out, dout, dx, logp, dlogp (N, C): N rows (samples), C classes. labels (N) hold class
 * indices as floats (0.0f, 1.0f, ...); the op layer has checked them, so they are valid here.
 *
 *   log_softmax   out[n, c] = x[n, c] - m - log sum_j exp(x[n, j] - m),   m = max_j x[n, j]
 *                 (subtracting m changes nothing in exact arithmetic, and keeps exp finite)
 *                 dx[n, c] += dout[n, c] - exp(out[n, c]) sum_j dout[n, j]
 *   nll           loss[0] = -scale sum_n logp[n, labels[n]]     (scale 1/N: the mean)
 *                 dlogp[n, labels[n]] += -scale dloss[0]        (dloss: a device scalar)
 *   one_hot       out[n, c] = (c == labels[n])
 *
 * Row sums are in double. Memory traffic: each element read two or three times, written once.
 */
#include <math.h>

#include "kernels_ref.h"

void snn_log_softmax_forward_ref(float *out, const float *x, int N, int C)
{
    for (int n = 0; n < N; n++) {
        const float *xr = x + (int64_t)n * C;   // (C)
        float *orow = out + (int64_t)n * C;     // (C)
        float m = xr[0];
        for (int c = 1; c < C; c++) m = xr[c] > m ? xr[c] : m;
        double sum = 0.0;
        for (int c = 0; c < C; c++) sum += exp((double)xr[c] - (double)m);
        const double log_sum_exp = (double)m + log(sum);
        for (int c = 0; c < C; c++) orow[c] = (float)((double)xr[c] - log_sum_exp);
    }
}

void snn_log_softmax_backward_ref(float *dx, const float *dout, const float *out, int N, int C)
{
    if (!dx) return;
    for (int n = 0; n < N; n++) {
        const float *gr = dout + (int64_t)n * C;    // (C)
        const float *orow = out + (int64_t)n * C;   // (C)
        float *dxr = dx + (int64_t)n * C;           // (C)
        double sum = 0.0;
        for (int c = 0; c < C; c++) sum += (double)gr[c];
        for (int c = 0; c < C; c++)
            dxr[c] += (float)((double)gr[c] - exp((double)orow[c]) * sum);
    }
}

void snn_nll_forward_ref(float *loss, const float *logp, const float *labels, int N, int C,
                         float scale)
{
    double sum = 0.0;
    for (int n = 0; n < N; n++) sum += (double)logp[(int64_t)n * C + (int)labels[n]];
    loss[0] = (float)(-(double)scale * sum);
}

void snn_nll_backward_ref(float *dlogp, const float *dloss, const float *labels, int N, int C,
                          float scale)
{
    if (!dlogp) return;
    for (int n = 0; n < N; n++) dlogp[(int64_t)n * C + (int)labels[n]] += -scale * dloss[0];
}

void snn_one_hot_ref(float *out, const float *labels, int N, int C)
{
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++) out[(int64_t)n * C + c] = c == (int)labels[n] ? 1.0f : 0.0f;
}
