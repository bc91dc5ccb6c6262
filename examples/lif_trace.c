/*
 * lif_trace.c - one LIF neuron, step by step, driven by a constant current and by a noisy one;
 * writes an SVG of the membrane potential and the spikes over time (docs/img/lif_trace.svg).
 *
 *     build/bin/lif-trace [out.svg] [tau] [current] [noise]
 *
 * Without out.svg it writes runs/lif_trace.svg, making runs/ in the current folder if needed
 * (runs/ is where every program's output goes, and git ignores it).
 *
 * The neuron (docs/neurons.md section 1, SpikingJelly's LIF with decay_input):
 *     H[t] = V[t-1] + (X[t] - V[t-1]) / tau      charge: leak towards the input
 *     S[t] = H[t] >= V_th                         fire
 *     V[t] = S[t] ? V_reset : H[t]                hard reset
 * With a constant X above V_th, V climbs like 1 - exp(-t/tau) towards X and fires at a regular
 * rate, once every about tau ln(X / (X - V_th)) steps; with X below V_th it never fires. Noise
 * makes the intervals irregular: the neuron integrates, so it fires when the input has been
 * high for a while, not at every high sample.
 *
 * It uses the single-step API, with the two drives as a batch of two neurons: each call moves
 * both one step and the state carries V between calls.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "autograd/autograd.h"
#include "neurons/neurons.h"

enum { T = 200 };

typedef struct trace {
    const char *title;
    float x[T], h[T], s[T]; /* input, membrane before reset (H), spike */
} trace;

/* A panel: input (grey), membrane H (blue, the value before the reset, so each climb reaches the
 * threshold), V_th (dashed), spikes (red ticks on top). */
static void svg_panel(FILE *f, const trace *tr, float y0, float v_th)
{
    const float left = 50.0f, width = 700.0f, height = 160.0f;
    const float vmin = -0.5f, vmax = 2.5f;
#define PX(t) (left + width * (float)(t) / (float)(T - 1))
#define PY(v) (y0 + height * (vmax - (v)) / (vmax - vmin))
    fprintf(f, "<text x='%g' y='%g' font-size='13'>%s</text>\n", (double)left, (double)(y0 - 22.0f),
            tr->title);
    fprintf(f, "<rect x='%g' y='%g' width='%g' height='%g' fill='none' stroke='#999'/>\n",
            (double)left, (double)y0, (double)width, (double)height);
    for (int v = 0; v <= 2; v++)
        fprintf(f, "<text x='%g' y='%g' font-size='10' text-anchor='end'>%d</text>\n",
                (double)(left - 4.0f), (double)(PY((float)v) + 3.0f), v);
    fprintf(f, "<line x1='%g' y1='%g' x2='%g' y2='%g' stroke='#444' stroke-dasharray='4 3'/>\n",
            (double)left, (double)PY(v_th), (double)(left + width), (double)PY(v_th));
    fprintf(f, "<text x='%g' y='%g' font-size='10'>V_th</text>\n", (double)(left + width + 4.0f),
            (double)(PY(v_th) + 3.0f));
    const char *colors[2] = {"#bbbbbb", "#1f5fbf"};
    for (int series = 0; series < 2; series++) {
        const float *y = series == 0 ? tr->x : tr->h;
        fprintf(f, "<polyline fill='none' stroke='%s' stroke-width='%s' points='", colors[series],
                series ? "1.5" : "1");
        for (int t = 0; t < T; t++) {
            float v = y[t] < vmin ? vmin : (y[t] > vmax ? vmax : y[t]);
            fprintf(f, "%.1f,%.1f ", (double)PX(t), (double)PY(v));
        }
        fprintf(f, "'/>\n");
    }
    int spikes = 0;
    for (int t = 0; t < T; t++) {
        if (tr->s[t] == 0.0f) continue;
        spikes++;
        fprintf(f, "<line x1='%.1f' y1='%g' x2='%.1f' y2='%g' stroke='#d62728' stroke-width='2'/>\n",
                (double)PX(t), (double)(y0 - 14.0f), (double)PX(t), (double)(y0 - 2.0f));
    }
    fprintf(f, "<text x='%g' y='%g' font-size='10' text-anchor='end'>%d spikes in %d steps</text>\n",
            (double)(left + width), (double)(y0 - 22.0f), spikes, T);
    fprintf(f, "<text x='%g' y='%g' font-size='10' text-anchor='middle'>t</text>\n",
            (double)(left + width / 2.0f), (double)(y0 + height + 14.0f));
#undef PX
#undef PY
}

