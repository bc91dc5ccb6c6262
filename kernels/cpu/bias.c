/*
 * bias.c - adding a per-channel bias and its gradient, on the CPU.
 *
 * out is viewed as (outer, C, inner): conv2d has outer = N, inner = H*W; linear has
 * outer = rows, inner = 1. Forward reads and writes out once (8 B per element); backward reads
 * dout once and writes C floats.
 */
#include "cpu_threads.h"
#include "kernels_cpu.h"

void snn_bias_forward_cpu(float *out, const float *bias, int64_t outer, int64_t channels,
                          int64_t inner)
{
#pragma omp parallel for collapse(2) \
    num_threads(snn_cpu_threads(outer * channels * inner))
    for (int64_t o = 0; o < outer; o++)
        for (int64_t c = 0; c < channels; c++) {
            float *row = out + (o * channels + c) * inner;
            float b = bias[c];
            for (int64_t i = 0; i < inner; i++) row[i] += b;
        }
}

void snn_bias_backward_cpu(float *dbias, const float *dout, int64_t outer, int64_t channels,
                           int64_t inner)
{
    /* one thread per channel, summing in a fixed order: deterministic */
#pragma omp parallel for num_threads(snn_cpu_threads(outer * channels * inner))
    for (int64_t c = 0; c < channels; c++) {
        double acc = 0.0;
        for (int64_t o = 0; o < outer; o++) {
            const float *row = dout + (o * channels + c) * inner;
            for (int64_t i = 0; i < inner; i++) acc += (double)row[i];
        }
        dbias[c] += (float)acc;
    }
}
