/*
 * optim.c - reference optimizer updates: SGD (momentum, dampening, Nesterov, weight decay) and
 * Adam / AdamW, one parameter tensor p (n) with its state (velocity, or m and v: (n)) in place.
 *
 * SGD, as torch.optim.SGD (I. Sutskever et al., ICML 2013, for the momentum form):
 *   g = grad + wd p
 *   if momentum != 0:   buf = first_step ? g : momentum buf + (1 - dampening) g
 *                       g   = nesterov ? g + momentum buf : buf
 *   p -= lr g                                  (momentum 0: no buffer, velocity may be NULL)
 * Adam (D. Kingma, J. Ba, arXiv:1412.6980) and AdamW (I. Loshchilov, F. Hutter,
 * arXiv:1711.05101), as torch.optim; step t from 1, bc1 = 1 - beta1^t, bc2 = 1 - beta2^t:
 *   AdamW (decoupled): p *= 1 - lr wd           Adam: g = grad + wd p
 *   m = beta1 m + (1 - beta1) g
 *   v = beta2 v + (1 - beta2) g^2
 *   p -= (lr / bc1) m / (sqrt(v) / sqrt(bc2) + eps)      (= lr m_hat / (sqrt(v_hat) + eps))
 *
 * Memory traffic per element: SGD reads grad, p (and velocity) and writes p (and velocity);
 * Adam reads grad, p, m, v and writes p, m, v.
 */
#include <math.h>

#include "kernels_ref.h"

void snn_sgd_update_ref(float *p, float *velocity, const float *grad, int64_t n,
                        const snn_sgd_params *hp)
{
    for (int64_t i = 0; i < n; i++) {
        float g = grad[i] + hp->weight_decay * p[i];
        if (hp->momentum != 0.0f) {
            const float buf = hp->first_step ? g   /* the first step stores g, undamped */
                                             : hp->momentum * velocity[i] +
                                                   (1.0f - hp->dampening) * g;
            velocity[i] = buf;
            g = hp->nesterov ? g + hp->momentum * buf : buf;
        }
        p[i] -= hp->lr * g;
    }
}

void snn_adam_update_ref(float *p, float *m, float *v, const float *grad, int64_t n,
                         const snn_adam_params *hp)
{
    const float step = hp->lr / hp->bias_correction1;
    const float sqrt_bc2 = sqrtf(hp->bias_correction2);
    for (int64_t i = 0; i < n; i++) {
        if (hp->decoupled) p[i] *= 1.0f - hp->lr * hp->weight_decay;
        const float g = hp->decoupled ? grad[i] : grad[i] + hp->weight_decay * p[i];
        m[i] = hp->beta1 * m[i] + (1.0f - hp->beta1) * g;
        v[i] = hp->beta2 * v[i] + (1.0f - hp->beta2) * (g * g);
        p[i] -= step * (m[i] / (sqrtf(v[i]) / sqrt_bc2 + hp->eps));
    }
}

/* adam_update on each tensor, with the tensor's own bias corrections */
void snn_adam_update_many_ref(const snn_adam_tensor *tensors, int count,
                              const snn_adam_params *hp)
{
    for (int i = 0; i < count; i++) {
        snn_adam_params one = *hp;
        one.bias_correction1 = tensors[i].bias_correction1;
        one.bias_correction2 = tensors[i].bias_correction2;
        snn_adam_update_ref(tensors[i].p, tensors[i].m, tensors[i].v, tensors[i].grad,
                            tensors[i].n, &one);
    }
}
