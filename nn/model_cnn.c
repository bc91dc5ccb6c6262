/*
 * model_cnn.c - the spiking CNN for 28x28 images (Fashion-MNIST, MNIST).
 *
 *   x (N, 1, 28, 28)
 *   conv1 3x3 (1 -> W) -> bn1 -> [repeat over T] -> sn1 -> maxpool 2     (T, N, W, 14, 14)
 *   conv2 3x3 (W -> W) -> bn2 -> sn2 -> maxpool 2                        (T, N, W, 7, 7)
 *   flatten -> fc1 (W*7*7 -> hidden) -> sn3 -> fc2 (hidden -> classes)   (T, N, classes)
 *   [-> sn4 when spiking_readout]  -> mean over T                        (N, classes)
 *
 * With config.dropout = p > 0 the classifier is the PLIF paper's (Fang et al., ICCV 2021,
 * arXiv:2007.05785): flatten -> dropout1 -> fc1 -> sn3 -> dropout2 -> fc2, each dropout with
 * one mask per sample shared by all T steps (snn_dropout_shared, shared_dims = 1), so a dropped
 * feature or hidden neuron is silent for the whole sequence. Their seeds come from the model's
 * random stream (model.c), which checkpoints store. The DVS net (model_dvs.c) ends with the
 * same classifier.
 *
 * Direct encoding: the image is the same at every step, so conv1 and bn1 run once on N images
 * and their output is repeated over T; the first neuron layer is the encoder. In training mode
 * this equals running them on T*N copies (the batch statistics of identical copies are the
 * statistics of one copy) at 1/T of the cost.
 */
#include "model_internal.h"
#include "tensor/error.h"

snn_tensor *snn_cnn_forward(snn_module *m, snn_tensor *x)
{
    snn_model_impl *impl = m->impl;
    if (snn_model_check_input(m->ops->kind, &impl->config, x, false) != SNN_OK) return NULL;
    /* children: conv1 bn1 sn1 pool1 conv2 bn2 sn2 pool2 flatten [dropout1] fc1 sn3 [dropout2]
     * fc2 [sn4]; the DVS net: conv1 bn1 sn1 pool1 ... convB bnB snB poolB flatten [dropout1] fc1
     * sn_fc [dropout2] fc2 [sn_out] */
    return snn_model_run(m, x);
}

const snn_module_ops snn_cnn_model_ops = {"SpikingCNN", snn_cnn_forward, snn_model_free_impl,
                                          NULL};

/* The classifier both CNNs end with: flatten -> [dropout1] -> fc1 (flat -> hidden) -> neuron
 * `hidden_neuron` -> [dropout2] -> fc2 (hidden -> classes) [-> neuron `readout_neuron`]. The
 * dropout layers (config.dropout > 0) take no parameters, so the parameter names, the random
 * draws of the weights and checkpoints are those of the model without them. */
snn_status snn_model_add_classifier(snn_module *m, const snn_model_config *c, int flat,
                                    const char *hidden_neuron, const char *readout_neuron,
                                    snn_rng *rng)
{
    const float p = c->dropout;
    const bool dropout = p > 0.0f;
    /* one mask per sample for all T (shared_dims 1); the seeds are set from the model's stream
     * before each training forward (model.c) */
    snn_status s = snn_module_add(m, "flatten", snn_flatten_new(2, -1));
    if (s == SNN_OK && dropout) s = snn_module_add(m, "dropout1", snn_dropout_shared_new(p, 0, 1));
    if (s == SNN_OK) s = snn_module_add(m, "fc1", snn_linear_new(flat, c->hidden, true, rng));
    if (s == SNN_OK) s = snn_module_add(m, hidden_neuron, snn_neuron_layer_new(&c->neuron));
    if (s == SNN_OK && dropout) s = snn_module_add(m, "dropout2", snn_dropout_shared_new(p, 0, 1));
    if (s == SNN_OK) s = snn_module_add(m, "fc2", snn_linear_new(c->hidden, c->classes, true, rng));
    if (s == SNN_OK && c->spiking_readout)
        s = snn_module_add(m, readout_neuron, snn_neuron_layer_new(&c->neuron));
    return s;
}

snn_module *snn_spiking_cnn_new(const snn_model_config *c, snn_rng *rng)
{
    snn_module *m = snn_model_module_new(&snn_cnn_model_ops, c);
    if (!m) return NULL;
    /* two 2x2 max-pools, each rounding down: 28 -> 14 -> 7, 34 -> 17 -> 8 */
    const int in = c->in_channels, W = c->width_base;
    const int flat = W * (c->height / 2 / 2) * (c->width / 2 / 2);
    /* bias-free convs: the batch-norm that follows has its own shift */
    snn_status s = snn_module_add(m, "conv1", snn_conv2d_new(in, W, 3, 1, 1, false, rng));
    if (s == SNN_OK) s = snn_module_add(m, "bn1", snn_batchnorm2d_new(W));
    if (s == SNN_OK) s = snn_module_add(m, "sn1", snn_neuron_layer_new(&c->neuron));
    if (s == SNN_OK) s = snn_module_add(m, "pool1", snn_max_pool2d_new(2, 2));
    if (s == SNN_OK) s = snn_module_add(m, "conv2", snn_conv2d_new(W, W, 3, 1, 1, false, rng));
    if (s == SNN_OK) s = snn_module_add(m, "bn2", snn_batchnorm2d_new(W));
    if (s == SNN_OK) s = snn_module_add(m, "sn2", snn_neuron_layer_new(&c->neuron));
    if (s == SNN_OK) s = snn_module_add(m, "pool2", snn_max_pool2d_new(2, 2));
    if (s == SNN_OK) s = snn_model_add_classifier(m, c, flat, "sn3", "sn4", rng);
    if (s != SNN_OK) {
        snn_module_free(m);
        return NULL;
    }
    return m;
}

double snn_cnn_flat_features(const snn_model_config *c)
{
    if (c->kind == SNN_MODEL_DVS_NET) return snn_dvs_net_flat_features(c);
    return (double)c->width_base * (double)(c->height / 4) * (double)(c->width / 4);
}

/* Floats the CNN above holds (model_internal.h): conv (no bias) and batch-norm (weight, bias,
 * running mean, running variance, count of batches) twice, then fc1 and fc2 with their biases. */
double snn_spiking_cnn_param_floats(const snn_model_config *c)
{
    const double W = c->width_base, hidden = c->hidden, classes = c->classes;
    const double flat = snn_cnn_flat_features(c);
    return W * c->in_channels * 9 + 4 * W + W * W * 9 + 4 * W + 2 + (flat * hidden + hidden) +
           (hidden * classes + classes);
}
