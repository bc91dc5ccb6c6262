/*
 * nir_import.c - a checked NIR graph (nir_check.h) as a runnable module, "NIRGraph", and the
 * public entry points of nir.h (snn_nir_load, snn_nir_read, snn_nir_write, snn_nir_graph_info).
 *
 * Each node becomes a child module holding what its step needs (nir_run.c runs them):
 *   Affine, Linear -> Linear          Conv2d -> Conv2d (square kernel, stride, padding)
 *   SumPool2d, AvgPool2d -> AvgPool2d (SumPool2d scales it by k^2)
 *   LIF, IF that snn.c's neuron computes (one tau, threshold, reset; v_leak = v_reset; r = 1,
 *     or r = tau / dt) -> a NeuronLayer, run by the fused kernel one step at a time:
 *       NIR LIF at dt: v += (dt / tau) ((v_leak - v) + r I)
 *       snn.c's LIF:   H = V + (X - (V - V_reset)) / tau'
 *       with tau' = tau / dt steps: r = 1 is decay_input on, r = tau / dt is decay_input off;
 *       NIR IF: v += dt r I  is snn.c's IF (H = V + X) when dt r = 1
 *   every other neuron (per-neuron values, LI, I, CubaLIF, CubaLI) -> "NIRParams" children:
 *     the leaky stages of nir_run.h, their per-element decay = dt / tau and gain = dt r / tau
 *     computed here in double and stored as float buffers of the node's shape
 *   Scale, Threshold, Delay -> "NIRParams" with the scale, the thresholds, or the delays' masks
 *   Input, Output, Flatten -> nothing (the executor reads the shapes)
 * Parameters are buffers (not trained); the weights of Linear and Conv2d are trainable, and
 * snn_nir_write writes their current values back into the graph it read.
 */
#include <math.h>
#include <string.h>

#include "nir_run.h"
#include "nn/nn_internal.h"
#include "tensor/error.h"

/* ---- parameter children -------------------------------------------------------------------- */

static snn_module *params_new(nir_kind kind)
{
    nir_params_impl *p = snn_alloc(sizeof *p, SNN_CPU);
    if (!p) return snn_error_null(SNN_ERR_MEMORY, "snn_nir_read: out of host memory");
    *p = (nir_params_impl){kind, false, -1, -1, -1, -1, -1, -1, 0, {0}};
    snn_module *m = snn_module_new(&nir_params_ops, p);
    if (!m) snn_free(p, sizeof *p, SNN_CPU);
    return m;
}

/* Adds a buffer `name` of `shape` holding `values` (host floats) to m; its index, or -1. */
static int add_buffer(snn_module *m, const char *name, snn_shape shape, const float *values)
{
    snn_tensor *t = snn_tensor_new(shape, SNN_CPU);
    if (!t || snn_tensor_copy_from_host(t, values) != SNN_OK) {
        snn_tensor_free(t);
        return -1;
    }
    snn_module_add_param(m, name, t, false);
    return m->n_params - 1;
}

/* values[k] = scale * a[k] / b[k] in double, an absent array read as 1. */
static void ratio(float *values, int64_t count, double scale, const nir_array *a,
                  const nir_array *b)
{
    for (int64_t k = 0; k < count; k++)
        values[k] = (float)(scale * (a ? (double)a->f[k] : 1.0) / (b ? (double)b->f[k] : 1.0));
}

/* A leaky stage (nir_run.h): decay = dt / tau (none without tau), gain = dt r / tau (dt r
 * without tau; r absent: 1), v_leak as given, and for a spiking stage v_threshold and v_reset
 * (0 where the node has none). */
