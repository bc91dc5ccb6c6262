/*
 * nir_import.c - a NIR graph as a runnable snn.c module ("NIRGraph").
 *
 * The nodes are sorted topologically (Kahn's algorithm; a cycle is refused: recurrent graphs
 * are beyond this subset) and each becomes one of snn.c's layers, the inverse of
 * nir_export.c's mapping with dt = 1:
 *   Conv2d -> Conv2d with bias       Affine / Linear -> Linear       Flatten -> Flatten(2, -1)
 *   LIF (tau, r, v_leak = v_reset) -> LIF neuron, hard reset: r = 1 is decay_input on,
 *                                     r = tau decay_input off        IF (r = 1) -> IF neuron
 *   AvgPool2d -> AvgPool2d            SumPool2d -> AvgPool2d times k * k
 *   Threshold(theta) -> 1 - H(theta - x) with H(0) = 1, i.e. exactly (x > theta)
 * and a node's input is the sum of its incoming edges. Parameters that snn.c keeps per layer
 * (tau, thresholds) must be the same for every neuron of a node, else the node is refused.
 * The whole graph runs on (T, N, ...) tensors at once, which for a feed-forward graph equals
 * running it step by step; the module returns the Output node's mean over T.
 */
#include <math.h>
#include <string.h>

#include "nir_graph.h"
#include "nn/nn_internal.h"
#include "tensor/error.h"

typedef enum step_kind { K_INPUT, K_OUTPUT, K_LAYER, K_SUMPOOL, K_THRESHOLD } step_kind;

#define MAX_INPUTS 48

typedef struct graph_step {
    step_kind kind;
    int child;                 /* index into the module's children (K_LAYER, K_SUMPOOL) */
    float value;               /* K_SUMPOOL: k * k; K_THRESHOLD: theta */
    int inputs[MAX_INPUTS];    /* steps whose outputs are summed into this one */
    int n_inputs;
} graph_step;

typedef struct graph_impl {
    int time_steps;
    int n_steps;
    graph_step *steps;         /* (n_steps) in topological order */
} graph_impl;

static snn_tensor *graph_forward(snn_module *m, snn_tensor *x)
{
    graph_impl *g = m->impl;
    if (snn_check_tensor("NIRGraph", "x", x)) return NULL;
    if (x->shape.ndim == 4) x = snn_repeat_time(x, g->time_steps); /* the image at every step */
    else if (x->shape.ndim != 5 || x->shape.dim[0] != g->time_steps) {
        char buf[96];
        return snn_error_null(SNN_ERR_ARGUMENT, "NIRGraph: bad argument 'x' (expected (N, C, H, W) "
                              "or (T=%d, N, C, H, W), got %s)", g->time_steps,
                              snn_shape_str(x->shape, buf, sizeof buf));
    }
    snn_tensor **out = snn_alloc((size_t)g->n_steps * sizeof *out, SNN_CPU);
    if (!out) return snn_error_null(SNN_ERR_MEMORY, "NIRGraph: out of host memory");
    snn_tensor *result = NULL;
    for (int i = 0; i < g->n_steps; i++) {
        const graph_step *s = &g->steps[i];
        snn_tensor *in = s->kind == K_INPUT ? x : NULL;
        for (int k = 0; k < s->n_inputs; k++) in = in ? snn_add(in, out[s->inputs[k]]) : out[s->inputs[k]];
        if (!in) break;
        switch (s->kind) {
        case K_INPUT: out[i] = in; break;
        case K_OUTPUT: out[i] = in; result = in; break;
        case K_LAYER: out[i] = snn_module_forward(m->children[s->child], in); break;
        case K_SUMPOOL: out[i] = snn_scale(snn_module_forward(m->children[s->child], in), s->value); break;
        case K_THRESHOLD:
            /* (x > theta) = 1 - H(theta - x), H(0) = 1 */
            out[i] = snn_add_scalar(snn_neg(snn_heaviside(snn_add_scalar(snn_neg(in), s->value),
                                                          snn_surrogate_default(SNN_SURROGATE_ATAN))),
                                    1.0f);
            break;
        }
        if (!out[i]) {
            result = NULL;
            break;
        }
    }
    snn_free(out, (size_t)g->n_steps * sizeof *out, SNN_CPU);
    return result ? snn_mean(result, 0, false) : NULL;
}

static void graph_free(snn_module *m)
{
    graph_impl *g = m->impl;
    snn_free(g->steps, (size_t)g->n_steps * sizeof *g->steps, SNN_CPU);
    snn_free(g, sizeof *g, SNN_CPU);
}

