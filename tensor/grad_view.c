/*
 * grad_view.c - a parameter's gradient as a view into one shared buffer
 * (snn_tensor_set_grad_view): data-parallel training (distributed/) lays every gradient of a
 * model end to end in one buffer, so that it can all-reduce them in a few large buckets while
 * backward still runs, and backward accumulates into the buffer in place.
 */
#include "error.h"

snn_status snn_tensor_set_grad_view(snn_tensor *t, snn_tensor *storage, int64_t offset)
{
    const char *fn = "snn_tensor_set_grad_view";
    if (snn_check_same_device(fn, "tensor", t, "storage", storage)) return snn_last_status();
    if (t->lifetime != SNN_OWNED || storage->lifetime != SNN_OWNED || storage->base)
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad arguments (expected OWNED tensors and a "
                         "storage that is not a view)", fn);
    if (offset < 0 || offset + t->numel > storage->numel)
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad argument 'offset' (expected 0..%lld for %lld "
                         "elements in a storage of %lld, got %lld)", fn,
                         (long long)(storage->numel - t->numel), (long long)t->numel,
                         (long long)storage->numel, (long long)offset);
    snn_tensor *g = snn_alloc(sizeof *g, SNN_CPU);
    if (!g) return snn_error(SNN_ERR_MEMORY, "%s: out of host memory", fn);
    *g = (snn_tensor){.shape = t->shape, .numel = t->numel, .device = t->device,
                      .lifetime = SNN_OWNED, .data = storage->data + offset, .base = storage};
    snn_tensor_free(t->grad);
    t->grad = g;
    return SNN_OK;
}
