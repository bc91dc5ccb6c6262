#define _DEFAULT_SOURCE /* mkdtemp */
/*
 * test_train_rsnn.c - snn-train and snn-eval with the recurrent SNN (--model rsnn,
 * nn/model_rsnn.c), as a user drives them:
 *   - --help lists rsnn, --sequence and --layers;
 *   - its flags' mistakes end in one clear message each, exit 2: --sequence or --layers with
 *     another model, a --sequence that is neither rows nor pixels, a --T that is not the
 *     image's rows (28), --loss mse with rsnn;
 *   - a tiny run reads Fashion-MNIST as rows (T = 28) with 2 recurrent layers, dropout on their
 *     spikes, gradient clipping and the image augmentations (crop, flip, erasing: on the image,
 *     before it becomes a sequence), and another as pixels (T = 784); both print their model
 *     and encoding;
 *   - --resume takes rsnn's flags from the checkpoint (its layers, its sequence, its hidden
 *     width, its dropout and --clip-grad), and refuses a --layers or --sequence that differs
 *     from it;
 *   - snn-eval evaluates the rsnn checkpoint; snn-export-nir writes a LIF one and checks its
 *     graph (fed the sequence) against the model, and refuses an ALIF one by name.
 * Runs are tiny (16 to 32 neurons, 64 images): seconds each. Skipped (77) without
 * Fashion-MNIST.
 * Run: ctest --test-dir build -R train_rsnn --output-on-failure
 */
#include <sys/stat.h>

#include "program_runner.h"
#include "snn.h"
#include "test.h"

#define SMALL "--batch-size 32 --limit-train 64 --limit-test 32 --threads 1"

static void test_help_and_flag_messages(void)
{
    CHECK(run(TRAIN " %s", "--help") == 0 && output_contains("--sequence") &&
          output_contains("--layers") && output_contains("rsnn (recurrent, for sequences"));
    CHECK(run(TRAIN " %s", "--sequence rows") == 2 &&
          output_contains("snn-train: --sequence: a flag of the recurrent network; expected "
                          "--model rsnn with it (got --model cnn)"));
    CHECK(run(TRAIN " %s", "--model resnet18 --layers 2") == 2 &&
          output_contains("snn-train: --layers: a flag of the recurrent network; expected "
                          "--model rsnn with it (got --model resnet18)"));
    CHECK(run(TRAIN " %s", "--model rsnn --sequence columns") == 2 &&
          output_contains("--sequence columns: expected rows or pixels"));
    CHECK(run(TRAIN " %s", "--model rsnn --layers -1") == 2 &&
          output_contains("--layers -1: expected an integer >= 0"));
    CHECK(run(TRAIN " %s", "--model rsnn --loss mse") == 2 &&
          output_contains("--model rsnn: expected --loss ce or tet"));
    CHECK(run(TRAIN " %s", "--model rsnn --time-checkpoint 7") == 2 &&
          output_contains("--time-checkpoint 7: expected images with direct or Poisson encoding "
                          "(the rsnn's sequences train without it)"));
    CHECK(run(TRAIN " %s", "--model rsnn --T 4 " SMALL) == 2 &&
          output_contains("snn-train: --T 4: --sequence rows reads the 28x28 images of --dataset "
                          "fashion-mnist in T = H = 28 steps"));
    CHECK(run(TRAIN " %s", "--model rsnn --sequence pixels --T 28 " SMALL) == 2 &&
          output_contains("--T 28: --sequence pixels reads the 28x28 images of --dataset "
                          "fashion-mnist in T = H*W = 784 steps"));
}

