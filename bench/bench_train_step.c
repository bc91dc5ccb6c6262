
/*
 * bench_train_step.c - one training step of a spiking network, and inference latency, on a
 * device: the numbers that say whether snn.c trains as fast as the Python stacks, and how much
 * device memory each image of the batch costs.
 *
 *   build/bin/bench_train_step [--device cuda] [--model resnet18|sew-resnet18|cnn] [--T 4]
 *                              [--batch 16,64,128,256] [--steps 20] [--width 64]
 *                              [--precision fp32|tf32|bf16] [--memory] [--no-infer] [--no-train]
 *                              [--no-warmup]
 *                              [--neuron lif|relu|stbif|...] [--infer-batch 1,64]
 *                              [--conv-path auto|igemm|im2col|nhwc] [--no-fusion]
 *                              [--no-spike-packing] [--keep-bf16]
 * --neuron relu is the same model as an ANN (T = 1): the baseline of the ANN vs SNN profile
 * (docs/ann2snn.md). On the CPU, SNN_KERNELS=ref times the reference kernels (kernels/ref/),
 * which run no fused op: `SNN_KERNELS=ref bench_train_step --model cnn --T 2 --batch 128`
 * against the same command without it is the main job's step on each kernel set.
 *
 * For each batch size: median ms per step (forward, backward, Adam update; timed with the
 * device synchronised around each step), images per second (counting each image once, not T
 * times), the peak device memory of that batch alone (the step arenas are given back and the
 * high-water mark restarted between batch sizes) and what that peak costs per image above the
 * model's own state (parameters, gradients, Adam moments). --memory prints, for the first batch
 * size, what one training step holds at its end, by the name of the op that allocated it.
 * Then inference (eval mode, no tape) at the --infer-batch sizes (default: latency at batch 1
 * and throughput at batch 64), eagerly
 * and (CUDA) replayed as a CUDA Graph (nn/forward_graph.c). Inputs are
 * random normal images; their values do not change the work of a dense network.
 *
 * The arithmetic floor (ResNets, CIFAR stem, 32x32): the convolutions of one image and one
 * time step take ~0.56 G multiply-adds at width 64 (count_resnet_macs below), 1.11 GFLOP; the
 * backward pass costs twice the forward (input and weight gradients), so one step is
 * 3 x 1.11 x T x B GFLOP: B = 64, T = 4 is ~850 GFLOP, ~1.7 ms at the ~500 TFLOP/s dense TF32
 * rate of an H100 SXM and ~0.9 ms in BF16. The table prints the rate each step reached.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "snn.h"
#include "bench_stats.h"
#include "app/options.h"
#include "app/train_online.h"
#include "app/train_segments.h"
#include "tensor/arena.h"
#ifdef SNN_WITH_CUDA
#include "tensor/cuda_options.h"
#endif

/* --train-mode sltt: the training steps are app/train_online.c's (NULL: BPTT); with
 * --time-checkpoint, app/train_segments.c's */
static const train_online_options *online = NULL;
static const train_segments_options *segmented = NULL;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Median seconds of `steps` timed calls after 3 warm-ups; train: forward+backward+update.
 * *first_peak: the device high-water mark over the warm-ups (the first step grows the arenas
 * block by block); *steady_peak: over the timed steps (one coalesced arena block, a warm pool). */
