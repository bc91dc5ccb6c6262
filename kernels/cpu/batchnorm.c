/*
 * batchnorm.c - CPU reference kernels of batch normalisation over (N, C, HW) (kernels/kernels.h).
 *
 * Dimensions: N batch (T*N for multi-step data), C channels, HW = H*W positions per plane
 * (HW = 1 for a BatchNorm1d over (N, C)). Each channel c is normalised over its M = N*HW values.
 * Follows S. Ioffe, C. Szegedy, "Batch Normalization", 2015 (arXiv:1502.03167), with PyTorch's
 * conventions for the running statistics.
 *
 * Training forward, per channel c:
 *     mean   = (1/M) sum x                       var = (1/M) sum (x - mean)^2   (biased)
 *     invstd = 1 / sqrt(var + eps)               xhat = (x - mean) invstd
 *     out    = gamma xhat + beta
 *     running_mean <- (1 - momentum) running_mean + momentum mean
 *     running_var  <- (1 - momentum) running_var  + momentum var M / (M - 1)    (unbiased)
 *   save_mean and save_invstd keep mean and invstd for the backward.
 * Eval forward:
 *     out = gamma (x - running_mean) / sqrt(running_var + eps) + beta
 * Training backward (the gradient flows through mean and var too):
 *     dbeta  += sum dout                         dgamma += sum dout xhat
 *     dx     += gamma invstd / M (M dout - sum dout - xhat sum dout xhat)
 *
 * Accuracy: the per-channel sums run in double, in 8 interleaved partial sums that are combined
 * pairwise (a fixed order, so the result does not depend on threads, and one the compiler can
 * vectorise without -ffast-math). The variance is a second pass over x - mean, not
 * E[x^2] - mean^2, which cancels catastrophically when |mean| >> std.
 *
 * The saved mean is a float (as in PyTorch), so the backward sees xhat to float precision of
 * the mean: relative error ~ 6e-8 |mean| / std in its sums, harmless unless |mean| >> std.
 *
 * gamma / beta may be NULL (affine = False: gamma = 1, beta = 0); running_mean / running_var
 * may be NULL (no running statistics); NULL gradient outputs are skipped.
 *
 * Threads: one channel per iteration of an OpenMP loop (training; channels are independent),
 * or one (n, c) plane (eval). No atomics; fixed summation order.
 *
 * Test: tests/test_batchnorm_kernels.c (ctest -R batchnorm_kernels).
 */
#include <math.h>

#include "kernels/chan_merge.h"
#include "kernels/ref/kernels_ref.h"
#include "cpu_threads.h"
#include "kernels_cpu.h"

/* ---- fixed-order double sums ---------------------------------------------------------------- */

#define BN_LANES 8