static const snn_module_ops graph_ops = {"NIRGraph", graph_forward, graph_free, NULL};

/* ---- building ------------------------------------------------------------------------------ */

static snn_status refuse(const char *source, const nir_node *n, const char *why)
{
    return snn_error(SNN_ERR_UNSUPPORTED, "snn_nir_read: '%s' node '%s' (%s): %s", source,
                     n->name, n->type, why);
}

/* The one value of a parameter that must be uniform; false when missing or not uniform. */
static bool uniform(nir_node *n, const char *name, float fallback, bool required, float *out)
{
    nir_array *a = nir_find_array(n, name);
    if (!a) {
        *out = fallback;
        return !required;
    }
    if (a->is_int) {
        *out = (float)a->i[0];
        for (int64_t k = 1; k < a->numel; k++) if (a->i[k] != a->i[0]) return false;
        return true;
    }
    *out = a->f[0];
    for (int64_t k = 1; k < a->numel; k++) if (a->f[k] != a->f[0]) return false;
    return true;
}

/* A square (k, k) pair or a scalar; -1 when missing or not square. */
static int64_t pair(nir_node *n, const char *name, int64_t fallback)
{
    nir_array *a = nir_find_array(n, name);
    if (!a) return fallback;
    if (!a->is_int || a->numel < 1 || a->numel > 2 || (a->numel == 2 && a->i[0] != a->i[1])) return -1;
    return a->i[0];
}

static snn_status copy_in(snn_module *layer, int param, const nir_array *a, const char *source,
                          const nir_node *n)
{
    snn_tensor *t = layer->params[param].tensor;
    if (!a || a->is_int || a->numel != t->numel) return refuse(source, n, "a parameter has the wrong size");
    return snn_tensor_copy_from_host(t, a->f);
}

static snn_module *make_layer(nir_node *n, const char *source, snn_rng *rng, graph_step *s)
{
    const char *t = n->type;
    s->kind = K_LAYER;
    if (strcmp(t, "Conv2d") == 0) {
        nir_array *w = nir_find_array(n, "weight");
        int64_t stride = pair(n, "stride", 1), pad = pair(n, "padding", 0), dil = pair(n, "dilation", 1);
        nir_array *g = nir_find_array(n, "groups");
        if (!w || w->is_int || w->ndim != 4 || w->dim[2] != w->dim[3] || stride < 1 || pad < 0 ||
            dil != 1 || (g && (!g->is_int || g->i[0] != 1))) {
            refuse(source, n, "expected a 4-D weight with a square kernel, square stride and "
                   "padding, dilation 1, groups 1");
            return NULL;
        }
        snn_module *c = snn_conv2d_new((int)w->dim[1], (int)w->dim[0], (int)w->dim[2], (int)stride,
                                       (int)pad, true, rng);
        nir_array *b = nir_find_array(n, "bias");
        if (c && (copy_in(c, 0, w, source, n) != SNN_OK ||
                  (b ? copy_in(c, 1, b, source, n) : snn_tensor_fill(c->params[1].tensor, 0.0f)) != SNN_OK)) {
            snn_module_free(c);
            return NULL;
        }
        return c;
    }
    if (strcmp(t, "Affine") == 0 || strcmp(t, "Linear") == 0) {
        nir_array *w = nir_find_array(n, "weight"), *b = nir_find_array(n, "bias");
        bool affine = t[0] == 'A';
        if (!w || w->is_int || w->ndim != 2 || (affine && !b)) {
            refuse(source, n, "expected a 2-D weight (and a bias for Affine)");
            return NULL;
        }
        snn_module *l = snn_linear_new((int)w->dim[1], (int)w->dim[0], affine, rng);
        if (l && (copy_in(l, 0, w, source, n) != SNN_OK || (affine && copy_in(l, 1, b, source, n) != SNN_OK))) {
            snn_module_free(l);
            return NULL;
        }
        return l;
    }
    if (strcmp(t, "LIF") == 0 || strcmp(t, "IF") == 0) {
        bool lif = t[0] == 'L';
        float tau = 0, r, v_leak = 0, v_th, v_reset;
        bool ok = uniform(n, "r", 1.0f, true, &r) && uniform(n, "v_threshold", 1.0f, true, &v_th) &&
                  uniform(n, "v_reset", 0.0f, false, &v_reset) &&
                  (!lif || (uniform(n, "tau", 0, true, &tau) && uniform(n, "v_leak", 0, true, &v_leak)));
        if (!ok) {
            refuse(source, n, "snn.c neurons take one tau, r, v_leak, v_threshold, v_reset per "
                   "layer (expected the same value for every neuron)");
            return NULL;
        }
        snn_neuron_config cfg = snn_neuron_config_default(lif ? SNN_NEURON_LIF : SNN_NEURON_IF);
        cfg.v_threshold = v_th;
        cfg.v_reset = v_reset;
        cfg.reset = SNN_RESET_HARD;
        if (lif) {
            cfg.tau = tau;
            if (r == 1.0f) cfg.decay_input = true;
            else if (r == tau) cfg.decay_input = false;
            else {
                refuse(source, n, "r must be 1 (input divided by tau) or tau (input added whole)");
                return NULL;
            }
            if (v_leak != v_reset || !(tau > 1.0f)) {
                refuse(source, n, "snn.c's LIF leaks toward v_reset with tau > 1 steps (expected "
                       "v_leak = v_reset and tau > 1 at dt = 1)");
                return NULL;
            }
        } else if (r != 1.0f) {
            refuse(source, n, "expected r = 1 (snn.c's IF adds its input whole)");
            return NULL;
        }
        return snn_neuron_layer_new(&cfg);
    }
    if (strcmp(t, "SumPool2d") == 0 || strcmp(t, "AvgPool2d") == 0) {
        int64_t k = pair(n, "kernel_size", -1), stride = pair(n, "stride", k), pad = pair(n, "padding", 0);
        if (k < 1 || stride < 1 || pad != 0) {
            refuse(source, n, "expected a square kernel and stride, and no padding");
            return NULL;
        }
        if (t[0] == 'S') {
            s->kind = K_SUMPOOL;
            s->value = (float)(k * k);
        }
        return snn_avg_pool2d_new((int)k, (int)stride);
    }
    if (strcmp(t, "Flatten") == 0) return snn_flatten_new(2, -1);
    refuse(source, n, "not in the subset snn.c reads (Input, Output, Conv2d, Affine, Linear, LIF, "
           "IF, SumPool2d, AvgPool2d, Threshold, Flatten)");
    return NULL;
}

