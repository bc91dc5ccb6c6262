/*
 * conv2d_igemm.cu - 2-D convolution as an implicit GEMM on the tensor cores: forward, input
 * gradient (dgrad) and weight gradient (wgrad), with TF32 or BF16 operands and fp32
 * accumulation, and no column matrix in memory. conv2d.cu hands a convolution over to it only
 * when the CUDA precision is TF32 or BF16 (cuda_options.h) and either the conv path is forced to
 * SNN_CONV_PATH_IGEMM (snn_cuda_set_conv_path) or, under the default AUTO, conv_path.cu's rule
 * picks it (igemm_pays: stride 1, a kernel other than 1x1, C_in and C_out >= 16, output planes
 * of at least 1024 positions and N P >= 128 x 132, and a shape the channels-last kernel of
 * conv2d_nhwc.cu does not take); every other TF32 / BF16 conv takes one of the other two paths.
 *
 * Test: tests/test_cuda_igemm.c runs the CUDA conv2d kernel-table entries in TF32 and BF16 and
 * compares them with the CPU reference kernels (kernels/cpu/conv2d.c, fp32) on the same inputs, as
 * ||cuda - cpu|| / ||cpu|| (2e-3 for TF32, 1e-2 for BF16; backward as increments). Under AUTO
 * a small test shape takes im2col + cuBLAS, so a test reaches this file on such shapes only with
 * the path forced to SNN_CONV_PATH_IGEMM.
 *
 * Dims: N images (T*N for multi-step), C_in -> C_out channels, H x W -> H_out x W_out, KH x KW
 * kernel, KK = KH KW, CK = C_in KK, P = H_out W_out, HW = H W.
 *
 * The three products (cross-correlation, as PyTorch; row-major M x K times K x N):
 *
 *   forward  out[n, co, p]  = sum_{k = (ci, kh, kw)}  W[co, k]          * x[n, ci, ih, iw]
 *            M = C_out,  N = N P (columns j = (n, p)),  K = CK;
 *            ih = oh stride - pad + kh, iw = ow stride - pad + kw, 0 outside the image
 *   dgrad    dx[n, ci, q]   += sum_{k = (co, kh, kw)} W[co, ci, kh, kw] * dout[n, co, oh, ow]
 *            M = C_in,  N = N HW (columns j = (n, ih, iw)),  K = C_out KK;
 *            oh = (ih + pad - kh) / stride where that divides exactly and lands in the
 *            output, else the term is 0 (the transposed convolution, gathered: no atomics)
 *   wgrad    dW[co, k]      += sum_{j = (n, p)}       dout[n, co, p]     * x[n, ci, ih, iw]
 *            M = C_out,  N = CK (columns = (ci, kh, kw)),  K = N P
 *
 * In each, one operand is a plain strided matrix and the other is gathered: "implicit" means
 * the gather happens in the tile loader, as the GEMM fetches a tile, so the column matrix of
 * im2col (KK times the input: a fifth of an fp32 ResNet-18 step, docs/benchmarks.md, "Conv
 * paths") is never written.
 *
 * Why mma.sync: the warp-level m16n8k8 (TF32) and m16n8k16 (BF16) instructions run on every
 * GPU since Ampere, take their operands from registers that we fill from shared memory, and
 * let the loader gather anything it likes into shared memory first. wgmma (Hopper only) would
 * read its operands straight from shared memory in a fixed swizzled layout that a 4-byte
 * gather cannot fill without another pass; it is the next step, not the first.
 *
 * Tiles, the shared-memory layout, the rounding of the operands and the index math are
 * described with the kernel, in conv2d_igemm_kernel.cuh (included below).
 *
 * Split-K. wgrad reduces over N P (262,144 pixels in ResNet-18's first layer at batch 64,
 * T = 4) into a small dW (64 x 576): a 64 x 128 tile grid has 5 blocks. So its K is split
 * into S ranges, each block writes its partial dW to the workspace, and a second kernel adds
 * the S partials into dW in a fixed order: deterministic, unlike atomics. Forward and dgrad
 * have N P or N HW columns and need no split.
 *
 * Traffic and work: 2 M N K flops per product; each block reads its A rows and gathers its B
 * columns once per K slice, so global reads are (M N K)(1/128 + 1/BM) elements, mostly from
 * L2; the output is written once (dgrad and split-free wgrad read it once more, to add).
 */
