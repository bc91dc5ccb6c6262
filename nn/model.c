/*
 * model.c - model configurations, their checks, the builder entry point and the shared pieces
 * of every model's forward: input encoding over T, the model's random stream, the per-step
 * outputs (snn_model_forward_steps, what a per-step loss such as TET takes) and the readout
 * (mean over T). The kinds of model, their names and builders are model_kinds.c.
 */
#include "model_internal.h"
#include "tensor/arena.h"
#include "tensor/error.h"

snn_model_config snn_model_config_default(snn_model_kind kind)
{
    snn_model_config c = {
        .kind = kind,
        .time_steps = 4,
        .encoding = SNN_ENCODING_DIRECT,
        .neuron = snn_neuron_config_default(SNN_NEURON_LIF),
    };
    c.neuron.surrogate = snn_surrogate_default(SNN_SURROGATE_ATAN);
    if (kind == SNN_MODEL_SPIKING_CNN) {
        c.in_channels = 1, c.height = 28, c.width = 28, c.classes = 10;
        c.width_base = 32, c.hidden = 128;
    } else if (kind == SNN_MODEL_RSNN) {
        /* Fashion-MNIST read row by row: 28 steps of 28 pixels */
        c.in_channels = 1, c.height = 28, c.width = 28, c.classes = 10;
        c.width_base = 1, c.hidden = 256, c.layers = 1;
        c.encoding = SNN_ENCODING_ROWS, c.time_steps = 28;
    } else if (kind == SNN_MODEL_DVS_NET) {
        /* DVS128 Gesture: 2 polarities, 128x128, 11 gestures, event frames */
        c.in_channels = 2, c.height = 128, c.width = 128, c.classes = 11;
        c.width_base = 32, c.hidden = 256;
        c.encoding = SNN_ENCODING_EVENTS;
    } else {
        c.in_channels = 3, c.height = 32, c.width = 32, c.classes = 10;
        c.width_base = 64;
    }
    return c;
}

