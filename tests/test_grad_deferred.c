/*
 * test_grad_deferred.c - a gradient left with its last step for its reader
 * (autograd/grad_deferred.c), on the CPU. No CPU kernel takes such a record (CUDA's
 * channels-last conv does: test_cuda_bn_neuron.c case 8), so here the records are made by
 * hand and by a test node, and every way of making dL/dx first is reached:
 *   1. a record is found for its tensor and dims only; snn_grad_for makes dL/dx, the bits of
 *      batchnorm_backward_in_place_sums on the same dL/dX, and forgets the record;
 *   2. marks: settling or dropping since a mark leaves the records made before it;
 *   3. in a walk, a node leaves its input's gradient half made: a maker that takes no records
 *      (snn_mul) gets dL/dx, which backward.c makes before it runs, and its gradients follow
 *      from it; a maker that takes records (takes_deferred_grad) sees the record and dL/dX,
 *      and says it took it (snn_grad_deferred_done, counted); one that leaves it has it made
 *      right after its backward (before the next node runs); a leaf's record is made at the
 *      walk's end.
 * Run: ctest --test-dir build -R '^grad_deferred$'
 */
#include <stdlib.h>
#include <string.h>

#include "autograd/autograd.h"
#include "kernels/kernels.h"
#include "snn.h"
#include "test.h"

enum { N = 3, C = 4, HW = 5, NUMEL = N * C * HW };

/* A batch-norm's backward as the fused op would leave it: dL/dX, and what dL/dx needs */
static float dX[NUMEL], x_bn[NUMEL], gamma_[C], mean_[C], invstd_[C];
static double sums[3 * C];
static snn_bn_dout record;
static float want[NUMEL]; /* dL/dx: batchnorm_backward_in_place_sums over dL/dX */

static void make_fixture(void)
{
    snn_rng rng;
    snn_rng_seed(&rng, 11);
    for (int i = 0; i < NUMEL; i++) {
        dX[i] = snn_rng_uniform(&rng) * 2.0f - 1.0f;
        x_bn[i] = snn_rng_uniform(&rng) * 3.0f - 1.0f;
    }
    for (int c = 0; c < C; c++) {
        gamma_[c] = 0.5f + snn_rng_uniform(&rng);
        mean_[c] = 0.3f * snn_rng_uniform(&rng);
        invstd_[c] = 0.5f + 1.5f * snn_rng_uniform(&rng);
    }
    const snn_kernels *k = snn_kernels_for(SNN_CPU);
    k->batchnorm_backward_sums(sums, dX, x_bn, mean_, N, C, HW);
    record = (snn_bn_dout){.x = x_bn, .gamma = gamma_, .save_mean = mean_,
                           .save_invstd = invstd_, .sums = sums};
    memcpy(want, dX, sizeof want);
    k->batchnorm_backward_in_place_sums(want, NULL, NULL, x_bn, NULL, gamma_, mean_, invstd_,
                                        sums, N, C, HW);
    /* the step is not the identity: a record left unmade would show */
    CHECK(!test_same_bits(want, dX, NUMEL));
}

/* A STEP tensor of the fixture's size whose gradient holds dL/dX, recorded as half made */
static snn_tensor *half_made(void)
{
    snn_tensor *t = test_uniform(SNN_SHAPE(N, C, HW), -1.0f, 1.0f, 3);
    t->requires_grad = true;
    float *g = snn_grad_for(t);
    memcpy(g, dX, sizeof dX);
    CHECK(snn_grad_defer_bn(t, &record, N, C, HW));
    return t;
}

static void test_record_and_grad_for(void)
{
    snn_step_begin();
    snn_tensor *t = half_made(), *other = test_uniform(SNN_SHAPE(N, C, HW), 0.0f, 1.0f, 4);
    CHECK(snn_grad_deferred_bn(t, N, C, HW, NULL));
    CHECK(!snn_grad_deferred_bn(t, N, C, HW + 1, NULL)); /* other dims */
    CHECK(!snn_grad_deferred_bn(other, N, C, HW, NULL));
    CHECK(test_same_bits(t->grad->data, dX, NUMEL)); /* nothing made yet */
    const float *g = t->grad->data;
    CHECK(snn_grad_for(t) == g); /* an op about to add into it: made first */
    CHECK(test_same_bits(g, want, NUMEL));
    CHECK(!snn_grad_deferred_bn(t, N, C, HW, NULL));
    snn_grad_settle(t); /* no record: nothing */
    CHECK(test_same_bits(g, want, NUMEL));
    snn_step_end();
}

static void test_marks(void)
{
    snn_step_begin();
    const int start = snn_grad_deferred_mark();
    snn_tensor *outer = half_made();
    const int mark = snn_grad_deferred_mark();
    CHECK(mark == start + 1);
    snn_tensor *inner = half_made();
    snn_grad_settle_since(mark);
    CHECK(test_same_bits(inner->grad->data, want, NUMEL));
    CHECK(!snn_grad_deferred_bn(inner, N, C, HW, NULL));
    CHECK(snn_grad_deferred_bn(outer, N, C, HW, NULL)); /* made before the mark: kept */
    snn_grad_deferred_drop_since(start);
    CHECK(!snn_grad_deferred_bn(outer, N, C, HW, NULL));
    CHECK(test_same_bits(outer->grad->data, dX, NUMEL)); /* dropped, not made */
    CHECK(snn_grad_deferred_mark() == start);
    snn_step_end();
}

