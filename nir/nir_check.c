/*
 * nir_check.c - a NIR graph checked at load time (nir_check.h): node kinds, back edges (a
 * depth-first walk from the Input), the execution order (Kahn's algorithm without the back
 * edges), the time step, and the shape on every edge, inferred from the Input node forward.
 *
 * Shape rules (per sample, no batch):
 *   Affine, Linear  weight (out, in): input (in) -> (out)
 *   Conv2d          weight (C_out, C_in, k, k): (C_in, H, W) -> (C_out, H', W'),
 *                   H' = (H + 2 pad - k) / stride + 1 (likewise W')
 *   SumPool2d, AvgPool2d   (C, H, W) -> (C, (H - k) / stride + 1, (W - k) / stride + 1)
 *   Flatten         dims start_dim..end_dim of the input merged into one
 *   every other node: output shape = input shape, and its parameters have that shape
 * A node's inputs (its incoming edges, summed) must all have one shape.
 */
#include <math.h>
#include <stdarg.h>
#include <string.h>

#include "nir_check.h"
#include "tensor/error.h"

static const char *const kind_names[NIR_KIND_COUNT] = {
    "Input", "Output", "Affine", "Conv2d", "SumPool2d", "AvgPool2d", "Flatten", "Scale",
    "Threshold", "Delay", "LIF", "IF", "LI", "I", "CubaLIF", "CubaLI",
};

#define SUPPORTED "Input, Output, Affine, Linear, Conv2d, SumPool2d, AvgPool2d, Flatten, Scale, " \
                  "Threshold, Delay, LIF, IF, LI, I, CubaLIF, CubaLI"

const char *nir_kind_name(nir_kind kind)
{
    return (unsigned)kind < NIR_KIND_COUNT ? kind_names[kind] : "?";
}

bool nir_kind_needs_dt(nir_kind kind)
{
    return kind == NIR_DELAY || kind == NIR_LIF || kind == NIR_IF || kind == NIR_LI ||
           kind == NIR_I || kind == NIR_CUBALIF || kind == NIR_CUBALI;
}

static bool kind_of(const char *type, nir_kind *out)
{
    if (strcmp(type, "Linear") == 0) {
        *out = NIR_AFFINE;
        return true;
    }
    for (int k = 0; k < NIR_KIND_COUNT; k++)
        if (strcmp(type, kind_names[k]) == 0) {
            *out = (nir_kind)k;
            return true;
        }
    return false;
}

snn_status nir_refuse(snn_status status, const char *source, const nir_node *n, const char *fmt,
                      ...)
{
    char why[400];
    va_list args;
    va_start(args, fmt);
    vsnprintf(why, sizeof why, fmt, args);
    va_end(args);
    return snn_error(status, "snn_nir_read: '%s' node '%s' (%s): %s", source, n->name, n->type,
                     why);
}

bool nir_is_uniform(const nir_array *a)
{
    for (int64_t k = 1; k < a->numel; k++)
        if (a->is_int ? a->i[k] != a->i[0] : a->f[k] != a->f[0]) return false;
    return true;
}

void nir_checked_free(nir_checked *c)
{
    const int n = c->n_nodes, e = c->n_edges;
    snn_free(c->kind, (size_t)n * sizeof *c->kind, SNN_CPU);
    snn_free(c->in_shape, (size_t)n * sizeof *c->in_shape, SNN_CPU);
    snn_free(c->out_shape, (size_t)n * sizeof *c->out_shape, SNN_CPU);
    snn_free(c->window, (size_t)n * sizeof *c->window, SNN_CPU);
    snn_free(c->order, (size_t)n * sizeof *c->order, SNN_CPU);
    snn_free(c->src, (size_t)e * sizeof *c->src, SNN_CPU);
    snn_free(c->dst, (size_t)e * sizeof *c->dst, SNN_CPU);
    snn_free(c->back, (size_t)e * sizeof *c->back, SNN_CPU);
    memset(c, 0, sizeof *c);
}

