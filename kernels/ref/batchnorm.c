/*
 * batchnorm.c - reference batch normalisation over (N, C, HW), training and eval, channel by
 * channel. The pieces that data-parallel ranks use to share its statistics (--sync-bn) are
 * batchnorm_sync.c, made of the same per-channel functions (batchnorm_channel.h).
 *
 * x, out, dout, dx (N, C, HW) (N = T*N for multi-step data, HW = H*W, 1 for BatchNorm1d);
 * gamma, beta, running_mean, running_var, save_mean, save_invstd (C). Channel c is normalised
 * over its M = N HW values (S. Ioffe, C. Szegedy, arXiv:1502.03167; PyTorch's conventions).
 *
 * Training forward, per channel:
 *   mean = (1/M) sum x      var = (1/M) sum (x - mean)^2 (biased)     invstd = 1 / sqrt(var + eps)
 *   out  = gamma (x - mean) invstd + beta
 *   running_mean <- (1 - momentum) running_mean + momentum mean
 *   running_var  <- (1 - momentum) running_var  + momentum var M / (M - 1)     (unbiased)
 * Eval forward:
 *   out = gamma (x - running_mean) / sqrt(running_var + eps) + beta
 * Training backward, through the batch statistics too (xhat = (x - mean) invstd):
 *   dbeta  += sum dout          dgamma += sum dout xhat
 *   dx     += gamma invstd (dout - (1/M) sum dout - xhat (1/M) sum dout xhat)
 * In place (backward_in_place): dout is read from dx, whose values are then replaced by the
 * last line's right side (added to 0); x may be bfloat16 bits instead.
 *
 * gamma, beta (affine = False) and the running statistics may be NULL; NULL gradients are
 * skipped. Sums and statistics are in double; the variance is a second pass over x - mean,
 * never E[x^2] - mean^2 (which cancels when |mean| >> std).
 * Memory traffic: training forward reads x three times and writes out once; backward reads
 * dout and x twice and read-modify-writes dx; eval reads x once and writes out once.
 */
#include <math.h>

#include "batchnorm_channel.h"
#include "kernels_ref.h"

/* Where image n's plane of channel c starts: its HW values follow. */
static int64_t plane_at(int n, int c, int C, int HW) { return ((int64_t)n * C + c) * HW; }

/* Element i of x, or (x NULL) of x_bf16's values (exact: a bf16 is the top half of an fp32). */
static double value_at(const float *x, const uint16_t *x_bf16, int64_t i)
{
    return x ? (double)x[i] : (double)snn_bf16_value(x_bf16[i]);
}

/* Channel c's (count, mean, M2) by two passes over its N planes. */
void snn_batchnorm_channel_stats_ref(double stats[3], const float *x, const uint16_t *x_bf16,
                                     int c, int N, int C, int HW)
{
    const int64_t M = (int64_t)N * HW;
    double sum = 0.0, M2 = 0.0;
    for (int n = 0; n < N; n++) {
        const int64_t at = plane_at(n, c, C, HW);   // its (HW) values
        for (int i = 0; i < HW; i++) sum += value_at(x, x_bf16, at + i);
    }
    const double mean = M > 0 ? sum / (double)M : 0.0;
    for (int n = 0; n < N; n++) {
        const int64_t at = plane_at(n, c, C, HW);
        for (int i = 0; i < HW; i++) {
            const double v = value_at(x, x_bf16, at + i);
            M2 += (v - mean) * (v - mean);
        }
    }
    stats[0] = (double)M, stats[1] = mean, stats[2] = M2;
}

/* save_mean, save_invstd and the running statistics of channel c from its (count, mean, M2). */
void snn_batchnorm_set_stats_ref(float *save_mean, float *save_invstd, float *running_mean,
                                 float *running_var, const double stats[3], int c,
                                 float momentum, float eps)
{
    const double count = stats[0], mean = stats[1], M2 = stats[2];
    const double var = count > 0.0 ? M2 / count : 0.0;
    save_mean[c] = (float)mean;
    save_invstd[c] = (float)(1.0 / sqrt(var + (double)eps));
    if (running_mean)
        running_mean[c] = (1.0f - momentum) * running_mean[c] + momentum * (float)mean;
    if (running_var) {
        /* Bessel's correction; a single value has no spread to correct */
        const double unbiased = count > 1.0 ? M2 / (count - 1.0) : var;
        running_var[c] = (1.0f - momentum) * running_var[c] + momentum * (float)unbiased;
    }
}

