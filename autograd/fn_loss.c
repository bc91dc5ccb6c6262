/*
 * fn_loss.c - log-softmax, negative log-likelihood, cross-entropy and MSE; one-hot and argmax.
 *
 *   log_softmax:  y[n, c] = x[n, c] - log sum_k exp(x[n, k])
 *                 dx = dy - softmax(x) * sum_c dy           (softmax = exp(y))
 *   nll:          L = -(1/N) sum_n logp[n, label_n];   dlogp[n, label_n] += -dL / N
 *   cross-entropy = nll(log_softmax(x));  mse(a, b) = mean((a - b)^2)
 *   label smoothing (Szegedy et al., "Rethinking the Inception Architecture", 2016, section 7;
 *   PyTorch's F.cross_entropy(x, y, label_smoothing=eps)): the target is the one-hot row mixed
 *   with the uniform distribution, q = (1 - eps) onehot(y) + eps / K, so with logp =
 *   log_softmax(x), K classes and N rows
 *                 L = (1/N) sum_n [ (1 - eps) (-logp[n, y_n]) + (eps/K) sum_k (-logp[n, k]) ]
 *                   = (1 - eps) nll(logp, y) - eps mean_all(logp)
 *   which is how it is composed below (the mean over all N K entries is (1/N) sum_n (1/K)
 *   sum_k), so its backward is the primitives' and needs no code of its own.
 *
 * Labels are (N) tensors of class indices stored as floats (exact below 2^24 classes). On the
 * CPU they are validated here; on CUDA validating would need a host sync, so the data loaders
 * validate labels when they read them.
 */
#include <math.h>

#include "autograd.h"
#include "tensor/arena.h"
#include "tensor/error.h"
#include "kernels/kernels.h"

static void log_softmax_backward(snn_node *node)
{
    snn_tensor *x = node->inputs[0], *y = node->out;
    float *dx = snn_grad_for(x);
    if (dx) snn_kernels_for(x->device)->log_softmax_backward(dx, y->grad->data, y->data,
                                                             (int)x->shape.dim[0], (int)x->shape.dim[1]);
}

snn_tensor *snn_log_softmax(snn_tensor *x)
{
    const char *fn = "snn_log_softmax";
    if (snn_check_rank(fn, "x", x, 2, "(N, C)")) return NULL;
    const snn_kernels *k = snn_kernels_for(x->device); /* a table: snn_tensor_new checks */
    SNN_REQUIRE_KERNEL(k, fn, log_softmax_forward);
    SNN_REQUIRE_KERNEL(k, fn, log_softmax_backward);
    snn_tensor *y = snn_step_tensor(fn, x->shape, x->device);
    if (!y) return NULL;
    k->log_softmax_forward(y->data, x->data, (int)x->shape.dim[0], (int)x->shape.dim[1]);
    if (snn_should_record(1, &x) && !snn_tape_record(fn, log_softmax_backward, y, 1, &x, 0))
        return NULL;
    return y;
}

static int check_labels(const char *fn, snn_tensor *labels, int64_t N, int64_t C,
                        snn_device device)
{
    if (snn_check_rank(fn, "labels", labels, 1, "(N)") ||
        snn_check_dim(fn, "labels", labels, 0, N, "N (rows of the scores)"))
        return 1;
    if (labels->device != device) {
        snn_error(SNN_ERR_ARGUMENT, "%s: bad argument 'labels' (expected a %s tensor, got %s)", fn,
                  snn_device_name(device), snn_device_name(labels->device));
        return 1;
    }
    if (labels->device == SNN_CPU) {
        for (int64_t n = 0; n < N; n++) {
            float v = labels->data[n];
            if (!(v >= 0.0f && v < (float)C && v == floorf(v))) {
                snn_error(SNN_ERR_ARGUMENT, "%s: bad argument 'labels' (expected class indices in "
                          "0..%lld, got %g at [%lld])", fn, (long long)C - 1, (double)v, (long long)n);
                return 1;
            }
        }
    }
    return 0;
}

static void nll_backward(snn_node *node)
{
    snn_tensor *logp = node->inputs[0], *labels = node->inputs[1];
    float *dlogp = snn_grad_for(logp);
    int N = (int)logp->shape.dim[0], C = (int)logp->shape.dim[1];
    if (dlogp) snn_kernels_for(logp->device)->nll_backward(dlogp, node->out->grad->data,
                                                           labels->data, N, C, 1.0f / (float)N);
}

