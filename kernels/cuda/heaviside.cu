/*
 * heaviside.cu - the spike function as a primitive op on the GPU: the port of the two kernels
 * of heaviside.c (snn_heaviside_forward_cpu / snn_heaviside_backward_cpu).
 *     forward   y = Heaviside(x) = (x >= 0 ? 1 : 0)
 *     backward  dx += dy * g'(x)          (g' from surrogate.h, shared with the CPU)
 * Memory traffic per element: forward reads x and writes y (8 B); backward reads dy and x and
 * reads + writes dx (16 B). Flat grid-stride loops (cuda_common.cuh).
 * Test: tests/test_cuda_neurons.c.
 */
#include "neuron_cuda.cuh"

/* CPU: snn_heaviside_forward_cpu. A comparison: the same bits as the CPU. */
static __global__ void heaviside_forward_kernel(float *__restrict__ out,
                                                const float *__restrict__ x, int64_t n)
{
    SNN_GRID_STRIDE_LOOP(i, n) out[i] = x[i] >= 0.0f ? 1.0f : 0.0f;
}

extern "C" void snn_heaviside_forward_cuda(float *out, const float *x, int64_t n)
{
    if (n <= 0) return;
    SNN_CUDA_LAUNCH(heaviside_forward_kernel, snn_cuda_grid(n, SNN_CUDA_BLOCK), SNN_CUDA_BLOCK, 0,
                    out, x, n);
}

/* CPU: snn_heaviside_backward_cpu. nvcc contracts the surrogate's products and sums (its
 * polynomial exp included) into fma, which moves the last bits: the test compares to a
 * tolerance. */
static __global__ void heaviside_backward_kernel(float *__restrict__ dx,
                                                 const float *__restrict__ dout,
                                                 const float *__restrict__ x,
                                                 snn_surrogate_kind kind, float alpha, int64_t n)
{
    SNN_GRID_STRIDE_LOOP(i, n) dx[i] += dout[i] * snn_surrogate_grad_inline(kind, alpha, x[i]);
}

extern "C" void snn_heaviside_backward_cuda(float *dx, const float *dout, const float *x,
                                            snn_surrogate_kind kind, float alpha, int64_t n)
{
    if (n <= 0) return;
    SNN_CUDA_LAUNCH(heaviside_backward_kernel, snn_cuda_grid(n, SNN_CUDA_BLOCK), SNN_CUDA_BLOCK,
                    0, dx, dout, x, kind, alpha, n);
}
