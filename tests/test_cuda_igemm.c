/*
 * test_cuda_igemm.c - the tensor-core convolutions in TF32 and BF16, on every path a TF32 /
 * BF16 conv can take, each forced with snn_cuda_set_conv_path:
 *   igemm   the implicit-GEMM kernel (kernels/cuda/conv/conv2d_igemm.cu);
 *   im2col  the column matrix and cuBLAS (kernels/cuda/conv/conv2d.cu): TF32 math on fp32
 *           operands, or in BF16 the column matrix, dout and the weight converted to bf16 and
 *           cublasGemmEx on bf16 operands with fp32 accumulation;
 *   nhwc    on the shapes it takes (strides 1-4, channels multiples of 32): the implicit GEMM on
 *           channels-last bf16 or TF32 copies (kernels/cuda/conv/conv2d_nhwc.cu),
 * on what a parity check against the reference cannot show: the path taken is the one forced;
 * two runs agree bit for bit (no atomics; split-K partial sums added in a fixed order), the
 * forward and both gradients, a NULL gradient left untouched; BF16 results differ from TF32
 * ones (bf16 rounds coarser: "BF16" cuBLAS on fp32 operands once ran TF32 kernels, bit for bit
 * the TF32 results); conv2d_forward_bn_eval gives the bits of conv2d_forward then
 * batchnorm_forward_eval on every path and precision, and conv2d_backward_bn_dout the bits of
 * batchnorm_backward_in_place_sums then conv2d_backward, and conv2d_backward_consuming (x's
 * copy kept in the dout it is given) the bits of those entries; the BF16 column matrix takes
 * half the workspace; the precision switch itself. Shapes: the models' (the Fashion-MNIST
 * CNN, every ResNet-18 stage) and awkward ones (channel counts that fill no tile, a K that ends inside a
 * slice, 5x5, 3x1, stride 3, one image, a batch that the im2col workspace takes in chunks).
 *
 * Every path's agreement with the reference kernels (kernels/ref/conv2d.c), on operands rounded
 * as the tensor cores round them, is checked by the parity harness,
 * tests/test_cuda_backend_ops.c (which also fills outputs and workspaces with NaN). Without a
 * GPU it exits 77 (skipped).
 *
 * Run on the GPU machine: ctest -R cuda_igemm --output-on-failure
 */
#include <stdint.h>

#include "cuda_parity.h"
#include "kernels/ref/kernels_ref.h" /* snn_bf16_bits, snn_bf16_value */
#include "tensor/error.h"
#ifdef SNN_WITH_CUDA
#include "tensor/cuda_options.h"  /* snn_conv_path */
#include "kernels/cuda/kernels_cuda.h"   /* snn_conv2d_path_cuda, snn_conv2d_nhwc_supports */
#else
typedef enum {
    SNN_CONV_PATH_AUTO,
    SNN_CONV_PATH_IGEMM,
    SNN_CONV_PATH_IM2COL,
    SNN_CONV_PATH_NHWC
} snn_conv_path;
#endif

static snn_conv2d_dims conv_dims(int N, int C_in, int H, int W, int C_out, int KH, int KW,
                                 int stride, int pad)
{
    snn_conv2d_dims d = {N, C_in, H, W, C_out, KH, KW, stride, pad, 0, 0};
    d.H_out = (H + 2 * pad - KH) / stride + 1;
    d.W_out = (W + 2 * pad - KW) / stride + 1;
    return d;
}

static float *download_host(const float *dev, size_t n)
{
    float *h = host_floats(n);
    download(h, dev, n * sizeof *h);
    return h;
}

/* At least one of the n elements differs bit for bit. */
static void expect_differ(const char *what, const float *a, const float *b, size_t n)
{
    size_t differ = 0;
    for (size_t i = 0; i < n; i++) differ += memcmp(a + i, b + i, sizeof *a) != 0;
    test_checks++;
    if (differ == 0) {
        test_failures++;
        fprintf(stderr, "FAIL %s: the BF16 result equals the TF32 one bit for bit (%zu elements):"
                " are the operands really bf16?\n", what, n);
    }
}

/* The workspace starts as NaN: 0x7fc07fc0 is a NaN as one fp32 and as two bf16, so a kernel
 * that reads an entry nobody wrote spreads NaN into its result. */
static void fill_nan(void *dev, size_t bytes)
{
    const uint32_t bits = 0x7fc07fc0u;
    float nan_both;
    memcpy(&nan_both, &bits, sizeof nan_both);
    gpu->fill(dev, nan_both, (int64_t)(bytes / sizeof(float)));
}

/* The conv path (cuda_options.h exists only in CUDA builds; without one, parity_begin has
 * exited 77 before any of this runs). */
static void force_path(snn_conv_path path)
{
#ifdef SNN_WITH_CUDA
    snn_cuda_set_conv_path(path);
#else
    (void)path;
#endif
}

static const char *path_name(snn_conv_path path)
{
    return path == SNN_CONV_PATH_IGEMM ? "igemm" : path == SNN_CONV_PATH_NHWC ? "nhwc" : "im2col";
}

/* Whether the channels-last BF16 kernel takes these dims (conv2d_nhwc.cu). */
static bool nhwc_supports(const snn_conv2d_dims *d)
{
#ifdef SNN_WITH_CUDA
    return snn_conv2d_nhwc_supports(d);
#else
    (void)d;
    return false;
#endif
}

