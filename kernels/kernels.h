/*
 * kernels.h - the backend interface: one table of kernels per device (internal header).
 *
 * Every op in snn.c is a pair of layers:
 *   autograd/fn_<op>.c  checks arguments, allocates outputs in the step arena, calls a kernel
 *                       from this table, and records a tape node whose backward calls the
 *                       matching backward kernel;
 *   kernels/ref/<op>.c  the reference kernels: the op's equation as plain loops;
 *   kernels/cpu/<op>.c  the fast CPU kernels (blocked, OpenMP), held to the reference by the
 *                       parity harness (tests/backend_ops.h);
 *   kernels/cuda/       the CUDA kernels with the same signatures, held to it likewise.
 *
 * Kernel conventions (docs/architecture.md, "Kernels and devices"):
 *   - raw pointers to device memory of the table's device, dims as plain integers;
 *   - argument order: outputs, saved-for-backward, inputs, parameters, dims;
 *   - forward kernels overwrite their outputs; backward kernels ACCUMULATE (+=) into their
 *     gradient outputs, and a NULL gradient output means "not needed, skip it" (the one
 *     exception: a conv's dx written over its dout, where conv2d_dx_over_dout says so);
 *   - scalars that come from the device (a loss gradient) are passed as device pointers, so
 *     that no kernel forces a host synchronisation;
 *   - kernels never allocate: scratch memory comes in as a `workspace` argument.
 *
 * A NULL entry means the backend lacks that kernel; snn_kernels_for() callers turn that into
 * SNN_ERR_UNSUPPORTED naming the op and the device.
 */
#ifndef SNN_KERNELS_H
#define SNN_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../tensor/hash.h" /* snn_hash64: the random masks that agree across devices */
#include "../tensor/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- elementwise ------------------------------------------------------------------------ */

typedef enum snn_unary_op {
    SNN_UNARY_NEG,        /* y = -x */
    SNN_UNARY_EXP,        /* y = exp(x) */
    SNN_UNARY_LOG,        /* y = log(x) */
    SNN_UNARY_RELU,       /* y = max(x, 0) */
    SNN_UNARY_SIGMOID,    /* y = 1 / (1 + exp(-x)) */
    SNN_UNARY_SCALE,      /* y = param * x */
    SNN_UNARY_ADD_SCALAR, /* y = x + param */
    SNN_UNARY_SQUARE,     /* y = x * x */
    SNN_UNARY_HEAVISIDE,  /* y = x >= 0 ? 1 : 0 (no gradient; the surrogate op lives in neurons/) */
    SNN_UNARY_COUNT
} snn_unary_op;

typedef enum snn_binary_op {
    SNN_BINARY_ADD, /* y = a + b */
    SNN_BINARY_SUB, /* y = a - b */
    SNN_BINARY_MUL, /* y = a * b */
    SNN_BINARY_DIV, /* y = a / b */
    SNN_BINARY_COUNT
} snn_binary_op;

/* Numpy broadcasting of two tensors to one output shape. Dims are right-aligned and padded to
 * out.ndim; stride_a[d] is 0 where a is broadcast along d (likewise b). */
typedef struct snn_broadcast {
    snn_shape out;
    int64_t stride_a[SNN_MAX_DIMS];
    int64_t stride_b[SNN_MAX_DIMS];
    int64_t numel;      /* of out */
    int64_t numel_a, numel_b;
    bool same_shape;    /* a, b and out all have the same shape: a flat loop suffices */
} snn_broadcast;

/* ---- convolution and pooling ------------------------------------------------------------ */

typedef struct snn_conv2d_dims {
    int N, C_in, H, W;        /* input (N, C_in, H, W) */
    int C_out, KH, KW;        /* weight (C_out, C_in, KH, KW) */
    int stride, pad;          /* same in both spatial dims */
    int H_out, W_out;         /* (H + 2 pad - KH) / stride + 1, likewise W */
} snn_conv2d_dims;

