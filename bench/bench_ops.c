/*
 * bench_ops.c - every tensor op kernel on its own: time per call and what it achieves against
 * the device's two ceilings (bytes / bandwidth for the memory-bound kernels, FLOPs / peak for
 * GEMM and conv).
 *
 *   build/bin/bench_ops [cpu|cuda]        (default: cuda when a GPU is visible, else cpu)
 *
 * Each row calls the device's kernel-table entry directly on random inputs (never zeros), after
 * 3 warm-up calls, and reports the median of 7 batches of 5 calls timed with the device
 * synchronised around each batch. Bytes are the minimum the kernel must move (each input read
 * once, each output written once; a backward's += reads its output too); the ceiling is a large
 * copy measured in the same run (read + write). Shapes are the ones a spiking ResNet-18 step at
 * B = 64, T = 4 (256 images) sees in layer1 (64 channels at 32x32).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "snn.h"
#include "bench_stats.h"
#include "bench_usage.h"
#include "tensor/arena.h"
#include "kernels/kernels.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef void (*op_fn)(void *ctx);

/* Median seconds per call. */
static double time_op(op_fn fn, void *ctx, snn_device device)
{
    double t[7];
    for (int i = 0; i < 3; i++) fn(ctx);
    for (int r = 0; r < 7; r++) {
        snn_synchronize(device);
        double t0 = now();
        for (int i = 0; i < 5; i++) fn(ctx);
        snn_synchronize(device);
        t[r] = (now() - t0) / 5;
    }
    return bench_median(t, 7);
}

/* A device buffer of n floats filled with U(-1, 1) (positive for log). */
static float *buffer(int64_t n, snn_device device, snn_rng *rng, bool positive)
{
    snn_tensor *t = snn_empty(SNN_SHAPE(n), device);
    if (!t) {
        fprintf(stderr, "bench_ops: %s\n", snn_last_error());
        exit(1);
    }
    snn_tensor_uniform_(t, rng, positive ? 0.1f : -1.0f, 1.0f);
    return t->data;
}

typedef struct ctx {
    const snn_kernels *k;
    float *a, *b, *c, *d, *e, *f, *g;
    int32_t *idx;
    int64_t n;
    snn_broadcast bc;
    snn_conv2d_dims conv;
    snn_pool2d_dims pool;
    snn_adam_params adam;
    int N, C, HW, M, K, Ncols;
} ctx;

static void op_copy(void *p) { ctx *c = p; c->k->copy(c->b, c->a, (size_t)c->n * 4, SNN_COPY_DEVICE_TO_DEVICE); }
static void op_fill(void *p) { ctx *c = p; c->k->fill(c->a, 0.5f, c->n); }
static void op_axpy(void *p) { ctx *c = p; c->k->axpy(c->b, 0.5f, c->a, c->n); }
static void op_exp(void *p) { ctx *c = p; c->k->unary_forward(SNN_UNARY_EXP, c->b, c->a, 0.0f, c->n); }
static void op_exp_back(void *p) { ctx *c = p; c->k->unary_backward(SNN_UNARY_EXP, c->c, c->a, c->a, c->b, 0.0f, c->n); }
static void op_add(void *p) { ctx *c = p; c->k->binary_forward(SNN_BINARY_ADD, c->c, c->a, c->b, &c->bc); }
static void op_mul_back(void *p) { ctx *c = p; c->k->binary_backward(SNN_BINARY_MUL, c->d, c->e, c->c, c->a, c->b, &c->bc); }
static void op_sum(void *p) { ctx *c = p; c->k->sum_dim(c->b, c->a, c->N, c->C, c->HW, 1.0f); }
static void op_gemm(void *p) { ctx *c = p; c->k->gemm(false, false, c->M, c->Ncols, c->K, 1.0f, c->a, c->K, c->b, c->Ncols, 0.0f, c->c, c->Ncols); }
static void op_conv_fwd(void *p) { ctx *c = p; c->k->conv2d_forward(c->c, c->a, c->b, NULL, &c->conv, c->g); }
static void op_conv_bwd(void *p) { ctx *c = p; c->k->conv2d_backward(c->d, c->e, NULL, c->c, c->a, c->b, &c->conv, c->g); }
static void op_pool_fwd(void *p) { ctx *c = p; c->k->max_pool2d_forward(c->b, c->idx, c->a, &c->pool); }
static void op_pool_bwd(void *p) { ctx *c = p; c->k->max_pool2d_backward(c->d, c->b, c->idx, &c->pool); }
static void op_bn_fwd(void *p) { ctx *c = p; c->k->batchnorm_forward_train(c->b, c->e, c->f, c->e + c->C, c->f + c->C, c->a, c->g, c->g + c->C, c->N, c->C, c->HW, 0.1f, 1e-5f); }
static void op_bn_bwd(void *p) { ctx *c = p; c->k->batchnorm_backward(c->d, c->e + 2 * c->C, c->f + 2 * c->C, c->c, c->a, c->g, c->e, c->f, c->N, c->C, c->HW); }
static void op_adam(void *p) { ctx *c = p; c->k->adam_update(c->a, c->b, c->c, c->d, c->n, &c->adam); }

static void row(const char *name, const char *shape, double seconds, double bytes, double flops,
                double copy_gbs)
{
    if (flops > 0)
        printf("| %-24s | %-30s | %9.3f | %8.1f GFLOP/s |          |\n", name, shape, 1e3 * seconds,
               flops / seconds / 1e9);
    else
        printf("| %-24s | %-30s | %9.3f | %8.1f GB/s     | %6.1f %% |\n", name, shape, 1e3 * seconds,
               bytes / seconds / 1e9, 100.0 * bytes / seconds / 1e9 / copy_gbs);
}