static void test_runs_resume_and_eval(void)
{
    char dir[400], ckpt[600], args[1400];
    snprintf(dir, sizeof dir, "%s/rows", tmp);
    snprintf(ckpt, sizeof ckpt, "%s/checkpoint.safetensors", dir);
    /* rows, 2 layers of 16, ALIF neurons; --T 28 given is the image's rows: no conflict */
    snprintf(args, sizeof args, "--model rsnn --hidden 16 --layers 2 --neuron alif --T 28 "
             "--dropout 0.1 --clip-grad 1 --augment 1 --crop-padding 2 --random-erasing 0.25 "
             "--epochs 1 " SMALL " --out %s", dir);
    CHECK(run(TRAIN " %s", args) == 0);
    CHECK(output_contains("dropout 0.1") && output_contains("gradients clipped to norm 1") &&
          output_contains("% clipped)"));
    CHECK(output_contains("model       rsnn, 2 recurrent layers of 16, 1x28x28 images") &&
          output_contains("T = 28, encoding rows (an image read row by row, T = H)") &&
          output_contains("neurons     alif") && output_contains("firing rates: rec1"));

    /* resume: the model's flags come from the checkpoint; different ones are refused */
    snprintf(args, sizeof args, "--resume %s --layers 3 --sequence pixels --epochs 2", ckpt);
    CHECK(run(SNN_BIN_DIR "/snn-train %s", args) == 2);
    CHECK(output_contains("--layers 3 (the checkpoint was trained with 2)") &&
          output_contains("--sequence pixels (the checkpoint was trained with rows)"));
    snprintf(args, sizeof args, "--resume %s --epochs 2 --threads 1", ckpt);
    CHECK(run(SNN_BIN_DIR "/snn-train %s", args) == 0);
    CHECK(output_contains("rsnn, 2 recurrent layers of 16") &&
          output_contains("epoch 2:") && output_contains("dropout 0.1") &&
          output_contains("gradients clipped to norm 1"));

    /* snn-eval reads the checkpoint and evaluates it */
    snprintf(args, sizeof args, "--checkpoint %s --limit-test 32", ckpt);
    CHECK(run(EVAL " %s", args) == 0);
    CHECK(output_contains("(rsnn, T=28, alif neurons)") && output_contains("accuracy"));

    /* pixels: T = 784 steps of one input */
    snprintf(dir, sizeof dir, "%s/pixels", tmp);
    snprintf(args, sizeof args, "--model rsnn --sequence pixels --hidden 8 --epochs 1 "
             "--batch-size 32 --limit-train 32 --limit-test 32 --threads 1 --out %s", dir);
    CHECK(run(TRAIN " %s", args) == 0);
    CHECK(output_contains("T = 784, encoding pixels") && output_contains("epoch 1:"));

    /* snn-export-nir writes the LIF pixels model and runs its graph, which takes the sequence
     * itself, to the model's logits; the ALIF rows model it refuses by name (a build without
     * HDF5 has no snn-export-nir) */
    struct stat st;
    if (stat(SNN_BIN_DIR "/snn-export-nir", &st) == 0) {
        snprintf(args, sizeof args, "--checkpoint %s/checkpoint.safetensors -o %s/pixels.nir", dir,
                 tmp);
        CHECK(run(SNN_BIN_DIR "/snn-export-nir %s", args) == 0);
        CHECK(output_contains("wrote ") && output_contains("read back: max |logit difference|"));
        snprintf(args, sizeof args, "--checkpoint %s -o %s/rows.nir", ckpt, tmp);
        CHECK(run(SNN_BIN_DIR "/snn-export-nir %s", args) == 1);
        CHECK(output_contains("'rec1' is an adaptive LIF neuron"));
    }
}

int main(void)
{
    if (!fashion_mnist_available()) {
        fprintf(stderr, "skipped: no Fashion-MNIST where the programs look (apt-get install "
                        "dataset-fashion-mnist, or point SNN_DATA_DIR at it)\n");
        return 77;
    }
    if (runner_begin("test_train_rsnn")) return 1;
    RUN(test_help_and_flag_messages);
    RUN(test_runs_resume_and_eval);
    runner_end(test_failures);
    return test_finish();
}
