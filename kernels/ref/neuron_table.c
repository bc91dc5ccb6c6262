/*
 * neuron_table.c - the reference neuron kernel table: plain time loops over the equations of
 * kernels/neuron_math.h, one element after another, no threads, no chunks, no specialisation.
 * Every other neuron table is tested against it. In reading order:
 *
 *   lif.c           IF, LIF and ParametricLIF through time, and their BPTT: how a layer trains
 *   alif.c          adaptive LIF: a threshold that each spike raises (LSNN)
 *   heaviside.c     the spike function with a surrogate gradient, as a primitive op
 *   stbif.c         ST-BIF, the neuron an ANN's quantizer becomes in ANN -> SNN conversion
 *   qclip.c         that quantizer, with its learned step
 *   running_pool.c  the max-pool of converted SNNs
 *   plane_norm.c    the norm of each spike plane, for the activity penalty
 *
 * The fused batch-norm -> neuron kernels (lif_bn_forward, lif_bn_backward) are an optimisation
 * of the fast tables and have no reference: without them snn_batchnorm_neuron runs the
 * separate ops (batch-norm, add, neuron), which compute the same function.
 */
#include "neuron_ref.h"

const snn_neuron_kernels snn_neuron_kernels_ref = {
    .name = "ref",
    .lif_forward = snn_lif_forward_ref,
    .lif_backward = snn_lif_backward_ref,
    .lif_bn_forward = NULL,  /* fused ops only: neurons/bn_neuron.c runs the separate ops */
    .lif_bn_backward = NULL,
    .alif_forward = snn_alif_forward_ref,
    .alif_backward = snn_alif_backward_ref,
    .stbif_forward = snn_stbif_forward_ref,
    .stbif_backward = snn_stbif_backward_ref,
    .heaviside_forward = snn_heaviside_forward_ref,
    .heaviside_backward = snn_heaviside_backward_ref,
    .plane_norm_forward = snn_plane_norm_forward_ref,
    .plane_norm_backward = snn_plane_norm_backward_ref,
    .qclip_forward = snn_qclip_forward_ref,
    .qclip_backward = snn_qclip_backward_ref,
    .running_max_pool_forward = snn_running_max_pool_forward_ref,
    .running_max_pool_backward = snn_running_max_pool_backward_ref,
};
