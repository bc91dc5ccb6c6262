/**
 * @file
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
 *
 * Every differentiable op (the last part of this header) returns a STEP tensor: it lives until
 * the enclosing snn_step_end() and is never freed by hand. On error it returns NULL and leaves a
 * message: SNN_ERR_ARGUMENT for a bad shape, value or device mix (inputs of one op must share a
 * device), SNN_ERR_STATE when no step is open, SNN_ERR_MEMORY when the step arena cannot grow,
 * SNN_ERR_UNSUPPORTED when the device's backend lacks the kernel. A NULL input (the result of an
 * earlier failed op) gives NULL and keeps the first message, so a chain is checked once.
 */
#ifndef SNN_AUTOGRAD_H
#define SNN_AUTOGRAD_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "../tensor/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------------
 * The tape (what an op written outside autograd/ uses: neurons/, sparse/)
 * ------------------------------------------------------------------------------------------- */

/** The most inputs a tape node has: 6 for the fused batch-norm -> neuron op whose residual is a
 * batch-norm's output (x, gamma, beta, and that batch-norm's input, gamma and beta). */
#define SNN_MAX_NODE_INPUTS 6

/** One recorded op on the tape. */
typedef struct snn_node snn_node;
/** Reads node->out->grad and accumulates into the inputs' gradients (snn_grad_for). */
typedef void (*snn_backward_fn)(snn_node *node);

/** A tape node: what backward needs to send an op's output gradient to its inputs. */
struct snn_node {
    const char *op;                           /**< "conv2d": for messages and snn_tape_print */
    snn_backward_fn backward;                 /**< sends out->grad to the inputs' gradients */
    snn_tensor *out;                          /**< the op's output */
    snn_tensor *inputs[SNN_MAX_NODE_INPUTS];  /**< NULL entries are allowed (an absent bias) */
    int n_inputs;                             /**< entries used in inputs[] */
    void *saved;                              /**< op-specific state, zeroed, in the step arena */
    snn_node *prev;                           /**< the node recorded before this one */
    bool takes_deferred_grad;                 /**< its backward takes out's gradient with a
                                                   step left to do (snn_grad_deferred_bn) */
};

/** True when grad mode is on (the default) and one of the `n_inputs` tensors in `inputs`
 * requires grad: the op must record a node. NULL entries count as not requiring grad. */
bool snn_should_record(int n_inputs, snn_tensor *const *inputs);

/** Appends a node for op `op` (a static string) producing `out` from `n_inputs` `inputs`, with
 * `saved_bytes` of zeroed op state (node->saved, in the step arena) for `backward`; marks
 * out->requires_grad and out->grad_fn. Returns the node (owned by the step), or NULL (message
 * set) when the step arena is out of memory or no step is open. */
snn_node *snn_tape_record(const char *op, snn_backward_fn backward, snn_tensor *out, int n_inputs,
                          snn_tensor *const *inputs, size_t saved_bytes);

/** For backward functions: the gradient buffer of `t` to accumulate into, created zero-filled on
 * first use (OWNED grad for an OWNED tensor, STEP grad otherwise); NULL when t is NULL or does
 * not require grad. Views share their base's gradient layout, so a view gets its own buffer. */
float *snn_grad_for(snn_tensor *t);
/** For backward functions that write the whole of an input's gradient (the fused batch-norm ->
 * neuron op writes dL/dX into it and replaces that by dL/dx, neurons/bn_neuron.c): t's first
 * gradient buffer, from the step pool and not zero-filled, when t is a STEP tensor that needs a
 * gradient and has none yet; the caller must write every element before anything reads it.
 * NULL otherwise (t NULL, needing none, OWNED, or with a gradient already: add into
 * snn_grad_for's buffer instead), and when memory runs out (reported to snn_backward). */
float *snn_grad_unfilled(snn_tensor *t);
/** For backward functions that turn their output's gradient into an input's in place (the
 * fused batch-norm -> neuron ops, neurons/bn_neuron.c; a conv that keeps its shape,
 * fn_conv2d.c): `from`'s gradient becomes `to`'s, which the caller then overwrites, where `to`
 * is a STEP tensor of the same shape and device that needs a gradient and has none yet, and
 * `from`'s is a pooled one nothing keeps (not retain_grad). Returns it; NULL otherwise
 * (nothing changes: use snn_grad_for). */
