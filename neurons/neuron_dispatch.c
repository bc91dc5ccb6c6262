/*
 * neuron_dispatch.c - picks the neuron kernel table of a device (kernels/neuron_kernels.h): on
 * the CPU the fast table or the reference one, as the kernel set says (snn_set_kernels), on CUDA
 * the CUDA table. The one place in neurons/ that knows whether this build has CUDA (as
 * tensor/dispatch.c is in tensor/: docs/architecture.md, "Kernels and devices").
 */
#include "kernels/neuron_kernels.h"
#include "tensor/error.h"

const snn_neuron_kernels *snn_neuron_kernels_for(snn_device device)
{
    switch (device) {
    case SNN_CPU:
        return snn_get_kernels() == SNN_KERNELS_REF ? &snn_neuron_kernels_ref
                                                    : &snn_neuron_kernels_cpu;
    case SNN_CUDA:
#ifdef SNN_WITH_CUDA
        if (snn_cuda_available()) return &snn_neuron_kernels_cuda;
#endif
        return NULL;
    }
    return NULL;
}

const snn_neuron_kernels *snn_neuron_kernels_or_error(const char *fn, snn_device device)
{
    const snn_neuron_kernels *k = snn_neuron_kernels_for(device);
    if (k) return k;
    if (device == SNN_CUDA && snn_cuda_compiled() && !snn_cuda_available())
        return snn_error_null(SNN_ERR_UNSUPPORTED, "%s: no CUDA device is visible; hint: run on "
                              "a machine with an NVIDIA GPU or use --device cpu", fn);
    return snn_error_null(SNN_ERR_UNSUPPORTED, "%s: no %s neuron kernels in this build; hint: "
                          "move the tensors to the cpu with snn_to_device", fn,
                          snn_device_name(device));
}
