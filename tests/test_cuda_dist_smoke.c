#define _DEFAULT_SOURCE /* mkdtemp */
/*
 * test_cuda_dist_smoke.c - the NCCL code path on one GPU: snn-train --gpus 1 is a world of one
 * rank that goes through the launcher, the rendezvous, ncclCommInitRank, the gradient buckets
 * on the side stream and (with --sync-bn) the split batch-norm kernels with NCCL collectives,
 * and must give the plain one-GPU run's checkpoint byte for byte: NCCL's sum over one rank is
 * the identity, and the split kernels of one rank are the fused ones' bits. Skipped (exit 77)
 * without a GPU, without NCCL in the build or without Fashion-MNIST.
 *
 *     ctest --test-dir build -R cuda_dist_smoke --output-on-failure
 */
#include "program_runner.h"
#include "snn.h"
#include "test.h"

static void test_world_of_one_is_the_plain_run(void)
{
    const char *common = "--device cuda --limit-train 1280 --limit-test 500 --epochs 1 --batch-size 128";
    char args[1024];
    snprintf(args, sizeof args, "%s --out %s/plain", common, tmp);
    CHECK(run(TRAIN " %s", args) == 0);
    snprintf(args, sizeof args, "%s --gpus 1 --out %s/world1", common, tmp);
    CHECK(run("SNN_DIST_VERIFY=1 " TRAIN " %s", args) == 0);
    CHECK(output_contains("rank 0 of 1 (nccl backend"));
    snprintf(args, sizeof args, "%s --gpus 1 --sync-bn --out %s/world1_syncbn", common, tmp);
    CHECK(run(TRAIN " %s", args) == 0);
    char a[600], b[600], c[600];
    snprintf(a, sizeof a, "%s/plain/checkpoint.safetensors", tmp);
    snprintf(b, sizeof b, "%s/world1/checkpoint.safetensors", tmp);
    snprintf(c, sizeof c, "%s/world1_syncbn/checkpoint.safetensors", tmp);
    CHECK(same_file(a, b));
    CHECK(same_file(a, c));
    char dir[400];
    snprintf(dir, sizeof dir, "%s/world1", tmp);
    CHECK(last_test_accuracy(dir) >= 0.0);
}

int main(void)
{
    test_require_cuda();
    if (!snn_dist_nccl_compiled() || !fashion_mnist_available()) {
        fprintf(stderr, "skipped: needs NCCL in the build (%s) and Fashion-MNIST\n",
                snn_dist_nccl_compiled() ? "yes" : "no");
        return 77;
    }
    if (runner_begin("cuda_dist_smoke")) return 1;
    RUN(test_world_of_one_is_the_plain_run);
    runner_end(test_failures);
    return test_finish();
}
