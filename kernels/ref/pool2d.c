/*
 * pool2d.c - reference 2-D max-pooling and average-pooling, forward and backward.
 *
 * x, dx (N, C, H, W); out, dout, argmax (N, C, H_out, W_out); square window K, stride S, zero
 * padding P, H_out = (H + 2P - K) / S + 1 (PyTorch's ceil_mode = False), likewise W_out.
 * Output (oh, ow) looks at rows ih = oh S - P + kh and columns iw = ow S - P + kw, kh and kw
 * in [0, K); positions outside the image are padding.
 *
 * Max-pool (padding is -inf: it never wins)
 *   out[n, c, oh, ow]    = max over the window of x[n, c, ih, iw]
 *   argmax[n, c, oh, ow] = ih W + iw of that input (a flat index in its (n, c) plane)
 *   dx[n, c, argmax]    += dout[n, c, oh, ow]
 *   The window is scanned kh outer, kw inner; a tie keeps the first maximum; a NaN wins (the
 *   first NaN), so a diverged network shows NaN. A window of padding only: -inf, argmax -1.
 * Average-pool, padding counted (PyTorch's count_include_pad = True):
 *   out[n, c, oh, ow] = (1 / |window|) sum over the window's in-image part of x
 *   dx[n, c, ih, iw] += dout[n, c, oh, ow] / |window|      for each window holding (ih, iw)
 *   |window| is the window clipped to the padded image [-P, H + P) x [-P, W + P).
 *
 * Memory traffic: each output reads its K*K window (each input about K*K / S^2 times);
 * forward writes out (and argmax), backward read-modify-writes dx.
 */
#include <math.h>

#include "kernels_ref.h"

/* Whether v replaces the best value so far: it is larger, or it is the first NaN. */
static bool max_takes(float v, float best) { return v > best || (isnan(v) && !isnan(best)); }

void snn_max_pool2d_forward_ref(float *out, int32_t *argmax, const float *x,
                                const snn_pool2d_dims *d)
{
    const int64_t planes = (int64_t)d->N * d->C;
    for (int64_t plane = 0; plane < planes; plane++) {
        const float *xp = x + plane * d->H * d->W;   // (H, W)
        for (int oh = 0; oh < d->H_out; oh++) {
            for (int ow = 0; ow < d->W_out; ow++) {
                float best = -INFINITY;
                int32_t best_at = -1;
                for (int kh = 0; kh < d->K; kh++) {
                    for (int kw = 0; kw < d->K; kw++) {
                        const int ih = oh * d->stride - d->pad + kh;
                        const int iw = ow * d->stride - d->pad + kw;
                        if (ih < 0 || ih >= d->H || iw < 0 || iw >= d->W) continue;
                        const int32_t at = ih * d->W + iw;
                        if (best_at < 0 || max_takes(xp[at], best)) best = xp[at], best_at = at;
                    }
                }
                const int64_t o = (plane * d->H_out + oh) * d->W_out + ow;
                out[o] = best;
                argmax[o] = best_at;
            }
        }
    }
}

void snn_max_pool2d_backward_ref(float *dx, const float *dout, const int32_t *argmax,
                                 const snn_pool2d_dims *d)
{
    if (!dx) return;
    const int64_t planes = (int64_t)d->N * d->C, out_plane = (int64_t)d->H_out * d->W_out;
    for (int64_t plane = 0; plane < planes; plane++)
        for (int64_t o = plane * out_plane; o < (plane + 1) * out_plane; o++)
            if (argmax[o] >= 0) dx[plane * d->H * d->W + argmax[o]] += dout[o];
}

/* |window| of output (oh, ow) with count_include_pad: clipped to the padded image only */
static int avg_pool_divisor(const snn_pool2d_dims *d, int oh, int ow)
{
    const int h0 = oh * d->stride - d->pad, w0 = ow * d->stride - d->pad;
    const int h1 = h0 + d->K < d->H + d->pad ? h0 + d->K : d->H + d->pad;
    const int w1 = w0 + d->K < d->W + d->pad ? w0 + d->K : d->W + d->pad;
    return (h1 - h0) * (w1 - w0);
}

void snn_avg_pool2d_forward_ref(float *out, const float *x, const snn_pool2d_dims *d)
{
    const int64_t planes = (int64_t)d->N * d->C;
    for (int64_t plane = 0; plane < planes; plane++) {
        const float *xp = x + plane * d->H * d->W;   // (H, W)
        for (int oh = 0; oh < d->H_out; oh++) {
            for (int ow = 0; ow < d->W_out; ow++) {
                float sum = 0.0f;
                for (int kh = 0; kh < d->K; kh++) {
                    for (int kw = 0; kw < d->K; kw++) {
                        const int ih = oh * d->stride - d->pad + kh;
                        const int iw = ow * d->stride - d->pad + kw;
                        if (ih >= 0 && ih < d->H && iw >= 0 && iw < d->W) sum += xp[ih * d->W + iw];
                    }
                }
                out[(plane * d->H_out + oh) * d->W_out + ow] =
                    sum / (float)avg_pool_divisor(d, oh, ow);
            }
        }
    }
}

void snn_avg_pool2d_backward_ref(float *dx, const float *dout, const snn_pool2d_dims *d)
{
    if (!dx) return;
    const int64_t planes = (int64_t)d->N * d->C;
    for (int64_t plane = 0; plane < planes; plane++) {
        float *dxp = dx + plane * d->H * d->W;   // (H, W)
        for (int oh = 0; oh < d->H_out; oh++) {
            for (int ow = 0; ow < d->W_out; ow++) {
                const float g = dout[(plane * d->H_out + oh) * d->W_out + ow] /
                                (float)avg_pool_divisor(d, oh, ow);
                for (int kh = 0; kh < d->K; kh++) {
                    for (int kw = 0; kw < d->K; kw++) {
                        const int ih = oh * d->stride - d->pad + kh;
                        const int iw = ow * d->stride - d->pad + kw;
                        if (ih >= 0 && ih < d->H && iw >= 0 && iw < d->W) dxp[ih * d->W + iw] += g;
                    }
                }
            }
        }
    }
}
