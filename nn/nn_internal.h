/*
 * nn_internal.h - the kind-specific state of nn's layers, shared inside nn/ (model builders and
 * the sparse pass look into it), the ops tables that identify each kind, and what the modules'
 * forwards ask of the execution plan (nn/plan.h): options, fusion rules, the trace.
 */
#ifndef SNN_NN_INTERNAL_H
#define SNN_NN_INTERNAL_H

#include "nn.h"

/* A Conv2d or Linear layer's presynaptic trace for OTTT (nn/synapse_trace.c). */
typedef struct snn_synapse_trace {
    snn_tensor *trace;   /* OWNED, the input's shape; NULL until the first traced forward */
    float decay;         /* lambda: a[t] = lambda a[t-1] + x[t] */
    bool on;             /* snn_synapse_layers_set_trace */
} snn_synapse_trace;

/* With s on: a[t] = lambda a[t-1] + x into s's trace (made for x's shape and device, zero, at
 * the first step or when they change), *trace = it; off: *trace = NULL. SNN_ERR_ARGUMENT
 * (naming fn) for an x of more than one time step, SNN_ERR_MEMORY. */
snn_status snn_synapse_trace_step(const char *fn, snn_synapse_trace *s, const snn_tensor *x,
                                  snn_tensor **trace);
void snn_synapse_trace_reset(snn_synapse_trace *s);   /* a = 0: a new sequence */
void snn_synapse_trace_free(snn_synapse_trace *s);

typedef struct snn_conv_impl {
    int in_channels, out_channels, kernel, stride, pad;
    bool bias;
    snn_synapse_trace trace;   /* OTTT, off unless set */
} snn_conv_impl;

typedef struct snn_linear_impl {
    snn_synapse_trace trace;   /* OTTT, off unless set */
} snn_linear_impl;

typedef struct snn_batchnorm_impl {
    float momentum, eps;
    int64_t batches_tracked;  /* the host's copy of the buffer num_batches_tracked */
    bool tracked_known;       /* batches_tracked was read from the buffer (at the first
                                 training forward) */
} snn_batchnorm_impl;

/* Counts one training batch of the BatchNorm2d `bn` and returns the momentum its running
 * statistics move by for it: max(momentum, 1 / (batches before it + 1)), an average of the
 * first batches (nn/layer_norm.c says why). Every training-mode forward calls it once: the
 * layer's own and a fused op's that runs it (nn/fusion_rules.c). */
float snn_batchnorm_train_momentum(snn_module *bn);

typedef struct snn_pool_impl {
    int kernel, stride;
} snn_pool_impl;

typedef struct snn_flatten_impl {
    int start, end;
} snn_flatten_impl;

typedef struct snn_dropout_impl {
    float p;
    uint64_t seed;            /* advanced on every training forward: a new mask each call (a
                                 model with config.dropout sets it first: model.c) */
    int shared_dims;          /* leading dims that share one mask (snn_dropout_shared) */
} snn_dropout_impl;

typedef struct snn_neuron_layer_impl {
    snn_neuron_config config;
    /* the last forward's output and activity (STEP tensors of that step) */
    snn_tensor *last_spikes, *last_activity;
    uint64_t last_step;       /* snn_step_id() of that forward; stale once the step closes */
    bool consume_input;       /* its input is dead after it: H may take the input's place */
    snn_state_carry carry;    /* keeps V (and A) between forwards: snn_neuron_layer_set_carry */
    snn_tensor *v_state, *a_state; /* OWNED, (N, ...) of one step; made by the first forward */
    /* SNN_CARRY_DIFFERENTIABLE: the last forward's state in (leaves) and out (STEP tensors) */
    snn_tensor *seg_v_in, *seg_a_in, *seg_v_out, *seg_a_out;
    double spikes_sum;        /* running totals for the firing rate across steps */
    double elements_sum;
} snn_neuron_layer_impl;

/* Adds a trainable OWNED parameter of `shape` drawn from U(-bound, bound) (PyTorch's default
 * initialisation of conv and linear layers uses bound = 1 / sqrt(fan_in)). */
