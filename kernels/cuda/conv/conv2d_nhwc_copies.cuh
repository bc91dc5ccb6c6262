/*
 * conv2d_nhwc_copies.cuh - the copies the channels-last convolution (conv2d_nhwc.cu, the only
 * file that includes this one) makes before its GEMM kernels run: an activation (x, or dout)
 * from NCHW fp32, or from spikes kept as bits, to channels-last operands (bf16, or fp32 rounded
 * to TF32), and dout made on the way from a batch-norm's dL/dout (snn_bn_dout). conv2d_nhwc.cu's
 * comment says why the copies pay; the weight's copy (pack_weight) stays there, beside the
 * input gradient's residue classes it is packed for.
 *
 *   to_nhwc        x or dout as floats (nchw_to_nhwc_kernel) or bits (bits_to_nhwc_*_kernel)
 *   dout_to_nhwc   dout, copied, or made from dL/dX and x (bn_dout_to_nhwc_kernel)
 *
 * Rounding: to_operand, once, here; the GEMM kernels take the operands as they are.
 * Test: tests/test_cuda_igemm.c (every shape, both precisions; conv2d_backward_bn_dout's bits),
 * tests/test_cuda_spike_pack.c (the copies from bits), the parity harness (backend_ops_conv.h).
 */
#ifndef SNN_CONV2D_NHWC_COPIES_CUH
#define SNN_CONV2D_NHWC_COPIES_CUH

#include <cuda_bf16.h>
#include <stdint.h>

#include "kernels/cuda/bn_dx.cuh"
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/kernels_cuda.h"
#include "tensor/error.h"
#include "conv2d_nhwc_tiles.cuh" /* bf16 */

/* An operand element from an fp32 value: bf16 rounded to nearest even, or fp32 rounded to
 * TF32 (to nearest, ties away: cvt.rna, as cuBLAS and conv2d_igemm.cu round), whose low 13
 * bits are then zero, so the tensor cores' truncation changes nothing. */
static __device__ __forceinline__ bf16 to_operand(float v, bf16 *)
{
    return __float2bfloat16_rn(v);
}
static __device__ __forceinline__ float to_operand(float v, float *)
{
    uint32_t r;
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(v));
    return __uint_as_float(r);
}

/* ---- the copies ---------------------------------------------------------------------------- */

/* dst (images, HW, C) = src (images, C, HW) fp32 as operands (to_operand: bf16, or fp32 rounded
 * to TF32). A block of 256 threads moves a tile of 64 channels x 32 positions of one image
 * through shared memory: it reads along positions (a warp reads 128 contiguous bytes of a
 * channel) and writes along channels, each thread 16 bytes (EPV = 8 bf16 or 4 TF32 channels
 * of one position), the groups of a position on neighbouring lanes. Traffic: 4 B read and
 * 2 B (bf16) or 4 B (TF32) written per element.
 * A thread issues all its NH_COPY_ROWS loads (of each input) before it uses one: a load under
 * an `if`, used at once, left one load of each in flight per warp, and the copies ran at
 * 2.5-3.0 TB/s of the H200's 4.8; loads first, 3.5-4.0 (ncu, layer1 at B = 64;
 * docs/benchmarks.md). Out of the tile a thread loads the image's first element, which is
 * always there, and does not use it. */
#define NH_COPY_CHANNELS 64
#define NH_COPY_ROWS (NH_COPY_CHANNELS / 8) /* channels a thread loads: 8 warps a block */
typedef float nh_copy_tile[NH_COPY_CHANNELS][33]; /* 33: the reads along a column spread banks */

/* The offset in its image of the element this thread loads in its j-th row, or 0 out of the
 * tile (*in false). An image's C HW fits 32 bits (copy_grid asserts it). */
static __device__ __forceinline__ int copy_offset(int j, int c0, int p0, int C, int HW, bool *in)
{
    const int c = c0 + (threadIdx.x >> 5) + 8 * j, p = p0 + (threadIdx.x & 31);
    *in = c < C && p < HW;
    return *in ? c * HW + p : 0;
}

