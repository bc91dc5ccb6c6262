/*
 * conv2d_igemm_kernel.cuh - the kernel of the NCHW implicit-GEMM convolution: one template,
 * conv2d_igemm_kernel<PASS, PREC, BM>, for the forward, the input gradient and the weight
 * gradient in TF32 or BF16 (conv2d_igemm.cu, the only file that includes this one; its comment
 * gives the three products, the split-K and the traffic, and it plans and launches the kernel).
 *
 * Tiles. A block of 256 threads (8 warps) computes a BM x 128 tile of the output, BM = 128 or
 * 64 (64 when M <= 64: the 64-channel layers would waste half a 128 tile), stepping through K
 * in slices of BK = 32. The 8 warps sit 2 (along M) x 4 (along N); each owns a (BM/2) x 32
 * warp tile, i.e. BM/32 x 4 mma tiles of 16 x 8, whose fp32 accumulators stay in registers
 * (64 or 32 per thread). Shared memory holds NSTAGE = 3 slices, filled by cp.async (4-byte
 * copies with zero-fill: a padding pixel or an out-of-range row costs no branch and no load),
 * so the loads of slice k+2 fly while slice k is multiplied.
 *
 *   A slice  As[BM][BK + pad]    k contiguous in a row (the fragment reads a row pair x k)
 *   B slice  Bs[BK][128 + pad]   "k-major", forward and dgrad: a gathered row of 128 columns
 *            Bs[128][BK + pad]   "n-major", wgrad: its K (the pixels) is what is contiguous
 * The pads make the fragment reads conflict-free: a warp reads 8 rows x 4 columns (TF32) or
 * 8 rows x 4 column pairs (BF16); row strides of 36/136 floats (TF32) or 40/132 (BF16) put
 * those 32 reads in 32 different banks.
 *
 * Operands stay fp32 in device memory and in shared memory; the fragment loads round them:
 * TF32 with cvt.rna (round to nearest, as cuBLAS; a raw fp32 bit pattern would be truncated
 * by the hardware), BF16 two at a time with cvt.rn.bf16x2. So the memory traffic is fp32's
 * and BF16 buys the doubled tensor-core rate. Spikes (0 and 1) and small spike counts are
 * exact in both formats: the rounding enters through weights, batch-norm outputs and
 * gradients.
 *
 * Index math is 32-bit: the launcher cuts the batch into chunks of images whose tensors stay
 * below 2^31 elements. Each loader precomputes what does not change along K (its columns'
 * image base, top-left input pixel) once per block; the row decode k -> (channel, kh, kw) is a
 * table built per call (k_table_kernel in conv2d_igemm.cu) and read with warp-uniform loads
 * (every lane of a warp loads the same rows), so a gathered element costs two adds, a bounds
 * test and a copy.
 */
#ifndef SNN_CONV2D_IGEMM_KERNEL_CUH
#define SNN_CONV2D_IGEMM_KERNEL_CUH

#include <cuda_bf16.h>
#include <stdint.h>

#include "kernels/cuda/cuda_common.cuh"
#include "tensor/cuda_options.h"
#include "mma_sync.cuh"

#define IG_THREADS 256
#define IG_BN 128
#define IG_BK 32
#define IG_NSTAGE 3

enum ig_pass { IG_FORWARD, IG_DGRAD, IG_WGRAD };

/* Row strides (floats) of the shared-memory slices, per precision (file comment: banks). */
template <int PREC> struct ig_layout {
    static constexpr int a_stride = PREC == SNN_PRECISION_BF16 ? IG_BK + 8 : IG_BK + 4;
    static constexpr int kmajor_stride = PREC == SNN_PRECISION_BF16 ? IG_BN + 4 : IG_BN + 8;
};

