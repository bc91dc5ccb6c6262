#define _DEFAULT_SOURCE /* mkdtemp */
/*
 * test_ann2snn_program.c - snn-ann2snn end to end, as a user runs it (CPU, a narrow CNN on a
 * slice of the real Fashion-MNIST, so that it takes seconds):
 *   - train a QANN, convert it: exit 0; the derived bound T* = 9 is reported; at T* the SNN
 *     predicts as the QANN on every test image and the sparse SNN as the dense one (the
 *     program's own "check:" lines say PASS); results.csv, accuracy_vs_T.svg and the QANN's
 *     checkpoint are written, the CSV with one row per T;
 *   - --checkpoint loads that QANN back and gets the same QANN accuracy;
 *   - a checkpoint that is not a QANN (a LIF SNN from snn-train) is refused with the
 *     conversion's message, exit 2; bad --levels and --steps are refused, exit 2;
 *   - memory, for a ResNet-18 at its T* = 51 (SNN_MEMORY_LIMIT plays a small device, between
 *     two of the library's own estimates): an evaluation that cannot fit is refused before
 *     training, exit 2, with both numbers and the flags; a sparse pass whose calibration batch
 *     does not fit calibrates fewer images at a time and still checks PASS; one that does not
 *     fit at one image is refused, naming --no-sparse.
 * Skipped (exit 77) when Fashion-MNIST is not installed (Debian package dataset-fashion-mnist).
 * Run: ctest --test-dir build -R ann2snn_program --output-on-failure
 */

#include "program_runner.h"
#include "snn.h"
#include "test.h"

#define ANN2SNN SNN_BIN_DIR "/snn-ann2snn"

/* The text after `key` in the last command's output, up to and including the first '%'. */
static void output_value(const char *key, char *out, size_t size)
{
    char path[400], buf[65536];
    snprintf(path, sizeof path, "%s/out.txt", tmp);
    out[0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f) return;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strstr(buf, key);
    const char *end = p ? strchr(p, '%') : NULL;
    if (!p || !end || (size_t)(end - p) + 2 > size) return;
    memcpy(out, p, (size_t)(end - p) + 1);
    out[end - p + 1] = '\0';
}

static int count_lines(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    int lines = 0, c;
    while ((c = fgetc(f)) != EOF) lines += c == '\n';
    fclose(f);
    return lines;
}

static const char *small = "--width 8 --hidden 32 --batch-size 64 --limit-train 768 --threads 2";

static void test_train_convert_reload(void)
{
    char args[1024], dir[300], path[400], qann_acc[64];
    snprintf(dir, sizeof dir, "%s/run", tmp);
    snprintf(args, sizeof args, "%s --epochs 1 --limit-test 128 --steps 1,4 --out %s", small, dir);
    CHECK(run(ANN2SNN " %s", args) == 0);
    CHECK(output_contains("derived bound T* = 9 steps"));
    CHECK(output_contains("check: SNN at T* = 9 predicts as the QANN on 100.00% of the test set"));
    CHECK(output_contains("check: sparse SNN predictions identical to the dense SNN's: PASS"));
    CHECK(output_contains("| 9 (T*) |"));
    output_value("QANN accuracy ", qann_acc, sizeof qann_acc);
    CHECK(qann_acc[0] != '\0');
    snprintf(path, sizeof path, "%s/results.csv", dir);
    CHECK(count_lines(path) == 4); /* the header, T = 1, 4 and 9 */
    snprintf(path, sizeof path, "%s/accuracy_vs_T.svg", dir);
    CHECK(access(path, R_OK) == 0);
    /* the saved QANN, loaded back: the same accuracy on the same images */
    snprintf(args, sizeof args, "--checkpoint %s/qann.safetensors --limit-test 128 --steps 9 "
             "--no-sparse --threads 2 --out %s/reload", dir, tmp);
    CHECK(run(ANN2SNN " %s", args) == 0);
    fprintf(stderr, "  trained: '%s'; reloaded:\n", qann_acc);
    CHECK(qann_acc[0] != '\0' && output_contains(qann_acc));
}

static void test_refusals(void)
{
    char args[1024];
    /* a LIF SNN trained by snn-train is not a QANN */
    snprintf(args, sizeof args, "--neuron lif --T 2 --width 4 --hidden 16 --epochs 1 --limit-train 64 "
             "--limit-test 32 --threads 2 --out %s/lif", tmp);
    CHECK(run(TRAIN " %s", args) == 0);
    snprintf(args, sizeof args, "--checkpoint %s/lif/checkpoint.safetensors --limit-test 32 --out %s/x",
             tmp, tmp);
    CHECK(run(ANN2SNN " %s", args) == 2);
    CHECK(output_contains("snn_ann_to_snn: cannot convert a spiking network (lif neurons)"));
    CHECK(output_contains("--neuron qclip"));
    snprintf(args, sizeof args, "--levels 1 --out %s/x", tmp);
    CHECK(run(ANN2SNN " %s", args) == 2 && output_contains("--levels >= 2"));
    snprintf(args, sizeof args, "%s --epochs 0 --limit-test 32 --steps 0,4 --out %s/x", small, tmp);
    CHECK(run(ANN2SNN " %s", args) == 2 && output_contains("bad --steps"));
}

