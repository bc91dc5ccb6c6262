/*
 * sparsify.c - snn_sparsify: find spike-fed convs on the tape, swap them for SparseConv2d
 * modules, calibrate, decide, report.
 *
 * Finding. One forward of the first image of the first calibration batch in grad mode records
 * the tape (the parameters require grad, so every conv and neuron records a node). One image:
 * the tape's structure does not depend on the batch, and a tape keeps what backward would need
 * (ST-BIF's membranes, ...), so at the whole batch this forward was the largest step of the
 * pass (a converted ResNet-18 at T = 51 and 64 images: ~30 GB; one image: ~0.5 GB).
 * From the output, every node is visited once; for a "snn_conv2d" node whose weight (inputs[1])
 * is a Conv2d module's weight, its input is followed back through ops that keep a silent
 * channel silent: "snn_max_pool2d",
 * "snn_flatten", "snn_reshape", a view without a node (detach: its base), eval dropout (which
 * returns its input, so it leaves no trace), and a converted SNN's running max-pool (its output
 * plane at step t is zero where its input plane is: neurons/running_pool.c). The walk succeeds
 * at a "neuron" node whose output is some neuron layer's last spikes: that layer's activity
 * (T*N, C) is the conv's channel mask (it counts nonzero outputs, so ST-BIF's -theta spikes
 * count as well as its +theta ones).
 * At "snn_add" (the SEW-ResNet's residual sum of two spike tensors) both operands are followed;
 * the sum is zero where both are, so the mask is the union of their sources' activities (their
 * counts added at run time). Anything else stops it: the image (no node), so the stem conv never
 * qualifies.
 *
 * Swapping. The Conv2d at that place of the tree is replaced by a SparseConv2d of the same name
 * that takes over the OWNED weight (and bias) tensors, so parameter names, checkpoints and
 * optimizers see the same tensors, and points at its source neuron layer(s).
 *
 * Calibrating. Each batch runs without a tape in a step of its own, or in slices of at most
 * options->max_images images, each a step of its own: a no-grad step still holds every
 * activation of the forward until it ends, T x images of them, so the slice is what bounds the
 * pass's memory (snn_sparsify_memory_estimate sizes it). Statistics and timings add up over the
 * slices as over batches.
 *
 * The SparseConv2d module itself (forward, fallbacks, what calibration measures) is in
 * sparse_module.c; this file decides from those measurements: a layer goes sparse where its
 * best sparse time < max_ratio (0.8) x dense time.
 */
#include <string.h>

#include "sparse_module.h"
#include "tensor/arena.h"
#include "tensor/error.h"

/* ---------------------------------------------------------------------------------------------
 * The module tree: every module with its parent, index and dotted path.
 * ------------------------------------------------------------------------------------------- */

typedef struct tree_entry {
    snn_module *m, *parent;
    int index;
    char path[128];
} tree_entry;

typedef struct tree {
    tree_entry *items;
    int count, cap;
} tree;

static snn_status tree_add(tree *t, snn_module *m, snn_module *parent, int index, const char *prefix)
{
    if (t->count == t->cap) {
        int cap = t->cap ? 2 * t->cap : 64;
        tree_entry *grown = snn_alloc((size_t)cap * sizeof *grown, SNN_CPU);
        if (!grown) return snn_error(SNN_ERR_MEMORY, "snn_sparsify: out of host memory");
        if (t->count) memcpy(grown, t->items, (size_t)t->count * sizeof *grown);
        snn_free(t->items, (size_t)t->cap * sizeof *grown, SNN_CPU);
        t->items = grown;
        t->cap = cap;
    }
    tree_entry *e = &t->items[t->count++];
    *e = (tree_entry){m, parent, index, ""};
    if (parent) snprintf(e->path, sizeof e->path, "%s%s%s", prefix, *prefix ? "." : "", m->name);
    char here[128];
    snprintf(here, sizeof here, "%s", e->path);
    for (int i = 0; i < m->n_children; i++) {
        snn_status st = tree_add(t, m->children[i], m, i, here);
        if (st != SNN_OK) return st;
    }
    return SNN_OK;
}

static void tree_free(tree *t) { snn_free(t->items, (size_t)t->cap * sizeof *t->items, SNN_CPU); }

/* ---------------------------------------------------------------------------------------------
 * The tape walk
 * ------------------------------------------------------------------------------------------- */

