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
 *     conversion's message, exit 2; bad --levels and --steps are refused, exit 2.
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
    runner_end(test_failures);
    return test_finish();
}