static snn_module *stage_new(nir_kind kind, snn_shape shape, double dt, const nir_array *tau,
                             const nir_array *r, const nir_array *v_leak, bool spiking,
                             const nir_array *v_threshold, const nir_array *v_reset)
{
    const int64_t count = snn_shape_numel(shape);
    float *values = snn_alloc((size_t)count * sizeof *values, SNN_CPU);
    snn_module *m = values ? params_new(kind) : NULL;
    if (!m) {
        snn_free(values, (size_t)count * sizeof *values, SNN_CPU);
        return values ? NULL : snn_error_null(SNN_ERR_MEMORY, "snn_nir_read: out of host memory");
    }
    nir_params_impl *p = m->impl;
    p->spiking = spiking;
    bool ok = true;
    if (tau) {
        ratio(values, count, dt, NULL, tau);
        ok = (p->decay = add_buffer(m, "decay", shape, values)) >= 0;
    }
    ratio(values, count, dt, r, tau);
    ok = ok && (p->gain = add_buffer(m, "gain", shape, values)) >= 0;
    if (ok && v_leak) ok = (p->v_leak = add_buffer(m, "v_leak", shape, v_leak->f)) >= 0;
    if (ok && spiking) {
        ok = (p->v_threshold = add_buffer(m, "v_threshold", shape, v_threshold->f)) >= 0;
        if (!v_reset) memset(values, 0, (size_t)count * sizeof *values);
        p->v_reset = ok ? add_buffer(m, "v_reset", shape, v_reset ? v_reset->f : values) : -1;
        ok = p->v_reset >= 0;
    }
    snn_free(values, (size_t)count * sizeof *values, SNN_CPU);
    if (!ok) {
        snn_module_free(m);
        return NULL;
    }
    return m;
}

bool nir_kernel_neuron(nir_node *n, nir_kind kind, double dt, snn_surrogate surrogate,
                       snn_neuron_config *cfg)
{
    nir_array *tau = nir_find_array(n, "tau"), *r = nir_find_array(n, "r");
    nir_array *v_leak = nir_find_array(n, "v_leak"), *v_th = nir_find_array(n, "v_threshold");
    nir_array *v_reset = nir_find_array(n, "v_reset");
    if (!nir_is_uniform(r) || !nir_is_uniform(v_th) || (v_reset && !nir_is_uniform(v_reset)))
        return false;
    const float reset = v_reset ? v_reset->f[0] : 0.0f;
    *cfg = snn_neuron_config_default(kind == NIR_LIF ? SNN_NEURON_LIF : SNN_NEURON_IF);
    cfg->v_threshold = v_th->f[0];
    cfg->v_reset = reset;
    cfg->reset = SNN_RESET_HARD;
    cfg->surrogate = surrogate;
    if (kind == NIR_IF) return fabs(dt * (double)r->f[0] - 1.0) <= 1e-6; /* v += dt r I = I */
    if (!nir_is_uniform(tau) || !nir_is_uniform(v_leak) || v_leak->f[0] != reset) return false;
    const double steps = (double)tau->f[0] / dt;
    cfg->tau = (float)steps;
    if (!(cfg->tau > 1.0f)) return false;
    if (r->f[0] == 1.0f) cfg->decay_input = true; /* gain dt r / tau = 1 / tau' */
    else if (fabs((double)r->f[0] * dt - (double)tau->f[0]) <= 1e-6 * (double)tau->f[0])
        cfg->decay_input = false;                 /* gain = 1 */
    else return false;
    return true;
}

static snn_status copy_array(snn_module *layer, int index, const nir_array *a)
{
    if (!a) return snn_tensor_fill(layer->params[index].tensor, 0.0f);
    SNN_ASSERT(!a->is_int && a->numel == layer->params[index].tensor->numel); /* nir_check */
    return snn_tensor_copy_from_host(layer->params[index].tensor, a->f);
}

static snn_module *delay_new(nir_node *n, snn_shape shape, double dt, const char *source,
                             int *history)
{
    nir_array *d = nir_find_array(n, "delay");
    snn_module *m = params_new(NIR_DELAY);
    if (!m) return NULL;
    nir_params_impl *p = m->impl;
    int longest = 0;
    for (int64_t k = 0; k < d->numel; k++) {
        int steps = (int)floor((double)d->f[k] / dt + 0.5), j = 0;
        while (j < p->n_delays && p->delays[j] != steps) j++;
        if (j == NIR_MAX_DELAYS) {
            snn_module_free(m);
            nir_refuse(SNN_ERR_UNSUPPORTED, source, n, "more than %d different delays (snn.c "
                       "keeps a mask per delay)", NIR_MAX_DELAYS);
            return NULL;
        }
        if (j == p->n_delays) p->delays[p->n_delays++] = steps;
        if (steps > longest) longest = steps;
    }
    *history = longest + 1;
    if (p->n_delays == 1) return m;
    /* masks (n_delays, shape): 1 where an element's delay is delays[k] */
    snn_shape masks = {.ndim = shape.ndim + 1};
    masks.dim[0] = p->n_delays;
    for (int i = 0; i < shape.ndim; i++) masks.dim[i + 1] = shape.dim[i];
    float *values = snn_alloc((size_t)snn_shape_numel(masks) * sizeof *values, SNN_CPU);
    if (values) {
        for (int j = 0; j < p->n_delays; j++)
            for (int64_t k = 0; k < d->numel; k++)
                values[j * d->numel + k] = (int)floor((double)d->f[k] / dt + 0.5) == p->delays[j];
        p->values = add_buffer(m, "masks", masks, values);
        snn_free(values, (size_t)snn_shape_numel(masks) * sizeof *values, SNN_CPU);
    }
    if (p->values < 0) {
        snn_module_free(m);
        return snn_error_null(SNN_ERR_MEMORY, "snn_nir_read: out of memory for '%s'", n->name);
    }
    return m;
}

