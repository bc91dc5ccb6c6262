/*
 * model_resnet.c - spiking ResNet-18 and SEW-ResNet-18 with the CIFAR stem.
 *
 *   stem:   conv 3x3 (C_in -> 64w) -> bn -> [repeat over T] -> sn        (no max-pool)
 *   layer1: 2 blocks, 64w channels;  layer2: 128w, stride 2;  layer3: 256w, stride 2;
 *   layer4: 512w, stride 2;  global average pool -> flatten -> fc -> mean over T
 *
 * Basic block of the spiking ResNet (SpikingJelly's spiking_resnet: the neuron sits where the
 * ReLU was, after the residual addition):
 *   out = sn2( bn2(conv2( sn1(bn1(conv1(x))) )) + shortcut(x) ),  shortcut = bn(conv1x1) or x
 * SEW block (Fang et al., "Deep Residual Learning in Spiking Neural Networks", 2021), ADD:
 *   out = sn2(bn2(conv2( sn1(bn1(conv1(x))) ))) + shortcut(x),  shortcut = sn(bn(conv1x1)) or x
 * so a SEW block passes spikes (integers) around the residual path. Blocks are composed from
 * primitive ops: no hand-written backward.
 * Direct encoding: the stem conv and bn run once on N images, then repeat over T (see
 * model_cnn.c for why that is exact).
 */
#include "model_internal.h"
#include "tensor/error.h"

typedef struct block_impl {
    bool sew;
} block_impl;

/* children: conv1 bn1 sn1 conv2 bn2 sn2 [downsample] */
static snn_tensor *block_forward(snn_module *m, snn_tensor *x)
{
    block_impl *b = m->impl;
    snn_module **ch = m->children;
    snn_tensor *h = snn_module_forward(ch[2], snn_module_forward(ch[1], snn_module_forward(ch[0], x)));
    h = snn_module_forward(ch[4], snn_module_forward(ch[3], h));
    snn_tensor *shortcut = m->n_children > 6 ? snn_module_forward(ch[6], x) : x;
    if (b->sew) return snn_add(snn_module_forward(ch[5], h), shortcut);
    /* h, bn2's output, feeds only this sum: the sum may take its memory (and sn2 the sum's) */
    return snn_module_forward(ch[5], snn_add_into(h, shortcut));
}

static void block_free(snn_module *m) { snn_free(m->impl, sizeof(block_impl), SNN_CPU); }

static const snn_module_ops block_ops = {"BasicBlock", block_forward, block_free, NULL};

static snn_module *block_new(int in, int out, int stride, bool sew, const snn_neuron_config *neuron,
                             snn_rng *rng)
{
    block_impl *impl = snn_alloc(sizeof *impl, SNN_CPU);
    if (!impl) return snn_error_null(SNN_ERR_MEMORY, "snn_model_new: out of host memory");
    impl->sew = sew;
    snn_module *m = snn_module_new(&block_ops, impl);
    if (!m) {
        snn_free(impl, sizeof *impl, SNN_CPU);
        return NULL;
    }
    snn_status s = SNN_OK;
    if (s == SNN_OK) s = snn_module_add(m, "conv1", snn_conv2d_new(in, out, 3, stride, 1, false, rng));
    if (s == SNN_OK) s = snn_module_add(m, "bn1", snn_batchnorm2d_new(out));
    if (s == SNN_OK) s = snn_module_add(m, "sn1", snn_neuron_layer_new(neuron));
    if (s == SNN_OK) s = snn_module_add(m, "conv2", snn_conv2d_new(out, out, 3, 1, 1, false, rng));
    if (s == SNN_OK) s = snn_module_add(m, "bn2", snn_batchnorm2d_new(out));
    if (s == SNN_OK) s = snn_module_add(m, "sn2", snn_neuron_layer_new(neuron));
    if (s == SNN_OK && (stride != 1 || in != out)) {
        snn_module *down = snn_sequential_new();
        if (!down) s = snn_last_status();
        if (s == SNN_OK) s = snn_module_add(down, "0", snn_conv2d_new(in, out, 1, stride, 0, false, rng));
        if (s == SNN_OK) s = snn_module_add(down, "1", snn_batchnorm2d_new(out));
        if (s == SNN_OK && sew) s = snn_module_add(down, "2", snn_neuron_layer_new(neuron));
        if (s == SNN_OK) s = snn_module_add(m, "downsample", down);
        else snn_module_free(down);
    }
    if (s != SNN_OK) {
        snn_module_free(m);
        return NULL;
    }
    return m;
}

