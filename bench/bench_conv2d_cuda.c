/*
 * bench_conv2d_cuda.c - the GPU convolutions on the layers snn.c trains, in each precision and
 * on each path: fp32 (im2col + cuBLAS SGEMM, kernels/cuda/conv/conv2d.cu), TF32 and BF16 on the
 * implicit-GEMM tensor-core kernel (kernels/cuda/conv/conv2d_igemm.cu) and on im2col + cuBLAS (TF32: fp32
 * operands, TF32 math; BF16: the column matrix, dout and the weight in bf16, cublasGemmEx on
 * bf16 operands with fp32 accumulation), and TF32 and BF16 on the channels-last implicit GEMM
 * (kernels/cuda/conv/conv2d_nhwc.cu, "nhwc") where the layer's shape allows it. Not a test; the parity tests are
 * tests/test_cuda_layers.c and tests/test_cuda_igemm.c.
 *
 *   build/bin/bench_conv2d_cuda [images]      (default 256 = batch 64 x T 4 of the ResNet step)
 *
 * For each layer, precision and path: forward, dgrad (dx alone) and wgrad (dweight alone), the
 * median ms of 9 timed calls after 2 warm-ups (the device synchronised around each call), and
 * TFLOP/s = 2 N C_out C_in KH KW H_out W_out / time for each of the three products (dgrad
 * counts its useful terms only: at stride 2 the kernel also multiplies the zeros of the
 * transposed window, 4x the work), and the workspace the conv takes from the step arena. Then
 * the ceiling each precision has on this device: cuBLAS on a large square product (8192^3) in
 * the same mode (BF16: bf16 operands, as the BF16 convs now use; the old fp32-operand
 * "FAST_16BF" figure is printed beside it), so "% of cuBLAS" says how close a conv gets to what
 * the library reaches on the friendliest shape.
 *
 * Last, the decision check: per layer, for TF32 and BF16, which path was faster here against
 * the one the rule of kernels/cuda/conv/conv_path.cu picks, and the sum of the step column
 * with the rule's choice and with the measured best. A MISMATCH line (the rule's path more than
 * 5% slower than the other) is the integrator's cue to update the thresholds in conv_path.cu
 * from these numbers (and the table in docs/benchmarks.md, "Conv paths").
 *
 * Napkin math, spiking ResNet-18 (width 64, 32x32, T = 4, batch 64: 256 images): ~0.56 G
 * multiply-adds per image forward (1.11 GFLOP), so ~850 GFLOP per training step (backward is
 * twice the forward); the H100's dense peaks are ~67 TFLOP/s fp32 (CUDA cores), ~495 TF32 and
 * ~990 BF16 (tensor cores, datasheet, SXM), so the convolutions' floor is ~1.7 ms in TF32 and
 * ~0.9 ms in BF16 per step. The bytes moved are small beside it: one layer-1 activation of 256
 * images is 67 MB, ~25 us at 2.7 TB/s; its BF16 column matrix (576 x 262,144 entries) is 302 MB
 * (604 MB in fp32), written once and read once per forward and per weight gradient.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "conv_layers.h"
#include "snn.h"
#include "bench_stats.h"
#include "bench_usage.h"
#include "kernels/kernels.h"
#ifdef SNN_WITH_CUDA
#include "tensor/cuda_options.h"
#include "kernels/cuda/kernels_cuda.h"

static const layer layers[] = {
    {"fmnist conv1 1->128 28x28", 1, 28, 128, 3, 1, 1},
    {"fmnist conv2 128->128 14x14", 128, 14, 128, 3, 1, 1},
    {"resnet stem 3->64 32x32", 3, 32, 64, 3, 1, 1},
    {"resnet 64->64 32x32", 64, 32, 64, 3, 1, 1},
    {"resnet 64->128 /2 3x3", 64, 32, 128, 3, 2, 1},
    {"resnet 64->128 /2 1x1", 64, 32, 128, 1, 2, 0},
    {"resnet 128->128 16x16", 128, 16, 128, 3, 1, 1},
    {"resnet 128->256 /2 3x3", 128, 16, 256, 3, 2, 1},
    {"resnet 256->256 8x8", 256, 8, 256, 3, 1, 1},
    {"resnet 256->512 /2 3x3", 256, 8, 512, 3, 2, 1},
    {"resnet 512->512 4x4", 512, 4, 512, 3, 1, 1},
};

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static float *device_random(const snn_kernels *k, size_t n, snn_rng *rng, bool spikes)
{
    float *h = malloc(n * sizeof *h);
    for (size_t i = 0; i < n; i++)
        h[i] = spikes ? (float)(snn_rng_uniform(rng) < 0.1f) : 2.0f * snn_rng_uniform(rng) - 1.0f;
    float *d = snn_alloc(n * sizeof *d, SNN_CUDA);
    if (!d) {
        fprintf(stderr, "bench_conv2d_cuda: out of device memory (%zu floats)\n", n);
        exit(EXIT_FAILURE);
    }
    k->copy(d, h, n * sizeof *h, SNN_COPY_HOST_TO_DEVICE);
    free(h);
    return d;
}

enum { FWD, DGRAD, WGRAD };

/* median seconds of one pass */
static double time_pass(const snn_kernels *k, int pass, const snn_conv2d_dims *d, float *out,
                        float *x, float *w, float *dout, float *dx, float *dw, float *ws)
{
    double t[9];
    for (int r = -2; r < 9; r++) {
        k->synchronize();
        double t0 = now();
        if (pass == FWD) k->conv2d_forward(out, x, w, NULL, d, ws);
        else if (pass == DGRAD) k->conv2d_backward(dx, NULL, NULL, dout, x, w, d, ws);
        else k->conv2d_backward(NULL, dw, NULL, dout, x, w, d, ws);
        k->synchronize();
        if (r >= 0) t[r] = now() - t0;
    }
    return bench_median(t, 9);
}

