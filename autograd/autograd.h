/*
 * autograd.h - the tape, backward(), no-grad mode, gradcheck, and the differentiable ops.
 *
 * A dynamic tape, as micrograd's but in C. When an op runs in grad mode and any input requires
 * grad, it appends one node {backward function, inputs, output, saved state} to the tape of the
 * open step. snn_backward(loss) walks the tape from newest to oldest and every node whose output
 * received a gradient ACCUMULATES (+=) into its inputs' gradients. The tape lives in the step
 * arena, so snn_step_end() discards it with the activations.
 *
 *     snn_step_begin();
 *     snn_tensor *logits = snn_linear(x, w, b);           // w, b: OWNED, requires_grad = true
 *     snn_tensor *loss = snn_cross_entropy(logits, labels);
 *     snn_backward(loss);                                 // w->grad, b->grad += dloss/dw, ...
 *     snn_step_end();
 *
 * Fused ops (conv, batch-norm, the multi-step neurons) are single nodes with hand-written
 * backward kernels; gradcheck compares every smooth op against central finite differences.
 *
 * Layouts: ops on images take (N, C, H, W) or (T, N, C, H, W); a 5-D input is folded to
 * (T*N, C, H, W) and the output keeps the input's rank. snn_linear takes (..., in).
 */
#ifndef SNN_AUTOGRAD_H
#define SNN_AUTOGRAD_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "tensor/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------------
 * The tape
 * ------------------------------------------------------------------------------------------- */

#define SNN_MAX_NODE_INPUTS 4

typedef struct snn_node snn_node;
/* Reads node->out->grad and accumulates into the inputs' gradients (snn_grad_for). */
typedef void (*snn_backward_fn)(snn_node *node);

struct snn_node {
    const char *op;                           /* "conv2d": for messages and snn_tape_print */
    snn_backward_fn backward;
    snn_tensor *out;
    snn_tensor *inputs[SNN_MAX_NODE_INPUTS];  /* NULL entries are allowed (an absent bias) */
    int n_inputs;
    void *saved;                              /* op-specific state, zeroed, in the step arena */
    snn_node *prev;                           /* the node recorded before this one */
};

/* True when grad mode is on (the default) and some input requires grad: the op must record. */
bool snn_should_record(int n_inputs, snn_tensor *const *inputs);

/* Appends a node for `out`, with `saved_bytes` of zeroed op state; marks out->requires_grad and
 * out->grad_fn. NULL (message set) only when the step arena is out of memory. */
snn_node *snn_tape_record(const char *op, snn_backward_fn backward, snn_tensor *out, int n_inputs,
                          snn_tensor *const *inputs, size_t saved_bytes);

/* For backward functions: the gradient buffer of `t` to accumulate into, created zero-filled on
 * first use (OWNED grad for an OWNED tensor, STEP grad otherwise); NULL when t is NULL or does
 * not require grad. Views share their base's gradient layout, so a view gets its own buffer. */
float *snn_grad_for(snn_tensor *t);
/* For backward functions that allocate scratch: report that it could not be had; snn_backward
 * then returns SNN_ERR_MEMORY naming the node. */
void snn_backward_out_of_memory(void);
/* Returns and clears that report (backward.c, once per node). */
int snn_backward_take_failure(void);

/* Runs backward from a 1-element `loss` (seeded with 1). SNN_ERR_ARGUMENT if loss is not a
 * scalar or does not require grad. Call once per step. */
snn_status snn_backward(snn_tensor *loss);
/* Same from any output with an explicit seed gradient of the same shape. */
snn_status snn_backward_from(snn_tensor *out, const snn_tensor *seed);

/* No-grad mode: ops record nothing and save nothing (inference must not pay for training).
 * Nests. */
void snn_no_grad_begin(void);
void snn_no_grad_end(void);
bool snn_grad_enabled(void);

/* Prints the tape, newest first, one node a line (op, output shape, inputs). */
void snn_tape_print(FILE *out);

/* ---------------------------------------------------------------------------------------------
 * gradcheck: analytic gradients (backward) against central finite differences.
 *
 * f maps the inputs to an output; the check differentiates L = sum(out * R) for a fixed random
 * R, so every output element counts. Each input element i is nudged by +-eps and
 * (L(x + eps) - L(x - eps)) / 2 eps, accumulated in double, is compared with dL/dx_i:
 *     |numeric - analytic| <= atol + rtol * |numeric|.
 * Kernels compute in float32, so eps around 1e-2..1e-3 and tolerances around 1e-2 are typical.
 * Inputs must be CPU step tensors with requires_grad set on those to check.
 * ------------------------------------------------------------------------------------------- */

typedef snn_tensor *(*snn_gradcheck_fn)(snn_tensor *const *inputs, void *ctx);

typedef struct snn_gradcheck_options {
    float eps, atol, rtol;
    uint64_t seed;      /* for R */
    bool verbose;       /* print each mismatch */
} snn_gradcheck_options;

