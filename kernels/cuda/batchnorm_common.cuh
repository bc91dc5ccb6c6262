/*
 * batchnorm_common.cuh - what the fused batch-norm kernels (batchnorm.cu) and the sync-BN
 * pieces (batchnorm_sync.cu) share: how a channel's values are cut into segments (bn_plan),
 * walked (bn_walk, bn_walk_all) and reduced (bn_segment_stats, bn_merge_segments,
 * bn_segment_dy_sums), the four-at-a-time indexing of the elementwise passes (bn_quads), and
 * the input-gradient launch both backward paths end with. batchnorm.cu's comment states the
 * math, the segments and the merge. Internal: included by those two files only.
 */
#ifndef SNN_BATCHNORM_COMMON_CUH
#define SNN_BATCHNORM_COMMON_CUH

#include <stdint.h>

#include "kernels/chan_merge.h"
#include "bn_dx.cuh"
#include "cuda_common.cuh"

#define BN_BLOCK 256

/* How a channel's M values are cut into segments (a pure function of the shape). */
typedef struct bn_plan {
    int64_t M;         /* values per channel */
    int64_t segments;  /* S: blocks per channel */
    int64_t seg_len;   /* ceil(M / S) values per segment (the last may be shorter or empty) */
} bn_plan;

static inline bn_plan make_bn_plan(int N, int C, int HW)
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

/* The grid of a segment reduction: one block per (channel, segment), at most 32 an SM (the
 * kernels loop over the rest). */
static inline unsigned bn_reduce_grid(int C, const bn_plan &plan)
{
    const int64_t blocks = C * plan.segments, cap = (int64_t)snn_cuda_sm_count() * 32;
    return (unsigned)(blocks < cap ? blocks : cap);
}

/* The reductions' partial sums, 2 doubles per block, in the context's scratch when a channel
 * has several segments; NULL when each block finishes its channel itself. */
static inline double *bn_partials(int C, const bn_plan &plan)
{
    if (plan.segments <= 1) return NULL;
    return (double *)snn_cuda_scratch((size_t)(2 * C * plan.segments) * sizeof(double));
}

/* Walks the values m in [begin, end) of channel c with a stride of blockDim.x, tracking the
 * position i = m % HW in the plane and the offset (n C + c) HW + i, n = m / HW, incrementally:
 * one division and two multiplies at the start, two adds and a compare a step. (Recomputing
 * the offset from (n, i) each step cost two 64-bit multiplies a value, and left the statistics
 * kernel bound by its instructions, not by memory: docs/benchmarks.md, "Where a step's time
 * goes".) */
struct bn_walk {
    int64_t m, off, step, wrap;
    int i, di;
    __device__ bn_walk(int64_t begin, int64_t C, int64_t c, int HW)
    {
        m = begin + threadIdx.x;
        int64_t i64, di64;
        const int64_t n = snn_divmod(m, HW, &i64);
        const int64_t dn = snn_divmod(blockDim.x, HW, &di64);
        i = (int)i64, di = (int)di64;
        off = (n * C + c) * HW + i;
        step = dn * C * HW + di;      /* dn planes of every channel, then di values on */
        wrap = (C - 1) * HW;          /* past the plane's end: on to this channel's next plane */
    }
    __device__ void next(int HW)
    {
        m += blockDim.x;
        off += step;
        i += di;
        if (i >= HW) {
            i -= HW;
            off += wrap;
        }
    }
};

/* Walks [begin, end) of channel c as bn_walk does and hands use() what load(offset) read, in
 * walk order, BN_UNROLL values at a time: their loads are issued together, so each thread has
 * BN_UNROLL reads in flight instead of one (one read per thread left the reductions far below
 * the bandwidth: docs/benchmarks.md, "Where a step's time goes"). The order of use() is the
 * walk's, so the sums keep their bits. */
#define BN_UNROLL 4
template <typename Load, typename Use>
static __device__ __forceinline__ void bn_walk_all(int64_t begin, int64_t end, int64_t C,
                                                   int64_t c, int HW, Load load, Use use)
{
    bn_walk w(begin, C, c, HW);
    while (w.m < end) {
        decltype(load((int64_t)0)) v[BN_UNROLL];
        int got = 0;
        #pragma unroll
        for (int u = 0; u < BN_UNROLL; u++)
            if (w.m < end) {
                v[u] = load(w.off);
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

static inline bool bn_quads_make(bn_quads *q, int64_t n, int C, int HW, const void *a, const void *b,
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
 * mostly from L2); every thread of the block gets them. X: a float pointer, or bn_x_bf16
 * (below): the same sums, in the same order. */
template <typename X>
static __device__ void bn_segment_stats(X x, int c, int64_t s, int C, int HW, bn_plan plan,
                                        double *mean_out, double *m2_out)
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
        const double *p = partial + 2 * (c * plan.segments + s); /* (mean, M2) */
        snn_chan_merge(&n_a, &mean, &M2, (double)(end - begin), p[0], p[1]);
    }
    *mean_out = mean;
    *M2_out = M2;
}

/* The float mean of channel c read from merged statistics (C, 3) = (count, mean, M2): the
 * save_mean the batch-norm wrote, (float) of the double (bn_finish_channel) */
struct bn_mean_of_stats {
    const double *stats;
    __device__ __forceinline__ float operator[](int c) const { return (float)stats[3 * c + 1]; }
};

/* Sum dout and sum dout (x - mean) over segment s of channel c, in double; every thread of
 * the block gets them. X: a float pointer, bn_x_f32 or bn_x_bf16; Mean: save_mean (a float
 * pointer) or bn_mean_of_stats. */
template <typename X, typename Mean>
static __device__ void bn_segment_dy_sums(const float *dout, X x, Mean save_mean, int c,
                                          int64_t s, int C, int HW, bn_plan plan,
                                          double *sum_dy_out, double *sum_dy_dev_out)
{
    const int64_t begin = s * plan.seg_len;
    const int64_t end = begin + plan.seg_len < plan.M ? begin + plan.seg_len : plan.M;
    const double mean = (double)save_mean[c];
    double sum_dy = 0.0, sum_dy_dev = 0.0;
    bn_walk_all(begin, end, C, c, HW, [&](int64_t at) { return make_float2(dout[at], x[at]); },
                [&](float2 v) {
                    const double dy = (double)v.x;
                    sum_dy += dy;
                    sum_dy_dev += dy * ((double)v.y - mean);
                });
    *sum_dy_out = snn_block_sum(sum_dy);
    *sum_dy_dev_out = snn_block_sum(sum_dy_dev);
}

/* dx += gamma invstd (dout - coef[c] - (x - mean) coef[C + c]), four values at a time where
 * bn_quads allows, else one (batchnorm.cu). */
void bn_backward_dx_launch(float *dx, const float *dout, const float *x, const float *gamma,
                           const float *save_mean, const float *save_invstd, const float *coef,
                           int C, int HW, int64_t n);

#endif /* SNN_BATCHNORM_COMMON_CUH */