#include <algorithm>
#include <cuda_bf16.h>
#include <stdint.h>

#include "kernels/cuda/cuda_common.cuh"
#include "tensor/cuda_options.h"
#include "tensor/error.h"
#include "kernels/cuda/kernels_cuda.h"
#include "conv2d_igemm_kernel.cuh"

/* wgrad partial sums, and the transposed weight of dgrad, stay within this */
#define IG_WORKSPACE_BUDGET ((size_t)64 << 20)

/* k_table[k] for k = (c, kh, kw) in [0, C KK): {c plane + kh row + kw col, kh << 16 | kw}.
 * Forward and wgrad (plane HW, row W, col 1): the offset of tap k from its column's top-left
 * input pixel. dgrad (plane P, row = col = 0): the offset of output channel co, the output
 * pixel being found per column. Traffic: 8 B written per row. */
static __global__ void k_table_kernel(int2 *table, int C, int KH, int KW, int plane, int row,
                                      int col)
{
    const int KK = KH * KW, rows = C * KK;
    for (int k = blockIdx.x * blockDim.x + threadIdx.x; k < rows; k += gridDim.x * blockDim.x) {
        const int c = k / KK, r = k - c * KK, kh = r / KW, kw = r - kh * KW;
        table[k] = make_int2(c * plane + kh * row + kw * col, kh << 16 | kw);
    }
}

/* wt (C_in, C_out, KK) = w (C_out, C_in, KK) with the channel axes swapped: dgrad's A.
 * Traffic: 4 B read + 4 B written per weight. */
static __global__ void weight_transpose_kernel(float *__restrict__ wt, const float *__restrict__ w,
                                               int C_out, int C_in, int KK)
{
    const int total = C_out * C_in * KK;
    for (int idx = blockIdx.x * blockDim.x + threadIdx.x; idx < total;
         idx += gridDim.x * blockDim.x) {
        const int ci = idx / (C_out * KK), r = idx - ci * C_out * KK;
        const int co = r / KK, kk = r - co * KK;
        wt[idx] = w[((size_t)co * C_in + ci) * KK + kk];
    }
}

/* dw[i] += sum_{s < S} partial[s][i], s ascending (a fixed order: deterministic).
 * Traffic: 4 S B read + 8 B read-modify-write per weight. */
static __global__ void split_sum_kernel(float *__restrict__ dw, const float *__restrict__ partial,
                                        int n, int S)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        float sum = 0.0f;
        for (int s = 0; s < S; s++) sum += partial[(size_t)s * n + i];
        dw[i] += sum;
    }
}

extern "C" void snn_conv2d_split_sum_cuda(float *dw, const float *partial, int64_t n, int splits)
{
    SNN_CUDA_LAUNCH(split_sum_kernel, snn_cuda_grid(n, SNN_CUDA_BLOCK), SNN_CUDA_BLOCK, 0, dw,
                    partial, (int)n, splits);
}

/* ---- planning and launching -------------------------------------------------------------- */

/* Everything both the workspace size and the launches derive from the dims. */
struct ig_plan {
    int G;              /* images per chunk (every tensor of a chunk below 2^31 elements) */
    int wgrad_splits;   /* S */
    size_t table_bytes; /* k_table, 256-B rounded */
    size_t wt_floats;   /* dgrad's W^T */
    size_t partial_floats;
    size_t bytes;       /* the whole workspace: table, then W^T, then partials */
};

static size_t round_up(size_t x, size_t to) { return (x + to - 1) / to * to; }

