/*
 * test_cuda_forward_graph.c - the CUDA Graph of an eval forward (nn/forward_graph.c) against
 * the eager forward, bit for bit, on the spiking CNN and ResNet-18, in fp32, TF32 and BF16
 * (whose im2col convs add a weight conversion and bf16 GEMMs to the captured work).
 * Skipped (exit 77) without a GPU.
 */
#include "forward_graph_check.h"

static void test_cnn(void) { check_graph_matches_eager(SNN_MODEL_SPIKING_CNN, SNN_CUDA); }
static void test_resnet18(void) { check_graph_matches_eager(SNN_MODEL_RESNET18, SNN_CUDA); }

static void test_resnet18_tf32(void)
{
    CHECK_OK(snn_set_precision(SNN_PRECISION_TF32));
    check_graph_matches_eager(SNN_MODEL_RESNET18, SNN_CUDA);
    CHECK_OK(snn_set_precision(SNN_PRECISION_FP32));
}

static void test_bf16(void)
{
    CHECK_OK(snn_set_precision(SNN_PRECISION_BF16));
    check_graph_matches_eager(SNN_MODEL_SPIKING_CNN, SNN_CUDA);
    check_graph_matches_eager(SNN_MODEL_RESNET18, SNN_CUDA);
    CHECK_OK(snn_set_precision(SNN_PRECISION_FP32));
}

int main(void)
{
    test_require_cuda();
    RUN(test_cnn);
    RUN(test_resnet18);
    RUN(test_resnet18_tf32);
    RUN(test_bf16);
    return test_finish();
}
