/*
 * model_memory.c - snn_model_memory_estimate: the bytes a model and one step of it need on its
 * device, computed from the configuration alone, before anything is allocated.
 *
 * Why: a width or batch size too large for the machine used to be found out by the allocator,
 * and with Linux overcommit that means the OOM killer (exit 137, no message) rather than a
 * NULL from malloc. Programs now compare this estimate with snn_device_memory() first and
 * refuse with both numbers (examples/run_memory.h).
 *
 * How it is computed. The architecture is a function of the configuration (model_cnn.c,
 * model_resnet.c), so the estimate walks the same layers with shapes only, and adds up what
 * each op allocates, as the ops do it (autograd/fn_*.c, neurons/neuron_op.c):
 *
 *   parameters   every weight, bias, batch-norm affine and running statistic, PLIF's w
 *   gradients    one per trainable weight (training only; OWNED, allocated by the first backward)
 *   optimizer    `optimizer_states` tensors per trainable weight (SGD momentum 1, Adam 2)
 *   step         the step arena at its high-water mark. Nothing is freed inside a step, so that
 *                is the sum of every STEP allocation, plus the largest conv workspace (scratch
 *                taken and given back inside one op):
 *                  every op output                       4 B/element (+ its gradient in training)
 *                  neuron layers: spike counts per (t, n, c) plane, and in training H[t]
 *                  batch-norm (training): batch mean and 1/std per channel
 *                  max-pool: the argmax of each output   4 B/element (kept even without a tape)
 *                  views (flatten, reshape): no data, but in training a gradient of their own
 *                  the input batch, labels, argmax, one-hot; each tensor's struct and each tape
 *                  node (host arena), each allocation rounded up to 64 B (host) / 256 B (CUDA)
 *   overhead     fixed per device: the CPU SGEMM's packing buffer per thread; on CUDA the
 *                context's scratch plus SNN_CUDA_HEADROOM for what cuBLAS and lazily loaded
 *                kernels take outside snn_alloc
 *
 * How close it is: tests/test_memory_estimate.c builds models, runs one training (or
 * evaluation) step on the CPU and compares: parameters, gradients and optimizer state exactly,
 * and the step within a few percent of the arena's measured high-water mark, never below it
 * (docs/benchmarks.md has the table; bench/bench_memory.c prints the same on CUDA). When an op
 * starts saving more or less, that test says by how much, and this file is where to follow.
 *
 * Test: ctest --test-dir build -R memory_estimate
 */
#include <math.h>
#include <string.h>

#include "model_internal.h"
#include "tensor/error.h"
#include "tensor/gemm.h"

/* What cuBLAS (its workspace, 32 MiB on Hopper), the kernels CUDA loads on first use and the
 * driver's allocation granularity take on the GPU outside snn_alloc: a round margin. */
#define SNN_CUDA_HEADROOM ((double)(256u << 20))
#define SNN_CUDA_CONTEXT_SCRATCH ((double)(8u << 20)) /* tensor/cuda_common.cuh */

typedef struct walk {
    const snn_kernels *k;    /* the device's table, for the conv workspace sizes (may be NULL) */
    bool training;           /* a tape: saved tensors, nodes and gradients */
    double align;            /* the arena's rounding of each device allocation */
    double device;           /* step bytes on the device */
    double host;             /* step bytes in the host arena: tensor structs, tape nodes */
    double workspace;        /* the largest conv workspace */
    double params, trainable;/* elements */
} walk;

static double round_up(double bytes, double align) { return ceil(bytes / align) * align; }
static double struct_bytes(void) { return round_up((double)sizeof(snn_tensor), 64.0); }
static double node_bytes(void) { return round_up((double)sizeof(snn_node), 64.0) + 64.0; }

/* One device allocation of `numel` 4-byte elements. */
static void alloc(walk *w, double numel) { w->device += round_up(4.0 * numel, w->align); }

/* A step tensor that never gets a gradient (the input batch, labels, argmax, one-hot). */
static void constant(walk *w, double numel)
{
    w->host += struct_bytes();
    alloc(w, numel);
}

/* An op's output; in training also its tape node and, in backward, its gradient. */
static void output(walk *w, double numel)
{
    constant(w, numel);
    if (w->training) {
        w->host += node_bytes();
        constant(w, numel);
    }
}

/* A view (flatten, reshape): a struct, and in training a node and a gradient of its own. */
static void view(walk *w, double numel)
{
    w->host += struct_bytes();
    if (w->training) {
        w->host += node_bytes();
        constant(w, numel);
    }
}

static void param(walk *w, double numel, bool trainable)
{
    w->params += numel;
    if (trainable) w->trainable += numel;
}

