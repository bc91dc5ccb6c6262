/*
 * neuron_table.c - the reference neuron kernel table: plain time loops over the equations of
 * kernels/neuron_math.h. Every other neuron table is tested against it.
 */
#include "kernels/neuron_kernels.h"

const snn_neuron_kernels snn_neuron_kernels_ref = {
    .name = "ref",
};