typedef struct found {
    int conv;                  /* tree index of the Conv2d */
    int sources[SNN_SPARSE_MAX_SOURCES];  /* tree indices of the neuron layers */
    int n_sources;
    bool through_sum;          /* the input passes a residual sum */
} found;

/* Follows x back to the neuron layers that produced it, through ops that keep a silent channel
 * silent and through residual sums (both operands); false when some path ends elsewhere. */
static bool trace_sources(const tree *t, snn_tensor *x, found *f, int depth)
{
    for (int hops = 0; x && hops < 64 && depth < 32; hops++) {
        snn_node *node = x->grad_fn;
        if (!node) {
            if (x->base) { x = x->base; continue; }   /* a view recorded without a node */
            return false;
        }
        if (!strcmp(node->op, "snn_max_pool2d") || !strcmp(node->op, "snn_flatten") ||
            !strcmp(node->op, "snn_reshape") || !strcmp(node->op, "running_max_pool2d")) {
            x = node->inputs[0];
            continue;
        }
        if (!strcmp(node->op, "neuron")) {
            for (int i = 0; i < t->count; i++) {
                snn_module *m = t->items[i].m;
                if (m->ops != &snn_neuron_layer_ops ||
                    ((snn_neuron_layer_impl *)m->impl)->last_spikes != node->out)
                    continue;
                for (int k = 0; k < f->n_sources; k++)
                    if (f->sources[k] == i) return true;
                if (f->n_sources == SNN_SPARSE_MAX_SOURCES) return false;
                f->sources[f->n_sources++] = i;
                return true;
            }
            return false;
        }
        if (!strcmp(node->op, "snn_add")) {
            /* a sum of two same-shape spike tensors: zero where both are zero */
            snn_tensor *a = node->inputs[0], *b = node->inputs[1];
            if (!a || !b || a->numel != node->out->numel || b->numel != node->out->numel) return false;
            f->through_sum = true;
            return trace_sources(t, a, f, depth + 1) && trace_sources(t, b, f, depth + 1);
        }
        return false;
    }
    return false;
}

typedef struct walk {
    snn_node **seen;
    int count, cap;
} walk;

static bool walk_visit(walk *w, snn_node *node)
{
    for (int i = 0; i < w->count; i++)
        if (w->seen[i] == node) return false;
    if (w->count == w->cap) {
        int cap = w->cap ? 2 * w->cap : 256;
        snn_node **grown = snn_alloc((size_t)cap * sizeof *grown, SNN_CPU);
        if (!grown) return false;
        if (w->count) memcpy(grown, w->seen, (size_t)w->count * sizeof *grown);
        snn_free(w->seen, (size_t)w->cap * sizeof *grown, SNN_CPU);
        w->seen = grown;
        w->cap = cap;
    }
    w->seen[w->count++] = node;
    return true;
}

/* Every node reachable from out, each once, by an explicit stack. */
static snn_status collect_nodes(snn_tensor *out, walk *w)
{
    if (!out->grad_fn) return SNN_OK;
    int cap = 1024, top = 0;
    snn_node **stack = snn_alloc((size_t)cap * sizeof *stack, SNN_CPU);
    if (!stack) return snn_error(SNN_ERR_MEMORY, "snn_sparsify: out of host memory");
    snn_status st = SNN_OK;
    if (walk_visit(w, out->grad_fn)) stack[top++] = out->grad_fn;
    while (top > 0) {
        snn_node *node = stack[--top];
        for (int i = 0; i < node->n_inputs; i++) {
            snn_tensor *in = node->inputs[i];
            while (in && !in->grad_fn && in->base) in = in->base;
            if (!in || !in->grad_fn || !walk_visit(w, in->grad_fn)) continue;
            if (top == cap) {
                st = snn_error(SNN_ERR_STATE, "snn_sparsify: tape deeper than %d nodes", cap);
                break;
            }
            stack[top++] = in->grad_fn;
        }
        if (st != SNN_OK) break;
    }
    snn_free(stack, (size_t)cap * sizeof *stack, SNN_CPU);
    return st;
}

/* ---------------------------------------------------------------------------------------------
 * Slices of a calibration batch
 * ------------------------------------------------------------------------------------------- */

/* The axis of a batch that counts images: 0 for (N, C, H, W) images, 1 for (T, N, C, H, W) event
 * frames; -1 when the model's input is not known (a module not made by snn_model_new) or the
 * batch does not have that shape (its forward then reports it): such a batch is not sliced. */