static void auto_path(void)
{
#ifdef SNN_WITH_CUDA
    snn_cuda_set_conv_path(SNN_CONV_PATH_AUTO);
#endif
}

static snn_conv_path path_taken(const snn_conv2d_dims *d)
{
#ifdef SNN_WITH_CUDA
    return (snn_conv_path)snn_conv2d_path_cuda(d);
#else
    (void)d;
    return SNN_CONV_PATH_IM2COL;
#endif
}

/* One shape's inputs on the GPU. */
typedef struct conv_inputs {
    snn_conv2d_dims d;
    bool with_bias;
    int skip;                     /* bit 0 drops dx, bit 1 dweight */
    size_t nx, nw, nout;
    const float *dx0, *dw0;       /* the gradients' initial values (host) */
    const float *d_x, *d_w, *d_bias, *d_dout; /* device copies of the inputs */
    char dims[160];
} conv_inputs;

/* Host copies of what one GPU run gave. */
typedef struct conv_results {
    float *out, *dx, *dw;
} conv_results;

/* Runs the shape on the GPU in precision p on the forced path: the path is the one forced, a
 * second run gives the same bits, a NULL gradient stays as it was. Returns the results for the
 * TF32 / BF16 comparison. */
static conv_results gpu_run(const conv_inputs *c, snn_precision p, snn_conv_path path)
{
    const snn_conv2d_dims *d = &c->d;
    char tag[224], what[288];
    snprintf(tag, sizeof tag, "%s %s %s", path_name(path), snn_precision_name(p), c->dims);
    SNN_ASSERT(snn_set_precision(p) == SNN_OK);
    force_path(path);
    snprintf(what, sizeof what, "path taken %s", tag);
    test_checks++;
    if (path_taken(d) != path) {
        test_failures++;
        fprintf(stderr, "FAIL %s: the forced path is not the one conv2d.cu takes\n", what);
    }
    const size_t ws_bytes = gpu->conv2d_workspace_bytes(d);
    float *ws = tracked_alloc(ws_bytes, SNN_CUDA);
    conv_results r = {NULL, NULL, NULL};

    float *d_out = dev_floats(c->nout), *d_out2 = dev_floats(c->nout);
    fill_nan(ws, ws_bytes);
    gpu->conv2d_forward(d_out, c->d_x, c->d_w, c->with_bias ? c->d_bias : NULL, d, ws);
    r.out = download_host(d_out, c->nout);
    fill_nan(ws, ws_bytes);
    gpu->conv2d_forward(d_out2, c->d_x, c->d_w, c->with_bias ? c->d_bias : NULL, d, ws);
    snprintf(what, sizeof what, "forward deterministic %s", tag);
    expect_exact(what, d_out2, r.out, c->nout * sizeof(float));

    /* backward accumulates into the initial gradients; the same call again, the same bits */
    float *d_dx = dev_copy(c->dx0, c->nx), *d_dw = dev_copy(c->dw0, c->nw);
    fill_nan(ws, ws_bytes);
    gpu->conv2d_backward(c->skip & 1 ? NULL : d_dx, c->skip & 2 ? NULL : d_dw, NULL, c->d_dout,
                         c->d_x, c->d_w, d, ws);
    if (c->skip & 1) {
        snprintf(what, sizeof what, "dx untouched when NULL %s", tag);
        expect_exact(what, d_dx, c->dx0, c->nx * sizeof(float));
    } else {
        r.dx = download_host(d_dx, c->nx);
        float *d_dx2 = dev_copy(c->dx0, c->nx);
        fill_nan(ws, ws_bytes);
        gpu->conv2d_backward(d_dx2, NULL, NULL, c->d_dout, c->d_x, c->d_w, d, ws);
        snprintf(what, sizeof what, "dgrad deterministic %s", tag);
        expect_exact(what, d_dx2, r.dx, c->nx * sizeof(float));
    }
    if (c->skip & 2) {
        snprintf(what, sizeof what, "dweight untouched when NULL %s", tag);
        expect_exact(what, d_dw, c->dw0, c->nw * sizeof(float));
    } else {
        r.dw = download_host(d_dw, c->nw);
        /* split-K partial sums are added in a fixed order: a rerun adds the same bits */
        float *d_dw2 = dev_copy(c->dw0, c->nw);
        fill_nan(ws, ws_bytes);
        gpu->conv2d_backward(NULL, d_dw2, NULL, c->d_dout, c->d_x, c->d_w, d, ws);
        snprintf(what, sizeof what, "wgrad deterministic %s", tag);
        expect_exact(what, d_dw2, r.dw, c->nw * sizeof(float));
    }
    auto_path();
    SNN_ASSERT(snn_set_precision(SNN_PRECISION_FP32) == SNN_OK);
    return r;
}

/* BF16 and TF32 on one path: at least one element of each result differs. */
static void expect_precisions_differ(const conv_inputs *c, snn_conv_path path)
{
    const conv_results tf32 = gpu_run(c, SNN_PRECISION_TF32, path);
    const conv_results bf16 = gpu_run(c, SNN_PRECISION_BF16, path);
    char what[224];
    snprintf(what, sizeof what, "%s BF16 != TF32 forward %s", path_name(path), c->dims);
    expect_differ(what, bf16.out, tf32.out, c->nout);
    if (!(c->skip & 1)) {
        snprintf(what, sizeof what, "%s BF16 != TF32 dgrad %s", path_name(path), c->dims);
        expect_differ(what, bf16.dx, tf32.dx, c->nx);
    }
    if (!(c->skip & 2)) {
        snprintf(what, sizeof what, "%s BF16 != TF32 wgrad %s", path_name(path), c->dims);
        expect_differ(what, bf16.dw, tf32.dw, c->nw);
    }
}

