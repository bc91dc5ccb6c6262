/**
 * @file
 * nn.h - modules (layers and models), optimizers, learning-rate schedules, a moving average of
 * the weights and checkpoints.
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
 * "weight" (1), "bias" (0), buffers "running_mean" (0), "running_var" (1). */
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
/** Promises that nothing reads the layer's input after it (snn_neuron_multistep_consume): the
 * model builders set it, since their neurons follow a batch-norm, a linear layer or a residual
 * sum that feeds nothing else. Off by default. */
void snn_neuron_layer_set_consume_input(snn_module *m, bool on);
/** Whether the models run each training-mode batch-norm -> IF / LIF layer pair (with a block's
 * residual sum between them) as one op, snn_batchnorm_neuron: the same bits, one pass over
 * memory instead of three, and neither the batch-norm's output nor the membrane kept for
 * backward. On by default; off runs the separate ops (for comparison: bench_train_step
 * --no-fusion). */
void snn_model_set_fusion(bool on);
/** Whether that fusion is on (snn_model_set_fusion). */
bool snn_model_fusion(void);
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

/* ---------------------------------------------------------------------------------------------
 * Models
 * ------------------------------------------------------------------------------------------- */

/** Which model snn_model_new builds. */
typedef enum snn_model_kind {
    SNN_MODEL_SPIKING_CNN,    /**< 28x28 (or 34x34 N-MNIST frames): conv-BN-neuron-maxpool x2,
                                   fc-neuron, fc */
    SNN_MODEL_RESNET18,       /**< spiking ResNet-18, CIFAR stem (3x3 conv, no max-pool) */
    SNN_MODEL_SEW_RESNET18,   /**< SEW-ResNet-18 (Fang et al. 2021), ADD connection */
    SNN_MODEL_DVS_NET,        /**< event frames (DVS Gesture 128x128): conv-BN-neuron-maxpool
                                   blocks down to 4x4 (5 at 128x128), fc-neuron, fc */
    SNN_MODEL_RESNET34,       /**< spiking ResNet-34: basic blocks 3, 4, 6, 3 */
    SNN_MODEL_SEW_RESNET34,   /**< SEW-ResNet-34 */
    SNN_MODEL_RESNET50,       /**< spiking ResNet-50: bottleneck blocks 3, 4, 6, 3 (1x1, 3x3, 1x1) */
    SNN_MODEL_SEW_RESNET50,   /**< SEW-ResNet-50 */
    SNN_MODEL_KIND_COUNT      /**< the number of kinds (not a model) */
} snn_model_kind;

/** How an image becomes T time steps of input. */
typedef enum snn_encoding {
    SNN_ENCODING_DIRECT,      /**< the image repeated over T; the first conv+BN+neuron encode */
    SNN_ENCODING_POISSON,     /**< each pixel in [0, 1] fires with probability = its value */
    SNN_ENCODING_EVENTS,      /**< the input already has a time axis: (T, N, C, H, W) event
                                   frames (data.h's event sets); the stem runs on all T frames */
    SNN_ENCODING_FIRST_STEP,  /**< the stem's output at t = 0 only, zeros after, and the readout
                                   SUMS over T: a converted ST-BIF network (nn/ann2snn.c) */
} snn_encoding;

/** What snn_model_new builds; start from snn_model_config_default(kind). */
typedef struct snn_model_config {
    snn_model_kind kind;      /**< the model */
    int in_channels;          /**< C of the input images */
    int height;               /**< H of the input images (CNNs: >= 4; ResNets: >= 8) */
    int width;                /**< W of the input images (as height) */
    int classes;              /**< outputs (>= 2) */
    int width_base;           /**< channels of the first conv (CNN: 32, ResNet: 64) */
    int hidden;               /**< CNN: hidden units of the first fc */
    int time_steps;           /**< T (1..1024) */
    snn_encoding encoding;    /**< direct, Poisson, event frames or first step (converted) */
    snn_neuron_config neuron; /**< every neuron layer's model */
    bool spiking_readout;     /**< CNN: the last fc feeds a neuron layer, so the output is a
                                 firing rate in [0, 1] (for the MSE rate loss) */
    uint64_t seed;            /**< for Poisson encoding */
    float dropout;            /**< CNN and DVS net: the probability of the dropout layers before
                                 fc1 and fc2 (flatten -> dropout -> fc1 -> neuron -> dropout ->
                                 fc2, the PLIF paper's classifier), one mask per sample shared
                                 by every time step (snn_dropout_shared); 0 (the default): no
                                 dropout layers. In [0, 1); the ResNets take only 0 */
} snn_model_config;

