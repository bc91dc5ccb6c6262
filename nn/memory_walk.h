/*
 * memory_walk.h - the bookkeeping of the memory estimate's walk (internal): the state that
 * nn/memory_layers.c's layers fill in as nn/model_memory.c walks a model with shapes only,
 * and the accounting of each thing an op allocates (nn/memory_walk.c): an output, a tape node,
 * spikes from the step pool and their bits, a backward's scratch; then the replay of the step
 * pool that gives its blocks.
 *
 * Tensors are named by ids: in training, tape node i made tensor i; -1 is a tensor that gets
 * no gradient (the input batch) or a walk without a tape.
 */
#ifndef SNN_MEMORY_WALK_H
#define SNN_MEMORY_WALK_H

#include <stdbool.h>

#include "kernels/kernels.h"
#include "neurons/neurons.h"
#include "nn/module.h" /* snn_state_carry */

/* The most tape nodes a model's step records: ResNet-18 makes about 80, ResNet-50 about 200,
 * the DVS net at most 40. */
#define WALK_MAX_NODES 512
/* Scratch of a backward (a conv's workspace, a fused neuron's dL/dX) and the inputs it
 * unpacks from bits: one entry per such op. */
#define WALK_MAX_SCRATCH 256
/* Carried state tensors a walk may record (V, and A for ALIF / ST-BIF, per neuron layer). */
#define WALK_MAX_STATES 256

typedef struct snn_walk {
    const snn_kernels *k;    /* the device's table, for the conv workspace sizes (may be NULL) */
    bool training;           /* a tape: saved tensors, nodes and gradients */
    bool converted;          /* a network converted from a QANN (first-step encoding) */
    double align;            /* the arena's rounding of each device allocation */
    double device;           /* step bytes on the device */
    double host;             /* step bytes in the host arena: tensor structs, tape nodes */
    double workspace;        /* the largest conv workspace */
    bool fusion;             /* batch-norm -> IF / LIF pairs run as one op in training */
    bool conv_bn_fused;      /* conv -> batch-norm pairs run as one op in evaluation */
    bool packing;            /* spikes whose forward readers have run are kept as bits */
    bool keep_bf16;          /* conv outputs read by a batch-norm are kept as bf16 */
    bool one_pass_backward;  /* ... and their backward keeps H in registers (lif_bn_backward) */
    bool bn_sums_fold;       /* ... and makes the batch-norm's sums (snn_bn_neuron_folds_sums) */
    bool traces;             /* OTTT: each conv and linear layer keeps a trace of its input */
    double trace_numel;      /* ... their elements, OWNED and kept across steps */
    double largest;          /* the largest single device allocation */
    double forward_peak;     /* the most the arena held during a conv of the forward */
    double params, trainable;/* elements */
    double buffer_groups;    /* snn_walk_param calls for buffers (each up to 3 tensors) */
    double param_calls;      /* snn_walk_param calls (each up to 3 tensors) */
    /* The neuron layers' state carried between calls (snn_model_memory_estimate_through_time):
     * the walk's T steps are one call's; `state` counts the carried state's elements (V, and
     * A for ALIF and ST-BIF), `state_bytes` the same as device tensors of one layer each. */
    snn_state_carry carry;
    double T;
    double state, state_bytes;
    int states;                          /* the carried state tensors, one per layer and kind */
    double state_numel[WALK_MAX_STATES]; /* ... their elements */
    int state_node[WALK_MAX_STATES];     /* ... the node whose backward takes the state's
                                          * gradient (the layer's neuron op) */
    /* the tape, in training: node i made tensor i (numel[i] elements) from its inputs in[i]
     * (ids of earlier nodes' outputs; -1 for an input that gets no pooled gradient) */
    int nodes;
    double numel[WALK_MAX_NODES];
    int in[WALK_MAX_NODES][2];
    bool retained[WALK_MAX_NODES]; /* its gradient kept to the end of backward (retain_grad) */
    /* its backward hands its gradient's block over to its first input when that has none yet
     * (snn_grad_hand_over: a fused batch-norm -> neuron op's one-pass kernel, a conv that
     * writes dx over dy), instead of taking a new one */
    bool hand_over[WALK_MAX_NODES];
    /* spikes made with a tape come from the step pool (neurons/neuron_op.c); packing gives
     * their block back: the pool's forward events in order (tensor id, taken or given back) */
    bool pooled_spikes[WALK_MAX_NODES], packed[WALK_MAX_NODES];
    bool bits_made[WALK_MAX_NODES]; /* bits written beside the floats by the fused op */
    bool pooled_untaped[WALK_MAX_NODES]; /* from the pool without a tape too (the fused op) */
    /* conv outputs from the step pool (keep_bf16); `packed` once kept as bf16 */
    bool pooled_values[WALK_MAX_NODES], bf16_made[WALK_MAX_NODES];
    int events;
    int event_id[WALK_MAX_NODES];
    bool event_take[WALK_MAX_NODES];
    /* backward scratch: bytes of its own, plus up to two inputs unpacked if they are bits then;
     * consuming_bytes instead where node scratch_node's gradient (-1: none) is not retained (a
     * conv's backward that consumes dy keeps part of its workspace there: fn_conv2d.c) */
    int scratches;
    double scratch_bytes[WALK_MAX_SCRATCH], scratch_consuming_bytes[WALK_MAX_SCRATCH];
    int scratch_node[WALK_MAX_SCRATCH];
    int scratch_unpacks[WALK_MAX_SCRATCH][2];
} snn_walk;

