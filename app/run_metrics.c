/*
 * run_metrics.c - snn-train's per-epoch files (run_metrics.h): metrics.csv, metrics.json and
 * the loss and accuracy curves, each written to <file>.tmp and renamed over the old one.
 */
#include "app/run_metrics.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void path_in(char *buf, size_t size, const char *dir, const char *file)
{
    snprintf(buf, size, "%s/%s", dir, file);
}

/* A file written to <path>.tmp is complete: rename it over <path>. 0, or 1 with a message. */
static int finish_file(FILE *f, const char *tmp, const char *path)
{
    int e = 0;
    if (fflush(f) != 0 || ferror(f)) e = errno ? errno : EIO;
    if (fclose(f) != 0 && !e) e = errno;
    if (!e && rename(tmp, path) != 0) e = errno;
    if (!e) return 0;
    remove(tmp);
    fprintf(stderr, "snn-train: cannot write '%s': %s; it is left as it was\n", path, strerror(e));
    return 1;
}

/* run_metrics.h; the CSV first, then what is drawn from it */
int write_metrics(const char *out_dir, int64_t epoch, const metrics_train *st,
                  const eval_result *ev, float lr)
{
    char path[1024], tmp[1100], line[8192];
    path_in(path, sizeof path, out_dir, "metrics.csv");
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *old = epoch == 0 ? NULL : fopen(path, "r");
    FILE *f = fopen(tmp, "w");
    if (!f) {
        fprintf(stderr, "snn-train: cannot write '%s': %s\n", tmp, strerror(errno));
        if (old) fclose(old);
        return 1;
    }
    if (old && fgets(line, sizeof line, old) && strncmp(line, "epoch,", 6) == 0 &&
        strchr(line, '\n')) {
        fputs(line, f);
    } else {
        fprintf(f, "epoch,train_loss,train_accuracy,test_loss,test_accuracy,images_per_second,"
                   "seconds,lr");
        for (int l = 0; l < ev->n_layers; l++) fprintf(f, ",firing_rate_%s", ev->layer_names[l]);
        fputc('\n', f);
    }
    while (old && fgets(line, sizeof line, old)) {
        long long row = strtoll(line, NULL, 10);
        if (row >= 1 && row <= epoch && strchr(line, '\n')) fputs(line, f);
    }
    if (old) fclose(old);
    fprintf(f, "%lld,%.6f,%.6f,%.6f,%.6f,%.1f,%.2f,%.6g", (long long)epoch + 1, st->loss,
            st->accuracy, ev->total ? ev->loss_sum / (double)ev->total : (double)NAN,
            eval_accuracy(ev), st->images_per_second, st->seconds, (double)lr);
    for (int l = 0; l < ev->n_layers; l++)
        fprintf(f, ",%.6f", ev->elements[l] > 0 ? ev->spikes[l] / ev->elements[l] : 0.0);
    fputc('\n', f);
    if (finish_file(f, tmp, path)) return 1;

    /* read the CSV back: columns 0..7 then firing rates */
    enum { MAX_EPOCHS = 1000, COLS = 8 + MAX_LAYERS };
    static double table[MAX_EPOCHS][COLS];
    char header[8192];
    int rows = 0, cols = 0;
    f = fopen(path, "r");
    if (!f || !fgets(header, sizeof header, f)) {
        fprintf(stderr, "snn-train: cannot read back '%s': %s\n", path,
                f ? "empty" : strerror(errno));
        if (f) fclose(f);
        return 1;
    }
    for (char *c = header; *c; c++) cols += *c == ',';
    cols++;
    while (rows < MAX_EPOCHS && fgets(line, sizeof line, f)) {
        char *p = line;
        for (int c = 0; c < cols && c < COLS; c++) {
            table[rows][c] = strtod(p, &p);
            if (*p == ',') p++;
        }
        rows++;
    }
    fclose(f);

    path_in(path, sizeof path, out_dir, "metrics.json");
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    f = fopen(tmp, "w");
    if (!f) {
        fprintf(stderr, "snn-train: cannot write '%s': %s\n", tmp, strerror(errno));
        return 1;
    }
    {
        fprintf(f, "[\n");
        for (int r = 0; r < rows; r++) {
            fprintf(f, "  {\"epoch\": %d, \"train_loss\": %.6f, \"train_accuracy\": %.6f, "
                       "\"test_loss\": %.6f, \"test_accuracy\": %.6f, \"images_per_second\": %.1f, "
                       "\"seconds\": %.2f, \"lr\": %.6g, \"firing_rate\": {",
                    (int)table[r][0], table[r][1], table[r][2], table[r][3], table[r][4],
                    table[r][5], table[r][6], table[r][7]);
            for (int l = 0; l < ev->n_layers && 8 + l < cols; l++)
                fprintf(f, "%s\"%s\": %.6f", l ? ", " : "", ev->layer_names[l], table[r][8 + l]);
            fprintf(f, "}}%s\n", r + 1 < rows ? "," : "");
        }
        fprintf(f, "]\n");
        if (finish_file(f, tmp, path)) return 1;
    }

    static double x[MAX_EPOCHS], c1[MAX_EPOCHS], c2[MAX_EPOCHS], c3[MAX_EPOCHS], c4[MAX_EPOCHS];
    for (int r = 0; r < rows; r++) {
        x[r] = table[r][0];
        c1[r] = table[r][1], c2[r] = table[r][3];
        c3[r] = 100 * table[r][2], c4[r] = 100 * table[r][4];
    }
    snn_svg_series loss[2] = {{"train", x, c1, rows}, {"test", x, c2, rows}};
    snn_svg_series acc[2] = {{"train", x, c3, rows}, {"test", x, c4, rows}};
    path_in(path, sizeof path, out_dir, "loss.svg");
    snn_status drawn = snn_svg_line_chart(path, "Loss", "epoch", "loss", loss, 2);
    path_in(path, sizeof path, out_dir, "accuracy.svg");
    if (drawn == SNN_OK)
        drawn = snn_svg_line_chart(path, "Accuracy", "epoch", "accuracy (%)", acc, 2);
    if (drawn != SNN_OK) {
        fprintf(stderr, "snn-train: %s\n", snn_last_error());
        return 1;
    }
    return 0;
}