/* cuBLAS on an n^3 square product in the current precision: TFLOP/s. bf16_operands: the
 * operands converted to bf16 first and multiplied by snn_gemm_bf16_cuda (the BF16 convs' GEMM). */
static double gemm_ceiling(const snn_kernels *k, int n, snn_rng *rng, bool bf16_operands)
{
    const size_t nn = (size_t)n * n;
    float *a = device_random(k, nn, rng, false), *b = device_random(k, nn, rng, false);
    float *c = device_random(k, nn, rng, false);
    snn_bf16 *a16 = NULL, *b16 = NULL;
    if (bf16_operands) {
        a16 = snn_alloc(nn * sizeof *a16, SNN_CUDA);
        b16 = snn_alloc(nn * sizeof *b16, SNN_CUDA);
        if (!a16 || !b16) {
            fprintf(stderr, "bench_conv2d_cuda: out of device memory (bf16 operands)\n");
            exit(EXIT_FAILURE);
        }
        snn_to_bf16_cuda(a16, a, (int64_t)nn);
        snn_to_bf16_cuda(b16, b, (int64_t)nn);
    }
    double t[5];
    for (int r = -1; r < 5; r++) {
        k->synchronize();
        double t0 = now();
        if (bf16_operands) snn_gemm_bf16_cuda(false, false, n, n, n, 1.0f, a16, n, b16, n, 0.0f, c, n);
        else k->gemm(false, false, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
        k->synchronize();
        if (r >= 0) t[r] = now() - t0;
    }
    bench_sort(t, 5);
    snn_free(a, nn * sizeof *a, SNN_CUDA);
    snn_free(b, nn * sizeof *b, SNN_CUDA);
    snn_free(c, nn * sizeof *c, SNN_CUDA);
    snn_free(a16, nn * sizeof *a16, SNN_CUDA);
    snn_free(b16, nn * sizeof *b16, SNN_CUDA);
    return 2.0 * (double)n * n * n / t[2] * 1e-12;
}


static const char *path_name(snn_conv_path path)
{
    return path == SNN_CONV_PATH_IGEMM ? "igemm" : path == SNN_CONV_PATH_NHWC ? "nhwc" : "im2col";
}
#endif /* SNN_WITH_CUDA */

int main(int argc, char **argv)
{
    bench_usage(argc, argv, "[images]   (default 256 = batch 64 x T 4; needs a GPU)");
    const int images = argc > 1 ? atoi(argv[1]) : 256;
    if (images < 1) {
        fprintf(stderr, "usage: %s [images >= 1]\n", argv[0]);
        return 2;
    }
#ifndef SNN_WITH_CUDA
    printf("bench_conv2d_cuda: built without CUDA\n");
    return 0;
#else
    if (!snn_cuda_available()) {
        printf("bench_conv2d_cuda: no CUDA device\n");
        return 0;
    }
    const snn_kernels *k = snn_kernels_for(SNN_CUDA);
    snn_rng rng;
    snn_rng_seed(&rng, 3);
    const snn_precision precisions[3] = {SNN_PRECISION_FP32, SNN_PRECISION_TF32,
                                         SNN_PRECISION_BF16};
    double ceiling[3];
    for (int p = 0; p < 3; p++) {
        snn_set_precision(precisions[p]);
        ceiling[p] = gemm_ceiling(k, 8192, &rng, precisions[p] == SNN_PRECISION_BF16);
    }
    snn_set_precision(SNN_PRECISION_BF16);
    const double fast_16bf = gemm_ceiling(k, 8192, &rng, false);
    snn_set_precision(SNN_PRECISION_FP32);
    printf("bench_conv2d_cuda: %d images; cuBLAS 8192^3 ceiling: fp32 %.1f, tf32 %.1f, "
           "bf16 %.1f TFLOP/s (bf16 operands; fp32 operands with FAST_16BF, as the linear "
           "layers: %.1f)\n\n", images, ceiling[0], ceiling[1], ceiling[2], fast_16bf);
    printf("| layer | precision | path | fwd ms | TFLOP/s | dgrad ms | TFLOP/s | wgrad ms | TFLOP/s | "
           "step ms | %% of cuBLAS | ws MB |\n|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    /* every precision on each path it can take; "auto" marks the one snn.c picks for the dims */
    enum { VARIANTS = 7 };
    const struct { snn_precision precision; snn_conv_path path; } variants[VARIANTS] = {
        {SNN_PRECISION_FP32, SNN_CONV_PATH_IM2COL}, {SNN_PRECISION_TF32, SNN_CONV_PATH_IM2COL},
        {SNN_PRECISION_TF32, SNN_CONV_PATH_IGEMM},  {SNN_PRECISION_TF32, SNN_CONV_PATH_NHWC},
        {SNN_PRECISION_BF16, SNN_CONV_PATH_IM2COL}, {SNN_PRECISION_BF16, SNN_CONV_PATH_IGEMM},
        {SNN_PRECISION_BF16, SNN_CONV_PATH_NHWC}};
    double total[3] = {0, 0, 0};
    /* the decision check: per layer, TF32 and BF16 (index 1, 2): step ms on each path the
     * layer can take (0: not measured), and the path the table sends it to */
    enum { LAYERS = sizeof layers / sizeof layers[0], PATHS = 4 };
    double step_ms[LAYERS][3][PATHS] = {{{0.0}}}; /* [layer][precision][snn_conv_path] */
    int auto_path[LAYERS][3] = {{0}};
    for (size_t i = 0; i < LAYERS; i++) {
        const layer *l = &layers[i];
        const snn_conv2d_dims d = layer_dims(images, l);
        const size_t nx = (size_t)d.N * d.C_in * d.H * d.W;
        const size_t nw = (size_t)d.C_out * d.C_in * d.KH * d.KW;
        const size_t nout = (size_t)d.N * d.C_out * d.H_out * d.W_out;
        const bool spikes = l->C_in > 3; /* a spiking net's convs past the stem read spikes */
        float *x = device_random(k, nx, &rng, spikes), *w = device_random(k, nw, &rng, false);
        float *out = device_random(k, nout, &rng, false), *dout = device_random(k, nout, &rng, false);
        float *dx = device_random(k, nx, &rng, false), *dw = device_random(k, nw, &rng, false);
        const double flops = 2.0 * d.N * d.C_out * (double)(d.C_in * d.KH * d.KW) * d.H_out * d.W_out;
        for (int v = 0; v < VARIANTS; v++) {
            const int p = (int)variants[v].precision;
            snn_set_precision(variants[v].precision);
            snn_cuda_set_conv_path(SNN_CONV_PATH_AUTO); /* which path does snn.c take here? */
            const int taken = snn_conv2d_path_cuda(&d);
            const bool chosen = p == SNN_PRECISION_FP32 || taken == (int)variants[v].path;
            snn_cuda_set_conv_path(variants[v].path);
            if (snn_conv2d_path_cuda(&d) != (int)variants[v].path) continue; /* not this shape's */
            const size_t ws_bytes = k->conv2d_workspace_bytes(&d);
            float *ws = snn_alloc(ws_bytes ? ws_bytes : 1, SNN_CUDA);
            const double f = time_pass(k, FWD, &d, out, x, w, dout, dx, dw, ws);
            const double g = time_pass(k, DGRAD, &d, out, x, w, dout, dx, dw, ws);
            const double h = time_pass(k, WGRAD, &d, out, x, w, dout, dx, dw, ws);
            /* the first conv of a network never needs dx (its input is the image) */
            const double step = f + h + (l->C_in > 3 ? g : 0.0);
            if (chosen) total[p] += step;
            const snn_conv_path path = variants[v].path;
            step_ms[i][p][path] = 1e3 * step;
            if (p != SNN_PRECISION_FP32 && chosen) auto_path[i][p] = (int)path;
            printf("| %s | %s | %s%s | %.3f | %.1f | %.3f | %.1f | %.3f | %.1f | %.3f | %.0f%% | %.1f |\n",
                   l->name, snn_precision_name(variants[v].precision), path_name(path),
                   chosen ? " (auto)" : "", 1e3 * f, flops / f * 1e-12, 1e3 * g, flops / g * 1e-12,
                   1e3 * h, flops / h * 1e-12, 1e3 * step,
                   100.0 * 3.0 * flops / (f + g + h) * 1e-12 / ceiling[p], (double)ws_bytes / 1e6);
            fflush(stdout);
            snn_free(ws, ws_bytes ? ws_bytes : 1, SNN_CUDA);
        }
        snn_cuda_set_conv_path(SNN_CONV_PATH_AUTO);
        snn_free(x, nx * sizeof *x, SNN_CUDA);
        snn_free(w, nw * sizeof *w, SNN_CUDA);
        snn_free(out, nout * sizeof *out, SNN_CUDA);
        snn_free(dout, nout * sizeof *dout, SNN_CUDA);
        snn_free(dx, nx * sizeof *dx, SNN_CUDA);
        snn_free(dw, nw * sizeof *dw, SNN_CUDA);
    }
    printf("\nsum of the step column over the layers listed (each once, the path auto takes): fp32 %.2f ms, tf32 %.2f "
           "ms, bf16 %.2f ms\n", 1e3 * total[0], 1e3 * total[1], 1e3 * total[2]);
    /* the decision check (kernels/cuda/conv/conv_path.cu): measured winner against the rule */
    printf("\ndecision check at %d images (step ms; the rule in kernels/cuda/conv/conv_path.cu against the faster "
           "path measured here):\n", images);
    for (int p = 1; p < 3; p++) {
        double best_total = 0.0;
        int mismatches = 0;
        for (size_t i = 0; i < LAYERS; i++) {
            int fastest = SNN_CONV_PATH_IM2COL;
            for (int path = 1; path < PATHS; path++)
                if (step_ms[i][p][path] > 0.0 && step_ms[i][p][path] < step_ms[i][p][fastest])
                    fastest = path;
            const double best = step_ms[i][p][fastest], table = step_ms[i][p][auto_path[i][p]];
            /* within 5% is timing noise, not a wrong decision */
            const bool ok = table <= 1.05 * best;
            best_total += best;
            mismatches += !ok;
            char nhwc[32] = "";
            if (step_ms[i][p][SNN_CONV_PATH_NHWC] > 0.0)
                snprintf(nhwc, sizeof nhwc, "  nhwc %7.3f", step_ms[i][p][SNN_CONV_PATH_NHWC]);
            printf("  %s %-30s igemm %7.3f  im2col %7.3f%s  faster %-6s  table %-6s (%.2fx)  %s\n",
                   snn_precision_name(precisions[p]), layers[i].name,
                   step_ms[i][p][SNN_CONV_PATH_IGEMM], step_ms[i][p][SNN_CONV_PATH_IM2COL], nhwc,
                   path_name((snn_conv_path)fastest), path_name((snn_conv_path)auto_path[i][p]),
                   table / best, ok ? "ok" : "MISMATCH");
        }
        printf("  %s: sum %.2f ms with the table's paths, %.2f ms with the faster ones; %d "
               "mismatch(es)\n", snn_precision_name(precisions[p]), 1e3 * total[p], best_total,
               mismatches);
    }
    snn_set_precision(SNN_PRECISION_FP32);
    snn_shutdown();
    return 0;
#endif
}
