/*
 * pool2d.cu - CUDA kernels of 2-D max-pooling and average-pooling. Must match kernels/cpu/pool2d.c
 * (snn_*_pool2d_*_cpu), whose header states the conventions: output (oh, ow) looks at rows
 * ih = oh S - P + kh and columns iw = ow S - P + kw, kh, kw in [0, K); padding is -inf for max
 * (never wins) and counted in the divisor for average (count_include_pad = True).
 *
 * Forward: one thread per output, scanning its window in the CPU's order (kh outer, kw inner),
 * so the max, its argmax (ties to the first, the first NaN wins) and the float window sum are
 * the CPU's to the bit.
 *
 * Backward: one thread per INPUT element, gathering from the outputs whose windows contain it:
 *     oh from ceil((ih + P - K + 1) / S) to floor((ih + P) / S), clipped to [0, H_out)
 * (likewise ow). Each input is written by one thread only: no atomics, deterministic, and
 * overlapping windows (S < K) are handled without races.
 */
#include "cuda_common.cuh"
#include "kernels_cuda.h"

/* First and last output index (along one axis) whose window [o S - P, o S - P + K) holds
 * input index i; empty when first > last. */
static __device__ __forceinline__ void covering_outputs(int i, int K, int S, int P, int n_out,
                                                        int *first, int *last)
{
    const int lo = i + P - K + 1; /* o S >= lo */
    *first = lo <= 0 ? 0 : (lo + S - 1) / S;
    int hi = (i + P) / S;         /* o S <= i + P; i + P >= 0 always */
    *last = hi < n_out - 1 ? hi : n_out - 1;
}

/* ---- max-pool -------------------------------------------------------------------------------- */

/* out = window max, argmax = ih W + iw of the first winner.  Traffic: K*K reads per output
 * (mostly cache hits), 8 B written.  CPU: snn_max_pool2d_forward_cpu. */
static __global__ void max_pool2d_forward_kernel(float *out, int32_t *argmax, const float *x,
                                                 snn_pool2d_dims d)
{
    const int64_t out_plane = (int64_t)d.H_out * d.W_out;
    SNN_GRID_STRIDE_LOOP(k, (int64_t)d.N * d.C * out_plane) {
        int64_t o;
        const int64_t plane = snn_divmod(k, out_plane, &o);
        const int oh = (int)o / d.W_out, ow = (int)o - oh * d.W_out;
        const float *xp = x + plane * d.H * d.W;   // (H, W)
        const int h0 = oh * d.stride - d.pad, w0 = ow * d.stride - d.pad;
        float best = -INFINITY;
        int32_t best_at = -1;
        for (int kh = 0; kh < d.K; kh++) {
            const int ih = h0 + kh;
            if (ih < 0 || ih >= d.H) continue;
            for (int kw = 0; kw < d.K; kw++) {
                const int iw = w0 + kw;
                if (iw < 0 || iw >= d.W) continue;
                const float v = xp[ih * d.W + iw];
                if (v > best || (isnan(v) && !isnan(best)) || best_at < 0) {
                    best = v;
                    best_at = ih * d.W + iw;
                }
            }
        }
        out[k] = best;
        argmax[k] = best_at;
    }
}

extern "C" void snn_max_pool2d_forward_cuda(float *out, int32_t *argmax, const float *x,
                                            const snn_pool2d_dims *d)
{
    const int64_t n = (int64_t)d->N * d->C * d->H_out * d->W_out;
    if (n <= 0) return;
    SNN_CUDA_LAUNCH(max_pool2d_forward_kernel, snn_cuda_grid(n, SNN_CUDA_BLOCK), SNN_CUDA_BLOCK, 0,
                    out, argmax, x, *d);
}

/* dx[ih, iw] += sum of dout over the outputs whose argmax is (ih, iw).  Traffic per input:
 * ~K*K/S^2 argmax + dout reads (1 each for K = S), one read-modify-write of dx.
 * CPU: snn_max_pool2d_backward_cpu. */
static __global__ void max_pool2d_backward_kernel(float *dx, const float *dout,
                                                  const int32_t *argmax, snn_pool2d_dims d)
{
    const int64_t in_plane = (int64_t)d.H * d.W;
    const int64_t out_plane = (int64_t)d.H_out * d.W_out;
    SNN_GRID_STRIDE_LOOP(k, (int64_t)d.N * d.C * in_plane) {
        int64_t at64;
        const int64_t plane = snn_divmod(k, in_plane, &at64);
        const int at = (int)at64;
        const int ih = at / d.W, iw = at - ih * d.W;
        const float *dop = dout + plane * out_plane;        // (H_out, W_out)
        const int32_t *ap = argmax + plane * out_plane;     // (H_out, W_out)
        int oh0, oh1, ow0, ow1;
        covering_outputs(ih, d.K, d.stride, d.pad, d.H_out, &oh0, &oh1);
        covering_outputs(iw, d.K, d.stride, d.pad, d.W_out, &ow0, &ow1);
        float acc = 0.0f;
        bool hit = false;
        for (int oh = oh0; oh <= oh1; oh++)
            for (int ow = ow0; ow <= ow1; ow++)
                if (ap[oh * d.W_out + ow] == at) {
                    acc += dop[oh * d.W_out + ow];
                    hit = true;
                }
        if (hit) dx[k] += acc;
    }
}