float *snn_grad_hand_over(snn_tensor *from, snn_tensor *to);
/** Whether snn_grad_hand_over(from, to) would hand the gradient over, changing nothing: for a
 * caller that must know before it writes into `from`'s gradient. */
bool snn_grad_can_hand_over(const snn_tensor *from, const snn_tensor *to);
/* A gradient left with its last step undone, for its reader to finish as it loads
 * (grad_deferred.c; today one kind: a batch-norm's input gradient, kernels.h snn_bn_dout) */
struct snn_bn_dout;
/** For the fused batch-norm -> neuron op: t's gradient holds the batch-norm's dL/dout, from
 * which `bn` (its pointers valid until the step ends) makes dL/dt; N, C, HW the batch-norm's
 * dims. The node that made t takes it if it takes_deferred_grad, else it is made before
 * anything else reads it. False where no more can be recorded: make dL/dt now. */
bool snn_grad_defer_bn(const snn_tensor *t, const struct snn_bn_dout *bn, int N, int C, int HW);
/** Whether t has a record of dims (N, C, HW), copied into `out` (may be NULL): for the
 * backward of the node that made t, which then makes dL/dt as it reads and calls
 * snn_grad_deferred_done(t). */
bool snn_grad_deferred_bn(const snn_tensor *t, int N, int C, int HW, struct snn_bn_dout *out);
/** Forgets t's record (its reader made the gradient). */
void snn_grad_deferred_done(const snn_tensor *t);
/** Makes t's gradient what its record says, and forgets the record; nothing without one. */
void snn_grad_settle(const snn_tensor *t);
/** The records made so far: a backward's walk starts by taking it ... */
int snn_grad_deferred_mark(void);
/** ... and ends with snn_grad_settle on each record made since `mark` ... */
void snn_grad_settle_since(int mark);
/** ... or, failing, forgets them without making anything. */
void snn_grad_deferred_drop_since(int mark);
/** How many records their reader took (snn_grad_deferred_done) since the process started: for
 * tests that must know the deferred path ran */
int64_t snn_grad_deferred_taken(void);
/** For backward functions that allocate scratch: report that it could not be had; snn_backward
 * then returns SNN_ERR_MEMORY naming the node. */
void snn_backward_out_of_memory(void);
/** For backward functions that cannot go on for another reason (a collective between ranks
 * failed): snn_backward returns `status` naming the node, with snn_last_error()'s message. */
void snn_backward_fail(snn_status status);
/** Returns and clears the report of snn_backward_out_of_memory or snn_backward_fail: 0 when
 * none was made, else the status to return (backward.c asks once per node). */
int snn_backward_take_failure(void);

/** Runs backward from a 1-element `loss` (seeded with 1): every node on the tape of the open
 * steps whose output got a gradient accumulates (+=) into its inputs' gradients, so the .grad of
 * OWNED parameters must be zeroed by the caller (snn_module_zero_grad). Call once per step.
 * SNN_ERR_ARGUMENT if loss is NULL, not one element or does not require grad; SNN_ERR_MEMORY if
 * a gradient buffer cannot be had (the gradients are then incomplete). */
snn_status snn_backward(snn_tensor *loss);
/** As snn_backward, from any output `out` with an explicit `seed` gradient of out's shape and
 * device (dL/dout). SNN_ERR_ARGUMENT for a NULL, mismatched or non-differentiable argument. */
snn_status snn_backward_from(snn_tensor *out, const snn_tensor *seed);
/** As snn_backward_from, from `count` outputs at once, outs[i] seeded with seeds[i] (as
 * torch.autograd.backward(tensors, grad_tensors)): one walk of the tape for the vector-Jacobian
 * product of all of them, as snn_backward of sum_i <outs[i], seeds[i]> gives without the ops
 * that make that sum. Every pair is checked before any gradient is seeded. */
snn_status snn_backward_from_many(int count, snn_tensor *const *outs,
                                  const snn_tensor *const *seeds);

