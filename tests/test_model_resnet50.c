/*
 * test_model_resnet50.c - snn.c's tiny spiking ResNet-50 (bottleneck blocks) on the CPU against
 * the PyTorch golden file tests/ref/tiny_resnet50.safetensors (see model_golden.h and
 * tests/ref/make_ref.py): logits, loss, every gradient and 10 SGD losses. Skipped (exit 77) if
 * the file is missing. Run: ctest --test-dir build -R '^model_resnet50$'
 */
#include "model_golden.h"

static void test_golden_resnet50_cpu(void)
{
    golden_check_model(SNN_CPU, SNN_MODEL_RESNET50, GOLDEN_PATH_RESNET50);
}

int main(void)
{
    golden_require(GOLDEN_PATH_RESNET50);
    snn_set_num_threads(2);
    RUN(test_golden_resnet50_cpu);
    return test_finish();
}
