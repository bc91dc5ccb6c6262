/*
 * plan.c - snn_model_explain: a trace of one forward of a model, which notes for each layer
 * what ran there (op, kernel, shapes, and the fusion rule that ran it with its neighbours),
 * and its printout; and the listing of the fusion rules (nn/fusion_rules.c).
 *
 * Why a trace, not a walk of the model. What runs is decided by the forward itself, from live
 * tensors: the mode, a tape or none, the input's rank, sync-BN, and on CUDA the conv path of
 * each shape and precision. A walk of the model would make each of those decisions a second
 * time and could drift from the forward; the trace notes what the forward did, with the
 * shapes it had.
 *
 * How. snn_model_trace_plan arms the trace. While it is armed, snn_module_forward hands each
 * module's forward to snn_plan_trace_forward, which pushes the module's name on a path
 * ("layer1", "0", "conv1": "layer1.0.conv1"), runs the forward and, for a layer (a module
 * without children), notes an entry; a fused op notes itself (snn_fusion_run), and so do a
 * ResNet block's plain residual sum and a tail that makes its downsample shortcut's
 * batch-norm output (snn_fusion_run_shortcut_bn, whose shortcut conv runs with the
 * downsample's name pushed: snn_plan_trace_enter). The model's forward (snn_model_steps)
 * begins and ends the recording, so a trace holds exactly one forward and later forwards run
 * untraced. None of this runs unless a trace was asked for.
 *
 * Test: tests/test_model_plan.c.
 */
#include <string.h>

#include "model_internal.h"
#include "kernels/neuron_kernels.h"
#include "tensor/cuda_options.h"
#include "tensor/error.h"
#ifdef SNN_WITH_CUDA
#include "kernels/cuda/kernels_cuda.h" /* snn_conv2d_path_cuda: the CUDA conv path rule */
#endif

#define PATH_DEPTH 16 /* modules nested in a model: at most model, stage, block, downsample */

/* What ran for one layer, or for the layers one fused op ran. */
typedef struct plan_entry {
    char layers[112];             /* "layer1.0.conv1", or "layer1.0.bn2 -> + -> sn2" */
    char op[64];                  /* "Conv2d 3x3, stride 1", or the fused op */
    char kernel[200];             /* what the device's kernels do for it */
    const snn_fusion_rule *rule;  /* the rule that fused it, or NULL */
    snn_shape in, out;            /* out.ndim == 0: the op failed */
} plan_entry;

typedef struct snn_plan_trace snn_plan_trace;
struct snn_plan_trace {
    bool recording;               /* between snn_plan_trace_begin and snn_plan_trace_end */
    bool done;                    /* one forward was traced */
    int depth;                    /* names on the path */
    const char *path[PATH_DEPTH]; /* the modules' names (alive while their forward runs) */
    /* what the traced forward ran with */
    const char *model_kind;
    snn_device device;
    snn_kernel_set kernels;
    snn_precision precision;
    snn_model_options options;
    bool training, tape, sync_bn;
    /* the entries, in forward order */
    plan_entry *entries;
    int count, capacity;
    bool truncated;               /* an entry was dropped: out of host memory */
};

/* ---- describing what a layer runs ------------------------------------------------------- */

/* The dims snn_conv2d gives its kernels for `conv` on x: (N, C, H, W), or (T, N, C, H, W)
 * with T N images. */
static snn_conv2d_dims conv_dims(const snn_module *conv, snn_shape x)
{
    const snn_conv_impl *c = conv->impl;
    int64_t images = 1;
    for (int d = 0; d < x.ndim - 3; d++) images *= x.dim[d];
    const int H = x.ndim >= 2 ? (int)x.dim[x.ndim - 2] : 1;
    const int W = x.ndim >= 1 ? (int)x.dim[x.ndim - 1] : 1;
    return (snn_conv2d_dims){(int)images, c->in_channels, H, W, c->out_channels, c->kernel,
                             c->kernel, c->stride, c->pad,
                             (H + 2 * c->pad - c->kernel) / c->stride + 1,
                             (W + 2 * c->pad - c->kernel) / c->stride + 1};
}

