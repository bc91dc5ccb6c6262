/*
 * conv2d.c - reference 2-D convolution, forward and backward, as direct loops over its sum.
 *
 * N images, C_in -> C_out channels, H x W input, KH x KW kernel, one stride s and one zero
 * padding p for both axes; H_out = (H + 2p - KH) / s + 1, likewise W_out.
 *   x (N, C_in, H, W)   weight (C_out, C_in, KH, KW)   bias (C_out)   out (N, C_out, H_out, W_out)
 *
 * Cross-correlation, as PyTorch's Conv2d, with x read as 0 outside the image:
 *
 *   out[n, co, oh, ow] = bias[co] + sum_{ci, kh, kw} weight[co, ci, kh, kw] x[n, ci, ih, iw]
 *                        where ih = oh s - p + kh,  iw = ow s - p + kw
 *
 * Each weight meets each input it touches once, so the gradients are the same sum read the
 * other way round (backward ACCUMULATES, and skips a NULL output):
 *
 *   dx[n, ci, ih, iw]       += sum_{co, kh, kw} weight[co, ci, kh, kw] dout[n, co, oh, ow]
 *   dweight[co, ci, kh, kw] += sum_{n, oh, ow}  dout[n, co, oh, ow] x[n, ci, ih, iw]
 *   dbias[co]               += sum_{n, oh, ow}  dout[n, co, oh, ow]
 *
 * Loop order: for one (kh, kw) the loops run over the output rows and columns that read a real
 * input (valid_range: the others read padding and add 0), output column innermost, so the
 * inner loop walks a contiguous output row and, at stride 1, a contiguous input row: the
 * compiler vectorises it. dweight is a sum over (n, oh, ow) for each weight, in double.
 *
 * Arithmetic: N C_out C_in KH KW H_out W_out multiply-adds forward, twice that backward.
 * Memory traffic: none of it is blocked for cache; an input plane (H W floats) is re-read for
 * each of the C_out KH KW weights that touch it, from cache when the plane fits.
 * The fast kernels (kernels/cpu/conv2d.c: im2col + SGEMM) compute the same sums in another
 * order. No workspace.
 */
#include "kernels_ref.h"

size_t snn_conv2d_workspace_bytes_ref(const snn_conv2d_dims *d)
{
    (void)d;
    return 0;
}

/* The outputs o in [*lo, *hi) whose input o s - p + k lies in [0, size): along one axis, the
 * outputs for which kernel tap k reads the image rather than the padding. */
static void valid_range(int size, int size_out, int stride, int pad, int k, int *lo, int *hi)
{
    *lo = 0;
    while (*lo < size_out && *lo * stride - pad + k < 0) (*lo)++;
    *hi = size_out;
    while (*hi > *lo && (*hi - 1) * stride - pad + k >= size) (*hi)--;
}

void snn_conv2d_forward_ref(float *out, const float *x, const float *weight, const float *bias,
                            const snn_conv2d_dims *d, float *workspace)
{
    (void)workspace;
    const int s = d->stride, p = d->pad, W = d->W, W_out = d->W_out;
    const int64_t in_plane = (int64_t)d->H * W, out_plane = (int64_t)d->H_out * W_out;
    for (int n = 0; n < d->N; n++) {
        for (int co = 0; co < d->C_out; co++) {
            float *o = out + ((int64_t)n * d->C_out + co) * out_plane;   // (H_out, W_out)
            for (int64_t i = 0; i < out_plane; i++) o[i] = 0.0f;
            for (int ci = 0; ci < d->C_in; ci++) {
                const float *xp = x + ((int64_t)n * d->C_in + ci) * in_plane;   // (H, W)
                const float *w = weight + ((int64_t)co * d->C_in + ci) * d->KH * d->KW;
                for (int kh = 0; kh < d->KH; kh++) {
                    for (int kw = 0; kw < d->KW; kw++) {
                        const float wk = w[kh * d->KW + kw];
                        int oh_lo, oh_hi, ow_lo, ow_hi;
                        valid_range(d->H, d->H_out, s, p, kh, &oh_lo, &oh_hi);
                        valid_range(W, W_out, s, p, kw, &ow_lo, &ow_hi);
                        for (int oh = oh_lo; oh < oh_hi; oh++) {
                            const float *xrow = xp + (int64_t)(oh * s - p + kh) * W;   // (W)
                            float *orow = o + (int64_t)oh * W_out;                    // (W_out)
                            for (int ow = ow_lo; ow < ow_hi; ow++)
                                orow[ow] += wk * xrow[ow * s - p + kw];
                        }
                    }
                }
            }
            if (bias)   /* added after the sum, as the fast kernels do */
                for (int64_t i = 0; i < out_plane; i++) o[i] += bias[co];
        }
    }
}

