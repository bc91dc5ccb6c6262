/*
 * pool2d.c - CPU reference kernels of 2-D max-pooling and average-pooling (kernels/kernels.h).
 *
 * Dimensions: N batch (T*N for multi-step data), C channels, H, W input height and width,
 * K square window, stride S, zero padding P, output H_out x W_out with
 *     H_out = (H + 2P - K) / S + 1   (floor: PyTorch's ceil_mode = False), likewise W_out.
 * Output (oh, ow) looks at the input rows ih = oh*S - P + kh and columns iw = ow*S - P + kw,
 * kh, kw in [0, K); positions outside [0, H) x [0, W) are padding.
 *
 * Max-pool
 *     out[n,c,oh,ow]    = max over the window of x[n,c,ih,iw]       (padding is -inf: never wins)
 *     argmax[n,c,oh,ow] = ih*W + iw of the winner, a flat index in its (n, c) plane
 *     dx[n,c,argmax]   += dout[n,c,oh,ow]
 *   Ties go to the first maximum in scan order (kh outer, kw inner), because the comparison is
 *   strict. A NaN in the window wins and propagates (the first NaN in scan order), as PyTorch
 *   does, so a diverged network shows NaN instead of silently hiding it.
 *
 * Average-pool, count_include_pad = True (PyTorch's default): the divisor counts the padded
 * positions of the window, clipped to the padded image [-P, H + P):
 *     out[n,c,oh,ow] = (1 / |window|) * sum over the in-image window of x
 *     dx[n,c,ih,iw] += dout[n,c,oh,ow] / |window|     for every window containing (ih, iw)
 *   With ceil_mode = False no window reaches past the padded image, so |window| = K*K; the
 *   clipping is kept so that the divisor is written as PyTorch defines it.
 *
 * Threads: every kernel runs one (n, c) plane per iteration of an OpenMP loop. Planes are
 * disjoint in both the input and the output, so the backward's scatter needs no atomics and
 * each plane is summed in a fixed order: results do not depend on the number of threads.
 *
 * Test: tests/test_pool2d_kernels.c (ctest -R pool2d_kernels).
 */
#include <math.h>

#include "cpu_threads.h"
#include "kernels_cpu.h"

/* Units of work of a pool kernel (cpu_threads.h): each output element reads its K x K window. */
#define POOL_WORK(d, planes, out_plane) ((planes) * (out_plane) * (int64_t)(d)->K * (d)->K)

/*
 * Speed: written output by output, the max-pool's compare is a branch that real data
 * mispredicts about half the time, and the K-long inner loops are too short to vectorise
 * (K = 2 ran at ~12 ns per output here). So each output row is done in two parts:
 *   - border columns, whose window overlaps the padding: one output at a time (window_*);
 *   - interior columns, whose window lies inside the image: window position (kh, kw) outer,
 *     output column inner. The inner loop is elementwise over outputs, branch-free, and the
 *     compiler vectorises it. Every output still visits its window in scan order (kh outer,
 *     kw inner), so both parts give the same bits as the one-output-at-a-time loop.
 */

/* A half-open range of integers [lo, hi). Returned by value: a bound whose address is taken
 * could alias the int32 argmax stores, which would stop the compiler vectorising. */
typedef struct pool_range {
    int lo, hi;
} pool_range;

/* Output columns whose window lies wholly inside [0, W): ow*S - P >= 0 and ow*S - P + K <= W. */
static pool_range interior_columns(const snn_pool2d_dims *d)
{
    const int S = d->stride, P = d->pad;
    int a = (P + S - 1) / S;
    int b = d->W + P - d->K < 0 ? 0 : (d->W + P - d->K) / S + 1;
    if (b > d->W_out) b = d->W_out;
    if (a > b) a = b;
    return (pool_range){a, b};
}

/* Rows kh of the window of output row oh that lie inside [0, H). */
static pool_range window_rows(const snn_pool2d_dims *d, int oh)
{
    const int h0 = oh * d->stride - d->pad;
    return (pool_range){h0 < 0 ? -h0 : 0, h0 + d->K > d->H ? d->H - h0 : d->K};
}

