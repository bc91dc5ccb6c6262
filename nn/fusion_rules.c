/*
 * fusion_rules.c - the fusion rules: which neighbouring layers of a model run as one op.
 *
 * A rule is a pattern (module kinds in the order a forward meets them; "+" is a ResNet block's
 * residual sum, which is not a module), the condition under which it applies, and the fused op
 * that runs in place of the separate ones. Every fused op computes the separate ops' function,
 * in fp32 bit for bit (tests/test_bn_neuron.c, test_bn_neuron_carry.c and
 * test_cuda_bn_neuron.c run models with the rules and without), but for CUDA's fused backward
 * from 17 to 64 steps, equal to rounding (kernels/cuda/lif_bn_backward.cu); what it saves is
 * passes over memory, and memory kept for backward.
 *
 * Who asks, and when. A list of modules (snn_modules_forward: the models' layers, Sequential)
 * asks at each module for the rules that start there; a ResNet block (nn/model_resnet.c) asks
 * for its tail, bn -> + -> neuron (SEW: bn -> neuron), and then for + -> neuron. The first rule
 * in table order whose pattern starts there and whose condition holds runs. The table is read
 * only when the model's option fuse is on (snn_plan_fusion, nn/model_options.c, asks first): a
 * step on the reference kernels, whose default is off, runs every layer on its own and never
 * reaches this file.
 *
 * snn_fusion_rules_print (nn/plan.c) lists the rules; snn_model_explain shows where they ran.
 */
#include "nn_internal.h"
#include "kernels/kernels.h"
#include "kernels/neuron_kernels.h"
#include "tensor/error.h"

/* ---- conditions -------------------------------------------------------------------------- */

/* The neuron layer a batch-norm or a residual feeds: IF or LIF (the kinds the fused kernel
 * implements), and the device's neuron table has that kernel (the reference table has none).
 * A layer that carries its state between forwards (SLTT, time checkpoints) starts from that
 * state: the batch-norm's fused op has variants that take it (snn_batchnorm_neuron_carry and
 * _state, run by snn_neuron_layer_forward_bn); the residual's (no tape) starts from V_reset,
 * so such a layer runs it only when it carries nothing. ALIF, PLIF and ST-BIF stay unfused. */
static bool takes_fused_input(const snn_module *neuron, const snn_tensor *x, bool carrying_ok)
{
    const snn_neuron_layer_impl *n = neuron->impl;
    const snn_neuron_kernels *nk = snn_neuron_kernels_for(x->device);
    return snn_neuron_takes_bn_input(n->config.kind) && nk && nk->lif_bn_forward &&
           (carrying_ok || n->carry == SNN_CARRY_NONE);
}

/* conv -> bn in evaluation: the batch-norm's running statistics fold into the conv's output. */
static bool conv_bn_eval_applies(snn_module *const *items, const snn_tensor *x,
                                 const snn_tensor *residual)
{
    (void)residual;
    const snn_kernels *k = snn_kernels_for(x->device);
    return !items[1]->training && k && k->conv2d_forward_bn_eval;
}

/* bn -> [+] -> neuron in training: the batch statistics over (T, N, H, W) per channel, which
 * sync-BN would gather from every rank (the fused op computes them on its own rank only). */
static bool bn_neuron_applies(snn_module *const *items, const snn_tensor *x,
                              const snn_tensor *residual)
{
    (void)residual;
    const snn_module *bn = items[0], *neuron = items[items[1] ? 1 : 2];
    return bn->training && x->shape.ndim == 5 && !snn_batchnorm_sync_enabled() &&
           takes_fused_input(neuron, x, true);
}

/* bn -> neuron on a directly encoded image's stem (nn/model.c): the batch-norm's input is
 * (N, C, H, W), its output the input of plan->stem_repeat steps. A carrying layer (time
 * checkpoints' segments) takes the repeat and its own variant instead. Only where the device's
 * backward keeps H in registers (lif_bn_backward, up to SNN_NEURON_BN_BACKWARD_MAX_T steps):
 * elsewhere (the CPU) that backward writes H and every step's dL/dX to scratch, 2 T + 1
 * floats an image element at its peak, more than the T + 1 the repeat and the batch-norm's
 * output hold. */
static bool stem_neuron_applies(snn_module *const *items, const snn_tensor *x,
                                const snn_tensor *residual)
{
    const snn_module *bn = items[0], *neuron = items[1];
    const snn_neuron_kernels *nk = snn_neuron_kernels_for(x->device);
    return !residual && bn->plan && bn->plan->stem_repeat > 0 && bn->training &&
           x->shape.ndim == 4 && !snn_batchnorm_sync_enabled() && nk && nk->lif_bn_backward &&
           bn->plan->stem_repeat <= SNN_NEURON_BN_BACKWARD_MAX_T &&
           takes_fused_input(neuron, x, false);
}

