/*
 * elementwise.c - CPU kernels for fills, axpy, lerp, unary ops and broadcasting binary ops.
 *
 * Each kernel is one pass over memory: a unary forward reads 4 B and writes 4 B per element; a
 * backward reads dout (and x or out) and read-modify-writes dx: 12-16 B per element. They are
 * memory-bound, so the loops are kept flat for the compiler to vectorise, and OpenMP splits
 * them only above a size where threads pay for themselves (snn_cpu_threads: one thread below a
 * grain of work, the whole team above it; kernels/cpu/cpu_threads.h says why nothing in between).
 *
 * Broadcasting follows numpy: shapes are right-aligned, a dim of size 1 stretches. The flat
 * same-shape case covers nearly every call in training; the general strided walk is for the
 * rest (bias-like shapes in tests and user code).
 */
#include <math.h>

#include "cpu_threads.h"
#include "kernels/elementwise_math.h"
#include "kernels_cpu.h"

void snn_fill_cpu(float *out, float value, int64_t n)
{
#pragma omp parallel for simd num_threads(snn_cpu_threads(n))
    for (int64_t i = 0; i < n; i++) out[i] = value;
}

void snn_axpy_cpu(float *y, float alpha, const float *x, int64_t n)
{
#pragma omp parallel for simd num_threads(snn_cpu_threads(n))
    for (int64_t i = 0; i < n; i++) y[i] += alpha * x[i];
}

/* y <- y + weight (x - y), the moving average's step (nn/ema.c: weight = 1 - decay). Written as
 * a move toward x, not as (1 - weight) y + weight x: the two agree in exact arithmetic, but
 * this form leaves y bit-identical when x == y (a weight that stopped changing keeps its average
 * exact instead of drifting by an ulp per update) and rounds once less. 8 B read, 4 B written. */
void snn_lerp_cpu(float *y, const float *x, float weight, int64_t n)
{
#pragma omp parallel for simd num_threads(snn_cpu_threads(n))
    for (int64_t i = 0; i < n; i++) y[i] += weight * (x[i] - y[i]);
}

void snn_unary_forward_cpu(snn_unary_op op, float *out, const float *x, float param, int64_t n)
{
#pragma omp parallel for num_threads(snn_cpu_threads(n))
    for (int64_t i = 0; i < n; i++) out[i] = snn_unary_value(op, x[i], param);
}

void snn_unary_backward_cpu(snn_unary_op op, float *dx, const float *dout, const float *x,
                            const float *out, float param, int64_t n)
{
#pragma omp parallel for num_threads(snn_cpu_threads(n))
    for (int64_t i = 0; i < n; i++)
        dx[i] += dout[i] * snn_unary_derivative(op, x[i], out[i], param);
}

/* Offsets of out's flat index i into a and b under the broadcast strides. */
static void broadcast_offsets(const snn_broadcast *bc, int64_t i, int64_t *ia, int64_t *ib)
{
    int64_t oa = 0, ob = 0;
    for (int d = bc->out.ndim - 1; d >= 0; d--) {
        int64_t coord = i % bc->out.dim[d];
        i /= bc->out.dim[d];
        oa += coord * bc->stride_a[d];
        ob += coord * bc->stride_b[d];
    }
    *ia = oa;
    *ib = ob;
}

void snn_binary_forward_cpu(snn_binary_op op, float *out, const float *a, const float *b,
                            const snn_broadcast *bc)
{
    int64_t n = bc->numel;
    if (bc->same_shape) {
#pragma omp parallel for num_threads(snn_cpu_threads(n))
        for (int64_t i = 0; i < n; i++) out[i] = snn_binary_value(op, a[i], b[i]);
        return;
    }
#pragma omp parallel for num_threads(snn_cpu_threads(n))
    for (int64_t i = 0; i < n; i++) {
        int64_t ia, ib;
        broadcast_offsets(bc, i, &ia, &ib);
        out[i] = snn_binary_value(op, a[ia], b[ib]);
    }
}

void snn_binary_backward_cpu(snn_binary_op op, float *da, float *db, const float *dout,
                             const float *a, const float *b, const snn_broadcast *bc)
{
    int64_t n = bc->numel;
    if (bc->same_shape) {
#pragma omp parallel for num_threads(snn_cpu_threads(n))
        for (int64_t i = 0; i < n; i++) {
            float dda, ddb;
            snn_binary_derivatives(op, a[i], b[i], &dda, &ddb);
            if (da) da[i] += dout[i] * dda;
            if (db) db[i] += dout[i] * ddb;
        }
        return;
    }
    /* Several outputs land on one broadcast input element: accumulate serially, in index
     * order, so the result is deterministic. Hot paths (bias, batch-norm) have fused kernels. */
    for (int64_t i = 0; i < n; i++) {
        int64_t ia, ib;
        broadcast_offsets(bc, i, &ia, &ib);
        float dda, ddb;
        snn_binary_derivatives(op, a[ia], b[ib], &dda, &ddb);
        if (da) da[ia] += dout[i] * dda;
        if (db) db[ib] += dout[i] * ddb;
    }
}
