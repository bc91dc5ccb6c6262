/*
 * snn_sparse_plot.c - snn-sparse-plot: the accuracy / speed-up trade-off of nets trained with
 * different activity penalties, drawn from the lines snn-sparse --csv appends.
 *
 *   build/bin/snn-sparse-plot results.csv tradeoff.svg [model]
 *
 * One series per device, one point per checkpoint (in the file's order, sorted by LAMBDA):
 * x = the sparse speed-up end to end - on the GPU the test-set pass at the calibration batch
 * (throughput), on the CPU the latency of one image (batch 1), the two targets of docs/sparse.md -
 * y = the sparse model's test accuracy. Rows of other models than `model` (default: all) are
 * skipped. Prints the table it draws.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "snn.h"

#define MAX_ROWS 64

typedef struct row {
    char device[16];
    double lambda, accuracy, speedup;
} row;

/* Splits a CSV line in place into at most max fields; returns how many. */
static int split(char *line, char **fields, int max)
{
    int n = 0;
    for (char *p = line; n < max;) {
        fields[n++] = p;
        p = strchr(p, ',');
        if (!p) break;
        *p++ = '\0';
    }
    return n;
}

static int by_lambda(const void *a, const void *b)
{
    const row *x = a, *y = b;
    return (x->lambda > y->lambda) - (x->lambda < y->lambda);
}

int main(int argc, char **argv)
{
    const bool help = argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"));
    if (argc < 3 || help) {
        fprintf(help ? stdout : stderr, "usage: %s results.csv tradeoff.svg [model]\n"
                "Draws accuracy against sparse speed-up from the lines snn-sparse --csv appended\n"
                "(the GPU's test-set speed-up, the CPU's batch-1 latency), for one model or all.\n",
                argv[0]);
        return help ? 0 : 2;
    }
    const char *model = argc > 3 ? argv[3] : NULL;
    FILE *f = fopen(argv[1], "r");
    if (!f) {
        fprintf(stderr, "snn-sparse-plot: cannot open '%s': %s\n", argv[1], strerror(errno));
        return 1;
    }
    char line[4096], *fields[32];
    if (!fgets(line, sizeof line, f)) {
        fprintf(stderr, "snn-sparse-plot: '%s' is empty\n", argv[1]);
        fclose(f);
        return 1;
    }
    line[strcspn(line, "\r\n")] = '\0';
    const int ncol = split(line, fields, 32);
    const char *names[8] = {"model", "activity_penalty", "device", "accuracy_sparse",
                            "test_dense_s", "test_sparse_s", "latency_dense_ms",
                            "latency_sparse_ms"};
    int at[8];
    for (int k = 0; k < 8; k++) {
        at[k] = -1;
        for (int i = 0; i < ncol; i++)
            if (!strcmp(fields[i], names[k])) at[k] = i;
        if (at[k] < 0) {
            fprintf(stderr, "snn-sparse-plot: '%s' is not a snn-sparse --csv file (no column "
                    "'%s')\n", argv[1], names[k]);
            fclose(f);
            return 1;
        }
    }
    const int c_model = at[0], c_lambda = at[1], c_device = at[2], c_acc = at[3], c_td = at[4],
              c_ts = at[5], c_ld = at[6], c_ls = at[7];
    row rows[MAX_ROWS];
    int n = 0;
    while (n < MAX_ROWS && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = '\0';
        if (split(line, fields, 32) != ncol) continue;
        if (model && strcmp(fields[c_model], model)) continue;
        row *r = &rows[n];
        snprintf(r->device, sizeof r->device, "%s", fields[c_device]);
        r->lambda = strtod(fields[c_lambda], NULL);
        r->accuracy = strtod(fields[c_acc], NULL);
        const bool gpu = !strcmp(r->device, "cuda");
        const double dense = strtod(fields[gpu ? c_td : c_ld], NULL);
        const double sparse = strtod(fields[gpu ? c_ts : c_ls], NULL);
        if (!(dense > 0.0 && sparse > 0.0)) continue;
        r->speedup = dense / sparse;
        n++;
    }
    fclose(f);
    qsort(rows, (size_t)n, sizeof rows[0], by_lambda);

    static double xs[2][MAX_ROWS], ys[2][MAX_ROWS];
    int counts[2] = {0, 0};
    printf("%-6s %8s %10s %9s\n", "device", "LAMBDA", "accuracy", "speed-up");
    for (int i = 0; i < n; i++) {
        const int s = strcmp(rows[i].device, "cuda") ? 1 : 0;
        xs[s][counts[s]] = rows[i].speedup;
        ys[s][counts[s]++] = rows[i].accuracy;
        printf("%-6s %8g %9.2f%% %8.2fx\n", rows[i].device, rows[i].lambda, rows[i].accuracy,
               rows[i].speedup);
    }
    snn_svg_series series[2];
    int n_series = 0;
    if (counts[0]) series[n_series++] = (snn_svg_series){"GPU (test set, batch of calibration)", xs[0], ys[0], counts[0]};
    if (counts[1]) series[n_series++] = (snn_svg_series){"CPU (latency, batch 1)", xs[1], ys[1], counts[1]};
    if (!n_series) {
        fprintf(stderr, "snn-sparse-plot: no rows to draw in '%s'\n", argv[1]);
        return 1;
    }
    if (snn_svg_line_chart(argv[2], "Accuracy against sparse speed-up (points: LAMBDA increasing)",
                           "speed-up, sparse vs dense (x)", "test accuracy (%)", series,
                           n_series) != SNN_OK) {
        fprintf(stderr, "snn-sparse-plot: %s\n", snn_last_error());
        return 1;
    }
    printf("wrote %s\n", argv[2]);
    return 0;
}