static double time_steps(snn_module *model, snn_optimizer *opt, snn_device device, int batch,
                         int steps, bool train, const snn_model_config *c, snn_rng *rng,
                         size_t *first_peak, size_t *steady_peak)
{
    size_t n = (size_t)batch * (size_t)(c->in_channels * c->height * c->width);
    float *images = malloc(n * sizeof *images), *labels = malloc((size_t)batch * sizeof *labels);
    for (size_t i = 0; i < n; i++) images[i] = snn_rng_normal(rng);
    for (int i = 0; i < batch; i++) labels[i] = (float)(i % c->classes);
    double *times = malloc((size_t)steps * sizeof *times);
    snn_module_train(model, train);
    if (!train) snn_no_grad_begin();
    for (int s = -3; s < steps; s++) {
        snn_synchronize(device);
        if (s == 0) {
            if (first_peak) *first_peak = snn_peak_bytes(device);
            snn_reset_peak_bytes(device);
        }
        double t0 = now();
        snn_step_begin();
        snn_tensor *x = snn_from_host(SNN_SHAPE(batch, c->in_channels, c->height, c->width), images, device);
        snn_tensor *y = snn_from_host(SNN_SHAPE(batch), labels, device);
        snn_synchronize(device); /* the upload is the data loader's cost, not the step's */
        t0 = now();
        if (train && (online || segmented)) {
            snn_tensor *logits, *loss;
            snn_status st = online ? train_online_step(model, x, y, s + 3, online, &logits, &loss)
                                   : train_segments_step(model, x, y, segmented, &logits, &loss);
            if (st != SNN_OK || snn_optimizer_step(opt) != SNN_OK) {
                fprintf(stderr, "bench_train_step: %s\n", snn_last_error());
                exit(1);
            }
        }
        const bool plain = !online && !segmented;
        if (train && plain) snn_module_zero_grad(model);
        snn_tensor *out = train && !plain ? NULL : snn_module_forward(model, x);
        if (train && plain) {
            snn_tensor *loss = snn_cross_entropy(out, y);
            if (!loss || snn_backward(loss) != SNN_OK || snn_optimizer_step(opt) != SNN_OK) {
                fprintf(stderr, "bench_train_step: %s\n", snn_last_error());
                exit(1);
            }
        } else if (!train && !out) {
            fprintf(stderr, "bench_train_step: %s\n", snn_last_error());
            exit(1);
        }
        snn_synchronize(device);
        double t = now() - t0;
        snn_step_end();
        if (s >= 0) times[s] = t;
    }
    if (!train) snn_no_grad_end();
    if (steady_peak) *steady_peak = snn_peak_bytes(device);
    double m = bench_median(times, steps);
    free(times);
    free(images);
    free(labels);
    return m;
}

/* Median seconds of the eval forward replayed as a CUDA Graph (nn/forward_graph.c). */
static double time_graph(snn_module *model, snn_device device, int batch, int steps,
                         const snn_model_config *c, snn_rng *rng)
{
    size_t n = (size_t)batch * (size_t)(c->in_channels * c->height * c->width);
    float *images = malloc(n * sizeof *images);
    for (size_t i = 0; i < n; i++) images[i] = snn_rng_normal(rng);
    snn_module_train(model, false);
    const snn_shape shape = SNN_SHAPE(batch, c->in_channels, c->height, c->width);
    snn_forward_graph *g = snn_forward_graph_new(model, shape, device);
    if (!g) {
        fprintf(stderr, "bench_train_step: %s\n", snn_last_error());
        exit(1);
    }
    double *times = malloc((size_t)steps * sizeof *times);
    for (int s = -3; s < steps; s++) {
        snn_step_begin();
        snn_tensor *x = snn_from_host(shape, images, device);
        snn_synchronize(device);
        double t0 = now();
        if (!snn_forward_graph_run(g, x)) {
            fprintf(stderr, "bench_train_step: %s\n", snn_last_error());
            exit(1);
        }
        snn_synchronize(device);
        double t = now() - t0;
        snn_step_end();
        if (s >= 0) times[s] = t;
    }
    snn_forward_graph_free(g);
    double m = bench_median(times, steps);
    free(times);
    free(images);
    return m;
}

/* Multiply-adds of the convolutions and the classifier of a CIFAR-stem ResNet-18 for one image
 * and one time step: 3x3 stem, four stages of two basic blocks (two 3x3 convs each; the first
 * block of stages 2-4 halves the plane and adds a 1x1 stride-2 shortcut). */
