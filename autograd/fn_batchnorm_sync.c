/*
 * fn_batchnorm_sync.c - Sync-BN: the training batch-norm when its statistics cover every
 * data-parallel rank's batch (snn_batchnorm_set_sync, set by distributed/ for snn-train
 * --sync-bn).
 *
 * The fused kernels of fn_batchnorm.c are run as their pieces (kernels/kernels.h,
 * kernels/ref/batchnorm_sync.c) with an exchange between them: per-channel (count, mean, M2)
 * are all-gathered and merged in rank order; in backward, (sum dout, sum dout (x - mean),
 * count) are all-reduced. dgamma and dbeta keep this rank's share, which the gradient
 * all-reduce then adds up; dx uses the global sums, so the gradients are those of one process
 * holding the union of the batches. Cost: two exchanges of 3 C doubles per layer and step.
 * Test: tests/test_batchnorm_sync.c.
 */
#include "batchnorm_sync.h"
#include "tensor/arena.h"
#include "tensor/error.h"
#include "kernels/kernels.h"

snn_status snn_batchnorm_forward_synced(const snn_batchnorm_sync *sync, float *y, float *mean,
                                        float *invstd, snn_tensor *running_mean,
                                        snn_tensor *running_var, const snn_tensor *x,
                                        const float *gamma, const float *beta, int N, int C,
                                        int HW, float momentum, float eps)
{
    const char *fn = "snn_batchnorm2d (sync-BN)";
    const snn_kernels *k = snn_kernels_for(x->device);
    if (!k->batchnorm_stats || !k->batchnorm_stats_merge || !k->batchnorm_normalise ||
        !k->batchnorm_backward_sums || !k->batchnorm_backward_apply)
        return snn_error(SNN_ERR_UNSUPPORTED, "snn_batchnorm2d: the %s backend has no sync-BN "
                         "kernels", k->name);
    const size_t bytes = (size_t)3 * (size_t)C * sizeof(double);
    double *stats = snn_step_alloc(fn, bytes, x->device);                  // (C, 3) this rank's
    double *all = stats ? snn_step_alloc(fn, bytes * (size_t)sync->ranks, x->device)
                        : NULL;                                            // (ranks, C, 3)
    double *merged = all ? snn_step_alloc(fn, bytes, x->device) : NULL;    // (C, 3) all ranks'
    if (!merged) return snn_last_status();
    k->batchnorm_stats(stats, x->data, NULL, N, C, HW);
    snn_status st = sync->allgather(sync->ctx, all, stats, 3 * (int64_t)C);
    if (st != SNN_OK) return st;
    k->batchnorm_stats_merge(merged, mean, invstd, running_mean->data, running_var->data, all,
                             sync->ranks, C, momentum, eps);
    k->batchnorm_normalise(y, x->data, merged, invstd, gamma, beta, N, C, HW);
    return SNN_OK;
}

void snn_batchnorm_backward_synced(const snn_batchnorm_sync *sync, float *dx, float *dgamma,
                                   float *dbeta, const float *dout, const snn_tensor *x,
                                   const float *gamma, const float *mean, const float *invstd,
                                   int N, int C, int HW)
{
    const char *fn = "snn_batchnorm2d (backward, sync-BN)";
    const snn_kernels *k = snn_kernels_for(x->device);
    const size_t bytes = (size_t)3 * (size_t)C * sizeof(double);
    double *local = snn_step_alloc(fn, bytes, x->device);  // (C, 3) this rank's sums
    double *global = local ? snn_step_alloc(fn, bytes, x->device) : NULL;  // (C, 3) all ranks'
    if (!global) {
        snn_backward_out_of_memory();
        return;
    }
    k->batchnorm_backward_sums(local, dout, x->data, mean, N, C, HW);
    k->copy(global, local, bytes, SNN_COPY_DEVICE_TO_DEVICE);
    if (!sync || sync->allreduce_sum(sync->ctx, global, 3 * (int64_t)C) != SNN_OK) {
        if (!sync) snn_error(SNN_ERR_STATE, "%s: the sync was turned off between forward and "
                             "backward", fn);
        snn_backward_fail(snn_last_status());
        return;
    }
    k->batchnorm_backward_apply(dx, dgamma, dbeta, dout, x->data, gamma, mean, invstd, local,
                                global, N, C, HW);
}