/* Returns SNN_OK when every checked element agrees; otherwise SNN_ERR_NUMERIC with the worst
 * element named in snn_last_error(). Opens and closes its own steps. */
snn_status snn_gradcheck(const char *name, snn_gradcheck_fn f, int n_inputs, snn_tensor **inputs,
                         void *ctx, snn_gradcheck_options options);

/* ---------------------------------------------------------------------------------------------
 * Differentiable ops. Every one returns a STEP tensor, or NULL with snn_last_error() set.
 * ------------------------------------------------------------------------------------------- */

/* elementwise, with numpy broadcasting for the binary ones (autograd/fn_elementwise.c) */
snn_tensor *snn_add(snn_tensor *a, snn_tensor *b);
snn_tensor *snn_sub(snn_tensor *a, snn_tensor *b);
snn_tensor *snn_mul(snn_tensor *a, snn_tensor *b);
snn_tensor *snn_div(snn_tensor *a, snn_tensor *b);
snn_tensor *snn_scale(snn_tensor *x, float s);
snn_tensor *snn_add_scalar(snn_tensor *x, float s);
snn_tensor *snn_neg(snn_tensor *x);
snn_tensor *snn_exp(snn_tensor *x);
snn_tensor *snn_log(snn_tensor *x);
snn_tensor *snn_relu(snn_tensor *x);
snn_tensor *snn_sigmoid(snn_tensor *x);
snn_tensor *snn_square(snn_tensor *x);

/* reductions (autograd/fn_reduce.c); dim may be negative (counted from the end) */
snn_tensor *snn_sum(snn_tensor *x, int dim, bool keepdim);
snn_tensor *snn_mean(snn_tensor *x, int dim, bool keepdim);
snn_tensor *snn_sum_all(snn_tensor *x);   /* shape [1] */
snn_tensor *snn_mean_all(snn_tensor *x);  /* shape [1] */
/* (...) -> (T, ...): the input repeated T times along a new leading time axis */
snn_tensor *snn_repeat_time(snn_tensor *x, int T);
/* (...) -> (T, ...): the input at t = 0 and zeros after (autograd/fn_time.c) */
snn_tensor *snn_first_step(snn_tensor *x, int T);
/* x (T, N, C, ...) with bias (C) added at t = 0 only (autograd/fn_time.c) */
snn_tensor *snn_add_first_step(snn_tensor *x, snn_tensor *bias);

/* shape (autograd/fn_shape.c): views that share data, no copy */
snn_tensor *snn_reshape(snn_tensor *x, snn_shape shape);
/* merges dims start..end (inclusive; negative counts from the end) into one */
snn_tensor *snn_flatten(snn_tensor *x, int start, int end);
/* same data, no gradient flows back through it */
snn_tensor *snn_detach(snn_tensor *x);

/* matrices (autograd/fn_linear.c) */
snn_tensor *snn_matmul(snn_tensor *a, snn_tensor *b);                 /* (M, K) x (K, N) */
/* y = x w^T + b: x (..., in), w (out, in), b (out) or NULL */
snn_tensor *snn_linear(snn_tensor *x, snn_tensor *w, snn_tensor *b);

/* convolution and pooling (autograd/fn_conv2d.c, fn_pool2d.c) */
snn_tensor *snn_conv2d(snn_tensor *x, snn_tensor *w, snn_tensor *b, int stride, int pad);
snn_tensor *snn_max_pool2d(snn_tensor *x, int kernel, int stride, int pad);
snn_tensor *snn_avg_pool2d(snn_tensor *x, int kernel, int stride, int pad);

/* batch-norm over channels (autograd/fn_batchnorm.c). training: batch statistics, and the
 * running ones (OWNED, updated in place) move by `momentum`; eval: running statistics. */
snn_tensor *snn_batchnorm2d(snn_tensor *x, snn_tensor *gamma, snn_tensor *beta,
                            snn_tensor *running_mean, snn_tensor *running_var, bool training,
                            float momentum, float eps);

/* dropout (autograd/fn_dropout.c): zeroes with probability p and scales by 1/(1-p) in
 * training; the identity in eval. The mask is a hash of (seed, index): same on every device. */
snn_tensor *snn_dropout(snn_tensor *x, float p, bool training, uint64_t seed);

/* losses (autograd/fn_loss.c). labels: (N) class indices stored as floats. Both return [1]. */
snn_tensor *snn_log_softmax(snn_tensor *x);                      /* rows of (N, C) */
snn_tensor *snn_nll_loss(snn_tensor *logp, snn_tensor *labels);  /* mean over N */
snn_tensor *snn_cross_entropy(snn_tensor *logits, snn_tensor *labels);
snn_tensor *snn_mse_loss(snn_tensor *a, snn_tensor *b);          /* mean of (a - b)^2 */

/* not differentiable */
snn_tensor *snn_one_hot(snn_tensor *labels, int classes);        /* (N) -> (N, classes) */
snn_tensor *snn_argmax(snn_tensor *x);                           /* (N, C) -> (N) */

#ifdef __cplusplus
}
#endif

#endif /* SNN_AUTOGRAD_H */
