/*
 * nir.h - NIR, the Neuromorphic Intermediate Representation (neuroir.org): export a trained
 * snn.c network as a NIR graph in an HDF5 file that snnTorch, Norse, Sinabs, Rockpool, Lava-dl,
 * Spyx and several neuromorphic chips read, and import such a graph back as a runnable module.
 * Built only when the HDF5 C library is found (Debian: libhdf5-dev); docs/nir.md has the
 * mapping of every layer and neuron parameter and what cannot be exported.
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

#include "nn/nn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Writes the model (a spiking CNN, DVS net, spiking or SEW ResNet made by snn_model_new, in
 * eval form: batch-norm folded into the convs) as a NIR graph to `path` (HDF5), via a temporary
 * file and a rename. SNN_ERR_UNSUPPORTED, naming the layer, for what NIR cannot express (soft
 * reset, ST-BIF, max-pooling of values that are not spikes, non-square pooling). */
snn_status snn_nir_write(const char *path, snn_module *model);

/* Reads a NIR graph (the subset snn_nir_write writes: Input, Output, Conv2d, Affine, Linear,
 * LIF, IF, SumPool2d, AvgPool2d, Threshold, Flatten; converging edges sum) into a module that
 * maps (N, C, H, W) images, repeated over T steps, or (T, N, C, H, W) frames to (N, classes):
 * the mean over T of the Output node. time_steps 0: take T from the file's metadata. NULL with
 * a message naming the file and the node on error. */
snn_module *snn_nir_read(const char *path, int time_steps, snn_device device);

#ifdef __cplusplus
}
#endif

#endif /* SNN_NIR_H */
