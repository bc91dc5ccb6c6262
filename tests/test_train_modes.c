#define _DEFAULT_SOURCE /* mkdtemp */
/*
 * test_train_modes.c - snn-train's ways to train through time (docs/temporal.md), end to end:
 *   - --train-mode sltt trains the CNN (one epoch of 320 images), says so at start-up, and a
 *     resume keeps the mode; --sltt-k draws K of the T steps; --train-mode ottt trains too;
 *   - --time-checkpoint K trains with BPTT in segments, and says so;
 *   - what a mode cannot take is refused with exit 2 and a message naming the flag: sltt with
 *     --loss mse, --sltt-k without sltt or above --T, --time-checkpoint above --T or with
 *     sltt, a model that is not fed images (rsnn) or an ANN;
 *   - a resume with another --train-mode is a conflict unless --allow-changes.
 * Runs are tiny (width 8, 320 images): seconds each. Skipped (77) without Fashion-MNIST.
 * Run: ctest --test-dir build -R train_modes --output-on-failure
 */
#include <sys/stat.h>

#include "program_runner.h"
#include "snn.h"
#include "test.h"

#define COMMON "--T 3 --width 8 --hidden 32 --batch-size 32 --limit-train 320 --limit-test 64 " \
               "--threads 1"

static void test_refused(void)
{
    CHECK(run(TRAIN " %s", "--train-mode sltt --loss mse") == 2 &&
          output_contains("--train-mode sltt: expected --loss ce"));
    CHECK(run(TRAIN " %s", "--sltt-k 2") == 2 &&
          output_contains("--sltt-k 2: expected --train-mode sltt or ottt with it"));
    CHECK(run(TRAIN " %s", "--train-mode sltt --T 4 --sltt-k 5") == 2 &&
          output_contains("--sltt-k between 0 and --T"));
    CHECK(run(TRAIN " %s", "--train-mode online") == 2 &&
          output_contains("--train-mode online: expected bptt, sltt or ottt"));
    CHECK(run(TRAIN " %s", "--train-mode ottt --loss tet") == 2 &&
          output_contains("--train-mode ottt: expected --loss ce"));
    CHECK(run(TRAIN " %s", "--time-checkpoint 5 --T 4") == 2 &&
          output_contains("--time-checkpoint 5: expected K between 1 and --T"));
    CHECK(run(TRAIN " %s", "--time-checkpoint 2 --train-mode sltt") == 2 &&
          output_contains("--time-checkpoint 2: expected --train-mode bptt"));
    char args[1200];
    snprintf(args, sizeof args, "--hidden 32 --batch-size 32 --limit-train 320 --limit-test 64 "
             "--threads 1 --model rsnn --sequence rows --train-mode sltt --out %s/r", tmp);
    CHECK(run(TRAIN " %s", args) == 2 && output_contains("--train-mode sltt takes images"));
    snprintf(args, sizeof args, COMMON " --neuron relu --T 1 --time-checkpoint 1 --out %s/a", tmp);
    CHECK(run(TRAIN " %s", args) == 2 && output_contains("is an ANN"));
}

static void test_sltt_trains_and_resumes(void)
{
    char dir[400], args[1200], ckpt[600];
    snprintf(dir, sizeof dir, "%s/sltt", tmp);
    snprintf(args, sizeof args, COMMON " --train-mode sltt --sltt-k 2 --epochs 1 --out %s", dir);
    CHECK(run(TRAIN " %s", args) == 0);
    CHECK(output_contains("sltt: online, each step's cross-entropy; backward on 2 of the 3 steps"));
    CHECK(output_contains("epoch 1: train loss"));
    snprintf(ckpt, sizeof ckpt, "%s/checkpoint.safetensors", dir);
    snprintf(args, sizeof args, "--resume %s --epochs 2 --threads 1", ckpt);
    CHECK(run(SNN_BIN_DIR "/snn-train %s", args) == 0);
    CHECK(output_contains("backward on 2 of the 3 steps") && output_contains("epoch 2: train"));
    snprintf(args, sizeof args, "--resume %s --epochs 3 --train-mode bptt --threads 1", ckpt);
    CHECK(run(SNN_BIN_DIR "/snn-train %s", args) == 2);
    CHECK(output_contains("--train-mode bptt (the checkpoint was trained with sltt)"));
}

static void test_ottt_trains(void)
{
    char args[1200];
    snprintf(args, sizeof args, COMMON " --train-mode ottt --epochs 1 --out %s/ottt", tmp);
    CHECK(run(TRAIN " %s", args) == 0);
    CHECK(output_contains("ottt: online, each step's cross-entropy backpropagated at once, "
                          "weight gradients against the inputs' traces"));
    CHECK(output_contains("epoch 1: train loss"));
}

static void test_time_checkpoint_trains(void)
{
    char args[1200];
    snprintf(args, sizeof args, COMMON " --time-checkpoint 2 --epochs 1 --out %s/tc", tmp);
    CHECK(run(TRAIN " %s", args) == 0);
    CHECK(output_contains("bptt in segments of 2 steps") && output_contains("epoch 1: train loss"));
}

int main(void)
{
    if (!fashion_mnist_available()) {
        fprintf(stderr, "skipped: no Fashion-MNIST where the programs look (apt-get install "
                        "dataset-fashion-mnist, or point SNN_DATA_DIR at it)\n");
        return 77;
    }
    if (runner_begin("test_train_modes")) return 1;
    RUN(test_refused);
    RUN(test_sltt_trains_and_resumes);
    RUN(test_ottt_trains);
    RUN(test_time_checkpoint_trains);
    runner_end(test_failures);
    return test_finish();
}
