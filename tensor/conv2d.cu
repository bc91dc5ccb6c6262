/*
 * conv2d.cu - 2-D convolution on the GPU: an own im2col kernel + cuBLAS SGEMM over chunks of
 * images in one reused workspace. Must match tensor/conv2d.c (snn_conv2d_*_cpu), whose header
 * derives the math; in short (cross-correlation, as PyTorch; CK = C_in KH KW, P = H_out W_out):
 *
 *   out[n, co, oh, ow] = bias[co] + sum_{ci, kh, kw} weight[co, ci, kh, kw] x[n, ci, ih, iw]
 *   col_n[(ci, kh, kw), (oh, ow)] = x[n, ci, oh stride - pad + kh, ow stride - pad + kw] (or 0)
 *   forward   out_n (C_out, P) = weight (C_out, CK) x col_n (CK, P)
 *   backward  dweight (C_out, CK) += sum_n dout_n (C_out, P) x col_n^T (P, CK)
 *             dcol_n (CK, P) = weight^T (CK, C_out) x dout_n (C_out, P),  dx_n += col2im(dcol_n)
 *             dbias[co] += sum_{n, p} dout[n, co, p]
 *
 * Images are taken G at a time (G from the workspace budget, see make_plan), and every chunk
 * reuses the same workspace, so memory stays bounded whatever the batch:
 *
 *   forward:  im2col writes the chunk's columns image by image, col (G, CK, P), and ONE strided
 *             batched SGEMM computes all G products straight into out (the weight is shared:
 *             stride 0). Small output planes (P < 128: the 8x8 and 4x4 ResNet stages) go
 *             side by side instead, as in the backward: one SGEMM (C_out, CK) x (CK, G*P) and a
 *             pass that moves the image axis back in front. The bias is added once at the end.
 *   backward: dweight is a sum over images, so the chunk is laid out as one wide matrix with
 *             the images side by side: col (CK, G*P) and doutT (C_out, G*P) (a transpose of
 *             dout's (G, C_out, P)). Then one SGEMM adds doutT col^T into dweight (K = G*P, so
 *             the 4x4 outputs of late ResNet layers still make a fat GEMM), and one SGEMM
 *             computes dcol = weight^T doutT into the col buffer (no longer needed), from which
 *             the col2im kernel gathers dx: one thread per input element sums the dcol entries
 *             that im2col copied it to, so no two threads write one address (no atomics).
 *
 * 1x1 convolutions with stride 1 and no padding skip im2col where they can: x_n (C_in, H W)
 * already is col_n, so the forward multiplies it directly and dx_n += weight^T dout_n is a
 * batched SGEMM into dx. (dweight still needs x side by side, which the im2col kernel does as a
 * plain transpose.)
 *
 * Memory traffic per image: im2col writes CK P floats (KH KW times the input for stride 1) and
 * the SGEMMs read them; the SGEMMs do C_out CK P FMAs forward and twice that backward.
 *
 * This path is the one fp32 runs (the default precision, bit-reproducible;
 * tests/test_cuda_layers.c checks it against the CPU reference). With the precision set to
 * TF32 or BF16 (cuda_options.h) the three entry points below hand over to the implicit-GEMM
 * convolution of conv2d_igemm.cu, which needs neither the column matrix nor its workspace, on
 * the shapes where it beats this path run in the same precision (igemm_pays; or on every shape
 * when snn_cuda_set_conv_path forces it); the rest stay here, with cuBLAS on tensor cores.
 */
#include <stdint.h>

#include "cuda_common.cuh"
#include "cuda_options.h"
#include "error.h"
#include "kernels_cuda.h"

/* Workspace budget per call. The op layer takes the workspace as scratch from the step arena
 * and gives it back as soon as the conv's kernels are queued, so only one is held at a time.
 * 256 MiB fits 108 images of the widest ResNet-18 (CIFAR) im2col (64 channels at 32x32) per
 * chunk, so a batch of 64 x T = 4 takes 3 chunks: on the H100 the training step went from
 * 62.7 to 55.4 ms against 32 MiB (13 images per chunk, 20 chunks per conv). */
#define CONV_WORKSPACE_BUDGET ((int64_t)256 << 20)
/* cuBLAS runs a strided batch over the grid's z dimension: stay within its limit. */
#define CONV_MAX_CHUNK 65535

