/*
 * batchnorm.cu - fused CUDA kernels of batch normalisation over (N, C, HW). Must match
 * kernels/cpu/batchnorm.c (snn_batchnorm_*_cpu), whose header states the math (Ioffe & Szegedy 2015,
 * PyTorch's running statistics). Per channel c, over its M = N * HW values:
 *
 *   train forward   mean = sum x / M,  var = sum (x - mean)^2 / M,  invstd = 1 / sqrt(var + eps)
 *                   out = (x - mean) (gamma invstd) + beta
 *                   running_mean <- (1 - mom) running_mean + mom mean
 *                   running_var  <- (1 - mom) running_var  + mom var M / (M - 1)
 *   eval forward    out = (x - running_mean) gamma / sqrt(running_var + eps) + beta
 *   backward        dbeta += sum dout,  dgamma += sum dout xhat,  xhat = (x - mean) invstd
 *                   dx += gamma invstd (dout - sum dout / M - xhat sum dout xhat / M)
 *   in place        dout read from dx, which gets the right side of that line (added to 0);
 *                   x may be bf16 bits (a conv output kept as bf16), read without a copy
 *
 * Kernels. Training forward: one statistics kernel, then one normalise kernel. Backward: one
 * reduction kernel (sum dout and sum dout (x - mean) per channel; it also writes dbeta, dgamma
 * and the two per-channel coefficients dx needs), then one elementwise kernel. The same passes
 * cut apart for batch-norm across data-parallel ranks (sync-BN) are in batchnorm_sync.cu; what
 * both files share (segments, walks, reductions, four-wide indexing) in batchnorm_common.cuh.
 *
 * The reductions: a channel's values are N runs of HW contiguous floats (plane stride C HW),
 * walked as one flat index m = n HW + i so that reads are coalesced whenever HW >= 32. One
 * block per channel would leave most of the GPU idle (64 channels on 132 SMs, each SM with too
 * few loads in flight to cover memory latency), so a channel is cut into S segments of m, one
 * block each, with S chosen to give ~8 blocks per SM. Each block reduces its segment with a
 * block sum in double; when S > 1 a finish kernel (one thread per channel) combines the
 * segments in index order. Everything is deterministic.
 *
 * The variance keeps the CPU's two-pass accuracy without a second sweep over the whole
 * channel: each block computes its segment's mean and M2 = sum (x - segment mean)^2 (the second
 * pass re-reads the segment, from L2), and segments are merged with Chan et al.'s update
 * (chan_merge.h), which never subtracts two large sums, so |mean| >> std costs no accuracy.
 *
 * gamma / beta may be NULL (affine = False), running statistics may be NULL, NULL gradient
 * outputs are skipped, as on the CPU.
 */
#include "batchnorm_common.cuh"
#include "cuda_common.cuh"
#include "tensor/error.h"
#include "kernels_cuda.h"

/* Block b = (c, s): mean and M2 of segment s of channel c. With one segment it finishes the
 * channel itself, else partial[2 b] = mean, partial[2 b + 1] = M2.
 * Traffic: 8 B read per value (4 B from DRAM).  CPU: passes 1-2 of
 * snn_batchnorm_forward_train_cpu. */
static __global__ void batchnorm_forward_stats_kernel(double *partial, float *save_mean,
                                                      float *save_invstd, float *running_mean,
                                                      float *running_var, const float *x, int C,
                                                      int HW, bn_plan plan, float momentum,
                                                      float eps)
{
    for (int64_t b = blockIdx.x; b < C * plan.segments; b += gridDim.x) {
        const int c = (int)(b / plan.segments);
        double mean, m2;
        bn_segment_stats(x, c, b % plan.segments, C, HW, plan, &mean, &m2);
        if (threadIdx.x == 0) {
            if (plan.segments == 1)
                bn_finish_channel(c, mean, m2, plan.M, save_mean, save_invstd, running_mean,
                                  running_var, momentum, eps);
            else {
                partial[2 * b] = mean;
                partial[2 * b + 1] = m2;
            }
        }
    }
}

