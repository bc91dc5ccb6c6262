/*
 * batchnorm_sync.h - the batch-norm's training forward and backward across data-parallel
 * ranks (internal to autograd/): fn_batchnorm_sync.c defines them, fn_batchnorm.c calls them
 * while a sync is set (snn_batchnorm_set_sync). x (N, C, H, W) or (T, N, C, H, W) folded into
 * N images of HW values; mean, invstd (C) on x's device.
 */
#ifndef SNN_BATCHNORM_SYNC_H
#define SNN_BATCHNORM_SYNC_H

#include "autograd.h"

/* y = the batch-norm of x with the statistics of every rank's batch: this rank's (count,
 * mean, M2) all-gathered through `sync` and merged in rank order; mean, invstd and the running
 * statistics as the training forward sets them. SNN_ERR_UNSUPPORTED when x's backend lacks
 * the sync-BN kernels; the callbacks' status when an exchange fails. */
snn_status snn_batchnorm_forward_synced(const snn_batchnorm_sync *sync, float *y, float *mean,
                                        float *invstd, snn_tensor *running_mean,
                                        snn_tensor *running_var, const snn_tensor *x,
                                        const float *gamma, const float *beta, int N, int C,
                                        int HW, float momentum, float eps);

/* The backward of a synced forward (runs inside snn_backward; reports failure through
 * snn_backward_fail): this rank's sums, their all-reduce through `sync` (NULL: the sync was
 * turned off since the forward, an error), then dgamma, dbeta (this rank's share) and dx (the
 * sums of all ranks). Every rank makes the exchange, whatever its own graph needs. */
void snn_batchnorm_backward_synced(const snn_batchnorm_sync *sync, float *dx, float *dgamma,
                                   float *dbeta, const float *dout, const snn_tensor *x,
                                   const float *gamma, const float *mean, const float *invstd,
                                   int N, int C, int HW);

#endif /* SNN_BATCHNORM_SYNC_H */