/* One shape on every path that takes it, in both precisions. `spikes`: x holds 0/1 (a spiking
 * layer's input). */
static void conv_shape(snn_conv2d_dims d, bool with_bias, int skip, bool spikes)
{
    conv_inputs c;
    memset(&c, 0, sizeof c);
    c.d = d;
    c.with_bias = with_bias;
    c.skip = skip;
    snprintf(c.dims, sizeof c.dims, "N=%d Cin=%d %dx%d Cout=%d k=%dx%d s=%d p=%d%s skip=%d%s",
             d.N, d.C_in, d.H, d.W, d.C_out, d.KH, d.KW, d.stride, d.pad,
             with_bias ? " bias" : "", skip, spikes ? " spikes" : "");
    c.nx = (size_t)d.N * d.C_in * d.H * d.W;
    c.nw = (size_t)d.C_out * d.C_in * d.KH * d.KW;
    c.nout = (size_t)d.N * d.C_out * d.H_out * d.W_out;
    const float *x = spikes ? integer_host(c.nx, 2) : random_host(c.nx, -1.0f, 1.0f);
    c.d_x = dev_copy(x, c.nx);
    c.d_w = dev_copy(random_host(c.nw, -1.0f, 1.0f), c.nw);
    c.d_bias = dev_copy(random_host((size_t)d.C_out, -1.0f, 1.0f), (size_t)d.C_out);
    c.d_dout = dev_copy(random_host(c.nout, -1.0f, 1.0f), c.nout);
    c.dx0 = random_host(c.nx, -1.0f, 1.0f);
    c.dw0 = random_host(c.nw, -1.0f, 1.0f);
    expect_precisions_differ(&c, SNN_CONV_PATH_IGEMM);
    expect_precisions_differ(&c, SNN_CONV_PATH_IM2COL);
    if (nhwc_supports(&d)) expect_precisions_differ(&c, SNN_CONV_PATH_NHWC);
    release_all();
}

/* Awkward shapes: tiles left part empty, K ending inside a slice, odd windows and strides. */
static void test_conv_awkward(void)
{
    conv_shape(conv_dims(5, 3, 11, 11, 8, 3, 3, 1, 1), true, 0, false);  /* K = 27, 5 images */
    conv_shape(conv_dims(3, 8, 9, 7, 12, 3, 3, 2, 1), true, 0, false);   /* stride 2, 9x7 */
    conv_shape(conv_dims(4, 16, 8, 8, 32, 1, 1, 1, 0), true, 0, false);  /* 1x1 stride 1, 8x8 */
    conv_shape(conv_dims(3, 16, 16, 16, 24, 1, 1, 1, 0), true, 0, false); /* 1x1 stride 1, 16x16 */
    conv_shape(conv_dims(3, 16, 16, 16, 24, 1, 1, 1, 0), false, 2, true); /* ... dx alone */
    conv_shape(conv_dims(2, 4, 10, 10, 6, 5, 5, 1, 2), true, 0, false);  /* 5x5 */
    conv_shape(conv_dims(3, 4, 6, 5, 5, 3, 1, 1, 1), true, 0, false);    /* 3x1 kernel */
    conv_shape(conv_dims(2, 6, 7, 7, 4, 3, 3, 3, 2), true, 0, false);    /* stride 3 > pad */
    conv_shape(conv_dims(1, 33, 5, 5, 65, 3, 3, 1, 1), false, 0, false); /* 65 rows: 128 tile */
    conv_shape(conv_dims(3, 5, 6, 6, 7, 3, 3, 1, 1), true, 1, false);    /* dx NULL */
    conv_shape(conv_dims(3, 5, 6, 6, 7, 3, 3, 1, 1), true, 2, false);    /* dweight NULL */
}

/* The models' shapes: the Fashion-MNIST CNN (widths 32 and 128), then ResNet-18's stem and
 * every stage, the spike-fed ones on spikes. */
static void test_conv_models(void)
{
    conv_shape(conv_dims(16, 1, 28, 28, 32, 3, 3, 1, 1), false, 0, false);
    conv_shape(conv_dims(16, 32, 14, 14, 64, 3, 3, 1, 1), false, 0, true);
    conv_shape(conv_dims(8, 1, 28, 28, 128, 3, 3, 1, 1), false, 0, false);
    conv_shape(conv_dims(8, 128, 14, 14, 128, 3, 3, 1, 1), false, 0, true);
    conv_shape(conv_dims(12, 3, 32, 32, 64, 3, 3, 1, 1), false, 0, false);      /* stem */
    conv_shape(conv_dims(12, 64, 32, 32, 64, 3, 3, 1, 1), false, 0, true);      /* layer1 */
    conv_shape(conv_dims(12, 64, 32, 32, 128, 3, 3, 2, 1), false, 0, true);     /* layer2 */
    conv_shape(conv_dims(12, 64, 32, 32, 128, 1, 1, 2, 0), false, 0, true);     /* shortcut */
    conv_shape(conv_dims(12, 128, 16, 16, 128, 3, 3, 1, 1), false, 0, true);
    conv_shape(conv_dims(12, 128, 16, 16, 256, 3, 3, 2, 1), false, 0, true);    /* layer3 */
    conv_shape(conv_dims(24, 256, 8, 8, 256, 3, 3, 1, 1), false, 0, true);
    conv_shape(conv_dims(24, 256, 8, 8, 512, 3, 3, 2, 1), false, 0, true);      /* layer4 */
    conv_shape(conv_dims(24, 256, 8, 8, 512, 1, 1, 2, 0), false, 0, true);
    conv_shape(conv_dims(24, 512, 4, 4, 512, 3, 3, 1, 1), false, 0, true);
}

