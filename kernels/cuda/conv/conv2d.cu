/*
 * conv2d.cu - 2-D convolution on the GPU: an own im2col kernel + cuBLAS SGEMM over chunks of
 * images in one reused workspace. Must match kernels/cpu/conv2d.c (snn_conv2d_*_cpu), whose header
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
 * convolution of conv2d_igemm.cu, which needs neither the column matrix nor its workspace, or
 * to the channels-last implicit GEMM of conv2d_nhwc.cu, on the shapes where conv_path.cu's rule
 * says they beat this path run in the same precision (or on every shape they take when
 * snn_cuda_set_conv_path forces one); the rest stay here, with cuBLAS on tensor cores.
 *   TF32: the same kernels and buffers; cuBLAS rounds the fp32 operands (the handle's math mode).
 *   BF16: the operands are bf16 in memory, results and accumulation fp32 (snn_gemm_bf16_*):
 *     forward   im2col writes col in bf16 straight from the fp32 input (for a 1x1 stride-1 conv
 *               that is a conversion: x cannot be multiplied as it is), the weight is converted
 *               into the workspace once per call, and the GEMM writes fp32 out as in fp32;
 *     backward  the swap that makes doutT writes it in bf16; dweight += doutT col^T from the
 *               bf16 col and doutT, accumulated in fp32 into dweight; dcol = weight^T doutT in
 *               fp32, col2im in fp32 as before. dcol (4 B an entry) reuses col's buffer (2 B an
 *               entry), so it is made for ceil(g/2) images at a time. 1x1 stride 1: dx_j +=
 *               weight^T doutT_j straight into dx (doutT_j: rows g P apart).
 *     Bytes per entry of col and doutT: 2 written and 2 read instead of 4 and 4, so the
 *     workspace per image is 2 (CK + C_out) P bytes (4 C_out P for the side-by-side forward's
 *     fp32 outT) against 4 (CK + C_out) P, and a chunk holds about twice the images. The
 *     tensor cores run bf16 at twice their TF32 rate.
 */
#include <stdint.h>
#include <type_traits>

#include "kernels/cuda/cuda_common.cuh"
#include "tensor/cuda_options.h"
#include "tensor/error.h"
#include "kernels/cuda/kernels_cuda.h"

/* Workspace budget per call. The op layer takes the workspace as scratch from the step arena
 * and gives it back as soon as the conv's kernels are queued, so only one is held at a time.
 * 256 MiB fits 108 images of the widest ResNet-18 (CIFAR) im2col (64 channels at 32x32) per
 * chunk in fp32 (about twice that in BF16), so a batch of 64 x T = 4 takes 3 chunks, where
 * 32 MiB took 20 (13 images each) and made the ResNet-18 training step an eighth slower
 * (docs/benchmarks.md, "Conv paths"). */
#define CONV_WORKSPACE_BUDGET ((int64_t)256 << 20)
/* cuBLAS runs a strided batch over the grid's z dimension: stay within its limit. */
#define CONV_MAX_CHUNK 65535

/* Output planes smaller than this take the forward side by side: a per-image product
 * out_j (C_out, P) = weight (C_out, CK) x col_j (CK, P) with P = 16 or 64 columns is a thin
 * GEMM that rereads the whole weight for every image, while one (C_out, CK) x (CK, g P) product
 * reads it once per chunk; the price is one extra pass over the (small) output to put the image
 * axis back in front. */
#define CONV_SIDE_BY_SIDE_BELOW 128

typedef struct conv_plan {
    int64_t CK;          /* C_in KH KW: rows of col */
    int64_t P;           /* H_out W_out: columns of col per image */
    int G;               /* images per chunk */
    bool bf16;           /* operands in bf16 (precision BF16) */
    bool one_by_one;     /* 1x1, stride 1, pad 0: x_n is col_n, dx_n += weight^T dout_n */
    bool direct;         /* the fp32 forward multiplies x_n itself (one_by_one, not bf16) */
    bool side_by_side;   /* the forward lays the chunk's images side by side (small planes) */
    size_t col_bytes;    /* col (CK, G P): 4 B an entry, rounded up to 256 B so that what
                            follows is aligned; bf16: 2 B an entry, and room for dcol (fp32)
                            of ceil(G/2) images */
    size_t aux_bytes;    /* doutT (C_out, G P), 4 or 2 B an entry; the side-by-side forward's
                            outT (C_out, G P) is fp32 in both */
    size_t weight_bytes; /* bf16: the weight (C_out, CK) converted; fp32: 0 */
    size_t bytes;        /* the workspace: col, then aux, then the bf16 weight */
} conv_plan;

