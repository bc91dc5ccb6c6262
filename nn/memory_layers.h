/*
 * memory_layers.h - the memory estimate's layers (internal): each function walks one layer of a
 * model with shapes only, telling nn/memory_walk.c's accounting what its ops allocate, and
 * returns the id of the tensor it makes (memory_walk.h: tensor i is tape node i's output; -1
 * gets no gradient). nn/model_memory.c walks the models with them.
 */
#ifndef SNN_MEMORY_LAYERS_H
#define SNN_MEMORY_LAYERS_H

#include "memory_walk.h"
#include "nn/models.h" /* snn_model_config */

/* conv k x k, no bias, on `images` images of (cin, *h, *wd) (tensor `in`); updates *h, *wd to
 * the output. Its workspace (from the device's table), and whether its backward writes dx over
 * dy (conv2d_dx_over_dout). */
int snn_walk_conv(snn_walk *w, int in, double images, int cin, int cout, int k, int stride,
                  int pad, int *h, int *wd);
/* A batch-norm over `numel` elements of `channels` channels (a FirstStepBias in a converted
 * network; nothing of its own in evaluation where the conv before it fuses it). */
int snn_walk_batchnorm(snn_walk *w, int in, double numel, int channels);
/* A multi-step neuron layer over (T, N, C, ...) with `planes` = T N. */
int snn_walk_neuron(snn_walk *w, int in, const snn_neuron_config *n, double numel,
                    double planes, int channels);
/* Whether a training-mode batch-norm -> neuron pair runs as one op (the rules bn -> neuron and
 * bn -> + -> neuron, nn/fusion_rules.c). */
bool snn_walk_fuses(const snn_walk *w, const snn_neuron_config *n);
/* snn_batchnorm_neuron on `in` (residual: the id of the tensor added before the neuron, or -1
 * for none; residual_bn: that residual a batch-norm's output, made inside the op) over
 * (T, N, channels, ...) with `planes` = T N; `in_numel`, in's elements: numel, or numel / T for
 * the repeated stem (snn_batchnorm_neuron_repeat, whose x is one step). */
int snn_walk_bn_neuron(snn_walk *w, int in, int residual, bool residual_bn,
                       const snn_neuron_config *n, double numel, double in_numel, double planes,
                       int channels);
/* A batch-norm, then a neuron layer: one op where they fuse. */
int snn_walk_bn_then_neuron(snn_walk *w, int in, const snn_neuron_config *n, double numel,
                            double planes, int channels);
/* A max-pool to `out_numel` outputs, with its argmax. */
int snn_walk_max_pool(snn_walk *w, int in, double out_numel);
/* A linear layer with a bias on `rows` rows. */
int snn_walk_linear(snn_walk *w, int in, double rows, double in_features, int out_features);
/* Dropout shared over T (snn_dropout_shared) on (T, N, F) `in`, F = `per_sample`: in training
 * its mask and its product; in evaluation nothing (the op returns its input). */
int snn_walk_dropout(snn_walk *w, int in, double T, double N, double per_sample);
/* The classifier both CNNs end with (model_cnn.c's add_classifier): flatten, [dropout], fc1,
 * neuron, [dropout], fc2, [neuron]. `x` is the last pool's output, `flat` its features per
 * sample. Returns the last layer's id. */
int snn_walk_classifier(snn_walk *w, int x, const snn_model_config *c, double T, double N,
                        double flat);
/* A recurrent layer (snn_recurrent_multistep, nn/layer_recurrent.c) of F neurons of kind n
 * over (T, N, F) input `in`: its w_rec (F, F), its spikes, spike counts, what it saves for
 * backward (H, and ALIF's threshold), its forward and backward scratch (neurons/recurrent.c
 * lists them). Returns the spikes' id. For a model file's walk (an rsnn's layers). */
int snn_walk_recurrent(snn_walk *w, int in, const snn_neuron_config *n, double T, double N,
                       double F);

#endif /* SNN_MEMORY_LAYERS_H */