typedef struct conv_plan {
    int64_t CK;      /* C_in KH KW: rows of col */
    int64_t P;       /* H_out W_out: columns of col per image */
    int G;           /* images per chunk */
    bool direct;     /* 1x1, stride 1, pad 0: x_n is col_n */
    int64_t col_floats; /* col (CK, G P), rounded up to 64 floats so doutT starts 256-B aligned */
    size_t floats;   /* workspace: col + doutT (C_out, G P) */
} conv_plan;

/* A pure function of the dims, so that the workspace size and both passes agree. */
static conv_plan make_plan(const snn_conv2d_dims *d)
{
    conv_plan plan;
    plan.CK = (int64_t)d->C_in * d->KH * d->KW;
    plan.P = (int64_t)d->H_out * d->W_out;
    plan.direct = d->KH == 1 && d->KW == 1 && d->stride == 1 && d->pad == 0;
    const int64_t per_image = (plan.CK + d->C_out) * plan.P; /* floats */
    int64_t G = CONV_WORKSPACE_BUDGET / (int64_t)sizeof(float) / (per_image > 0 ? per_image : 1);
    if (G > d->N) G = d->N;
    if (G > CONV_MAX_CHUNK) G = CONV_MAX_CHUNK;
    if (G < 1) G = 1;
    /* indices inside one chunk must fit in int (cuBLAS dims, 32-bit fast paths) */
    const int64_t x_image = (int64_t)d->C_in * d->H * d->W;
    const int64_t largest = per_image > x_image ? per_image : x_image;
    if (largest > 0 && G > (int64_t)INT32_MAX / largest) G = (int64_t)INT32_MAX / largest;
    if (G < 1) G = 1;
    plan.G = (int)G;
    plan.col_floats = (plan.CK * G * plan.P + 63) / 64 * 64;
    plan.floats = (size_t)(plan.col_floats + (int64_t)d->C_out * G * plan.P);
    return plan;
}

/* Whether the implicit-GEMM kernel beats im2col + cuBLAS (same precision) on these dims.
 * Measured per layer on the H100 at 256 images (bench_conv2d_cuda, docs/benchmarks.md): it wins
 * only on full-resolution planes (ResNet-18's 32x32 layer1: 1.58 against 2.05 ms for the three
 * passes in TF32, 1.34 against 2.04 in BF16), where im2col's column matrix is nine times the
 * activation and moving it costs more than cuBLAS gains. On 16x16 and smaller planes cuBLAS's
 * tuned tiles win by 1.3-3x; at stride 2 this kernel's dgrad also multiplies the zeros of the
 * dilated window (4x the work); with 1 or 3 input channels most of each 32-long slice of the
 * reduction is padding; and a batch too small to give every SM a tile (inference at batch 1:
 * 0.58 against 0.48 ms per ResNet-18 forward in TF32) leaves the GPU idle. */
static bool igemm_pays(const snn_conv2d_dims *d)
{
    const int64_t positions = (int64_t)d->N * d->H_out * d->W_out;
    return d->stride == 1 && d->KH * d->KW > 1 && d->C_in >= 16 && d->C_out >= 16 &&
           (int64_t)d->H_out * d->W_out >= 1024 &&
           positions >= 128 * 132; /* a 128-position tile for each of the H100's 132 SMs */
}

/* The tensor-core path runs for TF32 and BF16 (conv2d_igemm.cu) where it pays. A pure function
 * of the dims and the process-wide options, so the workspace size and both passes agree. */
static bool use_igemm(const snn_conv2d_dims *d)
{
    if (snn_cuda_precision() == SNN_PRECISION_FP32) return false;
    switch (snn_cuda_conv_path()) {
    case SNN_CONV_PATH_IGEMM: return true;
    case SNN_CONV_PATH_IM2COL: return false;
    default: return igemm_pays(d);
    }
}

extern "C" bool snn_conv2d_uses_igemm_cuda(const snn_conv2d_dims *d) { return use_igemm(d); }

extern "C" size_t snn_conv2d_workspace_bytes_cuda(const snn_conv2d_dims *d)
{
    if (use_igemm(d)) return snn_conv2d_igemm_workspace_bytes_cuda(d);
    return make_plan(d).floats * sizeof(float);
}

/* The two column layouts of a chunk of g images. */
enum col_layout {
    COL_PER_IMAGE, /* (g, CK, P): image j's col_j is a (CK, P) block; the forward's batch */
    COL_SIDE_BY_SIDE /* (CK, g, P) = (CK, g*P): images side by side; the backward's matrix */
};