/* What a launch needs besides the tensors, all 32-bit (one chunk of images). */
struct ig_args {
    const float *A;       /* forward: W (C_out, CK); dgrad: W^T (C_in, C_out KK); wgrad: dout */
    const float *B;       /* forward, wgrad: x; dgrad: dout */
    float *C;             /* forward: out; dgrad: dx; wgrad: dW, or the split partials */
    const float *bias;    /* forward only, may be NULL */
    const int2 *k_table;  /* forward, dgrad: per K row; wgrad: per N column. {offset, kh<<16|kw} */
    int M, N, K;          /* the GEMM */
    int k_per_split;      /* a multiple of IG_BK; gridDim.z splits */
    int64_t split_stride; /* floats between two splits' partials (0: no split, add into C) */
    int C_in, H, W, C_out, H_out, W_out, KH, KW, stride, pad;
    int stride_shift;     /* log2(stride) when stride is a power of two, else -1 */
};

/* ---- the three tiny helpers around the tensor-core instructions -------------------------- */

static __device__ __forceinline__ uint32_t to_tf32(float x)
{
    uint32_t r;
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
    return r;
}

/* two floats -> one register of two bf16, `lo` (the lower k or column index) in bits 0..15 */
static __device__ __forceinline__ uint32_t to_bf16x2(float lo, float hi)
{
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t *>(&v);
}

/* ---- the kernel ---------------------------------------------------------------------------- */

/*
 * One BM x 128 tile of C over the K range of split blockIdx.z. Thread roles in the loaders:
 * warp w (0..7) and lane l. A slice: rows w + 8 i, column l (a warp reads 32 consecutive k of
 * one row). B slice, k-major: rows w + 8 i (i < 4), columns l + 32 j (j < 4): 4 row decodes and
 * 4 column bases per thread, 16 copies. B slice, n-major (wgrad): column (pixel) l, rows
 * w + 8 i (i < 16).
 */
