/**
 * @file
 * module.h - modules and layers: the tree of modules a network is made of, each owning its
 * parameters and children, and the layers (conv, batch-norm, linear, pooling, dropout, neuron
 * layers) that are its leaves; the activity penalty and the TET loss read them.
 *
 * A module owns its parameters (OWNED tensors) and its children, and maps a STEP tensor to a
 * STEP tensor. Parameters carry dotted names like PyTorch's state_dict keys
 * ("layer1.0.conv1.weight"), which is also how checkpoints name them, so a snn.c checkpoint
 * opens in PyTorch with safetensors.load_file(). nn/nn.h includes this header with the rest of
 * nn/ (the models, optimizers, checkpoints and the execution plan).
 *
 *     snn_module *seq = snn_sequential_new();
 *     snn_module_add(seq, "0", snn_conv2d_new(1, 8, 3, 1, 1, false, &rng));
 *     snn_module_add(seq, "1", snn_batchnorm2d_new(8));
 *     snn_module_add(seq, "2", snn_neuron_layer_new(&neuron_config));
 *     snn_tensor *spikes = snn_module_forward(seq, x);   // x (T, N, 1, H, W)
 *
 * Dimension glossary: T time steps, N batch, C channels, H, W spatial, F features.
 */
#ifndef SNN_NN_MODULE_H
#define SNN_NN_MODULE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "../autograd/autograd.h"
#include "../neurons/neurons.h"
#include "../tensor/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------------
 * Modules
 * ------------------------------------------------------------------------------------------- */

/** A layer or a model: a tree of modules, each owning its parameters and children. */
typedef struct snn_module snn_module;

/** What distinguishes one kind of module from another (one static table per kind). */
typedef struct snn_module_ops {
    const char *kind;                                          /**< "Conv2d", "Sequential", ... */
    /** The module's computation: a STEP tensor from a STEP tensor, or NULL with the error set. */
    snn_tensor *(*forward)(snn_module *m, snn_tensor *x);
    void (*free_impl)(snn_module *m);                          /**< frees m->impl; may be NULL */
    void (*reset_state)(snn_module *m);                        /**< stateful modules; may be NULL */
} snn_module_ops;

/** A tensor a module owns. Trainable parameters get gradients and optimizer updates; buffers
 * (batch-norm running statistics) are saved in checkpoints but not trained. */
typedef struct snn_param {
    char name[32];            /**< local name: "weight", "running_mean" */
    snn_tensor *tensor;       /**< OWNED */
    bool trainable;           /**< false for a buffer */
} snn_param;

/** The most parameters and buffers one module holds (children hold their own). */
#define SNN_MODULE_MAX_PARAMS 6

/** A module. Read the fields freely; change them through the functions below. */
struct snn_module {
    const snn_module_ops *ops;                /**< its kind */
    char name[32];                            /**< name within its parent: "conv1", "0" */
    bool training;                            /**< training (true, the default) or eval mode */
    snn_param params[SNN_MODULE_MAX_PARAMS];  /**< its own parameters and buffers */
    int n_params;                             /**< entries used in params[] */
    snn_module **children;                    /**< owned */
    int n_children;                           /**< entries used in children[] */
    int cap_children;                         /**< entries allocated in children[] */
    void *impl;                               /**< kind-specific state, owned */
    size_t impl_bytes;                        /**< its size when the module made it (freed
                                                   with the module), else 0 */
    /** The execution plan of the model this module belongs to (nn/plan.h), shared by every
     * module of its tree and owned by the model; NULL outside a model (the defaults then). */
    struct snn_plan *plan;
};

/** Runs module `m` on x (a STEP tensor, usually (N, C, H, W) images or (T, N, ...) data).
 * Returns a STEP tensor, or NULL with snn_last_error() set on failure (a NULL m or x included). */
snn_tensor *snn_module_forward(snn_module *m, snn_tensor *x);
/** Frees the module `m`, its parameters and its children. NULL is a no-op. */
void snn_module_free(snn_module *m);
/** Puts `m` and its children in training (true) or evaluation mode (batch-norm statistics,
 * dropout). */
void snn_module_train(snn_module *m, bool training);
/** Zeroes the gradient of every trainable parameter of `m` and its children (backward
 * accumulates). */
void snn_module_zero_grad(snn_module *m);
/** Resets the state of every stateful module under `m` (single-step neurons); multi-step layers
 * need none. */