/* Kahn's algorithm: order[i] = node index; false on a cycle. */
static bool topological(nir_graph *g, const int *src, const int *dst, int *order)
{
    int *indegree = snn_alloc((size_t)(g->n_nodes + 1) * sizeof *indegree, SNN_CPU);
    if (!indegree) return false;
    memset(indegree, 0, (size_t)(g->n_nodes + 1) * sizeof *indegree);
    for (int e = 0; e < g->n_edges; e++) indegree[dst[e]]++;
    int head = 0, tail = 0;
    for (int i = 0; i < g->n_nodes; i++) if (indegree[i] == 0) order[tail++] = i;
    while (head < tail) {
        int v = order[head++];
        for (int e = 0; e < g->n_edges; e++)
            if (src[e] == v && --indegree[dst[e]] == 0) order[tail++] = dst[e];
    }
    snn_free(indegree, (size_t)(g->n_nodes + 1) * sizeof *indegree, SNN_CPU);
    return tail == g->n_nodes;
}

snn_module *nir_to_module(nir_graph *g, int time_steps, snn_device device, const char *source)
{
    if (time_steps <= 0) time_steps = (int)g->time_steps;
    if (time_steps <= 0 || time_steps > 1024)
        return snn_error_null(SNN_ERR_ARGUMENT, "snn_nir_read: '%s' does not say how many time "
                              "steps to run (pass time_steps > 0)", source);
    size_t ints = (size_t)(g->n_nodes + 2 * g->n_edges + 1) * sizeof(int);
    int *order = snn_alloc(ints, SNN_CPU);
    if (!order) return snn_error_null(SNN_ERR_MEMORY, "snn_nir_read: out of host memory");
    int *src = order + g->n_nodes, *dst = src + g->n_edges;
    snn_status st = SNN_OK;
    int inputs = 0, outputs = 0;
    for (int e = 0; e < g->n_edges && st == SNN_OK; e++) {
        nir_node *a = nir_find_node(g, g->edges[e].src), *b = nir_find_node(g, g->edges[e].dst);
        if (!a || !b)
            st = snn_error(SNN_ERR_FORMAT, "snn_nir_read: '%s': edge '%s' -> '%s' names no node",
                           source, g->edges[e].src, g->edges[e].dst);
        else
            src[e] = (int)(a - g->nodes), dst[e] = (int)(b - g->nodes);
    }
    for (int i = 0; i < g->n_nodes; i++) {
        inputs += strcmp(g->nodes[i].type, "Input") == 0;
        outputs += strcmp(g->nodes[i].type, "Output") == 0;
    }
    if (st == SNN_OK && (inputs != 1 || outputs != 1))
        st = snn_error(SNN_ERR_UNSUPPORTED, "snn_nir_read: '%s' has %d Input and %d Output nodes "
                       "(expected one of each)", source, inputs, outputs);
    if (st == SNN_OK && !topological(g, src, dst, order))
        st = snn_error(SNN_ERR_UNSUPPORTED, "snn_nir_read: '%s' has a cycle (recurrent graphs are "
                       "not in snn.c's subset)", source);
    graph_impl *impl = st == SNN_OK ? snn_alloc(sizeof *impl, SNN_CPU) : NULL;
    graph_step *steps = impl ? snn_alloc((size_t)g->n_nodes * sizeof *steps, SNN_CPU) : NULL;
    snn_module *m = NULL;
    if (st == SNN_OK && (!impl || !steps)) st = snn_error(SNN_ERR_MEMORY, "snn_nir_read: out of memory");
    if (st == SNN_OK) {
        memset(steps, 0, (size_t)g->n_nodes * sizeof *steps);
        *impl = (graph_impl){time_steps, g->n_nodes, steps};
        m = snn_module_new(&graph_ops, impl);
        if (!m) st = snn_last_status();
    }
    if (st != SNN_OK) {
        if (steps) snn_free(steps, (size_t)g->n_nodes * sizeof *steps, SNN_CPU);
        if (impl) snn_free(impl, sizeof *impl, SNN_CPU);
    }
    snn_rng rng;
    snn_rng_seed(&rng, 0); /* every weight is overwritten */
    for (int i = 0; i < g->n_nodes && st == SNN_OK; i++) {
        nir_node *n = &g->nodes[order[i]];
        graph_step *s = &impl->steps[i];
        for (int e = 0; e < g->n_edges; e++) {
            if (dst[e] != order[i]) continue;
            int from = -1;
            for (int k = 0; k < i; k++) if (order[k] == src[e]) from = k;
            if (s->n_inputs == MAX_INPUTS || from < 0) {
                st = refuse(source, n, "too many incoming edges");
                break;
            }
            s->inputs[s->n_inputs++] = from;
        }
        if (st != SNN_OK) break;
        if (strcmp(n->type, "Input") == 0) s->kind = K_INPUT;
        else if (strcmp(n->type, "Output") == 0) s->kind = K_OUTPUT;
        else if (strcmp(n->type, "Threshold") == 0) {
            s->kind = K_THRESHOLD;
            if (!uniform(n, "threshold", 0, true, &s->value))
                st = refuse(source, n, "expected one threshold for the whole node");
        } else {
            snn_module *layer = make_layer(n, source, &rng, s);
            char name[32];
            snprintf(name, sizeof name, "%d", m->n_children);
            st = layer ? snn_module_add(m, name, layer) : snn_last_status();
            if (st == SNN_OK) s->child = m->n_children - 1;
        }
        if (st == SNN_OK && s->kind != K_INPUT && s->n_inputs == 0)
            st = refuse(source, n, "nothing feeds it");
    }
    snn_free(order, ints, SNN_CPU);
    if (st == SNN_OK) st = snn_module_to(m, device);
    if (st == SNN_OK) snn_module_train(m, false);
    if (st != SNN_OK) {
        snn_module_free(m);
        return NULL;
    }
    return m;
}

/* ---- the public entry points --------------------------------------------------------------- */

snn_status snn_nir_write(const char *path, snn_module *model)
{
    if (!path) return snn_error(SNN_ERR_ARGUMENT, "snn_nir_write: bad argument 'path' (got NULL)");
    nir_graph g;
    snn_status st = nir_from_model(&g, model);
    if (st != SNN_OK) return st;
    st = nir_write_hdf5(&g, path);
    nir_graph_free(&g);
    return st;
}

snn_module *snn_nir_read(const char *path, int time_steps, snn_device device)
{
    if (!path) return snn_error_null(SNN_ERR_ARGUMENT, "snn_nir_read: bad argument 'path' (got NULL)");
    nir_graph g;
    if (nir_read_hdf5(&g, path) != SNN_OK) return NULL;
    snn_module *m = nir_to_module(&g, time_steps, device, path);
    nir_graph_free(&g);
    return m;
}
