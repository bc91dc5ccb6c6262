/*
 * bench_sparse.c - dense conv against the two sparse conv kernels (sparse/sparse_conv.c) on the
 * layer shapes of the spiking CNN and the spiking ResNet-18, at firing rates 1-25 %.
 *
 *   build/bin/bench_sparse [threads] [images] [reps]   (default 2 threads, 16 images = T 4 x N 4, 7)
 *   build/bin/bench_sparse 16 16 7 --gpu-only --gpu-images 256,512 --resnet50
 *
 * The GPU table runs at `images` and again at 256 (batch 64 x T 4), or at the --gpu-images
 * list (512: batch 32 x T 16, the ResNet-50 setting); --gpu-only skips the CPU table;
 * --resnet50 adds ResNet-50's bottleneck shapes (its 1x1 convs, up to 2048 channels).
 *
 * Inputs are {0, 1} with the structure the sparse convs skip (docs/sparse.md section 1): for one
 * image a whole channel is silent with probability s, and inside the active channels each
 * element fires with probability rate / (1 - s), so the overall firing rate is `rate`. s goes
 * from 81 % at a 1 % rate down to 36 % at 25 %: more silent planes than snn.c's ResNet-18s
 * trained without the activity penalty show (3-73 %, docs/sparse.md sections 4-5), about what
 * the penalty reaches (71 % on the H100, section 7).
 *
 * dense: snn_conv2d (im2col + blocked SGEMM, workspace from the step arena). gemm, event: the
 * sparse kernels given the (N, C_in) activity table, as a SparseConv2d runs them: the active-
 * channel lists are built inside the timed call. Best of `reps` runs each. "same" says whether
 * both sparse outputs equal the dense output bit for bit. With a CUDA build and a GPU a second
 * table times the dense CUDA conv against sparse_conv.cu's three kernels (GEMM, event, and
 * event-smem: the event kernel with its weight rows staged in shared memory) on the same kind
 * of inputs.
 * Napkin math: dense does C_out * C_in*K*K * P multiply-adds per image; the GEMM path
 * C_out * |active|*K*K * P, so its ceiling is 1 / (1 - s) on top of the im2col and scatter; the
 * event path does spikes * K*K * C_out adds, rate * that of dense, but with scattered stores.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "snn.h"
#include "bench_usage.h"
#include "sparse/sparse.h"
#include "conv_layers.h"


static const layer layers[] = {
    {"cnn conv2 32->32 14x14", 32, 14, 32, 3, 1, 1},
    {"resnet 64->64 32x32", 64, 32, 64, 3, 1, 1},
    {"resnet 64->128 /2 3x3", 64, 32, 128, 3, 2, 1},
    {"resnet 64->128 /2 1x1", 64, 32, 128, 1, 2, 0},
    {"resnet 128->128 16x16", 128, 16, 128, 3, 1, 1},
    {"resnet 256->256 8x8", 256, 8, 256, 3, 1, 1},
    {"resnet 512->512 4x4", 512, 4, 512, 3, 1, 1},
};

#ifdef SNN_WITH_CUDA
/* the 1x1 and 3x3 convs of a width-64 ResNet-50's bottlenecks (CIFAR stem: 32x32 in layer1) */
static const layer layers50[] = {
    {"r50 256->64 1x1 32x32", 256, 32, 64, 1, 1, 0},
    {"r50 64->64 3x3 32x32", 64, 32, 64, 3, 1, 1},
    {"r50 64->256 1x1 32x32", 64, 32, 256, 1, 1, 0},
    {"r50 512->128 1x1 16x16", 512, 16, 128, 1, 1, 0},
    {"r50 128->512 1x1 16x16", 128, 16, 512, 1, 1, 0},
    {"r50 1024->256 1x1 8x8", 1024, 8, 256, 1, 1, 0},
    {"r50 256->256 3x3 8x8", 256, 8, 256, 3, 1, 1},
    {"r50 512->2048 1x1 4x4", 512, 4, 2048, 1, 1, 0},
    {"r50 2048->512 1x1 4x4", 2048, 4, 512, 1, 1, 0},
};
#endif

static const double rates[] = {0.01, 0.02, 0.05, 0.10, 0.25};
static const double silent[] = {0.81, 0.75, 0.60, 0.50, 0.36};

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* x (N, C, HW) binary with the silent-channel structure above; activity (N, C) the counts. */
static void fill_spikes(float *x, float *act, int N, int C, int HW, double rate, double silent_p,
                        snn_rng *rng)
{
    double in_rate = rate / (1.0 - silent_p);
    for (int n = 0; n < N; n++) {
        for (int c = 0; c < C; c++) {
            float *p = x + ((int64_t)n * C + c) * HW;
            bool off = (double)snn_rng_uniform(rng) < silent_p;
            int count = 0;
            for (int i = 0; i < HW; i++) {
                p[i] = !off && (double)snn_rng_uniform(rng) < in_rate ? 1.0f : 0.0f;
                count += p[i] != 0.0f;
            }
            act[n * C + c] = (float)count;
        }
    }
}

