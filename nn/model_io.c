/*
 * model_io.c - whole-model checkpoints: the model's tensors, the optimizer's state, any extra
 * named tensors (the weights' moving average, nn/ema.c) and the metadata (with the model's
 * configuration) in one safetensors file (nn/checkpoint_save.c, nn/checkpoint_load.c).
 *
 * A checkpoint's metadata are read from a file that may come from anyone: the configuration
 * they describe is checked (snn_model_new's limits) and its size compared with the file's before
 * a model is built, so a small file cannot make snn_checkpoint_load_model allocate gigabytes.
 */
#define _POSIX_C_SOURCE 200809L /* stat */

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "model_internal.h"
#include "nn.h"
#include "tensor/error.h"

/* ---- configuration <-> metadata ----------------------------------------------------------- */

snn_status snn_model_config_to_metadata(const snn_model_config *c, snn_metadata *m)
{
    const snn_neuron_config *n = &c->neuron;
    snn_status s = SNN_OK;
#define SET(key, ...) if (s == SNN_OK) s = snn_metadata_set(m, key, __VA_ARGS__)
    SET("snn.model.kind", "%s", snn_model_kind_name(c->kind));
    SET("snn.model.input", "%d,%d,%d", c->in_channels, c->height, c->width);
    SET("snn.model.classes", "%d", c->classes);
    SET("snn.model.width", "%d", c->width_base);
    SET("snn.model.hidden", "%d", c->hidden);
    SET("snn.model.time_steps", "%d", c->time_steps);
    SET("snn.model.encoding", "%s", c->encoding == SNN_ENCODING_POISSON      ? "poisson"
                                    : c->encoding == SNN_ENCODING_EVENTS     ? "events"
                                    : c->encoding == SNN_ENCODING_FIRST_STEP ? "first_step"
                                    : c->encoding == SNN_ENCODING_ROWS       ? "rows"
                                    : c->encoding == SNN_ENCODING_PIXELS     ? "pixels"
                                                                             : "direct");
    if (c->kind == SNN_MODEL_RSNN) SET("snn.model.layers", "%d", c->layers);
    SET("snn.model.spiking_readout", "%d", c->spiking_readout ? 1 : 0);
    SET("snn.model.seed", "%llu", (unsigned long long)c->seed);
    SET("snn.model.dropout", "%.9g", (double)c->dropout);
    SET("snn.neuron.kind", "%s", snn_neuron_kind_name(n->kind));
    /* %.9g round-trips a float exactly */
    SET("snn.neuron.v", "%.9g,%.9g,%s,%d", (double)n->v_threshold, (double)n->v_reset,
        n->reset == SNN_RESET_SOFT ? "soft" : "hard", n->detach_reset ? 1 : 0);
    SET("snn.neuron.surrogate", "%s,%.9g", snn_surrogate_name(n->surrogate.kind), (double)n->surrogate.alpha);
    SET("snn.neuron.tau", "%.9g,%d", (double)n->tau, n->decay_input ? 1 : 0);
    SET("snn.neuron.stbif", "%.9g,%d,%d", (double)n->theta, n->levels, n->symmetric ? 1 : 0);
    SET("snn.neuron.alif", "%.9g,%.9g", (double)n->tau_adapt, (double)n->beta);
#undef SET
    return s;
}

static snn_status missing(const char *key)
{
    return snn_error(SNN_ERR_FORMAT, "snn_model_config_from_metadata: missing or bad '%s'", key);
}

