/*
 * table.c - the fast CPU kernel table: blocked, vectorised and threaded kernels, each checked
 * against the reference table (kernels/ref/table.c) by tests/test_backend_ops.c. Host memory
 * is tensor/host_memory.c's, shared with the reference table, and so are the few kernels whose
 * plain loop nothing speeds up (they name their _ref function below).
 */
#include "kernels/ref/kernels_ref.h"
#include "kernels_cpu.h"
#include "tensor/host_memory.h"

const snn_kernels snn_kernels_cpu = {
    .name = "cpu",
    .device_alloc = snn_host_alloc,
    .device_free = snn_host_free,
    .copy = snn_host_copy,
    .synchronize = snn_host_synchronize,
    .memory_info = snn_memory_info_cpu,
    .fill = snn_fill_cpu,
    .axpy = snn_axpy_cpu,
    .pack_bits = snn_pack_bits_cpu,
    .unpack_bits = snn_unpack_bits_cpu,
    .round_bf16 = snn_round_bf16_ref,   /* one pass over memory: the plain loop is the fast one */
    .unpack_bf16 = snn_unpack_bf16_ref,
    .lerp = snn_lerp_cpu,
    .unary_forward = snn_unary_forward_cpu,
    .unary_backward = snn_unary_backward_cpu,
    .binary_forward = snn_binary_forward_cpu,
    .binary_backward = snn_binary_backward_cpu,
    .sum_dim = snn_sum_dim_cpu,
    .expand_dim = snn_expand_dim_cpu,
    .transpose01 = snn_transpose01_ref, /* a strided copy: the plain loop is the fast one */
    .gemm = snn_gemm_cpu,
    .bias_forward = snn_bias_forward_cpu,
    .bias_backward = snn_bias_backward_cpu,
    .conv2d_workspace_bytes = snn_conv2d_workspace_bytes_cpu,
    .conv2d_forward = snn_conv2d_forward_cpu,
    .conv2d_forward_bn_eval = snn_conv2d_forward_bn_eval_cpu,
    .conv2d_backward = snn_conv2d_backward_cpu,
    .conv2d_dx_over_dout = snn_conv2d_dx_over_dout_cpu,
    .conv2d_backward_consuming = NULL, /* optional (kernels.h): no scratch to keep in dout */
    .conv2d_backward_consuming_workspace_bytes = NULL,
    .max_pool2d_forward = snn_max_pool2d_forward_cpu,
    .max_pool2d_backward = snn_max_pool2d_backward_cpu,
    .avg_pool2d_forward = snn_avg_pool2d_forward_cpu,
    .avg_pool2d_backward = snn_avg_pool2d_backward_cpu,
    /* D exponentials a synapse, O I synapses: next to the conv's 2 T N O I D FLOPs it costs
     * nothing, so the plain loop is the fast one */
    .delay_kernel_forward = snn_delay_kernel_forward_ref,
    .delay_kernel_backward = snn_delay_kernel_backward_ref,
    .temporal_conv_forward = snn_temporal_conv_forward_cpu,
    .temporal_conv_backward = snn_temporal_conv_backward_cpu,
    .batchnorm_forward_train = snn_batchnorm_forward_train_cpu,
    .batchnorm_forward_eval = snn_batchnorm_forward_eval_cpu,
    .batchnorm_backward = snn_batchnorm_backward_cpu,
    .batchnorm_backward_in_place = snn_batchnorm_backward_in_place_cpu,
    .batchnorm_backward_in_place_sums = snn_batchnorm_backward_in_place_sums_cpu,
    .batchnorm_stats = snn_batchnorm_stats_cpu,
    .batchnorm_stats_merge = snn_batchnorm_stats_merge_cpu,
    .batchnorm_normalise = snn_batchnorm_normalise_cpu,
    .batchnorm_backward_sums = snn_batchnorm_backward_sums_cpu,
    .batchnorm_backward_apply = snn_batchnorm_backward_apply_cpu,
    .log_softmax_forward = snn_log_softmax_forward_cpu,
    .log_softmax_backward = snn_log_softmax_backward_cpu,
    .nll_forward = snn_nll_forward_ref,   /* one gather a row: the plain loop is the fast one */
    .nll_backward = snn_nll_backward_ref,
    .one_hot = snn_one_hot_cpu,
    .argmax_rows = snn_argmax_rows_cpu,
    .dropout_mask = snn_dropout_mask_cpu,
    .poisson_encode = snn_poisson_encode_cpu,
    .sgd_update = snn_sgd_update_cpu,
    .adam_update = snn_adam_update_cpu,
    .adam_update_many = snn_adam_update_many_cpu,
    .sumsq_and_finite = snn_sumsq_and_finite_cpu,
};
