/*
 * batchnorm_sync.c - the reference batch-norm across data-parallel ranks (--sync-bn): the
 * training forward and backward of batchnorm.c cut where the ranks must exchange their sums
 * (autograd/fn_batchnorm_sync.c runs the exchange between the pieces), so the statistics and
 * gradients are those of one process holding every rank's batch.
 *
 * Across R ranks, each with M_r values of a channel:
 *   stats (C, 3) = (M_r, mean_r, M2_r = sum (x - mean_r)^2) of this rank
 *   stats_merge   the R ranks' stats merged in rank order (Chan et al.'s update,
 *                 kernels/chan_merge.h), then save_mean, save_invstd and the running
 *                 statistics as the training forward sets them, over all ranks' values
 *   normalise     out = gamma (x - mean) save_invstd + beta
 *   backward_sums (C, 3) = (sum dout, sum dout (x - save_mean), M_r) of this rank
 *   backward_apply dbeta, dgamma from this rank's sums; dx from the sums of all ranks
 * Shapes and NULL arguments as in batchnorm.c; stats, merged, sums, local, global in double.
 * Memory traffic: stats reads x twice; normalise reads x once and writes out once;
 * backward_sums reads dout and x once; backward_apply reads dout and x once and
 * read-modify-writes dx.
 * Test: tests/test_batchnorm_sync.c.
 */
#include "batchnorm_channel.h"
#include "kernels/chan_merge.h"
#include "kernels_ref.h"

void snn_batchnorm_stats_ref(double *stats, const float *x, const uint16_t *x_bf16, int N, int C,
                             int HW)
{
    /* bf16 bits are read as their values, exactly: the same sums as of the floats */
    for (int c = 0; c < C; c++)
        snn_batchnorm_channel_stats_ref(stats + 3 * c, x, x_bf16, c, N, C, HW);
}

void snn_batchnorm_stats_merge_ref(double *merged, float *save_mean, float *save_invstd,
                                   float *running_mean, float *running_var, const double *stats,
                                   int R, int C, float momentum, float eps)
{
    for (int c = 0; c < C; c++) {
        double *m = merged + 3 * c;   // (count, mean, M2) of all ranks so far
        m[0] = m[1] = m[2] = 0.0;
        for (int r = 0; r < R; r++) {
            const double *s = stats + ((int64_t)r * C + c) * 3;   // rank r's (count, mean, M2)
            if (s[0] > 0.0) snn_chan_merge(&m[0], &m[1], &m[2], s[0], s[1], s[2]);
        }
        snn_batchnorm_set_stats_ref(save_mean, save_invstd, running_mean, running_var, m, c,
                                    momentum, eps);
    }
}

void snn_batchnorm_normalise_ref(float *out, const float *x, const double *merged,
                                 const float *save_invstd, const float *gamma, const float *beta,
                                 int N, int C, int HW)
{
    for (int c = 0; c < C; c++)
        snn_batchnorm_normalise_channel_ref(out, x, merged[3 * c + 1], save_invstd[c], gamma,
                                            beta, c, N, C, HW);
}

void snn_batchnorm_backward_sums_ref(double *sums, const float *dout, const float *x,
                                     const float *save_mean, int N, int C, int HW)
{
    for (int c = 0; c < C; c++) {
        snn_batchnorm_grad_sums_ref(sums + 3 * c, dout, x, save_mean[c], c, N, C, HW);
        sums[3 * c + 2] = (double)N * HW;
    }
}

void snn_batchnorm_backward_apply_ref(float *dx, float *dgamma, float *dbeta, const float *dout,
                                      const float *x, const float *gamma, const float *save_mean,
                                      const float *save_invstd, const double *local,
                                      const double *global, int N, int C, int HW)
{
    for (int c = 0; c < C; c++) {
        if (dbeta) dbeta[c] += (float)local[3 * c];
        if (dgamma) dgamma[c] += (float)(local[3 * c + 1] * (double)save_invstd[c]);
        if (dx)
            snn_batchnorm_input_grad_ref(dx, dout, x, gamma, save_mean[c], save_invstd[c],
                                         global[3 * c], global[3 * c + 1], global[3 * c + 2], c,
                                         N, C, HW);
    }
}
