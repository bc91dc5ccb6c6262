/*
 * heaviside.c - the fast CPU kernels of the spike function (snn_heaviside, neurons/heaviside.c):
 *     forward   y = Heaviside(x) = (x >= 0 ? 1 : 0)
 *     backward  dx += dy * g'(x)          (g' from kernels/surrogate.h)
 * OpenMP over the elements. Reference: kernels/ref/heaviside.c. CUDA twin: kernels/cuda/heaviside.cu.
 * Memory traffic: forward reads x, writes y (8 B per element); backward reads dy and x and
 * updates dx (16 B per element).
 */
#include "neuron_cpu.h" /* first: it selects the surrogate's fast exp */
#include "cpu_threads.h"
#include "kernels/surrogate.h"

void snn_heaviside_forward_cpu(float *out, const float *x, int64_t n)
{
#pragma omp parallel for schedule(static) num_threads(snn_cpu_threads(n))
    for (int64_t i = 0; i < n; i++) out[i] = x[i] >= 0.0f ? 1.0f : 0.0f;
}

void snn_heaviside_backward_cpu(float *dx, const float *dout, const float *x,
                                snn_surrogate_kind kind, float alpha, int64_t n)
{
#pragma omp parallel for schedule(static) num_threads(snn_cpu_threads(n))
    for (int64_t i = 0; i < n; i++) dx[i] += dout[i] * snn_surrogate_grad_inline(kind, alpha, x[i]);
}