/* out = gamma (x - mean) invstd + beta over channel c */
void snn_batchnorm_normalise_channel_ref(float *out, const float *x, double mean, float invstd,
                                         const float *gamma, const float *beta, int c, int N,
                                         int C, int HW)
{
    const double g = gamma ? (double)gamma[c] : 1.0, b = beta ? (double)beta[c] : 0.0;
    for (int n = 0; n < N; n++) {
        const float *xp = x + plane_at(n, c, C, HW);   // (HW)
        float *op = out + plane_at(n, c, C, HW);       // (HW)
        for (int i = 0; i < HW; i++)
            op[i] = (float)(g * (((double)xp[i] - mean) * (double)invstd) + b);
    }
}

/* sums[0..1] = (sum dout, sum dout (x - mean)) over channel c */
void snn_batchnorm_grad_sums_ref(double sums[2], const float *dout, const float *x, float mean,
                                 int c, int N, int C, int HW)
{
    sums[0] = sums[1] = 0.0;
    for (int n = 0; n < N; n++) {
        const float *gp = dout + plane_at(n, c, C, HW);   // (HW)
        const float *xp = x + plane_at(n, c, C, HW);      // (HW)
        for (int i = 0; i < HW; i++) {
            sums[0] += (double)gp[i];
            sums[1] += (double)gp[i] * ((double)xp[i] - (double)mean);
        }
    }
}

/* dx += gamma invstd (dout - sum_dy / M - xhat sum_dy_xhat / M) over channel c, where
 * sum_dy_xhat = invstd sum_dy_dev; the sums are those of all M values (all ranks). */
void snn_batchnorm_input_grad_ref(float *dx, const float *dout, const float *x,
                                  const float *gamma, float mean, float invstd, double sum_dy,
                                  double sum_dy_dev, double M, int c, int N, int C, int HW)
{
    const double a = (gamma ? (double)gamma[c] : 1.0) * (double)invstd;
    const double sum_dy_xhat = sum_dy_dev * (double)invstd;
    for (int n = 0; n < N; n++) {
        const float *gp = dout + plane_at(n, c, C, HW);   // (HW)
        const float *xp = x + plane_at(n, c, C, HW);      // (HW)
        float *dxp = dx + plane_at(n, c, C, HW);          // (HW)
        for (int i = 0; i < HW; i++) {
            const double xhat = ((double)xp[i] - (double)mean) * (double)invstd;
            dxp[i] += (float)(a * ((double)gp[i] - sum_dy / M - xhat * sum_dy_xhat / M));
        }
    }
}

/* ---- the kernels: every channel in turn ---------------------------------------------------- */

void snn_batchnorm_forward_train_ref(float *out, float *save_mean, float *save_invstd,
                                     float *running_mean, float *running_var, const float *x,
                                     const float *gamma, const float *beta, int N, int C, int HW,
                                     float momentum, float eps)
{
    for (int c = 0; c < C; c++) {
        double stats[3];
        snn_batchnorm_channel_stats_ref(stats, x, NULL, c, N, C, HW);
        snn_batchnorm_set_stats_ref(save_mean, save_invstd, running_mean, running_var, stats, c,
                                    momentum, eps);
        snn_batchnorm_normalise_channel_ref(out, x, stats[1], save_invstd[c], gamma, beta, c, N,
                                            C, HW);
    }
}

void snn_batchnorm_forward_eval_ref(float *out, const float *x, const float *gamma,
                                    const float *beta, const float *running_mean,
                                    const float *running_var, int N, int C, int HW, float eps)
{
    for (int c = 0; c < C; c++) {
        const double invstd = 1.0 / sqrt((double)running_var[c] + (double)eps);
        const double g = gamma ? (double)gamma[c] : 1.0, b = beta ? (double)beta[c] : 0.0;
        for (int n = 0; n < N; n++) {
            const float *xp = x + plane_at(n, c, C, HW);   // (HW)
            float *op = out + plane_at(n, c, C, HW);       // (HW)
            for (int i = 0; i < HW; i++)
                op[i] = (float)(g * ((double)xp[i] - (double)running_mean[c]) * invstd + b);
        }
    }
}