/** The gradient-ready hook's type: called with the `ctx` given to snn_backward_set_hook and a
 * parameter whose gradient is final for this backward. */
typedef void (*snn_grad_ready_fn)(void *ctx, snn_tensor *param);
/** Gradient-ready hook, for data-parallel training (distributed/): while set, snn_backward calls
 * fn(ctx, p) once for each OWNED tensor p that requires grad and is an input of some node on
 * the tape, right after the backward of the last node (in backward order) that takes p. From
 * then on nothing adds to p->grad during this backward, so p's all-reduce can start while the
 * rest of the backward runs. On CUDA the gradient's kernels are queued, not finished: the hook
 * orders its own stream after them with an event. Tensors on no node get no call. fn = NULL
 * turns it off. */
void snn_backward_set_hook(snn_grad_ready_fn fn, void *ctx);

/** Enters no-grad mode: ops record nothing and save nothing (inference must not pay for
 * training). Nests: each call needs its snn_no_grad_end(). */
void snn_no_grad_begin(void);
/** Leaves one level of no-grad mode. */
void snn_no_grad_end(void);
/** True when ops record (grad mode, the default), false inside no-grad mode. */
bool snn_grad_enabled(void);

/** Prints the tape of the open steps to `out`, newest first, one node a line (op, output shape,
 * inputs). */
void snn_tape_print(FILE *out);

/* ---------------------------------------------------------------------------------------------
 * Spikes kept as bits (autograd/spike_pack.c)
 * ------------------------------------------------------------------------------------------- */

/** Keeps the spikes `t` for backward as bits: the caller's promise that no forward op reads t
 * again (a model whose option pack_spikes is on calls it once the layers that take a neuron's
 * output have run: nn/plan.h). An IF, LIF or PLIF op that records a tape takes its spikes from
 * the step pool and marks them (t->spikes; the fused batch-norm -> neuron op writes their bits
 * too, and takes them from the pool without a tape as well); t must be such spikes. 1/32 of the memory, the same bits in every output and gradient.
 * Its values go into numel / 8 bytes of step memory (t->spike_bits), its fp32 data go back to
 * the pool and t->data becomes NULL; backward ops read the values through snn_saved_values. A
 * forward op given t afterwards refuses it, naming the argument. Packing twice is a no-op.
 * SNN_ERR_ARGUMENT for a tensor that is not such spikes; SNN_ERR_MEMORY. */
snn_status snn_spikes_pack(snn_tensor *t);

/* ---------------------------------------------------------------------------------------------
 * Values kept as bfloat16 (autograd/bf16_keep.c)
 * ------------------------------------------------------------------------------------------- */

/** Rounds the values of `t` to bfloat16 in place (nearest, ties to even) and keeps their 16
 * bits beside them in numel * 2 bytes of step memory (t->bf16), so that the forward ops that
 * read t next see the values backward will read. t: a conv's output taken from the step pool
 * (snn_conv2d_to_pool), not a view, not spikes. Rounding twice is a no-op.
 * SNN_ERR_ARGUMENT for another tensor, SNN_ERR_MEMORY. */
snn_status snn_values_round_bf16(snn_tensor *t);
/** Keeps t for backward as the bf16 values snn_values_round_bf16 made: the caller's promise
 * that no forward op reads t again (a model whose option keep_bf16 is on calls it once the
 * batch-norm that reads a conv's output has run: nn/plan.h). t's fp32 data go back to the pool
 * and t->data becomes NULL; backward ops read the values through snn_saved_values. Half the
 * memory, the same numbers. SNN_ERR_ARGUMENT for a tensor not rounded first. */
snn_status snn_values_keep_bf16(snn_tensor *t);

/** For backward functions: t's values as fp32 on its device. t->data, or for spikes packed by
 * snn_spikes_pack the bits (for values kept by snn_values_keep_bf16 the bf16 numbers) unpacked
 * into step memory, taken after the caller's scratch mark (snn_step_scratch_mark) and given
 * back with it. NULL when t is NULL; NULL with an error
 * (SNN_ERR_MEMORY, the caller reports snn_backward_out_of_memory) when memory runs out. */
const float *snn_saved_values(const char *fn, const snn_tensor *t);

