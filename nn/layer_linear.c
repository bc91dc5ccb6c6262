/*
 * layer_linear.c - the Linear layer: y = x W^T + b with W (out, in), b (out), initialised as
 * PyTorch's default U(-1/sqrt(in), 1/sqrt(in)). Accepts (..., in): (T, N, in) works as is.
 * With OTTT's trace on (nn/synapse_trace.c) its weight gradient is taken against the trace.
 */
#include <math.h>

#include "nn.h"
#include "nn_internal.h"
#include "tensor/error.h"

static snn_tensor *linear_forward(snn_module *m, snn_tensor *x)
{
    snn_tensor *w = m->params[0].tensor, *b = m->n_params > 1 ? m->params[1].tensor : NULL;
    snn_synapse_trace *s = &((snn_linear_impl *)m->impl)->trace;
    snn_tensor *trace = NULL; /* OTTT's presynaptic trace, when on (nn/synapse_trace.c) */
    if (s->on && snn_synapse_trace_step("Linear", s, x, &trace) != SNN_OK) return NULL;
    return trace ? snn_linear_traced(x, trace, w, b) : snn_linear(x, w, b);
}

static void linear_free_impl(snn_module *m)
{
    snn_synapse_trace *s = &((snn_linear_impl *)m->impl)->trace;
    if (s->trace) snn_synapse_trace_free(s);
}

static void linear_reset_state(snn_module *m)
{
    snn_synapse_trace *s = &((snn_linear_impl *)m->impl)->trace;
    if (s->trace) snn_synapse_trace_reset(s);
}

const snn_module_ops snn_linear_ops = {"Linear", linear_forward, linear_free_impl,
                                       linear_reset_state};

snn_module *snn_linear_new(int in_features, int out_features, bool bias, snn_rng *rng)
{
    if (in_features < 1 || out_features < 1 || !rng)
        return snn_error_null(SNN_ERR_ARGUMENT, "snn_linear_new: bad arguments (in %d, out %d, "
                              "rng %s)", in_features, out_features, rng ? "set" : "NULL");
    const snn_linear_impl impl = {{NULL, 0.0f, false}};
    snn_module *m = snn_module_new_copy(&snn_linear_ops, &impl, sizeof impl);
    if (!m) return NULL;
    float bound = 1.0f / sqrtf((float)in_features);
    if (snn_module_add_uniform(m, "weight", SNN_SHAPE(out_features, in_features), bound, rng) != SNN_OK ||
        (bias && snn_module_add_uniform(m, "bias", SNN_SHAPE(out_features), bound, rng) != SNN_OK)) {
        snn_module_free(m);
        return NULL;
    }
    return m;
}
