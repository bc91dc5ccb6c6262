/*
 * names.c - the names of the neuron kinds and the surrogate functions, as programs, checkpoints
 * and NIR files write them ("lif", "atan"), and their parsing.
 */
#include <string.h>

#include "neurons.h"
#include "tensor/error.h"

static const char *const kind_names[SNN_NEURON_COUNT] = {"if", "lif", "plif", "stbif", "relu",
                                                         "qclip", "alif"};

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
                     "plif, alif, stbif, relu or qclip)", name ? name : "(null)");
}

static const char *const surrogate_names[SNN_SURROGATE_COUNT] = {
    [SNN_SURROGATE_SIGMOID] = "sigmoid",
    [SNN_SURROGATE_ATAN] = "atan",
    [SNN_SURROGATE_PIECEWISE_QUADRATIC] = "piecewise_quadratic",
};

const char *snn_surrogate_name(snn_surrogate_kind kind)
{
    return (unsigned)kind < SNN_SURROGATE_COUNT ? surrogate_names[kind] : "unknown";
}

snn_status snn_surrogate_parse(const char *name, snn_surrogate *out)
{
    if (name) {
        for (int k = 0; k < SNN_SURROGATE_COUNT; k++) {
            if (strcmp(name, snn_surrogate_name((snn_surrogate_kind)k)) == 0) {
                *out = snn_surrogate_default((snn_surrogate_kind)k);
                return SNN_OK;
            }
        }
        if (strcmp(name, "pwq") == 0) {
            *out = snn_surrogate_default(SNN_SURROGATE_PIECEWISE_QUADRATIC);
            return SNN_OK;
        }
    }
    return snn_error(SNN_ERR_ARGUMENT, "snn_surrogate_parse: bad surrogate '%s' (expected "
                     "sigmoid, atan or piecewise_quadratic)", name ? name : "(null)");
}
