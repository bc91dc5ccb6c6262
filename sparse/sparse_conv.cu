/*
 * sparse_conv.cu - the sparse conv on the GPU: per image, the active input channels only.
 *
 *   y[n, o, p] = bias[o] + sum_{c in A(n)} sum_{kh, kw} w[o, c, kh, kw] x[n, c, p*s - pad + (kh, kw)]
 *
 * A(n) comes from the neuron's activity (N, C_in) on the device: each block compacts its image's
 * row into an ordered list of active channels in shared memory (a warp ballot and a prefix over
 * the 8 warps per 256 channels), so there is no separate scan of x and NO HOST SYNC: the kernel
 * handles any number of active channels (0 to C_in), the launch does not depend on the data,
 * and a denser batch simply takes longer.
 *
 * One block = one image n, one tile of TP output positions and OT = 16 * (256 / TP) output
 * channels (TP = 64, 32 or 16 by the size of the output plane, so 4x4 planes waste nothing).
 * Thread: one position p, 16 output channels, 16 accumulators in registers. For each active
 * channel (ascending) the block stages w[o0 : o0+OT, c, :, :] in shared memory, then each thread
 * reads its KH*KW input values and, for every nonzero one, does 16 FMAs against the staged
 * weights, laid out (KH*KW, OT) so a thread's 16 are four 16-byte loads, the same for the whole
 * warp (a shared-memory broadcast).
 * Work: |A| * KH*KW * (1 load + 16 FMA) per thread, against C_in * KH*KW for the dense conv;
 * traffic: the active planes of x (L1/L2 cached, read KH*KW times) and OT * KH*KW weights per
 * active channel per block.
 *
 * Order: each output sums its terms in ascending (c, kh, kw) with one FMA each, i.e. the plain
 * sequential k order; zero inputs are skipped, which is exact for a partial sum that is never -0.
 * The dense CUDA conv uses cuBLAS, whose order (and split-K) is its own, so sparse == dense
 * within fp32 rounding of a different summation order (tests/test_cuda_sparse.c states the
 * tolerance), while sparse == the sequential-order reference exactly for {0, 1} inputs.
 * With TF32 turned on for cuBLAS the dense side differs more; the test compares in fp32.
 */
#include <stdint.h>

#include "tensor/cuda_common.cuh"
#include "tensor/error.h"
#include "sparse.h"

#define SP_THREADS 256
#define SP_PER_THREAD 16

