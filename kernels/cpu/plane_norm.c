/*
 * plane_norm.c - the fast CPU kernels of the per-plane L2 norm (snn_spike_plane_norms,
 * neurons/plane_norm.c explains the op and the activity penalty it serves):
 *   forward   y[g] = sqrt(sum_p x[g, p]^2)
 *   backward  dx[g, p] += dy[g] * x[g, p] / y[g]     (nothing where y[g] = 0)
 * OpenMP over the planes. Reference: kernels/ref/plane_norm.c. CUDA twin: kernels/cuda/plane_norm.cu.
 * Memory traffic: forward reads x (4 B per element); backward reads x and dx, writes dx (12 B).
 */
#include <math.h>

#include "cpu_threads.h"
#include "neuron_cpu.h"

void snn_plane_norm_forward_cpu(float *norm, const float *x, int64_t planes, int64_t plane)
{
#pragma omp parallel for schedule(static) \
    num_threads(snn_cpu_threads(planes * plane))
    for (int64_t g = 0; g < planes; g++) {
        const float *xg = x + g * plane;
        float sum = 0.0f;   /* sequential: the CUDA small-plane path sums in this order too */
        for (int64_t p = 0; p < plane; p++) sum += xg[p] * xg[p];
        norm[g] = sqrtf(sum);
    }
}

void snn_plane_norm_backward_cpu(float *dx, const float *dnorm, const float *x, const float *norm,
                                 int64_t planes, int64_t plane)
{
#pragma omp parallel for schedule(static) \
    num_threads(snn_cpu_threads(planes * plane))
    for (int64_t g = 0; g < planes; g++) {
        if (!(norm[g] > 0.0f)) continue;   /* silent plane: subgradient 0 */
        const float s = dnorm[g] / norm[g];
        float *dxg = dx + g * plane;
        const float *xg = x + g * plane;
        for (int64_t p = 0; p < plane; p++) dxg[p] += s * xg[p];
    }
}
