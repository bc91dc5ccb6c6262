/*
 * test_cuda_memory_diet.c - test_memory_diet.c's checks on the GPU: the CUDA neuron kernel
 * keeping H over its input (lif.cu) and the in-place residual sum give the plain ops' results
 * bit for bit. Skipped (exit 77) without a GPU.
 */
#include "memory_diet_check.h"

static void test_if(void) { check_diet(SNN_NEURON_IF, SNN_CUDA); }
static void test_lif(void) { check_diet(SNN_NEURON_LIF, SNN_CUDA); }
static void test_plif(void) { check_diet(SNN_NEURON_PLIF, SNN_CUDA); }

int main(void)
{
    test_require_cuda();
    RUN(test_if);
    RUN(test_lif);
    RUN(test_plif);
    return test_finish();
}
