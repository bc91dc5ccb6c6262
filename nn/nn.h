/*
 * nn.h - modules (layers and models), optimizers, learning-rate schedules and checkpoints.
 *
 * A module owns its parameters (OWNED tensors) and its children, and maps a STEP tensor to a
 * STEP tensor. Parameters carry dotted names like PyTorch's state_dict keys
 * ("layer1.0.conv1.weight"), which is also how checkpoints name them, so a snn.c checkpoint
 * opens in PyTorch with safetensors.load_file().
 *
 *     snn_rng rng; snn_rng_seed(&rng, 0);
 *     snn_model_config cfg = snn_model_config_default(SNN_MODEL_SPIKING_CNN);
 *     snn_module *net = snn_model_new(&cfg, &rng);
 *     snn_optimizer *opt = snn_adam_new(net, 1e-3f, 0.0f, false);
 *     for (...) {
 *         snn_step_begin();
 *         snn_module_zero_grad(net);
 *         snn_tensor *logits = snn_module_forward(net, images);   // (N, classes)
 *         snn_tensor *loss = snn_cross_entropy(logits, labels);
 *         snn_backward(loss);
 *         snn_optimizer_step(opt);
 *         snn_step_end();
 *     }
 *     snn_optimizer_free(opt);
 *     snn_module_free(net);
 *
 * Dimension glossary: T time steps, N batch, C channels, H, W spatial, F features.
 */
#ifndef SNN_NN_H
#define SNN_NN_H

#include <stdbool.h>
#include <stdint.h>

#include "autograd/autograd.h"
#include "neurons/neurons.h"
#include "tensor/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------------
 * Modules
 * ------------------------------------------------------------------------------------------- */

typedef struct snn_module snn_module;

/* What distinguishes one kind of module from another. */
typedef struct snn_module_ops {
    const char *kind;                                          /* "Conv2d", "Sequential", ... */
    snn_tensor *(*forward)(snn_module *m, snn_tensor *x);
    void (*free_impl)(snn_module *m);                          /* frees m->impl; may be NULL */
    void (*reset_state)(snn_module *m);                        /* stateful modules; may be NULL */
} snn_module_ops;

/* A tensor a module owns. Trainable parameters get gradients and optimizer updates; buffers
 * (batch-norm running statistics) are saved in checkpoints but not trained. */
typedef struct snn_param {
    char name[32];            /* local name: "weight", "running_mean" */
    snn_tensor *tensor;       /* OWNED */
    bool trainable;
} snn_param;

#define SNN_MODULE_MAX_PARAMS 6

struct snn_module {
    const snn_module_ops *ops;
    char name[32];                            /* name within its parent: "conv1", "0" */
    bool training;
    snn_param params[SNN_MODULE_MAX_PARAMS];
    int n_params;
    snn_module **children;                    /* owned */
    int n_children, cap_children;
    void *impl;                               /* kind-specific state, owned */
};

/* Runs the module; NULL with snn_last_error() set on failure. */
snn_tensor *snn_module_forward(snn_module *m, snn_tensor *x);
/* Frees the module, its parameters and its children. NULL is a no-op. */
void snn_module_free(snn_module *m);
/* Training or evaluation mode, recursively (batch-norm statistics, dropout). */
void snn_module_train(snn_module *m, bool training);
/* Zeroes every trainable parameter's gradient. */
void snn_module_zero_grad(snn_module *m);
/* Resets the state of every stateful module (single-step neurons); multi-step layers need none. */
void snn_module_reset_state(snn_module *m);
/* Moves every parameter and buffer to `device` (gradients are dropped). */
snn_status snn_module_to(snn_module *m, snn_device device);
/* Appends a child (owned from now on) under `name`. */
snn_status snn_module_add(snn_module *parent, const char *name, snn_module *child);
/* The child called `name`, or NULL. */
snn_module *snn_module_child(snn_module *m, const char *name);
/* Creates a module of the given kind with `impl` (owned); used by the layer constructors. */
snn_module *snn_module_new(const snn_module_ops *ops, void *impl);
/* Adds an OWNED tensor to m's parameters under `name`. */
snn_status snn_module_add_param(snn_module *m, const char *name, snn_tensor *t, bool trainable);

/* Every parameter and buffer of a module tree with its full dotted name, depth first in the
 * order the children were added (a stable order: checkpoints and optimizers rely on it). */
typedef struct snn_named_param {
    char name[128];           /* "layer1.0.conv1.weight" */
    snn_tensor *tensor;
    bool trainable;
} snn_named_param;