/* ---------------------------------------------------------------------------------------------
 * gradcheck
 * ------------------------------------------------------------------------------------------- */

/**
 * The function gradcheck differentiates: maps the `inputs` (and the caller's `ctx`) to an
 * output STEP tensor with the differentiable ops, or NULL on error.
 *
 * gradcheck compares analytic gradients (backward) with central finite differences. The check
 * differentiates L = sum(out * R) for a fixed random R, so every output element counts. Each
 * input element i is nudged by +-eps and (L(x + eps) - L(x - eps)) / 2 eps, accumulated in
 * double, is compared with dL/dx_i:
 *
 *     |numeric - analytic| <= atol + rtol * |numeric|
 *
 * Kernels compute in float32, so eps around 1e-2..1e-3 and tolerances around 1e-2 are typical.
 */
typedef snn_tensor *(*snn_gradcheck_fn)(snn_tensor *const *inputs, void *ctx);

/** How snn_gradcheck nudges and compares. */
typedef struct snn_gradcheck_options {
    float eps;          /**< the nudge (+-eps) of each input element */
    float atol;         /**< absolute tolerance */
    float rtol;         /**< relative tolerance, times |numeric| */
    uint64_t seed;      /**< for R */
    bool verbose;       /**< print each mismatch */
} snn_gradcheck_options;

/** Checks the gradients of `f` (called with `ctx`) with respect to those of the `n_inputs`
 * `inputs` that have requires_grad set; inputs must be CPU step tensors (the caller's; each
 * nudged value is put back). Returns SNN_OK when every checked element agrees; otherwise
 * SNN_ERR_NUMERIC with the worst element and `name` in snn_last_error() (or the error of f).
 * Opens and closes its own steps. */
snn_status snn_gradcheck(const char *name, snn_gradcheck_fn f, int n_inputs, snn_tensor **inputs,
                         void *ctx, snn_gradcheck_options options);

/* ---------------------------------------------------------------------------------------------
 * Differentiable ops. Every one returns a STEP tensor, or NULL with snn_last_error() set.
 * ------------------------------------------------------------------------------------------- */

/* elementwise, with numpy broadcasting for the binary ones (autograd/fn_elementwise.c) */

/** a + b, elementwise with numpy broadcasting (dims right-aligned; a size 1 stretches). */
snn_tensor *snn_add(snn_tensor *a, snn_tensor *b);
/** a + b written over a's memory, for a caller that never reads a's values again (a residual
 * sum whose first operand is a batch-norm output): one activation less. a must be a STEP tensor
 * of the sum's shape (b may broadcast). a's and the sum's gradients stay separate and correct:
 * an add's backward reads no values. */
snn_tensor *snn_add_into(snn_tensor *a, snn_tensor *b);
/** a - b, broadcast as snn_add. */
snn_tensor *snn_sub(snn_tensor *a, snn_tensor *b);
/** a * b, broadcast as snn_add. */
snn_tensor *snn_mul(snn_tensor *a, snn_tensor *b);
/** a / b, broadcast as snn_add. */
snn_tensor *snn_div(snn_tensor *a, snn_tensor *b);
/** s * x for a constant s. */
snn_tensor *snn_scale(snn_tensor *x, float s);
/** x + s for a constant s. */
snn_tensor *snn_add_scalar(snn_tensor *x, float s);
/** -x. */
snn_tensor *snn_neg(snn_tensor *x);
/** exp(x). */
snn_tensor *snn_exp(snn_tensor *x);
/** log(x) (x > 0; no check: log of 0 is -inf). */
snn_tensor *snn_log(snn_tensor *x);
/** max(x, 0); the gradient at 0 is 0. */
snn_tensor *snn_relu(snn_tensor *x);
/** 1 / (1 + exp(-x)). */
snn_tensor *snn_sigmoid(snn_tensor *x);
/** x * x. */
snn_tensor *snn_square(snn_tensor *x);

/* reductions (autograd/fn_reduce.c); dim may be negative (counted from the end) */

/** The sum of x along `dim` (negative counts from the end), which is dropped, or kept with size
 * 1 when keepdim. */
