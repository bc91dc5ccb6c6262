/*
 * model_memory.c - snn_model_memory_estimate: the bytes a model and one step of it need on its
 * device, computed from the configuration alone, before anything is allocated.
 *
 * Why: a width or batch size too large for the machine used to be found out by the allocator,
 * and with Linux overcommit that means the OOM killer (exit 137, no message) rather than a
 * NULL from malloc. Programs now compare this estimate with snn_device_memory() first and
 * refuse with both numbers (snn-train and snn-eval do).
 *
 * How it is computed. The architecture is a function of the configuration (model_cnn.c,
 * model_resnet.c), and the plan a function of the options (nn/plan.h), so the estimate walks
 * the same layers with shapes only, and adds up what each op allocates, as the ops do it
 * (autograd/fn_*.c, neurons/neuron_op.c); this file holds the layers, nn/memory_walk.c the
 * accounting of each allocation:
 *
 *   parameters   every weight, bias, batch-norm affine and running statistic, PLIF's w, QCLIP's
 *                step
 *   gradients    one per trainable weight (training only; OWNED, allocated by the first backward)
 *   optimizer    `optimizer_states` tensors per trainable weight (SGD momentum 1, Adam 2)
 *   step         the step arena at its high-water mark, plus the step pool's blocks for the
 *                gradients of activations (gradient_pool, below). Nothing is freed from the
 *                arena inside a step, so its mark is the sum of every arena allocation, plus the
 *                largest conv workspace (scratch taken and given back inside one op):
 *                  every op output                       4 B/element
 *                  neuron layers: spike counts per (t, n, c) plane, and in training H[t]
 *                  (the ANN activations ReLU and QCLIP: their output only)
 *                  batch-norm (training): batch mean and 1/std per channel; in evaluation
 *                  its output, or nothing where it runs with the conv before it as one op
 *                  (the rule conv -> bn, nn/fusion_rules.c: option fuse, nn/plan.h)
 *                  batch-norm -> IF / LIF neurons in training, with option fuse on (the
 *                  fast kernels' default): one op (snn_batchnorm_neuron) keeping the
 *                  spikes, the spike counts and the statistics (3 doubles and 2 floats per
 *                  channel), neither the batch-norm's output nor H; its backward takes dL/dX
 *                  (4 B/element) as scratch, and H too (4 B more) where the device has no
 *                  one-pass kernel (the CPU, or T > 64), which counts like a conv's workspace;
 *                  the stem of a directly encoded image at T > 1 runs it on the N images'
 *                  one batch-norm input (snn_batchnorm_neuron_repeat): no repeat over T
 *                  spikes (training, IF / LIF / PLIF): from the step pool, not the arena
 *                  (gradient_pool below); with option pack_spikes on, once the forward's
 *                  readers of a layer's spikes have run (the next conv, a block's shortcut)
 *                  they are kept as bits, 1/32 of the floats, in the arena; a backward that
 *                  reads them unpacks them into scratch (4 B/element) for its length
 *                  max-pool: the argmax of each output   4 B/element (kept even without a tape)
 *                  dropout (training; config.dropout): its mask, one per sample shared over T
 *                  views (flatten, reshape): no data of their own
 *                  the input batch, labels, argmax, one-hot; each tensor's struct, each tape node
 *                  and each gradient's struct (host arena), each allocation rounded up to 64 B
 *                  (host) / 256 B (CUDA)
 *   gradient_pool  (training) the data of the gradients of activations do not sit in the arena:
 *                they come from the step pool (tensor/step_pool.c) when the first consumer's
 *                backward asks for them and go back as soon as the producing op's backward is
 *                done (autograd/backward.c); nor do a training step's spikes, which take
 *                blocks in the forward and give them back when they are packed. What the pool
 *                holds is its blocks, kept across steps, so the estimate records each op's
 *                output and inputs during the walk (the tape, in the same order) and the
 *                spikes' takes and packs, and replays the forward's events, then the backward
 *                pass, against a copy of the pool's policy (nn/memory_walk.c): the sum of the
 *                blocks it ends with is the estimate. This replaced "every gradient for the
 *                whole step", which the pool made 60-70% too high for training steps.
 *   overhead     fixed per device: the CPU SGEMM's packing buffer per thread; on CUDA the
 *                context's scratch and cuBLAS's workspace (both from snn_alloc) plus
 *                SNN_CUDA_HEADROOM for what lazily loaded kernels take outside snn_alloc
 *
 * Steps through time (snn_model_memory_estimate_through_time; docs/temporal.md). The graph
 * walked is one call's, 1 step (online, SLTT) or K (a segment of a checkpointed step), with
 * each neuron layer carrying its state: the state itself (OWNED, `state`), the copy of the state
 * that entered where backward reads it (online: PLIF, ST-BIF; the fused op leaves the state as
 * it is until its backward, and needs none), a segment's state in and out and their gradients
 * (from the step pool), H apart from the input (the state op's), and the state ops' extra
 * nodes; at T = 1 (online) the stem runs as the layers after it. Around it: the online step's
 * sums; the checkpointed step's C - 2 saved states, the state's gradient, the segments' logits
 * and the model's buffers copied (their structs and the step's tables in the host's step
 * memory). The step pool replays the last segment's backward, then a full segment's
 * (snn_walk_segments_pool_bytes), as the pool keeps its blocks from one to the next. Before
 * this, snn-train estimated these steps as plain ones of 1 or K steps unfused, which it took
 * for an upper bound; tests/test_memory_estimate.c found it 7% (online) and up to 27%
 * (segments) under what they held.
 *
 * A network converted from a QANN (snn_ann_to_snn: first-step encoding, ST-BIF neurons) is
 * walked with the layers the conversion puts in (nn/ann2snn.c), for evaluation only (it is not
 * trained): each batch-norm is a FirstStepBias (one parameter per channel; on the stem a plain
 * add on the N images, elsewhere snn_add_first_step, a new tensor), the stem runs once on the N
 * images and snn_first_step places its output at t = 0 of a (T, N, ...) tensor, a max-pool is a
 * running max-pool (no argmax without a tape), a linear layer with a bias is FirstStepLinear (the
 * product, then the bias added at t = 0: two tensors), and the readout is the sum over T.
 *
 * How close it is: tests/test_memory_estimate.c builds models, runs one training (or
 * evaluation) step on the CPU and compares: parameters, gradients and optimizer state exactly,
 * and the step within a few percent of the arena's measured high-water mark plus the bytes the
 * step pool reserved, never below it (docs/benchmarks.md has the table;
 * tests/test_cuda_memory_estimate.c runs the same probe on CUDA). When an op starts saving more
 * or less, that test says by how much, and this file (with the accounting of each allocation in
 * nn/memory_walk.c) is where to follow.
 *
 * Test: ctest --test-dir build -R memory_estimate
 */
