/*
 * delay.cu - CUDA learnable synaptic delays (DCLS-Delays): the delay kernel's construction as a
 * small kernel, and the causal temporal convolution as one cuBLAS GEMM per tap. Must match
 * kernels/ref/delay.c (snn_delay_kernel_*_ref, snn_temporal_conv_*_ref), whose header has the
 * equations; a synapse's math is kernels/delay_math.h, shared with that loop.
 *
 * Delay kernel: one thread per synapse (o, i), looping over its D taps in the reference's
 * order. Thread s writes K[k, s] for every k: consecutive threads write consecutive floats
 * of each (O, I) tap plane, so the stores coalesce. The backward reads dK the same way and
 * writes dw[s], dd[s] once: no atomics, deterministic. O I synapses, D small: this is cheap
 * next to the conv (2 T N O I D FLOPs) and is not worth a tap-parallel version.
 *
 * Temporal conv: kernels/temporal_conv_taps.h with snn_gemm_cuda (fp32, or TF32 / BF16 when
 * the precision says so, as every GEMM of the table).
 */
#include "cuda_common.cuh"
#include "kernels/delay_math.h"
#include "kernels/temporal_conv_taps.h"
#include "kernels_cuda.h"

/* K[k, s] = w[s] p_k(d[s]).  Traffic: 8 B read, 4 D B written a synapse.
 * CPU: snn_delay_kernel_forward_ref. */
static __global__ void delay_kernel_forward_kernel(float *K, const float *w, const float *d,
                                                   int64_t synapses, int D, float inv)
{
    SNN_GRID_STRIDE_LOOP(s, synapses) {
        const float ds = d[s], ws = w[s];
        const snn_delay_taps taps = snn_delay_taps_of(ds, D, inv);
        for (int k = 0; k < D; k++) K[(int64_t)k * synapses + s] = ws * snn_delay_tap(k, ds, &taps, inv);
    }
}

/* dw[s] += sum_k dK[k, s] p_k,  dd[s] += w[s] 2 inv sum_k dK[k, s] p_k (k - mu).
 * Traffic: 4 D + 8 B read, 2 read-modify-writes a synapse. CPU: snn_delay_kernel_backward_ref. */
static __global__ void delay_kernel_backward_kernel(float *dw, float *dd, const float *dK,
                                                    const float *w, const float *d,
                                                    int64_t synapses, int D, float inv)
{
    SNN_GRID_STRIDE_LOOP(s, synapses) {
        const float ds = d[s];
        const snn_delay_taps taps = snn_delay_taps_of(ds, D, inv);
        float grad_w = 0.0f, grad_moment = 0.0f;
        for (int k = 0; k < D; k++) {
            const float g = dK[(int64_t)k * synapses + s] * snn_delay_tap(k, ds, &taps, inv);
            grad_w += g;
            grad_moment += g * ((float)k - taps.mean);
        }
        if (dw) dw[s] += grad_w;
        if (dd) dd[s] += w[s] * 2.0f * inv * grad_moment;
    }
}

extern "C" void snn_delay_kernel_forward_cuda(float *K, const float *w, const float *d, int O,
                                              int I, int D, float sigma)
{
    const int64_t synapses = (int64_t)O * I;
    if (synapses <= 0 || D <= 0) return;
    SNN_CUDA_LAUNCH(delay_kernel_forward_kernel, snn_cuda_grid(synapses, SNN_CUDA_BLOCK),
                    SNN_CUDA_BLOCK, 0, K, w, d, synapses, D, snn_delay_inv_two_sigma2(sigma));
}

extern "C" void snn_delay_kernel_backward_cuda(float *dw, float *dd, const float *dK,
                                               const float *w, const float *d, int O, int I,
                                               int D, float sigma)
{
    const int64_t synapses = (int64_t)O * I;
    if (synapses <= 0 || D <= 0 || (!dw && !dd)) return;
    SNN_CUDA_LAUNCH(delay_kernel_backward_kernel, snn_cuda_grid(synapses, SNN_CUDA_BLOCK),
                    SNN_CUDA_BLOCK, 0, dw, dd, dK, w, d, synapses, D,
                    snn_delay_inv_two_sigma2(sigma));
}

extern "C" void snn_temporal_conv_forward_cuda(float *y, const float *x, const float *K, int T,
                                               int N, int I, int O, int D)
{
    snn_temporal_conv_forward_taps(snn_gemm_cuda, y, x, K, T, N, I, O, D);
}

extern "C" void snn_temporal_conv_backward_cuda(float *dx, float *dK, const float *dy,
                                                const float *x, const float *K, int T, int N,
                                                int I, int O, int D)
{
    snn_temporal_conv_backward_taps(snn_gemm_cuda, dx, dK, dy, x, K, T, N, I, O, D);
}