snn_tensor *snn_sum(snn_tensor *x, int dim, bool keepdim);
/** The mean of x along `dim`, as snn_sum. */
snn_tensor *snn_mean(snn_tensor *x, int dim, bool keepdim);
/** The sum of every element of x, shape [1]. */
snn_tensor *snn_sum_all(snn_tensor *x);
/** The mean of every element of x, shape [1]. */
snn_tensor *snn_mean_all(snn_tensor *x);
/** (...) -> (T, ...): x repeated T (>= 1) times along a new leading time axis (x has at most
 * 5 dims). */
snn_tensor *snn_repeat_time(snn_tensor *x, int T);
/** (...) -> (T, ...): x at t = 0 and zeros after (T >= 1; autograd/fn_time.c), the input of a
 * network converted from a QANN. */
snn_tensor *snn_first_step(snn_tensor *x, int T);
/** x (T, N, C, ...) with bias (C) added at t = 0 only (autograd/fn_time.c): a folded
 * batch-norm's shift in a converted network. */
snn_tensor *snn_add_first_step(snn_tensor *x, snn_tensor *bias);

/* shape (autograd/fn_shape.c): views that share data, no copy */

/** A view of x with `shape` (1 to 6 dims, same numel), sharing x's data. */
snn_tensor *snn_reshape(snn_tensor *x, snn_shape shape);
/** A view of x with dims start..end (inclusive; negative counts from the end) merged into one. */
snn_tensor *snn_flatten(snn_tensor *x, int start, int end);
/** A view of x (same data) through which no gradient flows back. */
snn_tensor *snn_detach(snn_tensor *x);
/** x (A, B, ...) -> (B, A, ...): the first two axes swapped, a copy (autograd/fn_transpose.c),
 * as PyTorch's x.transpose(0, 1).contiguous(); x has at least 2 dims. Between reshapes it
 * swaps any two adjacent groups of axes: (N, T, F) -> (T, N, F) makes data time-major. */
snn_tensor *snn_transpose01(snn_tensor *x);

/* matrices (autograd/fn_linear.c) */

/** The matrix product of a (M, K) and b (K, N): (M, N). */
snn_tensor *snn_matmul(snn_tensor *a, snn_tensor *b);
/** y = x w^T + b: x (..., in), w (out, in), b (out) or NULL; y (..., out). */
snn_tensor *snn_linear(snn_tensor *x, snn_tensor *w, snn_tensor *b);
/** snn_linear whose backward takes the weight's gradient against `trace` instead of x:
 * dW += dY^T trace, dX += dY W as before (OTTT's presynaptic trace, Xiao et al. 2022:
 * app/train_online.c). trace: x's shape and device, read when backward runs (the caller keeps
 * it unchanged until then), no gradient. */
snn_tensor *snn_linear_traced(snn_tensor *x, const snn_tensor *trace, snn_tensor *w,
                              snn_tensor *b);

/* learnable synaptic delays, DCLS-Delays (autograd/fn_delay.c; the layer: nn/layer_delay.c) */

/** The delay kernel K (D, O, I) of weights w (O, I) and real delays d (O, I): each synapse's D
 * taps are w times a Gaussian of width sigma centred at d, normalised to sum 1,
 *     K[k, o, i] = w[o, i] phi_k / sum_k' phi_k',  phi_k = exp(-(k - d[o, i])^2 / (2 sigma^2)).
 * Differentiable in w and d (dK[k]/dd = K[k] (k - mu) / sigma^2, mu = the mean tap). D >= 1,
 * sigma > 0; a sigma so small that one tap takes all the mass stays finite. */
snn_tensor *snn_delay_kernel(snn_tensor *w, snn_tensor *d, float sigma, int D);
/** Causal temporal convolution: x (T, N, I), K (D, O, I) -> y (T, N, O),
 *     y[t] = sum_{k=0}^{D-1} x[t - k] K[k]^T,  x[t < 0] = 0.
 * Differentiable in x and K. One GEMM per tap on the fast tables: D times a linear layer. */
snn_tensor *snn_temporal_conv(snn_tensor *x, snn_tensor *K);

/* convolution and pooling (autograd/fn_conv2d.c, fn_pool2d.c) */