static double combine_lanes(const double acc[BN_LANES])
{
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

/* acc += the lanes of sum_i x[i] (a run of n < BN_LANES left over goes to lane 0) */
static void sum_f64_into(double acc[BN_LANES], const float *x, int64_t n)
{
    int64_t i = 0;
    for (; i + BN_LANES <= n; i += BN_LANES)
        for (int j = 0; j < BN_LANES; j++) acc[j] += (double)x[i + j];
    for (; i < n; i++) acc[0] += (double)x[i];
}

/* sum_i x[i] */
static double sum_f64(const float *x, int64_t n)
{
    double acc[BN_LANES] = {0};
    sum_f64_into(acc, x, n);
    return combine_lanes(acc);
}

/* acc += the lanes of sum_i (x[i] - mean)^2 */
static void sum_sq_dev_f64_into(double acc[BN_LANES], const float *x, double mean, int64_t n)
{
    int64_t i = 0;
    for (; i + BN_LANES <= n; i += BN_LANES) {
        for (int j = 0; j < BN_LANES; j++) {
            double dev = (double)x[i + j] - mean;
            acc[j] += dev * dev;
        }
    }
    for (; i < n; i++) {
        double dev = (double)x[i] - mean;
        acc[0] += dev * dev;
    }
}

/* sum_i (x[i] - mean)^2 */
static double sum_sq_dev_f64(const float *x, double mean, int64_t n)
{
    double acc[BN_LANES] = {0};
    sum_sq_dev_f64_into(acc, x, mean, n);
    return combine_lanes(acc);
}

/* sum_i dout[i] (x[i] - mean) */
static void dot_dev_lanes(double acc[BN_LANES], const float *dout, const float *x, double mean,
                          int64_t n)
{
    int64_t i = 0;
    for (; i + BN_LANES <= n; i += BN_LANES)
        for (int j = 0; j < BN_LANES; j++)
            acc[j] += (double)dout[i + j] * ((double)x[i + j] - mean);
    for (; i < n; i++) acc[0] += (double)dout[i] * ((double)x[i] - mean);
}

/* ---- training forward ----------------------------------------------------------------------- */

/*
 * Memory traffic per element: x is read three times (mean pass, variance pass, normalise pass;
 * the second and third reads hit cache when one channel, N*HW*4 bytes, fits in L2), out written
 * once: 12 B read + 4 B written, plus O(C) for the statistics.
 */
void snn_batchnorm_forward_train_cpu(float *out, float *save_mean, float *save_invstd,
                                     float *running_mean, float *running_var, const float *x,
                                     const float *gamma, const float *beta, int N, int C, int HW,
                                     float momentum, float eps)
{
    const int64_t M = (int64_t)N * HW;       /* values per channel */
    const int64_t plane_stride = (int64_t)C * HW;

#pragma omp parallel for schedule(static) num_threads(snn_cpu_threads(M * C))
    for (int c = 0; c < C; c++) {
        /* pass 1: mean */
        double sum = 0.0;
        for (int n = 0; n < N; n++) sum += sum_f64(x + n * plane_stride + (int64_t)c * HW, HW);
        const double mean = sum / (double)M;

        /* pass 2: biased variance about the mean */
        double sq = 0.0;
        for (int n = 0; n < N; n++)
            sq += sum_sq_dev_f64(x + n * plane_stride + (int64_t)c * HW, mean, HW);
        const double var = sq / (double)M;
        const double invstd = 1.0 / sqrt(var + (double)eps);

        save_mean[c] = (float)mean;
        save_invstd[c] = (float)invstd;
        if (running_mean) {
            running_mean[c] = (1.0f - momentum) * running_mean[c] + momentum * (float)mean;
        }
        if (running_var) {
            /* Bessel's correction; a single value per channel has no spread to correct */
            const double unbiased = M > 1 ? sq / (double)(M - 1) : var;
            running_var[c] = (1.0f - momentum) * running_var[c] + momentum * (float)unbiased;
        }

        /* pass 3: out = (x - mean) * (gamma invstd) + beta. The mean is split into a float
         * head and tail, mean = hi + lo: x - hi is exact when x is near the mean (Sterbenz), so
         * xhat keeps its digits even when |mean| >> std; a plain float mean would lose them. */
        const float mean_hi = save_mean[c];
        const float mean_lo = (float)(mean - (double)mean_hi);
        const float scale = (gamma ? gamma[c] : 1.0f) * save_invstd[c];
        const float shift = beta ? beta[c] : 0.0f;
        for (int n = 0; n < N; n++) {
            const float *xp = x + n * plane_stride + (int64_t)c * HW;    // (HW)
            float *op = out + n * plane_stride + (int64_t)c * HW;        // (HW)
            for (int64_t i = 0; i < HW; i++) op[i] = ((xp[i] - mean_hi) - mean_lo) * scale + shift;
        }
    }
}

/* ---- eval forward --------------------------------------------------------------------------- */

/* Memory traffic per element: 4 B read, 4 B written; a streaming affine map per channel. */
void snn_batchnorm_forward_eval_cpu(float *out, const float *x, const float *gamma,
                                    const float *beta, const float *running_mean,
                                    const float *running_var, int N, int C, int HW, float eps)
{
    const int64_t planes = (int64_t)N * C;

#pragma omp parallel for schedule(static) num_threads(snn_cpu_threads(planes * HW))
    for (int64_t plane = 0; plane < planes; plane++) {
        const int c = (int)(plane % C);
        const float scale = (gamma ? gamma[c] : 1.0f) / sqrtf(running_var[c] + eps);
        const float shift = beta ? beta[c] : 0.0f;
        const float mean = running_mean[c];
        const float *xp = x + plane * HW;    // (HW)
        float *op = out + plane * HW;        // (HW)
        for (int64_t i = 0; i < HW; i++) op[i] = (xp[i] - mean) * scale + shift;
    }
}

/* ---- training backward ---------------------------------------------------------------------- */

/*
 * Memory traffic per element: pass 1 reads dout and x (8 B), pass 2 reads them again (8 B,
 * from cache when a channel fits) and read-modify-writes dx (4 B + 4 B): 20 B read, 4 B written.
 * In place (dx is dout; x as fp32 or bf16): pass 1 reads 8 or 6 B, pass 2 as much again and
 * writes dx (4 B).
 */

/* n values of x from `at` as floats: x itself, or x_bf16 unpacked into `buf` (BF16_CHUNK
 * floats, which the caller gives; a multiple of BN_LANES, so that sums a chunk at a time add
 * in the order of one pass) */
#define BF16_CHUNK 256
static const float *input_values(const float *x, const uint16_t *x_bf16, int64_t at, int64_t n,
                                 float *buf)
{
    if (x) return x + at;
    snn_unpack_bf16_ref(buf, x_bf16 + at, n);
    return buf;
}

/* Pass 1 of the backward over channel c: sum dout and sum dout (x - mean), plane by plane (x
 * as floats, or bf16 bits unpacked BF16_CHUNK at a time into buf). */
static void channel_dy_sums(double out[2], const float *dout, const float *x,
                            const uint16_t *x_bf16, float mean, int c, int N, int C, int HW,
                            float *buf)
{
    double sum_dy = 0.0, sum_dy_dev = 0.0;
    for (int n = 0; n < N; n++) {
        const int64_t plane = ((int64_t)n * C + c) * HW;
        sum_dy += sum_f64(dout + plane, HW);
        double acc[BN_LANES] = {0};
        for (int64_t i = 0; i < HW; i += BF16_CHUNK) {
            const int64_t len = HW - i < BF16_CHUNK ? HW - i : BF16_CHUNK;
            const float *xp = input_values(x, x_bf16, plane + i, len, buf);
            dot_dev_lanes(acc, dout + plane + i, xp, (double)mean, len);
        }
        sum_dy_dev += combine_lanes(acc);
    }
    out[0] = sum_dy, out[1] = sum_dy_dev;
}

/* batchnorm_backward and batchnorm_backward_in_place (dout NULL: dx holds it; then dx is
 * replaced, not added to); with sums (C, 3) given, pass 1 is not run and they are used
 * (batchnorm_backward_in_place_sums). */
static void backward(float *dx, float *dgamma, float *dbeta, const float *dout, const float *x,
                     const uint16_t *x_bf16, const float *gamma, const float *save_mean,
                     const float *save_invstd, const double *sums, int N, int C, int HW)
{
    const bool in_place = dout == NULL;
    if (in_place) dout = dx;
    const int64_t M = (int64_t)N * HW;
    const int64_t plane_stride = (int64_t)C * HW;

#pragma omp parallel for schedule(static) num_threads(snn_cpu_threads(M * C))
    for (int c = 0; c < C; c++) {
        const float mean = save_mean[c];
        const float invstd = save_invstd[c];
        float buf[BF16_CHUNK];

        /* pass 1 (unless given): sum dout and sum dout xhat = invstd sum dout (x - mean) */
        double dy_sums[2];
        if (sums) dy_sums[0] = sums[3 * c], dy_sums[1] = sums[3 * c + 1];
        else channel_dy_sums(dy_sums, dout, x, x_bf16, mean, c, N, C, HW, buf);
        const double sum_dy = dy_sums[0], sum_dy_dev = dy_sums[1];
        const double sum_dy_xhat = sum_dy_dev * (double)invstd;
        if (dbeta) dbeta[c] += (float)sum_dy;
        if (dgamma) dgamma[c] += (float)sum_dy_xhat;
        if (!dx) continue;

        /* pass 2: dx += gamma invstd (dout - mean(dout) - xhat mean(dout xhat)) */
        const float a = (gamma ? gamma[c] : 1.0f) * invstd;
        const float mean_dy = (float)(sum_dy / (double)M);
        /* xhat mean(dout xhat) = (x - mean) * (invstd mean(dout xhat)) */
        const float k = (float)(sum_dy_xhat / (double)M * (double)invstd);
        for (int n = 0; n < N; n++)
            for (int64_t i = 0; i < HW; i += BF16_CHUNK) {
                const int64_t at = n * plane_stride + (int64_t)c * HW + i;
                const int64_t len = HW - i < BF16_CHUNK ? HW - i : BF16_CHUNK;
                const float *dop = dout + at, *xp = input_values(x, x_bf16, at, len, buf);
                float *dxp = dx + at;                                          // (len)
                for (int64_t j = 0; j < len; j++) {
                    const float base = in_place ? 0.0f : dxp[j]; /* replaced: added to 0 */
                    dxp[j] = base + a * (dop[j] - mean_dy - (xp[j] - mean) * k);
                }
            }
    }
}

void snn_batchnorm_backward_cpu(float *dx, float *dgamma, float *dbeta, const float *dout,
                                const float *x, const float *gamma, const float *save_mean,
                                const float *save_invstd, int N, int C, int HW)
{
    if (!dx && !dgamma && !dbeta) return;
    backward(dx, dgamma, dbeta, dout, x, NULL, gamma, save_mean, save_invstd, NULL, N, C, HW);
}

void snn_batchnorm_backward_in_place_cpu(float *dx, float *dgamma, float *dbeta, const float *x,
                                         const uint16_t *x_bf16, const float *gamma,
                                         const float *save_mean, const float *save_invstd, int N,
                                         int C, int HW)
{
    backward(dx, dgamma, dbeta, NULL, x, x_bf16, gamma, save_mean, save_invstd, NULL, N, C, HW);
}

void snn_batchnorm_backward_in_place_sums_cpu(float *dx, float *dgamma, float *dbeta,
                                              const float *x, const uint16_t *x_bf16,
                                              const float *gamma, const float *save_mean,
                                              const float *save_invstd, const double *sums, int N,
                                              int C, int HW)
{
    backward(dx, dgamma, dbeta, NULL, x, x_bf16, gamma, save_mean, save_invstd, sums, N, C, HW);
}

/* ---- across data-parallel ranks (sync-BN) --------------------------------------------------- */

/*
 * The training forward and backward above, cut where data-parallel ranks exchange per-channel
 * sums (distributed/, snn-train --sync-bn): every rank has M_r values of channel c, and the statistics
 * are those of all sum_r M_r values together.
 *
 *   forward:  stats = (M_r, mean_r, M2_r) on each rank -> all-gather -> merge (Chan et al.'s
 *             update, in rank order) -> the same tail as the fused forward -> normalise
 *   backward: (sum dout, sum dout (x - mean), M_r) on each rank -> all-reduce (sum) -> dgamma
 *             and dbeta from this rank's sums (the gradient all-reduce adds the ranks' shares),
 *             dx from the global ones
 *
 * Merging two sets a, b: Chan et al.'s update (chan_merge.h, shared with the CUDA kernels).
 * With one rank, n_a = 0 makes the merge exact, so the pieces give the fused kernels' bits
 * (tests/test_batchnorm_kernels.c checks it).
 */

/* A plane's sum, or (squares) sum of squared deviations from mean, of HW values of x_bf16 from
 * `at`: unpacked BF16_CHUNK at a time into the lanes of one pass, so the same sum as the floats'
 * (sum_f64, sum_sq_dev_f64) */
static double plane_sum_bf16(const uint16_t *x_bf16, int64_t at, int64_t HW, bool squares,
                             double mean)
{
    double acc[BN_LANES] = {0};
    float buf[BF16_CHUNK];
    for (int64_t i = 0; i < HW; i += BF16_CHUNK) {
        const int64_t len = HW - i < BF16_CHUNK ? HW - i : BF16_CHUNK;
        const float *v = input_values(NULL, x_bf16, at + i, len, buf);
        if (squares) sum_sq_dev_f64_into(acc, v, mean, len);
        else sum_f64_into(acc, v, len);
    }
    return combine_lanes(acc);
}

/* Passes 1-2 of snn_batchnorm_forward_train_cpu: stats (C, 3) = (M, mean, M2). */
void snn_batchnorm_stats_cpu(double *stats, const float *x, const uint16_t *x_bf16, int N, int C,
                             int HW)
{
    const int64_t M = (int64_t)N * HW;
    const int64_t plane_stride = (int64_t)C * HW;

#pragma omp parallel for schedule(static) num_threads(snn_cpu_threads(M * C))
    for (int c = 0; c < C; c++) {
        double sum = 0.0;
        for (int n = 0; n < N; n++) {
            const int64_t at = n * plane_stride + (int64_t)c * HW;
            sum += x ? sum_f64(x + at, HW) : plane_sum_bf16(x_bf16, at, HW, false, 0.0);
        }
        const double mean = M > 0 ? sum / (double)M : 0.0;
        double sq = 0.0;
        for (int n = 0; n < N; n++) {
            const int64_t at = n * plane_stride + (int64_t)c * HW;
            sq += x ? sum_sq_dev_f64(x + at, mean, HW) : plane_sum_bf16(x_bf16, at, HW, true, mean);
        }
        stats[3 * c] = (double)M;
        stats[3 * c + 1] = mean;
        stats[3 * c + 2] = sq;
    }
}

void snn_batchnorm_stats_merge_cpu(double *merged, float *save_mean, float *save_invstd,
                                   float *running_mean, float *running_var, const double *stats,
                                   int R, int C, float momentum, float eps)
{
    for (int c = 0; c < C; c++) {
        double n_a = 0.0, mean = 0.0, M2 = 0.0;
        for (int r = 0; r < R; r++) {
            const double *s = stats + ((int64_t)r * C + c) * 3;   // (count, mean, M2)
            if (s[0] > 0.0) snn_chan_merge(&n_a, &mean, &M2, s[0], s[1], s[2]);
        }
        merged[3 * c] = n_a;
        merged[3 * c + 1] = mean;
        merged[3 * c + 2] = M2;
        /* the tail of snn_batchnorm_forward_train_cpu's pass 2, over all ranks' values */
        const double var = n_a > 0.0 ? M2 / n_a : 0.0;
        save_mean[c] = (float)mean;
        save_invstd[c] = (float)(1.0 / sqrt(var + (double)eps));
        if (running_mean) running_mean[c] = (1.0f - momentum) * running_mean[c] + momentum * (float)mean;
        if (running_var) {
            const double unbiased = n_a > 1.0 ? M2 / (n_a - 1.0) : var;
            running_var[c] = (1.0f - momentum) * running_var[c] + momentum * (float)unbiased;
        }
    }
}

/* Pass 3 of snn_batchnorm_forward_train_cpu (the same split of the mean into head and tail). */
void snn_batchnorm_normalise_cpu(float *out, const float *x, const double *merged,
                                 const float *save_invstd, const float *gamma, const float *beta,
                                 int N, int C, int HW)
{
    const int64_t M = (int64_t)N * HW;
    const int64_t plane_stride = (int64_t)C * HW;

#pragma omp parallel for schedule(static) num_threads(snn_cpu_threads(M * C))
    for (int c = 0; c < C; c++) {
        const double mean = merged[3 * c + 1];
        const float mean_hi = (float)mean;
        const float mean_lo = (float)(mean - (double)mean_hi);
        const float scale = (gamma ? gamma[c] : 1.0f) * save_invstd[c];
        const float shift = beta ? beta[c] : 0.0f;
        for (int n = 0; n < N; n++) {
            const float *xp = x + n * plane_stride + (int64_t)c * HW;    // (HW)
            float *op = out + n * plane_stride + (int64_t)c * HW;        // (HW)
            for (int64_t i = 0; i < HW; i++) op[i] = ((xp[i] - mean_hi) - mean_lo) * scale + shift;
        }
    }
}

/* Pass 1 of snn_batchnorm_backward_cpu: sums (C, 3) = (sum dout, sum dout (x - mean), M). */
void snn_batchnorm_backward_sums_cpu(double *sums, const float *dout, const float *x,
                                     const float *save_mean, int N, int C, int HW)
{
    const int64_t M = (int64_t)N * HW;

#pragma omp parallel for schedule(static) num_threads(snn_cpu_threads(M * C))
    for (int c = 0; c < C; c++) {
        float buf[BF16_CHUNK]; /* unused: x is floats */
        channel_dy_sums(sums + 3 * c, dout, x, NULL, save_mean[c], c, N, C, HW, buf);
        sums[3 * c + 2] = (double)M;
    }
}

/* The rest of snn_batchnorm_backward_cpu: dgamma, dbeta from this rank's sums; pass 2 (dx)
 * from the global sums and count. */
void snn_batchnorm_backward_apply_cpu(float *dx, float *dgamma, float *dbeta, const float *dout,
                                      const float *x, const float *gamma, const float *save_mean,
                                      const float *save_invstd, const double *local,
                                      const double *global, int N, int C, int HW)
{
    const int64_t M = (int64_t)N * HW;
    const int64_t plane_stride = (int64_t)C * HW;

#pragma omp parallel for schedule(static) num_threads(snn_cpu_threads(M * C))
    for (int c = 0; c < C; c++) {
        const float mean = save_mean[c];
        const float invstd = save_invstd[c];
        if (dbeta) dbeta[c] += (float)local[3 * c];
        if (dgamma) dgamma[c] += (float)(local[3 * c + 1] * (double)invstd);
        if (!dx) continue;
        const double M_all = global[3 * c + 2];
        const double sum_dy_xhat = global[3 * c + 1] * (double)invstd;
        const float a = (gamma ? gamma[c] : 1.0f) * invstd;
        const float mean_dy = (float)(global[3 * c] / M_all);
        const float k = (float)(sum_dy_xhat / M_all * (double)invstd);
        for (int n = 0; n < N; n++) {
            const float *dop = dout + n * plane_stride + (int64_t)c * HW;   // (HW)
            const float *xp = x + n * plane_stride + (int64_t)c * HW;       // (HW)
            float *dxp = dx + n * plane_stride + (int64_t)c * HW;           // (HW)
            for (int64_t i = 0; i < HW; i++)
                dxp[i] += a * (dop[i] - mean_dy - (xp[i] - mean) * k);
        }
    }
}