static ig_plan make_ig_plan(const snn_conv2d_dims *d)
{
    ig_plan plan = {};
    const int64_t KK = (int64_t)d->KH * d->KW, CK = (int64_t)d->C_in * KK;
    const int64_t P = (int64_t)d->H_out * d->W_out;
    const int64_t per_image = std::max((int64_t)d->C_in * d->H * d->W, (int64_t)d->C_out * P);
    int64_t G = per_image > 0 ? (int64_t)INT32_MAX / per_image : d->N;
    plan.G = (int)std::max<int64_t>(1, std::min<int64_t>(G, d->N));
    const int64_t rows = std::max(CK, (int64_t)d->C_out * KK);
    plan.table_bytes = round_up((size_t)rows * sizeof(int2), 256);
    plan.wt_floats = round_up((size_t)(d->C_out * CK), 64);
    /* wgrad splits: enough blocks for two waves, slices of at least 8 K tiles, partials in
     * budget */
    const int64_t dw = (int64_t)d->C_out * CK;
    const int64_t bm = d->C_out > 64 ? 128 : 64;
    const int64_t tiles_mn = ((d->C_out + bm - 1) / bm) * ((CK + IG_BN - 1) / IG_BN);
    const int64_t k_tiles = ((int64_t)plan.G * P + IG_BK - 1) / IG_BK;
    int64_t S = (2 * (int64_t)snn_cuda_sm_count() + tiles_mn - 1) / tiles_mn;
    S = std::min(S, std::max<int64_t>(1, k_tiles / 8));
    S = std::min(S, std::max<int64_t>(1, (int64_t)(IG_WORKSPACE_BUDGET / sizeof(float)) / dw));
    plan.wgrad_splits = (int)std::max<int64_t>(1, std::min<int64_t>(S, 65535));
    plan.partial_floats = plan.wgrad_splits > 1 ? (size_t)(plan.wgrad_splits * dw) : 0;
    plan.bytes = plan.table_bytes + (plan.wt_floats + plan.partial_floats) * sizeof(float);
    return plan;
}

extern "C" size_t snn_conv2d_igemm_workspace_bytes_cuda(const snn_conv2d_dims *d)
{
    return make_ig_plan(d).bytes;
}

static ig_args base_args(const snn_conv2d_dims *d)
{
    ig_args g = {};
    g.C_in = d->C_in;
    g.H = d->H;
    g.W = d->W;
    g.C_out = d->C_out;
    g.H_out = d->H_out;
    g.W_out = d->W_out;
    g.KH = d->KH;
    g.KW = d->KW;
    g.stride = d->stride;
    g.pad = d->pad;
    g.stride_shift = -1;
    for (int s = 0; s < 31; s++)
        if (d->stride == 1 << s) g.stride_shift = s;
    return g;
}

/* Launch one GEMM with the block shape M asks for, at the precision in use. */
template <int PASS>
static void launch(const ig_args &g, int splits)
{
    const int prec = snn_cuda_precision();
    SNN_ASSERT(prec == SNN_PRECISION_TF32 || prec == SNN_PRECISION_BF16);
    const int bm = g.M > 64 ? 128 : 64;
    const dim3 grid((unsigned)((g.N + IG_BN - 1) / IG_BN), (unsigned)((g.M + bm - 1) / bm),
                    (unsigned)splits);
    /* shared memory per block: NSTAGE slices of A and B (see ig_layout) */
    const int a_stride = prec == SNN_PRECISION_BF16 ? IG_BK + 8 : IG_BK + 4;
    const int kmajor = prec == SNN_PRECISION_BF16 ? IG_BN + 4 : IG_BN + 8;
    const int b_floats = PASS == IG_WGRAD ? IG_BN * a_stride : IG_BK * kmajor;
    const size_t smem = (size_t)IG_NSTAGE * (bm * a_stride + b_floats) * sizeof(float);
    void (*kernel)(ig_args);
    if (prec == SNN_PRECISION_TF32)
        kernel = bm == 128 ? conv2d_igemm_kernel<PASS, SNN_PRECISION_TF32, 128>
                           : conv2d_igemm_kernel<PASS, SNN_PRECISION_TF32, 64>;
    else
        kernel = bm == 128 ? conv2d_igemm_kernel<PASS, SNN_PRECISION_BF16, 128>
                           : conv2d_igemm_kernel<PASS, SNN_PRECISION_BF16, 64>;
    /* more than 48 KB of dynamic shared memory must be asked for, once per kernel (the
     * largest a kernel ever needs is its BF16 size; both precisions' sizes are constants) */
    static bool raised[2][2];
    bool &done = raised[prec == SNN_PRECISION_BF16][bm == 128];
    if (!done) {
        SNN_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            (int)smem));
        done = true;
    }
    kernel<<<grid, IG_THREADS, smem, snn_cuda_stream()>>>(g);
    const cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess)
        snn_cuda_launch_fail("conv2d_igemm_kernel", __FILE__, __LINE__, err,
                             grid.x * grid.y * grid.z, IG_THREADS);
}