/* dx += the transposed sum: each dout element goes back, through the weight, to every input
 * that made it. */
static void conv2d_input_grad(float *dx, const float *dout, const float *weight,
                              const snn_conv2d_dims *d)
{
    const int s = d->stride, p = d->pad, W = d->W, W_out = d->W_out;
    const int64_t in_plane = (int64_t)d->H * W, out_plane = (int64_t)d->H_out * W_out;
    for (int n = 0; n < d->N; n++) {
        for (int ci = 0; ci < d->C_in; ci++) {
            float *dxp = dx + ((int64_t)n * d->C_in + ci) * in_plane;   // (H, W)
            for (int co = 0; co < d->C_out; co++) {
                const float *g = dout + ((int64_t)n * d->C_out + co) * out_plane;  // (H_out, W_out)
                const float *w = weight + ((int64_t)co * d->C_in + ci) * d->KH * d->KW;
                for (int kh = 0; kh < d->KH; kh++) {
                    for (int kw = 0; kw < d->KW; kw++) {
                        const float wk = w[kh * d->KW + kw];
                        int oh_lo, oh_hi, ow_lo, ow_hi;
                        valid_range(d->H, d->H_out, s, p, kh, &oh_lo, &oh_hi);
                        valid_range(W, W_out, s, p, kw, &ow_lo, &ow_hi);
                        for (int oh = oh_lo; oh < oh_hi; oh++) {
                            float *dxrow = dxp + (int64_t)(oh * s - p + kh) * W;   // (W)
                            const float *grow = g + (int64_t)oh * W_out;           // (W_out)
                            for (int ow = ow_lo; ow < ow_hi; ow++)
                                dxrow[ow * s - p + kw] += wk * grow[ow];
                        }
                    }
                }
            }
        }
    }
}

/* dweight += for each weight, the sum over images and outputs of dout times the input it met. */
static void conv2d_weight_grad(float *dweight, const float *dout, const float *x,
                               const snn_conv2d_dims *d)
{
    const int s = d->stride, p = d->pad, W = d->W, W_out = d->W_out;
    const int64_t in_plane = (int64_t)d->H * W, out_plane = (int64_t)d->H_out * W_out;
    for (int co = 0; co < d->C_out; co++) {
        for (int ci = 0; ci < d->C_in; ci++) {
            for (int kh = 0; kh < d->KH; kh++) {
                for (int kw = 0; kw < d->KW; kw++) {
                    int oh_lo, oh_hi, ow_lo, ow_hi;
                    valid_range(d->H, d->H_out, s, p, kh, &oh_lo, &oh_hi);
                    valid_range(W, W_out, s, p, kw, &ow_lo, &ow_hi);
                    double sum = 0.0;
                    for (int n = 0; n < d->N; n++) {
                        const float *g = dout + ((int64_t)n * d->C_out + co) * out_plane;
                        const float *xp = x + ((int64_t)n * d->C_in + ci) * in_plane;
                        for (int oh = oh_lo; oh < oh_hi; oh++) {
                            const float *xrow = xp + (int64_t)(oh * s - p + kh) * W;   // (W)
                            const float *grow = g + (int64_t)oh * W_out;              // (W_out)
                            for (int ow = ow_lo; ow < ow_hi; ow++)
                                sum += (double)grow[ow] * (double)xrow[ow * s - p + kw];
                        }
                    }
                    dweight[(((int64_t)co * d->C_in + ci) * d->KH + kh) * d->KW + kw] +=
                        (float)sum;
                }
            }
        }
    }
}

void snn_conv2d_backward_ref(float *dx, float *dweight, float *dbias, const float *dout,
                             const float *x, const float *weight, const snn_conv2d_dims *d,
                             float *workspace)
{
    (void)workspace;
    if (dx) conv2d_input_grad(dx, dout, weight, d);
    if (dweight) conv2d_weight_grad(dweight, dout, x, d);
    if (dbias) snn_bias_backward_ref(dbias, dout, d->N, d->C_out, (int64_t)d->H_out * d->W_out);
}

/* Inference: the conv, then the eval-mode batch-norm over its output, in place (two plain
 * passes; the CUDA table fuses them). */
void snn_conv2d_forward_bn_eval_ref(float *out, const float *x, const float *weight,
                                    const float *bias, const snn_bn_eval *bn,
                                    const snn_conv2d_dims *d, float *workspace)
{
    snn_conv2d_forward_ref(out, x, weight, bias, d, workspace);
    snn_batchnorm_forward_eval_ref(out, out, bn->gamma, bn->beta, bn->running_mean,
                                   bn->running_var, d->N, d->C_out, d->H_out * d->W_out, bn->eps);
}