/** The defaults of `kind`: LIF neurons with the ATan surrogate, T = 4, direct encoding; the
 * CNN takes 1x28x28 images (width 32, hidden 128), the ResNets 3x32x32 (width 64), 10 classes;
 * the DVS net takes 2x128x128 event frames (width 32, hidden 256, 11 classes). */
snn_model_config snn_model_config_default(snn_model_kind kind);
/** Builds the model `config` describes (copied), its weights drawn from `rng`, on the CPU
 * (snn_module_to moves it). Its forward maps images (N, C, H, W), or event frames (T, N, C, H, W)
 * with the events encoding, to logits (N, classes), the mean over T of the last layer. The caller
 * owns it (snn_module_free). NULL with SNN_ERR_ARGUMENT and a message naming the field for a bad
 * configuration, or SNN_ERR_MEMORY. Models built with an ANN activation (neuron kind RELU or
 * QCLIP) must have time_steps = 1 and direct encoding: they are ANNs, the T = 1 case of the
 * same builders. */
snn_module *snn_model_new(const snn_model_config *config, snn_rng *rng);
/** The configuration `model` was built with (owned by the model); NULL for a module that is not
 * a model. */
const snn_model_config *snn_model_config_of(const snn_module *model);
/** The state of a model's own random stream (Poisson encoding), for checkpoints. */
uint64_t snn_model_rng_state(const snn_module *model);
/** Restores the state of a model's random stream (from snn_model_rng_state). */
void snn_model_set_rng_state(snn_module *model, uint64_t state);
/** Runs the model at another number of time steps from now on (no weight depends on T): e.g. a
 * net trained at T = 4 measured at T = 16 (a snn_forward_graph recorded before keeps its T).
 * SNN_ERR_ARGUMENT for a non-model or T outside 1..1024 (ANN models stay at 1). */
snn_status snn_model_set_time_steps(snn_module *model, int time_steps);
/** The model's output at each time step, (T, N, classes): its forward (snn_module_forward) up
 * to the readout, which for every model but a converted one is the mean over T of this, so
 * snn_mean(snn_model_forward_steps(m, x), 0, false) equals snn_module_forward(m, x) bit for bit
 * (for a network converted by snn_ann_to_snn, SNN_ENCODING_FIRST_STEP, the readout SUMS these
 * over T instead). For per-step losses (snn_tet_loss). It is the same forward: in training it
 * draws the same Poisson spikes and dropout masks from the model's stream as snn_module_forward
 * would, and advances that stream. x as snn_module_forward takes it. A STEP tensor; NULL with
 * SNN_ERR_ARGUMENT for a module that is not a model (or a bad x), and as snn_module_forward
 * otherwise. */
snn_tensor *snn_model_forward_steps(snn_module *model, snn_tensor *x);
/** Finds the neuron layers of `model` in forward order (for firing-rate reports): up to `max`
 * (at most 256) modules into layers[] and their dotted names into names[] (static strings,
 * valid until the next call); returns how many. */
int snn_model_neuron_layers(snn_module *model, snn_module **layers, const char **names, int max);
/** "cnn", "resnet18", "sew-resnet18", "dvsnet", "resnet34", "sew-resnet34", "resnet50" or
 * "sew-resnet50" (a static string). */
const char *snn_model_kind_name(snn_model_kind kind);
/** Parses `name` (one of the names above) into *out; SNN_ERR_ARGUMENT for any other name. */
snn_status snn_model_kind_parse(const char *name, snn_model_kind *out);

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

