/*
 * conv2d_nhwc.cu - the tensor-core convolution on channels-last copies: an implicit GEMM whose
 * operands are bf16 (BF16) or fp32 rounded to TF32 (TF32) in memory, loaded 16 bytes at a
 * time and handed to mma.sync by ldmatrix. Forward, input gradient (dgrad) and weight gradient
 * (wgrad) of a convolution of stride 1 to 4 whose channel counts are multiples of 32
 * (snn_conv2d_nhwc_supports); conv2d.cu hands a TF32 / BF16 conv here where its decision table
 * (nhwc_pays) says so, or when the conv path is forced to SNN_CONV_PATH_NHWC on a shape this
 * file takes.
 *
 * Test: tests/test_cuda_igemm.c runs this path (forced) on every shape it supports, in both
 * precisions, against the CPU reference in fp32 (2e-3 TF32, 1e-2 BF16) and on bf16-rounded
 * operands (5e-4), as the other paths. Bench: bench/bench_conv2d_cuda (the "nhwc" rows).
 *
 * Why a second implicit GEMM beside conv2d_igemm.cu. That kernel gathers from the NCHW fp32
 * tensors the engine keeps: along the reduction (input channels x taps) an NCHW tensor has no
 * contiguous run, so every element is its own 4-byte cp.async, and the operands are rounded
 * only when a fragment is built. Loads, not the tensor cores, set its speed (50-72 of the
 * H100's ~770 BF16 TFLOP/s). Here each call first writes copies in the order the reduction
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
 * Tiles. A block has 256 threads (8 warps, 2 along M x 4 along N); each warp owns a quarter
 * of the tile's columns and half its rows, as (BM/32) x (BN/32) mma tiles (m16n8k16 for bf16,
 * m16n8k8 for TF32: each eats 32 bytes of k a row) whose fp32 accumulators stay in registers
 * (64 a thread). The K loop runs over slices of BK elements with STAGES slices in flight
 * (cp.async with zero-fill: a padding pixel or a row past the edge costs no branch and no
 * load). Sizes in bytes of a slice row, the same for both element types:
 *
 *   gather, M > 64, 128-byte slices fit C   128 x 128, 3 stages: 110.6 KB of shared memory
 *   gather, M > 64, otherwise              128 x 128, 64-byte slices, 4 stages
 *   gather, M <= 64                        64 x 256, 64-byte slices, 4 stages: 102.4 KB
 *                                          (layer1's 64 channels: a 128-row tile would be half
 *                                          empty, and 256 columns keep the warp tile at 32 x 64)
 *   wgrad                                  BM x 128 with BM = 128 (64 when M <= 64), 128 bytes
 *                                          of pixels a slice, 3 stages: 104 / 80 KB
 *
 * so two blocks fit an SM. Longer slices halve the barriers and the loader's address
 * arithmetic per multiply-add, and the loader walks the taps instead of dividing for them.
 * Shared memory layout per stage:
 *
 *   gather kernel  As[BM][BK + 16 B]  weight rows, k contiguous    ldmatrix  -> A fragments
 *                  Bs[BN][BK + 16 B]  one output position a row    ldmatrix  -> B fragments
 *   wgrad kernel   As[BK][BM + 8]     one pixel a row, C_out along  ldmatrix.trans (bf16) or
 *                  Bs[BK][128 + 8]    one pixel a row, (t, ci) along 4-byte loads (TF32)
 *
 * The padding puts the 8 row addresses of one ldmatrix in 8 different 16-byte bank groups
 * (rows 80, 144, 272 bytes apart: no conflicts) and keeps every row 16-byte aligned for
 * cp.async; in the TF32 wgrad, rows 8 words past a multiple of 32 put the 32 lanes' loads in 32
 * banks.
 *
 * Rounding: x, dout and w are rounded once, in the copies: to bf16 (to nearest, ties to even),
 * or to TF32 (cvt.rna, as cuBLAS), whose low mantissa bits the tensor cores then ignore;
 * products are exact in fp32 and summed in fp32. Spikes (0, 1) are exact in both.
 *
 * Floors (H100; ResNet-18 layer1, 64 -> 64 channels, 32x32, 256 images): each product is
 * 2 x 64 x 576 x 262,144 = 19.3 GFLOP, 25 us at cuBLAS's 770 BF16 TFLOP/s on a square product.
 * Bytes: the forward reads x (67 MB fp32), writes and reads xh (34 + 34 MB), writes out (67 MB):
 * ~200 MB, ~70 us at ~3 TB/s; so each pass is bound by its bytes as much as by its FLOPs.
 * Measured there (H100, 2026-11-26, bench_conv2d_cuda): 0.18 / 0.23 / 0.22 ms for forward /
 * dgrad / wgrad in BF16, 3x the byte floor; ncu on the forward: L2 throughput 72%, DRAM 18%,
 * SM 41% - the nine taps reread each input pixel through L2 (docs/benchmarks.md).
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

#include "cuda_common.cuh"
#include "cuda_options.h"
#include "error.h"
#include "kernels_cuda.h"
#include "mma_sync.cuh"

typedef __nv_bfloat16 bf16;

#define NH_THREADS 256
#define NH_BN 128
#define NH_CHANNEL_MULTIPLE 32                 /* C_in and C_out: whole 32-channel slices */
#define NH_PAD_BYTES 16                        /* padding per shared-memory row of the gather */
#define NH_CHUNK_BYTES ((size_t)32 << 20)      /* a chunk's channels-last copy of x or dout */
#define NH_PARTIAL_BUDGET ((size_t)64 << 20)   /* wgrad's split partial sums */