/* One layer's host buffers at N images: spikes x (N, C_in, H, H) and their activity (N, C_in),
 * a random weight, and two outputs (dense, sparse) to compare. */
typedef struct layer_buffers {
    snn_conv2d_dims d;
    int HW;
    int64_t nx, nw, ny;
    float *x, *act, *w, *dense, *sparse;
} layer_buffers;

static void free_buffers(layer_buffers *b, const layer *l)
{
    snn_free(b->x, (size_t)b->nx * sizeof(float), SNN_CPU);
    snn_free(b->act, (size_t)b->d.N * l->C_in * sizeof(float), SNN_CPU);
    snn_free(b->w, (size_t)b->nw * sizeof(float), SNN_CPU);
    snn_free(b->dense, (size_t)b->ny * sizeof(float), SNN_CPU);
    snn_free(b->sparse, (size_t)b->ny * sizeof(float), SNN_CPU);
}

/* The buffers of layer l at N images, the weight drawn from rng; exits if memory runs out. */
static layer_buffers new_buffers(int N, const layer *l, snn_rng *rng)
{
    layer_buffers b;
    b.d = layer_dims(N, l);
    b.HW = l->H * l->H;
    b.nx = (int64_t)N * l->C_in * b.HW;
    b.nw = (int64_t)l->C_out * l->C_in * l->K * l->K;
    b.ny = (int64_t)N * l->C_out * b.d.H_out * b.d.W_out;
    b.x = snn_alloc((size_t)b.nx * sizeof(float), SNN_CPU);
    b.act = snn_alloc((size_t)N * l->C_in * sizeof(float), SNN_CPU);
    b.w = snn_alloc((size_t)b.nw * sizeof(float), SNN_CPU);
    b.dense = snn_alloc((size_t)b.ny * sizeof(float), SNN_CPU);
    b.sparse = snn_alloc((size_t)b.ny * sizeof(float), SNN_CPU);
    if (!b.x || !b.act || !b.w || !b.dense || !b.sparse) {
        fprintf(stderr, "bench_sparse: out of host memory for %s at %d images\n", l->name, N);
        exit(1);
    }
    for (int64_t i = 0; i < b.nw; i++) b.w[i] = snn_rng_normal(rng) * 0.05f;
    return b;
}

#ifdef SNN_WITH_CUDA
/* Calls per timing on the GPU: one call of a small layer is tens of microseconds, so each timing
 * covers this many back-to-back calls between two device syncs and is divided by it. */
#define GPU_CALLS 10

/* The same table on the GPU: dense snn_conv2d (im2col + cuBLAS) against sparse_conv.cu's three
 * kernels (GEMM, event, event with weights in shared memory), all timed between device syncs,
 * best of reps; max |diff| (of the last kernel run) instead of bitwise (different orders).
 * "active" is the fraction of (image, channel) planes with a spike: the GPU target
 * (>= 2x) applies where it is at most 25 %. */
