/**
 * @file
 * plan.h - the execution plan a model owns: which kernel each of its layers runs, which
 * neighbouring layers run as one fused op, whether spikes are kept for backward as bits, and
 * whether conv outputs are kept as bfloat16.
 * Included by nn/nn.h.
 *
 * What decides it. Three options per model (snn_model_options), set with snn_model_set_options;
 * until they are set, the defaults of where the model runs (snn_model_options_default):
 * fusion and packing on with the fast kernels (CPU or CUDA), off with the reference kernels
 * (snn_set_kernels(SNN_KERNELS_REF), SNN_KERNELS=ref), so that a step on them runs the plain
 * ops a student reads; keep_bf16 off (a trade of time for memory, which the program asks for).
 * With fuse on, the fusion rules decide at each forward (nn/fusion_rules.c,
 * printed by snn_fusion_rules_print): each rule is a pattern of module kinds (BatchNorm2d ->
 * NeuronLayer, ...), the condition under which it applies (training or evaluation, the neuron
 * kind, the device's kernel table, the input's rank, sync-BN off, a tape or none), and the fused
 * op that runs instead; a fused op computes the separate ops' function (in fp32, their bits).
 *
 * Seeing it. snn_model_trace_plan arms a trace; the model's next forward notes, for each layer
 * by its dotted name ("layer1.0.conv1"), the op and kernel it ran, its shapes, and the rule
 * that fused it; snn_model_explain prints that, for the device, precision and kernel set of
 * that forward. It traces a real forward rather than walking the model on its own, so what it
 * prints is what ran, with the shapes that ran, and no decision is written twice. Nothing is
 * traced unless asked: an untraced forward pays one test per module.
 *
 *     snn_model_options o = snn_model_options_of(net);
 *     o.pack_spikes = false;                  // keep spikes as floats, e.g. to read them later
 *     snn_model_set_options(net, &o);
 *     snn_model_trace_plan(net);              // the next forward is noted
 *     ... one training step: forward, loss, backward, optimizer ...
 *     snn_model_explain(net, stdout);
 */
#ifndef SNN_NN_PLAN_H
#define SNN_NN_PLAN_H

#include <stdbool.h>
#include <stdio.h>

#include "module.h"

#ifdef __cplusplus
extern "C" {
#endif

/** How a model runs: the same function either way (in fp32 the same bits); the speed and the
 * memory differ. */
typedef struct snn_model_options {
    /** Run the fusion rules (snn_fusion_rules_print): e.g. a training-mode batch-norm and the
     * IF / LIF layer after it as one op, snn_batchnorm_neuron, that keeps neither the
     * batch-norm's output nor the membrane for backward. Off: every layer its own op. */
    bool fuse;
    /** In training, keep a layer's spikes for backward as bits once the forward ops that read
     * them have run (snn_spikes_pack): 1/32 of the memory. Off: kept as floats, which the
     * program may read after the forward (snn_neuron_layer_last_spikes). */
    bool pack_spikes;
    /** In training, round the output of each conv that a batch-norm reads to bfloat16 and keep
     * it for backward in 2 bytes an element instead of 4 (snn_values_keep_bf16,
     * autograd/bf16_keep.c): forward and backward see the rounded values. It changes the
     * model's function by that rounding, as the BF16 products already do, so it is meant for
     * BF16 runs (snn-train --keep-bf16), though it runs anywhere (the CPU tests use it). Off by
     * default: the rounding and unpacking passes cost a BF16 ResNet-18 step at T = 4 about 7%
     * of its time for 16% of its memory (H200; docs/benchmarks.md). */
    bool keep_bf16;
} snn_model_options;

/** The options a model runs with on `device` until snn_model_set_options: fuse and
 * pack_spikes on, except on the CPU with the reference kernels (snn_get_kernels() ==
 * SNN_KERNELS_REF), where both are off; keep_bf16 off everywhere. Read when a forward runs, so a kernel set chosen after
 * the model was built counts. */
snn_model_options snn_model_options_default(snn_device device);
/** Sets the options of `model` (a model made by snn_model_new, snn_ann_to_snn or a checkpoint
 * load) for its next forwards; NULL goes back to the defaults. Set them between steps.
 * SNN_ERR_ARGUMENT for a module that is not a model. */
snn_status snn_model_set_options(snn_module *model, const snn_model_options *options);
/** The options `model` runs with on the device of its parameters: those set, else the
 * defaults. For a module outside any model (one built by hand), the defaults it runs with. */
snn_model_options snn_model_options_of(const snn_module *model);

/** Arms a trace of `model`'s next forward (snn_module_forward or snn_model_forward_steps),
 * which notes what each layer runs; a trace already made is dropped. The trace costs a few
 * hundred bytes a layer, until the model is freed. SNN_ERR_ARGUMENT for a module that is not
 * a model, SNN_ERR_MEMORY. */
snn_status snn_model_trace_plan(snn_module *model);
/** Prints the plan of `model` to `out`: its options, then, for the forward that
 * snn_model_trace_plan traced, the device, kernel set, precision and mode, and for each layer
 * in forward order its dotted name, input and output shapes, the op and kernel that ran, and
 * the fusion rule that ran it with its neighbours; then the rules and how often each applied.
 * Without a traced forward, the options and the rules, and how to trace one.
 * SNN_ERR_ARGUMENT for a module that is not a model or a NULL out. */
snn_status snn_model_explain(snn_module *model, FILE *out);
/** Prints the fusion rules to `out`, in the order they are tried: each one's pattern, the
 * condition under which it applies, the fused op and what it saves. */
void snn_fusion_rules_print(FILE *out);

#ifdef __cplusplus
}
#endif

#endif /* SNN_NN_PLAN_H */