/* The kernels a conv of these dims runs, forward and both gradients. */
static void conv_kernel(char *buf, size_t size, const snn_plan_trace *t, const snn_module *conv,
                        snn_shape x)
{
    const snn_conv2d_dims d = conv_dims(conv, x);
    if (t->device == SNN_CPU) {
        snprintf(buf, size, "%s", t->kernels == SNN_KERNELS_REF
                                      ? "direct loops over the sum (the reference)"
                                      : "im2col + blocked SGEMM on the CPU's threads");
        return;
    }
    const char *p = snn_precision_name(t->precision);
#ifdef SNN_WITH_CUDA
    switch ((snn_conv_path)snn_conv2d_path_cuda(&d)) {
    case SNN_CONV_PATH_NHWC:
        snprintf(buf, size, "implicit GEMM on channels-last copies, %s tensor cores", p);
        return;
    case SNN_CONV_PATH_IGEMM:
        snprintf(buf, size, "implicit GEMM on NCHW, %s tensor cores", p);
        return;
    default:
        snprintf(buf, size, "im2col + cuBLAS GEMM in %s", p);
        return;
    }
#else
    (void)d;
    snprintf(buf, size, "CUDA conv in %s (this build has no CUDA)", p);
#endif
}

/* The multi-step neuron kernels of `neuron`'s kind on x (T, N, ...); `alone`: the layer's own
 * op (not a fused one, which keeps no H). */
static void neuron_kernel(char *buf, size_t size, const snn_plan_trace *t,
                          const snn_module *neuron, snn_shape x, bool alone)
{
    const snn_neuron_layer_impl *n = neuron->impl;
    const snn_neuron_kind kind = n->config.kind;
    const snn_neuron_kernels *nk = snn_neuron_kernels_for(t->device);
    if (snn_neuron_is_ann(kind)) {
        snprintf(buf, size, "%s, elementwise", snn_neuron_kind_name(kind));
        return;
    }
    snprintf(buf, size, "%s over T = %lld, one time loop per element (%s neuron kernels)%s",
             snn_neuron_kind_name(kind), x.ndim > 0 ? (long long)x.dim[0] : 0LL,
             nk ? nk->name : "no",
             alone && t->tape && n->consume_input && snn_neuron_takes_bn_input(kind)
                 ? "; H kept in its input's memory" : "");
}

/* The op and kernels a layer (a module without children) runs on an input of shape x. */
static void describe_layer(plan_entry *e, const snn_plan_trace *t, const snn_module *m,
                           snn_shape x)
{
    const snn_kernels *k = snn_kernels_for(t->device);
    const char *table = k ? k->name : "no";
    snprintf(e->op, sizeof e->op, "%s", m->ops->kind);
    if (m->ops == &snn_conv2d_ops) {
        const snn_conv_impl *c = m->impl;
        snprintf(e->op, sizeof e->op, "Conv2d %dx%d, stride %d", c->kernel, c->kernel, c->stride);
        conv_kernel(e->kernel, sizeof e->kernel, t, m, x);
    } else if (m->ops == &snn_batchnorm2d_ops) {
        snprintf(e->op, sizeof e->op, "BatchNorm2d, %s", m->training ? "training" : "evaluation");
        snprintf(e->kernel, sizeof e->kernel, "%s (%s kernels)",
                 !m->training  ? "normalise with the running statistics"
                 : t->sync_bn ? "batch statistics summed over the ranks (sync-BN), normalise"
                              : "batch statistics per channel, then normalise", table);
    } else if (m->ops == &snn_neuron_layer_ops) {
        neuron_kernel(e->kernel, sizeof e->kernel, t, m, x, true);
    } else if (m->ops == &snn_recurrent_layer_ops) { /* neurons/recurrent.c */
        const snn_neuron_layer_impl *n = m->impl;
        const snn_neuron_kernels *nk = snn_neuron_kernels_for(t->device);
        snprintf(e->kernel, sizeof e->kernel, "%s over T = %lld, step by step: S[t-1] W_rec^T "
                 "by %s, then the neuron kernel for one step (%s neuron kernels)",
                 snn_neuron_kind_name(n->config.kind), x.ndim > 0 ? (long long)x.dim[0] : 0LL,
                 t->device != SNN_CPU ? "cuBLAS GEMM"
                 : t->kernels == SNN_KERNELS_REF ? "the triple-loop GEMM"
                                                 : "the blocked SGEMM",
                 nk ? nk->name : "no");
    } else if (m->ops == &snn_linear_ops) {
        snprintf(e->kernel, sizeof e->kernel, "x W^T + b: %s",
                 t->device != SNN_CPU ? "cuBLAS GEMM"
                 : t->kernels == SNN_KERNELS_REF ? "the triple-loop GEMM (the reference)"
                                                 : "blocked SGEMM on the CPU's threads");
    } else if (m->ops == &snn_max_pool2d_ops || m->ops == &snn_avg_pool2d_ops) {
        const snn_pool_impl *p = m->impl;
        snprintf(e->kernel, sizeof e->kernel, "%s over %dx%d windows, stride %d (%s kernels)",
                 m->ops == &snn_max_pool2d_ops ? "max, its argmax kept for backward," : "mean",
                 p->kernel, p->kernel, p->stride, table);
    } else if (m->ops == &snn_adaptive_avg_pool_ops) {
        snprintf(e->kernel, sizeof e->kernel, "the mean over each plane (%s kernels)", table);
    } else if (m->ops == &snn_flatten_ops) {
        snprintf(e->kernel, sizeof e->kernel, "a view: no kernel, no copy");
    } else if (m->ops == &snn_dropout_ops) {
        snprintf(e->kernel, sizeof e->kernel, "%s", m->training
                     ? "a mask per sample, shared over T, then x * mask"
                     : "the identity: no kernel");
    } else {
        snprintf(e->kernel, sizeof e->kernel, "the layer's own forward (%s kernels)", table);
    }
}