snn_status snn_model_config_check(const snn_model_config *c)
{
    const char *fn = "snn_model_new";
    if ((unsigned)c->kind >= SNN_MODEL_KIND_COUNT)
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad config 'kind' (expected 0 to %d, got %d)", fn,
                         SNN_MODEL_KIND_COUNT - 1, (int)c->kind);
    const bool resnet = snn_model_kinds[c->kind].resnet;
    const bool rsnn = c->kind == SNN_MODEL_RSNN;
    if (c->in_channels < 1 || c->height < 1 || c->width < 1 || c->classes < 2)
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad config (input %dx%dx%d, %d classes)", fn,
                         c->in_channels, c->height, c->width, c->classes);
    if (c->time_steps < 1 || c->time_steps > 1024)
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad config 'time_steps' (expected 1..1024, got %d)",
                         fn, c->time_steps);
    if (c->width_base < 1)
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad config 'width_base' (expected >= 1, got %d)",
                         fn, c->width_base);
    /* Upper bounds keep the builders' int arithmetic (8 x width, fan-ins, the CNNs' flattened
     * size) exact; configurations come from checkpoint files too. */
    const int big = 1 << 16;
    if (c->in_channels > big || c->height > big || c->width > big || c->width_base > big ||
        c->classes > (1 << 24) || c->hidden > (1 << 24))
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad config (sizes above the limits: input "
                         "%dx%dx%d and width_base at most %d, classes and hidden at most %d; got "
                         "input %dx%dx%d, width_base %d, classes %d, hidden %d)", fn, big, big,
                         big, big, 1 << 24, c->in_channels, c->height, c->width, c->width_base,
                         c->classes, c->hidden);
    /* the CNN pools twice by 2 (floor: 34 -> 17 -> 8), the DVS net down to 4x4 */
    if (snn_rsnn_config_check(c) != SNN_OK) return SNN_ERR_ARGUMENT; /* model_rsnn.c */
    if (!resnet && !rsnn && (c->height < 4 || c->width < 4 || c->hidden < 1))
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad config (the CNNs need height and width >= 4 "
                         "and hidden >= 1, got %dx%d, hidden %d)", fn, c->height, c->width,
                         c->hidden);
    if (!resnet && !rsnn &&
        (snn_cnn_flat_features(c) < 1 || snn_cnn_flat_features(c) > INT32_MAX))
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad config (the %s's flattened features, "
                         "width_base x height x width after its pools, must be 1 .. 2^31 - 1; "
                         "got %.0f for %dx%d)", fn, snn_model_kind_name(c->kind),
                         snn_cnn_flat_features(c), c->height, c->width);
    if (c->encoding != SNN_ENCODING_DIRECT && c->encoding != SNN_ENCODING_POISSON &&
        c->encoding != SNN_ENCODING_EVENTS && c->encoding != SNN_ENCODING_FIRST_STEP &&
        c->encoding != SNN_ENCODING_ROWS && c->encoding != SNN_ENCODING_PIXELS)
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad config 'encoding' (got %d)", fn,
                         (int)c->encoding);
    if (resnet && (c->height < 8 || c->width < 8))
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad config (ResNets downsample by 8: input at "
                         "least 8x8, got %dx%d)", fn, c->height, c->width);
    if (!(c->dropout >= 0.0f && c->dropout < 1.0f)) /* NaN fails too */
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad config 'dropout' (expected 0 <= dropout < 1, "
                         "got %g)", fn, (double)c->dropout);
    if (snn_neuron_is_ann(c->neuron.kind) &&
        (c->time_steps != 1 || c->encoding != SNN_ENCODING_DIRECT))
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad config (a %s model is an ANN: expected "
                         "time_steps 1 and direct encoding, got %d and %s)", fn,
                         snn_neuron_kind_name(c->neuron.kind), c->time_steps,
                         c->encoding == SNN_ENCODING_DIRECT    ? "direct"
                         : c->encoding == SNN_ENCODING_POISSON ? "poisson"
                         : c->encoding == SNN_ENCODING_EVENTS  ? "event frames"
                                                               : "first-step");
    return snn_neuron_config_check(fn, &c->neuron);
}

/* Every neuron layer of a built model follows an op whose output feeds that neuron alone
 * (batch-norm, linear, residual sum, the stem's repeat over T): let it keep its membrane in
 * that output's memory. */
static snn_module *neurons_consume_inputs(snn_module *m)
{
    for (int i = 0; m && i < m->n_children; i++) {
        if (m->children[i]->ops == &snn_neuron_layer_ops)
            snn_neuron_layer_set_consume_input(m->children[i], true);
        else
            neurons_consume_inputs(m->children[i]);
    }
    return m;
}

snn_module *snn_model_new(const snn_model_config *config, snn_rng *rng)
{
    if (!config || !rng)
        return snn_error_null(SNN_ERR_ARGUMENT, "snn_model_new: bad argument '%s' (got NULL)",
                              config ? "rng" : "config");
    if (snn_model_config_check(config) != SNN_OK) return NULL;
    snn_module *m = snn_model_kinds[config->kind].build(config, rng);
    /* the model owns its plan; every module of the tree reads its options from there */
    if (m) snn_module_set_plan(m, &((snn_model_impl *)m->impl)->plan);
    return neurons_consume_inputs(m);
}

snn_module *snn_model_module_new(const snn_module_ops *ops, const snn_model_config *config)
{
    snn_model_impl *impl = snn_alloc(sizeof *impl, SNN_CPU);
    if (!impl) return snn_error_null(SNN_ERR_MEMORY, "snn_model_new: out of host memory");
    *impl = (snn_model_impl){.config = *config, .encode_seed = config->seed};
    snn_module *m = snn_module_new(ops, impl);
    if (!m) snn_free(impl, sizeof *impl, SNN_CPU);
    return m;
}