static int64_t round_up(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

/* A pure function of the dims and the precision, so that the workspace size and both passes
 * agree. */
static conv_plan make_plan(const snn_conv2d_dims *d)
{
    conv_plan plan = {};
    plan.CK = (int64_t)d->C_in * d->KH * d->KW;
    plan.P = (int64_t)d->H_out * d->W_out;
    plan.bf16 = snn_cuda_precision() == SNN_PRECISION_BF16;
    plan.one_by_one = d->KH == 1 && d->KW == 1 && d->stride == 1 && d->pad == 0;
    plan.direct = plan.one_by_one && !plan.bf16;
    plan.side_by_side = !plan.direct && plan.P < CONV_SIDE_BY_SIDE_BELOW;
    const int64_t operand = plan.bf16 ? 2 : 4;               /* bytes of a col / doutT entry */
    const int64_t aux_entry = plan.side_by_side ? 4 : operand; /* outT is fp32 */
    const int64_t per_image = (plan.CK * operand + d->C_out * aux_entry) * plan.P; /* bytes */
    plan.weight_bytes = plan.bf16 ? (size_t)round_up((int64_t)d->C_out * plan.CK * 2, 256) : 0;
    const int64_t budget = CONV_WORKSPACE_BUDGET - (int64_t)plan.weight_bytes;
    int64_t G = budget > 0 ? budget / (per_image > 0 ? per_image : 1) : 1;
    if (G > d->N) G = d->N;
    if (G > CONV_MAX_CHUNK) G = CONV_MAX_CHUNK;
    if (G < 1) G = 1;
    /* indices inside one chunk must fit in int (cuBLAS dims, 32-bit fast paths): elements of
     * col + doutT per image, or of the input image */
    const int64_t entries = (plan.CK + d->C_out) * plan.P;
    const int64_t x_image = (int64_t)d->C_in * d->H * d->W;
    const int64_t largest = entries > x_image ? entries : x_image;
    if (largest > 0 && G > (int64_t)INT32_MAX / largest) G = (int64_t)INT32_MAX / largest;
    if (G < 1) G = 1;
    plan.G = (int)G;
    if (!plan.bf16) {
        plan.col_bytes = (size_t)round_up(plan.CK * G * plan.P, 64) * sizeof(float);
        plan.aux_bytes = (size_t)(d->C_out * G * plan.P) * sizeof(float);
    } else {
        /* col: G images in bf16, or dcol: ceil(G/2) in fp32, the same bytes for even G */
        plan.col_bytes = (size_t)round_up(plan.CK * plan.P * 4 * ((G + 1) / 2), 256);
        plan.aux_bytes = (size_t)round_up(d->C_out * G * plan.P * aux_entry, 256);
    }
    plan.bytes = plan.col_bytes + plan.aux_bytes + plan.weight_bytes;
    return plan;
}

/* Which kernels run this conv (im2col + cuBLAS here, the NCHW implicit GEMM or the
 * channels-last one): the rule is conv_path.cu's, the one place that decides. */
static snn_conv_path conv_path_for(const snn_conv2d_dims *d)
{
    return (snn_conv_path)snn_conv2d_path_cuda(d);
}

extern "C" size_t snn_conv2d_workspace_bytes_cuda(const snn_conv2d_dims *d)
{
    switch (conv_path_for(d)) {
    case SNN_CONV_PATH_IGEMM: return snn_conv2d_igemm_workspace_bytes_cuda(d);
    case SNN_CONV_PATH_NHWC: return snn_conv2d_nhwc_workspace_bytes_cuda(d);
    default: return make_plan(d).bytes;
    }
}

/* The two column layouts of a chunk of g images. */
enum col_layout {
    COL_PER_IMAGE, /* (g, CK, P): image j's col_j is a (CK, P) block; the forward's batch */
    COL_SIDE_BY_SIDE /* (CK, g, P) = (CK, g*P): images side by side; the backward's matrix */
};

/* Index math. Inside one chunk every index fits in int (make_plan caps G so that the chunk's
 * col, doutT and x all stay below 2^31 elements), so the kernels below divide in 32 bits: a
 * 64-bit division is a ~70-instruction software routine on the GPU, and with five of them per
 * column entry the first version of im2col was bound by integer arithmetic, not by memory
 * (it ran at about a fifth of the bandwidth it needs: docs/benchmarks.md, "Conv paths"). */

/* A GEMM operand element from an fp32 value: fp32 as it is, bf16 rounded to nearest (ties to
 * even, as snn_to_bf16_cuda and the tests' host rounding). */
static __device__ __forceinline__ void store_operand(float *dst, float v) { *dst = v; }
static __device__ __forceinline__ void store_operand(snn_bf16 *dst, float v)
{
    *dst = __float2bfloat16_rn(v);
}

/* col = im2col of the g images at x (g, C_in, H, W), padding read as 0, stored as T (float, or
 * bf16 for the BF16 GEMMs). One thread per (image j, channel ci, output position p): it works
 * out its window once and copies the KH KW inputs under it into the KH KW rows (ci, kh, kw) of
 * column p. Neighbouring threads hold neighbouring p, so each of the KH KW stores is coalesced
 * across the warp, in either layout. Traffic: sizeof(T) B (4 or 2) written per col entry (KH KW
 * times the input for stride 1); x is read through L1, each input feeding up to KH KW entries
 * of neighbouring threads. BITS: x is spikes kept as bits (the weight gradient's input,
 * autograd/spike_pack.c), element e at `offset` + e. CPU: the im2col of conv2d.c.
 * K: the window's side when known at compile time (3, every 3 x 3 conv of the nets), 0 for
 * any. With K the thread issues its K K loads before it stores one, so they are all in flight
 * at once: a tap outside the input loads the plane's first element and stores 0 instead.
 * With K = 0 each load sits under its bounds check and is stored at once, one in flight. */
template <typename T, bool BITS, int K>
static __global__ void conv2d_im2col_kernel(T *__restrict__ col, const float *__restrict__ x,
                                            const uint32_t *__restrict__ bits, int64_t offset,
                                            snn_conv2d_dims d, int g, int P, col_layout layout)
{
    const int KH = K ? K : d.KH, KW = K ? K : d.KW;
    const int KK = KH * KW, CK = d.C_in * KK;
    const int total = g * d.C_in * P;
    for (int idx = blockIdx.x * blockDim.x + threadIdx.x; idx < total;
         idx += gridDim.x * blockDim.x) {
        const int image_channel = idx / P, p = idx - image_channel * P;
        const int j = image_channel / d.C_in, ci = image_channel - j * d.C_in;
        const int oh = p / d.W_out, ow = p - oh * d.W_out;
        const int ih0 = oh * d.stride - d.pad, iw0 = ow * d.stride - d.pad;
        const float *plane = BITS ? nullptr : x + (size_t)image_channel * d.H * d.W; // x[j, ci]
        const int64_t e0 = offset + (int64_t)image_channel * d.H * d.W; /* BITS: its first */
        /* row (ci, 0, 0) of this column, and the step between consecutive rows */
        T *dst;
        int row_step;
        if (layout == COL_PER_IMAGE) {
            dst = col + ((size_t)j * CK + (size_t)ci * KK) * P + p;
            row_step = P;
        } else {
            dst = col + ((size_t)ci * KK * g + j) * P + p;
            row_step = g * P;
        }
        if constexpr (K > 0) {
            /* loads first: tap t = kh K + kw at plane offset at[t] (-1 outside the input: it
             * loads offset 0 and stores 0), the bits' words kept whole until all are loaded */
            int at[K * K];
            uint32_t word[K * K];
            float v[K * K];
            #pragma unroll
            for (int t = 0; t < K * K; t++) {
                const int ih = ih0 + t / K, iw = iw0 + t % K;
                at[t] = ih >= 0 && ih < d.H && iw >= 0 && iw < d.W ? ih * d.W + iw : -1;
                const int a = at[t] < 0 ? 0 : at[t];
                if (BITS) word[t] = bits[(e0 + a) >> 5];
                else v[t] = plane[a];
            }
            #pragma unroll
            for (int t = 0; t < K * K; t++) {
                float value = 0.0f;
                if (at[t] >= 0)
                    value = BITS ? (float)((word[t] >> ((e0 + at[t]) & 31)) & 1u) : v[t];
                store_operand(dst, value);
                dst += row_step;
            }
        } else {
            for (int kh = 0; kh < KH; kh++) {
                const int ih = ih0 + kh;
                const bool row_in = ih >= 0 && ih < d.H;
                for (int kw = 0; kw < KW; kw++) {
                    const int iw = iw0 + kw;
                    float v = 0.0f;
                    if (row_in && iw >= 0 && iw < d.W)
                        v = BITS ? snn_bit_at(bits, e0 + ih * d.W + iw) : plane[ih * d.W + iw];
                    store_operand(dst, v);
                    dst += row_step;
                }
            }
        }
    }
}

/* dst (B, A, P) = src (A, B, P) with the two outer axes swapped, stored as T: the backward's
 * doutT (C_out, g, P) from dout (g, C_out, P) (bf16 for the BF16 GEMMs), and the forward's
 * out (g, C_out, P) from the side-by-side product (C_out, g, P) (fp32). One thread per
 * element, consecutive threads along p. Traffic: 4 B read + sizeof(T) B written per element,
 * both coalesced along p. */
template <typename T>
static __global__ void conv2d_swap_outer_kernel(T *__restrict__ dst, const float *__restrict__ src,
                                                int A, int B, int P)
{
    const int total = A * B * P;
    for (int idx = blockIdx.x * blockDim.x + threadIdx.x; idx < total;
         idx += gridDim.x * blockDim.x) {
        const int ba = idx / P, p = idx - ba * P;           /* idx = (b, a, p) in dst */
        const int b = ba / A, a = ba - b * A;
        store_operand(dst + idx, src[((size_t)a * B + b) * P + p]);
    }
}

/* dx (g, C_in, H, W) += col2im(dcol), dcol (fp32) laid out (CK, g, P): one thread per input
 * element gathers every (kh, kw) whose window put it at output (oh, ow) =
 * ((ih + pad - kh) / stride, (iw + pad - kw) / stride) when those divide exactly and fall in
 * the output, summing in ascending (kh, kw). Neighbouring threads hold neighbouring iw, so for
 * stride 1 the KH KW reads are coalesced too. STRIDE: 1 or 2 known at compile time (the
 * divisibility tests become a bit test), 0 for any. K: the window's side when known at compile
 * time (3), 0 for any; with K the thread issues its K K loads (a tap that lands on no output
 * loads its row's first entry) before it adds one, in the same order, so the same sum.
 * Traffic: up to KH KW dcol reads + one read-modify-write of dx per input. CPU: the col2im of
 * conv2d.c. */
template <int STRIDE, int K>
static __global__ void conv2d_backward_col2im_kernel(float *__restrict__ dx,
                                                     const float *__restrict__ dcol,
                                                     snn_conv2d_dims d, int g, int P)
{
    const int stride = STRIDE ? STRIDE : d.stride;
    const int KH = K ? K : d.KH, KW = K ? K : d.KW;
    const int row_stride = g * P; /* between consecutive rows (ci, kh, kw) of dcol */
    const int HW = d.H * d.W;
    const int total = g * d.C_in * HW;
    for (int idx = blockIdx.x * blockDim.x + threadIdx.x; idx < total;
         idx += gridDim.x * blockDim.x) {
        const int image_channel = idx / HW, pix = idx - image_channel * HW;
        const int j = image_channel / d.C_in, ci = image_channel - j * d.C_in;
        const int ih = pix / d.W, iw = pix - ih * d.W;
        /* row (ci, 0, 0) of image j's column block */
        const float *rows = dcol + (size_t)ci * KH * KW * row_stride + (size_t)j * P;
        float acc = 0.0f;
        if constexpr (K > 0) {
            /* tap t = kh K + kw reads rows[t row_stride + at[t]]; at[t] = -1 where the tap
             * does not land on an output (it loads at 0 and is not added) */
            int at[K * K];
            float v[K * K];
            #pragma unroll
            for (int t = 0; t < K * K; t++) {
                const int oh_s = ih + d.pad - t / K, ow_s = iw + d.pad - t % K;
                const int oh = oh_s / stride, ow = ow_s / stride;
                const bool lands = oh_s >= 0 && ow_s >= 0 && oh * stride == oh_s &&
                                   ow * stride == ow_s && oh < d.H_out && ow < d.W_out;
                at[t] = lands ? oh * d.W_out + ow : -1;
                v[t] = __ldg(rows + (size_t)t * row_stride + (lands ? at[t] : 0));
            }
            #pragma unroll
            for (int t = 0; t < K * K; t++)
                if (at[t] >= 0) acc += v[t];
        } else {
            for (int kh = 0; kh < KH; kh++, rows += (size_t)KW * row_stride) {
                const int oh_s = ih + d.pad - kh; /* = oh * stride */
                if (oh_s < 0) break;              /* only gets smaller with kh */
                const int oh = oh_s / stride;
                if (oh * stride != oh_s || oh >= d.H_out) continue;
                const float *row = rows;
                for (int kw = 0; kw < KW; kw++, row += row_stride) {
                    const int ow_s = iw + d.pad - kw;
                    if (ow_s < 0) break;
                    const int ow = ow_s / stride;
                    if (ow * stride != ow_s || ow >= d.W_out) continue;
                    acc += __ldg(row + oh * d.W_out + ow);
                }
            }
        }
        dx[(size_t)idx] += acc;
    }
}

/* ---- launchers: one per kernel, and the GEMMs of each operand type ----------------------- */

template <typename T>
static void im2col(T *col, snn_cuda_input x, const snn_conv2d_dims *d, int g, int P,
                   col_layout layout)
{
    const bool k3 = d->KH == 3 && d->KW == 3;
    void (*kernel)(T *, const float *, const uint32_t *, int64_t, snn_conv2d_dims, int, int,
                   col_layout) =
        x.x ? (k3 ? conv2d_im2col_kernel<T, false, 3> : conv2d_im2col_kernel<T, false, 0>)
            : (k3 ? conv2d_im2col_kernel<T, true, 3> : conv2d_im2col_kernel<T, true, 0>);
    /* a float view carries no bits (snn_cuda_input): each kernel reads the one it takes */
    SNN_CUDA_LAUNCH(kernel, snn_cuda_grid((int64_t)g * d->C_in * P, SNN_CUDA_BLOCK),
                    SNN_CUDA_BLOCK, 0, col, x.x, x.bits, x.offset, *d, g, P, layout);
}

template <typename T> static void swap_outer(T *dst, const float *src, int A, int B, int P)
{
    SNN_CUDA_LAUNCH(conv2d_swap_outer_kernel<T>, snn_cuda_grid((int64_t)A * B * P, SNN_CUDA_BLOCK),
                    SNN_CUDA_BLOCK, 0, dst, src, A, B, P);
}

static void col2im(float *dx, const float *dcol, const snn_conv2d_dims *d, int g, int P)
{
    const bool k3 = d->KH == 3 && d->KW == 3;
    void (*kernel)(float *, const float *, snn_conv2d_dims, int, int) =
        d->stride == 1 ? (k3 ? conv2d_backward_col2im_kernel<1, 3>
                             : conv2d_backward_col2im_kernel<1, 0>)
        : d->stride == 2 ? (k3 ? conv2d_backward_col2im_kernel<2, 3>
                               : conv2d_backward_col2im_kernel<2, 0>)
                         : conv2d_backward_col2im_kernel<0, 0>;
    SNN_CUDA_LAUNCH(kernel, snn_cuda_grid((int64_t)g * d->C_in * d->H * d->W, SNN_CUDA_BLOCK),
                    SNN_CUDA_BLOCK, 0, dx, dcol, *d, g, P);
}

/* fp32 operands: cuBLAS SGEMM (TF32 through the handle's math mode); bf16 operands: GemmEx
 * with bf16 A and B, fp32 C and accumulation (gemm.cu). */
static void gemm(bool ta, bool tb, int M, int N, int K, const float *A, int lda, const float *B,
                 int ldb, float beta, float *C, int ldc)
{
    snn_gemm_cuda(ta, tb, M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc);
}
static void gemm(bool ta, bool tb, int M, int N, int K, const snn_bf16 *A, int lda,
                 const snn_bf16 *B, int ldb, float beta, float *C, int ldc)
{
    snn_gemm_bf16_cuda(ta, tb, M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc);
}
static void gemm_batched(bool ta, bool tb, int M, int N, int K, const float *A, int lda,
                         int64_t stride_a, const float *B, int ldb, int64_t stride_b, float beta,
                         float *C, int ldc, int64_t stride_c, int batch)
{
    snn_gemm_strided_batched_cuda(ta, tb, M, N, K, 1.0f, A, lda, stride_a, B, ldb, stride_b, beta,
                                  C, ldc, stride_c, batch);
}
static void gemm_batched(bool ta, bool tb, int M, int N, int K, const snn_bf16 *A, int lda,
                         int64_t stride_a, const snn_bf16 *B, int ldb, int64_t stride_b,
                         float beta, float *C, int ldc, int64_t stride_c, int batch)
{
    snn_gemm_bf16_strided_batched_cuda(ta, tb, M, N, K, 1.0f, A, lda, stride_a, B, ldb, stride_b,
                                       beta, C, ldc, stride_c, batch);
}

/* ---- the two passes, for operands of type T (float: fp32 / TF32; snn_bf16: BF16) ---------- */

/* out (N, C_out, P) = weight (C_out, CK) x im2col(x), chunk by chunk. col (T) and outT (fp32)
 * are the workspace's first two regions; weight is in T. */
template <typename T>
static void forward_chunks(float *out, snn_cuda_input x, const T *weight,
                           const snn_conv2d_dims *d, const conv_plan &plan, T *col, float *outT)
{
    const int64_t x_image = (int64_t)d->C_in * d->H * d->W; /* floats per input image */
    const int64_t out_image = (int64_t)d->C_out * plan.P;   /* floats per output image */
    const int P = (int)plan.P, CK = (int)plan.CK;
    for (int n0 = 0; n0 < d->N; n0 += plan.G) {
        const int g = d->N - n0 < plan.G ? d->N - n0 : plan.G;
        const snn_cuda_input xg = x.advanced(n0 * x_image);  // (g, C_in, H, W)
        float *outg = out + n0 * out_image;                  // (g, C_out, P)
        if (plan.side_by_side) {
            /* outT (C_out, g P) = weight (C_out, CK) x col (CK, g P), then out = swap(outT) */
            const int wide = g * P;
            im2col(col, xg, d, g, P, COL_SIDE_BY_SIDE);
            gemm(false, false, d->C_out, wide, CK, weight, CK, col, wide, 0.0f, outT, wide);
            swap_outer(outg, outT, d->C_out, g, P);
            continue;
        }
        const T *cols = col;                                 // (g, CK, P)
        bool direct = false;
        if constexpr (std::is_same<T, float>::value) {
            direct = plan.direct && xg.x; /* bits are copied into col like any other input */
            if (direct) cols = xg.x; /* 1x1 stride 1: x_j already is col_j */
        }
        if (!direct) im2col(col, xg, d, g, P, COL_PER_IMAGE);
        /* out_j (C_out, P) = weight (C_out, CK) x col_j (CK, P) for the g images at once */
        gemm_batched(false, false, d->C_out, P, CK, weight, CK, 0, cols, P, (int64_t)CK * P, 0.0f,
                     outg, P, out_image, g);
    }
}

/* dweight += sum_n dout_n col_n^T and dx += col2im(weight^T dout_n), chunk by chunk (either
 * may be NULL). col (T) and doutT (T) are the workspace's first two regions, dcol (fp32) shares
 * col's; weight is in T (NULL when dx is). */
template <typename T>
static void backward_chunks(float *dx, float *dweight, const float *dout, snn_cuda_input x,
                            const T *weight, const snn_conv2d_dims *d, const conv_plan &plan,
                            T *col, float *dcol, T *doutT)
{
    const int64_t x_image = (int64_t)d->C_in * d->H * d->W;
    const int64_t out_image = (int64_t)d->C_out * plan.P;
    const int P = (int)plan.P, CK = (int)plan.CK;
    /* fp32 1x1 stride 1 reads dout itself for dx; every other product reads doutT */
    const bool need_doutT = dweight || (dx && !plan.direct);
    /* dcol takes col's buffer: all g images at once in fp32; in bf16 the buffer holds fp32
     * dcol for ceil(G/2) images (make_plan), so the chunk's dgrad runs in two halves */
    for (int n0 = 0; n0 < d->N; n0 += plan.G) {
        const int g = d->N - n0 < plan.G ? d->N - n0 : plan.G;
        const int wide = g * P;                               /* columns of the chunk matrix */
        const snn_cuda_input xg = x.advanced(n0 * x_image);   // (g, C_in, H, W)
        const float *doutg = dout + n0 * out_image;           // (g, C_out, P)
        float *dxg = dx ? dx + n0 * x_image : NULL;           // (g, C_in, H, W)

        if (need_doutT) /* doutT (C_out, g, P) = dout (g, C_out, P) with the outer axes swapped */
            swap_outer(doutT, doutg, g, d->C_out, P);
        if (dweight) {
            /* dweight (C_out, CK) += doutT (C_out, g P) x col^T (g P, CK) */
            im2col(col, xg, d, g, P, COL_SIDE_BY_SIDE);
            gemm(false, true, d->C_out, CK, wide, doutT, wide, col, wide, 1.0f, dweight, CK);
        }
        if (!dx) continue;
        if (plan.one_by_one) {
            /* dx_j (C_in, P) += weight^T (C_in, C_out) x dout_j (C_out, P), g at once */
            if constexpr (std::is_same<T, float>::value)
                gemm_batched(true, false, d->C_in, P, d->C_out, weight, d->C_in, 0, doutg, P,
                             out_image, 1.0f, dxg, P, x_image, g);
            else /* dout_j from doutT (C_out, g, P): rows g P apart, images P apart */
                gemm_batched(true, false, d->C_in, P, d->C_out, weight, d->C_in, 0, doutT, wide,
                             P, 1.0f, dxg, P, x_image, g);
            continue;
        }
        /* dcol (CK, h P) = weight^T (CK, C_out) x doutT (C_out, h P) for images j0 .. j0+h-1,
         * into col's buffer (the dweight GEMM that read col is queued before it on the same
         * stream), then dx of those images += col2im(dcol) */
        const int half = plan.bf16 ? (g + 1) / 2 : g;
        for (int j0 = 0; j0 < g; j0 += half) {
            const int h = g - j0 < half ? g - j0 : half;
            gemm(true, false, CK, h * P, d->C_out, weight, CK, doutT + (size_t)j0 * P, wide, 0.0f,
                 dcol, h * P);
            col2im(dxg + j0 * x_image, dcol, d, h, P);
        }
    }
}

/* ---- the entry points of the kernel table -------------------------------------------------- */

/* Both forward entries: x as floats, or (x.x NULL) as bits, which the implicit GEMM on NCHW
 * does not take. */
static void forward_any(float *out, snn_cuda_input x, const float *weight, const float *bias,
                        const snn_conv2d_dims *d, float *workspace)
{
    if (d->N <= 0 || d->C_out <= 0) return;
    const snn_conv_path path = conv_path_for(d);
    if (path == SNN_CONV_PATH_IGEMM) {
        SNN_ASSERT(x.x);
        snn_conv2d_igemm_forward_cuda(out, x.x, weight, bias, d, workspace);
        return;
    }
    if (path == SNN_CONV_PATH_NHWC) {
        snn_conv2d_nhwc_forward_cuda(out, x.x, x.bits, weight, bias, NULL, d, workspace);
        return;
    }
    const conv_plan plan = make_plan(d);
    char *ws = (char *)workspace;
    float *outT = (float *)(ws + plan.col_bytes);
    if (plan.bf16) {
        /* the weight (C_out, CK) in bf16, after col and outT */
        snn_bf16 *wb = (snn_bf16 *)(ws + plan.col_bytes + plan.aux_bytes);
        snn_to_bf16_cuda(wb, weight, (int64_t)d->C_out * plan.CK);
        forward_chunks<snn_bf16>(out, x, wb, d, plan, (snn_bf16 *)ws, outT);
    } else {
        forward_chunks<float>(out, x, weight, d, plan, (float *)ws, outT);
    }
    if (bias) snn_bias_forward_cuda(out, bias, d->N, d->C_out, plan.P);
}

extern "C" void snn_conv2d_forward_cuda(float *out, const float *x, const float *weight,
                                        const float *bias, const snn_conv2d_dims *d,
                                        float *workspace)
{
    forward_any(out, snn_cuda_floats(x), weight, bias, d, workspace);
}

/* x as bits where the input is loaded (the channels-last copy, the column matrix): 1/8 B an
 * element read instead of 4, and the spikes' floats need not be kept for this conv. The
 * implicit GEMM on NCHW (its 4-byte gathers) declines. */
extern "C" bool snn_conv2d_reads_bits_cuda(const snn_conv2d_dims *d)
{
    return conv_path_for(d) != SNN_CONV_PATH_IGEMM;
}

extern "C" bool snn_conv2d_forward_bits_cuda(float *out, const uint32_t *x_bits,
                                             const float *weight, const float *bias,
                                             const snn_conv2d_dims *d, float *workspace)
{
    if (d->N > 0 && d->C_out > 0 && !snn_conv2d_reads_bits_cuda(d)) return false;
    forward_any(out, snn_cuda_input{nullptr, x_bits, 0}, weight, bias, d, workspace);
    return true;
}

/* The channels-last kernel applies the batch-norm in its epilogue (the expression of
 * batchnorm.cu's eval kernels, on the value the conv would have stored: the same bits); the
 * other paths run the forward, then the eval batch-norm over the output in place. */
extern "C" void snn_conv2d_forward_bn_eval_cuda(float *out, const float *x, const float *weight,
                                                const float *bias, const snn_bn_eval *bn,
                                                const snn_conv2d_dims *d, float *workspace)
{
    if (d->N <= 0 || d->C_out <= 0) return;
    if (conv_path_for(d) == SNN_CONV_PATH_NHWC) {
        snn_conv2d_nhwc_forward_cuda(out, x, NULL, weight, bias, bn, d, workspace);
        return;
    }
    snn_conv2d_forward_cuda(out, x, weight, bias, d, workspace);
    snn_batchnorm_forward_eval_cuda(out, out, bn->gamma, bn->beta, bn->running_mean,
                                    bn->running_var, d->N, d->C_out, d->H_out * d->W_out, bn->eps);
}

/* Both entries: x as floats, or (x.x NULL) as bits, which the implicit GEMM on NCHW (its
 * 4-byte gathers) does not take; dx == dout where snn_conv2d_dx_over_dout_cuda (below). */
static void backward_any(float *dx, float *dweight, float *dbias, const float *dout,
                         snn_cuda_input x, const float *weight, const snn_conv2d_dims *d,
                         float *workspace)
{
    if (d->N <= 0 || d->C_out <= 0) return;
    const conv_plan plan = make_plan(d);
    if (dbias) snn_bias_backward_cuda(dbias, dout, d->N, d->C_out, plan.P);
    if (!dx && !dweight) return;
    const snn_conv_path path = conv_path_for(d);
    SNN_ASSERT(!dx || dx != dout || snn_conv2d_dx_over_dout_cuda(d)); /* dbias read dout above */
    if (path == SNN_CONV_PATH_IGEMM) {
        SNN_ASSERT(x.x);
        snn_conv2d_igemm_backward_cuda(dx, dweight, dout, x.x, weight, d, workspace);
        return;
    }
    if (path == SNN_CONV_PATH_NHWC) {
        snn_conv2d_nhwc_backward_cuda(dx, dweight, dout, NULL, x.x, x.bits, weight, NULL, d,
                                      workspace);
        return;
    }
    char *ws = (char *)workspace;
    if (plan.bf16) {
        snn_bf16 *wb = NULL; /* only the input gradient reads the weight */
        if (dx) {
            wb = (snn_bf16 *)(ws + plan.col_bytes + plan.aux_bytes);
            snn_to_bf16_cuda(wb, weight, (int64_t)d->C_out * plan.CK);
        }
        backward_chunks<snn_bf16>(dx, dweight, dout, x, wb, d, plan, (snn_bf16 *)ws, (float *)ws,
                                  (snn_bf16 *)(ws + plan.col_bytes));
    } else {
        backward_chunks<float>(dx, dweight, dout, x, weight, d, plan, (float *)ws, (float *)ws,
                               (float *)(ws + plan.col_bytes));
    }
}

extern "C" void snn_conv2d_backward_cuda(float *dx, float *dweight, float *dbias,
                                         const float *dout, const float *x, const float *weight,
                                         const snn_conv2d_dims *d, float *workspace)
{
    backward_any(dx, dweight, dbias, dout, snn_cuda_floats(x), weight, d, workspace);
}

/* dx over dout: on the channels-last path, for a conv that keeps its shape (conv2d_nhwc.cu) */
extern "C" bool snn_conv2d_dx_over_dout_cuda(const snn_conv2d_dims *d)
{
    return conv_path_for(d) == SNN_CONV_PATH_NHWC && snn_conv2d_nhwc_dx_over_dout(d);
}

/* dout made from a batch-norm's dL/dout as the channels-last copy loads it (snn_bn_dout):
 * that path only; a conv bias (never before a batch-norm) would need dout itself. */
extern "C" bool snn_conv2d_backward_bn_dout_cuda(float *dx, float *dweight, float *dbias,
                                                 const float *dX, const snn_bn_dout *bn,
                                                 const float *x, const uint32_t *x_bits,
                                                 const float *weight, const snn_conv2d_dims *d,
                                                 float *workspace)
{
    if (dbias || conv_path_for(d) != SNN_CONV_PATH_NHWC) return false;
    SNN_ASSERT(x || x_bits);
    SNN_ASSERT(!dx || dx != dX || snn_conv2d_nhwc_dx_over_dout(d));
    snn_conv2d_nhwc_backward_cuda(dx, dweight, dX, NULL, x, x ? NULL : x_bits, weight, bn, d,
                                  workspace);
    return true;
}

/* dout given up: on the channels-last path, whose backward keeps x's copy in it where it fits
 * (conv2d_nhwc.cu); dbias, where asked, from dout before anything is written there. Other paths
 * decline, and their workspace is the full one. */
extern "C" bool snn_conv2d_backward_consuming_cuda(float *dx, float *dweight, float *dbias,
                                                   float *dout, const snn_bn_dout *bn,
                                                   const float *x, const uint32_t *x_bits,
                                                   const float *weight, const snn_conv2d_dims *d,
                                                   float *workspace)
{
    if (conv_path_for(d) != SNN_CONV_PATH_NHWC) return false;
    SNN_ASSERT((x || x_bits) && !(bn && dbias));
    SNN_ASSERT(!dx || dx != dout || snn_conv2d_nhwc_dx_over_dout(d));
    if (d->N <= 0 || d->C_out <= 0) return true;
    if (dbias) snn_bias_backward_cuda(dbias, dout, d->N, d->C_out, d->H_out * d->W_out);
    snn_conv2d_nhwc_backward_cuda(dx, dweight, dout, dout, x, x ? NULL : x_bits, weight, bn, d,
                                  workspace);
    return true;
}

extern "C" size_t snn_conv2d_backward_consuming_workspace_bytes_cuda(const snn_conv2d_dims *d)
{
    return conv_path_for(d) == SNN_CONV_PATH_NHWC
               ? snn_conv2d_nhwc_consuming_workspace_bytes_cuda(d)
               : snn_conv2d_workspace_bytes_cuda(d);
}

/* The weight gradient reads x from its bits as it writes the column matrix or the
 * channels-last copy: 1/8 B an element instead of 4, and no unpacked floats written first. */
extern "C" bool snn_conv2d_backward_bits_cuda(float *dx, float *dweight, float *dbias,
                                              const float *dout, const uint32_t *x_bits,
                                              const float *weight, const snn_conv2d_dims *d,
                                              float *workspace)
{
    if (d->N > 0 && d->C_out > 0 && (dx || dweight) && !snn_conv2d_reads_bits_cuda(d))
        return false;
    const snn_cuda_input x = {nullptr, x_bits, 0};
    backward_any(dx, dweight, dbias, dout, x, weight, d, workspace);
    return true;
}