/* dynamic shared memory: list (C_in ints) then the weight tile (OT * KK floats) */
static __global__ void sparse_conv_forward_kernel(float *__restrict__ y, const float *__restrict__ x,
                                                  const float *__restrict__ w,
                                                  const float *__restrict__ bias,
                                                  const float *__restrict__ activity,
                                                  snn_conv2d_dims d, int TP, int OT, int p_tiles,
                                                  int o_tiles)
{
    extern __shared__ float smem[];
    __shared__ int warp_base[SP_THREADS / 32];
    __shared__ int total;
    int *list = (int *)smem;
    float *ws = smem + ((d.C_in + 3) / 4) * 4;   /* (KK, OT): o contiguous, 16-byte aligned */

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    int block = blockIdx.x;
    const int pt = block % p_tiles;
    block /= p_tiles;
    const int ot = block % o_tiles;
    const int n = block / o_tiles;
    const int KK = d.KH * d.KW, P = d.H_out * d.W_out;

    /* ordered list of the active channels of image n */
    if (tid == 0) total = 0;
    __syncthreads();
    for (int base = 0; base < d.C_in; base += SP_THREADS) {
        const int c = base + tid;
        const bool on = c < d.C_in && activity[(int64_t)n * d.C_in + c] != 0.0f;
        const unsigned ballot = __ballot_sync(0xffffffffu, on);
        if (lane == 0) warp_base[warp] = __popc(ballot);
        __syncthreads();
        if (tid == 0) {
            int run = total;
            for (int k = 0; k < SP_THREADS / 32; k++) {
                int cnt = warp_base[k];
                warp_base[k] = run;
                run += cnt;
            }
            total = run;
        }
        __syncthreads();
        if (on) list[warp_base[warp] + __popc(ballot & ((1u << lane) - 1u))] = c;
        __syncthreads();
    }
    const int count = total;

    const int p = pt * TP + tid % TP;
    const int og = tid / TP;                       /* which 16 of the OT channels */
    const int o0 = ot * OT;
    const bool p_ok = p < P;
    const int oh = p_ok ? p / d.W_out : 0, ow = p_ok ? p % d.W_out : 0;
    float acc[SP_PER_THREAD];
#pragma unroll
    for (int j = 0; j < SP_PER_THREAD; j++) acc[j] = 0.0f;

    for (int a = 0; a < count; a++) {
        const int c = list[a];
        __syncthreads();  /* the previous channel's tile is no longer read */
        for (int i = tid; i < OT * KK; i += SP_THREADS) {
            const int o = o0 + i % OT, t = i / OT;
            ws[i] = o < d.C_out ? w[((int64_t)o * d.C_in + c) * KK + t] : 0.0f;
        }
        __syncthreads();
        if (!p_ok) continue;
        const float *plane = x + ((int64_t)n * d.C_in + c) * d.H * d.W;
        for (int t = 0; t < KK; t++) {
            const int ih = oh * d.stride - d.pad + t / d.KW, iw = ow * d.stride - d.pad + t % d.KW;
            if (ih < 0 || ih >= d.H || iw < 0 || iw >= d.W) continue;
            const float v = plane[ih * d.W + iw];
            if (v == 0.0f) continue;
            /* the warp's threads share og: 4 broadcast 16-byte loads for 16 FMAs */
            const float4 *wr = (const float4 *)(ws + t * OT + og * SP_PER_THREAD);
#pragma unroll
            for (int q = 0; q < SP_PER_THREAD / 4; q++) {
                const float4 w4 = wr[q];
                acc[4 * q + 0] = fmaf(v, w4.x, acc[4 * q + 0]);
                acc[4 * q + 1] = fmaf(v, w4.y, acc[4 * q + 1]);
                acc[4 * q + 2] = fmaf(v, w4.z, acc[4 * q + 2]);
                acc[4 * q + 3] = fmaf(v, w4.w, acc[4 * q + 3]);
            }
        }
    }
    if (!p_ok) return;
#pragma unroll
    for (int j = 0; j < SP_PER_THREAD; j++) {
        const int o = o0 + og * SP_PER_THREAD + j;
        if (o < d.C_out) y[((int64_t)n * d.C_out + o) * P + p] = acc[j] + (bias ? bias[o] : 0.0f);
    }
}

extern "C" snn_status snn_sparse_conv2d_cuda(float *y, const float *x, const float *w,
                                             const float *bias, const snn_conv2d_dims *d,
                                             const float *activity)
{
    if (d->N <= 0) return SNN_OK;
    const int P = d->H_out * d->W_out, KK = d->KH * d->KW;
    const int TP = P >= 64 ? 64 : P > 16 ? 32 : 16;
    const int OT = SP_PER_THREAD * (SP_THREADS / TP);
    const int p_tiles = (P + TP - 1) / TP, o_tiles = (d->C_out + OT - 1) / OT;
    const size_t shmem = (size_t)((d->C_in + 3) / 4 * 4) * sizeof(int) + (size_t)OT * KK * sizeof(float);
    const int64_t blocks = (int64_t)d->N * p_tiles * o_tiles;
    if (shmem > 48 * 1024 || blocks > 0x7fffffff)
        return snn_error(SNN_ERR_UNSUPPORTED, "snn_sparse_conv2d_cuda: layer too large (C_in %d, "
                         "kernel %dx%d: %zu bytes of shared memory; %lld blocks)", d->C_in, d->KH,
                         d->KW, shmem, (long long)blocks);
    SNN_CUDA_LAUNCH(sparse_conv_forward_kernel, (unsigned)blocks, SP_THREADS, shmem, y, x, w, bias,
                    activity, *d, TP, OT, p_tiles, o_tiles);
    return SNN_OK;
}