/** Converts the QANN `qann` into the ST-BIF network described above, run at `time_steps`. */
snn_module *snn_ann_to_snn(snn_module *qann, int time_steps);
/** The steps after which a converted network's summed output has settled to its QANN's, from the
 * configuration (of the QANN or of its SNN): D_1 + (K - 1) (L - 1), with K the most quantizers on
 * a path from the input to the output and D_1 = max(A_max, -A_min) (see docs/ann2snn.md);
 * -1 (message set) for a model that is neither. */
int snn_ann_to_snn_time_bound(const snn_module *model);
/** The running max-pool layer of converted networks (snn_running_max_pool2d) as a module. */
snn_module *snn_running_max_pool2d_new(int kernel, int stride);

/* ---------------------------------------------------------------------------------------------
 * Memory estimate (nn/model_memory.c): what a model and one step of it take, from the
 * configuration alone, so that a program can refuse a size before allocating anything.
 * Bytes are doubles: an absurd width must give an absurd number, not a wrapped one.
 * ------------------------------------------------------------------------------------------- */

/** What a model and one step of it take on its device, in bytes (doubles: an absurd width gives
 * an absurd number, not a wrapped one). */
typedef struct snn_memory_estimate {
    int64_t parameter_count;  /**< trainable parameters (as snn_module_num_parameters) */
    double parameters;        /**< bytes: weights, biases, batch-norm statistics */
    double gradients;         /**< bytes: one per trainable parameter (training only) */
    double optimizer;         /**< bytes: optimizer state (training only) */
    double step;              /**< bytes: the step arena's high-water mark, plus gradient_pool */
    double workspace;         /**< bytes: the largest conv workspace (part of `step`) */
    double largest_tensor;    /**< bytes: the largest single tensor of the step (part of `step`) */
    double gradient_pool;     /**< bytes: the step pool's blocks for the gradients of
                                   activations (training only; part of `step`, not of the arena:
                                   snn_step_reserve the step less this) */
    double overhead;          /**< bytes: fixed per device (GEMM buffers; CUDA scratch, cuBLAS) */
    double total;             /**< bytes on the model's device: the sum of the above */
    double host;              /**< bytes of host memory besides the data set (= total on the
                                   CPU) */
} snn_memory_estimate;

/** Estimates into *out one step of `config` at `batch_size` on `device`: training (a tape,
 * gradients and `optimizer_states` tensors per weight: 0 plain SGD, 1 SGD with momentum, 2 Adam)
 * or evaluation (no tape). Needs no model and allocates nothing. A network converted from a QANN
 * (snn_ann_to_snn's config: first-step encoding) is estimated with its own layers, for
 * evaluation only (training it: SNN_ERR_UNSUPPORTED). SNN_ERR_ARGUMENT (message set, *out
 * zeroed) for NULL pointers or sizes below 1. */
snn_status snn_model_memory_estimate(const snn_model_config *config, int batch_size,
                                     snn_device device, bool training, int optimizer_states,
                                     snn_memory_estimate *out);

/* ---------------------------------------------------------------------------------------------
 * Optimizers and schedules (nn/optim.c, nn/schedule.c)
 * ------------------------------------------------------------------------------------------- */

/** The update rule of an optimizer. */
typedef enum snn_optimizer_kind {
    SNN_OPT_SGD,    /**< torch.optim.SGD */
    SNN_OPT_ADAM,   /**< torch.optim.Adam (L2 weight decay added to the gradient) */
    SNN_OPT_ADAMW,  /**< torch.optim.AdamW (decoupled weight decay) */
} snn_optimizer_kind;

/** An optimizer: the trainable parameters of one module and their state (opaque). */
typedef struct snn_optimizer snn_optimizer;

/** SGD over the trainable parameters of `m` (with torch.optim.SGD's semantics): lr finite and
 * >= 0, momentum in [0, 1), weight_decay >= 0 (L2), nesterov only with momentum > 0. Make it after
 * snn_module_to(): moving a module replaces its parameter tensors. The caller owns it
 * (snn_optimizer_free; it must not outlive m). NULL with SNN_ERR_ARGUMENT or SNN_ERR_MEMORY. */