/* The second half of the tiled copies: the block's tile (channels x positions) of image n,
 * written channels-last as operands, 16 bytes a thread. */
template <typename E>
static __device__ __forceinline__ void store_tile(E *__restrict__ dst, const nh_copy_tile &tile,
                                                  int C, int HW, int n, int c0, int p0)
{
    constexpr int EPV = 16 / (int)sizeof(E), GROUPS = NH_COPY_CHANNELS / EPV;
    E *d = dst + (size_t)n * HW * C;
    #pragma unroll
    for (int item = threadIdx.x; item < 32 * GROUPS; item += 256) {
        const int g = item % GROUPS, q = item / GROUPS, p = p0 + q, c = c0 + g * EPV;
        if (p >= HW || c >= C) continue; /* C % 32 == 0: a group is all in or all out */
        union {
            uint4 v;
            E e[EPV];
        } out;
        #pragma unroll
        for (int j = 0; j < EPV; j++) out.e[j] = to_operand(tile[g * EPV + j][q], (E *)nullptr);
        *reinterpret_cast<uint4 *>(d + (size_t)p * C + c) = out.v;
    }
}

template <typename E>
static __global__ void __launch_bounds__(256) nchw_to_nhwc_kernel(E *__restrict__ dst,
                                                                  const float *__restrict__ src,
                                                                  int C, int HW)
{
    __shared__ nh_copy_tile tile;
    const int n = blockIdx.z, c0 = blockIdx.y * NH_COPY_CHANNELS, p0 = blockIdx.x * 32;
    const int row = threadIdx.x >> 5, tx = threadIdx.x & 31;
    const float *s = src + (size_t)n * C * HW;
    float v[NH_COPY_ROWS];
    bool in[NH_COPY_ROWS];
    #pragma unroll
    for (int j = 0; j < NH_COPY_ROWS; j++) v[j] = s[copy_offset(j, c0, p0, C, HW, &in[j])];
    #pragma unroll
    for (int j = 0; j < NH_COPY_ROWS; j++) tile[row + 8 * j][tx] = in[j] ? v[j] : 0.0f;
    __syncthreads();
    store_tile(dst, tile, C, HW, n, c0, p0);
}

/* The same copy of a dout that is a batch-norm's input gradient not made yet (snn_bn_dout):
 * each value is made as it is loaded from the batch-norm's dL/dout (dX) and input x,
 *   dout = a (dX - c0 - (x - mean) c1)          chan[c] = (a, mean, c0, c1)
 * with the in-place backward's roundings (bn_dx_value; chan from snn_bn_dout_channels_cuda):
 * the float it would have written, then rounded as nchw_to_nhwc_kernel rounds it. X: bn_x_f32
 * or bn_x_bf16 (a conv output kept as bf16). Traffic per element: 4 B of dX and 4 B (or 2 B)
 * of x read, 2 B (bf16) or 4 B (TF32) written; against the batch-norm's pass (dX and x read,
 * 4 B written) and then the plain copy (4 B read), 8 B less. */
template <typename E, typename X>
static __global__ void __launch_bounds__(256)
bn_dout_to_nhwc_kernel(E *__restrict__ dst, const float *__restrict__ dX, X x,
                       const float4 *__restrict__ chan, int C, int HW)
{
    __shared__ nh_copy_tile tile;
    __shared__ float4 k[NH_COPY_CHANNELS];
    const int n = blockIdx.z, c0 = blockIdx.y * NH_COPY_CHANNELS, p0 = blockIdx.x * 32;
    const int tid = threadIdx.x, row = tid >> 5, tx = tid & 31;
    if (tid < NH_COPY_CHANNELS && c0 + tid < C) k[tid] = chan[c0 + tid];
    const int64_t image = (int64_t)n * C * HW;
    const float *dXn = dX + image;
    const X xn{x.p + image};
    float dy[NH_COPY_ROWS], xv[NH_COPY_ROWS];
    bool in[NH_COPY_ROWS];
    #pragma unroll
    for (int j = 0; j < NH_COPY_ROWS; j++) {
        const int at = copy_offset(j, c0, p0, C, HW, &in[j]);
        dy[j] = dXn[at];
        xv[j] = xn[at];
    }
    __syncthreads(); /* k */
    #pragma unroll
    for (int j = 0; j < NH_COPY_ROWS; j++) {
        const float4 kc = k[row + 8 * j];
        tile[row + 8 * j][tx] =
            in[j] ? bn_dx_value(0.0f, kc.x, dy[j], xv[j], kc.y, kc.z, kc.w) : 0.0f;
    }
    __syncthreads();
    store_tile(dst, tile, C, HW, n, c0, p0);
}

