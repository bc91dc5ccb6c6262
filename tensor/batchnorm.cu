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
 * Kernels. Training forward: one statistics kernel, then one normalise kernel. Backward: one
 * reduction kernel (sum dout and sum dout (x - mean) per channel; it also writes dbeta, dgamma
 * and the two per-channel coefficients dx needs), then one elementwise kernel. At the end of
 * the file, the same passes cut apart for batch-norm across data-parallel ranks (sync-BN).
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
 * (T. Chan, G. Golub, R. LeVeque, 1979):
 *     delta = mean_b - mean_a,  n = n_a + n_b,  mean = mean_a + delta n_b / n,
 *     M2 = M2_a + M2_b + delta^2 n_a n_b / n
 * which never subtracts two large sums, so |mean| >> std costs no accuracy.
 *
 * gamma / beta may be NULL (affine = False), running statistics may be NULL, NULL gradient
 * outputs are skipped, as on the CPU.
 */
#include "cuda_common.cuh"
#include "error.h"
#include "kernels_cuda.h"

#define BN_BLOCK 256

/* How a channel's M values are cut into segments (a pure function of the shape). */
typedef struct bn_plan {
    int64_t M;         /* values per channel */
    int64_t segments;  /* S: blocks per channel */
    int64_t seg_len;   /* ceil(M / S) values per segment (the last may be shorter or empty) */
} bn_plan;

static bn_plan make_bn_plan(int N, int C, int HW)
{
    bn_plan plan;
    plan.M = (int64_t)N * HW;
    const int64_t want_blocks = (int64_t)snn_cuda_sm_count() * 8;
    int64_t S = (want_blocks + C - 1) / C;
    const int64_t by_len = (plan.M + 4095) / 4096; /* a segment keeps >= ~4096 values */
    if (S > by_len) S = by_len;
    if (S < 1) S = 1;
    plan.segments = S;
    plan.seg_len = (plan.M + S - 1) / S;
    return plan;
}

/* Walks the values m in [begin, end) of channel c with a stride of blockDim.x, tracking
 * (n, i) = (m / HW, m % HW) incrementally: one division at the start, none per step. */
struct bn_walk {
    int64_t m, n, i, dn, di;
    __device__ bn_walk(int64_t begin, int HW)
    {
        m = begin + threadIdx.x;
        n = snn_divmod(m, HW, &i);
        dn = snn_divmod(blockDim.x, HW, &di);
    }
    __device__ int64_t offset(int64_t C, int64_t c, int64_t HW) const
    {
        return (n * C + c) * HW + i;
    }
    __device__ void next(int HW)
    {
        m += blockDim.x;
        n += dn;
        i += di;
        if (i >= HW) {
            i -= HW;
            n++;
        }
    }
};

/* Walks [begin, end) of channel c as bn_walk does and hands use() what load(offset) read, in
 * walk order, BN_UNROLL values at a time: their loads are issued together, so each thread has
 * BN_UNROLL reads in flight instead of one (one read per thread left the reductions at 20-50%
 * of the bandwidth: ncu, H100, 2026-11-26). The order of use() is the walk's, so the sums keep
 * their bits. */
#define BN_UNROLL 4
template <typename Load, typename Use>
static __device__ __forceinline__ void bn_walk_all(int64_t begin, int64_t end, int64_t C,
                                                   int64_t c, int HW, Load load, Use use)
{
    bn_walk w(begin, HW);
    while (w.m < end) {
        decltype(load((int64_t)0)) v[BN_UNROLL];
        int got = 0;
        #pragma unroll
        for (int u = 0; u < BN_UNROLL; u++)
            if (w.m < end) {
                v[u] = load(w.offset(C, c, HW));
                got = u + 1;
                w.next(HW);
            }
        #pragma unroll
        for (int u = 0; u < BN_UNROLL; u++)
            if (u < got) use(v[u]);
    }
}

/* Elementwise passes over (N, C, HW) four values at a time when HW % 4 == 0 (a float4 never
 * crosses a plane) and every pointer is 16-byte aligned: quad q lies in channel
 * (q / (HW / 4)) % C, found by multiply and shift. Each value is computed as the scalar
 * kernel computes it, so both give the same bits. */
struct bn_quads {
    snn_fast_divisor by_plane, by_C;
    int C;
    int n4; /* quads in all, < 2^31 */
};

static bool bn_quads_make(bn_quads *q, int64_t n, int C, int HW, const void *a, const void *b,
                          const void *c, const void *d)
{
    const uintptr_t bits = (uintptr_t)a | (uintptr_t)b | (uintptr_t)c | (uintptr_t)d;
    if (HW % 4 != 0 || n / 4 >= INT32_MAX || (bits & 15) != 0) return false;
    q->by_plane = snn_fast_divisor_make((uint32_t)(HW / 4));
    q->by_C = snn_fast_divisor_make((uint32_t)C);
    q->C = C;
    q->n4 = (int)(n / 4);
    return true;
}

