/*
 * fn_dropout.c - dropout (Srivastava et al., 2014): y = x * mask, mask = 1/(1-p) with
 * probability 1-p and 0 otherwise, in training; the identity in eval. The mask is a hash of
 * (seed, element index) (kernels/cpu/dropout.c has the recipe), so CPU and CUDA draw the same mask
 * and a run is reproducible.
 *
 * Dropout shared over leading dims (snn_dropout_shared). A spiking layer sees its input as
 * (T, N, F): the same sample at T time steps. Dropping a unit independently at each step only
 * thins its spike train, which the membrane integrates away; SpikingJelly's multi-step Dropout
 * (layer.Dropout, step_mode 'm') draws ONE mask per sample and applies it at every step, so a
 * dropped unit is silent for the whole sequence, as dropout in an ANN removes a unit for the
 * whole forward. Here:
 *
 *     x      (S_0, .., S_{s-1}, R_0, .., R_{r-1})    s = shared_dims leading dims
 *     mask   (R_0, .., R_{r-1})  = dropout_mask(numel(R), p, seed)     one draw
 *     y      = x * mask          (snn_mul broadcasts the mask over the leading dims)
 *     dx     = dy * mask         (mul's backward; the mask needs no gradient)
 *
 * With shared_dims = 0 the mask covers all of x and this is snn_dropout, bit for bit. The mask
 * comes from the same hash kernel on every device, so CPU and CUDA drop the same units. Memory:
 * the mask (numel(R) floats) and the output, in the step arena.
 */
#include "autograd.h"
#include "tensor/arena.h"
#include "tensor/error.h"
#include "kernels/kernels.h"

static snn_tensor *dropout(const char *fn, snn_tensor *x, float p, bool training, uint64_t seed,
                           int shared_dims)
{
    if (snn_check_tensor(fn, "x", x)) return NULL;
    if (!(p >= 0.0f && p < 1.0f))
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument 'p' (expected 0 <= p < 1, got %g)",
                              fn, (double)p);
    /* at least one dim keeps its own draws (shared_dims 0 also takes a 0-D x, as snn_dropout) */
    const int most = x->shape.ndim > 0 ? x->shape.ndim - 1 : 0;
    if (shared_dims < 0 || shared_dims > most)
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument 'shared_dims' (expected 0..%d "
                              "for a %d-D x, got %d)", fn, most, x->shape.ndim, shared_dims);
    if (!training || p == 0.0f) return x;
    const snn_kernels *k = snn_kernels_for(x->device); /* a table: snn_tensor_new checks */
    SNN_REQUIRE_KERNEL(k, fn, dropout_mask);
    snn_shape mask_shape = {.ndim = x->shape.ndim - shared_dims}; /* the dims not shared */
    for (int d = 0; d < mask_shape.ndim; d++) mask_shape.dim[d] = x->shape.dim[shared_dims + d];
    snn_tensor *mask = snn_step_tensor(fn, mask_shape, x->device);
    if (!mask) return NULL;
    k->dropout_mask(mask->data, mask->numel, p, seed);
    return snn_mul(x, mask); /* the mask needs no gradient: mul's backward gives dx = dy * mask */
}

snn_tensor *snn_dropout(snn_tensor *x, float p, bool training, uint64_t seed)
{
    return dropout("snn_dropout", x, p, training, seed, 0);
}

snn_tensor *snn_dropout_shared(snn_tensor *x, float p, bool training, uint64_t seed,
                               int shared_dims)
{
    return dropout("snn_dropout_shared", x, p, training, seed, shared_dims);
}
