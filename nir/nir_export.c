/*
 * nir_export.c - an snn.c model as a NIR graph (docs/nir.md).
 *
 * The model's children are walked in forward order, keeping the shape of the activation,
 * (C, H, W) or (F), and the list of graph nodes whose sum it is (a NIR node sums its incoming
 * edges, so a residual sum needs no node of its own: the consumer gets an edge from each term).
 *
 *   Conv2d [+ BatchNorm2d]  -> Conv2d with BN folded in (eval form, running statistics):
 *                              s = gamma / sqrt(running_var + eps)
 *                              W' = W s (per output channel),  b' = beta + (b - running_mean) s
 *   Linear                  -> Affine (with bias) or Linear
 *   neuron layer (hard reset) -> LIF or IF, one value per neuron, for the Euler step dt = 1:
 *       NIR LIF: tau dv/dt = (v_leak - v) + r I;  Euler: v += (dt / tau) ((v_leak - v) + r I)
 *       snn.c LIF (decay_input): H = V + (X - (V - V_reset)) / tau
 *            -> tau = tau, r = 1, v_leak = V_reset                      (dt = 1)
 *       snn.c LIF (no decay_input): H = V - (V - V_reset) / tau + X  -> r = tau
 *       ParametricLIF: tau = 1 / sigmoid(w), as LIF
 *       IF: H = V + X;  NIR IF: dv/dt = r I  -> r = 1
 *       v_threshold = V_th, v_reset = V_reset (hard reset: V = V_reset after a spike)
 *   MaxPool2d over spikes   -> SumPool2d then Threshold(0): the max of 0/1 values is 1 exactly
 *                              when their sum is > 0 (only exact for spikes, so only there)
 *   AvgPool2d, the ResNet's global average pool -> AvgPool2d (kernel = the map for the latter)
 *   Flatten                 -> Flatten of (C, H, W), start_dim 0, end_dim -1
 *   Dropout                 -> nothing (the identity at inference)
 *   spiking ResNet block    -> its last neuron (sn2; sn3 in a bottleneck) gets edges from the
 *                              last conv and from the shortcut's terms
 *   SEW block (ADD)         -> its output is the terms of the last neuron plus the shortcut's
 *   rsnn (nn/model_rsnn.c): Input (the features of one step: C*W for rows, C for pixels), then
 *     recurrent layer rec_k -> LIF or IF rec_k, with a Linear "rec_k.w_rec" (W_rec) from rec_k
 *                              back to rec_k: the edge that closes the cycle, carrying S[t-1],
 *                              so rec_k sums X[t] + S[t-1] W_rec^T (the form NIR's reference
 *                              package writes a recurrent LIF in)
 *     leaky readout         -> LI (tau 2, r 1, v_leak 0): U[t] = U[t-1] + (I[t] - U[t-1]) / tau
 *                              at dt = 1; the logits are the mean over T of the Output, as for
 *                              every other model
 * plus Input (C, H, W) and Output (classes) nodes. Direct encoding needs nothing: the image is
 * fed at every step. Not exportable (an error naming the layer): soft reset (NIR resets to
 * v_reset), ST-BIF (bipolar spikes and counters), the ANN activations (ReLU, QCLIP), the layers
 * of converted networks, max-pooling of non-spike values.
 */
#include <math.h>
#include <string.h>

#include "nir_graph.h"
#include "nn/model_internal.h"
#include "nn/nn_internal.h"
#include "tensor/error.h"

#define MAX_TERMS 48

typedef struct flow {
    char terms[MAX_TERMS][NIR_NAME];  /* the activation is the sum of these nodes' outputs */
    int n_terms;
    int ndim;                         /* 3: (C, H, W); 1: (F) */
    int64_t shape[3];
    bool spikes;                      /* every term is a neuron's output (0/1 values) */
} flow;

/* Edges from every term of `in` to node `dst`. */
static snn_status connect(nir_graph *g, const flow *in, const char *dst)
{
    for (int i = 0; i < in->n_terms; i++) {
        snn_status st = nir_add_edge(g, in->terms[i], dst);
        if (st != SNN_OK) return st;
    }
    return SNN_OK;
}

