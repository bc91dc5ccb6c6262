/*
 * layer_recurrent.c - a recurrent layer of spiking neurons over (T, N, F): each step's input
 * current adds the layer's own spikes of the step before through learned weights W_rec (F, F),
 * as one fused node (snn_recurrent_multistep, neurons/recurrent.c, has the equations):
 *
 *   I[t] = X[t] + S[t-1] W_rec^T,   S[t] = the neuron (IF, LIF or ALIF) stepped on I[t]
 *
 * W_rec is initialised as PyTorch initialises a Linear(F, F) weight, U(-1/sqrt(F), 1/sqrt(F)),
 * and is the layer's one parameter, "w_rec": checkpoints, optimizers and module printing see it
 * through the generic parameter list.
 *
 * The layer counts as a neuron layer (snn_module_is_neuron_layer): its state is a
 * snn_neuron_layer_impl, so it keeps the last forward's spikes and activity as NeuronLayer does
 * (snn_neuron_layer_firing_rate, snn_model_neuron_layers read them), and a SynOps count sees
 * its recurrent product, the layer's spikes fanned out to F neurons (nn/synops.c).
 *
 * Test: tests/test_recurrent_layer.c
 */
#include <math.h>

#include "nn.h"
#include "nn_internal.h"
#include "tensor/error.h"

static snn_tensor *recurrent_forward(snn_module *m, snn_tensor *x)
{
    snn_neuron_layer_impl *n = m->impl;
    snn_tensor *activity = NULL;
    snn_tensor *spikes = snn_recurrent_multistep(x, m->params[0].tensor, &n->config, &activity);
    /* the recurrent product's input is the layer's own output: counted once it exists */
    if (spikes && m->plan && m->plan->synops)
        snn_synops_observe_recurrent(m->plan->synops, m, spikes);
    return snn_neuron_layer_remember(m, spikes, activity);
}

const snn_module_ops snn_recurrent_layer_ops = {"RecurrentNeuronLayer", recurrent_forward, NULL,
                                                NULL};

bool snn_module_is_neuron_layer(const snn_module *m)
{
    return m && (m->ops == &snn_neuron_layer_ops || m->ops == &snn_recurrent_layer_ops);
}

snn_module *snn_recurrent_layer_new(int features, const snn_neuron_config *cfg, snn_rng *rng)
{
    const char *fn = "snn_recurrent_layer_new";
    if (features < 1)
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument 'features' (expected >= 1, "
                              "got %d)", fn, features);
    if (!rng)
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument 'rng' (got NULL)", fn);
    if (snn_neuron_config_check(fn, cfg) != SNN_OK) return NULL; /* names a NULL cfg too */
    if (cfg->kind != SNN_NEURON_IF && cfg->kind != SNN_NEURON_LIF &&
        cfg->kind != SNN_NEURON_ALIF)
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument 'cfg' (expected an if, lif or "
                              "alif neuron, got %s)", fn, snn_neuron_kind_name(cfg->kind));
    const snn_neuron_layer_impl n = {.config = *cfg};
    snn_module *m = snn_module_new_copy(&snn_recurrent_layer_ops, &n, sizeof n);
    if (!m) return NULL;
    const float bound = 1.0f / sqrtf((float)features);
    if (snn_module_add_uniform(m, "w_rec", SNN_SHAPE(features, features), bound, rng) != SNN_OK) {
        snn_module_free(m);
        return NULL;
    }
    return m;
}
