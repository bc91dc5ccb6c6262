#define _DEFAULT_SOURCE /* mkdtemp */
/*
 * test_multigpu_train.c - snn-train on 2 GPUs with NCCL, end to end (label multigpu):
 *   - with --sync-bn, 2 GPUs x batch 64 (and, where the host has 4 GPUs, 4 x 32) follow the
 *     1-GPU batch-128 run's loss within 1e-4 relative over 50 steps of the Fashion-MNIST CNN
 *     (fp32), and every rank holds the same parameters after every step (SNN_DIST_VERIFY=1: a
 *     hash of each rank's parameters);
 *   - --gpus 2 without --device trains on the GPUs (the launcher passes the implied device on);
 *   - a 2-GPU run stopped after one epoch and resumed on 2 GPUs ends bit-exactly where the
 *     uninterrupted run ends; the 2-GPU checkpoint resumes on 1 GPU and evaluates with snn-eval;
 *   - a killed rank ends the run within a bounded time, with messages naming it, and leaves the
 *     checkpoint of the last finished epoch intact (byte for byte the one of a run that stopped
 *     there by itself);
 *   - a SIGTERM that rank 1 alone gets mid-epoch stops both ranks after the same step (the
 *     next loss read, every 20 steps on CUDA), rank 0 saves a mid-epoch checkpoint, both exit 75, and
 *     the resumed run ends where the uninterrupted one does, byte for byte.
 * Skipped (exit 77) with fewer than 2 GPUs, without NCCL in the build, or without Fashion-MNIST.
 * tests/test_dist_train.c and test_dist_faults.c run the same checks on CPU ranks in CI.
 *
 *     ctest --test-dir build -L multigpu --output-on-failure
 */
#include <time.h>

#include "program_runner.h"
#include "snn.h"
#include "kernels/kernels.h"
#include "test.h"

static int read_steps(const char *path, long *step, double *loss, int max)
{
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    int n = 0;
    double lr;
    while (n < max && fscanf(f, "%ld,%lf,%lf", &step[n], &loss[n], &lr) == 3) n++;
    fclose(f);
    return n;
}

