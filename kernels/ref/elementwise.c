/*
 * elementwise.c - reference kernels that touch each element on its own: fills, axpy, lerp,
 * unary ops and binary ops with numpy broadcasting, forward and backward.
 *
 *   fill      out[i] = value
 *   axpy      y[i] += alpha x[i]
 *   lerp      y[i] += weight (x[i] - y[i])          (y moves `weight` of the way to x)
 *   unary     out[i] = f(x[i])                       dx[i] += dout[i] f'(x[i])
 *             (f and f' of each op: kernels/elementwise_math.h)
 *   binary    out[i] = a[ia] op b[ib]                da[ia] += dout[i] d(a op b)/da
 *                                                    db[ib] += dout[i] d(a op b)/db
 *
 * Broadcasting: out's flat index i is split into coordinates (c_0, ..., c_{D-1}) of out's
 * shape, and ia = sum_d c_d stride_a[d] (likewise ib). A dim along which a is broadcast has
 * stride_a[d] = 0, so every output along it reads the same element of a; in the backward those
 * outputs all add into that element: the gradient of a broadcast is a sum.
 *
 * Memory traffic: one pass; a forward reads 4-8 B and writes 4 B per element, a backward reads
 * dout (and x, out or a, b) and read-modify-writes the gradients.
 */
#include <math.h>

#include "kernels/elementwise_math.h"
#include "kernels_ref.h"

void snn_fill_ref(float *out, float value, int64_t n)
{
    for (int64_t i = 0; i < n; i++) out[i] = value;
}

void snn_axpy_ref(float *y, float alpha, const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++) y[i] += alpha * x[i];
}

/* Written as a step toward x, not as (1 - weight) y + weight x, so that y == x stays y. */
void snn_lerp_ref(float *y, const float *x, float weight, int64_t n)
{
    for (int64_t i = 0; i < n; i++) y[i] += weight * (x[i] - y[i]);
}

/* ---- unary -------------------------------------------------------------------------------- */

void snn_unary_forward_ref(snn_unary_op op, float *out, const float *x, float param, int64_t n)
{
    for (int64_t i = 0; i < n; i++) out[i] = snn_unary_value(op, x[i], param);
}

void snn_unary_backward_ref(snn_unary_op op, float *dx, const float *dout, const float *x,
                            const float *out, float param, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        dx[i] += dout[i] * snn_unary_derivative(op, x[i], out[i], param);
}

/* ---- binary with broadcasting ------------------------------------------------------------- */

/* The offsets into a and b of out's element i: i's coordinates times the broadcast strides. */
static void broadcast_offsets(const snn_broadcast *bc, int64_t i, int64_t *ia, int64_t *ib)
{
    *ia = *ib = 0;
    for (int d = bc->out.ndim - 1; d >= 0; d--) {
        const int64_t coord = i % bc->out.dim[d];   /* the last dim varies fastest */
        i /= bc->out.dim[d];
        *ia += coord * bc->stride_a[d];
        *ib += coord * bc->stride_b[d];
    }
}

void snn_binary_forward_ref(snn_binary_op op, float *out, const float *a, const float *b,
                            const snn_broadcast *bc)
{
    for (int64_t i = 0; i < bc->numel; i++) {
        int64_t ia, ib;
        broadcast_offsets(bc, i, &ia, &ib);
        out[i] = snn_binary_value(op, a[ia], b[ib]);
    }
}

void snn_binary_backward_ref(snn_binary_op op, float *da, float *db, const float *dout,
                             const float *a, const float *b, const snn_broadcast *bc)
{
    for (int64_t i = 0; i < bc->numel; i++) {
        int64_t ia, ib;
        broadcast_offsets(bc, i, &ia, &ib);
        float dda, ddb;
        snn_binary_derivatives(op, a[ia], b[ib], &dda, &ddb);
        if (da) da[ia] += dout[i] * dda;
        if (db) db[ib] += dout[i] * ddb;
    }
}