static __device__ __forceinline__ int bn_quad_channel(int quad, const bn_quads &q)
{
    const int plane = snn_fast_div(quad, q.by_plane);
    return plane - snn_fast_div(plane, q.by_C) * q.C;
}

/* (v - m) scale + shift for each of v's four values, as the scalar kernels compute one */
static __device__ __forceinline__ float4 bn_affine4(float4 v, float m, float scale, float shift)
{
    return make_float4((v.x - m) * scale + shift, (v.y - m) * scale + shift,
                       (v.z - m) * scale + shift, (v.w - m) * scale + shift);
}

#define BN_QUADS_LOOP(quad, q)                                                               \
    for (int quad = blockIdx.x * blockDim.x + threadIdx.x; quad < (q).n4;                    \
         quad += blockDim.x * gridDim.x)

/* The per-channel tail of the training forward, from the channel's mean and M2. */
static __device__ void bn_finish_channel(int c, double mean, double M2, int64_t M,
                                         float *save_mean, float *save_invstd,
                                         float *running_mean, float *running_var, float momentum,
                                         float eps)
{
    const double var = M2 / (double)M;
    save_mean[c] = (float)mean;
    save_invstd[c] = (float)(1.0 / sqrt(var + (double)eps));
    if (running_mean)
        running_mean[c] = (1.0f - momentum) * running_mean[c] + momentum * (float)mean;
    if (running_var) {
        /* Bessel's correction; a single value per channel has no spread to correct */
        const double unbiased = M > 1 ? M2 / (double)(M - 1) : var;
        running_var[c] = (1.0f - momentum) * running_var[c] + momentum * (float)unbiased;
    }
}

/* Mean and M2 of segment s of channel c, in double (two passes over the segment; the second
 * mostly from L2); every thread of the block gets them. */
static __device__ void bn_segment_stats(const float *x, int c, int64_t s, int C, int HW,
                                        bn_plan plan, double *mean_out, double *m2_out)
{
    const int64_t begin = s * plan.seg_len;
    const int64_t end = begin + plan.seg_len < plan.M ? begin + plan.seg_len : plan.M;
    const int64_t count = end > begin ? end - begin : 0;
    auto load = [&](int64_t at) { return x[at]; };
    double sum = 0.0;
    bn_walk_all(begin, end, C, c, HW, load, [&](float v) { sum += (double)v; });
    sum = snn_block_sum(sum);
    const double mean = count > 0 ? sum / (double)count : 0.0;
    double m2 = 0.0;
    bn_walk_all(begin, end, C, c, HW, load, [&](float v) {
        const double dev = (double)v - mean;
        m2 += dev * dev;
    });
    *mean_out = mean;
    *m2_out = snn_block_sum(m2);
}

/* Merges channel c's segments (partial[2 b] = mean, partial[2 b + 1] = M2, b = c S + s) in
 * index order with Chan's update (file comment). */
static __device__ void bn_merge_segments(const double *partial, int64_t c, bn_plan plan,
                                         double *mean_out, double *M2_out)
{
    double n_a = 0.0, mean = 0.0, M2 = 0.0;
    for (int64_t s = 0; s < plan.segments; s++) {
        const int64_t begin = s * plan.seg_len;
        const int64_t end = begin + plan.seg_len < plan.M ? begin + plan.seg_len : plan.M;
        if (end <= begin) continue;
        const double n_b = (double)(end - begin);
        const double mean_b = partial[2 * (c * plan.segments + s)];
        const double M2_b = partial[2 * (c * plan.segments + s) + 1];
        const double n = n_a + n_b;
        const double delta = mean_b - mean;
        mean += delta * (n_b / n);
        M2 += M2_b + delta * delta * (n_a * n_b / n);
        n_a = n;
    }
    *mean_out = mean;
    *M2_out = M2;
}

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
    const int64_t blocks = C * plan.segments;
    double *partial = NULL;
    if (plan.segments > 1)
        partial = (double *)snn_cuda_scratch((size_t)(2 * blocks) * sizeof(double));
    const int64_t cap = (int64_t)snn_cuda_sm_count() * 32;
    SNN_CUDA_LAUNCH(batchnorm_forward_stats_kernel, (unsigned)(blocks < cap ? blocks : cap),
                    BN_BLOCK, 0, partial, save_mean, save_invstd, running_mean, running_var, x, C,
                    HW, plan, momentum, eps);
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
    const double sum_dy_xhat = sum_dy_dev * (double)invstd;
    if (dbeta) dbeta[c] += (float)sum_dy;
    if (dgamma) dgamma[c] += (float)sum_dy_xhat;
    if (coef) {
        coef[c] = (float)(sum_dy / (double)M);
        coef[C + c] = (float)(sum_dy_xhat / (double)M * (double)invstd);
    }
}