void snn_module_reset_state(snn_module *m);
/** Moves every parameter and buffer of `m` to `device`: the tensors are replaced by new ones
 * (so make optimizers afterwards) and gradients are dropped. SNN_ERR_ARGUMENT for a bad device,
 * SNN_ERR_UNSUPPORTED for CUDA in a build without it, SNN_ERR_MEMORY when out of memory (some
 * parameters may then already have moved). NULL m is a no-op. */
snn_status snn_module_to(snn_module *m, snn_device device);
/** Appends `child` to `parent` under `name` (shorter than 32 characters). The child is owned by
 * the parent from now on, and freed at once when the call fails (SNN_ERR_ARGUMENT for a NULL
 * argument, a NULL child keeping the error that made it; SNN_ERR_MEMORY), so
 * snn_module_add(seq, "0", snn_conv2d_new(...)) needs one check. */
snn_status snn_module_add(snn_module *parent, const char *name, snn_module *child);
/** The direct child of `m` called `name`, or NULL (no error set). */
snn_module *snn_module_child(snn_module *m, const char *name);
/** For new layer kinds: a module of kind `ops` (a static table) holding `impl`, which it owns
 * from now on (ops->free_impl frees it). In training mode, with no parameters. NULL with
 * SNN_ERR_MEMORY when out of memory (impl is then still the caller's). */
snn_module *snn_module_new(const snn_module_ops *ops, void *impl);
/** As snn_module_new, holding a copy of the `bytes` at `impl`, which the module frees itself
 * (after ops->free_impl, when it has one): a layer whose state is a plain struct needs no
 * free_impl. NULL with SNN_ERR_MEMORY when out of memory. */
snn_module *snn_module_new_copy(const snn_module_ops *ops, const void *impl, size_t bytes);
/** For new layer kinds: adds the OWNED tensor `t` to m's parameters under the local `name`
 * (shorter than 32 characters); `m` owns `t` from now on. requires_grad is set to `trainable`.
 * More than SNN_MODULE_MAX_PARAMS is a bug (abort). Returns SNN_OK. */
snn_status snn_module_add_param(snn_module *m, const char *name, snn_tensor *t, bool trainable);

/** Every parameter and buffer of a module tree with its full dotted name, depth first in the
 * order the children were added (a stable order: checkpoints and optimizers rely on it). */
typedef struct snn_named_param {
    char name[128];           /**< "layer1.0.conv1.weight" */
    snn_tensor *tensor;       /**< the module's tensor (not owned by the list) */
    bool trainable;           /**< false for a buffer */
} snn_named_param;

/** A list of named tensors: a model's parameters, an optimizer's state, what a checkpoint
 * holds. The list owns its items array, never the tensors. */
typedef struct snn_param_list {
    snn_named_param *items;   /**< count entries */
    int count;                /**< number of entries */
} snn_param_list;

/** Fills *out with every parameter and buffer of `m` in that stable order; free the list (not
 * the tensors) with snn_param_list_free. SNN_ERR_ARGUMENT for a NULL m, SNN_ERR_MEMORY; on error
 * *out is empty. */
snn_status snn_module_parameters(snn_module *m, snn_param_list *out);
/** Frees the items of `list` (never the tensors) and empties it. */
void snn_param_list_free(snn_param_list *list);
/** Number of trainable scalars of `m` and its children. */
int64_t snn_module_num_parameters(snn_module *m);
/** Prints the module tree of `m` to `out`, with shapes and parameter counts. */
void snn_module_print(snn_module *m, FILE *out);

/* ---------------------------------------------------------------------------------------------
 * Layers. Image layers accept (N, C, H, W) or (T, N, C, H, W). Weights are initialised as
 * PyTorch does by default (Kaiming-uniform with a = sqrt(5): U(-1/sqrt(fan_in), 1/sqrt(fan_in))).
 * Every constructor returns a new module the caller owns (snn_module_free, or hand it to a
 * parent with snn_module_add), or NULL with SNN_ERR_ARGUMENT (bad sizes) or SNN_ERR_MEMORY.
 * ------------------------------------------------------------------------------------------- */

/** Conv2d: snn_conv2d with a weight (out_channels, in_channels, kernel, kernel) and a bias
 * (out_channels) when `bias`, drawn from `rng` as PyTorch initialises them (U(+-1/sqrt(fan_in)),
 * fan_in = in_channels kernel^2). stride >= 1, pad >= 0. Parameters "weight", "bias". */