void snn_batchnorm_backward_ref(float *dx, float *dgamma, float *dbeta, const float *dout,
                                const float *x, const float *gamma, const float *save_mean,
                                const float *save_invstd, int N, int C, int HW)
{
    for (int c = 0; c < C; c++) {
        double sums[2];
        snn_batchnorm_grad_sums_ref(sums, dout, x, save_mean[c], c, N, C, HW);
        if (dbeta) dbeta[c] += (float)sums[0];
        if (dgamma) dgamma[c] += (float)(sums[1] * (double)save_invstd[c]);
        if (dx)
            snn_batchnorm_input_grad_ref(dx, dout, x, gamma, save_mean[c], save_invstd[c],
                                         sums[0], sums[1], (double)N * HW, c, N, C, HW);
    }
}

/* x[i] of a batch-norm input kept as fp32 (x) or as bfloat16 (x_bf16, read where x is NULL) */
static float input_value(const float *x, const uint16_t *x_bf16, int64_t i)
{
    return x ? x[i] : snn_bf16_value(x_bf16[i]);
}

/* Channel c of the in-place backward from its sums (sum dout, sum dout (x - mean), count):
 * dbeta, dgamma += from them, then each value of dx (= dout) replaced, as
 * snn_batchnorm_input_grad_ref adds it to 0 */
static void in_place_channel(float *dx, float *dgamma, float *dbeta, const float *x,
                             const uint16_t *x_bf16, const float *gamma, const float *save_mean,
                             const float *save_invstd, const double sums[3], int c, int N, int C,
                             int HW)
{
    const double mean = (double)save_mean[c], invstd = (double)save_invstd[c];
    const double sum_dy = sums[0], sum_dy_dev = sums[1], M = sums[2];
    if (dbeta) dbeta[c] += (float)sum_dy;
    if (dgamma) dgamma[c] += (float)(sum_dy_dev * invstd);
    if (!dx) return; /* (batchnorm_backward_in_place_sums: dgamma and dbeta alone) */
    const double a = (gamma ? (double)gamma[c] : 1.0) * invstd;
    const double sum_dy_xhat = sum_dy_dev * invstd;
    for (int n = 0; n < N; n++)
        for (int i = 0; i < HW; i++) {
            const int64_t at = plane_at(n, c, C, HW) + i;
            const double xhat = ((double)input_value(x, x_bf16, at) - mean) * invstd;
            const double dy = (double)dx[at];
            dx[at] = 0.0f + (float)(a * (dy - sum_dy / M - xhat * sum_dy_xhat / M));
        }
}

void snn_batchnorm_backward_in_place_ref(float *dx, float *dgamma, float *dbeta, const float *x,
                                         const uint16_t *x_bf16, const float *gamma,
                                         const float *save_mean, const float *save_invstd, int N,
                                         int C, int HW)
{
    for (int c = 0; c < C; c++) {
        /* the sums of batchnorm_backward over dout (= dx, untouched yet), then dx from them */
        const double mean = (double)save_mean[c];
        double sums[3] = {0.0, 0.0, (double)N * HW};
        for (int n = 0; n < N; n++)
            for (int i = 0; i < HW; i++) {
                const int64_t at = plane_at(n, c, C, HW) + i;
                sums[0] += (double)dx[at];
                sums[1] += (double)dx[at] * ((double)input_value(x, x_bf16, at) - mean);
            }
        in_place_channel(dx, dgamma, dbeta, x, x_bf16, gamma, save_mean, save_invstd, sums, c, N,
                         C, HW);
    }
}

void snn_batchnorm_backward_in_place_sums_ref(float *dx, float *dgamma, float *dbeta,
                                              const float *x, const uint16_t *x_bf16,
                                              const float *gamma, const float *save_mean,
                                              const float *save_invstd, const double *sums, int N,
                                              int C, int HW)
{
    for (int c = 0; c < C; c++)
        in_place_channel(dx, dgamma, dbeta, x, x_bf16, gamma, save_mean, save_invstd,
                         sums + 3 * c, c, N, C, HW);
}