static double wall(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* With --sync-bn, `gpus` GPUs x (128 / gpus) images follow 1 GPU x 128 step for step. */
static void gpus_follow_one(int gpus)
{
    /* the Fashion-MNIST CNN of snn-train's defaults, fp32: 6400 images = 50 steps of 128 */
    const char *common = "--device cuda --limit-train 6400 --limit-test 1000 --epochs 1 --log-every 1";
    char args[1024], p1[400], p2[400];
    snprintf(p1, sizeof p1, "%s/one.log", tmp);
    snprintf(p2, sizeof p2, "%s/gpus%d.log", tmp, gpus);
    if (access(p1, R_OK) != 0) { /* the 1-GPU run is made once */
        snprintf(args, sizeof args, "%s --batch-size 128 --out %s/one --step-log %s", common, tmp, p1);
        CHECK(run(TRAIN " %s", args) == 0);
    }
    snprintf(args, sizeof args, "%s --gpus %d --batch-size %d --sync-bn --out %s/gpus%d --step-log %s",
             common, gpus, 128 / gpus, tmp, gpus, p2);
    CHECK(run("SNN_DIST_VERIFY=1 " TRAIN " %s", args) == 0);
    char banner[64];
    snprintf(banner, sizeof banner, "rank 0 of %d (nccl backend", gpus);
    CHECK(output_contains(banner));
    long s1[64], s2[64];
    double l1[64], l2[64];
    int n1 = read_steps(p1, s1, l1, 64), n2 = read_steps(p2, s2, l2, 64);
    CHECK(n1 == 50 && n2 == 50);
    double worst = 0.0;
    int at = -1;
    for (int i = 0; i < n1 && i < n2; i++) {
        CHECK(s1[i] == s2[i]);
        double rel = fabs(l1[i] - l2[i]) / fabs(l1[i]);
        if (!(rel <= worst)) worst = rel, at = i;
    }
    fprintf(stderr, "  %d GPUs x %d (sync-BN) vs 1 GPU x 128, 50 steps: worst relative loss "
            "difference %.3g (step %d); final loss %.6f vs %.6f\n", gpus, 128 / gpus, worst, at,
            n1 ? l1[n1 - 1] : 0.0, n2 ? l2[n2 - 1] : 0.0);
    CHECK(worst <= 1e-4);
}

static void test_two_gpus_follow_one(void) { gpus_follow_one(2); }

/* Run where the host has 4 GPUs or more: a ring of 4, each rank with a quarter of the batch. */
static void test_four_gpus_follow_one(void) { gpus_follow_one(4); }

#define COMMON2 "--device cuda --limit-train 3200 --limit-test 500 --epochs 2 --batch-size 64 --gpus 2"

/* `snn-train --gpus 2` with no --device, as the README shows it: the ranks train on the GPUs
 * (through NCCL), and --precision, which needs them, is accepted. (A rank runs the command line
 * less --gpus; before the launcher passed on the device it had implied, the ranks took the
 * default, the CPU, and a --precision run exited 2.) */
static void test_gpus_implies_cuda(void)
{
    char args[512];
    snprintf(args, sizeof args, "--gpus 2 --precision tf32 --limit-train 1280 --limit-test 256 "
             "--epochs 1 --batch-size 64 --out %s/implied", tmp);
    CHECK(run(TRAIN " %s", args) == 0);
    CHECK(output_contains("one per GPU") && output_contains("rank 0 of 2 (nccl backend") &&
          output_contains(", cuda, "));
}

static void test_resume(void)
{
    char args[1024], cmd[1200];
    snprintf(args, sizeof args, COMMON2 " --out %s/straight", tmp);
    CHECK(run(TRAIN " %s", args) == 0);
    snprintf(args, sizeof args, COMMON2 " --stop-after 1 --out %s/split", tmp);
    CHECK(run(TRAIN " %s", args) == 0);
    snprintf(cmd, sizeof cmd, "cp %s/split/checkpoint.safetensors %s/epoch1.safetensors", tmp, tmp);
    CHECK(system(cmd) == 0);
    snprintf(args, sizeof args, COMMON2 " --out %s/split --resume %s/split/checkpoint.safetensors", tmp, tmp);
    CHECK(run(TRAIN " %s", args) == 0 && output_contains("resumed from"));
    char a[600], b[600];
    snprintf(a, sizeof a, "%s/straight/checkpoint.safetensors", tmp);
    snprintf(b, sizeof b, "%s/split/checkpoint.safetensors", tmp);
    CHECK(same_file(a, b)); /* bit-exact resume at the same number of GPUs */
    /* the 2-GPU checkpoint of epoch 1 resumes on 1 GPU with the same global batch */
    snprintf(args, sizeof args, "--device cuda --limit-train 3200 --limit-test 500 --epochs 2 "
             "--batch-size 128 --out %s/one_gpu --resume %s/epoch1.safetensors", tmp, tmp);
    CHECK(run(TRAIN " %s", args) == 0 && output_contains("epoch 2:"));
    char straight[400], one[400];
    snprintf(straight, sizeof straight, "%s/straight", tmp);
    snprintf(one, sizeof one, "%s/one_gpu", tmp);
    double acc = last_test_accuracy(straight), acc1 = last_test_accuracy(one);
    fprintf(stderr, "  test accuracy after 2 epochs: 2 GPUs %.4f, resumed on 1 GPU %.4f\n", acc, acc1);
    CHECK(acc > 0.5 && acc1 > 0.5);
    /* and evaluates with snn-eval on one GPU */
    snprintf(args, sizeof args, "--checkpoint %s --limit-test 500 --device cuda", a);
    char expect[64];
    snprintf(expect, sizeof expect, "accuracy    %.2f%%", 100.0 * acc);
    CHECK(run(EVAL " %s", args) == 0 && output_contains(expect));
}

static void test_killed_rank(void)
{
    char args[1024];
    /* 25 steps per epoch; rank 1 dies at its 30th step, in epoch 2 */
    snprintf(args, sizeof args, COMMON2 " --out %s/killed", tmp);
    double start = wall();
    int code = run("SNN_DIST_KILL=1:30 " TRAIN " %s", args);
    double seconds = wall() - start;
    fprintf(stderr, "  killed rank: exit %d after %.1f s\n", code, seconds);
    CHECK(code == 128 + 9);
    CHECK(output_contains("rank 1 was killed by signal 9"));
    CHECK(output_contains("rank 1 left without finishing")); /* rank 0's NCCL watchdog */
    CHECK(seconds < 120.0);
    char a[600], b[600];
    snprintf(a, sizeof a, "%s/killed/checkpoint.safetensors", tmp);
    snprintf(b, sizeof b, "%s/epoch1.safetensors", tmp);
    CHECK(same_file(a, b)); /* epoch 1's, intact */
}

static void test_sigterm_on_one_rank(void)
{
    char args[1024];
    /* 25 steps per epoch; rank 1 gets SIGTERM after its 30th step (batch 5 of epoch 2); the
     * ranks read the loss, and agree, in batch 21 (index 20), and stop after it */
    snprintf(args, sizeof args, COMMON2 " --out %s/sigterm", tmp);
    int code = run("SNN_DIST_KILL=1:30:TERM " TRAIN " %s", args);
    fprintf(stderr, "  SIGTERM on rank 1 only: exit %d\n", code);
    CHECK(code == 75);
    CHECK(output_contains("stopped in epoch 2 after batch 21 of 25"));
    snprintf(args, sizeof args, COMMON2 " --out %s/sigterm --resume "
             "%s/sigterm/checkpoint.safetensors", tmp, tmp);
    CHECK(run(TRAIN " %s", args) == 0 && output_contains("in epoch 2 after batch 21"));
    char a[600], b[600];
    snprintf(a, sizeof a, "%s/straight/checkpoint.safetensors", tmp); /* test_resume's */
    snprintf(b, sizeof b, "%s/sigterm/checkpoint.safetensors", tmp);
    CHECK(same_file(a, b));
}

int main(void)
{
    test_require_cuda();
    int gpus = 0;
#ifdef SNN_WITH_CUDA
    gpus = snn_cuda_device_count();
#endif
    if (!snn_dist_nccl_compiled() || gpus < 2 || !fashion_mnist_available()) {
        fprintf(stderr, "skipped: needs 2 GPUs (%d visible), NCCL in the build (%s) and "
                "Fashion-MNIST\n", gpus, snn_dist_nccl_compiled() ? "yes" : "no");
        return 77;
    }
    if (runner_begin("multigpu_train")) return 1;
    RUN(test_two_gpus_follow_one);
    if (gpus >= 4) RUN(test_four_gpus_follow_one);
    else fprintf(stderr, "  (4-GPU case skipped: %d GPUs visible)\n", gpus);
    RUN(test_gpus_implies_cuda);
    RUN(test_resume);
    RUN(test_killed_rank);
    RUN(test_sigterm_on_one_rank);
    runner_end(test_failures);
    return test_finish();
}