typedef struct snn_param_list {
    snn_named_param *items;
    int count;
} snn_param_list;

snn_status snn_module_parameters(snn_module *m, snn_param_list *out);
void snn_param_list_free(snn_param_list *list);
/* Number of trainable scalars. */
int64_t snn_module_num_parameters(snn_module *m);
/* Prints the module tree with shapes and parameter counts. */
void snn_module_print(snn_module *m, FILE *out);

/* ---------------------------------------------------------------------------------------------
 * Layers. Image layers accept (N, C, H, W) or (T, N, C, H, W). Weights are initialised as
 * PyTorch does by default (Kaiming-uniform with a = sqrt(5): U(-1/sqrt(fan_in), 1/sqrt(fan_in))).
 * ------------------------------------------------------------------------------------------- */

snn_module *snn_conv2d_new(int in_channels, int out_channels, int kernel, int stride, int pad,
                           bool bias, snn_rng *rng);
snn_module *snn_batchnorm2d_new(int channels);              /* momentum 0.1, eps 1e-5 */
snn_module *snn_linear_new(int in_features, int out_features, bool bias, snn_rng *rng);
snn_module *snn_max_pool2d_new(int kernel, int stride);
snn_module *snn_avg_pool2d_new(int kernel, int stride);
snn_module *snn_adaptive_avg_pool_new(void);                /* (.., C, H, W) -> (.., C, 1, 1) */
snn_module *snn_flatten_new(int start, int end);
snn_module *snn_dropout_new(float p, uint64_t seed);
snn_module *snn_sequential_new(void);
/* A neuron layer over (T, N, ...): multi-step, with the given configuration. */
snn_module *snn_neuron_layer_new(const snn_neuron_config *config);
/* The firing rate (spikes per element) of the neuron layer's last forward, if that forward's
 * step is still open; -1 otherwise. Reads the device. */
float snn_neuron_layer_firing_rate(snn_module *m);
/* The spikes (T, N, ...) of the neuron layer's last forward, or NULL once its step closed. */
snn_tensor *snn_neuron_layer_last_spikes(snn_module *m);

/* ---------------------------------------------------------------------------------------------
 * Models
 * ------------------------------------------------------------------------------------------- */

typedef enum snn_model_kind {
    SNN_MODEL_SPIKING_CNN,    /* 28x28: conv-BN-neuron-maxpool x2, fc-neuron, fc */
    SNN_MODEL_RESNET18,       /* spiking ResNet-18, CIFAR stem (3x3 conv, no max-pool) */
    SNN_MODEL_SEW_RESNET18,   /* SEW-ResNet-18 (Fang et al. 2021), ADD connection */
} snn_model_kind;

typedef enum snn_encoding {
    SNN_ENCODING_DIRECT,      /* the image repeated over T; the first conv+BN+neuron encode */
    SNN_ENCODING_POISSON,     /* each pixel in [0, 1] fires with probability = its value */
    SNN_ENCODING_FIRST_STEP,  /* the stem's output at t = 0 only, zeros after, and the readout
                                 SUMS over T: a converted ST-BIF network (nn/ann2snn.c) */
} snn_encoding;

typedef struct snn_model_config {
    snn_model_kind kind;
    int in_channels, height, width, classes;
    int width_base;           /* channels of the first conv (CNN: 32, ResNet: 64) */
    int hidden;               /* CNN: hidden units of the first fc */
    int time_steps;           /* T */
    snn_encoding encoding;
    snn_neuron_config neuron;
    bool spiking_readout;     /* CNN: the last fc feeds a neuron layer, so the output is a
                                 firing rate in [0, 1] (for the MSE rate loss) */
    uint64_t seed;            /* for Poisson encoding */
} snn_model_config;

snn_model_config snn_model_config_default(snn_model_kind kind);
/* Models built with an ANN activation (neuron kind RELU or QCLIP) must have time_steps = 1 and
 * direct encoding: they are ANNs, the T = 1 case of the same builders. */