/* `bytes` (> 0: nir_check has refused empty graphs) of zeroed host memory, or NULL. */
static void *zeroed(size_t bytes)
{
    void *p = snn_alloc(bytes, SNN_CPU);
    if (p) memset(p, 0, bytes);
    return p;
}

/* ---- the shape of parameters -------------------------------------------------------------- */

static const char *shape_text(snn_shape s, char *buf, size_t size)
{
    int used = snprintf(buf, size, "(");
    for (int d = 0; d < s.ndim && used > 0 && (size_t)used < size; d++)
        used += snprintf(buf + used, size - (size_t)used, d ? ", %lld" : "%lld",
                         (long long)s.dim[d]);
    if (used > 0 && (size_t)used < size) snprintf(buf + used, size - (size_t)used, ")");
    return buf;
}

static snn_shape array_shape(const nir_array *a)
{
    snn_shape s = {.ndim = a->ndim};
    for (int d = 0; d < a->ndim; d++) s.dim[d] = a->dim[d];
    return s;
}

/* The node's float array `name` with exactly `shape` (or, where scalar_ok, one value); a
 * missing one is refused when required, else *out = NULL. */
static snn_status shaped_param(const char *source, const nir_node *n, const char *name,
                               snn_shape shape, bool required, bool scalar_ok,
                               const nir_array **out)
{
    char want[96], got[96];
    const nir_array *a = nir_find_array((nir_node *)n, name);
    *out = a;
    if (!a)
        return required ? nir_refuse(SNN_ERR_FORMAT, source, n, "has no parameter '%s'", name)
                        : SNN_OK;
    if (a->is_int || a->is_text)
        return nir_refuse(SNN_ERR_FORMAT, source, n, "parameter '%s' is not an array of floats",
                          name);
    if (scalar_ok && a->numel == 1 && a->ndim <= 1) return SNN_OK;
    if (!snn_shape_equal(array_shape(a), shape))
        return nir_refuse(SNN_ERR_FORMAT, source, n, "parameter '%s' has shape %s, expected its "
                          "input's shape %s (one value per neuron)", name,
                          shape_text(array_shape(a), got, sizeof got),
                          shape_text(shape, want, sizeof want));
    return SNN_OK;
}

/* An int parameter given as one value or a pair: both values, `fallback` when missing. */
static snn_status int_pair(const char *source, const nir_node *n, const char *name,
                           int64_t fallback, int64_t v[2])
{
    const nir_array *a = nir_find_array((nir_node *)n, name);
    v[0] = v[1] = fallback;
    if (!a) return SNN_OK;
    if (!a->is_int || a->numel < 1 || a->numel > 2 || a->ndim > 1)
        return nir_refuse(SNN_ERR_FORMAT, source, n, "parameter '%s' is not an integer or a pair "
                          "of integers", name);
    v[0] = a->i[0];
    v[1] = a->i[a->numel - 1];
    return SNN_OK;
}

/* ---- per kind: check the parameters against the input shape, give the output shape --------- */

