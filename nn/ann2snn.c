/*
 * ann2snn.c - snn_ann_to_snn: a trained quantized ANN (QANN) becomes the spiking network that
 * computes the same logits, SpikeZIP-TF's conversion (You et al., ICML 2024,
 * https://arxiv.org/abs/2406.03470) applied to snn.c's CNN and ResNets; and the number of time
 * steps after which the two agree. docs/ann2snn.md derives it; tests/test_ann2snn.c checks it.
 *
 * Why it works. An ST-BIF neuron (kernels/cpu/stbif.c) keeps V / theta + A = 1/2 + X / theta, where A
 * is the signed count of the spikes it has emitted and X the sum of its input so far; once X stops
 * changing it emits one spike per step towards A = clip(floor(X / theta + 1/2), A_min, A_max) and
 * then stays silent. That is the QANN's quantizer applied to X, so if every layer's summed input
 * equals the QANN's pre-activation, its summed output (theta A) equals the QANN's activation. The
 * layers between quantizers are linear, so summing over time commutes with them, provided that
 * everything the QANN adds once is added once in total. Hence the rewrite, module by module:
 *
 *   Conv2d + BatchNorm2d   the weight takes the batch-norm's scale gamma / sqrt(var + eps); the
 *                          shift beta - mean * scale becomes a bias added at t = 0 only (a
 *                          FirstStepBias in the batch-norm's place: "bn1.bias")
 *   Linear (with a bias)   its bias at t = 0 only (FirstStepLinear)
 *   NeuronLayer (qclip)    an ST-BIF layer: theta = the learned step, the same levels and signs
 *   MaxPool2d              RunningMaxPool2d: the max-pool of the running sums, emitted as changes
 *                          (max does not commute with the sum over time; the running form does)
 *   residual sums          unchanged: a sum of spike trains sums to the sum of their totals
 *   the image              enters at t = 0 only; the readout sums over T (SNN_ENCODING_FIRST_STEP)
 *
 * The new model is built from the QANN's configuration (the same module tree), takes a copy of
 * its tensors, is rewritten on the host and then moved to the QANN's device.
 */
#include <math.h>
#include <string.h>

#include "model_internal.h"
#include "tensor/error.h"

#define FN "snn_ann_to_snn"

/* ---- what can be converted ---------------------------------------------------------------- */

static snn_status refuse(const char *path, const char *what, const char *hint)
{
    return snn_error(SNN_ERR_ARGUMENT, FN ": cannot convert %s%s%s; hint: %s", what,
                     *path ? " at " : "", path, hint);
}

static void join(char *out, size_t size, const char *prefix, const char *name)
{
    snprintf(out, size, "%s%s%s", prefix, *prefix ? "." : "", name);
}

/* Every module of the tree must be one the rewrite knows. */
static snn_status check_tree(const snn_module *m, const char *path)
{
    const snn_module_ops *ops = m->ops;
    char what[160];
    if (ops == &snn_conv2d_ops && ((const snn_conv_impl *)m->impl)->bias)
        return refuse(path, "a conv with a bias of its own", "the builders make bias-free convs "
                      "followed by a batch-norm, whose shift is the bias");
    if (ops == &snn_max_pool2d_ops) {
        const snn_pool_impl *p = m->impl;
        if (p->kernel > p->stride || p->kernel > 4) {
            snprintf(what, sizeof what, "a max-pool with overlapping windows (kernel %d, stride %d)",
                     p->kernel, p->stride);
            return refuse(path, what, "the running max-pool needs stride >= kernel <= 4");
        }
    }
    if (ops == &snn_neuron_layer_ops) {
        const snn_neuron_layer_impl *n = m->impl;
        if (n->config.kind != SNN_NEURON_QCLIP) {
            snprintf(what, sizeof what, "a %s layer", snn_neuron_kind_name(n->config.kind));
            return refuse(path, what, "every activation of a QANN is a qclip quantizer");
        }
    }
    bool known = ops == &snn_conv2d_ops || ops == &snn_batchnorm2d_ops ||
                 ops == &snn_neuron_layer_ops || ops == &snn_max_pool2d_ops ||
                 ops == &snn_avg_pool2d_ops || ops == &snn_adaptive_avg_pool_ops ||
                 ops == &snn_flatten_ops || ops == &snn_linear_ops || ops == &snn_dropout_ops ||
                 ops == &snn_sequential_ops || strcmp(ops->kind, "BasicBlock") == 0 ||
                 strcmp(ops->kind, "Bottleneck") == 0 ||
                 snn_model_config_of(m) != NULL;
    if (!known) {
        snprintf(what, sizeof what, "a %s module", ops->kind);
        return refuse(path, what, strcmp(ops->kind, "SparseConv2d") == 0
                                      ? "convert the dense QANN, then sparsify the SNN"
                                      : "the conversion knows the layers of snn_model_new's models");
    }
    for (int i = 0; i < m->n_children; i++) {
        char here[128];
        join(here, sizeof here, path, m->children[i]->name);
        snn_status s = check_tree(m->children[i], here);
        if (s != SNN_OK) return s;
    }
    return SNN_OK;
}

