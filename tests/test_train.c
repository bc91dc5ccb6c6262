#define _DEFAULT_SOURCE /* mkdtemp */
/*
 * test_train.c - snn-train end to end, as a user runs it:
 *   - a short CPU run of the spiking CNN on the real Fashion-MNIST must pass a stated accuracy;
 *   - resuming from a checkpoint continues bit-exactly (the final checkpoints are identical
 *     byte for byte);
 *   - --augment with --crop-padding 2 trains on the 28x28 images;
 *   - a loss that turns NaN or infinite stops training with a message and leaves the last good
 *     checkpoint as it was;
 *   - bad flags are clear errors; --help works.
 * Skipped (exit 77) when Fashion-MNIST is not where snn-train looks ($SNN_DATA_DIR, else the
 * folder of the Debian package dataset-fashion-mnist).
 * Run: ctest --test-dir build -R '^train$' --output-on-failure
 */

#include "program_runner.h"
#include "snn.h"
#include "test.h"

static void test_short_run_learns(void)
{
    /* ~200 steps of batch 64 at T = 2 on 12,800 images; 2,000 test images */
    char dir[300];
    snprintf(dir, sizeof dir, "%s/short", tmp);
    char args[512];
    snprintf(args, sizeof args, "--epochs 1 --T 2 --batch-size 64 --limit-train 12800 "
             "--limit-test 2000 --threads 2 --out %s", dir);
    CHECK(run(TRAIN " %s", args) == 0);
    double acc = last_test_accuracy(dir);
    fprintf(stderr, "  test accuracy after one short epoch: %.4f (needs >= 0.75)\n", acc);
    CHECK(acc >= 0.75);
    char files[4][32] = {"metrics.json", "loss.svg", "accuracy.svg", "raster.svg"};
    for (int i = 0; i < 4; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        CHECK(access(path, R_OK) == 0);
    }
    /* snn-eval reads the checkpoint back and agrees on the accuracy */
    snprintf(args, sizeof args, "--checkpoint %s/checkpoint.safetensors --limit-test 2000", dir);
    CHECK(run(EVAL " %s", args) == 0);
    char expect[64];
    snprintf(expect, sizeof expect, "accuracy    %.2f%%", 100.0 * acc);
    CHECK(output_contains(expect));
    CHECK(output_contains("confusion matrix"));
}

static void test_resume_is_bit_exact(void)
{
    const char *common = "--T 2 --batch-size 32 --limit-train 640 --limit-test 128 --threads 2";
    char args[1024], a[300], b[300];
    snprintf(a, sizeof a, "%s/straight", tmp);
    snprintf(b, sizeof b, "%s/resumed", tmp);
    snprintf(args, sizeof args, "%s --epochs 2 --out %s", common, a);
    CHECK(run(TRAIN " %s", args) == 0);
    snprintf(args, sizeof args, "%s --epochs 2 --stop-after 1 --out %s", common, b);
    CHECK(run(TRAIN " %s", args) == 0);
    CHECK(output_contains("stopping after 1 epoch"));
    snprintf(args, sizeof args, "%s --epochs 2 --out %s --resume %s/checkpoint.safetensors", common, b, b);
    CHECK(run(TRAIN " %s", args) == 0);
    CHECK(output_contains("resumed from"));
    char ca[600], cb[600];
    snprintf(ca, sizeof ca, "%s/checkpoint.safetensors", a);
    snprintf(cb, sizeof cb, "%s/checkpoint.safetensors", b);
    CHECK(same_file(ca, cb));
}

/* --augment 1 --crop-padding 2, the Fashion-MNIST recipe: the loader crops and flips 28x28 */
static void test_augment_28x28(void)
{
    char args[1024], dir[300];
    snprintf(dir, sizeof dir, "%s/augment", tmp);
    snprintf(args, sizeof args, "--T 1 --batch-size 32 --limit-train 128 --limit-test 64 "
             "--threads 2 --epochs 1 --augment 1 --crop-padding 2 --out %s", dir);
    CHECK(run(TRAIN " %s", args) == 0);
    double acc = last_test_accuracy(dir);
    CHECK(acc >= 0.0 && acc <= 1.0);
}

