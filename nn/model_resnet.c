/*
 * model_resnet.c - spiking ResNet-18, -34 and -50, and their SEW variants, with the CIFAR stem.
 *
 *   stem:   conv 3x3 (C_in -> 64w) -> bn -> [repeat over T] -> sn        (no max-pool)
 *   layer1: 64w channels;  layer2: 128w, stride 2;  layer3: 256w, stride 2;  layer4: 512w, stride 2
 *           (ResNet-18: 2, 2, 2, 2 basic blocks; ResNet-34: 3, 4, 6, 3 basic blocks;
 *            ResNet-50: 3, 4, 6, 3 bottleneck blocks, whose outputs are 4x wider: 256w .. 2048w)
 *   then:   global average pool -> flatten -> [dropout] -> fc -> mean over T
 *
 * Basic block of the spiking ResNet (SpikingJelly's spiking_resnet: the neuron sits where the
 * ReLU was, after the residual addition):
 *   out = sn2( bn2(conv2( sn1(bn1(conv1(x))) )) + shortcut(x) ),  shortcut = bn(conv1x1) or x
 * Bottleneck block (ResNet-50; torchvision's "v1.5": the stride sits on the 3x3 conv):
 *   out = sn3( bn3(conv3_1x1( sn2(bn2(conv2_3x3( sn1(bn1(conv1_1x1(x))) ))) )) + shortcut(x) )
 *   conv1: in -> p, conv2: p -> p (stride), conv3: p -> 4p; shortcut = bn(conv1x1) where the
 *   stride or the width changes (the first block of every stage), else x
 * SEW blocks (Fang et al., "Deep Residual Learning in Spiking Neural Networks", 2021), ADD: the
 * last neuron moves before the sum and the shortcut conv gets a neuron of its own,
 *   out = sn_last(bn_last(conv_last(...))) + shortcut(x),  shortcut = sn(bn(conv1x1)) or x
 * so a SEW block passes spikes (integers) around the residual path. Blocks are composed from
 * primitive ops: no hand-written backward. Every conv but the stem's reads spikes (or, in SEW,
 * sums of spikes), so the sparse pass swaps all of them: 19 in ResNet-18, 35 in ResNet-34, 52
 * in ResNet-50 (its 1x1 convs included).
 * Direct encoding: the stem conv and bn run once on N images, then repeat over T (see
 * model_cnn.c for why that is exact).
 */
#include "model_internal.h"
#include "neurons/bn_neuron.h"
#include "tensor/error.h"

typedef struct block_impl {
    bool sew;
    bool bottleneck;
} block_impl;

/* children: conv1 bn1 sn1 conv2 bn2 sn2 [conv3 bn3 sn3] [downsample]: groups of three, the
 * last neuron of the main path is the block's output neuron */
