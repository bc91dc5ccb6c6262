#define _DEFAULT_SOURCE /* mkdtemp */
/*
 * test_dist_train.c - snn-train data-parallel, end to end on CPU ranks (the TCP backend), as a
 * user runs it; tests/test_multigpu_train.c does the same on GPUs with NCCL:
 *   - 2 ranks x batch 32 with --sync-bn follow the one-process batch-64 run's loss, step by
 *     step, within 1e-4 relative, and every rank holds the same parameters after every step
 *     (SNN_DIST_VERIFY=1);
 *   - a 2-rank run stopped after one epoch and resumed on 2 ranks ends bit-exactly where the
 *     uninterrupted run ends; its checkpoint also resumes in one process;
 *   - --gpus 1 (world size 1, the same code path) gives the plain run's checkpoint, byte for
 *     byte; rank 0 alone writes files.
 * Skipped (exit 77) when Fashion-MNIST is not installed.
 *
 *     ctest --test-dir build -R dist_train --output-on-failure
 */
#include "program_runner.h"
#include "snn.h"
#include "test.h"

/* tiny CNN, 5 steps of 64 per epoch, one CPU thread per rank */
#define COMMON "--T 2 --width 4 --hidden 16 --limit-train 320 --limit-test 64 --threads 1 --epochs 2"

/* Reads "step,loss,lr" lines; returns the count. */
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

static void test_two_ranks_follow_one_process(void)
{
    char args[1024];
    snprintf(args, sizeof args, COMMON " --batch-size 64 --log-every 1 --out %s/one --step-log %s/one.log",
             tmp, tmp);
    CHECK(run(TRAIN " %s", args) == 0);
    snprintf(args, sizeof args, COMMON " --gpus 2 --device cpu --sync-bn --batch-size 32 --log-every 1 "
             "--out %s/two --step-log %s/two.log", tmp, tmp);
    CHECK(run("SNN_DIST_VERIFY=1 " TRAIN " %s", args) == 0);
    CHECK(output_contains("starting 2 rank(s)"));
    CHECK(output_contains("rank 0 of 2 (tcp backend"));
    CHECK(output_contains("batch 64, 5 steps/epoch"));
    long s1[32], s2[32];
    double l1[32], l2[32];
    char p1[400], p2[400];
    snprintf(p1, sizeof p1, "%s/one.log", tmp);
    snprintf(p2, sizeof p2, "%s/two.log", tmp);
    int n1 = read_steps(p1, s1, l1, 32), n2 = read_steps(p2, s2, l2, 32);
    CHECK(n1 == 10 && n2 == 10);
    double worst = 0.0;
    for (int i = 0; i < n1 && i < n2; i++) {
        CHECK(s1[i] == s2[i]);
        double rel = fabs(l1[i] - l2[i]) / fabs(l1[i]);
        if (!(rel <= worst)) worst = rel;
    }
    fprintf(stderr, "  2 ranks x 32 vs 1 x 64, 10 steps: worst relative loss difference %.3g\n", worst);
    CHECK(worst <= 1e-4);
    /* rank 0 wrote the metrics */
    char dir[400];
    snprintf(dir, sizeof dir, "%s/two", tmp);
    CHECK(last_test_accuracy(dir) >= 0.0);
}

static void test_resume_bit_exact_and_across_world_sizes(void)
{
    char args[1024];
    /* the uninterrupted 2-rank run of the previous test is tmp/two; this one stops after one
     * epoch and resumes on 2 ranks (no step log, no replica checks: they change nothing) */
    snprintf(args, sizeof args, COMMON " --gpus 2 --device cpu --sync-bn --batch-size 32 --stop-after 1 "
             "--out %s/split", tmp);
    CHECK(run(TRAIN " %s", args) == 0);
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "cp %s/split/checkpoint.safetensors %s/epoch1.safetensors", tmp, tmp);
    CHECK(system(cmd) == 0);
    snprintf(args, sizeof args, COMMON " --gpus 2 --device cpu --sync-bn --batch-size 32 --out %s/split "
             "--resume %s/split/checkpoint.safetensors", tmp, tmp);
    CHECK(run(TRAIN " %s", args) == 0);
    CHECK(output_contains("resumed from"));
    char a[400], b[400];
    snprintf(a, sizeof a, "%s/two/checkpoint.safetensors", tmp);
    snprintf(b, sizeof b, "%s/split/checkpoint.safetensors", tmp);
    CHECK(same_file(a, b));

    /* the 2-rank checkpoint of epoch 1 goes on in one process, with the same global batch */
    snprintf(args, sizeof args, COMMON " --batch-size 64 --out %s/single --resume %s/epoch1.safetensors",
             tmp, tmp);
    CHECK(run(TRAIN " %s", args) == 0);
    CHECK(output_contains("resumed from") && output_contains("epoch 2:"));
    /* and on 3 ranks of 21 (global batches of 63; the last, of 5 samples, splits 1, 2, 2): a
     * new global batch is a change of recipe, which resume refuses unless told */
    snprintf(args, sizeof args, COMMON " --gpus 3 --device cpu --batch-size 21 --allow-changes "
             "--out %s/three "
             "--resume %s/epoch1.safetensors", tmp, tmp);
    CHECK(run(TRAIN " %s", args) == 0);
    CHECK(output_contains("epoch 2:"));
}

static void test_world_size_one_is_the_plain_run(void)
{
    char args[1024];
    snprintf(args, sizeof args, "--T 2 --width 4 --hidden 16 --limit-train 192 --limit-test 64 "
             "--threads 1 --epochs 1 --batch-size 64 --out %s/plain", tmp);
    CHECK(run(TRAIN " %s", args) == 0);
    snprintf(args, sizeof args, "--T 2 --width 4 --hidden 16 --limit-train 192 --limit-test 64 "
             "--threads 1 --epochs 1 --batch-size 64 --gpus 1 --device cpu --out %s/world1", tmp);
    CHECK(run(TRAIN " %s", args) == 0);
    char a[400], b[400];
    snprintf(a, sizeof a, "%s/plain/checkpoint.safetensors", tmp);
    snprintf(b, sizeof b, "%s/world1/checkpoint.safetensors", tmp);
    CHECK(same_file(a, b));
}

static void test_bad_flags(void)
{
    CHECK(run(TRAIN " %s", "--gpus -1") == 2);
    CHECK(run("RANK=0 WORLD_SIZE=2 " TRAIN " %s", "--gpus 2 --device cpu") == 2);
    CHECK(output_contains("drop --gpus"));
    CHECK(run("RANK=1 WORLD_SIZE=2 " TRAIN " %s", "--device cpu") == 2);
    CHECK(output_contains("--init"));
    CHECK(run(TRAIN " %s", "--init udp://x:1 --device cpu") == 2);
    CHECK(run(TRAIN " %s", "--help") == 0 && output_contains("--sync-bn"));
}

int main(void)
{
    if (!fashion_mnist_available()) {
        fprintf(stderr, "skipped: Fashion-MNIST is not installed (apt install dataset-fashion-mnist)\n");
        return 77;
    }
    if (runner_begin("dist_train")) return 1;
    RUN(test_two_ranks_follow_one_process);
    RUN(test_resume_bit_exact_and_across_world_sizes);
    RUN(test_world_size_one_is_the_plain_run);
    RUN(test_bad_flags);
    runner_end(test_failures);
    return test_finish();
}
