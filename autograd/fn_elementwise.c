/*
 * fn_elementwise.c - the differentiable elementwise ops: unary maps and broadcasting binaries.
 *
 *   y = op(x):       dx += dy * op'(x)
 *   y = a op b:      da += sum over broadcast dims of dy * d(a op b)/da, likewise db
 *
 * Broadcasting is numpy's: shapes are right-aligned and a size-1 dim stretches to match.
 */
#include "autograd.h"
#include "tensor/arena.h"
#include "tensor/error.h"
#include "kernels/kernels.h"

/* ---- unary -------------------------------------------------------------------------------- */

typedef struct unary_saved {
    snn_unary_op op;
    float param;
} unary_saved;

static void unary_backward(snn_node *node)
{
    unary_saved *s = node->saved;
    snn_tensor *x = node->inputs[0], *y = node->out;
    float *dx = snn_grad_for(x);
    if (!dx) return;
    snn_kernels_for(x->device)->unary_backward(s->op, dx, y->grad->data, x->data, y->data, s->param,
                                               x->numel);
}

static snn_tensor *unary(const char *fn, snn_unary_op op, snn_tensor *x, float param)
{
    if (snn_check_tensor(fn, "x", x)) return NULL;
    const snn_kernels *k = snn_kernels_for(x->device); /* a table: snn_tensor_new checks */
    SNN_REQUIRE_KERNEL(k, fn, unary_forward);
    SNN_REQUIRE_KERNEL(k, fn, unary_backward);
    snn_tensor *y = snn_step_tensor(fn, x->shape, x->device);
    if (!y) return NULL;
    k->unary_forward(op, y->data, x->data, param, x->numel);
    if (op != SNN_UNARY_HEAVISIDE && snn_should_record(1, &x)) {
        snn_node *node = snn_tape_record(fn, unary_backward, y, 1, &x, sizeof(unary_saved));
        if (!node) return NULL;
        unary_saved *s = node->saved;
        s->op = op;
        s->param = param;
    }
    return y;
}

snn_tensor *snn_neg(snn_tensor *x) { return unary("snn_neg", SNN_UNARY_NEG, x, 0.0f); }
snn_tensor *snn_exp(snn_tensor *x) { return unary("snn_exp", SNN_UNARY_EXP, x, 0.0f); }
snn_tensor *snn_log(snn_tensor *x) { return unary("snn_log", SNN_UNARY_LOG, x, 0.0f); }
snn_tensor *snn_relu(snn_tensor *x) { return unary("snn_relu", SNN_UNARY_RELU, x, 0.0f); }
snn_tensor *snn_sigmoid(snn_tensor *x) { return unary("snn_sigmoid", SNN_UNARY_SIGMOID, x, 0.0f); }
snn_tensor *snn_square(snn_tensor *x) { return unary("snn_square", SNN_UNARY_SQUARE, x, 0.0f); }
snn_tensor *snn_scale(snn_tensor *x, float s) { return unary("snn_scale", SNN_UNARY_SCALE, x, s); }
snn_tensor *snn_add_scalar(snn_tensor *x, float s)
{
    return unary("snn_add_scalar", SNN_UNARY_ADD_SCALAR, x, s);
}

/* ---- binary with broadcasting ------------------------------------------------------------- */

/* Fills bc for a op b; returns 1 with a message when the shapes do not broadcast. */
static int make_broadcast(const char *fn, const snn_tensor *a, const snn_tensor *b,
                          snn_broadcast *bc)
{
    int ndim = a->shape.ndim > b->shape.ndim ? a->shape.ndim : b->shape.ndim;
    bc->out.ndim = ndim;
    int64_t stride_a = 1, stride_b = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        int da = d - (ndim - a->shape.ndim), db = d - (ndim - b->shape.ndim);
        int64_t sa = da >= 0 ? a->shape.dim[da] : 1;
        int64_t sb = db >= 0 ? b->shape.dim[db] : 1;
        if (sa != sb && sa != 1 && sb != 1) {
            char bufa[96], bufb[96];
            snn_error(SNN_ERR_ARGUMENT, "%s: bad argument 'b' (shape %s does not broadcast with "
                      "'a' of shape %s: dim %d is %lld vs %lld)", fn,
                      snn_shape_str(b->shape, bufb, sizeof bufb),
                      snn_shape_str(a->shape, bufa, sizeof bufa), d, (long long)sb, (long long)sa);
            return 1;
        }
        bc->out.dim[d] = sa > sb ? sa : sb;
        bc->stride_a[d] = sa == 1 ? 0 : stride_a;
        bc->stride_b[d] = sb == 1 ? 0 : stride_b;
        stride_a *= sa;
        stride_b *= sb;
    }
    bc->numel = snn_shape_numel(bc->out);
    bc->numel_a = a->numel;
    bc->numel_b = b->numel;
    bc->same_shape = snn_shape_equal(a->shape, b->shape);
    return 0;
}