static snn_status check_model(const snn_module *qann)
{
    const snn_model_config *c = snn_model_config_of(qann);
    if (!c)
        return snn_error(SNN_ERR_ARGUMENT, FN ": bad argument 'qann' (expected a model made by "
                         "snn_model_new, got %s)", qann ? qann->ops->kind : "NULL");
    if (c->neuron.kind == SNN_NEURON_RELU)
        return refuse("", "a ReLU ANN: its activations are unbounded reals, which no spike count "
                      "over finitely many steps reproduces", "train the same model with --neuron "
                      "qclip (a quantized ANN), then convert that");
    if (c->neuron.kind == SNN_NEURON_STBIF && c->encoding == SNN_ENCODING_FIRST_STEP)
        return refuse("", "a network already converted from a QANN", "convert the QANN once; "
                      "snn_model_set_time_steps changes the SNN's T");
    if (c->neuron.kind != SNN_NEURON_QCLIP) {
        char what[96];
        snprintf(what, sizeof what, "a spiking network (%s neurons)", snn_neuron_kind_name(c->neuron.kind));
        return refuse("", what, "only a QANN converts: train the same model with --neuron "
                      "qclip (neuron kind SNN_NEURON_QCLIP, T = 1), then convert that");
    }
    if (c->encoding != SNN_ENCODING_DIRECT)
        return refuse("", "a model with Poisson or first-step encoding", "a QANN takes the image "
                      "directly (--encoding direct)");
    return check_tree(qann, "");
}

/* ---- the rewrite (host tensors) ----------------------------------------------------------- */

static void replace_child(snn_module *parent, int i, snn_module *fresh)
{
    snn_module *old = parent->children[i];
    memcpy(fresh->name, old->name, sizeof fresh->name);
    fresh->training = false;
    parent->children[i] = fresh;
    snn_module_free(old);
}

/* conv.weight *= scale per output channel; returns the FirstStepBias holding the shift.
 * scale = gamma / sqrt(running_var + eps), shift = beta - running_mean * scale, in double. */
static snn_module *fold_batchnorm(snn_module *conv, snn_module *bn)
{
    const float eps = ((const snn_batchnorm_impl *)bn->impl)->eps;
    const float *gamma = bn->params[0].tensor->data, *beta = bn->params[1].tensor->data;
    const float *mean = bn->params[2].tensor->data, *var = bn->params[3].tensor->data;
    snn_tensor *w = conv->params[0].tensor; /* (C_out, C_in, K, K) */
    const int64_t C = w->shape.dim[0], per_channel = w->numel / C;
    snn_tensor *shift = snn_tensor_new(SNN_SHAPE(C), SNN_CPU);
    if (!shift) return NULL;
    for (int64_t o = 0; o < C; o++) {
        const double scale = (double)gamma[o] / sqrt((double)var[o] + (double)eps);
        for (int64_t j = 0; j < per_channel; j++)
            w->data[o * per_channel + j] = (float)((double)w->data[o * per_channel + j] * scale);
        shift->data[o] = (float)((double)beta[o] - (double)mean[o] * scale);
    }
    return snn_first_step_bias_new(shift);
}

/* The ST-BIF layer that replaces a QCLIP layer: theta = its step as the quantizer used it. */
static snn_module *stbif_layer(const snn_module *qclip)
{
    const snn_neuron_config *q = &((const snn_neuron_layer_impl *)qclip->impl)->config;
    const float step = qclip->params[0].tensor->data[0];
    snn_neuron_config c = snn_neuron_config_default(SNN_NEURON_STBIF);
    c.theta = step > SNN_QCLIP_MIN_STEP ? step : SNN_QCLIP_MIN_STEP; /* snn_qclip's clamp */
    c.levels = q->levels;
    c.symmetric = q->symmetric;
    c.surrogate = q->surrogate;
    if (!isfinite(c.theta))
        return snn_error_null(SNN_ERR_NUMERIC, FN ": a qclip layer's step is %g; hint: the QANN "
                              "diverged in training", (double)step);
    return snn_neuron_layer_new(&c);
}

static snn_status rewrite(snn_module *m, const char *path)
{
    for (int i = 0; i < m->n_children; i++) {
        snn_module *c = m->children[i], *fresh = NULL;
        snn_module *next = i + 1 < m->n_children ? m->children[i + 1] : NULL;
        char here[128];
        join(here, sizeof here, path, c->name);
        if (c->ops == &snn_conv2d_ops && next && next->ops == &snn_batchnorm2d_ops) {
            if (!(fresh = fold_batchnorm(c, next))) return snn_last_status();
            replace_child(m, ++i, fresh); /* the batch-norm's place */
            continue;
        }
        if (c->ops == &snn_batchnorm2d_ops)
            return refuse(here, "a batch-norm that does not follow a conv", "fold it by hand");
        if (c->ops == &snn_neuron_layer_ops) {
            fresh = stbif_layer(c);
        } else if (c->ops == &snn_max_pool2d_ops) {
            const snn_pool_impl *p = c->impl;
            fresh = snn_running_max_pool2d_new(p->kernel, p->stride);
        } else if (c->ops == &snn_linear_ops && c->n_params == 2) {
            fresh = snn_first_step_linear_new(c->params[0].tensor, c->params[1].tensor);
            c->n_params = 0; /* the tensors are the new module's now (freed with it on failure) */
        } else {
            snn_status s = rewrite(c, here);
            if (s != SNN_OK) return s;
            continue;
        }
        if (!fresh) return snn_last_status();
        replace_child(m, i, fresh);
    }
    return SNN_OK;
}