/** 2-D convolution (cross-correlation, as PyTorch's conv2d): x (N, C_in, H, W) or
 * (T, N, C_in, H, W), w (C_out, C_in, KH, KW), b (C_out) or NULL, stride >= 1, zero padding
 * pad >= 0 on each side; y (.., C_out, H_out, W_out) with H_out = (H + 2 pad - KH) / stride + 1.
 * One fused node with a hand-written backward. */
snn_tensor *snn_conv2d(snn_tensor *x, snn_tensor *w, snn_tensor *b, int stride, int pad);
/** snn_conv2d whose output takes its memory from the step pool, so that it can go back before
 * the step ends once the output is kept as bf16 (snn_values_keep_bf16): the same values. */
snn_tensor *snn_conv2d_to_pool(snn_tensor *x, snn_tensor *w, snn_tensor *b, int stride, int pad);
/** Whether snn_conv2d (and _to_pool) would read x as bits if x were spikes kept as bits
 * (snn_spikes_pack), forward and backward, on x's device with w, stride and pad: so that a
 * model may pack spikes before the conv that reads them last. Either way such an x is
 * accepted (unpacked for the op where not). False for arguments snn_conv2d would refuse. */
bool snn_conv2d_reads_bits(const snn_tensor *x, const snn_tensor *w, int stride, int pad);
/** snn_conv2d (snn_conv2d_to_pool with to_pool) whose backward takes the weight's gradient
 * against `trace` instead of x: dW = sum dY (x) trace, dX as before (OTTT's presynaptic trace:
 * app/train_online.c). trace: x's shape and device, read when backward runs (the caller keeps
 * it unchanged until then), no gradient. */
snn_tensor *snn_conv2d_traced(snn_tensor *x, const snn_tensor *trace, snn_tensor *w,
                              snn_tensor *b, int stride, int pad, bool to_pool);
/** snn_batchnorm2d(snn_conv2d(x, w, b, stride, pad), gamma, beta, running_mean, running_var,
 * false, 0, eps) - a conv followed by an eval-mode batch-norm - in one kernel where the device
 * has one (CUDA's channels-last conv applies the batch-norm in its epilogue), with the same
 * bits as the two calls. When a gradient would be recorded it is exactly those two calls. */
snn_tensor *snn_conv2d_batchnorm_eval(snn_tensor *x, snn_tensor *w, snn_tensor *b,
                                      snn_tensor *gamma, snn_tensor *beta,
                                      snn_tensor *running_mean, snn_tensor *running_var,
                                      float eps, int stride, int pad);
/** Max over kernel x kernel windows of x (N, C, H, W) or (T, N, C, H, W), moved by `stride`,
 * with `pad` (never the maximum) on each side; gradient to the (first) maximum. */
snn_tensor *snn_max_pool2d(snn_tensor *x, int kernel, int stride, int pad);
/** Mean over kernel x kernel windows, as snn_max_pool2d; padding counts as zeros in the mean
 * (PyTorch's count_include_pad). */
snn_tensor *snn_avg_pool2d(snn_tensor *x, int kernel, int stride, int pad);

/** Batch-norm over the channels of x (N, C, H, W) or (T, N, C, H, W) (autograd/fn_batchnorm.c):
 * y = gamma (x - mean) / sqrt(var + eps) + beta, gamma, beta (C) or NULL (no affine).
 * training: batch statistics (biased variance), and running_mean, running_var (C; OWNED,
 * updated in place; may be NULL) move by `momentum` toward them (the running variance gets
 * the unbiased one, as PyTorch; needs N*H*W >= 2); eval: the running statistics. eps > 0,
 * momentum in [0, 1]. */
snn_tensor *snn_batchnorm2d(snn_tensor *x, snn_tensor *gamma, snn_tensor *beta,
                            snn_tensor *running_mean, snn_tensor *running_var, bool training,
                            float momentum, float eps);

/** Batch-norm across data-parallel ranks (distributed/, snn-train --sync-bn): while a sync is set,
 * training-mode snn_batchnorm2d takes its statistics over every rank's batch together (and its
 * backward the matching sums), as one process with the union of the batches would. The
 * callbacks work on memory of the tensors' device, in the order of the device's queued work
 * (after what was queued before the call, before what is queued after it), and every rank
 * makes the same calls in the same order; on failure they set snn_last_error() and return it. */