static snn_status check_dynamics(const nir_checked *c, const char *source, const nir_node *n,
                                 nir_kind kind, snn_shape in)
{
    /* the parameters each neuron model has (NIR's dataclasses), required and optional */
    static const char *const lif[] = {"tau", "r", "v_leak", "v_threshold", NULL};
    static const char *const iff[] = {"r", "v_threshold", NULL};
    static const char *const li[] = {"tau", "r", "v_leak", NULL};
    static const char *const integrator[] = {"r", NULL};
    static const char *const cuba_lif[] = {"tau_syn", "tau_mem", "r", "v_leak", "v_threshold",
                                           NULL};
    static const char *const cuba_li[] = {"tau_syn", "tau_mem", "r", "v_leak", NULL};
    static const char *const optional[] = {"v_reset", "w_in", NULL};
    const char *const *required = kind == NIR_LIF ? lif : kind == NIR_IF ? iff : kind == NIR_LI ? li
                                : kind == NIR_I ? integrator : kind == NIR_CUBALIF ? cuba_lif
                                : kind == NIR_CUBALI ? cuba_li : NULL;
    const nir_array *a;
    for (int i = 0; required && required[i]; i++) {
        snn_status st = shaped_param(source, n, required[i], in, true, false, &a);
        if (st != SNN_OK) return st;
        if (strncmp(required[i], "tau", 3) != 0) continue;
        for (int64_t k = 0; k < a->numel; k++) {
            double tau = (double)a->f[k];
            if (!(tau > 0.0))
                return nir_refuse(SNN_ERR_FORMAT, source, n, "%s[%lld] = %g (expected a time "
                                  "constant > 0)", required[i], (long long)k, tau);
            if (c->dt > tau * (1.0 + 1e-6))
                return nir_refuse(SNN_ERR_UNSUPPORTED, source, n, "%s[%lld] = %g is shorter than "
                                  "the time step dt = %g: a forward-Euler step would overshoot "
                                  "(expected tau >= dt; pass a smaller dt)", required[i],
                                  (long long)k, tau, c->dt);
        }
    }
    for (int i = 0; required && optional[i]; i++) { /* Delay has none of these */
        snn_status st = shaped_param(source, n, optional[i], in, false, false, &a);
        if (st != SNN_OK) return st;
    }
    if (kind != NIR_DELAY) return SNN_OK;
    snn_status st = shaped_param(source, n, "delay", in, true, false, &a);
    if (st != SNN_OK) return st;
    for (int64_t k = 0; k < a->numel; k++) {
        double steps = (double)a->f[k] / c->dt, whole = floor(steps + 0.5);
        if (!(steps >= 0.0 && steps <= 4096.0) || fabs(steps - whole) > 1e-3 * fmax(1.0, whole))
            return nir_refuse(SNN_ERR_UNSUPPORTED, source, n, "delay[%lld] = %g is not a whole "
                              "number of time steps dt = %g from 0 to 4096 (expected a multiple "
                              "of dt)", (long long)k, (double)a->f[k], c->dt);
    }
    return SNN_OK;
}

static snn_status check_affine(const char *source, const nir_node *n, snn_shape in, snn_shape *out)
{
    const nir_array *w = nir_find_array((nir_node *)n, "weight");
    char got[96];
    if (!w || w->is_int || w->is_text || w->ndim != 2)
        return nir_refuse(SNN_ERR_FORMAT, source, n, "expected a 2-D float 'weight' (out, in)%s",
                          w && w->ndim > 2 ? " (batched weights are not supported)" : "");
    if (in.ndim != 1 || in.dim[0] != w->dim[1])
        return nir_refuse(SNN_ERR_FORMAT, source, n, "weight (%lld, %lld) takes an input of %lld "
                          "features, its input has shape %s%s", (long long)w->dim[0],
                          (long long)w->dim[1], (long long)w->dim[1],
                          shape_text(in, got, sizeof got),
                          in.ndim > 1 && snn_shape_numel(in) == w->dim[1]
                              ? "; hint: a Flatten node before it" : "");
    if (strcmp(n->type, "Affine") == 0) {
        const nir_array *b;
        snn_status st = shaped_param(source, n, "bias", SNN_SHAPE(w->dim[0]), true, false, &b);
        if (st != SNN_OK) return st;
    }
    *out = SNN_SHAPE(w->dim[0]);
    return SNN_OK;
}