/* ---- the instructions (mma_sync.cuh), per element type --------------------------------------
 *
 * ldmatrix reads 8x8 blocks of 16-bit elements. Read as 32-bit elements (TF32), a 16-byte row
 * is 4 of them and register i holds, per lane l, row l / 4, column l % 4: the TF32 fragment
 * shape, so the gather kernel's loads serve both precisions (.trans would split a 32-bit
 * element: the TF32 weight gradient loads its fragments one by one). */

/* One mma of the element type: m16n8k16 for bf16, m16n8k8 for TF32 (stored as fp32 rounded
 * to TF32): both consume 32 bytes of k per row. */
template <typename E>
static __device__ __forceinline__ void mma_step(float *d, const uint32_t *a, const uint32_t *b)
{
    if constexpr (sizeof(E) == 2) mma_bf16(d, a, b);
    else mma_tf32(d, a, b);
}

/* An operand element from an fp32 value: bf16 rounded to nearest even, or fp32 rounded to
 * TF32 (to nearest, ties away: cvt.rna, as cuBLAS and conv2d_igemm.cu round), whose low 13
 * bits are then zero, so the tensor cores' truncation changes nothing. */
static __device__ __forceinline__ bf16 to_operand(float v, bf16 *) { return __float2bfloat16_rn(v); }
static __device__ __forceinline__ float to_operand(float v, float *)
{
    uint32_t r;
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(v));
    return __uint_as_float(r);
}

/* ---- forward and dgrad: C (M, N) = A (M, K) x B gathered from a channels-last tensor ------- */

struct nh_gather {
    const void *A;     /* (M, K) row-major, bf16 or TF32: wf (forward) or wd (dgrad) */
    const void *B;     /* channels-last input of the chunk (images, H, W, C), the same type */
    float *C;          /* NCHW output of the chunk (images, M, Ho, Wo) */
    const float *bias; /* forward, may be NULL: C = A B + bias[row] */
    snn_bn_eval bn;    /* forward, running_mean NULL when none: then C = bn_eval(A B + bias) */
    int accumulate;    /* dgrad: C += A B */
    int M, N, K;       /* N = images Ho Wo, K = KK C */
    int C_ch, H, W;    /* the gathered tensor: channels and plane */
    int Ho, Wo;        /* the GEMM's output plane: N = images Ho Wo */
    int KW, stride, pad_h, pad_w; /* input pixel = output pixel stride - pad + (kh, kw) */
    /* where GEMM pixel (oh, ow) lands: (oh out_step + out_ph, ow out_step + out_pw) of an
     * out_H x out_W plane (out_step 1, offsets 0: the GEMM's own plane; a dgrad phase: the
     * pixels of one residue class mod the stride) */
    int out_step, out_ph, out_pw, out_H, out_W;
};

/*
 * One BM x BN tile of C, K walked in slices of BK (32 or 64: one tap's BK consecutive channels,
 * so C % BK == 0), STAGES slices in flight. Loader roles: thread tid copies 16-byte part
 * (tid % PARTS) of slice rows tid / PARTS + ROWS_PER_PASS i; A rows are output channels, B rows
 * output positions, whose source is one run of 2 BK bytes of the input pixel the slice's tap
 * reads. The tap is walked, not divided for: (tap, first channel) advance by BK a slice.
 */