static void flow_set(flow *f, const char *node, bool spikes)
{
    snprintf(f->terms[0], NIR_NAME, "%s", node);
    f->n_terms = 1;
    f->spikes = spikes;
}

/* A tensor's values on the host (malloc'd through snn_alloc; free with snn_free(p, numel)). */
static float *host_copy(const snn_tensor *t)
{
    float *p = snn_alloc((size_t)t->numel * sizeof *p, SNN_CPU);
    if (!p) return snn_error_null(SNN_ERR_MEMORY, "snn_nir_write: out of host memory");
    snn_tensor_copy_to_host(t, p);
    return p;
}

static void join(char *out, const char *prefix, const char *name)
{
    snprintf(out, NIR_NAME, "%s%s%s", prefix, prefix[0] ? "." : "", name);
}

/* conv (+ bn when not NULL) -> one Conv2d node named after the conv. */
static snn_status export_conv(nir_graph *g, flow *f, snn_module *conv, snn_module *bn,
                              const char *name)
{
    const snn_conv_impl *c = conv->impl;
    if (f->ndim != 3 || f->shape[0] != c->in_channels)
        return snn_error(SNN_ERR_UNSUPPORTED, "snn_nir_write: '%s' gets input of %d dims / %lld "
                         "channels (expected %d)", name, f->ndim, (long long)f->shape[0],
                         c->in_channels);
    nir_node *n = nir_add_node(g, "Conv2d", name);
    if (!n) return snn_last_status();
    int64_t wdim[4] = {c->out_channels, c->in_channels, c->kernel, c->kernel};
    nir_array *w = nir_add_array(n, "weight", false, 4, wdim);
    nir_array *b = w ? nir_add_array(n, "bias", false, 1, wdim) : NULL;
    if (!b) return snn_last_status();
    float *weight = host_copy(conv->params[0].tensor);
    if (!weight) return snn_last_status();
    float *bias = c->bias ? host_copy(conv->params[1].tensor) : NULL;
    float *bn_host[4] = {0};
    for (int i = 0; bn && i < 4; i++) bn_host[i] = host_copy(bn->params[i].tensor);
    const int64_t per_out = (int64_t)c->in_channels * c->kernel * c->kernel;
    const double eps = bn ? (double)((const snn_batchnorm_impl *)bn->impl)->eps : 0.0;
    for (int o = 0; o < c->out_channels; o++) {
        double scale = 1.0, shift = bias ? (double)bias[o] : 0.0;
        if (bn) {
            /* y = gamma (x - mean) / sqrt(var + eps) + beta, x = W * in + b */
            scale = (double)bn_host[0][o] / sqrt((double)bn_host[3][o] + eps);
            shift = (double)bn_host[1][o] + (shift - (double)bn_host[2][o]) * scale;
        }
        for (int64_t k = 0; k < per_out; k++)
            w->f[o * per_out + k] = (float)((double)weight[o * per_out + k] * scale);
        b->f[o] = (float)shift;
    }
    snn_free(weight, (size_t)conv->params[0].tensor->numel * sizeof(float), SNN_CPU);
    if (bias) snn_free(bias, (size_t)c->out_channels * sizeof(float), SNN_CPU);
    for (int i = 0; bn && i < 4; i++) snn_free(bn_host[i], (size_t)c->out_channels * sizeof(float), SNN_CPU);
    int64_t pair[2] = {c->stride, c->stride}, pad[2] = {c->pad, c->pad}, one[2] = {1, 1};
    int64_t in_shape[2] = {f->shape[1], f->shape[2]};
    snn_status st = nir_add_ints(n, "stride", 2, pair);
    if (st == SNN_OK) st = nir_add_ints(n, "padding", 2, pad);
    if (st == SNN_OK) st = nir_add_ints(n, "dilation", 2, one);
    if (st == SNN_OK) st = nir_add_int(n, "groups", 1);
    if (st == SNN_OK) st = nir_add_ints(n, "input_shape", 2, in_shape);
    if (st == SNN_OK) st = connect(g, f, name);
    f->shape[0] = c->out_channels;
    f->shape[1] = (f->shape[1] + 2 * c->pad - c->kernel) / c->stride + 1;
    f->shape[2] = (f->shape[2] + 2 * c->pad - c->kernel) / c->stride + 1;
    flow_set(f, name, false);
    return st;
}

