/*
 * config.c - neuron configurations: SpikingJelly's defaults, validation with messages that
 * name the bad field, names, and the flattening into the kernels' params struct.
 */
#include <math.h>
#include <string.h>

#include "kernels/neuron_kernels.h"
#include "tensor/error.h"

snn_neuron_config snn_neuron_config_default(snn_neuron_kind kind)
{
    snn_neuron_config c;
    memset(&c, 0, sizeof c);
    c.kind = kind;
    c.v_threshold = 1.0f;
    c.v_reset = 0.0f;
    c.reset = SNN_RESET_HARD;
    c.detach_reset = false;
    c.surrogate = snn_surrogate_default(SNN_SURROGATE_SIGMOID);
    c.tau = 2.0f;
    c.decay_input = true;
    c.theta = 1.0f;
    c.levels = 8;
    c.symmetric = false;
    if (kind == SNN_NEURON_STBIF) c.reset = SNN_RESET_SOFT; /* subtract theta, always */
    return c;
}

static const char *const kind_names[SNN_NEURON_COUNT] = {"if", "lif", "plif", "stbif", "relu",
                                                         "qclip"};

const char *snn_neuron_kind_name(snn_neuron_kind kind)
{
    return (unsigned)kind < SNN_NEURON_COUNT ? kind_names[kind] : "unknown";
}

snn_status snn_neuron_kind_parse(const char *name, snn_neuron_kind *out)
{
    for (int k = 0; name && k < SNN_NEURON_COUNT; k++) {
        if (strcmp(name, kind_names[k]) == 0) {
            *out = (snn_neuron_kind)k;
            return SNN_OK;
        }
    }
    return snn_error(SNN_ERR_ARGUMENT, "snn_neuron_kind_parse: bad neuron '%s' (expected if, lif, "
                     "plif, stbif, relu or qclip)", name ? name : "(null)");
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
    return kind == SNN_NEURON_IF || kind == SNN_NEURON_LIF || kind == SNN_NEURON_PLIF;
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
                         "_STBIF, _RELU or _QCLIP, got %d)", fn, (int)cfg->kind);
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
    if (cfg->kind == SNN_NEURON_LIF && (!(cfg->tau > 1.0f) || !isfinite(cfg->tau)))
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad cfg.tau (expected > 1, got %g)", fn,
                         (double)cfg->tau);
    return SNN_OK;
}

snn_neuron_params snn_neuron_params_from(const snn_neuron_config *cfg)
{
    snn_neuron_params p;
    memset(&p, 0, sizeof p);
    p.kind = cfg->kind;
    p.v_th = cfg->v_threshold;
    p.soft_reset = cfg->kind == SNN_NEURON_STBIF || cfg->reset == SNN_RESET_SOFT;
    /* Soft reset takes V_reset as 0 in the decay term and in V[0] (SpikingJelly's convention;
     * docs/neurons.md section 1). */
    p.v_reset = p.soft_reset ? 0.0f : cfg->v_reset;
    p.detach_reset = cfg->detach_reset;
    p.surrogate = cfg->surrogate.kind;
    p.alpha = cfg->surrogate.alpha;
    p.tau = cfg->tau;
    p.decay_input = cfg->decay_input;
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