static int image_axis(const snn_module *model, const snn_tensor *batch)
{
    const snn_model_config *c = snn_model_config_of(model);
    if (!c) return -1;
    const int axis = c->encoding == SNN_ENCODING_EVENTS ? 1 : 0;
    return batch->shape.ndim == 4 + axis && batch->shape.dim[axis] >= 1 ? axis : -1;
}

/* Images [first, first + count) of `batch` as a STEP tensor of the open step: (count, C, H, W)
 * images share the batch's memory (a view of its rows); (T, count, C, H, W) event frames are
 * copied step by step. The batch itself when the slice is all of it or axis < 0. */
static snn_tensor *batch_slice(snn_tensor *batch, int axis, int64_t first, int64_t count)
{
    if (axis < 0 || (first == 0 && count == batch->shape.dim[axis])) return batch;
    snn_shape shape = batch->shape;
    shape.dim[axis] = count;
    int64_t inner = 1; /* floats per image (per frame of an image) */
    for (int d = axis + 1; d < shape.ndim; d++) inner *= shape.dim[d];
    if (axis == 0) {
        snn_tensor *t = snn_step_alloc("snn_sparsify", sizeof *t, SNN_CPU);
        if (!t) return NULL;
        *t = (snn_tensor){.data = batch->data + first * inner, .shape = shape,
                          .numel = snn_shape_numel(shape), .device = batch->device,
                          .lifetime = SNN_STEP, .base = batch->base ? batch->base : batch};
        return t;
    }
    snn_tensor *t = snn_step_tensor("snn_sparsify", shape, batch->device);
    const snn_kernels *k = t ? snn_kernels_for(batch->device) : NULL;
    if (!k) return NULL;
    const int64_t images = batch->shape.dim[1];
    for (int64_t step = 0; step < shape.dim[0]; step++)
        k->copy(t->data + step * count * inner, batch->data + (step * images + first) * inner,
                (size_t)(count * inner) * sizeof(float), SNN_COPY_DEVICE_TO_DEVICE);
    return t;
}

/* Runs the first image of batch 0 with a tape and lists the spike-fed Conv2d modules. */
static snn_status find_convs(snn_module *model, snn_tensor *batch, const tree *t, found *out,
                             int *n_out, snn_sparse_report *rep)
{
    snn_status st = snn_step_begin();
    if (st != SNN_OK) return st;
    snn_tensor *one = batch_slice(batch, image_axis(model, batch), 0, 1);
    snn_tensor *y = one ? snn_module_forward(model, one) : NULL;
    walk w = {0};
    if (!y) st = snn_last_status();
    if (st == SNN_OK) st = collect_nodes(y, &w);
    *n_out = 0;
    for (int i = 0; st == SNN_OK && i < w.count; i++) {
        snn_node *node = w.seen[i];
        if (strcmp(node->op, "snn_conv2d")) continue;
        rep->convs_seen++;
        int conv = -1;
        for (int j = 0; j < t->count && conv < 0; j++) {
            snn_module *m = t->items[j].m;
            if (m->ops == &snn_conv2d_ops && m->params[0].tensor == node->inputs[1]) conv = j;
        }
        if (conv < 0) continue;
        found f = {.conv = conv};
        if (!trace_sources(t, node->inputs[0], &f, 0) || f.n_sources == 0) continue;
        bool dup = false;
        for (int k = 0; k < *n_out; k++) dup |= out[k].conv == conv;
        if (dup) continue;
        if (*n_out == SNN_SPARSE_MAX_LAYERS) {
            st = snn_error(SNN_ERR_UNSUPPORTED, "snn_sparsify: more than %d spike-fed convs",
                           SNN_SPARSE_MAX_LAYERS);
            break;
        }
        if (f.through_sum) rep->residual_sum_fed++;
        out[(*n_out)++] = f;
    }
    snn_free(w.seen, (size_t)w.cap * sizeof *w.seen, SNN_CPU);
    snn_step_end();
    return st;
}