#include <math.h>
#include <string.h>

#include "memory_walk.h"
#include "model_internal.h"
#include "kernels/neuron_kernels.h"
#include "tensor/error.h"
#include "kernels/cpu/gemm.h"

/* What the kernels CUDA loads on first use and the driver's allocation granularity take on the
 * GPU outside snn_alloc: a round margin. */
#define SNN_CUDA_HEADROOM ((double)(256u << 20))
#define SNN_CUDA_CONTEXT_SCRATCH ((double)(8u << 20)) /* kernels/cuda/cuda_common.cuh */
#define SNN_CUDA_BLAS_WORKSPACE ((double)(32u << 20)) /* kernels/cuda/cuda_common.cuh */

/* conv k x k, no bias, on `images` images of (cin, *h, *wd) (tensor `in`); updates *h, *wd to
 * the output. Returns the output's id. */
static int conv(snn_walk *w, int in, double images, int cin, int cout, int k, int stride, int pad,
                int *h, int *wd)
{
    int ho = (*h + 2 * pad - k) / stride + 1, wo = (*wd + 2 * pad - k) / stride + 1;
    snn_walk_param(w, (double)cout * cin * k * k, true);
    if (w->traces) w->trace_numel += images * cin * *h * *wd; /* OTTT: its input's trace */
    int out = snn_walk_conv_output(w, images * cout * ho * wo, in);
    /* the same workspace serves forward and backward; ask the device for sizes its planning
     * arithmetic (int fields) is made for, else take the im2col matrix (C_in K K, images
     * H_out W_out) as the size: a size that large is refused whatever the exact number. On
     * CUDA the size depends on the precision and conv path set now (BF16's im2col matrix is
     * bf16, the implicit-GEMM layers need none), so estimate after snn_set_precision, as the
     * programs do. */
    double ws = 4.0 * cin * k * k * images * ho * wo;
    if (w->k && w->k->conv2d_workspace_bytes && images <= (double)(1 << 24) && ws < 1e12) {
        snn_conv2d_dims d = {(int)images, cin, *h, *wd, cout, k, k, stride, pad, ho, wo};
        ws = (double)w->k->conv2d_workspace_bytes(&d);
        /* dx written over dy (autograd/fn_conv2d.c): the input's gradient takes no block */
        if (out >= 0 && !w->traces && w->k->conv2d_dx_over_dout)
            w->hand_over[out] = w->k->conv2d_dx_over_dout(&d);
    }
    ws = snn_walk_round_up(ws, w->align);
    if (ws > w->workspace) w->workspace = ws;
    /* the workspace, and x unpacked if it is bits by then, on a device whose conv kernels do
     * not read bits (the CPU; on CUDA only the NCHW implicit GEMM, which TF32 and BF16 take for
     * no conv fed by spikes, since the channels-last kernel comes first); with OTTT's trace
     * the backward reads the trace, not x */
    const bool reads_bits = w->k && w->k->conv2d_backward_bits;
    snn_walk_backward_scratch(w, ws, reads_bits || w->traces ? -1 : in, -1);
    if (w->device + ws > w->forward_peak) w->forward_peak = w->device + ws;
    *h = ho, *wd = wo;
    return out;
}

static int batchnorm(snn_walk *w, int in, double numel, int channels)
{
    if (w->converted) { /* FirstStepBias: the folded shift, added into a new tensor */
        snn_walk_param(w, channels, true);
        return snn_walk_output(w, numel, in, -1);
    }
    snn_walk_param(w, 2.0 * channels, true);   /* weight, bias */
    snn_walk_param(w, 2.0 * channels + 1.0, false); /* running mean, var; batches */
    /* evaluation: the conv before it writes the batch-norm's output where the rule conv -> bn
     * runs them as one op (nn/fusion_rules.c), else the batch-norm writes its own */
    if (!w->training) return w->conv_bn_fused ? in : snn_walk_output(w, numel, in, -1);
    snn_walk_bf16_round(w, in);      /* a conv's output kept as bf16: its copy, made first */
    int out = snn_walk_output(w, numel, in, -1);
    snn_walk_alloc(w, channels);     /* batch mean, 1 / std */
    snn_walk_alloc(w, channels);
    snn_walk_backward_scratch(w, 0.0, in, -1); /* x unpacked if kept as bf16 */
    snn_walk_bf16_done(w, in);
    return out;
}

