#define _DEFAULT_SOURCE /* mkdtemp */
/*
 * test_cuda_train.c - snn-train and snn-eval on the GPU, end to end: a short CUDA run learns,
 * its checkpoint (saved from device tensors) evaluates to the same accuracy with snn-eval on the
 * GPU and on the CPU, and resuming on the GPU continues bit-exactly (every CUDA reduction in
 * snn.c sums in a fixed order). Skipped (exit 77) without a GPU or without Fashion-MNIST.
 * Run: ctest --test-dir build -R '^cuda_train$' --output-on-failure
 */
#include "program_runner.h"
#include "snn.h"
#include "test.h"

static void test_cuda_run_resume_and_eval(void)
{
    const char *common = "--device cuda --T 2 --batch-size 64 --limit-train 6400 --limit-test 1000";
    char args[1024], a[300], b[300], ca[600], cb[600];
    snprintf(a, sizeof a, "%s/straight", tmp);
    snprintf(b, sizeof b, "%s/resumed", tmp);
    snprintf(args, sizeof args, "%s --epochs 2 --out %s", common, a);
    CHECK(run(TRAIN " %s", args) == 0);
    double acc = last_test_accuracy(a);
    fprintf(stderr, "  test accuracy after two short CUDA epochs: %.4f (needs >= 0.75)\n", acc);
    CHECK(acc >= 0.75);
    snprintf(args, sizeof args, "%s --epochs 2 --stop-after 1 --out %s", common, b);
    CHECK(run(TRAIN " %s", args) == 0);
    snprintf(args, sizeof args, "%s --epochs 2 --out %s --resume %s/checkpoint.safetensors", common, b, b);
    CHECK(run(TRAIN " %s", args) == 0 && output_contains("resumed from"));
    snprintf(ca, sizeof ca, "%s/checkpoint.safetensors", a);
    snprintf(cb, sizeof cb, "%s/checkpoint.safetensors", b);
    CHECK(same_file(ca, cb));
    /* the checkpoint written from device tensors evaluates the same on either device */
    char expect[64];
    snprintf(expect, sizeof expect, "accuracy    %.2f%%", 100.0 * acc);
    for (int d = 0; d < 2; d++) {
        snprintf(args, sizeof args, "--checkpoint %s --limit-test 1000 --device %s", ca, d ? "cpu" : "cuda");
        CHECK(run(EVAL " %s", args) == 0 && output_contains(expect));
    }
}

int main(void)
{
    test_require_cuda();
    if (!fashion_mnist_available()) {
        fprintf(stderr, "skipped: no Fashion-MNIST where the programs look (apt-get install "
                        "dataset-fashion-mnist, or point SNN_DATA_DIR at it)\n");
        return 77;
    }
    if (runner_begin("test_cuda_train")) return 1;
    RUN(test_cuda_run_resume_and_eval);
    runner_end(test_failures);
    return test_finish();
}
