/*
 * heaviside.c - the spike function as a primitive autograd op with a surrogate backward:
 *     forward   y = Heaviside(x) = (x >= 0 ? 1 : 0)
 *     backward  dx += dy * g'(x)          (g' from surrogate.h)
 * With it, any neuron can be written out of elementwise primitives on the tape. The tests do
 * exactly that to check the fused kernels' BPTT (tests/test_neurons_grad.c).
 * Kernels: kernels/ref/heaviside.c (plain loops), kernels/cpu/heaviside.c,
 * kernels/cuda/heaviside.cu. Saves nothing: x is the node's input.
 */
#include "kernels/kernels.h"
#include "kernels/neuron_kernels.h"
#include "kernels/surrogate.h"
#include "autograd/autograd.h"
#include "tensor/arena.h"
#include "tensor/error.h"

typedef struct heaviside_saved {
    snn_surrogate surrogate;
} heaviside_saved;

static void heaviside_backward(snn_node *node)
{
    const heaviside_saved *sv = node->saved;
    snn_tensor *x = node->inputs[0];
    float *dx = snn_grad_for(x);
    if (!dx || !node->out->grad) return;
    const snn_neuron_kernels *k = snn_neuron_kernels_for(x->device);
    SNN_ASSERT(k && k->heaviside_backward);
    k->heaviside_backward(dx, node->out->grad->data, x->data, sv->surrogate.kind,
                          sv->surrogate.alpha, x->numel);
}

snn_tensor *snn_heaviside(snn_tensor *x, snn_surrogate surrogate)
{
    const char *fn = "snn_heaviside";
    if (snn_check_tensor(fn, "x", x)) return NULL;
    if ((unsigned)surrogate.kind >= SNN_SURROGATE_COUNT || !(surrogate.alpha > 0.0f))
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument 'surrogate' (expected a kind "
                              "below %d and alpha > 0, got kind %d, alpha %g); hint: use "
                              "snn_surrogate_default()", fn, SNN_SURROGATE_COUNT,
                              (int)surrogate.kind, (double)surrogate.alpha);
    const snn_neuron_kernels *k = snn_neuron_kernels_or_error(fn, x->device);
    if (!k) return NULL;
    SNN_REQUIRE_KERNEL(k, fn, heaviside_forward);
    SNN_REQUIRE_KERNEL(k, fn, heaviside_backward);
    snn_tensor *y = snn_step_tensor(fn, x->shape, x->device);
    if (!y) return NULL;
    k->heaviside_forward(y->data, x->data, x->numel);
    if (snn_should_record(1, &x)) {
        snn_node *node = snn_tape_record("heaviside", heaviside_backward, y, 1, &x,
                                         sizeof(heaviside_saved));
        if (!node) return NULL;
        ((heaviside_saved *)node->saved)->surrogate = surrogate;
    }
    return y;
}
