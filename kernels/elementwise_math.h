/*
 * elementwise_math.h - the unary and binary elementwise functions and their derivatives, one
 * element at a time, as inline functions that the three kernel tables share
 * (kernels/ref/elementwise.c, kernels/cpu/elementwise.c, kernels/cuda/elementwise.cu): the
 * tables differ in how they walk memory, never in the arithmetic of an element.
 *
 *   unary   y = f(x)          neg -x, exp e^x, log ln x, relu max(x, 0),
 *                             sigmoid 1 / (1 + e^-x), scale p x, add_scalar x + p,
 *                             square x^2, heaviside [x >= 0]
 *           f'(x) given x and y = f(x): exp' = y, sigmoid' = y (1 - y), heaviside' = 0 (a step
 *           has no useful gradient; neurons/ give spikes a surrogate one)
 *   binary  y = a op b        add, sub, mul, div
 *           dy/da, dy/db      1, 1 | 1, -1 | b, a | 1/b, -a/b^2
 *
 * An op value outside the enum gives NaN.
 */
#ifndef SNN_ELEMENTWISE_MATH_H
#define SNN_ELEMENTWISE_MATH_H

#include <math.h>

#include "kernels/kernels.h"

#ifndef SNN_HD /* callable from host and device code (as in kernels/surrogate.h) */
#if defined(__CUDACC__)
#define SNN_HD __host__ __device__
#else
#define SNN_HD
#endif
#endif

SNN_HD static inline float snn_unary_value(snn_unary_op op, float x, float param)
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

SNN_HD static inline float snn_unary_derivative(snn_unary_op op, float x, float y, float param)
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
    case SNN_UNARY_HEAVISIDE: return 0.0f;
    case SNN_UNARY_COUNT: break;
    }
    return NAN;
}

SNN_HD static inline float snn_binary_value(snn_binary_op op, float a, float b)
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

/* *dda = d(a op b)/da, *ddb = d(a op b)/db */
SNN_HD static inline void snn_binary_derivatives(snn_binary_op op, float a, float b, float *dda,
                                                 float *ddb)
{
    switch (op) {
    case SNN_BINARY_ADD: *dda = 1.0f; *ddb = 1.0f; return;
    case SNN_BINARY_SUB: *dda = 1.0f; *ddb = -1.0f; return;
    case SNN_BINARY_MUL: *dda = b; *ddb = a; return;
    case SNN_BINARY_DIV: *dda = 1.0f / b; *ddb = -a / (b * b); return;
    case SNN_BINARY_COUNT: break;
    }
    *dda = *ddb = NAN;
}

#endif