/* What a carrying layer (w->carry, nn/layer_neuron.c) adds, for `numel` elements over the
 * walk's T steps: its state (m = numel / T values, and as many again for ALIF's and ST-BIF's
 * second state), OWNED and kept across steps; an online step's copy of the state that entered
 * where backward reads it (`copy_in`: PLIF, ST-BIF; neurons/carry.c); a segment's state in and
 * out as STEP tensors and their gradients. */
static void carried_state(snn_walk *w, const snn_neuron_config *n, double numel, bool copy_in,
                          bool fused)
{
    if (w->carry == SNN_CARRY_NONE || snn_neuron_is_ann(n->kind)) return;
    /* the state ops' nodes beyond the plain op's one: the fused op's batch-norm part (and X,
     * a view), the node for each state that leaves (the carry op has the plain op's one) */
    const bool differentiable = w->carry == SNN_CARRY_DIFFERENTIABLE;
    const double second = n->kind == SNN_NEURON_ALIF || n->kind == SNN_NEURON_STBIF ? 1.0 : 0.0;
    if (fused && differentiable) w->host += snn_walk_node_bytes() + snn_walk_struct_bytes();
    if (differentiable) w->host += (1.0 + second) * snn_walk_node_bytes();
    /* and the gradients' structs those nodes make in backward: the fused op's X, and for each
     * state the gradients of V_in and V_out (their data is the step pool's, below) */
    const double states = n->kind == SNN_NEURON_ALIF || n->kind == SNN_NEURON_STBIF ? 2.0 : 1.0;
    if (differentiable)
        w->host += ((fused ? 1.0 : 0.0) + 2.0 * states) * snn_walk_struct_bytes();
    const double m = numel / w->T;
    w->state += states * m;
    w->state_bytes += states * snn_walk_round_up(4.0 * m, w->align);
    for (int i = 0; i < (int)states; i++) {
        SNN_ASSERT(w->states < WALK_MAX_STATES);
        w->state_node[w->states] = w->nodes; /* the neuron op, recorded next */
        w->state_numel[w->states++] = m;
    }
    if (w->carry == SNN_CARRY_CONSTANT) {
        if (copy_in) snn_walk_constant(w, m);
        return;
    }
    /* V_in's copy and V_out; their gradients come from the step pool (the replay takes V_out's
     * seeds when backward starts, and V_in's gradient at the layer's node: state_node) */
    for (int i = 0; i < (int)(2.0 * states); i++) snn_walk_constant(w, m);
}

/* A multi-step neuron layer over (T, N, C, ...) with `planes` = T N. */
static int neuron(snn_walk *w, int in, const snn_neuron_config *n, double numel, double planes,
                  int channels)
{
    if (n->kind == SNN_NEURON_PLIF || n->kind == SNN_NEURON_QCLIP) snn_walk_param(w, 1.0, true);
    /* the ANN activations (snn_relu, snn_qclip): their output alone, no activity, no state */
    if (snn_neuron_is_ann(n->kind)) return snn_walk_output(w, numel, in, -1);
    carried_state(w, n, numel, n->kind == SNN_NEURON_PLIF || n->kind == SNN_NEURON_STBIF, false);
    const bool binary = snn_neuron_spikes_are_binary(n->kind);
    int out = binary ? snn_walk_spikes_output(w, numel, in, -1)  /* spikes */
                     : snn_walk_output(w, numel, in, -1);
    snn_walk_constant(w, planes * channels);     /* spike counts per (t, n, c) plane */
    snn_walk_backward_scratch(w, 0.0, out, -1);  /* BPTT reads the spikes */
    if (w->training) { /* H[t] for backward: IF and LIF keep it in their input's memory, a view
                        * (the builders' neurons consume their inputs: neuron_op.c), except
                        * the state op (neurons/carry.c), which writes it apart */
        if ((n->kind == SNN_NEURON_IF || n->kind == SNN_NEURON_LIF) &&
            w->carry == SNN_CARRY_DIFFERENTIABLE)
            snn_walk_constant(w, numel);
        else if (n->kind == SNN_NEURON_IF || n->kind == SNN_NEURON_LIF)
            w->host += snn_walk_struct_bytes();
        else if (n->kind == SNN_NEURON_ALIF) /* H and the threshold of every step */
            snn_walk_constant(w, 2.0 * numel);
        else snn_walk_constant(w, numel);
    }
    return out;
}

/* Whether a training-mode batch-norm -> neuron pair runs as one op (the rules bn -> neuron and
 * bn -> + -> neuron, nn/fusion_rules.c). */
static bool fuses(const snn_walk *w, const snn_neuron_config *n)
{
    return w->training && w->fusion && snn_neuron_takes_bn_input(n->kind);
}

/* snn_batchnorm_neuron on `in` (residual: the id of the tensor added before the neuron, or -1
 * for none) over (T, N, channels, ...) with `planes` = T N; `in_numel`, in's elements: numel,
 * or numel / T for the repeated stem (snn_batchnorm_neuron_repeat, whose x is one step). */
