/*
 * activity.c - a neuron layer's activity read as a firing rate (snn_activity_rate): the
 * kernels count the spikes of each (t, n, c) plane as they make them (kernels/neuron_dims.h),
 * so a rate costs one pass over those counts on the host, not one over the spikes.
 */
#include <math.h>

#include "neurons.h"
#include "tensor/error.h"

float snn_activity_rate(const snn_tensor *activity, int64_t input_numel)
{
    const char *fn = "snn_activity_rate";
    if (snn_check_tensor(fn, "activity", activity)) return NAN;
    if (input_numel <= 0) {
        snn_error(SNN_ERR_ARGUMENT, "%s: bad argument 'input_numel' (expected > 0, got %lld)", fn,
                  (long long)input_numel);
        return NAN;
    }
    size_t bytes = (size_t)activity->numel * sizeof(float);
    float *host = snn_alloc(bytes ? bytes : 1, SNN_CPU);
    if (!host) {
        snn_error(SNN_ERR_MEMORY, "%s: out of host memory for %zu bytes", fn, bytes);
        return NAN;
    }
    float rate = NAN;
    if (snn_tensor_copy_to_host(activity, host) == SNN_OK) {
        double total = 0.0;
        for (int64_t i = 0; i < activity->numel; i++) total += (double)host[i];
        rate = (float)(total / (double)input_numel);
    }
    snn_free(host, bytes ? bytes : 1, SNN_CPU);
    return rate;
}