/* The converted ResNet-18 that `--model resnet18 --width 4` makes on Fashion-MNIST, at T. */
static snn_model_config resnet_snn(int T)
{
    snn_model_config c = snn_model_config_default(SNN_MODEL_RESNET18);
    c.in_channels = 1, c.height = c.width = 28, c.classes = 10, c.width_base = 4;
    c.neuron = snn_neuron_config_default(SNN_NEURON_STBIF);
    c.neuron.levels = 4;
    c.encoding = SNN_ENCODING_FIRST_STEP;
    c.time_steps = T;
    return c;
}

/* SNN_MEMORY_LIMIT=<bytes> in `out` so that the programs' check (95% of it usable) lands at
 * `bytes` of need. */
static void limit_at(double bytes, char *out, size_t size)
{
    snprintf(out, size, "SNN_MEMORY_LIMIT=%.0f", bytes / 0.95);
}

/* Runs after test_refusals (it uses the LIF checkpoint that one trains). */
static void test_memory(void)
{
    char args[1024], limit[64];
    const char *resnet = "--model resnet18 --width 4 --epochs 0 --limit-train 64 --threads 2";
    const snn_model_config at_bound = resnet_snn(51);
    snn_memory_estimate eval, sparse, one_eval, one_sparse;
    /* the estimates count a packing buffer per CPU thread: size them for the --threads 2 the
     * programs run with, not for this machine's cores (a 32-core machine moved every bound) */
    const int threads_before = snn_get_num_threads();
    snn_set_num_threads(2);
    CHECK_OK(snn_model_memory_estimate(&at_bound, 16, SNN_CPU, false, 0, &eval));
    CHECK_OK(snn_sparsify_memory_estimate(&at_bound, 16, SNN_CPU, &sparse));
    CHECK_OK(snn_model_memory_estimate(&at_bound, 1, SNN_CPU, false, 0, &one_eval));
    CHECK_OK(snn_sparsify_memory_estimate(&at_bound, 1, SNN_CPU, &one_sparse));
    /* 1. the evaluation at T* = 51 cannot fit: refused before training, with the numbers */
    limit_at(0.5 * eval.total, limit, sizeof limit);
    snprintf(args, sizeof args, "%s " ANN2SNN " %s --batch-size 16 --limit-test 16 --steps 51 "
             "--out %s/big", limit, resnet, tmp);
    CHECK(run("%s", args) == 2);
    CHECK(output_contains("evaluating the converted SNN resnet18 at --batch-size 16 needs about"));
    CHECK(output_contains("one step (T=51)") && output_contains("refusing before allocating"));
    CHECK(output_contains("the largest --batch-size that fits is about"));
    /* 2. the evaluation fits, a calibration batch of 16 does not: fewer images at a time */
    limit_at(0.5 * (eval.total + sparse.total), limit, sizeof limit);
    snprintf(args, sizeof args, "%s " ANN2SNN " %s --batch-size 16 --limit-test 16 --steps 51 "
             "--out %s/sliced", limit, resnet, tmp);
    CHECK(run("%s", args) == 0);
    CHECK(output_contains("a calibration batch of 16 images at T = 51 needs about"));
    CHECK(output_contains("calibration runs") && output_contains("images at a time"));
    CHECK(output_contains("check: sparse SNN predictions identical to the dense SNN's: PASS"));
    /* 3. not even one image per calibration forward fits: refused, naming --no-sparse */
    limit_at(0.5 * (one_eval.total + one_sparse.total), limit, sizeof limit);
    snprintf(args, sizeof args, "%s " ANN2SNN " %s --batch-size 1 --limit-test 1 --steps 51 "
             "--out %s/tiny", limit, resnet, tmp);
    CHECK(run("%s", args) == 2);
    CHECK(output_contains("the sparse pass at T = 51 needs about") &&
          output_contains("even at one image") && output_contains("--no-sparse"));
    /* 4. snn-sparse at a --T the checkpoint was not trained at (the LIF CNN of test_refusals,
     *    T = 2): checked at that T, before the runs */
    snn_model_config lif = snn_model_config_default(SNN_MODEL_SPIKING_CNN);
    lif.width_base = 4, lif.hidden = 16, lif.neuron = snn_neuron_config_default(SNN_NEURON_LIF);
    snn_memory_estimate at2, at256;
    lif.time_steps = 2;
    CHECK_OK(snn_model_memory_estimate(&lif, 32, SNN_CPU, false, 0, &at2));
    lif.time_steps = 256;
    CHECK_OK(snn_model_memory_estimate(&lif, 32, SNN_CPU, false, 0, &at256));
    limit_at(0.5 * (at2.total + at256.total), limit, sizeof limit);
    snprintf(args, sizeof args, "%s " SNN_BIN_DIR "/snn-sparse --checkpoint "
             "%s/lif/checkpoint.safetensors --T 256 --batch-size 32 --limit-test 32 --threads 2",
             limit, tmp);
    CHECK(run("%s", args) == 2);
    CHECK(output_contains("evaluating cnn at --batch-size 32 needs about") &&
          output_contains("--T"));
    snn_set_num_threads(threads_before);
}

int main(void)
{
    (void)same_file, (void)last_test_accuracy; /* the runner's helpers this test has no use for */
    if (!fashion_mnist_available()) {
        fprintf(stderr, "skipped: Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)\n");
        return 77;
    }
    if (runner_begin("test_ann2snn_program")) return 1;
    RUN(test_train_convert_reload);
    RUN(test_refusals);
    RUN(test_memory);
    runner_end(test_failures);
    return test_finish();
}