/* + -> neuron without a tape: nothing keeps the sum, so it need not be written. */
static bool sum_neuron_applies(snn_module *const *items, const snn_tensor *x,
                               const snn_tensor *residual)
{
    snn_tensor *inputs[2] = {(snn_tensor *)x, (snn_tensor *)residual};
    return residual && !snn_should_record(2, inputs) && takes_fused_input(items[1], x, false);
}

/* ---- fused ops --------------------------------------------------------------------------- */

static snn_tensor *run_conv_bn_eval(const snn_fusion_rule *rule, snn_module *const *items,
                                    snn_tensor *x, snn_tensor *residual)
{
    (void)rule, (void)residual;
    const snn_module *conv = items[0], *bn = items[1];
    const snn_conv_impl *c = conv->impl;
    const snn_batchnorm_impl *b = bn->impl;
    return snn_conv2d_batchnorm_eval(x, conv->params[0].tensor,
                                     c->bias ? conv->params[1].tensor : NULL,
                                     bn->params[0].tensor, bn->params[1].tensor,
                                     bn->params[2].tensor, bn->params[3].tensor, b->eps,
                                     c->stride, c->pad);
}

/* bn -> neuron and bn -> + -> neuron: the neuron is the pattern's last item */
static snn_tensor *run_bn_neuron(const snn_fusion_rule *rule, snn_module *const *items,
                                 snn_tensor *x, snn_tensor *residual)
{
    snn_module *bn = items[0], *neuron = items[rule->length - 1];
    const snn_batchnorm_impl *b = bn->impl;
    /* the layer runs it: snn_batchnorm_neuron, the variant of its carry mode, or on the
     * repeated stem (x (N, C, H, W), the input of plan->stem_repeat steps) the repeat's */
    const int repeat = rule->applies == stem_neuron_applies ? bn->plan->stem_repeat : 0;
    const snn_neuron_bn_feed feed = {bn->params[0].tensor, bn->params[1].tensor,
                                     bn->params[2].tensor, bn->params[3].tensor,
                                     snn_batchnorm_train_momentum(bn), b->eps, residual, repeat,
                                     NULL, NULL};
    return snn_neuron_layer_forward_bn(neuron, x, &feed);
}

snn_tensor *snn_fusion_run_shortcut_bn(const snn_fusion_rule *rule, snn_module *const *items,
                                       snn_tensor *x, snn_tensor *rx, snn_module *downsample)
{
    SNN_ASSERT(rule->run == run_bn_neuron && rule->length == 3 &&
               rule->applies != stem_neuron_applies);
    SNN_ASSERT(downsample->n_children == 2);
    snn_module *shortcut_bn = downsample->children[1];
    SNN_ASSERT(shortcut_bn->ops == &snn_batchnorm2d_ops && shortcut_bn->training);
    snn_module *bn = items[0], *neuron = items[2];
    const snn_batchnorm_impl *b = bn->impl, *rb = shortcut_bn->impl;
    const snn_batchnorm_args r = {shortcut_bn->params[0].tensor, shortcut_bn->params[1].tensor,
                                  shortcut_bn->params[2].tensor, shortcut_bn->params[3].tensor,
                                  snn_batchnorm_train_momentum(shortcut_bn), rb->eps};
    const snn_neuron_bn_feed feed = {bn->params[0].tensor, bn->params[1].tensor,
                                     bn->params[2].tensor, bn->params[3].tensor,
                                     snn_batchnorm_train_momentum(bn), b->eps, NULL, 0, rx, &r};
    snn_tensor *y = snn_neuron_layer_forward_bn(neuron, x, &feed);
    if (snn_plan_is_tracing(bn)) snn_plan_trace_fused(rule, items, downsample, x, y);
    return y;
}

static snn_tensor *run_sum_neuron(const snn_fusion_rule *rule, snn_module *const *items,
                                  snn_tensor *x, snn_tensor *residual)
{
    (void)rule;
    snn_neuron_layer_impl *n = items[1]->impl;
    snn_tensor *activity = NULL;
    snn_tensor *spikes = snn_neuron_multistep_residual(x, residual, &n->config, &activity);
    return snn_neuron_layer_remember(items[1], spikes, activity);
}

