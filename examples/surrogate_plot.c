/*
 * surrogate_plot.c - draws the surrogate gradient functions as SVG (docs/img/surrogates.svg):
 * left, the smooth steps g(x) next to the Heaviside step they stand in for; right, their
 * slopes g'(x), which backward uses in place of the Heaviside's Dirac delta.
 *
 *     build/bin/surrogate-plot [out.svg]
 *
 * Each g' is a bump of area 1 centred on the threshold (x = H - V_th = 0); alpha sets how wide:
 * Sigmoid(4) and ATan(2) both peak at 1, ATan with heavier tails; PiecewiseQuadratic(1) is a
 * triangle that is exactly zero for |x| > 1, so neurons far from threshold get no gradient.
 */
#include <stdio.h>
#include <string.h>

#include "neurons/neurons.h"

static const char *const colors[SNN_SURROGATE_COUNT] = {"#1f77b4", "#d62728", "#2ca02c"};

static void panel(FILE *f, float left, const char *title, int derivative)
{
    const float top = 40.0f, width = 340.0f, height = 240.0f, xmin = -3.0f, xmax = 3.0f;
    const float ymin = -0.05f, ymax = 1.1f;
#define PX(x) (left + width * ((x) - xmin) / (xmax - xmin))
#define PY(y) (top + height * (ymax - (y)) / (ymax - ymin))
    fprintf(f, "<text x='%g' y='25' font-size='13'>%s</text>\n", (double)left, title);
    fprintf(f, "<rect x='%g' y='%g' width='%g' height='%g' fill='none' stroke='#999'/>\n",
            (double)left, (double)top, (double)width, (double)height);
    fprintf(f, "<line x1='%g' y1='%g' x2='%g' y2='%g' stroke='#ddd'/>\n", (double)PX(0.0f),
            (double)top, (double)PX(0.0f), (double)(top + height));
    for (int v = -3; v <= 3; v++)
        fprintf(f, "<text x='%g' y='%g' font-size='10' text-anchor='middle'>%d</text>\n",
                (double)PX((float)v), (double)(top + height + 13.0f), v);
    fprintf(f, "<text x='%g' y='%g' font-size='10' text-anchor='end'>1</text>\n",
            (double)(left - 4.0f), (double)(PY(1.0f) + 3.0f));
    fprintf(f, "<text x='%g' y='%g' font-size='10' text-anchor='end'>0</text>\n",
            (double)(left - 4.0f), (double)(PY(0.0f) + 3.0f));
    fprintf(f, "<text x='%g' y='%g' font-size='11' text-anchor='middle'>x = H - V_th</text>\n",
            (double)(left + width / 2.0f), (double)(top + height + 28.0f));
    if (!derivative) /* the Heaviside step itself */
        fprintf(f, "<polyline fill='none' stroke='#000' stroke-dasharray='4 3' points='%g,%g %g,%g "
                   "%g,%g %g,%g'/>\n", (double)PX(xmin), (double)PY(0.0f), (double)PX(0.0f),
                (double)PY(0.0f), (double)PX(0.0f), (double)PY(1.0f), (double)PX(xmax),
                (double)PY(1.0f));
    for (int k = 0; k < SNN_SURROGATE_COUNT; k++) {
        snn_surrogate s = snn_surrogate_default((snn_surrogate_kind)k);
        fprintf(f, "<polyline fill='none' stroke='%s' stroke-width='1.8' points='", colors[k]);
        for (int i = 0; i <= 300; i++) {
            float x = xmin + (xmax - xmin) * (float)i / 300.0f;
            float y = derivative ? snn_surrogate_grad(s, x) : snn_surrogate_g(s, x);
            fprintf(f, "%.1f,%.1f ", (double)PX(x), (double)PY(y));
        }
        fprintf(f, "'/>\n");
    }
#undef PX
#undef PY
}

int main(int argc, char **argv)
{
    for (int a = 1; a < argc; a++) {
        if (argv[a][0] == '-') { /* no flags: --help or a typo must not become a file name */
            fprintf(strcmp(argv[a], "--help") && strcmp(argv[a], "-h") ? stderr : stdout, "%s", "usage: surrogate-plot [out.svg]\n");
            return strcmp(argv[a], "--help") && strcmp(argv[a], "-h") ? 2 : 0;
        }
    }
    const char *path = argc > 1 ? argv[1] : "surrogates.svg";
    FILE *f = fopen(path, "w");
    if (!f) {
        perror(path);
        return 1;
    }
    fprintf(f, "<svg xmlns='http://www.w3.org/2000/svg' width='820' height='360' "
               "font-family='sans-serif'>\n<rect width='100%%' height='100%%' fill='white'/>\n");
    panel(f, 40.0f, "g(x): smooth steps (dashed: Heaviside, the forward)", 0);
    panel(f, 450.0f, "g'(x): the surrogate gradients (backward)", 1);
    for (int k = 0; k < SNN_SURROGATE_COUNT; k++) {
        snn_surrogate s = snn_surrogate_default((snn_surrogate_kind)k);
        float y = 330.0f, x = 120.0f + 220.0f * (float)k;
        fprintf(f, "<line x1='%g' y1='%g' x2='%g' y2='%g' stroke='%s' stroke-width='3'/>\n",
                (double)x, (double)(y - 4.0f), (double)(x + 24.0f), (double)(y - 4.0f), colors[k]);
        fprintf(f, "<text x='%g' y='%g' font-size='12'>%s (alpha = %g)</text>\n",
                (double)(x + 30.0f), (double)y, snn_surrogate_name(s.kind), (double)s.alpha);
    }
    fprintf(f, "</svg>\n");
    if (fclose(f) != 0) {
        perror(path);
        return 1;
    }
    printf("wrote %s\n", path);
    return 0;
}