/* The same copy from spikes kept as bits (the conv's x, autograd/spike_pack.c), for any plane
 * (bits_to_nhwc_tiled_kernel below takes planes of a multiple of 32 positions):
 * element (n, c, p) is bit offset + (n C + c) HW + p. Bits need no transpose through shared
 * memory: a thread builds the 16 bytes of EPV channels (8 bf16, 4 TF32) of one position from
 * EPV bits and stores them at once, the groups of a position on neighbouring lanes, so a warp
 * stores whole channel runs. Its loads are words that 32 positions share (L1). Traffic: 1/8 B
 * read, 2 B (bf16) or 4 B (TF32) written per element. Launched with 32-bit indices:
 * NH_CHUNK_BYTES keeps a chunk's copy below 2^31 elements. */
template <typename E>
static __global__ void bits_to_nhwc_kernel(E *__restrict__ dst, const uint32_t *__restrict__ bits,
                                           int64_t offset, int C, int HW, int total_groups)
{
    constexpr int EPV = 16 / (int)sizeof(E);
    const int groups = C / EPV; /* per position */
    for (int idx = blockIdx.x * blockDim.x + threadIdx.x; idx < total_groups;
         idx += gridDim.x * blockDim.x) {
        const int np = idx / groups, g = idx - np * groups; /* np = n HW + p */
        const int n = np / HW, p = np - n * HW;
        const int64_t first = offset + ((int64_t)n * C + g * EPV) * HW + p;
        union {
            uint4 v;
            E e[EPV];
        } out;
        #pragma unroll
        for (int j = 0; j < EPV; j++)
            out.e[j] = to_operand(snn_bit_at(bits, first + (int64_t)j * HW), (E *)nullptr);
        *reinterpret_cast<uint4 *>(dst + (size_t)np * C + g * EPV) = out.v;
    }
}

/* The same copy from bits where a word holds 32 positions of one channel (HW and the view's
 * offset multiples of 32): a block takes 32 positions x 64 channels of one image, as
 * nchw_to_nhwc_kernel does. Its first 64 threads load the tile's 64 words (one per channel)
 * into shared memory; then each thread builds the 16 bytes of EPV channels of one position
 * from EPV of those words, the groups of a position on neighbouring lanes. A warp's loads in
 * bits_to_nhwc_kernel touch eight different words (lines) per instruction, and that many L1
 * wavefronts, not bytes, bound it (22 us for a layer1 chunk that writes 32 MB, H200); here a
 * word is loaded once per block. Traffic: 1/8 B read, 2 B (bf16) or 4 B (TF32) written per
 * element. The word array is padded (c + c / 8) so the groups' reads fall on distinct banks. */
template <typename E>
static __global__ void __launch_bounds__(256)
bits_to_nhwc_tiled_kernel(E *__restrict__ dst, const uint32_t *__restrict__ bits, int64_t offset,
                          int C, int HW)
{
    constexpr int EPV = 16 / (int)sizeof(E), GROUPS = NH_COPY_CHANNELS / EPV;
    __shared__ uint32_t words[NH_COPY_CHANNELS + NH_COPY_CHANNELS / 8];
    const int n = blockIdx.z, c0 = blockIdx.y * NH_COPY_CHANNELS, p0 = blockIdx.x * 32;
    const int tid = threadIdx.x;
    if (tid < NH_COPY_CHANNELS) {
        const int c = c0 + tid;
        words[tid + tid / 8] =
            c < C ? bits[(offset + ((int64_t)n * C + c) * HW + p0) >> 5] : 0u;
    }
    __syncthreads();
    E *d = dst + (size_t)n * HW * C;
    #pragma unroll
    for (int item = tid; item < 32 * GROUPS; item += 256) {
        const int g = item % GROUPS, q = item / GROUPS, c = c0 + g * EPV;
        if (c >= C) continue; /* C % 32 == 0: a group is all in or all out */
        union {
            uint4 v;
            E e[EPV];
        } out;
        #pragma unroll
        for (int j = 0; j < EPV; j++) {
            const int w = g * EPV + j;
            out.e[j] = to_operand((float)((words[w + w / 8] >> q) & 1u), (E *)nullptr);
        }
        *reinterpret_cast<uint4 *>(d + (size_t)(p0 + q) * C + c) = out.v;
    }
}

