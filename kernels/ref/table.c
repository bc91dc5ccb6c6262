/*
 * table.c - the reference kernel table: every tensor op of snn.c as plain loops.
 *
 * What the reference is. Each kernel is the op's equation written as loops, with nothing
 * added for speed: no threads, no blocking, no vector intrinsics, no special cases. It is the
 * truth the other tables are checked against (tests/test_backend_ops.c runs every fast CPU and
 * CUDA kernel against it), and a backend of its own: `--kernels ref`, SNN_KERNELS=ref or
 * snn_set_kernels(SNN_KERNELS_REF) trains on it, slower, to the same accuracy.
 *
 * How to read it. Every file opens with its equations and the shapes of its buffers; the code
 * below them is those equations and nothing else. Conventions (kernels/kernels.h): outputs
 * come first in the arguments; forward kernels overwrite, backward kernels ADD into their
 * gradients (a NULL gradient is not wanted and is skipped). In reading order:
 *
 *   elementwise.c  fill, axpy, unary and binary ops; broadcasting and why its gradient is a sum
 *   reduce.c       sums and copies along one axis, argmax of rows
 *   transpose.c    the first two axes swapped (images read as sequences)
 *   gemm.c         the triple-loop matrix multiply (linear layers), the per-channel bias
 *   conv2d.c       convolution and its two gradients, as the same sum read three ways
 *   batchnorm.c    batch statistics, normalising, and the gradient through the statistics
 *                  (batchnorm_sync.c: the same, cut where data-parallel ranks exchange sums)
 *   pool2d.c       max- and average-pooling
 *   delay.c        learnable synaptic delays: the Gaussian delay kernel, the causal temporal conv
 *   loss.c         log-softmax, negative log-likelihood: cross-entropy
 *   optim.c        SGD and Adam
 *   bits.c, dropout.c, encode.c   spikes as bits, random masks and spikes from a hash
 *
 * The spiking neurons have a table of their own, neuron_table.c. The fast CPU kernels
 * (kernels/cpu/) compute the same functions as these, in other orders and on many threads.
 */
#include "kernels_ref.h"
#include "tensor/host_memory.h"

const snn_kernels snn_kernels_ref = {
    .name = "ref",
    .device_alloc = snn_host_alloc,
    .device_free = snn_host_free,
    .copy = snn_host_copy,
    .synchronize = snn_host_synchronize,
    .memory_info = snn_memory_info_cpu,
    .fill = snn_fill_ref,
    .axpy = snn_axpy_ref,
    .lerp = snn_lerp_ref,
    .pack_bits = snn_pack_bits_ref,
    .unpack_bits = snn_unpack_bits_ref,
    .round_bf16 = snn_round_bf16_ref,
    .unpack_bf16 = snn_unpack_bf16_ref,
    .unary_forward = snn_unary_forward_ref,
    .unary_backward = snn_unary_backward_ref,
    .binary_forward = snn_binary_forward_ref,
    .binary_backward = snn_binary_backward_ref,
    .sum_dim = snn_sum_dim_ref,
    .expand_dim = snn_expand_dim_ref,
    .transpose01 = snn_transpose01_ref,
    .gemm = snn_gemm_ref,
    .bias_forward = snn_bias_forward_ref,
    .bias_backward = snn_bias_backward_ref,
    .conv2d_workspace_bytes = snn_conv2d_workspace_bytes_ref,
    .conv2d_forward = snn_conv2d_forward_ref,
    .conv2d_forward_bits = NULL,  /* optional (kernels.h): autograd unpacks the bits instead */
    .conv2d_reads_bits = NULL,
    .conv2d_backward_bits = NULL, /* optional (kernels.h): autograd unpacks the bits instead */
    .conv2d_backward = snn_conv2d_backward_ref,
    .conv2d_dx_over_dout = NULL, /* optional (kernels.h): dx gets a buffer of its own */
    .conv2d_backward_consuming = NULL, /* optional: dout is read, never written */
    .conv2d_backward_consuming_workspace_bytes = NULL,
    .conv2d_forward_bn_eval = snn_conv2d_forward_bn_eval_ref,
    .max_pool2d_forward = snn_max_pool2d_forward_ref,
    .max_pool2d_backward = snn_max_pool2d_backward_ref,
    .avg_pool2d_forward = snn_avg_pool2d_forward_ref,
    .avg_pool2d_backward = snn_avg_pool2d_backward_ref,
    .delay_kernel_forward = snn_delay_kernel_forward_ref,
    .delay_kernel_backward = snn_delay_kernel_backward_ref,
    .temporal_conv_forward = snn_temporal_conv_forward_ref,
    .temporal_conv_backward = snn_temporal_conv_backward_ref,
    .batchnorm_forward_train = snn_batchnorm_forward_train_ref,
    .batchnorm_forward_eval = snn_batchnorm_forward_eval_ref,
    .batchnorm_backward = snn_batchnorm_backward_ref,
    .batchnorm_backward_in_place = snn_batchnorm_backward_in_place_ref,
    .batchnorm_backward_in_place_sums = snn_batchnorm_backward_in_place_sums_ref,
    .batchnorm_stats = snn_batchnorm_stats_ref,
    .batchnorm_stats_merge = snn_batchnorm_stats_merge_ref,
    .batchnorm_normalise = snn_batchnorm_normalise_ref,
    .batchnorm_backward_sums = snn_batchnorm_backward_sums_ref,
    .batchnorm_backward_apply = snn_batchnorm_backward_apply_ref,
    .log_softmax_forward = snn_log_softmax_forward_ref,
    .log_softmax_backward = snn_log_softmax_backward_ref,
    .nll_forward = snn_nll_forward_ref,
    .nll_backward = snn_nll_backward_ref,
    .one_hot = snn_one_hot_ref,
    .argmax_rows = snn_argmax_rows_ref,
    .dropout_mask = snn_dropout_mask_ref,
    .poisson_encode = snn_poisson_encode_ref,
    .sgd_update = snn_sgd_update_ref,
    .adam_update = snn_adam_update_ref,
    .adam_update_many = snn_adam_update_many_ref,
    .sumsq_and_finite = snn_sumsq_and_finite_ref,
};
