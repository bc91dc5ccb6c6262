/*
 * tensor.c - shapes, OWNED tensors, and copying and filling tensors of both lifetimes (see
 * tensor.h). The STEP tensors the API makes are step_tensors.c; a gradient that is a view into
 * a shared buffer (data-parallel training) is grad_view.c.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "arena.h"
#include "error.h"
#include "kernels/kernels.h"

/* ---- shapes ------------------------------------------------------------------------------- */

int64_t snn_shape_numel(snn_shape shape)
{
    int64_t n = 1;
    for (int d = 0; d < shape.ndim; d++) n *= shape.dim[d];
    return n;
}

bool snn_shape_equal(snn_shape a, snn_shape b)
{
    if (a.ndim != b.ndim) return false;
    for (int d = 0; d < a.ndim; d++)
        if (a.dim[d] != b.dim[d]) return false;
    return true;
}

const char *snn_shape_str(snn_shape shape, char *buf, size_t size)
{
    size_t used = 0;
    int n = snprintf(buf, size, "[");
    used = n > 0 ? (size_t)n : 0;
    for (int d = 0; d < shape.ndim && used < size; d++) {
        n = snprintf(buf + used, size - used, d ? ", %lld" : "%lld", (long long)shape.dim[d]);
        used += n > 0 ? (size_t)n : 0;
    }
    if (used < size) snprintf(buf + used, size - used, "]");
    return buf;
}

/* ---- OWNED tensors ------------------------------------------------------------------------ */

snn_tensor *snn_tensor_new(snn_shape shape, snn_device device)
{
    const char *fn = "snn_tensor_new";
    if (snn_check_shape(fn, shape) || !snn_kernels_or_error(fn, device)) return NULL;
    snn_tensor *t = snn_alloc(sizeof *t, SNN_CPU);
    if (!t) return snn_error_null(SNN_ERR_MEMORY, "%s: out of host memory", fn);
    *t = (snn_tensor){.shape = shape, .numel = snn_shape_numel(shape), .device = device,
                      .lifetime = SNN_OWNED};
    size_t bytes = (size_t)t->numel * sizeof(float);
    t->data = snn_alloc(bytes, device);
    if (!t->data) {
        snn_free(t, sizeof *t, SNN_CPU);
        return snn_error_null(SNN_ERR_MEMORY, "%s: out of %s memory (asked for %zu bytes)", fn,
                              snn_device_name(device), bytes);
    }
    snn_kernels_for(device)->fill(t->data, 0.0f, t->numel);
    return t;
}

void snn_tensor_free(snn_tensor *t)
{
    if (!t) return;
    SNN_ASSERT(t->lifetime == SNN_OWNED && "snn_tensor_free() on a STEP tensor");
    snn_tensor_free(t->grad);
    if (!t->base) snn_free(t->data, (size_t)t->numel * sizeof(float), t->device); /* a view owns none */
    snn_free(t, sizeof *t, SNN_CPU);
}

snn_tensor *snn_tensor_grad(snn_tensor *t)
{
    SNN_ASSERT(t && t->lifetime == SNN_OWNED);
    if (!t->grad) t->grad = snn_tensor_new(t->shape, t->device);
    return t->grad;
}

/* ---- copies and fills --------------------------------------------------------------------- */

snn_status snn_tensor_copy_from_host(snn_tensor *t, const float *host)
{
    if (snn_check_tensor("snn_tensor_copy_from_host", "tensor", t)) return snn_last_status();
    size_t bytes = (size_t)t->numel * sizeof(float);
    if (t->device == SNN_CPU) memcpy(t->data, host, bytes);
    else snn_kernels_for(t->device)->copy(t->data, host, bytes, SNN_COPY_HOST_TO_DEVICE);
    return SNN_OK;
}

snn_status snn_tensor_copy_to_host(const snn_tensor *t, float *host)
{
    if (snn_check_tensor("snn_tensor_copy_to_host", "tensor", t)) return snn_last_status();
    size_t bytes = (size_t)t->numel * sizeof(float);
    if (t->device == SNN_CPU) {
        memcpy(host, t->data, bytes);
    } else {
        const snn_kernels *k = snn_kernels_for(t->device);
        k->copy(host, t->data, bytes, SNN_COPY_DEVICE_TO_HOST);
        k->synchronize();
    }
    return SNN_OK;
}