/* What the fused op of `rule` runs, on an input of shape x, for the items it took; with
 * `downsample`, the ResNet tail that also makes that shortcut's batch-norm output. */
static void describe_fused(plan_entry *e, const snn_plan_trace *t, const snn_fusion_rule *rule,
                           snn_module *const *items, const snn_module *downsample, snn_shape x)
{
    snprintf(e->op, sizeof e->op, "fused: %s",
             downsample ? "snn_batchnorm_neuron_bn_residual" : rule->fused_op);
    char base[120];
    if (rule->pattern[0] == &snn_conv2d_ops) {
        conv_kernel(base, sizeof base, t, items[0], x);
        snprintf(e->kernel, sizeof e->kernel, "%s; the batch-norm scales its output",
                 base);
        return;
    }
    neuron_kernel(base, sizeof base, t, items[rule->length - 1], x, false);
    snprintf(e->kernel, sizeof e->kernel, "%s; %s%s", base,
             rule->pattern[0] == &snn_batchnorm2d_ops ? "batch-norm in the same pass"
                                                      : "the shortcut added as it loads",
             downsample                                ? ", and the shortcut's as it loads"
             : rule->pattern[0] && rule->length == 3 ? ", the shortcut added as it loads"
                                                      : "");
}

/* ---- the trace ----------------------------------------------------------------------------- */

/* A new entry named by the path (then `suffix`, if any), or NULL when none fits. */
static plan_entry *new_entry(snn_plan_trace *t, const char *suffix)
{
    if (t->count == t->capacity) {
        const int cap = t->capacity ? 2 * t->capacity : 64;
        plan_entry *grown = snn_alloc((size_t)cap * sizeof *grown, SNN_CPU);
        if (!grown) {
            snn_clear_error(); /* the forward goes on; the printout says what is missing */
            t->truncated = true;
            return NULL;
        }
        if (t->count) memcpy(grown, t->entries, (size_t)t->count * sizeof *grown);
        snn_free(t->entries, (size_t)t->capacity * sizeof *grown, SNN_CPU);
        t->entries = grown;
        t->capacity = cap;
    }
    plan_entry *e = &t->entries[t->count++];
    memset(e, 0, sizeof *e);
    size_t at = 0;
    for (int i = 0; i < t->depth && at < sizeof e->layers; i++) {
        if (!t->path[i][0]) continue; /* the model itself has no name */
        at += (size_t)snprintf(e->layers + at, sizeof e->layers - at, "%s%s", at ? "." : "",
                               t->path[i]);
    }
    if (suffix && at < sizeof e->layers)
        snprintf(e->layers + at, sizeof e->layers - at, "%s%s", at ? "." : "", suffix);
    return e;
}

snn_tensor *snn_plan_trace_forward(snn_module *m, snn_tensor *x)
{
    snn_plan_trace *t = m->plan->trace;
    if (!t || !t->recording || t->depth == PATH_DEPTH) return m->ops->forward(m, x);
    t->path[t->depth++] = m->name;
    const snn_shape in = x->shape;
    snn_tensor *y = m->ops->forward(m, x);
    if (m->n_children == 0) { /* a layer; inner modules note through their children */
        plan_entry *e = new_entry(t, NULL);
        if (e) {
            describe_layer(e, t, m, in);
            e->in = in;
            if (y) e->out = y->shape;
        }
    }
    t->depth--;
    return y;
}

void snn_plan_trace_begin(snn_plan *plan, const snn_module *model, const snn_tensor *x)
{
    snn_plan_trace *t = plan->trace;
    if (!t || !x) return;
    t->recording = true;
    t->done = false;
    t->depth = 0;
    t->count = 0;
    t->truncated = false;
    t->model_kind = model->ops->kind;
    t->device = x->device;
    t->kernels = snn_get_kernels();
    t->precision = snn_get_precision();
    t->options = snn_plan_options(plan, x->device);
    t->training = model->training;
    t->tape = snn_grad_enabled();
    t->sync_bn = snn_batchnorm_sync_enabled();
}

