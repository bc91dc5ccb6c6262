/*
 * elementwise.c - reference kernels that touch each element on its own: fills, axpy, lerp,
 * unary ops and binary ops with numpy broadcasting, forward and backward.
 *
 *   fill      out[i] = value
 *   axpy      y[i] += alpha x[i]
 *   lerp      y[i] += weight (x[i] - y[i])          (y moves `weight` of the way to x)
 *   unary     out[i] = f(x[i])                       dx[i] += dout[i] f'(x[i])
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

static float unary_value(snn_unary_op op, float x, float param)
{
    switch (op) {
    case SNN_UNARY_NEG: return -x;
    case SNN_UNARY_EXP: return expf(x);
    case SNN_UNARY_LOG: return logf(x);
    case SNN_UNARY_RELU: return x > 0.0f ? x : 0.0f;
    case SNN_UNARY_SIGMOID: return 1.0f / (1.0f + expf(-x));
    case SNN_UNARY_SCALE: return param * x;
    case SNN_UNARY_ADD_SCALAR: return x + param;
    case SNN_UNARY_SQUARE: return x * x;
    case SNN_UNARY_HEAVISIDE: return x >= 0.0f ? 1.0f : 0.0f;
    case SNN_UNARY_COUNT: break;
    }
    return NAN;
}

/* f'(x), given x and y = f(x): exp' = exp = y, sigmoid' = y (1 - y) */
static float unary_derivative(snn_unary_op op, float x, float y, float param)
{
    switch (op) {
    case SNN_UNARY_NEG: return -1.0f;
    case SNN_UNARY_EXP: return y;
    case SNN_UNARY_LOG: return 1.0f / x;
    case SNN_UNARY_RELU: return x > 0.0f ? 1.0f : 0.0f;
    case SNN_UNARY_SIGMOID: return y * (1.0f - y);
    case SNN_UNARY_SCALE: return param;
    case SNN_UNARY_ADD_SCALAR: return 1.0f;
    case SNN_UNARY_SQUARE: return 2.0f * x;
    case SNN_UNARY_HEAVISIDE: return 0.0f; /* a step has no useful gradient: see neurons/ */
    case SNN_UNARY_COUNT: break;
    }
    return NAN;
}

void snn_unary_forward_ref(snn_unary_op op, float *out, const float *x, float param, int64_t n)
{
    for (int64_t i = 0; i < n; i++) out[i] = unary_value(op, x[i], param);
}

void snn_unary_backward_ref(snn_unary_op op, float *dx, const float *dout, const float *x,
                            const float *out, float param, int64_t n)
{
    for (int64_t i = 0; i < n; i++) dx[i] += dout[i] * unary_derivative(op, x[i], out[i], param);
}

/* ---- binary with broadcasting ------------------------------------------------------------- */

static float binary_value(snn_binary_op op, float a, float b)
{
    switch (op) {
    case SNN_BINARY_ADD: return a + b;
    case SNN_BINARY_SUB: return a - b;
    case SNN_BINARY_MUL: return a * b;
    case SNN_BINARY_DIV: return a / b;
    case SNN_BINARY_COUNT: break;
    }
    return NAN;
}

/* d(a op b)/da and d(a op b)/db */
static void binary_derivatives(snn_binary_op op, float a, float b, float *dda, float *ddb)
{
    switch (op) {
    case SNN_BINARY_ADD: *dda = 1.0f, *ddb = 1.0f; return;
    case SNN_BINARY_SUB: *dda = 1.0f, *ddb = -1.0f; return;
    case SNN_BINARY_MUL: *dda = b, *ddb = a; return;
    case SNN_BINARY_DIV: *dda = 1.0f / b, *ddb = -a / (b * b); return;
    case SNN_BINARY_COUNT: break;
    }
    *dda = *ddb = NAN;
}

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
        out[i] = binary_value(op, a[ia], b[ib]);
    }
}

void snn_binary_backward_ref(snn_binary_op op, float *da, float *db, const float *dout,
                             const float *a, const float *b, const snn_broadcast *bc)
{
    for (int64_t i = 0; i < bc->numel; i++) {
        int64_t ia, ib;
        broadcast_offsets(bc, i, &ia, &ib);
        float dda, ddb;
        binary_derivatives(op, a[ia], b[ib], &dda, &ddb);
        if (da) da[ia] += dout[i] * dda;
        if (db) db[ib] += dout[i] * ddb;
    }
}
