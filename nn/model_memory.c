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
 * (autograd/fn_*.c, neurons/neuron_op.c); this file holds the models and the totals,
 * nn/memory_layers.c the layers, nn/memory_walk.c the accounting of each allocation:
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
 * or less, that test says by how much, and nn/memory_layers.c (that op's layer; the accounting of
 * each allocation in nn/memory_walk.c) is where to follow.
 *
 * Test: ctest --test-dir build -R memory_estimate
 */
#include <math.h>
#include <string.h>

#include "memory_layers.h"
#include "model_internal.h"
#include "kernels/neuron_kernels.h"
#include "neurons/bn_neuron.h"
#include "tensor/error.h"
#include "kernels/cpu/gemm.h"

/* What the kernels CUDA loads on first use and the driver's allocation granularity take on the
 * GPU outside snn_alloc: a round margin. */
#define SNN_CUDA_HEADROOM ((double)(256u << 20))
#define SNN_CUDA_CONTEXT_SCRATCH ((double)(8u << 20)) /* kernels/cuda/cuda_common.cuh */
#define SNN_CUDA_BLAS_WORKSPACE ((double)(32u << 20)) /* kernels/cuda/cuda_common.cuh */

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
    /* the input gets no gradient */
    int x = snn_walk_conv(w, -1, images, c->in_channels, width, 3, 1, 1, h, wd);
    *per_image = (double)width * *h * *wd;
    if (w->converted) /* the bias reshaped to (C, 1, 1): a view */
        w->host += snn_walk_struct_bytes();
    if (one_step) return snn_walk_bn_then_neuron(w, x, &c->neuron, N * *per_image, N, width);
    /* direct encoding at T > 1 where the stem's batch-norm and neurons fuse (the rule "bn ->
     * neuron (repeated stem)": neurons that carry no state, a one-pass backward): the neurons
     * read the one output */
    if (c->encoding == SNN_ENCODING_DIRECT && w->carry == SNN_CARRY_NONE &&
        snn_walk_fuses(w, &c->neuron) && w->one_pass_backward)
        return snn_walk_bn_neuron(w, x, -1, false, &c->neuron, T * N * *per_image,
                                  N * *per_image, T * N, width);
    x = snn_walk_batchnorm(w, x, images * *per_image, width);
    if (once) x = snn_walk_output(w, T * N * *per_image, x, -1); /* repeated, or placed at t = 0 */
    return snn_walk_neuron(w, x, &c->neuron, T * N * *per_image, T * N, width);
}

/* Two pools by 2 (floor), as model_cnn.c's builder. Returns the last layer's id. */
static int walk_cnn(snn_walk *w, const snn_model_config *c, double T, double N)
{
    int h = c->height, wd = c->width, W = c->width_base;
    double TN = T * N, per_image;
    int x = stem(w, c, T, N, W, &h, &wd, &per_image);
    h /= 2, wd /= 2;
    x = snn_walk_max_pool(w, x, TN * W * h * wd);
    x = snn_walk_conv(w, x, TN, W, W, 3, 1, 1, &h, &wd);
    x = snn_walk_bn_then_neuron(w, x, &c->neuron, TN * W * h * wd, TN, W);
    h /= 2, wd /= 2;
    x = snn_walk_max_pool(w, x, TN * W * h * wd);
    return snn_walk_classifier(w, x, c, T, N, (double)W * h * wd);
}

/* The DVS net (model_cnn.c): conv-BN-neuron-maxpool blocks while the frame is larger than 4x4
 * (at most 8), then flatten, fc1, neuron, fc2. Returns the last layer's id. */
static int walk_dvs_net(snn_walk *w, const snn_model_config *c, double T, double N)
{
    int h = c->height, wd = c->width, W = c->width_base;
    double TN = T * N, per_image;
    int x = stem(w, c, T, N, W, &h, &wd, &per_image);
    h /= 2, wd /= 2;
    x = snn_walk_max_pool(w, x, TN * W * h * wd);
    for (int b = 2; b <= 8 && (h > 4 || wd > 4); b++) {
        x = snn_walk_conv(w, x, TN, W, W, 3, 1, 1, &h, &wd);
        x = snn_walk_bn_then_neuron(w, x, &c->neuron, TN * W * h * wd, TN, W);
        h /= 2, wd /= 2;
        x = snn_walk_max_pool(w, x, TN * W * h * wd);
    }
    return snn_walk_classifier(w, x, c, T, N, (double)W * h * wd);
}

/* A block (model_resnet.c) on tensor `x`, from `in` channels to `planes` (basic) or 4 x planes
 * (bottleneck); updates *h, *wd. Returns its output's id. */