void snn_plan_trace_end(snn_plan *plan)
{
    if (plan->trace && plan->trace->recording) plan->trace->done = true;
    if (plan->trace) plan->trace->recording = false;
    plan->tracing = false;
}

void snn_plan_trace_fused(const snn_fusion_rule *rule, snn_module *const *items,
                          const snn_module *downsample, const snn_tensor *x, const snn_tensor *y)
{
    const snn_module *first = items[0] ? items[0] : items[1];
    snn_plan_trace *t = first->plan->trace;
    if (!t || !t->recording) return;
    char chain[4 * sizeof first->name + 16] = ""; /* "bn2 -> + downsample.1 -> sn2" */
    size_t at = 0;
    for (int i = 0; i < rule->length && at < sizeof chain; i++) {
        const char *sep = i ? " -> " : "";
        if (items[i])
            at += (size_t)snprintf(chain + at, sizeof chain - at, "%s%s", sep, items[i]->name);
        else if (downsample)
            at += (size_t)snprintf(chain + at, sizeof chain - at, "%s+ %s.%s", sep,
                                   downsample->name, downsample->children[1]->name);
        else
            at += (size_t)snprintf(chain + at, sizeof chain - at, "%s+", sep);
    }
    plan_entry *e = new_entry(t, chain);
    if (!e) return;
    describe_fused(e, t, rule, items, downsample, x->shape);
    e->rule = rule;
    e->in = x->shape;
    if (y) e->out = y->shape;
}

void snn_plan_trace_sum(const snn_module *block, const snn_tensor *x, const snn_tensor *y)
{
    snn_plan_trace *t = block->plan->trace;
    if (!t || !t->recording || !x) return;
    plan_entry *e = new_entry(t, "+");
    if (!e) return;
    snprintf(e->op, sizeof e->op, "residual sum (snn_add)");
    snprintf(e->kernel, sizeof e->kernel, "elementwise, the shortcut added (%s kernels)",
             snn_kernels_for(t->device) ? snn_kernels_for(t->device)->name : "no");
    e->in = x->shape;
    if (y) e->out = y->shape;
}

void snn_plan_trace_enter(const snn_module *parent)
{
    snn_plan_trace *t = parent->plan ? parent->plan->trace : NULL;
    if (t && t->recording && t->depth < PATH_DEPTH) t->path[t->depth++] = parent->name;
}

void snn_plan_trace_leave(const snn_module *parent)
{
    snn_plan_trace *t = parent->plan ? parent->plan->trace : NULL;
    if (t && t->recording && t->depth > 0 && t->path[t->depth - 1] == parent->name) t->depth--;
}

void snn_plan_trace_free(snn_plan_trace *t)
{
    if (!t) return;
    snn_free(t->entries, (size_t)t->capacity * sizeof *t->entries, SNN_CPU);
    snn_free(t, sizeof *t, SNN_CPU);
}

snn_status snn_model_trace_plan(snn_module *model)
{
    const char *fn = "snn_model_trace_plan";
    if (!snn_model_config_of(model))
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad argument 'model' (expected a model made by "
                         "snn_model_new, got %s)", fn, model ? model->ops->kind : "NULL");
    snn_plan *plan = &((snn_model_impl *)model->impl)->plan;
    if (!plan->trace) {
        plan->trace = snn_alloc(sizeof *plan->trace, SNN_CPU);
        if (!plan->trace) return snn_error(SNN_ERR_MEMORY, "%s: out of host memory", fn);
        memset(plan->trace, 0, sizeof *plan->trace);
    }
    plan->trace->done = false;
    plan->trace->count = 0;
    plan->tracing = true;
    snn_module_set_plan(model, plan); /* modules swapped in since (sparse, ann2snn) too */
    return SNN_OK;
}

/* ---- printing ---------------------------------------------------------------------------- */

/* Prints `text` from column `at` on, breaking lines at spaces before column 100; a new line
 * starts at column `indent`. Ends with a newline. */
static void print_wrapped(FILE *out, const char *text, int at, int indent)
{
    while (*text) {
        const char *space = NULL;
        for (const char *p = text; *p && (p - text) + at < 100; p++)
            if (*p == ' ') space = p;
        const size_t rest = strlen(text);
        if ((int)rest + at < 100 || !space) {
            fprintf(out, "%s\n", text);
            return;
        }
        fprintf(out, "%.*s\n%*s", (int)(space - text), text, indent, "");
        text = space + 1;
        at = indent;
    }
    fputc('\n', out);
}

