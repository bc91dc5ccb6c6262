/*
 * step_tensors.c - the STEP tensors a program makes through the API (tensor.h): empty,
 * zero-filled, filled, copied from the host or from another device. Each lives in the step
 * arena until the enclosing snn_step_end() and is never freed by hand; the ops make theirs
 * with snn_step_tensor directly (arena.h).
 */
#include "arena.h"
#include "error.h"
#include "kernels/kernels.h"

/* Each checks the device here; snn_step_tensor checks the shape. */

snn_tensor *snn_empty(snn_shape shape, snn_device device)
{
    if (!snn_kernels_or_error("snn_empty", device)) return NULL;
    return snn_step_tensor("snn_empty", shape, device);
}

snn_tensor *snn_full(snn_shape shape, float value, snn_device device)
{
    if (!snn_kernels_or_error("snn_full", device)) return NULL;
    snn_tensor *t = snn_step_tensor("snn_full", shape, device);
    if (t) snn_kernels_for(device)->fill(t->data, value, t->numel);
    return t;
}

snn_tensor *snn_zeros(snn_shape shape, snn_device device)
{
    return snn_full(shape, 0.0f, device);
}

snn_tensor *snn_from_host(snn_shape shape, const float *host, snn_device device)
{
    if (!snn_kernels_or_error("snn_from_host", device)) return NULL;
    if (!host)
        return snn_error_null(SNN_ERR_ARGUMENT, "snn_from_host: bad argument 'host' (got NULL)");
    snn_tensor *t = snn_step_tensor("snn_from_host", shape, device);
    if (t && snn_tensor_copy_from_host(t, host) != SNN_OK) return NULL;
    return t;
}

snn_tensor *snn_to_device(const snn_tensor *t, snn_device device)
{
    if (snn_check_tensor("snn_to_device", "tensor", t) || !snn_kernels_or_error("snn_to_device", device))
        return NULL;
    snn_tensor *out = snn_step_tensor("snn_to_device", t->shape, device);
    if (out && snn_tensor_copy(out, t) != SNN_OK) return NULL;
    return out;
}
