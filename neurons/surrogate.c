/*
 * surrogate.c - the public face of the surrogate functions: defaults, g and g' on the host.
 * The math itself is in surrogate.h, shared with the kernels; the names are names.c.
 * Tested by tests/test_neurons_surrogate.c (g' vs its closed form and vs finite differences).
 */
#include "kernels/surrogate.h"

/* Each surrogate's default alpha. */
static const float default_alpha[SNN_SURROGATE_COUNT] = {
    [SNN_SURROGATE_SIGMOID] = 4.0f, /* SpikingJelly's default */
    [SNN_SURROGATE_ATAN] = 2.0f,    /* SpikingJelly's tutorials */
    [SNN_SURROGATE_PIECEWISE_QUADRATIC] = 1.0f,
};

snn_surrogate snn_surrogate_default(snn_surrogate_kind kind)
{
    const bool known = (unsigned)kind < SNN_SURROGATE_COUNT;
    return (snn_surrogate){kind, known ? default_alpha[kind] : 1.0f};
}

float snn_surrogate_g(snn_surrogate s, float x)
{
    return snn_surrogate_g_inline(s.kind, s.alpha, x);
}

float snn_surrogate_grad(snn_surrogate s, float x)
{
    return snn_surrogate_grad_inline(s.kind, s.alpha, x);
}
