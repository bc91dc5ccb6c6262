/*
 * train_online.h - one training step through time, online (SLTT: Meng et al., ICCV 2023):
 * the model runs one time step per forward, its neurons carrying their state, and each step's
 * loss is backpropagated at once, so what a step holds does not grow with T
 * (docs/temporal.md). snn-train's --train-mode sltt and ottt, and bench_train_step's, run it.
 */
#ifndef SNN_APP_TRAIN_ONLINE_H
#define SNN_APP_TRAIN_ONLINE_H

#include "snn.h"

typedef struct train_online_options {
    int backward_steps;      /* SLTT-K: how many of the T steps run backward (drawn at random
                                each batch); 0 or >= T: all of them */
    float label_smoothing;   /* of each step's cross-entropy */
    uint64_t seed;           /* the draw of SLTT-K's steps: hashed with the optimizer's step */
    bool traces;             /* OTTT (Xiao et al., NeurIPS 2022): each conv and linear layer's
                                weight gradient taken against a trace of its inputs,
                                a = lambda a + x with the neurons' decay lambda, instead of
                                this step's input (nn/synapse_trace.c); false: SLTT */
} train_online_options;

/* The checks that need only the options and the model: names what online training cannot run
 * yet (event inputs, a model without neuron layers). SNN_OK or SNN_ERR_ARGUMENT with a message
 * naming `prog` and `mode` ("sltt", "ottt": --train-mode's value). */
snn_status train_online_check(const char *prog, const char *mode, snn_module *model);

/* One SLTT step on images x (N, C, H, W) with labels y (N), inside the caller's step
 * (snn_step_begin; x and y belong to it): zero_grad, then for t = 0 .. T-1, each in a step of
 * its own, the model's forward at T = 1 from its neurons' carried state, the loss
 * CE(o[t], y) / T, and its backward (or, for the steps SLTT-K leaves out, the forward alone
 * without a tape). Parameter gradients add up over t; the caller then steps the optimizer.
 * *logits gets the mean over t of o[t] (N, classes) and *loss the mean over t of the losses:
 * STEP tensors of the caller's step, read as BPTT's are. The model's T and its neuron layers'
 * state are put back as they were. SNN_OK, or the failing op's status. */
snn_status train_online_step(snn_module *model, snn_tensor *x, snn_tensor *y, int64_t step,
                             const train_online_options *o, snn_tensor **logits,
                             snn_tensor **loss);

#endif /* SNN_APP_TRAIN_ONLINE_H */