/* ---- max-pool ------------------------------------------------------------------------------ */

/* True when v replaces best: v > best, or v is NaN; false for ties (the first maximum stays)
 * and once best is NaN (the first NaN stays). '&' rather than '&&' keeps it branch-free. */
static inline bool max_takes(float v, float best) { return !(v <= best) & (best == best); }

/* One output (oh, ow) of one plane, the window clipped to the image (padding never compared). */
static void max_window(float *op, int32_t *ap, const float *xp, const snn_pool2d_dims *d, int oh,
                       int ow)
{
    const int W = d->W, K = d->K;
    const int h0 = oh * d->stride - d->pad, w0 = ow * d->stride - d->pad;
    const pool_range rows = window_rows(d, oh);
    const int kh_lo = rows.lo, kh_hi = rows.hi;
    const int kw_lo = w0 < 0 ? -w0 : 0;
    const int kw_hi = w0 + K > W ? W - w0 : K;
    if (kh_lo >= kh_hi || kw_lo >= kw_hi) { /* all padding: only possible when P >= K */
        *op = -INFINITY;
        *ap = -1;
        return;
    }
    int32_t best_at = (h0 + kh_lo) * W + w0 + kw_lo; /* the first in-image element */
    float best = xp[best_at];
    for (int kh = kh_lo; kh < kh_hi; kh++) {
        for (int kw = kw_lo; kw < kw_hi; kw++) {
            const int at = (h0 + kh) * W + w0 + kw;
            const bool take = max_takes(xp[at], best);
            best_at = take ? at : best_at;
            best = take ? xp[at] : best;
        }
    }
    *op = best;
    *ap = best_at;
}

/*
 * Forward. Memory traffic per output: K*K input reads (each input is read about K*K/S^2 times,
 * from cache when windows overlap), 4 B out + 4 B argmax written. For the usual K = S = 2:
 * 4 B read per input, 8 B written per output (2 B per input).
 */
void snn_max_pool2d_forward_cpu(float *out, int32_t *argmax, const float *x,
                                const snn_pool2d_dims *d)
{
    const int H = d->H, W = d->W, K = d->K, S = d->stride, P = d->pad;
    const int H_out = d->H_out, W_out = d->W_out;
    const int64_t planes = (int64_t)d->N * d->C;
    const int64_t out_plane = (int64_t)H_out * W_out;
    const pool_range cols = interior_columns(d);
    const int lo = cols.lo, hi = cols.hi;

#pragma omp parallel for schedule(static) \
    num_threads(snn_cpu_threads(POOL_WORK(d, planes, out_plane)))
    for (int64_t plane = 0; plane < planes; plane++) {
        const float *xp = x + plane * (int64_t)H * W;   // (H, W)
        for (int oh = 0; oh < H_out; oh++) {
            float *orow = out + plane * out_plane + (int64_t)oh * W_out;        // (W_out)
            int32_t *arow = argmax + plane * out_plane + (int64_t)oh * W_out;   // (W_out)
            for (int ow = 0; ow < lo; ow++) max_window(orow + ow, arow + ow, xp, d, oh, ow);
            for (int ow = hi; ow < W_out; ow++) max_window(orow + ow, arow + ow, xp, d, oh, ow);

            const pool_range rows = window_rows(d, oh);
            const int kh_lo = rows.lo, kh_hi = rows.hi;
            if (lo >= hi || kh_lo >= kh_hi) continue;
            const int h0 = oh * S - P;
            /* interior: start from window position (kh_lo, 0), then scan the others */
            const int first = (h0 + kh_lo) * W - P;      /* + ow*S: that window's first input */
            for (int ow = lo; ow < hi; ow++) {
                orow[ow] = xp[first + ow * S];
                arow[ow] = first + ow * S;
            }
            for (int kh = kh_lo; kh < kh_hi; kh++) {
                for (int kw = (kh == kh_lo); kw < K; kw++) {
                    const int base = (h0 + kh) * W - P + kw;   /* + ow*S: this position */
                    for (int ow = lo; ow < hi; ow++) {
                        const float v = xp[base + ow * S];
                        const bool take = max_takes(v, orow[ow]);
                        arow[ow] = take ? base + ow * S : arow[ow];
                        orow[ow] = take ? v : orow[ow];
                    }
                }
            }
        }
    }
}

