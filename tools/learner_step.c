/*
 * learner_step.c - one training step of the main job's spiking CNN on a random batch, and
 * nothing else: no data files, no checkpoints, no metrics. tools/learner_path.sh builds it with
 * coverage and counts which library files (and lines) this step executes, so the claim that a
 * student reads a small part of snn.c to learn one training step is measured, not estimated.
 *
 *     build/bin/learner-step [--kernels ref|fast]     (SNN_KERNELS=ref works too)
 *
 * The step: the CNN of `make train` (snn_model_config_default, T = 2 as snn-train runs it),
 * a batch of 128 random 28x28 images and labels, forward, cross-entropy, backward (BPTT) and
 * one Adam update.
 */
#include <stdio.h>
#include <string.h>

#include "snn.h"

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--kernels") == 0 && i + 1 < argc) {
            snn_kernel_set set;
            if (snn_kernel_set_parse(argv[++i], &set) != SNN_OK || snn_set_kernels(set) != SNN_OK) {
                fprintf(stderr, "learner-step: %s\n", snn_last_error());
                return 2;
            }
        } else {
            fprintf(stderr, "usage: learner-step [--kernels ref|fast]\n");
            return 2;
        }
    }
    const int N = 128, classes = 10;
    snn_rng rng;
    snn_rng_seed(&rng, 0);
    snn_model_config cfg = snn_model_config_default(SNN_MODEL_SPIKING_CNN);
    cfg.time_steps = 2;
    snn_module *net = snn_model_new(&cfg, &rng);
    snn_optimizer *opt = net ? snn_adam_new(net, 1e-3f, 0.0f, false) : NULL;
    snn_tensor *images = snn_tensor_new(SNN_SHAPE(N, 1, 28, 28), SNN_CPU);
    snn_tensor *labels = snn_tensor_new(SNN_SHAPE(N), SNN_CPU);
    if (!opt || !images || !labels) {
        fprintf(stderr, "learner-step: %s\n", snn_last_error());
        return 1;
    }
    snn_tensor_normal_(images, &rng, 0.0f, 1.0f);
    for (int i = 0; i < N; i++) labels->data[i] = (float)snn_rng_below(&rng, classes);

    snn_step_begin();
    snn_module_zero_grad(net);
    snn_tensor *logits = snn_module_forward(net, images); /* (N, 10): the mean over T */
    snn_tensor *loss = snn_cross_entropy(logits, labels);
    if (!loss || snn_backward(loss) != SNN_OK || snn_optimizer_step(opt) != SNN_OK) {
        fprintf(stderr, "learner-step: %s\n", snn_last_error());
        return 1;
    }
    float value;
    snn_tensor_copy_to_host(loss, &value);
    printf("learner-step: loss %.6f on the %s kernels\n", (double)value, snn_kernel_set_name(snn_get_kernels()));
    snn_step_end();

    snn_tensor_free(labels);
    snn_tensor_free(images);
    snn_optimizer_free(opt);
    snn_module_free(net);
    snn_shutdown();
    return 0;
}