static double count_resnet18_macs(const snn_model_config *c)
{
    double w = c->width_base, plane = (double)c->height * c->width;
    double macs = c->in_channels * 9.0 * w * plane;
    for (int stage = 0; stage < 4; stage++) {
        double out = w * (1 << stage), in = stage ? out / 2 : out;
        if (stage) plane /= 4;
        macs += in * 9 * out * plane + 3 * out * 9 * out * plane; /* four 3x3 convs */
        if (stage) macs += in * out * plane;                      /* 1x1 shortcut */
    }
    return macs + 8 * w * c->classes;
}

typedef struct memory_row {
    char name[112]; /* the op's name (the pool's: and whose backward took it) */
    size_t bytes;
    int count;
} memory_row;

typedef struct memory_table {
    memory_row rows[128];
    int n;
} memory_table;

/* A row of the step pool's profile ("gradient, in snn_conv2d's backward"), or of the arena's
 * (backward_op NULL: the op's name alone) */
static void collect_pool_row(const char *fn, const char *backward_op, size_t bytes, int count,
                             void *ctx)
{
    memory_table *t = ctx;
    if (t->n == 128) return;
    memory_row *r = &t->rows[t->n++];
    snprintf(r->name, sizeof r->name, "%s%s%s%s", fn, backward_op ? ", in " : "",
             backward_op ? backward_op : "", backward_op ? "'s backward" : "");
    r->bytes = bytes, r->count = count;
}

static void collect_row(const char *fn, size_t bytes, int count, void *ctx)
{
    collect_pool_row(fn, NULL, bytes, count, ctx);
}

static int by_bytes_descending(const void *a, const void *b)
{
    size_t x = ((const memory_row *)a)->bytes, y = ((const memory_row *)b)->bytes;
    return (x < y) - (x > y);
}

/* A table of what the step arena (or `what`) holds, by op, largest first. */
static void print_memory_table(memory_table *table, int batch, const char *when,
                               const char *what)
{
    qsort(table->rows, (size_t)table->n, sizeof table->rows[0], by_bytes_descending);
    size_t held = 0;
    for (int i = 0; i < table->n; i++) held += table->rows[i].bytes;
    printf("\nmemory held %s, batch %d, by the op that allocated it\n", when, batch);
    printf("| allocated by | tensors | MB | MB / image | share |\n|---|---:|---:|---:|---:|\n");
    for (int i = 0; i < table->n; i++)
        printf("| %s | %d | %.1f | %.2f | %.1f%% |\n", table->rows[i].name, table->rows[i].count,
               table->rows[i].bytes / 1e6, table->rows[i].bytes / 1e6 / batch,
               100.0 * (double)table->rows[i].bytes / (double)(held ? held : 1));
    printf("| %s, in all | | %.1f | %.2f | |\n", what, held / 1e6, held / 1e6 / batch);
}

/* One training step with the arena's memory profile on: what the step holds just before it
 * ends (the activations the backward pass saved, by the op that saved them), what it held
 * when the arena peaked (those, and the scratch of the op that made the peak), the step
 * arena's high-water mark, and the gradient pool's. With --train-mode sltt, one time step of the
 * online step instead (T = 1, the state carried as a constant, as app/train_online.c runs
 * it): what its backward reads, taken where that step peaks, after the loss. */
