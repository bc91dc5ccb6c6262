/*
 * neuron_table.c - the fast CPU neuron kernel table (kernels/neuron_kernels.h): blocked,
 * vectorised and threaded; each kernel is checked against the reference table
 * (kernels/ref/neuron_table.c) by tests/test_backend_ops.c.
 */
#include "neuron_cpu.h"

const snn_neuron_kernels snn_neuron_kernels_cpu = {
    .name = "cpu",
    .lif_forward = snn_lif_forward_cpu,
    .lif_backward = snn_lif_backward_cpu,
    .lif_bn_forward = snn_lif_bn_forward_cpu,
    .alif_forward = snn_alif_forward_cpu,
    .alif_backward = snn_alif_backward_cpu,
    .stbif_forward = snn_stbif_forward_cpu,
    .stbif_backward = snn_stbif_backward_cpu,
    .heaviside_forward = snn_heaviside_forward_cpu,
    .heaviside_backward = snn_heaviside_backward_cpu,
    .plane_norm_forward = snn_plane_norm_forward_cpu,
    .plane_norm_backward = snn_plane_norm_backward_cpu,
    .qclip_forward = snn_qclip_forward_cpu,
    .qclip_backward = snn_qclip_backward_cpu,
    .running_max_pool_forward = snn_running_max_pool_forward_cpu,
    .running_max_pool_backward = snn_running_max_pool_backward_cpu,
};
