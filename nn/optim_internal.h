/*
 * optim_internal.h - what an optimizer holds (the struct behind snn_optimizer), shared by the two
 * files that look into it: nn/optim.c (making one and stepping it) and nn/optim_state.c (what a
 * checkpoint saves and restores of it).
 */
#ifndef SNN_NN_OPTIM_INTERNAL_H
#define SNN_NN_OPTIM_INTERNAL_H

#include "nn.h"
#include "kernels/kernels.h"

/* One trainable parameter and what the optimizer keeps for it. */
typedef struct snn_optim_slot {
    snn_named_param param;    /* the parameter tensor (not owned) and its name */
    snn_tensor *state[2];     /* OWNED, shaped as the parameter: momentum_buffer (SGD with
                               * momentum), or exp_avg and exp_avg_sq (Adam); NULL past n_states */
    int64_t steps;            /* updates this parameter has received */
} snn_optim_slot;

struct snn_optimizer {
    snn_optimizer_kind kind;
    snn_sgd_params sgd;       /* SGD's hyper-parameters, as its kernel takes them */
    snn_adam_params adam;     /* Adam's (the bias corrections go per tensor, in the step) */
    int n_states;             /* state tensors per parameter: 0 plain SGD, 1 momentum, 2 Adam */
    int64_t steps;            /* calls to snn_optimizer_step */
    int n;                    /* trainable parameters, in snn_module_parameters order */
    snn_optim_slot *slots;
};

#endif