snn_status snn_module_add_uniform(snn_module *m, const char *name, snn_shape shape, float bound,
                                  snn_rng *rng);

/* The ops table of each kind: a module's kind is its ops pointer. */
extern const snn_module_ops snn_conv2d_ops;
extern const snn_module_ops snn_batchnorm2d_ops;
extern const snn_module_ops snn_linear_ops;
extern const snn_module_ops snn_max_pool2d_ops;
extern const snn_module_ops snn_avg_pool2d_ops;
extern const snn_module_ops snn_adaptive_avg_pool_ops;
extern const snn_module_ops snn_flatten_ops;
extern const snn_module_ops snn_dropout_ops;
extern const snn_module_ops snn_sequential_ops;
extern const snn_module_ops snn_neuron_layer_ops;
extern const snn_module_ops snn_recurrent_layer_ops; /* nn/layer_recurrent.c */

/* ---- the execution plan (nn/plan.h) ------------------------------------------------------ */

/* A model's plan, held in the model (model_internal.h) and pointed to by every module of its
 * tree (snn_module.plan): the options its forwards run with, and the trace snn_model_explain
 * prints. */
struct snn_plan {
    snn_model_options options;    /* as snn_model_set_options set them */
    bool options_set;             /* false: the defaults where each forward runs */
    bool tracing;                 /* snn_model_trace_plan armed a trace not finished yet */
    struct snn_plan_trace *trace; /* owned (nn/plan.c); NULL until a trace is asked for */
    struct snn_synops *synops;    /* a SynOps count armed on the model (nn/synops.c), or NULL */
    bool one_step;                /* the forward runs at T = 1 (an online step's, nn/model.c):
                                   * in training without a tape each conv output goes back to
                                   * the step pool once read (snn_values_forward_done) */
    int stem_repeat;              /* > 0 while a directly encoded image's stem runs (nn/model.c):
                                   * its batch-norm's output is the input of this many steps,
                                   * which the rule "bn -> neuron (repeated stem)" reads */
};
typedef struct snn_plan snn_plan;

/* The options a module of `plan` (NULL: a module outside any model) runs with on `device`:
 * those set, else snn_model_options_default(device) (nn/model_options.c). */
snn_model_options snn_plan_options(const snn_plan *plan, snn_device device);
/* Points m and every module under it at `plan`. */
void snn_module_set_plan(snn_module *m, snn_plan *plan);
/* True while a trace of m's model is armed or records (snn_model_trace_plan): the forward
 * notes its ops. (A function, not an inline one: a header that runs code counts in the
 * learner's path, tools/learner_path.sh.) */
bool snn_plan_is_tracing(const snn_module *m);

/* A fusion rule (nn/fusion_rules.c): a pattern of module kinds in the order a forward meets
 * them, the condition under which it applies, and the fused op that runs in their place. A
 * forward shows the rules the modules it is about to run, with NULL standing for a ResNet
 * block's residual sum (not a module). */
typedef struct snn_fusion_rule snn_fusion_rule;
struct snn_fusion_rule {
    const char *name;                   /* "bn -> neuron (training)" */
    int length;                         /* the modules (and sums) the pattern covers */
    const snn_module_ops *pattern[3];   /* their kinds in order; NULL: the residual sum */
    const char *condition;              /* when it applies, in words (besides option fuse) */
    const char *fused_op;               /* the op that runs instead */
    const char *why;                    /* what running them as one op saves */
    bool (*applies)(snn_module *const *items, const snn_tensor *x, const snn_tensor *residual);
    snn_tensor *(*run)(const snn_fusion_rule *rule, snn_module *const *items, snn_tensor *x,
                       snn_tensor *residual);
};
/* The table, in the order the rules are tried. */
extern const snn_fusion_rule snn_fusion_rules[];
extern const int snn_fusion_rule_count;
/* The rule that runs items[0], items[1], ... (n of them; x enters items[0], residual is the
 * block's shortcut where a sum is among them, or NULL) as one op, or NULL: the plan's option
 * fuse is off (then the rule table is not read: nn/model_options.c), or no rule's pattern and
 * condition hold. */
const snn_fusion_rule *snn_plan_fusion(snn_module *const *items, int n, const snn_tensor *x,
                                       const snn_tensor *residual);
