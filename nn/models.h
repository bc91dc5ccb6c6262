/**
 * @file
 * models.h - the model builders (a spiking CNN, spiking and SEW ResNets, a DVS net) with their
 * configurations, ANN -> SNN conversion, the memory estimate of a model's step, and inference
 * graphs. Included by nn/nn.h; the modules it builds are those of nn/module.h, and the plan
 * they run (options, fusion rules, snn_model_explain) is nn/plan.h.
 *
 *     snn_model_config cfg = snn_model_config_default(SNN_MODEL_RESNET18);
 *     cfg.time_steps = 4;
 *     snn_module *net = snn_model_new(&cfg, &rng);          // on the CPU
 *     snn_module_to(net, SNN_CUDA);                          // then its optimizer
 *     snn_tensor *logits = snn_module_forward(net, images);  // (N, 3, 32, 32) -> (N, 10)
 */
#ifndef SNN_NN_MODELS_H
#define SNN_NN_MODELS_H

#include "module.h"
#include "plan.h"

#ifdef __cplusplus
extern "C" {
#endif

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
    SNN_MODEL_RESNET50,       /**< spiking ResNet-50: bottleneck blocks 3, 4, 6, 3 (1x1, 3x3,
                                   1x1) */
    SNN_MODEL_SEW_RESNET50,   /**< SEW-ResNet-50 */
    SNN_MODEL_RSNN,           /**< recurrent SNN for sequences (nn/model_rsnn.c): [fc_k -> rec_k
                                   (recurrent neurons)] x layers, fc_out, a leaky-integrator
                                   readout; images become sequences (rows or pixels) */
    SNN_MODEL_KIND_COUNT      /**< the number of kinds (not a model) */
} snn_model_kind;

/** How an image becomes T time steps of input. */
typedef enum snn_encoding {
    SNN_ENCODING_DIRECT,      /**< the image repeated over T; the first conv+BN+neuron encode */
    SNN_ENCODING_POISSON,     /**< each pixel in [0, 1] fires with probability = its value */
    SNN_ENCODING_EVENTS,      /**< the input already has a time axis: (T, N, C, H, W) event
                                   frames (data.h's event sets); the stem runs on all T frames.
                                   The rsnn also takes (T, N, F) with F = C*H*W (spike-train
                                   audio, SHD) and flattens frames to (T, N, C*H*W) */
    SNN_ENCODING_FIRST_STEP,  /**< the stem's output at t = 0 only, zeros after, and the readout
                                   SUMS over T: a converted ST-BIF network (nn/ann2snn.c) */
    SNN_ENCODING_ROWS,        /**< rsnn only: an image (N, C, H, W) is read row by row, T = H
                                   steps of C*W inputs (row t of every channel) */
    SNN_ENCODING_PIXELS,      /**< rsnn only: an image is read pixel by pixel in row-major
                                   order, T = H*W steps of C inputs (sequential MNIST) */
} snn_encoding;

/** What snn_model_new builds; start from snn_model_config_default(kind). */
typedef struct snn_model_config {
    snn_model_kind kind;      /**< the model */
    int in_channels;          /**< C of the input images */
    int height;               /**< H of the input images (CNNs: >= 4; ResNets: >= 8) */
    int width;                /**< W of the input images (as height) */
    int classes;              /**< outputs (>= 2) */
    int width_base;           /**< channels of the first conv (CNN: 32, ResNet: 64) */
    int hidden;               /**< CNN: hidden units of the first fc; rsnn: the width of each
                                   recurrent layer (default 256) */
    int layers;               /**< rsnn: recurrent layers (>= 1, default 1); the other models
                                   leave it 0 */
    int time_steps;           /**< T (1..1024) */
    snn_encoding encoding;    /**< direct, Poisson, event frames or first step (converted) */
    snn_neuron_config neuron; /**< every neuron layer's model */
    bool spiking_readout;     /**< CNN: the last fc feeds a neuron layer, so the output is a
                                 firing rate in [0, 1] (for the MSE rate loss) */
    uint64_t seed;            /**< for Poisson encoding */
    float dropout;            /**< CNN and DVS net: the probability of the dropout layers before
                                 fc1 and fc2 (flatten -> dropout -> fc1 -> neuron -> dropout ->
                                 fc2, the PLIF paper's classifier), one mask per sample shared
                                 by every time step (snn_dropout_shared); rsnn: on each
                                 recurrent layer's spikes (nn/model_rsnn.c); ResNets: one layer
                                 between the average pool and fc, shared over T as well; 0 (the
                                 default): no dropout layers. In [0, 1) */
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
 * over T instead; an rsnn's are its leaky readout's U[t], whose mean equals the forward up to
 * float rounding, nn/model_rsnn.c). For per-step losses (snn_tet_loss). It is the same forward: in training it
 * draws the same Poisson spikes and dropout masks from the model's stream as snn_module_forward
 * would, and advances that stream. x as snn_module_forward takes it. A STEP tensor; NULL with
 * SNN_ERR_ARGUMENT for a module that is not a model (or a bad x), and as snn_module_forward
 * otherwise. */
