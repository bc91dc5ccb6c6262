/*
 * plane_norm.c - the reference kernels of the L2 norm of each (t, n, c) plane
 * (snn_spike_plane_norms; neurons/plane_norm.c explains the activity penalty it serves). x is
 * viewed as (planes, plane):
 *     forward   y[g] = sqrt(sum_p x[g, p]^2)
 *     backward  dx[g, p] += dy[g] x[g, p] / y[g]     (nothing where y[g] = 0: a silent plane's
 *                                                     subgradient is taken as 0)
 * Memory traffic per element: forward reads x (4 B); backward reads x, updates dx (12 B).
 */
#include <math.h>

#include "neuron_ref.h"

/* norm (planes); x (planes, plane) */
void snn_plane_norm_forward_ref(float *norm, const float *x, int64_t planes, int64_t plane)
{
    for (int64_t g = 0; g < planes; g++) {
        float sum = 0.0f;
        for (int64_t q = 0; q < plane; q++) sum += x[g * plane + q] * x[g * plane + q];
        norm[g] = sqrtf(sum);
    }
}

/* dx, x (planes, plane); dnorm, norm (planes) */
void snn_plane_norm_backward_ref(float *dx, const float *dnorm, const float *x,
                                 const float *norm, int64_t planes, int64_t plane)
{
    for (int64_t g = 0; g < planes; g++) {
        if (!(norm[g] > 0.0f)) continue;
        const float scale = dnorm[g] / norm[g];
        for (int64_t q = 0; q < plane; q++) dx[g * plane + q] += scale * x[g * plane + q];
    }
}
