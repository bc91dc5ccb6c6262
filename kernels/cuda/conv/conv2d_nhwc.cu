/*
 * conv2d_nhwc.cu - the tensor-core convolution on channels-last copies: an implicit GEMM whose
 * operands are bf16 (BF16) or fp32 rounded to TF32 (TF32) in memory, loaded 16 bytes at a
 * time and handed to mma.sync by ldmatrix. Forward, input gradient (dgrad) and weight gradient
 * (wgrad) of a convolution of stride 1 to 4 whose channel counts are multiples of 32
 * (snn_conv2d_nhwc_supports); conv2d.cu hands a TF32 / BF16 conv here where conv_path.cu's
 * rule (nhwc_pays) says so, or when the conv path is forced to SNN_CONV_PATH_NHWC on a shape
 * this file takes.
 *
 * Test: tests/test_cuda_igemm.c runs this path (forced) on every shape it supports, in both
 * precisions, against the CPU reference in fp32 (2e-3 TF32, 1e-2 BF16) and on bf16-rounded
 * operands (5e-4), as the other paths. Bench: bench/bench_conv2d_cuda (the "nhwc" rows).
 *
 * Why a second implicit GEMM beside conv2d_igemm.cu. That kernel gathers from the NCHW fp32
 * tensors the engine keeps: along the reduction (input channels x taps) an NCHW tensor has no
 * contiguous run, so every element is its own 4-byte cp.async, and the operands are rounded
 * only when a fragment is built. Loads, not the tensor cores, set its speed (a tenth of the
 * BF16 tensor-core peak or less: docs/benchmarks.md, "Conv paths"). Here each call first writes copies in the order the reduction
 * walks (E: bf16, or fp32 rounded to TF32):
 *
 *   x (N, C_in, H, W) fp32      -> xh (N, H, W, C_in) E      channels-last (NHWC)
 *   dout (N, C_out, Ho, Wo) fp32 -> dyh (N, Ho, Wo, C_out) E  (backward)
 *   w (C_out, C_in, KH, KW)      -> wf (C_out, KH, KW, C_in) E (forward)
 *                                -> wd (C_in, KH, KW, C_out) E, taps flipped (dgrad)
 *
 * and then a slice of the reduction of one output position is consecutive channels of one tap:
 * 64 or 128 contiguous bytes, four or eight 16-byte cp.async. The copies cost one pass over the
 * tensor (4 B read, 2 or 4 B written an element), against the nine 4-byte gathers per element
 * the NCHW kernel issues for a 3x3 window.
 *
 * The three products (cross-correlation, as PyTorch; tap t = (kh, kw), KK taps, stride s):
 *
 *   forward  out[n, co, oh, ow] = sum_{t, ci} wf[co, t, ci] xh[n, oh s - pad + kh, ow s - pad + kw, ci]
 *            GEMM M = C_out, N = N Ho Wo, K = KK C_in  (k = t C_in + ci)
 *   dgrad    dx[n, ci, ih, iw] += sum_{t, co} wd[ci, t, co] dyh[n, ih - pad' + kh, iw - pad' + kw, co]
 *            at s = 1, with wd[ci, t, co] = w[co, ci, KK - 1 - t] and pad' = K - 1 - pad: the
 *            input gradient is the forward convolution of dout with the flipped, transposed
 *            kernel, so both run on one kernel (nhwc_gather_kernel), M = C_in, K = KK C_out.
 *            At s > 1 the pixels of dx split into s^2 residue classes, each a stride-1
 *            convolution of dout with the taps of its class (dgrad_phase below)
 *   wgrad    dw[co, ci, t] += sum_{n, oh, ow} dyh[n, oh, ow, co] xh[n, oh s - pad + kh, ow s - pad + kw, ci]
 *            GEMM M = C_out, N = KK C_in (columns (t, ci)), K = N Ho Wo (the pixels):
 *            nhwc_wgrad_kernel, split along K as conv2d_igemm.cu does, partial sums added in a
 *            fixed order (deterministic)
 *
 * Tiles and shared-memory layouts: conv2d_nhwc_tiles.cuh, which holds the two GEMM kernels.
 * The copies of x and dout (from floats or bits; dout also from a batch-norm's dL/dout):
 * conv2d_nhwc_copies.cuh.
 *
 * Rounding: x, dout and w are rounded once, in the copies: to bf16 (to nearest, ties to even),
 * or to TF32 (cvt.rna, as cuBLAS), whose low mantissa bits the tensor cores then ignore;
 * products are exact in fp32 and summed in fp32. Spikes (0, 1) are exact in both.
 *
 * Floors (H100; ResNet-18 layer1, 64 -> 64 channels, 32x32, 256 images): each product is
 * 2 x 64 x 576 x 262,144 = 19.3 GFLOP, 25 us at cuBLAS's 770 BF16 TFLOP/s on a square product.
 * Bytes: the forward reads x (67 MB fp32), writes and reads xh (34 + 34 MB), writes out (67 MB):
 * ~200 MB, ~70 us at ~3 TB/s; so each pass is bound by its bytes as much as by its FLOPs.
 * Measured, the three passes took about 3x the byte floor, the forward bound by L2 traffic:
 * the nine taps reread each input pixel through L2. The halo variant of the gather kernel
 * (conv2d_nhwc_tiles.cuh) reads each pixel about once per tile for all nine taps, which took a
 * quarter off forward and dgrad (the dgrad also from its batched epilogue loads); the weight
 * gradient still rereads x once per tap (docs/benchmarks.md, "Conv paths").
 *
 * The forward can also apply an eval-mode batch-norm to each output in the epilogue
 * (conv2d.cu's snn_conv2d_forward_bn_eval_cuda): batchnorm.cu's expression on the value that
 * would have been stored, so the bits of the two passes without the second pass.
 *
 * Index math is 32-bit: the launchers cut the batch into chunks whose channels-last copies stay
 * within NH_CHUNK_BYTES (and so below 2^31 elements).
 */
