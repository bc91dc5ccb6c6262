/*
 * nir_time.c - the two time-axis ops the step-by-step executor needs (nir_run.h), as autograd
 * ops on any device (they move memory through the device's kernel table and nothing else):
 *
 *   nir_time_step(x, t)        x (T, ...) -> x[t] (...): a view of x's data, no copy;
 *                              backward dx[t] += dy
 *   nir_time_stack(y, count)   count tensors (...) -> (count, ...): one copy of each;
 *                              backward dy_k += dout[k]
 *
 * A tape node takes at most SNN_MAX_NODE_INPUTS (6) inputs, so a stack that records a tape is
 * a tree of concatenations of up to 6 parts each: log6(count) copies of the data, instead of
 * count copies for a chain of pairs. Without a tape the stack is one allocation and count copies.
 * Memory traffic: the step is free; the stack reads and writes count * numel floats per level.
 */
#include <string.h>

#include "nir_run.h"
#include "autograd/autograd.h"
#include "kernels/kernels.h"
#include "tensor/arena.h"
#include "tensor/error.h"

typedef struct step_saved {
    int64_t offset, numel; /* x[t] starts at element offset of x */
} step_saved;

static void step_backward(snn_node *node)
{
    const step_saved *sv = node->saved;
    snn_tensor *x = node->inputs[0];
    float *dx = snn_grad_for(x);
    if (!dx) return;
    snn_kernels_for(x->device)->axpy(dx + sv->offset, 1.0f, node->out->grad->data, sv->numel);
}

snn_tensor *nir_time_step(snn_tensor *x, int t)
{
    const char *fn = "nir_time_step";
    if (snn_check_tensor(fn, "x", x)) return NULL;
    char buf[96];
    if (x->shape.ndim < 2 || t < 0 || t >= x->shape.dim[0])
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument 't' (expected a step of x's "
                              "leading time axis, x %s, got t = %d)", fn,
                              snn_shape_str(x->shape, buf, sizeof buf), t);
    snn_tensor *y = snn_step_view(fn, x, x->shape);
    if (!y) return NULL;
    snn_shape step = {.ndim = x->shape.ndim - 1};
    for (int d = 1; d < x->shape.ndim; d++) step.dim[d - 1] = x->shape.dim[d];
    y->shape = step;
    y->numel = snn_shape_numel(step);
    y->data = x->data + (int64_t)t * y->numel;
    if (snn_should_record(1, &x)) {
        snn_node *node = snn_tape_record(fn, step_backward, y, 1, &x, sizeof(step_saved));
        if (!node) return NULL;
        *(step_saved *)node->saved = (step_saved){(int64_t)t * y->numel, y->numel};
    }
    return y;
}

/* ---- stacking ------------------------------------------------------------------------------ */

typedef struct concat_saved {
    int64_t numel[SNN_MAX_NODE_INPUTS]; /* each part's floats, in order */
} concat_saved;

static void concat_backward(snn_node *node)
{
    const concat_saved *sv = node->saved;
    int64_t offset = 0;
    for (int i = 0; i < node->n_inputs; i++) {
        snn_tensor *part = node->inputs[i];
        float *dpart = snn_grad_for(part);
        if (dpart)
            snn_kernels_for(part->device)->axpy(dpart, 1.0f, node->out->grad->data + offset,
                                                sv->numel[i]);
        offset += sv->numel[i];
    }
}

/* parts[0..n) (n <= 4), each holding whole steps of `step` shape, one after the other:
 * (rows, step...) with rows the parts' steps together. */
static snn_tensor *concat(snn_tensor *const *parts, int n, snn_shape step, int64_t step_numel)
{
    const char *fn = "nir_time_stack";
    int64_t rows = 0;
    for (int i = 0; i < n; i++) rows += parts[i]->numel / step_numel;
    snn_shape shape = {.ndim = step.ndim + 1};
    shape.dim[0] = rows;
    for (int d = 0; d < step.ndim; d++) shape.dim[d + 1] = step.dim[d];
    snn_tensor *out = snn_step_tensor(fn, shape, parts[0]->device);
    if (!out) return NULL;
    const snn_kernels *k = snn_kernels_for(out->device);
    int64_t offset = 0;
    for (int i = 0; i < n; i++) {
        k->copy(out->data + offset, parts[i]->data, (size_t)parts[i]->numel * sizeof(float),
                SNN_COPY_DEVICE_TO_DEVICE);
        offset += parts[i]->numel;
    }
    if (snn_should_record(n, parts)) {
        snn_node *node = snn_tape_record(fn, concat_backward, out, n, parts, sizeof(concat_saved));
        if (!node) return NULL;
        concat_saved *sv = node->saved;
        for (int i = 0; i < n; i++) sv->numel[i] = parts[i]->numel;
    }
    return out;
}

snn_tensor *nir_time_stack(snn_tensor *const *steps, int count)
{
    const char *fn = "nir_time_stack";
    if (count < 1 || !steps)
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument 'count' (expected >= 1 steps, "
                              "got %d)", fn, count);
    for (int t = 0; t < count; t++)
        if (snn_check_tensor(fn, "steps[t]", steps[t]) ||
            snn_check_same_shape(fn, "steps[0]", steps[0], "steps[t]", steps[t]) ||
            snn_check_same_device(fn, "steps[0]", steps[0], "steps[t]", steps[t]))
            return NULL;
    const snn_shape step = steps[0]->shape;
    const int64_t step_numel = steps[0]->numel;
    if (step.ndim >= SNN_MAX_DIMS)
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument 'steps' (%d dims leave no room "
                              "for a time axis)", fn, step.ndim);
    if (count <= SNN_MAX_NODE_INPUTS) return concat(steps, count, step, step_numel);
    bool record = false;
    for (int t = 0; t < count && !record; t++) record = snn_should_record(1, &steps[t]);
    if (!record) { /* no tape: one output, count copies */
        snn_shape shape = {.ndim = step.ndim + 1};
        shape.dim[0] = count;
        for (int d = 0; d < step.ndim; d++) shape.dim[d + 1] = step.dim[d];
        snn_tensor *out = snn_step_tensor(fn, shape, steps[0]->device);
        if (!out) return NULL;
        const snn_kernels *k = snn_kernels_for(out->device);
        for (int t = 0; t < count; t++)
            k->copy(out->data + (int64_t)t * step_numel, steps[t]->data,
                    (size_t)step_numel * sizeof(float), SNN_COPY_DEVICE_TO_DEVICE);
        return out;
    }
    /* a tree: each level concatenates groups of up to 4 parts, until one part is left */
    snn_tensor **level = snn_step_alloc(fn, (size_t)count * sizeof *level, SNN_CPU);
    if (!level) return NULL;
    memcpy(level, steps, (size_t)count * sizeof *level);
    int n = count;
    while (n > 1) {
        int next = 0;
        for (int i = 0; i < n; i += SNN_MAX_NODE_INPUTS) {
            int group = n - i < SNN_MAX_NODE_INPUTS ? n - i : SNN_MAX_NODE_INPUTS;
            level[next] = group == 1 ? level[i] : concat(level + i, group, step, step_numel);
            if (!level[next++]) return NULL;
        }
        n = next;
    }
    return level[0];
}