static void bench_cuda(const layer *table, size_t n_layers, int N, int reps, snn_rng *rng)
{
    printf("\nGPU, %d images per call, best of %d timings of %d calls\n", N, reps, GPU_CALLS);
    printf("%-24s %5s %7s %9s %9s %9s %9s %8s %8s %8s %10s\n", "layer", "rate", "active", "dense ms",
           "gemm ms", "event ms", "smem ms", "gemm x", "event x", "smem x", "max|diff|");
    for (size_t li = 0; li < n_layers; li++) {
        const layer *l = &table[li];
        layer_buffers bufs = new_buffers(N, l, rng);
        const snn_conv2d_dims d = bufs.d;
        const int HW = bufs.HW;
        const int64_t ny = bufs.ny;
        float *x = bufs.x, *act = bufs.act, *w = bufs.w, *a = bufs.dense, *b = bufs.sparse;
        for (size_t ri = 0; ri < sizeof rates / sizeof rates[0]; ri++) {
            fill_spikes(x, act, N, l->C_in, HW, rates[ri], silent[ri], rng);
            int64_t active_planes = 0;
            for (int64_t i = 0; i < (int64_t)N * l->C_in; i++) active_planes += act[i] != 0.0f;
            snn_step_begin();
            snn_no_grad_begin();
            snn_tensor *tx = snn_from_host(SNN_SHAPE(N, l->C_in, l->H, l->H), x, SNN_CUDA);
            snn_tensor *tw = snn_from_host(SNN_SHAPE(l->C_out, l->C_in, l->K, l->K), w, SNN_CUDA);
            snn_tensor *ta = snn_from_host(SNN_SHAPE(N, l->C_in), act, SNN_CUDA);
            snn_tensor *ty = snn_empty(SNN_SHAPE(N, l->C_out, d.H_out, d.W_out), SNN_CUDA);
            double best[4] = {1e30, 1e30, 1e30, 1e30};
            bool have_dense = false;
            for (int r = 0; r <= reps; r++) {     /* r = 0 warms up */
                snn_synchronize(SNN_CUDA);
                double t0 = now();
                for (int c = 0; c < GPU_CALLS; c++) {
                    snn_step_begin();
                    snn_tensor *y = snn_conv2d(tx, tw, NULL, l->stride, l->pad);
                    /* the inner step frees y: keep a host copy (outside the timed runs) */
                    if (r == 0 && c == 0 && y) have_dense = snn_tensor_copy_to_host(y, a) == SNN_OK;
                    snn_step_end();
                }
                snn_synchronize(SNN_CUDA);
                double t = (now() - t0) / GPU_CALLS;
                if (r > 0 && t < best[0]) best[0] = t;
                for (int path = SNN_SPARSE_GEMM; path <= SNN_SPARSE_EVENT_SMEM; path++) {
                    t0 = now();
                    for (int c = 0; c < GPU_CALLS; c++)
                        snn_sparse_conv2d_cuda(ty->data, tx->data, tw->data, NULL, &d, ta->data,
                                               (snn_sparse_path)path);
                    snn_synchronize(SNN_CUDA);
                    t = (now() - t0) / GPU_CALLS;
                    const int k = path - SNN_SPARSE_GEMM + 1;   /* 1 gemm, 2 event, 3 smem */
                    if (r > 0 && t < best[k]) best[k] = t;
                }
            }
            double diff = 0.0;
            if (have_dense && snn_tensor_copy_to_host(ty, b) == SNN_OK) {
                for (int64_t i = 0; i < ny; i++) {
                    double e = a[i] > b[i] ? (double)(a[i] - b[i]) : (double)(b[i] - a[i]);
                    if (e > diff) diff = e;
                }
            }
            snn_no_grad_end();
            snn_step_end();
            printf("%-24s %4.0f%% %6.0f%% %9.3f %9.3f %9.3f %9.3f %7.2fx %7.2fx %7.2fx %10.2g\n",
                   l->name, 100.0 * rates[ri], 100.0 * (double)active_planes / ((double)N * l->C_in),
                   1e3 * best[0], 1e3 * best[1], 1e3 * best[2], 1e3 * best[3], best[0] / best[1],
                   best[0] / best[2], best[0] / best[3], diff);
            fflush(stdout);
        }
        free_buffers(&bufs, l);
    }
}
#endif