/* dst's tensors <- src's, matched by name (the two trees were built from one configuration). */
static snn_status copy_tensors(snn_module *dst, snn_module *src)
{
    snn_param_list a = {0}, b = {0};
    snn_status s = snn_module_parameters(src, &a);
    if (s == SNN_OK) s = snn_module_parameters(dst, &b);
    for (int i = 0; s == SNN_OK && i < a.count; i++) {
        SNN_ASSERT(a.count == b.count && strcmp(a.items[i].name, b.items[i].name) == 0);
        s = snn_tensor_copy(b.items[i].tensor, a.items[i].tensor);
    }
    snn_param_list_free(&a);
    snn_param_list_free(&b);
    return s;
}

snn_module *snn_ann_to_snn(snn_module *qann, int time_steps)
{
    if (check_model(qann) != SNN_OK) return NULL;
    if (time_steps < 1 || time_steps > 1024)
        return snn_error_null(SNN_ERR_ARGUMENT, FN ": bad argument 'time_steps' (expected 1..1024, "
                              "got %d)", time_steps);
    const snn_model_config *qc = snn_model_config_of(qann);
    const snn_device device = qann->n_children && qann->children[0]->n_params
                                  ? qann->children[0]->params[0].tensor->device : SNN_CPU;
    snn_rng rng;
    snn_rng_seed(&rng, 0); /* the weights are overwritten by the copy */
    snn_module *snn = snn_model_new(qc, &rng);
    if (!snn) return NULL;
    snn_status s = copy_tensors(snn, qann);
    if (s == SNN_OK) s = rewrite(snn, "");
    if (s == SNN_OK) {
        snn_model_config *c = &((snn_model_impl *)snn->impl)->config;
        const snn_neuron_config q = c->neuron;
        c->neuron = snn_neuron_config_default(SNN_NEURON_STBIF); /* each layer has its own theta */
        c->neuron.levels = q.levels;
        c->neuron.symmetric = q.symmetric;
        c->neuron.surrogate = q.surrogate;
        c->encoding = SNN_ENCODING_FIRST_STEP;
        c->time_steps = time_steps;
        s = snn_module_to(snn, device);
    }
    if (s != SNN_OK) {
        snn_module_free(snn);
        return NULL;
    }
    snn_module_train(snn, false);
    return snn;
}

int snn_ann_to_snn_time_bound(const snn_module *model)
{
    const snn_model_config *c = snn_model_config_of(model);
    if (!c || (c->neuron.kind != SNN_NEURON_QCLIP && c->neuron.kind != SNN_NEURON_STBIF)) {
        snn_error(SNN_ERR_ARGUMENT, "snn_ann_to_snn_time_bound: bad argument 'model' (expected a "
                  "QANN or the SNN converted from one)");
        return -1;
    }
    int a_min, a_max;
    snn_stbif_bounds(&c->neuron, &a_min, &a_max);
    /* quantizers on the longest path: CNN sn1, sn2, sn3 (and sn4); DVS net one per conv block,
     * then fc1's (and the readout's); ResNets: the stem's, then per block two (basic: sn1, and
     * sn2 after the residual sum or on the SEW branch) or three (bottleneck) in 8 blocks
     * (ResNet-18) or 16 (ResNet-34, -50) */
    int K;
    switch (c->kind) {
    case SNN_MODEL_SPIKING_CNN: K = 3 + (c->spiking_readout ? 1 : 0); break;
    case SNN_MODEL_DVS_NET: { /* as its builder: blocks while the frame is larger than 4x4 */
        int blocks = 1, h = c->height / 2, w = c->width / 2;
        for (int b = 2; b <= 8 && (h > 4 || w > 4); b++) blocks++, h /= 2, w /= 2;
        K = blocks + 1 + (c->spiking_readout ? 1 : 0);
        break;
    }
    case SNN_MODEL_RESNET34:
    case SNN_MODEL_SEW_RESNET34: K = 1 + 2 * 16; break;
    case SNN_MODEL_RESNET50:
    case SNN_MODEL_SEW_RESNET50: K = 1 + 3 * 16; break;
    default: K = 1 + 2 * 8; break; /* ResNet-18, SEW-ResNet-18 */
    }
    const int first = a_max > -a_min ? a_max : -a_min; /* from A = 0 to either bound */
    return first + (K - 1) * (a_max - a_min);
}