template <typename E, int BM, int BN, int BK, int STAGES>
static __global__ void __launch_bounds__(NH_THREADS, 2) nhwc_gather_kernel(nh_gather g)
{
    constexpr int EPV = 16 / (int)sizeof(E);   /* elements per 16-byte copy */
    constexpr int ROW = BK + NH_PAD_BYTES / (int)sizeof(E);
    constexpr int A_ELEMS = BM * ROW, STAGE = A_ELEMS + BN * ROW;
    constexpr int MT = BM / 32, NT = BN / 32;   /* warp tile (BM/2) x (BN/4) */
    constexpr int PARTS = BK / EPV, ROWS_PER_PASS = NH_THREADS / PARTS;
    constexpr int A_ROWS = BM / ROWS_PER_PASS, B_ROWS = BN / ROWS_PER_PASS; /* per thread */
    constexpr int KSTEP = 2 * EPV;              /* k of one mma: 32 bytes */
    static_assert(BM % ROWS_PER_PASS == 0 && BN % ROWS_PER_PASS == 0, "tile rows per pass");
    extern __shared__ __align__(16) unsigned char smem_bytes[];
    E *smem = reinterpret_cast<E *>(smem_bytes);
    const E *gA = static_cast<const E *>(g.A), *gB = static_cast<const E *>(g.B);

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    const int P = g.Ho * g.Wo, part = EPV * (tid % PARTS), row0 = tid / PARTS;
    const int tiles = g.K / BK;

    /* this thread's B rows (output positions): image base and top-left input pixel */
    int b_base[B_ROWS], b_ih0[B_ROWS], b_iw0[B_ROWS];
    bool b_valid[B_ROWS];
    #pragma unroll
    for (int i = 0; i < B_ROWS; i++) {
        const int col = n0 + row0 + ROWS_PER_PASS * i;
        b_valid[i] = col < g.N;
        const int c = b_valid[i] ? col : 0;
        const int img = c / P, p = c - img * P, oh = p / g.Wo, ow = p - oh * g.Wo;
        b_ih0[i] = oh * g.stride - g.pad_h;
        b_iw0[i] = ow * g.stride - g.pad_w;
        b_base[i] = img * g.H * g.W * g.C_ch;
    }
    const E *a_src = gA + (size_t)min(m0 + row0, g.M - 1) * g.K + part;

    /* the slice the next load_slice call copies: k0 = tap C + c0, tap = kh KW + kw */
    int load_k0 = 0, load_c0 = 0, load_kh = 0, load_kw = 0;
    auto load_slice = [&](int stage) {
        E *As = smem + stage * STAGE, *Bs = As + A_ELEMS;
        #pragma unroll
        for (int i = 0; i < A_ROWS; i++) {
            const int row = row0 + ROWS_PER_PASS * i;
            const bool ok = m0 + row < g.M;
            cp_async16(As + row * ROW + part,
                       ok ? a_src + (size_t)ROWS_PER_PASS * i * g.K + load_k0 : gA, ok);
        }
        #pragma unroll
        for (int i = 0; i < B_ROWS; i++) {
            const int ih = b_ih0[i] + load_kh, iw = b_iw0[i] + load_kw;
            const bool ok = b_valid[i] && (unsigned)ih < (unsigned)g.H && (unsigned)iw < (unsigned)g.W;
            const E *src = ok ? gB + b_base[i] + (ih * g.W + iw) * g.C_ch + load_c0 + part : gB;
            cp_async16(Bs + (row0 + ROWS_PER_PASS * i) * ROW + part, src, ok);
        }
        load_k0 += BK;
        load_c0 += BK;
        if (load_c0 == g.C_ch) {
            load_c0 = 0;
            if (++load_kw == g.KW) load_kw = 0, load_kh++;
        }
    };

    float acc[MT][NT][4] = {};
    const int wm0 = (warp >> 2) * (BM / 2), wn0 = (warp & 3) * (BN / 4);

    /* Fragments (PTX ISA, mma.m16n8k16 .bf16; m16n8k8 .tf32 the same with k halved): A
     * registers 0..3 = rows 0-7 / 8-15 x the first 16 bytes of k, then the same x the next 16,
     * which ldmatrix.x4 delivers when lanes 0-15 point at rows 0-15 (k 0) and lanes 16-31 at
     * rows 0-15 (k EPV). A B fragment is 8 columns x k's two 16-byte halves: one x4 loads two
     * of them (lanes 0-7: columns 0-7 at k 0, 8-15: at k EPV, 16-31: columns 8-15). */
    auto multiply_slice = [&](int stage) {
        const E *As = smem + stage * STAGE, *Bs = As + A_ELEMS;
        #pragma unroll
        for (int ks = 0; ks < BK; ks += KSTEP) {
            uint32_t a[MT][4], b[NT][2];
            #pragma unroll
            for (int mt = 0; mt < MT; mt++)
                ldmatrix_x4(a[mt], As + (wm0 + mt * 16 + (lane & 15)) * ROW + ks + (lane >> 4) * EPV);
            #pragma unroll
            for (int np = 0; np < NT / 2; np++) {
                uint32_t r[4];
                ldmatrix_x4(r, Bs + (wn0 + np * 16 + (lane & 7) + (lane >> 4) * 8) * ROW + ks +
                                   ((lane >> 3) & 1) * EPV);
                b[2 * np][0] = r[0];
                b[2 * np][1] = r[1];
                b[2 * np + 1][0] = r[2];
                b[2 * np + 1][1] = r[3];
            }
            #pragma unroll
            for (int mt = 0; mt < MT; mt++)
                #pragma unroll
                for (int nt = 0; nt < NT; nt++) mma_step<E>(acc[mt][nt], a[mt], b[nt]);
        }
    };

    /* the pipeline: slices kt + 1 .. kt + STAGES - 1 in flight while kt is multiplied */
    for (int s = 0; s < STAGES - 1; s++) {
        if (s < tiles) load_slice(s);
        cp_async_commit(); /* an empty group keeps the count uniform */
    }
    for (int kt = 0; kt < tiles; kt++) {
        cp_async_wait<STAGES - 2>(); /* this thread's copies of slice kt have landed */
        __syncthreads();             /* everyone's have; and slice kt - 1 is multiplied */
        const int next = kt + STAGES - 1;
        if (next < tiles) load_slice(next % STAGES); /* overwrites slice kt - 1 */
        cp_async_commit();
        multiply_slice(kt % STAGES);
    }
    cp_async_wait<0>();

    /* Epilogue: C element (row gq or gq + 8, columns 2 tq and 2 tq + 1) of each mma tile, into
     * the NCHW output; the column pair is one float2 when both lie in one image (P even) and
     * side by side there (out_step 1). */
    const int gq = lane >> 2, tq = lane & 3;
    const int out_plane = g.out_H * g.out_W;
    const bool pairs = g.out_step == 1 && (P & 1) == 0 && ((uintptr_t)g.C & 7) == 0;
    /* the output offset of GEMM column col, row 0 */
    auto out_at = [&](int col) -> size_t {
        const int img = col / P, p = col - img * P;
        int q = p;
        if (g.out_step != 1) {
            const int oh = p / g.Wo, ow = p - oh * g.Wo;
            q = (oh * g.out_step + g.out_ph) * g.out_W + ow * g.out_step + g.out_pw;
        }
        return (size_t)img * g.M * out_plane + q;
    };
    #pragma unroll
    for (int nt = 0; nt < NT; nt++) {
        const int col = n0 + wn0 + nt * 8 + 2 * tq;
        if (col >= g.N) continue;
        float *base = g.C + out_at(col);
        float *base1 = !pairs && col + 1 < g.N ? g.C + out_at(col + 1) : NULL;
        #pragma unroll
        for (int mt = 0; mt < MT; mt++) {
            #pragma unroll
            for (int r8 = 0; r8 < 2; r8++) {
                const int row = m0 + wm0 + mt * 16 + gq + 8 * r8;
                if (row >= g.M) continue;
                float v0 = acc[mt][nt][2 * r8], v1 = acc[mt][nt][2 * r8 + 1];
                if (g.bias) {
                    const float b = __ldg(g.bias + row);
                    v0 += b;
                    v1 += b;
                }
                if (g.bn.running_mean) { /* batchnorm.cu's eval expression, on the stored value */
                    const float scale = (g.bn.gamma ? g.bn.gamma[row] : 1.0f) /
                                        sqrtf(g.bn.running_var[row] + g.bn.eps);
                    const float shift = g.bn.beta ? g.bn.beta[row] : 0.0f;
                    const float m = g.bn.running_mean[row];
                    v0 = (v0 - m) * scale + shift;
                    v1 = (v1 - m) * scale + shift;
                }
                float *dst = base + (size_t)row * out_plane;
                if (pairs) {
                    float2 *d2 = reinterpret_cast<float2 *>(dst);
                    if (g.accumulate) {
                        const float2 o = *d2;
                        v0 += o.x;
                        v1 += o.y;
                    }
                    *d2 = make_float2(v0, v1);
                } else {
                    dst[0] = g.accumulate ? dst[0] + v0 : v0;
                    if (base1) { /* the next column: next image, or not beside it */
                        float *d1 = base1 + (size_t)row * out_plane;
                        *d1 = g.accumulate ? *d1 + v1 : v1;
                    }
                }
            }
        }
    }
}