snn_status snn_model_config_from_metadata(const snn_metadata *m, snn_model_config *c)
{
    const char *v;
    memset(c, 0, sizeof *c);
    if (!(v = snn_metadata_get(m, "snn.model.kind")) || snn_model_kind_parse(v, &c->kind) != SNN_OK)
        return missing("snn.model.kind");
    if (!(v = snn_metadata_get(m, "snn.model.input")) ||
        sscanf(v, "%d,%d,%d", &c->in_channels, &c->height, &c->width) != 3)
        return missing("snn.model.input");
    int readout = 0;
    unsigned long long seed = 0;
    char encoding[16] = "";
    if (!(v = snn_metadata_get(m, "snn.model.classes")) || sscanf(v, "%d", &c->classes) != 1) return missing("snn.model.classes");
    if (!(v = snn_metadata_get(m, "snn.model.width")) || sscanf(v, "%d", &c->width_base) != 1) return missing("snn.model.width");
    if (!(v = snn_metadata_get(m, "snn.model.hidden")) || sscanf(v, "%d", &c->hidden) != 1) return missing("snn.model.hidden");
    if (!(v = snn_metadata_get(m, "snn.model.time_steps")) || sscanf(v, "%d", &c->time_steps) != 1) return missing("snn.model.time_steps");
    if (!(v = snn_metadata_get(m, "snn.model.encoding")) || sscanf(v, "%15s", encoding) != 1) return missing("snn.model.encoding");
    if (!(v = snn_metadata_get(m, "snn.model.spiking_readout")) || sscanf(v, "%d", &readout) != 1) return missing("snn.model.spiking_readout");
    if (!(v = snn_metadata_get(m, "snn.model.seed")) || sscanf(v, "%llu", &seed) != 1) return missing("snn.model.seed");
    c->encoding = strcmp(encoding, "poisson") == 0      ? SNN_ENCODING_POISSON
                  : strcmp(encoding, "events") == 0     ? SNN_ENCODING_EVENTS
                  : strcmp(encoding, "first_step") == 0 ? SNN_ENCODING_FIRST_STEP
                  : strcmp(encoding, "rows") == 0       ? SNN_ENCODING_ROWS
                  : strcmp(encoding, "pixels") == 0     ? SNN_ENCODING_PIXELS
                                                        : SNN_ENCODING_DIRECT;
    c->spiking_readout = readout != 0;
    c->seed = seed;
    /* added with the CNNs' dropout layers: a checkpoint written before has none, i.e. 0 */
    if ((v = snn_metadata_get(m, "snn.model.dropout")) && sscanf(v, "%g", &c->dropout) != 1)
        return missing("snn.model.dropout");
    /* added with the rsnn: its depth (written for rsnn checkpoints only; 1 when absent) */
    c->layers = c->kind == SNN_MODEL_RSNN ? 1 : 0;
    if ((v = snn_metadata_get(m, "snn.model.layers")) && sscanf(v, "%d", &c->layers) != 1)
        return missing("snn.model.layers");

    snn_neuron_config *n = &c->neuron;
    if (!(v = snn_metadata_get(m, "snn.neuron.kind")) || snn_neuron_kind_parse(v, &n->kind) != SNN_OK)
        return missing("snn.neuron.kind");
    *n = snn_neuron_config_default(n->kind);
    char reset[8] = "", surrogate[32] = "";
    int detach = 0, decay = 0, symmetric = 0;
    if (!(v = snn_metadata_get(m, "snn.neuron.v")) ||
        sscanf(v, "%g,%g,%7[a-z],%d", &n->v_threshold, &n->v_reset, reset, &detach) != 4)
        return missing("snn.neuron.v");
    n->reset = strcmp(reset, "soft") == 0 ? SNN_RESET_SOFT : SNN_RESET_HARD;
    n->detach_reset = detach != 0;
    if (!(v = snn_metadata_get(m, "snn.neuron.surrogate")) ||
        sscanf(v, "%31[a-z_],%g", surrogate, &n->surrogate.alpha) != 2)
        return missing("snn.neuron.surrogate");
    float alpha = n->surrogate.alpha;
    if (snn_surrogate_parse(surrogate, &n->surrogate) != SNN_OK) return missing("snn.neuron.surrogate");
    n->surrogate.alpha = alpha;
    if (!(v = snn_metadata_get(m, "snn.neuron.tau")) || sscanf(v, "%g,%d", &n->tau, &decay) != 2)
        return missing("snn.neuron.tau");
    n->decay_input = decay != 0;
    if (!(v = snn_metadata_get(m, "snn.neuron.stbif")) ||
        sscanf(v, "%g,%d,%d", &n->theta, &n->levels, &symmetric) != 3)
        return missing("snn.neuron.stbif");
    n->symmetric = symmetric != 0;
    /* ALIF's adaptation: checkpoints from before it have none and keep the defaults */
    if ((v = snn_metadata_get(m, "snn.neuron.alif")) &&
        sscanf(v, "%g,%g", &n->tau_adapt, &n->beta) != 2)
        return missing("snn.neuron.alif");
    return SNN_OK;
}