#include <algorithm>
#include <cuda_bf16.h>
#include <stdint.h>

#include "kernels/cuda/cuda_common.cuh"
#include "tensor/cuda_options.h"
#include "tensor/error.h"
#include "kernels/cuda/kernels_cuda.h"
#include "conv2d_nhwc_tiles.cuh"
#include "conv2d_nhwc_copies.cuh"

#define NH_CHUNK_BYTES ((size_t)32 << 20)      /* a chunk's channels-last copy of x or dout */
#define NH_PARTIAL_BUDGET ((size_t)64 << 20)   /* wgrad's split partial sums */

/* ---- the weight's copy and the input gradient's residue classes ---------------------------- */

/* The weight (C_out, C_in, KH, KW) fp32 as the A operand (to_operand):
 *   forward      wf[co, t, ci] = w[co, ci, t], t = kh KW + kw
 *   dgrad phase  wd[ci, jh, jw, co] = w[co, ci, kh0 - s jh, kw0 - s jw], jh < nh, jw < nw
 *                (the taps of one residue class, walked backwards: dgrad_phase)
 * One thread per output element. Traffic: 4 B read (gathered, from L2), 2 or 4 B written. */
template <typename E>
static __global__ void pack_weight_kernel(E *__restrict__ dst, const float *__restrict__ w,
                                          int C_out, int C_in, int KH, int KW, int for_dgrad,
                                          int s, int kh0, int kw0, int nh, int nw)
{
    const int taps = for_dgrad ? nh * nw : KH * KW;
    const int inner = for_dgrad ? C_out : C_in; /* the innermost axis of dst */
    const int64_t total = (int64_t)C_out * C_in * taps;
    SNN_GRID_STRIDE_LOOP(idx, total) {
        const int64_t row = idx / ((int64_t)taps * inner);
        const int r = (int)(idx - row * taps * inner), t = r / inner, e = r - t * inner;
        const int64_t co = for_dgrad ? e : row, ci = for_dgrad ? row : e;
        int tap = t;
        if (for_dgrad) {
            const int jh = t / nw, jw = t - jh * nw;
            tap = (kh0 - s * jh) * KW + (kw0 - s * jw);
        }
        dst[idx] = to_operand(w[(co * C_in + ci) * KH * KW + tap], (E *)nullptr);
    }
}