snn_status snn_tensor_copy(snn_tensor *dst, const snn_tensor *src)
{
    const char *fn = "snn_tensor_copy";
    if (snn_check_tensor(fn, "dst", dst) || snn_check_tensor(fn, "src", src))
        return snn_last_status();
    if (dst->numel != src->numel)
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad argument 'src' (expected %lld elements like "
                         "'dst', got %lld)", fn, (long long)dst->numel, (long long)src->numel);
    size_t bytes = (size_t)src->numel * sizeof(float);
    if (src->device == SNN_CPU && dst->device == SNN_CPU) {
        memmove(dst->data, src->data, bytes);
    } else if (src->device == SNN_CPU) {
        snn_kernels_for(dst->device)->copy(dst->data, src->data, bytes, SNN_COPY_HOST_TO_DEVICE);
    } else if (dst->device == SNN_CPU) {
        const snn_kernels *k = snn_kernels_for(src->device);
        k->copy(dst->data, src->data, bytes, SNN_COPY_DEVICE_TO_HOST);
        k->synchronize();
    } else {
        snn_kernels_for(src->device)->copy(dst->data, src->data, bytes, SNN_COPY_DEVICE_TO_DEVICE);
    }
    return SNN_OK;
}

snn_status snn_tensor_fill(snn_tensor *t, float value)
{
    if (snn_check_tensor("snn_tensor_fill", "tensor", t)) return snn_last_status();
    snn_kernels_for(t->device)->fill(t->data, value, t->numel);
    return SNN_OK;
}

float snn_tensor_item(const snn_tensor *t)
{
    if (snn_check_tensor("snn_tensor_item", "tensor", t)) return NAN;
    if (t->numel != 1) {
        char buf[96];
        snn_error(SNN_ERR_ARGUMENT, "snn_tensor_item: bad argument 'tensor' (expected 1 element, "
                  "got shape %s)", snn_shape_str(t->shape, buf, sizeof buf));
        return NAN;
    }
    float value = NAN;
    snn_tensor_copy_to_host(t, &value);
    return value;
}

/* ---- random fills ------------------------------------------------------------------------- */

typedef float (*draw_fn)(snn_rng *rng, float a, float b);

static float draw_uniform(snn_rng *rng, float lo, float hi) { return lo + (hi - lo) * snn_rng_uniform(rng); }
static float draw_normal(snn_rng *rng, float mean, float std) { return mean + std * snn_rng_normal(rng); }

static snn_status fill_random(const char *fn, snn_tensor *t, snn_rng *rng, draw_fn draw, float a,
                              float b)
{
    if (snn_check_tensor(fn, "tensor", t)) return snn_last_status();
    if (!rng) return snn_error(SNN_ERR_ARGUMENT, "%s: bad argument 'rng' (got NULL)", fn);
    size_t bytes = (size_t)t->numel * sizeof(float);
    float *host = t->device == SNN_CPU ? t->data : snn_alloc(bytes, SNN_CPU);
    if (!host) return snn_error(SNN_ERR_MEMORY, "%s: out of host memory (%zu bytes)", fn, bytes);
    for (int64_t i = 0; i < t->numel; i++) host[i] = draw(rng, a, b);
    if (t->device != SNN_CPU) {
        snn_tensor_copy_from_host(t, host);
        snn_synchronize(t->device);
        snn_free(host, bytes, SNN_CPU);
    }
    return SNN_OK;
}

snn_status snn_tensor_uniform_(snn_tensor *t, snn_rng *rng, float lo, float hi)
{
    return fill_random("snn_tensor_uniform_", t, rng, draw_uniform, lo, hi);
}

snn_status snn_tensor_normal_(snn_tensor *t, snn_rng *rng, float mean, float std)
{
    return fill_random("snn_tensor_normal_", t, rng, draw_normal, mean, std);
}