/* Block b = (c, s): sum dout and sum dout (x - mean) over segment s of channel c, in double.
 * With one segment it finishes the channel, else partial[2 b], partial[2 b + 1] = the sums.
 * Traffic: 8 B read per value.  CPU: pass 1 of snn_batchnorm_backward_cpu. */
static __global__ void
batchnorm_backward_reduce_kernel(double *partial, float *dgamma, float *dbeta, float *coef,
                                 const float *dout, const float *x, const float *save_mean,
                                 const float *save_invstd, int C, int HW, bn_plan plan)
{
    for (int64_t b = blockIdx.x; b < C * plan.segments; b += gridDim.x) {
        const int c = (int)(b / plan.segments);
        const int64_t s = b % plan.segments;
        const int64_t begin = s * plan.seg_len;
        const int64_t end = begin + plan.seg_len < plan.M ? begin + plan.seg_len : plan.M;
        const double mean = (double)save_mean[c];
        double sum_dy = 0.0, sum_dy_dev = 0.0;
        bn_walk_all(begin, end, C, c, HW,
                    [&](int64_t at) { return make_float2(dout[at], x[at]); }, [&](float2 v) {
                        const double dy = (double)v.x;
                        sum_dy += dy;
                        sum_dy_dev += dy * ((double)v.y - mean);
                    });
        sum_dy = snn_block_sum(sum_dy);
        sum_dy_dev = snn_block_sum(sum_dy_dev);
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

/* dx += gamma invstd (dout - mean(dout) - (x - mean) k), k = coef[C + c].
 * Traffic: 12 B read + 4 B read-modify-write per element.
 * CPU: pass 2 of snn_batchnorm_backward_cpu. */
static __global__ void batchnorm_backward_dx_kernel(float *dx, const float *dout, const float *x,
                                                    const float *gamma, const float *save_mean,
                                                    const float *save_invstd, const float *coef,
                                                    int C, int HW, int64_t n)
{
    SNN_GRID_STRIDE_LOOP(k, n) {
        int64_t i, c;
        snn_divmod(snn_divmod(k, HW, &i), C, &c);
        const float a = (gamma ? gamma[c] : 1.0f) * save_invstd[c];
        dx[k] += a * (dout[k] - coef[c] - (x[k] - save_mean[c]) * coef[C + c]);
    }
}

/* batchnorm_backward_dx_kernel four values at a time (bn_quads). */
static __global__ void batchnorm_backward_dx_quads_kernel(float4 *dx, const float4 *dout,
                                                          const float4 *x, const float *gamma,
                                                          const float *save_mean,
                                                          const float *save_invstd,
                                                          const float *coef, bn_quads q)
{
    BN_QUADS_LOOP(k, q) {
        const int c = bn_quad_channel(k, q);
        const float a = (gamma ? gamma[c] : 1.0f) * save_invstd[c];
        const float m = save_mean[c], c0 = coef[c], c1 = coef[q.C + c];
        const float4 dy = dout[k], v = x[k];
        float4 d = dx[k];
        d.x += a * (dy.x - c0 - (v.x - m) * c1);
        d.y += a * (dy.y - c0 - (v.y - m) * c1);
        d.z += a * (dy.z - c0 - (v.z - m) * c1);
        d.w += a * (dy.w - c0 - (v.w - m) * c1);
        dx[k] = d;
    }
}

/* dx by the quads kernel where it can, else the scalar one. */
static void batchnorm_backward_dx(float *dx, const float *dout, const float *x, const float *gamma,
                                  const float *save_mean, const float *save_invstd,
                                  const float *coef, int C, int HW, int64_t n)
{
    bn_quads q;
    if (bn_quads_make(&q, n, C, HW, dx, dout, x, NULL))
        SNN_CUDA_LAUNCH(batchnorm_backward_dx_quads_kernel, snn_cuda_grid(q.n4, SNN_CUDA_BLOCK),
                        SNN_CUDA_BLOCK, 0, (float4 *)dx, (const float4 *)dout, (const float4 *)x,
                        gamma, save_mean, save_invstd, coef, q);
    else
        SNN_CUDA_LAUNCH(batchnorm_backward_dx_kernel, snn_cuda_grid(n, SNN_CUDA_BLOCK),
                        SNN_CUDA_BLOCK, 0, dx, dout, x, gamma, save_mean, save_invstd, coef, C, HW,
                        n);
}

extern "C" void snn_batchnorm_backward_cuda(float *dx, float *dgamma, float *dbeta,
                                            const float *dout, const float *x, const float *gamma,
                                            const float *save_mean, const float *save_invstd,
                                            int N, int C, int HW)
{
    const int64_t n = (int64_t)N * C * HW;
    if (n <= 0 || (!dx && !dgamma && !dbeta)) return;
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

    const int64_t cap = (int64_t)snn_cuda_sm_count() * 32;
    SNN_CUDA_LAUNCH(batchnorm_backward_reduce_kernel, (unsigned)(blocks < cap ? blocks : cap),
                    BN_BLOCK, 0, partial, dgamma, dbeta, coef, dout, x, save_mean, save_invstd,
                    C, HW, plan);
    if (plan.segments > 1)
        SNN_CUDA_LAUNCH(batchnorm_backward_finish_kernel, snn_cuda_grid(C, BN_BLOCK), BN_BLOCK, 0,
                        partial, dgamma, dbeta, coef, save_invstd, C, plan);
    if (dx) batchnorm_backward_dx(dx, dout, x, gamma, save_mean, save_invstd, coef, C, HW, n);
}

/* ---- across data-parallel ranks (sync-BN) ----------------------------------------------------
 *
 * The pieces of the training forward and backward that dist/ runs with an exchange between
 * them (tensor/batchnorm.c states the math and the merge). They reuse the fused path's
 * segments and device functions, so with one rank they give its bits. */

/* Block b = (c, s): the segment's mean and M2; with one segment it writes the channel's
 * stats (M, mean, M2), else partials for the finish kernel.  CPU: snn_batchnorm_stats_cpu. */
static __global__ void batchnorm_stats_kernel(double *partial, double *stats, const float *x,
                                              int C, int HW, bn_plan plan)
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

extern "C" void snn_batchnorm_stats_cuda(double *stats, const float *x, int N, int C, int HW)
{
    if ((int64_t)N * C * HW <= 0) return;
    const bn_plan plan = make_bn_plan(N, C, HW);
    const int64_t blocks = C * plan.segments;
    double *partial = NULL;
    if (plan.segments > 1)
        partial = (double *)snn_cuda_scratch((size_t)(2 * blocks) * sizeof(double));
    const int64_t cap = (int64_t)snn_cuda_sm_count() * 32;
    SNN_CUDA_LAUNCH(batchnorm_stats_kernel, (unsigned)(blocks < cap ? blocks : cap), BN_BLOCK, 0,
                    partial, stats, x, C, HW, plan);
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
            const double n_b = s[0];
            if (n_b <= 0.0) continue;
            const double n = n_a + n_b;
            const double delta = s[1] - mean;
            mean += delta * (n_b / n);
            M2 += s[2] + delta * delta * (n_a * n_b / n);
            n_a = n;
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
static __global__ void batchnorm_backward_sums_kernel(double *partial, double *sums,
                                                      const float *dout, const float *x,
                                                      const float *save_mean, int C, int HW,
                                                      bn_plan plan)
{
    for (int64_t b = blockIdx.x; b < C * plan.segments; b += gridDim.x) {
        const int c = (int)(b / plan.segments);
        const int64_t s = b % plan.segments;
        const int64_t begin = s * plan.seg_len;
        const int64_t end = begin + plan.seg_len < plan.M ? begin + plan.seg_len : plan.M;
        const double mean = (double)save_mean[c];
        double sum_dy = 0.0, sum_dy_dev = 0.0;
        bn_walk_all(begin, end, C, c, HW,
                    [&](int64_t at) { return make_float2(dout[at], x[at]); }, [&](float2 v) {
                        const double dy = (double)v.x;
                        sum_dy += dy;
                        sum_dy_dev += dy * ((double)v.y - mean);
                    });
        sum_dy = snn_block_sum(sum_dy);
        sum_dy_dev = snn_block_sum(sum_dy_dev);
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

extern "C" void snn_batchnorm_backward_sums_cuda(double *sums, const float *dout, const float *x,
                                                 const float *save_mean, int N, int C, int HW)
{
    if ((int64_t)N * C * HW <= 0) return;
    const bn_plan plan = make_bn_plan(N, C, HW);
    const int64_t blocks = C * plan.segments;
    double *partial = NULL;
    if (plan.segments > 1)
        partial = (double *)snn_cuda_scratch((size_t)(2 * blocks) * sizeof(double));
    const int64_t cap = (int64_t)snn_cuda_sm_count() * 32;
    SNN_CUDA_LAUNCH(batchnorm_backward_sums_kernel, (unsigned)(blocks < cap ? blocks : cap),
                    BN_BLOCK, 0, partial, sums, dout, x, save_mean, C, HW, plan);
    if (plan.segments > 1)
        SNN_CUDA_LAUNCH(batchnorm_backward_sums_finish_kernel, snn_cuda_grid(C, BN_BLOCK),
                        BN_BLOCK, 0, partial, sums, C, plan);
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
    if (dx) batchnorm_backward_dx(dx, dout, x, gamma, save_mean, save_invstd, coef, C, HW, n);
}