/* Replaces the Conv2d at tree entry f->conv by a SparseConv2d reading f's sources. */
static snn_status swap_conv(tree *t, const found *f)
{
    tree_entry *e = &t->items[f->conv];
    snn_module *old = e->m;
    const snn_conv_impl *c = old->impl;
    snn_module *m = snn_sparse_module_new(c, f->n_sources);
    if (!m) return snn_last_status();
    sparse_impl *s = m->impl;
    snprintf(s->name, sizeof s->name, "%s", e->path);
    for (int i = 0; i < f->n_sources; i++) {
        s->sources[i] = t->items[f->sources[i]].m;
        size_t used = strlen(s->source_name);
        snprintf(s->source_name + used, sizeof s->source_name - used, "%s%s", i ? "+" : "",
                 t->items[f->sources[i]].path);
    }
    memcpy(m->name, old->name, sizeof m->name);
    m->training = old->training;
    /* take over the OWNED tensors: same objects, same names */
    for (int i = 0; i < old->n_params; i++) m->params[i] = old->params[i];
    m->n_params = old->n_params;
    old->n_params = 0;
    snn_status st = snn_sparse_module_prepare(m);
    if (st != SNN_OK) {  /* give the tensors back */
        for (int i = 0; i < m->n_params; i++) old->params[i] = m->params[i];
        old->n_params = m->n_params;
        m->n_params = 0;
        snn_module_free(m);
        return st;
    }
    e->parent->children[e->index] = m;
    snn_module_free(old);
    e->m = m;
    return SNN_OK;
}

snn_sparse_options snn_sparse_options_default(void)
{
    return (snn_sparse_options){0.8, SNN_SPARSE_AUTO, true, NULL, false, 0, true};
}

static int percentile95(const int64_t *hist, int C)
{
    int64_t total = 0;
    for (int c = 0; c <= C; c++) total += hist[c];
    if (!total) return 0;
    int64_t need = (total * 95 + 99) / 100, run = 0;
    for (int c = 0; c <= C; c++) {
        run += hist[c];
        if (run >= need) return c;
    }
    return C;
}

/* The path a round's timings pick: the fastest sparse kernel, if it beats max_ratio x dense;
 * else (or when the round was not made) DENSE. event_smem_s is 0 where it was not timed. */
static snn_sparse_path choose(const sparse_timings *t, const snn_sparse_options *o)
{
    if (!t->batches) return SNN_SPARSE_DENSE;
    double best = t->gemm_s;
    snn_sparse_path path = SNN_SPARSE_GEMM;
    if (o->allow_event && t->event_s < best) {
        best = t->event_s;
        path = SNN_SPARSE_EVENT;
    }
    if (o->allow_event && t->event_smem_s > 0.0 && t->event_smem_s < best) {   /* CUDA only */
        best = t->event_smem_s;
        path = SNN_SPARSE_EVENT_SMEM;
    }
    return best < o->max_ratio * t->dense_s ? path : SNN_SPARSE_DENSE;
}

static void decide(sparse_impl *s, const snn_sparse_options *o)
{
    s->active_limit = percentile95(s->hist, s->conv.in_channels);
    if (o->force != SNN_SPARSE_AUTO) {
        s->path = s->path_one = o->force;
        return;
    }
    s->path = choose(&s->at_batch, o);
    s->path_one = s->at_one.batches ? choose(&s->at_one, o) : s->path;
}

/* ms per batch of a round's fastest sparse kernel (0 when not made) */
static double fastest_sparse_ms(const sparse_timings *t)
{
    if (!t->batches) return 0.0;
    double best = t->gemm_s;
    if (t->event_s > 0.0 && t->event_s < best) best = t->event_s;
    if (t->event_smem_s > 0.0 && t->event_smem_s < best) best = t->event_smem_s;
    return 1e3 * best / t->batches;
}

static void fill_layer(const sparse_impl *s, snn_sparse_layer_report *r)
{
    memset(r, 0, sizeof *r);
    snprintf(r->name, sizeof r->name, "%s", s->name);
    snprintf(r->source, sizeof r->source, "%s", s->source_name);
    r->C_in = s->conv.in_channels;
    r->C_out = s->conv.out_channels;
    r->kernel = s->conv.kernel;
    r->stride = s->conv.stride;
    r->H = s->H;
    r->W = s->W;
    r->firing_rate = s->inputs > 0 ? s->nonzero / s->inputs : 0.0;
    r->silent_planes = s->planes > 0 ? s->silent / s->planes : 0.0;
    r->active_p95 = percentile95(s->hist, s->conv.in_channels);
    const sparse_timings *t = &s->at_batch;
    double per = t->batches ? 1e3 / t->batches : 0.0;
    r->dense_ms = t->dense_s * per;
    r->gemm_ms = t->gemm_s * per;
    r->event_ms = t->event_s * per;
    r->event_smem_ms = t->event_smem_s * per;
    r->max_abs_diff = s->max_diff;
    r->path = s->path;
    r->one_images = s->at_one.batches ? s->at_one.images : 0;
    r->one_dense_ms = s->at_one.batches ? 1e3 * s->at_one.dense_s / s->at_one.batches : 0.0;
    r->one_best_ms = fastest_sparse_ms(&s->at_one);
    r->path_one = s->path_one;
    r->sparse_calls = s->sparse_calls;
    r->fallbacks = s->fallbacks;
}