/* ---- tensors of a checkpoint -------------------------------------------------------------- */

/* The model's named tensors followed by the optimizer's and `extra`'s (may be NULL), in one
 * list (the items are copied; the tensors stay their owners'). */
static snn_status gather(snn_module *model, snn_optimizer *opt, const snn_param_list *extra,
                         snn_param_list *all)
{
    snn_param_list params = {0}, state = {0};
    snn_status s = snn_module_parameters(model, &params);
    if (s == SNN_OK && opt) s = snn_optimizer_state(opt, &state);
    const int n_extra = extra ? extra->count : 0;
    const int total = params.count + state.count + n_extra;
    all->count = 0;
    all->items = NULL;
    if (s == SNN_OK && total > 0) {
        all->items = snn_alloc((size_t)total * sizeof *all->items, SNN_CPU);
        if (!all->items) s = snn_error(SNN_ERR_MEMORY, "checkpoint: out of host memory");
    }
    if (s == SNN_OK) {
        snn_named_param *at = all->items;
        if (params.count) memcpy(at, params.items, (size_t)params.count * sizeof *at);
        at += params.count;
        if (state.count) memcpy(at, state.items, (size_t)state.count * sizeof *at);
        at += state.count;
        if (n_extra) memcpy(at, extra->items, (size_t)n_extra * sizeof *at);
        all->count = total;
    }
    snn_param_list_free(&params);
    snn_param_list_free(&state);
    return s;
}

snn_status snn_checkpoint_save(const char *path, snn_module *model, snn_optimizer *opt,
                               const snn_metadata *metadata)
{
    return snn_checkpoint_save_extra(path, model, opt, NULL, metadata);
}

snn_status snn_checkpoint_save_extra(const char *path, snn_module *model, snn_optimizer *opt,
                                     const snn_param_list *extra, const snn_metadata *metadata)
{
    const snn_model_config *config = snn_model_config_of(model);
    snn_metadata meta = {0};
    if (metadata) meta = *metadata;
    if (config && snn_model_config_to_metadata(config, &meta) != SNN_OK) return snn_last_status();
    if (opt && snn_metadata_set(&meta, "snn.optimizer.steps", "%lld",
                                (long long)snn_optimizer_steps(opt)) != SNN_OK)
        return snn_last_status();
    snn_param_list all;
    snn_status s = gather(model, opt, extra, &all);
    size_t json_len = 0;
    char *json = s == SNN_OK ? snn_metadata_to_json(&meta, &json_len) : NULL;
    if (s == SNN_OK && !json) s = snn_last_status();
    if (s == SNN_OK) s = snn_safetensors_save(path, &all, json);
    if (json) snn_free(json, json_len + 1, SNN_CPU);
    snn_param_list_free(&all);
    return s;
}

snn_status snn_checkpoint_read_metadata(const char *path, snn_metadata *out)
{
    snn_param_list none = {0};
    char *json = NULL;
    size_t len = 0;
    memset(out, 0, sizeof *out);
    snn_status s = snn_safetensors_load(path, &none, true, &json, &len);
    if (s != SNN_OK) return s;
    if (json) {
        s = snn_metadata_from_json(json, len, out);
        snn_free(json, len + 1, SNN_CPU);
        if (s != SNN_OK)
            return snn_error(s, "%s: bad metadata: %s", path, snn_last_error());
    }
    return SNN_OK;
}

snn_status snn_checkpoint_load(const char *path, snn_module *model, snn_optimizer *opt)
{
    return snn_checkpoint_load_extra(path, model, opt, NULL);
}

