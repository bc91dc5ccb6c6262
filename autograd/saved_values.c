/*
 * saved_values.c - what a backward op reads of a tensor its forward kept (snn_saved_values):
 * the values themselves, or, where the model kept spikes as bits (snn_spikes_pack,
 * spike_pack.c says when and why) or a conv's output as bfloat16 (snn_values_keep_bf16,
 * bf16_keep.c), the values unpacked into step memory that the op gives back when it is done
 * with them (a scratch mark: 4 B an element written, then read as before).
 */
#include "autograd.h"
#include "tensor/arena.h"
#include "kernels/kernels.h"

const float *snn_saved_values(const char *fn, const snn_tensor *t)
{
    if (!t) return NULL;
    if (t->data) return t->data;
    float *values = snn_step_alloc(fn, (size_t)t->numel * sizeof(float), t->device);
    if (!values) return NULL;
    if (t->bf16)
        snn_kernels_for(t->device)->unpack_bf16(values, t->bf16, t->numel);
    else
        snn_kernels_for(t->device)->unpack_bits(values, t->spike_bits, t->numel);
    return values;
}