/* Shapes the channels-last BF16 kernel (conv2d_nhwc.cu) takes, awkward for it: an odd output
 * plane (the epilogue's column pairs straddle images), channel counts that fill no 128 tile, a
 * 5x5 window, no padding (dgrad's flipped window pads by 2), a 3x1 window (dgrad pads the width
 * by -1), 1x1, NULL gradients, a batch its 32 MiB channels-last copies take in two chunks
 * (1 MB an image: 32 + 2), strides 2 and 3 (odd planes, classes with no taps, a class
 * with fewer pixels than another), and halo tiles that hold several images. Each also runs
 * the other paths, as every shape does. */
static void test_conv_nhwc(void)
{
    conv_shape(conv_dims(3, 32, 7, 9, 96, 3, 3, 1, 1), true, 0, false);
    conv_shape(conv_dims(2, 64, 10, 10, 32, 5, 5, 1, 2), true, 0, false);
    conv_shape(conv_dims(2, 32, 9, 9, 32, 3, 3, 1, 0), false, 0, true);
    conv_shape(conv_dims(3, 32, 6, 5, 64, 3, 1, 1, 1), true, 0, false);
    conv_shape(conv_dims(5, 32, 8, 8, 64, 1, 1, 1, 0), true, 0, true);
    conv_shape(conv_dims(1, 160, 6, 6, 160, 3, 3, 1, 1), false, 0, true);
    conv_shape(conv_dims(3, 32, 8, 8, 32, 3, 3, 1, 1), true, 1, false);  /* dx NULL */
    conv_shape(conv_dims(3, 32, 8, 8, 32, 3, 3, 1, 1), true, 2, false);  /* dweight NULL */
    conv_shape(conv_dims(34, 32, 128, 128, 32, 3, 3, 1, 1), false, 0, true);
    /* strides: the input gradient runs as one convolution per residue class of dx */
    conv_shape(conv_dims(2, 32, 9, 7, 64, 3, 3, 2, 1), true, 0, false);  /* odd sizes */
    conv_shape(conv_dims(3, 32, 8, 8, 64, 1, 1, 2, 0), false, 0, true);  /* 1x1: one class */
    conv_shape(conv_dims(2, 64, 11, 10, 32, 5, 5, 2, 2), true, 0, false); /* 5x5 */
    conv_shape(conv_dims(2, 32, 7, 7, 32, 3, 3, 3, 2), true, 0, false);  /* stride 3 > pad */
    conv_shape(conv_dims(2, 32, 10, 10, 32, 2, 2, 2, 0), false, 0, true); /* 2x2 / 2: patches */
    conv_shape(conv_dims(2, 32, 9, 9, 32, 3, 3, 2, 1), true, 2, false);  /* dweight NULL */
    /* the halo variant (stride 1, tiles of whole output rows) on tiles of several images, the
     * last one part empty: 2 images of 8x8 a 128-position tile (forward) and 4 a 256 one
     * (dgrad, 64 channels), 3 images; 2 images of 16x8 a 256 tile, one channel group */
    conv_shape(conv_dims(3, 64, 8, 8, 96, 3, 3, 1, 1), true, 0, false);
    conv_shape(conv_dims(3, 32, 16, 8, 32, 3, 3, 1, 1), true, 0, false);
}

/* The three precisions, for the tests that run every one */
static const snn_precision precisions[3] = {SNN_PRECISION_FP32, SNN_PRECISION_TF32,
                                            SNN_PRECISION_BF16};

/* conv2d_forward_bn_eval gives the bits of conv2d_forward then batchnorm_forward_eval on every
 * path and in every precision: the channels-last kernel applies the batch-norm in its epilogue
 * (the eval kernel's expression on the value the conv would store), the others run the two. */
