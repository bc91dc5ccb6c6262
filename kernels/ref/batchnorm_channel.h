/*
 * batchnorm_channel.h - the per-channel pieces of the reference batch-norm (internal to
 * kernels/ref/): batchnorm.c defines them with their equations and runs them channel by
 * channel; batchnorm_sync.c runs the same pieces with an exchange between ranks in between.
 * x, out, dout, dx (N, C, HW); one call works on channel c's N planes of HW values.
 */
#ifndef SNN_BATCHNORM_CHANNEL_H
#define SNN_BATCHNORM_CHANNEL_H

#include <stdint.h>

/* stats = (count, mean, M2 = sum (x - mean)^2) of channel c; x, or (x NULL) x_bf16's values */
void snn_batchnorm_channel_stats_ref(double stats[3], const float *x, const uint16_t *x_bf16,
                                     int c, int N, int C, int HW);
/* save_mean[c], save_invstd[c] and the running statistics (each may be NULL) from stats */
void snn_batchnorm_set_stats_ref(float *save_mean, float *save_invstd, float *running_mean,
                                 float *running_var, const double stats[3], int c,
                                 float momentum, float eps);
/* out = gamma (x - mean) invstd + beta over channel c (gamma, beta may be NULL: 1 and 0) */
void snn_batchnorm_normalise_channel_ref(float *out, const float *x, double mean, float invstd,
                                         const float *gamma, const float *beta, int c, int N,
                                         int C, int HW);
/* sums = (sum dout, sum dout (x - mean)) over channel c */
void snn_batchnorm_grad_sums_ref(double sums[2], const float *dout, const float *x, float mean,
                                 int c, int N, int C, int HW);
/* dx += dL/dx over channel c from the sums over all M values (every rank's) */
void snn_batchnorm_input_grad_ref(float *dx, const float *dout, const float *x,
                                  const float *gamma, float mean, float invstd, double sum_dy,
                                  double sum_dy_dev, double M, int c, int N, int C, int HW);

#endif /* SNN_BATCHNORM_CHANNEL_H */