static snn_status check_conv(const char *source, const nir_node *n, snn_shape in, snn_shape *out,
                             nir_window *win)
{
    const nir_array *w = nir_find_array((nir_node *)n, "weight"), *pad_text = NULL;
    char got[96];
    if (!w || w->is_int || w->is_text || w->ndim != 4)
        return nir_refuse(SNN_ERR_FORMAT, source, n, "expected a 4-D float 'weight' (C_out, C_in, "
                          "kH, kW)");
    int64_t stride[2], pad[2] = {0, 0}, dilation[2], groups[2];
    snn_status st = int_pair(source, n, "stride", 1, stride);
    if (st == SNN_OK) st = int_pair(source, n, "dilation", 1, dilation);
    if (st == SNN_OK) st = int_pair(source, n, "groups", 1, groups);
    const nir_array *p = nir_find_array((nir_node *)n, "padding");
    if (p && p->is_text) pad_text = p;
    else if (st == SNN_OK) st = int_pair(source, n, "padding", 0, pad);
    if (st != SNN_OK) return st;
    if (groups[0] != 1)
        return nir_refuse(SNN_ERR_UNSUPPORTED, source, n, "groups = %lld (snn.c's conv has one "
                          "group)", (long long)groups[0]);
    if (w->dim[2] != w->dim[3] || stride[0] != stride[1] || dilation[0] != 1 || dilation[1] != 1)
        return nir_refuse(SNN_ERR_UNSUPPORTED, source, n, "snn.c's conv takes a square kernel and "
                          "stride and no dilation (got kernel %lldx%lld, stride %lldx%lld, "
                          "dilation %lldx%lld)", (long long)w->dim[2], (long long)w->dim[3],
                          (long long)stride[0], (long long)stride[1], (long long)dilation[0],
                          (long long)dilation[1]);
    const int64_t k = w->dim[2];
    if (pad_text && strcmp(pad_text->text, "valid") == 0) {
        pad[0] = pad[1] = 0;
    } else if (pad_text && strcmp(pad_text->text, "same") == 0 && stride[0] == 1 && k % 2 == 1) {
        pad[0] = pad[1] = (k - 1) / 2;
    } else if (pad_text) {
        return nir_refuse(SNN_ERR_UNSUPPORTED, source, n, "padding '%s' (expected 'valid', or "
                          "'same' with stride 1 and an odd kernel)", pad_text->text);
    }
    if (pad[0] != pad[1] || pad[0] < 0 || stride[0] < 1)
        return nir_refuse(SNN_ERR_UNSUPPORTED, source, n, "padding %lldx%lld, stride %lld "
                          "(expected the same padding >= 0 on both axes, stride >= 1)",
                          (long long)pad[0], (long long)pad[1], (long long)stride[0]);
    if (in.ndim != 3 || in.dim[0] != w->dim[1])
        return nir_refuse(SNN_ERR_FORMAT, source, n, "weight (%lld, %lld, %lld, %lld) takes %lld "
                          "input channels (C, H, W), its input has shape %s",
                          (long long)w->dim[0], (long long)w->dim[1], (long long)k, (long long)k,
                          (long long)w->dim[1], shape_text(in, got, sizeof got));
    const nir_array *shape = nir_find_array((nir_node *)n, "input_shape");
    if (shape && (!shape->is_int || shape->numel != 2 || shape->i[0] != in.dim[1] ||
                  shape->i[1] != in.dim[2]))
        return nir_refuse(SNN_ERR_FORMAT, source, n, "its input_shape is not its input's %lld x "
                          "%lld (H, W)", (long long)in.dim[1], (long long)in.dim[2]);
    const nir_array *b;
    st = shaped_param(source, n, "bias", SNN_SHAPE(w->dim[0]), false, false, &b);
    if (st != SNN_OK) return st;
    int64_t h = (in.dim[1] + 2 * pad[0] - k) / stride[0] + 1;
    int64_t wd = (in.dim[2] + 2 * pad[0] - k) / stride[0] + 1;
    if (in.dim[1] + 2 * pad[0] < k || in.dim[2] + 2 * pad[0] < k)
        return nir_refuse(SNN_ERR_FORMAT, source, n, "its %lld x %lld kernel does not fit its "
                          "input %s", (long long)k, (long long)k, shape_text(in, got, sizeof got));
    *out = SNN_SHAPE(w->dim[0], h, wd);
    *win = (nir_window){(int)k, (int)stride[0], (int)pad[0]};
    return SNN_OK;
}

