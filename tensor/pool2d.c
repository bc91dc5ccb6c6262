/*
 * pool2d.c - CPU reference kernels of 2-D max-pooling and average-pooling (tensor/kernels.h).
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

#include "kernels_cpu.h"

/* Below this many output elements a parallel region costs more than it saves. */
#define POOL_PARALLEL_MIN 16384

/* ---- max-pool ------------------------------------------------------------------------------ */

/*
 * Forward. Memory traffic per output: K*K input reads in the worst case (each input is read
 * about K*K/S^2 times, from cache when windows overlap), 4 bytes out + 4 bytes argmax written.
 * For the usual K = S = 2: 4 B read per input, 8 B written per output (2 B per input).
 */
void snn_max_pool2d_forward_cpu(float *out, int32_t *argmax, const float *x,
                                const snn_pool2d_dims *d)
{
    const int H = d->H, W = d->W, K = d->K, S = d->stride, P = d->pad;
    const int H_out = d->H_out, W_out = d->W_out;
    const int64_t planes = (int64_t)d->N * d->C;
    const int64_t out_plane = (int64_t)H_out * W_out;

#pragma omp parallel for schedule(static) if (planes * out_plane >= POOL_PARALLEL_MIN)
    for (int64_t plane = 0; plane < planes; plane++) {
        const float *xp = x + plane * (int64_t)H * W;   // (H, W)
        float *op = out + plane * out_plane;             // (H_out, W_out)
        int32_t *ap = argmax + plane * out_plane;        // (H_out, W_out)
        for (int oh = 0; oh < H_out; oh++) {
            const int h0 = oh * S - P;
            for (int ow = 0; ow < W_out; ow++) {
                const int w0 = ow * S - P;
                float best = -INFINITY;
                int32_t best_at = -1; /* stays -1 only if the window is all padding (P >= K) */
                for (int kh = 0; kh < K; kh++) {
                    const int ih = h0 + kh;
                    if (ih < 0 || ih >= H) continue;
                    for (int kw = 0; kw < K; kw++) {
                        const int iw = w0 + kw;
                        if (iw < 0 || iw >= W) continue;
                        const float v = xp[ih * W + iw];
                        /* strict '>' keeps the first of equal maxima; the NaN clause lets the
                         * first NaN win and stick (NaN compares false with everything) */
                        if (v > best || (isnan(v) && !isnan(best)) || best_at < 0) {
                            best = v;
                            best_at = ih * W + iw;
                        }
                    }
                }
                op[oh * W_out + ow] = best;
                ap[oh * W_out + ow] = best_at;
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

#pragma omp parallel for schedule(static) if (planes * out_plane >= POOL_PARALLEL_MIN)
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

/*
 * Forward. Memory traffic: each input read about K*K/S^2 times (once for K = S), 4 B written
 * per output. The window sum runs in float in scan order (kh outer, kw inner), then is divided.
 */
void snn_avg_pool2d_forward_cpu(float *out, const float *x, const snn_pool2d_dims *d)
{
    const int H = d->H, W = d->W, K = d->K, S = d->stride, P = d->pad;
    const int H_out = d->H_out, W_out = d->W_out;
    const int64_t planes = (int64_t)d->N * d->C;
    const int64_t out_plane = (int64_t)H_out * W_out;

#pragma omp parallel for schedule(static) if (planes * out_plane >= POOL_PARALLEL_MIN)
    for (int64_t plane = 0; plane < planes; plane++) {
        const float *xp = x + plane * (int64_t)H * W;   // (H, W)
        float *op = out + plane * out_plane;             // (H_out, W_out)
        for (int oh = 0; oh < H_out; oh++) {
            const int h0 = oh * S - P;
            const int kh_lo = h0 < 0 ? -h0 : 0;          /* rows of the window inside [0, H) */
            const int kh_hi = h0 + K > H ? H - h0 : K;
            for (int ow = 0; ow < W_out; ow++) {
                const int w0 = ow * S - P;
                const int kw_lo = w0 < 0 ? -w0 : 0;
                const int kw_hi = w0 + K > W ? W - w0 : K;
                float sum = 0.0f;
                for (int kh = kh_lo; kh < kh_hi; kh++) {
                    const float *row = xp + (int64_t)(h0 + kh) * W; /* row h0 + kh */
                    for (int kw = kw_lo; kw < kw_hi; kw++) sum += row[w0 + kw];
                }
                op[oh * W_out + ow] = sum / (float)avg_pool_divisor(oh, ow, d);
            }
        }
    }
}

/*
 * Backward: spread dout / |window| over the in-image part of each window. Memory traffic:
 * 4 B dout read per output, about K*K/S^2 read-modify-writes of dx per input (from cache).
 */
void snn_avg_pool2d_backward_cpu(float *dx, const float *dout, const snn_pool2d_dims *d)
{
    if (!dx) return;
    const int H = d->H, W = d->W, K = d->K, S = d->stride, P = d->pad;
    const int H_out = d->H_out, W_out = d->W_out;
    const int64_t planes = (int64_t)d->N * d->C;
    const int64_t out_plane = (int64_t)H_out * W_out;

#pragma omp parallel for schedule(static) if (planes * out_plane >= POOL_PARALLEL_MIN)
    for (int64_t plane = 0; plane < planes; plane++) {
        float *dxp = dx + plane * (int64_t)H * W;        // (H, W)
        const float *dop = dout + plane * out_plane;     // (H_out, W_out)
        for (int oh = 0; oh < H_out; oh++) {
            const int h0 = oh * S - P;
            const int kh_lo = h0 < 0 ? -h0 : 0;
            const int kh_hi = h0 + K > H ? H - h0 : K;
            for (int ow = 0; ow < W_out; ow++) {
                const int w0 = ow * S - P;
                const int kw_lo = w0 < 0 ? -w0 : 0;
                const int kw_hi = w0 + K > W ? W - w0 : K;
                const float g = dop[oh * W_out + ow] / (float)avg_pool_divisor(oh, ow, d);
                for (int kh = kh_lo; kh < kh_hi; kh++) {
                    float *row = dxp + (int64_t)(h0 + kh) * W;
                    for (int kw = kw_lo; kw < kw_hi; kw++) row[w0 + kw] += g;
                }
            }
        }
    }
}