/* Depth-first search for neuron layers, recording dotted names into `names_storage`. */
static int find_neurons(snn_module *m, const char *prefix, snn_module **layers, char (*names)[96],
                        int at, int max)
{
    for (int i = 0; i < m->n_children; i++) {
        snn_module *c = m->children[i];
        char name[96];
        snprintf(name, sizeof name, "%s%s%s", prefix, prefix[0] ? "." : "", c->name);
        if (snn_module_is_neuron_layer(c)) {
            if (at < max) {
                layers[at] = c;
                snprintf(names[at], sizeof names[at], "%s", name);
            }
            at++;
        }
        at = find_neurons(c, name, layers, names, at, max);
    }
    return at;
}

int snn_model_neuron_layers(snn_module *model, snn_module **layers, const char **names, int max)
{
    static char storage[256][96];
    if (max > 256) max = 256;
    int n = find_neurons(model, "", layers, storage, 0, max);
    for (int i = 0; i < n && i < max; i++) names[i] = storage[i];
    return n < max ? n : max;
}

/* ---- shared forward pieces ---------------------------------------------------------------- */

/* Poisson-encodes an (N, C, H, W) image batch in [0, 1] into (T, N, C, H, W) spikes. */
static snn_tensor *snn_model_encode(const snn_model_config *c, snn_tensor *x, uint64_t *seed)
{
    /* Poisson: each pixel (in [0, 1]) fires at each step with probability equal to its value.
     * The spikes are a counter-based hash of (seed, index) drawn by the poisson_encode kernel
     * on x's device (kernels/cpu/encode.c gives the recipe), so they are the same on every device
     * and no pixel goes through the host. The seed advances here, once per call: a fresh,
     * reproducible draw per forward (the checkpoint stores it, so a resumed run draws on). */
    const char *fn = "snn_model_encode";
    if (snn_check_tensor(fn, "x", x)) return NULL;
    if (x->shape.ndim + 1 > SNN_MAX_DIMS)
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument 'x' (expected at most %d dims "
                              "so that a time axis fits, got %d)", fn, SNN_MAX_DIMS - 1,
                              x->shape.ndim);
    const snn_kernels *k = snn_kernels_for(x->device); /* a table: snn_tensor_new checks */
    SNN_REQUIRE_KERNEL(k, fn, poisson_encode);
    int T = c->time_steps;
    snn_shape shape = {.ndim = x->shape.ndim + 1};
    shape.dim[0] = T;
    for (int d = 0; d < x->shape.ndim; d++) shape.dim[d + 1] = x->shape.dim[d];
    snn_tensor *out = snn_step_tensor(fn, shape, x->device); // (T, N, C, H, W)
    if (!out) return NULL;
    *seed = snn_hash64(*seed);
    k->poisson_encode(out->data, x->data, x->numel, T, *seed);
    return out;
}

snn_status snn_model_check_input(const char *model, const snn_model_config *c, snn_tensor *x,
                                 bool any_size)
{
    if (!x) return SNN_OK; /* the forward of a failed op reports its own error */
    const bool events = c->encoding == SNN_ENCODING_EVENTS;
    const int d = events ? 1 : 0;
    const snn_shape *s = &x->shape;
    bool ok = s->ndim == 4 + d && s->dim[d + 1] == c->in_channels &&
              (any_size || (s->dim[d + 2] == c->height && s->dim[d + 3] == c->width)) &&
              (!events || s->dim[0] == c->time_steps);
    if (ok) return SNN_OK;
    char buf[96], want[96];
    if (events)
        snprintf(want, sizeof want, "(T=%d, N, %d, %d, %d) event frames", c->time_steps,
                 c->in_channels, c->height, c->width);
    else
        snprintf(want, sizeof want, "(N, %d, %d, %d)", c->in_channels, c->height, c->width);
    return snn_error(SNN_ERR_ARGUMENT, "%s: bad argument 'x' (expected %s, got %s)%s", model,
                     want, snn_shape_str(x->shape, buf, sizeof buf),
                     events ? "; hint: load the data set with frames = the model's T" : "");
}

