/*
 * fn_dropout.c - dropout (Srivastava et al., 2014): y = x * mask, mask = 1/(1-p) with
 * probability 1-p and 0 otherwise, in training; the identity in eval. The mask is a hash of
 * (seed, element index), so CPU and CUDA draw the same mask and a run is reproducible.
 */
#include "autograd.h"
#include "tensor/arena.h"
#include "tensor/error.h"
#include "tensor/kernels.h"

snn_tensor *snn_dropout(snn_tensor *x, float p, bool training, uint64_t seed)
{
    const char *fn = "snn_dropout";
    if (snn_check_tensor(fn, "x", x)) return NULL;
    if (!(p >= 0.0f && p < 1.0f))
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument 'p' (expected 0 <= p < 1, got %g)",
                              fn, (double)p);
    if (!training || p == 0.0f) return x;
    const snn_kernels *k = snn_kernels_or_error(fn, x->device);
    if (!k) return NULL;
    SNN_REQUIRE_KERNEL(k, fn, dropout_mask);
    snn_tensor *mask = snn_step_tensor(fn, x->shape, x->device);
    if (!mask) return NULL;
    k->dropout_mask(mask->data, mask->numel, p, seed);
    return snn_mul(x, mask); /* the mask needs no gradient: mul's backward gives dx = dy * mask */
}
