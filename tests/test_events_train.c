/*
 * test_events_train.c - a spiking network trained end to end on event input, as a user does it:
 * snn-make-nmnist turns a slice of Fashion-MNIST into an N-MNIST-format event set (saccades,
 * DVS pixels), snn-train reads it back through the N-MNIST reader, integrates each sample into
 * T = 4 frames of 2 polarities and trains the spiking CNN on (T, N, 2, 34, 34) input; snn-eval
 * then evaluates the checkpoint on the same frames. Small on purpose (500 + 200 samples, width 8,
 * 3 epochs, one thread: seconds on the CPU); it checks that learning happens (well above the
 * 10% of chance), not a benchmark accuracy. Skipped (77) without Fashion-MNIST.
 *
 *     ctest -R events_train --output-on-failure
 */
#define _XOPEN_SOURCE 700 /* mkdtemp */
#include "program_runner.h"
#include "test.h"

#define MAKE SNN_BIN_DIR "/snn-make-nmnist"

int main(void)
{
    if (!fashion_mnist_available()) {
        fprintf(stderr, "skipped: Fashion-MNIST is not installed (dataset-fashion-mnist)\n");
        return 77;
    }
    CHECK(runner_begin("events_train") == 0);
    CHECK(run(MAKE " -o %s/events --limit-train 500 --limit-test 200", tmp) == 0);
    CHECK(output_contains("Train.zip: 500 samples"));
    char args[1200];
    snprintf(args, sizeof args, "--dataset nmnist --data %s/events --out %s/run", tmp, tmp);
    CHECK(run(TRAIN " %s --T 4 --width 8 --hidden 64 --epochs 3 --batch-size 16 --lr 3e-3 "
              "--threads 1", args) == 0);
    CHECK(output_contains("images 2x34x34"));
    char run_dir[400];
    snprintf(run_dir, sizeof run_dir, "%s/run", tmp);
    double accuracy = last_test_accuracy(run_dir);
    fprintf(stderr, "  test accuracy on event frames after 3 epochs: %.1f%%\n", 100 * accuracy);
    CHECK(accuracy > 0.35);
    snprintf(args, sizeof args, "--checkpoint %s/run/checkpoint.safetensors --data %s/events", tmp, tmp);
    CHECK(run(EVAL " %s --threads 1", args) == 0);
    CHECK(output_contains("test set    nmnist, 200 images"));
    /* a bad split mode is refused, naming the choices */
    snprintf(args, sizeof args, "--dataset nmnist --data %s/events --out %s/bad --resume "
             "%s/run/checkpoint.safetensors --epochs 3 --split-by sideways", tmp, tmp, tmp);
    CHECK(run(TRAIN " %s", args) != 0);
    CHECK(output_contains("number or time"));
    (void)same_file;
    runner_end(test_failures);
    return test_finish();
}