static void print_options(FILE *out, const snn_model_options *o, bool set)
{
    fprintf(out, "  options: fuse %s, pack_spikes %s, keep_bf16 %s (%s)\n",
            o->fuse ? "on" : "off", o->pack_spikes ? "on" : "off", o->keep_bf16 ? "on" : "off",
            set ? "set by snn_model_set_options" : "the defaults where it runs");
}

void snn_fusion_rules_print(FILE *out)
{
    for (int r = 0; r < snn_fusion_rule_count; r++) {
        const snn_fusion_rule *rule = &snn_fusion_rules[r];
        fprintf(out, "  %d. %s: ", r + 1, rule->name);
        for (int i = 0; i < rule->length; i++)
            fprintf(out, "%s%s", i ? " -> " : "",
                    rule->pattern[i] ? rule->pattern[i]->kind : "(+ shortcut)");
        fprintf(out, "\n     when: option fuse on; ");
        print_wrapped(out, rule->condition, 27, 11);
        fprintf(out, "     runs: %s: ", rule->fused_op);
        print_wrapped(out, rule->why, 13 + (int)strlen(rule->fused_op), 11);
    }
}

snn_status snn_model_explain(snn_module *model, FILE *out)
{
    const char *fn = "snn_model_explain";
    if (!snn_model_config_of(model) || !out)
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad argument '%s' (expected %s, got %s)", fn,
                         out ? "model" : "out", out ? "a model made by snn_model_new" : "a file",
                         out ? (model ? model->ops->kind : "NULL") : "NULL");
    const snn_plan *plan = &((const snn_model_impl *)model->impl)->plan;
    const snn_plan_trace *t = plan->trace;
    fprintf(out, "execution plan of %s\n", model->ops->kind);
    if (!t || !t->done) {
        const snn_model_options o = snn_model_options_of(model);
        print_options(out, &o, plan->options_set);
        fprintf(out, "  no forward traced yet: snn_model_trace_plan(model) before a forward "
                "notes what each layer runs\n");
    } else {
        fprintf(out, "  traced forward: %s, %s, on %s with the %s kernels (table %s), %s\n",
                t->training ? "training" : "evaluation", t->tape ? "a tape" : "no tape",
                snn_device_name(t->device),
                t->device == SNN_CPU ? snn_kernel_set_name(t->kernels) : "CUDA",
                snn_kernels_for(t->device) ? snn_kernels_for(t->device)->name : "none",
                snn_precision_name(t->precision));
        print_options(out, &t->options, plan->options_set);
        fprintf(out, "  sync-BN %s; spikes %s\n", t->sync_bn ? "on" : "off",
                t->options.pack_spikes && t->tape
                    ? "kept as bits once the forward ops that read them have run"
                    : "kept as floats");
        /* 38: room for a downsampling tail, "layer2.0.bn2 -> + downsample.1 -> sn2" */
        fprintf(out, "  %-38s %-44s %s\n", "layer", "input -> output", "op");
        for (int i = 0; i < t->count; i++) {
            const plan_entry *e = &t->entries[i];
            char a[48], b[48], shapes[100];
            snprintf(shapes, sizeof shapes, "%s -> %s", snn_shape_str(e->in, a, sizeof a),
                     e->out.ndim ? snn_shape_str(e->out, b, sizeof b) : "(failed)");
            fprintf(out, "  %-38s %-44s %s\n", e->layers, shapes, e->op);
            if (e->rule) fprintf(out, "      rule \"%s\": ", e->rule->name);
            else fprintf(out, "      ");
            print_wrapped(out, e->kernel, e->rule ? 15 + (int)strlen(e->rule->name) : 6, 6);
        }
        if (t->truncated) fprintf(out, "  (out of host memory: some layers are missing)\n");
    }
    fprintf(out, "fusion rules (nn/fusion_rules.c), tried in this order:\n");
    snn_fusion_rules_print(out);
    if (t && t->done) {
        fprintf(out, "  applied in the traced forward:");
        for (int r = 0; r < snn_fusion_rule_count; r++) {
            int times = 0;
            for (int i = 0; i < t->count; i++) times += t->entries[i].rule == &snn_fusion_rules[r];
            fprintf(out, " %d. %d time%s%s", r + 1, times, times == 1 ? "" : "s",
                    r + 1 < snn_fusion_rule_count ? "," : "\n");
        }
    }
    return SNN_OK;
}
