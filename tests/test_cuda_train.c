#define _DEFAULT_SOURCE /* mkdtemp */
/*
 * test_cuda_train.c - snn-train and snn-eval on the GPU, end to end: a short CUDA run learns,
 * its checkpoint (saved from device tensors) evaluates to the same accuracy with snn-eval on the
 * GPU and on the CPU, and resuming on the GPU continues bit-exactly (every CUDA reduction in
 * snn.c sums in a fixed order), also from a checkpoint written mid-epoch by SIGTERM at a random
 * step; with --ema the moving average (updated by the CUDA lerp after every step) resumes
 * bit-exactly too, and snn-eval evaluates it alike on both devices. Skipped (exit 77) without a
 * GPU or without Fashion-MNIST.
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

/* SIGTERM at a random moment of a CUDA run: it finishes the step, saves, exits 75, and resuming
 * ends bit-identical to the unbroken run of test_cuda_run_resume_and_eval. */
static void test_cuda_sigterm_then_resume(void)
{
    const char *common = "--device cuda --T 2 --batch-size 64 --limit-train 6400 --limit-test 1000";
    char args[1600], dir[300], a[600], b[600];
    snprintf(dir, sizeof dir, "%s/sigterm", tmp);
    unsigned seed = (unsigned)time(NULL) ^ (unsigned)getpid();
    srand(seed);
    int code = 0;
    double delay = 0.0;
    for (int attempt = 0; attempt < 6; attempt++) {
        snprintf(args, sizeof args, "rm -rf %s %s/sigterm.txt", dir, tmp);
        CHECK(system(args) == 0);
        snprintf(args, sizeof args, "%s --epochs 2 --out %s", common, dir);
        pid_t pid = spawn(TRAIN, args, "sigterm.txt");
        CHECK(pid > 0 && wait_for_log(pid, "sigterm.txt", "steps/epoch", 120.0));
        delay = (double)rand() / RAND_MAX * 2.0 / (attempt + 1);
        struct timespec pause = {(time_t)delay, (long)((delay - (double)(time_t)delay) * 1e9)};
        nanosleep(&pause, NULL);
        kill(pid, SIGTERM);
        code = reap(pid);
        if (code != 0 && !log_has("sigterm.txt", "before the first step")) break;
    }
    fprintf(stderr, "  SIGTERM %.3f s into training (seed %u): exit %d, %s\n", delay, seed, code,
            log_has("sigterm.txt", "stopped in epoch") ? "mid-epoch"
            : log_has("sigterm.txt", "before its evaluation") ? "before an evaluation" : "at an epoch's end");
    CHECK(code == 75 && log_has("sigterm.txt", "SIGTERM: stopped"));
    snprintf(args, sizeof args, "%s --epochs 2 --out %s --resume %s/checkpoint.safetensors", common, dir, dir);
    CHECK(run(TRAIN " %s", args) == 0 && output_contains("resumed from"));
    snprintf(a, sizeof a, "%s/straight/checkpoint.safetensors", tmp);
    snprintf(b, sizeof b, "%s/checkpoint.safetensors", dir);
    CHECK(same_file(a, b));
}

/* --ema on the GPU: split and resumed ends byte for byte like unbroken (checkpoint with its
 * "ema." tensors, and best.safetensors); snn-eval finds the average's accuracy on either device. */
static void test_cuda_ema(void)
{
    const char *common = "--device cuda --T 2 --batch-size 64 --limit-train 3200 --limit-test 1000 "
                         "--ema 0.99";
    char args[1024], a[300], b[300], ca[600], cb[600];
    snprintf(a, sizeof a, "%s/ema_straight", tmp);
    snprintf(b, sizeof b, "%s/ema_resumed", tmp);
    snprintf(args, sizeof args, "%s --epochs 2 --out %s", common, a);
    CHECK(run(TRAIN " %s", args) == 0 && output_contains("(EMA weights)"));
    snprintf(args, sizeof args, "%s --epochs 2 --stop-after 1 --out %s", common, b);
    CHECK(run(TRAIN " %s", args) == 0);
    snprintf(args, sizeof args, "%s --epochs 2 --out %s --resume %s/checkpoint.safetensors", common, b, b);
    CHECK(run(TRAIN " %s", args) == 0 && output_contains("resumed from"));
    const char *files[2] = {"checkpoint", "best"};
    for (int f = 0; f < 2; f++) {
        snprintf(ca, sizeof ca, "%s/%s.safetensors", a, files[f]);
        snprintf(cb, sizeof cb, "%s/%s.safetensors", b, files[f]);
        CHECK(same_file(ca, cb));
    }
    double acc = last_test_accuracy(a);
    char expect[64];
    snprintf(expect, sizeof expect, "accuracy    %.2f%%", 100.0 * acc);
    snprintf(ca, sizeof ca, "%s/checkpoint.safetensors", a);
    for (int d = 0; d < 2; d++) {
        snprintf(args, sizeof args, "--checkpoint %s --limit-test 1000 --device %s", ca, d ? "cpu" : "cuda");
        CHECK(run(EVAL " %s", args) == 0 && output_contains(expect) &&
              output_contains("moving average (--ema 0.99)"));
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
    RUN(test_cuda_sigterm_then_resume);
    RUN(test_cuda_ema);
    runner_end(test_failures);
    return test_finish();
}