snn_module *snn_conv2d_new(int in_channels, int out_channels, int kernel, int stride, int pad,
                           bool bias, snn_rng *rng);
/** BatchNorm2d over `channels` (>= 1): snn_batchnorm2d with momentum 0.1, eps 1e-5; parameters
 * "weight" (1), "bias" (0), buffers "running_mean" (0), "running_var" (1) and
 * "num_batches_tracked" (0; nn/layer_norm.c: the first batches are averaged). */
snn_module *snn_batchnorm2d_new(int channels);
/** Linear: y = x w^T + b over the last dim, w (out_features, in_features), b (out_features)
 * when `bias`, drawn from `rng` as PyTorch does (U(+-1/sqrt(in_features))). */
snn_module *snn_linear_new(int in_features, int out_features, bool bias, snn_rng *rng);
/** Max-pooling over kernel x kernel windows moved by `stride`, no padding. */
snn_module *snn_max_pool2d_new(int kernel, int stride);
/** Average-pooling over kernel x kernel windows moved by `stride`, no padding. */
snn_module *snn_avg_pool2d_new(int kernel, int stride);
/** The mean over each plane: (.., C, H, W) -> (.., C, 1, 1). */
snn_module *snn_adaptive_avg_pool_new(void);
/** A view that merges dims start..end (inclusive; negative counts from the end), as
 * snn_flatten. */
snn_module *snn_flatten_new(int start, int end);
/** Dropout with probability p (0 <= p < 1) in training, the identity in eval; `seed` starts its
 * masks (a new mask every forward). */
snn_module *snn_dropout_new(float p, uint64_t seed);
/** Dropout as snn_dropout_new, with one mask shared over the first `shared_dims` dims of the
 * input (snn_dropout_shared): shared_dims = 1 on (T, N, ...) data drops the same units of a
 * sample at every time step (SpikingJelly's multi-step Dropout). 0 <= shared_dims < the input's
 * rank (checked at each forward). */
snn_module *snn_dropout_shared_new(float p, uint64_t seed, int shared_dims);
/** A container whose forward runs its children in the order they were added (snn_module_add). */
snn_module *snn_sequential_new(void);
/** A neuron layer over (T, N, ...): snn_neuron_multistep with a copy of `config` (checked with
 * snn_neuron_config_check); a PLIF layer holds its parameter "w". */
snn_module *snn_neuron_layer_new(const snn_neuron_config *config);
/** A recurrent layer of `features` spiking neurons over (T, N, features): forward is
 * snn_recurrent_multistep(x, w_rec, cfg), each step's input adding the layer's own last spikes
 * through w_rec. Owns the parameter "w_rec" (features, features), drawn from
 * U(-1/sqrt(features), 1/sqrt(features)) with `rng`, on the CPU (snn_module_to moves it). cfg
 * (copied): an IF, LIF or ALIF config. Counts as a neuron layer for firing rates
 * (snn_neuron_layer_firing_rate, snn_model_neuron_layers). NULL with SNN_ERR_ARGUMENT naming
 * the argument (features < 1, a bad cfg or another kind, rng NULL), or SNN_ERR_MEMORY. */
snn_module *snn_recurrent_layer_new(int features, const snn_neuron_config *cfg, snn_rng *rng);
/** Promises that nothing reads the layer's input after it (snn_neuron_multistep_consume): the
 * model builders set it, since their neurons follow a batch-norm, a linear layer or a residual
 * sum that feeds nothing else. Off by default. */
void snn_neuron_layer_set_consume_input(snn_module *m, bool on);
/** Whether a neuron layer keeps its neurons' state between forwards, and how autograd sees it
 * (training through time, docs/temporal.md). */
typedef enum snn_state_carry {
    SNN_CARRY_NONE = 0,        /**< every forward starts from V_reset (the default) */
    SNN_CARRY_CONSTANT,        /**< each forward continues where the last stopped; the state
                                    that enters is a constant (SLTT, app/train_online.c) */
    SNN_CARRY_DIFFERENTIABLE,  /**< the same, and the state that enters is a leaf that requires
                                    grad and the state it leaves is an output of the graph
                                    (BPTT with time checkpoints, app/train_segments.c) */
} snn_state_carry;
/** Sets how the layer carries its state (above). The state is made by the first forward that
 * carries, for that input's batch size and device, and remade when they change;
 * snn_module_reset_state puts it back to V_reset (theta/2 for ST-BIF), A = 0. It is freed with
 * the layer, and kept across SNN_CARRY_NONE. */