/* One residue class (ph, pw) of the input gradient at stride s. Input pixel ih = ph + s i'
 * receives dout row oh = (ih + pad - kh) / s = i' + (ph + pad - kh) / s from the taps kh with
 * ph + pad - kh divisible by s: every s-th tap, whose offsets dh = (ph + pad - kh) / s are
 * consecutive. So the class is a stride-1 convolution of dout with an nh x nw window (taps
 * walked from the largest kh, kh0, down), padded by -dh_min, written to every s-th pixel of dx.
 * The s^2 classes hold each tap once: the work is the forward's, no multiplied zeros (the NCHW
 * kernel's transposed window multiplies s^2 - 1 zeros for every term). At s = 1 the one class
 * is the flipped window with pad KH - 1 - pad. */
struct dgrad_phase {
    int nh, nw;     /* taps (0: the class receives nothing) */
    int kh0, kw0;   /* the first tap walked (the largest) */
    int pad_h, pad_w; /* -dh_min, -dw_min */
    int Hp, Wp;     /* the class's pixels: ceil((H - ph) / s) x ceil((W - pw) / s) */
};

static void phase_axis(int ph, int pad, int K, int s, int size, int *n, int *k0, int *padp,
                       int *len)
{
    *n = 0;
    for (int k = K - 1; k >= 0; k--)
        if (((ph + pad - k) % s + s) % s == 0) {
            if (*n == 0) {
                *k0 = k;
                *padp = -((ph + pad - k) / s);
            }
            (*n)++;
        }
    *len = size > ph ? (size - ph + s - 1) / s : 0;
}

static dgrad_phase make_dgrad_phase(const snn_conv2d_dims *d, int ph, int pw)
{
    dgrad_phase f = {};
    phase_axis(ph, d->pad, d->KH, d->stride, d->H, &f.nh, &f.kh0, &f.pad_h, &f.Hp);
    phase_axis(pw, d->pad, d->KW, d->stride, d->W, &f.nw, &f.kw0, &f.pad_w, &f.Wp);
    return f;
}

/* ---- planning and launching ---------------------------------------------------------------- */

/* What the workspace size and the launches derive from the dims and the element size (2: bf16,
 * 4: TF32). Workspace: the packed weight, then xh and dyh of one chunk, then wgrad's partial
 * sums; a backward that consumes dout keeps xh in dout's buffer where it fits there
 * (x_in_dout) and has no xh here. */
struct nh_plan {
    int G;                /* images per chunk */
    int wgrad_splits;     /* S */
    int wgrad_bk;         /* pixels per wgrad slice: 64 (bf16) or 32 (TF32), 128 bytes a row */
    size_t weight_bytes, x_bytes, dy_bytes, partial_floats, bytes;
    bool x_in_dout;       /* an image's xh (C_in H W E bytes) fits in its fp32 dout (C_out P) */
};

static size_t round_up(size_t x, size_t to) { return (x + to - 1) / to * to; }

