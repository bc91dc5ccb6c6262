/*
 * batchnorm_sync.cu - batch-norm across data-parallel ranks (sync-BN): the pieces of the
 * training forward and backward that distributed/ runs with an exchange between them (tensor/
 * batchnorm.c states the math and the merge). They reuse the fused path's segments and device
 * functions (batchnorm_common.cuh), so with one rank they give its bits
 * (tests/test_cuda_batchnorm_sync.c checks both).
 */
#include "batchnorm_common.cuh"
#include "tensor/error.h"
#include "kernels_cuda.h"


/* Block b = (c, s): the segment's mean and M2; with one segment it writes the channel's
 * stats (M, mean, M2), else partials for the finish kernel.  CPU: snn_batchnorm_stats_cpu. */
template <typename X>
static __global__ void batchnorm_stats_kernel(double *partial, double *stats, X x, int C, int HW,
                                              bn_plan plan)
{
    for (int64_t b = blockIdx.x; b < C * plan.segments; b += gridDim.x) {
        const int c = (int)(b / plan.segments);
        double mean, m2;
        bn_segment_stats(x, c, b % plan.segments, C, HW, plan, &mean, &m2);
        if (threadIdx.x == 0) {
            if (plan.segments == 1) {
                stats[3 * c] = (double)plan.M;
                stats[3 * c + 1] = mean;
                stats[3 * c + 2] = m2;
            } else {
                partial[2 * b] = mean;
                partial[2 * b + 1] = m2;
            }
        }
    }
}

/* One thread per channel: stats (M, mean, M2) from the merged segments. */
static __global__ void batchnorm_stats_finish_kernel(const double *partial, double *stats, int C,
                                                     bn_plan plan)
{
    SNN_GRID_STRIDE_LOOP(c, C) {
        double mean, M2;
        bn_merge_segments(partial, c, plan, &mean, &M2);
        stats[3 * c] = (double)plan.M;
        stats[3 * c + 1] = mean;
        stats[3 * c + 2] = M2;
    }
}

extern "C" void snn_batchnorm_stats_cuda(double *stats, const float *x, const uint16_t *x_bf16,
                                         int N, int C, int HW)
{
    if ((int64_t)N * C * HW <= 0) return;
    const bn_plan plan = make_bn_plan(N, C, HW);
    double *partial = bn_partials(C, plan);
    if (x)
        SNN_CUDA_LAUNCH(batchnorm_stats_kernel<const float *>, bn_reduce_grid(C, plan), BN_BLOCK,
                        0, partial, stats, x, C, HW, plan);
    else /* kept as bf16: read as it is (batchnorm_common.cuh) */
        SNN_CUDA_LAUNCH(batchnorm_stats_kernel<bn_x_bf16>, bn_reduce_grid(C, plan), BN_BLOCK, 0,
                        partial, stats, bn_x_bf16{x_bf16}, C, HW, plan);
    if (plan.segments > 1)
        SNN_CUDA_LAUNCH(batchnorm_stats_finish_kernel, snn_cuda_grid(C, BN_BLOCK), BN_BLOCK, 0,
                        partial, stats, C, plan);
}

/* One thread per channel: merge the R ranks' (M, mean, M2) in rank order, then the fused
 * forward's tail over all values.  CPU: snn_batchnorm_stats_merge_cpu. */
static __global__ void batchnorm_stats_merge_kernel(double *merged, float *save_mean,
                                                    float *save_invstd, float *running_mean,
                                                    float *running_var, const double *stats,
                                                    int R, int C, float momentum, float eps)
{
    SNN_GRID_STRIDE_LOOP(c, C) {
        double n_a = 0.0, mean = 0.0, M2 = 0.0;
        for (int r = 0; r < R; r++) {
            const double *s = stats + ((int64_t)r * C + c) * 3; // (count, mean, M2)
            if (s[0] > 0.0) snn_chan_merge(&n_a, &mean, &M2, s[0], s[1], s[2]);
        }
        merged[3 * c] = n_a;
        merged[3 * c + 1] = mean;
        merged[3 * c + 2] = M2;
        bn_finish_channel((int)c, mean, M2, (int64_t)n_a, save_mean, save_invstd, running_mean,
                          running_var, momentum, eps);
    }
}

