/*
 * neuron_kernels.cu - snn_neuron_kernels_cuda, the CUDA neuron kernel table: every entry of
 * snn_neuron_kernels (neuron_kernels.h, where the contracts are) with its CUDA launcher.
 * neuron_dispatch.c hands it out for SNN_CUDA when a GPU is visible. Each launcher matches the
 * CPU entry of the same name (neuron_dispatch.c's snn_neuron_kernels_cpu): spikes and activity
 * bit for bit, H, gradients and dw to a tolerance (tests/test_cuda_neurons.c).
 */
#include "neuron_cuda.cuh"

extern "C" const snn_neuron_kernels snn_neuron_kernels_cuda = {
    /* .name = */ "cuda",
    /* .lif_forward = */ snn_lif_forward_cuda,
    /* .lif_backward = */ snn_lif_backward_cuda,
    /* .lif_bn_forward = */ snn_lif_bn_forward_cuda,
    /* .lif_bn_backward = */ snn_lif_bn_backward_cuda,
    /* .alif_forward = */ snn_alif_forward_cuda,
    /* .alif_backward = */ snn_alif_backward_cuda,
    /* .stbif_forward = */ snn_stbif_forward_cuda,
    /* .stbif_backward = */ snn_stbif_backward_cuda,
    /* .heaviside_forward = */ snn_heaviside_forward_cuda,
    /* .heaviside_backward = */ snn_heaviside_backward_cuda,
    /* .plane_norm_forward = */ snn_plane_norm_forward_cuda,
    /* .plane_norm_backward = */ snn_plane_norm_backward_cuda,
    /* .qclip_forward = */ snn_qclip_forward_cuda,
    /* .qclip_backward = */ snn_qclip_backward_cuda,
    /* .running_max_pool_forward = */ snn_running_max_pool_forward_cuda,
    /* .running_max_pool_backward = */ snn_running_max_pool_backward_cuda,
};