static nh_plan make_nh_plan(const snn_conv2d_dims *d, int elem)
{
    nh_plan plan = {};
    const int64_t KK = (int64_t)d->KH * d->KW, CK = (int64_t)d->C_in * KK;
    const int64_t HW = (int64_t)d->H * d->W, P = (int64_t)d->H_out * d->W_out;
    const int64_t per_image = std::max(HW * d->C_in, P * d->C_out) * (int64_t)elem;
    int64_t G = per_image > 0 ? (int64_t)NH_CHUNK_BYTES / per_image : d->N;
    plan.G = (int)std::max<int64_t>(1, std::min<int64_t>({G, (int64_t)d->N, 65535}));
    plan.wgrad_bk = elem == 2 ? 64 : 32;
    plan.weight_bytes = round_up((size_t)(d->C_out * CK) * elem, 256);
    plan.x_bytes = round_up((size_t)(plan.G * HW * d->C_in) * elem, 256);
    plan.dy_bytes = round_up((size_t)(plan.G * P * d->C_out) * elem, 256);
    /* wgrad splits: as many as fill the two blocks of every SM in one round, not more (a
     * few blocks past a round: the 8x8 layer's BF16 weight gradient took 0.179 ms at S = 8,
     * 288 blocks, against 0.145 at S = 7, 252 blocks on an H200's 264 places;
     * docs/benchmarks.md, "Conv paths"); slices of at least 8 K tiles, partials within budget */
    const int64_t dw = (int64_t)d->C_out * CK, bm = d->C_out > 64 ? 128 : 64;
    const int64_t tiles_mn = ((d->C_out + bm - 1) / bm) * ((CK + NH_BN - 1) / NH_BN);
    const int64_t k_tiles = ((int64_t)plan.G * P + plan.wgrad_bk - 1) / plan.wgrad_bk;
    int64_t S = std::max<int64_t>(1, 2 * (int64_t)snn_cuda_sm_count() / tiles_mn);
    S = std::min(S, std::max<int64_t>(1, k_tiles / 8));
    S = std::min(S, std::max<int64_t>(1, (int64_t)(NH_PARTIAL_BUDGET / sizeof(float)) / dw));
    plan.wgrad_splits = (int)std::max<int64_t>(1, std::min<int64_t>(S, 65535));
    plan.partial_floats = plan.wgrad_splits > 1 ? (size_t)(plan.wgrad_splits * dw) : 0;
    plan.bytes = plan.weight_bytes + plan.x_bytes + plan.dy_bytes +
                 plan.partial_floats * sizeof(float);
    plan.x_in_dout = HW * d->C_in * elem <= P * d->C_out * (int64_t)sizeof(float);
    return plan;
}

/* The operand size of the current precision: TF32 keeps 4-byte operands, everything else
 * (BF16; fp32 never comes here) 2. */
static int operand_bytes(void) { return snn_cuda_precision() == SNN_PRECISION_TF32 ? 4 : 2; }

extern "C" bool snn_conv2d_nhwc_supports(const snn_conv2d_dims *d)
{
    /* one image's tensors and the weight must index in 32 bits with room to spare */
    const int64_t image = std::max((int64_t)d->C_in * d->H * d->W,
                                   (int64_t)d->C_out * d->H_out * d->W_out);
    const int64_t weight = (int64_t)d->C_out * d->C_in * d->KH * d->KW;
    /* strides up to 4: dgrad's residue classes (s^2 of them) live in a fixed table */
    return d->stride >= 1 && d->stride <= 4 && d->C_in > 0 && d->C_out > 0 &&
           d->C_in % NH_CHANNEL_MULTIPLE == 0 && d->C_out % NH_CHANNEL_MULTIPLE == 0 &&
           d->H_out > 0 && d->W_out > 0 && image < ((int64_t)1 << 30) &&
           weight < ((int64_t)1 << 30);
}

extern "C" bool snn_conv2d_nhwc_dx_over_dout(const snn_conv2d_dims *d)
{
    return snn_conv2d_nhwc_supports(d) && snn_conv2d_keeps_shape(d);
}

extern "C" size_t snn_conv2d_nhwc_workspace_bytes_cuda(const snn_conv2d_dims *d)
{
    return make_nh_plan(d, operand_bytes()).bytes;
}

extern "C" size_t snn_conv2d_nhwc_consuming_workspace_bytes_cuda(const snn_conv2d_dims *d)
{
    const nh_plan plan = make_nh_plan(d, operand_bytes());
    return plan.x_in_dout ? plan.bytes - plan.x_bytes : plan.bytes;
}

