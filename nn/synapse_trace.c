/*
 * synapse_trace.c - the presynaptic trace of a Conv2d or Linear layer, for OTTT (online
 * training through time, Xiao et al., NeurIPS 2022; app/train_online.c, docs/temporal.md):
 *
 *   a[t] = lambda a[t-1] + x[t]            the layer's input at time step t, a[-1] = 0
 *   dL_t/dW = dL_t/dY[t] (x) a[t]          (snn_conv2d_traced, snn_linear_traced)
 *
 * SLTT's backward at step t takes the weight gradient against x[t]. OTTT takes it against
 * a[t], which carries the inputs of the steps before, decayed as the neurons' membrane decays
 * them (lambda = 1 - 1/tau for LIF): some of the temporal credit that dropping the path
 * through V loses, for the price of one more tensor per synaptic layer (its input at one step,
 * 4 B an element). dX is unchanged: the spatial path.
 *
 * The trace is the layer's OWNED tensor, made by its first traced forward for that input's
 * shape and device (remade when they change), set to zero by snn_module_reset_state (each
 * batch starts with no past), freed with the layer. A traced layer takes one time step per
 * forward: the online step's T = 1.
 * Test: tests/test_online.c.
 */
#include "nn.h"
#include "nn_internal.h"
#include "tensor/error.h"
#include "kernels/kernels.h"

snn_status snn_synapse_trace_step(const char *fn, snn_synapse_trace *s, const snn_tensor *x,
                                  snn_tensor **trace)
{
    *trace = NULL;
    if (!s->on) return SNN_OK;
    if (snn_check_tensor(fn, "x", x)) return snn_last_status();
    if (x->shape.ndim >= 3 && x->shape.dim[0] != 1) {
        char buf[96];
        return snn_error(SNN_ERR_ARGUMENT, "%s: a layer with a presynaptic trace (OTTT) takes one "
                         "time step per forward, (1, N, ...); got %s", fn,
                         snn_shape_str(x->shape, buf, sizeof buf));
    }
    snn_tensor *a = s->trace;
    if (a && (a->device != x->device || !snn_shape_equal(a->shape, x->shape))) {
        snn_tensor_free(a);
        a = s->trace = NULL;
    }
    if (!a) { /* a[-1] = 0 */
        a = s->trace = snn_tensor_new(x->shape, x->device);
        if (!a) return snn_last_status();
    }
    const snn_kernels *k = snn_kernels_or_error(fn, x->device);
    if (!k) return snn_last_status();
    k->unary_forward(SNN_UNARY_SCALE, a->data, a->data, s->decay, a->numel); /* lambda a */
    k->axpy(a->data, 1.0f, x->data, a->numel);                                /* + x */
    *trace = a;
    return SNN_OK;
}

void snn_synapse_trace_reset(snn_synapse_trace *s)
{
    if (s->trace) (void)snn_tensor_fill(s->trace, 0.0f); /* an error is the next op's to report */
}

void snn_synapse_trace_free(snn_synapse_trace *s)
{
    snn_tensor_free(s->trace);
    s->trace = NULL;
}

/* The trace of a Conv2d or Linear layer, NULL for other modules. */
static snn_synapse_trace *trace_of(snn_module *m)
{
    if (m->ops == &snn_conv2d_ops) return &((snn_conv_impl *)m->impl)->trace;
    if (m->ops == &snn_linear_ops) return &((snn_linear_impl *)m->impl)->trace;
    return NULL;
}

int snn_synapse_layers_set_trace(snn_module *root, bool on, float decay)
{
    if (!root) return 0;
    snn_synapse_trace *s = trace_of(root);
    if (s) {
        s->on = on;
        s->decay = decay;
        snn_synapse_trace_reset(s);
    }
    int layers = s != NULL;
    for (int i = 0; i < root->n_children; i++)
        layers += snn_synapse_layers_set_trace(root->children[i], on, decay);
    return layers;
}