/* The child (or children) node i needs; node->child = -1 when none. */
static snn_status make_children(snn_module *m, nir_checked *c, int i, run_node *node,
                                const nir_run *g, snn_rng *rng, const char *source)
{
    nir_node *n = &g->graph.nodes[i];
    const snn_shape in = c->in_shape[i];
    const nir_window w = c->window[i];
    snn_module *child = NULL, *synapse = NULL;
    node->child = node->synapse = -1;
    switch (node->kind) {
    case NIR_INPUT:
    case NIR_OUTPUT:
    case NIR_FLATTEN: return SNN_OK;
    case NIR_AFFINE: {
        nir_array *weight = nir_find_array(n, "weight"), *bias = nir_find_array(n, "bias");
        bool affine = strcmp(n->type, "Affine") == 0;
        child = snn_linear_new((int)weight->dim[1], (int)weight->dim[0], affine, rng);
        if (child && (copy_array(child, 0, weight) != SNN_OK ||
                      (affine && copy_array(child, 1, bias) != SNN_OK))) {
            snn_module_free(child);
            child = NULL;
        }
        break;
    }
    case NIR_CONV2D: {
        nir_array *weight = nir_find_array(n, "weight");
        child = snn_conv2d_new((int)weight->dim[1], (int)weight->dim[0], w.kernel, w.stride, w.pad,
                               true, rng);
        if (child && (copy_array(child, 0, weight) != SNN_OK ||
                      copy_array(child, 1, nir_find_array(n, "bias")) != SNN_OK)) {
            snn_module_free(child);
            child = NULL;
        }
        break;
    }
    case NIR_SUMPOOL2D:
    case NIR_AVGPOOL2D:
        node->scale = (float)(w.kernel * w.kernel);
        child = snn_avg_pool2d_new(w.kernel, w.stride);
        break;
    case NIR_SCALE:
    case NIR_THRESHOLD: {
        nir_array *a = nir_find_array(n, node->kind == NIR_SCALE ? "scale" : "threshold");
        child = params_new(node->kind);
        nir_params_impl *p = child ? child->impl : NULL;
        if (p && (p->values = add_buffer(child, "values", a->numel == 1 ? SNN_SHAPE(1) : in,
                                         a->f)) < 0) {
            snn_module_free(child);
            child = NULL;
        }
        break;
    }
    case NIR_DELAY: child = delay_new(n, in, g->dt, source, &node->history); break;
    case NIR_LIF:
    case NIR_IF: {
        snn_neuron_config cfg;
        node->kernel_neuron = nir_kernel_neuron(n, node->kind, g->dt, g->surrogate, &cfg);
        child = node->kernel_neuron ? snn_neuron_layer_new(&cfg)
              : stage_new(node->kind, in, g->dt, nir_find_array(n, "tau"), nir_find_array(n, "r"),
                          nir_find_array(n, "v_leak"), true, nir_find_array(n, "v_threshold"),
                          nir_find_array(n, "v_reset"));
        break;
    }
    case NIR_LI:
    case NIR_I:
        child = stage_new(node->kind, in, g->dt, nir_find_array(n, "tau"), nir_find_array(n, "r"),
                          nir_find_array(n, "v_leak"), false, NULL, NULL);
        break;
    case NIR_CUBALIF:
    case NIR_CUBALI: {
        /* i += (dt / tau_syn) (w_in x - i): a leaky stage with gain dt w_in / tau_syn, leak to 0 */
        synapse = stage_new(node->kind, in, g->dt, nir_find_array(n, "tau_syn"),
                            nir_find_array(n, "w_in"), NULL, false, NULL, NULL);
        bool fires = node->kind == NIR_CUBALIF;
        child = synapse ? stage_new(node->kind, in, g->dt, nir_find_array(n, "tau_mem"),
                                    nir_find_array(n, "r"), nir_find_array(n, "v_leak"), fires,
                                    nir_find_array(n, "v_threshold"), nir_find_array(n, "v_reset"))
                        : NULL;
        if (!child) snn_module_free(synapse);
        break;
    }
    default: SNN_ASSERT(false);
    }
    if (!child) return snn_last_status();
    char name[16];
    if (synapse) {
        snprintf(name, sizeof name, "%d", m->n_children);
        snn_status st = snn_module_add(m, name, synapse);
        if (st != SNN_OK) {
            snn_module_free(child);
            return st;
        }
        node->synapse = m->n_children - 1;
    }
    snprintf(name, sizeof name, "%d", m->n_children);
    snn_status st = snn_module_add(m, name, child);
    if (st == SNN_OK) node->child = m->n_children - 1;
    return st;
}

