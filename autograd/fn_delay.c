/*
 * fn_delay.c - learnable synaptic delays as two differentiable ops (DCLS-Delays: Hammouamri,
 * Khalfaoui-Hassani, Masquelier, ICLR 2024, https://arxiv.org/abs/2306.17670). The layer that
 * trains them is nn/layer_delay.c; the test is tests/test_delays.c.
 *
 * Dims: T time steps, N batch, I input features, O output features, D taps (delays 0..D-1).
 *
 * snn_delay_kernel(w (O, I), d (O, I), sigma, D) -> K (D, O, I)
 *   K[k, o, i] = w[o, i] p_k,  p_k = phi_k / sum_{k'} phi_k',  phi_k = exp(-(k - d[o, i])^2 / (2 sigma^2))
 *   dK[k]/dw = p_k
 *   dK[k]/dd = w p_k (k - mu) / sigma^2,  mu = sum_k p_k k      (d p_k / dd = p_k (k - mu) / sigma^2)
 *   so dL/dw += sum_k dL/dK[k] p_k and dL/dd += w / sigma^2 sum_k dL/dK[k] p_k (k - mu).
 *   The normaliser divides by the largest phi first (kernels/delay_math.h), so any sigma > 0,
 *   even one that puts all the mass on one tap, gives finite values.
 *
 * snn_temporal_conv(x (T, N, I), K (D, O, I)) -> y (T, N, O), causal (x[t < 0] = 0)
 *   y[t]       = sum_{k=0}^{D-1} x[t - k] K[k]^T
 *   dx[t - k] += dy[t] K[k],   dK[k] += dy[t]^T x[t - k]
 *   On the fast tables, one GEMM per tap over the rows it reaches (kernels/temporal_conv_taps.h):
 *   D times the FLOPs of a linear layer, no scratch.
 *
 * Each op is one tape node. The delay kernel saves nothing (backward recomputes the taps from
 * w and d, D exponentials a synapse); the conv saves x and K by reference.
 */
#include <limits.h>
#include <math.h>

#include "autograd.h"
#include "tensor/arena.h"
#include "tensor/error.h"
#include "kernels/kernels.h"

typedef struct delay_kernel_saved {
    float sigma;
    int D;
} delay_kernel_saved;

static void delay_kernel_backward(snn_node *node)
{
    const delay_kernel_saved *s = node->saved;
    snn_tensor *w = node->inputs[0], *d = node->inputs[1], *K = node->out;
    float *dw = snn_grad_for(w), *dd = snn_grad_for(d);
    if (!dw && !dd) return;
    const snn_kernels *k = snn_kernels_for(K->device);
    k->delay_kernel_backward(dw, dd, K->grad->data, w->data, d->data, (int)w->shape.dim[0],
                             (int)w->shape.dim[1], s->D, s->sigma);
}

snn_tensor *snn_delay_kernel(snn_tensor *w, snn_tensor *d, float sigma, int D)
{
    const char *fn = "snn_delay_kernel";
    if (snn_check_rank(fn, "w", w, 2, "(O, I)") || snn_check_rank(fn, "d", d, 2, "(O, I)") ||
        snn_check_same_device(fn, "w", w, "d", d) || snn_check_same_shape(fn, "w", w, "d", d))
        return NULL;
    if (D < 1)
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument 'D' (expected the number of "
                              "taps >= 1, got %d); hint: D = max delay in steps + 1", fn, D);
    if (!(sigma > 0.0f) || isinf(sigma))
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument 'sigma' (expected a finite "
                              "width > 0, got %g); hint: anneal it toward 0.5, and round the "
                              "delays (snn_delay_linear_round) for a pure delay line",
                              fn, (double)sigma);
    const int64_t O = w->shape.dim[0], I = w->shape.dim[1];
    if (O < 1 || I < 1 || (int64_t)D * O * I > INT_MAX) {
        char buf[96];
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument 'w' (expected (O, I) with "
                              "O, I >= 1 and D O I < 2^31, got %s with D = %d)", fn,
                              snn_shape_str(w->shape, buf, sizeof buf), D);
    }
    const snn_kernels *k = snn_kernels_for(w->device); /* a table: snn_tensor_new checks */
    SNN_REQUIRE_KERNEL(k, fn, delay_kernel_forward);
    SNN_REQUIRE_KERNEL(k, fn, delay_kernel_backward);
    snn_tensor *K = snn_step_tensor(fn, SNN_SHAPE(D, O, I), w->device);
    if (!K) return NULL;
    k->delay_kernel_forward(K->data, w->data, d->data, (int)O, (int)I, D, sigma);
    snn_tensor *inputs[2] = {w, d};
    if (snn_should_record(2, inputs)) {
        snn_node *node = snn_tape_record(fn, delay_kernel_backward, K, 2, inputs, sizeof(delay_kernel_saved));
        if (!node) return NULL;
        delay_kernel_saved *s = node->saved;
        s->sigma = sigma;
        s->D = D;
    }
    return K;
}

