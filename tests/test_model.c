/*
 * test_model.c - snn.c's tiny spiking ResNet-18 on the CPU against the PyTorch golden file
 * (see model_golden.h and tests/ref/make_ref.py). Run: ctest --test-dir build -R '^model$'
 */
#include "model_golden.h"

static void test_golden_cpu(void) { golden_check(SNN_CPU); }

int main(void)
{
    snn_set_num_threads(2);
    RUN(test_golden_cpu);
    return test_finish();
}