/* ---- wgrad: dW (C_out, (t, ci)) = dyh^T (C_out, pixels) x xh gathered (pixels, (t, ci)) ------ */

struct nh_wgrad {
    const void *dy;       /* channels-last dout of the chunk (images, Ho, Wo, C_out), bf16 / TF32 */
    const void *x;        /* channels-last x of the chunk (images, H, W, C_in), the same type */
    float *dw;            /* (C_out, C_in, KH, KW): += here, or split z's partial at z stride */
    int64_t split_stride; /* 0: add into dw */
    int M, N, K;          /* M = C_out, N = KK C_in, K = images Ho Wo */
    int k_per_split;      /* a multiple of the slice (nh_plan.wgrad_bk) */
    int C_in, H, W, P, Wo, KW, KK, stride, pad;
    snn_fast_divisor by_P, by_Wo;
};

/*
 * One BM x 128 tile of dW over the pixels of split blockIdx.z. Both slices are pixel-major: a
 * slice row is one pixel, along which dout's C_out channels (A) are contiguous, and so are the
 * 8 input channels ci .. ci + 7 of the pixel tap t reads, for the 8 columns (t, ci .. ci + 7) a
 * thread copies (B; 4 channels in TF32). In bf16, ldmatrix.trans turns the pixel-major 8x8
 * blocks into the row-major A and column-major B fragments mma wants; in TF32 each fragment
 * element is one 4-byte shared-memory load (rows LDA = BM + 8 and 136 words apart: the 32
 * lanes' loads, rows tq x columns gq, fall in 32 different banks).
 */