/* forward's weight (phase NULL), or one dgrad class's */
template <typename E>
static void pack_weight(E *dst, const float *w, const snn_conv2d_dims *d,
                        const dgrad_phase *phase)
{
    const int taps = phase ? phase->nh * phase->nw : d->KH * d->KW;
    const int64_t total = (int64_t)d->C_out * d->C_in * taps;
    SNN_CUDA_LAUNCH(pack_weight_kernel<E>, snn_cuda_grid(total, SNN_CUDA_BLOCK), SNN_CUDA_BLOCK,
                    0, dst, w, d->C_out, d->C_in, d->KH, d->KW, phase ? 1 : 0, d->stride,
                    phase ? phase->kh0 : 0, phase ? phase->kw0 : 0, phase ? phase->nh : 0,
                    phase ? phase->nw : 0);
}

/* Launch a tile kernel with `smem` bytes of dynamic shared memory; more than 48 KB must be
 * allowed per kernel first (`allowed`: the most allowed so far; the halo variant's size
 * depends on the plane). The attribute is per device and `allowed` per process: a process
 * drives one GPU (snn-train --gpus N starts a process per GPU, distributed/launch.c). */
template <typename Args>
static void launch_tiles(void (*kernel)(Args), const char *name, const Args &args, dim3 grid,
                         size_t smem, size_t *allowed)
{
    if (smem > *allowed) {
        SNN_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            (int)smem));
        *allowed = smem;
    }
    kernel<<<grid, NH_THREADS, smem, snn_cuda_stream()>>>(args);
    check_launch(name, grid, NH_THREADS);
}

/* The gather kernel's tile for a GEMM: 128 x 128 (128-byte slices where the channels allow:
 * half the barriers and loader arithmetic per multiply-add), or 64 x 256 when M <= 64 (a 64-row
 * tile keeps every row busy on the 64-channel layers; its 256 columns keep the warp tile at
 * 32 x 64). BK in elements: 64 bf16 or 32 TF32 a slice (128 bytes), else 32 / 16 (64 bytes).
 * Shared memory: STAGES (BM + BN) (BK bytes + 16): 110.6 KB (128 x 128, 128-byte slices, 3
 * stages) or 102.4 KB (64 x 256, 64-byte slices, 4 stages): two blocks an SM. The halo
 * variant (64-byte slices, 4 stages) holds STAGES BM rows of weights and two halo buffers:
 * 75 KB for layer1 (64 x 256, 340 halo pixels), 70-87 KB for 128 x 128 on 16x16 to 4x4
 * planes. */
#define NH_SMEM_TWO_BLOCKS (113 * 1024)        /* dynamic shared memory for two blocks an SM */

template <typename E, int BM, int BN, int BK, int STAGES, bool HALO>
static size_t gather_smem(const nh_gather &g)
{
    const size_t row = BK * sizeof(E) + NH_PAD_BYTES;
    const size_t buffers = g.C_ch / BK > 1 ? 2 : 1; /* one channel group: one halo buffer */
    return HALO ? (STAGES * BM + buffers * g.halo.slots) * row : STAGES * (BM + BN) * row;
}

template <typename E, int BM, int BN, int BK, int STAGES, bool HALO>
static void launch_gather_tile(const nh_gather &g)
{
    static size_t allowed;
    const dim3 grid((unsigned)((g.N + BN - 1) / BN), (unsigned)((g.M + BM - 1) / BM));
    launch_tiles(nhwc_gather_kernel<E, BM, BN, BK, STAGES, HALO>, "nhwc_gather_kernel", g, grid,
                 gather_smem<E, BM, BN, BK, STAGES, HALO>(g), &allowed);
}

/* Whether the halo variant takes the GEMM with BN-position tiles, and if so its geometry in
 * g->halo: stride 1 into the GEMM's own plane, a window of at least STAGES - 1 taps (the
 * halo buffers' reuse distance), tiles of whole output rows (Wo divides BN, and BN divides the
 * plane or the plane BN), at most 2 halo pixels per output position, and two blocks an SM.
 * The pixel rule is measured (bench_conv2d_cuda, BF16; docs/benchmarks.md, "Conv paths"):
 * layer1's 340 pixels for 256 positions made its forward 1.26x faster, but 4x4 planes (8
 * images of 36 pixels for 128 positions, 2.25 a position) made the forward and dgrad 1.25x
 * slower. */