extern "C" void snn_batchnorm_stats_merge_cuda(double *merged, float *save_mean,
                                               float *save_invstd, float *running_mean,
                                               float *running_var, const double *stats, int R,
                                               int C, float momentum, float eps)
{
    if (C <= 0) return;
    SNN_CUDA_LAUNCH(batchnorm_stats_merge_kernel, snn_cuda_grid(C, BN_BLOCK), BN_BLOCK, 0, merged,
                    save_mean, save_invstd, running_mean, running_var, stats, R, C, momentum, eps);
}

/* out = (x - (float) mean[c]) (gamma[c] invstd[c]) + beta[c], the mean read from merged (C, 3):
 * the float the fused path saves.  Traffic: 4 B read + 4 B written.
 * CPU: snn_batchnorm_normalise_cpu. */
static __global__ void batchnorm_normalise_kernel(float *out, const float *x,
                                                  const double *merged, const float *invstd,
                                                  const float *gamma, const float *beta, int C,
                                                  int HW, int64_t n)
{
    SNN_GRID_STRIDE_LOOP(k, n) {
        int64_t i, c;
        snn_divmod(snn_divmod(k, HW, &i), C, &c);
        const float mean = (float)merged[3 * c + 1];
        const float scale = (gamma ? gamma[c] : 1.0f) * invstd[c];
        const float shift = beta ? beta[c] : 0.0f;
        out[k] = (x[k] - mean) * scale + shift;
    }
}

/* batchnorm_normalise_kernel four values at a time (bn_quads). */
static __global__ void batchnorm_normalise_quads_kernel(float4 *out, const float4 *x,
                                                        const double *merged, const float *invstd,
                                                        const float *gamma, const float *beta,
                                                        bn_quads q)
{
    BN_QUADS_LOOP(k, q) {
        const int c = bn_quad_channel(k, q);
        const float m = (float)merged[3 * c + 1];
        const float scale = (gamma ? gamma[c] : 1.0f) * invstd[c];
        const float shift = beta ? beta[c] : 0.0f;
        out[k] = bn_affine4(x[k], m, scale, shift);
    }
}

extern "C" void snn_batchnorm_normalise_cuda(float *out, const float *x, const double *merged,
                                             const float *save_invstd, const float *gamma,
                                             const float *beta, int N, int C, int HW)
{
    const int64_t n = (int64_t)N * C * HW;
    if (n <= 0) return;
    bn_quads q;
    if (bn_quads_make(&q, n, C, HW, out, x, NULL, NULL))
        SNN_CUDA_LAUNCH(batchnorm_normalise_quads_kernel, snn_cuda_grid(q.n4, SNN_CUDA_BLOCK),
                        SNN_CUDA_BLOCK, 0, (float4 *)out, (const float4 *)x, merged, save_invstd,
                        gamma, beta, q);
    else
        SNN_CUDA_LAUNCH(batchnorm_normalise_kernel, snn_cuda_grid(n, SNN_CUDA_BLOCK),
                        SNN_CUDA_BLOCK, 0, out, x, merged, save_invstd, gamma, beta, C, HW, n);
}

/* Block b = (c, s): sum dout and sum dout (x - mean) over the segment; with one segment it
 * writes the channel's sums (sum dout, sum dout (x - mean), M), else partials.
 * Traffic: 8 B read per value.  CPU: snn_batchnorm_backward_sums_cpu. */
template <typename X, typename Mean>
static __global__ void batchnorm_backward_sums_kernel(double *partial, double *sums,
                                                      const float *dout, X x, Mean save_mean,
                                                      int C, int HW, bn_plan plan)
{
    for (int64_t b = blockIdx.x; b < C * plan.segments; b += gridDim.x) {
        const int c = (int)(b / plan.segments);
        const int64_t s = b % plan.segments;
        double sum_dy, sum_dy_dev;
        bn_segment_dy_sums(dout, x, save_mean, c, s, C, HW, plan, &sum_dy, &sum_dy_dev);
        if (threadIdx.x == 0) {
            double *to = plan.segments == 1 ? sums + 3 * c : partial + 2 * b;
            to[0] = sum_dy;
            to[1] = sum_dy_dev;
            if (plan.segments == 1) to[2] = (double)plan.M;
        }
    }
}