static void test_conv_bn_eval(void)
{
    const snn_conv2d_dims shapes[4] = {conv_dims(6, 64, 16, 16, 64, 3, 3, 1, 1),
                                       conv_dims(4, 32, 9, 9, 64, 3, 3, 2, 1),
                                       conv_dims(3, 3, 12, 12, 32, 3, 3, 1, 1),
                                       conv_dims(5, 32, 7, 7, 96, 3, 3, 1, 1)};
    const snn_conv_path paths[4] = {SNN_CONV_PATH_AUTO, SNN_CONV_PATH_IGEMM, SNN_CONV_PATH_IM2COL,
                                    SNN_CONV_PATH_NHWC};
    for (int i = 0; i < 4; i++) {
        const snn_conv2d_dims *d = &shapes[i];
        const size_t nx = (size_t)d->N * d->C_in * d->H * d->W;
        const size_t nw = (size_t)d->C_out * d->C_in * d->KH * d->KW, nc = (size_t)d->C_out;
        const size_t nout = (size_t)d->N * d->C_out * d->H_out * d->W_out;
        const float *x = dev_copy(random_host(nx, -1.0f, 1.0f), nx);
        const float *w = dev_copy(random_host(nw, -1.0f, 1.0f), nw);
        const float *bias = dev_copy(random_host(nc, -1.0f, 1.0f), nc);
        const snn_bn_eval bn = {dev_copy(random_host(nc, 0.5f, 1.5f), nc),
                                dev_copy(random_host(nc, -0.5f, 0.5f), nc),
                                dev_copy(random_host(nc, -0.3f, 0.3f), nc),
                                dev_copy(random_host(nc, 0.5f, 2.0f), nc), 1e-5f};
        float *fused = dev_floats(nout), *conv = dev_floats(nout), *want = dev_floats(nout);
        float *host = host_floats(nout);
        for (int p = 0; p < 3; p++)
            for (int k = 0; k < 4; k++) {
                SNN_ASSERT(snn_set_precision(precisions[p]) == SNN_OK);
                force_path(paths[k]);
                const size_t ws_bytes = gpu->conv2d_workspace_bytes(d);
                float *ws = tracked_alloc(ws_bytes, SNN_CUDA);
                gpu->conv2d_forward_bn_eval(fused, x, w, bias, &bn, d, ws);
                gpu->conv2d_forward(conv, x, w, bias, d, ws);
                gpu->batchnorm_forward_eval(want, conv, bn.gamma, bn.beta, bn.running_mean,
                                            bn.running_var, d->N, d->C_out, d->H_out * d->W_out,
                                            bn.eps);
                download(host, want, nout * sizeof(float));
                char what[200];
                snprintf(what, sizeof what, "conv2d_forward_bn_eval = conv + bn, %s, path %s "
                         "(took %s), N=%d Cin=%d %dx%d Cout=%d s=%d",
                         snn_precision_name(precisions[p]), k == 0 ? "auto" : path_name(paths[k]),
                         path_name(path_taken(d)), d->N, d->C_in, d->H, d->W, d->C_out,
                         d->stride);
                expect_exact(what, fused, host, nout * sizeof(float));
            }
        auto_path();
        SNN_ASSERT(snn_set_precision(SNN_PRECISION_FP32) == SNN_OK);
        release_all();
    }
}

/* The operands of a conv backward test on the device: x (N, C_in, H, W) as spikes (0 or 1),
 * as floats and as bits, and w (C_out, C_in, KH, KW) in [-1, 1); with the element counts of
 * x, y (N, C_out, H_out, W_out) and w. */
typedef struct spike_operands {
    size_t nx, ny, nw;
    const float *x, *w;
    uint32_t *x_bits;
} spike_operands;

static spike_operands spike_operands_new(const snn_conv2d_dims *d)
{
    spike_operands o;
    o.nx = (size_t)d->N * d->C_in * d->H * d->W;
    o.ny = (size_t)d->N * d->C_out * d->H_out * d->W_out;
    o.nw = (size_t)d->C_out * d->C_in * d->KH * d->KW;
    o.x = dev_copy(integer_host(o.nx, 2), o.nx);
    o.w = dev_copy(random_host(o.nw, -1.0f, 1.0f), o.nw);
    o.x_bits = tracked_alloc((o.nx + 31) / 32 * sizeof(uint32_t), SNN_CUDA);
    gpu->pack_bits(o.x_bits, o.x, (int64_t)o.nx);
    return o;
}

/* conv2d_backward_bn_dout (dout made from a batch-norm's dL/dout dX as the channels-last copy
 * loads it) gives the bits of batchnorm_backward_in_place_sums over dX then conv2d_backward,
 * both gradients; it takes the dims exactly where the path taken is the channels-last one and
 * declines elsewhere, touching nothing; dX is left as it was, or (dx over dX, a conv that keeps
 * its shape) holds dx. The batch-norm's x as floats and as bf16 bits; the conv's x as floats
 * and as spikes kept as bits. */