static snn_tensor *block_forward(snn_module *m, snn_tensor *x)
{
    block_impl *b = m->impl;
    snn_module **ch = m->children;
    const int convs = b->bottleneck ? 3 : 2, last = 3 * convs - 1;   /* index of the last neuron */
    snn_module *conv = ch[last - 2], *bn = ch[last - 1], *neuron = ch[last];
    snn_module *downsample = m->n_children > last + 1 ? ch[last + 1] : NULL;
    /* every conv -> bn -> neuron group but the last: a list, where the plan's rules may fuse
     * (nn/fusion_rules.c) */
    snn_tensor *spikes = snn_modules_forward(ch, 3 * (convs - 1), x);
    /* the last group's tail, bn -> + -> neuron (SEW: bn -> neuron, then the sum): one op where
     * a rule says so; the conv's output has the rank of its input */
    snn_module *tail[3] = {bn, b->sew ? neuron : NULL, neuron};
    const snn_fusion_rule *fused = snn_plan_fusion(tail, b->sew ? 2 : 3, spikes, NULL);
    /* in training, the last conv is the last reader of the spikes it reads: the plan keeps
     * them as bits from there, before the tail's spikes are made, so the tail runs beside two
     * of the block's float tensors, not three (x, h; not x, the spikes, h). Where the conv
     * reads bits itself (snn_spikes_pack_before_conv), they are packed before it, so that its
     * output takes their floats' block: the conv, too, runs beside two (x, h). Where the conv
     * outputs are kept as bf16, the step pool's peak is this forward's (H200, B = 32, T = 4:
     * 4.9 -> 3.8 MB an image of pool from packing after the conv). Where the tail's backward
     * hands its spikes' gradient over to h (a one-pass neuron backward, bn_neuron.c), the
     * backward holds two as well. Where it does not, the backward takes a third block anyway,
     * and packing early only changes which blocks the forward leaves in the pool, for the
     * worse (B = 64: 15.2 -> 16.0 MB an image): at the block's end, below */
    const snn_model_options options = snn_plan_options(m->plan, x->device);
    const snn_neuron_layer_impl *tail_neuron = neuron->impl;
    const snn_neuron_dims tail_dims = spikes ? snn_neuron_dims_of(spikes) : (snn_neuron_dims){0};
    const bool hands_over = fused && spikes && tail_neuron->carry != SNN_CARRY_DIFFERENTIABLE &&
                            snn_bn_neuron_one_pass(snn_neuron_kernels_for(spikes->device),
                                                   &tail_dims);
    const bool pack_early = snn_options_keep_bf16(&options) || hands_over;
    const bool pack_before = pack_early && fused && snn_spikes_pack_before_conv(conv, spikes);
    if (pack_before && snn_spikes_forward_done(m, spikes) != SNN_OK) return NULL;
    snn_tensor *h = fused ? snn_module_forward(conv, spikes)               /* bn is the tail's */
                          : snn_modules_forward(ch + last - 2, 2, spikes);  /* conv -> bn */
    if (h && pack_early && !pack_before && snn_spikes_forward_done(m, spikes) != SNN_OK)
        return NULL;
    /* a fused tail in training takes the downsample shortcut bn(conv(x)) as the conv's output
     * and that batch-norm, whose output its neurons make as they load it: a step keeps the
     * conv's output (which the batch-norm's backward reads anyway), not the batch-norm's too
     * (snn_batchnorm_neuron_bn_residual; 0.92 MB an image of a BF16 ResNet-18 step at T = 4).
     * Not for neurons that carry their state (whose ops take a residual made). SynOps count
     * the conv, which runs as a module here too; a trace notes it under the downsample's name,
     * and the tail with the shortcut's batch-norm as one entry */
    snn_module *shortcut_bn = NULL;
    if (h && fused && !b->sew && downsample && downsample->n_children == 2 && snn_grad_enabled() &&
        downsample->children[1]->ops == &snn_batchnorm2d_ops && downsample->children[1]->training &&
        tail_neuron->carry == SNN_CARRY_NONE)
        shortcut_bn = downsample->children[1];
    const bool tracing = snn_plan_is_tracing(m);
    if (shortcut_bn && tracing) snn_plan_trace_enter(downsample);
    snn_tensor *rx = shortcut_bn ? snn_module_forward(downsample->children[0], x) : NULL;
    if (shortcut_bn && tracing) snn_plan_trace_leave(downsample);
    if (shortcut_bn && !rx) return NULL;
    snn_tensor *shortcut = shortcut_bn ? NULL : downsample ? snn_module_forward(downsample, x) : x;
    snn_tensor *y;
    /* the fused tail's batch-norm reads the conv's output last: kept as bf16 where the plan
     * says so (autograd/bf16_keep.c), and the shortcut conv's output likewise. The tail reads
     * their bf16 bits, statistics included: their floats go back to the pool now, before the
     * tail's forward, which would otherwise hold them beside its spikes at the forward's pool
     * peak */
    const bool keep_bf16 = fused && snn_bf16_keep_applies(bn, h);
    const bool keep_rx = shortcut_bn && snn_bf16_keep_applies(shortcut_bn, rx);
    if (keep_bf16 && (snn_values_round_bf16(h) != SNN_OK || snn_values_keep_bf16(h) != SNN_OK))
        return NULL;
    if (keep_rx && (snn_values_round_bf16(rx) != SNN_OK || snn_values_keep_bf16(rx) != SNN_OK))
        return NULL;
    if (b->sew) {
        y = fused ? snn_fusion_run(fused, tail, h, NULL) : snn_module_forward(neuron, h);
        if (y && fused) snn_values_forward_done(bn, h); /* without a tape */
        y = snn_add(y, shortcut);
        if (snn_plan_is_tracing(m)) snn_plan_trace_sum(m, shortcut, y);
    } else if (fused) {
        y = shortcut_bn ? snn_fusion_run_shortcut_bn(fused, tail, h, rx, downsample)
                        : snn_fusion_run(fused, tail, h, shortcut);
        if (y) snn_values_forward_done(bn, h); /* without a tape */
    } else {
        /* h, the last batch-norm's output (bn2, or bn3 in a bottleneck), feeds only this sum: the
         * sum may take its memory (and the last neuron the sum's); without a tape a rule lets
         * the neuron add it as it loads h, and the sum is never written */
        snn_module *sum_neuron[2] = {NULL, neuron};
        const snn_fusion_rule *rule = snn_plan_fusion(sum_neuron, 2, h, shortcut);
        if (rule) {
            y = snn_fusion_run(rule, sum_neuron, h, shortcut);
        } else {
            snn_tensor *sum = snn_add_into(h, shortcut);
            if (snn_plan_is_tracing(m)) snn_plan_trace_sum(m, shortcut, sum);
            y = snn_module_forward(neuron, sum);
        }
    }
    /* in training, the spikes the last conv read (unless kept as bits above) and the block's
     * input (read by the first conv, the shortcut and the sum) are done with: the plan may
     * keep them as bits from here */
    if (y && ((!pack_early && snn_spikes_forward_done(m, spikes) != SNN_OK) ||
              snn_spikes_forward_done(m, x) != SNN_OK))
        return NULL;
    return y;
}