static int bn_neuron(snn_walk *w, int in, int residual, bool residual_bn,
                     const snn_neuron_config *n, double numel, double in_numel, double planes,
                     int channels)
{
    carried_state(w, n, numel, false, true); /* the carry op advances the state in backward */
    snn_walk_param(w, 2.0 * channels, true);   /* weight, bias */
    snn_walk_param(w, 2.0 * channels + 1.0, false); /* running mean, var; batches */
    /* a conv's output kept as bf16: its copy, made first; the op reads its bits, so its
     * floats are back in the pool before the spikes are made (nn/module.c,
     * nn/model_resnet.c) */
    snn_walk_bf16_round(w, in);
    snn_walk_bf16_done(w, in);
    if (residual_bn) { /* the residual a batch-norm's output of `residual`, never stored; a
                        * conv output kept as bf16 is kept before the op, which reads its bits */
        snn_walk_param(w, 2.0 * channels, true);
        snn_walk_param(w, 2.0 * channels + 1.0, false);
        snn_walk_bf16_round(w, residual);
        snn_walk_bf16_done(w, residual);
    }
    int out = snn_walk_spikes_output(w, numel, in, residual); /* spikes */
    snn_walk_constant(w, planes * channels);           /* spike counts per (t, n, c) plane */
    w->device += snn_walk_bits_bytes(w, numel); /* the spikes' bits, made with them (training) */
    w->bits_made[out] = true;
    w->pooled_untaped[out] = true; /* its spikes come from the pool, with a tape or not */
    for (int bn = 0; bn < (residual_bn ? 2 : 1); bn++) { /* x's batch-norm (and residual's) */
        snn_walk_alloc(w, 6.0 * channels);             /* (count, mean, M2) per channel, doubles */
        snn_walk_alloc(w, channels), snn_walk_alloc(w, channels); /* mean, 1 / std */
    }
    /* backward: dL/dX (in's shape) in in's gradient, which the batch-norm's backward then
     * replaces in place (else in scratch), and H where the device has no one-pass kernel
     * (which then reads the spikes, unpacked if they are bits by then). The kernels read in
     * as it was kept (floats or bf16) and a packed residual as bits. The repeated stem fuses
     * only with a one-pass kernel (its rule). */
    SNN_ASSERT(in_numel == numel || w->one_pass_backward);
    const bool in_place = w->k && w->k->batchnorm_backward_in_place;
    /* the one-pass kernel writes dL/dX over dL/dS: the spikes' gradient becomes in's (not
     * for the differentiable state op, whose three nodes keep X's gradient of their own:
     * neurons/bn_neuron_carry.c) */
    if (out >= 0 && in_place && w->one_pass_backward && in_numel == numel &&
        w->carry != SNN_CARRY_DIFFERENTIABLE)
        w->hand_over[out] = true;
    double scratch = in_place ? 0.0 : snn_walk_round_up(4.0 * in_numel, w->align);
    if (!w->one_pass_backward) scratch += snn_walk_round_up(4.0 * numel, w->align);
    snn_walk_backward_scratch(w, scratch, w->one_pass_backward ? -1 : out, in_place ? -1 : in);
    return out;
}

/* A batch-norm, then a neuron layer: one op where they fuse. */
static int bn_then_neuron(snn_walk *w, int in, const snn_neuron_config *n, double numel,
                          double planes, int channels)
{
    if (fuses(w, n)) return bn_neuron(w, in, -1, false, n, numel, numel, planes, channels);
    return neuron(w, batchnorm(w, in, numel, channels), n, numel, planes, channels);
}

static int max_pool(snn_walk *w, int in, double out_numel)
{
    int out = snn_walk_output(w, out_numel, in, -1);
    /* the int32 argmax (a running max-pool's: only for a tape) */
    if (!w->converted || w->training) snn_walk_alloc(w, out_numel);
    return out;
}

static int linear(snn_walk *w, int in, double rows, double in_features, int out_features)
{
    snn_walk_param(w, in_features * out_features + out_features, true);
    if (w->traces) w->trace_numel += rows * in_features; /* OTTT: its input's trace */
    int out = snn_walk_output(w, rows * out_features, in, -1);
    if (w->converted) out = snn_walk_output(w, rows * out_features, out, -1); /* + b at t = 0 */
    return out;
}

/* Dropout shared over T (snn_dropout_shared) on (T, N, F) with `per_sample` = F: in training
 * the mask (N, F), drawn once for all T steps, and the product x * mask (a node; the mask gets
 * no gradient); in evaluation the op returns its input, allocating nothing. */
static int dropout(snn_walk *w, int in, double T, double N, double per_sample)
{
    if (!w->training) return in;
    snn_walk_constant(w, N * per_sample);
    return snn_walk_output(w, T * N * per_sample, in, -1);
}

/* The classifier both CNNs end with (model_cnn.c's add_classifier): flatten, [dropout], fc1,
 * neuron, [dropout], fc2, [neuron]. `x` is the last pool's output, `flat` its features per
 * sample. Returns the last layer's id. */
static int classifier(snn_walk *w, int x, const snn_model_config *c, double T, double N,
                      double flat)
{
    const double TN = T * N;
    const bool dropout_layers = c->dropout > 0.0f;
    x = snn_walk_view(w, TN * flat, x);
    if (dropout_layers) x = dropout(w, x, T, N, flat);
    x = linear(w, x, TN, flat, c->hidden);
    x = neuron(w, x, &c->neuron, TN * c->hidden, TN, c->hidden);
    if (dropout_layers) x = dropout(w, x, T, N, c->hidden);
    x = linear(w, x, TN, c->hidden, c->classes);
    if (c->spiking_readout) x = neuron(w, x, &c->neuron, TN * c->classes, TN, c->classes);
    return x;
}

/* The stem: conv 3x3 + batch-norm, run once on N images and repeated over T (direct
 * encoding), or run on the T N frames (Poisson-encoded, or event frames as they come), then
 * the first neuron layer. Returns the neuron layer's id; *per_image: its elements per image. */