int main(int argc, char **argv)
{
    bench_usage(argc, argv, "[cpu|cuda]   (default: cuda when a GPU is visible, else cpu)");
    snn_device device = snn_cuda_available() ? SNN_CUDA : SNN_CPU;
    if (argc > 1 && snn_device_parse(argv[1], &device) != SNN_OK) {
        fprintf(stderr, "usage: %s [cpu|cuda]\n", argv[0]);
        return 2;
    }
    const snn_kernels *k = snn_kernels_or_error("bench_ops", device);
    if (!k) {
        printf("bench_ops: %s\n", snn_last_error());
        return 0;
    }
    snn_rng rng;
    snn_rng_seed(&rng, 1);
    snn_step_begin();
    /* layer1 of ResNet-18 at 256 images: (256, 64, 32, 32) = 16.8M floats, 67 MB */
    const int N = 256, C = 64, H = 32, W = 32;
    const int64_t n = (int64_t)N * C * H * W;
    ctx c = {.k = k, .n = n, .N = N, .C = C, .HW = H * W};
    c.a = buffer(n, device, &rng, true);
    c.b = buffer(n, device, &rng, false);
    c.c = buffer(n, device, &rng, false);
    c.d = buffer(n, device, &rng, false);
    c.e = buffer(n, device, &rng, false);
    c.f = buffer(n, device, &rng, false);
    c.g = buffer(4 * (int64_t)C, device, &rng, true);
    c.bc = (snn_broadcast){.out = SNN_SHAPE(n), .numel = n, .numel_a = n, .numel_b = n, .same_shape = true};
    c.bc.stride_a[0] = c.bc.stride_b[0] = 1;
    double B = 4.0 * (double)n; /* bytes of one tensor */
    double copy = 2 * B / time_op(op_copy, &c, device) / 1e9;

    printf("bench_ops on %s; copy ceiling %.0f GB/s (read + write, %.0f MB)\n\n", snn_device_name(device),
           copy, B / 1e6);
    printf("| kernel | shape | ms | achieved | %% copy |\n|---|---|---:|---:|---:|\n");
    const char *shape = "(256, 64, 32, 32)";
    row("copy (device to device)", shape, 2 * B / copy / 1e9, 2 * B, 0, copy);
    row("fill", shape, time_op(op_fill, &c, device), B, 0, copy);
    row("axpy", shape, time_op(op_axpy, &c, device), 3 * B, 0, copy);
    row("exp forward", shape, time_op(op_exp, &c, device), 2 * B, 0, copy);
    row("exp backward", shape, time_op(op_exp_back, &c, device), 4 * B, 0, copy);
    row("add forward", shape, time_op(op_add, &c, device), 3 * B, 0, copy);
    row("mul backward", shape, time_op(op_mul_back, &c, device), 7 * B, 0, copy);
    row("sum over channels", shape, time_op(op_sum, &c, device), B + B / C, 0, copy);
    row("batchnorm train forward", shape, time_op(op_bn_fwd, &c, device), 2 * B, 0, copy);
    row("batchnorm backward", shape, time_op(op_bn_bwd, &c, device), 4 * B, 0, copy);
    c.pool = (snn_pool2d_dims){N, C, H, W, 2, 2, 0, H / 2, W / 2};
    c.idx = snn_step_alloc("bench_ops", (size_t)(n / 4) * sizeof(int32_t), device);
    row("max-pool 2x2 forward", shape, time_op(op_pool_fwd, &c, device), B + B / 4 + B / 4, 0, copy);
    row("max-pool 2x2 backward", shape, time_op(op_pool_bwd, &c, device), 2 * B / 4 + 2 * B, 0, copy);
    c.adam = (snn_adam_params){1e-3f, 0.9f, 0.999f, 1e-8f, 0.0f, false, 0.1f, 0.001f};
    c.n = 11173962; /* ResNet-18's parameters */
    row("adam update", "11.2M parameters", time_op(op_adam, &c, device), 7 * 4.0 * (double)c.n, 0, copy);
    c.n = n;

    /* GEMM and conv: FLOPs against the device's fp32 rate */
    c.M = 2048, c.K = 2048, c.Ncols = 2048;
    row("gemm fp32", "2048 x 2048 x 2048", time_op(op_gemm, &c, device), 0,
        2.0 * c.M * c.K * (double)c.Ncols, copy);
    const int convs[3][4] = {{64, 32, 1, 3}, {128, 16, 1, 3}, {512, 4, 1, 3}}; /* C, H, stride, K */
    for (int i = 0; i < 3; i++) {
        int Cc = convs[i][0], Hc = convs[i][1], Kc = convs[i][3];
        int Nc = (int)(n / ((int64_t)Cc * Hc * Hc)); /* the same 67 MB of activations */
        if (Nc > N) Nc = N;
        c.conv = (snn_conv2d_dims){Nc, Cc, Hc, Hc, Cc, Kc, Kc, 1, 1, Hc, Hc};
        size_t ws = k->conv2d_workspace_bytes(&c.conv);
        c.g = snn_step_alloc("bench_ops", ws ? ws : 4, device);
        double flops = 2.0 * Nc * (double)Cc * Cc * Kc * Kc * Hc * Hc;
        char s[64];
        snprintf(s, sizeof s, "%d x (%d, %d, %d), 3x3", Nc, Cc, Hc, Hc);
        row("conv2d forward", s, time_op(op_conv_fwd, &c, device), 0, flops, copy);
        row("conv2d backward (dx, dw)", s, time_op(op_conv_bwd, &c, device), 0, 2 * flops, copy);
    }
    snn_step_end();
    snn_shutdown();
    return 0;
}