static void block_free(snn_module *m) { snn_free(m->impl, sizeof(block_impl), SNN_CPU); }

static const snn_module_ops block_ops = {"BasicBlock", block_forward, block_free, NULL};
static const snn_module_ops bottleneck_ops = {"Bottleneck", block_forward, block_free, NULL};

/* A block from in channels to `planes` (basic) or 4 * planes (bottleneck) channels. */
static snn_module *block_new(int in, int planes, int stride, bool sew, bool bottleneck,
                             const snn_neuron_config *neuron, snn_rng *rng)
{
    block_impl *impl = snn_alloc(sizeof *impl, SNN_CPU);
    if (!impl) return snn_error_null(SNN_ERR_MEMORY, "snn_model_new: out of host memory");
    impl->sew = sew;
    impl->bottleneck = bottleneck;
    snn_module *m = snn_module_new(bottleneck ? &bottleneck_ops : &block_ops, impl);
    if (!m) {
        snn_free(impl, sizeof *impl, SNN_CPU);
        return NULL;
    }
    const int out = bottleneck ? 4 * planes : planes;
    snn_status s = SNN_OK;
    if (bottleneck) {
        if (s == SNN_OK) s = snn_module_add(m, "conv1", snn_conv2d_new(in, planes, 1, 1, 0, false, rng));
        if (s == SNN_OK) s = snn_module_add(m, "bn1", snn_batchnorm2d_new(planes));
        if (s == SNN_OK) s = snn_module_add(m, "sn1", snn_neuron_layer_new(neuron));
        if (s == SNN_OK) s = snn_module_add(m, "conv2", snn_conv2d_new(planes, planes, 3, stride, 1, false, rng));
        if (s == SNN_OK) s = snn_module_add(m, "bn2", snn_batchnorm2d_new(planes));
        if (s == SNN_OK) s = snn_module_add(m, "sn2", snn_neuron_layer_new(neuron));
        if (s == SNN_OK) s = snn_module_add(m, "conv3", snn_conv2d_new(planes, out, 1, 1, 0, false, rng));
        if (s == SNN_OK) s = snn_module_add(m, "bn3", snn_batchnorm2d_new(out));
        if (s == SNN_OK) s = snn_module_add(m, "sn3", snn_neuron_layer_new(neuron));
    } else {
        if (s == SNN_OK) s = snn_module_add(m, "conv1", snn_conv2d_new(in, out, 3, stride, 1, false, rng));
        if (s == SNN_OK) s = snn_module_add(m, "bn1", snn_batchnorm2d_new(out));
        if (s == SNN_OK) s = snn_module_add(m, "sn1", snn_neuron_layer_new(neuron));
        if (s == SNN_OK) s = snn_module_add(m, "conv2", snn_conv2d_new(out, out, 3, 1, 1, false, rng));
        if (s == SNN_OK) s = snn_module_add(m, "bn2", snn_batchnorm2d_new(out));
        if (s == SNN_OK) s = snn_module_add(m, "sn2", snn_neuron_layer_new(neuron));
    }
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

/* children: conv1 bn1 sn1 layer1..layer4 avgpool flatten [dropout] fc */
static snn_tensor *resnet_forward(snn_module *m, snn_tensor *x)
{
    snn_model_impl *impl = m->impl;
    if (snn_model_check_input("ResNet", &impl->config, x, true) != SNN_OK) return NULL;
    return snn_model_run(m, x);
}

const snn_module_ops snn_resnet_model_ops = {"SpikingResNet", resnet_forward, snn_model_free_impl, NULL};

snn_module *snn_resnet_new(const snn_model_config *c, snn_rng *rng)
{
    snn_model_impl *impl = snn_alloc(sizeof *impl, SNN_CPU);
    if (!impl) return snn_error_null(SNN_ERR_MEMORY, "snn_model_new: out of host memory");
    *impl = (snn_model_impl){.config = *c, .encode_seed = c->seed};
    snn_module *m = snn_module_new(&snn_resnet_model_ops, impl);
    if (!m) {
        snn_free(impl, sizeof *impl, SNN_CPU);
        return NULL;
    }
    const snn_model_kind k = c->kind;
    const bool sew = k == SNN_MODEL_SEW_RESNET18 || k == SNN_MODEL_SEW_RESNET34 ||
                     k == SNN_MODEL_SEW_RESNET50;
    const bool bottleneck = k == SNN_MODEL_RESNET50 || k == SNN_MODEL_SEW_RESNET50;
    const bool deep = bottleneck || k == SNN_MODEL_RESNET34 || k == SNN_MODEL_SEW_RESNET34;
    static const int blocks18[4] = {2, 2, 2, 2}, blocks34[4] = {3, 4, 6, 3};
    const int *blocks = deep ? blocks34 : blocks18;
    int w = c->width_base;
    snn_status s = SNN_OK;
    if (s == SNN_OK) s = snn_module_add(m, "conv1", snn_conv2d_new(c->in_channels, w, 3, 1, 1, false, rng));
    if (s == SNN_OK) s = snn_module_add(m, "bn1", snn_batchnorm2d_new(w));
    if (s == SNN_OK) s = snn_module_add(m, "sn1", snn_neuron_layer_new(&c->neuron));
    int in = w;
    for (int layer = 0; layer < 4 && s == SNN_OK; layer++) {
        const int planes = w << layer, out = bottleneck ? 4 * planes : planes;
        snn_module *seq = snn_sequential_new();
        if (!seq) s = snn_last_status();
        for (int b = 0; b < blocks[layer] && s == SNN_OK; b++) {
            char index[16];
            snprintf(index, sizeof index, "%d", b);
            s = snn_module_add(seq, index, block_new(b ? out : in, planes, b || !layer ? 1 : 2, sew,
                                                     bottleneck, &c->neuron, rng));
        }
        char name[16];
        snprintf(name, sizeof name, "layer%d", layer + 1);
        if (s == SNN_OK) s = snn_module_add(m, name, seq);
        else snn_module_free(seq);
        in = out;
    }
    if (s == SNN_OK) s = snn_module_add(m, "avgpool", snn_adaptive_avg_pool_new());
    if (s == SNN_OK) s = snn_module_add(m, "flatten", snn_flatten_new(2, -1));
    /* config.dropout > 0: one dropout layer on the pooled features, its mask drawn once per
     * sample for all T steps (as the CNN's classifier, model_cnn.c); it holds no parameters,
     * so the names and the values drawn for fc are those of a ResNet without it */
    if (s == SNN_OK && c->dropout > 0.0f)
        s = snn_module_add(m, "dropout", snn_dropout_shared_new(c->dropout, 0, 1));
    if (s == SNN_OK) s = snn_module_add(m, "fc", snn_linear_new(in, c->classes, true, rng));
    if (s != SNN_OK) {
        snn_module_free(m);
        return NULL;
    }
    return m;
}

/* Floats the ResNets above hold (model_internal.h), following snn_resnet_new: the stem conv
 * and batch-norm; per block its convs with batch-norms (basic: two 3x3; bottleneck: 1x1, 3x3,
 * 1x1 to 4x the planes), plus a 1x1 conv and batch-norm where the block changes the stride or
 * the width; then fc. A batch-norm holds 4 floats per channel and its count of batches. */
double snn_resnet_param_floats(const snn_model_config *c)
{
    const snn_model_kind k = c->kind;
    const bool bottleneck = k == SNN_MODEL_RESNET50 || k == SNN_MODEL_SEW_RESNET50;
    const bool deep = bottleneck || k == SNN_MODEL_RESNET34 || k == SNN_MODEL_SEW_RESNET34;
    static const int blocks18[4] = {2, 2, 2, 2}, blocks34[4] = {3, 4, 6, 3};
    const int *blocks = deep ? blocks34 : blocks18;
    const double w = c->width_base;
    double floats = w * c->in_channels * 9 + 4 * w + 1, in = w;
    for (int layer = 0; layer < 4; layer++) {
        const double planes = w * (double)(1 << layer), out = bottleneck ? 4 * planes : planes;
        for (int b = 0; b < blocks[layer]; b++) {
            const double bin = b ? out : in;
            if (bottleneck)
                floats += bin * planes + planes * planes * 9 + planes * out + 8 * planes +
                          4 * out + 3;
            else
                floats += bin * out * 9 + out * out * 9 + 8 * out + 2;
            if (b == 0 && (layer > 0 || bin != out)) /* the downsample */
                floats += bin * out + 4 * out + 1;
        }
        in = out;
    }
    return floats + in * c->classes + c->classes;
}
