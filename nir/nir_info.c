/*
 * nir_info.c - snn_nir_describe (nir.h): a NIR file as text, for snn-nir-info. It prints what
 * the checker (nir_check.c) makes of the graph: the time step and where it came from, whether
 * the graph is recurrent, each node in the order snn.c runs it with its input and output
 * shapes and a summary of its parameters, and each edge, the back edges marked. A graph the
 * checker refuses is printed in the file's order without shapes, followed by the refusal.
 */
#include <math.h>
#include <string.h>

#include "nir_run.h"
#include "tensor/error.h"

static const char *shape_text(snn_shape s, char *buf, size_t size)
{
    int used = snprintf(buf, size, "(");
    for (int d = 0; d < s.ndim && used > 0 && (size_t)used < size; d++)
        used += snprintf(buf + used, size - (size_t)used, d ? ", %lld" : "%lld",
                         (long long)s.dim[d]);
    if (used > 0 && (size_t)used < size) snprintf(buf + used, size - (size_t)used, ")");
    return buf;
}

/* One array in a few words: "tau 0.002", "tau (128) 0.001..0.004", "weight (10, 128)",
 * "stride (1, 1)", "padding 'same'". */
static void print_array(FILE *out, const nir_array *a)
{
    snn_shape s = {.ndim = a->ndim};
    for (int d = 0; d < a->ndim; d++) s.dim[d] = a->dim[d];
    char buf[96];
    if (a->is_text) {
        fprintf(out, "%s '%s'", a->name, a->text);
    } else if (a->is_int) {
        fprintf(out, "%s ", a->name);
        for (int64_t k = 0; k < a->numel && k < 4; k++)
            fprintf(out, "%s%lld", k ? ", " : a->numel > 1 ? "(" : "", (long long)a->i[k]);
        fprintf(out, "%s", a->numel > 4 ? ", ...)" : a->numel > 1 ? ")" : "");
    } else if (strcmp(a->name, "weight") == 0 || strcmp(a->name, "bias") == 0) {
        fprintf(out, "%s %s", a->name, shape_text(s, buf, sizeof buf));
    } else if (nir_is_uniform(a)) {
        fprintf(out, "%s %g", a->name, (double)a->f[0]);
    } else {
        float lo = a->f[0], hi = a->f[0];
        for (int64_t k = 1; k < a->numel; k++) {
            lo = a->f[k] < lo ? a->f[k] : lo;
            hi = a->f[k] > hi ? a->f[k] : hi;
        }
        fprintf(out, "%s %s per neuron, %g..%g", a->name, shape_text(s, buf, sizeof buf),
                (double)lo, (double)hi);
    }
}

static void print_node(FILE *out, const nir_node *n, const char *in, const char *to)
{
    char head[160];
    snprintf(head, sizeof head, "  %-24s %-10s %-14s %-14s", n->name, n->type, in, to);
    bool any = false;
    for (int a = 0; a < n->n_arrays; a++) {
        const char *name = n->arrays[a].name;
        if (strcmp(name, "input_type") == 0 || strcmp(name, "shape") == 0 ||
            strcmp(name, "input_shape") == 0)
            continue; /* the shapes columns say it */
        fprintf(out, "%s%s", any ? ", " : head, any ? "" : " ");
        print_array(out, &n->arrays[a]);
        any = true;
    }
    if (!any) { /* no parameters: the line ends at its last column */
        size_t end = strlen(head);
        while (end > 0 && head[end - 1] == ' ') head[--end] = '\0';
        fprintf(out, "%s", head);
    }
    fputc('\n', out);
}

/* lo..hi (or the one value) of scale * a[k] / b[k] over the elements, an absent array 1 */
static void print_ratio(FILE *out, double scale, const nir_array *a, const nir_array *b)
{
    const int64_t count = a ? a->numel : b ? b->numel : 1;
    double lo = INFINITY, hi = -INFINITY;
    for (int64_t k = 0; k < count; k++) {
        double v = scale * (a ? (double)a->f[k] : 1.0) / (b ? (double)b->f[k] : 1.0);
        lo = v < lo ? v : lo;
        hi = v > hi ? v : hi;
    }
    if (lo == hi) fprintf(out, "%g", lo);
    else fprintf(out, "(%g..%g)", lo, hi);
}