template <int PASS, int PREC, int BM>
static __global__ void __launch_bounds__(IG_THREADS, BM == 128 ? 1 : 2)
conv2d_igemm_kernel(ig_args g)
{
    using L = ig_layout<PREC>;
    constexpr bool N_MAJOR = PASS == IG_WGRAD;
    constexpr int A_FLOATS = BM * L::a_stride;
    constexpr int B_FLOATS = N_MAJOR ? IG_BN * L::a_stride : IG_BK * L::kmajor_stride;
    constexpr int STAGE_FLOATS = A_FLOATS + B_FLOATS;
    constexpr int MT = BM / 32;  /* mma tiles along M per warp (warp tile BM/2 rows) */
    constexpr int NT = 4;        /* mma tiles along N per warp (warp tile 32 columns) */
    extern __shared__ __align__(16) float smem[];

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * IG_BN;
    const int k_begin = blockIdx.z * g.k_per_split;
    const int k_end = min(g.K, k_begin + g.k_per_split);
    const int tiles = (k_end - k_begin + IG_BK - 1) / IG_BK;
    const int HW = g.H * g.W, P = g.H_out * g.W_out;

    /* ---- per-thread loader state that does not change along K ---- */
    /* A: rows m0 + warp + 8 i, column lane. forward/dgrad: A is (M, K) row-major. */
    int a_row_valid = 0; /* bit i: row m0 + warp + 8 i < M */
    #pragma unroll
    for (int i = 0; i < BM / 8; i++) a_row_valid |= (m0 + warp + 8 * i < g.M) << i;
    /* B (k-major): columns n0 + lane + 32 j. forward: (img, oh, ow) -> image base + top-left
     * input pixel; dgrad: (img, ih, iw) -> dout image base and ih + pad, iw + pad. */
    int b_base[4], b_row0[4], b_col0[4];
    bool b_col_valid[4];
    if (!N_MAJOR) {
        #pragma unroll
        for (int j = 0; j < 4; j++) {
            const int col = n0 + lane + 32 * j;
            b_col_valid[j] = col < g.N;
            const int c = b_col_valid[j] ? col : 0;
            if (PASS == IG_FORWARD) {
                const int img = c / P, p = c - img * P, oh = p / g.W_out, ow = p - oh * g.W_out;
                b_row0[j] = oh * g.stride - g.pad;
                b_col0[j] = ow * g.stride - g.pad;
                /* x[img, 0, row0, col0] (may lie outside the image: only valid taps are read) */
                b_base[j] = img * g.C_in * HW + b_row0[j] * g.W + b_col0[j];
            } else {
                const int img = c / HW, q = c - img * HW, ih = q / g.W, iw = q - ih * g.W;
                b_base[j] = img * g.C_out * P;
                b_row0[j] = ih + g.pad;
                b_col0[j] = iw + g.pad;
            }
        }
    }

    /* Queue the copies of K slice `tile` into stage `stage`. */
    auto load_slice = [&](int tile, int stage) {
        float *As = smem + stage * STAGE_FLOATS, *Bs = As + A_FLOATS;
        const int k0 = k_begin + tile * IG_BK;
        const int kl = k0 + lane; /* this lane's k in the A slice (and the wgrad B slice) */
        const bool k_ok = kl < k_end;
        if (PASS != IG_WGRAD) {
            /* A (M, K) row-major: row m, column kl */
            const float *src = g.A + (size_t)(m0 + warp) * g.K + kl;
            #pragma unroll
            for (int i = 0; i < BM / 8; i++) {
                const bool ok = k_ok && (a_row_valid >> i & 1);
                cp_async4(As + (warp + 8 * i) * L::a_stride + lane, ok ? src : g.A, ok);
                src += (size_t)8 * g.K;
            }
            /* B gathered, k-major: rows warp + 8 i, columns lane + 32 j */
            #pragma unroll
            for (int i = 0; i < 4; i++) {
                const int k = k0 + warp + 8 * i;
                const bool row_ok = k < k_end;
                const int2 e = row_ok ? __ldg(g.k_table + k) : make_int2(0, 0);
                const int kh = e.y >> 16, kw = e.y & 0xffff;
                float *dst = Bs + (warp + 8 * i) * L::kmajor_stride + lane;
                #pragma unroll
                for (int j = 0; j < 4; j++) {
                    bool ok = row_ok && b_col_valid[j];
                    int offset;
                    if (PASS == IG_FORWARD) {
                        const int ih = b_row0[j] + kh, iw = b_col0[j] + kw;
                        ok = ok && (unsigned)ih < (unsigned)g.H && (unsigned)iw < (unsigned)g.W;
                        offset = b_base[j] + e.x; /* e.x = ci HW + kh W + kw */
                    } else {
                        int oh = b_row0[j] - kh, ow = b_col0[j] - kw; /* = o stride, if any */
                        if (g.stride_shift >= 0) {
                            const int mask = (1 << g.stride_shift) - 1;
                            ok = ok && !(oh & mask) && !(ow & mask);
                            oh >>= g.stride_shift;
                            ow >>= g.stride_shift;
                        } else {
                            ok = ok && oh >= 0 && ow >= 0 && oh % g.stride == 0 &&
                                 ow % g.stride == 0;
                            oh /= g.stride;
                            ow /= g.stride;
                        }
                        ok = ok && (unsigned)oh < (unsigned)g.H_out &&
                             (unsigned)ow < (unsigned)g.W_out;
                        offset = b_base[j] + e.x + oh * g.W_out + ow; /* e.x = co P */
                    }
                    cp_async4(dst + 32 * j, ok ? g.B + offset : g.B, ok);
                }
            }
        } else {
            /* wgrad. This lane's pixel kl = (img, p) is the K index of both operands. */
            const int kc = k_ok ? kl : 0;
            const int img = kc / P, p = kc - img * P;
            /* A = dout viewed (C_out, N P): dout[img, m, p] */
            const float *src = g.A + (size_t)img * g.C_out * P + (size_t)(m0 + warp) * P + p;
            #pragma unroll
            for (int i = 0; i < BM / 8; i++) {
                const bool ok = k_ok && (a_row_valid >> i & 1);
                cp_async4(As + (warp + 8 * i) * L::a_stride + lane, ok ? src : g.A, ok);
                src += (size_t)8 * P;
            }
            /* B = x gathered, n-major: Bs[column (ci, kh, kw)][pixel] */
            const int oh = p / g.W_out, ow = p - oh * g.W_out;
            const int ih0 = oh * g.stride - g.pad, iw0 = ow * g.stride - g.pad;
            const int base = img * g.C_in * HW + ih0 * g.W + iw0;
            #pragma unroll
            for (int i = 0; i < IG_BN / 8; i++) {
                const int col = n0 + warp + 8 * i;
                const bool col_ok = col < g.N;
                const int2 e = col_ok ? __ldg(g.k_table + col) : make_int2(0, 0);
                const int ih = ih0 + (e.y >> 16), iw = iw0 + (e.y & 0xffff);
                const bool ok = k_ok && col_ok && (unsigned)ih < (unsigned)g.H &&
                                (unsigned)iw < (unsigned)g.W;
                cp_async4(Bs + (warp + 8 * i) * L::a_stride + lane, ok ? g.B + base + e.x : g.B,
                          ok);
            }
        }
    };

    float acc[MT][NT][4];
    #pragma unroll
    for (int mt = 0; mt < MT; mt++)
        #pragma unroll
        for (int nt = 0; nt < NT; nt++)
            #pragma unroll
            for (int r = 0; r < 4; r++) acc[mt][nt][r] = 0.0f;

    const int wm0 = (warp >> 2) * (BM / 2); /* this warp's tile inside the block tile */
    const int wn0 = (warp & 3) * 32;
    const int gq = lane >> 2, tq = lane & 3; /* the mma fragment coordinates ("groupID") */

    /* Multiply the slice in `stage` into acc. Fragment layouts: PTX ISA, mma.m16n8k8 (.tf32)
     * and mma.m16n8k16 (.bf16): A element (row gq or gq + 8, column tq or tq + 4 [TF32];
     * column pairs 2 tq, 2 tq + 8 [BF16]); B element (k tq or tq + 4 [pairs 2 tq, 2 tq + 8],
     * column gq); C element (row gq or gq + 8, columns 2 tq and 2 tq + 1). */
    auto multiply_slice = [&](int stage) {
        const float *As = smem + stage * STAGE_FLOATS, *Bs = As + A_FLOATS;
        if (PREC == SNN_PRECISION_TF32) {
            #pragma unroll
            for (int ks = 0; ks < IG_BK; ks += 8) {
                uint32_t a[MT][4], b[NT][2];
                #pragma unroll
                for (int mt = 0; mt < MT; mt++) {
                    const float *r0 = As + (wm0 + mt * 16 + gq) * L::a_stride + ks + tq;
                    const float *r8 = r0 + 8 * L::a_stride;
                    a[mt][0] = to_tf32(r0[0]);
                    a[mt][1] = to_tf32(r8[0]);
                    a[mt][2] = to_tf32(r0[4]);
                    a[mt][3] = to_tf32(r8[4]);
                }
                #pragma unroll
                for (int nt = 0; nt < NT; nt++) {
                    const int n = wn0 + nt * 8 + gq;
                    if (N_MAJOR) {
                        const float *r = Bs + n * L::a_stride + ks + tq;
                        b[nt][0] = to_tf32(r[0]);
                        b[nt][1] = to_tf32(r[4]);
                    } else {
                        const float *r = Bs + (ks + tq) * L::kmajor_stride + n;
                        b[nt][0] = to_tf32(r[0]);
                        b[nt][1] = to_tf32(r[4 * L::kmajor_stride]);
                    }
                }
                #pragma unroll
                for (int mt = 0; mt < MT; mt++)
                    #pragma unroll
                    for (int nt = 0; nt < NT; nt++) mma_tf32(acc[mt][nt], a[mt], b[nt]);
            }
        } else {
            #pragma unroll
            for (int ks = 0; ks < IG_BK; ks += 16) {
                uint32_t a[MT][4], b[NT][2];
                #pragma unroll
                for (int mt = 0; mt < MT; mt++) {
                    const float *r0 = As + (wm0 + mt * 16 + gq) * L::a_stride + ks + 2 * tq;
                    const float *r8 = r0 + 8 * L::a_stride;
                    const float2 x00 = *reinterpret_cast<const float2 *>(r0);
                    const float2 x80 = *reinterpret_cast<const float2 *>(r8);
                    const float2 x08 = *reinterpret_cast<const float2 *>(r0 + 8);
                    const float2 x88 = *reinterpret_cast<const float2 *>(r8 + 8);
                    a[mt][0] = to_bf16x2(x00.x, x00.y);
                    a[mt][1] = to_bf16x2(x80.x, x80.y);
                    a[mt][2] = to_bf16x2(x08.x, x08.y);
                    a[mt][3] = to_bf16x2(x88.x, x88.y);
                }
                #pragma unroll
                for (int nt = 0; nt < NT; nt++) {
                    const int n = wn0 + nt * 8 + gq;
                    if (N_MAJOR) {
                        const float *r = Bs + n * L::a_stride + ks + 2 * tq;
                        const float2 x0 = *reinterpret_cast<const float2 *>(r);
                        const float2 x8 = *reinterpret_cast<const float2 *>(r + 8);
                        b[nt][0] = to_bf16x2(x0.x, x0.y);
                        b[nt][1] = to_bf16x2(x8.x, x8.y);
                    } else {
                        const float *r = Bs + (ks + 2 * tq) * L::kmajor_stride + n;
                        constexpr int S = L::kmajor_stride;
                        b[nt][0] = to_bf16x2(r[0], r[S]);
                        b[nt][1] = to_bf16x2(r[8 * S], r[9 * S]);
                    }
                }
                #pragma unroll
                for (int mt = 0; mt < MT; mt++)
                    #pragma unroll
                    for (int nt = 0; nt < NT; nt++) mma_bf16(acc[mt][nt], a[mt], b[nt]);
            }
        }
    };

    /* ---- the pipeline: slices kt+1, kt+2 in flight while kt is multiplied ---- */
    for (int s = 0; s < IG_NSTAGE - 1; s++) {
        if (s < tiles) load_slice(s, s);
        cp_async_commit(); /* an empty group keeps the count uniform */
    }
    for (int kt = 0; kt < tiles; kt++) {
        cp_async_wait<IG_NSTAGE - 2>(); /* this thread's copies of slice kt have landed */
        __syncthreads();                /* everyone's have; and slice kt-1 is multiplied */
        const int next = kt + IG_NSTAGE - 1;
        if (next < tiles) load_slice(next, next % IG_NSTAGE); /* overwrites slice kt-1 */
        cp_async_commit();
        multiply_slice(kt % IG_NSTAGE);
    }
    cp_async_wait<0>();

    /* ---- epilogue: registers -> C ---- */
    #pragma unroll
    for (int nt = 0; nt < NT; nt++) {
        #pragma unroll
        for (int half = 0; half < 2; half++) {
            const int col = n0 + wn0 + nt * 8 + 2 * tq + half;
            if (col >= g.N) continue;
            /* where column `col` of row 0 lives, and the step between rows */
            size_t base;
            int row_step;
            if (PASS == IG_FORWARD) {
                const int img = col / P, p = col - img * P;
                base = (size_t)img * g.C_out * P + p;
                row_step = P;
            } else if (PASS == IG_DGRAD) {
                const int img = col / HW, q = col - img * HW;
                base = (size_t)img * g.C_in * HW + q;
                row_step = HW;
            } else {
                base = (size_t)blockIdx.z * g.split_stride + col;
                row_step = g.N;
            }
            #pragma unroll
            for (int mt = 0; mt < MT; mt++) {
                #pragma unroll
                for (int r8 = 0; r8 < 2; r8++) {
                    const int row = m0 + wm0 + mt * 16 + gq + 8 * r8;
                    if (row >= g.M) continue;
                    const float v = acc[mt][nt][2 * r8 + half];
                    float *dst = g.C + base + (size_t)row * row_step;
                    if (PASS == IG_FORWARD)
                        *dst = g.bias ? v + __ldg(g.bias + row) : v;
                    else if (PASS == IG_DGRAD || g.split_stride == 0)
                        *dst += v; /* backward accumulates */
                    else
                        *dst = v; /* a split's partial */
                }
            }
        }
    }
}

#endif