template <typename E, int BM, int BN, int BK, int STAGES>
static bool halo_fits(nh_gather *g)
{
    const int P = g->Ho * g->Wo;
    if (g->stride != 1 || g->out_step != 1 || g->KH * g->KW < STAGES - 1 || BN % g->Wo != 0)
        return false;
    nh_halo h = {};
    if (P % BN == 0) h.images = 1, h.rows = BN / g->Wo;
    else if (BN % P == 0) h.images = BN / P, h.rows = g->Ho;
    else return false;
    h.R = h.rows + g->KH - 1;
    h.Wp = g->Wo + g->KW - 1;
    h.slots = h.images * h.R * h.Wp;
    if (h.slots > 2 * BN) return false;
    g->halo = h;
    return gather_smem<E, BM, BN, BK, STAGES, true>(*g) <= NH_SMEM_TWO_BLOCKS;
}

template <typename E>
static void launch_gather(nh_gather g)
{
    constexpr int EPV = 16 / (int)sizeof(E);     /* 8 bf16 or 4 TF32 in 16 bytes */
    const bool long_slices = g.C_ch % (8 * EPV) == 0;
    if (g.M <= 64) {
        if (long_slices && halo_fits<E, 64, 256, 8 * EPV, 3>(&g))
            launch_gather_tile<E, 64, 256, 8 * EPV, 3, true>(g);
        else if (halo_fits<E, 64, 256, 4 * EPV, 4>(&g))
            launch_gather_tile<E, 64, 256, 4 * EPV, 4, true>(g);
        else
            launch_gather_tile<E, 64, 256, 4 * EPV, 4, false>(g);
    } else if (long_slices && halo_fits<E, 128, 128, 8 * EPV, 3>(&g)) {
        launch_gather_tile<E, 128, 128, 8 * EPV, 3, true>(g);
    } else if (halo_fits<E, 128, 128, 4 * EPV, 4>(&g)) {
        launch_gather_tile<E, 128, 128, 4 * EPV, 4, true>(g);
    } else if (long_slices) {
        launch_gather_tile<E, 128, 128, 8 * EPV, 3, false>(g);
    } else {
        launch_gather_tile<E, 128, 128, 4 * EPV, 4, false>(g);
    }
}

/* wgrad's tile: BM x 128 of dW, 128 bytes of pixels a slice (64 bf16 / 32 TF32), 3 slices in
 * flight: 80 KB (BM 64) or 104 KB (BM 128) of shared memory, two blocks an SM. k_per_split
 * must be a multiple of the slice (nh_plan.wgrad_bk). */
template <typename E>
static void launch_wgrad(const nh_wgrad &g, int splits)
{
    constexpr int BK = 128 / (int)sizeof(E);
    static size_t allowed[2];
    const bool big = g.M > 64;
    const int bm = big ? 128 : 64;
    const dim3 grid((unsigned)((g.N + NH_BN - 1) / NH_BN), (unsigned)((g.M + bm - 1) / bm),
                    (unsigned)splits);
    const size_t smem = (size_t)3 * BK * ((bm + 8) + (NH_BN + 8)) * sizeof(E);
    launch_tiles(big ? nhwc_wgrad_kernel<E, 128, BK, 3> : nhwc_wgrad_kernel<E, 64, BK, 3>,
                 "nhwc_wgrad_kernel", g, grid, smem, &allowed[big]);
}