/* children: conv1 bn1 sn1 layer1..layer4 avgpool flatten fc */
static snn_tensor *resnet_forward(snn_module *m, snn_tensor *x)
{
    snn_model_impl *impl = m->impl;
    if (snn_model_check_input("ResNet", &impl->config, x, true) != SNN_OK) return NULL;
    return snn_model_run(m, x);
}

const snn_module_ops snn_resnet_model_ops = {"SpikingResNet18", resnet_forward, snn_model_free_impl, NULL};

snn_module *snn_resnet18_new(const snn_model_config *c, snn_rng *rng)
{
    snn_model_impl *impl = snn_alloc(sizeof *impl, SNN_CPU);
    if (!impl) return snn_error_null(SNN_ERR_MEMORY, "snn_model_new: out of host memory");
    *impl = (snn_model_impl){*c, c->seed};
    snn_module *m = snn_module_new(&snn_resnet_model_ops, impl);
    if (!m) {
        snn_free(impl, sizeof *impl, SNN_CPU);
        return NULL;
    }
    bool sew = c->kind == SNN_MODEL_SEW_RESNET18;
    int w = c->width_base;
    snn_status s = SNN_OK;
    if (s == SNN_OK) s = snn_module_add(m, "conv1", snn_conv2d_new(c->in_channels, w, 3, 1, 1, false, rng));
    if (s == SNN_OK) s = snn_module_add(m, "bn1", snn_batchnorm2d_new(w));
    if (s == SNN_OK) s = snn_module_add(m, "sn1", snn_neuron_layer_new(&c->neuron));
    int in = w;
    for (int layer = 0; layer < 4 && s == SNN_OK; layer++) {
        int out = w << layer, stride = layer ? 2 : 1;
        snn_module *seq = snn_sequential_new();
        if (!seq) s = snn_last_status();
        if (s == SNN_OK) s = snn_module_add(seq, "0", block_new(in, out, stride, sew, &c->neuron, rng));
        if (s == SNN_OK) s = snn_module_add(seq, "1", block_new(out, out, 1, sew, &c->neuron, rng));
        char name[16];
        snprintf(name, sizeof name, "layer%d", layer + 1);
        if (s == SNN_OK) s = snn_module_add(m, name, seq);
        else snn_module_free(seq);
        in = out;
    }
    if (s == SNN_OK) s = snn_module_add(m, "avgpool", snn_adaptive_avg_pool_new());
    if (s == SNN_OK) s = snn_module_add(m, "flatten", snn_flatten_new(2, -1));
    if (s == SNN_OK) s = snn_module_add(m, "fc", snn_linear_new(in, c->classes, true, rng));
    if (s != SNN_OK) {
        snn_module_free(m);
        return NULL;
    }
    return m;
}

/* Floats the ResNet-18 above holds (model_internal.h): the stem conv and batch-norm, per layer
 * two blocks of two 3x3 convs with batch-norms (plus a 1x1 conv and batch-norm where the first
 * block changes the shape), then fc. A batch-norm holds 4 floats per channel. */
double snn_resnet18_param_floats(const snn_model_config *c)
{
    const double w = c->width_base;
    double floats = w * c->in_channels * 9 + 4 * w, in = w;
    for (int layer = 0; layer < 4; layer++) {
        const double out = w * (double)(1 << layer);
        floats += in * out * 9 + out * out * 9 + 8 * out;          /* block 0 */
        if (layer > 0 || in != out) floats += in * out + 4 * out;  /* its downsample */
        floats += 2 * (out * out * 9) + 8 * out;                   /* block 1 */
        in = out;
    }
    return floats + in * c->classes + c->classes;
}