void snn_neuron_layer_set_carry(snn_module *m, snn_state_carry mode);
/** snn_neuron_layer_set_carry on every neuron layer of `root`'s tree; returns how many. */
int snn_neuron_layers_set_carry(snn_module *root, snn_state_carry mode);
/** OTTT's presynaptic traces (nn/synapse_trace.c) on every Conv2d and Linear layer of
 * `root`'s tree: with `on`, each forward adds its input into the layer's trace,
 * a = decay a + x, and its backward takes the weight's gradient against a instead of x; the
 * layer then takes one time step per forward (the online step, app/train_online.c). Off by
 * default; snn_module_reset_state zeroes the traces. Returns how many layers there are. */
int snn_synapse_layers_set_trace(snn_module *root, bool on, float decay);
/** The neuron layers of `root`'s tree in forward order, at most `max` into out[] (out may be
 * NULL to count); returns how many there are. */
int snn_neuron_layers_collect(snn_module *root, snn_module **out, int max);
/** A carrying neuron layer's state: v and a (ALIF, ST-BIF; else NULL) are its OWNED tensors,
 * (N, ...) of one step, NULL before the first carrying forward; v_in, a_in, v_out, a_out are
 * the last SNN_CARRY_DIFFERENTIABLE forward's state in (leaves) and out (STEP tensors of its
 * step), NULL otherwise. */
typedef struct snn_neuron_carried {
    snn_tensor *v, *a;                  /**< the state carried between forwards */
    snn_tensor *v_in, *a_in;            /**< the last forward's entering state (differentiable) */
    snn_tensor *v_out, *a_out;          /**< and the state it left */
} snn_neuron_carried;
/** The carried state of the neuron layer `m` (above); all NULL for another module. */
snn_neuron_carried snn_neuron_layer_carried(snn_module *m);
/** The firing rate (spikes per element) of the neuron layer `m`'s last forward, if that
 * forward's step is still open; -1 otherwise. Reads the device. */
float snn_neuron_layer_firing_rate(snn_module *m);
/** The spikes (T, N, ...) of the neuron layer `m`'s last forward (a STEP tensor of that step), or
 * NULL once its step closed. */
snn_tensor *snn_neuron_layer_last_spikes(snn_module *m);
/** Activity penalty (nn/activity_penalty.c): a loss term that trains toward silent (t, n, c)
 * planes, which the sparse convs skip. Over the model's neuron layers that ran in this step
 * (a spiking readout excepted), the sum of each layer's mean over planes of
 * ||S_plane||_2 / sqrt(plane size), i.e. of sqrt(plane firing rate) for spikes: a STEP scalar
 * [1] in [0, layers], differentiable through the spikes (group lasso per plane). Call it after the
 * forward, in the same step:  loss = snn_add(ce, snn_scale(snn_activity_penalty(net), lambda)).
 * NULL with SNN_ERR_STATE when no neuron layer ran in this step. */
snn_tensor *snn_activity_penalty(snn_module *model);

/** TET's default lambda, the weight of its MSE regulariser (nn/loss_tet.c says why 1e-3). */
#define SNN_TET_LAMBDA 1e-3f
/** TET's default phi, the value the regulariser pulls every output toward (nn/loss_tet.c). */
#define SNN_TET_PHI 1.0f

/** The TET loss (Deng et al., ICLR 2022, arXiv:2202.11946; nn/loss_tet.c) of per-step outputs
 * step_logits O (T, N, K) (snn_model_forward_steps) and labels y (N):
 *     L = (1 - lambda) (1/T) sum_t CE_smooth(O[t], y) + lambda mean_{t,n,k} (O[t,n,k] - phi)^2
 * with CE_smooth = snn_cross_entropy_smooth at `smoothing` (0: plain cross-entropy). The
 * defaults SNN_TET_LAMBDA and SNN_TET_PHI are the authors'. lambda in [0, 1], phi finite,
 * smoothing in [0, 1); lambda = 0 is the mean of the per-step cross-entropies alone. Composed
 * of differentiable ops. Shape [1]; NULL with SNN_ERR_ARGUMENT (the message names the
 * argument) for bad arguments or shapes. */
snn_tensor *snn_tet_loss(snn_tensor *step_logits, snn_tensor *labels, float lambda, float phi,
                         float smoothing);

#ifdef __cplusplus
}
#endif

#endif /* SNN_NN_MODULE_H */
