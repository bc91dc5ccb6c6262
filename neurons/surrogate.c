/*
 * surrogate.c - the public face of the surrogate functions: defaults, names, g and g' on the
 * host. The math itself is in surrogate.h, shared with the kernels.
 * Tested by tests/test_neurons_surrogate.c (g' vs its closed form and vs finite differences).
 */
#include <string.h>

#include "kernels/surrogate.h"
#include "tensor/error.h"

snn_surrogate snn_surrogate_default(snn_surrogate_kind kind)
{
    snn_surrogate s = {kind, 1.0f};
    switch (kind) {
    case SNN_SURROGATE_SIGMOID: s.alpha = 4.0f; break;  /* SpikingJelly's default */
    case SNN_SURROGATE_ATAN: s.alpha = 2.0f; break;     /* SpikingJelly's tutorials */
    case SNN_SURROGATE_PIECEWISE_QUADRATIC: s.alpha = 1.0f; break;
    default: break;
    }
    return s;
}

float snn_surrogate_g(snn_surrogate s, float x)
{
    return snn_surrogate_g_inline(s.kind, s.alpha, x);
}

float snn_surrogate_grad(snn_surrogate s, float x)
{
    return snn_surrogate_grad_inline(s.kind, s.alpha, x);
}

const char *snn_surrogate_name(snn_surrogate_kind kind)
{
    switch (kind) {
    case SNN_SURROGATE_SIGMOID: return "sigmoid";
    case SNN_SURROGATE_ATAN: return "atan";
    case SNN_SURROGATE_PIECEWISE_QUADRATIC: return "piecewise_quadratic";
    default: return "unknown";
    }
}

snn_status snn_surrogate_parse(const char *name, snn_surrogate *out)
{
    if (name) {
        for (int k = 0; k < SNN_SURROGATE_COUNT; k++) {
            if (strcmp(name, snn_surrogate_name((snn_surrogate_kind)k)) == 0) {
                *out = snn_surrogate_default((snn_surrogate_kind)k);
                return SNN_OK;
            }
        }
        if (strcmp(name, "pwq") == 0) {
            *out = snn_surrogate_default(SNN_SURROGATE_PIECEWISE_QUADRATIC);
            return SNN_OK;
        }
    }
    return snn_error(SNN_ERR_ARGUMENT, "snn_surrogate_parse: bad surrogate '%s' (expected "
                     "sigmoid, atan or piecewise_quadratic)", name ? name : "(null)");
}
