/*
 * bf16_keep.c - a conv's output kept for backward as bfloat16 (snn_values_round_bf16,
 * snn_values_keep_bf16; a backward op reads it back through snn_saved_values).
 *
 * Why. The batch-norm after a conv reads the conv's output y again in backward: to normalise
 * it (x_hat = (y - mean) invstd) and, fused with the neurons, to recompute the membrane from
 * it (neurons/bn_neuron.c). So a training step keeps every conv output until backward: 9.04 of
 * the 17.2 MB an image a BF16 ResNet-18 step held at T = 4 (docs/benchmarks.md), the largest
 * thing it holds. In BF16 precision the convs already round their operands to 8 bits of
 * mantissa; keeping their outputs with the same 8 bits halves that memory, which is what
 * PyTorch's autocast does too (its convs return bf16 tensors).
 *
 * How, in three moves, so that forward and backward see the same numbers:
 *   1. the conv takes its output from the step pool (snn_conv2d_to_pool);
 *   2. before the batch-norm reads it, snn_values_round_bf16 rounds it in place and writes the
 *      16 bits beside it (round_bf16: 10 B an element of traffic): the batch-norm's
 *      statistics, its output and the spikes are computed from the rounded values;
 *   3. snn_values_keep_bf16 gives the fp32 block back to the pool, where the next conv's
 *      output takes it again: before the fused batch-norm -> neuron op, whose kernels read
 *      the bf16 bits as they are in forward and backward (snn_neuron_bn_input.x_bf16,
 *      batchnorm_stats, batchnorm_backward_in_place: 2 B an element), so that its spikes do
 *      not sit beside the floats; after a plain batch-norm, which reads floats, and whose
 *      backward unpacks the bits into scratch for the length of its op (snn_saved_values: 6 B
 *      an element). Either way backward reads exactly the values the forward used.
 * A model does 1-3 where its option keep_bf16 is on (nn/plan.h; snn-train --keep-bf16, off by
 * default: the two passes cost a BF16 ResNet-18 step about 7% of its time for 16% of its
 * memory); nn/module.c and nn/model_resnet.c call 2 and 3 around the batch-norm. A
 * downsampling block's shortcut conv output is kept (3) right after it is rounded (2): the
 * block's tail, which normalises it, reads its bits, statistics included
 * (snn_batchnorm_neuron_bn_residual, batchnorm_stats with x_bf16).
 *
 * Test: tests/spike_pack_check.h, part 3 (test_spike_pack and test_cuda_spike_pack), and the
 * kernels' parity cases (tests/backend_ops_tensor.h).
 */
#include "autograd.h"
#include "tensor/arena.h"
#include "tensor/error.h"
#include "kernels/kernels.h"

snn_status snn_values_round_bf16(snn_tensor *t)
{
    const char *fn = "snn_values_round_bf16";
    if (t && t->bf16) return SNN_OK; /* rounded already */
    if (snn_check_tensor(fn, "t", t)) return snn_last_status();
    if (!t->pooled || t->base || t->spikes)
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad argument 't' (expected a conv's output taken "
                         "from the step pool, snn_conv2d_to_pool; got %s)", fn,
                         t->base ? "a view" : t->spikes ? "spikes (snn_spikes_pack keeps those)"
                                                        : "a tensor not from the step pool");
    const snn_kernels *k = snn_kernels_or_error(fn, t->device);
    if (!k) return snn_last_status();
    uint16_t *bf16 = snn_step_alloc(fn, (size_t)t->numel * sizeof(uint16_t), t->device);
    if (!bf16) return snn_last_status();
    k->round_bf16(t->data, bf16, t->numel);
    t->bf16 = bf16;
    return SNN_OK;
}

snn_status snn_values_keep_bf16(snn_tensor *t)
{
    const char *fn = "snn_values_keep_bf16";
    if (t && t->bf16 && !t->data) return SNN_OK; /* kept already */
    if (snn_check_tensor(fn, "t", t)) return snn_last_status();
    if (!t->bf16 || !t->pooled)
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad argument 't' (expected a tensor rounded by "
                         "snn_values_round_bf16 first)", fn);
    snn_step_pooled_tensor_give_back(t);
    return SNN_OK;
}
