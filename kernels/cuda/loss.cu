/*
 * loss.cu - CUDA kernels of the classification losses: log-softmax, negative log-likelihood,
 * one-hot. Must match kernels/cpu/loss.c (snn_*_cpu of the same names), whose header derives them:
 *
 *     out[n, c] = x[n, c] - (m + log sum_j exp(x[n, j] - m)),   m = max_j x[n, j]
 *     dx[n, c] += dout[n, c] - exp(out[n, c]) sum_j dout[n, j]
 *     loss      = -scale sum_n logp[n, label[n]];   dlogp[n, label[n]] += -scale dloss
 *
 * Rows are short (C = 10 to 1000 classes), so one warp owns a row: lanes stride over the
 * classes, a shuffle tree combines max and sums, every lane writes its share. Row sums run in
 * double, as on the CPU. The loss itself is one block summing N terms in a fixed tree (N is a
 * batch): deterministic. Labels are class indices stored as floats, checked by the op layer.
 */
#include "cuda_common.cuh"
#include "kernels_cuda.h"

#define LOSS_BLOCK 256
#define ROWS_PER_BLOCK (LOSS_BLOCK / 32)

static __device__ __forceinline__ float warp_max_all(float v)
{
    for (int offset = 16; offset > 0; offset >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
    return v;
}

static __device__ __forceinline__ double warp_sum_all(double v)
{
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v;
}

/* One warp per row of x (N, C).  Traffic: x read twice (the second time from L1/L2), out
 * written: 8 B read + 4 B written per element; one expf per element, one log per row.
 * CPU: snn_log_softmax_forward_cpu. */
static __global__ void log_softmax_forward_kernel(float *out, const float *x, int N, int C)
{
    const int lane = threadIdx.x & 31;
    for (int64_t n = (int64_t)blockIdx.x * ROWS_PER_BLOCK + (threadIdx.x >> 5); n < N;
         n += (int64_t)gridDim.x * ROWS_PER_BLOCK) {
        const float *xr = x + n * C;   // (C)
        float *orow = out + n * C;     // (C)
        float m = -INFINITY;
        for (int c = lane; c < C; c += 32) m = fmaxf(m, xr[c]);
        m = warp_max_all(m);
        double sum = 0.0;
        for (int c = lane; c < C; c += 32) sum += (double)expf(xr[c] - m);
        sum = warp_sum_all(sum);
        const float lse = (float)((double)m + log(sum));
        for (int c = lane; c < C; c += 32) orow[c] = xr[c] - lse;
    }
}

extern "C" void snn_log_softmax_forward_cuda(float *out, const float *x, int N, int C)
{
    if (N <= 0 || C <= 0) return;
    SNN_CUDA_LAUNCH(log_softmax_forward_kernel, snn_cuda_grid(N, ROWS_PER_BLOCK), LOSS_BLOCK, 0,
                    out, x, N, C);
}

/* One warp per row.  Traffic: dout read twice, out read once, dx read-modify-written:
 * 16 B read + 4 B written per element.  CPU: snn_log_softmax_backward_cpu. */
static __global__ void log_softmax_backward_kernel(float *dx, const float *dout, const float *out,
                                                   int N, int C)
{
    const int lane = threadIdx.x & 31;
    for (int64_t n = (int64_t)blockIdx.x * ROWS_PER_BLOCK + (threadIdx.x >> 5); n < N;
         n += (int64_t)gridDim.x * ROWS_PER_BLOCK) {
        const float *gr = dout + n * C;    // (C)
        const float *orow = out + n * C;   // (C)
        float *dxr = dx + n * C;           // (C)
        double sum = 0.0;
        for (int c = lane; c < C; c += 32) sum += (double)gr[c];
        const float s = (float)warp_sum_all(sum);
        for (int c = lane; c < C; c += 32) dxr[c] += gr[c] - expf(orow[c]) * s;
    }
}

extern "C" void snn_log_softmax_backward_cuda(float *dx, const float *dout, const float *out,
                                              int N, int C)
{
    if (!dx || N <= 0 || C <= 0) return;
    SNN_CUDA_LAUNCH(log_softmax_backward_kernel, snn_cuda_grid(N, ROWS_PER_BLOCK), LOSS_BLOCK, 0,
                    dx, dout, out, N, C);
}

/* One block: loss[0] = -scale sum_n logp[n, label[n]] (double, fixed tree).
 * Traffic: 8 B read per row, 4 B written.  CPU: snn_nll_forward_ref. */
static __global__ void nll_forward_kernel(float *loss, const float *logp, const float *labels,
                                          int N, int C, float scale)
{
    double acc = 0.0;
    for (int n = threadIdx.x; n < N; n += blockDim.x)
        acc += (double)logp[(int64_t)n * C + (int)labels[n]];
    acc = snn_block_sum(acc);
    if (threadIdx.x == 0) loss[0] = (float)(-(double)scale * acc);
}

extern "C" void snn_nll_forward_cuda(float *loss, const float *logp, const float *labels, int N,
                                     int C, float scale)
{
    /* N = 0 still writes loss = 0 (-scale times an empty sum) */
    SNN_CUDA_LAUNCH(nll_forward_kernel, 1, LOSS_BLOCK, 0, loss, logp, labels, N, C, scale);
}

/* dlogp[n, label[n]] += -scale dloss[0], one thread per row (rows never collide).
 * dloss is read on the device, so the backward needs no host sync.  CPU: snn_nll_backward_ref. */
static __global__ void nll_backward_kernel(float *dlogp, const float *dloss, const float *labels,
                                           int N, int C, float scale)
{
    SNN_GRID_STRIDE_LOOP(n, N) {
        const float g = -scale * dloss[0];
        dlogp[n * C + (int)labels[n]] += g;
    }
}

extern "C" void snn_nll_backward_cuda(float *dlogp, const float *dloss, const float *labels, int N,
                                      int C, float scale)
{
    if (!dlogp || N <= 0) return;
    SNN_CUDA_LAUNCH(nll_backward_kernel, snn_cuda_grid(N, SNN_CUDA_BLOCK), SNN_CUDA_BLOCK, 0,
                    dlogp, dloss, labels, N, C, scale);
}

/* out[n, c] = c == label[n] ? 1 : 0.  Traffic: 4 B written per element.
 * CPU: snn_one_hot_cpu. */
static __global__ void one_hot_forward_kernel(float *out, const float *labels, int N, int C)
{
    SNN_GRID_STRIDE_LOOP(k, (int64_t)N * C) {
        int64_t c;
        const int64_t n = snn_divmod(k, C, &c);
        out[k] = c == (int64_t)(int)labels[n] ? 1.0f : 0.0f;
    }
}

extern "C" void snn_one_hot_cuda(float *out, const float *labels, int N, int C)
{
    const int64_t n = (int64_t)N * C;
    if (n <= 0) return;
    SNN_CUDA_LAUNCH(one_hot_forward_kernel, snn_cuda_grid(n, SNN_CUDA_BLOCK), SNN_CUDA_BLOCK, 0,
                    out, labels, N, C);
}
