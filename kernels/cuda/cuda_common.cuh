/*
 * cuda_common.cuh - what every .cu file of snn.c shares (internal; CUDA sources only).
 *
 *   SNN_CUDA_CHECK(call)     a CUDA runtime call that must succeed: on failure prints the call,
 *                            file:line and cudaGetErrorString, then aborts (a bug or a
 *                            failing device, not bad input: error.h);
 *   SNN_CUBLAS_CHECK(call)   the same for cuBLAS, with cublasGetStatusString;
 *   SNN_CUDA_LAUNCH(k, grid, block, shmem, args...)
 *                            launches kernel k on the one stream, then checks cudaGetLastError()
 *                            so that a bad launch is reported at the launch that made it;
 *   snn_cuda_stream()        the single stream every kernel, copy and cuBLAS call is queued on;
 *   snn_cuda_blas()          the cuBLAS handle bound to that stream (fp32, or TF32 when chosen);
 *   snn_cuda_scratch(bytes)  device scratch for the second pass of reductions (partial sums);
 *   snn_cuda_grid(n, block)  a grid size for a grid-stride loop over n items;
 *   snn_block_sum(v)         a deterministic block-wide sum (fixed tree: same bits every run);
 *   snn_fast_div(n, f)       n / d by multiply and shift, f = snn_fast_divisor_make(d), n < 2^31.
 *
 * All state lives in kernels/cuda/cuda_context.cu and is created on first use. Kernels index with
 * int64_t wherever an element count can pass 2^31 (a (T*N, C, H, W) activation easily does).
 */
#ifndef SNN_CUDA_COMMON_CUH
#define SNN_CUDA_COMMON_CUH

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "kernels/kernels.h"

extern "C" {

/* Prints "snn.c: CUDA error: <what> failed at file:line: <message>" and aborts. */
[[noreturn]] void snn_cuda_fail(const char *what, const char *file, int line,
                                const char *message);
/* The same for a kernel launch, adding the launch configuration to the message. */
[[noreturn]] void snn_cuda_launch_fail(const char *kernel, const char *file, int line,
                                       cudaError_t error, unsigned grid, unsigned block);

cudaStream_t snn_cuda_stream(void);
cublasHandle_t snn_cuda_blas(void);
/* Number of streaming multiprocessors of the current device (sizes grids). */
int snn_cuda_sm_count(void);
/* A device buffer of at least `bytes` (at most SNN_CUDA_SCRATCH_BYTES), owned by the context.
 * Every user runs on the one stream, so consecutive kernels can reuse it without a sync. */
void *snn_cuda_scratch(size_t bytes);

} /* extern "C" */

/* Capacity of the reduction scratch: reductions size their partial sums to fit it. */
#define SNN_CUDA_SCRATCH_BYTES ((size_t)8 << 20)
/* cuBLAS's workspace, handed to it from snn_alloc so that snn_live_bytes counts it (cuBLAS
 * would otherwise take its own, outside the accounting): NVIDIA's recommended size for Hopper,
 * more than the 4 MiB it recommends for earlier GPUs. */
#define SNN_CUDA_BLAS_WORKSPACE_BYTES ((size_t)32 << 20)