static void collect(snn_module *m, snn_sparse_report *r)
{
    if (snn_is_sparse_conv(m) && r->count < SNN_SPARSE_MAX_LAYERS)
        fill_layer(m->impl, &r->layers[r->count++]);
    for (int i = 0; i < m->n_children; i++) collect(m->children[i], r);
}

void snn_sparse_collect(snn_module *model, snn_sparse_report *report)
{
    if (!report) return;
    report->count = 0;
    if (model) collect(model, report);
}

int snn_sparse_set_path(snn_module *model, snn_sparse_path path)
{
    if (!model) return 0;
    int n = 0;
    if (snn_is_sparse_conv(model) && path != SNN_SPARSE_AUTO) {
        ((sparse_impl *)model->impl)->path = ((sparse_impl *)model->impl)->path_one = path;
        n++;
    }
    for (int i = 0; i < model->n_children; i++) n += snn_sparse_set_path(model->children[i], path);
    return n;
}

int snn_sparse_enable(snn_module *model, bool on)
{
    if (!model) return 0;
    int n = 0;
    if (snn_is_sparse_conv(model)) {
        ((sparse_impl *)model->impl)->disabled = !on;
        n++;
    }
    for (int i = 0; i < model->n_children; i++) n += snn_sparse_enable(model->children[i], on);
    return n;
}

void snn_sparse_print_report(const snn_sparse_report *r, FILE *out)
{
    /* "smem ms": the CUDA event path with weights staged in shared memory (not timed on a CPU) */
    /* "x @1", "path @1": the best kernel's speed-up and the path at one sample (T images) */
    fprintf(out, "%-22s %-18s %6s %7s %6s %9s %9s %9s %9s %9s %10s %7s %10s %9s %-6s\n", "layer",
            "shape (Cin>Cout k/s)", "fire%", "silent%", "p95", "dense ms", "gemm ms", "event ms",
            "smem ms", "best x", "path", "x @1", "path @1", "max|diff|", "source");
    for (int i = 0; i < r->count; i++) {
        const snn_sparse_layer_report *l = &r->layers[i];
        char shape[64];
        snprintf(shape, sizeof shape, "%dx%dx%d>%d %d/%d", l->C_in, l->H, l->W, l->C_out, l->kernel,
                 l->stride);
        double best = l->event_ms > 0.0 && l->event_ms < l->gemm_ms ? l->event_ms : l->gemm_ms;
        if (l->event_smem_ms > 0.0 && l->event_smem_ms < best) best = l->event_smem_ms;
        fprintf(out, "%-22s %-18s %6.2f %7.1f %3d/%-3d %8.3f %9.3f %9.3f %9.3f %8.2fx %10s %6.2fx "
                "%10s %9.2g %s\n",
                l->name, shape, 100.0 * l->firing_rate, 100.0 * l->silent_planes, l->active_p95,
                l->C_in, l->dense_ms, l->gemm_ms, l->event_ms, l->event_smem_ms,
                best > 0 ? l->dense_ms / best : 0.0, snn_sparse_path_name(l->path),
                l->one_best_ms > 0 ? l->one_dense_ms / l->one_best_ms : 0.0,
                snn_sparse_path_name(l->path_one), l->max_abs_diff, l->source);
    }
}

/* Calibration on or off for every SparseConv2d; `one` for the one-sample round (timings
 * only). Turning the main round on clears everything measured before, both rounds'. */
static void set_calibrating(tree *t, bool on, bool one)
{
    for (int i = 0; i < t->count; i++) {
        snn_module *m = t->items[i].m;
        if (!snn_is_sparse_conv(m)) continue;
        sparse_impl *s = m->impl;
        s->calibrating = on;
        s->calibrating_one = on && one;
        if (on && !one) {
            memset(s->hist, 0, (size_t)(s->conv.in_channels + 1) * sizeof *s->hist);
            s->nonzero = s->inputs = s->silent = s->planes = 0.0;
            s->max_diff = 0.0;
            s->at_batch = s->at_one = (sparse_timings){0};
            s->sparse_calls = s->fallbacks = 0;
        }
    }
}

