/*
 * model_dvs.c - the DVS network, for event frames (DVS128 Gesture: 2 polarities, 128x128, 11
 * gestures): the layout of SpikingJelly's DVSGestureNet, with our widths.
 *
 *   x (T, N, 2, H, W) event frames: every frame differs, so the stem runs on all T*N
 *   blocks b = 1, 2, ...: conv b 3x3 -> bn b -> sn b -> pool b (max 2)   while the frame is
 *                         larger than 4x4 (128: five blocks, 128 -> 4); each keeps width_base
 *   flatten -> fc1 -> sn_fc -> fc2 [-> sn_out] -> mean over T          (N, classes)
 *
 * The classifier is the spiking CNN's (snn_model_add_classifier, model_cnn.c), with its
 * dropout layers when config.dropout > 0.
 */
#include <stdio.h>

#include "model_internal.h"
#include "tensor/error.h"

const snn_module_ops snn_dvs_model_ops = {"DVSNet", snn_cnn_forward, snn_model_free_impl, NULL};

/* The DVS net's number of conv blocks: one, then more while the frame is larger than 4x4,
 * at most 8; each halves the frame (floor). */
static int dvs_net_blocks(int h, int w)
{
    int blocks = 1;
    for (h /= 2, w /= 2; (h > 4 || w > 4) && blocks < 8; h /= 2, w /= 2) blocks++;
    return blocks;
}

double snn_dvs_net_flat_features(const snn_model_config *c)
{
    const int blocks = dvs_net_blocks(c->height, c->width);
    return (double)c->width_base * (double)(c->height >> blocks) * (double)(c->width >> blocks);
}

snn_module *snn_dvs_net_new(const snn_model_config *c, snn_rng *rng)
{
    snn_module *m = snn_model_module_new(&snn_dvs_model_ops, c);
    if (!m) return NULL;
    int W = c->width_base, h = c->height, w = c->width, in = c->in_channels;
    const int blocks = dvs_net_blocks(c->height, c->width);
    snn_status s = SNN_OK;
    for (int b = 1; s == SNN_OK && b <= blocks; b++) {
        char name[16];
        snprintf(name, sizeof name, "conv%d", b);
        s = snn_module_add(m, name, snn_conv2d_new(in, W, 3, 1, 1, false, rng));
        snprintf(name, sizeof name, "bn%d", b);
        if (s == SNN_OK) s = snn_module_add(m, name, snn_batchnorm2d_new(W));
        snprintf(name, sizeof name, "sn%d", b);
        if (s == SNN_OK) s = snn_module_add(m, name, snn_neuron_layer_new(&c->neuron));
        snprintf(name, sizeof name, "pool%d", b);
        if (s == SNN_OK) s = snn_module_add(m, name, snn_max_pool2d_new(2, 2));
        in = W, h /= 2, w /= 2;
    }
    if (s == SNN_OK) s = snn_model_add_classifier(m, c, W * h * w, "sn_fc", "sn_out", rng);
    if (s != SNN_OK) {
        snn_module_free(m);
        return NULL;
    }
    return m;
}

/* Floats the DVS net holds (model_internal.h): per block a 3x3 conv (no bias) and a batch-norm,
 * then fc1 and fc2 with their biases. */
double snn_dvs_net_param_floats(const snn_model_config *c)
{
    const double W = c->width_base, hidden = c->hidden, classes = c->classes;
    const int blocks = dvs_net_blocks(c->height, c->width);
    const double convs = W * c->in_channels * 9 + 4 * W + (blocks - 1) * (W * W * 9 + 4 * W) +
                         blocks; /* each batch-norm's count of batches */
    return convs + (snn_dvs_net_flat_features(c) * hidden + hidden) + (hidden * classes + classes);
}