snn_module *nir_build(nir_checked *c, int time_steps, snn_surrogate surrogate, snn_device device,
                      const char *source)
{
    nir_graph *graph = c->graph;
    const size_t node_bytes = (size_t)graph->n_nodes * sizeof(run_node);
    const size_t input_bytes = (size_t)graph->n_edges * sizeof(run_input);
    const size_t position_bytes = (size_t)graph->n_nodes * sizeof(int);
    nir_run *g = snn_alloc(sizeof *g, SNN_CPU);
    run_node *nodes = snn_alloc(node_bytes, SNN_CPU);     /* nir_check: >= 2 nodes, >= 1 edge */
    run_input *inputs = snn_alloc(input_bytes, SNN_CPU);
    int *position = snn_alloc(position_bytes, SNN_CPU);  /* a node's place in the order */
    snn_module *m = g && nodes && inputs && position ? snn_module_new(&nir_graph_ops, g) : NULL;
    if (!m) {
        snn_free(g, sizeof *g, SNN_CPU);
        snn_free(nodes, node_bytes, SNN_CPU);
        snn_free(inputs, input_bytes, SNN_CPU);
        snn_free(position, position_bytes, SNN_CPU);
        return snn_error_null(SNN_ERR_MEMORY, "snn_nir_read: out of host memory");
    }
    memset(nodes, 0, node_bytes);
    *g = (nir_run){.graph = *graph, .nodes = nodes, .n_nodes = graph->n_nodes, .inputs = inputs,
                   .n_inputs = graph->n_edges, .time_steps = time_steps, .dt = c->dt,
                   .dt_from_file = c->dt_from_file, .n_back = c->n_back,
                   .in_shape = c->out_shape[c->input], .out_shape = c->in_shape[c->output],
                   .surrogate = surrogate};
    memset(graph, 0, sizeof *graph); /* the graph is the module's now */
    for (int k = 0; k < g->n_nodes; k++) position[c->order[k]] = k;
    snn_rng rng;
    snn_rng_seed(&rng, 0); /* every weight is overwritten */
    snn_status st = SNN_OK;
    int used = 0;
    for (int k = 0; k < g->n_nodes && st == SNN_OK; k++) {
        const int i = c->order[k];
        run_node *node = &nodes[k];
        node->kind = c->kind[i];
        node->name = g->graph.nodes[i].name;
        node->in = c->in_shape[i];
        node->out = c->out_shape[i];
        node->first_input = used;
        for (int e = 0; e < c->n_edges; e++)
            if (c->dst[e] == i) inputs[used++] = (run_input){position[c->src[e]], c->back[e]};
        node->n_inputs = used - node->first_input;
        if (node->kind == NIR_OUTPUT) g->output = k;
        st = make_children(m, c, i, node, g, &rng, source);
    }
    snn_free(position, position_bytes, SNN_CPU);
    if (st == SNN_OK) st = snn_module_to(m, device);
    if (st != SNN_OK) {
        snn_module_free(m);
        return NULL;
    }
    snn_module_train(m, false);
    return m;
}

