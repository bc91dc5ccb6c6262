/*
 * layer_neuron.c - a layer of spiking neurons over (T, N, ...): multi-step, one fused node.
 *
 * It keeps the last forward's activity (spike counts per (t, n, c) plane, written by the neuron
 * kernel itself) so that firing rates can be reported without an extra pass. ParametricLIF owns
 * its learned w (one scalar per layer, as SpikingJelly's ParametricLIFNode), QCLIP its learned
 * step (one scalar per layer, as LSQ's activation quantizers). The ANN kinds (RELU, QCLIP) keep
 * no activity: their firing rate reads -1.
 *
 * A model may run the layer together with the batch-norm (and residual sum) before it, as one
 * op (the fusion rules, nn/fusion_rules.c, through snn_neuron_layer_forward_bn): the same
 * bookkeeping, and for a layer that carries its state the same state handling (the fused op's
 * _carry and _state variants, neurons/bn_neuron_carry.c).
 */
#include "nn.h"
#include "nn_internal.h"
#include "tensor/arena.h"
#include "tensor/error.h"

snn_tensor *snn_neuron_layer_remember(snn_module *m, snn_tensor *spikes, snn_tensor *activity)
{
    snn_neuron_layer_impl *n = m->impl;
    n->last_spikes = spikes;
    n->last_activity = activity;
    n->last_step = snn_step_id();
    return spikes;
}

/* The state a carrying layer starts a sequence from: V = V_reset (theta/2 for ST-BIF), A = 0. */
static snn_status fill_reset_state(snn_neuron_layer_impl *n)
{
    const bool stbif = n->config.kind == SNN_NEURON_STBIF;
    const float v0 = stbif ? n->config.theta / 2.0f
                           : (n->config.reset == SNN_RESET_SOFT ? 0.0f : n->config.v_reset);
    if (n->v_state) snn_batchnorm_neuron_carry_forget(n->v_state); /* its V_init is gone */
    snn_status s = n->v_state ? snn_tensor_fill(n->v_state, v0) : SNN_OK;
    if (s == SNN_OK && n->a_state) s = snn_tensor_fill(n->a_state, 0.0f);
    return s;
}

static void free_state(snn_neuron_layer_impl *n)
{
    if (n->v_state) snn_batchnorm_neuron_carry_forget(n->v_state);
    snn_tensor_free(n->v_state);
    snn_tensor_free(n->a_state);
    n->v_state = n->a_state = NULL;
}

/* The state tensors for one step of x, (re)made when the batch size or the device changes. */
static snn_status ensure_state(snn_neuron_layer_impl *n, const snn_tensor *x)
{
    const int64_t per_step = x->shape.dim[0] > 0 ? x->numel / x->shape.dim[0] : 0;
    const bool has_a = n->config.kind == SNN_NEURON_ALIF || n->config.kind == SNN_NEURON_STBIF;
    if (n->v_state && n->v_state->numel == per_step && n->v_state->device == x->device)
        return SNN_OK;
    free_state(n);
    n->v_state = snn_tensor_new(SNN_SHAPE(per_step), x->device);
    if (n->v_state && has_a) n->a_state = snn_tensor_new(SNN_SHAPE(per_step), x->device);
    if (!n->v_state || (has_a && !n->a_state)) {
        free_state(n);
        return snn_last_status();
    }
    return fill_reset_state(n);
}

/* SNN_CARRY_DIFFERENTIABLE: the state enters as leaves that require grad (ST-BIF's count
 * excepted) and leaves as the graph's outputs, which the caller seeds and reads; the carried
 * state then holds the state left, as in SNN_CARRY_CONSTANT. With bn (IF / LIF), the layer's
 * input is bn(x) [+ residual], made in the fused op. */