snn_optimizer *snn_sgd_new(snn_module *m, float lr, float momentum, float weight_decay,
                           bool nesterov);
/** Adam (decoupled false) or AdamW (true) over the trainable parameters of `m`, betas (0.9,
 * 0.999), eps 1e-8; lr finite and >= 0, weight_decay >= 0. As snn_sgd_new otherwise. */
snn_optimizer *snn_adam_new(snn_module *m, float lr, float weight_decay, bool decoupled);
/** One update of every trainable parameter of `opt` from its .grad (parameters whose .grad is
 * NULL are skipped, as PyTorch skips a None grad). SNN_ERR_ARGUMENT for a NULL opt,
 * SNN_ERR_STATE when a gradient or state is on another device or of another size than its
 * parameter. */
snn_status snn_optimizer_step(snn_optimizer *opt);
/** Sets the learning rate of `opt` (for schedules: snn_schedule_lr). */
void snn_optimizer_set_lr(snn_optimizer *opt, float lr);
/** The learning rate of `opt`; NaN for NULL. */
float snn_optimizer_lr(const snn_optimizer *opt);
/** The number of snn_optimizer_step calls so far (0 for NULL). */
int64_t snn_optimizer_steps(const snn_optimizer *opt);
/** Frees `opt` and its state tensors (not the module's parameters). NULL is a no-op. */
void snn_optimizer_free(snn_optimizer *opt);
/** Fills *out with the optimizer's state as named tensors ("momentum_buffer.<name>" for SGD with
 * momentum, "exp_avg.<name>" and "exp_avg_sq.<name>" for Adam), for checkpoints. The tensors
 * stay the optimizer's; free the list with snn_param_list_free. SNN_ERR_ARGUMENT (NULL, or a
 * name too long), SNN_ERR_MEMORY. */
snn_status snn_optimizer_state(snn_optimizer *opt, snn_param_list *out);
/** Sets the step count (and every parameter's update count, used by Adam's bias corrections) to
 * `steps`, after a checkpoint load restored the state tensors in place. */
void snn_optimizer_set_steps(snn_optimizer *opt, int64_t steps);

/** The shape of a learning-rate schedule (nn/schedule.c has the formulas). */
typedef enum snn_schedule_kind {
    SNN_SCHEDULE_CONSTANT,  /**< base_lr throughout */
    SNN_SCHEDULE_COSINE,    /**< linear warm-up from 0, then half a cosine down to min_lr */
    SNN_SCHEDULE_STEP,      /**< base_lr * gamma^floor(step / step_size) */
} snn_schedule_kind;

/** A learning-rate schedule: the rate as a pure function of the step number. */
typedef struct snn_schedule {
    snn_schedule_kind kind;   /**< which formula */
    float base_lr;            /**< the rate after warm-up */
    int64_t warmup_steps;     /**< linear warm-up from 0 (cosine) */
    int64_t total_steps;      /**< cosine: decays to min_lr at total_steps */
    float min_lr;             /**< cosine: the rate from total_steps on */
    int64_t step_size;        /**< step: multiply by gamma every step_size steps */
    float gamma;              /**< step: the factor */
} snn_schedule;

/** The learning rate of schedule `s` at `step` (optimizer updates done so far, from 0), so a
 * resumed run recomputes it. Edge cases are defined, never errors: a negative step counts as 0,
 * warmup <= 0 means none, step_size <= 0 means base_lr throughout. */
float snn_schedule_lr(const snn_schedule *s, int64_t step);

/* ---------------------------------------------------------------------------------------------
 * Weight averaging (nn/ema.c): an exponential moving average of a model's parameters and
 * buffers, kept in a second model that evaluation runs instead of the trained one.
 *
 *     snn_ema *ema = snn_ema_new(net, 0.999f);              // after snn_module_to(net, ...)
 *     for (...) {
 *         ...; snn_optimizer_step(opt);
 *         snn_ema_update(ema, net, snn_optimizer_steps(opt));
 *     }
 *     evaluate(snn_ema_model(ema));                          // the averaged weights
 *     snn_ema_free(ema);
 * ------------------------------------------------------------------------------------------- */