template <typename E, int BM, int BK, int STAGES>
static __global__ void __launch_bounds__(NH_THREADS, 2) nhwc_wgrad_kernel(nh_wgrad g)
{
    constexpr int EPV = 16 / (int)sizeof(E);       /* elements per 16-byte copy */
    constexpr int LDA = BM + 8, LDB = NH_BN + 8;   /* 8 elements of padding a row */
    constexpr int A_ELEMS = BK * LDA, STAGE = A_ELEMS + BK * LDB;
    constexpr int MT = BM / 32, NT = 4, KSTEP = 2 * EPV;
    constexpr int A_PARTS = BM / EPV;              /* 16-byte parts in an A row */
    constexpr int B_PARTS = NH_BN / EPV, B_ROWS_PER_PASS = NH_THREADS / B_PARTS;
    constexpr int A_COPIES = BK * A_PARTS / NH_THREADS, B_COPIES = BK / B_ROWS_PER_PASS;
    extern __shared__ __align__(16) unsigned char smem_bytes[];
    E *smem = reinterpret_cast<E *>(smem_bytes);
    const E *gdy = static_cast<const E *>(g.dy), *gx = static_cast<const E *>(g.x);

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * NH_BN;
    const int k_begin = blockIdx.z * g.k_per_split;
    const int k_end = min(g.K, k_begin + g.k_per_split);
    const int tiles = (k_end - k_begin + BK - 1) / BK;

    /* B: this thread's EPV columns n0 + EPV (tid % B_PARTS) .. are channels b_ci .. of one tap */
    const int bn = n0 + EPV * (tid % B_PARTS);
    const bool bn_valid = bn < g.N;
    const int tap = bn_valid ? bn / g.C_in : 0;
    const int b_ci = bn_valid ? bn - tap * g.C_in : 0;
    const int b_kh = tap / g.KW, b_kw = tap - b_kh * g.KW;

    auto load_slice = [&](int kt, int stage) {
        E *As = smem + stage * STAGE, *Bs = As + A_ELEMS;
        const int k0 = k_begin + kt * BK;
        #pragma unroll
        for (int i = 0; i < A_COPIES; i++) {
            const int c = tid + NH_THREADS * i, r = c / A_PARTS, am = EPV * (c % A_PARTS);
            const int j = k0 + r;
            const bool ok = j < k_end && m0 + am < g.M;
            const E *src = ok ? gdy + (size_t)j * g.M + m0 + am : gdy;
            cp_async16(As + r * LDA + am, src, ok);
        }
        #pragma unroll
        for (int i = 0; i < B_COPIES; i++) {
            const int r = tid / B_PARTS + B_ROWS_PER_PASS * i, j = k0 + r;
            bool ok = j < k_end && bn_valid;
            const int jj = ok ? j : 0;
            const int img = snn_fast_div(jj, g.by_P), p = jj - img * g.P;
            const int oh = snn_fast_div(p, g.by_Wo), ow = p - oh * g.Wo;
            const int ih = oh * g.stride - g.pad + b_kh, iw = ow * g.stride - g.pad + b_kw;
            ok = ok && (unsigned)ih < (unsigned)g.H && (unsigned)iw < (unsigned)g.W;
            const E *src = ok ? gx + ((img * g.H + ih) * g.W + iw) * g.C_in + b_ci : gx;
            cp_async16(Bs + r * LDB + EPV * (tid % B_PARTS), src, ok);
        }
    };

    float acc[MT][NT][4] = {};
    const int wm0 = (warp >> 2) * (BM / 2), wn0 = (warp & 3) * 32;

    /* ldmatrix.trans on pixel-major blocks: for A, lanes 8 i .. 8 i + 7 point at pixels
     * (i / 2) 8 .. + 7 of channels (i % 2) 8 ..: registers 0..3 = rows 0-7 / 8-15 x k 0-7, then
     * x k 8-15; for B, at pixels (i % 2) 8 .. of columns (i / 2) 8 ..: two B fragments. */
    const int gq = lane >> 2, tq = lane & 3; /* the mma fragment coordinates */
    auto multiply_slice = [&](int stage) {
        const E *As = smem + stage * STAGE, *Bs = As + A_ELEMS;
        #pragma unroll
        for (int ks = 0; ks < BK; ks += KSTEP) {
            uint32_t a[MT][4], b[NT][2];
            if constexpr (sizeof(E) == 2) {
                #pragma unroll
                for (int mt = 0; mt < MT; mt++)
                    ldmatrix_x4_trans(a[mt], As + (ks + (lane & 7) + (lane >> 4) * 8) * LDA + wm0 +
                                                 mt * 16 + ((lane >> 3) & 1) * 8);
                #pragma unroll
                for (int np = 0; np < NT / 2; np++) {
                    uint32_t r[4];
                    ldmatrix_x4_trans(r, Bs + (ks + (lane & 7) + ((lane >> 3) & 1) * 8) * LDB +
                                             wn0 + np * 16 + (lane >> 4) * 8);
                    b[2 * np][0] = r[0];
                    b[2 * np][1] = r[1];
                    b[2 * np + 1][0] = r[2];
                    b[2 * np + 1][1] = r[3];
                }
            } else { /* TF32 (PTX ISA, m16n8k8 .tf32): A (row gq / gq + 8, k tq / tq + 4), B (k tq / tq + 4, column gq) */
                const uint32_t *Aw = reinterpret_cast<const uint32_t *>(As);
                const uint32_t *Bw = reinterpret_cast<const uint32_t *>(Bs);
                #pragma unroll
                for (int mt = 0; mt < MT; mt++) {
                    const int m = wm0 + mt * 16 + gq;
                    a[mt][0] = Aw[(ks + tq) * LDA + m];
                    a[mt][1] = Aw[(ks + tq) * LDA + m + 8];
                    a[mt][2] = Aw[(ks + tq + 4) * LDA + m];
                    a[mt][3] = Aw[(ks + tq + 4) * LDA + m + 8];
                }
                #pragma unroll
                for (int nt = 0; nt < NT; nt++) {
                    const int n = wn0 + nt * 8 + gq;
                    b[nt][0] = Bw[(ks + tq) * LDB + n];
                    b[nt][1] = Bw[(ks + tq + 4) * LDB + n];
                }
            }
            #pragma unroll
            for (int mt = 0; mt < MT; mt++)
                #pragma unroll
                for (int nt = 0; nt < NT; nt++) mma_step<E>(acc[mt][nt], a[mt], b[nt]);
        }
    };

    for (int s = 0; s < STAGES - 1; s++) {
        if (s < tiles) load_slice(s, s);
        cp_async_commit();
    }
    for (int kt = 0; kt < tiles; kt++) {
        cp_async_wait<STAGES - 2>();
        __syncthreads();
        const int next = kt + STAGES - 1;
        if (next < tiles) load_slice(next, next % STAGES);
        cp_async_commit();
        multiply_slice(kt % STAGES);
    }
    cp_async_wait<0>();

    /* Epilogue: column (t, ci) of row co is dW[co, ci, t] */
    float *out = g.dw + (size_t)blockIdx.z * g.split_stride;
    #pragma unroll
    for (int nt = 0; nt < NT; nt++) {
        #pragma unroll
        for (int half = 0; half < 2; half++) {
            const int col = n0 + wn0 + nt * 8 + 2 * tq + half;
            if (col >= g.N) continue;
            const int t = col / g.C_in, ci = col - t * g.C_in, offset = ci * g.KK + t;
            #pragma unroll
            for (int mt = 0; mt < MT; mt++) {
                #pragma unroll
                for (int r8 = 0; r8 < 2; r8++) {
                    const int row = m0 + wm0 + mt * 16 + gq + 8 * r8;
                    if (row >= g.M) continue;
                    const float v = acc[mt][nt][2 * r8 + half];
                    float *dst = out + (size_t)row * g.N + offset;
                    *dst = g.split_stride == 0 ? *dst + v : v;
                }
            }
        }
    }
}

