/*
 * heaviside.c - the reference kernels of the spike function as a primitive op
 * (snn_heaviside, neurons/heaviside.c), with which any neuron can be written out of
 * elementwise ops on the tape:
 *     forward   y[i] = Heaviside(x[i]) = (x[i] >= 0 ? 1 : 0)
 *     backward  dx[i] += dy[i] g'(x[i])     g' the surrogate's slope (kernels/surrogate.h)
 * Memory traffic per element: forward reads x, writes y (8 B); backward reads dy and x and
 * updates dx (16 B).
 */
#include "neuron_ref.h"
#include "kernels/surrogate.h"

/* out, x (n) */
void snn_heaviside_forward_ref(float *out, const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++) out[i] = x[i] >= 0.0f ? 1.0f : 0.0f;
}

/* dx, dout, x (n) */
void snn_heaviside_backward_ref(float *dx, const float *dout, const float *x,
                                snn_surrogate_kind kind, float alpha, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        dx[i] += dout[i] * snn_surrogate_grad_inline(kind, alpha, x[i]);
}