static snn_status check_pool(const char *source, const nir_node *n, snn_shape in, snn_shape *out,
                             nir_window *win)
{
    int64_t k[2], stride[2], pad[2];
    char got[96];
    if (!nir_find_array((nir_node *)n, "kernel_size"))
        return nir_refuse(SNN_ERR_FORMAT, source, n, "has no parameter 'kernel_size'");
    snn_status st = int_pair(source, n, "kernel_size", 1, k);
    if (st == SNN_OK) st = int_pair(source, n, "stride", k[0], stride);
    if (st == SNN_OK) st = int_pair(source, n, "padding", 0, pad);
    if (st != SNN_OK) return st;
    if (k[0] != k[1] || stride[0] != stride[1] || k[0] < 1 || stride[0] < 1 || pad[0] || pad[1])
        return nir_refuse(SNN_ERR_UNSUPPORTED, source, n, "expected a square kernel and stride and "
                          "no padding (got kernel %lldx%lld, stride %lldx%lld, padding %lldx%lld)",
                          (long long)k[0], (long long)k[1], (long long)stride[0],
                          (long long)stride[1], (long long)pad[0], (long long)pad[1]);
    if (in.ndim != 3 || in.dim[1] < k[0] || in.dim[2] < k[0])
        return nir_refuse(SNN_ERR_FORMAT, source, n, "expected an input (C, H, W) of at least %lld "
                          "x %lld, got %s", (long long)k[0], (long long)k[0],
                          shape_text(in, got, sizeof got));
    *out = SNN_SHAPE(in.dim[0], (in.dim[1] - k[0]) / stride[0] + 1,
                     (in.dim[2] - k[0]) / stride[0] + 1);
    *win = (nir_window){(int)k[0], (int)stride[0], 0};
    return SNN_OK;
}

static snn_status check_flatten(const char *source, const nir_node *n, snn_shape in, snn_shape *out)
{
    char want[96], got[96];
    const nir_array *type = nir_find_array((nir_node *)n, "input_type");
    if (type && (!type->is_int || type->numel != in.ndim ||
                 !snn_shape_equal(array_shape(type), SNN_SHAPE(in.ndim)) ||
                 memcmp(type->i, in.dim, (size_t)in.ndim * sizeof *in.dim) != 0)) {
        snn_shape said = {.ndim = type->is_int && type->numel <= SNN_MAX_DIMS ? (int)type->numel
                                                                              : 0};
        for (int d = 0; d < said.ndim; d++) said.dim[d] = type->i[d];
        return nir_refuse(SNN_ERR_FORMAT, source, n, "its input_type says %s, its input has shape "
                          "%s", shape_text(said, want, sizeof want),
                          shape_text(in, got, sizeof got));
    }
    int64_t start[2], end[2];
    snn_status st = int_pair(source, n, "start_dim", 1, start); /* NIR's defaults: 1, -1 */
    if (st == SNN_OK) st = int_pair(source, n, "end_dim", -1, end);
    if (st != SNN_OK) return st;
    int64_t s = start[0] < 0 ? start[0] + in.ndim : start[0];
    int64_t e = end[0] < 0 ? end[0] + in.ndim : end[0];
    if (s < 0 || e >= in.ndim || s > e)
        return nir_refuse(SNN_ERR_FORMAT, source, n, "start_dim %lld, end_dim %lld do not fit its "
                          "input %s", (long long)start[0], (long long)end[0],
                          shape_text(in, got, sizeof got));
    snn_shape o = {0};
    for (int d = 0; d < in.ndim; d++) {
        if (d <= s || d > e) o.dim[o.ndim++] = in.dim[d];
        else o.dim[o.ndim - 1] *= in.dim[d];
    }
    *out = o;
    return SNN_OK;
}