static snn_status export_neuron(nir_graph *g, flow *f, snn_module *m, const char *name)
{
    const snn_neuron_config *c = &((const snn_neuron_layer_impl *)m->impl)->config;
    if (snn_neuron_is_ann(c->kind))
        return snn_error(SNN_ERR_UNSUPPORTED, "snn_nir_write: '%s' is an ANN activation (%s), not a "
                         "spiking neuron (NIR has no ReLU or quantizer node)", name,
                         snn_neuron_kind_name(c->kind));
    if (c->kind == SNN_NEURON_STBIF)
        return snn_error(SNN_ERR_UNSUPPORTED, "snn_nir_write: '%s' is an ST-BIF neuron (NIR has "
                         "no bipolar spikes or spike counters)", name);
    if (c->kind == SNN_NEURON_ALIF)
        return snn_error(SNN_ERR_UNSUPPORTED, "snn_nir_write: '%s' is an adaptive LIF neuron "
                         "(ALIF: NIR has no neuron whose threshold adapts; its LIF would drop "
                         "tau_adapt and beta)", name);
    if (c->reset == SNN_RESET_SOFT)
        return snn_error(SNN_ERR_UNSUPPORTED, "snn_nir_write: '%s' uses soft reset (NIR's LIF and "
                         "IF reset to v_reset; retrain with hard reset)", name);
    float tau = c->tau;
    if (c->kind == SNN_NEURON_PLIF) {
        tau = snn_plif_tau(m->params[0].tensor);
        if (!(tau > 1.0f)) return snn_error(SNN_ERR_UNSUPPORTED, "snn_nir_write: '%s': bad tau", name);
    }
    bool lif = c->kind != SNN_NEURON_IF;
    nir_node *n = nir_add_node(g, lif ? "LIF" : "IF", name);
    if (!n) return snn_last_status();
    snn_status st = SNN_OK;
    if (lif) st = nir_add_filled(n, "tau", f->ndim, f->shape, tau);
    float r = lif && !c->decay_input ? tau : 1.0f;
    if (st == SNN_OK) st = nir_add_filled(n, "r", f->ndim, f->shape, r);
    if (st == SNN_OK && lif) st = nir_add_filled(n, "v_leak", f->ndim, f->shape, c->v_reset);
    if (st == SNN_OK) st = nir_add_filled(n, "v_threshold", f->ndim, f->shape, c->v_threshold);
    if (st == SNN_OK) st = nir_add_filled(n, "v_reset", f->ndim, f->shape, c->v_reset);
    if (st == SNN_OK) st = connect(g, f, name);
    flow_set(f, name, true);
    return st;
}

static snn_status export_pool(nir_graph *g, flow *f, int kernel, int stride, bool max, bool adaptive,
                              const char *name)
{
    if (f->ndim != 3) return snn_error(SNN_ERR_UNSUPPORTED, "snn_nir_write: '%s' pools a flat vector", name);
    if (adaptive) {
        if (f->shape[1] != f->shape[2])
            return snn_error(SNN_ERR_UNSUPPORTED, "snn_nir_write: '%s' averages a %lldx%lld map "
                             "(exported as a square AvgPool2d only)", name,
                             (long long)f->shape[1], (long long)f->shape[2]);
        kernel = stride = (int)f->shape[1];
    }
    if (max && !f->spikes)
        return snn_error(SNN_ERR_UNSUPPORTED, "snn_nir_write: '%s' max-pools values that are not "
                         "spikes (NIR has no max-pool; over spikes it is SumPool2d + Threshold)",
                         name);
    nir_node *n = nir_add_node(g, max ? "SumPool2d" : "AvgPool2d", name);
    if (!n) return snn_last_status();
    int64_t k[2] = {kernel, kernel}, s[2] = {stride, stride}, p[2] = {0, 0};
    snn_status st = nir_add_ints(n, "kernel_size", 2, k);
    if (st == SNN_OK) st = nir_add_ints(n, "stride", 2, s);
    if (st == SNN_OK) st = nir_add_ints(n, "padding", 2, p);
    if (st == SNN_OK) st = connect(g, f, name);
    f->shape[1] = (f->shape[1] - kernel) / stride + 1;
    f->shape[2] = (f->shape[2] - kernel) / stride + 1;
    flow_set(f, name, false);
    if (st != SNN_OK || !max) return st;
    /* max over 0/1 spikes = (sum > 0) */
    char th[NIR_NAME];
    snprintf(th, sizeof th, "%s.max", name);
    nir_node *t = nir_add_node(g, "Threshold", th);
    if (!t) return snn_last_status();
    st = nir_add_filled(t, "threshold", 3, f->shape, 0.0f);
    if (st == SNN_OK) st = nir_add_edge(g, name, th);
    flow_set(f, th, true);
    return st;
}

