/*
 * running_pool.c - the max-pool of a converted SNN: the max-pool of the running sums of its
 * input over time, emitted as changes: the autograd op. Its kernels: kernels/ref/running_pool.c
 * (plain loops), kernels/cpu/running_pool.c, kernels/cuda/running_pool.cu. Tests: tests/test_ann2snn.c, tests/test_cuda_ann2snn.c.
 *
 * A QANN max-pools the quantized activation; the SNN that replaces it (nn/ann2snn.c) only has
 * that activation as the sum of the spikes received so far, and the max of sums is not the sum
 * of per-step maxima. So this op keeps, per window element, the running sum S of its input and
 * emits at each step how much the window's maximum moved:
 *
 *   S[t] = S[t-1] + x[t],  S[-1] = 0          (per input element)
 *   M[t] = max over the window of S[t],  M[-1] = 0,  a(t) = the first element holding it
 *   y[t] = M[t] - M[t-1]                      so  y[0] + ... + y[t] = M[t]
 *
 * It is the pattern SpikeZIP-TF uses for every non-linear op other than the quantizer
 * (accumulate the input, apply the op, emit the difference), here for max-pool. Windows do not
 * overlap (stride >= K): each input element has one owner, so backward needs no atomics. A plane
 * silent at step t leaves S, M, and so y[t] unchanged (y[t] = M - M = +0 exactly): the activity of
 * the neuron layer before it is still a valid mask of y's silent planes (the sparse pass reads it).
 *
 * Backward: y[t] reads S[t] at a(t) and S[t-1] at a(t-1), so with dy[T] = 0
 *   dL/dS[t][e] = [e = a(t)] (dy[t] - dy[t+1]),   dx[u][e] = sum over t >= u of dL/dS[t][e]
 * which one pass from t = T-1 down to 0 builds with a running sum g per window element.
 *
 * Memory traffic per step: forward reads x, writes y and, in grad mode, a 4-byte argmax per
 * output; backward reads dy twice and argmax, and updates dx.
 */
#include "kernels/kernels.h"
#include "kernels/neuron_kernels.h"
#include "neuron_op.h"
#include "tensor/arena.h"
#include "tensor/error.h"

/* ---- the op ------------------------------------------------------------------------------- */

typedef struct running_pool_saved {
    snn_running_pool_dims dims;
    int32_t *argmax; /* (T, N, C, H_out, W_out) */
} running_pool_saved;

static void running_pool_backward(snn_node *node)
{
    const running_pool_saved *sv = node->saved;
    snn_tensor *x = node->inputs[0];
    float *dx = snn_grad_for(x);
    if (!dx || !node->out->grad) return;
    const snn_neuron_kernels *k = snn_neuron_kernels_for(x->device);
    SNN_ASSERT(k && k->running_max_pool_backward);
    k->running_max_pool_backward(dx, node->out->grad->data, sv->argmax, &sv->dims);
}

snn_tensor *snn_running_max_pool2d(snn_tensor *x, int kernel, int stride)
{
    const char *fn = "snn_running_max_pool2d";
    char buf[96];
    if (snn_check_tensor(fn, "x", x)) return NULL;
    if (x->shape.ndim != 5)
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument 'x' (expected 5-D (T, N, C, H, "
                              "W), got %s); hint: the running sums need the time axis", fn,
                              snn_shape_str(x->shape, buf, sizeof buf));
    if (kernel < 1 || kernel * kernel > SNN_RUNNING_POOL_MAX_WINDOW || stride < kernel)
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad arguments (expected 1 <= kernel <= 4 and "
                              "stride >= kernel, got kernel %d, stride %d); hint: overlapping "
                              "windows are not supported", fn, kernel, stride);
    const int64_t *s = x->shape.dim;
    if (s[3] < kernel || s[4] < kernel || s[3] > INT32_MAX || s[4] > INT32_MAX)
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument 'x' (planes of %lldx%lld, "
                              "expected at least the %dx%d window)", fn, (long long)s[3],
                              (long long)s[4], kernel, kernel);
    const snn_neuron_kernels *k = snn_neuron_kernels_or_error(fn, x->device);
    if (!k) return NULL;
    SNN_REQUIRE_KERNEL(k, fn, running_max_pool_forward);
    SNN_REQUIRE_KERNEL(k, fn, running_max_pool_backward);
    snn_running_pool_dims d = {s[0], s[1] * s[2], (int)s[3], (int)s[4], kernel, stride, 0, 0};
    d.H_out = (d.H - kernel) / stride + 1;
    d.W_out = (d.W - kernel) / stride + 1;
    snn_tensor *y = snn_step_tensor(fn, SNN_SHAPE(s[0], s[1], s[2], d.H_out, d.W_out), x->device);
    if (!y) return NULL;
    const bool record = snn_should_record(1, &x);
    int32_t *argmax = NULL;
    if (record) {
        argmax = snn_step_alloc(fn, (size_t)y->numel * sizeof *argmax, x->device);
        if (!argmax) return NULL;
    }
    if (y->numel > 0) k->running_max_pool_forward(y->data, argmax, x->data, &d);
    if (record) {
        snn_node *node = snn_tape_record("running_max_pool2d", running_pool_backward, y, 1, &x,
                                         sizeof(running_pool_saved));
        if (!node) return NULL;
        *(running_pool_saved *)node->saved = (running_pool_saved){d, argmax};
    }
    return y;
}