static void test_conv_bn_dout(void)
{
    const snn_conv2d_dims shapes[4] = {conv_dims(6, 64, 16, 16, 64, 3, 3, 1, 1),
                                       conv_dims(4, 32, 9, 9, 64, 3, 3, 2, 1),
                                       conv_dims(5, 32, 7, 7, 96, 3, 3, 1, 1),
                                       conv_dims(3, 5, 8, 8, 7, 3, 3, 1, 1)};
    const snn_conv_path paths[3] = {SNN_CONV_PATH_AUTO, SNN_CONV_PATH_IGEMM, SNN_CONV_PATH_NHWC};
    for (int i = 0; i < 4; i++) {
        const snn_conv2d_dims *d = &shapes[i];
        const int C = d->C_out, HW = d->H_out * d->W_out;
        const spike_operands o = spike_operands_new(d);
        const size_t nx = o.nx, ny = o.ny, nw = o.nw;
        const float *x = o.x, *w = o.w;
        const uint32_t *x_bits = o.x_bits;
        const bool keeps = snn_conv2d_keeps_shape(d);
        const float *dX = dev_copy(random_host(ny, -1.0f, 1.0f), ny);
        float *x_bn_host = random_host(ny, -1.0f, 1.5f);
        uint16_t *bf16_host = tracked_alloc(ny * sizeof(uint16_t), SNN_CPU);
        for (size_t e = 0; e < ny; e++) bf16_host[e] = snn_bf16_bits(x_bn_host[e]);
        uint16_t *x_bn_bf16 = tracked_alloc(ny * sizeof(uint16_t), SNN_CUDA);
        upload(x_bn_bf16, bf16_host, ny * sizeof(uint16_t));
        float *x_bn_rounded = host_floats(ny); /* what x_bn_bf16 holds, as floats */
        for (size_t e = 0; e < ny; e++) x_bn_rounded[e] = snn_bf16_value(bf16_host[e]);
        const float *gamma = dev_copy(random_host((size_t)C, 0.5f, 1.5f), (size_t)C);
        const float *mean = dev_copy(random_host((size_t)C, 0.0f, 0.5f), (size_t)C);
        const float *invstd = dev_copy(random_host((size_t)C, 0.5f, 2.0f), (size_t)C);
        double *sums = tracked_alloc(3 * (size_t)C * sizeof(double), SNN_CUDA);
        float *dout = dev_floats(ny), *dx = dev_floats(nx), *dw = dev_floats(nw);
        float *dx_want = host_floats(nx), *dw_want = host_floats(nw), *dX_host = host_floats(ny);
        download(dX_host, dX, ny * sizeof(float));
        for (int v = 0; v < 4; v++) { /* bit 0: x_bn as bf16; bit 1: the conv's x as bits */
            const bool bf16 = v & 1, bits = v & 2;
            const float *x_bn = bf16 ? dev_copy(x_bn_rounded, ny) : dev_copy(x_bn_host, ny);
            gpu->batchnorm_backward_sums(sums, dX, x_bn, mean, d->N, C, HW);
            const snn_bn_dout bn = {bf16 ? NULL : x_bn, bf16 ? x_bn_bf16 : NULL, gamma, mean,
                                    invstd, sums};
            for (int p = 0; p < 3; p++)
                for (int k = 0; k < 3; k++)
                    for (int over = 0; over < 1 + keeps; over++) {
                        SNN_ASSERT(snn_set_precision(precisions[p]) == SNN_OK);
                        force_path(paths[k]);
                        float *ws = tracked_alloc(gpu->conv2d_workspace_bytes(d), SNN_CUDA);
                        /* the two steps: dout made in place, then the conv's backward */
                        gpu->copy(dout, dX, ny * sizeof(float), SNN_COPY_DEVICE_TO_DEVICE);
                        gpu->batchnorm_backward_in_place_sums(dout, NULL, NULL, bf16 ? NULL : x_bn,
                                                              bf16 ? x_bn_bf16 : NULL, gamma,
                                                              mean, invstd, sums, d->N, C, HW);
                        gpu->fill(dx, 0.0f, (int64_t)nx);
                        gpu->fill(dw, 0.0f, (int64_t)nw);
                        if (!bits ||
                            !gpu->conv2d_backward_bits(dx, dw, NULL, dout, x_bits, w, d, ws))
                            gpu->conv2d_backward(dx, dw, NULL, dout, x, w, d, ws);
                        download(dx_want, dx, nx * sizeof(float));
                        download(dw_want, dw, nw * sizeof(float));
                        /* the one entry: dx added into zeros, or written over a copy of dX */
                        float *dXc = dout;
                        gpu->copy(dXc, dX, ny * sizeof(float), SNN_COPY_DEVICE_TO_DEVICE);
                        gpu->fill(dx, 0.0f, (int64_t)nx);
                        gpu->fill(dw, 0.0f, (int64_t)nw);
                        float *into = over ? dXc : dx;
                        const bool took = gpu->conv2d_backward_bn_dout(
                            into, dw, NULL, dXc, &bn, bits ? NULL : x, bits ? x_bits : NULL, w,
                            d, ws);
                        char what[200];
                        snprintf(what, sizeof what, "conv2d_backward_bn_dout = bn + conv, %s, "
                                 "path %s (took %s), N=%d Cin=%d %dx%d Cout=%d s=%d%s%s%s",
                                 snn_precision_name(precisions[p]),
                                 k == 0 ? "auto" : path_name(paths[k]), path_name(path_taken(d)),
                                 d->N, d->C_in, d->H, d->W, C, d->stride,
                                 bf16 ? ", x_bn bf16" : "", bits ? ", x bits" : "",
                                 over ? ", dx over dX" : "");
                        const bool nhwc = path_taken(d) == SNN_CONV_PATH_NHWC;
                        test_checks++;
                        if (took != nhwc) {
                            test_failures++;
                            fprintf(stderr, "FAIL %s: took %d\n", what, took);
                        }
                        if (!took) { /* nothing touched */
                            expect_exact(what, dXc, dX_host, ny * sizeof(float));
                            continue;
                        }
                        expect_exact(what, into, dx_want, nx * sizeof(float));
                        expect_exact(what, dw, dw_want, nw * sizeof(float));
                        if (!over) expect_exact(what, dXc, dX_host, ny * sizeof(float));
                    }
        }
        auto_path();
        SNN_ASSERT(snn_set_precision(SNN_PRECISION_FP32) == SNN_OK);
        release_all();
    }
}