/*
 * Backward: route each output gradient to the input that won. Memory traffic per output:
 * 4 B dout + 4 B argmax read, one 4 B read-modify-write of dx (the caller zeroed or holds dx).
 */
void snn_max_pool2d_backward_cpu(float *dx, const float *dout, const int32_t *argmax,
                                 const snn_pool2d_dims *d)
{
    if (!dx) return;
    const int64_t planes = (int64_t)d->N * d->C;
    const int64_t in_plane = (int64_t)d->H * d->W;
    const int64_t out_plane = (int64_t)d->H_out * d->W_out;

#pragma omp parallel for schedule(static) \
    num_threads(snn_cpu_threads(POOL_WORK(d, planes, out_plane)))
    for (int64_t plane = 0; plane < planes; plane++) {
        float *dxp = dx + plane * in_plane;              // (H, W)
        const float *dop = dout + plane * out_plane;     // (H_out, W_out)
        const int32_t *ap = argmax + plane * out_plane;  // (H_out, W_out)
        for (int64_t o = 0; o < out_plane; o++) {
            if (ap[o] >= 0) dxp[ap[o]] += dop[o];
        }
    }
}

/* ---- average-pool -------------------------------------------------------------------------- */

/* |window| for count_include_pad = True: the window clipped to the padded image only. */
static int avg_pool_divisor(int oh, int ow, const snn_pool2d_dims *d)
{
    const int h0 = oh * d->stride - d->pad, w0 = ow * d->stride - d->pad;
    int h1 = h0 + d->K, w1 = w0 + d->K;
    if (h1 > d->H + d->pad) h1 = d->H + d->pad;
    if (w1 > d->W + d->pad) w1 = d->W + d->pad;
    return (h1 - h0) * (w1 - w0);
}

/* One output (oh, ow): the in-image part of the window summed in scan order, then divided. */
static float avg_window(const float *xp, const snn_pool2d_dims *d, int oh, int ow)
{
    const int W = d->W, K = d->K;
    const int h0 = oh * d->stride - d->pad, w0 = ow * d->stride - d->pad;
    const pool_range rows = window_rows(d, oh);
    const int kh_lo = rows.lo, kh_hi = rows.hi;
    const int kw_lo = w0 < 0 ? -w0 : 0;
    const int kw_hi = w0 + K > W ? W - w0 : K;
    float sum = 0.0f;
    for (int kh = kh_lo; kh < kh_hi; kh++)
        for (int kw = kw_lo; kw < kw_hi; kw++) sum += xp[(h0 + kh) * W + w0 + kw];
    return sum / (float)avg_pool_divisor(oh, ow, d);
}

/*
 * Forward. Memory traffic: each input read about K*K/S^2 times (once for K = S), 4 B written
 * per output. Each window sum runs in float in scan order (kh outer, kw inner) from 0, then is
 * divided: the border and interior paths give the same bits.
 */