/* ---- the copies ---------------------------------------------------------------------------- */

/* dst (images, HW, C) = src (images, C, HW) fp32 as operands (to_operand: bf16, or fp32 rounded
 * to TF32). A block moves a 32 x 32 tile of (channels, positions) of one image through shared
 * memory, so that the reads run along positions and the writes along channels (both
 * coalesced). Traffic: 4 B read and 2 B (bf16) or 4 B (TF32) written per element. */
template <typename E>
static __global__ void nchw_to_nhwc_kernel(E *__restrict__ dst, const float *__restrict__ src,
                                           int C, int HW)
{
    __shared__ float tile[32][33]; /* 33: a column walk hits 32 different banks */
    const int n = blockIdx.z, c0 = blockIdx.y * 32, p0 = blockIdx.x * 32;
    const int tx = threadIdx.x, ty = threadIdx.y;
    const float *s = src + (size_t)n * C * HW;
    #pragma unroll
    for (int i = ty; i < 32; i += 8) {
        const int c = c0 + i, p = p0 + tx;
        tile[i][tx] = c < C && p < HW ? s[(size_t)c * HW + p] : 0.0f;
    }
    __syncthreads();
    E *d = dst + (size_t)n * HW * C;
    #pragma unroll
    for (int i = ty; i < 32; i += 8) {
        const int p = p0 + i, c = c0 + tx;
        if (p < HW && c < C) d[(size_t)p * C + c] = to_operand(tile[tx][i], (E *)nullptr);
    }
}

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
 * sums. */
