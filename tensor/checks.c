/*
 * checks.c - the argument checks every op shares (error.h): each returns 0 when its check
 * passes, else stores a message that names the function, the argument, what was expected and
 * what came, and returns 1.
 */
#include <stddef.h>
#include <stdint.h>

#include "error.h"

int snn_check_shape(const char *fn, snn_shape shape)
{
    char buf[96];
    if (shape.ndim < 0 || shape.ndim > SNN_MAX_DIMS) {
        snn_error(SNN_ERR_ARGUMENT, "%s: bad argument 'shape' (expected 0 to %d dims, got %d)", fn,
                  SNN_MAX_DIMS, shape.ndim);
        return 1;
    }
    for (int d = 0; d < shape.ndim; d++) {
        if (shape.dim[d] < 0) {
            snn_error(SNN_ERR_ARGUMENT, "%s: bad argument 'shape' (negative size in dim %d of %s)",
                      fn, d, snn_shape_str(shape, buf, sizeof buf));
            return 1;
        }
    }
    /* numel * sizeof(float) must be a size: a product that wraps would allocate a small block
     * and then fill numel floats into it (sizes can come from files: checkpoint metadata) */
    const int64_t max_numel = (int64_t)(PTRDIFF_MAX / (ptrdiff_t)sizeof(float)) / 2;
    int64_t numel = 1;
    for (int d = 0; d < shape.ndim && numel > 0; d++) {
        if (shape.dim[d] > 0 && numel > max_numel / shape.dim[d]) {
            snn_error(SNN_ERR_ARGUMENT, "%s: bad argument 'shape' (%s has more elements than "
                      "memory can hold)", fn, snn_shape_str(shape, buf, sizeof buf));
            return 1;
        }
        numel *= shape.dim[d];
    }
    return 0;
}

int snn_check_tensor(const char *fn, const char *arg, const snn_tensor *t)
{
    if (t && (t->data || (!t->spike_bits && !t->bf16))) return 0;
    if (t && t->bf16) {
        snn_error(SNN_ERR_ARGUMENT, "%s: bad argument '%s' (its values were kept as bf16 for "
                  "backward by snn_values_keep_bf16, and no forward op reads it again); hint: "
                  "the model option keep_bf16 off (snn_model_set_options) to read a conv's "
                  "output after the forward", fn, arg);
        return 1;
    }
    if (t) {
        snn_error(SNN_ERR_ARGUMENT, "%s: bad argument '%s' (its values were kept as bits for "
                  "backward by snn_spikes_pack, and no forward op reads it again); hint: "
                  "the model option pack_spikes off (snn_model_set_options) to read a "
                  "layer's spikes after the forward", fn, arg);
        return 1;
    }
    /* A NULL that came out of an earlier failed op keeps that op's message. */
    if (!snn_error_pending())
        snn_error(SNN_ERR_ARGUMENT, "%s: bad argument '%s' (expected a tensor, got NULL)", fn, arg);
    return 1;
}

int snn_check_rank(const char *fn, const char *arg, const snn_tensor *t, int ndim,
                   const char *layout)
{
    if (snn_check_tensor(fn, arg, t)) return 1;
    if (t->shape.ndim == ndim) return 0;
    char buf[96];
    snn_error(SNN_ERR_ARGUMENT, "%s: bad argument '%s' (expected %d-D %s, got %d-D %s)", fn, arg,
              ndim, layout ? layout : "", t->shape.ndim, snn_shape_str(t->shape, buf, sizeof buf));
    return 1;
}

/* b on a's device; two tensors that exist */
static int device_like(const char *fn, const char *arg_a, const snn_tensor *a, const char *arg_b,
                       const snn_tensor *b)
{
    if (a->device == b->device) return 0;
    snn_error(SNN_ERR_ARGUMENT,
              "%s: bad argument '%s' (expected a %s tensor like '%s', got a %s tensor); "
              "hint: move both to one device with snn_to_device or snn_module_to",
              fn, arg_b, snn_device_name(a->device), arg_a, snn_device_name(b->device));
    return 1;
}

/* b of a's shape; two tensors that exist */
static int shape_like(const char *fn, const char *arg_a, const snn_tensor *a, const char *arg_b,
                      const snn_tensor *b)
{
    if (snn_shape_equal(a->shape, b->shape)) return 0;
    char sa[96], sb[96];
    snn_error(SNN_ERR_ARGUMENT, "%s: bad argument '%s' (expected shape %s like '%s', got %s)", fn,
              arg_b, snn_shape_str(a->shape, sa, sizeof sa), arg_a,
              snn_shape_str(b->shape, sb, sizeof sb));
    return 1;
}

int snn_check_same_device(const char *fn, const char *arg_a, const snn_tensor *a,
                          const char *arg_b, const snn_tensor *b)
{
    return snn_check_tensor(fn, arg_a, a) || snn_check_tensor(fn, arg_b, b) ||
           device_like(fn, arg_a, a, arg_b, b);
}

int snn_check_same_shape(const char *fn, const char *arg_a, const snn_tensor *a,
                         const char *arg_b, const snn_tensor *b)
{
    return snn_check_tensor(fn, arg_a, a) || snn_check_tensor(fn, arg_b, b) ||
           shape_like(fn, arg_a, a, arg_b, b);
}

int snn_check_like(const char *fn, const char *arg_a, const snn_tensor *a, const char *arg_b,
                   const snn_tensor *b, bool same_shape)
{
    if (!a) return snn_check_tensor(fn, arg_a, a);
    return snn_check_tensor(fn, arg_b, b) || device_like(fn, arg_a, a, arg_b, b) ||
           (same_shape && shape_like(fn, arg_a, a, arg_b, b));
}

int snn_check_dim(const char *fn, const char *arg, const snn_tensor *t, int dim, int64_t expected,
                  const char *what)
{
    if (snn_check_tensor(fn, arg, t)) return 1;
    if (dim < t->shape.ndim && t->shape.dim[dim] == expected) return 0;
    char buf[96];
    snn_error(SNN_ERR_ARGUMENT, "%s: bad argument '%s' (expected %s = %lld in dim %d, got shape %s)",
              fn, arg, what, (long long)expected, dim, snn_shape_str(t->shape, buf, sizeof buf));
    return 1;
}