/* A stride-1 conv whose output has its input's shape: dx and dout are the same floats image by
 * image, the condition for writing dx over dout (conv2d_dx_over_dout) */
static inline bool snn_conv2d_keeps_shape(const snn_conv2d_dims *d)
{
    return d->stride == 1 && d->C_in == d->C_out && d->H == d->H_out && d->W == d->W_out;
}

/* An eval-mode batch-norm's vectors (C each; gamma and beta may be NULL): what
 * conv2d_forward_bn_eval applies to the conv's output. */
typedef struct snn_bn_eval {
    const float *gamma, *beta, *running_mean, *running_var;
    float eps;
} snn_bn_eval;

/* A training batch-norm's input gradient not made yet (autograd/grad_deferred.c): the gradient
 * buffer holds the batch-norm's dL/dout (dX), and dL/dx is what
 *   batchnorm_backward_in_place_sums(dX, NULL, NULL, x, x_bf16, gamma, save_mean, save_invstd,
 *                                    sums, N, C, HW)
 * would write over it. conv2d_backward_bn_dout, for the conv that made x, makes dL/dx as it
 * reads its dout. */
typedef struct snn_bn_dout {
    const float *x;                 /* the batch-norm's input (the conv's output), or NULL: */
    const uint16_t *x_bf16;         /*   then these are its values, as bfloat16 bits */
    const float *gamma;             /* may be NULL (affine = False) */
    const float *save_mean, *save_invstd;
    const double *sums;             /* (C, 3): sum dX, sum dX (x - mean), count */
} snn_bn_dout;

typedef struct snn_pool2d_dims {
    int N, C, H, W;           /* input (N, C, H, W) */
    int K, stride, pad;       /* square window */
    int H_out, W_out;
} snn_pool2d_dims;

/* ---- optimizers --------------------------------------------------------------------------- */

typedef struct snn_sgd_params {
    float lr, momentum, dampening, weight_decay;
    bool nesterov;
    bool first_step;          /* momentum buffer is initialised to the gradient on the first step */
} snn_sgd_params;

typedef struct snn_adam_params {
    float lr, beta1, beta2, eps, weight_decay;
    bool decoupled;           /* AdamW: p -= lr * wd * p, instead of adding wd * p to the grad */
    float bias_correction1;   /* 1 - beta1^t */
    float bias_correction2;   /* 1 - beta2^t */
} snn_adam_params;

/* One tensor of a multi-tensor Adam step (adam_update_many): its parameter, state and gradient,
 * and its own bias corrections (tensors may have taken different numbers of steps). */
typedef struct snn_adam_tensor {
    float *p, *m, *v;
    const float *grad;
    int64_t n;
    float bias_correction1, bias_correction2;
} snn_adam_tensor;

typedef enum snn_copy_kind {
    SNN_COPY_HOST_TO_DEVICE,
    SNN_COPY_DEVICE_TO_HOST,
    SNN_COPY_DEVICE_TO_DEVICE,
} snn_copy_kind;

/* ---- the table ---------------------------------------------------------------------------- */

