/*
 * sparse_conv.cu - the sparse conv on the GPU, two paths over the same sum: a GEMM over each
 * image's active input channels (this file), and an event-driven kernel over its nonzero
 * inputs (sparse_conv_event.cu; with its weight rows in registers from L1/L2, or staged in
 * shared memory: the EVENT_SMEM path). Both list the active channels on the device. The entry
 * points at the end of this file pick the path.
 *
 * GEMM path:
 *   y[n, o, p] = bias[o] + sum_{k in K(n)} wt[k, o] col_n[k, p]
 *   K(n)       = {(c, kh, kw) : c in A(n)},  A(n) = {c : activity[n, c] != 0}, c ascending
 *   col_n[(c, kh, kw), p] = x[n, c, oh stride - pad + kh, ow stride - pad + kw]  (0 outside)
 *   wt[(c, kh, kw), o]    = w[o, c, kh, kw]      (transposed per call, or kept by a SparseConv2d)
 *
 * That is the dense conv's GEMM, out (C_out, P) = W (C_out, CK) x col (CK, P), with the rows of
 * silent channels left out: |A(n)| KH KW instead of C_in KH KW. The GEMM is implicit: the
 * columns are gathered from x straight into shared memory, never written out.
 *
 * Active channels. A(n) comes from the neuron's activity (N, C_in) on the device: each block
 * compacts its image's row into an ordered list in shared memory (a warp ballot and a prefix
 * over the 8 warps per 256 channels), so there is no separate scan of x and NO HOST SYNC: the
 * launch does not depend on the data, any density (0 to C_in) runs, a denser batch just takes
 * longer.
 *
 * Tiling (a plain shared-memory SGEMM). One block of 256 threads = one image n, TP output
 * positions x TO output channels (TP TO = 4096; (64, 64), (32, 128), (16, 256) or (128, 32),
 * chosen per layer to waste the fewest padded outputs: 4x4 planes take TP = 16). The K loop
 * walks the image's compacted rows KC = 16 at a time: the block stages As (KC, TO) from wt
 * (coalesced along o) and Bs (KC, TP) gathered from x (coalesced along p), then every thread
 * adds the outer product of its 4 channels x 4 positions: per k, two 16-byte shared loads
 * (As broadcast across the warp) feed 16 FMAs.
 * Work per image: C_out |A(n)| KH KW P FMAs (dense: C_out C_in KH KW P).
 * Traffic per block: KC (TO + TP) floats per K step from L2 (wt and the active planes of x,
 * both reused by many blocks), and TO TP outputs written once.
 *
 * Order. Every output sums its terms in ascending k = (c, kh, kw) with one fmaf each, padded
 * rows adding exactly 0, i.e. the plain sequential k order; leaving out a silent channel's rows
 * is exact (they add +-0 to a sum that is never -0). So the kernel equals a sequential-order
 * reference bit for bit for {0, 1} inputs (tests/test_cuda_sparse.c), while the dense CUDA conv
 * (cuBLAS, its own order and split) agrees within fp32 rounding of a different order.
 */
#include <stdint.h>

#include "tensor/arena.h"
#include "kernels/cuda/cuda_common.cuh"
#include "tensor/error.h"
#include "sparse.h"
#include "sparse_conv_cuda.cuh"

#define SP_KC 16              /* rows of K staged per step */
#define SP_MICRO 4            /* each thread: 4 output channels x 4 positions */

/* wt (K, C_out) = w (C_out, K) transposed through 32 x 32 shared tiles, so that both the read
 * and the write are coalesced. Traffic: the weight read once and written once. */
static __global__ void sparse_transpose_weights_kernel(float *__restrict__ wt,
                                                       const float *__restrict__ w, int C_out,
                                                       int K)
{
    __shared__ float tile[32][33];   /* +1 column: no bank conflicts on the transposed read */
    const int k0 = blockIdx.x * 32, o0 = blockIdx.y * 32;
    for (int i = threadIdx.y; i < 32; i += blockDim.y) {
        const int o = o0 + i, k = k0 + threadIdx.x;
        if (o < C_out && k < K) tile[i][threadIdx.x] = w[(size_t)o * K + k];
    }
    __syncthreads();
    for (int i = threadIdx.y; i < 32; i += blockDim.y) {
        const int k = k0 + i, o = o0 + threadIdx.x;
        if (o < C_out && k < K) wt[(size_t)k * C_out + o] = tile[threadIdx.x][i];
    }
}

