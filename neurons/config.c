/*
 * config.c - neuron configurations: SpikingJelly's defaults, validation with messages that
 * name the bad field, and the flattening into the kernels' params struct (the kinds' names are
 * names.c).
 */
#include <math.h>

#include "kernels/neuron_kernels.h"
#include "tensor/error.h"

snn_neuron_config snn_neuron_config_default(snn_neuron_kind kind)
{
    return (snn_neuron_config){
        .kind = kind,
        .v_threshold = 1.0f,
        .v_reset = 0.0f,
        /* ST-BIF subtracts theta, always */
        .reset = kind == SNN_NEURON_STBIF ? SNN_RESET_SOFT : SNN_RESET_HARD,
        .detach_reset = false,
        .surrogate = snn_surrogate_default(SNN_SURROGATE_SIGMOID),
        .tau = 2.0f,
        .decay_input = true,
        .theta = 1.0f,
        .levels = 8,
        .symmetric = false,
        .tau_adapt = 20.0f,
        .beta = 1.8f,
    };
}

bool snn_neuron_is_ann(snn_neuron_kind kind)
{
    return kind == SNN_NEURON_RELU || kind == SNN_NEURON_QCLIP;
}

bool snn_neuron_takes_bn_input(snn_neuron_kind kind)
{
    return kind == SNN_NEURON_IF || kind == SNN_NEURON_LIF;
}

bool snn_neuron_spikes_are_binary(snn_neuron_kind kind)
{
    return kind == SNN_NEURON_IF || kind == SNN_NEURON_LIF || kind == SNN_NEURON_PLIF ||
           kind == SNN_NEURON_ALIF;
}

void snn_stbif_bounds(const snn_neuron_config *cfg, int *a_min, int *a_max)
{
    if (cfg->symmetric) {
        *a_min = -(cfg->levels / 2);
        *a_max = cfg->levels / 2 - 1;
    } else {
        *a_min = 0;
        *a_max = cfg->levels - 1;
    }
}

snn_status snn_neuron_config_check(const char *fn, const snn_neuron_config *cfg)
{
    if (!cfg)
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad argument 'cfg' (expected a neuron config, got "
                         "NULL); hint: start from snn_neuron_config_default()", fn);
    if ((unsigned)cfg->kind >= SNN_NEURON_COUNT)
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad cfg.kind (expected SNN_NEURON_IF, _LIF, _PLIF, "
                         "_STBIF, _RELU, _QCLIP or _ALIF, got %d)", fn, (int)cfg->kind);
    if ((unsigned)cfg->surrogate.kind >= SNN_SURROGATE_COUNT)
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad cfg.surrogate.kind (expected 0 to %d, got %d)",
                         fn, SNN_SURROGATE_COUNT - 1, (int)cfg->surrogate.kind);
    if (!(cfg->surrogate.alpha > 0.0f) || !isfinite(cfg->surrogate.alpha))
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad cfg.surrogate.alpha (expected > 0, got %g)", fn,
                         (double)cfg->surrogate.alpha);
    if (cfg->kind == SNN_NEURON_RELU) return SNN_OK;
    if (cfg->kind == SNN_NEURON_STBIF || cfg->kind == SNN_NEURON_QCLIP) {
        if (!(cfg->theta > 0.0f) || !isfinite(cfg->theta))
            return snn_error(SNN_ERR_ARGUMENT, "%s: bad cfg.theta (expected > 0, got %g)", fn,
                             (double)cfg->theta);
        if (cfg->levels < 2 || (cfg->symmetric && cfg->levels % 2 != 0))
            return snn_error(SNN_ERR_ARGUMENT, "%s: bad cfg.levels (expected >= 2%s, got %d)", fn,
                             cfg->symmetric ? " and even for symmetric levels" : "", cfg->levels);
        return SNN_OK;
    }
    if (!isfinite(cfg->v_threshold) || !isfinite(cfg->v_reset))
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad cfg.v_threshold / cfg.v_reset (expected "
                         "finite, got %g / %g)", fn, (double)cfg->v_threshold, (double)cfg->v_reset);
    if (cfg->reset != SNN_RESET_HARD && cfg->reset != SNN_RESET_SOFT)
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad cfg.reset (expected SNN_RESET_HARD or "
                         "SNN_RESET_SOFT, got %d)", fn, (int)cfg->reset);
    if ((cfg->kind == SNN_NEURON_LIF || cfg->kind == SNN_NEURON_ALIF) &&
        (!(cfg->tau > 1.0f) || !isfinite(cfg->tau)))
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad cfg.tau (expected > 1, got %g)", fn,
                         (double)cfg->tau);
    if (cfg->kind == SNN_NEURON_ALIF) {
        if (!(cfg->tau_adapt > 0.0f) || !isfinite(cfg->tau_adapt))
            return snn_error(SNN_ERR_ARGUMENT, "%s: bad cfg.tau_adapt (expected > 0 time steps, "
                             "got %g)", fn, (double)cfg->tau_adapt);
        if (!(cfg->beta >= 0.0f) || !isfinite(cfg->beta))
            return snn_error(SNN_ERR_ARGUMENT, "%s: bad cfg.beta (expected >= 0, got %g)", fn,
                             (double)cfg->beta);
    }
    return SNN_OK;
}

snn_neuron_params snn_neuron_params_from(const snn_neuron_config *cfg)
{
    const bool soft = cfg->kind == SNN_NEURON_STBIF || cfg->reset == SNN_RESET_SOFT;
    snn_neuron_params p = {
        .kind = cfg->kind,
        .v_th = cfg->v_threshold,
        /* Soft reset takes V_reset as 0 in the decay term and in V[0] (SpikingJelly's
         * convention; docs/neurons.md section 1). */
        .v_reset = soft ? 0.0f : cfg->v_reset,
        .soft_reset = soft,
        .detach_reset = cfg->detach_reset,
        .surrogate = cfg->surrogate.kind,
        .alpha = cfg->surrogate.alpha,
        .tau = cfg->tau,
        .decay_input = cfg->decay_input,
    };
    if (cfg->kind == SNN_NEURON_ALIF) {
        p.rho = expf(-1.0f / cfg->tau_adapt);
        p.beta = cfg->beta;
    }
    if (cfg->kind == SNN_NEURON_STBIF || cfg->kind == SNN_NEURON_QCLIP) {
        int a_min, a_max;
        snn_stbif_bounds(cfg, &a_min, &a_max);
        p.theta = cfg->theta;
        p.alpha = cfg->surrogate.alpha / cfg->theta; /* slope measured in units of 1/theta */
        p.a_min = (float)a_min;
        p.a_max = (float)a_max;
    }
    return p;
}
