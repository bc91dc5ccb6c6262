/*
 * fn_matmul.c - the matrix product as one tape node:
 *
 *   Y = A B,   A (M, K), B (K, N), Y (M, N)
 *   dA += dY B^T,   dB += A^T dY
 *
 * One GEMM call of the device's table each way (fn_linear.c is the same with a transposed
 * weight and a bias).
 */
#include "autograd.h"
#include "tensor/arena.h"
#include "tensor/error.h"
#include "kernels/kernels.h"

static void matmul_backward(snn_node *node)
{
    snn_tensor *a = node->inputs[0], *b = node->inputs[1], *y = node->out;
    int M = (int)a->shape.dim[0], K = (int)a->shape.dim[1], N = (int)b->shape.dim[1];
    const snn_kernels *k = snn_kernels_for(y->device);
    float *da = snn_grad_for(a), *db = snn_grad_for(b);
    /* dA (M, K) += dY (M, N) B^T;  dB (K, N) += A^T dY */
    if (da) k->gemm(false, true, M, K, N, 1.0f, y->grad->data, N, b->data, N, 1.0f, da, K);
    if (db) k->gemm(true, false, K, N, M, 1.0f, a->data, K, y->grad->data, N, 1.0f, db, N);
}

snn_tensor *snn_matmul(snn_tensor *a, snn_tensor *b)
{
    const char *fn = "snn_matmul";
    if (snn_check_rank(fn, "a", a, 2, "(M, K)") || snn_check_rank(fn, "b", b, 2, "(K, N)") ||
        snn_check_same_device(fn, "a", a, "b", b) ||
        snn_check_dim(fn, "b", b, 0, a->shape.dim[1], "K (a's columns)"))
        return NULL;
    const snn_kernels *k = snn_kernels_for(a->device); /* a table: snn_tensor_new checks */
    SNN_REQUIRE_KERNEL(k, fn, gemm);
    int M = (int)a->shape.dim[0], K = (int)a->shape.dim[1], N = (int)b->shape.dim[1];
    snn_tensor *y = snn_step_tensor(fn, SNN_SHAPE(M, N), a->device);
    if (!y) return NULL;
    k->gemm(false, false, M, N, K, 1.0f, a->data, K, b->data, N, 0.0f, y->data, N);
    snn_tensor *inputs[2] = {a, b};
    if (snn_should_record(2, inputs) && !snn_tape_record(fn, matmul_backward, y, 2, inputs, 0))
        return NULL;
    return y;
}