/* conv2d_backward_consuming (dout given up: the channels-last path keeps x's copy in it where
 * it fits) gives the bits of the entries that keep dout: conv2d_backward (x as floats),
 * conv2d_backward_bits (x as bits) and conv2d_backward_bn_dout (dout made from a batch-norm's
 * dL/dout), dx added into a start or, where the shape is kept, written over dout; in the
 * workspace conv2d_backward_consuming_workspace_bytes gives, allocated to the byte and
 * NaN-filled (under compute-sanitizer an access past it is an error). Shapes: layer1 on 260
 * images (two chunks in BF16, three in TF32), layer2.0's first conv (stride 2, 64 -> 128
 * channels: a step's largest backward workspace) and its 1 x 1 shortcut, and channels that
 * triple. In BF16 every x copy fits in dout, and the workspace is smaller; in TF32 the copy of
 * a conv that halves the plane and doubles the channels does not, and it is the full one.
 * The last three are too few images for the channels-last path to pay (conv_path.cu), so they
 * run it forced; on the path they would take, the entry declines before it writes anything
 * and its workspace is the full one. */
static void test_conv_consuming(void)
{
    const snn_conv2d_dims shapes[4] = {conv_dims(260, 64, 32, 32, 64, 3, 3, 1, 1),
                                       conv_dims(6, 64, 32, 32, 128, 3, 3, 2, 1),
                                       conv_dims(6, 64, 32, 32, 128, 1, 1, 2, 0),
                                       conv_dims(5, 32, 7, 7, 96, 3, 3, 1, 1)};
    const snn_precision modes[2] = {SNN_PRECISION_TF32, SNN_PRECISION_BF16};
    for (int i = 0; i < 4; i++) {
        const snn_conv2d_dims *d = &shapes[i];
        const int C = d->C_out, HW = d->H_out * d->W_out;
        const spike_operands o = spike_operands_new(d);
        const size_t nx = o.nx, ny = o.ny, nw = o.nw;
        const float *x = o.x, *w = o.w;
        const uint32_t *x_bits = o.x_bits;
        const bool keeps = snn_conv2d_keeps_shape(d);
        const float *dX = dev_copy(random_host(ny, -1.0f, 1.0f), ny);
        const float *dx0 = dev_copy(random_host(nx, -1.0f, 1.0f), nx); /* dx's start */
        const float *x_bn = dev_copy(random_host(ny, -1.0f, 1.5f), ny);
        const float *gamma = dev_copy(random_host((size_t)C, 0.5f, 1.5f), (size_t)C);
        const float *mean = dev_copy(random_host((size_t)C, 0.0f, 0.5f), (size_t)C);
        const float *invstd = dev_copy(random_host((size_t)C, 0.5f, 2.0f), (size_t)C);
        double *sums = tracked_alloc(3 * (size_t)C * sizeof(double), SNN_CUDA);
        gpu->batchnorm_backward_sums(sums, dX, x_bn, mean, d->N, C, HW);
        const snn_bn_dout record = {x_bn, NULL, gamma, mean, invstd, sums};
        float *dx = dev_floats(nx), *dw = dev_floats(nw), *given = dev_floats(ny);
        float *dx_want = host_floats(nx), *dw_want = host_floats(nw);
        for (int m = 0; m < 2; m++) {
            SNN_ASSERT(snn_set_precision(modes[m]) == SNN_OK);
            if (i > 0) { /* the path these dims take on their own: declined, the full workspace */
                auto_path();
                CHECK(path_taken(d) != SNN_CONV_PATH_NHWC);
                CHECK(gpu->conv2d_backward_consuming_workspace_bytes(d) ==
                      gpu->conv2d_workspace_bytes(d));
                CHECK(!gpu->conv2d_backward_consuming(dx, dw, NULL, given, NULL, x, NULL, w, d,
                                                      NULL));
                force_path(SNN_CONV_PATH_NHWC);
            }
            const size_t full = gpu->conv2d_workspace_bytes(d);
            const size_t less = gpu->conv2d_backward_consuming_workspace_bytes(d);
            fprintf(stderr, "  %s, N=%d Cin=%d %dx%d Cout=%d k=%d s=%d: workspace %.1f MB, %.1f "
                    "MB consuming dout\n", snn_precision_name(modes[m]), d->N, d->C_in, d->H,
                    d->W, C, d->KH, d->stride, full / 1e6, less / 1e6);
            CHECK(path_taken(d) == SNN_CONV_PATH_NHWC);
            CHECK(modes[m] == SNN_PRECISION_BF16 || i == 0 || i == 3 ? less < full
                                                                       : less == full);
            float *ws = tracked_alloc(full, SNN_CUDA), *ws_less = tracked_alloc(less, SNN_CUDA);
            for (int v = 0; v < 4; v++) { /* bit 0: x as bits; bit 1: a batch-norm's record */
                if (i == 0 && (v == 1 || v == 2)) continue; /* the big one: two of the four */
                const bool bits = v & 1;
                const snn_bn_dout *bn = v & 2 ? &record : NULL;
                for (int over = 0; over < 1 + keeps; over++) {
                    char what[200];
                    snprintf(what, sizeof what, "conv2d_backward_consuming, %s, N=%d Cin=%d "
                             "%dx%d Cout=%d k=%d s=%d%s%s%s", snn_precision_name(modes[m]),
                             d->N, d->C_in, d->H, d->W, C, d->KH, d->stride,
                             bits ? ", x bits" : "", bn ? ", bn" : "",
                             over ? ", dx over dout" : "");
                    /* the entries that keep dout, into dx from its start (0 for over) */
                    if (over) gpu->fill(dx, 0.0f, (int64_t)nx);
                    else gpu->copy(dx, dx0, nx * sizeof(float), SNN_COPY_DEVICE_TO_DEVICE);
                    gpu->fill(dw, 0.0f, (int64_t)nw);
                    bool took = true;
                    if (bn)
                        took = gpu->conv2d_backward_bn_dout(dx, dw, NULL, dX, bn,
                                                            bits ? NULL : x,
                                                            bits ? x_bits : NULL, w, d, ws);
                    else if (bits)
                        took = gpu->conv2d_backward_bits(dx, dw, NULL, dX, x_bits, w, d, ws);
                    else
                        gpu->conv2d_backward(dx, dw, NULL, dX, x, w, d, ws);
                    CHECK(took);
                    download(dx_want, dx, nx * sizeof(float));
                    download(dw_want, dw, nw * sizeof(float));
                    /* the entry on a copy of dX it may overwrite */
                    gpu->copy(given, dX, ny * sizeof(float), SNN_COPY_DEVICE_TO_DEVICE);
                    gpu->copy(dx, dx0, nx * sizeof(float), SNN_COPY_DEVICE_TO_DEVICE);
                    gpu->fill(dw, 0.0f, (int64_t)nw);
                    fill_nan(ws_less, less);
                    CHECK(gpu->conv2d_backward_consuming(over ? given : dx, dw, NULL, given, bn,
                                                         bits ? NULL : x, bits ? x_bits : NULL,
                                                         w, d, ws_less));
                    expect_exact(what, over ? given : dx, dx_want, nx * sizeof(float));
                    expect_exact(what, dw, dw_want, nw * sizeof(float));
                }
            }
        }
        SNN_ASSERT(snn_set_precision(SNN_PRECISION_FP32) == SNN_OK);
        auto_path();
        release_all();
    }
}

