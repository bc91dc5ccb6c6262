/*
 * backend_cuda.cu - the CUDA kernel table, and the memory entries it starts with.
 *
 * device_alloc is plain cudaMalloc: the step arena (tensor/arena.c) keeps its blocks from one
 * step to the next, so a training loop stops calling it after the first step. cudaFree
 * synchronises the whole device, which is another reason the arena keeps its blocks.
 *
 * Copies are queued on the one stream. Host-to-device from pageable memory returns once the
 * source has been staged, so the caller may reuse its buffer at once; device-to-host waits
 * for the stream, because the caller reads the result next (that wait is the only host
 * synchronisation besides `synchronize`).
 */
#include "cuda_common.cuh"
#include "kernels_cuda.h"

extern "C" void *snn_device_alloc_cuda(size_t bytes)
{
    void *p = NULL;
    if (cudaMalloc(&p, bytes) != cudaSuccess) {
        (void)cudaGetLastError(); /* out of memory is reported by returning NULL */
        return NULL;
    }
    return p;
}

extern "C" void snn_device_free_cuda(void *p)
{
    if (p) SNN_CUDA_CHECK(cudaFree(p));
}

extern "C" void snn_copy_cuda(void *dst, const void *src, size_t bytes, snn_copy_kind kind)
{
    if (bytes == 0) return;
    cudaStream_t stream = snn_cuda_stream();
    switch (kind) {
    case SNN_COPY_HOST_TO_DEVICE:
        SNN_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream));
        return;
    case SNN_COPY_DEVICE_TO_HOST:
        SNN_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream));
        SNN_CUDA_CHECK(cudaStreamSynchronize(stream));
        return;
    case SNN_COPY_DEVICE_TO_DEVICE:
        SNN_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream));
        return;
    }
    snn_cuda_fail("snn_copy_cuda", __FILE__, __LINE__, "unknown copy kind");
}

extern "C" void snn_synchronize_cuda(void)
{
    SNN_CUDA_CHECK(cudaStreamSynchronize(snn_cuda_stream()));
}

/* Free and total bytes of the current device as the driver sees them now: memory other
 * processes hold is already taken out of `available`. The first call creates the context, so
 * the context's own reservation is not counted as available either. */
extern "C" int snn_memory_info_cuda(size_t *available, size_t *total)
{
    size_t free_bytes = 0, total_bytes = 0;
    if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) {
        (void)cudaGetLastError(); /* reported to the caller as "cannot tell" */
        return -1;
    }
    *available = free_bytes;
    *total = total_bytes;
    return 0;
}

/* Field by field, so that a new entry in kernels.h left unset here is caught by the test
 * (tests/test_cuda_kernels.c checks that no entry is NULL). */
static snn_kernels make_cuda_table(void)
{
    snn_kernels k = {};
    k.name = "cuda";
    k.device_alloc = snn_device_alloc_cuda;
    k.device_free = snn_device_free_cuda;
    k.copy = snn_copy_cuda;
    k.synchronize = snn_synchronize_cuda;
    k.memory_info = snn_memory_info_cuda;
    k.fill = snn_fill_cuda;
    k.axpy = snn_axpy_cuda;
    k.pack_bits = snn_pack_bits_cuda;
    k.unpack_bits = snn_unpack_bits_cuda;
    k.round_bf16 = snn_round_bf16_cuda;
    k.unpack_bf16 = snn_unpack_bf16_cuda;
    k.lerp = snn_lerp_cuda;
    k.unary_forward = snn_unary_forward_cuda;
    k.unary_backward = snn_unary_backward_cuda;
    k.binary_forward = snn_binary_forward_cuda;
    k.binary_backward = snn_binary_backward_cuda;
    k.sum_dim = snn_sum_dim_cuda;
    k.expand_dim = snn_expand_dim_cuda;
    k.transpose01 = snn_transpose01_cuda;
    k.gemm = snn_gemm_cuda;
    k.bias_forward = snn_bias_forward_cuda;
    k.bias_backward = snn_bias_backward_cuda;
    k.conv2d_workspace_bytes = snn_conv2d_workspace_bytes_cuda;
    k.conv2d_forward = snn_conv2d_forward_cuda;
    k.conv2d_forward_bn_eval = snn_conv2d_forward_bn_eval_cuda;
    k.conv2d_backward = snn_conv2d_backward_cuda;
    k.conv2d_forward_bits = snn_conv2d_forward_bits_cuda;
    k.conv2d_reads_bits = snn_conv2d_reads_bits_cuda;
    k.conv2d_backward_bits = snn_conv2d_backward_bits_cuda;
    k.conv2d_dx_over_dout = snn_conv2d_dx_over_dout_cuda;
    k.conv2d_backward_consuming = snn_conv2d_backward_consuming_cuda;
    k.conv2d_backward_consuming_workspace_bytes =
        snn_conv2d_backward_consuming_workspace_bytes_cuda;
    k.conv2d_backward_bn_dout = snn_conv2d_backward_bn_dout_cuda;
    k.max_pool2d_forward = snn_max_pool2d_forward_cuda;
    k.max_pool2d_backward = snn_max_pool2d_backward_cuda;
    k.avg_pool2d_forward = snn_avg_pool2d_forward_cuda;
    k.avg_pool2d_backward = snn_avg_pool2d_backward_cuda;
    k.delay_kernel_forward = snn_delay_kernel_forward_cuda;
    k.delay_kernel_backward = snn_delay_kernel_backward_cuda;
    k.temporal_conv_forward = snn_temporal_conv_forward_cuda;
    k.temporal_conv_backward = snn_temporal_conv_backward_cuda;
    k.batchnorm_forward_train = snn_batchnorm_forward_train_cuda;
    k.batchnorm_forward_eval = snn_batchnorm_forward_eval_cuda;
    k.batchnorm_backward = snn_batchnorm_backward_cuda;
    k.batchnorm_backward_in_place = snn_batchnorm_backward_in_place_cuda;
    k.batchnorm_backward_in_place_sums = snn_batchnorm_backward_in_place_sums_cuda;
    k.batchnorm_stats = snn_batchnorm_stats_cuda;
    k.batchnorm_stats_merge = snn_batchnorm_stats_merge_cuda;
    k.batchnorm_normalise = snn_batchnorm_normalise_cuda;
    k.batchnorm_backward_sums = snn_batchnorm_backward_sums_cuda;
    k.batchnorm_backward_apply = snn_batchnorm_backward_apply_cuda;
    k.log_softmax_forward = snn_log_softmax_forward_cuda;
    k.log_softmax_backward = snn_log_softmax_backward_cuda;
    k.nll_forward = snn_nll_forward_cuda;
    k.nll_backward = snn_nll_backward_cuda;
    k.one_hot = snn_one_hot_cuda;
    k.argmax_rows = snn_argmax_rows_cuda;
    k.dropout_mask = snn_dropout_mask_cuda;
    k.poisson_encode = snn_poisson_encode_cuda;
    k.sgd_update = snn_sgd_update_cuda;
    k.adam_update = snn_adam_update_cuda;
    k.adam_update_many = snn_adam_update_many_cuda;
    k.sumsq_and_finite = snn_sumsq_and_finite_cuda;
    return k;
}

/* kernels.h declares it extern "C", so this const object has external linkage. It is built
 * during static initialisation, before main() can reach it through snn_kernels_for(). */
const snn_kernels snn_kernels_cuda = make_cuda_table();