template <typename E>
static void forward_impl(float *out, snn_cuda_input x, const float *weight, const float *bias,
                         const snn_bn_eval *bn, const snn_conv2d_dims *d, void *workspace)
{
    const nh_plan plan = make_nh_plan(d, (int)sizeof(E));
    E *wf = (E *)workspace;
    E *xh = (E *)((char *)workspace + plan.weight_bytes);
    pack_weight<E>(wf, weight, d, NULL);
    const int HW = d->H * d->W, P = d->H_out * d->W_out;
    nh_gather g = {};
    g.A = wf;
    g.B = xh;
    g.bias = bias;
    if (bn) g.bn = *bn;
    g.accumulate = 0;
    g.M = d->C_out;
    g.K = d->KH * d->KW * d->C_in;
    g.C_ch = d->C_in;
    g.H = d->H;
    g.W = d->W;
    g.Ho = d->H_out;
    g.Wo = d->W_out;
    g.KH = d->KH;
    g.KW = d->KW;
    g.stride = d->stride;
    g.pad_h = g.pad_w = d->pad;
    g.out_step = 1;
    g.out_H = d->H_out;
    g.out_W = d->W_out;
    for (int n0 = 0; n0 < d->N; n0 += plan.G) {
        const int chunk = std::min(plan.G, d->N - n0);
        to_nhwc<E>(xh, x.advanced((int64_t)n0 * d->C_in * HW), chunk, d->C_in, HW);
        g.C = out + (int64_t)n0 * d->C_out * P;
        g.N = chunk * P;
        launch_gather<E>(g);
    }
}

extern "C" void snn_conv2d_nhwc_forward_cuda(float *out, const float *x, const uint32_t *x_bits,
                                             const float *weight, const float *bias,
                                             const snn_bn_eval *bn, const snn_conv2d_dims *d,
                                             void *workspace)
{
    if (d->N <= 0) return;
    SNN_ASSERT(snn_conv2d_nhwc_supports(d));
    const snn_cuda_input in = {x, x ? nullptr : x_bits, 0}; /* the copy reads bits as it goes */
    if (operand_bytes() == 4) forward_impl<float>(out, in, weight, bias, bn, d, workspace);
    else forward_impl<bf16>(out, in, weight, bias, bn, d, workspace);
}