static snn_status export_linear(nir_graph *g, flow *f, snn_module *m, const char *name)
{
    const snn_tensor *w = m->params[0].tensor;
    bool bias = m->n_params > 1;
    if (f->ndim != 1 || f->shape[0] != w->shape.dim[1])
        return snn_error(SNN_ERR_UNSUPPORTED, "snn_nir_write: '%s' gets %lld features (expected "
                         "%lld)", name, (long long)f->shape[0], (long long)w->shape.dim[1]);
    nir_node *n = nir_add_node(g, bias ? "Affine" : "Linear", name);
    if (!n) return snn_last_status();
    int64_t dim[2] = {w->shape.dim[0], w->shape.dim[1]};
    nir_array *a = nir_add_array(n, "weight", false, 2, dim);
    if (!a) return snn_last_status();
    snn_tensor_copy_to_host(w, a->f);
    if (bias) {
        nir_array *b = nir_add_array(n, "bias", false, 1, dim);
        if (!b) return snn_last_status();
        snn_tensor_copy_to_host(m->params[1].tensor, b->f);
    }
    f->shape[0] = dim[0];
    snn_status st = connect(g, f, name);
    flow_set(f, name, false);
    return st;
}

/* A recurrent layer: its neuron node `name`, and the Linear "name.w_rec" from the neuron back
 * to itself (the cycle). ALIF is refused by export_neuron, naming the layer. */
static snn_status export_recurrent(nir_graph *g, flow *f, snn_module *m, const char *name)
{
    snn_status st = export_neuron(g, f, m, name);
    if (st != SNN_OK) return st;
    char rec[NIR_NAME];
    if (snprintf(rec, sizeof rec, "%s.w_rec", name) >= (int)sizeof rec)
        return snn_error(SNN_ERR_UNSUPPORTED, "snn_nir_write: the name '%s.w_rec' is longer than "
                         "%d characters", name, NIR_NAME - 1);
    nir_node *n = nir_add_node(g, "Linear", rec);
    if (!n) return snn_last_status();
    const snn_tensor *w = m->params[0].tensor; // (F, F)
    int64_t dim[2] = {w->shape.dim[0], w->shape.dim[1]};
    nir_array *a = nir_add_array(n, "weight", false, 2, dim);
    if (!a) return snn_last_status();
    snn_tensor_copy_to_host(w, a->f);
    st = nir_add_edge(g, name, rec);
    return st == SNN_OK ? nir_add_edge(g, rec, name) : st;
}

/* The leaky-integrator readout of tau: an LI node, no spikes. */
static snn_status export_leaky_readout(nir_graph *g, flow *f, float tau, const char *name)
{
    nir_node *n = nir_add_node(g, "LI", name);
    if (!n) return snn_last_status();
    snn_status st = nir_add_filled(n, "tau", f->ndim, f->shape, tau);
    if (st == SNN_OK) st = nir_add_filled(n, "r", f->ndim, f->shape, 1.0f);
    if (st == SNN_OK) st = nir_add_filled(n, "v_leak", f->ndim, f->shape, 0.0f);
    if (st == SNN_OK) st = connect(g, f, name);
    flow_set(f, name, false);
    return st;
}

