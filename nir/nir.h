/**
 * @file
 * nir.h - NIR, the Neuromorphic Intermediate Representation (neuroir.org): export a trained
 * snn.c network as a NIR graph in an HDF5 file that snnTorch, Norse, Sinabs, Rockpool, Lava-dl,
 * Spyx and several neuromorphic chips read, and import such a graph back as a runnable module.
 * Built only when the HDF5 C library is found (Debian: libhdf5-dev); such a build defines
 * SNN_WITH_NIR for the programs that link snn_nir (snn::snn and snn.pc included) and installs
 * this header as <snn/nir/nir.h>, which snn.h does not include. docs/nir.md has the mapping of
 * every layer and neuron parameter and what cannot be exported.
 *
 *     snn_module *model = snn_checkpoint_load_model("checkpoint.safetensors", SNN_CPU, NULL);
 *     if (snn_nir_write("model.nir", model) != SNN_OK) fprintf(stderr, "%s\n", snn_last_error());
 *     snn_module *graph = snn_nir_read("model.nir", 0, SNN_CPU);   // T from the file's metadata
 *     snn_step_begin();
 *     snn_tensor *logits = snn_module_forward(graph, x);          // (N, C, H, W) -> (N, classes)
 *     snn_step_end();
 *     snn_module_free(graph);
 *
 * Time: NIR nodes are continuous-time; snn.c's step is the Euler step dt = 1 of them (the
 * file's metadata says dt = 1 and the number of steps T). The graph's output is the last
 * layer's value at every step; snn.c's logits are its mean over the T steps.
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
 * convs with its running statistics). SNN_ERR_UNSUPPORTED, naming the layer, for what NIR
 * cannot express: soft reset, ST-BIF, the ANN activations ReLU and QCLIP, max-pooling of values
 * that are not spikes, non-square global pooling, and the layers of a network converted by
 * snn_ann_to_snn. SNN_ERR_IO when the file cannot be written. */
snn_status snn_nir_write(const char *path, snn_module *model);

/** Reads a NIR graph (the subset snn_nir_write writes: Input, Output, Conv2d, Affine, Linear,
 * LIF, IF, SumPool2d, AvgPool2d, Threshold, Flatten; converging edges sum) into a module that
 * maps (N, C, H, W) images, repeated over T steps, or (T, N, C, H, W) frames to (N, classes):
 * the mean over T of the Output node. `time_steps` 0 takes T from the file's metadata. The
 * module runs on `device` and is released with snn_module_free. NULL with a message naming the
 * file and the node on error. */
snn_module *snn_nir_read(const char *path, int time_steps, snn_device device);

#ifdef __cplusplus
}
#endif

#endif /* SNN_NIR_H */