extern "C" void snn_max_pool2d_backward_cuda(float *dx, const float *dout, const int32_t *argmax,
                                             const snn_pool2d_dims *d)
{
    const int64_t n = (int64_t)d->N * d->C * d->H * d->W;
    if (!dx || n <= 0) return;
    SNN_CUDA_LAUNCH(max_pool2d_backward_kernel, snn_cuda_grid(n, SNN_CUDA_BLOCK), SNN_CUDA_BLOCK,
                    0, dx, dout, argmax, *d);
}

/* ---- average-pool ---------------------------------------------------------------------------- */

/* |window| with count_include_pad = True: the window clipped to the padded image only, as
 * avg_pool_divisor() in pool2d.c. */
static __device__ __forceinline__ int avg_divisor(int oh, int ow, const snn_pool2d_dims &d)
{
    const int h0 = oh * d.stride - d.pad, w0 = ow * d.stride - d.pad;
    int h1 = h0 + d.K, w1 = w0 + d.K;
    if (h1 > d.H + d.pad) h1 = d.H + d.pad;
    if (w1 > d.W + d.pad) w1 = d.W + d.pad;
    return (h1 - h0) * (w1 - w0);
}

/* out = (float sum of the in-image window, scan order) / |window|.  Traffic: K*K reads per
 * output (cache hits when windows overlap), 4 B written.  CPU: snn_avg_pool2d_forward_cpu. */
static __global__ void avg_pool2d_forward_kernel(float *out, const float *x, snn_pool2d_dims d)
{
    const int64_t out_plane = (int64_t)d.H_out * d.W_out;
    SNN_GRID_STRIDE_LOOP(k, (int64_t)d.N * d.C * out_plane) {
        int64_t o;
        const int64_t plane = snn_divmod(k, out_plane, &o);
        const int oh = (int)o / d.W_out, ow = (int)o - oh * d.W_out;
        const float *xp = x + plane * d.H * d.W;   // (H, W)
        const int h0 = oh * d.stride - d.pad, w0 = ow * d.stride - d.pad;
        const int kh_lo = h0 < 0 ? -h0 : 0, kh_hi = h0 + d.K > d.H ? d.H - h0 : d.K;
        const int kw_lo = w0 < 0 ? -w0 : 0, kw_hi = w0 + d.K > d.W ? d.W - w0 : d.K;
        float sum = 0.0f;
        for (int kh = kh_lo; kh < kh_hi; kh++)
            for (int kw = kw_lo; kw < kw_hi; kw++) sum += xp[(h0 + kh) * d.W + w0 + kw];
        out[k] = sum / (float)avg_divisor(oh, ow, d);
    }
}

extern "C" void snn_avg_pool2d_forward_cuda(float *out, const float *x, const snn_pool2d_dims *d)
{
    const int64_t n = (int64_t)d->N * d->C * d->H_out * d->W_out;
    if (n <= 0) return;
    SNN_CUDA_LAUNCH(avg_pool2d_forward_kernel, snn_cuda_grid(n, SNN_CUDA_BLOCK), SNN_CUDA_BLOCK, 0,
                    out, x, *d);
}

/* dx[ih, iw] += sum over the windows holding (ih, iw) of dout / |window|.  Traffic per input:
 * ~K*K/S^2 dout reads, one read-modify-write of dx.  CPU: snn_avg_pool2d_backward_cpu. */
static __global__ void avg_pool2d_backward_kernel(float *dx, const float *dout, snn_pool2d_dims d)
{
    const int64_t in_plane = (int64_t)d.H * d.W;
    const int64_t out_plane = (int64_t)d.H_out * d.W_out;
    SNN_GRID_STRIDE_LOOP(k, (int64_t)d.N * d.C * in_plane) {
        int64_t at64;
        const int64_t plane = snn_divmod(k, in_plane, &at64);
        const int at = (int)at64;
        const int ih = at / d.W, iw = at - ih * d.W;
        const float *dop = dout + plane * out_plane;   // (H_out, W_out)
        int oh0, oh1, ow0, ow1;
        covering_outputs(ih, d.K, d.stride, d.pad, d.H_out, &oh0, &oh1);
        covering_outputs(iw, d.K, d.stride, d.pad, d.W_out, &ow0, &ow1);
        float acc = 0.0f;
        for (int oh = oh0; oh <= oh1; oh++)
            for (int ow = ow0; ow <= ow1; ow++)
                acc += dop[oh * d.W_out + ow] / (float)avg_divisor(oh, ow, d);
        dx[k] += acc;
    }
}

extern "C" void snn_avg_pool2d_backward_cuda(float *dx, const float *dout,
                                             const snn_pool2d_dims *d)
{
    const int64_t n = (int64_t)d->N * d->C * d->H * d->W;
    if (!dx || n <= 0) return;
    SNN_CUDA_LAUNCH(avg_pool2d_backward_kernel, snn_cuda_grid(n, SNN_CUDA_BLOCK), SNN_CUDA_BLOCK,
                    0, dx, dout, *d);
}