static snn_status export_flatten(nir_graph *g, flow *f, const char *name)
{
    if (f->ndim == 1) return SNN_OK;
    nir_node *n = nir_add_node(g, "Flatten", name);
    if (!n) return snn_last_status();
    snn_status st = nir_add_ints(n, "input_type", 3, f->shape);
    if (st == SNN_OK) st = nir_add_int(n, "start_dim", 0);
    if (st == SNN_OK) st = nir_add_int(n, "end_dim", -1);
    if (st == SNN_OK) st = connect(g, f, name);
    f->ndim = 1;
    f->shape[0] = f->shape[0] * f->shape[1] * f->shape[2];
    bool spikes = f->spikes;
    flow_set(f, name, spikes);
    return st;
}

static snn_status export_children(nir_graph *g, flow *f, snn_module *m, const char *prefix,
                                  bool sew);

/* children: conv1 bn1 sn1 conv2 bn2 sn2 [downsample: conv bn [sn]] (model_resnet.c) */
/* A residual block: basic (conv1 bn1 sn1 conv2 bn2 sn2) or bottleneck (conv1 bn1 sn1 conv2 bn2
 * sn2 conv3 bn3 sn3), then the downsample if any (model_resnet.c). */
static snn_status export_block(nir_graph *g, flow *f, snn_module *m, const char *prefix, bool sew)
{
    flow shortcut = *f;
    char name[NIR_NAME];
    snn_module **ch = m->children;
    const int convs = strcmp(m->ops->kind, "Bottleneck") == 0 ? 3 : 2, last = 3 * convs - 1;
    snn_status st = SNN_OK;
    for (int k = 0; k < convs && st == SNN_OK; k++) {
        char part[16];
        snprintf(part, sizeof part, "conv%d", k + 1);
        join(name, prefix, part);
        st = export_conv(g, f, ch[3 * k], ch[3 * k + 1], name);
        if (k + 1 < convs) {
            snprintf(part, sizeof part, "sn%d", k + 1);
            join(name, prefix, part);
            if (st == SNN_OK) st = export_neuron(g, f, ch[3 * k + 2], name);
        }
    }
    if (st == SNN_OK && m->n_children > last + 1) {
        char down[NIR_NAME];
        join(down, prefix, "downsample");
        st = export_children(g, &shortcut, m->children[last + 1], down, sew);
    }
    char sn_last[NIR_NAME], part[16];
    snprintf(part, sizeof part, "sn%d", convs);
    join(sn_last, prefix, part);
    if (st != SNN_OK) return st;
    if (!sew) {
        /* sn_last(bn_last(conv_last(...)) + shortcut): the last neuron gets both */
        if (f->n_terms + shortcut.n_terms > MAX_TERMS)
            return snn_error(SNN_ERR_UNSUPPORTED, "snn_nir_write: '%s': too many residual terms", prefix);
        for (int i = 0; i < shortcut.n_terms; i++)
            snprintf(f->terms[f->n_terms++], NIR_NAME, "%s", shortcut.terms[i]);
        return export_neuron(g, f, ch[last], sn_last);
    }
    /* SEW: sn_last(...) + shortcut, the sum left to the consumers */
    st = export_neuron(g, f, ch[last], sn_last);
    if (st != SNN_OK) return st;
    if (f->n_terms + shortcut.n_terms > MAX_TERMS)
        return snn_error(SNN_ERR_UNSUPPORTED, "snn_nir_write: '%s': too many residual terms", prefix);
    for (int i = 0; i < shortcut.n_terms; i++)
        snprintf(f->terms[f->n_terms++], NIR_NAME, "%s", shortcut.terms[i]);
    f->spikes = false; /* sums of spikes are integers, not 0/1 */
    return SNN_OK;
}