/* Index math. Inside one chunk every index fits in int (make_plan caps G so that the chunk's
 * col, doutT and x all stay below 2^31 floats), so the kernels below divide in 32 bits: a
 * 64-bit division is a ~70-instruction software routine on the GPU, and with five of them per
 * column entry the first version of im2col was bound by integer arithmetic, not by memory
 * (16 ms of a 55 ms ResNet-18 step on the H100, about a fifth of the bandwidth it needs). */

/* col = im2col of the g images at x (g, C_in, H, W), padding read as 0. One thread per
 * (image j, channel ci, output position p): it works out its window once and copies the KH KW
 * inputs under it into the KH KW rows (ci, kh, kw) of column p. Neighbouring threads hold
 * neighbouring p, so each of the KH KW stores is coalesced across the warp, in either layout.
 * Traffic: 4 B written per col entry (KH KW times the input for stride 1); x is read through
 * L1, each input feeding up to KH KW entries of neighbouring threads.
 * CPU: the im2col of conv2d.c. */
static __global__ void conv2d_im2col_kernel(float *__restrict__ col, const float *__restrict__ x,
                                            snn_conv2d_dims d, int g, int P, col_layout layout)
{
    const int KK = d.KH * d.KW, CK = d.C_in * KK;
    const int total = g * d.C_in * P;
    for (int idx = blockIdx.x * blockDim.x + threadIdx.x; idx < total;
         idx += gridDim.x * blockDim.x) {
        const int image_channel = idx / P, p = idx - image_channel * P;
        const int j = image_channel / d.C_in, ci = image_channel - j * d.C_in;
        const int oh = p / d.W_out, ow = p - oh * d.W_out;
        const int ih0 = oh * d.stride - d.pad, iw0 = ow * d.stride - d.pad;
        const float *plane = x + (size_t)image_channel * d.H * d.W;  // x[j, ci] (H, W)
        /* row (ci, 0, 0) of this column, and the step between consecutive rows */
        float *dst;
        int row_step;
        if (layout == COL_PER_IMAGE) {
            dst = col + ((size_t)j * CK + (size_t)ci * KK) * P + p;
            row_step = P;
        } else {
            dst = col + ((size_t)ci * KK * g + j) * P + p;
            row_step = g * P;
        }
        for (int kh = 0; kh < d.KH; kh++) {
            const int ih = ih0 + kh;
            const bool row_in = ih >= 0 && ih < d.H;
            for (int kw = 0; kw < d.KW; kw++) {
                const int iw = iw0 + kw;
                *dst = row_in && iw >= 0 && iw < d.W ? plane[ih * d.W + iw] : 0.0f;
                dst += row_step;
            }
        }
    }
}

/* dst (B, A, P) = src (A, B, P) with the two outer axes swapped: the backward's
 * doutT (C_out, g, P) from dout (g, C_out, P), and the forward's out (g, C_out, P) from the
 * side-by-side product (C_out, g, P). One thread per element, consecutive threads along p.
 * Traffic: 4 B read + 4 B written per element, both coalesced along p. */
static __global__ void conv2d_swap_outer_kernel(float *__restrict__ dst, const float *__restrict__ src,
                                                int A, int B, int P)
{
    const int total = A * B * P;
    for (int idx = blockIdx.x * blockDim.x + threadIdx.x; idx < total;
         idx += gridDim.x * blockDim.x) {
        const int ba = idx / P, p = idx - ba * P;           /* idx = (b, a, p) in dst */
        const int b = ba / A, a = ba - b * A;
        dst[idx] = src[((size_t)a * B + b) * P + p];
    }
}

/* dx (g, C_in, H, W) += col2im(dcol), dcol laid out (CK, g, P): one thread per input element
 * gathers every (kh, kw) whose window put it at output (oh, ow) =
 * ((ih + pad - kh) / stride, (iw + pad - kw) / stride) when those divide exactly and fall in
 * the output, summing in ascending (kh, kw). Neighbouring threads hold neighbouring iw, so for
 * stride 1 the KH KW reads are coalesced too. STRIDE: 1 or 2 known at compile time (the
 * divisibility tests become a bit test), 0 for any. Traffic: up to KH KW dcol reads + one
 * read-modify-write of dx per input. CPU: the col2im of conv2d.c. */