template <typename E>
static void backward_impl(float *dx, float *dweight, const float *dout, float *consumed,
                          snn_cuda_input x, const float *weight, const snn_bn_dout *bn,
                          const snn_conv2d_dims *d, void *workspace)
{
    const nh_plan plan = make_nh_plan(d, (int)sizeof(E));
    /* dout consumed (the caller gives it up): once a chunk of dout is copied to dyh nothing
     * reads it again, so the chunk's xh lives there (C_in HW E bytes an image within the
     * C_out P floats) for the weight gradient, which runs before the input gradient, in case
     * that writes dx over it; the workspace then has no xh */
    const bool x_in_dout = consumed && plan.x_in_dout;
    SNN_ASSERT(!consumed || consumed == dout);
    char *ws = (char *)workspace;
    E *wd = (E *)ws;
    E *xh = x_in_dout ? NULL : (E *)(ws + plan.weight_bytes);
    E *dyh = (E *)(ws + plan.weight_bytes + (x_in_dout ? 0 : plan.x_bytes));
    float *partial = (float *)((char *)dyh + plan.dy_bytes);
    const int KK = d->KH * d->KW, HW = d->H * d->W, P = d->H_out * d->W_out;
    const int CK = d->C_in * KK, s = d->stride;

    /* dgrad: the gather kernel on dout, once per residue class of dx mod the stride (one class
     * at stride 1), each with its own taps packed at its place in wd (dgrad_phase) */
    dgrad_phase phases[16];
    E *phase_w[16];
    SNN_ASSERT(s * s <= 16);
    if (dx) {
        E *at = wd;
        for (int ph = 0; ph < s; ph++)
            for (int pw = 0; pw < s; pw++) {
                dgrad_phase *f = &phases[ph * s + pw];
                *f = make_dgrad_phase(d, ph, pw);
                phase_w[ph * s + pw] = at;
                if (f->nh == 0 || f->nw == 0) continue;
                pack_weight<E>(at, weight, d, f);
                at += (size_t)d->C_in * f->nh * f->nw * d->C_out;
            }
    }
    /* dx over dout (snn_conv2d_nhwc_dx_over_dout): a chunk's dout is copied to dyh before the
     * one stride-1 class writes the same images' dx there, and nothing reads that chunk of dout
     * again; so dx is written, not added */
    const bool over = dx && dx == dout;
    SNN_ASSERT(!over || snn_conv2d_nhwc_dx_over_dout(d));
    nh_gather gd = {};
    gd.B = dyh;
    gd.accumulate = over ? 0 : 1;
    gd.M = d->C_in;
    gd.C_ch = d->C_out;
    gd.H = d->H_out;
    gd.W = d->W_out;
    gd.stride = 1;
    gd.out_step = s;
    gd.out_H = d->H;
    gd.out_W = d->W;

    nh_wgrad gw = {};
    gw.dy = dyh;
    gw.M = d->C_out;
    gw.N = CK;
    gw.C_in = d->C_in;
    gw.H = d->H;
    gw.W = d->W;
    gw.P = P;
    gw.Wo = d->W_out;
    gw.KW = d->KW;
    gw.KK = KK;
    gw.stride = s;
    gw.pad = d->pad;
    gw.by_P = snn_fast_divisor_make((uint32_t)P);
    gw.by_Wo = snn_fast_divisor_make((uint32_t)d->W_out);

    /* a batch-norm's dL/dout (bn): its per-channel floats, made once for every chunk */
    float4 *chan = NULL;
    if (bn) {
        chan = (float4 *)snn_cuda_scratch((size_t)d->C_out * sizeof(float4));
        snn_bn_dout_channels_cuda((float *)chan, bn, d->C_out);
    }
    for (int n0 = 0; n0 < d->N; n0 += plan.G) {
        const int chunk = std::min(plan.G, d->N - n0);
        dout_to_nhwc<E>(dyh, dout, bn, chan, n0, chunk, d->C_out, P);
        /* the weight gradient, then the input gradient (x_in_dout or dx over dout: that order) */
        if (dweight) {
            E *xh_chunk = x_in_dout ? (E *)(consumed + (int64_t)n0 * d->C_out * P) : xh;
            to_nhwc<E>(xh_chunk, x.advanced((int64_t)n0 * d->C_in * HW), chunk, d->C_in, HW);
            gw.x = xh_chunk;
            gw.K = chunk * P;
            const int used = snn_conv2d_split_k(gw.K, plan.wgrad_bk, plan.wgrad_splits,
                                                &gw.k_per_split);
            if (used > 1) {
                gw.dw = partial;
                gw.split_stride = (int64_t)d->C_out * CK;
                launch_wgrad<E>(gw, used);
                snn_conv2d_split_sum_cuda(dweight, partial, (int64_t)d->C_out * CK, used);
            } else {
                gw.dw = dweight;
                gw.split_stride = 0;
                launch_wgrad<E>(gw, 1);
            }
        }
        for (int k = 0; dx && k < s * s; k++) {
            const dgrad_phase *f = &phases[k];
            if (f->nh == 0 || f->nw == 0 || f->Hp == 0 || f->Wp == 0) continue;
            gd.A = phase_w[k];
            gd.K = f->nh * f->nw * d->C_out;
            gd.Ho = f->Hp;
            gd.Wo = f->Wp;
            gd.KH = f->nh;
            gd.KW = f->nw;
            gd.pad_h = f->pad_h;
            gd.pad_w = f->pad_w;
            gd.out_ph = k / s;
            gd.out_pw = k % s;
            gd.C = dx + (int64_t)n0 * d->C_in * HW;
            gd.N = chunk * f->Hp * f->Wp;
            launch_gather<E>(gd);
        }
    }
}

extern "C" void snn_conv2d_nhwc_backward_cuda(float *dx, float *dweight, const float *dout,
                                              float *consumed, const float *x,
                                              const uint32_t *x_bits, const float *weight,
                                              const snn_bn_dout *bn, const snn_conv2d_dims *d,
                                              void *workspace)
{
    if (d->N <= 0 || (!dx && !dweight)) return;
    SNN_ASSERT(snn_conv2d_nhwc_supports(d));
    const snn_cuda_input in = x ? snn_cuda_floats(x) : snn_cuda_input{nullptr, x_bits, 0};
    if (operand_bytes() == 4)
        backward_impl<float>(dx, dweight, dout, consumed, in, weight, bn, d, workspace);
    else
        backward_impl<bf16>(dx, dweight, dout, consumed, in, weight, bn, d, workspace);
}