static int stem(snn_walk *w, const snn_model_config *c, double T, double N, int width, int *h,
                int *wd, double *per_image)
{
    double images = N;
    /* direct encoding at T = 1: the image is the one step, and the stem runs as the layers
     * after it (its batch-norm and neurons fuse) */
    const bool one_step = c->encoding == SNN_ENCODING_DIRECT && T == 1.0;
    const bool once = !one_step && (c->encoding == SNN_ENCODING_DIRECT ||
                                    c->encoding == SNN_ENCODING_FIRST_STEP);
    if (c->encoding == SNN_ENCODING_POISSON)
        snn_walk_constant(w, T * N * c->in_channels * *h * *wd);
    if (!once) images = T * N;
    if (one_step) w->host += snn_walk_struct_bytes(); /* the image seen as (1, N, ...) */
    int x = conv(w, -1, images, c->in_channels, width, 3, 1, 1, h, wd); /* the input: no grad */
    *per_image = (double)width * *h * *wd;
    if (w->converted) /* the bias reshaped to (C, 1, 1): a view */
        w->host += snn_walk_struct_bytes();
    if (one_step) return bn_then_neuron(w, x, &c->neuron, N * *per_image, N, width);
    /* direct encoding at T > 1 where the stem's batch-norm and neurons fuse (the rule "bn ->
     * neuron (repeated stem)": neurons that carry no state, a one-pass backward): the neurons
     * read the one output */
    if (c->encoding == SNN_ENCODING_DIRECT && w->carry == SNN_CARRY_NONE && fuses(w, &c->neuron) &&
        w->one_pass_backward)
        return bn_neuron(w, x, -1, false, &c->neuron, T * N * *per_image, N * *per_image, T * N,
                         width);
    x = batchnorm(w, x, images * *per_image, width);
    if (once) x = snn_walk_output(w, T * N * *per_image, x, -1); /* repeated, or placed at t = 0 */
    return neuron(w, x, &c->neuron, T * N * *per_image, T * N, width);
}

/* Two pools by 2 (floor), as model_cnn.c's builder. Returns the last layer's id. */
static int walk_cnn(snn_walk *w, const snn_model_config *c, double T, double N)
{
    int h = c->height, wd = c->width, W = c->width_base;
    double TN = T * N, per_image;
    int x = stem(w, c, T, N, W, &h, &wd, &per_image);
    h /= 2, wd /= 2;
    x = max_pool(w, x, TN * W * h * wd);
    x = conv(w, x, TN, W, W, 3, 1, 1, &h, &wd);
    x = bn_then_neuron(w, x, &c->neuron, TN * W * h * wd, TN, W);
    h /= 2, wd /= 2;
    x = max_pool(w, x, TN * W * h * wd);
    return classifier(w, x, c, T, N, (double)W * h * wd);
}

/* The DVS net (model_cnn.c): conv-BN-neuron-maxpool blocks while the frame is larger than 4x4
 * (at most 8), then flatten, fc1, neuron, fc2. Returns the last layer's id. */
static int walk_dvs_net(snn_walk *w, const snn_model_config *c, double T, double N)
{
    int h = c->height, wd = c->width, W = c->width_base;
    double TN = T * N, per_image;
    int x = stem(w, c, T, N, W, &h, &wd, &per_image);
    h /= 2, wd /= 2;
    x = max_pool(w, x, TN * W * h * wd);
    for (int b = 2; b <= 8 && (h > 4 || wd > 4); b++) {
        x = conv(w, x, TN, W, W, 3, 1, 1, &h, &wd);
        x = bn_then_neuron(w, x, &c->neuron, TN * W * h * wd, TN, W);
        h /= 2, wd /= 2;
        x = max_pool(w, x, TN * W * h * wd);
    }
    return classifier(w, x, c, T, N, (double)W * h * wd);
}

/* A block (model_resnet.c) on tensor `x`, from `in` channels to `planes` (basic) or 4 x planes
 * (bottleneck); updates *h, *wd. Returns its output's id. */
static int block(snn_walk *w, int x, const snn_model_config *c, double TN, int in, int planes,
                 int stride, bool sew, bool bottleneck, int *h, int *wd)
{
    const int out = bottleneck ? 4 * planes : planes;
    int h0 = *h, w0 = *wd, y = x;
    if (bottleneck) { /* conv1 1x1 in -> planes, conv2 3x3 (stride) planes -> planes */
        y = conv(w, y, TN, in, planes, 1, 1, 0, h, wd);
        y = bn_then_neuron(w, y, &c->neuron, TN * planes * *h * *wd, TN, planes);
        const int spikes1 = y;
        y = conv(w, y, TN, planes, planes, 3, stride, 1, h, wd);
        snn_walk_spikes_done(w, spikes1); /* its one reader, conv2, has run (snn_modules_forward) */
        y = bn_then_neuron(w, y, &c->neuron, TN * planes * *h * *wd, TN, planes);
    } else {          /* conv1 3x3 (stride) in -> out */
        y = conv(w, y, TN, in, out, 3, stride, 1, h, wd);
        y = bn_then_neuron(w, y, &c->neuron, TN * out * *h * *wd, TN, out);
    }
    /* the last conv: bottleneck conv3 1x1 planes -> out, basic conv2 3x3 out -> out */
    const int last_in = bottleneck ? planes : out, k = bottleneck ? 1 : 3;
    int h1 = *h, w1 = *wd;
    /* the last conv's input: bits before that conv where it reads bits, else after it (both
     * where keep_bf16, or where the tail's backward hands over), else at the block's end
     * (model_resnet.c's block_forward says why) */
    const int spikes = y;
    const bool fused = fuses(w, &c->neuron); /* the last batch-norm, the sum, the neuron */
    const bool pack_early = w->keep_bf16 || (fused && w->one_pass_backward &&
                                             w->carry != SNN_CARRY_DIFFERENTIABLE);
    snn_conv2d_dims last_dims = {(int)TN, last_in, *h, *wd, out, k, k, 1, k / 2, *h, *wd};
    const bool pack_before = pack_early && fused && !w->traces && w->k &&
                             w->k->conv2d_forward_bits && w->k->conv2d_reads_bits &&
                             TN <= (double)(1 << 24) && w->k->conv2d_reads_bits(&last_dims);
    if (pack_before) snn_walk_spikes_done(w, spikes);
    y = conv(w, y, TN, last_in, out, k, 1, k / 2, &h1, &w1);
    double numel = TN * out * *h * *wd;
    if (!fused) y = batchnorm(w, y, numel, out);
    if (pack_early && !pack_before) snn_walk_spikes_done(w, spikes);
    int shortcut = x;
    const bool downsample = stride != 1 || in != out;
    /* a fused tail in training makes the plain shortcut's batch-norm output itself */
    const bool shortcut_bn = downsample && fused && !sew && w->training &&
                             w->carry == SNN_CARRY_NONE;
    if (downsample) { /* downsample: conv 1x1, batch-norm (, neuron for SEW) */
        shortcut = conv(w, x, TN, in, out, 1, stride, 0, &h0, &w0);
        if (!shortcut_bn)
            shortcut = sew ? bn_then_neuron(w, shortcut, &c->neuron, numel, TN, out)
                           : batchnorm(w, shortcut, numel, out);
    }
    if (sew) {
        y = fused ? bn_neuron(w, y, -1, false, &c->neuron, numel, numel, TN, out)
                  : neuron(w, y, &c->neuron, numel, TN, out);
        snn_walk_backward_scratch(w, 0.0, y, shortcut);
        y = snn_walk_output(w, numel, y, shortcut); /* the residual addition */
    } else if (fused) {
        y = bn_neuron(w, y, shortcut, shortcut_bn, &c->neuron, numel, numel, TN, out);
    } else {
        /* written over the last batch-norm's output (snn_add_into) */
        w->host += snn_walk_struct_bytes();
        snn_walk_backward_scratch(w, 0.0, y, shortcut);
        y = snn_walk_record(w, numel, y, shortcut);
        y = neuron(w, y, &c->neuron, numel, TN, out);
    }
    if (!pack_early) snn_walk_spikes_done(w, spikes); /* block_forward, at its end */
    snn_walk_spikes_done(w, x);
    return y;
}

