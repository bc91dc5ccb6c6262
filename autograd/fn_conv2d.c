/*
 * fn_conv2d.c - 2-D convolution (cross-correlation, as PyTorch's conv2d) as one tape node.
 *
 *   y[n, o, i, j] = b[o] + sum_{c, u, v} w[o, c, u, v] x[n, c, i*s - p + u, j*s - p + v]
 *
 * Forward and backward are the device's fused kernels (im2col + GEMM); the workspace they need
 * comes from the step arena. A 5-D (T, N, C, H, W) input is one batch of T*N images. x may be
 * spikes kept as bits (autograd/spike_pack.c): read as bits where the device's kernels can
 * (conv2d_forward_bits, conv2d_backward_bits), else unpacked for the op.
 * snn_conv2d_traced takes dW against another tensor (OTTT's presynaptic trace) instead of x.
 * snn_conv2d_batchnorm_eval, the conv and an eval-mode batch-norm after it for inference, is
 * fn_conv2d_bn_eval.c. dL/dy may arrive as the dL/dout of the fused batch-norm -> neuron op
 * that reads y, whose last step (dL/dout -> dL/dy) the device's kernels then take as they
 * read it (conv2d_backward_bn_dout, autograd/grad_deferred.c).
 */
#include "autograd.h"
#include "conv2d_args.h"
#include "tensor/arena.h"
#include "tensor/error.h"
#include "kernels/kernels.h"

typedef struct conv_saved {
    snn_conv2d_dims dims;
    const float *trace;   /* snn_conv2d_traced: what dW is taken against instead of x */
} conv_saved;

/* What the weight gradient is taken against: the trace where there is one, else x's saved
 * values (NULL when they could not be had: reported) */
static const float *weight_grad_input(const conv_saved *s, snn_tensor *x)
{
    return s->trace ? s->trace : snn_saved_values("snn_conv2d (backward)", x);
}

/* The device's backward kernels on dL/dy: as bits where x is kept as bits and the kernels
 * read them, else x's floats (or the trace). With bn (dL/dy still a batch-norm's dL/dout,
 * grad_deferred.c) the kernels make dL/dy as they read it where they can; where they cannot,
 * it is made first. `consume`: dL/dy is this op's alone, so the kernels that take it as theirs
 * (conv2d_backward_consuming, in the smaller workspace) go first. False when x's floats could
 * not be had (reported). */
static bool run_backward(const snn_kernels *k, snn_node *node, const snn_bn_dout *bn, float *dx,
                         float *dw, float *db, float *workspace, bool consume)
{
    conv_saved *s = node->saved;
    snn_tensor *x = node->inputs[0], *w = node->inputs[1], *y = node->out;
    const float *dout = y->grad->data;
    const uint32_t *bits = !s->trace && !x->data && k->conv2d_backward_bits ? x->spike_bits
                                                                             : NULL;
    const float *xv = NULL;
    if (consume) {
        if (!bits && !(xv = weight_grad_input(s, x))) return false;
        if (k->conv2d_backward_consuming(dx, dw, db, y->grad->data, bn, xv, bits, w->data,
                                         &s->dims, workspace))
            return true; /* (declined: the workspace is the full one, kernels.h) */
    }
    if (bits) {
        if (bn && k->conv2d_backward_bn_dout(dx, dw, db, dout, bn, NULL, bits, w->data, &s->dims,
                                             workspace))
            return true;
        snn_grad_settle(y); /* declined (a path that cannot): dL/dy made first */
        bn = NULL;
        if (k->conv2d_backward_bits(dx, dw, db, dout, bits, w->data, &s->dims, workspace))
            return true;
    }
    if (!xv) xv = weight_grad_input(s, x);
    if (!xv) return false;
    if (bn && k->conv2d_backward_bn_dout(dx, dw, db, dout, bn, xv, NULL, w->data, &s->dims,
                                         workspace))
        return true;
    snn_grad_settle(y);
    k->conv2d_backward(dx, dw, db, dout, xv, w->data, &s->dims, workspace);
    return true;
}