struct nh_plan {
    int G;                /* images per chunk */
    int wgrad_splits;     /* S */
    int wgrad_bk;         /* pixels per wgrad slice: 64 (bf16) or 32 (TF32), 128 bytes a row */
    size_t weight_bytes, x_bytes, dy_bytes, partial_floats, bytes;
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
    /* wgrad splits, as conv2d_igemm.cu: two blocks for every SM, slices of at least 8 K tiles,
     * partials within budget */
    const int64_t dw = (int64_t)d->C_out * CK, bm = d->C_out > 64 ? 128 : 64;
    const int64_t tiles_mn = ((d->C_out + bm - 1) / bm) * ((CK + NH_BN - 1) / NH_BN);
    const int64_t k_tiles = ((int64_t)plan.G * P + plan.wgrad_bk - 1) / plan.wgrad_bk;
    int64_t S = (2 * (int64_t)snn_cuda_sm_count() + tiles_mn - 1) / tiles_mn;
    S = std::min(S, std::max<int64_t>(1, k_tiles / 8));
    S = std::min(S, std::max<int64_t>(1, (int64_t)(NH_PARTIAL_BUDGET / sizeof(float)) / dw));
    plan.wgrad_splits = (int)std::max<int64_t>(1, std::min<int64_t>(S, 65535));
    plan.partial_floats = plan.wgrad_splits > 1 ? (size_t)(plan.wgrad_splits * dw) : 0;
    plan.bytes = plan.weight_bytes + plan.x_bytes + plan.dy_bytes +
                 plan.partial_floats * sizeof(float);
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

extern "C" size_t snn_conv2d_nhwc_workspace_bytes_cuda(const snn_conv2d_dims *d)
{
    return make_nh_plan(d, operand_bytes()).bytes;
}

template <typename E>
static void to_nhwc(E *dst, const float *src, int images, int C, int HW)
{
    const dim3 grid((unsigned)((HW + 31) / 32), (unsigned)((C + 31) / 32), (unsigned)images);
    nchw_to_nhwc_kernel<E><<<grid, dim3(32, 8), 0, snn_cuda_stream()>>>(dst, src, C, HW);
    const cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess)
        snn_cuda_launch_fail("nchw_to_nhwc_kernel", __FILE__, __LINE__, err,
                             grid.x * grid.y * grid.z, 256);
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
 * asked for once per kernel (`raised` remembers). */
template <typename Args>
static void launch_tiles(void (*kernel)(Args), const char *name, const Args &args, dim3 grid,
                         size_t smem, bool *raised)
{
    if (!*raised) {
        SNN_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            (int)smem));
        *raised = true;
    }
    kernel<<<grid, NH_THREADS, smem, snn_cuda_stream()>>>(args);
    const cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess)
        snn_cuda_launch_fail(name, __FILE__, __LINE__, err, grid.x * grid.y * grid.z, NH_THREADS);
}

/* The gather kernel's tile for a GEMM: 128 x 128 (128-byte slices where the channels allow:
 * half the barriers and loader arithmetic per multiply-add), or 64 x 256 when M <= 64 (a 64-row
 * tile keeps every row busy on the 64-channel layers; its 256 columns keep the warp tile at
 * 32 x 64). BK in elements: 64 bf16 or 32 TF32 a slice (128 bytes), else 32 / 16 (64 bytes).
 * Shared memory: STAGES (BM + BN) (BK bytes + 16): 110.6 KB (128 x 128, 128-byte slices, 3
 * stages) or 102.4 KB (64 x 256, 64-byte slices, 4 stages): two blocks an SM. */
template <typename E, int BM, int BN, int BK, int STAGES>
static void launch_gather_tile(const nh_gather &g)
{
    static bool raised;
    const dim3 grid((unsigned)((g.N + BN - 1) / BN), (unsigned)((g.M + BM - 1) / BM));
    const size_t smem = (size_t)STAGES * (BM + BN) * (BK * sizeof(E) + NH_PAD_BYTES);
    launch_tiles(nhwc_gather_kernel<E, BM, BN, BK, STAGES>, "nhwc_gather_kernel", g, grid, smem,
                 &raised);
}

template <typename E>
static void launch_gather(const nh_gather &g)
{
    constexpr int EPV = 16 / (int)sizeof(E);     /* 8 bf16 or 4 TF32 in 16 bytes */
    if (g.M <= 64)
        launch_gather_tile<E, 64, 256, 4 * EPV, 4>(g);
    else if (g.C_ch % (8 * EPV) == 0)
        launch_gather_tile<E, 128, 128, 8 * EPV, 3>(g);
    else
        launch_gather_tile<E, 128, 128, 4 * EPV, 4>(g);
}

/* wgrad's tile: BM x 128 of dW, 128 bytes of pixels a slice (64 bf16 / 32 TF32), 3 slices in
 * flight: 80 KB (BM 64) or 104 KB (BM 128) of shared memory, two blocks an SM. k_per_split
 * must be a multiple of the slice (nh_plan.wgrad_bk). */