/* The output shape of node i, whose input shape is known, or the refusal. */
static snn_status infer_node(nir_checked *c, int i, const char *source)
{
    nir_node *n = &c->graph->nodes[i];
    const nir_kind kind = c->kind[i];
    const snn_shape in = c->in_shape[i];
    snn_shape *out = &c->out_shape[i];
    const nir_array *a;
    char want[96], got[96];
    *out = in;
    switch (kind) {
    case NIR_INPUT: {
        const nir_array *s = nir_find_array(n, "shape");
        if (!s || !s->is_int || s->ndim > 1 || s->numel < 1 || s->numel > 4)
            return nir_refuse(SNN_ERR_FORMAT, source, n, "expected 'shape': 1 to 4 sizes of a "
                              "sample, without the batch");
        out->ndim = (int)s->numel;
        for (int d = 0; d < out->ndim; d++) {
            if (s->i[d] < 1 || s->i[d] > (1 << 24))
                return nir_refuse(SNN_ERR_FORMAT, source, n, "shape[%d] = %lld (expected >= 1)",
                                  d, (long long)s->i[d]);
            out->dim[d] = s->i[d];
        }
        c->in_shape[i] = *out;
        return SNN_OK;
    }
    case NIR_OUTPUT: {
        const nir_array *s = nir_find_array(n, "shape");
        if (!s) return SNN_OK;
        snn_shape said = {.ndim = s->is_int && s->numel <= 4 ? (int)s->numel : 0};
        for (int d = 0; d < said.ndim; d++) said.dim[d] = s->i[d];
        if (!s->is_int || !snn_shape_equal(said, in))
            return nir_refuse(SNN_ERR_FORMAT, source, n, "its shape says %s, its input has "
                              "shape %s", shape_text(said, want, sizeof want),
                              shape_text(in, got, sizeof got));
        return SNN_OK;
    }
    case NIR_AFFINE: return check_affine(source, n, in, out);
    case NIR_CONV2D: return check_conv(source, n, in, out, &c->window[i]);
    case NIR_SUMPOOL2D:
    case NIR_AVGPOOL2D: return check_pool(source, n, in, out, &c->window[i]);
    case NIR_FLATTEN: return check_flatten(source, n, in, out);
    case NIR_SCALE: return shaped_param(source, n, "scale", in, true, true, &a);
    case NIR_THRESHOLD: return shaped_param(source, n, "threshold", in, true, true, &a);
    default: return check_dynamics(c, source, n, kind, in);
    }
}

/* ---- structure: edges, the walk from the Input, the order ----------------------------------- */

/* Depth-first from the Input in the file's edge order; marks back edges and reached nodes. */
static snn_status walk(nir_checked *c, const char *source)
{
    nir_graph *g = c->graph;
    int *state = zeroed((size_t)g->n_nodes * sizeof *state); /* 0 new, 1 on the path, 2 done */
    int *stack = zeroed((size_t)g->n_nodes * sizeof *stack);  /* the walk's path */
    int *next = zeroed((size_t)g->n_nodes * sizeof *next);    /* per node: the next edge to try */
    snn_status st = state && stack && next ? SNN_OK
                  : snn_error(SNN_ERR_MEMORY, "snn_nir_read: out of host memory");
    int depth = 0;
    if (st == SNN_OK) {
        stack[depth++] = c->input;
        state[c->input] = 1;
    }
    while (st == SNN_OK && depth > 0) {
        int v = stack[depth - 1], e = next[v];
        while (e < g->n_edges && c->src[e] != v) e++;
        if (e == g->n_edges) {
            state[v] = 2;
            depth--;
            continue;
        }
        next[v] = e + 1;
        int w = c->dst[e];
        if (state[w] == 1) {
            c->back[e] = true;
            c->n_back++;
        } else if (state[w] == 0) {
            state[w] = 1;
            stack[depth++] = w;
        }
    }
    for (int i = 0; st == SNN_OK && i < g->n_nodes; i++)
        if (state[i] == 0)
            st = nir_refuse(SNN_ERR_FORMAT, source, &g->nodes[i], "no path of edges leads to it "
                            "from the Input node '%s'", g->nodes[c->input].name);
    snn_free(state, (size_t)g->n_nodes * sizeof *state, SNN_CPU);
    snn_free(stack, (size_t)g->n_nodes * sizeof *stack, SNN_CPU);
    snn_free(next, (size_t)g->n_nodes * sizeof *next, SNN_CPU);
    return st;
}