/* One thread per channel adds its segments' sums in index order (as the fused backward). */
static __global__ void batchnorm_backward_sums_finish_kernel(const double *partial, double *sums,
                                                             int C, bn_plan plan)
{
    SNN_GRID_STRIDE_LOOP(c, C) {
        double sum_dy = 0.0, sum_dy_dev = 0.0;
        for (int64_t s = 0; s < plan.segments; s++) {
            sum_dy += partial[2 * (c * plan.segments + s)];
            sum_dy_dev += partial[2 * (c * plan.segments + s) + 1];
        }
        sums[3 * c] = sum_dy;
        sums[3 * c + 1] = sum_dy_dev;
        sums[3 * c + 2] = (double)plan.M;
    }
}

/* The reduction and its finish over segments, x and the mean given as X and Mean */
template <typename X, typename Mean>
static void backward_sums(double *sums, const float *dout, X x, Mean mean, int N, int C, int HW)
{
    if ((int64_t)N * C * HW <= 0) return;
    const bn_plan plan = make_bn_plan(N, C, HW);
    double *partial = bn_partials(C, plan);
    SNN_CUDA_LAUNCH((batchnorm_backward_sums_kernel<X, Mean>), bn_reduce_grid(C, plan), BN_BLOCK,
                    0, partial, sums, dout, x, mean, C, HW, plan);
    if (plan.segments > 1)
        SNN_CUDA_LAUNCH(batchnorm_backward_sums_finish_kernel, snn_cuda_grid(C, BN_BLOCK),
                        BN_BLOCK, 0, partial, sums, C, plan);
}

extern "C" void snn_batchnorm_backward_sums_cuda(double *sums, const float *dout, const float *x,
                                                 const float *save_mean, int N, int C, int HW)
{
    backward_sums(sums, dout, x, save_mean, N, C, HW);
}

/* The same sums for the fused batch-norm -> neuron backward where its kernel does not make
 * them itself (lif_bn_backward.cu, in->dy_sums): x as floats or (x NULL) bf16 bits, the mean
 * from the merged statistics (C, 3) */
extern "C" void snn_bn_neuron_dy_sums_cuda(double *sums, const float *dout, const float *x,
                                           const uint16_t *x_bf16, const double *stats, int N,
                                           int C, int HW)
{
    if (x) backward_sums(sums, dout, x, bn_mean_of_stats{stats}, N, C, HW);
    else backward_sums(sums, dout, bn_x_bf16{x_bf16}, bn_mean_of_stats{stats}, N, C, HW);
}

/* One thread per channel: dbeta, dgamma from this rank's sums; coef[c] = mean(dout) and
 * coef[C + c] = invstd^2 mean(dout (x - mean)) over every rank's values, for the dx kernel.
 * CPU: the per-channel part of snn_batchnorm_backward_apply_cpu. */
static __global__ void batchnorm_backward_apply_channel_kernel(float *dgamma, float *dbeta,
                                                               float *coef,
                                                               const float *save_invstd,
                                                               const double *local,
                                                               const double *global, int C)
{
    SNN_GRID_STRIDE_LOOP(c, C) {
        const float invstd = save_invstd[c];
        if (dbeta) dbeta[c] += (float)local[3 * c];
        if (dgamma) dgamma[c] += (float)(local[3 * c + 1] * (double)invstd);
        if (coef) {
            const double M = global[3 * c + 2];
            const double sum_dy_xhat = global[3 * c + 1] * (double)invstd;
            coef[c] = (float)(global[3 * c] / M);
            coef[C + c] = (float)(sum_dy_xhat / M * (double)invstd);
        }
    }
}

extern "C" void snn_batchnorm_backward_apply_cuda(float *dx, float *dgamma, float *dbeta,
                                                  const float *dout, const float *x,
                                                  const float *gamma, const float *save_mean,
                                                  const float *save_invstd, const double *local,
                                                  const double *global, int N, int C, int HW)
{
    const int64_t n = (int64_t)N * C * HW;
    if (n <= 0 || (!dx && !dgamma && !dbeta)) return;
    float *coef = dx ? (float *)snn_cuda_scratch((size_t)2 * (size_t)C * sizeof(float)) : NULL;
    SNN_CUDA_LAUNCH(batchnorm_backward_apply_channel_kernel, snn_cuda_grid(C, BN_BLOCK), BN_BLOCK,
                    0, dgamma, dbeta, coef, save_invstd, local, global, C);
    if (dx) bn_backward_dx_launch(dx, dout, x, gamma, save_mean, save_invstd, coef, C, HW, n);
}