/** The name prefix of the averaged tensors in a checkpoint: "ema.conv1.weight". */
#define SNN_EMA_PREFIX "ema."

/** A moving average of a model's weights (opaque; nn/ema.c). */
typedef struct snn_ema snn_ema;

/** Starts an average of every parameter and buffer (batch-norm running statistics included) of
 * `model`, a model made by snn_model_new, on its device: a second model built from
 * snn_model_config_of(model), holding a copy of model's tensors. decay in (0, 1), e.g. 0.999.
 * Make it after snn_module_to(). The caller owns it (snn_ema_free). NULL with SNN_ERR_ARGUMENT
 * (a decay outside (0, 1), a module that is not a model), SNN_ERR_MEMORY. */
snn_ema *snn_ema_new(snn_module *model, float decay);
/** After an optimizer step: every shadow s of `ema` moves toward its tensor w of `model` (the
 * model it was made from), s = d s + (1 - d) w, with d = min(decay, (1 + step) / (10 + step)),
 * TensorFlow's warm-up (step: the optimizer steps taken, this one included, >= 1; early
 * averages are otherwise dominated by the random initialisation). On the model's device, no
 * host synchronisation. SNN_ERR_ARGUMENT (NULL, step < 1), SNN_ERR_STATE (a model whose tensors
 * do not match the average's); on error no shadow moves. */
snn_status snn_ema_update(snn_ema *ema, snn_module *model, int64_t step);
/** The decay update `step` uses: min(decay, (1 + step) / (10 + step)); NaN for NULL. */
float snn_ema_decay_at(const snn_ema *ema, int64_t step);
/** The decay `ema` was made with; NaN for NULL. */
float snn_ema_decay(const snn_ema *ema);
/** The averaged model (owned by `ema`, in eval mode): evaluate it as any model. NULL for NULL. */
snn_module *snn_ema_model(snn_ema *ema);
/** Fills *out with the averaged tensors named SNN_EMA_PREFIX + their name in the model, for
 * checkpoints (snn_checkpoint_save_extra). The tensors stay the average's; free the list with
 * snn_param_list_free. SNN_ERR_ARGUMENT (NULL, or a name too long), SNN_ERR_MEMORY. */
snn_status snn_ema_state(snn_ema *ema, snn_param_list *out);
/** Frees `ema` and its averaged model. NULL is a no-op. */
void snn_ema_free(snn_ema *ema);

/* ---------------------------------------------------------------------------------------------
 * Checkpoints (nn/checkpoint.c): safetensors files, written atomically, validated on load.
 * ------------------------------------------------------------------------------------------- */

/** Writes `tensors` (any device; the caller keeps them) and string metadata to `path` via a
 * temp file, fsync and rename, so `path` holds the old file or the new one, never a part.
 * metadata_json is a JSON object of string values, or NULL. SNN_ERR_ARGUMENT (a NULL or empty
 * path, a bad list: NULL tensors, empty or duplicate names), SNN_ERR_IO naming the file,
 * SNN_ERR_MEMORY; on error the old file is intact and no temp file is left. */
snn_status snn_safetensors_save(const char *path, const snn_param_list *tensors,
                                const char *metadata_json);
/** Loads the file at `path` into the existing `tensors` (any device) by name: each must be in
 * the file with the same shape, as F32; tensors in the file but not in the list are an error
 * unless allow_extra. When metadata_json is not NULL it receives the __metadata__ object as
 * NUL-terminated JSON text allocated with snn_alloc (free with snn_free(p, *metadata_len + 1)),
 * or NULL when the file has none; metadata_len may be NULL. The whole file is validated first
 * (header length, JSON, dtypes, shapes, offsets that tile the data section): on any error no
 * tensor is changed. SNN_ERR_ARGUMENT (bad path or list), SNN_ERR_IO (cannot open or read),
 * SNN_ERR_FORMAT (anything wrong in the file; the message names the file and the tensor),
 * SNN_ERR_MEMORY. */