int main(int argc, char **argv)
{
    for (int a = 1; a < argc; a++) {
        if (argv[a][0] == '-') { /* no flags: --help or a typo must not become a file name */
            fprintf(strcmp(argv[a], "--help") && strcmp(argv[a], "-h") ? stderr : stdout, "%s", "usage: lif-trace [out.svg] [tau] [current] [noise]\n");
            return strcmp(argv[a], "--help") && strcmp(argv[a], "-h") ? 2 : 0;
        }
    }
    const char *path = argc > 1 ? argv[1] : "runs/lif_trace.svg";
    if (argc <= 1 && mkdir("runs", 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "lif-trace: cannot make the folder 'runs' for %s: %s\n", path,
                strerror(errno));
        return 1;
    }
    const float tau = argc > 2 ? strtof(argv[2], NULL) : 10.0f;
    const float current = argc > 3 ? strtof(argv[3], NULL) : 1.25f;
    const float noise = argc > 4 ? strtof(argv[4], NULL) : 1.0f;

    snn_neuron_config cfg = snn_neuron_config_default(SNN_NEURON_LIF);
    cfg.tau = tau;
    if (snn_neuron_config_check("lif-trace", &cfg) != SNN_OK) {
        fprintf(stderr, "%s\n", snn_last_error());
        return 1;
    }
    trace tr[2] = {{.title = "constant input current"}, {.title = "noisy input current"}};
    snn_rng rng;
    snn_rng_seed(&rng, 42);
    for (int t = 0; t < T; t++) {
        tr[0].x[t] = current;
        tr[1].x[t] = current + noise * snn_rng_normal(&rng);
    }

    /* Two neurons (a batch of 2), one step per call; the state keeps V between calls. */
    snn_neuron_state state = {0};
    snn_step_begin();
    snn_no_grad_begin(); /* a simulation: nothing to train, nothing to save */
    for (int t = 0; t < T; t++) {
        const float xt[2] = {tr[0].x[t], tr[1].x[t]};
        /* H before the reset, for the plot: charge the previous V by hand (same equation) */
        for (int i = 0; i < 2; i++) {
            float v = state.v ? state.v->data[i] : cfg.v_reset;
            tr[i].h[t] = v + (xt[i] - (v - cfg.v_reset)) / cfg.tau;
        }
        snn_tensor *x = snn_from_host(SNN_SHAPE(2), xt, SNN_CPU);
        snn_tensor *s = snn_neuron_step(x, &cfg, NULL, &state, NULL);
        if (!s) {
            fprintf(stderr, "lif-trace: %s\n", snn_last_error());
            return 1;
        }
        for (int i = 0; i < 2; i++) tr[i].s[t] = s->data[i];
    }
    snn_no_grad_end();
    snn_step_end();

    FILE *f = fopen(path, "w");
    if (!f) {
        perror(path);
        return 1;
    }
    fprintf(f, "<svg xmlns='http://www.w3.org/2000/svg' width='800' height='470' "
               "font-family='sans-serif'>\n<rect width='100%%' height='100%%' fill='white'/>\n");
    fprintf(f, "<text x='50' y='18' font-size='14'>LIF, tau = %g, V_th = 1, hard reset to 0: "
               "input (grey), membrane H (blue), spikes (red)</text>\n", (double)tau);
    svg_panel(f, &tr[0], 60.0f, cfg.v_threshold);
    svg_panel(f, &tr[1], 290.0f, cfg.v_threshold);
    fprintf(f, "</svg>\n");
    if (fclose(f) != 0) {
        perror(path);
        return 1;
    }
    int n0 = 0, n1 = 0;
    for (int t = 0; t < T; t++) {
        n0 += tr[0].s[t] != 0.0f;
        n1 += tr[1].s[t] != 0.0f;
    }
    printf("wrote %s: constant input %d spikes, noisy input %d spikes in %d steps\n", path, n0, n1, T);
    snn_shutdown();
    return 0;
}