#define SNN_CUDA_CHECK(call)                                                                 \
    do {                                                                                     \
        cudaError_t snn_err_ = (call);                                                       \
        if (snn_err_ != cudaSuccess)                                                         \
            snn_cuda_fail(#call, __FILE__, __LINE__, cudaGetErrorString(snn_err_));          \
    } while (0)

#define SNN_CUBLAS_CHECK(call)                                                               \
    do {                                                                                     \
        cublasStatus_t snn_st_ = (call);                                                     \
        if (snn_st_ != CUBLAS_STATUS_SUCCESS)                                                \
            snn_cuda_fail(#call, __FILE__, __LINE__, cublasGetStatusString(snn_st_));        \
    } while (0)

/* Launch on the one stream and check the launch (bad configuration, missing kernel image).
 * Asynchronous faults inside the kernel surface at the next checked call that synchronises. */
#define SNN_CUDA_LAUNCH(kernel, grid, block, shmem, ...)                                     \
    do {                                                                                     \
        const unsigned snn_grid_ = (grid), snn_block_ = (block);                            \
        kernel<<<snn_grid_, snn_block_, (shmem), snn_cuda_stream()>>>(__VA_ARGS__);          \
        cudaError_t snn_err_ = cudaGetLastError();                                           \
        if (snn_err_ != cudaSuccess)                                                         \
            snn_cuda_launch_fail(#kernel, __FILE__, __LINE__, snn_err_, snn_grid_, snn_block_); \
    } while (0)

/* Threads per block for the flat elementwise kernels. */
#define SNN_CUDA_BLOCK 256

/* Blocks for a grid-stride loop over n items: enough to fill every SM (16 blocks of 256 threads
 * is more than an SM holds at once), no more, so that each thread does a few items. n > 0. */
static inline unsigned snn_cuda_grid(int64_t n, int block)
{
    int64_t blocks = (n + block - 1) / block;
    int64_t cap = (int64_t)snn_cuda_sm_count() * 16;
    return (unsigned)(blocks < cap ? blocks : cap);
}

/* for (i = this thread's first item; i < n; i += all threads) with 64-bit indices */
#define SNN_GRID_STRIDE_LOOP(i, n)                                                           \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);                \
         i += (int64_t)blockDim.x * gridDim.x)

/* Element e of spikes kept as bits (autograd/spike_pack.c): bit e % 32 of word e / 32. */
static __device__ __forceinline__ float snn_bit_at(const uint32_t *bits, int64_t e)
{
    return (float)((bits[e >> 5] >> (e & 31)) & 1u);
}

/* An fp32 input a launcher hands its kernel either as floats or as spikes kept as bits: the
 * floats x, or (x NULL) the bits with this view starting at element `offset`. advanced(n) is
 * the view from element n on. The kernels take the two as a template flag, so that the float
 * path stays the plain load it was. */
struct snn_cuda_input {
    const float *x;
    const uint32_t *bits;
    int64_t offset;
    snn_cuda_input advanced(int64_t n) const
    {
        return x ? snn_cuda_input{x + n, nullptr, 0} : snn_cuda_input{nullptr, bits, offset + n};
    }
};
static inline snn_cuda_input snn_cuda_floats(const float *x) { return {x, nullptr, 0}; }

/* q = a / b and *r = a % b for a >= 0, b > 0. A 64-bit division is a long software routine on
 * the GPU, a 32-bit one a few instructions, and indices nearly always fit in 32 bits: this
 * takes the short path when they do, so index arithmetic stays cheap next to the memory
 * traffic in elementwise kernels without giving up 64-bit sizes. */
static __device__ __forceinline__ int64_t snn_divmod(int64_t a, int64_t b, int64_t *r)
{
    if (((uint64_t)a | (uint64_t)b) >> 32 == 0) {
        const uint32_t q = (uint32_t)a / (uint32_t)b;
        *r = (int64_t)((uint32_t)a - q * (uint32_t)b);
        return (int64_t)q;
    }
    const int64_t q = a / b;
    *r = a - q * b;
    return q;
}

/* n / d for 0 <= n < 2^31 with a multiply and a shift instead of a division (a 32-bit one is a
 * ~20-instruction routine): shift = ceil(log2 d), mul = floor(2^32 (2^shift - d) / d) + 1,
 * n / d = (hi32(n mul) + n) >> shift. Checked against n / d for every d < 5000 over the whole
 * range of n (in steps) on the host. Make it on the host, once per launch. */
struct snn_fast_divisor {
    uint32_t mul, shift;
};
static inline snn_fast_divisor snn_fast_divisor_make(uint32_t d)
{
    snn_fast_divisor f = {0, 0};
    while ((1u << f.shift) < d) f.shift++;
    f.mul = (uint32_t)((((uint64_t)1 << 32) * (((uint64_t)1 << f.shift) - d)) / d + 1);
    return f;
}
static __device__ __forceinline__ int snn_fast_div(int n, snn_fast_divisor f)
{
    return (int)((__umulhi((uint32_t)n, f.mul) + (uint32_t)n) >> f.shift);
}

/* Sum over a warp; the result is valid in lane 0. */
template <typename T>
static __device__ __forceinline__ T snn_warp_sum(T v)
{
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffffu, v, offset);
    return v;
}

/* Sum of v over the block, returned to every thread. Every thread of the block must call it
 * (it synchronises); blockDim.x is a multiple of 32, at most 1024. The tree (lanes, then warps)
 * is fixed, so the result is deterministic. Safe to call several times in a row. */
template <typename T>
static __device__ T snn_block_sum(T v)
{
    __shared__ T warp_sums[32];
    __shared__ T total;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int warps = (int)(blockDim.x >> 5);
    v = snn_warp_sum(v);
    __syncthreads(); /* the previous call's readers of warp_sums / total are done */
    if (lane == 0) warp_sums[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < warps ? warp_sums[lane] : T(0);
        v = snn_warp_sum(v);
        if (lane == 0) total = v;
    }
    __syncthreads();
    return total;
}

#endif /* SNN_CUDA_COMMON_CUH */