/* The same, without the option check: the first rule of the table that matches. */
const snn_fusion_rule *snn_fusion_find(snn_module *const *items, int n, const snn_tensor *x,
                                       const snn_tensor *residual);
/* Runs `rule`'s fused op on the items it matched: their output (spikes, for the neuron rules,
 * with the neuron layer's bookkeeping), or NULL with the error set. */
/* The fused ResNet tail bn -> + -> neuron (rule, items: as snn_fusion_run's) whose residual is
 * the batch-norm of `downsample` (conv 1x1, batch-norm) on the shortcut conv's output rx, run
 * as one op that never stores that batch-norm's output (snn_batchnorm_neuron_bn_residual);
 * what the shortcut's batch-norm module would do besides (its momentum's count) is done, and a
 * trace notes it (snn_model_explain). Training with a tape: nn/model_resnet.c asks first. */
snn_tensor *snn_fusion_run_shortcut_bn(const snn_fusion_rule *rule, snn_module *const *items,
                                       snn_tensor *x, snn_tensor *rx, snn_module *downsample);
snn_tensor *snn_fusion_run(const snn_fusion_rule *rule, snn_module *const *items, snn_tensor *x,
                           snn_tensor *residual);

/* The model's promise that no forward op reads the spikes t again, made by `reader`, the
 * module that read them last: snn_spikes_pack where t is packable (spikes from the pool)
 * and reader's plan keeps spikes as bits (option pack_spikes); else nothing. SNN_OK, or the
 * pack's error (out of memory). */
snn_status snn_spikes_forward_done(const snn_module *reader, snn_tensor *t);
/* Whether the spikes t, about to be read by Conv2d `conv` as their last forward reader, may be
 * done with before it (snn_spikes_forward_done): packing is on and the conv reads them as bits
 * (snn_conv2d_reads_bits), and nothing else reads its input (OTTT's trace, a SynOps count, a
 * plan trace). The conv's output may then take the block of their floats. */
bool snn_spikes_pack_before_conv(const snn_module *conv, const snn_tensor *t);
/* Conv2d `conv` on x takes its output from the step pool (snn_conv2d_to_pool): in training,
 * with a tape where its plan keeps conv outputs as bf16 (option keep_bf16), and without one in
 * a model run at T = 1 (plan->one_step; snn_values_forward_done gives it back). */
bool snn_conv_output_to_pool(const snn_module *conv, const snn_tensor *x);
/* The model's promise that no op reads t, a conv output from the pool, after `reader`, a
 * training-mode batch-norm (alone or the first item of a fused op): in a forward without a
 * tape (the online step's forward-only time steps) t goes back to the step pool at once, so
 * that such a forward holds one layer's conv output at a time, not all of them; else nothing. */
void snn_values_forward_done(const snn_module *reader, snn_tensor *t);
/* Whether a model with options o keeps its conv outputs as bf16 (option keep_bf16, unless the
 * batch-norms are synced across ranks): what snn_bf16_keep_applies, the ResNet block's packing
 * (model_resnet.c) and the memory walk (model_memory.c) all ask. */
bool snn_options_keep_bf16(const snn_model_options *o);
/* True when t, a conv output from the pool, is about to be read by `reader`, a training-mode
 * batch-norm (alone or the first item of a fused op) whose plan keeps such outputs as bf16:
 * the caller then rounds t (snn_values_round_bf16) before the read and keeps it as bf16
 * (snn_values_keep_bf16) after it, t's last forward reader. */
bool snn_bf16_keep_applies(const snn_module *reader, const snn_tensor *t);
/* The n modules of ch in order on x, where a fusion rule takes some of them (snn_plan_fusion)
 * by its fused op. Spikes made inside the run and then taken by a Conv2d, their only reader in
 * a list, are done with after it (snn_spikes_forward_done); x itself belongs to the caller. */
snn_tensor *snn_modules_forward(snn_module *const *ch, int n, snn_tensor *x);
/* Records what a neuron layer's forward made (its spikes and per-plane activity), for the
 * firing-rate and sparse-pass readers; returns spikes (nn/layer_neuron.c). */