snn_status snn_safetensors_load(const char *path, const snn_param_list *tensors, bool allow_extra,
                                char **metadata_json, size_t *metadata_len);

/* ---------------------------------------------------------------------------------------------
 * Checkpoint metadata and whole-model checkpoints (nn/metadata.c, nn/model_io.c)
 *
 * A model checkpoint is one safetensors file holding every parameter and buffer under its
 * dotted name, the optimizer's state ("exp_avg.<name>", ...), and string metadata: the model's
 * configuration ("snn.model.*") and whatever the training program adds (epoch, RNG state...).
 * ------------------------------------------------------------------------------------------- */

/** The most keys an snn_metadata holds. */
#define SNN_METADATA_MAX 48

/** A flat string -> string map, what a checkpoint's __metadata__ holds. Zero it to start. */
typedef struct snn_metadata {
    int count;                            /**< keys in use */
    char keys[SNN_METADATA_MAX][48];      /**< NUL-terminated, at most 47 bytes */
    char values[SNN_METADATA_MAX][256];   /**< NUL-terminated, at most 255 bytes */
} snn_metadata;

/** Sets (or replaces) `key` in `m` to the printf-formatted value `fmt`, .... SNN_ERR_ARGUMENT
 * when m is full or the key or value is too long (m is then unchanged). */
