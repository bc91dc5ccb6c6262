/**
 * @file
 * nir.h - NIR, the Neuromorphic Intermediate Representation (neuroir.org): export a trained
 * snn.c network as a NIR graph in an HDF5 file that snnTorch, Norse, Sinabs, Rockpool, Lava-dl,
 * Spyx and several neuromorphic chips read, and read the graphs they write as runnable modules.
 * Built only when the HDF5 C library is found (Debian: libhdf5-dev); such a build defines
 * SNN_WITH_NIR for the programs that link snn_nir (snn::snn and snn.pc included) and installs
 * this header as <snn/nir/nir.h>, which snn.h does not include. docs/nir.md has the mapping of
 * every layer and neuron parameter, the equations of every node read, and what is refused.
 *
 *     snn_module *model = snn_checkpoint_load_model("checkpoint.safetensors", SNN_CPU, NULL);
 *     if (snn_nir_write("model.nir", model) != SNN_OK) fprintf(stderr, "%s\n", snn_last_error());
 *
 *     snn_nir_options o = snn_nir_options_default();
 *     o.time_steps = 25;                                  // T for inputs without a time axis
 *     snn_module *graph = snn_nir_load("mlp_lif.nir", &o); // dt from the file's metadata
 *     snn_step_begin();
 *     snn_tensor *mean = snn_module_forward(graph, x);      // (N, 784) -> (N, 10): mean over T
 *     snn_tensor *steps = snn_nir_forward_steps(graph, x);  // (T, N, 10): the Output at each t
 *     snn_step_end();
 *     snn_module_free(graph);
 *
 * Time: NIR nodes are continuous-time ODEs; snn.c runs them with forward-Euler steps of length
 * dt (the file's metadata dt, or the caller's), the same rule its own LIF and IF follow at
 * dt = 1. A recurrent edge (one that closes a cycle) delivers its source's value of the
 * previous step.
 */
#ifndef SNN_NIR_H
#define SNN_NIR_H

#include "../nn/nn.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Writes `model` as a NIR graph to the HDF5 file `path`, via a temporary file and a rename.
 * The model is one made by snn_model_new or loaded from a checkpoint: a spiking CNN, DVS net,
 * or spiking / SEW ResNet-18, -34 or -50, written in eval form (batch-norm folded into the
 * convs with its running statistics), or an rsnn (IF / LIF recurrent layers, each a neuron node
 * with a Linear back to itself, and an LI readout; its Input is one step of the sequence), with
 * metadata dt = 1 and the model's T; or a graph read by snn_nir_load, written back as read
 * with the current weights of its Affine, Linear and Conv2d nodes and the dt it runs at.
 * SNN_ERR_UNSUPPORTED, naming the layer, for what NIR cannot express: soft reset, ST-BIF, ALIF,
 * the ANN activations ReLU and QCLIP, max-pooling of values that are not spikes, non-square
 * global pooling, and the layers of a network converted by snn_ann_to_snn. SNN_ERR_IO when the
 * file cannot be written. */
snn_status snn_nir_write(const char *path, snn_module *model);

/** How snn_nir_load reads a graph. */
typedef struct snn_nir_options {
    int time_steps;            /**< T for an input without a time axis; 0: the file's metadata
                                    time_steps where it has one (else such inputs are refused) */
    double dt;                 /**< the Euler step, in the graph's time unit (most writers use
                                    seconds); 0: the file's metadata dt. Needed by graphs with
                                    neurons or delays */
    snn_device device;         /**< where the module runs */
    snn_surrogate surrogate;   /**< the spikes' surrogate gradient (training an imported graph) */
} snn_nir_options;

/** T 0, dt 0 (both from the file), the CPU, and snn.c's default surrogate. */
snn_nir_options snn_nir_options_default(void);

/** Reads the NIR graph in the HDF5 file `path` (as nir.write and snn_nir_write write it) into a
 * module (kind "NIRGraph", released with snn_module_free) that runs it step by step: Input,
 * Output, Affine, Linear, Conv2d, SumPool2d, AvgPool2d, Flatten, Scale, Threshold, Delay, LIF,
 * IF, LI, I, CubaLIF and CubaLI nodes, converging edges summed, cycles delayed by one step.
 * Its forward maps x, either (N, ...) repeated over T steps or (T, N, ...) one step at a time
 * (... the Input node's shape), to the Output node's mean over the steps, (N, ...).
 * The graph is checked here: shapes are inferred along the edges from the Input, and a graph
 * that cannot run is refused, NULL with a message naming the file and the node, what was
 * expected and what came (a weight that does not fit its input, parameters of the wrong shape,
 * an edge to a missing node, an unsupported node type, no Input or Output, no dt where one is
 * needed). `options` NULL: snn_nir_options_default(). */
snn_module *snn_nir_load(const char *path, const snn_nir_options *options);

/** snn_nir_load with the default options but `time_steps` and `device`. */
snn_module *snn_nir_read(const char *path, int time_steps, snn_device device);

/** The Output node's value at every step, (T, N, ...), of a graph made by snn_nir_load on x as
 * its forward takes it. Differentiable. NULL with the error set. */
snn_tensor *snn_nir_forward_steps(snn_module *graph, snn_tensor *x);

/** What an imported graph is, for programs (snn-eval --nir). */
typedef struct snn_nir_info {
    snn_shape input;           /**< the Input node's shape, per sample (no batch) */
    snn_shape output;          /**< the Output node's shape, per sample */
    int time_steps;            /**< T for inputs without a time axis (0: not known) */
    double dt;                 /**< the Euler step its dynamics run at (0: it has none) */
    bool dt_from_file;         /**< dt is the file's metadata, not the caller's */
    int nodes;                 /**< how many nodes it has, Input and Output included */
    int edges;                 /**< how many edges join them */
    int back_edges;            /**< edges that close a cycle: > 0 for a recurrent graph */
    char source[32];           /**< who wrote the file (metadata "source", "snn.c"), or "" */
} snn_nir_info;

/** Fills *info for `graph`, a module made by snn_nir_load. SNN_ERR_ARGUMENT otherwise. */
snn_status snn_nir_graph_info(const snn_module *graph, snn_nir_info *info);

/** Prints the NIR graph in `path` to `out`, as snn-nir-info shows it: dt and T, whether it is
 * recurrent, every node with its type, input and output shapes and parameters, in the order
 * snn.c runs them, and every edge (back edges marked). A graph snn_nir_load would refuse is
 * printed as far as it reads, then the refusal is returned (and left in snn_last_error()).
 * `options` as snn_nir_load's (its dt, time_steps; NULL: the defaults). */
snn_status snn_nir_describe(const char *path, const snn_nir_options *options, FILE *out);

#ifdef __cplusplus
}
#endif

#endif /* SNN_NIR_H */