void snn_avg_pool2d_forward_cpu(float *out, const float *x, const snn_pool2d_dims *d)
{
    const int H = d->H, W = d->W, K = d->K, S = d->stride, P = d->pad;
    const int H_out = d->H_out, W_out = d->W_out;
    const int64_t planes = (int64_t)d->N * d->C;
    const int64_t out_plane = (int64_t)H_out * W_out;
    const pool_range cols = interior_columns(d);
    const int lo = cols.lo, hi = cols.hi;

#pragma omp parallel for schedule(static) \
    num_threads(snn_cpu_threads(POOL_WORK(d, planes, out_plane)))
    for (int64_t plane = 0; plane < planes; plane++) {
        const float *xp = x + plane * (int64_t)H * W;   // (H, W)
        for (int oh = 0; oh < H_out; oh++) {
            float *orow = out + plane * out_plane + (int64_t)oh * W_out;   // (W_out)
            for (int ow = 0; ow < lo; ow++) orow[ow] = avg_window(xp, d, oh, ow);
            for (int ow = hi; ow < W_out; ow++) orow[ow] = avg_window(xp, d, oh, ow);
            if (lo >= hi) continue;

            /* interior: accumulate position by position into the output row */
            const pool_range rows = window_rows(d, oh);
            const int kh_lo = rows.lo, kh_hi = rows.hi;
            const int h0 = oh * S - P;
            for (int ow = lo; ow < hi; ow++) orow[ow] = 0.0f;
            for (int kh = kh_lo; kh < kh_hi; kh++) {
                for (int kw = 0; kw < K; kw++) {
                    const int base = (h0 + kh) * W - P + kw;
                    for (int ow = lo; ow < hi; ow++) orow[ow] += xp[base + ow * S];
                }
            }
            const float divisor = (float)avg_pool_divisor(oh, lo, d); /* same for all interior */
            for (int ow = lo; ow < hi; ow++) orow[ow] /= divisor;
        }
    }
}

/*
 * Backward: spread dout / |window| over the in-image part of each window. Memory traffic:
 * 4 B dout read per output, about K*K/S^2 read-modify-writes of dx per input (from cache).
 * Interior columns go position by position (vectorised over outputs); where windows overlap
 * (S < K) an input then receives its contributions in a different order than output by
 * output, so results match a plain loop to rounding, and exactly when S >= K.
 */
void snn_avg_pool2d_backward_cpu(float *dx, const float *dout, const snn_pool2d_dims *d)
{
    if (!dx) return;
    const int H = d->H, W = d->W, K = d->K, S = d->stride, P = d->pad;
    const int H_out = d->H_out, W_out = d->W_out;
    const int64_t planes = (int64_t)d->N * d->C;
    const int64_t out_plane = (int64_t)H_out * W_out;
    const pool_range cols = interior_columns(d);
    const int lo = cols.lo, hi = cols.hi;

#pragma omp parallel for schedule(static) \
    num_threads(snn_cpu_threads(POOL_WORK(d, planes, out_plane)))
    for (int64_t plane = 0; plane < planes; plane++) {
        float *dxp = dx + plane * (int64_t)H * W;        // (H, W)
        const float *dop = dout + plane * out_plane;     // (H_out, W_out)
        for (int oh = 0; oh < H_out; oh++) {
            const int h0 = oh * S - P;
            const pool_range rows = window_rows(d, oh);
            const int kh_lo = rows.lo, kh_hi = rows.hi;
            for (int ow = 0; ow < W_out; ow++) {
                if (ow == lo) ow = hi; /* the interior is done below */
                if (ow >= W_out) break;
                const int w0 = ow * S - P;
                const int kw_lo = w0 < 0 ? -w0 : 0;
                const int kw_hi = w0 + K > W ? W - w0 : K;
                const float g = dop[oh * W_out + ow] / (float)avg_pool_divisor(oh, ow, d);
                for (int kh = kh_lo; kh < kh_hi; kh++)
                    for (int kw = kw_lo; kw < kw_hi; kw++) dxp[(h0 + kh) * W + w0 + kw] += g;
            }
            if (lo >= hi) continue;
            const float divisor = (float)avg_pool_divisor(oh, lo, d);
            const float *grow = dop + (int64_t)oh * W_out;   // (W_out)
            for (int kh = kh_lo; kh < kh_hi; kh++) {
                for (int kw = 0; kw < K; kw++) {
                    const int base = (h0 + kh) * W - P + kw;
                    for (int ow = lo; ow < hi; ow++) dxp[base + ow * S] += grow[ow] / divisor;
                }
            }
        }
    }
}