static void conv2d_backward(snn_node *node)
{
    conv_saved *s = node->saved;
    const snn_conv2d_dims *d = &s->dims;
    snn_tensor *x = node->inputs[0], *w = node->inputs[1], *b = node->inputs[2], *y = node->out;
    const snn_kernels *k = snn_kernels_for(y->device);
    /* dL/dy may still be the next batch-norm's dL/dout (node->takes_deferred_grad) */
    snn_bn_dout record;
    const snn_bn_dout *bn =
        snn_grad_deferred_bn(y, d->N, d->C_out, d->H_out * d->W_out, &record) ? &record : NULL;
    if (!bn) snn_grad_settle(y); /* (a record of other dims: none in practice) */
    /* dx over dy where the device's kernels take it (a conv that keeps its shape, on CUDA's
     * channels-last path) and x has no gradient yet: y's gradient becomes x's once the kernel
     * has run, so a basic block's backward holds one activation gradient fewer */
    const bool over = !s->trace && k->conv2d_dx_over_dout && snn_grad_can_hand_over(y, x) &&
                      k->conv2d_dx_over_dout(d);
    float *dx = over ? y->grad->data : snn_grad_for(x);
    float *dw = snn_grad_for(w), *db = snn_grad_for(b);
    if (!dx && !dw && !db) {
        snn_grad_settle(y); /* (dL/dy as it would have been; nothing here reads it) */
        return;
    }
    /* dL/dy is this op's alone (pooled, not retained): where the device's kernels can keep
     * scratch in it once read, their workspace is smaller (the largest of a step: layer2.0's
     * first conv's x copy on CUDA's channels-last path). Not with a conv bias before a
     * batch-norm (never in practice), whose dbias needs dL/dy itself. */
    const bool consume = k->conv2d_backward_consuming && y->grad->pooled && !y->retain_grad &&
                         !(bn && db);
    const size_t bytes = consume ? k->conv2d_backward_consuming_workspace_bytes(d)
                                 : k->conv2d_workspace_bytes(d);
    snn_step_scratch mark = snn_step_scratch_mark(y->device);
    float *workspace = snn_step_alloc("snn_conv2d (backward)", bytes, y->device);
    if (!workspace || !run_backward(k, node, bn, dx, dw, db, workspace, consume)) {
        snn_backward_out_of_memory();
        return;
    }
    snn_grad_deferred_done(y); /* (where the kernels took it; else it was made first) */
    if (over) snn_grad_hand_over(y, x);
    snn_step_scratch_release(y->device, mark); /* workspace, unpacked x: only during the kernel */
}

const snn_kernels *snn_conv2d_prepare(const char *fn, snn_tensor *x, snn_tensor *w,
                                      snn_tensor *b, int stride, int pad, bool bits_ok,
                                      image_layout *l, snn_conv2d_dims *dims)
{
    const bool bits = bits_ok && x && !x->data && x->spike_bits;
    if ((!bits && snn_check_tensor(fn, "input", x)) || image_layout_of(fn, "input", x, l) ||
        snn_check_rank(fn, "weight", w, 4, "(C_out, C_in, KH, KW)") ||
        snn_check_like(fn, "input", x, "weight", w, false) ||
        snn_check_dim(fn, "weight", w, 1, l->C, "C_in (input channels)"))
        return NULL;
    int C_out = (int)w->shape.dim[0];
    if (b && (snn_check_rank(fn, "bias", b, 1, "(C_out)") ||
              snn_check_like(fn, "input", x, "bias", b, false) ||
              snn_check_dim(fn, "bias", b, 0, C_out, "C_out")))
        return NULL;
    if (stride < 1 || pad < 0)
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument '%s' (expected stride >= 1 and "
                              "pad >= 0, got stride %d, pad %d)", fn, stride < 1 ? "stride" : "pad",
                              stride, pad);
    snn_conv2d_dims d = {l->N, l->C, l->H, l->W, C_out, (int)w->shape.dim[2], (int)w->shape.dim[3],
                         stride, pad, 0, 0};
    d.H_out = (l->H + 2 * pad - d.KH) / stride + 1;
    d.W_out = (l->W + 2 * pad - d.KW) / stride + 1;
    if (l->H + 2 * pad < d.KH || l->W + 2 * pad < d.KW)
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument 'weight' (kernel %dx%d is larger "
                              "than the padded input %dx%d)", fn, d.KH, d.KW, l->H + 2 * pad,
                              l->W + 2 * pad);
    const snn_kernels *k = snn_kernels_for(x->device); /* a table: snn_tensor_new checks */
    SNN_REQUIRE_KERNEL(k, fn, conv2d_workspace_bytes);
    SNN_REQUIRE_KERNEL(k, fn, conv2d_forward);
    SNN_REQUIRE_KERNEL(k, fn, conv2d_backward);
    *dims = d;
    return k;
}