/* Kahn's algorithm over the forward edges, taking nodes in file order where free to choose. */
static snn_status order_nodes(nir_checked *c)
{
    nir_graph *g = c->graph;
    int *indegree = zeroed((size_t)g->n_nodes * sizeof *indegree);
    bool *placed = zeroed((size_t)g->n_nodes * sizeof *placed);
    if (!indegree || !placed) {
        snn_free(indegree, (size_t)g->n_nodes * sizeof *indegree, SNN_CPU);
        snn_free(placed, (size_t)g->n_nodes * sizeof *placed, SNN_CPU);
        return snn_error(SNN_ERR_MEMORY, "snn_nir_read: out of host memory");
    }
    for (int e = 0; e < g->n_edges; e++)
        if (!c->back[e]) indegree[c->dst[e]]++;
    for (int count = 0; count < g->n_nodes; count++) {
        int v = 0;
        while (v < g->n_nodes && (placed[v] || indegree[v] > 0)) v++;
        SNN_ASSERT(v < g->n_nodes); /* without its back edges the graph has no cycle */
        placed[v] = true;
        c->order[count] = v;
        for (int e = 0; e < g->n_edges; e++)
            if (!c->back[e] && c->src[e] == v) indegree[c->dst[e]]--;
    }
    snn_free(indegree, (size_t)g->n_nodes * sizeof *indegree, SNN_CPU);
    snn_free(placed, (size_t)g->n_nodes * sizeof *placed, SNN_CPU);
    return SNN_OK;
}

/* Input shapes in execution order: the forward inputs set it, every input must agree. */
static snn_status infer_shapes(nir_checked *c, const char *source)
{
    nir_graph *g = c->graph;
    char a[96], b[96];
    for (int k = 0; k < g->n_nodes; k++) {
        const int i = c->order[k];
        int first = -1;
        for (int e = 0; e < g->n_edges; e++) {
            if (c->dst[e] != i || c->back[e]) continue;
            if (first < 0) {
                first = e;
                c->in_shape[i] = c->out_shape[c->src[e]];
            } else if (!snn_shape_equal(c->in_shape[i], c->out_shape[c->src[e]])) {
                return nir_refuse(SNN_ERR_FORMAT, source, &g->nodes[i], "its inputs differ in "
                                  "shape: %s from '%s', %s from '%s' (converging edges are "
                                  "summed)", shape_text(c->in_shape[i], a, sizeof a),
                                  g->edges[first].src, shape_text(c->out_shape[c->src[e]], b,
                                  sizeof b), g->edges[e].src);
            }
        }
        snn_status st = infer_node(c, i, source);
        if (st != SNN_OK) return st;
    }
    for (int e = 0; e < g->n_edges; e++) /* a back edge's source comes later: check it now */
        if (c->back[e] && !snn_shape_equal(c->in_shape[c->dst[e]], c->out_shape[c->src[e]]))
            return nir_refuse(SNN_ERR_FORMAT, source, &g->nodes[c->dst[e]], "its recurrent input "
                              "from '%s' has shape %s, expected %s", g->edges[e].src,
                              shape_text(c->out_shape[c->src[e]], a, sizeof a),
                              shape_text(c->in_shape[c->dst[e]], b, sizeof b));
    return SNN_OK;
}