/* A batch the im2col workspace (256 MiB) takes in several chunks: 160 images of 8 x 64 x 64
 * through a 5x5 window is 3.4 MB of columns an image in fp32 (78 images a chunk: 78 + 78 + 4)
 * and 1.7 MB in BF16 (157 a chunk, an odd count: its input gradient runs in halves of 79 and
 * 78, the last chunk's 3 images in 2 + 1). */
static void test_conv_chunks(void)
{
    conv_shape(conv_dims(160, 8, 64, 64, 8, 5, 5, 1, 2), true, 0, false);
}

/* The BF16 column matrix takes half the bytes of fp32's. Below the 256 MiB budget that halves
 * the workspace (ResNet-18's layer1 at 12 images: 0.50); at the 4x4 stage (256 images) the
 * side-by-side forward's fp32 product and the weight converted to bf16 (4.7 MB) stay, 0.61.
 * At the budget (layer1 at 256 images) both take 256 MiB and BF16 fits twice the images in a
 * chunk. */
static void test_bf16_workspace(void)
{
    const snn_conv2d_dims shapes[2] = {conv_dims(12, 64, 32, 32, 64, 3, 3, 1, 1),
                                       conv_dims(256, 512, 4, 4, 512, 3, 3, 1, 1)};
    const double limit[2] = {0.51, 0.62};
    for (int i = 0; i < 2; i++) {
        force_path(SNN_CONV_PATH_IM2COL);
        SNN_ASSERT(snn_set_precision(SNN_PRECISION_FP32) == SNN_OK);
        const double fp32 = (double)gpu->conv2d_workspace_bytes(&shapes[i]);
        SNN_ASSERT(snn_set_precision(SNN_PRECISION_BF16) == SNN_OK);
        const double bf16 = (double)gpu->conv2d_workspace_bytes(&shapes[i]);
        SNN_ASSERT(snn_set_precision(SNN_PRECISION_FP32) == SNN_OK);
        auto_path();
        fprintf(stderr, "  im2col workspace, %d images of C_in %d %dx%d: fp32 %.1f MB, bf16 %.1f MB"
                " (%.3f)\n", shapes[i].N, shapes[i].C_in, shapes[i].H, shapes[i].W, fp32 / 1e6,
                bf16 / 1e6, bf16 / fp32);
        CHECK(bf16 > 0.0 && bf16 <= limit[i] * fp32);
    }
}

/* The precision switch itself: names, parsing, errors. */
static void test_precision_api(void)
{
    snn_precision p;
    CHECK(snn_precision_parse("bf16", &p) == SNN_OK && p == SNN_PRECISION_BF16);
    CHECK(snn_precision_parse("tf32", &p) == SNN_OK && p == SNN_PRECISION_TF32);
    CHECK(snn_precision_parse("fp16", &p) == SNN_ERR_ARGUMENT);
    CHECK(strstr(snn_last_error(), "fp16") != NULL);
    CHECK(snn_set_precision(SNN_PRECISION_TF32) == SNN_OK);
    CHECK(snn_get_precision() == SNN_PRECISION_TF32);
    CHECK(snn_set_precision(SNN_PRECISION_FP32) == SNN_OK);
    CHECK(snn_get_precision() == SNN_PRECISION_FP32);
}

int main(void)
{
    parity_begin();
    RUN(test_precision_api);
    RUN(test_bf16_workspace);
    RUN(test_conv_awkward);
    RUN(test_conv_models);
    RUN(test_conv_chunks);
    RUN(test_conv_nhwc);
    RUN(test_conv_bn_eval);
    RUN(test_conv_bn_dout);
    RUN(test_conv_consuming);
    return test_finish();
}
