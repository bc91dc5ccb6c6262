/*
 * neuron_op.h - what the multi-step op (neuron_op.c) shares with the single-step op
 * (single_step.c): argument checks and the tape node with its BPTT backward (internal).
 */
#ifndef SNN_NEURON_OP_H
#define SNN_NEURON_OP_H

#include "autograd/autograd.h"
#include "kernels/neuron_kernels.h"

/* Checks cfg, that x is a tensor on a device with neuron kernels, and that w is PLIF's
 * 1-element parameter on x's device (or NULL for the other kinds). Returns the kernel table,
 * or NULL with a message naming fn. */
const snn_neuron_kernels *snn_neuron_check_args(const char *fn, snn_tensor *x,
                                                const snn_neuron_config *cfg, snn_tensor *w);

/* True when `state` holds one value per neuron of one time step of x (x's shape without T) on
 * x's device, and needs no gradient unless grad_ok; else false with a message naming fn and
 * arg (the carried state of carry.c and bn_neuron_carry.c). */
bool snn_neuron_state_fits(const char *fn, const char *arg, const snn_tensor *state,
                           const snn_tensor *x, bool grad_ok);

/* A (T, N, ...) tensor's shape as the kernels see it: T, N, C = dim 2 (1 for (T, N)), plane =
 * the product of the dims after C. x has at least 2 dims. */
snn_neuron_dims snn_neuron_dims_of(const snn_tensor *x);
/* The STEP tensor (T N, C) of spike counts per plane for dims d on `device`; NULL on error. */
snn_tensor *snn_neuron_activity_new(const char *fn, const snn_neuron_dims *d, snn_device device);

/* The output of a multi-step neuron of `kind`, (T, N, ...) `shape` on `device`: with a tape
 * (`record`) and 0 / 1 outputs, from the step pool and marked as spikes, so that the model may
 * keep it as bits once the forward is done with it (snn_spikes_pack); else a STEP tensor.
 * NULL on error. */
snn_tensor *snn_neuron_spikes_new(const char *fn, snn_shape shape, snn_device device,
                                  snn_neuron_kind kind, bool record);

/* The forward kernel of a kind (IF, LIF, PLIF, ST-BIF; ALIF's has its own signature). */
snn_neuron_forward_fn snn_neuron_forward_of(const snn_neuron_kernels *k, snn_neuron_kind kind);

/* What a neuron node outputs: the spikes, or (single-step API) the V or the A after the run. */
typedef enum snn_neuron_output {
    SNN_NEURON_OUT_SPIKES = 0,
    SNN_NEURON_OUT_V,
    SNN_NEURON_OUT_A, /* ALIF's adaptation */
} snn_neuron_output;

/* Records the node of one neuron run on the tape: inputs x, w, v_init and, for ALIF, a_init
 * (each may be NULL or not require grad); `out` is the output `which` names. h_seq, th_seq
 * (ALIF's thresholds, else NULL) and spike come from the forward; a_init is the A before the
 * run: ALIF's differentiable adaptation, or ST-BIF's spike count (not differentiable). NULL on
 * out-of-memory (message set). */
snn_node *snn_neuron_record(snn_tensor *out, snn_neuron_output which, snn_tensor *x,
                            snn_tensor *w, snn_tensor *v_init, snn_tensor *a_init,
                            snn_tensor *h_seq, snn_tensor *th_seq, snn_tensor *spike,
                            const snn_neuron_params *p, const snn_neuron_dims *d);

#endif /* SNN_NEURON_OP_H */
