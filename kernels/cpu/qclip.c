/*
 * qclip.c - the fast CPU kernels of the quantized clip activation (snn_qclip, neurons/qclip.c
 * explains the quantizer and its LSQ estimator; the equations are in kernels/neuron_math.h):
 *   forward   y = s clip(floor(x/s + 1/2), A_min, A_max)
 *   backward  dx += dy where A_min <= x/s <= A_max;  dstep += g sum_i dy_i dy_i/ds
 * OpenMP over the elements. Reference: kernels/ref/qclip.c. CUDA twin: kernels/cuda/qclip.cu.
 * Memory traffic per element: forward reads x, writes y (8 B); backward reads dy and x and
 * updates dx (16 B).
 */
#include "neuron_cpu.h"
#include "cpu_threads.h"
#include "kernels/neuron_math.h"

void snn_qclip_forward_cpu(float *y, const float *x, const float *step,
                           const snn_neuron_params *p, int64_t n)
{
    const snn_neuron_params local = *p;
    const float s = snn_qclip_step_value(step[0]);
#pragma omp parallel for schedule(static) num_threads(snn_cpu_threads(n))
    for (int64_t i = 0; i < n; i++) y[i] = s * snn_qclip_level(&local, x[i] / s);
}

typedef struct qclip_backward_args {
    float *dx;
    const float *dy, *x;
    const snn_neuron_params *p;
    float s;
    bool want_dstep;
} qclip_backward_args;

/* dx += dy where the quantizer passes the gradient, over items [i0, i1); returns the slice's
 * share of dL/dstep (0 when not wanted). */
static double qclip_backward_slice(void *ctx, int64_t i0, int64_t i1)
{
    const qclip_backward_args *a = ctx;
    const snn_neuron_params local = *a->p;
    double sum = 0.0;
    for (int64_t i = i0; i < i1; i++) {
        const float r = a->x[i] / a->s;
        if (a->dx && snn_qclip_passes(&local, r)) a->dx[i] += a->dy[i];
        if (a->want_dstep) sum += (double)a->dy[i] * (double)snn_qclip_dy_ds(&local, r);
    }
    return sum;
}

/* The dstep sum runs over fixed slices of the elements (snn_cpu_sum_slices), each summed in
 * double in order, then the slices in order: the same bits whatever the number of threads. */
void snn_qclip_backward_cpu(float *dx, float *dstep, const float *dy, const float *x,
                            const float *step, const snn_neuron_params *p, float grad_scale,
                            int64_t n)
{
    qclip_backward_args a = {dx, dy, x, p, snn_qclip_step_value(step[0]), dstep != NULL};
    const double total = snn_cpu_sum_slices(n, n, qclip_backward_slice, &a);
    if (dstep) dstep[0] += (float)(total * (double)grad_scale);
}
