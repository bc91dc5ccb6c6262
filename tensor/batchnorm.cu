/*
 * batchnorm.cu - fused CUDA kernels of batch normalisation over (N, C, HW). Must match
 * tensor/batchnorm.c (snn_batchnorm_*_cpu), whose header states the math (Ioffe & Szegedy 2015,
 * PyTorch's running statistics). Per channel c, over its M = N * HW values:
 *
 *   train forward   mean = sum x / M,  var = sum (x - mean)^2 / M,  invstd = 1 / sqrt(var + eps)
 *                   out = (x - mean) (gamma invstd) + beta
 *                   running_mean <- (1 - mom) running_mean + mom mean
 *                   running_var  <- (1 - mom) running_var  + mom var M / (M - 1)
 *   eval forward    out = (x - running_mean) gamma / sqrt(running_var + eps) + beta
 *   backward        dbeta += sum dout,  dgamma += sum dout xhat,  xhat = (x - mean) invstd
 *                   dx += gamma invstd (dout - sum dout / M - xhat sum dout xhat / M)
 *
 * Kernels: the training forward is one statistics kernel (one block per channel: a block sum
 * of x, then a block sum of (x - mean)^2 over the same values, which the second time come from
 * L2; double accumulators, as the CPU's two-pass double sums) and one normalise kernel. The
 * backward is one reduction kernel (sum dout and sum dout (x - mean) per channel, which also
 * writes dbeta, dgamma and the two coefficients dx needs) and one elementwise kernel.
 * gamma / beta may be NULL (affine = False), running statistics may be NULL, NULL gradient
 * outputs are skipped, as on the CPU.
 *
 * A channel's values are N runs of HW contiguous floats (plane stride C * HW): the block walks
 * them as one flat index m = n * HW + i, so reads are coalesced whenever HW >= 32.
 */
#include "cuda_common.cuh"
#include "error.h"
#include "kernels_cuda.h"

#define BN_BLOCK 512

/* Offset of value m = (n, i) of channel c in the (N, C, HW) tensor. */
static __device__ __forceinline__ int64_t bn_offset(int64_t m, int HW, int C, int c)
{
    const int64_t n = m / HW, i = m - n * HW;
    return (n * C + c) * HW + i;
}

/* One block per channel: save_mean, save_invstd and the running statistics.
 * Traffic: x read twice per element (8 B, the second pass mostly from L2); O(C) written.
 * CPU: passes 1 and 2 of snn_batchnorm_forward_train_cpu. */
static __global__ void batchnorm_stats_kernel(float *save_mean, float *save_invstd,
                                              float *running_mean, float *running_var,
                                              const float *x, int N, int C, int HW,
                                              float momentum, float eps)
{
    const int64_t M = (int64_t)N * HW;
    for (int c = blockIdx.x; c < C; c += gridDim.x) {
        double sum = 0.0;
        for (int64_t m = threadIdx.x; m < M; m += blockDim.x) sum += (double)x[bn_offset(m, HW, C, c)];
        const double mean = snn_block_sum(sum) / (double)M;
        double sq = 0.0;
        for (int64_t m = threadIdx.x; m < M; m += blockDim.x) {
            const double dev = (double)x[bn_offset(m, HW, C, c)] - mean;
            sq += dev * dev;
        }
        sq = snn_block_sum(sq);
        if (threadIdx.x == 0) {
            const double var = sq / (double)M;
            save_mean[c] = (float)mean;
            save_invstd[c] = (float)(1.0 / sqrt(var + (double)eps));
            if (running_mean)
                running_mean[c] = (1.0f - momentum) * running_mean[c] + momentum * (float)mean;
            if (running_var) {
                const double unbiased = M > 1 ? sq / (double)(M - 1) : var;
                running_var[c] = (1.0f - momentum) * running_var[c] + momentum * (float)unbiased;
            }
        }
    }
}

/* out = (x - mean[c]) (gamma[c] invstd[c]) + beta[c] with the batch statistics just saved,
 * one thread per element.  Traffic: 4 B read + 4 B written (plus O(C) from cache).
 * CPU: pass 3 of snn_batchnorm_forward_train_cpu. */
static __global__ void batchnorm_normalise_kernel(float *out, const float *x, const float *mean,
                                                  const float *invstd, const float *gamma,
                                                  const float *beta, int C, int HW, int64_t n)
{
    SNN_GRID_STRIDE_LOOP(k, n) {
        const int c = (int)((k / HW) % C);
        const float scale = (gamma ? gamma[c] : 1.0f) * invstd[c];
        const float shift = beta ? beta[c] : 0.0f;
        out[k] = (x[k] - mean[c]) * scale + shift;
    }
}

extern "C" void snn_batchnorm_forward_train_cuda(float *out, float *save_mean, float *save_invstd,
                                                 float *running_mean, float *running_var,
                                                 const float *x, const float *gamma,
                                                 const float *beta, int N, int C, int HW,
                                                 float momentum, float eps)
{
    const int64_t n = (int64_t)N * C * HW;
    if (n <= 0) return;
    const int cap = snn_cuda_sm_count() * 4;
    SNN_CUDA_LAUNCH(batchnorm_stats_kernel, (unsigned)(C < cap ? C : cap), BN_BLOCK, 0, save_mean,
                    save_invstd, running_mean, running_var, x, N, C, HW, momentum, eps);
    SNN_CUDA_LAUNCH(batchnorm_normalise_kernel, snn_cuda_grid(n, SNN_CUDA_BLOCK), SNN_CUDA_BLOCK,
                    0, out, x, save_mean, save_invstd, gamma, beta, C, HW, n);
}

