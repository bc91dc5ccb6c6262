#define _DEFAULT_SOURCE /* mkdtemp */
/*
 * test_dist_faults.c - a rank that dies ends a data-parallel snn-train run cleanly, on CPU ranks
 * (the TCP backend); tests/test_multigpu_train.c does the same with NCCL on GPUs:
 *   - under the --gpus launcher: rank 1 is killed (SIGKILL) in epoch 2; the launcher names it,
 *     rank 0 stops with a message naming rank 1, the run ends within a bounded time with the
 *     killed rank's exit code, and the checkpoint of epoch 1 is intact (snn-eval reads it);
 *   - ranks started by hand (RANK / WORLD_SIZE, --init file:PATH), no launcher to help: rank 0
 *     stops by itself when rank 1 dies;
 *   - a SIGTERM that only rank 1 gets, mid-epoch: every rank stops after the same step (they
 *     agree at the next loss read), rank 0 writes a mid-epoch checkpoint, all exit 75, and the
 *     resumed run ends with the checkpoint an uninterrupted run writes, byte for byte.
 * The kill comes from the SNN_DIST_KILL=R:S test hook of snn-train. Skipped (exit 77) when
 * Fashion-MNIST is not installed.
 *
 *     ctest --test-dir build -R dist_faults --output-on-failure
 */
#include <time.h>

#include "program_runner.h"
#include "snn.h"
#include "test.h"

#define COMMON "--T 2 --width 4 --hidden 16 --limit-train 320 --limit-test 64 --threads 1 " \
               "--epochs 3 --batch-size 32 --device cpu"

static double wall(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int metrics_rows(const char *dir)
{
    char path[600], line[8192];
    snprintf(path, sizeof path, "%s/metrics.csv", dir);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    int rows = -1; /* the header */
    while (fgets(line, sizeof line, f)) rows++;
    fclose(f);
    return rows;
}

static void test_killed_rank_under_the_launcher(void)
{
    char args[1024], dir[400];
    snprintf(dir, sizeof dir, "%s/killed", tmp);
    /* 5 steps per epoch: step 7 is in epoch 2, after epoch 1's checkpoint */
    snprintf(args, sizeof args, COMMON " --gpus 2 --out %s", dir);
    double start = wall();
    int code = run("SNN_DIST_KILL=1:7 " TRAIN " %s", args);
    double seconds = wall() - start;
    fprintf(stderr, "  killed rank: exit %d after %.1f s\n", code, seconds);
    CHECK(code == 128 + 9);
    CHECK(output_contains("rank 1 was killed by signal 9"));
    CHECK(output_contains("rank 1 closed its connection")); /* rank 0's own message */
    CHECK(seconds < 60.0);
    CHECK(metrics_rows(dir) == 1 && last_test_accuracy(dir) >= 0.0);
    /* the checkpoint of epoch 1 is whole: snn-eval reads it, and it is byte for byte the one a
     * run that stops after epoch 1 by itself writes */
    snprintf(args, sizeof args, "--checkpoint %s/checkpoint.safetensors --limit-test 64", dir);
    CHECK(run(EVAL " %s", args) == 0);
    CHECK(output_contains("accuracy"));
    snprintf(args, sizeof args, COMMON " --gpus 2 --stop-after 1 --out %s/clean", tmp);
    CHECK(run(TRAIN " %s", args) == 0);
    char a[600], b[600];
    snprintf(a, sizeof a, "%s/checkpoint.safetensors", dir);
    snprintf(b, sizeof b, "%s/clean/checkpoint.safetensors", tmp);
    CHECK(same_file(a, b));
}

static void test_killed_rank_without_launcher(void)
{
    char args[4096], dir[400];
    snprintf(dir, sizeof dir, "%s/manual", tmp);
    /* rank 1 in the background, killing itself after 3 steps; rank 0 in the foreground */
    snprintf(args, sizeof args,
             "(RANK=1 WORLD_SIZE=2 SNN_DIST_KILL=1:3 " TRAIN " " COMMON " --init file:%s/rdv "
             "--out %s > %s/rank1.txt 2>&1 &) ; RANK=0 WORLD_SIZE=2 " TRAIN " " COMMON
             " --init file:%s/rdv --out %s", tmp, dir, tmp, tmp, dir);
    double start = wall();
    int code = run("%s", args);
    double seconds = wall() - start;
    fprintf(stderr, "  rank 0 alone: exit %d after %.1f s\n", code, seconds);
    CHECK(code != 0);
    CHECK(output_contains("rank 1 closed its connection"));
    CHECK(seconds < 60.0);
    char rdv[400];
    snprintf(rdv, sizeof rdv, "%s/rdv", tmp);
    CHECK(access(rdv, F_OK) != 0); /* rank 0 removed the rendezvous file */
}

static void test_sigterm_on_one_rank_stops_all(void)
{
    char args[1024], a[600], b[600];
    /* the reference: 2 epochs without a stop */
    snprintf(args, sizeof args, COMMON " --gpus 2 --epochs 2 --out %s/whole", tmp);
    CHECK(run(TRAIN " %s", args) == 0);
    /* 5 steps per epoch: rank 1 gets SIGTERM after step 7 (batch 2 of epoch 2); the ranks read
     * the loss every step on the CPU, so they agree in batch 3 and stop after it */
    snprintf(args, sizeof args, COMMON " --gpus 2 --epochs 2 --out %s/stopped", tmp);
    int code = run("SNN_DIST_KILL=1:7:TERM " TRAIN " %s", args);
    fprintf(stderr, "  SIGTERM on rank 1 only: exit %d\n", code);
    CHECK(code == 75);
    CHECK(output_contains("stopped in epoch 2 after batch 3 of 5"));
    CHECK(output_contains("rank 0 exited with code 75") &&
          output_contains("rank 1 exited with code 75"));
    snprintf(args, sizeof args, COMMON " --gpus 2 --epochs 2 --out %s/stopped --resume "
             "%s/stopped/checkpoint.safetensors", tmp, tmp);
    CHECK(run(TRAIN " %s", args) == 0);
    CHECK(output_contains("resumed from") && output_contains("in epoch 2 after batch"));
    snprintf(a, sizeof a, "%s/whole/checkpoint.safetensors", tmp);
    snprintf(b, sizeof b, "%s/stopped/checkpoint.safetensors", tmp);
    CHECK(same_file(a, b));
}

int main(void)
{
    if (!fashion_mnist_available()) {
        fprintf(stderr, "skipped: Fashion-MNIST is not installed (apt install dataset-fashion-mnist)\n");
        return 77;
    }
    if (runner_begin("dist_faults")) return 1;
    RUN(test_killed_rank_under_the_launcher);
    RUN(test_killed_rank_without_launcher);
    RUN(test_sigterm_on_one_rank_stops_all);
    runner_end(test_failures);
    return test_finish();
}
