/*
 * plane_norm.c - the L2 norm of every (t, n, c) plane of a spike tensor, as an autograd op: the
 * group-lasso term of the activity penalty (nn/activity_penalty.c explains the penalty).
 *
 * Dimension glossary: T time steps, N batch, C channels, P elements per plane (H * W, or 1).
 *
 *   forward   y[g] = ||x_g||_2 = sqrt(sum_p x[g, p]^2)       g = (t, n, c), p < P
 *   backward  dx[g, p] += dy[g] * x[g, p] / y[g]              (nothing where y[g] = 0)
 *
 * For spikes x in {0, 1}, ||x_g||^2 is the plane's spike count, so y[g] = sqrt(count), exactly:
 * a float sum of fewer than 2^24 ones is exact in any order (the CUDA kernels give the same bits).
 * The backward hands every spike of plane g the same 1 / sqrt(count): the fewer spikes a plane
 * has, the harder each one is pushed (group lasso; Yuan & Lin, "Model selection and estimation
 * in regression with grouped variables", 2006). At a silent plane the norm has no derivative;
 * the subgradient 0 is taken (a silent plane has nothing left to push).
 * Memory traffic: forward reads x (4 B per element); backward reads x and dx, writes dx (12 B).
 * Saves nothing: x is the node's input and y its output.
 * Kernels: kernels/ref/plane_norm.c (plain loops), kernels/cpu/plane_norm.c,
 * kernels/cuda/plane_norm.cu.
 * Tests: tests/test_activity_penalty.c (closed form, finite differences, through a LIF layer);
 * tests/test_cuda_activity_penalty.c (the CUDA kernels).
 */
#include <math.h>

#include "kernels/neuron_kernels.h"
#include "autograd/autograd.h"
#include "tensor/arena.h"
#include "kernels/kernels.h"
#include "tensor/error.h"

/* The planes of x (T, N, C, ...): the first three dims (two for a (T, N) input). */
static int64_t plane_groups(const snn_tensor *x, snn_shape *out)
{
    *out = (snn_shape){0};
    int64_t planes = 1;
    for (int d = 0; d < x->shape.ndim && d < 3; d++) {
        out->dim[out->ndim++] = x->shape.dim[d];
        planes *= x->shape.dim[d];
    }
    return planes;
}

static void plane_norm_backward(snn_node *node)
{
    snn_tensor *x = node->inputs[0], *y = node->out;
    float *dx = snn_grad_for(x);
    if (!dx || !y->grad || y->numel == 0) return;
    const snn_neuron_kernels *k = snn_neuron_kernels_for(x->device);
    SNN_ASSERT(k && k->plane_norm_backward);
    snn_step_scratch mark = snn_step_scratch_mark(x->device);
    const float *xv = snn_saved_values("snn_spike_plane_norms (backward)", x);
    if (!xv) {
        snn_backward_out_of_memory();
        return;
    }
    k->plane_norm_backward(dx, y->grad->data, xv, y->data, y->numel, x->numel / y->numel);
    snn_step_scratch_release(x->device, mark); /* spikes unpacked from bits, if they were */
}

snn_tensor *snn_spike_plane_norms(snn_tensor *x)
{
    const char *fn = "snn_spike_plane_norms";
    /* spikes kept as bits (snn_spikes_pack) are read too: the activity penalty runs after the
     * forward that packed them */
    if (!(x && x->spike_bits) && snn_check_tensor(fn, "x", x)) return NULL;
    if (x->shape.ndim < 2) {
        char buf[96];
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument 'x' (expected (T, N, ...) with "
                              "at least 2 dims, got %s)", fn,
                              snn_shape_str(x->shape, buf, sizeof buf));
    }
    snn_shape shape;
    const int64_t planes = plane_groups(x, &shape);
    const int64_t plane = planes ? x->numel / planes : 0;
    if (plane > INT32_MAX)
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument 'x' (planes of %lld elements; "
                              "at most 2^31 - 1)", fn, (long long)plane);
    const snn_neuron_kernels *k = snn_neuron_kernels_or_error(fn, x->device);
    if (!k) return NULL;
    SNN_REQUIRE_KERNEL(k, fn, plane_norm_forward);
    SNN_REQUIRE_KERNEL(k, fn, plane_norm_backward);
    snn_tensor *y = snn_step_tensor(fn, shape, x->device);  /* (T, N, C) */
    if (!y) return NULL;
    if (planes > 0) {
        snn_step_scratch mark = snn_step_scratch_mark(x->device);
        const float *xv = snn_saved_values(fn, x);
        if (!xv) return NULL;
        k->plane_norm_forward(y->data, xv, planes, plane);
        snn_step_scratch_release(x->device, mark);
    }
    if (snn_should_record(1, &x) && !snn_tape_record(fn, plane_norm_backward, y, 1, &x, 0))
        return NULL;
    return y;
}
