/*
 * qclip.c - the reference kernels of the quantized clip activation QCLIP (snn_qclip;
 * neurons/qclip.c explains the quantizer, the ANN side of ANN -> SNN conversion), with the
 * step s learned by LSQ (Esser et al. 2020, https://arxiv.org/abs/1902.08153). Equations as
 * the inline functions of kernels/neuron_math.h:
 *     forward   y = s clip(floor(x/s + 1/2), A_min, A_max),    s = max(step, SNN_QCLIP_MIN_STEP)
 *     backward  dx += dy                  where A_min <= x/s <= A_max   (straight through)
 *               dstep += grad_scale sum_i dy_i dy_i/ds,
 *               dy/ds = floor(x/s + 1/2) - x/s inside, A_min below, A_max above
 * The sum for dstep is taken in double, element after element.
 * Memory traffic per element: forward reads x, writes y (8 B); backward reads dy and x and
 * updates dx (16 B).
 */
#include "neuron_ref.h"
#include "kernels/neuron_math.h"

/* y, x (n); step [1] */
void snn_qclip_forward_ref(float *y, const float *x, const float *step,
                           const snn_neuron_params *p, int64_t n)
{
    const float s = snn_qclip_step_value(step[0]);
    for (int64_t i = 0; i < n; i++) y[i] = s * snn_qclip_level(p, x[i] / s);
}

/* dx, dy, x (n); dstep, step [1]; either output may be NULL */
void snn_qclip_backward_ref(float *dx, float *dstep, const float *dy, const float *x,
                            const float *step, const snn_neuron_params *p, float grad_scale,
                            int64_t n)
{
    const float s = snn_qclip_step_value(step[0]);
    double sum = 0.0; /* sum_i dy_i dy_i/ds */
    for (int64_t i = 0; i < n; i++) {
        const float r = x[i] / s;
        if (dx && snn_qclip_passes(p, r)) dx[i] += dy[i];
        if (dstep) sum += (double)dy[i] * (double)snn_qclip_dy_ds(p, r);
    }
    if (dstep) dstep[0] += (float)(sum * (double)grad_scale);
}