typedef struct binary_saved {
    snn_binary_op op;
    snn_broadcast bc;
} binary_saved;

static void binary_backward(snn_node *node)
{
    binary_saved *s = node->saved;
    snn_tensor *a = node->inputs[0], *b = node->inputs[1], *y = node->out;
    float *da = snn_grad_for(a), *db = snn_grad_for(b);
    if (!da && !db) return;
    /* the kernels read both inputs (add's derivatives ignore them): spikes kept as bits are
     * unpacked for this op (autograd/spike_pack.c) */
    snn_step_scratch mark = snn_step_scratch_mark(y->device);
    const char *fn = "binary op (backward)";
    const float *av = snn_saved_values(fn, a), *bv = snn_saved_values(fn, b);
    if (!av || !bv) {
        snn_backward_out_of_memory();
        return;
    }
    snn_kernels_for(y->device)->binary_backward(s->op, da, db, y->grad->data, av, bv, &s->bc);
    snn_step_scratch_release(y->device, mark);
}

/* into_a: y is written over a's memory (a view of a, so that y and a keep their own gradients);
 * only for ops whose backward reads no input value (add). */
static snn_tensor *binary_op(const char *fn, snn_binary_op op, snn_tensor *a, snn_tensor *b, bool into_a)
{
    if (snn_check_same_device(fn, "a", a, "b", b)) return NULL;
    snn_broadcast bc;
    if (make_broadcast(fn, a, b, &bc)) return NULL;
    const snn_kernels *k = snn_kernels_for(a->device); /* a table: snn_tensor_new checks */
    SNN_REQUIRE_KERNEL(k, fn, binary_forward);
    SNN_REQUIRE_KERNEL(k, fn, binary_backward);
    if (into_a && a->lifetime != SNN_STEP)
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument 'a' (expected a STEP tensor to "
                              "write over, got an OWNED one); hint: snn_add", fn);
    if (into_a && !snn_shape_equal(a->shape, bc.out)) {
        char bufa[96], bufo[96];
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument 'a' (the sum has shape %s, "
                              "larger than a's %s: only b may broadcast)", fn,
                              snn_shape_str(bc.out, bufo, sizeof bufo),
                              snn_shape_str(a->shape, bufa, sizeof bufa));
    }
    snn_tensor *y = into_a ? snn_step_view(fn, a, bc.out) : snn_step_tensor(fn, bc.out, a->device);
    if (!y) return NULL;
    k->binary_forward(op, y->data, a->data, b->data, &bc);
    snn_tensor *inputs[2] = {a, b};
    if (snn_should_record(2, inputs)) {
        snn_node *node = snn_tape_record(fn, binary_backward, y, 2, inputs, sizeof(binary_saved));
        if (!node) return NULL;
        binary_saved *s = node->saved;
        s->op = op;
        s->bc = bc;
    }
    return y;
}

static snn_tensor *binary(const char *fn, snn_binary_op op, snn_tensor *a, snn_tensor *b)
{
    return binary_op(fn, op, a, b, false);
}

snn_tensor *snn_add(snn_tensor *a, snn_tensor *b) { return binary("snn_add", SNN_BINARY_ADD, a, b); }
snn_tensor *snn_add_into(snn_tensor *a, snn_tensor *b)
{
    /* out[i] = a[i] + b[i] over a[i]: each element read before it is written, by one thread */
    return binary_op("snn_add_into", SNN_BINARY_ADD, a, b, true);
}
snn_tensor *snn_sub(snn_tensor *a, snn_tensor *b) { return binary("snn_sub", SNN_BINARY_SUB, a, b); }
snn_tensor *snn_mul(snn_tensor *a, snn_tensor *b) { return binary("snn_mul", SNN_BINARY_MUL, a, b); }
snn_tensor *snn_div(snn_tensor *a, snn_tensor *b) { return binary("snn_div", SNN_BINARY_DIV, a, b); }