static snn_tensor *forward_differentiable(snn_neuron_layer_impl *n, snn_tensor *x, snn_tensor *w,
                                          const snn_neuron_bn_feed *bn, snn_tensor **activity)
{
    const char *fn = "NeuronLayer (differentiable state)";
    snn_tensor *v_in = snn_step_tensor(fn, n->v_state->shape, x->device);
    snn_tensor *a_in = n->a_state ? snn_step_tensor(fn, n->a_state->shape, x->device) : NULL;
    if (!v_in || (n->a_state && !a_in) || snn_tensor_copy(v_in, n->v_state) != SNN_OK ||
        (a_in && snn_tensor_copy(a_in, n->a_state) != SNN_OK))
        return NULL;
    v_in->requires_grad = true;
    if (a_in) a_in->requires_grad = n->config.kind == SNN_NEURON_ALIF;
    snn_tensor *v_out = NULL, *a_out = NULL;
    snn_tensor *spikes =
        bn ? snn_batchnorm_neuron_state(x, bn->gamma, bn->beta, bn->running_mean,
                                        bn->running_var, bn->momentum, bn->eps, bn->residual,
                                        &n->config, v_in, &v_out, activity)
           : snn_neuron_multistep_state(x, &n->config, w, v_in, a_in, &v_out, &a_out, activity);
    snn_batchnorm_neuron_carry_forget(n->v_state); /* overwritten below */
    if (!spikes || snn_tensor_copy(n->v_state, v_out) != SNN_OK ||
        (a_out && snn_tensor_copy(n->a_state, a_out) != SNN_OK))
        return NULL;
    n->seg_v_in = v_in, n->seg_a_in = a_in, n->seg_v_out = v_out, n->seg_a_out = a_out;
    return spikes;
}

/* The layer's forward on x, or with bn on bn(x) [+ residual] as one op (the fusion rules). */
static snn_tensor *layer_forward(snn_module *m, snn_tensor *x, const snn_neuron_bn_feed *bn)
{
    snn_neuron_layer_impl *n = m->impl;
    /* PLIF's w, QCLIP's step: the layer's one parameter */
    snn_tensor *w = m->n_params > 0 ? m->params[0].tensor : NULL;
    snn_tensor *activity = NULL, *spikes;
    n->seg_v_in = n->seg_a_in = n->seg_v_out = n->seg_a_out = NULL;
    SNN_ASSERT(!(bn && bn->repeat && n->carry != SNN_CARRY_NONE)); /* the rule's condition */
    /* a residual made by a batch-norm: the plain op's alone (nn/model_resnet.c asks) */
    SNN_ASSERT(!(bn && bn->residual_x && n->carry != SNN_CARRY_NONE));
    if (n->carry != SNN_CARRY_NONE && !snn_neuron_is_ann(n->config.kind)) {
        /* a bad x is named by the op; the state is made for a good one */
        const bool x_ok = x && x->shape.ndim >= 2;
        if (x_ok && ensure_state(n, x) != SNN_OK) return NULL;
        if ((n->carry == SNN_CARRY_CONSTANT || !x_ok) && bn)
            spikes = snn_batchnorm_neuron_carry(x, bn->gamma, bn->beta, bn->running_mean,
                                                bn->running_var, bn->momentum, bn->eps,
                                                bn->residual, &n->config, n->v_state, &activity);
        else if ((n->carry == SNN_CARRY_CONSTANT || !x_ok) && n->consume_input)
            spikes = snn_neuron_multistep_carry_consume(x, &n->config, w, n->v_state, n->a_state,
                                                        &activity);
        else if (n->carry == SNN_CARRY_CONSTANT || !x_ok)
            spikes = snn_neuron_multistep_carry(x, &n->config, w, n->v_state, n->a_state,
                                                &activity);
        else
            spikes = forward_differentiable(n, x, w, bn, &activity);
    } else if (bn && bn->repeat) {
        spikes = snn_batchnorm_neuron_repeat(x, bn->gamma, bn->beta, bn->running_mean,
                                             bn->running_var, bn->momentum, bn->eps, bn->repeat,
                                             &n->config, &activity);
    } else if (bn && bn->residual_x) {
        const snn_batchnorm_args args = {bn->gamma, bn->beta, bn->running_mean, bn->running_var,
                                         bn->momentum, bn->eps};
        spikes = snn_batchnorm_neuron_bn_residual(x, &args, bn->residual_x, bn->residual_bn,
                                                  &n->config, &activity);
    } else if (bn) {
        spikes = snn_batchnorm_neuron(x, bn->gamma, bn->beta, bn->running_mean, bn->running_var,
                                      bn->momentum, bn->eps, bn->residual, &n->config,
                                      &activity);
    } else {
        spikes = n->consume_input ? snn_neuron_multistep_consume(x, &n->config, w, &activity)
                                  : snn_neuron_multistep(x, &n->config, w, &activity);
    }
    return snn_neuron_layer_remember(m, spikes, activity);
}