static int block(snn_walk *w, int x, const snn_model_config *c, double TN, int in, int planes,
                 int stride, bool sew, bool bottleneck, int *h, int *wd)
{
    const int out = bottleneck ? 4 * planes : planes;
    int h0 = *h, w0 = *wd, y = x;
    if (bottleneck) { /* conv1 1x1 in -> planes, conv2 3x3 (stride) planes -> planes */
        y = snn_walk_conv(w, y, TN, in, planes, 1, 1, 0, h, wd);
        y = snn_walk_bn_then_neuron(w, y, &c->neuron, TN * planes * *h * *wd, TN, planes);
        const int spikes1 = y;
        y = snn_walk_conv(w, y, TN, planes, planes, 3, stride, 1, h, wd);
        snn_walk_spikes_done(w, spikes1); /* its one reader, conv2, has run (snn_modules_forward) */
        y = snn_walk_bn_then_neuron(w, y, &c->neuron, TN * planes * *h * *wd, TN, planes);
    } else {          /* conv1 3x3 (stride) in -> out */
        y = snn_walk_conv(w, y, TN, in, out, 3, stride, 1, h, wd);
        y = snn_walk_bn_then_neuron(w, y, &c->neuron, TN * out * *h * *wd, TN, out);
    }
    /* the last conv: bottleneck conv3 1x1 planes -> out, basic conv2 3x3 out -> out */
    const int last_in = bottleneck ? planes : out, k = bottleneck ? 1 : 3;
    int h1 = *h, w1 = *wd;
    /* the last conv's input: bits before that conv where it reads bits, else after it (both
     * where keep_bf16, or where the tail's backward hands over), else at the block's end
     * (model_resnet.c's block_forward says why) */
    const int spikes = y;
    const bool fused = snn_walk_fuses(w, &c->neuron); /* the last batch-norm, the sum, the neuron */
    const bool pack_early = w->keep_bf16 || (fused && w->one_pass_backward &&
                                             w->carry != SNN_CARRY_DIFFERENTIABLE);
    snn_conv2d_dims last_dims = {(int)TN, last_in, *h, *wd, out, k, k, 1, k / 2, *h, *wd};
    const bool pack_before = pack_early && fused && !w->traces && w->k &&
                             w->k->conv2d_forward_bits && w->k->conv2d_reads_bits &&
                             TN <= (double)(1 << 24) && w->k->conv2d_reads_bits(&last_dims);
    if (pack_before) snn_walk_spikes_done(w, spikes);
    y = snn_walk_conv(w, y, TN, last_in, out, k, 1, k / 2, &h1, &w1);
    double numel = TN * out * *h * *wd;
    if (!fused) y = snn_walk_batchnorm(w, y, numel, out);
    if (pack_early && !pack_before) snn_walk_spikes_done(w, spikes);
    int shortcut = x;
    const bool downsample = stride != 1 || in != out;
    /* a fused tail in training makes the plain shortcut's batch-norm output itself */
    const bool shortcut_bn = downsample && fused && !sew && w->training &&
                             w->carry == SNN_CARRY_NONE;
    if (downsample) { /* downsample: conv 1x1, batch-norm (, neuron for SEW) */
        shortcut = snn_walk_conv(w, x, TN, in, out, 1, stride, 0, &h0, &w0);
        if (!shortcut_bn)
            shortcut = sew ? snn_walk_bn_then_neuron(w, shortcut, &c->neuron, numel, TN, out)
                           : snn_walk_batchnorm(w, shortcut, numel, out);
    }
    if (sew) {
        y = fused ? snn_walk_bn_neuron(w, y, -1, false, &c->neuron, numel, numel, TN, out)
                  : snn_walk_neuron(w, y, &c->neuron, numel, TN, out);
        snn_walk_backward_scratch(w, 0.0, y, shortcut);
        y = snn_walk_output(w, numel, y, shortcut); /* the residual addition */
    } else if (fused) {
        y = snn_walk_bn_neuron(w, y, shortcut, shortcut_bn, &c->neuron, numel, numel, TN, out);
    } else {
        /* written over the last batch-norm's output (snn_add_into) */
        w->host += snn_walk_struct_bytes();
        snn_walk_backward_scratch(w, 0.0, y, shortcut);
        y = snn_walk_record(w, numel, y, shortcut);
        y = snn_walk_neuron(w, y, &c->neuron, numel, TN, out);
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
    if (c->dropout > 0.0f) x = snn_walk_dropout(w, x, T, N, in);
    return snn_walk_linear(w, x, TN, in, c->classes);
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
    const snn_neuron_dims steps = {.T = (int64_t)T};
    w->bn_sums_fold = training && snn_bn_neuron_folds_sums(w->k, nk, &steps);
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
    /* training: backward runs the largest scratch (a conv's workspace, or a fused batch-norm ->
     * neuron's) with everything the forward made held, unless a conv's forward held more (a
     * conv whose backward keeps part of its workspace in dy: kernels.h);
     * eval: the workspace is given back after each conv, so the high-water is the larger of the
     * end of the forward and a conv's moment (the first convs' are the largest: little is held) */
    const double backward = w.device + snn_walk_largest_backward_scratch(&w);
    const double arena = w.training ? (w.forward_peak > backward ? w.forward_peak : backward)
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