uint64_t snn_model_rng_state(const snn_module *model)
{
    return snn_model_config_of(model) ? ((const snn_model_impl *)model->impl)->encode_seed : 0;
}

void snn_model_set_rng_state(snn_module *model, uint64_t state)
{
    if (snn_model_config_of(model)) ((snn_model_impl *)model->impl)->encode_seed = state;
}

/* Dropout layers (config.dropout > 0) take their masks from the model's random stream, the one
 * Poisson encoding draws from and checkpoints store ("snn.model.rng", snn_model_rng_state):
 * each training forward advances the stream once, and dropout layer j (1, 2, ... in forward
 * order) gets the seed hash(state + j * golden), which its forward hashes once more into the
 * mask's seed. So a resumed run whose stream was restored draws the very same masks, and a
 * model without dropout leaves the stream alone (its Poisson spikes are those of before). */
void snn_model_seed_dropout(snn_module *m)
{
    snn_model_impl *impl = m->impl;
    if (!m->training || !(impl->config.dropout > 0.0f)) return;
    impl->encode_seed = snn_hash64(impl->encode_seed);
    uint64_t j = 0;
    for (int i = 0; i < m->n_children; i++) {
        if (m->children[i]->ops != &snn_dropout_ops) continue;
        snn_dropout_impl *d = m->children[i]->impl;
        d->seed = snn_hash64(impl->encode_seed + ++j * 0x9E3779B97F4A7C15ull);
    }
}

/* x (N, ...) seen as (1, N, ...): one time step, no copy. */
static snn_tensor *one_step_view(snn_tensor *x)
{
    if (!x) return NULL;
    snn_shape shape = {.ndim = x->shape.ndim + 1};
    shape.dim[0] = 1;
    for (int d = 0; d < x->shape.ndim; d++) shape.dim[d + 1] = x->shape.dim[d];
    return snn_reshape(x, shape);
}

/* Direct encoding at T > 1: the image is the same at every step, so the stem (conv and
 * batch-norm) runs once on the N images, and its output is repeated over T:
 *     h = snn_repeat_time(bn(conv(x)), T)
 * Where the plan fuses the stem's batch-norm with the neurons after it (the rule "bn -> neuron
 * (repeated stem)", nn/fusion_rules.c), the list conv, bn, neurons runs instead, and the
 * neurons read the one batch-norm output at every step: the repeat is never written. The rule
 * is asked with the image for the conv's output, which it cannot yet see: it reads only the
 * tensor's rank and device, which the two share. *taken: the children the stem ran. */
static snn_tensor *repeated_stem(snn_module *m, snn_tensor *x, int *taken)
{
    snn_model_impl *impl = m->impl;
    const int T = impl->config.time_steps;
    snn_module **ch = m->children;
    impl->plan.stem_repeat = T;
    const bool fused = x && T > 1 && m->n_children > 2 && snn_plan_fusion(ch + 1, 2, x, NULL);
    snn_tensor *h = fused ? snn_modules_forward(ch, 3, x)
                          : snn_repeat_time(snn_modules_forward(ch, 2, x), T);
    impl->plan.stem_repeat = 0;
    *taken = fused ? 3 : 2;
    return h;
}