/* The test node's backward: dL/dX into its input's first gradient, left half made */
static void leave_half_made(snn_node *node)
{
    snn_tensor *in = node->inputs[0];
    float *g = snn_grad_unfilled(in);
    CHECK(g != NULL);
    if (!g) return;
    memcpy(g, dX, sizeof dX);
    CHECK(snn_grad_defer_bn(in, &record, N, C, HW));
}

/* out = a node on x that leaves x's gradient half made (its forward value does not matter) */
static snn_tensor *leaving_node(snn_tensor *x)
{
    snn_tensor *out = test_uniform(SNN_SHAPE(N, C, HW), 0.0f, 1.0f, 5);
    CHECK(snn_tape_record("leave_half_made", leave_half_made, out, 1, &x, 0) != NULL);
    return out;
}

static void seed_and_walk(snn_tensor *out)
{
    snn_tensor *seed = test_uniform(SNN_SHAPE(N, C, HW), -1.0f, 1.0f, 6);
    CHECK_OK(snn_backward_from(out, seed));
}

/* A maker that takes records: it must see the record and dL/dX; `take` says whether it then
 * says it took it (else backward.c makes dL/dy right after it) */
static bool take;
static int taker_saw;
static void taker_backward(snn_node *node)
{
    snn_tensor *y = node->out;
    taker_saw = snn_grad_deferred_bn(y, N, C, HW, NULL) &&
                test_same_bits(y->grad->data, dX, NUMEL);
    if (take) snn_grad_deferred_done(y);
    CHECK(snn_grad_for(node->inputs[0]) != NULL); /* a gradient for x, so its maker runs */
}

/* A node before the taker (it made the taker's input): how many records were pending when
 * its backward ran (none: a record the taker left was made right after the taker's backward) */
static int pending_after_taker;
static void probe_backward(snn_node *node)
{
    (void)node;
    pending_after_taker = snn_grad_deferred_mark();
}

static void test_walks(void)
{
    /* a maker that takes no records: snn_mul's backward reads dL/dy = want */
    snn_step_begin();
    snn_tensor *a = test_uniform(SNN_SHAPE(N, C, HW), -1.0f, 1.0f, 7);
    snn_tensor *b = test_uniform(SNN_SHAPE(N, C, HW), -1.0f, 1.0f, 8);
    a->requires_grad = true;
    const int64_t taken = snn_grad_deferred_taken();
    seed_and_walk(leaving_node(snn_mul(a, b)));
    bool ok = true;
    for (int i = 0; i < NUMEL; i++) ok = ok && a->grad->data[i] == want[i] * b->data[i];
    CHECK(ok);
    CHECK(snn_grad_deferred_taken() == taken);
    CHECK(snn_grad_deferred_mark() == 0);
    snn_step_end();

    /* a maker that takes records, and says so; then one that does not */
    for (int t = 0; t < 2; t++) {
        snn_step_begin();
        take = t == 0, taker_saw = 0, pending_after_taker = -1;
        snn_tensor *z = test_uniform(SNN_SHAPE(N, C, HW), -1.0f, 1.0f, 9);
        z->requires_grad = true;
        snn_tensor *x = test_uniform(SNN_SHAPE(N, C, HW), -1.0f, 1.0f, 12);
        CHECK(snn_tape_record("probe", probe_backward, x, 1, &z, 0) != NULL);
        snn_tensor *y = test_uniform(SNN_SHAPE(N, C, HW), 0.0f, 1.0f, 10);
        snn_node *maker = snn_tape_record("taker", taker_backward, y, 1, &x, 0);
        CHECK(maker != NULL);
        if (maker) maker->takes_deferred_grad = true;
        y->retain_grad = true; /* to read y's gradient after the walk */
        const int64_t before = snn_grad_deferred_taken();
        seed_and_walk(leaving_node(y));
        CHECK(taker_saw);
        CHECK(pending_after_taker == 0);
        CHECK(snn_grad_deferred_taken() == before + (take ? 1 : 0));
        /* taken: left as the taker found it; not taken: made right after its backward */
        CHECK(test_same_bits(y->grad->data, take ? dX : want, NUMEL));
        CHECK(snn_grad_deferred_mark() == 0);
        snn_step_end();
    }

    /* a leaf's record: no maker runs; made at the walk's end */
    snn_step_begin();
    snn_tensor *leaf = test_uniform(SNN_SHAPE(N, C, HW), -1.0f, 1.0f, 11);
    leaf->requires_grad = true;
    seed_and_walk(leaving_node(leaf));
    CHECK(test_same_bits(leaf->grad->data, want, NUMEL));
    CHECK(snn_grad_deferred_mark() == 0);
    snn_step_end();
}

int main(void)
{
    make_fixture();
    RUN(test_record_and_grad_for);
    RUN(test_marks);
    RUN(test_walks);
    return test_finish();
}
