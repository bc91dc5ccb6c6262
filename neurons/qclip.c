/*
 * qclip.c - the quantized clip activation of a QANN: the L-level quantizer that ST-BIF stands in
 * for once the network is converted (nn/ann2snn.c), with a step size learned as in LSQ (Esser et
 * al., "Learned Step Size Quantization", ICLR 2020, https://arxiv.org/abs/1902.08153). The
 * autograd op; its kernels: kernels/ref/qclip.c (plain loops), kernels/cpu/qclip.c,
 * kernels/cuda/qclip.cu. Equations: kernels/neuron_math.h.
 * Tests: tests/test_ann2snn.c (values and the estimator's closed form), tests/test_cuda_ann2snn.c.
 *
 *   forward   r = x / s,  y = s clip(floor(r + 1/2), A_min, A_max),  s = max(step, 1e-6)
 *   backward  dy/dx = 1 where A_min <= r <= A_max, else 0
 *             dy/ds = floor(r + 1/2) - r inside, A_min below, A_max above
 *             dstep += g sum_i dy_i dy_i/ds,  g = 1 / sqrt(F max(A_max, -A_min))
 *
 * Bounds: [0, L-1] (unsigned) or [-L/2, L/2-1] (symmetric), ST-BIF's (snn_stbif_bounds), and the
 * rounding floor(r + 1/2) is the one ST-BIF's membrane converges to: that is what makes the
 * conversion exact. The staircase's true derivative is 0 almost everywhere; the straight-through
 * estimator above is what trains it (LSQ), so the tests check it against its closed form, as the
 * spike's surrogate, not against finite differences. g, LSQ's gradient scale with F the elements
 * per sample, keeps the step's update in proportion to the weights'.
 *
 * Memory traffic per element: forward reads x, writes y (8 B); backward reads dy and x and
 * updates dx (16 B). Saves nothing: x and the step are the node's inputs.
 */
#include <math.h>

#include "kernels/kernels.h"
#include "kernels/neuron_kernels.h"
#include "kernels/neuron_math.h"
#include "neuron_op.h"
#include "tensor/arena.h"
#include "tensor/error.h"

/* ---- the op ------------------------------------------------------------------------------- */

typedef struct qclip_saved {
    snn_neuron_params params;
    float grad_scale;
} qclip_saved;

static void qclip_backward(snn_node *node)
{
    const qclip_saved *sv = node->saved;
    snn_tensor *x = node->inputs[0], *step = node->inputs[1];
    if (!node->out->grad) return;
    float *dx = snn_grad_for(x), *dstep = snn_grad_for(step);
    if (!dx && !dstep) return;
    const snn_neuron_kernels *k = snn_neuron_kernels_for(x->device);
    SNN_ASSERT(k && k->qclip_backward);
    k->qclip_backward(dx, dstep, node->out->grad->data, x->data, step->data, &sv->params,
                      sv->grad_scale, x->numel);
}

snn_tensor *snn_qclip_step_new(float step, snn_device device)
{
    if (!(step > 0.0f) || !isfinite(step))
        return snn_error_null(SNN_ERR_ARGUMENT, "snn_qclip_step_new: bad argument 'step' "
                              "(expected > 0, got %g)", (double)step);
    snn_tensor *t = snn_tensor_new(SNN_SHAPE(1), device);
    if (!t) return NULL;
    if (snn_tensor_fill(t, step) != SNN_OK) {
        snn_tensor_free(t);
        return NULL;
    }
    t->requires_grad = true;
    return t;
}

snn_tensor *snn_qclip(snn_tensor *x, snn_tensor *step, const snn_neuron_config *cfg)
{
    const char *fn = "snn_qclip";
    if (snn_check_tensor(fn, "x", x)) return NULL;
    if (snn_neuron_config_check(fn, cfg) != SNN_OK) return NULL;
    if (cfg->kind != SNN_NEURON_QCLIP)
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument 'cfg' (expected a qclip config, "
                              "got %s); hint: snn_neuron_config_default(SNN_NEURON_QCLIP)", fn,
                              snn_neuron_kind_name(cfg->kind));
    if (snn_check_tensor(fn, "step", step)) return NULL;
    if (step->numel != 1)
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument 'step' (expected 1 element, got "
                              "%lld); hint: make it with snn_qclip_step_new", fn,
                              (long long)step->numel);
    if (snn_check_same_device(fn, "x", x, "step", step)) return NULL;
    const snn_neuron_kernels *k = snn_neuron_kernels_or_error(fn, x->device);
    if (!k) return NULL;
    SNN_REQUIRE_KERNEL(k, fn, qclip_forward);
    SNN_REQUIRE_KERNEL(k, fn, qclip_backward);
    snn_tensor *y = snn_step_tensor(fn, x->shape, x->device);
    if (!y) return NULL;
    const snn_neuron_params p = snn_neuron_params_from(cfg);
    if (x->numel > 0) k->qclip_forward(y->data, x->data, step->data, &p, x->numel);
    snn_tensor *inputs[2] = {x, step};
    if (snn_should_record(2, inputs)) {
        snn_node *node = snn_tape_record(fn, qclip_backward, y, 2, inputs, sizeof(qclip_saved));
        if (!node) return NULL;
        qclip_saved *sv = node->saved;
        sv->params = p;
        /* LSQ's gradient scale: F elements per sample of a (T, N, ...) input */
        const int64_t samples = x->shape.ndim >= 2 ? x->shape.dim[0] * x->shape.dim[1] : 1;
        const int64_t per_sample = samples > 0 && x->numel >= samples ? x->numel / samples : 1;
        const double q = fmax((double)p.a_max, -(double)p.a_min); /* >= 1 for L >= 2 */
        sv->grad_scale = (float)(1.0 / sqrt((double)per_sample * q));
    }
    return y;
}
