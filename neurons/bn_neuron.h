/*
 * bn_neuron.h - what the fused batch-norm -> neuron op (bn_neuron.c) shares with its carrying
 * variants (bn_neuron_carry.c): the node's saved state, the forward both run, the argument
 * checks, the neuron part's backward and the set of carry calls waiting for their backward
 * (internal).
 */
#ifndef SNN_BN_NEURON_H
#define SNN_BN_NEURON_H

#include "kernels/kernels.h"
#include "neuron_op.h"

/* What a node of the ops saves for its backward. */
typedef struct snn_bn_neuron_saved {
    snn_neuron_params params;
    snn_neuron_dims dims;   /* T, N, C, plane = H W */
    double *stats;          /* (C, 3) merged (count, mean, M2) */
    float *mean, *invstd;   /* (C) what the batch-norm backward reads */
    float *v_state;         /* (M) the carry op's state: V_init, and V_last once backward ran;
                             * NULL for snn_batchnorm_neuron */
    bool x_repeated;        /* x is (N, C, H, W), every step's (snn_batchnorm_neuron_repeat) */
    /* snn_batchnorm_neuron_bn_residual: the residual's batch-norm, of input rx (node input 3;
     * its gamma and beta inputs 4 and 5); r_stats NULL for the other ops */
    double *r_stats;        /* (C, 3) merged (count, mean, M2) of rx */
    float *r_mean, *r_invstd;
} snn_bn_neuron_saved;

/* A carrying layer's state, as the fused forward takes it (snn_batchnorm_neuron_carry, _state). */
typedef struct snn_bn_state {
    snn_tensor *v_in;     /* (M) the state that enters */
    snn_tensor *v_last;   /* (M) where the state left goes: v_in itself (carry) or v_out (state) */
    bool differentiable;  /* v_in an input of the graph, v_last an output (the state op) */
} snn_bn_state;

/* The residual's batch-norm of snn_batchnorm_neuron_bn_residual: its input and its tensors */
typedef struct snn_bn_shortcut {
    snn_tensor *rx;
    const snn_batchnorm_args *bn;
} snn_bn_shortcut;

/* The fused forward of the three ops: statistics, then lif_bn_forward (from st's state into
 * st->v_last when st is not NULL, unless the carry op defers it to backward), then the tape:
 * one node, the state op's nodes (snn_bn_neuron_record_state_op) for a differentiable state.
 * x (T, N, C, H, W), or (N, C, H, W) read at each of `repeat` steps (the repeated stem); rb:
 * a residual made by a batch-norm (snn_batchnorm_neuron_bn_residual), else NULL. */
snn_tensor *snn_bn_neuron_fused_forward(const char *fn, snn_tensor *x,
                                        snn_tensor *const params[4], float momentum, float eps,
                                        snn_tensor *residual, const snn_neuron_config *cfg,
                                        const snn_bn_state *st, int repeat,
                                        const snn_bn_shortcut *rb, snn_tensor **activity);

/* The arguments the ops refuse (params: gamma, beta, running mean, running var), the message
 * naming fn and the argument at fault; repeated: x is (N, C, H, W). */
snn_status snn_bn_neuron_check_args(const char *fn, snn_tensor *x, snn_tensor *const params[4],
                                    float momentum, float eps, snn_tensor *residual,
                                    const snn_neuron_config *cfg, bool repeated);

/* Without the fused kernel: the neurons' input as the separate ops make it, batch-norm then
 * the residual add in place. */
snn_tensor *snn_bn_neuron_separate_input(snn_tensor *x, snn_tensor *const params[4],
                                         float momentum, float eps, snn_tensor *residual);

/* Whether the neuron part's backward runs as the device's one-pass kernel (lif_bn_backward:
 * H in registers, every dL/dS of an element loaded before its dL/dX is stored, so dX may be
 * dS) rather than recomputing H into scratch */
static inline bool snn_bn_neuron_one_pass(const snn_neuron_kernels *nk, const snn_neuron_dims *d)
{
    return nk && nk->lif_bn_backward && d->T <= SNN_NEURON_BN_BACKWARD_MAX_T;
}

/* Whether the op's backward has the one-pass kernel make the batch-norm's sums on its way
 * (snn_neuron_bn_input.dy_sums) and the batch-norm's backward take them
 * (batchnorm_backward_in_place_sums), saving that backward's pass over dL/dX and x: in TF32
 * and BF16 training, whose sums may differ from batch-norm's own pass in their last bits
 * (fp32 keeps that pass and its bits). The memory walk asks the same (nn/memory_layers.c: the
 * sums, 24 B a channel, in the step's scratch). */
static inline bool snn_bn_neuron_folds_sums(const snn_kernels *k, const snn_neuron_kernels *nk,
                                            const snn_neuron_dims *d)
{
    return snn_get_precision() != SNN_PRECISION_FP32 && k && k->batchnorm_backward_in_place &&
           k->batchnorm_backward_in_place_sums && snn_bn_neuron_one_pass(nk, d);
}

/* The neuron part's backward (bn_neuron.c says what it writes; dX may be dspike where
 * snn_bn_neuron_one_pass); false when it could not run (reported to snn_backward). */
bool snn_bn_neuron_part_backward(const char *fn, const snn_neuron_params *p,
                                 const snn_neuron_dims *d, const snn_neuron_bn_input *in,
                                 float *dX, float *dresidual, const float *dspike,
                                 const snn_tensor *spikes);

/* What a backward reads of x and the residual into in (bn_neuron.c); false when memory ran
 * out (reported). */
bool snn_bn_neuron_read_saved_inputs(const char *fn, const snn_tensor *x,
                                     const snn_tensor *residual, snn_neuron_bn_input *in);

/* The state op's nodes (bn_neuron_carry.c) for a forward with a differentiable state st. */
bool snn_bn_neuron_record_state_op(const char *fn, snn_tensor *x, snn_tensor *gamma,
                                   snn_tensor *beta, snn_tensor *residual, snn_tensor *spike,
                                   const snn_bn_state *st, const snn_bn_neuron_saved *bn);

/* The carry calls whose backward has not run yet, by their state's data (bn_neuron_carry.c):
 * find returns its index or -1; add asserts room (ask full first). */
#define SNN_BN_CARRY_PENDING_MAX 1024
int snn_bn_carry_pending_find(const float *state);
void snn_bn_carry_pending_remove(int i);
bool snn_bn_carry_pending_full(void);
void snn_bn_carry_pending_add(const float *state);

#endif /* SNN_BN_NEURON_H */
