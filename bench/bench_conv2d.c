/*
 * bench_conv2d.c - speed of the CPU conv2d kernels (kernels/cpu/conv2d.c, im2col + SGEMM) on the
 * layers snn.c trains: the Fashion-MNIST spiking CNN and the CIFAR spiking ResNet-18.
 * Not a test: each layer is first checked against a direct 7-loop convolution on 2 images,
 * then forward and backward (dx + dweight + dbias) are timed on the full batch.
 *
 *   build/bin/bench_conv2d [threads] [batch]     (default 2 threads, batch 128)
 *
 * Napkin math: forward is 2 N C_out (C_in KH KW) (H_out W_out) FLOPs; backward does two
 * products of that size (dweight and dx), so twice that. Peak: see cpu_peak.h. The direct loop
 * column is its time on 2 images scaled to the batch (it is single-threaded and slow).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <omp.h>

#include "conv_layers.h"
#include "cpu_peak.h"
#include "kernels/cpu/kernels_cpu.h"
#include "bench_usage.h"


static const layer layers[] = {
    {"fmnist conv1 1->32 28x28", 1, 28, 32, 3, 1, 1},
    {"fmnist conv2 32->64 14x14", 32, 14, 64, 3, 1, 1},
    {"resnet 64->64 32x32", 64, 32, 64, 3, 1, 1},
    {"resnet 64->128 /2 3x3", 64, 32, 128, 3, 2, 1},
    {"resnet 64->128 /2 1x1", 64, 32, 128, 1, 2, 0},
    {"resnet 128->128 16x16", 128, 16, 128, 3, 1, 1},
    {"resnet 256->256 8x8", 256, 8, 256, 3, 1, 1},
    {"resnet 256->512 /2 1x1", 256, 8, 512, 1, 2, 0},
    {"resnet 512->512 4x4", 512, 4, 512, 3, 1, 1},
};

static float *alloc_random(size_t n, snn_rng *rng)
{
    float *p = snn_alloc((n ? n : 1) * sizeof *p, SNN_CPU);
    if (!p) {
        fprintf(stderr, "bench_conv2d: out of memory\n");
        exit(EXIT_FAILURE);
    }
    for (size_t i = 0; i < n; i++) p[i] = 2.0f * snn_rng_uniform(rng) - 1.0f;
    return p;
}
static void free_floats(float *p, size_t n) { snn_free(p, (n ? n : 1) * sizeof *p, SNN_CPU); }

/* The definition, one output at a time (no bias): the check and the "direct" column. */
static void direct_forward(float *out, const float *x, const float *w, const snn_conv2d_dims *d)
{
    for (int n = 0; n < d->N; n++)
        for (int co = 0; co < d->C_out; co++)
            for (int oh = 0; oh < d->H_out; oh++)
                for (int ow = 0; ow < d->W_out; ow++) {
                    float sum = 0.0f;
                    for (int ci = 0; ci < d->C_in; ci++)
                        for (int kh = 0; kh < d->KH; kh++)
                            for (int kw = 0; kw < d->KW; kw++) {
                                int ih = oh * d->stride - d->pad + kh;
                                int iw = ow * d->stride - d->pad + kw;
                                if (ih < 0 || ih >= d->H || iw < 0 || iw >= d->W) continue;
                                sum += w[((co * d->C_in + ci) * d->KH + kh) * d->KW + kw] *
                                       x[(((size_t)n * d->C_in + ci) * d->H + ih) * d->W + iw];
                            }
                    out[(((size_t)n * d->C_out + co) * d->H_out + oh) * d->W_out + ow] = sum;
                }
}

/* Forward on 2 images vs the direct loop: max |difference|, and the direct loop's seconds. */
static double check_layer(const layer *l, snn_rng *rng, double *direct_seconds)
{
    snn_conv2d_dims d = layer_dims(2, l);
    size_t x_n = (size_t)d.N * d.C_in * d.H * d.W, w_n = (size_t)d.C_out * d.C_in * d.KH * d.KW;
    size_t o_n = (size_t)d.N * d.C_out * d.H_out * d.W_out;
    float *x = alloc_random(x_n, rng), *w = alloc_random(w_n, rng);
    float *out = alloc_random(o_n, rng), *want = alloc_random(o_n, rng);
    size_t ws = snn_conv2d_workspace_bytes_cpu(&d);
    float *workspace = snn_alloc(ws ? ws : 1, SNN_CPU);
    snn_conv2d_forward_cpu(out, x, w, NULL, &d, workspace);
    double t = omp_get_wtime();
    direct_forward(want, x, w, &d);
    *direct_seconds = omp_get_wtime() - t;
    double worst = 0.0;
    for (size_t i = 0; i < o_n; i++) worst = fmax(worst, fabs((double)out[i] - (double)want[i]));
    snn_free(workspace, ws ? ws : 1, SNN_CPU);
    free_floats(x, x_n);
    free_floats(w, w_n);
    free_floats(out, o_n);
    free_floats(want, o_n);
    return worst;
}