/* ---- launching the copies ---------------------------------------------------------------- */

/* The launch of kernel `name` just made (grid x block threads) failed: say which and abort */
static void check_launch(const char *name, dim3 grid, int block)
{
    const cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess)
        snn_cuda_launch_fail(name, __FILE__, __LINE__, err, grid.x * grid.y * grid.z, block);
}

/* The tiled copies' grid: 32 positions x NH_COPY_CHANNELS channels of one image a block. The
 * kernels index within an image in 32 bits (copy_offset). */
static dim3 copy_grid(int images, int C, int HW)
{
    SNN_ASSERT((int64_t)C * HW <= INT32_MAX);
    const unsigned tiles_c = (unsigned)((C + NH_COPY_CHANNELS - 1) / NH_COPY_CHANNELS);
    return dim3((unsigned)((HW + 31) / 32), tiles_c, (unsigned)images);
}

template <typename E>
static void to_nhwc(E *dst, snn_cuda_input src, int images, int C, int HW)
{
    const dim3 grid = copy_grid(images, C, HW);
    if (src.x) {
        nchw_to_nhwc_kernel<E><<<grid, 256, 0, snn_cuda_stream()>>>(dst, src.x, C, HW);
        check_launch("nchw_to_nhwc_kernel", grid, 256);
    } else if (HW % 32 == 0 && src.offset % 32 == 0) { /* a word: 32 positions, one channel */
        bits_to_nhwc_tiled_kernel<E><<<grid, 256, 0, snn_cuda_stream()>>>(dst, src.bits,
                                                                         src.offset, C, HW);
        check_launch("bits_to_nhwc_tiled_kernel", grid, 256);
    } else {
        const int total = images * HW * (C / (16 / (int)sizeof(E)));
        SNN_CUDA_LAUNCH(bits_to_nhwc_kernel<E>, snn_cuda_grid(total, SNN_CUDA_BLOCK),
                        SNN_CUDA_BLOCK, 0, dst, src.bits, src.offset, C, HW, total);
    }
}

/* dout of images [n0, n0 + images) channels-last: copied, or (bn) made from the batch-norm's
 * dL/dout (dout) and x as it is loaded (bn_dout_to_nhwc_kernel; chan from
 * snn_bn_dout_channels_cuda) */
template <typename E>
static void dout_to_nhwc(E *dst, const float *dout, const snn_bn_dout *bn, const float4 *chan,
                         int64_t n0, int images, int C, int P)
{
    const int64_t first = n0 * C * P;
    if (!bn) {
        to_nhwc<E>(dst, snn_cuda_floats(dout + first), images, C, P);
        return;
    }
    const dim3 grid = copy_grid(images, C, P);
    if (bn->x)
        bn_dout_to_nhwc_kernel<E, bn_x_f32><<<grid, 256, 0, snn_cuda_stream()>>>(
            dst, dout + first, bn_x_f32{bn->x + first}, chan, C, P);
    else
        bn_dout_to_nhwc_kernel<E, bn_x_bf16><<<grid, 256, 0, snn_cuda_stream()>>>(
            dst, dout + first, bn_x_bf16{bn->x_bf16 + first}, chan, C, P);
    check_launch("bn_dout_to_nhwc_kernel", grid, 256);
}

#endif /* SNN_CONV2D_NHWC_COPIES_CUH */
