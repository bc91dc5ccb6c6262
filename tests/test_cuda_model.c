/*
 * test_cuda_model.c - the golden check of test_model.c on the GPU: the tiny spiking ResNet-18
 * on CUDA against the PyTorch reference file. Skipped (exit 77) without a GPU.
 */
#include "model_golden.h"

static void test_golden_cuda(void) { golden_check(SNN_CUDA); }

int main(void)
{
    test_require_cuda();
    RUN(test_golden_cuda);
    return test_finish();
}
