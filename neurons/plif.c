/*
 * plif.c - ParametricLIF's learned time constant (Fang et al., "Incorporating Learnable
 * Membrane Time Constant to Enhance Learning of Spiking Neural Networks", ICCV 2021,
 * https://arxiv.org/abs/2007.05785).
 *
 * PLIF is LIF with 1/tau = k = sigmoid(w) and w learned. The sigmoid keeps tau > 1 whatever w
 * the optimizer makes, and w0 = -ln(tau0 - 1) gives sigmoid(w0) = 1/tau0 exactly:
 *     sigmoid(-ln(tau0 - 1)) = 1 / (1 + (tau0 - 1)) = 1 / tau0.
 * One w per layer, shared by all its neurons (SpikingJelly's default). The fused kernel
 * (lif.c) accumulates dL/dw = k (1 - k) * sum over elements and steps of dL/dH dH/dk.
 */
#include <math.h>

#include "neurons.h"
#include "kernels/surrogate.h"
#include "tensor/error.h"

snn_tensor *snn_plif_param_new(float tau0, snn_device device)
{
    if (!(tau0 > 1.0f) || !isfinite(tau0))
        return snn_error_null(SNN_ERR_ARGUMENT, "snn_plif_param_new: bad argument 'tau0' "
                              "(expected > 1, got %g)", (double)tau0);
    snn_tensor *w = snn_tensor_new(SNN_SHAPE(1), device);
    if (!w) return NULL;
    const float w0 = -logf(tau0 - 1.0f);
    if (snn_tensor_copy_from_host(w, &w0) != SNN_OK) {
        snn_tensor_free(w);
        return NULL;
    }
    w->requires_grad = true;
    w->name = "plif.w";
    return w;
}

float snn_plif_tau(const snn_tensor *w)
{
    if (snn_check_tensor("snn_plif_tau", "w", w)) return NAN;
    if (w->numel != 1) {
        snn_error(SNN_ERR_ARGUMENT, "snn_plif_tau: bad argument 'w' (expected 1 element, got %lld)",
                  (long long)w->numel);
        return NAN;
    }
    return 1.0f / snn_sigmoidf(snn_tensor_item(w));
}
