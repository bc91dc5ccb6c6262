/*
 * optim.c - CPU reference kernels of the optimizer updates (kernels/kernels.h): SGD with
 * momentum / Nesterov / weight decay, and Adam / AdamW. One call updates one parameter tensor of
 * n elements in place, with its state (velocity, or m and v) of the same size.
 *
 * SGD, as torch.optim.SGD (I. Sutskever et al., ICML 2013, for the momentum form):
 *     g = grad + wd p
 *     if momentum != 0:
 *         buf = first_step ? g : momentum buf + (1 - dampening) g
 *         g   = nesterov ? g + momentum buf : buf
 *     p -= lr g
 *   With momentum = 0 there is no buffer: velocity may be NULL and is not touched.
 *
 * Adam (D. Kingma, J. Ba, arXiv:1412.6980) and AdamW (I. Loshchilov, F. Hutter,
 * arXiv:1711.05101), as torch.optim.Adam / AdamW; t is the step number (from 1), the caller
 * passes bc1 = 1 - beta1^t and bc2 = 1 - beta2^t:
 *     AdamW (decoupled): p *= 1 - lr wd          Adam: g = grad + wd p
 *     m = beta1 m + (1 - beta1) g
 *     v = beta2 v + (1 - beta2) g^2
 *     p -= lr (m / bc1) / (sqrt(v / bc2) + eps)
 *   computed as PyTorch does, p -= (lr / bc1) m / (sqrt(v) / sqrt(bc2) + eps), which is the same
 *   expression up to float rounding.
 *
 * Memory traffic per element: SGD 8 B read + 4 B written without momentum (grad, p -> p),
 * 12 B read + 8 B written with it (+ velocity); Adam 16 B read + 12 B written (grad, p, m, v).
 * All are streaming, elementwise and bound by memory bandwidth, so the loops are split over
 * threads and vectorised (each element is independent: the result does not depend on threads).
 * Adam's loop vectorises only when built with -fno-math-errno: otherwise C's sqrtf must be
 * able to set errno, and GCC keeps a scalar call behind a branch in every iteration (measured
 * 2.5-3x slower; function attributes and pragmas do not lift it in GCC 12, only the flag).
 *
 * Test: tests/test_optim_kernels.c (ctest -R optim_kernels).
 */
#include <math.h>

#include "cpu_threads.h"
#include "kernels_cpu.h"

void snn_sgd_update_cpu(float *p, float *velocity, const float *grad, int64_t n,
                        const snn_sgd_params *hp)
{
    const float lr = hp->lr, wd = hp->weight_decay;
    const float mu = hp->momentum, keep = 1.0f - hp->dampening;

    if (mu == 0.0f) {
        /* plain gradient descent (with decay): no state */
#pragma omp parallel for simd schedule(static) num_threads(snn_cpu_threads(n))
        for (int64_t i = 0; i < n; i++) p[i] -= lr * (grad[i] + wd * p[i]);
        return;
    }

    const bool first = hp->first_step, nesterov = hp->nesterov;
#pragma omp parallel for simd schedule(static) num_threads(snn_cpu_threads(n))
    for (int64_t i = 0; i < n; i++) {
        const float g = grad[i] + wd * p[i];
        /* the first step stores the gradient itself, undamped (PyTorch's clone of d_p) */
        const float buf = first ? g : mu * velocity[i] + keep * g;
        velocity[i] = buf;
        p[i] -= lr * (nesterov ? g + mu * buf : buf);
    }
}

void snn_adam_update_cpu(float *p, float *m, float *v, const float *grad, int64_t n,
                         const snn_adam_params *hp)
{
    const float lr = hp->lr, b1 = hp->beta1, b2 = hp->beta2, eps = hp->eps;
    const float step = lr / hp->bias_correction1;         /* lr / bc1 */
    const float sqrt_bc2 = sqrtf(hp->bias_correction2);   /* sqrt(bc2) */
    /* decoupled decay multiplies p by (1 - lr wd); coupled decay adds wd p to the gradient */
    const float shrink = hp->decoupled ? 1.0f - lr * hp->weight_decay : 1.0f;
    const float wd_grad = hp->decoupled ? 0.0f : hp->weight_decay;

#pragma omp parallel for simd schedule(static) num_threads(snn_cpu_threads(n))
    for (int64_t i = 0; i < n; i++) {
        const float pi = p[i] * shrink;
        const float g = grad[i] + wd_grad * pi;
        const float mi = b1 * m[i] + (1.0f - b1) * g;
        const float vi = b2 * v[i] + (1.0f - b2) * (g * g);
        m[i] = mi;
        v[i] = vi;
        p[i] = pi - step * (mi / (sqrtf(vi) / sqrt_bc2 + eps));
    }
}

/* One tensor at a time: on the CPU a launch costs nothing, and each tensor keeps its own
 * thread decision (snn_cpu_threads). */
void snn_adam_update_many_cpu(const snn_adam_tensor *tensors, int count, const snn_adam_params *hp)
{
    for (int i = 0; i < count; i++) {
        snn_adam_params one = *hp;
        one.bias_correction1 = tensors[i].bias_correction1;
        one.bias_correction2 = tensors[i].bias_correction2;
        snn_adam_update_cpu(tensors[i].p, tensors[i].m, tensors[i].v, tensors[i].grad,
                            tensors[i].n, &one);
    }
}
