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
 * op (the fusion rules, nn/fusion_rules.c); the fused op keeps the same bookkeeping through
 * snn_neuron_layer_remember.
 */
#include "nn.h"
#include "nn_internal.h"
#include "tensor/error.h"

snn_tensor *snn_neuron_layer_remember(snn_module *m, snn_tensor *spikes, snn_tensor *activity)
{
    snn_neuron_layer_impl *n = m->impl;
    n->last_spikes = spikes;
    n->last_activity = activity;
    n->last_step = snn_step_id();
    return spikes;
}

static snn_tensor *neuron_forward(snn_module *m, snn_tensor *x)
{
    snn_neuron_layer_impl *n = m->impl;
    /* PLIF's w, QCLIP's step: the layer's one parameter */
    snn_tensor *w = m->n_params > 0 ? m->params[0].tensor : NULL;
    snn_tensor *activity = NULL;
    snn_tensor *spikes = n->consume_input ? snn_neuron_multistep_consume(x, &n->config, w, &activity)
                                          : snn_neuron_multistep(x, &n->config, w, &activity);
    return snn_neuron_layer_remember(m, spikes, activity);
}

void snn_neuron_layer_set_consume_input(snn_module *m, bool on)
{
    SNN_ASSERT(m && m->ops == &snn_neuron_layer_ops);
    ((snn_neuron_layer_impl *)m->impl)->consume_input = on;
}

const snn_module_ops snn_neuron_layer_ops = {"NeuronLayer", neuron_forward, NULL, NULL};

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