snn_tensor *snn_model_steps(snn_module *m, snn_tensor *x)
{
    snn_model_impl *impl = m->impl;
    const snn_model_config *c = &impl->config;
    snn_module **ch = m->children; /* stem conv, stem batch-norm, then the rest in order */
    if (impl->plan.tracing) snn_plan_trace_begin(&impl->plan, m, x); /* snn_model_explain */
    impl->plan.one_step = c->time_steps == 1;
    snn_model_seed_dropout(m);
    /* the stem, conv and batch-norm, and then the rest: lists of modules, which the model's
     * plan may run in part as fused ops (nn/fusion_rules.c) */
    snn_tensor *h;
    int after_stem = 2; /* the children the stem took: conv and batch-norm (and its neurons) */
    /* direct encoding at T = 1 (an online step's): the image is that step, (1, N, ...), and the
     * model one list from the stem on, so that the stem's batch-norm and neurons may fuse */
    const bool one_list = c->encoding == SNN_ENCODING_DIRECT && c->time_steps == 1;
    if (one_list) {
        h = snn_modules_forward(ch, m->n_children, one_step_view(x));
    } else if (c->encoding == SNN_ENCODING_EVENTS) {
        /* event frames (T, N, C, H, W): every frame differs, the stem runs on all T*N */
        h = snn_modules_forward(ch, 2, x);
    } else if (c->encoding == SNN_ENCODING_DIRECT) {
        h = repeated_stem(m, x, &after_stem);
    } else if (c->encoding == SNN_ENCODING_FIRST_STEP) {
        /* a converted network: the stem's output enters once, at t = 0 (nn/ann2snn.c) */
        h = snn_first_step(snn_modules_forward(ch, 2, x), c->time_steps);
    } else {
        h = snn_model_encode(c, x, &impl->encode_seed);
        h = snn_modules_forward(ch, 2, h);
    }
    if (h && !one_list)
        h = snn_modules_forward(ch + after_stem, m->n_children - after_stem, h);
    if (impl->plan.tracing) snn_plan_trace_end(&impl->plan);
    return h; /* (T, N, K) */
}

snn_tensor *snn_model_run(snn_module *m, snn_tensor *x)
{
    snn_tensor *h = snn_model_steps(m, x);
    if (!h) return NULL;
    if (((snn_model_impl *)m->impl)->config.encoding == SNN_ENCODING_FIRST_STEP)
        return snn_sum(h, 0, false); /* (N, K) */
    return snn_mean(h, 0, false); /* (N, K): the mean over time */
}

snn_tensor *snn_model_forward_steps(snn_module *model, snn_tensor *x)
{
    const char *fn = "snn_model_forward_steps";
    const snn_model_config *c = snn_model_config_of(model);
    if (!c)
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument 'model' (expected a model made "
                              "by snn_model_new or snn_ann_to_snn, got %s)", fn,
                              model ? model->ops->kind : "NULL");
    if (snn_check_tensor(fn, "x", x)) return NULL;
    if (model->ops == &snn_rsnn_model_ops) return snn_rsnn_forward_steps(model, x);
    /* the input check of the model's own forward (model_cnn.c, model_resnet.c): the ResNets
     * take any image size from 8x8 */
    const bool any_size = model->ops == &snn_resnet_model_ops;
    if (snn_model_check_input(fn, c, x, any_size) != SNN_OK) return NULL;
    return snn_model_steps(model, x);
}

snn_status snn_model_set_time_steps(snn_module *model, int time_steps)
{
    const char *fn = "snn_model_set_time_steps";
    if (!snn_model_config_of(model))
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad argument 'model' (expected a model made by "
                         "snn_model_new or snn_ann_to_snn)", fn);
    snn_model_config *c = &((snn_model_impl *)model->impl)->config;
    if (time_steps < 1 || time_steps > 1024 || (snn_neuron_is_ann(c->neuron.kind) && time_steps != 1))
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad argument 'time_steps' (expected 1..1024, and 1 "
                         "for a %s model, got %d)", fn, snn_neuron_kind_name(c->neuron.kind),
                         time_steps);
    if ((c->encoding == SNN_ENCODING_ROWS || c->encoding == SNN_ENCODING_PIXELS) &&
        time_steps != c->time_steps)
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad argument 'time_steps' (an rsnn reading images "
                         "as %s has T = %d, fixed by the image size; got %d)", fn,
                         c->encoding == SNN_ENCODING_ROWS ? "rows" : "pixels", c->time_steps,
                         time_steps);
    c->time_steps = time_steps;
    return SNN_OK;
}

void snn_model_free_impl(snn_module *m)
{
    snn_model_impl *impl = m->impl;
    if (impl->plan.trace) snn_plan_trace_free(impl->plan.trace); /* snn_model_trace_plan's */
    snn_free(impl, sizeof *impl, SNN_CPU);
}
