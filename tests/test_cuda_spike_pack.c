/*
 * test_cuda_spike_pack.c - spikes kept as bits for backward (autograd/spike_pack.c) on the GPU:
 *
 *   1. the CUDA pack / unpack kernels give the words and floats a plain loop gives, at lengths
 *      around a 32-bit word (spike_pack_check.h), so they match the CPU's bit for bit;
 *   2. a training step of ResNet-18, SEW-ResNet-18 and ResNet-50, fused and not, packing on and
 *      off: the same bits everywhere. At T = 2 the fused backward is the one-pass kernel, which
 *      reads a block's shortcut unpacked; at T = 17 it is the scratch path, which also unpacks
 *      its own spikes; and once in BF16, the precision the memory target is for.
 * Without a GPU it exits 77 (skipped). Run: ctest --test-dir build -R cuda_spike_pack
 */
#include "spike_pack_check.h"

static void test_kernels(void) { check_pack_kernels(SNN_CUDA); }
static void test_models_t2(void) { check_models_packing(SNN_CUDA, 2); }
static void test_models_t17(void) { check_models_packing(SNN_CUDA, 17); }

static void test_models_bf16(void)
{
    CHECK_OK(snn_set_precision(SNN_PRECISION_BF16));
    check_models_packing(SNN_CUDA, 4);
    CHECK_OK(snn_set_precision(SNN_PRECISION_FP32));
}

int main(void)
{
    if (!snn_cuda_available()) {
        fprintf(stderr, "test_cuda_spike_pack: no CUDA device: skipped\n");
        return 77;
    }
    RUN(test_kernels);
    RUN(test_models_t2);
    RUN(test_models_t17);
    RUN(test_models_bf16);
    return test_finish();
}
