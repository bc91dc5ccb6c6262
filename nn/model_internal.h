/*
 * model_internal.h - what the model builders share inside nn/ (not public).
 */
#ifndef SNN_MODEL_INTERNAL_H
#define SNN_MODEL_INTERNAL_H

#include "nn.h"
#include "nn_internal.h"
#include "tensor/kernels.h"

/* The model's configuration lives in its impl, so forward and the checkpoint can read it. */
typedef struct snn_model_impl {
    snn_model_config config;
    uint64_t encode_seed; /* Poisson encoding: advanced each forward */
} snn_model_impl;

extern const snn_module_ops snn_resnet_model_ops;

snn_module *snn_spiking_cnn_new(const snn_model_config *c, snn_rng *rng);
snn_module *snn_resnet18_new(const snn_model_config *c, snn_rng *rng);

/* Poisson-encode an (N, C, H, W) image batch in [0, 1] into (T, N, C, H, W) spikes. */
snn_tensor *snn_model_encode(const snn_model_config *c, snn_tensor *x, uint64_t *seed);
/* (T, N, K) -> (N, K), the mean over time. */
snn_tensor *snn_model_readout(snn_tensor *y);
/* A model's forward after its input check: encoding, the stem (children 0 and 1: conv and
 * batch-norm), the remaining children in order, the readout (the mean over T; the sum for
 * SNN_ENCODING_FIRST_STEP, a converted network's). */
snn_tensor *snn_model_run(snn_module *m, snn_tensor *x);
/* free_impl of every model: frees its snn_model_impl. */
void snn_model_free_impl(snn_module *m);

#endif /* SNN_MODEL_INTERNAL_H */
