/*
 * nn_internal.h - the kind-specific state of nn's layers, shared inside nn/ (model builders and
 * the sparse pass look into it), and the ops tables that identify each kind.
 */
#ifndef SNN_NN_INTERNAL_H
#define SNN_NN_INTERNAL_H

#include "nn.h"

typedef struct snn_conv_impl {
    int in_channels, out_channels, kernel, stride, pad;
    bool bias;
} snn_conv_impl;

typedef struct snn_batchnorm_impl {
    float momentum, eps;
} snn_batchnorm_impl;

typedef struct snn_pool_impl {
    int kernel, stride;
} snn_pool_impl;

typedef struct snn_flatten_impl {
    int start, end;
} snn_flatten_impl;

typedef struct snn_dropout_impl {
    float p;
    uint64_t seed;            /* advanced on every training forward: a new mask each call (a
                                 model with config.dropout sets it first: model.c) */
    int shared_dims;          /* leading dims that share one mask (snn_dropout_shared) */
} snn_dropout_impl;

typedef struct snn_neuron_layer_impl {
    snn_neuron_config config;
    /* the last forward's output and activity (STEP tensors of that step) */
    snn_tensor *last_spikes, *last_activity;
    uint64_t last_step;       /* snn_step_id() of that forward; stale once the step closes */
    bool consume_input;       /* its input is dead after it: H may take the input's place */
    double spikes_sum;        /* running totals for the firing rate across steps */
    double elements_sum;
} snn_neuron_layer_impl;

/* Adds a trainable OWNED parameter of `shape` drawn from U(-bound, bound) (PyTorch's default
 * initialisation of conv and linear layers uses bound = 1 / sqrt(fan_in)). */
snn_status snn_module_add_uniform(snn_module *m, const char *name, snn_shape shape, float bound,
                                  snn_rng *rng);

extern const snn_module_ops snn_conv2d_ops;
extern const snn_module_ops snn_batchnorm2d_ops;

/* True when snn_conv_bn_forward runs the pair as one op: eval mode, conv a plain Conv2d (not
 * one the sparse pass swapped), bn a BatchNorm2d. */
bool snn_conv_bn_fuses(const snn_module *conv, const snn_module *bn);
/* bn(conv(x)) for a model's conv -> batch-norm pair (nn/layer_conv.c): where
 * snn_conv_bn_fuses, one snn_conv2d_batchnorm_eval (the same bits, one pass over the output
 * fewer on the GPU); otherwise the two modules' forwards. */
snn_tensor *snn_conv_bn_forward(snn_module *conv, snn_module *bn, snn_tensor *x);
/* True when snn_bn_neuron_forward runs the pair as one op (nn/layer_neuron.c): fusion on
 * (snn_model_set_fusion), bn a BatchNorm2d in training mode and not synced across ranks,
 * neuron a NeuronLayer of IF or LIF neurons. */
bool snn_bn_neuron_fuses(const snn_module *bn, const snn_module *neuron);
/* neuron(bn(x) + residual) (residual NULL: none) for a model's batch-norm -> neuron pair:
 * where snn_bn_neuron_fuses and x is (T, N, C, H, W), one snn_batchnorm_neuron (the same bits;
 * it keeps neither the batch-norm's output nor H), with the neuron layer's bookkeeping
 * (activity, last spikes); otherwise the modules' forwards and snn_add_into. */
snn_tensor *snn_bn_neuron_forward(snn_module *bn, snn_module *neuron, snn_tensor *x,
                                  snn_tensor *residual);
/* neuron(x + residual), the sum taking x's memory (snn_add_into); without a tape, for IF / LIF
 * layers with fusion on, one snn_neuron_multistep_residual that never writes the sum (the
 * layer's bookkeeping as its forward). */
snn_tensor *snn_neuron_residual_forward(snn_module *neuron, snn_tensor *x, snn_tensor *residual);
/* The model's promise that no forward op reads the spikes t again: snn_spikes_pack where t is
 * packable (spikes made with a tape while snn_spike_packing() is on); else nothing. SNN_OK, or
 * the pack's error (out of memory). */
snn_status snn_spikes_forward_done(snn_tensor *t);
/* The n modules of ch in order on x, each Conv2d -> BatchNorm2d pair by snn_conv_bn_forward
 * and each BatchNorm2d -> NeuronLayer pair by snn_bn_neuron_forward where they fuse. Spikes made
 * inside the run and then taken by a Conv2d, their only reader in a list, are done with after
 * it (snn_spikes_forward_done); x itself belongs to the caller. */
snn_tensor *snn_modules_forward(snn_module *const *ch, int n, snn_tensor *x);
extern const snn_module_ops snn_linear_ops;
extern const snn_module_ops snn_max_pool2d_ops;
extern const snn_module_ops snn_avg_pool2d_ops;
extern const snn_module_ops snn_adaptive_avg_pool_ops;
extern const snn_module_ops snn_flatten_ops;
extern const snn_module_ops snn_dropout_ops;
extern const snn_module_ops snn_sequential_ops;
extern const snn_module_ops snn_neuron_layer_ops;

/* The layers only a converted network has (nn/layer_ann2snn.c). The constructors take over the
 * OWNED tensors given (and free them on failure). */
extern const snn_module_ops snn_first_step_bias_ops;
extern const snn_module_ops snn_first_step_linear_ops;
extern const snn_module_ops snn_running_max_pool2d_ops;
snn_module *snn_first_step_bias_new(snn_tensor *bias);
snn_module *snn_first_step_linear_new(snn_tensor *weight, snn_tensor *bias);

#endif /* SNN_NN_INTERNAL_H */