/* One thread per channel merges its segments in index order (Chan's update, file comment). */
static __global__ void
batchnorm_forward_stats_finish_kernel(const double *partial, float *save_mean, float *save_invstd,
                                      float *running_mean, float *running_var, int C, bn_plan plan,
                                      float momentum, float eps)
{
    SNN_GRID_STRIDE_LOOP(c, C) {
        double mean, M2;
        bn_merge_segments(partial, c, plan, &mean, &M2);
        bn_finish_channel((int)c, mean, M2, plan.M, save_mean, save_invstd, running_mean,
                          running_var, momentum, eps);
    }
}

/* out = (x - mean[c]) (gamma[c] invstd[c]) + beta[c] with the batch statistics just saved,
 * one thread per element.  Traffic: 4 B read + 4 B written (plus O(C) from cache).
 * CPU: pass 3 of snn_batchnorm_forward_train_cpu. */
static __global__ void batchnorm_forward_normalise_kernel(float *out, const float *x,
                                                          const float *mean, const float *invstd,
                                                          const float *gamma, const float *beta,
                                                          int C, int HW, int64_t n)
{
    SNN_GRID_STRIDE_LOOP(k, n) {
        int64_t i, c;
        snn_divmod(snn_divmod(k, HW, &i), C, &c); /* k = (n C + c) HW + i */
        const float scale = (gamma ? gamma[c] : 1.0f) * invstd[c];
        const float shift = beta ? beta[c] : 0.0f;
        out[k] = (x[k] - mean[c]) * scale + shift;
    }
}

