/*
 * svg.c - two small SVG writers for training reports: line charts (loss and accuracy curves)
 * and spike rasters (which neuron fired at which time step). Hand-written SVG 1.1: no library,
 * and the files open in any browser.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "nn.h"
#include "tensor/error.h"

static const char *const palette[8] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                       "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"};

static FILE *open_svg(const char *path, int width, int height)
{
    FILE *f = fopen(path, "w");
    if (!f) return NULL;
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
               "font-family=\"sans-serif\" font-size=\"12\">\n"
               "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n", width, height);
    return f;
}

static snn_status close_svg(FILE *f, const char *path)
{
    fprintf(f, "</svg>\n");
    int failed = ferror(f);
    if (fclose(f) != 0 || failed)
        return snn_error(SNN_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
    return SNN_OK;
}

/* A "nice" tick step (1, 2 or 5 times a power of ten) for a range. */
static double tick_step(double range)
{
    if (!(range > 0)) return 1.0;
    double raw = range / 5.0, power = pow(10.0, floor(log10(raw)));
    double m = raw / power;
    return (m < 1.5 ? 1.0 : m < 3.5 ? 2.0 : m < 7.5 ? 5.0 : 10.0) * power;
}

snn_status snn_svg_line_chart(const char *path, const char *title, const char *x_label,
                              const char *y_label, const snn_svg_series *series, int n_series)
{
    const int W = 640, H = 400, left = 64, right = 150, top = 36, bottom = 48;
    double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
    for (int s = 0; s < n_series; s++)
        for (int i = 0; i < series[s].n; i++) {
            if (!isfinite(series[s].y[i])) continue;
            x0 = fmin(x0, series[s].x[i]), x1 = fmax(x1, series[s].x[i]);
            y0 = fmin(y0, series[s].y[i]), y1 = fmax(y1, series[s].y[i]);
        }
    if (!(x1 >= x0)) x0 = 0, x1 = 1;
    if (!(y1 >= y0)) y0 = 0, y1 = 1;
    if (x1 == x0) x1 = x0 + 1;
    if (y1 == y0) y0 -= 0.5, y1 += 0.5;
    double pad = 0.05 * (y1 - y0);
    y0 -= pad, y1 += pad;
    FILE *f = open_svg(path, W, H);
    if (!f) return snn_error(SNN_ERR_IO, "cannot create '%s': %s", path, strerror(errno));
    double pw = W - left - right, ph = H - top - bottom;
#define PX(v) (left + ((v) - x0) / (x1 - x0) * pw)
#define PY(v) (top + ph - ((v) - y0) / (y1 - y0) * ph)
    fprintf(f, "<text x=\"%d\" y=\"22\" font-size=\"15\">%s</text>\n", left, title);
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%g\" height=\"%g\" fill=\"none\" stroke=\"#999\"/>\n",
            left, top, pw, ph);
    double ys = tick_step(y1 - y0);
    for (double v = ceil(y0 / ys) * ys; v <= y1; v += ys)
        fprintf(f, "<line x1=\"%d\" x2=\"%g\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#eee\"/>"
                   "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n",
                left, left + pw, PY(v), PY(v), left - 6, PY(v) + 4, v);
    double xs = tick_step(x1 - x0);
    if (xs < 1 && x1 - x0 >= 2) xs = 1;
    for (double v = ceil(x0 / xs) * xs; v <= x1; v += xs)
        fprintf(f, "<text x=\"%.1f\" y=\"%g\" text-anchor=\"middle\">%g</text>\n", PX(v),
                top + ph + 16, v);
    fprintf(f, "<text x=\"%g\" y=\"%d\" text-anchor=\"middle\">%s</text>\n", left + pw / 2, H - 10,
            x_label);
    fprintf(f, "<text transform=\"translate(16,%g) rotate(-90)\" text-anchor=\"middle\">%s</text>\n",
            top + ph / 2, y_label);
    for (int s = 0; s < n_series && s < 8; s++) {
        fprintf(f, "<polyline fill=\"none\" stroke-width=\"2\" stroke=\"%s\" points=\"", palette[s]);
        for (int i = 0; i < series[s].n; i++)
            if (isfinite(series[s].y[i]))
                fprintf(f, "%.1f,%.1f ", PX(series[s].x[i]), PY(series[s].y[i]));
        fprintf(f, "\"/>\n");
        for (int i = 0; i < series[s].n; i++)
            if (isfinite(series[s].y[i]))
                fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>\n",
                        PX(series[s].x[i]), PY(series[s].y[i]), palette[s]);
        fprintf(f, "<line x1=\"%g\" x2=\"%g\" y1=\"%d\" y2=\"%d\" stroke=\"%s\" stroke-width=\"3\"/>"
                   "<text x=\"%g\" y=\"%d\">%s</text>\n", left + pw + 12, left + pw + 32,
                top + 10 + 18 * s, top + 10 + 18 * s, palette[s], left + pw + 38, top + 14 + 18 * s,
                series[s].label);
    }
#undef PX
#undef PY
    return close_svg(f, path);
}

snn_status snn_svg_raster(const char *path, const char *title, const float *spikes, int T,
                          int neurons, const int *group_start, const char *const *group_names,
                          int n_groups)
{
    const int left = 150, top = 36, cell_w = T <= 16 ? 24 : (T <= 64 ? 8 : 3), row_h = 3;
    int W = left + T * cell_w + 20, H = top + neurons * row_h + 40;
    FILE *f = open_svg(path, W, H);
    if (!f) return snn_error(SNN_ERR_IO, "cannot create '%s': %s", path, strerror(errno));
    fprintf(f, "<text x=\"10\" y=\"22\" font-size=\"15\">%s</text>\n", title);
    for (int g = 0; g < n_groups; g++) {
        int end = g + 1 < n_groups ? group_start[g + 1] : neurons;
        double y = top + group_start[g] * row_h;
        fprintf(f, "<rect x=\"%d\" y=\"%g\" width=\"%d\" height=\"%d\" fill=\"%s\" opacity=\"0.08\"/>"
                   "<text x=\"%d\" y=\"%g\" text-anchor=\"end\">%s</text>\n",
                left, y, T * cell_w, (end - group_start[g]) * row_h, palette[g % 8], left - 6,
                y + (end - group_start[g]) * row_h / 2.0 + 4, group_names[g]);
    }
    for (int i = 0; i < neurons; i++) {
        int g = 0;
        while (g + 1 < n_groups && i >= group_start[g + 1]) g++;
        for (int t = 0; t < T; t++)
            if (spikes[(size_t)t * (size_t)neurons + (size_t)i] != 0.0f)
                fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"%s\"/>\n",
                        left + t * cell_w + 1, top + i * row_h, cell_w - 2, row_h, palette[g % 8]);
    }
    fprintf(f, "<text x=\"%g\" y=\"%d\" text-anchor=\"middle\">time step (T = %d)</text>\n",
            left + T * cell_w / 2.0, H - 12, T);
    return close_svg(f, path);
}