/* ResNet-18 / -34 (basic blocks) and -50 (bottlenecks), plain or SEW, as snn_resnet_new. */
static int walk_resnet(snn_walk *w, const snn_model_config *c, double T, double N)
{
    const snn_model_kind kind = c->kind;
    const bool sew = kind == SNN_MODEL_SEW_RESNET18 || kind == SNN_MODEL_SEW_RESNET34 ||
                     kind == SNN_MODEL_SEW_RESNET50;
    const bool bottleneck = kind == SNN_MODEL_RESNET50 || kind == SNN_MODEL_SEW_RESNET50;
    const bool deep = bottleneck || kind == SNN_MODEL_RESNET34 || kind == SNN_MODEL_SEW_RESNET34;
    static const int blocks18[4] = {2, 2, 2, 2}, blocks34[4] = {3, 4, 6, 3};
    const int *blocks = deep ? blocks34 : blocks18;
    int h = c->height, wd = c->width, width = c->width_base;
    double TN = T * N, per_image;
    int x = stem(w, c, T, N, width, &h, &wd, &per_image);
    int in = width;
    for (int layer = 0; layer < 4; layer++) {
        const int planes = width << layer, out = bottleneck ? 4 * planes : planes;
        for (int b = 0; b < blocks[layer]; b++)
            x = block(w, x, c, TN, b ? out : in, planes, b || !layer ? 1 : 2, sew, bottleneck,
                      &h, &wd);
        in = out;
    }
    x = snn_walk_view(w, TN * in * h * wd, x);  /* adaptive average pool: (.., C, H W) */
    x = snn_walk_output(w, TN * in, x, -1);     /* its mean */
    x = snn_walk_view(w, TN * in, x);           /* back to (.., C, 1, 1) */
    x = snn_walk_view(w, TN * in, x);           /* flatten */
    return linear(w, x, TN, in, c->classes);
}

snn_status snn_model_memory_estimate(const snn_model_config *c, int batch_size, snn_device device,
                                     bool training, int optimizer_states, snn_memory_estimate *out)
{
    return snn_model_memory_estimate_with(c, NULL, batch_size, device, training, optimizer_states,
                                          out);
}

/* One walk of the step's graph over T steps of N images (a carrying step's: T of one call):
 * the options' plan, the batch, the model's layers, the readout, the argmax. */