/* Builds the model; NULL with a message for a bad configuration. */
snn_module *snn_model_new(const snn_model_config *config, snn_rng *rng);
/* The configuration a model was built with; NULL for a module that is not a model. */
const snn_model_config *snn_model_config_of(const snn_module *model);
/* The state of a model's own random stream (Poisson encoding), for checkpoints. */
uint64_t snn_model_rng_state(const snn_module *model);
void snn_model_set_rng_state(snn_module *model, uint64_t state);
/* The names of the model's neuron layers, in forward order (for firing-rate reports). */
int snn_model_neuron_layers(snn_module *model, snn_module **layers, const char **names, int max);
const char *snn_model_kind_name(snn_model_kind kind);
snn_status snn_model_kind_parse(const char *name, snn_model_kind *out);
/* Sets the number of time steps a model runs from now on (1..1024; ANN models stay at 1). */
snn_status snn_model_set_time_steps(snn_module *model, int time_steps);

/* ---------------------------------------------------------------------------------------------
 * ANN -> SNN conversion (nn/ann2snn.c, docs/ann2snn.md): a QANN (a model built with neuron kind
 * QCLIP, trained as any model) becomes the ST-BIF network that computes the same logits:
 *   - each QCLIP layer becomes an ST-BIF layer with theta = its learned step, same levels;
 *   - each batch-norm is folded into the conv before it: the conv's weight takes the scale, the
 *     shift becomes a bias added at t = 0 only (a module in the batch-norm's place, "bnX.bias");
 *     a linear layer's bias is likewise added at t = 0 only;
 *   - each max-pool becomes a running max-pool (snn_running_max_pool2d); residual sums stay
 *     sums of spike trains (they are linear);
 *   - the image enters at t = 0 only and the readout sums over T (SNN_ENCODING_FIRST_STEP).
 * After snn_ann_to_snn_time_bound(qann) steps the summed output equals the QANN's logits up to
 * float rounding. The QANN is left as it was; the SNN is a new model on its device, in eval
 * mode, sharing nothing with it. NULL with a message naming what it cannot convert (a spiking
 * or ReLU model, Poisson encoding, an overlapping max-pool, a conv with its own bias, a module
 * it does not know, e.g. a SparseConv2d: sparsify after converting).
 * ------------------------------------------------------------------------------------------- */
snn_module *snn_ann_to_snn(snn_module *qann, int time_steps);
/* The steps after which a converted network's summed output has settled to its QANN's, from the
 * configuration (of the QANN or of its SNN): D_1 + (K - 1) (L - 1), with K the most quantizers on
 * a path from the input to the output and D_1 = max(A_max, -A_min) (see docs/ann2snn.md);
 * -1 (message set) for a model that is neither. */
int snn_ann_to_snn_time_bound(const snn_module *model);
/* The running max-pool layer of converted networks (snn_running_max_pool2d) as a module. */
snn_module *snn_running_max_pool2d_new(int kernel, int stride);

/* ---------------------------------------------------------------------------------------------
 * Optimizers and schedules (nn/optim.c, nn/schedule.c)
 * ------------------------------------------------------------------------------------------- */

typedef enum snn_optimizer_kind { SNN_OPT_SGD, SNN_OPT_ADAM, SNN_OPT_ADAMW } snn_optimizer_kind;

typedef struct snn_optimizer snn_optimizer;

/* Make the optimizer after snn_module_to(): moving a module replaces its parameter tensors. */
snn_optimizer *snn_sgd_new(snn_module *m, float lr, float momentum, float weight_decay,
                           bool nesterov);
snn_optimizer *snn_adam_new(snn_module *m, float lr, float weight_decay, bool decoupled);
/* One update of every trainable parameter from its .grad. */
snn_status snn_optimizer_step(snn_optimizer *opt);
void snn_optimizer_set_lr(snn_optimizer *opt, float lr);
float snn_optimizer_lr(const snn_optimizer *opt);
int64_t snn_optimizer_steps(const snn_optimizer *opt);
void snn_optimizer_free(snn_optimizer *opt);
/* Optimizer state as named tensors ("exp_avg.layer1.0.conv1.weight", ...) for checkpoints. */
snn_status snn_optimizer_state(snn_optimizer *opt, snn_param_list *out);
/* Restores the step count after a checkpoint load (the tensors are restored in place). */
void snn_optimizer_set_steps(snn_optimizer *opt, int64_t steps);

typedef enum snn_schedule_kind { SNN_SCHEDULE_CONSTANT, SNN_SCHEDULE_COSINE, SNN_SCHEDULE_STEP } snn_schedule_kind;

typedef struct snn_schedule {
    snn_schedule_kind kind;
    float base_lr;
    int64_t warmup_steps;     /* linear warm-up from 0 (cosine) */
    int64_t total_steps;      /* cosine: decays to min_lr at total_steps */
    float min_lr;
    int64_t step_size;        /* step: multiply by gamma every step_size steps */
    float gamma;
} snn_schedule;

