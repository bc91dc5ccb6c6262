/*
 * sparse_conv_cuda.cuh - what the two CUDA sparse-conv files share (internal header, included by
 * sparse_conv.cu and sparse_conv_event.cu only): the block size, the device function that lists
 * an image's active input channels, and the event path's launcher.
 */
#ifndef SNN_SPARSE_CONV_CUDA_CUH
#define SNN_SPARSE_CONV_CUDA_CUH

#include "kernels/cuda/cuda_common.cuh"
#include "sparse.h"

#define SP_THREADS 256

/* The ordered list of image n's active channels into list[], its length returned (all threads).
 * Each warp ballots 32 channels, thread 0 turns the 8 warp counts into offsets. */
static __device__ int sparse_active_channels(int *list, const float *__restrict__ activity, int n,
                                             int C_in)
{
    __shared__ int warp_base[SP_THREADS / 32];
    __shared__ int total;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    if (tid == 0) total = 0;
    __syncthreads();
    for (int base = 0; base < C_in; base += SP_THREADS) {
        const int c = base + tid;
        const bool on = c < C_in && activity[(size_t)n * C_in + c] != 0.0f;
        const unsigned ballot = __ballot_sync(0xffffffffu, on);
        if (lane == 0) warp_base[warp] = __popc(ballot);
        __syncthreads();
        if (tid == 0) {
            int run = total;
            for (int k = 0; k < SP_THREADS / 32; k++) {
                const int count = warp_base[k];
                warp_base[k] = run;
                run += count;
            }
            total = run;
        }
        __syncthreads();
        if (on) list[warp_base[warp] + __popc(ballot & ((1u << lane) - 1u))] = c;
        __syncthreads();
    }
    return total;
}

/* The event-driven kernel on these dims (sparse_conv_event.cu): y (N, C_out, H_out, W_out) from
 * x, wt (C_in KH KW, C_out), bias (may be NULL) and activity (N, C_in). staged: the EVENT_SMEM
 * variant (the weight rows staged in shared memory). False, and nothing launched, when the
 * kernel cannot take the layer (more than 32 taps, a padded row over 64, or shared memory). */
bool snn_sparse_event_launch_cuda(float *y, const float *x, const float *wt, const float *bias,
                                  const snn_conv2d_dims *d, const float *activity, bool staged);

#endif