typedef struct snn_kernels {
    const char *name; /* "ref", "cpu", "cuda" */

    /* memory (bytes); device_alloc returns NULL on failure. copy is ordered on the stream. */
    void *(*device_alloc)(size_t bytes);
    void (*device_free)(void *p);
    void (*copy)(void *dst, const void *src, size_t bytes, snn_copy_kind kind);
    void (*synchronize)(void);
    /* Bytes that can be allocated now and the device's size; 0 on success, -1 when the device
     * cannot tell (CPU: tensor/memory_info.c; CUDA: cudaMemGetInfo). */
    int (*memory_info)(size_t *available, size_t *total);

    /* out[i] = value */
    void (*fill)(float *out, float value, int64_t n);
    /* y[i] += alpha * x[i] (gradient accumulation) */
    void (*axpy)(float *y, float alpha, const float *x, int64_t n);
    /* y[i] += weight * (x[i] - y[i]): y moves `weight` of the way to x (torch.lerp_; the
     * weights' moving average, nn/ema.c). y == x stays exactly y. */
    void (*lerp)(float *y, const float *x, float weight, int64_t n);

    /* Spikes as bits (spike_bits.c / .cu; autograd/spike_pack.c): bit i % 32 of bits[i / 32]
     * is x[i] != 0, the unused bits of the last word 0 (pack); x[i] = that bit (unpack). */
    void (*pack_bits)(uint32_t *bits, const float *x, int64_t n);
    void (*unpack_bits)(float *x, const uint32_t *bits, int64_t n);

    /* Values as bfloat16 (bf16.c / .cu; autograd/bf16_keep.c): round sets x[i] to x[i]
     * rounded to bf16 (nearest, ties to even) and bf16_out[i] to its 16 bits; unpack sets
     * x[i] to bf16_in[i] as fp32 (exact). */
    void (*round_bf16)(float *x, uint16_t *bf16_out, int64_t n);
    void (*unpack_bf16)(float *x, const uint16_t *bf16_in, int64_t n);

    /* out = op(x); `param` is used by SCALE and ADD_SCALAR */
    void (*unary_forward)(snn_unary_op op, float *out, const float *x, float param, int64_t n);
    /* dx += dout * op'(x); `out` is op(x) (EXP, SIGMOID, RELU may use it instead of x) */
    void (*unary_backward)(snn_unary_op op, float *dx, const float *dout, const float *x,
                           const float *out, float param, int64_t n);
    /* out = a op b with broadcasting */
    void (*binary_forward)(snn_binary_op op, float *out, const float *a, const float *b,
                           const snn_broadcast *bc);
    /* da += reduce(dout * d(a op b)/da) over broadcast dims; likewise db; NULL skips */
    void (*binary_backward)(snn_binary_op op, float *da, float *db, const float *dout,
                            const float *a, const float *b, const snn_broadcast *bc);

    /* x viewed as (outer, dim, inner): out[o, i] = scale * sum_d x[o, d, i] (overwrites) */
    void (*sum_dim)(float *out, const float *x, int64_t outer, int64_t dim, int64_t inner,
                    float scale);
    /* out[o, d, i] (+)= scale * x[o, i]: the forward of expand/repeat (accumulate = false) and
     * the backward of sum_dim (accumulate = true) */
    void (*expand_dim)(float *out, const float *x, int64_t outer, int64_t dim, int64_t inner,
                       float scale, bool accumulate);
    /* x viewed as (rows, cols, inner): out[c, r, i] (+)= x[r, c, i], out (cols, rows, inner);
     * the first two axes swapped (autograd/fn_transpose.c). Its own backward with rows and
     * cols exchanged (accumulate = true) */
    void (*transpose01)(float *out, const float *x, int64_t rows, int64_t cols, int64_t inner,
                        bool accumulate);

    /* Row-major C = alpha * op(A) op(B) + beta * C, op(A) (M, K), op(B) (K, N), C (M, N).
     * trans_a: A is stored (K, M); trans_b: B is stored (N, K). beta = 0 ignores C's content. */
    void (*gemm)(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float *A,
                 int lda, const float *B, int ldb, float beta, float *C, int ldc);
    /* out (outer, C, inner) += bias[c] (conv: inner = H*W; linear: inner = 1) */
    void (*bias_forward)(float *out, const float *bias, int64_t outer, int64_t channels,
                         int64_t inner);
    /* dbias[c] += sum over outer, inner of dout */
    void (*bias_backward)(float *dbias, const float *dout, int64_t outer, int64_t channels,
                          int64_t inner);

    /* conv2d (cross-correlation, as PyTorch). bias may be NULL. workspace has
     * conv2d_workspace_bytes(d) bytes. */
    size_t (*conv2d_workspace_bytes)(const snn_conv2d_dims *d);
    void (*conv2d_forward)(float *out, const float *x, const float *weight, const float *bias,
                           const snn_conv2d_dims *d, float *workspace);
    /* conv2d_forward with x given as spikes kept as bits (autograd/spike_pack.c), read where
     * the input is loaded, as conv2d_backward_bits reads them: so a layer's spikes need not
     * stay floats until the conv that reads them has run. Returns false, having done nothing,
     * where this conv's kernels cannot (the caller then unpacks x); NULL on a device without
     * it (the CPU). */
    bool (*conv2d_forward_bits)(float *out, const uint32_t *x_bits, const float *weight,
                                const float *bias, const snn_conv2d_dims *d, float *workspace);
    /* Whether conv2d_forward_bits and conv2d_backward_bits take x as bits for these dims (they
     * decline where not). Optional: NULL where never. */
    bool (*conv2d_reads_bits)(const snn_conv2d_dims *d);
    /* conv2d_backward with x given as spikes kept as bits (autograd/spike_pack.c), read where
     * the input is loaded (its copies: the column matrix, the channels-last operand), so the
     * floats are never written back. Returns false, having done nothing, where this conv's
     * kernels cannot (the caller then unpacks x); NULL on a device without it (the CPU). */
    bool (*conv2d_backward_bits)(float *dx, float *dweight, float *dbias, const float *dout,
                                 const uint32_t *x_bits, const float *weight,
                                 const snn_conv2d_dims *d, float *workspace);
    void (*conv2d_backward)(float *dx, float *dweight, float *dbias, const float *dout,
                            const float *x, const float *weight, const snn_conv2d_dims *d,
                            float *workspace);
    /* Whether conv2d_backward and conv2d_backward_bits take dx == dout for these dims (a conv
     * that keeps its shape): dx is then written over dout, not added, and the step needs no
     * second buffer of that size. Optional: NULL where never (the reference). */
    bool (*conv2d_dx_over_dout)(const snn_conv2d_dims *d);
    /* conv2d_backward (or conv2d_backward_bits: x NULL, x_bits given) whose dout is a
     * batch-norm's input gradient not made yet (snn_bn_dout): dX holds the batch-norm's
     * dL/dout, and the kernels make dout from it and x as they load it, with the bits of
     * batchnorm_backward_in_place_sums followed by conv2d_backward. So the batch-norm's pass
     * that writes dout, and the conv's that reads it, are one (CUDA's channels-last copy).
     * dx may be dX where conv2d_dx_over_dout says so; dX's values are then gone, else kept.
     * Returns false, having done nothing, where this conv's kernels cannot (the caller makes
     * dout first); NULL on a device without it (the CPU). */
    bool (*conv2d_backward_bn_dout)(float *dx, float *dweight, float *dbias, const float *dX,
                                    const snn_bn_dout *bn, const float *x,
                                    const uint32_t *x_bits, const float *weight,
                                    const snn_conv2d_dims *d, float *workspace);
    /* The conv's backward where the caller gives dout up (a conv's dL/dy that nothing reads
     * after this backward): once the kernels have read a part of dout, that part of the buffer
     * is theirs, and they may keep scratch there (CUDA's channels-last path keeps x's
     * channels-last copy in it, the largest part of a wide layer's workspace). dout's values
     * are gone after. The workspace is conv2d_backward_consuming_workspace_bytes(d), at most
     * conv2d_workspace_bytes(d). Otherwise conv2d_backward_bn_dout's semantics: bn NULL (dout
     * is dL/dy) or a batch-norm's record (dout is its dL/dout; then dbias is NULL, as a conv
     * bias never comes before a batch-norm), x as floats or (x NULL) as bits, dx may be dout
     * where conv2d_dx_over_dout says so. Returns false, having done nothing, where these
     * kernels cannot; the workspace bytes are then conv2d_workspace_bytes(d)'s, so the caller
     * can go the other entries' way with it. Optional: NULL where no device gains by it. */
    bool (*conv2d_backward_consuming)(float *dx, float *dweight, float *dbias, float *dout,
                                      const snn_bn_dout *bn, const float *x,
                                      const uint32_t *x_bits, const float *weight,
                                      const snn_conv2d_dims *d, float *workspace);
    size_t (*conv2d_backward_consuming_workspace_bytes)(const snn_conv2d_dims *d);
    /* conv2d_forward, then batchnorm_forward_eval over its output with bn: the same bits as
     * the two calls (eval-mode inference; workspace as conv2d_forward's). A device may fuse
     * them: CUDA's channels-last conv applies the batch-norm in its epilogue, which saves the
     * batch-norm's pass over the output. */
    void (*conv2d_forward_bn_eval)(float *out, const float *x, const float *weight,
                                   const float *bias, const snn_bn_eval *bn,
                                   const snn_conv2d_dims *d, float *workspace);

    /* max-pool: argmax holds, per output, the flat index h*W + w of the chosen input in its
     * (n, c) plane; padding never wins (it is -inf) */
    void (*max_pool2d_forward)(float *out, int32_t *argmax, const float *x,
                               const snn_pool2d_dims *d);
    void (*max_pool2d_backward)(float *dx, const float *dout, const int32_t *argmax,
                                const snn_pool2d_dims *d);
    /* avg-pool, padding counted in the divisor (PyTorch's count_include_pad = True) */
    void (*avg_pool2d_forward)(float *out, const float *x, const snn_pool2d_dims *d);
    void (*avg_pool2d_backward)(float *dx, const float *dout, const snn_pool2d_dims *d);

    /* Learnable synaptic delays (DCLS-Delays; kernels/ref/delay.c has the equations).
     * delay_kernel: K (D, O, I) from weights w (O, I) and real delays d (O, I), each synapse's
     * D taps a Gaussian centred at d[o, i] of width sigma > 0, normalised to sum 1, times w */
    void (*delay_kernel_forward)(float *K, const float *w, const float *d, int O, int I, int D,
                                 float sigma);
    /* dw += sum_k dK[k] p_k,  dd += w sum_k dK[k] p_k (k - mu) / sigma^2 (NULL skips) */
    void (*delay_kernel_backward)(float *dw, float *dd, const float *dK, const float *w,
                                  const float *d, int O, int I, int D, float sigma);
    /* causal temporal conv: y (T, N, O) = sum_{k < D} x[t - k] (T, N, I) K[k]^T, x[t < 0] = 0 */
    void (*temporal_conv_forward)(float *y, const float *x, const float *K, int T, int N, int I,
                                  int O, int D);
    /* dx[t - k] += dy[t] K[k],  dK[k] += dy[t]^T x[t - k] (NULL skips) */
    void (*temporal_conv_backward)(float *dx, float *dK, const float *dy, const float *x,
                                   const float *K, int T, int N, int I, int O, int D);

    /* batch-norm over (N, C, HW), training: batch statistics (biased variance for the output,
     * unbiased for the running update), running <- (1 - momentum) running + momentum batch */
    void (*batchnorm_forward_train)(float *out, float *save_mean, float *save_invstd,
                                    float *running_mean, float *running_var, const float *x,
                                    const float *gamma, const float *beta, int N, int C, int HW,
                                    float momentum, float eps);
    /* eval: out = gamma (x - running_mean) / sqrt(running_var + eps) + beta */
    void (*batchnorm_forward_eval)(float *out, const float *x, const float *gamma,
                                   const float *beta, const float *running_mean,
                                   const float *running_var, int N, int C, int HW, float eps);
    /* training-mode backward through the batch statistics; NULL outputs are skipped */
    void (*batchnorm_backward)(float *dx, float *dgamma, float *dbeta, const float *dout,
                               const float *x, const float *gamma, const float *save_mean,
                               const float *save_invstd, int N, int C, int HW);
    /* the same, in place of dout: dx holds dL/dout on entry and dL/dx on return, the bits
     * batchnorm_backward adds to a zeroed dx (its sums are taken before any value is
     * replaced), so the fused batch-norm -> neuron op needs no buffer of its own for dL/dout
     * (neurons/bn_neuron.c); dgamma, dbeta += as there (NULL skips). x is the forward's
     * input, or NULL: then x_bf16 is, as its bfloat16 bits (a conv output kept as bf16,
     * autograd/bf16_keep.c), read without a copy. */
    void (*batchnorm_backward_in_place)(float *dx, float *dgamma, float *dbeta, const float *x,
                                        const uint16_t *x_bf16, const float *gamma,
                                        const float *save_mean, const float *save_invstd, int N,
                                        int C, int HW);
    /* batchnorm_backward_in_place with its sums given, not taken: sums (C, 3) = (sum dout,
     * sum dout (x - save_mean), count) over dout = dx, as batchnorm_backward_sums lays them
     * out. The fused neuron backward makes them on its way through dL/dout in BF16 training
     * (lif_bn_backward's in->dy_sums, neurons/bn_neuron.c), which saves this op the pass that
     * reads dout and x once more; with the sums batchnorm_backward_in_place would take, the
     * same bits as it. dx may be NULL here (dgamma and dbeta alone; the conv that made x then
     * makes dx: conv2d_backward_bn_dout). */
    void (*batchnorm_backward_in_place_sums)(float *dx, float *dgamma, float *dbeta,
                                             const float *x, const uint16_t *x_bf16,
                                             const float *gamma, const float *save_mean,
                                             const float *save_invstd, const double *sums, int N,
                                             int C, int HW);

    /* Batch-norm across data-parallel ranks (--sync-bn, distributed/): the training forward and
     * backward above, cut where the ranks exchange per-channel sums. With one rank the pieces
     * give the fused kernels' bits. All sums in double.
     *   forward:  stats (each rank) -> all-gather -> stats_merge -> normalise
     *   backward: backward_sums (each rank) -> all-reduce (sum) -> backward_apply
     * stats (C, 3) = (count M, mean, M2 = sum (x - mean)^2) of this rank's values; x, or NULL:
     * then x_bf16 is, as bfloat16 bits (a conv output kept as bf16), read without a copy and
     * summed in the same order */
    void (*batchnorm_stats)(double *stats, const float *x, const uint16_t *x_bf16, int N, int C,
                            int HW);
    /* merged (C, 3) <- the R ranks' stats (R, C, 3) merged in rank order (Chan et al.'s update);
     * then save_mean, save_invstd and the running statistics as forward_train does, over all
     * ranks' values (running stats may be NULL) */
    void (*batchnorm_stats_merge)(double *merged, float *save_mean, float *save_invstd,
                                  float *running_mean, float *running_var, const double *stats,
                                  int R, int C, float momentum, float eps);
    /* out = (x - mean) (gamma save_invstd) + beta, mean from merged (C, 3) (as forward_train) */
    void (*batchnorm_normalise)(float *out, const float *x, const double *merged,
                                const float *save_invstd, const float *gamma, const float *beta,
                                int N, int C, int HW);
    /* sums (C, 3) = (sum dout, sum dout (x - save_mean), count M) of this rank's values */
    void (*batchnorm_backward_sums)(double *sums, const float *dout, const float *x,
                                    const float *save_mean, int N, int C, int HW);
    /* dbeta, dgamma += this rank's sums (local); dx += as in backward, with the sums and count
     * of every rank (global = the all-reduced sums); NULL outputs are skipped */
    void (*batchnorm_backward_apply)(float *dx, float *dgamma, float *dbeta, const float *dout,
                                     const float *x, const float *gamma, const float *save_mean,
                                     const float *save_invstd, const double *local,
                                     const double *global, int N, int C, int HW);

    /* rows of x (N, C): out = log_softmax(x) */
    void (*log_softmax_forward)(float *out, const float *x, int N, int C);
    /* dx += dout - exp(out) * sum_c dout */
    void (*log_softmax_backward)(float *dx, const float *dout, const float *out, int N, int C);
    /* loss[0] = -scale * sum_n logp[n, labels[n]]   (labels hold class indices as floats) */
    void (*nll_forward)(float *loss, const float *logp, const float *labels, int N, int C,
                        float scale);
    /* dlogp[n, labels[n]] += -scale * dloss[0] */
    void (*nll_backward)(float *dlogp, const float *dloss, const float *labels, int N, int C,
                         float scale);
    /* out (N, C) = one-hot of labels */
    void (*one_hot)(float *out, const float *labels, int N, int C);
    /* out[n] = index of the largest x[n, :] (first on ties), as a float */
    void (*argmax_rows)(float *out, const float *x, int N, int C);

    /* mask[i] = (hash(seed, i) uniform >= p) / (1 - p): the same mask on every device */
    void (*dropout_mask)(float *mask, int64_t n, float p, uint64_t seed);
    /* Poisson (rate) coding of pixels (n) into spikes (T, n): spikes[t*n + i] = u < pixels[i],
     * u = (snn_hash64(seed + t*n + i) >> 40) * 2^-24: the same spikes on every device */
    void (*poisson_encode)(float *spikes, const float *pixels, int64_t n, int T, uint64_t seed);

    /* optimizer updates; velocity / m, v are the optimizer's state (same size as p) */
    void (*sgd_update)(float *p, float *velocity, const float *grad, int64_t n,
                       const snn_sgd_params *hp);
    void (*adam_update)(float *p, float *m, float *v, const float *grad, int64_t n,
                        const snn_adam_params *hp);
    /* adam_update on each of count tensors, with hp's bias corrections replaced by the
     * tensor's own; the same bits as one call per tensor (on the GPU, one launch serves up to
     * 32 tensors: a ResNet-18 has 124, most of them a few hundred floats) */
    void (*adam_update_many)(const snn_adam_tensor *tensors, int count, const snn_adam_params *hp);
    /* out[0] = sum of squares (for gradient norms); out[1] = 1 if any x is NaN/inf else 0 */
    void (*sumsq_and_finite)(float *out, const float *x, int64_t n);
} snn_kernels;