/* KSIZE: the kernel's side when it is 1 or 3 (divisions by KK become multiplies), 0 for any. */
template <int TP, int TO, int KSIZE>
static __global__ void __launch_bounds__(SP_THREADS)
sparse_conv_forward_kernel(float *__restrict__ y, const float *__restrict__ x,
                           const float *__restrict__ wt, const float *__restrict__ bias,
                           const float *__restrict__ activity, snn_conv2d_dims d, int p_tiles,
                           int o_tiles)
{
    /* float4 loads of As per thread per K step, gathered Bs entries per thread */
    constexpr int A_VEC = (SP_KC * TO / 4 + SP_THREADS - 1) / SP_THREADS;
    constexpr int B_PER = SP_KC * TP / SP_THREADS;
    static_assert(TP * TO == SP_THREADS * SP_MICRO * SP_MICRO, "one 4x4 micro-tile per thread");
    static_assert(SP_THREADS % TP == 0 && B_PER >= 1, "Bs gather: a fixed position per thread");
    extern __shared__ int list[];                        /* C_in: the active channels */
    __shared__ __align__(16) float As[2][SP_KC][TO];     /* wt rows k0 .. k0 + KC, o0 .. o0 + TO */
    __shared__ __align__(16) float Bs[2][SP_KC][TP];     /* col_n rows k0 .. k0 + KC, p0 .. + TP */

    const int KW = KSIZE ? KSIZE : d.KW, KK = KSIZE ? KSIZE * KSIZE : d.KH * d.KW;
    const int P = d.H_out * d.W_out, HW = d.H * d.W;
    const int tid = threadIdx.x;
    int block = blockIdx.x;
    const int pt = block % p_tiles;
    block /= p_tiles;
    const int ot = block % o_tiles;
    const int n = block / o_tiles;
    const int p0 = pt * TP, o0 = ot * TO;

    const int rows = sparse_active_channels(list, activity, n, d.C_in) * KK;

    /* As loads: thread tid fetches float4 number tid + j 256 of the (KC, TO / 4) tile: always
     * the same 4 columns, rows a_r0 + j a_dr */
    const int a_c4 = tid % (TO / 4), a_r0 = tid / (TO / 4), a_dr = SP_THREADS / (TO / 4);
    const bool a_vec = d.C_out % 4 == 0;   /* rows of wt are 16-byte aligned */
    /* Bs gathers: a fixed position, rows b_r0 + j (256 / TP) */
    const int b_pp = tid % TP, b_r0 = tid / TP;
    const int b_p = p0 + b_pp;
    const bool b_ok = b_p < P;
    const int b_oh = b_ok ? b_p / d.W_out : 0, b_ow = b_ok ? b_p % d.W_out : 0;
    const int ih0 = b_oh * d.stride - d.pad, iw0 = b_ow * d.stride - d.pad;
    const float *x_n = x + (size_t)n * d.C_in * HW;

    float4 a_next[A_VEC];
    float b_next[B_PER];
    /* global -> registers for the K step starting at k0 (zeros past `rows` and C_out) */
    auto fetch = [&](int k0) {
#pragma unroll
        for (int j = 0; j < A_VEC; j++) {
            const int r = a_r0 + j * a_dr, k = k0 + r, o = o0 + 4 * a_c4;
            float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            if (r < SP_KC && k < rows && o < d.C_out) {
                const int a = k / KK, t = k - a * KK;
                const float *src = wt + ((size_t)list[a] * KK + t) * d.C_out + o;
                if (a_vec) {
                    v = __ldg((const float4 *)src);
                } else {
                    v.x = src[0];
                    if (o + 1 < d.C_out) v.y = src[1];
                    if (o + 2 < d.C_out) v.z = src[2];
                    if (o + 3 < d.C_out) v.w = src[3];
                }
            }
            a_next[j] = v;
        }
#pragma unroll
        for (int j = 0; j < B_PER; j++) {
            const int k = k0 + b_r0 + j * (SP_THREADS / TP);
            float v = 0.0f;
            if (k < rows && b_ok) {
                const int a = k / KK, t = k - a * KK;
                const int kh = t / KW, kw = t - kh * KW;
                const int ih = ih0 + kh, iw = iw0 + kw;
                if (ih >= 0 && ih < d.H && iw >= 0 && iw < d.W)
                    v = __ldg(x_n + (size_t)list[a] * HW + ih * d.W + iw);
            }
            b_next[j] = v;
        }
    };

    /* this thread's micro-tile: channels o0 + 4 to .. + 4, positions p0 + 4 tp .. + 4 */
    const int tp = tid % (TP / SP_MICRO), to = tid / (TP / SP_MICRO);
    float acc[SP_MICRO][SP_MICRO];
#pragma unroll
    for (int i = 0; i < SP_MICRO; i++)
#pragma unroll
        for (int j = 0; j < SP_MICRO; j++) acc[i][j] = 0.0f;

    /* Double buffered: step s computes from buffer s & 1 while the loads of step s + 1 are in
     * flight in registers. One barrier per step: it orders this step's stores before anyone
     * reads them, and everyone's reads of step s - 1 (same buffer as s + 1) before the stores
     * of step s + 1. */
    if (rows > 0) fetch(0);
    for (int k0 = 0, buf = 0; k0 < rows; k0 += SP_KC, buf ^= 1) {
#pragma unroll
        for (int j = 0; j < A_VEC; j++) {
            const int r = a_r0 + j * a_dr;
            if (r < SP_KC) *(float4 *)&As[buf][r][4 * a_c4] = a_next[j];
        }
#pragma unroll
        for (int j = 0; j < B_PER; j++) Bs[buf][b_r0 + j * (SP_THREADS / TP)][b_pp] = b_next[j];
        __syncthreads();
        if (k0 + SP_KC < rows) fetch(k0 + SP_KC);
#pragma unroll
        for (int r = 0; r < SP_KC; r++) {
            const float4 a4 = *(const float4 *)&As[buf][r][to * SP_MICRO];
            const float4 b4 = *(const float4 *)&Bs[buf][r][tp * SP_MICRO];
            const float a[SP_MICRO] = {a4.x, a4.y, a4.z, a4.w};
            const float b[SP_MICRO] = {b4.x, b4.y, b4.z, b4.w};
#pragma unroll
            for (int i = 0; i < SP_MICRO; i++)
#pragma unroll
                for (int j = 0; j < SP_MICRO; j++) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
    }

    const int pb = p0 + tp * SP_MICRO;
#pragma unroll
    for (int i = 0; i < SP_MICRO; i++) {
        const int o = o0 + to * SP_MICRO + i;
        if (o >= d.C_out) continue;
        const float b = bias ? bias[o] : 0.0f;
        float *row = y + ((size_t)n * d.C_out + o) * P;
        if (P % 4 == 0 && pb + SP_MICRO <= P) {   /* 16-byte aligned: P and pb multiples of 4 */
            *(float4 *)(row + pb) = make_float4(acc[i][0] + b, acc[i][1] + b, acc[i][2] + b,
                                                acc[i][3] + b);
        } else {
#pragma unroll
            for (int j = 0; j < SP_MICRO; j++)
                if (pb + j < P) row[pb + j] = acc[i][j] + b;
        }
    }
}

/* Launches one tile shape, specialised on the kernel size. */
template <int TP, int TO>
static void launch_tiles(float *y, const float *x, const float *wt, const float *bias,
                         const snn_conv2d_dims *d, const float *activity, int p_tiles, int o_tiles,
                         unsigned blocks, size_t list_bytes)
{
    void (*kernel)(float *, const float *, const float *, const float *, const float *,
                   snn_conv2d_dims, int, int) = sparse_conv_forward_kernel<TP, TO, 0>;
    if (d->KH == 3 && d->KW == 3) kernel = sparse_conv_forward_kernel<TP, TO, 3>;
    else if (d->KH == 1 && d->KW == 1) kernel = sparse_conv_forward_kernel<TP, TO, 1>;
    SNN_CUDA_LAUNCH(kernel, blocks, SP_THREADS, list_bytes, y, x, wt, bias, activity, *d,
                    p_tiles, o_tiles);
}

extern "C" void snn_sparse_transpose_weights_cuda(float *wt, const float *w, int C_out, int64_t K)
{
    if (C_out <= 0 || K <= 0) return;
    SNN_ASSERT(K * C_out <= INT32_MAX);
    const dim3 grid((unsigned)((K + 31) / 32), (unsigned)((C_out + 31) / 32)), block(32, 8);
    sparse_transpose_weights_kernel<<<grid, block, 0, snn_cuda_stream()>>>(wt, w, C_out, (int)K);
    SNN_CUDA_CHECK(cudaGetLastError());   /* the launch itself (a 2-D grid, so not SNN_CUDA_LAUNCH) */
}

extern "C" snn_status snn_sparse_conv2d_prepared_cuda(float *y, const float *x, const float *wt,
                                                      const float *bias, const snn_conv2d_dims *d,
                                                      const float *activity, snn_sparse_path path)
{
    if (d->N <= 0 || d->C_out <= 0) return SNN_OK;
    const int P = d->H_out * d->W_out;
    const int64_t K = (int64_t)d->C_in * d->KH * d->KW;
    if (K * d->C_out > INT32_MAX)
        return snn_error(SNN_ERR_UNSUPPORTED, "snn_sparse_conv2d_cuda: weight too large (C_out %d "
                         "x C_in %d x %dx%d over 2^31 floats)", d->C_out, d->C_in, d->KH, d->KW);
    if (path == SNN_SPARSE_EVENT || path == SNN_SPARSE_EVENT_SMEM) {
        if (!snn_sparse_event_launch_cuda(y, x, wt, bias, d, activity,
                                          path == SNN_SPARSE_EVENT_SMEM))
            return snn_error(SNN_ERR_UNSUPPORTED, "snn_sparse_conv2d_cuda: no event kernel for "
                             "kernel %dx%d (at most 32 taps, W + 2 pad at most 64: got %d), C_in "
                             "%d, C_out %d (shared memory)", d->KH, d->KW, d->W + 2 * d->pad,
                             d->C_in, d->C_out);
        return SNN_OK;
    }

    /* the tile shape that pads the fewest outputs; the square one on a tie */
    static const int shapes[4][2] = {{64, 64}, {32, 128}, {128, 32}, {16, 256}};
    int best = 0;
    int64_t best_cost = INT64_MAX;
    for (int s = 0; s < 4; s++) {
        const int64_t tp = shapes[s][0], to = shapes[s][1];
        const int64_t cost = (P + tp - 1) / tp * tp * ((d->C_out + to - 1) / to * to);
        if (cost < best_cost) best_cost = cost, best = s;
    }
    const int TP = shapes[best][0], TO = shapes[best][1];
    const int p_tiles = (P + TP - 1) / TP, o_tiles = (d->C_out + TO - 1) / TO;
    const int64_t blocks = (int64_t)d->N * p_tiles * o_tiles;
    const size_t list_bytes = (size_t)d->C_in * sizeof(int);
    const size_t static_bytes = 2 * (size_t)SP_KC * (TP + TO) * sizeof(float);
    if (list_bytes + static_bytes > 48 * 1024 || blocks > 0x7fffffff)
        return snn_error(SNN_ERR_UNSUPPORTED, "snn_sparse_conv2d_cuda: layer too large (C_in %d, "
                         "C_out %d, kernel %dx%d: %zu bytes of shared memory, %lld blocks)",
                         d->C_in, d->C_out, d->KH, d->KW, list_bytes + static_bytes,
                         (long long)blocks);
    switch (best) {
    case 0: launch_tiles<64, 64>(y, x, wt, bias, d, activity, p_tiles, o_tiles, (unsigned)blocks, list_bytes); break;
    case 1: launch_tiles<32, 128>(y, x, wt, bias, d, activity, p_tiles, o_tiles, (unsigned)blocks, list_bytes); break;
    case 2: launch_tiles<128, 32>(y, x, wt, bias, d, activity, p_tiles, o_tiles, (unsigned)blocks, list_bytes); break;
    default: launch_tiles<16, 256>(y, x, wt, bias, d, activity, p_tiles, o_tiles, (unsigned)blocks, list_bytes); break;
    }
    return SNN_OK;
}

extern "C" snn_status snn_sparse_conv2d_cuda(float *y, const float *x, const float *w,
                                             const float *bias, const snn_conv2d_dims *d,
                                             const float *activity, snn_sparse_path path)
{
    if (d->N <= 0 || d->C_out <= 0) return SNN_OK;
    const int64_t K = (int64_t)d->C_in * d->KH * d->KW;
    if (K * d->C_out > INT32_MAX)   /* before the transpose, which asserts it */
        return snn_error(SNN_ERR_UNSUPPORTED, "snn_sparse_conv2d_cuda: weight too large (C_out %d "
                         "x C_in %d x %dx%d over 2^31 floats)", d->C_out, d->C_in, d->KH, d->KW);
    /* wt (K, C_out): scratch from the step arena, given back once the kernels are queued */
    snn_step_scratch mark = snn_step_scratch_mark(SNN_CUDA);
    float *wt = (float *)snn_step_alloc("snn_sparse_conv2d_cuda (transposed weights)",
                                        (size_t)(K * d->C_out) * sizeof(float), SNN_CUDA);
    if (!wt) return snn_last_status();
    snn_sparse_transpose_weights_cuda(wt, w, d->C_out, K);
    snn_status st = snn_sparse_conv2d_prepared_cuda(y, x, wt, bias, d, activity, path);
    snn_step_scratch_release(SNN_CUDA, mark);
    return st;
}