snn_status nir_check(nir_graph *g, double dt, const char *source, nir_checked *c)
{
    memset(c, 0, sizeof *c);
    int inputs = 0, outputs = 0, output = -1;
    for (int i = 0; i < g->n_nodes; i++) {
        inputs += strcmp(g->nodes[i].type, "Input") == 0;
        if (strcmp(g->nodes[i].type, "Output") == 0 && outputs++ == 0) output = i;
    }
    if (inputs != 1 || outputs != 1)
        return snn_error(SNN_ERR_FORMAT, "snn_nir_read: '%s' has %d Input and %d Output nodes "
                         "(expected one of each)", source, inputs, outputs);
    if (g->n_edges == 0)
        return nir_refuse(SNN_ERR_FORMAT, source, &g->nodes[output], "no path of edges leads to "
                          "it from the Input node (the graph has no edges)");
    c->graph = g;
    c->n_nodes = g->n_nodes;
    c->n_edges = g->n_edges;
    const size_t n = (size_t)g->n_nodes, e = (size_t)g->n_edges;
    c->kind = zeroed(n * sizeof *c->kind);
    c->in_shape = zeroed(n * sizeof *c->in_shape);
    c->out_shape = zeroed(n * sizeof *c->out_shape);
    c->window = zeroed(n * sizeof *c->window);
    c->order = zeroed(n * sizeof *c->order);
    c->src = zeroed(e * sizeof *c->src);
    c->dst = zeroed(e * sizeof *c->dst);
    c->back = zeroed(e * sizeof *c->back);
    snn_status st = c->kind && c->in_shape && c->out_shape && c->window && c->order && c->src &&
                    c->dst && c->back ? SNN_OK
                    : snn_error(SNN_ERR_MEMORY, "snn_nir_read: out of host memory");
    int needs_dt = -1;
    for (int i = 0; st == SNN_OK && i < g->n_nodes; i++) {
        nir_node *node = &g->nodes[i];
        if (!kind_of(node->type, &c->kind[i]))
            st = nir_refuse(SNN_ERR_UNSUPPORTED, source, node, "snn.c does not run this node type "
                            "(it runs %s)", SUPPORTED);
        else if (c->kind[i] == NIR_INPUT) c->input = i;
        else if (c->kind[i] == NIR_OUTPUT) c->output = i;
        if (st == SNN_OK && needs_dt < 0 && nir_kind_needs_dt(c->kind[i])) needs_dt = i;
    }
    for (int k = 0; st == SNN_OK && k < g->n_edges; k++) {
        nir_node *a = nir_find_node(g, g->edges[k].src), *b = nir_find_node(g, g->edges[k].dst);
        if (!a || !b)
            st = snn_error(SNN_ERR_FORMAT, "snn_nir_read: '%s' edge '%s' -> '%s': there is no node "
                           "named '%s'", source, g->edges[k].src, g->edges[k].dst,
                           a ? g->edges[k].dst : g->edges[k].src);
        else
            c->src[k] = (int)(a - g->nodes), c->dst[k] = (int)(b - g->nodes);
    }
    c->dt = dt > 0.0 ? dt : g->dt;
    c->dt_from_file = !(dt > 0.0) && g->dt > 0.0;
    if (st == SNN_OK && needs_dt >= 0 && !(c->dt > 0.0))
        st = nir_refuse(SNN_ERR_ARGUMENT, source, &g->nodes[needs_dt], "its dynamics need the time "
                        "step dt, and the file's metadata has none; hint: give one (--dt of "
                        "snn-eval and snn-nir-info, snn_nir_options.dt)");
    if (st == SNN_OK && needs_dt < 0) c->dt = 0.0;
    if (st == SNN_OK) st = walk(c, source);
    if (st == SNN_OK) st = order_nodes(c);
    if (st == SNN_OK) st = infer_shapes(c, source);
    if (st != SNN_OK) nir_checked_free(c);
    return st;
}