/* The table for a device, or NULL when this build has no such backend. */
const snn_kernels *snn_kernels_for(snn_device device);
/* Like snn_kernels_for, but stores "<fn>: no <device> backend in this build" when NULL. */
const snn_kernels *snn_kernels_or_error(const char *fn, snn_device device);

/* A kernel that keeps memory between calls (the fast SGEMM's packing buffers) registers the
 * function that frees it when it first takes the memory; snn_shutdown() (tensor/dispatch.c)
 * calls it once and forgets it, and a kernel that takes memory again registers again. So the
 * core knows nothing of any kernel's scratch, and a run that never used it runs none of its
 * code. Registering a function that is registered already does nothing; any thread may
 * register. At most SNN_MAX_SHUTDOWN_RELEASES functions at once (an assertion). */
#define SNN_MAX_SHUTDOWN_RELEASES 8
void snn_on_shutdown(void (*release)(void));

/* In an op: return NULL with "fn: the cuda backend has no kernel 'entry'" when an entry is
 * missing, so a partial backend is a clear error, never a call through NULL. */
#define SNN_REQUIRE_KERNEL(k, fn, entry)                                                      \
    do {                                                                                      \
        if (!(k)->entry)                                                                      \
            return snn_error_null(SNN_ERR_UNSUPPORTED, "%s: the %s backend has no kernel '%s'", \
                                  fn, (k)->name, #entry);                                      \
    } while (0)

/* The tables: reference (kernels/ref/table.c), fast CPU (kernels/cpu/table.c) and CUDA
 * (kernels/cuda/table.cu). */
extern const snn_kernels snn_kernels_ref;
extern const snn_kernels snn_kernels_cpu;
#ifdef SNN_WITH_CUDA
extern const snn_kernels snn_kernels_cuda;
int snn_cuda_device_count(void);  /* 0 when the driver or a GPU is missing (kernels/cuda/cuda_context.cu) */
void snn_cuda_shutdown(void);     /* releases the stream, cuBLAS handle and device scratch */
#endif

#ifdef __cplusplus
}
#endif

#endif /* SNN_KERNELS_H */