static void print_memory_profile(snn_module *model, snn_optimizer *opt, snn_device device, int batch,
                                 const snn_model_config *c, snn_rng *rng)
{
    size_t n = (size_t)batch * (size_t)(c->in_channels * c->height * c->width);
    float *images = malloc(n * sizeof *images), *labels = malloc((size_t)batch * sizeof *labels);
    for (size_t i = 0; i < n; i++) images[i] = snn_rng_normal(rng);
    for (int i = 0; i < batch; i++) labels[i] = (float)(i % c->classes);
    snn_module_train(model, true);
    snn_step_pool_reset_peak(device);
    snn_arena_profile(true);
    snn_step_begin();
    snn_tensor *x = snn_from_host(SNN_SHAPE(batch, c->in_channels, c->height, c->width), images, device);
    snn_tensor *y = snn_from_host(SNN_SHAPE(batch), labels, device);
    snn_module_zero_grad(model);
    if (online) {
        snn_model_set_time_steps(model, 1);
        snn_neuron_layers_set_carry(model, SNN_CARRY_CONSTANT);
        snn_module_reset_state(model);
    }
    snn_tensor *loss = online ? snn_cross_entropy_smooth(snn_module_forward(model, x), y, 0.0f)
                              : snn_cross_entropy(snn_module_forward(model, x), y);
    memory_table table = {.n = 0};
    size_t high_water = 0;
    if (loss && online) { /* held at the online step's peak: before its backward */
        snn_synchronize(device);
        high_water = snn_arena_profile_report(device, collect_row, &table);
    }
    if (!loss || snn_backward(loss) != SNN_OK || snn_optimizer_step(opt) != SNN_OK) {
        fprintf(stderr, "bench_train_step: %s\n", snn_last_error());
        exit(1);
    }
    snn_synchronize(device);
    if (online) {
        snn_neuron_layers_set_carry(model, SNN_CARRY_NONE);
        snn_model_set_time_steps(model, c->time_steps);
    } else {
        high_water = snn_arena_profile_report(device, collect_row, &table);
    }
    memory_table at_peak = {.n = 0}; /* what the arena held when it reached its high-water */
    snn_arena_profile_report_high_water(device, collect_row, &at_peak);
    memory_table pool_peak = {.n = 0}; /* what the step pool held at its own */
    snn_step_pool_profile_report_peak(device, collect_pool_row, &pool_peak);
    snn_step_end();
    snn_arena_profile(false);
    print_memory_table(&table, batch, online ? "before the backward of one time step of the "
                                               "online step" : "at the end of one training step",
                       "step arena");
    print_memory_table(&at_peak, batch, "when the step arena reached its high-water",
                       "step arena");
    print_memory_table(&pool_peak, batch, "in the gradient pool at its high-water (the blocks "
                       "in use: conv outputs and spikes from the forward, gradients from the "
                       "backward named)", "gradient pool");
    printf("step arena high-water %.1f MB; gradient pool high-water %.1f MB (reserved %.1f MB)\n\n",
           high_water / 1e6, snn_step_pool_peak_bytes(device) / 1e6,
           snn_step_pool_reserved_bytes(device) / 1e6);
    free(images);
    free(labels);
}

