/*
 * bf16.cu - fp32 values kept as bfloat16, on CUDA; the same bits as kernels/ref/bf16.c (which
 * has the equations) for every number but NaN (__float2bfloat16_rn gives the canonical NaN).
 *
 * round: x[i] = bf16(x[i]) in place and bf16_out[i] = its bits; unpack: x[i] = bf16_in[i].
 * Four elements a thread where x is 16-byte aligned (step memory is 256-byte aligned), one
 * float4 read and written and one 8-byte bf16 store; the last n % 4 one by one.
 * Traffic: round reads 4 B and writes 6 B an element, unpack reads 2 and writes 4, so their
 * floors are 10 B and 6 B over the bandwidth: for the 145 M conv outputs of a BF16 ResNet-18
 * step at B = 64 (9.04 MB an image in fp32), ~0.43 ms and ~0.26 ms on an H100 (~3.35 TB/s).
 */
#include <cuda_bf16.h>

#include "cuda_common.cuh"
#include "kernels_cuda.h"

static __device__ __forceinline__ uint16_t bf16_bits_of(float v)
{
    return __bfloat16_as_ushort(__float2bfloat16_rn(v));
}

static __device__ __forceinline__ float value_of(uint16_t bits)
{
    return __uint_as_float((uint32_t)bits << 16);
}

static __global__ void round_bf16_kernel(float *__restrict__ x, uint16_t *__restrict__ out,
                                         int64_t n, bool vector)
{
    if (vector) {
        float4 *x4 = reinterpret_cast<float4 *>(x);
        ushort4 *out4 = reinterpret_cast<ushort4 *>(out);
        SNN_GRID_STRIDE_LOOP(q, n / 4) {
            const float4 v = x4[q];
            const ushort4 b = make_ushort4(bf16_bits_of(v.x), bf16_bits_of(v.y),
                                           bf16_bits_of(v.z), bf16_bits_of(v.w));
            out4[q] = b;
            x4[q] = make_float4(value_of(b.x), value_of(b.y), value_of(b.z), value_of(b.w));
        }
    }
    const int64_t first = vector ? n / 4 * 4 : 0;
    SNN_GRID_STRIDE_LOOP(j, n - first) {
        const int64_t i = first + j;
        out[i] = bf16_bits_of(x[i]);
        x[i] = value_of(out[i]);
    }
}

static __global__ void unpack_bf16_kernel(float *__restrict__ x, const uint16_t *__restrict__ in,
                                          int64_t n, bool vector)
{
    if (vector) {
        float4 *x4 = reinterpret_cast<float4 *>(x);
        const ushort4 *in4 = reinterpret_cast<const ushort4 *>(in);
        SNN_GRID_STRIDE_LOOP(q, n / 4) {
            const ushort4 b = in4[q];
            x4[q] = make_float4(value_of(b.x), value_of(b.y), value_of(b.z), value_of(b.w));
        }
    }
    const int64_t first = vector ? n / 4 * 4 : 0;
    SNN_GRID_STRIDE_LOOP(j, n - first) x[first + j] = value_of(in[first + j]);
}

/* float4 and ushort4 accesses need 16- and 8-byte alignment */
static bool vectorisable(const void *x, const void *b)
{
    return (uintptr_t)x % 16 == 0 && (uintptr_t)b % 8 == 0;
}

extern "C" void snn_round_bf16_cuda(float *x, uint16_t *bf16_out, int64_t n)
{
    if (n <= 0) return;
    const bool vector = vectorisable(x, bf16_out);
    SNN_CUDA_LAUNCH(round_bf16_kernel, snn_cuda_grid(vector ? n / 4 + 1 : n, SNN_CUDA_BLOCK),
                    SNN_CUDA_BLOCK, 0, x, bf16_out, n, vector);
}

extern "C" void snn_unpack_bf16_cuda(float *x, const uint16_t *bf16_in, int64_t n)
{
    if (n <= 0) return;
    const bool vector = vectorisable(x, bf16_in);
    SNN_CUDA_LAUNCH(unpack_bf16_kernel, snn_cuda_grid(vector ? n / 4 + 1 : n, SNN_CUDA_BLOCK),
                    SNN_CUDA_BLOCK, 0, x, bf16_in, n, vector);
}