snn_status snn_checkpoint_load_extra(const char *path, snn_module *model, snn_optimizer *opt,
                                     const snn_param_list *extra)
{
    /* Everything that can fail is checked before a tensor is touched: the metadata first (the
     * optimizer's step count must be there when its state is loaded), then the whole file. */
    long long steps = 0;
    if (opt) {
        snn_metadata meta;
        if (snn_checkpoint_read_metadata(path, &meta) != SNN_OK) return snn_last_status();
        const char *value = snn_metadata_get(&meta, "snn.optimizer.steps");
        char *end = NULL;
        if (value) steps = strtoll(value, &end, 10);
        if (!value || *end || steps < 0)
            return snn_error(SNN_ERR_FORMAT, "%s: no valid 'snn.optimizer.steps' in the metadata; "
                             "hint: this checkpoint holds no optimizer state", path);
    }
    snn_param_list all;
    snn_status s = gather(model, opt, extra, &all);
    if (s == SNN_OK) s = snn_safetensors_load(path, &all, opt == NULL, NULL, NULL);
    snn_param_list_free(&all);
    if (s == SNN_OK && opt) snn_optimizer_set_steps(opt, steps);
    return s;
}

snn_status snn_checkpoint_load_prefixed(const char *path, snn_module *model, const char *prefix)
{
    const char *fn = "snn_checkpoint_load_prefixed";
    if (!prefix) return snn_error(SNN_ERR_ARGUMENT, "%s: bad argument 'prefix' (got NULL)", fn);
    snn_param_list list;
    if (snn_module_parameters(model, &list) != SNN_OK) return snn_last_status();
    snn_status s = SNN_OK;
    for (int i = 0; s == SNN_OK && i < list.count; i++) {
        snn_named_param *p = &list.items[i];
        char name[sizeof p->name];
        int n = snprintf(name, sizeof name, "%s%s", prefix, p->name);
        if (n < 0 || (size_t)n >= sizeof name)
            s = snn_error(SNN_ERR_ARGUMENT, "%s: the name '%s%s' is longer than %zu characters",
                          fn, prefix, p->name, sizeof name - 1);
        else memcpy(p->name, name, sizeof name);
    }
    if (s == SNN_OK) s = snn_safetensors_load(path, &list, true, NULL, NULL);
    snn_param_list_free(&list);
    return s;
}

snn_module *snn_checkpoint_load_model(const char *path, snn_device device, snn_metadata *metadata)
{
    snn_metadata local;
    snn_metadata *meta = metadata ? metadata : &local;
    snn_model_config config;
    if (snn_checkpoint_read_metadata(path, meta) != SNN_OK) return NULL;
    if (snn_model_config_from_metadata(meta, &config) != SNN_OK)
        return snn_error_null(SNN_ERR_FORMAT, "%s: not a model checkpoint (%s)", path, snn_last_error());
    /* every parameter and buffer of the model is in the file, so the model cannot be larger */
    double floats = snn_model_param_floats(&config);
    if (floats < 0)
        return snn_error_null(SNN_ERR_FORMAT, "%s: the model configuration in its metadata is bad "
                              "(%s)", path, snn_last_error());
    struct stat info;
    if (stat(path, &info) == 0 && floats * (double)sizeof(float) > (double)info.st_size)
        return snn_error_null(SNN_ERR_FORMAT, "%s: its metadata describe a %s model of at least "
                              "%.0f floats (%.0f bytes), more than the file's %lld bytes can hold",
                              path, snn_model_kind_name(config.kind), floats,
                              floats * (double)sizeof(float), (long long)info.st_size);
    snn_rng rng;
    snn_rng_seed(&rng, 0); /* weights are overwritten by the load */
    snn_module *model = snn_model_new(&config, &rng);
    if (!model) return NULL;
    if (snn_module_to(model, device) != SNN_OK || snn_checkpoint_load(path, model, NULL) != SNN_OK) {
        snn_module_free(model);
        return NULL;
    }
    return model;
}