int main(int argc, char **argv)
{
    const char *device_name = snn_cuda_available() ? "cuda" : "cpu", *model_name = "resnet18";
    const char *batches = "64,128", *precision_name = "fp32", *neuron = "lif";
    const char *infer_batches = "1,64", *conv_path = "auto", *train_mode = "bptt";
    int T = 4, steps = 20, width = 0, sltt_k = 0, time_checkpoint = 0;
    bool no_infer = false, no_train = false, memory = false, tf32 = false, no_fusion = false;
    bool no_packing = false, no_warmup = false;
    bool keep_bf16 = false;
    option table[] = {
        {"--device", OPT_STRING, &device_name, "cpu, cuda"},
        {"--model", OPT_STRING, &model_name, "resnet18, sew-resnet18, cnn, ... (snn-train's models)"},
        {"--T", OPT_INT, &T, "time steps"},
        {"--batch", OPT_STRING, &batches, "training batch sizes, comma-separated"},
        {"--steps", OPT_INT, &steps, "timed steps per batch size (median)"},
        {"--width", OPT_INT, &width, "channels of the first conv (0: the model's default)"},
        {"--precision", OPT_STRING, &precision_name, "fp32, tf32, bf16"},
        {"--tf32", OPT_FLAG, &tf32, "the same as --precision tf32"},
        {"--neuron", OPT_STRING, &neuron, "lif, plif, if, stbif, ...; relu: the same model as an ANN (T = 1)"},
        {"--memory", OPT_FLAG, &memory, "print what one training step holds, by op"},
        {"--no-infer", OPT_FLAG, &no_infer, "training steps only (for profilers)"},
        {"--no-train", OPT_FLAG, &no_train, "inference only (for profilers): no training batch"},
        {"--no-warmup", OPT_FLAG, &no_warmup,
         "no training step at batch 1 before the first batch (for profilers: every step profiled is "
         "then one of --batch; the Adam moments are made in its first warm-up step, so the first "
         "batch's memory columns count them)"},
        {"--no-fusion", OPT_FLAG, &no_fusion,
         "no fusion rules: batch-norm -> neuron as separate ops (the model option fuse)"},
        {"--no-spike-packing", OPT_FLAG, &no_packing,
         "keep spikes for backward as floats, not bits (the model option pack_spikes)"},
        {"--keep-bf16", OPT_FLAG, &keep_bf16,
         "keep conv outputs for backward as bf16, rounded (the model option keep_bf16)"},
        {"--infer-batch", OPT_STRING, &infer_batches, "inference batch sizes, comma-separated"},
        {"--train-mode", OPT_STRING, &train_mode,
         "bptt, or sltt / ottt: online, one time step's forward and backward at a time (ottt: weight "
         "gradients against the inputs' traces; app/train_online.c)"},
        {"--sltt-k", OPT_INT, &sltt_k, "--train-mode sltt / ottt: backward on K of the T steps (0: all)"},
        {"--time-checkpoint", OPT_INT, &time_checkpoint,
         "--train-mode bptt in segments of K steps recomputed in backward (app/train_segments.c)"},
        {"--conv-path", OPT_STRING, &conv_path, "CUDA TF32 / BF16 convs: auto, igemm, im2col, nhwc "
                                                "(tensor/cuda_options.h)"},
    };
    int parsed = parse_options(argc, argv, "One training step and inference latency of a spiking "
                               "network: ms, images/s, device memory per image.", table,
                               (int)(sizeof table / sizeof table[0]));
    if (parsed) return parsed == 2 ? 0 : 2;
    if (tf32) precision_name = "tf32";
    static train_online_options online_options;
    static train_segments_options segment_options;
    if (time_checkpoint > 0 && strcmp(train_mode, "bptt") == 0) {
        segment_options = (train_segments_options){.segment = time_checkpoint};
        segmented = &segment_options;
    } else if ((strcmp(train_mode, "sltt") == 0 || strcmp(train_mode, "ottt") == 0) &&
               time_checkpoint == 0) {
        online_options = (train_online_options){.backward_steps = sltt_k, .seed = 1,
                                                 .traces = strcmp(train_mode, "ottt") == 0};
        online = &online_options;
    } else if (strcmp(train_mode, "bptt") != 0 || sltt_k < 0 || time_checkpoint < 0) {
        fprintf(stderr, "bench_train_step: bad --train-mode %s, --sltt-k %d or --time-checkpoint "
                "%d (expected bptt, sltt or ottt, K >= 0, and time checkpoints with bptt only)\n",
                train_mode, sltt_k, time_checkpoint);
        return 2;
    }
    if (T < 1 || steps < 1 || width < 0) {
        fprintf(stderr, "bench_train_step: bad --T %d, --steps %d or --width %d (expected >= 1, "
                ">= 1, >= 0)\n", T, steps, width);
        return 2;
    }
    if (no_train && no_infer) {
        fprintf(stderr, "bench_train_step: --no-train and --no-infer leave nothing to time\n");
        return 2;
    }
    const int infer = !no_infer;
    snn_device device;
    snn_model_kind kind;
    snn_precision precision;
    snn_neuron_kind neuron_kind;
    if (snn_device_parse(device_name, &device) != SNN_OK || snn_model_kind_parse(model_name, &kind) != SNN_OK ||
        snn_precision_parse(precision_name, &precision) != SNN_OK ||
        snn_neuron_kind_parse(neuron, &neuron_kind) != SNN_OK) {
        fprintf(stderr, "bench_train_step: %s\n", snn_last_error());
        return 2;
    }
    if (device == SNN_CUDA && !snn_cuda_available()) {
        printf("bench_train_step: no CUDA device\n");
        return 0;
    }
    if (snn_set_precision(precision) != SNN_OK) {
        fprintf(stderr, "bench_train_step: %s\n", snn_last_error());
        return 2;
    }
    const char *paths[4] = {"auto", "igemm", "im2col", "nhwc"};
    int path = -1;
    for (int i = 0; i < 4; i++)
        if (!strcmp(conv_path, paths[i])) path = i;
    if (path < 0) {
        fprintf(stderr, "bench_train_step: bad --conv-path '%s' (expected auto, igemm, im2col or "
                "nhwc)\n", conv_path);
        return 2;
    }
#ifdef SNN_WITH_CUDA
    _Static_assert(SNN_CONV_PATH_AUTO == 0 && SNN_CONV_PATH_IGEMM == 1 &&
                   SNN_CONV_PATH_IM2COL == 2 && SNN_CONV_PATH_NHWC == 3,
                   "paths[] lists the conv paths in the enum's order");
    snn_cuda_set_conv_path((snn_conv_path)path);
#endif
    snn_rng rng;
    snn_rng_seed(&rng, 0);
    snn_model_config c = snn_model_config_default(kind);
    c.neuron = snn_neuron_config_default(neuron_kind);
    c.neuron.surrogate = snn_surrogate_default(SNN_SURROGATE_ATAN);
    if (snn_neuron_is_ann(neuron_kind)) T = 1; /* an ANN: one pass */
    c.time_steps = T;
    if (width) c.width_base = width;
    snn_module *model = snn_model_new(&c, &rng);
    if (!model || snn_module_to(model, device) != SNN_OK) {
        fprintf(stderr, "bench_train_step: %s\n", snn_last_error());
        return 1;
    }
    snn_model_options options = snn_model_options_of(model);
    options.fuse = !no_fusion;
    options.pack_spikes = !no_packing;
    options.keep_bf16 = keep_bf16;
    snn_model_set_options(model, &options);
    snn_optimizer *opt = snn_adam_new(model, 1e-3f, 0.0f, false);
    bool resnet18 = !strcmp(model_name, "resnet18") || !strcmp(model_name, "sew-resnet18");
    double gflop_per_image = resnet18 ? 3.0 * 2.0 * count_resnet18_macs(&c) * T / 1e9 : 0.0;
    /* the reference kernels run no fused op and keep spikes as floats (nn/plan.h) */
    bool ref = device == SNN_CPU && snn_get_kernels() == SNN_KERNELS_REF;
    printf("%s, T=%d, width %d, %lld parameters, device %s%s, %s neurons (ATan), Adam, "
           "precision %s, conv path %s, batch-norm -> neuron fusion %s, spikes kept as %s, "
           "conv outputs kept as %s\n",
           model_name, T, c.width_base, (long long)snn_module_num_parameters(model), device_name,
           ref ? " (ref kernels)" : "", neuron, snn_precision_name(precision), conv_path,
           no_fusion || ref ? "off" : "on", no_packing || ref ? "floats" : "bits",
           options.keep_bf16 ? "bf16" : "fp32");
    if (online && (sltt_k == 0 || sltt_k >= T))
        printf("train mode: %s (online: T forward + backward passes of one time step each)\n",
               train_mode);
    else if (online)
        printf("train mode: %s-%d (online: T forward passes of one time step, backward on %d "
               "of them)\n", train_mode, sltt_k, sltt_k);
    if (segmented)
        printf("train mode: bptt in segments of %d steps, each recomputed in backward\n",
               time_checkpoint);
    if ((online && train_online_check("bench_train_step", train_mode, model) != SNN_OK) ||
        (segmented && train_segments_check("bench_train_step", model, time_checkpoint) != SNN_OK)) {
        fprintf(stderr, "%s\n", snn_last_error());
        return 2;
    }
    if (resnet18) printf("one training step: %.2f GFLOP per image (convolutions and classifier, x3 for backward)\n",
                         gflop_per_image);
    /* one step at batch 1 first, so that the Adam moments exist before memory is measured
     * (none with --no-train or --no-warmup: a profile then sees the steps asked for alone) */
    if (!no_train && !no_warmup) time_steps(model, opt, device, 1, 1, true, &c, &rng, NULL, NULL);
    printf("peak MB: the most device memory held in the first steps (the step arena reserved in one "
           "block from the memory estimate, as snn-train does); steady MB: the most held over the "
           "timed steps; MB / image: steady, above the model's own state (%.0f MB)\n",
           snn_live_bytes(device) / 1e6);
    printf("| phase | batch | ms / step | images / s | TFLOP/s | peak MB | steady MB | MB / image |\n"
           "|---|---:|---:|---:|---:|---:|---:|---:|\n");
    char list[64];
    snprintf(list, sizeof list, "%s", batches);
    int first_batch = 0;
    for (char *tok = no_train ? NULL : strtok(list, ","); tok; tok = strtok(NULL, ",")) {
        int batch = atoi(tok);
        if (!first_batch) first_batch = batch;
        snn_arena_release_all(); /* this batch's peak alone: the arenas start again from empty */
        size_t base = snn_live_bytes(device);
        /* as snn-train: the first step's arena in one block, sized by the memory estimate (else
         * it grows block by block, doubling, and the first steps hold up to twice the steady) */
        snn_memory_estimate e;
        const snn_state_carry carry = online      ? SNN_CARRY_CONSTANT
                                      : segmented ? SNN_CARRY_DIFFERENTIABLE
                                                  : SNN_CARRY_NONE;
        const snn_status estimated =
            carry != SNN_CARRY_NONE
                ? snn_model_memory_estimate_through_time(&c, &options, carry,
                                                         online ? 1 : time_checkpoint,
                                                         online && online->traces, batch,
                                                         device, 2, &e)
                : snn_model_memory_estimate_with(&c, &options, batch, device, true, 2, &e);
        if (estimated != SNN_OK ||
            snn_step_reserve(device, (size_t)(e.step - e.gradient_pool)) != SNN_OK) {
            fprintf(stderr, "bench_train_step: batch %d: %s\n", batch, snn_last_error());
            return 1;
        }
        snn_reset_peak_bytes(device);
        size_t peak, steady;
        double t = time_steps(model, opt, device, batch, steps, true, &c, &rng, &peak, &steady);
        char rate[32] = "";
        if (gflop_per_image > 0) snprintf(rate, sizeof rate, "%.1f", gflop_per_image * batch / t / 1e3);
        printf("| train | %d | %.2f | %.0f | %s | %.0f | %.0f | %.1f |\n", batch, 1e3 * t, batch / t, rate,
               peak / 1e6, steady / 1e6, (double)(steady - base) / 1e6 / batch);
        fflush(stdout);
    }
    if (memory && first_batch) print_memory_profile(model, opt, device, first_batch, &c, &rng);
    int infer_batch[8], n_infer = 0;
    snprintf(list, sizeof list, "%s", infer_batches);
    for (char *tok = strtok(list, ","); tok && n_infer < 8; tok = strtok(NULL, ","))
        if (atoi(tok) > 0) infer_batch[n_infer++] = atoi(tok);
    for (int i = 0; infer && i < n_infer; i++) {
        snn_arena_release_all();
        size_t base = snn_live_bytes(device);
        snn_reset_peak_bytes(device);
        size_t peak, steady;
        double t = time_steps(model, opt, device, infer_batch[i], steps, false, &c, &rng, &peak, &steady);
        printf("| infer | %d | %.2f | %.0f | | %.0f | %.0f | %.1f |\n", infer_batch[i], 1e3 * t,
               infer_batch[i] / t, peak / 1e6, steady / 1e6, (double)(steady - base) / 1e6 / infer_batch[i]);
    }
    for (int i = 0; infer && device == SNN_CUDA && i < n_infer; i++) {
        double t = time_graph(model, device, infer_batch[i], steps, &c, &rng);
        printf("| infer, CUDA Graph | %d | %.2f | %.0f | | | | |\n", infer_batch[i], 1e3 * t, infer_batch[i] / t);
    }
    snn_optimizer_free(opt);
    snn_module_free(model);
    snn_shutdown();
    return 0;
}
