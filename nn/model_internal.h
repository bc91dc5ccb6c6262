/*
 * model_internal.h - what the model builders share inside nn/ (not public).
 */
#ifndef SNN_MODEL_INTERNAL_H
#define SNN_MODEL_INTERNAL_H

#include "nn.h"
#include "nn_internal.h"
#include "kernels/kernels.h"

/* The model's configuration lives in its impl, so forward and the checkpoint can read it. */
typedef struct snn_model_impl {
    snn_model_config config;
    uint64_t encode_seed; /* Poisson encoding: advanced each forward */
    snn_plan plan;        /* its execution plan: every module of the tree points here */
} snn_model_impl;

/* What snn.c knows of a kind of model before building one (model_kinds.c). */
typedef struct snn_model_kind_info {
    const char *name;  /* what programs and checkpoints call it: "cnn", "resnet18", ... */
    bool resnet;       /* a ResNet (else one of the CNNs: the spiking CNN, the DVS net) */
    snn_module *(*build)(const snn_model_config *c, snn_rng *rng); /* config checked */
    double (*param_floats)(const snn_model_config *c);              /* as snn_model_param_floats */
} snn_model_kind_info;
extern const snn_model_kind_info snn_model_kinds[SNN_MODEL_KIND_COUNT]; /* by snn_model_kind */

/* SNN_OK when a configuration can be built, else SNN_ERR_ARGUMENT naming the field. */
snn_status snn_model_config_check(const snn_model_config *c);

/* The module of a model of kind `ops` (its builder adds the layers), holding a copy of the
 * configuration in its snn_model_impl (freed by snn_model_free_impl). */
snn_module *snn_model_module_new(const snn_module_ops *ops, const snn_model_config *config);

extern const snn_module_ops snn_cnn_model_ops;    /* model_cnn.c */
extern const snn_module_ops snn_dvs_model_ops;    /* model_dvs.c */
extern const snn_module_ops snn_resnet_model_ops; /* model_resnet.c */
extern const snn_module_ops snn_rsnn_model_ops;   /* model_rsnn.c */

snn_module *snn_spiking_cnn_new(const snn_model_config *c, snn_rng *rng);
/* ResNet-18, -34, -50 and the SEW variants (model_resnet.c). */
snn_module *snn_resnet_new(const snn_model_config *c, snn_rng *rng);
snn_module *snn_dvs_net_new(const snn_model_config *c, snn_rng *rng);
/* The recurrent SNN (model_rsnn.c): its builder, its configuration's own checks (layers, T of
 * the rows / pixels encodings, its neurons; and, for every other model, that they take no
 * rows or pixels encoding), its per-step outputs (snn_model_forward_steps: the readout's
 * U[t]) and its memory estimate's walk (nn/model_memory.c; the id of its currents). */
snn_module *snn_rsnn_new(const snn_model_config *c, snn_rng *rng);
snn_status snn_rsnn_config_check(const snn_model_config *c);
/* The rsnn's leaky-integrator readout: its tau when m is one, else 0 (nir/nir_export.c). */
float snn_leaky_readout_tau(const snn_module *m);
snn_tensor *snn_rsnn_forward_steps(snn_module *m, snn_tensor *x);
struct snn_walk;
int snn_rsnn_memory_walk(struct snn_walk *w, const snn_model_config *c, double T, double N);
/* The classifier both CNNs end with (model_cnn.c): flatten -> [dropout1] -> fc1 (flat ->
 * hidden) -> neuron `hidden_neuron` -> [dropout2] -> fc2 (hidden -> classes) [-> neuron
 * `readout_neuron` with spiking_readout], appended to m. */
snn_status snn_model_add_classifier(snn_module *m, const snn_model_config *c, int flat,
                                    const char *hidden_neuron, const char *readout_neuron,
                                    snn_rng *rng);
/* The forward of the CNNs: the input check, then snn_model_run. */
snn_tensor *snn_cnn_forward(snn_module *m, snn_tensor *x);
/* SNN_OK when x fits the model: (N, C, H, W), or (T, N, C, H, W) with the model's T for event
 * frames; any_size skips the H, W check (ResNets take any size >= 8). */
snn_status snn_model_check_input(const char *model, const snn_model_config *c, snn_tensor *x,
                                 bool any_size);

/* The floats of the parameters and buffers the model of a configuration holds, computed from
 * the configuration without building it (in double: no overflow for any int sizes), so that a
 * checkpoint whose metadata describe a model larger than the file is refused before anything is
 * allocated. A lower bound: the 1-float parameters of ParametricLIF and QCLIP layers are left
 * out.
 * snn_model_param_floats checks the configuration first (-1 with the error set when it is
 * bad); the per-builder counts sit next to their builders and follow them (test_checkpoint_hostile
 * compares them with built models). */
double snn_model_param_floats(const snn_model_config *config);
double snn_spiking_cnn_param_floats(const snn_model_config *c);
double snn_resnet_param_floats(const snn_model_config *c);
double snn_dvs_net_param_floats(const snn_model_config *c);
double snn_rsnn_param_floats(const snn_model_config *c);
/* The flattened features (width_base x the frame after the pools) that fc1 of the spiking CNN
 * or the DVS net takes, in double (model.c bounds it before a builder's int arithmetic). */
double snn_cnn_flat_features(const snn_model_config *c);
double snn_dvs_net_flat_features(const snn_model_config *c); /* the DVS net's (model_dvs.c) */

/* Before a training forward of a model with config.dropout > 0: advances the model's random
 * stream once and gives each of its Dropout children (in order) its seed for this forward
 * (model.c says how); nothing in eval or without dropout. */
void snn_model_seed_dropout(snn_module *m);
/* A model's forward after its input check, up to the readout: the dropout layers' seeds (in
 * training), encoding, the stem (children 0 and 1: conv and batch-norm), the remaining children
 * in order. The per-step outputs (T, N, K). */
snn_tensor *snn_model_steps(snn_module *m, snn_tensor *x);
/* snn_model_steps followed by the readout: the mean over T (the sum for
 * SNN_ENCODING_FIRST_STEP, a converted network's). (N, K) */
snn_tensor *snn_model_run(snn_module *m, snn_tensor *x);
/* free_impl of every model: frees its snn_model_impl. */
void snn_model_free_impl(snn_module *m);

#endif /* SNN_MODEL_INTERNAL_H */