template <int STRIDE>
static __global__ void conv2d_backward_col2im_kernel(float *__restrict__ dx,
                                                     const float *__restrict__ dcol,
                                                     snn_conv2d_dims d, int g, int P)
{
    const int stride = STRIDE ? STRIDE : d.stride;
    const int row_stride = g * P; /* between consecutive rows (ci, kh, kw) of dcol */
    const int HW = d.H * d.W;
    const int total = g * d.C_in * HW;
    for (int idx = blockIdx.x * blockDim.x + threadIdx.x; idx < total;
         idx += gridDim.x * blockDim.x) {
        const int image_channel = idx / HW, pix = idx - image_channel * HW;
        const int j = image_channel / d.C_in, ci = image_channel - j * d.C_in;
        const int ih = pix / d.W, iw = pix - ih * d.W;
        /* row (ci, 0, 0) of image j's column block */
        const float *rows = dcol + (size_t)ci * d.KH * d.KW * row_stride + (size_t)j * P;
        float acc = 0.0f;
        for (int kh = 0; kh < d.KH; kh++, rows += (size_t)d.KW * row_stride) {
            const int oh_s = ih + d.pad - kh; /* = oh * stride */
            if (oh_s < 0) break;              /* only gets smaller with kh */
            const int oh = oh_s / stride;
            if (oh * stride != oh_s || oh >= d.H_out) continue;
            const float *row = rows;
            for (int kw = 0; kw < d.KW; kw++, row += row_stride) {
                const int ow_s = iw + d.pad - kw;
                if (ow_s < 0) break;
                const int ow = ow_s / stride;
                if (ow * stride != ow_s || ow >= d.W_out) continue;
                acc += __ldg(row + oh * d.W_out + ow);
            }
        }
        dx[(size_t)idx] += acc;
    }
}

/* Output planes smaller than this take the forward side by side: a per-image product
 * out_j (C_out, P) = weight (C_out, CK) x col_j (CK, P) with P = 16 or 64 columns is a thin
 * GEMM that rereads the whole weight for every image, while one (C_out, CK) x (CK, g P) product
 * reads it once per chunk; the price is one extra pass over the (small) output to put the image
 * axis back in front. */
#define CONV_SIDE_BY_SIDE_BELOW 128

extern "C" void snn_conv2d_forward_cuda(float *out, const float *x, const float *weight,
                                        const float *bias, const snn_conv2d_dims *d,
                                        float *workspace)
{
    if (d->N <= 0 || d->C_out <= 0) return;
    if (use_igemm(d)) {
        snn_conv2d_igemm_forward_cuda(out, x, weight, bias, d, workspace);
        return;
    }
    const conv_plan plan = make_plan(d);
    const int64_t x_image = (int64_t)d->C_in * d->H * d->W;      /* floats per input image */
    const int64_t out_image = (int64_t)d->C_out * plan.P;        /* floats per output image */
    const bool side_by_side = !plan.direct && plan.P < CONV_SIDE_BY_SIDE_BELOW;
    for (int n0 = 0; n0 < d->N; n0 += plan.G) {
        const int g = d->N - n0 < plan.G ? d->N - n0 : plan.G;
        const float *xg = x + n0 * x_image;                       // (g, C_in, H, W)
        float *outg = out + n0 * out_image;                       // (g, C_out, P)
        const int entries = (int)((int64_t)g * d->C_in * plan.P); /* im2col threads */
        if (side_by_side) {
            /* outT (C_out, g P) = weight (C_out, CK) x col (CK, g P), then out = swap(outT) */
            const int wide = (int)(g * plan.P);
            float *outT = workspace + plan.col_floats;
            SNN_CUDA_LAUNCH(conv2d_im2col_kernel, snn_cuda_grid(entries, SNN_CUDA_BLOCK),
                            SNN_CUDA_BLOCK, 0, workspace, xg, *d, g, (int)plan.P,
                            COL_SIDE_BY_SIDE);
            snn_gemm_cuda(false, false, d->C_out, wide, (int)plan.CK, 1.0f, weight, (int)plan.CK,
                          workspace, wide, 0.0f, outT, wide);
            SNN_CUDA_LAUNCH(conv2d_swap_outer_kernel,
                            snn_cuda_grid((int64_t)d->C_out * wide, SNN_CUDA_BLOCK),
                            SNN_CUDA_BLOCK, 0, outg, outT, d->C_out, g, (int)plan.P);
            continue;
        }
        const float *cols = xg;                                   // (g, CK, P)
        if (!plan.direct) {
            SNN_CUDA_LAUNCH(conv2d_im2col_kernel, snn_cuda_grid(entries, SNN_CUDA_BLOCK),
                            SNN_CUDA_BLOCK, 0, workspace, xg, *d, g, (int)plan.P,
                            COL_PER_IMAGE);
            cols = workspace;
        }
        /* out_j (C_out, P) = weight (C_out, CK) x col_j (CK, P) for the g images at once */
        snn_gemm_strided_batched_cuda(false, false, d->C_out, (int)plan.P, (int)plan.CK, 1.0f,
                                      weight, (int)plan.CK, 0, cols, (int)plan.P,
                                      plan.CK * plan.P, 0.0f, outg, (int)plan.P, out_image, g);
    }
    if (bias) snn_bias_forward_cuda(out, bias, d->N, d->C_out, plan.P);
}

