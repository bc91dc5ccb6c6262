/*
 * device.c - device names, synchronisation, the CPU thread count (how many threads a parallel
 * region uses of it: cpu_threads.c), and the GPU precision.
 */
#include <omp.h>
#include <string.h>

#include "error.h"
#include "kernels/kernels.h"

const char *snn_device_name(snn_device device)
{
    switch (device) {
    case SNN_CPU: return "cpu";
    case SNN_CUDA: return "cuda";
    }
    return "unknown";
}

snn_status snn_device_parse(const char *name, snn_device *out)
{
    if (name && strcmp(name, "cpu") == 0) { *out = SNN_CPU; return SNN_OK; }
    if (name && strcmp(name, "cuda") == 0) { *out = SNN_CUDA; return SNN_OK; }
    return snn_error(SNN_ERR_ARGUMENT, "bad device '%s' (expected cpu or cuda)", name ? name : "(null)");
}

void snn_synchronize(snn_device device)
{
    const snn_kernels *k = snn_kernels_for(device);
    if (k && k->synchronize) k->synchronize();
}

void snn_set_num_threads(int n) { omp_set_num_threads(n > 0 ? n : omp_get_num_procs()); }
int snn_get_num_threads(void) { return omp_get_max_threads(); }

const char *snn_precision_name(snn_precision p)
{
    switch (p) {
    case SNN_PRECISION_FP32: return "fp32";
    case SNN_PRECISION_TF32: return "tf32";
    case SNN_PRECISION_BF16: return "bf16";
    }
    return "unknown";
}

snn_status snn_precision_parse(const char *name, snn_precision *out)
{
    for (int p = SNN_PRECISION_FP32; p <= SNN_PRECISION_BF16; p++)
        if (name && strcmp(name, snn_precision_name((snn_precision)p)) == 0) {
            *out = (snn_precision)p;
            return SNN_OK;
        }
    return snn_error(SNN_ERR_ARGUMENT, "bad precision '%s' (expected fp32, tf32 or bf16)",
                     name ? name : "(null)");
}