/* conv k x k, no bias, on `images` images of (cin, *h, *wd); updates *h, *wd to the output. */
static void conv(walk *w, double images, int cin, int cout, int k, int stride, int pad, int *h, int *wd)
{
    int ho = (*h + 2 * pad - k) / stride + 1, wo = (*wd + 2 * pad - k) / stride + 1;
    param(w, (double)cout * cin * k * k, true);
    output(w, images * cout * ho * wo);
    /* the same workspace serves forward and backward; ask the device for sizes its planning
     * arithmetic (int fields) is made for, else take the im2col matrix (C_in K K, images
     * H_out W_out) as the size: a size that large is refused whatever the exact number */
    double ws = 4.0 * cin * k * k * images * ho * wo;
    if (w->k && w->k->conv2d_workspace_bytes && images <= (double)(1 << 24) && ws < 1e12) {
        snn_conv2d_dims d = {(int)images, cin, *h, *wd, cout, k, k, stride, pad, ho, wo};
        ws = (double)w->k->conv2d_workspace_bytes(&d);
    }
    ws = round_up(ws, w->align);
    if (ws > w->workspace) w->workspace = ws;
    *h = ho, *wd = wo;
}

static void batchnorm(walk *w, double numel, int channels)
{
    param(w, 2.0 * channels, true);   /* weight, bias */
    param(w, 2.0 * channels, false);  /* running mean, running var */
    output(w, numel);
    if (w->training) alloc(w, channels), alloc(w, channels); /* batch mean, 1 / std */
}

/* A multi-step neuron layer over (T, N, C, ...) with `planes` = T N. */
static void neuron(walk *w, const snn_neuron_config *n, double numel, double planes, int channels)
{
    if (n->kind == SNN_NEURON_PLIF) param(w, 1.0, true);
    output(w, numel);                  /* spikes */
    constant(w, planes * channels);    /* spike counts per (t, n, c) plane */
    if (w->training) constant(w, numel); /* H[t] for backward */
}

static void max_pool(walk *w, double out)
{
    output(w, out);
    alloc(w, out); /* int32 argmax */
}

static void linear(walk *w, double rows, double in, int out)
{
    param(w, in * out + out, true);
    output(w, rows * out);
}

/* The stem: conv 3x3 + batch-norm, run once on N images and repeated over T (direct
 * encoding), or run on the T N Poisson-encoded frames. Returns the elements per step. */
static double stem(walk *w, const snn_model_config *c, double T, double N, int width, int *h, int *wd)
{
    double images = N;
    if (c->encoding == SNN_ENCODING_POISSON) {
        constant(w, T * N * c->in_channels * *h * *wd);
        images = T * N;
    }
    conv(w, images, c->in_channels, width, 3, 1, 1, h, wd);
    double per_image = (double)width * *h * *wd;
    batchnorm(w, images * per_image, width);
    if (c->encoding != SNN_ENCODING_POISSON) output(w, T * N * per_image); /* repeat over T */
    neuron(w, &c->neuron, T * N * per_image, T * N, width);
    return per_image;
}

static void walk_cnn(walk *w, const snn_model_config *c, double T, double N)
{
    int h = c->height, wd = c->width, W = c->width_base;
    double TN = T * N;
    stem(w, c, T, N, W, &h, &wd);
    h /= 2, wd /= 2;
    max_pool(w, TN * W * h * wd);
    conv(w, TN, W, W, 3, 1, 1, &h, &wd);
    batchnorm(w, TN * W * h * wd, W);
    neuron(w, &c->neuron, TN * W * h * wd, TN, W);
    h /= 2, wd /= 2;
    max_pool(w, TN * W * h * wd);
    double flat = (double)W * h * wd;
    view(w, TN * flat);
    linear(w, TN, flat, c->hidden);
    neuron(w, &c->neuron, TN * c->hidden, TN, c->hidden);
    linear(w, TN, c->hidden, c->classes);
    if (c->spiking_readout) neuron(w, &c->neuron, TN * c->classes, TN, c->classes);
}

/* A basic block (model_resnet.c); updates *h, *wd. */
static void block(walk *w, const snn_model_config *c, double TN, int in, int out, int stride,
                  int *h, int *wd)
{
    bool sew = c->kind == SNN_MODEL_SEW_RESNET18;
    int h0 = *h, w0 = *wd;
    conv(w, TN, in, out, 3, stride, 1, h, wd);
    double numel = TN * out * *h * *wd;
    batchnorm(w, numel, out);
    neuron(w, &c->neuron, numel, TN, out);
    int h1 = *h, w1 = *wd;
    conv(w, TN, out, out, 3, 1, 1, &h1, &w1);
    batchnorm(w, numel, out);
    if (stride != 1 || in != out) { /* downsample: conv 1x1, batch-norm (, neuron for SEW) */
        conv(w, TN, in, out, 1, stride, 0, &h0, &w0);
        batchnorm(w, numel, out);
        if (sew) neuron(w, &c->neuron, numel, TN, out);
    }
    if (sew) neuron(w, &c->neuron, numel, TN, out);
    output(w, numel); /* the residual addition */
    if (!sew) neuron(w, &c->neuron, numel, TN, out);
}