static snn_tensor *conv2d(const char *fn, snn_tensor *x, const snn_tensor *trace, snn_tensor *w,
                          snn_tensor *b, int stride, int pad, bool to_pool)
{
    image_layout l;
    snn_conv2d_dims d;
    /* x may be spikes kept as bits already (snn_conv2d_reads_bits says where that pays) */
    const snn_kernels *k = snn_conv2d_prepare(fn, x, w, b, stride, pad, !trace, &l, &d);
    if (!k) return NULL;
    if (trace && (snn_check_tensor(fn, "trace", trace) ||
                  snn_check_same_shape(fn, "input", x, "trace", trace) ||
                  snn_check_same_device(fn, "input", x, "trace", trace)))
        return NULL;
    snn_shape shape = image_layout_shape(&l, d.C_out, d.H_out, d.W_out);
    snn_tensor *y = to_pool ? snn_step_pooled_tensor(fn, shape, x->device)
                            : snn_step_tensor(fn, shape, x->device);
    if (!y) return NULL;
    snn_step_scratch mark = snn_step_scratch_mark(x->device);
    float *workspace = snn_step_alloc(fn, k->conv2d_workspace_bytes(&d), x->device);
    if (!workspace) return NULL;
    /* spikes kept as bits: read as bits where the device's kernels can, else unpacked for
     * the length of this op (as a backward op reads them) */
    const float *bias = b ? b->data : NULL;
    if (x->data) {
        k->conv2d_forward(y->data, x->data, w->data, bias, &d, workspace);
    } else if (!k->conv2d_forward_bits ||
               !k->conv2d_forward_bits(y->data, x->spike_bits, w->data, bias, &d, workspace)) {
        const float *xv = snn_saved_values(fn, x);
        if (!xv) return NULL;
        k->conv2d_forward(y->data, xv, w->data, bias, &d, workspace);
    }
    snn_step_scratch_release(x->device, mark); /* workspace, unpacked x: only during the kernel */
    snn_tensor *inputs[3] = {x, w, b};
    if (snn_should_record(3, inputs)) {
        snn_node *node = snn_tape_record(fn, conv2d_backward, y, 3, inputs, sizeof(conv_saved));
        if (!node) return NULL;
        node->takes_deferred_grad = k->conv2d_backward_bn_dout != NULL;
        *(conv_saved *)node->saved = (conv_saved){d, trace ? trace->data : NULL};
    }
    return y;
}

bool snn_conv2d_reads_bits(const snn_tensor *x, const snn_tensor *w, int stride, int pad)
{
    if (!x || !w || x->shape.ndim < 4 || w->shape.ndim != 4 || stride < 1 || pad < 0)
        return false;
    const snn_kernels *k = snn_kernels_for(x->device);
    if (!k || !k->conv2d_forward_bits || !k->conv2d_reads_bits) return false;
    image_layout l;
    if (image_layout_of("snn_conv2d_reads_bits", "input", x, &l)) return false;
    snn_conv2d_dims d = {l.N, l.C, l.H, l.W, (int)w->shape.dim[0], (int)w->shape.dim[2],
                         (int)w->shape.dim[3], stride, pad, 0, 0};
    d.H_out = (l.H + 2 * pad - d.KH) / stride + 1;
    d.W_out = (l.W + 2 * pad - d.KW) / stride + 1;
    return d.H_out > 0 && d.W_out > 0 && k->conv2d_reads_bits(&d);
}

snn_tensor *snn_conv2d(snn_tensor *x, snn_tensor *w, snn_tensor *b, int stride, int pad)
{
    return conv2d("snn_conv2d", x, NULL, w, b, stride, pad, false);
}

snn_tensor *snn_conv2d_to_pool(snn_tensor *x, snn_tensor *w, snn_tensor *b, int stride, int pad)
{
    return conv2d("snn_conv2d_to_pool", x, NULL, w, b, stride, pad, true);
}

snn_tensor *snn_conv2d_traced(snn_tensor *x, const snn_tensor *trace, snn_tensor *w,
                              snn_tensor *b, int stride, int pad, bool to_pool)
{
    const char *fn = "snn_conv2d_traced";
    if (!trace) return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument 'trace' (NULL)", fn);
    return conv2d(fn, x, trace, w, b, stride, pad, to_pool);
}