/* out = (x - running_mean[c]) (gamma[c] / sqrt(running_var[c] + eps)) + beta[c].
 * Traffic: 4 B read + 4 B written.  CPU: snn_batchnorm_forward_eval_cpu. */
static __global__ void batchnorm_eval_kernel(float *out, const float *x, const float *gamma,
                                             const float *beta, const float *running_mean,
                                             const float *running_var, int C, int HW, float eps,
                                             int64_t n)
{
    SNN_GRID_STRIDE_LOOP(k, n) {
        const int c = (int)((k / HW) % C);
        const float scale = (gamma ? gamma[c] : 1.0f) / sqrtf(running_var[c] + eps);
        const float shift = beta ? beta[c] : 0.0f;
        out[k] = (x[k] - running_mean[c]) * scale + shift;
    }
}

extern "C" void snn_batchnorm_forward_eval_cuda(float *out, const float *x, const float *gamma,
                                                const float *beta, const float *running_mean,
                                                const float *running_var, int N, int C, int HW,
                                                float eps)
{
    const int64_t n = (int64_t)N * C * HW;
    if (n <= 0) return;
    SNN_CUDA_LAUNCH(batchnorm_eval_kernel, snn_cuda_grid(n, SNN_CUDA_BLOCK), SNN_CUDA_BLOCK, 0, out,
                    x, gamma, beta, running_mean, running_var, C, HW, eps, n);
}

/* One block per channel: sum dout and sum dout (x - mean) in double; dbeta[c] += sum dout,
 * dgamma[c] += invstd sum dout (x - mean); coef[c] = mean(dout), coef[C + c] =
 * invstd^2 mean(dout (x - mean)), the two numbers the dx kernel needs.
 * Traffic: 8 B read per element.  CPU: pass 1 of snn_batchnorm_backward_cpu. */
static __global__ void batchnorm_backward_reduce_kernel(float *dgamma, float *dbeta, float *coef,
                                                        const float *dout, const float *x,
                                                        const float *save_mean,
                                                        const float *save_invstd, int N, int C,
                                                        int HW)
{
    const int64_t M = (int64_t)N * HW;
    for (int c = blockIdx.x; c < C; c += gridDim.x) {
        const double mean = (double)save_mean[c];
        double sum_dy = 0.0, sum_dy_dev = 0.0;
        for (int64_t m = threadIdx.x; m < M; m += blockDim.x) {
            const int64_t at = bn_offset(m, HW, C, c);
            const double dy = (double)dout[at];
            sum_dy += dy;
            sum_dy_dev += dy * ((double)x[at] - mean);
        }
        sum_dy = snn_block_sum(sum_dy);
        sum_dy_dev = snn_block_sum(sum_dy_dev);
        if (threadIdx.x == 0) {
            const float invstd = save_invstd[c];
            const double sum_dy_xhat = sum_dy_dev * (double)invstd;
            if (dbeta) dbeta[c] += (float)sum_dy;
            if (dgamma) dgamma[c] += (float)sum_dy_xhat;
            if (coef) {
                coef[c] = (float)(sum_dy / (double)M);
                coef[C + c] = (float)(sum_dy_xhat / (double)M * (double)invstd);
            }
        }
    }
}

/* dx += gamma invstd (dout - mean(dout) - (x - mean) k), k = coef[C + c].
 * Traffic: 12 B read + 4 B read-modify-write per element.
 * CPU: pass 2 of snn_batchnorm_backward_cpu. */
static __global__ void batchnorm_backward_dx_kernel(float *dx, const float *dout, const float *x,
                                                    const float *gamma, const float *save_mean,
                                                    const float *save_invstd, const float *coef,
                                                    int C, int HW, int64_t n)
{
    SNN_GRID_STRIDE_LOOP(k, n) {
        const int c = (int)((k / HW) % C);
        const float a = (gamma ? gamma[c] : 1.0f) * save_invstd[c];
        dx[k] += a * (dout[k] - coef[c] - (x[k] - save_mean[c]) * coef[C + c]);
    }
}

extern "C" void snn_batchnorm_backward_cuda(float *dx, float *dgamma, float *dbeta,
                                            const float *dout, const float *x, const float *gamma,
                                            const float *save_mean, const float *save_invstd,
                                            int N, int C, int HW)
{
    const int64_t n = (int64_t)N * C * HW;
    if (n <= 0 || (!dx && !dgamma && !dbeta)) return;
    float *coef = dx ? (float *)snn_cuda_scratch((size_t)2 * (size_t)C * sizeof(float)) : NULL;
    const int cap = snn_cuda_sm_count() * 4;
    SNN_CUDA_LAUNCH(batchnorm_backward_reduce_kernel, (unsigned)(C < cap ? C : cap), BN_BLOCK, 0,
                    dgamma, dbeta, coef, dout, x, save_mean, save_invstd, N, C, HW);
    if (dx)
        SNN_CUDA_LAUNCH(batchnorm_backward_dx_kernel, snn_cuda_grid(n, SNN_CUDA_BLOCK),
                        SNN_CUDA_BLOCK, 0, dx, dout, x, gamma, save_mean, save_invstd, coef, C, HW,
                        n);
}