static void temporal_conv_backward(snn_node *node)
{
    snn_tensor *x = node->inputs[0], *K = node->inputs[1], *y = node->out;
    float *dx = snn_grad_for(x), *dK = snn_grad_for(K);
    if (!dx && !dK) return;
    const snn_kernels *k = snn_kernels_for(y->device);
    snn_step_scratch mark = snn_step_scratch_mark(y->device);
    /* x: spikes a model kept as bits (autograd/spike_pack.c) are unpacked for this op */
    const float *xv = dK ? snn_saved_values("snn_temporal_conv (backward)", x) : NULL;
    if (dK && !xv) {
        snn_backward_out_of_memory();
        return;
    }
    k->temporal_conv_backward(dx, dK, y->grad->data, xv, K->data, (int)x->shape.dim[0],
                              (int)x->shape.dim[1], (int)x->shape.dim[2], (int)K->shape.dim[1],
                              (int)K->shape.dim[0]);
    snn_step_scratch_release(y->device, mark); /* the unpacked x: only during the kernel */
}

snn_tensor *snn_temporal_conv(snn_tensor *x, snn_tensor *K)
{
    const char *fn = "snn_temporal_conv";
    if (snn_check_rank(fn, "x", x, 3, "(T, N, I)") || snn_check_rank(fn, "K", K, 3, "(D, O, I)") ||
        snn_check_same_device(fn, "x", x, "K", K))
        return NULL;
    const int64_t T = x->shape.dim[0], N = x->shape.dim[1], I = x->shape.dim[2];
    const int64_t D = K->shape.dim[0], O = K->shape.dim[1];
    char bufx[96], bufk[96];
    if (K->shape.dim[2] != I)
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument 'K' (expected (D, O, %lld) to "
                              "match x %s, got %s)", fn, (long long)I,
                              snn_shape_str(x->shape, bufx, sizeof bufx),
                              snn_shape_str(K->shape, bufk, sizeof bufk));
    if (T < 1 || N < 1 || I < 1 || D < 1 || O < 1)
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument '%s' (expected no empty dim, "
                              "got x %s, K %s)", fn, (T < 1 || N < 1 || I < 1) ? "x" : "K",
                              snn_shape_str(x->shape, bufx, sizeof bufx),
                              snn_shape_str(K->shape, bufk, sizeof bufk));
    if (T * N * I > INT_MAX || T * N * O > INT_MAX || D * O * I > INT_MAX)
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument 'x' (expected fewer than 2^31 "
                              "elements in x, y and K, got x %s, K %s)", fn,
                              snn_shape_str(x->shape, bufx, sizeof bufx),
                              snn_shape_str(K->shape, bufk, sizeof bufk));
    const snn_kernels *k = snn_kernels_for(x->device); /* a table: snn_tensor_new checks */
    SNN_REQUIRE_KERNEL(k, fn, temporal_conv_forward);
    SNN_REQUIRE_KERNEL(k, fn, temporal_conv_backward);
    snn_tensor *y = snn_step_tensor(fn, SNN_SHAPE(T, N, O), x->device);
    if (!y) return NULL;
    k->temporal_conv_forward(y->data, x->data, K->data, (int)T, (int)N, (int)I, (int)O, (int)D);
    snn_tensor *inputs[2] = {x, K};
    if (snn_should_record(2, inputs) &&
        !snn_tape_record(fn, temporal_conv_backward, y, 2, inputs, 0))
        return NULL;
    return y;
}