float snn_schedule_lr(const snn_schedule *s, int64_t step);

/* ---------------------------------------------------------------------------------------------
 * Checkpoints (nn/checkpoint.c): safetensors files, written atomically, validated on load.
 * ------------------------------------------------------------------------------------------- */

/* Writes tensors (any device) and string metadata to `path` via a temp file, fsync, rename.
 * metadata_json is a JSON object of string values or NULL. */
snn_status snn_safetensors_save(const char *path, const snn_param_list *tensors,
                                const char *metadata_json);
/* Loads into existing tensors by name: each must be present with the same shape (float32);
 * extra tensors in the file are an error unless allow_extra. *metadata_json (optional) receives
 * the metadata object as a string allocated with snn_alloc (free with snn_free(p, len + 1)). */
snn_status snn_safetensors_load(const char *path, const snn_param_list *tensors, bool allow_extra,
                                char **metadata_json, size_t *metadata_len);

/* ---------------------------------------------------------------------------------------------
 * Checkpoint metadata and whole-model checkpoints (nn/metadata.c, nn/model_io.c)
 *
 * A model checkpoint is one safetensors file holding every parameter and buffer under its
 * dotted name, the optimizer's state ("exp_avg.<name>", ...), and string metadata: the model's
 * configuration ("snn.model.*") and whatever the training program adds (epoch, RNG state...).
 * ------------------------------------------------------------------------------------------- */

#define SNN_METADATA_MAX 48

typedef struct snn_metadata {
    int count;
    char keys[SNN_METADATA_MAX][48];
    char values[SNN_METADATA_MAX][256];
} snn_metadata;

/* Sets (or replaces) key to the printf-formatted value. SNN_ERR_ARGUMENT when full or too long. */
snn_status snn_metadata_set(snn_metadata *m, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The value of key, or NULL. */
const char *snn_metadata_get(const snn_metadata *m, const char *key);
/* As JSON object text (allocated with snn_alloc; free with snn_free(p, *len + 1)). */
char *snn_metadata_to_json(const snn_metadata *m, size_t *len);
/* From a flat JSON object of strings (what the safetensors __metadata__ holds). */
snn_status snn_metadata_from_json(const char *json, size_t len, snn_metadata *out);

/* The model configuration as metadata ("snn.model.kind", ...) and back. */
snn_status snn_model_config_to_metadata(const snn_model_config *c, snn_metadata *m);
snn_status snn_model_config_from_metadata(const snn_metadata *m, snn_model_config *c);

/* Writes model parameters and buffers, the optimizer state (opt may be NULL) and metadata
 * (the model's configuration is added to it) atomically. */
snn_status snn_checkpoint_save(const char *path, snn_module *model, snn_optimizer *opt,
                               const snn_metadata *metadata);
/* Reads only the metadata of a checkpoint (to rebuild the model before loading it). */
snn_status snn_checkpoint_read_metadata(const char *path, snn_metadata *out);
/* Loads parameters and buffers into `model`, and the optimizer state when opt is not NULL
 * (then the file must hold it). Validates everything first: on error nothing is changed. */
snn_status snn_checkpoint_load(const char *path, snn_module *model, snn_optimizer *opt);
/* Builds the model a checkpoint describes on `device` and loads its parameters. NULL on error. */
snn_module *snn_checkpoint_load_model(const char *path, snn_device device, snn_metadata *metadata);

/* ---------------------------------------------------------------------------------------------
 * SVG charts for reports (nn/svg.c): plain files any browser shows.
 * ------------------------------------------------------------------------------------------- */

typedef struct snn_svg_series {
    const char *label;
    const double *x, *y;      /* n points */
    int n;
} snn_svg_series;

/* A line chart of up to 8 series. SNN_ERR_IO naming the path if it cannot be written. */
snn_status snn_svg_line_chart(const char *path, const char *title, const char *x_label,
                              const char *y_label, const snn_svg_series *series, int n_series);

/* A spike raster: one row per neuron, one column per time step, a mark where spikes[t, i] != 0.
 * spikes: (T, neurons) row-major on the host; groups split rows into named bands (layers). */
snn_status snn_svg_raster(const char *path, const char *title, const float *spikes, int T,
                          int neurons, const int *group_start, const char *const *group_names,
                          int n_groups);

#ifdef __cplusplus
}
#endif

#endif /* SNN_NN_H */
