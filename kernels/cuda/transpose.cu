/*
 * transpose.cu - the CUDA kernel that swaps the first two axes of a tensor. It must match
 * kernels/ref/transpose.c (snn_transpose01_ref; the fast CPU table uses that loop too).
 *
 *   transpose01   x (rows, cols, inner) -> out (cols, rows, inner):  out[c, r, i] (+)= x[r, c, i]
 *
 * One thread per output element, in output order, so the writes are coalesced and the reads
 * are too whenever inner >= 32 (the rows encoding: inner = W); with inner = 1 (the pixels
 * encoding) the reads stride by cols. The tensors it moves are one batch of images: a tiled
 * shared-memory transpose would save little next to the network that follows.
 */
#include "cuda_common.cuh"
#include "kernels_cuda.h"

/* out[c, r, i] (+)= x[r, c, i], k = (c * rows + r) * inner + i.
 * Traffic: 4 B read + 4 B written per element (8 B read-modify-write when accumulating).
 * Reference: snn_transpose01_ref. */
static __global__ void transpose01_kernel(float *out, const float *x, int64_t rows, int64_t cols,
                                          int64_t inner, bool accumulate)
{
    SNN_GRID_STRIDE_LOOP(k, rows * cols * inner) {
        int64_t i, r;
        const int64_t c = snn_divmod(snn_divmod(k, inner, &i), rows, &r);
        const float v = x[(r * cols + c) * inner + i];
        if (accumulate) out[k] += v;
        else out[k] = v;
    }
}

extern "C" void snn_transpose01_cuda(float *out, const float *x, int64_t rows, int64_t cols,
                                     int64_t inner, bool accumulate)
{
    const int64_t n = rows * cols * inner;
    if (n <= 0) return;
    SNN_CUDA_LAUNCH(transpose01_kernel, snn_cuda_grid(n, SNN_CUDA_BLOCK), SNN_CUDA_BLOCK, 0, out,
                    x, rows, cols, inner, accumulate);
}