template <typename E>
static void launch_wgrad(const nh_wgrad &g, int splits)
{
    constexpr int BK = 128 / (int)sizeof(E);
    static bool raised[2];
    const bool big = g.M > 64;
    const int bm = big ? 128 : 64;
    const dim3 grid((unsigned)((g.N + NH_BN - 1) / NH_BN), (unsigned)((g.M + bm - 1) / bm),
                    (unsigned)splits);
    const size_t smem = (size_t)3 * BK * ((bm + 8) + (NH_BN + 8)) * sizeof(E);
    launch_tiles(big ? nhwc_wgrad_kernel<E, 128, BK, 3> : nhwc_wgrad_kernel<E, 64, BK, 3>,
                 "nhwc_wgrad_kernel", g, grid, smem, &raised[big]);
}

template <typename E>
static void forward_impl(float *out, const float *x, const float *weight, const float *bias,
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
    g.KW = d->KW;
    g.stride = d->stride;
    g.pad_h = g.pad_w = d->pad;
    g.out_step = 1;
    g.out_H = d->H_out;
    g.out_W = d->W_out;
    for (int n0 = 0; n0 < d->N; n0 += plan.G) {
        const int chunk = std::min(plan.G, d->N - n0);
        to_nhwc<E>(xh, x + (int64_t)n0 * d->C_in * HW, chunk, d->C_in, HW);
        g.C = out + (int64_t)n0 * d->C_out * P;
        g.N = chunk * P;
        launch_gather<E>(g);
    }
}

extern "C" void snn_conv2d_nhwc_forward_cuda(float *out, const float *x, const float *weight,
                                             const float *bias, const snn_bn_eval *bn,
                                             const snn_conv2d_dims *d, void *workspace)
{
    if (d->N <= 0) return;
    SNN_ASSERT(snn_conv2d_nhwc_supports(d));
    if (operand_bytes() == 4) forward_impl<float>(out, x, weight, bias, bn, d, workspace);
    else forward_impl<bf16>(out, x, weight, bias, bn, d, workspace);
}

template <typename E>
static void backward_impl(float *dx, float *dweight, const float *dout, const float *x,
                          const float *weight, const snn_conv2d_dims *d, void *workspace)
{
    const nh_plan plan = make_nh_plan(d, (int)sizeof(E));
    char *ws = (char *)workspace;
    E *wd = (E *)ws;
    E *xh = (E *)(ws + plan.weight_bytes);
    E *dyh = (E *)(ws + plan.weight_bytes + plan.x_bytes);
    float *partial = (float *)(ws + plan.weight_bytes + plan.x_bytes + plan.dy_bytes);
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
    nh_gather gd = {};
    gd.B = dyh;
    gd.accumulate = 1;
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
    gw.x = xh;
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

    for (int n0 = 0; n0 < d->N; n0 += plan.G) {
        const int chunk = std::min(plan.G, d->N - n0);
        to_nhwc<E>(dyh, dout + (int64_t)n0 * d->C_out * P, chunk, d->C_out, P);
        for (int k = 0; dx && k < s * s; k++) {
            const dgrad_phase *f = &phases[k];
            if (f->nh == 0 || f->nw == 0 || f->Hp == 0 || f->Wp == 0) continue;
            gd.A = phase_w[k];
            gd.K = f->nh * f->nw * d->C_out;
            gd.Ho = f->Hp;
            gd.Wo = f->Wp;
            gd.KW = f->nw;
            gd.pad_h = f->pad_h;
            gd.pad_w = f->pad_w;
            gd.out_ph = k / s;
            gd.out_pw = k % s;
            gd.C = dx + (int64_t)n0 * d->C_in * HW;
            gd.N = chunk * f->Hp * f->Wp;
            launch_gather<E>(gd);
        }
        if (dweight) {
            to_nhwc<E>(xh, x + (int64_t)n0 * d->C_in * HW, chunk, d->C_in, HW);
            gw.K = chunk * P;
            const int tiles = (gw.K + plan.wgrad_bk - 1) / plan.wgrad_bk;
            const int splits = std::min(plan.wgrad_splits, tiles);
            gw.k_per_split = (tiles + splits - 1) / splits * plan.wgrad_bk;
            const int used = (gw.K + gw.k_per_split - 1) / gw.k_per_split; /* non-empty splits */
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
    }
}

extern "C" void snn_conv2d_nhwc_backward_cuda(float *dx, float *dweight, const float *dout,
                                              const float *x, const float *weight,
                                              const snn_conv2d_dims *d, void *workspace)
{
    if (d->N <= 0 || (!dx && !dweight)) return;
    SNN_ASSERT(snn_conv2d_nhwc_supports(d));
    if (operand_bytes() == 4) backward_impl<float>(dx, dweight, dout, x, weight, d, workspace);
    else backward_impl<bf16>(dx, dweight, dout, x, weight, d, workspace);
}
