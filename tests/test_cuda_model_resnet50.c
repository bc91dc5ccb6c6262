/*
 * test_cuda_model_resnet50.c - the golden check of test_model_resnet50.c on the GPU: the tiny
 * spiking ResNet-50 against tests/ref/tiny_resnet50.safetensors. Skipped (exit 77) without a GPU
 * or the file.
 */
#include "model_golden.h"

static void test_golden_resnet50_cuda(void)
{
    golden_check_model(SNN_CUDA, SNN_MODEL_RESNET50, GOLDEN_PATH_RESNET50);
}

int main(void)
{
    test_require_cuda();
    golden_require(GOLDEN_PATH_RESNET50);
    RUN(test_golden_resnet50_cuda);
    return test_finish();
}