snn_tensor *snn_nll_loss(snn_tensor *logp, snn_tensor *labels)
{
    const char *fn = "snn_nll_loss";
    if (snn_check_rank(fn, "logp", logp, 2, "(N, C)") ||
        check_labels(fn, labels, logp->shape.dim[0], logp->shape.dim[1], logp->device))
        return NULL;
    const snn_kernels *k = snn_kernels_for(logp->device); /* a table: snn_tensor_new checks */
    SNN_REQUIRE_KERNEL(k, fn, nll_forward);
    SNN_REQUIRE_KERNEL(k, fn, nll_backward);
    int N = (int)logp->shape.dim[0], C = (int)logp->shape.dim[1];
    snn_tensor *loss = snn_step_tensor(fn, SNN_SHAPE(1), logp->device);
    if (!loss) return NULL;
    k->nll_forward(loss->data, logp->data, labels->data, N, C, N ? 1.0f / (float)N : 0.0f);
    snn_tensor *inputs[2] = {logp, labels};
    if (snn_should_record(1, inputs) && !snn_tape_record(fn, nll_backward, loss, 2, inputs, 0))
        return NULL;
    return loss;
}

snn_tensor *snn_cross_entropy(snn_tensor *logits, snn_tensor *labels)
{
    return snn_nll_loss(snn_log_softmax(logits), labels);
}

snn_tensor *snn_cross_entropy_smooth(snn_tensor *logits, snn_tensor *labels, float smoothing)
{
    const char *fn = "snn_cross_entropy_smooth";
    if (snn_check_tensor(fn, "logits", logits) || snn_check_tensor(fn, "labels", labels))
        return NULL;
    if (!(smoothing >= 0.0f && smoothing < 1.0f)) /* NaN fails both */
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument 'smoothing' (expected 0 <= "
                              "smoothing < 1, got %g)", fn, (double)smoothing);
    /* eps = 0 is plain cross-entropy, bit for bit: the same ops, nothing added */
    if (smoothing == 0.0f) return snn_cross_entropy(logits, labels);
    snn_tensor *logp = snn_log_softmax(logits); /* (N, K) */
    snn_tensor *nll = snn_nll_loss(logp, labels);            /* (1/N) sum_n -logp[n, y_n] */
    snn_tensor *uniform = logp ? snn_mean_all(logp) : NULL;  /* (1/(N K)) sum_{n,k} logp[n, k] */
    return snn_sub(snn_scale(nll, 1.0f - smoothing), snn_scale(uniform, smoothing));
}

snn_tensor *snn_mse_loss(snn_tensor *a, snn_tensor *b)
{
    if (snn_check_same_shape("snn_mse_loss", "a", a, "b", b)) return NULL;
    return snn_mean_all(snn_square(snn_sub(a, b)));
}

snn_tensor *snn_one_hot(snn_tensor *labels, int classes)
{
    const char *fn = "snn_one_hot";
    if (snn_check_tensor(fn, "labels", labels)) return NULL;
    if (classes < 1)
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument 'classes' (expected >= 1, got %d)",
                              fn, classes);
    if (check_labels(fn, labels, labels->shape.dim[0], classes, labels->device)) return NULL;
    const snn_kernels *k = snn_kernels_for(labels->device); /* a table: snn_tensor_new checks */
    SNN_REQUIRE_KERNEL(k, fn, one_hot);
    int N = (int)labels->shape.dim[0];
    snn_tensor *y = snn_step_tensor(fn, SNN_SHAPE(N, classes), labels->device);
    if (y) k->one_hot(y->data, labels->data, N, classes);
    return y;
}

snn_tensor *snn_argmax(snn_tensor *x)
{
    const char *fn = "snn_argmax";
    if (snn_check_rank(fn, "x", x, 2, "(N, C)")) return NULL;
    const snn_kernels *k = snn_kernels_for(x->device); /* a table: snn_tensor_new checks */
    SNN_REQUIRE_KERNEL(k, fn, argmax_rows);
    snn_tensor *y = snn_step_tensor(fn, SNN_SHAPE(x->shape.dim[0]), x->device);
    if (y) k->argmax_rows(y->data, x->data, (int)x->shape.dim[0], (int)x->shape.dim[1]);
    return y;
}