/* The step snn.c runs a neuron or Delay node with at dt (nir_run.c), under its line. */
static void print_dynamics(FILE *out, nir_node *n, nir_kind kind, double dt)
{
    const bool cuba = kind == NIR_CUBALIF || kind == NIR_CUBALI;
    nir_array *tau = nir_find_array(n, cuba ? "tau_mem" : "tau"), *r = nir_find_array(n, "r");
    fprintf(out, "  %-24s %-10s at dt %g: ", "", "", dt);
    if (kind == NIR_DELAY) {
        fprintf(out, "y[t] = x[t - d], d = ");
        print_ratio(out, 1.0 / dt, nir_find_array(n, "delay"), NULL);
        fprintf(out, " steps\n");
        return;
    }
    if (cuba) {
        fprintf(out, "i += ");
        print_ratio(out, dt, NULL, nir_find_array(n, "tau_syn"));
        fprintf(out, " (w_in x - i); then ");
    }
    const char *x = cuba ? "i" : "x";
    if (tau) {
        fprintf(out, "v += ");
        print_ratio(out, dt, NULL, tau);
        fprintf(out, " (v_leak - v) + ");
    } else {
        fprintf(out, "v += ");
    }
    print_ratio(out, dt, r, tau);
    fprintf(out, " %s", x);
    snn_neuron_config cfg;
    if ((kind == NIR_LIF || kind == NIR_IF) &&
        nir_kernel_neuron(n, kind, dt, snn_nir_options_default().surrogate, &cfg)) {
        if (kind == NIR_LIF)
            fprintf(out, "; snn.c's LIF kernel, tau %g steps, decay_input %s\n", (double)cfg.tau,
                    cfg.decay_input ? "on" : "off");
        else
            fprintf(out, "; snn.c's IF kernel\n");
    } else {
        fprintf(out, "%s\n", kind == NIR_LIF || kind == NIR_IF || kind == NIR_CUBALIF
                ? "; fires at v >= v_threshold, then v = v_reset" : "");
    }
}

snn_status snn_nir_describe(const char *path, const snn_nir_options *options, FILE *out)
{
    if (!path || !out)
        return snn_error(SNN_ERR_ARGUMENT, "snn_nir_describe: bad argument '%s' (got NULL)",
                         path ? "out" : "path");
    const snn_nir_options o = options ? *options : snn_nir_options_default();
    nir_graph g;
    if (nir_read_hdf5(&g, path) != SNN_OK) return snn_last_status();
    fprintf(out, "file        %s (NIR %s%s%s)\n", path, g.version[0] ? g.version : "version ?",
            g.source[0] ? ", written by " : "", g.source);
    nir_checked c;
    snn_status st = nir_check(&g, o.dt, path, &c);
    char why[600] = "", a[96], b[96];
    if (st != SNN_OK) snprintf(why, sizeof why, "%s", snn_last_error());
    /* dt and T: what the file says and what runs */
    if (st == SNN_OK && c.dt > 0.0)
        fprintf(out, "dt          %g (%s)\n", c.dt, c.dt_from_file ? "the file's metadata"
                : g.dt > 0.0 ? "given; the file's metadata says another" : "given");
    else if (st == SNN_OK)
        fprintf(out, "dt          none needed (no neurons or delays)\n");
    else
        fprintf(out, "dt          %s\n", g.dt > 0.0 ? "in the file's metadata" : "not in the file");
    if (g.dt > 0.0 && st == SNN_OK && !c.dt_from_file) fprintf(out, "            file: %g\n", g.dt);
    if (o.time_steps > 0) fprintf(out, "time steps  %d (given)\n", o.time_steps);
    else if (g.time_steps > 0) fprintf(out, "time steps  %lld (the file's metadata)\n",
                                       (long long)g.time_steps);
    else fprintf(out, "time steps  not in the file (give T, or feed (T, N, ...) sequences)\n");
    if (st == SNN_OK) {
        fprintf(out, "recurrent   %s", c.n_back ? "yes: " : "no\n");
        if (c.n_back)
            fprintf(out, "%d edge%s close%s a cycle (marked below; %s the previous step's "
                    "value)\n", c.n_back, c.n_back > 1 ? "s" : "", c.n_back > 1 ? "" : "s",
                    c.n_back > 1 ? "they carry" : "it carries");
        fprintf(out, "nodes       %d, in the order snn.c runs them:\n", g.n_nodes);
        fprintf(out, "  %-24s %-10s %-14s %-14s %s\n", "name", "type", "input", "output",
                "parameters");
        for (int k = 0; k < g.n_nodes; k++) {
            int i = c.order[k];
            print_node(out, &g.nodes[i], c.kind[i] == NIR_INPUT ? "-"
                       : shape_text(c.in_shape[i], a, sizeof a),
                       shape_text(c.out_shape[i], b, sizeof b));
            if (nir_kind_needs_dt(c.kind[i])) print_dynamics(out, &g.nodes[i], c.kind[i], c.dt);
        }
    } else {
        fprintf(out, "nodes       %d, in the file's order:\n", g.n_nodes);
        for (int i = 0; i < g.n_nodes; i++) print_node(out, &g.nodes[i], "?", "?");
    }
    fprintf(out, "edges       %d (converging edges are summed):\n", g.n_edges);
    for (int e = 0; e < g.n_edges; e++)
        fprintf(out, "  %s -> %s%s\n", g.edges[e].src, g.edges[e].dst,
                st == SNN_OK && c.back[e] ? "   (back edge: the value of step t-1)" : "");
    if (st == SNN_OK) nir_checked_free(&c);
    nir_graph_free(&g);
    if (st != SNN_OK) return snn_error(st, "%s", why);
    return SNN_OK;
}
