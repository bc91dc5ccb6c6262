/*
 * activity_penalty.c - a loss term that trains spiking nets toward silent (t, n, c) planes, the
 * structure the sparse convs skip (sparse/; docs/sparse.md section 7).
 *
 * Dimension glossary: T time steps, N batch, C channels, P = H * W elements per plane, L neuron
 * layers, G = T * N * C planes of a layer, S the layer's spikes (T, N, C, H, W).
 *
 *   penalty = sum_l (1 / G_l) sum_g ||S_g||_2 / sqrt(P_l)
 *           = sum_l mean_g sqrt(rate_g)               for spikes in {0, 1}, rate_g = count_g / P
 *
 * Why this form. What the GPU's sparse conv saves is proportional to the silent planes, not to the
 * spikes: a plane with one spike costs as much as a full one. An L1 penalty on the spikes (the
 * firing rate) pushes every spike equally, thinning all planes without emptying any. The L2 norm
 * per plane (group lasso) is the convex penalty whose minimisers have whole groups at zero: its
 * gradient gives each spike of plane g
 *
 *   dpenalty/dS[g, p] = S[g, p] / (G sqrt(P) ||S_g||) = 1 / (G sqrt(P count_g))   (spikes)
 *
 * so a plane with 1 spike pushes that spike 10x harder than a plane with 100 pushes each of its
 * own: nearly silent planes go silent, busy planes (which carry the signal) are left mostly
 * alone. Neurons that did not fire get no push (the subgradient at a silent plane is 0), so the
 * penalty never drives membranes further below threshold than they are.
 *
 * Through the neuron. The spikes are the output of the fused neuron node, so the gradient
 * reaches the membrane through the surrogate: dL/dH[t] = dL/dS[t] g'(H[t] - V_th) (plus the
 * reset and leak terms of BPTT, neurons.h). g' peaks at the threshold, so the spikes that barely
 * crossed it are removed first; from H the gradient flows into the batch-norm shift and the conv
 * weights that feed the plane's channel. The normalisation makes each layer's term scale-free: it
 * lies in [0, 1] (1: every neuron fires at every step), and summed over the layer the push on its
 * spikes equals the term itself (the norm is homogeneous of degree 1). Layers are summed, not
 * averaged, so LAMBDA is the pressure on every layer whatever the depth (the classification
 * loss's gradient reaching a layer does not shrink with depth either, batch-norm keeps it so):
 * one LAMBDA means about the same on a CNN and a ResNet-50, and the penalty lies in [0, L].
 * Test: tests/test_activity_penalty.c.
 */
#include <math.h>

#include "nn.h"
#include "nn_internal.h"
#include "tensor/arena.h"
#include "tensor/error.h"

#define MAX_PENALTY_LAYERS 256

static int collect_neurons(snn_module *m, snn_module **out, int at)
{
    if (m->ops == &snn_neuron_layer_ops) {
        if (at < MAX_PENALTY_LAYERS) out[at] = m;
        at++;
    }
    for (int i = 0; i < m->n_children; i++) at = collect_neurons(m->children[i], out, at);
    return at;
}

snn_tensor *snn_activity_penalty(snn_module *model)
{
    const char *fn = "snn_activity_penalty";
    if (!model)
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument 'model' (got NULL)", fn);
    snn_module *layers[MAX_PENALTY_LAYERS];
    int n = collect_neurons(model, layers, 0);
    if (n > MAX_PENALTY_LAYERS)
        return snn_error_null(SNN_ERR_UNSUPPORTED, "%s: more than %d neuron layers (got %d)", fn,
                              MAX_PENALTY_LAYERS, n);
    /* a spiking readout (the CNN's output neurons, for the rate loss) is the answer, not a
     * feature map: it is left out */
    const snn_model_config *config = snn_model_config_of(model);
    if (config && config->spiking_readout && n > 0) n--;
    snn_tensor *spikes[MAX_PENALTY_LAYERS];
    int used = 0;
    for (int i = 0; i < n; i++) {
        snn_tensor *s = snn_neuron_layer_last_spikes(layers[i]);
        if (s && s->shape.ndim >= 2 && s->numel > 0) spikes[used++] = s;
    }
    if (!used)
        return snn_error_null(SNN_ERR_STATE, "%s: no neuron layer of the model ran in this step; "
                              "hint: call it after the model's forward, before snn_step_end", fn);
    snn_tensor *total = NULL;
    for (int i = 0; i < used; i++) {
        snn_tensor *norms = snn_spike_plane_norms(spikes[i]);   /* (T, N, C) */
        if (!norms) return NULL;
        const double plane = (double)spikes[i]->numel / (double)norms->numel;
        const double scale = 1.0 / ((double)norms->numel * sqrt(plane));
        snn_tensor *term = snn_scale(snn_sum_all(norms), (float)scale);
        total = total && term ? snn_add(total, term) : term;
        if (!total) return NULL;
    }
    return total;
}