static snn_status export_children(nir_graph *g, flow *f, snn_module *m, const char *prefix,
                                  bool sew)
{
    snn_status st = SNN_OK;
    for (int i = 0; i < m->n_children && st == SNN_OK; i++) {
        snn_module *c = m->children[i];
        char name[NIR_NAME];
        join(name, prefix, c->name);
        const snn_module_ops *ops = c->ops;
        if (ops == &snn_conv2d_ops) {
            snn_module *bn = i + 1 < m->n_children && m->children[i + 1]->ops == &snn_batchnorm2d_ops
                                 ? m->children[++i] : NULL;
            st = export_conv(g, f, c, bn, name);
        } else if (ops == &snn_neuron_layer_ops) {
            st = export_neuron(g, f, c, name);
        } else if (ops == &snn_recurrent_layer_ops) {
            st = export_recurrent(g, f, c, name);
        } else if (snn_leaky_readout_tau(c) > 0.0f) {
            st = export_leaky_readout(g, f, snn_leaky_readout_tau(c), name);
        } else if (ops == &snn_max_pool2d_ops || ops == &snn_avg_pool2d_ops) {
            const snn_pool_impl *p = c->impl;
            st = export_pool(g, f, p->kernel, p->stride, ops == &snn_max_pool2d_ops, false, name);
        } else if (ops == &snn_adaptive_avg_pool_ops) {
            st = export_pool(g, f, 0, 0, false, true, name);
        } else if (ops == &snn_flatten_ops) {
            st = export_flatten(g, f, name);
        } else if (ops == &snn_linear_ops) {
            st = export_linear(g, f, c, name);
        } else if (ops == &snn_dropout_ops) {
            continue;
        } else if (ops == &snn_sequential_ops) {
            st = export_children(g, f, c, name, sew);
        } else if (strcmp(ops->kind, "BasicBlock") == 0 || strcmp(ops->kind, "Bottleneck") == 0) {
            st = export_block(g, f, c, name, sew);
        } else {
            st = snn_error(SNN_ERR_UNSUPPORTED, "snn_nir_write: layer '%s' of kind %s has no NIR "
                           "form", name, ops->kind);
        }
    }
    return st;
}

snn_status nir_from_model(nir_graph *g, snn_module *model)
{
    const snn_model_config *c = snn_model_config_of(model);
    if (!c)
        return snn_error(SNN_ERR_ARGUMENT, "snn_nir_write: bad argument 'model' (expected a model "
                         "made by snn_model_new or loaded from a checkpoint)");
    memset(g, 0, sizeof *g);
    g->time_steps = c->time_steps;
    g->dt = 1.0; /* one snn.c step is one Euler step of length 1 (the mapping above) */
    snprintf(g->source, sizeof g->source, "snn.c");
    /* SEW blocks without a downsample look like plain blocks: tell them by the model's kind */
    bool sew = c->kind == SNN_MODEL_SEW_RESNET18 || c->kind == SNN_MODEL_SEW_RESNET34 ||
               c->kind == SNN_MODEL_SEW_RESNET50;
    flow f = {.ndim = 3, .shape = {c->in_channels, c->height, c->width}};
    if (c->kind == SNN_MODEL_RSNN) /* one step of its sequence: a row, a pixel, a frame */
        f = (flow){.ndim = 1,
                   .shape = {c->encoding == SNN_ENCODING_ROWS     ? c->in_channels * c->width
                             : c->encoding == SNN_ENCODING_PIXELS ? c->in_channels
                                                                  : c->in_channels * c->height *
                                                                        c->width}};
    nir_node *in = nir_add_node(g, "Input", "input");
    snn_status st = in ? nir_add_ints(in, "shape", f.ndim, f.shape) : snn_last_status();
    flow_set(&f, "input", c->encoding == SNN_ENCODING_POISSON); /* Poisson input is 0/1 */
    if (st == SNN_OK) st = export_children(g, &f, model, "", sew);
    if (st == SNN_OK) {
        nir_node *out = nir_add_node(g, "Output", "output");
        st = out ? nir_add_ints(out, "shape", f.ndim, f.shape) : snn_last_status();
    }
    if (st == SNN_OK) st = connect(g, &f, "output");
    if (st != SNN_OK) nir_graph_free(g);
    return st;
}