int main(int argc, char **argv)
{
    bench_usage(argc, argv, "[threads] [images] [reps] [--gpu-only] [--gpu-images N1,N2] [--resnet50]   (default 2 threads, 16 images = T 4 x N 4, 7 reps)");
    int threads = argc > 1 ? bench_count(argv[1], "threads", "bench_sparse") : 2,
        N = argc > 2 ? bench_count(argv[2], "images", "bench_sparse") : 16;
    const int reps = argc > 3 ? bench_count(argv[3], "reps", "bench_sparse") : 7;
    bool gpu_only = false, resnet50 = false;
    int gpu_images[8] = {0}, n_gpu_images = 0;
    for (int a = 4; a < argc; a++) {
        if (!strcmp(argv[a], "--gpu-only")) gpu_only = true;
        else if (!strcmp(argv[a], "--resnet50")) resnet50 = true;
        else if (!strcmp(argv[a], "--gpu-images") && a + 1 < argc) {
            for (char *p = argv[++a]; *p && n_gpu_images < 8; p += *p == ',') {
                char *end;
                long v = strtol(p, &end, 10);
                if (end == p || v < 1) break;
                gpu_images[n_gpu_images++] = (int)v;
                p = end;
            }
        } else {
            fprintf(stderr, "bench_sparse: unknown argument '%s'\n", argv[a]);
            return 2;
        }
    }
    if (!n_gpu_images) gpu_images[n_gpu_images++] = N, gpu_images[n_gpu_images++] = 256;
    snn_set_num_threads(threads);
    snn_rng rng;
    snn_rng_seed(&rng, 1);
    printf("bench_sparse: %d threads, %d images per call (T*N), best of %d\n\n", threads, N, reps);
    if (!gpu_only)
        printf("%-24s %5s %7s %9s %9s %9s %8s %8s %5s\n", "layer", "rate", "silent", "dense ms",
               "gemm ms", "event ms", "gemm x", "event x", "same");
    for (size_t li = 0; !gpu_only && li < sizeof layers / sizeof layers[0]; li++) {
        const layer *l = &layers[li];
        layer_buffers bufs = new_buffers(N, l, &rng);
        const snn_conv2d_dims d = bufs.d;
        const int HW = bufs.HW;
        const int64_t ny = bufs.ny;
        float *x = bufs.x, *act = bufs.act, *w = bufs.w, *ref = bufs.dense, *y = bufs.sparse;
        const size_t nwt = snn_sparse_weights_floats(l->C_out, l->C_in, l->K, l->K);
        float *wt = snn_alloc(nwt * sizeof *wt, SNN_CPU);
        if (!wt) {
            fprintf(stderr, "bench_sparse: out of host memory for %s's prepared weights\n", l->name);
            return 1;
        }
        snn_sparse_prepare_weights(wt, w, l->C_out, l->C_in, l->K, l->K);
        for (size_t ri = 0; ri < sizeof rates / sizeof rates[0]; ri++) {
            fill_spikes(x, act, N, l->C_in, HW, rates[ri], silent[ri], &rng);
            int64_t silent_planes = 0;
            for (int64_t i = 0; i < (int64_t)N * l->C_in; i++) silent_planes += act[i] == 0.0f;
            snn_step_begin();
            snn_no_grad_begin();
            snn_tensor *tx = snn_from_host(SNN_SHAPE(N, l->C_in, l->H, l->H), x, SNN_CPU);
            snn_tensor *tw = snn_from_host(SNN_SHAPE(l->C_out, l->C_in, l->K, l->K), w, SNN_CPU);
            double best[3] = {1e30, 1e30, 1e30};
            bool same = true;
            bool have_dense = false;
            for (int r = 0; r < reps; r++) {
                double t0 = now();
                snn_step_begin();
                snn_tensor *yd = snn_conv2d(tx, tw, NULL, l->stride, l->pad);
                double t = now() - t0;
                /* the inner step frees yd: keep a host copy */
                if (r == 0 && yd) have_dense = snn_tensor_copy_to_host(yd, ref) == SNN_OK;
                snn_step_end();
                if (t < best[0]) best[0] = t;
                for (int path = SNN_SPARSE_GEMM; path <= SNN_SPARSE_EVENT; path++) {
                    t0 = now();
                    snn_sparse_conv2d_cpu(y, x, wt, NULL, &d, act, (snn_sparse_path)path);
                    t = now() - t0;
                    int k = path == SNN_SPARSE_GEMM ? 1 : 2;
                    if (t < best[k]) best[k] = t;
                    if (r == 0) same &= have_dense && !memcmp(y, ref, (size_t)ny * sizeof *y);
                }
            }
            snn_no_grad_end();
            snn_step_end();
            printf("%-24s %4.0f%% %6.0f%% %9.3f %9.3f %9.3f %7.2fx %7.2fx %5s\n", l->name,
                   100.0 * rates[ri], 100.0 * (double)silent_planes / ((double)N * l->C_in),
                   1e3 * best[0], 1e3 * best[1], 1e3 * best[2], best[0] / best[1],
                   best[0] / best[2], same ? "yes" : "NO");
            fflush(stdout);
        }
        snn_free(wt, nwt * sizeof *wt, SNN_CPU);
        free_buffers(&bufs, l);
    }
#ifdef SNN_WITH_CUDA
    if (snn_cuda_available()) {
        /* by default `images` and 256 (batch 64 x T 4: the throughput setting of snn-sparse) */
        for (int i = 0; i < n_gpu_images; i++) {
            bench_cuda(layers, sizeof layers / sizeof layers[0], gpu_images[i], reps, &rng);
            if (resnet50)
                bench_cuda(layers50, sizeof layers50 / sizeof layers50[0], gpu_images[i], reps, &rng);
        }
    }
    else printf("\nGPU: no CUDA device visible.\n");
#else
    printf("\nGPU: built without SNN_CUDA (the CUDA table needs a CUDA build and a GPU).\n");
    (void)resnet50;
    (void)gpu_images;
#endif
    snn_shutdown();
    return 0;
}