/* batchnorm_forward_normalise_kernel four values at a time (bn_quads). */
static __global__ void batchnorm_forward_normalise_quads_kernel(float4 *out, const float4 *x,
                                                                const float *mean,
                                                                const float *invstd,
                                                                const float *gamma,
                                                                const float *beta, bn_quads q)
{
    BN_QUADS_LOOP(k, q) {
        const int c = bn_quad_channel(k, q);
        const float scale = (gamma ? gamma[c] : 1.0f) * invstd[c];
        const float shift = beta ? beta[c] : 0.0f, m = mean[c];
        out[k] = bn_affine4(x[k], m, scale, shift);
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
    const bn_plan plan = make_bn_plan(N, C, HW);
    double *partial = bn_partials(C, plan);
    SNN_CUDA_LAUNCH(batchnorm_forward_stats_kernel, bn_reduce_grid(C, plan), BN_BLOCK, 0, partial,
                    save_mean, save_invstd, running_mean, running_var, x, C, HW, plan, momentum,
                    eps);
    if (plan.segments > 1)
        SNN_CUDA_LAUNCH(batchnorm_forward_stats_finish_kernel, snn_cuda_grid(C, BN_BLOCK), BN_BLOCK,
                        0, partial, save_mean, save_invstd, running_mean, running_var, C, plan,
                        momentum, eps);
    bn_quads q;
    if (bn_quads_make(&q, n, C, HW, out, x, NULL, NULL))
        SNN_CUDA_LAUNCH(batchnorm_forward_normalise_quads_kernel,
                        snn_cuda_grid(q.n4, SNN_CUDA_BLOCK), SNN_CUDA_BLOCK, 0, (float4 *)out,
                        (const float4 *)x, save_mean, save_invstd, gamma, beta, q);
    else
        SNN_CUDA_LAUNCH(batchnorm_forward_normalise_kernel, snn_cuda_grid(n, SNN_CUDA_BLOCK),
                        SNN_CUDA_BLOCK, 0, out, x, save_mean, save_invstd, gamma, beta, C, HW, n);
}

/* out = (x - running_mean[c]) (gamma[c] / sqrt(running_var[c] + eps)) + beta[c].
 * Traffic: 4 B read + 4 B written.  CPU: snn_batchnorm_forward_eval_cpu. */
static __global__ void batchnorm_forward_eval_kernel(float *out, const float *x, const float *gamma,
                                                     const float *beta, const float *running_mean,
                                                     const float *running_var, int C, int HW,
                                                     float eps, int64_t n)
{
    SNN_GRID_STRIDE_LOOP(k, n) {
        int64_t i, c;
        snn_divmod(snn_divmod(k, HW, &i), C, &c);
        const float scale = (gamma ? gamma[c] : 1.0f) / sqrtf(running_var[c] + eps);
        const float shift = beta ? beta[c] : 0.0f;
        out[k] = (x[k] - running_mean[c]) * scale + shift;
    }
}

/* batchnorm_forward_eval_kernel four values at a time (bn_quads). */
static __global__ void batchnorm_forward_eval_quads_kernel(float4 *out, const float4 *x,
                                                           const float *gamma, const float *beta,
                                                           const float *running_mean,
                                                           const float *running_var, float eps,
                                                           bn_quads q)
{
    BN_QUADS_LOOP(k, q) {
        const int c = bn_quad_channel(k, q);
        const float scale = (gamma ? gamma[c] : 1.0f) / sqrtf(running_var[c] + eps);
        const float shift = beta ? beta[c] : 0.0f, m = running_mean[c];
        out[k] = bn_affine4(x[k], m, scale, shift);
    }
}

extern "C" void snn_batchnorm_forward_eval_cuda(float *out, const float *x, const float *gamma,
                                                const float *beta, const float *running_mean,
                                                const float *running_var, int N, int C, int HW,
                                                float eps)
{
    const int64_t n = (int64_t)N * C * HW;
    if (n <= 0) return;
    bn_quads q;
    if (bn_quads_make(&q, n, C, HW, out, x, NULL, NULL))
        SNN_CUDA_LAUNCH(batchnorm_forward_eval_quads_kernel, snn_cuda_grid(q.n4, SNN_CUDA_BLOCK),
                        SNN_CUDA_BLOCK, 0, (float4 *)out, (const float4 *)x, gamma, beta,
                        running_mean, running_var, eps, q);
    else
        SNN_CUDA_LAUNCH(batchnorm_forward_eval_kernel, snn_cuda_grid(n, SNN_CUDA_BLOCK),
                        SNN_CUDA_BLOCK, 0, out, x, gamma, beta, running_mean, running_var, C, HW,
                        eps, n);
}

/* The per-channel tail of the backward reduction: gradients of gamma and beta, and
 * coef[c] = mean(dout), coef[C + c] = invstd^2 mean(dout (x - mean)) for the dx kernel. */
static __device__ void bn_backward_finish_channel(int c, double sum_dy, double sum_dy_dev,
                                                  int64_t M, int C, const float *save_invstd,
                                                  float *dgamma, float *dbeta, float *coef)
{
    const float invstd = save_invstd[c];
    if (dbeta) dbeta[c] += (float)sum_dy;
    if (dgamma) dgamma[c] += (float)(sum_dy_dev * (double)invstd);
    if (coef) {
        const float2 k = bn_dx_coef(sum_dy, sum_dy_dev, M, invstd);
        coef[c] = k.x;
        coef[C + c] = k.y;
    }
}

/* Block b = (c, s): sum dout and sum dout (x - mean) over segment s of channel c, in double.
 * With one segment it finishes the channel, else partial[2 b], partial[2 b + 1] = the sums.
 * Traffic: 8 B read per value.  CPU: pass 1 of snn_batchnorm_backward_cpu. */
template <typename X>
static __global__ void
batchnorm_backward_reduce_kernel(double *partial, float *dgamma, float *dbeta, float *coef,
                                 const float *dout, X x, const float *save_mean,
                                 const float *save_invstd, int C, int HW, bn_plan plan)
{
    for (int64_t b = blockIdx.x; b < C * plan.segments; b += gridDim.x) {
        const int c = (int)(b / plan.segments);
        const int64_t s = b % plan.segments;
        double sum_dy, sum_dy_dev;
        bn_segment_dy_sums(dout, x, save_mean, c, s, C, HW, plan, &sum_dy, &sum_dy_dev);
        if (threadIdx.x == 0) {
            if (plan.segments == 1)
                bn_backward_finish_channel(c, sum_dy, sum_dy_dev, plan.M, C, save_invstd, dgamma,
                                           dbeta, coef);
            else {
                partial[2 * b] = sum_dy;
                partial[2 * b + 1] = sum_dy_dev;
            }
        }
    }
}

/* One thread per channel adds its segments' sums in index order and finishes the channel. */
static __global__ void batchnorm_backward_finish_kernel(const double *partial, float *dgamma,
                                                        float *dbeta, float *coef,
                                                        const float *save_invstd, int C,
                                                        bn_plan plan)
{
    SNN_GRID_STRIDE_LOOP(c, C) {
        double sum_dy = 0.0, sum_dy_dev = 0.0;
        for (int64_t s = 0; s < plan.segments; s++) {
            sum_dy += partial[2 * (c * plan.segments + s)];
            sum_dy_dev += partial[2 * (c * plan.segments + s) + 1];
        }
        bn_backward_finish_channel((int)c, sum_dy, sum_dy_dev, plan.M, C, save_invstd, dgamma,
                                   dbeta, coef);
    }
}

/* dx += gamma invstd (dout - mean(dout) - (x - mean) k), k = coef[C + c] (bn_dx_value);
 * IN_PLACE (dout is dx): dx = that, added to 0.
 * Traffic: 12 B read + 4 B read-modify-write per element; in place 8 B read (6 with x as
 * bf16) and 4 B written. CPU: pass 2 of snn_batchnorm_backward_cpu. */
template <bool IN_PLACE, typename X>
static __global__ void batchnorm_backward_dx_kernel(float *dx, const float *dout, X x,
                                                    const float *gamma, const float *save_mean,
                                                    const float *save_invstd, const float *coef,
                                                    int C, int HW, int64_t n)
{
    SNN_GRID_STRIDE_LOOP(k, n) {
        int64_t i, c;
        snn_divmod(snn_divmod(k, HW, &i), C, &c);
        const float a = (gamma ? gamma[c] : 1.0f) * save_invstd[c];
        const float base = IN_PLACE ? 0.0f : dx[k];
        dx[k] = bn_dx_value(base, a, dout[k], x[k], save_mean[c], coef[c], coef[C + c]);
    }
}

/* Four values of x from element 4 quad: fp32 (one 16-byte load) or bf16 (one 8-byte load). */
static __device__ __forceinline__ float4 bn_x_quad(const float *x, int quad)
{
    return reinterpret_cast<const float4 *>(x)[quad];
}
static __device__ __forceinline__ float4 bn_x_quad(const uint16_t *x, int quad)
{
    const uint2 w = reinterpret_cast<const uint2 *>(x)[quad];
    return make_float4(__uint_as_float(w.x << 16), __uint_as_float(w.x & 0xffff0000u),
                       __uint_as_float(w.y << 16), __uint_as_float(w.y & 0xffff0000u));
}

/* batchnorm_backward_dx_kernel four values at a time (bn_quads). */
template <bool IN_PLACE, typename XP>
static __global__ void batchnorm_backward_dx_quads_kernel(float4 *dx, const float4 *dout,
                                                          const XP *x, const float *gamma,
                                                          const float *save_mean,
                                                          const float *save_invstd,
                                                          const float *coef, bn_quads q)
{
    BN_QUADS_LOOP(k, q) {
        const int c = bn_quad_channel(k, q);
        const float a = (gamma ? gamma[c] : 1.0f) * save_invstd[c];
        const float m = save_mean[c], c0 = coef[c], c1 = coef[q.C + c];
        const float4 dy = dout[k], v = bn_x_quad(x, k);
        float4 d = IN_PLACE ? make_float4(0.0f, 0.0f, 0.0f, 0.0f) : dx[k];
        d.x = bn_dx_value(d.x, a, dy.x, v.x, m, c0, c1);
        d.y = bn_dx_value(d.y, a, dy.y, v.y, m, c0, c1);
        d.z = bn_dx_value(d.z, a, dy.z, v.z, m, c0, c1);
        d.w = bn_dx_value(d.w, a, dy.w, v.w, m, c0, c1);
        dx[k] = d;
    }
}

/* dx by the quads kernel where it can, else the scalar one; x is `x`, or (x NULL) x_bf16. */
template <bool IN_PLACE>
static void backward_dx_launch(float *dx, const float *dout, const float *x,
                               const uint16_t *x_bf16, const float *gamma, const float *save_mean,
                               const float *save_invstd, const float *coef, int C, int HW,
                               int64_t n)
{
    bn_quads q;
    if (x && bn_quads_make(&q, n, C, HW, dx, dout, x, NULL))
        SNN_CUDA_LAUNCH((batchnorm_backward_dx_quads_kernel<IN_PLACE, float>),
                        snn_cuda_grid(q.n4, SNN_CUDA_BLOCK), SNN_CUDA_BLOCK, 0, (float4 *)dx,
                        (const float4 *)dout, x, gamma, save_mean, save_invstd, coef, q);
    else if (!x && bn_quads_make(&q, n, C, HW, dx, dout, x_bf16, NULL))
        SNN_CUDA_LAUNCH((batchnorm_backward_dx_quads_kernel<IN_PLACE, uint16_t>),
                        snn_cuda_grid(q.n4, SNN_CUDA_BLOCK), SNN_CUDA_BLOCK, 0, (float4 *)dx,
                        (const float4 *)dout, x_bf16, gamma, save_mean, save_invstd, coef, q);
    else if (x)
        SNN_CUDA_LAUNCH((batchnorm_backward_dx_kernel<IN_PLACE, bn_x_f32>),
                        snn_cuda_grid(n, SNN_CUDA_BLOCK), SNN_CUDA_BLOCK, 0, dx, dout, bn_x_f32{x},
                        gamma, save_mean, save_invstd, coef, C, HW, n);
    else
        SNN_CUDA_LAUNCH((batchnorm_backward_dx_kernel<IN_PLACE, bn_x_bf16>),
                        snn_cuda_grid(n, SNN_CUDA_BLOCK), SNN_CUDA_BLOCK, 0, dx, dout,
                        bn_x_bf16{x_bf16}, gamma, save_mean, save_invstd, coef, C, HW, n);
}

/* dx += ... (batchnorm_common.cuh; the sync-BN backward ends with it too) */
void bn_backward_dx_launch(float *dx, const float *dout, const float *x, const float *gamma,
                           const float *save_mean, const float *save_invstd, const float *coef,
                           int C, int HW, int64_t n)
{
    backward_dx_launch<false>(dx, dout, x, NULL, gamma, save_mean, save_invstd, coef, C, HW, n);
}

/* One thread per channel: bn_backward_finish_channel from given sums (C, 3): the reduction's
 * tail, for batchnorm_backward_in_place_sums. */
static __global__ void batchnorm_backward_sums_channel_kernel(const double *sums, float *dgamma,
                                                              float *dbeta, float *coef,
                                                              const float *save_invstd, int C)
{
    SNN_GRID_STRIDE_LOOP(c, C)
        bn_backward_finish_channel((int)c, sums[3 * c], sums[3 * c + 1], (int64_t)sums[3 * c + 2],
                                   C, save_invstd, dgamma, dbeta, coef);
}

/* One thread per channel: what the channels-last conv's copy of dout needs to make a
 * batch-norm's dx as it loads (snn_bn_dout): chan[c] = (a, mean, c0, c1), the floats the
 * in-place backward's bn_dx_value takes (a = gamma invstd; c0, c1 from the sums as
 * batchnorm_backward_sums_channel_kernel makes them). */
static __global__ void batchnorm_dout_channel_kernel(float4 *chan, const double *sums,
                                                     const float *gamma, const float *save_mean,
                                                     const float *save_invstd, int C)
{
    SNN_GRID_STRIDE_LOOP(c, C) {
        const float2 k = bn_dx_coef(sums[3 * c], sums[3 * c + 1], (int64_t)sums[3 * c + 2],
                                    save_invstd[c]);
        chan[c] = make_float4((gamma ? gamma[c] : 1.0f) * save_invstd[c], save_mean[c], k.x, k.y);
    }
}

extern "C" void snn_bn_dout_channels_cuda(float *chan, const snn_bn_dout *bn, int C)
{
    SNN_CUDA_LAUNCH(batchnorm_dout_channel_kernel, snn_cuda_grid(C, BN_BLOCK), BN_BLOCK, 0,
                    (float4 *)chan, bn->sums, bn->gamma, bn->save_mean, bn->save_invstd, C);
}

/* The reduction (or, with sums given, its tail from them), then (when dx is wanted) the
 * elementwise pass: batchnorm_backward and, with dout NULL (dx holds it),
 * batchnorm_backward_in_place (and _sums). */
static void backward(float *dx, float *dgamma, float *dbeta, const float *dout, const float *x,
                     const uint16_t *x_bf16, const float *gamma, const float *save_mean,
                     const float *save_invstd, const double *sums, int N, int C, int HW)
{
    const int64_t n = (int64_t)N * C * HW;
    if (n <= 0 || (!dx && !dgamma && !dbeta)) return;
    const bool in_place = dout == NULL;
    if (in_place) dout = dx;
    const bn_plan plan = make_bn_plan(N, C, HW);
    const int64_t blocks = C * plan.segments;

    /* scratch: coef (2 C floats, only when dx is wanted), then the partial sums (2 doubles per
     * block, only with several segments) at the next 256-byte boundary */
    const size_t coef_bytes = dx ? ((size_t)2 * (size_t)C * sizeof(float) + 255) / 256 * 256 : 0;
    const size_t partial_bytes = plan.segments > 1 ? (size_t)(2 * blocks) * sizeof(double) : 0;
    char *scratch = NULL;
    if (coef_bytes + partial_bytes > 0)
        scratch = (char *)snn_cuda_scratch(coef_bytes + partial_bytes);
    float *coef = dx ? (float *)scratch : NULL;
    double *partial = plan.segments > 1 ? (double *)(scratch + coef_bytes) : NULL;

    if (sums)
        SNN_CUDA_LAUNCH(batchnorm_backward_sums_channel_kernel, snn_cuda_grid(C, BN_BLOCK),
                        BN_BLOCK, 0, sums, dgamma, dbeta, coef, save_invstd, C);
    else if (x)
        SNN_CUDA_LAUNCH(batchnorm_backward_reduce_kernel<bn_x_f32>, bn_reduce_grid(C, plan),
                        BN_BLOCK, 0, partial, dgamma, dbeta, coef, dout, bn_x_f32{x}, save_mean,
                        save_invstd, C, HW, plan);
    else
        SNN_CUDA_LAUNCH(batchnorm_backward_reduce_kernel<bn_x_bf16>, bn_reduce_grid(C, plan),
                        BN_BLOCK, 0, partial, dgamma, dbeta, coef, dout, bn_x_bf16{x_bf16},
                        save_mean, save_invstd, C, HW, plan);
    if (!sums && plan.segments > 1)
        SNN_CUDA_LAUNCH(batchnorm_backward_finish_kernel, snn_cuda_grid(C, BN_BLOCK), BN_BLOCK, 0,
                        partial, dgamma, dbeta, coef, save_invstd, C, plan);
    if (!dx) return;
    if (in_place)
        backward_dx_launch<true>(dx, dout, x, x_bf16, gamma, save_mean, save_invstd, coef, C, HW,
                                 n);
    else
        backward_dx_launch<false>(dx, dout, x, x_bf16, gamma, save_mean, save_invstd, coef, C, HW,
                                  n);
}

extern "C" void snn_batchnorm_backward_cuda(float *dx, float *dgamma, float *dbeta,
                                            const float *dout, const float *x, const float *gamma,
                                            const float *save_mean, const float *save_invstd,
                                            int N, int C, int HW)
{
    backward(dx, dgamma, dbeta, dout, x, NULL, gamma, save_mean, save_invstd, NULL, N, C, HW);
}

extern "C" void snn_batchnorm_backward_in_place_cuda(float *dx, float *dgamma, float *dbeta,
                                                     const float *x, const uint16_t *x_bf16,
                                                     const float *gamma, const float *save_mean,
                                                     const float *save_invstd, int N, int C,
                                                     int HW)
{
    backward(dx, dgamma, dbeta, NULL, x, x_bf16, gamma, save_mean, save_invstd, NULL, N, C, HW);
}

extern "C" void snn_batchnorm_backward_in_place_sums_cuda(float *dx, float *dgamma, float *dbeta,
                                                          const float *x, const uint16_t *x_bf16,
                                                          const float *gamma,
                                                          const float *save_mean,
                                                          const float *save_invstd,
                                                          const double *sums, int N, int C,
                                                          int HW)
{
    backward(dx, dgamma, dbeta, NULL, x, x_bf16, gamma, save_mean, save_invstd, sums, N, C, HW);
}