/* ---- the table --------------------------------------------------------------------------- */

const snn_fusion_rule snn_fusion_rules[] = {
    {"conv -> bn (evaluation)", 2, {&snn_conv2d_ops, &snn_batchnorm2d_ops, NULL},
     "evaluation mode; a plain Conv2d (not one the sparse pass swapped in); the device's "
     "kernel table has conv2d_forward_bn_eval",
     "snn_conv2d_batchnorm_eval",
     "the running statistics scale and shift the conv's output as it is written: one tensor "
     "and one pass over memory fewer",
     conv_bn_eval_applies, run_conv_bn_eval},
    {"bn -> neuron (training)", 2, {&snn_batchnorm2d_ops, &snn_neuron_layer_ops, NULL},
     "training mode; IF or LIF neurons; a (T, N, C, H, W) input; sync-BN off; the device's "
     "neuron table has lif_bn_forward",
     "snn_batchnorm_neuron (snn_batchnorm_neuron_carry / _state for a layer that carries its "
     "state)",
     "statistics, normalisation and the neurons' time loop in one pass over the input, not "
     "three; neither the batch-norm's output nor H is kept for backward (H is recomputed), and "
     "the spikes' bits are written with them",
     bn_neuron_applies, run_bn_neuron},
    {"bn -> neuron (repeated stem)", 2, {&snn_batchnorm2d_ops, &snn_neuron_layer_ops, NULL},
     "training mode; the stem of a directly encoded image at T > 1, whose batch-norm output "
     "every step reads; IF or LIF neurons that carry no state; sync-BN off; the device's "
     "neuron table has lif_bn_forward and the one-pass lif_bn_backward for T steps (CUDA: "
     "T <= 64; not the CPU)",
     "snn_batchnorm_neuron_repeat",
     "as bn -> neuron, and the image's batch-norm output is read at every step, never "
     "repeated over T: the repeat's copy, the batch-norm's output and H are not kept",
     stem_neuron_applies, run_bn_neuron},
    {"bn -> + -> neuron (training)", 3, {&snn_batchnorm2d_ops, NULL, &snn_neuron_layer_ops},
     "as bn -> neuron, in a ResNet block whose neuron follows the residual sum; in a plain "
     "block that downsamples, with a tape and neurons that carry no state, the shortcut's "
     "batch-norm joins (snn_batchnorm_neuron_bn_residual, nn/model_resnet.c)",
     "snn_batchnorm_neuron (with the residual)",
     "as bn -> neuron, and the shortcut is added as the input is loaded: the sum is never "
     "written, nor a downsampling shortcut's batch-norm output, made as it is loaded",
     bn_neuron_applies, run_bn_neuron},
    {"+ -> neuron (no tape)", 2, {NULL, &snn_neuron_layer_ops, NULL},
     "no tape (evaluation, or snn_no_grad); IF or LIF neurons that carry no state; the "
     "device's neuron table has lif_bn_forward",
     "snn_neuron_multistep_residual",
     "the neurons add the shortcut as they load their input: the sum is never written",
     sum_neuron_applies, run_sum_neuron},
};
const int snn_fusion_rule_count = (int)(sizeof snn_fusion_rules / sizeof snn_fusion_rules[0]);

/* True when items[0..rule->length) are of the kinds of rule's pattern. */
static bool pattern_matches(const snn_fusion_rule *rule, snn_module *const *items, int n)
{
    if (n < rule->length) return false;
    for (int i = 0; i < rule->length; i++) {
        const snn_module_ops *kind = items[i] ? items[i]->ops : NULL;
        if (kind != rule->pattern[i]) return false;
    }
    return true;
}

const snn_fusion_rule *snn_fusion_find(snn_module *const *items, int n, const snn_tensor *x,
                                       const snn_tensor *residual)
{
    for (int r = 0; r < snn_fusion_rule_count; r++) {
        const snn_fusion_rule *rule = &snn_fusion_rules[r];
        if (pattern_matches(rule, items, n) && rule->applies(items, x, residual)) return rule;
    }
    return NULL;
}

snn_tensor *snn_fusion_run(const snn_fusion_rule *rule, snn_module *const *items, snn_tensor *x,
                           snn_tensor *residual)
{
    const snn_module *first = items[0] ? items[0] : items[1];
    if (first->plan && first->plan->synops) snn_synops_observe(first->plan->synops, first, x);
    snn_tensor *y = rule->run(rule, items, x, residual);
    if (snn_plan_is_tracing(first)) snn_plan_trace_fused(rule, items, NULL, x, y);
    return y;
}
