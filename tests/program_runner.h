/*
 * program_runner.h - for tests that drive the example programs as a user does (test_train,
 * test_cuda_train): run a command line capturing its output in a temporary folder, look into
 * the output, the metrics it wrote and the files it left.
 */
#ifndef SNN_PROGRAM_RUNNER_H
#define SNN_PROGRAM_RUNNER_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "snn.h"

#define TRAIN SNN_BIN_DIR "/snn-train"
#define EVAL SNN_BIN_DIR "/snn-eval"

/* the test's temporary folder (mkdtemp), where out.txt collects each command's output */
static char tmp[256];

/* Runs a shell command, capturing its output in tmp/out.txt; returns the exit status. */
static int run(const char *fmt, const char *args)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, fmt, args);
    char full[2400];
    snprintf(full, sizeof full, "%s > %s/out.txt 2>&1", cmd, tmp);
    int status = system(full);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static int output_contains(const char *needle)
{
    char path[400], buf[65536];
    snprintf(path, sizeof path, "%s/out.txt", tmp);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    if (!strstr(buf, needle)) {
        fprintf(stderr, "  output does not contain '%s'; it was:\n%s\n", needle, buf);
        return 0;
    }
    return 1;
}

/* The test accuracy in the last line of a metrics.csv. */
static double last_test_accuracy(const char *dir)
{
    char path[600], line[8192], last[8192] = "";
    snprintf(path, sizeof path, "%s/metrics.csv", dir);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    while (fgets(line, sizeof line, f)) memcpy(last, line, sizeof last);
    fclose(f);
    double v[5] = {0};
    char *p = last;
    for (int i = 0; i < 5; i++) {
        v[i] = strtod(p, &p);
        if (*p == ',') p++;
    }
    return v[4];
}

static int same_file(const char *a, const char *b)
{
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    int same = fa && fb;
    while (same) {
        int ca = fgetc(fa), cb = fgetc(fb);
        if (ca != cb) same = 0;
        if (ca == EOF || cb == EOF) break;
    }
    if (fa) fclose(fa);
    if (fb) fclose(fb);
    return same;
}

/* Makes the temporary folder; 0 on success. */
static inline int runner_begin(const char *name)
{
    snprintf(tmp, sizeof tmp, "/tmp/snn_%s_XXXXXX", name);
    return mkdtemp(tmp) ? 0 : 1;
}

/* Removes it when the test passed (kept for inspection otherwise). */
static inline void runner_end(int failures)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
    if (failures == 0 && system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmp);
}

/*
 * True when Fashion-MNIST is where the programs will look for it: the library's own loader
 * finds the test split by the same search as snn-train (SNN_DATA_DIR[/fashion-mnist], else
 * /usr/share/datasets/fashion-mnist). Data that are not there give false and a message naming
 * where they were looked for; data that are there but unreadable give true, so the test runs
 * and fails on them instead of skipping.
 */
static inline int fashion_mnist_available(void)
{
    snn_dataset probe;
    snn_status status = snn_dataset_load("fashion-mnist", NULL, SNN_SPLIT_TEST, &probe);
    if (status == SNN_OK) {
        snn_dataset_free(&probe);
        return 1;
    }
    if (status != SNN_ERR_IO) return 1;
    fprintf(stderr, "  Fashion-MNIST not found: %s\n", snn_last_error());
    snn_clear_error();
    return 0;
}

#endif /* SNN_PROGRAM_RUNNER_H */