int main(int argc, char **argv)
{
    bench_usage(argc, argv, "[threads] [batch]   (default 2 threads, batch 128)");
    int threads = argc > 1 ? bench_count(argv[1], "threads", "bench_conv2d") : 2;
    int batch = argc > 2 ? bench_count(argv[2], "batch", "bench_conv2d") : 128;
    snn_set_num_threads(threads);
    cpu_peak peak = cpu_peak_measure(threads);
    printf("bench_conv2d: batch %d, float32, %d OpenMP threads; backward = dx + dweight + dbias\n",
           batch, threads);
    cpu_peak_print(&peak);
    printf("\n| %-26s | %8s | %8s | %6s | %8s | %8s | %6s | %9s | %8s |\n", "layer (N = batch)",
           "fwd ms", "GFLOP/s", "% peak", "bwd ms", "GFLOP/s", "% peak", "direct ms",
           "fwd x");
    printf("|----------------------------|----------|----------|--------|----------|----------"
           "|--------|-----------|----------|\n");

    snn_rng rng;
    snn_rng_seed(&rng, 1);
    for (size_t i = 0; i < sizeof layers / sizeof layers[0]; i++) {
        const layer *l = &layers[i];
        double direct_seconds = 0.0;
        double worst = check_layer(l, &rng, &direct_seconds);
        if (worst > 1e-3) {
            printf("%s: MISMATCH against the direct loop (max |diff| %.3g)\n", l->name, worst);
            return EXIT_FAILURE;
        }

        snn_conv2d_dims d = layer_dims(batch, l);
        size_t x_n = (size_t)d.N * d.C_in * d.H * d.W, w_n = (size_t)d.C_out * d.C_in * d.KH * d.KW;
        size_t o_n = (size_t)d.N * d.C_out * d.H_out * d.W_out, b_n = (size_t)d.C_out;
        float *x = alloc_random(x_n, &rng), *w = alloc_random(w_n, &rng);
        float *bias = alloc_random(b_n, &rng), *out = alloc_random(o_n, &rng);
        float *dout = alloc_random(o_n, &rng), *dx = alloc_random(x_n, &rng);
        float *dw = alloc_random(w_n, &rng), *db = alloc_random(b_n, &rng);
        size_t ws = snn_conv2d_workspace_bytes_cpu(&d);
        float *workspace = snn_alloc(ws ? ws : 1, SNN_CPU);

        double flops = 2.0 * d.N * d.C_out * (double)(d.C_in * d.KH * d.KW) * d.H_out * d.W_out;
        /* best of at least 3 runs, more while under a second has been spent: the dev machine
         * is shared, and the best run is the one nobody else interrupted */
        double fwd = INFINITY, bwd = INFINITY, start;
        snn_conv2d_forward_cpu(out, x, w, bias, &d, workspace); /* warm-up */
        start = omp_get_wtime();
        for (int r = 0; r < 3 || (omp_get_wtime() - start < 1.0 && r < 100); r++) {
            double t = omp_get_wtime();
            snn_conv2d_forward_cpu(out, x, w, bias, &d, workspace);
            fwd = fmin(fwd, omp_get_wtime() - t);
        }
        snn_conv2d_backward_cpu(dx, dw, db, dout, x, w, &d, workspace);
        start = omp_get_wtime();
        for (int r = 0; r < 3 || (omp_get_wtime() - start < 1.0 && r < 100); r++) {
            double t = omp_get_wtime();
            snn_conv2d_backward_cpu(dx, dw, db, dout, x, w, &d, workspace);
            bwd = fmin(bwd, omp_get_wtime() - t);
        }
        double direct = direct_seconds * batch / 2.0;
        double fwd_g = flops / fwd * 1e-9, bwd_g = 2.0 * flops / bwd * 1e-9;
        printf("| %-26s | %8.2f | %8.1f | %5.1f%% | %8.2f | %8.1f | %5.1f%% | %9.0f | %7.0fx |\n",
               l->name, fwd * 1e3, fwd_g, 100.0 * fwd_g / peak.peak_gflops, bwd * 1e3, bwd_g,
               100.0 * bwd_g / peak.peak_gflops, direct * 1e3, direct / fwd);
        fflush(stdout);

        snn_free(workspace, ws ? ws : 1, SNN_CPU);
        free_floats(x, x_n);
        free_floats(w, w_n);
        free_floats(bias, b_n);
        free_floats(out, o_n);
        free_floats(dout, o_n);
        free_floats(dx, x_n);
        free_floats(dw, w_n);
        free_floats(db, b_n);
    }
    printf("\ndirect ms: the 7-loop convolution (one thread) timed on 2 images, scaled to the "
           "batch; fwd x: its time over the forward kernel's.\n");
    snn_shutdown();
    return EXIT_SUCCESS;
}