typedef struct snn_batchnorm_sync {
    void *ctx;   /**< passed to both callbacks */
    int ranks;   /**< the number of ranks */
    /** recv (ranks * n doubles) <- every rank's send (n doubles), in rank order */
    snn_status (*allgather)(void *ctx, double *recv, const double *send, int64_t n);
    /** buf (n doubles) <- its sum over the ranks, in place */
    snn_status (*allreduce_sum)(void *ctx, double *buf, int64_t n);
} snn_batchnorm_sync;
/** Copies *sync (NULL: back to per-process statistics, the default). */
void snn_batchnorm_set_sync(const snn_batchnorm_sync *sync);
/** True while snn_batchnorm_set_sync has a sync set (ops that fuse a batch-norm refuse then). */
bool snn_batchnorm_sync_enabled(void);

/** Dropout (autograd/fn_dropout.c): zeroes each element of x with probability p (0 <= p < 1)
 * and scales the rest by 1/(1-p) in training; the identity in eval. The mask is a hash of
 * (seed, index): the same on every device. */
snn_tensor *snn_dropout(snn_tensor *x, float p, bool training, uint64_t seed);
/** Dropout whose mask is shared over the first `shared_dims` dims of x (0 .. ndim - 1;
 * autograd/fn_dropout.c): one mask of x's remaining dims is drawn (as snn_dropout draws it for
 * a tensor of that shape) and multiplied into every slice along the shared dims. For (T, N, ...)
 * spiking data, shared_dims = 1 gives each sample one mask at every time step, so a dropped unit
 * is silent for the whole sequence (SpikingJelly's multi-step Dropout). shared_dims = 0 is
 * snn_dropout bit for bit. The identity in eval or when p = 0. */
snn_tensor *snn_dropout_shared(snn_tensor *x, float p, bool training, uint64_t seed,
                               int shared_dims);

/* losses (autograd/fn_loss.c). labels: (N) class indices stored as floats. Both return [1]. */

/** Log-softmax of each row of x (N, C). */
snn_tensor *snn_log_softmax(snn_tensor *x);
/** -mean over N of logp[n, labels[n]]: logp (N, C) log-probabilities, labels (N) class indices
 * in 0..C-1 stored as floats (checked on the CPU). Shape [1]. */
snn_tensor *snn_nll_loss(snn_tensor *logp, snn_tensor *labels);
/** snn_nll_loss(snn_log_softmax(logits), labels) in one: logits (N, C), labels (N). Shape [1]. */
snn_tensor *snn_cross_entropy(snn_tensor *logits, snn_tensor *labels);
/** Cross-entropy with label smoothing, as PyTorch's F.cross_entropy(logits, labels,
 * label_smoothing = smoothing): the target is (1 - smoothing) one-hot + smoothing / K, so with
 * logp = log_softmax(logits) (N, K),
 *     L = (1/N) sum_n [ (1 - smoothing) (-logp[n, y_n]) + (smoothing / K) sum_k (-logp[n, k]) ].
 * Composed of differentiable ops (log-softmax, NLL, mean, scale, sub). smoothing in [0, 1);
 * 0 gives snn_cross_entropy's result bit for bit. Shape [1]; NULL with SNN_ERR_ARGUMENT for a
 * smoothing outside [0, 1) or NaN, and as snn_cross_entropy otherwise. */
snn_tensor *snn_cross_entropy_smooth(snn_tensor *logits, snn_tensor *labels, float smoothing);
/** The mean of (a - b)^2 over every element; a and b of one shape. Shape [1]. */
snn_tensor *snn_mse_loss(snn_tensor *a, snn_tensor *b);

/* not differentiable */

/** (N) class indices (floats in 0..classes-1) -> (N, classes) rows of 0 and 1. Not
 * differentiable. */
snn_tensor *snn_one_hot(snn_tensor *labels, int classes);
/** The index of each row's largest element, (N, C) -> (N) (floats; the first on ties). Not
 * differentiable. */
snn_tensor *snn_argmax(snn_tensor *x);

#ifdef __cplusplus
}
#endif

#endif /* SNN_AUTOGRAD_H */
