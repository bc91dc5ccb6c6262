/*
 * conv2d_nhwc_tiles.cuh - the two GEMM kernels of the channels-last convolution
 * (conv2d_nhwc.cu, the only file that includes this one; its comment gives the products, the
 * copies they read and the rounding):
 *
 *   nhwc_gather_kernel   C (M, N) = A (M, K) x B gathered from a channels-last tensor: the
 *                        forward, and the input gradient (one residue class of dx at a time)
 *   nhwc_wgrad_kernel    dW (C_out, (t, ci)) = dout^T x the input gathered per tap, split along
 *                        the pixels
 *
 * both templates over the operand type E (bf16, or fp32 rounded to TF32).
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
 *   gather, halo variant                   the same tiles; STAGES slices of A and two halo
 *                                          buffers (one when the channels are one group):
 *                                          70-113 KB (conv2d_nhwc.cu, launch_gather)
 *   wgrad                                  BM x 128 with BM = 128 (64 when M <= 64), 128 bytes
 *                                          of pixels a slice, 3 stages: 104 / 80 KB
 *
 * so two blocks fit an SM. Longer slices halve the barriers and the loader's address
 * arithmetic per multiply-add, and the loader walks the taps instead of dividing for them.
 * Shared memory layout per stage:
 *
 *   gather kernel  As[BM][BK + 16 B]  weight rows, k contiguous    ldmatrix  -> A fragments
 *                  Bs[BN][BK + 16 B]  one output position a row    ldmatrix  -> B fragments
 *     (halo)       Hs[slots][BK + 16 B] one input pixel a row, after the STAGES A slices
 *   wgrad kernel   As[BK][BM + 8]     one pixel a row, C_out along  ldmatrix.trans (bf16) or
 *                  Bs[BK][128 + 8]    one pixel a row, (t, ci) along 4-byte loads (TF32)
 *
 * The padding puts the 8 row addresses of one ldmatrix in 8 different 16-byte bank groups
 * (rows 80, 144, 272 bytes apart: no conflicts) and keeps every row 16-byte aligned for
 * cp.async; in the TF32 wgrad, rows 8 words past a multiple of 32 put the 32 lanes' loads in 32
 * banks.
 *
 */
#ifndef SNN_CONV2D_NHWC_TILES_CUH
#define SNN_CONV2D_NHWC_TILES_CUH

#include <cuda_bf16.h>
#include <stdint.h>

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/kernels.h"
#include "mma_sync.cuh"

typedef __nv_bfloat16 bf16;

#define NH_THREADS 256
#define NH_BN 128
#define NH_CHANNEL_MULTIPLE 32                 /* C_in and C_out: whole 32-channel slices */
#define NH_PAD_BYTES 16                        /* padding per shared-memory row of the gather */

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

/* ---- forward and dgrad: C (M, N) = A (M, K) x B gathered from a channels-last tensor ------- */

/* The halo variant of the gather kernel (HALO = true: stride 1, the tile's BN output positions
 * are whole output rows). A tile covers `rows` rows of one image, or `images` whole planes;
 * its inputs are the R = rows + KH - 1 input rows those windows touch, Wp = Wo + KW - 1
 * columns wide (padding included, stored as zeros): `slots` = images R Wp pixels. */
struct nh_halo {
    int rows, images, R, Wp, slots;
};

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
    int KH;            /* the window's rows (K = KH KW C_ch) */
    nh_halo halo;      /* the halo variant's geometry (launch_gather sets it) */
};

/*
 * One BM x BN tile of C, K walked in slices of BK (32 or 64: one tap's BK consecutive channels,
 * so C % BK == 0), STAGES slices in flight. Loader roles: thread tid copies 16-byte part
 * (tid % PARTS) of slice rows tid / PARTS + ROWS_PER_PASS i; A rows are output channels.
 *
 * HALO = false: B rows are output positions, whose source is one run of 2 BK bytes of the
 * input pixel the slice's tap reads; slices go tap by tap, the channels of a tap inner. The
 * tap is walked, not divided for: (tap, first channel) advance by BK a slice. Each input pixel
 * is copied from L2 once for every tap that reads it (nine times for 3x3).
 *
 * HALO = true (stride 1, the tile is whole output rows: nh_halo): slices go channel group by
 * channel group, the KK taps inner. At a group's first tap the loader also copies the group's
 * halo, the tile's input pixels x BK channels, into one of two halo buffers; the KK slices of
 * the group then read B from it, the rows of tap (kh, kw) being those of tap (0, 0) moved by
 * kh Wp + kw. So an input pixel crosses L2 about (R Wp) / (rows Wo) times, not KK times:
 * 1.3x for layer1's 8 rows of 32 (against 9x), and per output tile only the weights still
 * stream per tap. A buffer is overwritten STAGES - 1 slices ahead of use, after the KK slices
 * of the group before last: safe when KK >= STAGES - 1 (launch_gather checks).
 */