snn_status snn_metadata_set(snn_metadata *m, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/** The value of `key` in `m` (m's storage), or NULL. */
const char *snn_metadata_get(const snn_metadata *m, const char *key);
/** `m` as NUL-terminated JSON object text, allocated with snn_alloc; *len receives the size to
 * free it with: snn_free(p, *len + 1) (the text itself may be shorter). NULL with
 * SNN_ERR_MEMORY. */
char *snn_metadata_to_json(const snn_metadata *m, size_t *len);
/** Parses `len` bytes of `json`, a flat JSON object of strings (what the safetensors
 * __metadata__ holds), into *out. SNN_ERR_FORMAT for anything else (other value types, keys or
 * values too long, more than SNN_METADATA_MAX keys). */
snn_status snn_metadata_from_json(const char *json, size_t len, snn_metadata *out);

/** Adds the model configuration `c` to `m` as "snn.model.*" and "snn.neuron.*" keys.
 * SNN_ERR_ARGUMENT when m has no room. */
snn_status snn_model_config_to_metadata(const snn_model_config *c, snn_metadata *m);
/** Reads a model configuration back from `m` into *c. SNN_ERR_FORMAT naming the first missing
 * or unreadable key. The values are not range-checked here: snn_model_new checks them. */
snn_status snn_model_config_from_metadata(const snn_metadata *m, snn_model_config *c);

/** Writes the parameters and buffers of `model`, the state of `opt` (may be NULL) and
 * `metadata` (may be NULL; the model's configuration and the optimizer's step count are added)
 * to `path`, atomically, as snn_safetensors_save (same errors). */
snn_status snn_checkpoint_save(const char *path, snn_module *model, snn_optimizer *opt,
                               const snn_metadata *metadata);
/** Reads only the metadata of the checkpoint at `path` into *out (to rebuild the model before
 * loading it). Errors as snn_safetensors_load, or SNN_ERR_FORMAT for bad metadata. */
snn_status snn_checkpoint_read_metadata(const char *path, snn_metadata *out);
/** Loads parameters and buffers into `model`, and the optimizer state and step count when opt
 * is not NULL (then the file must hold them; without opt, extra tensors are ignored).
 * Validates everything first: on error nothing is changed. Errors as snn_safetensors_load. */
snn_status snn_checkpoint_load(const char *path, snn_module *model, snn_optimizer *opt);
/** As snn_checkpoint_save, plus the named tensors of `extra` (may be NULL or empty; e.g.
 * snn_ema_state's) after the optimizer's. Their names must differ from the model's and the
 * optimizer's (SNN_ERR_ARGUMENT). */
snn_status snn_checkpoint_save_extra(const char *path, snn_module *model, snn_optimizer *opt,
                                     const snn_param_list *extra, const snn_metadata *metadata);
/** As snn_checkpoint_load, plus the tensors of `extra` (may be NULL), loaded by name. With opt
 * the file must hold exactly the model's, the optimizer's and extra's tensors; without it other
 * tensors are ignored. On error nothing is changed. */
snn_status snn_checkpoint_load_extra(const char *path, snn_module *model, snn_optimizer *opt,
                                     const snn_param_list *extra);
/** Loads into `model` the tensors the checkpoint at `path` holds under `prefix` + their name
 * (SNN_EMA_PREFIX: the averaged weights snn-train --ema saves), ignoring every other tensor.
 * Errors as snn_checkpoint_load (SNN_ERR_FORMAT naming the first missing tensor). */
snn_status snn_checkpoint_load_prefixed(const char *path, snn_module *model, const char *prefix);
/** Builds the model the checkpoint at `path` describes (its "snn.model.*" metadata) on `device`
 * and loads its parameters; fills *metadata (may be NULL) with the file's metadata. The caller
 * owns the model. NULL on error (as snn_safetensors_load; SNN_ERR_FORMAT for a file that is not
 * a model checkpoint). */
snn_module *snn_checkpoint_load_model(const char *path, snn_device device, snn_metadata *metadata);

/* ---------------------------------------------------------------------------------------------
 * Inference graphs (nn/forward_graph.c): the eval forward of a fixed input shape recorded once
 * as a CUDA Graph and replayed with one launch (on the CPU: the plain forward).
 * ------------------------------------------------------------------------------------------- */

/** An eval forward recorded for one input shape (opaque; nn/forward_graph.c). */
typedef struct snn_forward_graph snn_forward_graph;

/** Records model's eval-mode, no-grad forward for inputs of `input_shape` on `device`. The model
 * must be in eval mode and on `device`. Holds a step open until snn_forward_graph_free: make
 * and free it in the same scope, outside steps opened after it. NULL with a message on error. */
snn_forward_graph *snn_forward_graph_new(snn_module *model, snn_shape input_shape, snn_device device);
/** Runs the recorded forward on x (the recorded shape and device). The result belongs to the
 * graph (CUDA: overwritten by the next run) or to the caller's step (CPU). NULL on error. */
snn_tensor *snn_forward_graph_run(snn_forward_graph *g, const snn_tensor *x);
/** Frees the graph and closes its step (NULL is a no-op). */
void snn_forward_graph_free(snn_forward_graph *g);

/* ---------------------------------------------------------------------------------------------
 * SVG charts for reports (nn/svg.c): plain files any browser shows.
 * ------------------------------------------------------------------------------------------- */

/** One line of a chart: n points (x[i], y[i]) under a label (the caller's arrays). */
typedef struct snn_svg_series {
    const char *label;        /**< shown in the legend */
    const double *x;          /**< n x values */
    const double *y;          /**< n y values */
    int n;                    /**< number of points */
} snn_svg_series;

/** Writes a line chart of the first (up to 8) of `n_series` `series` to the SVG file `path`,
 * with a title and axis labels. SNN_ERR_IO naming the path if it cannot be written. */
snn_status snn_svg_line_chart(const char *path, const char *title, const char *x_label,
                              const char *y_label, const snn_svg_series *series, int n_series);

/** Writes a spike raster to the SVG file `path`: one row per neuron, one column per time step,
 * a mark where spikes[t, i] != 0. spikes: (T, neurons) row-major on the host; n_groups groups
 * split the rows into named bands (layers): group g starts at row group_start[g] and is called
 * group_names[g]. SNN_ERR_IO naming the path if it cannot be written. */
snn_status snn_svg_raster(const char *path, const char *title, const float *spikes, int T,
                          int neurons, const int *group_start, const char *const *group_names,
                          int n_groups);

#ifdef __cplusplus
}
#endif

#endif /* SNN_NN_H */
