/*
 * clip_grad.c - gradient clipping by the global L2 norm, as torch.nn.utils.clip_grad_norm_
 * (optim.h: snn_clip_grad_norm). Between backward and the optimizer step:
 *
 *     norm  = sqrt( sum over every trainable parameter p with a gradient, sum_i g_p[i]^2 )
 *     coef  = max_norm / (norm + 1e-6)
 *     if coef < 1:  g_p[i] *= coef        for every such p
 *
 * so the update's direction is kept and its size is at most max_norm (the 1e-6 is PyTorch's;
 * it makes coef < 1 already for norm a hair below max_norm, and keeps coef finite at norm 0).
 * Recurrent networks need it: a gradient through T = 784 steps can be many times the usual
 * one on a few batches, and one such step undoes many (Pascanu et al. 2013, "On the
 * difficulty of training recurrent neural networks").
 *
 * How it runs, on the parameters' device, with the kernels every backend has:
 *   - per parameter, sumsq_and_finite(g) -> sums[2p, 2p+1] = (sum g^2, any NaN / inf), into
 *     one (P, 2) buffer on the device (step scratch inside a step, else a tensor of its own);
 *   - ONE copy of that buffer to the host (a host synchronisation: the only one of the call),
 *     where the P sums are added in double and the square root taken;
 *   - coef < 1: unary_forward(SCALE, coef) on each gradient, in place.
 * Traffic: each gradient read twice and written once when clipped (read once when not); 2 P
 * floats copied to the host. On CUDA two small launches per parameter for the sums (a
 * ResNet-18's 124 parameters: about 250 launches a step), one per parameter for the scale.
 *
 * A NaN or infinite gradient makes the norm NaN or inf; PyTorch would then multiply every
 * gradient by NaN. Here the gradients are left as they are and the norm is returned, so the
 * caller sees it (snn-train's loss check stops a run whose loss is not finite).
 *
 * Test: tests/test_clip_grad.c (ctest -R '^clip_grad$'), against a plain loop.
 */
#include <math.h>

#include "nn.h"
#include "kernels/kernels.h"
#include "tensor/arena.h"
#include "tensor/error.h"

snn_status snn_clip_grad_norm(snn_module *m, float max_norm, float *norm_out)
{
    const char *fn = "snn_clip_grad_norm";
    if (norm_out) *norm_out = 0.0f;
    if (!m) return snn_error(SNN_ERR_ARGUMENT, "%s: bad argument 'module' (got NULL)", fn);
    if (!(isfinite(max_norm) && max_norm > 0.0f))
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad argument 'max_norm' (expected a finite value "
                         "> 0, got %g)", fn, (double)max_norm);
    snn_param_list all;
    if (snn_module_parameters(m, &all) != SNN_OK) return snn_last_status();

    /* the trainable parameters that have a gradient, all on one device */
    int count = 0;
    snn_device device = SNN_CPU;
    snn_status st = SNN_OK;
    for (int i = 0; i < all.count && st == SNN_OK; i++) {
        const snn_tensor *p = all.items[i].tensor, *g = p->grad;
        if (!all.items[i].trainable || !g) continue;
        if (count == 0) device = g->device;
        if (g->device != device || g->numel != p->numel)
            st = snn_error(SNN_ERR_STATE, "%s: the gradient of '%s' (%lld elements on %s) does not "
                           "match its parameter (%lld elements) or the other gradients (on %s)",
                           fn, all.items[i].name, (long long)g->numel, snn_device_name(g->device),
                           (long long)p->numel, snn_device_name(device));
        count++;
    }
    if (st != SNN_OK || count == 0) { /* no gradient at all: the norm is 0, nothing to clip */
        snn_param_list_free(&all);
        return st;
    }

    /* sums (count, 2) on the device: each gradient's sum of squares and its non-finite flag;
     * inside a step (snn-train calls it between backward and the optimizer) step scratch,
     * which costs no allocation: a cudaMalloc and cudaFree a step would */
    const snn_kernels *k = snn_kernels_for(device);
    const size_t bytes = (size_t)count * 2 * sizeof(float);
    const bool in_step = snn_step_depth() > 0;
    const snn_step_scratch mark = snn_step_scratch_mark(device);
    snn_tensor *owned = NULL;
    float *host = snn_alloc(bytes, SNN_CPU), *sums = NULL;
    if (host && in_step) {
        sums = snn_step_alloc(fn, bytes, device);
    } else if (host) {
        owned = snn_tensor_new(SNN_SHAPE(count, 2), device);
        sums = owned ? owned->data : NULL;
    }
    if (!sums) {
        snn_free(host, bytes, SNN_CPU);
        snn_param_list_free(&all);
        return host ? snn_last_status()
                    : snn_error(SNN_ERR_MEMORY, "%s: out of host memory for %d sums", fn, count);
    }
    int j = 0;
    for (int i = 0; i < all.count; i++) {
        const snn_tensor *g = all.items[i].tensor->grad;
        if (all.items[i].trainable && g)
            k->sumsq_and_finite(sums + 2 * j++, g->data, g->numel); /* (2): sum, flag */
    }
    k->copy(host, sums, bytes, SNN_COPY_DEVICE_TO_HOST); /* the one host synchronisation */
    double total = 0.0;
    bool finite = true;
    for (j = 0; j < count; j++) {
        total += (double)host[2 * j];
        finite = finite && host[2 * j + 1] == 0.0f;
    }
    const float norm = (float)sqrt(total); /* NaN or inf when a gradient holds one */
    finite = finite && isfinite(norm);
    if (norm_out) *norm_out = norm;

    /* PyTorch's rule, in float as it computes it: coef = max_norm / (norm + 1e-6) if below 1 */
    const float coef = max_norm / (norm + 1e-6f);
    if (st == SNN_OK && finite && coef < 1.0f) {
        for (int i = 0; i < all.count; i++) {
            snn_tensor *g = all.items[i].tensor->grad;
            if (all.items[i].trainable && g)
                k->unary_forward(SNN_UNARY_SCALE, g->data, g->data, coef, g->numel);
        }
    }
    if (in_step) snn_step_scratch_release(device, mark);
    snn_tensor_free(owned);
    snn_free(host, bytes, SNN_CPU);
    snn_param_list_free(&all);
    return st;
}
