/*
 * layer_neuron.c - a layer of spiking neurons over (T, N, ...): multi-step, one fused node.
 *
 * It keeps the last forward's activity (spike counts per (t, n, c) plane, written by the neuron
 * kernel itself) so that firing rates can be reported without an extra pass. ParametricLIF owns
 * its learned w (one scalar per layer, as SpikingJelly's ParametricLIFNode), QCLIP its learned
 * step (one scalar per layer, as LSQ's activation quantizers). The ANN kinds (RELU, QCLIP) keep
 * no activity: their firing rate reads -1.
 *
 * Spike packing (snn_set_spike_packing, snn_spikes_forward_done): the models hand the
 * spikes of a layer whose forward readers have run to snn_spikes_pack, which keeps them for
 * backward as bits.
 *
 * Also snn_bn_neuron_forward: a training-mode batch-norm (plus a residual) and an IF / LIF layer
 * after it as one op, snn_batchnorm_neuron, which the models use for every such pair; and
 * snn_neuron_residual_forward, a residual sum and the layer after it without a tape
 * (snn_neuron_multistep_residual: the sum is never written).
 */
#include "nn.h"
#include "nn_internal.h"
#include "tensor/error.h"

/* Keeps a forward's spikes and activity for the firing-rate and sparse-pass readers. */
static snn_tensor *remember(snn_neuron_layer_impl *n, snn_tensor *spikes, snn_tensor *activity)
{
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
    return remember(n, spikes, activity);
}

static bool fusion_on = true;

void snn_model_set_fusion(bool on) { fusion_on = on; }
bool snn_model_fusion(void) { return fusion_on; }

snn_status snn_spikes_forward_done(snn_tensor *t)
{
    if (!t || !t->spikes || !t->pooled || t->base) return SNN_OK;
    return snn_spikes_pack(t);
}

/* A NeuronLayer whose kind the fused kernels take, with fusion on. */
static bool fusable_neuron(const snn_module *neuron)
{
    return fusion_on && neuron && neuron->ops == &snn_neuron_layer_ops &&
           snn_neuron_takes_bn_input(((const snn_neuron_layer_impl *)neuron->impl)->config.kind);
}

bool snn_bn_neuron_fuses(const snn_module *bn, const snn_module *neuron)
{
    return fusable_neuron(neuron) && bn && bn->training && bn->ops == &snn_batchnorm2d_ops &&
           !snn_batchnorm_sync_enabled();
}

snn_tensor *snn_bn_neuron_forward(snn_module *bn, snn_module *neuron, snn_tensor *x,
                                  snn_tensor *residual)
{
    if (!x) return NULL;
    if (!snn_bn_neuron_fuses(bn, neuron) || x->shape.ndim != 5) {
        snn_tensor *y = snn_module_forward(bn, x);
        return snn_module_forward(neuron, residual ? snn_add_into(y, residual) : y);
    }
    snn_neuron_layer_impl *n = neuron->impl;
    const snn_batchnorm_impl *b = bn->impl;
    snn_tensor *activity = NULL;
    snn_tensor *spikes = snn_batchnorm_neuron(x, bn->params[0].tensor, bn->params[1].tensor,
                                              bn->params[2].tensor, bn->params[3].tensor,
                                              b->momentum, b->eps, residual, &n->config,
                                              &activity);
    return remember(n, spikes, activity);
}

snn_tensor *snn_neuron_residual_forward(snn_module *neuron, snn_tensor *x, snn_tensor *residual)
{
    if (!x || !residual) return NULL;
    snn_tensor *inputs[2] = {x, residual};
    /* with a tape, the layer's own forward: it keeps H in the sum's memory (consume_input) */
    if (!fusable_neuron(neuron) || snn_should_record(2, inputs))
        return snn_module_forward(neuron, snn_add_into(x, residual));
    snn_neuron_layer_impl *n = neuron->impl;
    snn_tensor *activity = NULL;
    snn_tensor *spikes = snn_neuron_multistep_residual(x, residual, &n->config, &activity);
    return remember(n, spikes, activity);
}

void snn_neuron_layer_set_consume_input(snn_module *m, bool on)
{
    SNN_ASSERT(m && m->ops == &snn_neuron_layer_ops);
    ((snn_neuron_layer_impl *)m->impl)->consume_input = on;
}

static void neuron_free(snn_module *m) { snn_free(m->impl, sizeof(snn_neuron_layer_impl), SNN_CPU); }

const snn_module_ops snn_neuron_layer_ops = {"NeuronLayer", neuron_forward, neuron_free, NULL};

snn_module *snn_neuron_layer_new(const snn_neuron_config *config)
{
    if (!config)
        return snn_error_null(SNN_ERR_ARGUMENT, "snn_neuron_layer_new: bad argument 'config' (got NULL)");
    if (snn_neuron_config_check("snn_neuron_layer_new", config) != SNN_OK) return NULL;
    snn_neuron_layer_impl *n = snn_alloc(sizeof *n, SNN_CPU);
    if (!n) return snn_error_null(SNN_ERR_MEMORY, "snn_neuron_layer_new: out of host memory");
    *n = (snn_neuron_layer_impl){.config = *config};
    snn_module *m = snn_module_new(&snn_neuron_layer_ops, n);
    if (!m) {
        snn_free(n, sizeof *n, SNN_CPU);
        return NULL;
    }
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
    if (!m || m->ops != &snn_neuron_layer_ops) return -1.0f;
    snn_neuron_layer_impl *n = m->impl;
    if (!n->last_activity || !snn_step_is_open(n->last_step)) return -1.0f;
    return snn_activity_rate(n->last_activity, n->last_spikes->numel);
}

snn_tensor *snn_neuron_layer_last_spikes(snn_module *m)
{
    if (!m || m->ops != &snn_neuron_layer_ops) return NULL;
    snn_neuron_layer_impl *n = m->impl;
    return snn_step_is_open(n->last_step) ? n->last_spikes : NULL;
}