static void test_divergence_keeps_last_checkpoint(void)
{
    const char *common = "--T 2 --batch-size 32 --limit-train 320 --limit-test 64 --threads 2";
    char args[1024], dir[300], ckpt[400], copy[400];
    snprintf(dir, sizeof dir, "%s/diverge", tmp);
    snprintf(args, sizeof args, "%s --epochs 1 --out %s", common, dir);
    CHECK(run(TRAIN " %s", args) == 0);
    snprintf(ckpt, sizeof ckpt, "%s/checkpoint.safetensors", dir);
    snprintf(copy, sizeof copy, "%s/before.safetensors", tmp);
    char cmd[900];
    snprintf(cmd, sizeof cmd, "cp %s %s", ckpt, copy);
    CHECK(system(cmd) == 0);
    /* a different optimizer than the checkpoint's is refused: its state would not match */
    snprintf(args, sizeof args, "%s --epochs 3 --optimizer sgd --out %s --resume %s", common, dir, ckpt);
    CHECK(run(TRAIN " %s", args) == 2 && output_contains("trained with --optimizer adam"));
    /* an absurd learning rate drives the weights, then the loss, to infinity within a few steps */
    snprintf(args, sizeof args, "%s --epochs 3 --lr 1e38 --schedule constant --out %s --resume %s",
             common, dir, ckpt);
    CHECK(run(TRAIN " %s", args) == 3);
    CHECK(output_contains("the loss became"));
    CHECK(same_file(ckpt, copy));
}

static void test_resnets_on_cifar_format(void)
{
    /* the CIFAR path end to end: snn-make-cifar writes the archive, the (SEW-)ResNet-18 trains on
     * it with augmentation for a few steps and writes its metrics and checkpoint */
    char args[1024], archive[400], dir[400];
    snprintf(archive, sizeof archive, "%s/fmcifar/cifar-10-binary.tar.gz", tmp);
    snprintf(args, sizeof args, "-o %s", archive);
    CHECK(run(SNN_BIN_DIR "/snn-make-cifar %s", args) == 0 && output_contains("60000 train"));
    const char *models[2] = {"resnet18", "sew-resnet18"};
    for (int m = 0; m < 2; m++) {
        snprintf(dir, sizeof dir, "%s/%s", tmp, models[m]);
        snprintf(args, sizeof args, "--model %s --dataset cifar10 --data %s/fmcifar --width 4 --T 2 "
                 "--batch-size 32 --limit-train 128 --limit-test 64 --epochs 1 --threads 2 --out %s",
                 models[m], tmp, dir);
        CHECK(run(TRAIN " %s", args) == 0);
        CHECK(output_contains("3x32x32") && output_contains("layer4.1.sn2"));
        double acc = last_test_accuracy(dir);
        CHECK(acc >= 0.0 && acc <= 1.0);
    }
}

static void test_bad_flags(void)
{
    CHECK(run(TRAIN " %s", "--help") == 0 && output_contains("--batch-size"));
    CHECK(run(TRAIN " %s", "--epochs many") == 2 && output_contains("'--epochs' expects an integer"));
    CHECK(run(TRAIN " %s", "--bogus") == 2 && output_contains("unknown option '--bogus'"));
    CHECK(run(TRAIN " %s", "--model vgg") == 1 && output_contains("vgg"));
    CHECK(run(TRAIN " %s", "--help") == 0 && output_contains("--crop-padding"));
    CHECK(run(TRAIN " %s", "--crop-padding -1") == 2 && output_contains("bad --crop-padding -1"));
    CHECK(run(TRAIN " %s", "--crop-padding 15 --limit-train 64") == 2 &&
          output_contains("bad --crop-padding 15 (expected 0..14, half the height of the 28x28"));
    CHECK(run(TRAIN " %s", "--dataset fashion-mnist --data /nonexistent") == 1 &&
          output_contains("/nonexistent"));
    CHECK(run(EVAL " %s", "--checkpoint /nonexistent.safetensors") == 1 &&
          output_contains("/nonexistent.safetensors"));
}

int main(void)
{
    if (!fashion_mnist_available()) {
        fprintf(stderr, "skipped: no Fashion-MNIST where the programs look (apt-get install "
                        "dataset-fashion-mnist, or point SNN_DATA_DIR at it)\n");
        return 77;
    }
    if (runner_begin("test_train")) return 1;
    RUN(test_bad_flags);
    RUN(test_short_run_learns);
    RUN(test_resume_is_bit_exact);
    RUN(test_augment_28x28);
    RUN(test_divergence_keeps_last_checkpoint);
    RUN(test_resnets_on_cifar_format);
    runner_end(test_failures);
    return test_finish();
}