extern "C" void snn_conv2d_backward_cuda(float *dx, float *dweight, float *dbias,
                                         const float *dout, const float *x, const float *weight,
                                         const snn_conv2d_dims *d, float *workspace)
{
    if (d->N <= 0 || d->C_out <= 0) return;
    const conv_plan plan = make_plan(d);
    if (dbias) snn_bias_backward_cuda(dbias, dout, d->N, d->C_out, plan.P);
    if (!dx && !dweight) return;
    if (use_igemm(d)) {
        snn_conv2d_igemm_backward_cuda(dx, dweight, dout, x, weight, d, workspace);
        return;
    }

    const int64_t x_image = (int64_t)d->C_in * d->H * d->W;
    const int64_t out_image = (int64_t)d->C_out * plan.P;
    float *col = workspace;                                   // (CK, G*P), then dcol
    float *doutT = workspace + plan.col_floats;               // (C_out, G*P)
    const bool need_doutT = dweight || (dx && !plan.direct);

    for (int n0 = 0; n0 < d->N; n0 += plan.G) {
        const int g = d->N - n0 < plan.G ? d->N - n0 : plan.G;
        const int wide = (int)(g * plan.P);                   /* columns of the chunk matrix */
        const float *xg = x + n0 * x_image;                   // (g, C_in, H, W)
        const float *doutg = dout + n0 * out_image;           // (g, C_out, P)
        float *dxg = dx ? dx + n0 * x_image : NULL;           // (g, C_in, H, W)

        if (need_doutT)   /* doutT (C_out, g, P) = dout (g, C_out, P) with the outer axes swapped */
            SNN_CUDA_LAUNCH(conv2d_swap_outer_kernel,
                            snn_cuda_grid((int64_t)d->C_out * wide, SNN_CUDA_BLOCK),
                            SNN_CUDA_BLOCK, 0, doutT, doutg, g, d->C_out, (int)plan.P);
        if (dweight) {
            /* dweight (C_out, CK) += doutT (C_out, g P) x col^T (g P, CK) */
            SNN_CUDA_LAUNCH(conv2d_im2col_kernel,
                            snn_cuda_grid((int64_t)g * d->C_in * plan.P, SNN_CUDA_BLOCK),
                            SNN_CUDA_BLOCK, 0, col, xg, *d, g, (int)plan.P, COL_SIDE_BY_SIDE);
            snn_gemm_cuda(false, true, d->C_out, (int)plan.CK, wide, 1.0f, doutT, wide, col, wide,
                          1.0f, dweight, (int)plan.CK);
        }
        if (!dx) continue;
        if (plan.direct) {
            /* dx_j (C_in, P) += weight^T (C_in, C_out) x dout_j (C_out, P), g at once */
            snn_gemm_strided_batched_cuda(true, false, d->C_in, (int)plan.P, d->C_out, 1.0f,
                                          weight, d->C_in, 0, doutg, (int)plan.P, out_image, 1.0f,
                                          dxg, (int)plan.P, x_image, g);
        } else {
            /* dcol (CK, g P) = weight^T (CK, C_out) x doutT (C_out, g P), into col's buffer
             * (the dweight SGEMM that read col is queued before it on the same stream) */
            snn_gemm_cuda(true, false, (int)plan.CK, wide, d->C_out, 1.0f, weight, (int)plan.CK,
                          doutT, wide, 0.0f, col, wide);
            void (*col2im)(float *, const float *, snn_conv2d_dims, int, int) =
                d->stride == 1 ? conv2d_backward_col2im_kernel<1>
                : d->stride == 2 ? conv2d_backward_col2im_kernel<2>
                                 : conv2d_backward_col2im_kernel<0>;
            SNN_CUDA_LAUNCH(col2im, snn_cuda_grid((int64_t)g * x_image, SNN_CUDA_BLOCK),
                            SNN_CUDA_BLOCK, 0, dxg, col, *d, g, (int)plan.P);
        }
    }
}