static void walk_step(snn_walk *w, const snn_model_config *c, const snn_model_options *o,
                      snn_device device, bool training, snn_state_carry carry, bool traces,
                      double T, double N)
{
    memset(w, 0, sizeof *w);
    w->k = snn_kernels_for(device);
    w->training = training;
    w->converted = c->encoding == SNN_ENCODING_FIRST_STEP;
    const snn_neuron_kernels *nk = snn_neuron_kernels_for(device);
    w->fusion = o->fuse && !snn_batchnorm_sync_enabled() && nk && nk->lif_bn_forward;
    w->conv_bn_fused = o->fuse && w->k && w->k->conv2d_forward_bn_eval;
    w->packing = o->pack_spikes;
    w->keep_bf16 = snn_options_keep_bf16(o);
    w->one_pass_backward = nk && nk->lif_bn_backward && T <= SNN_NEURON_BN_BACKWARD_MAX_T;
    w->align = device == SNN_CPU ? 64.0 : 256.0;
    w->carry = carry;
    w->traces = traces;
    w->T = T;

    /* the batch (event frames: T per sample) and its labels */
    snn_walk_constant(w, (c->encoding == SNN_ENCODING_EVENTS ? T : 1.0) * N * c->in_channels *
                             c->height * c->width);
    snn_walk_constant(w, N);
    int x = c->kind == SNN_MODEL_SPIKING_CNN ? walk_cnn(w, c, T, N)
          : c->kind == SNN_MODEL_DVS_NET     ? walk_dvs_net(w, c, T, N)
          : c->kind == SNN_MODEL_RSNN        ? snn_rsnn_memory_walk(w, c, T, N)
                                             : walk_resnet(w, c, T, N);
    /* readout: the mean over T (converted: the sum); a checkpointed step's last segment sums
     * its steps, adds the earlier segments' sum and scales (app/train_segments.c) */
    x = snn_walk_output(w, N * c->classes, x, -1);
    if (carry == SNN_CARRY_DIFFERENTIABLE) {
        x = snn_walk_output(w, N * c->classes, x, -1);
        x = snn_walk_output(w, N * c->classes, x, -1);
        if (x >= 0) w->retained[x] = true; /* the time-mean logits' gradient, read after */
    }
    if (c->spiking_readout) {   /* MSE of the rate against one-hot: one_hot, sub, square, a
                                   reshape to one dim, its mean */
        snn_walk_constant(w, N * c->classes);
        x = snn_walk_output(w, N * c->classes, x, -1);
        x = snn_walk_output(w, N * c->classes, x, -1);
        x = snn_walk_view(w, N * c->classes, x);
        snn_walk_output(w, 1, x, -1);
    } else {                    /* cross-entropy: log-softmax, then the NLL */
        x = snn_walk_output(w, N * c->classes, x, -1);
        snn_walk_output(w, 1, x, -1);
    }
    snn_walk_constant(w, N); /* argmax for the accuracy */
}

/* The estimate; with carry != SNN_CARRY_NONE, of one training step through time whose graph
 * spans `steps` of the config's T (snn_model_memory_estimate_through_time). */
static snn_status estimate(const char *fn, const snn_model_config *c,
                           const snn_model_options *options, snn_state_carry carry, int steps,
                           bool traces, int batch_size, snn_device device, bool training,
                           int optimizer_states, snn_memory_estimate *out)
{
    if (!c || !out)
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad argument '%s' (got NULL)", fn, c ? "out" : "config");
    memset(out, 0, sizeof *out);
    const bool cnn = c->kind == SNN_MODEL_SPIKING_CNN || c->kind == SNN_MODEL_DVS_NET ||
                     c->kind == SNN_MODEL_RSNN;
    const bool converted = c->encoding == SNN_ENCODING_FIRST_STEP;
    if (converted && training)
        return snn_error(SNN_ERR_UNSUPPORTED, "%s: a network converted from a QANN (first-step "
                         "encoding) runs inference only; hint: estimate its evaluation (training "
                         "false), or train its QANN", fn);
    if (batch_size < 1 || c->time_steps < 1 || c->width_base < 1 || c->in_channels < 1 ||
        c->height < 1 || c->width < 1 || c->classes < 1 || optimizer_states < 0 ||
        (cnn && c->hidden < 1))
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad arguments (expected sizes >= 1, got batch %d, "
                         "T %d, width %d, hidden %d, input %dx%dx%d, %d classes, %d optimizer "
                         "states)", fn, batch_size, c->time_steps, c->width_base, c->hidden,
                         c->in_channels, c->height, c->width, c->classes, optimizer_states);
    /* int fields that the walk shifts (ResNet: 8 x width channels, a bottleneck's output 4 x
     * that) must not overflow */
    const int max_width = 1 << 27 >> (c->kind == SNN_MODEL_RESNET50 ||
                                      c->kind == SNN_MODEL_SEW_RESNET50 ? 2 : 0);
    if (!cnn && c->width_base > max_width)
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad config 'width_base' (expected <= %d for a "
                         "%s, got %d)", fn, max_width, snn_model_kind_name(c->kind), c->width_base);
    /* the plan the model runs (nn/plan.h): its options, and the fusion rules' conditions that
     * do not change from layer to layer (sync-BN, the kernels the device's tables have) */
    const snn_model_options o = options ? *options : snn_model_options_default(device);
    const double T = carry != SNN_CARRY_NONE ? steps : c->time_steps, N = batch_size;
    snn_walk w, last;
    walk_step(&w, c, &o, device, training, carry, traces, T, N);
    /* a checkpointed step's last segment, shorter than the others when K does not divide T:
     * its own graph, whose backward runs first and leaves the step pool its blocks */
    if (carry == SNN_CARRY_DIFFERENTIABLE) {
        const int last_steps = c->time_steps - (c->time_steps - 1) / steps * steps;
        walk_step(&last, c, &o, device, training, carry, traces, last_steps, N);
    }

    /* around the graph of one call, for the whole step: the online step's sums of the logits
     * and the loss (app/train_online.c); the checkpointed step's saved states (C - 1 of
     * them), the state's gradients, each segment's logits, the time-mean logits, the loss and
     * its gradient, and the copies of the model's buffers (app/train_segments.c) */

    if (carry == SNN_CARRY_CONSTANT) {
        for (int k = 0; k < 2; k++) snn_walk_constant(&w, N * c->classes); /* sum, mean */
        for (int k = 0; k < 3; k++) snn_walk_constant(&w, 1.0); /* the losses' sum, mean, scale */
    } else if (carry == SNN_CARRY_DIFFERENTIABLE) {
        const double segments = ceil((double)c->time_steps / (double)steps);
        if (segments > 1) /* the C - 2 saved states (the last segment's is not) and the
                             state's gradient */
            w.device += (segments - 1.0) * w.state_bytes;
        for (int k = 0; k < (int)segments; k++) snn_walk_constant(&w, T * N * c->classes);
        for (int k = 0; k < 4; k++) snn_walk_constant(&w, N * c->classes); /* mean, g, seeds */
        snn_walk_constant(&w, 1.0);                                       /* the loss */
        w.device += 4.0 * (w.params - w.trainable) + 3.0 * w.align * w.buffer_groups;
        /* and in the host's step memory: the structs of the saved states, of the states'
         * gradients and of the buffers' copies (up to 3 a group), and the step's tables of
         * pointers (step_table: 8 B an entry and 1; the layers, at most one a state: the
         * layers, g_v and g_a; saved_v and saved_a, C of them; rng and out; a segment's outs
         * and seeds; the copies, at most 3 a parameter call) */
        w.host += ((segments - 1.0) * w.states + 3.0 * w.buffer_groups) * snn_walk_struct_bytes();
        const double L = w.states;
        w.host += 3.0 * snn_walk_round_up(8.0 * L + 1.0, w.align) +
                  2.0 * snn_walk_round_up(8.0 * segments * L + 1.0, w.align) +
                  2.0 * snn_walk_round_up(8.0 * segments + 1.0, w.align) +
                  2.0 * snn_walk_round_up(8.0 * (1.0 + 2.0 * L) + 1.0, w.align) +
                  snn_walk_round_up(8.0 * 3.0 * w.param_calls + 1.0, w.align);
    }
    out->state = 4.0 * (w.state + w.trace_numel);
    out->parameter_count = (int64_t)w.trainable;
    out->parameters = 4.0 * w.params;
    out->gradients = training ? 4.0 * w.trainable : 0.0;
    out->optimizer = training ? 4.0 * w.trainable * optimizer_states : 0.0;
    out->workspace = w.workspace;
    out->largest_tensor = w.largest;
    const snn_walk *recomputed = c->time_steps > steps ? &w : NULL; /* segments before the last */
    out->gradient_pool = carry == SNN_CARRY_DIFFERENTIABLE
                             ? snn_walk_segments_pool_bytes(&last, recomputed)
                             : snn_walk_gradient_pool_bytes(&w);
    /* the online step seeds the scaled loss of each time step (1/K of it), one block more */
    if (carry == SNN_CARRY_CONSTANT) out->gradient_pool += snn_walk_round_up(4.0, 256.0);
    /* training: backward runs the largest workspace (a conv's, or a fused batch-norm ->
     * neuron's scratch) with everything the forward made held;
     * eval: the workspace is given back after each conv, so the high-water is the larger of the
     * end of the forward and a conv's moment (the first convs' are the largest: little is held) */
    const double backward = snn_walk_largest_backward_scratch(&w);
    const double scratch = w.workspace > backward ? w.workspace : backward;
    const double arena = w.training ? w.device + scratch
                                    : (w.forward_peak > w.device ? w.forward_peak : w.device);
    out->step = arena + out->gradient_pool + (device == SNN_CPU ? w.host : 0.0);
    if (device == SNN_CPU) {
        out->overhead = (double)(snn_get_num_threads() + 1) * (double)snn_gemm_pack_bytes_cpu();
    } else {
        out->overhead = SNN_CUDA_CONTEXT_SCRATCH + SNN_CUDA_BLAS_WORKSPACE + SNN_CUDA_HEADROOM;
    }
    out->total = out->parameters + out->gradients + out->optimizer + out->state + out->step +
                 out->overhead;
    /* host memory besides the data: all of it on the CPU; for CUDA the model is built on the
     * host before it moves, and the host arena holds the step's structs and tape nodes */
    out->host = device == SNN_CPU ? out->total : out->parameters + w.host;
    return SNN_OK;
}

