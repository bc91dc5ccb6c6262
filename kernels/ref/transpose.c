/*
 * transpose.c - the reference kernel that swaps the first two axes of a tensor.
 *
 * x is viewed as (rows, cols, inner) and written as out (cols, rows, inner):
 *
 *   transpose01   out[c, r, i] (+)= x[r, c, i]
 *
 * (= on the forward, += as the backward: the gradient of a transpose is the transpose of the
 * gradient, so the backward is this kernel again with rows and cols exchanged.) The sequence
 * encodings of the recurrent SNN (nn/model_rsnn.c) use it to turn images (N, C, H, W), read as
 * (N*C, H, W), into the time-major (H, N*C, W) that every multi-step layer takes.
 *
 * Memory traffic: each element is read once and written once (read twice with accumulate);
 * runs of `inner` contiguous floats on both sides. The fast CPU table takes this loop as it
 * is: the tensors it transposes (one batch of images) are small next to the network.
 */
#include "kernels_ref.h"

void snn_transpose01_ref(float *out, const float *x, int64_t rows, int64_t cols, int64_t inner,
                         bool accumulate)
{
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t c = 0; c < cols; c++) {
            const float *src = x + (r * cols + c) * inner;   // (inner): x[r, c, :]
            float *dst = out + (c * rows + r) * inner;       // (inner): out[c, r, :]
            for (int64_t i = 0; i < inner; i++)
                dst[i] = accumulate ? dst[i] + src[i] : src[i];
        }
    }
}