static void build_k_table(int2 *table, int C, const snn_conv2d_dims *d, int plane, int row,
                          int col)
{
    const int rows = C * d->KH * d->KW;
    SNN_CUDA_LAUNCH(k_table_kernel, snn_cuda_grid(rows, SNN_CUDA_BLOCK), SNN_CUDA_BLOCK, 0,
                    table, C, d->KH, d->KW, plane, row, col);
}

extern "C" void snn_conv2d_igemm_forward_cuda(float *out, const float *x, const float *weight,
                                              const float *bias, const snn_conv2d_dims *d,
                                              void *workspace)
{
    if (d->N <= 0 || d->C_out <= 0) return;
    const ig_plan plan = make_ig_plan(d);
    int2 *table = (int2 *)workspace;
    build_k_table(table, d->C_in, d, d->H * d->W, d->W, 1);
    const int P = d->H_out * d->W_out;
    const int64_t x_image = (int64_t)d->C_in * d->H * d->W, out_image = (int64_t)d->C_out * P;
    ig_args g = base_args(d);
    g.A = weight;
    g.bias = bias;
    g.k_table = table;
    g.M = d->C_out;
    g.K = d->C_in * d->KH * d->KW;
    g.k_per_split = (g.K + IG_BK - 1) / IG_BK * IG_BK;
    for (int n0 = 0; n0 < d->N; n0 += plan.G) {
        const int chunk = std::min(plan.G, d->N - n0);
        g.B = x + n0 * x_image;
        g.C = out + n0 * out_image;
        g.N = chunk * P;
        launch<IG_FORWARD>(g, 1);
    }
}

extern "C" void snn_conv2d_igemm_backward_cuda(float *dx, float *dweight, const float *dout,
                                               const float *x, const float *weight,
                                               const snn_conv2d_dims *d, void *workspace)
{
    if (d->N <= 0 || d->C_out <= 0 || (!dx && !dweight)) return;
    const ig_plan plan = make_ig_plan(d);
    const int KK = d->KH * d->KW, CK = d->C_in * KK, P = d->H_out * d->W_out;
    const int HW = d->H * d->W;
    const int64_t x_image = (int64_t)d->C_in * HW, out_image = (int64_t)d->C_out * P;
    int2 *table = (int2 *)workspace;
    float *wt = (float *)((char *)workspace + plan.table_bytes);
    float *partial = wt + plan.wt_floats;

    if (dx) {
        /* dgrad: A = W^T (C_in, C_out KK), B = dout gathered through the transposed window */
        SNN_CUDA_LAUNCH(weight_transpose_kernel, snn_cuda_grid((int64_t)d->C_out * CK, SNN_CUDA_BLOCK),
                        SNN_CUDA_BLOCK, 0, wt, weight, d->C_out, d->C_in, KK);
        build_k_table(table, d->C_out, d, P, 0, 0); /* row k = (co, kh, kw): offset co P */
        ig_args g = base_args(d);
        g.A = wt;
        g.k_table = table;
        g.M = d->C_in;
        g.K = d->C_out * KK;
        g.k_per_split = (g.K + IG_BK - 1) / IG_BK * IG_BK;
        for (int n0 = 0; n0 < d->N; n0 += plan.G) {
            const int chunk = std::min(plan.G, d->N - n0);
            g.B = dout + n0 * out_image;
            g.C = dx + n0 * x_image;
            g.N = chunk * HW;
            launch<IG_DGRAD>(g, 1);
        }
    }
    if (dweight) {
        /* wgrad: A = dout (C_out, N P), B = x gathered per column (ci, kh, kw) */
        build_k_table(table, d->C_in, d, HW, d->W, 1);
        ig_args g = base_args(d);
        g.k_table = table;
        g.M = d->C_out;
        g.N = CK;
        const int S = plan.wgrad_splits;
        for (int n0 = 0; n0 < d->N; n0 += plan.G) {
            const int chunk = std::min(plan.G, d->N - n0);
            g.A = dout + n0 * out_image;
            g.B = x + n0 * x_image;
            g.K = chunk * P;
            const int used = snn_conv2d_split_k(g.K, IG_BK, S, &g.k_per_split);
            if (used > 1) {
                g.C = partial;
                g.split_stride = (int64_t)d->C_out * CK;
                launch<IG_WGRAD>(g, used);
                snn_conv2d_split_sum_cuda(dweight, partial, (int64_t)d->C_out * CK, used);
            } else {
                g.C = dweight;
                g.split_stride = 0;
                launch<IG_WGRAD>(g, 1);
            }
        }
    }
}
