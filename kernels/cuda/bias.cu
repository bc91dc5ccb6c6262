/*
 * bias.cu - CUDA kernels that add a per-channel bias and sum its gradient.
 * Must match kernels/cpu/bias.c (snn_bias_forward_cpu, snn_bias_backward_cpu).
 *
 * out is viewed as (outer, C, inner): conv2d has outer = N, inner = H_out * W_out; linear has
 * outer = rows, inner = 1.
 *
 *   forward   out[o, c, i] += bias[c]                       4 B read + 4 B written / element
 *   backward  dbias[c] += sum_{o, i} dout[o, c, i]          4 B read / element
 *
 * The backward is a per-channel reduction in double, deterministic (a fixed block tree, then
 * per-channel partials added in index order). A channel's values are outer runs of `inner`
 * contiguous floats, so with inner > 1 a block reads them coalesced; when there are few
 * channels, each channel is split into segments over several blocks so the GPU fills up (a
 * conv with 64 output channels would otherwise run on 64 of 132 SMs). With many channels and
 * inner = 1 (a linear layer's (rows, features) gradient), one thread per channel walks the
 * rows: neighbouring threads read neighbouring floats.
 */
#include "cuda_common.cuh"
#include "kernels_cuda.h"

#define BIAS_BLOCK 256

/* out[k] += bias[(k / inner) % channels].  CPU: snn_bias_forward_cpu. */
static __global__ void bias_forward_kernel(float *out, const float *bias, int64_t outer,
                                           int64_t channels, int64_t inner)
{
    SNN_GRID_STRIDE_LOOP(k, outer * channels * inner) {
        int64_t i, c;
        snn_divmod(snn_divmod(k, inner, &i), channels, &c); /* k = (o C + c) inner + i */
        out[k] += bias[c];
    }
}

extern "C" void snn_bias_forward_cuda(float *out, const float *bias, int64_t outer,
                                      int64_t channels, int64_t inner)
{
    const int64_t n = outer * channels * inner;
    if (n <= 0) return;
    SNN_CUDA_LAUNCH(bias_forward_kernel, snn_cuda_grid(n, SNN_CUDA_BLOCK), SNN_CUDA_BLOCK, 0, out,
                    bias, outer, channels, inner);
}

/* Block b = (c, s) sums the values m in segment s of [0, outer * inner) of channel c, where m
 * is (o, i) = (m / inner, m % inner): dbias[c] += sum when there is one segment, else
 * partial[b] = sum.  CPU: snn_bias_backward_cpu. */
static __global__ void bias_backward_plane_kernel(float *dbias, double *partial, const float *dout,
                                                  int64_t outer, int64_t channels, int64_t inner,
                                                  int64_t segments)
{
    const int64_t per_channel = outer * inner;
    const int64_t seg_len = (per_channel + segments - 1) / segments;
    for (int64_t b = blockIdx.x; b < channels * segments; b += gridDim.x) {
        const int64_t c = b / segments, s = b % segments;
        const int64_t begin = s * seg_len;
        const int64_t end = begin + seg_len < per_channel ? begin + seg_len : per_channel;
        double acc = 0.0;
        for (int64_t m = begin + threadIdx.x; m < end; m += blockDim.x) {
            int64_t i;
            const int64_t o = snn_divmod(m, inner, &i);
            acc += (double)dout[(o * channels + c) * inner + i];
        }
        acc = snn_block_sum(acc);
        if (threadIdx.x == 0) {
            if (segments == 1) dbias[c] += (float)acc;
            else partial[b] = acc;
        }
    }
}

/* dbias[c] += sum_s partial[c * segments + s], in index order. */
static __global__ void bias_backward_finish_kernel(float *dbias, const double *partial,
                                                   int64_t channels, int64_t segments)
{
    SNN_GRID_STRIDE_LOOP(c, channels) {
        double acc = 0.0;
        for (int64_t s = 0; s < segments; s++) acc += partial[c * segments + s];
        dbias[c] += (float)acc;
    }
}

/* One thread per channel of dout (outer, channels) (inner = 1): dbias[c] += sum_o dout[o, c].
 * Reads are coalesced across the threads of a warp. */
static __global__ void bias_backward_column_kernel(float *dbias, const float *dout, int64_t outer,
                                                   int64_t channels)
{
    SNN_GRID_STRIDE_LOOP(c, channels) {
        double acc = 0.0;
        for (int64_t o = 0; o < outer; o++) acc += (double)dout[o * channels + c];
        dbias[c] += (float)acc;
    }
}

extern "C" void snn_bias_backward_cuda(float *dbias, const float *dout, int64_t outer,
                                       int64_t channels, int64_t inner)
{
    if (!dbias || channels <= 0) return;
    if (outer * inner <= 0) return; /* an empty sum adds 0 */
    const int sms = snn_cuda_sm_count();
    if (inner == 1 && channels >= 4096) {
        SNN_CUDA_LAUNCH(bias_backward_column_kernel, snn_cuda_grid(channels, BIAS_BLOCK),
                        BIAS_BLOCK, 0, dbias, dout, outer, channels);
        return;
    }
    /* aim at ~8 blocks per SM, each segment at least 4096 values */
    const int64_t want_blocks = (int64_t)sms * 8;
    const int64_t max_partials = (int64_t)(SNN_CUDA_SCRATCH_BYTES / sizeof(double));
    int64_t segments = 1;
    if (channels < want_blocks) {
        segments = (want_blocks + channels - 1) / channels;
        const int64_t by_len = (outer * inner + 4095) / 4096;
        if (segments > by_len) segments = by_len;
        if (segments * channels > max_partials) segments = max_partials / channels;
        if (segments < 1) segments = 1;
    }
    double *partial =
        segments > 1 ? (double *)snn_cuda_scratch((size_t)(segments * channels) * sizeof(double))
                     : NULL;
    const int64_t blocks = channels * segments;
    const int64_t cap = (int64_t)sms * 32;
    SNN_CUDA_LAUNCH(bias_backward_plane_kernel, (unsigned)(blocks < cap ? blocks : cap), BIAS_BLOCK,
                    0, dbias, partial, dout, outer, channels, inner, segments);
    if (segments > 1)
        SNN_CUDA_LAUNCH(bias_backward_finish_kernel, snn_cuda_grid(channels, BIAS_BLOCK),
                        BIAS_BLOCK, 0, dbias, partial, channels, segments);
}