/* ---- the public entry points --------------------------------------------------------------- */

snn_nir_options snn_nir_options_default(void)
{
    return (snn_nir_options){0, 0.0, SNN_CPU,
                             snn_neuron_config_default(SNN_NEURON_LIF).surrogate};
}

snn_module *snn_nir_load(const char *path, const snn_nir_options *options)
{
    const snn_nir_options o = options ? *options : snn_nir_options_default();
    if (!path)
        return snn_error_null(SNN_ERR_ARGUMENT, "snn_nir_load: bad argument 'path' (got NULL)");
    if (o.time_steps < 0 || o.time_steps > 100000 || !(o.dt >= 0.0) || !isfinite(o.dt))
        return snn_error_null(SNN_ERR_ARGUMENT, "snn_nir_load: bad argument 'options' (expected "
                              "time_steps in 0..100000 and dt >= 0, got %d and %g)", o.time_steps,
                              o.dt);
    nir_graph graph;
    if (nir_read_hdf5(&graph, path) != SNN_OK) return NULL;
    nir_checked c;
    snn_module *m = NULL;
    if (nir_check(&graph, o.dt, path, &c) == SNN_OK) {
        int T = o.time_steps > 0 ? o.time_steps
              : graph.time_steps <= 100000 ? (int)graph.time_steps : 0; /* the file's, if sane */
        m = nir_build(&c, T, o.surrogate, o.device, path);
        nir_checked_free(&c);
    }
    nir_graph_free(&graph); /* empty when the module took it */
    return m;
}

snn_module *snn_nir_read(const char *path, int time_steps, snn_device device)
{
    snn_nir_options o = snn_nir_options_default();
    o.time_steps = time_steps;
    o.device = device;
    return snn_nir_load(path, &o);
}

/* An imported graph written back: the graph as read, with the current weights of its Linear
 * and Conv2d layers and the dt it runs at. */
static snn_status write_imported(const char *path, snn_module *m)
{
    nir_run *g = m->impl;
    for (int k = 0; k < g->n_nodes; k++) {
        const run_node *node = &g->nodes[k];
        if (node->kind != NIR_AFFINE && node->kind != NIR_CONV2D) continue;
        nir_node *n = nir_find_node(&g->graph, node->name);
        snn_module *layer = m->children[node->child];
        nir_array *w = nir_find_array(n, "weight"), *b = nir_find_array(n, "bias");
        snn_status st = snn_tensor_copy_to_host(layer->params[0].tensor, w->f);
        if (st == SNN_OK && b && layer->n_params > 1)
            st = snn_tensor_copy_to_host(layer->params[1].tensor, b->f);
        if (st != SNN_OK) return st;
    }
    nir_graph copy = g->graph;
    if (g->dt > 0.0) copy.dt = g->dt;
    copy.time_steps = g->time_steps;
    return nir_write_hdf5(&copy, path);
}

snn_status snn_nir_write(const char *path, snn_module *model)
{
    if (!path) return snn_error(SNN_ERR_ARGUMENT, "snn_nir_write: bad argument 'path' (got NULL)");
    if (model && model->ops == &nir_graph_ops) return write_imported(path, model);
    nir_graph g;
    snn_status st = nir_from_model(&g, model);
    if (st != SNN_OK) return st;
    st = nir_write_hdf5(&g, path);
    nir_graph_free(&g);
    return st;
}

snn_status snn_nir_graph_info(const snn_module *graph, snn_nir_info *info)
{
    if (!graph || graph->ops != &nir_graph_ops || !info)
        return snn_error(SNN_ERR_ARGUMENT, "snn_nir_graph_info: bad argument '%s' (expected a "
                         "module made by snn_nir_load and somewhere to write)",
                         info ? "graph" : "info");
    const nir_run *g = graph->impl;
    *info = (snn_nir_info){.input = g->in_shape, .output = g->out_shape,
                           .time_steps = g->time_steps, .dt = g->dt,
                           .dt_from_file = g->dt_from_file, .nodes = g->n_nodes,
                           .edges = g->n_inputs, .back_edges = g->n_back};
    snprintf(info->source, sizeof info->source, "%s", g->graph.source);
    return SNN_OK;
}