snn_tensor *snn_model_forward_steps(snn_module *model, snn_tensor *x);
/** Finds the neuron layers of `model` in forward order (for firing-rate reports): up to `max`
 * (at most 256) modules into layers[] and their dotted names into names[] (static strings,
 * valid until the next call); returns how many. */
int snn_model_neuron_layers(snn_module *model, snn_module **layers, const char **names, int max);
/** "cnn", "resnet18", "sew-resnet18", "dvsnet", "resnet34", "sew-resnet34", "resnet50",
 * "sew-resnet50" or "rsnn" (a static string). */
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
    double state;             /**< bytes: the neuron layers' carried state, kept across steps
                                   (snn_model_memory_estimate_through_time only; else 0) */
    double overhead;          /**< bytes: fixed per device (GEMM buffers; CUDA scratch, cuBLAS) */
    double total;             /**< bytes on the model's device: the sum of the above */
    double host;              /**< bytes of host memory besides the data set (= total on the
                                   CPU) */
} snn_memory_estimate;

/** Estimates into *out one step of `config` at `batch_size` on `device`: training (a tape,
 * gradients and `optimizer_states` tensors per weight: 0 plain SGD, 1 SGD with momentum, 2 Adam)
 * or evaluation (no tape), for a model that runs with the default options of `device` and of
 * the kernel set chosen now (snn_model_options_default). Needs no model and allocates nothing.
 * A network converted from a QANN (snn_ann_to_snn's config: first-step encoding) is estimated
 * with its own layers, for evaluation only (training it: SNN_ERR_UNSUPPORTED).
 * SNN_ERR_ARGUMENT (message set, *out zeroed) for NULL pointers or sizes below 1. */
snn_status snn_model_memory_estimate(const snn_model_config *config, int batch_size,
                                     snn_device device, bool training, int optimizer_states,
                                     snn_memory_estimate *out);
/** As snn_model_memory_estimate, for a model that runs with `options` (snn_model_set_options;
 * NULL: the defaults): without fusion or with spikes kept as floats a step takes more. */
snn_status snn_model_memory_estimate_with(const snn_model_config *config,
                                          const snn_model_options *options, int batch_size,
                                          snn_device device, bool training,
                                          int optimizer_states, snn_memory_estimate *out);
/** As snn_model_memory_estimate_with, for a training step through time whose graph spans
 * `steps` of the config's T, the neuron layers carrying their state from call to call
 * (snn_neuron_layers_set_carry): SNN_CARRY_CONSTANT, an online step (SLTT, snn-train
 * --train-mode sltt: steps = 1); SNN_CARRY_DIFFERENTIABLE, BPTT in segments of `steps`
 * recomputed in backward (snn-train --time-checkpoint K: steps = K), with the segments' saved
 * states. `traces`: OTTT's (snn-train --train-mode ottt), a trace of each conv and linear
 * layer's input, online only. The carried state itself, traces included, is `state`.
 * SNN_ERR_ARGUMENT for another carry, steps out of range (online: 1; segments: 1 .. T), traces
 * with segments, or the arguments snn_model_memory_estimate refuses; SNN_ERR_UNSUPPORTED for an
 * input other than direct or Poisson encoding. */
snn_status snn_model_memory_estimate_through_time(const snn_model_config *config,
                                                  const snn_model_options *options,
                                                  snn_state_carry carry, int steps, bool traces,
                                                  int batch_size, snn_device device,
                                                  int optimizer_states, snn_memory_estimate *out);

/* ---------------------------------------------------------------------------------------------
 * Inference graphs (nn/forward_graph.c): the eval forward of a fixed input shape recorded once
 * as a CUDA Graph and replayed with one launch (on the CPU: the plain forward).
 * ------------------------------------------------------------------------------------------- */

/** An eval forward recorded for one input shape (opaque; nn/forward_graph.c). */
typedef struct snn_forward_graph snn_forward_graph;

/** Records model's eval-mode, no-grad forward for inputs of `input_shape` on `device`. The model
 * must be in eval mode and on `device`. Holds a step open until snn_forward_graph_free: make
 * and free it in the same scope, outside steps opened after it. NULL with a message on error. */
snn_forward_graph *snn_forward_graph_new(snn_module *model, snn_shape input_shape,
                                         snn_device device);
/** Runs the recorded forward on x (the recorded shape and device). The result belongs to the
 * graph (CUDA: overwritten by the next run) or to the caller's step (CPU). NULL on error. */
snn_tensor *snn_forward_graph_run(snn_forward_graph *g, const snn_tensor *x);
/** Frees the graph and closes its step (NULL is a no-op). */
void snn_forward_graph_free(snn_forward_graph *g);

#ifdef __cplusplus
}
#endif

#endif /* SNN_NN_MODELS_H */