template <typename E, int BM, int BN, int BK, int STAGES, bool HALO>
static __global__ void __launch_bounds__(NH_THREADS, 2) nhwc_gather_kernel(nh_gather g)
{
    constexpr int EPV = 16 / (int)sizeof(E);   /* elements per 16-byte copy */
    constexpr int ROW = BK + NH_PAD_BYTES / (int)sizeof(E);
    constexpr int A_ELEMS = BM * ROW, STAGE = A_ELEMS + (HALO ? 0 : BN * ROW);
    constexpr int MT = BM / 32, NT = BN / 32;   /* warp tile (BM/2) x (BN/4) */
    constexpr int PARTS = BK / EPV, ROWS_PER_PASS = NH_THREADS / PARTS;
    constexpr int A_ROWS = BM / ROWS_PER_PASS, B_ROWS = BN / ROWS_PER_PASS; /* per thread */
    constexpr int KSTEP = 2 * EPV;              /* k of one mma: 32 bytes */
    static_assert(BM % ROWS_PER_PASS == 0 && BN % ROWS_PER_PASS == 0, "tile rows per pass");
    extern __shared__ __align__(16) unsigned char smem_bytes[];
    E *smem = reinterpret_cast<E *>(smem_bytes);
    E *halo = smem + STAGES * STAGE; /* HALO: two buffers of g.halo.slots rows */
    const E *gA = static_cast<const E *>(g.A), *gB = static_cast<const E *>(g.B);

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    const int P = g.Ho * g.Wo, part = EPV * (tid % PARTS), row0 = tid / PARTS;
    const int tiles = g.K / BK;
    const int wm0 = (warp >> 2) * (BM / 2), wn0 = (warp & 3) * (BN / 4);

    /* HALO = false: this thread's B rows (output positions): image base, top-left input pixel */
    int b_base[B_ROWS], b_ih0[B_ROWS], b_iw0[B_ROWS];
    bool b_valid[B_ROWS];
    /* HALO = true: the tile's first image and output row; the halo pixel that each of this
     * lane's B fragment rows reads at tap (0, 0) */
    int tile_img = 0, tile_oh0 = 0, lane_slot[NT / 2];
    if constexpr (HALO) {
        tile_img = n0 / P;
        tile_oh0 = (n0 - tile_img * P) / g.Wo;
        const int per_image = g.halo.rows * g.Wo; /* positions of one image in the tile */
        #pragma unroll
        for (int np = 0; np < NT / 2; np++) {
            const int q = wn0 + np * 16 + (lane & 7) + (lane >> 4) * 8;
            const int il = q / per_image, r = q - il * per_image, oh = r / g.Wo;
            lane_slot[np] = (il * g.halo.R + oh) * g.halo.Wp + r - oh * g.Wo;
        }
    } else {
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
    }
    const E *a_src = gA + (size_t)min(m0 + row0, g.M - 1) * g.K + part;

    /* HALO: the halo of channels c0 .. c0 + BK - 1 into buffer buf, one 16-byte part a copy;
     * padding pixels and images past the chunk are zero-filled */
    auto load_halo = [&](int c0, int buf) {
        E *dst = halo + buf * g.halo.slots * ROW;
        const int per_image = g.halo.R * g.halo.Wp;
        for (int c = tid; c < g.halo.slots * PARTS; c += NH_THREADS) {
            const int slot = c / PARTS, at = EPV * (c % PARTS);
            const int il = slot / per_image, rest = slot - il * per_image;
            const int r = rest / g.halo.Wp, col = rest - r * g.halo.Wp;
            const int img = tile_img + il, ih = tile_oh0 - g.pad_h + r, iw = col - g.pad_w;
            const bool ok = img * P < g.N && (unsigned)ih < (unsigned)g.H &&
                            (unsigned)iw < (unsigned)g.W;
            const E *src = ok ? gB + ((img * g.H + ih) * g.W + iw) * g.C_ch + c0 + at : gB;
            cp_async16(dst + slot * ROW + at, src, ok);
        }
    };

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
        if constexpr (HALO) {
            if (load_kh == 0 && load_kw == 0) load_halo(load_c0, (load_c0 / BK) & 1);
            if (++load_kw == g.KW) {
                load_kw = 0;
                if (++load_kh == g.KH) load_kh = 0, load_c0 += BK;
            }
            load_k0 = (load_kh * g.KW + load_kw) * g.C_ch + load_c0;
        } else {
            #pragma unroll
            for (int i = 0; i < B_ROWS; i++) {
                const int ih = b_ih0[i] + load_kh, iw = b_iw0[i] + load_kw;
                const bool ok = b_valid[i] && (unsigned)ih < (unsigned)g.H &&
                                (unsigned)iw < (unsigned)g.W;
                const E *src = ok ? gB + b_base[i] + (ih * g.W + iw) * g.C_ch + load_c0 + part : gB;
                cp_async16(Bs + (row0 + ROWS_PER_PASS * i) * ROW + part, src, ok);
            }
            load_k0 += BK;
            load_c0 += BK;
            if (load_c0 == g.C_ch) {
                load_c0 = 0;
                if (++load_kw == g.KW) load_kw = 0, load_kh++;
            }
        }
    };

    float acc[MT][NT][4] = {};

    /* Fragments (PTX ISA, mma.m16n8k16 .bf16; m16n8k8 .tf32 the same with k halved): A
     * registers 0..3 = rows 0-7 / 8-15 x the first 16 bytes of k, then the same x the next 16,
     * which ldmatrix.x4 delivers when lanes 0-15 point at rows 0-15 (k 0) and lanes 16-31 at
     * rows 0-15 (k EPV). A B fragment is 8 columns x k's two 16-byte halves: one x4 loads two
     * of them (lanes 0-7: columns 0-7 at k 0, 8-15: at k EPV, 16-31: columns 8-15). HALO: the
     * slice multiplied is tap (mul_kh, mul_kw) of channel group mul_group. */
    int mul_kh = 0, mul_kw = 0, mul_group = 0;
    auto multiply_slice = [&](int stage) {
        const E *As = smem + stage * STAGE, *Bs = As + A_ELEMS;
        const E *Hs = halo + (mul_group & 1) * g.halo.slots * ROW;
        const int tap_shift = mul_kh * g.halo.Wp + mul_kw;
        #pragma unroll
        for (int ks = 0; ks < BK; ks += KSTEP) {
            uint32_t a[MT][4], b[NT][2];
            #pragma unroll
            for (int mt = 0; mt < MT; mt++)
                ldmatrix_x4(a[mt], As + (wm0 + mt * 16 + (lane & 15)) * ROW + ks + (lane >> 4) * EPV);
            #pragma unroll
            for (int np = 0; np < NT / 2; np++) {
                uint32_t r[4];
                const int k = ks + ((lane >> 3) & 1) * EPV;
                if constexpr (HALO)
                    ldmatrix_x4(r, Hs + (lane_slot[np] + tap_shift) * ROW + k);
                else
                    ldmatrix_x4(r, Bs + (wn0 + np * 16 + (lane & 7) + (lane >> 4) * 8) * ROW + k);
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
        if (HALO && ++mul_kw == g.KW) {
            mul_kw = 0;
            if (++mul_kh == g.KH) mul_kh = 0, mul_group++;
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
     * side by side there (out_step 1). dgrad adds to dx: a column pair's old values are all
     * loaded before any of its stores, so the loads overlap (a store between two loads, which
     * may alias, would make each load wait for the one before; measured on layer1's dgrad:
     * docs/benchmarks.md, "Conv paths"). */
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
        float old[MT][2][2] = {};
        if (g.accumulate) {
            #pragma unroll
            for (int mt = 0; mt < MT; mt++)
                #pragma unroll
                for (int r8 = 0; r8 < 2; r8++) {
                    const int row = m0 + wm0 + mt * 16 + gq + 8 * r8;
                    if (row >= g.M) continue;
                    const float *src = base + (size_t)row * out_plane;
                    if (pairs) {
                        const float2 o = *reinterpret_cast<const float2 *>(src);
                        old[mt][r8][0] = o.x;
                        old[mt][r8][1] = o.y;
                    } else {
                        old[mt][r8][0] = src[0];
                        if (base1) old[mt][r8][1] = base1[(size_t)row * out_plane];
                    }
                }
        }
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
                if (g.accumulate) {
                    v0 = old[mt][r8][0] + v0;
                    v1 = old[mt][r8][1] + v1;
                }
                float *dst = base + (size_t)row * out_plane;
                if (pairs) {
                    *reinterpret_cast<float2 *>(dst) = make_float2(v0, v1);
                } else {
                    dst[0] = v0;
                    if (base1) base1[(size_t)row * out_plane] = v1; /* next image, or not beside */
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

#endif /* SNN_CONV2D_NHWC_TILES_CUH */