static void walk_resnet(walk *w, const snn_model_config *c, double T, double N)
{
    int h = c->height, wd = c->width, width = c->width_base;
    double TN = T * N;
    stem(w, c, T, N, width, &h, &wd);
    int in = width;
    for (int layer = 0; layer < 4; layer++) {
        int out = width << layer;
        block(w, c, TN, in, out, layer ? 2 : 1, &h, &wd);
        block(w, c, TN, out, out, 1, &h, &wd);
        in = out;
    }
    view(w, TN * in * h * wd);  /* adaptive average pool: (.., C, H W) */
    output(w, TN * in);         /* its mean */
    view(w, TN * in);           /* back to (.., C, 1, 1) */
    view(w, TN * in);           /* flatten */
    linear(w, TN, in, c->classes);
}

snn_status snn_model_memory_estimate(const snn_model_config *c, int batch_size, snn_device device,
                                     bool training, int optimizer_states, snn_memory_estimate *out)
{
    const char *fn = "snn_model_memory_estimate";
    if (!c || !out)
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad argument '%s' (got NULL)", fn, c ? "out" : "config");
    memset(out, 0, sizeof *out);
    if (batch_size < 1 || c->time_steps < 1 || c->width_base < 1 || c->in_channels < 1 ||
        c->height < 1 || c->width < 1 || c->classes < 1 || optimizer_states < 0 ||
        (c->kind == SNN_MODEL_SPIKING_CNN && c->hidden < 1))
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad arguments (expected sizes >= 1, got batch %d, "
                         "T %d, width %d, hidden %d, input %dx%dx%d, %d classes, %d optimizer "
                         "states)", fn, batch_size, c->time_steps, c->width_base, c->hidden,
                         c->in_channels, c->height, c->width, c->classes, optimizer_states);
    /* int fields that the walk shifts (ResNet: 8 x width channels) must not overflow */
    if (c->kind != SNN_MODEL_SPIKING_CNN && c->width_base > (1 << 27))
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad config 'width_base' (expected <= %d for a "
                         "ResNet, got %d)", fn, 1 << 27, c->width_base);
    walk w = {0};
    w.k = snn_kernels_for(device);
    w.training = training;
    w.align = device == SNN_CPU ? 64.0 : 256.0;
    double T = c->time_steps, N = batch_size;

    constant(&w, N * c->in_channels * c->height * c->width); /* the batch */
    constant(&w, N);                                         /* its labels */
    if (c->kind == SNN_MODEL_SPIKING_CNN) walk_cnn(&w, c, T, N);
    else walk_resnet(&w, c, T, N);
    output(&w, N * c->classes); /* readout: the mean over T */
    if (c->spiking_readout) {   /* MSE of the rate against one-hot: one_hot, sub, square, mean */
        constant(&w, N * c->classes);
        output(&w, N * c->classes);
        output(&w, N * c->classes);
        output(&w, 1);
    } else {                    /* cross-entropy: log-softmax, then the NLL */
        output(&w, N * c->classes);
        output(&w, 1);
    }
    constant(&w, N); /* argmax for the accuracy */

    out->parameter_count = (int64_t)w.trainable;
    out->parameters = 4.0 * w.params;
    out->gradients = training ? 4.0 * w.trainable : 0.0;
    out->optimizer = training ? 4.0 * w.trainable * optimizer_states : 0.0;
    out->workspace = w.workspace;
    out->step = w.device + w.workspace + (device == SNN_CPU ? w.host : 0.0);
    if (device == SNN_CPU) {
        out->overhead = (double)(snn_get_num_threads() + 1) * (double)snn_gemm_pack_bytes_cpu();
    } else {
        out->overhead = SNN_CUDA_CONTEXT_SCRATCH + SNN_CUDA_HEADROOM;
    }
    out->total = out->parameters + out->gradients + out->optimizer + out->step + out->overhead;
    /* host memory besides the data: all of it on the CPU; for CUDA the model is built on the
     * host before it moves, and the host arena holds the step's structs and tape nodes */
    out->host = device == SNN_CPU ? out->total : out->parameters + w.host;
    return SNN_OK;
}
