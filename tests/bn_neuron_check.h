/*
 * bn_neuron_check.h - what test_bn_neuron.c and test_bn_neuron_carry.c share: CPU leaves from a
 * seed, bit-for-bit comparisons of tensors and of the batch-norm side of two runs, and the
 * model helpers (fusion on / off, counting a tape's nodes of an op).
 */
#ifndef SNN_TEST_BN_NEURON_CHECK_H
#define SNN_TEST_BN_NEURON_CHECK_H
#include <string.h>

#include "autograd/autograd.h"
#include "nn/nn.h"
#include "neurons/neurons.h"
#include "test.h"

/* A CPU STEP tensor of `shape` with values U(lo, hi) from `seed`. */
static inline snn_tensor *uniform(snn_shape shape, float lo, float hi, uint64_t seed, bool grad)
{
    snn_tensor *t = test_uniform(shape, lo, hi, seed);
    t->requires_grad = grad;
    return t;
}

/* An OWNED copy of a (C) vector: the running statistics each path updates. */
static inline snn_tensor *owned_copy(const snn_tensor *t)
{
    snn_tensor *c = snn_tensor_new(t->shape, SNN_CPU);
    memcpy(c->data, t->data, (size_t)t->numel * sizeof(float));
    return c;
}

static inline bool same(const snn_tensor *a, const snn_tensor *b)
{
    if (!a || !b) return a == b;
    return a->numel == b->numel && test_same_bits(a->data, b->data, (long)a->numel);
}

static inline bool grads_same(const snn_tensor *a, const snn_tensor *b)
{
    if (!a || !b) return a == b;
    return a->grad && b->grad && same(a->grad, b->grad);
}

/* The batch-norm side of two runs, bit for bit: the running statistics, and the gradients of
 * x, gamma, beta and (with a residual) of the residual. For any result struct below (they name
 * these fields alike). */
#define BN_SIDE_SAME(a, b, res)                                                               \
    (same((a).running_mean, (b).running_mean) && same((a).running_var, (b).running_var) &&   \
     grads_same((a).x, (b).x) && grads_same((a).gamma, (b).gamma) &&                         \
     grads_same((a).beta, (b).beta) && (!(res) || grads_same((a).residual, (b).residual)))

static inline double mean_of(const snn_tensor *t)
{
    double s = 0.0;
    for (int64_t i = 0; i < t->numel; i++) s += (double)t->data[i];
    return s / (double)t->numel;
}

static inline int count_nodes(const snn_tensor *loss, const char *op)
{
    int n = 0;
    for (const snn_node *node = loss ? loss->grad_fn : NULL; node; node = node->prev)
        n += strcmp(node->op, op) == 0;
    return n;
}

/* Turns the fusion rules of model m on or off (its option fuse). */
static inline void set_fusion(snn_module *m, bool on)
{
    snn_model_options o = snn_model_options_of(m);
    o.fuse = on;
    CHECK_OK(snn_model_set_options(m, &o));
}

#endif /* SNN_TEST_BN_NEURON_CHECK_H */
