/*
 * spike_pack.c - spikes kept for backward as bits (snn_spikes_pack; a backward op reads them
 * back through snn_saved_values, saved_values.c).
 *
 * Why. A training step keeps every layer's spikes until backward: the next conv's weight
 * gradient reads them (dL/dW = sum dout x), and a residual block's neuron reads its shortcut
 * to recompute H. In fp32 that is 4 bytes for a value that is 0 or 1: 7.9 of the 27 MB a
 * ResNet-18 training step held per image (docs/benchmarks.md). Kept as bits it is 1/32 of
 * that.
 *
 * How. A neuron op that records a tape takes its output from the step pool and marks it as
 * spikes (neurons/neuron_op.c, neurons/bn_neuron.c; the fused batch-norm -> neuron op, which
 * runs in training only, does so without a tape too, so that a forward-only pass of a training
 * step holds bits, not floats: nn/model_options.c). Once the ops that read it in the forward
 * have run, a model whose option pack_spikes is on (nn/plan.h; the fast kernels' default)
 * calls snn_spikes_pack: the values are kept as bits in step memory (the arena, which
 * backward reads until the step ends) and the fp32 block goes back to the pool, where the next
 * layer's spikes, and in backward the gradients of the same shapes, take it again. Values are
 * exact: a spike is 0 or 1. With the option off the spikes keep their pool block to the end of
 * the step, as floats.
 *
 * Cost, and where it is avoided. Packing reads the spikes once (4 B an element), unless the
 * op wrote the bits beside them (the fused batch-norm -> neuron kernel does). A backward op
 * reads bits directly where its kernels can (the conv's weight gradient on CUDA,
 * conv2d_backward_bits; the fused neuron's residual, snn_neuron_bn_input.residual_bits); any
 * other asks snn_saved_values, which unpacks into scratch for the length of that op (4 B an
 * element written, then read as before).
 *
 * Before their last reader. A conv reads spikes kept as bits in its forward too: CUDA's
 * kernels as they load the input (conv2d_forward_bits, where snn_conv2d_reads_bits), any
 * other device unpacked for the op. So a ResNet block packs the spikes its last conv reads
 * before that conv where the conv reads bits itself, and the conv's output takes the spikes'
 * fp32 block (nn/model_resnet.c).
 *
 * Test: tests/test_spike_pack.c (and test_cuda_spike_pack.c on the GPU).
 */
#include "autograd.h"
#include "tensor/arena.h"
#include "tensor/error.h"
#include "kernels/kernels.h"

static size_t bits_bytes(int64_t numel) { return (size_t)((numel + 31) / 32) * sizeof(uint32_t); }

snn_status snn_spikes_pack(snn_tensor *t)
{
    const char *fn = "snn_spikes_pack";
    if (t && t->spike_bits && !t->data) return SNN_OK; /* packed already */
    if (snn_check_tensor(fn, "t", t)) return snn_last_status();
    if (!t->spikes || !t->pooled || t->base)
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad argument 't' (expected the spikes of an IF, "
                         "LIF or PLIF neuron from the step pool, got %s)", fn,
                         t->base ? "a view" : !t->spikes ? "a tensor not marked as spikes"
                                                         : "spikes not from the pool (made without a tape)");
    const snn_kernels *k = snn_kernels_or_error(fn, t->device);
    if (!k) return snn_last_status();
    if (!t->spike_bits) { /* else the neuron kernel wrote them with the spikes (bn_neuron.c) */
        uint32_t *bits = snn_step_alloc(fn, bits_bytes(t->numel), t->device);
        if (!bits) return snn_last_status();
        k->pack_bits(bits, t->data, t->numel);
        t->spike_bits = bits;
    }
    snn_step_pooled_tensor_give_back(t);
    return SNN_OK;
}