static snn_tensor *neuron_forward(snn_module *m, snn_tensor *x)
{
    return layer_forward(m, x, NULL);
}

snn_tensor *snn_neuron_layer_forward_bn(snn_module *m, snn_tensor *x, const snn_neuron_bn_feed *bn)
{
    SNN_ASSERT(m && m->ops == &snn_neuron_layer_ops && bn);
    return layer_forward(m, x, bn);
}

void snn_neuron_layer_set_carry(snn_module *m, snn_state_carry mode)
{
    SNN_ASSERT(m && m->ops == &snn_neuron_layer_ops);
    /* the state stays allocated when off, for the next time it is on (no allocation in a
     * training loop that switches between online steps and evaluation) */
    ((snn_neuron_layer_impl *)m->impl)->carry = mode;
}

static void collect_into(snn_module *m, snn_module **out, int max, int *count)
{
    if (m->ops == &snn_neuron_layer_ops) {
        if (out && *count < max) out[*count] = m;
        (*count)++;
    }
    for (int i = 0; i < m->n_children; i++) collect_into(m->children[i], out, max, count);
}

int snn_neuron_layers_collect(snn_module *root, snn_module **out, int max)
{
    int count = 0;
    if (root) collect_into(root, out, max, &count);
    return count;
}

int snn_neuron_layers_set_carry(snn_module *root, snn_state_carry mode)
{
    if (!root) return 0;
    int layers = root->ops == &snn_neuron_layer_ops;
    if (layers) snn_neuron_layer_set_carry(root, mode);
    for (int i = 0; i < root->n_children; i++)
        layers += snn_neuron_layers_set_carry(root->children[i], mode);
    return layers;
}

snn_neuron_carried snn_neuron_layer_carried(snn_module *m)
{
    if (!m || m->ops != &snn_neuron_layer_ops) return (snn_neuron_carried){0};
    const snn_neuron_layer_impl *n = m->impl;
    return (snn_neuron_carried){n->v_state, n->a_state, n->seg_v_in, n->seg_a_in, n->seg_v_out,
                                n->seg_a_out};
}

static void neuron_reset_state(snn_module *m)
{
    snn_neuron_layer_impl *n = m->impl;
    (void)fill_reset_state(n); /* a failed fill sets the error, which the next op reports */
}

static void neuron_free_impl(snn_module *m)
{
    free_state(m->impl);
}

void snn_neuron_layer_set_consume_input(snn_module *m, bool on)
{
    SNN_ASSERT(m && m->ops == &snn_neuron_layer_ops);
    ((snn_neuron_layer_impl *)m->impl)->consume_input = on;
}

const snn_module_ops snn_neuron_layer_ops = {"NeuronLayer", neuron_forward, neuron_free_impl,
                                             neuron_reset_state};

snn_module *snn_neuron_layer_new(const snn_neuron_config *config)
{
    /* the check names a NULL config too */
    if (snn_neuron_config_check("snn_neuron_layer_new", config) != SNN_OK) return NULL;
    const snn_neuron_layer_impl n = {.config = *config};
    snn_module *m = snn_module_new_copy(&snn_neuron_layer_ops, &n, sizeof n);
    if (!m) return NULL;
    if (config->kind == SNN_NEURON_PLIF) {
        snn_tensor *w = snn_plif_param_new(config->tau, SNN_CPU);
        if (!w) {
            snn_module_free(m);
            return NULL;
        }
        snn_module_add_param(m, "w", w, true);
    } else if (config->kind == SNN_NEURON_QCLIP) {
        snn_tensor *step = snn_qclip_step_new(config->theta, SNN_CPU);
        if (!step) {
            snn_module_free(m);
            return NULL;
        }
        snn_module_add_param(m, "step", step, true);
    }
    return m;
}

float snn_neuron_layer_firing_rate(snn_module *m)
{
    if (!snn_module_is_neuron_layer(m)) return -1.0f;
    snn_neuron_layer_impl *n = m->impl;
    if (!n->last_activity || !snn_step_is_open(n->last_step)) return -1.0f;
    return snn_activity_rate(n->last_activity, n->last_spikes->numel);
}

snn_tensor *snn_neuron_layer_last_spikes(snn_module *m)
{
    if (!snn_module_is_neuron_layer(m)) return NULL;
    snn_neuron_layer_impl *n = m->impl;
    return snn_step_is_open(n->last_step) ? n->last_spikes : NULL;
}