/* bytes rounded up to a multiple of align */
double snn_walk_round_up(double bytes, double align);
/* A tensor's struct in the host arena. */
double snn_walk_struct_bytes(void);
/* A tape node with its op's saved state, in the host arena. */
double snn_walk_node_bytes(void);
/* One device allocation of `numel` 4-byte elements. */
void snn_walk_alloc(snn_walk *w, double numel);
/* A parameter (or buffer) of `numel` elements. */
void snn_walk_param(snn_walk *w, double numel, bool trainable);
/* A step tensor that never gets a gradient (the input batch, labels, argmax, one-hot). */
void snn_walk_constant(snn_walk *w, double numel);
/* In training, a tape node making a tensor of `numel` elements from in0 and in1 (ids, or -1):
 * the node and the gradient's struct in the host arena, the gradient's data recorded for the
 * pool. Returns the tensor's id; -1 without a tape. */
int snn_walk_record(snn_walk *w, double numel, int in0, int in1);
/* An op's output, made from in0 and in1; in training also its tape node and gradient. */
int snn_walk_output(snn_walk *w, double numel, int in0, int in1);
/* The spikes of an IF / LIF / PLIF layer made from in0 and in1: in training they come from the
 * step pool (neurons/neuron_op.c), else they are an output as any other. */
int snn_walk_spikes_output(snn_walk *w, double numel, int in0, int in1);
/* The bits of `numel` spikes in the arena: 1/32 of the floats, in 4-byte words. */
double snn_walk_bits_bytes(const snn_walk *w, double numel);
/* snn_spikes_forward_done on tensor `id`: with packing on, spikes from the pool become bits in
 * the arena and give their block back; else nothing (the block stays taken to the end). */
void snn_walk_spikes_done(snn_walk *w, int id);
/* A conv's output: with keep_bf16 in training it comes from the step pool (snn_conv2d_to_pool),
 * else it is an output as any other. */
int snn_walk_conv_output(snn_walk *w, double numel, int in);
/* snn_values_round_bf16 on tensor `id` (a conv output from the pool): its bf16 copy, 2 B an
 * element in the arena; snn_walk_bf16_done then gives its block back and marks it kept, so a
 * backward that reads it unpacks it (4 B an element). Nothing for any other tensor. */
void snn_walk_bf16_round(snn_walk *w, int id);
void snn_walk_bf16_done(snn_walk *w, int id);
/* A view (flatten, reshape) of `in`: a struct, and in training a node and a gradient of its own. */
int snn_walk_view(snn_walk *w, double numel, int in);
/* A backward that takes `bytes` of scratch and reads tensors u0 and u1 (ids, or -1), which it
 * unpacks (4 B an element, autograd/spike_pack.c) if they are bits (or bf16) by then. */
void snn_walk_backward_scratch(snn_walk *w, double bytes, int u0, int u1);
/* The last backward scratch takes `bytes` instead where node `node`'s gradient is not retained
 * (it is then the backward's to write over). */
void snn_walk_backward_scratch_consuming(snn_walk *w, int node, double bytes);
/* The largest backward scratch, with the unpacked inputs (a node's smaller one where its
 * gradient is not retained). */
double snn_walk_largest_backward_scratch(const snn_walk *w);
/* The bytes the step pool holds after the step (the replay in nn/memory_walk.c). */
double snn_walk_gradient_pool_bytes(const snn_walk *w);
/* The step pool's blocks after a step checkpointed over time (app/train_segments.c): the
 * backward of `last` (the last segment's walk: the loss seeds it; each layer's neuron op takes
 * the gradient of the state that entered as its backward runs), then, unless `segment` is
 * NULL, the backward of the other segments (`segment`'s walk), each seeded with its logits'
 * and its V_out's gradients besides; the pool's blocks are kept from one segment's backward
 * to the next. */
double snn_walk_segments_pool_bytes(const snn_walk *last, const snn_walk *segment);

#endif /* SNN_MEMORY_WALK_H */