snn_status snn_sparsify(snn_module *model, snn_tensor *const *batches, int n_batches,
                        const snn_sparse_options *options, snn_sparse_report *report)
{
    const char *fn = "snn_sparsify";
    if (!model || !batches || n_batches < 1)
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad argument '%s' (expected a model and >= 1 "
                         "batches, got %s)", fn, !model ? "model" : "batches",
                         !model ? "NULL" : !batches ? "NULL" : "0 batches");
    for (int i = 0; i < n_batches; i++)
        if (!batches[i])
            return snn_error(SNN_ERR_ARGUMENT, "%s: bad argument 'batches' (batch %d is NULL)", fn, i);
    if (!snn_grad_enabled())
        return snn_error(SNN_ERR_STATE, "%s: called in no-grad mode (the search needs the tape of "
                         "one forward; call it outside snn_no_grad_begin/end)", fn);
    snn_sparse_options o = options ? *options : snn_sparse_options_default();
    FILE *log = o.quiet ? NULL : o.log ? o.log : stdout;
    snn_sparse_report local;
    snn_sparse_report *rep = report ? report : &local;
    memset(rep, 0, sizeof *rep);
    snn_module_train(model, false);

    tree t = {0};
    snn_status st = tree_add(&t, model, NULL, 0, "");
    found list[SNN_SPARSE_MAX_LAYERS];
    int n_found = 0;
    if (st == SNN_OK) st = find_convs(model, batches[0], &t, list, &n_found, rep);
    for (int i = 0; st == SNN_OK && i < n_found; i++)
        st = swap_conv(&t, &list[i]);

    /* calibration: no tape; every SparseConv2d of the model (also from an earlier call) */
    bool sliced = false;
    int one_rounds = 0;
    if (st == SNN_OK) {
        set_calibrating(&t, true, false);
        snn_no_grad_begin();
        for (int b = 0; st == SNN_OK && b < n_batches; b++) {
            const int axis = image_axis(model, batches[b]);
            const int64_t images = axis < 0 ? 1 : batches[b]->shape.dim[axis];
            const int64_t slice = axis >= 0 && o.max_images > 0 && o.max_images < images
                                      ? o.max_images : images;
            for (int64_t first = 0; st == SNN_OK && first < images; first += slice) {
                st = snn_step_begin();
                if (st != SNN_OK) break;
                snn_tensor *x = batch_slice(batches[b], axis, first,
                                            images - first < slice ? images - first : slice);
                if (!x || !snn_module_forward(model, x)) st = snn_last_status();
                snn_step_end();
                sliced |= slice < images;
            }
        }
        /* the one-sample round: the first sample of each batch that has more than one, timed
         * alike, so that a batch of one picks from timings taken at its own size */
        set_calibrating(&t, true, true);
        for (int b = 0; st == SNN_OK && b < n_batches; b++) {
            const int axis = image_axis(model, batches[b]);
            if (!o.one_sample || axis < 0 || batches[b]->shape.dim[axis] < 2 || o.max_images == 1)
                continue;
            st = snn_step_begin();
            if (st != SNN_OK) break;
            snn_tensor *x = batch_slice(batches[b], axis, 0, 1);
            if (!x || !snn_module_forward(model, x)) st = snn_last_status();
            snn_step_end();
            one_rounds++;
        }
        snn_no_grad_end();
        set_calibrating(&t, false, false);
        for (int i = 0; i < t.count; i++)
            if (snn_is_sparse_conv(t.items[i].m)) decide(t.items[i].m->impl, &o);
    }
    tree_free(&t);
    if (st != SNN_OK) return st;
    int convs = rep->convs_seen, sums = rep->residual_sum_fed;
    snn_sparse_collect(model, rep);
    rep->convs_seen = convs;
    rep->residual_sum_fed = sums;
    if (log) {
        fprintf(log, "snn_sparsify: %d of %d convs are spike-fed and swapped (%d of them through a "
                "residual sum: union mask); %d calibration batches on %s", rep->count, convs, sums,
                n_batches, snn_device_name(batches[0]->device));
        if (sliced) fprintf(log, ", run %d images at a time", o.max_images);
        if (one_rounds) fprintf(log, "; then one sample of each (the paths for batches of one)");
        fprintf(log, "\n");
        snn_sparse_print_report(rep, log);
    }
    return SNN_OK;
}