snn_tensor *snn_neuron_layer_remember(snn_module *m, snn_tensor *spikes, snn_tensor *activity);
/* A training-mode batch-norm (and a residual) feeding a neuron layer as one op (the fusion
 * rules, nn/fusion_rules.c), in snn_batchnorm_neuron's argument order. */
typedef struct snn_neuron_bn_feed {
    snn_tensor *gamma, *beta, *running_mean, *running_var;
    float momentum, eps;
    snn_tensor *residual;     /* or NULL */
    int repeat;               /* > 0: x is (N, C, H, W), the input of this many steps (the
                               * repeated stem: snn_batchnorm_neuron_repeat); no residual */
    /* or the residual a training-mode batch-norm's output, r(residual_x), made by the neurons
     * as they load it (snn_batchnorm_neuron_bn_residual; residual NULL, repeat 0) */
    snn_tensor *residual_x;
    const snn_batchnorm_args *residual_bn;
} snn_neuron_bn_feed;
/* Runs IF / LIF neuron layer m on bn(x) [+ residual] as one op: snn_batchnorm_neuron, or for a
 * layer that carries its state, its _carry / _state variant with the state handled as the
 * layer's own forward handles it (nn/layer_neuron.c). Remembers what it made; returns spikes. */
snn_tensor *snn_neuron_layer_forward_bn(snn_module *m, snn_tensor *x, const snn_neuron_bn_feed *bn);
/* True for the layers whose state is a snn_neuron_layer_impl, which the firing-rate, activity
 * and model readers look into: NeuronLayer and the recurrent layer (nn/layer_recurrent.c). */
bool snn_module_is_neuron_layer(const snn_module *m);

/* The trace (nn/plan.c), called only while snn_plan_is_tracing: the forward of m, with m's
 * dotted name on the trace's path and, for a layer, what it ran; a model's forward from x
 * begins and ends the recording; a fused op and a block's plain residual sum note themselves. */
snn_tensor *snn_plan_trace_forward(snn_module *m, snn_tensor *x);
void snn_plan_trace_begin(snn_plan *plan, const snn_module *model, const snn_tensor *x);
void snn_plan_trace_end(snn_plan *plan);
/* downsample: NULL, or the tail of snn_fusion_run_shortcut_bn, which also made that
 * shortcut's batch-norm output (one entry for both) */
void snn_plan_trace_fused(const snn_fusion_rule *rule, snn_module *const *items,
                          const snn_module *downsample, const snn_tensor *x, const snn_tensor *y);
void snn_plan_trace_sum(const snn_module *block, const snn_tensor *x, const snn_tensor *y);
/* A module run on its own whose parent's forward did not run (the conv of a downsample whose
 * batch-norm a fused tail takes): `parent`'s name on the trace's path around it. */
void snn_plan_trace_enter(const snn_module *parent);
void snn_plan_trace_leave(const snn_module *parent);
/* Frees a plan's trace (the model's free calls it where a trace was made). */
void snn_plan_trace_free(struct snn_plan_trace *trace);
/* A forward of m on x about to run while a SynOps count is armed on m's model (nn/synops.h):
 * a Conv2d's or Linear's input is counted, any other module is passed over. */
void snn_synops_observe(struct snn_synops *s, const snn_module *m, const snn_tensor *x);
/* A recurrent layer's forward just made `spikes` (T, N, F): its recurrent product's input,
 * S[0..T-2] fanned out to F neurons, is counted (nn/synops.c). */
void snn_synops_observe_recurrent(struct snn_synops *s, const snn_module *m,
                                  const snn_tensor *spikes);

/* The layers only a converted network has (nn/layer_ann2snn.c). The constructors take over the
 * OWNED tensors given (and free them on failure). */
extern const snn_module_ops snn_first_step_bias_ops;
extern const snn_module_ops snn_first_step_linear_ops;
extern const snn_module_ops snn_running_max_pool2d_ops;
snn_module *snn_first_step_bias_new(snn_tensor *bias);
snn_module *snn_first_step_linear_new(snn_tensor *weight, snn_tensor *bias);

#endif /* SNN_NN_INTERNAL_H */