snn_status snn_model_memory_estimate_with(const snn_model_config *c,
                                          const snn_model_options *options, int batch_size,
                                          snn_device device, bool training,
                                          int optimizer_states, snn_memory_estimate *out)
{
    return estimate("snn_model_memory_estimate", c, options, SNN_CARRY_NONE, 0, false, batch_size,
                    device, training, optimizer_states, out);
}

snn_status snn_model_memory_estimate_through_time(const snn_model_config *c,
                                                  const snn_model_options *options,
                                                  snn_state_carry carry, int steps, bool traces,
                                                  int batch_size, snn_device device,
                                                  int optimizer_states, snn_memory_estimate *out)
{
    const char *fn = "snn_model_memory_estimate_through_time";
    if (!c || !out)
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad argument '%s' (got NULL)", fn,
                         c ? "out" : "config");
    memset(out, 0, sizeof *out);
    if (carry != SNN_CARRY_CONSTANT && carry != SNN_CARRY_DIFFERENTIABLE)
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad argument 'carry' (expected "
                         "SNN_CARRY_CONSTANT or SNN_CARRY_DIFFERENTIABLE, got %d)", fn, (int)carry);
    if (steps < 1 || steps > c->time_steps || (carry == SNN_CARRY_CONSTANT && steps != 1))
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad argument 'steps' (expected %s, got %d)", fn,
                         carry == SNN_CARRY_CONSTANT ? "1 for an online step"
                                                     : "1 .. T time steps per segment", steps);
    if (c->encoding != SNN_ENCODING_DIRECT && c->encoding != SNN_ENCODING_POISSON)
        return snn_error(SNN_ERR_UNSUPPORTED, "%s: online and checkpointed steps take images with "
                         "direct or Poisson encoding (as app/train_online.c and "
                         "app/train_segments.c)", fn);
    if (traces && carry != SNN_CARRY_CONSTANT)
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad argument 'traces' (OTTT's traces go with an "
                         "online step, SNN_CARRY_CONSTANT)", fn);
    return estimate(fn, c, options, carry, steps, traces, batch_size, device, true,
                    optimizer_states, out);
}
