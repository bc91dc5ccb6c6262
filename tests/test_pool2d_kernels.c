/*
 * test_pool2d_kernels.c - the max-pool and avg-pool kernels called directly, on what a parity
 * check between two tables cannot show, each run on the reference kernels
 * (kernels/ref/pool2d.c) and the fast CPU ones (kernels/cpu/pool2d.c): hand-computed tiny cases
 * (ties won by the first in scan order, padding that never wins, overlapping windows that
 * collect several gradients, NaN propagation, the divisor with padding), accumulate semantics,
 * and the adjoint (dot-product) identity between avg-pool's forward and backward; also the
 * fast kernels' thread independence. The two tables' agreement on random inputs, spikes full
 * of ties and the threaded paths is checked by the parity harness, tests/test_backend_ops.c.
 *
 *     ctest --test-dir build -R pool2d_kernels --output-on-failure
 */
#include <string.h>

#include "tensor/error.h"
#include "kernels/cpu/kernels_cpu.h"
#include "kernels/ref/kernels_ref.h"
#include "test.h"

/* ---- helpers --------------------------------------------------------------------------------- */

static float *falloc(int64_t n)
{
    float *p = snn_alloc((size_t)n * sizeof *p, SNN_CPU);
    SNN_ASSERT(p);
    memset(p, 0, (size_t)n * sizeof *p);
    return p;
}
static void ffree(float *p, int64_t n) { snn_free(p, (size_t)n * sizeof *p, SNN_CPU); }

static snn_pool2d_dims pool_dims(int N, int C, int H, int W, int K, int S, int P)
{
    snn_pool2d_dims d = {.N = N, .C = C, .H = H, .W = W, .K = K, .stride = S, .pad = P};
    d.H_out = (H + 2 * P - K) / S + 1;
    d.W_out = (W + 2 * P - K) / S + 1;
    return d;
}

static void fill_uniform(float *x, int64_t n, snn_rng *rng, float lo, float hi)
{
    for (int64_t i = 0; i < n; i++) x[i] = lo + (hi - lo) * snn_rng_uniform(rng);
}

/* ---- hand-computed cases, on each table ----------------------------------------------------- */

static const snn_kernels *k; /* the table under test: the reference, then the fast CPU one */

/* 4x4, K = S = 2: each 2x2 block's max; the last block holds a tie (7 at (2,2) and (3,3)) that
 * the first in scan order must win. */
static void test_max_pool_4x4_hand(void)
{
    const float x[16] = {1, 3, 2, 0,
                         4, 2, 1, 5,
                         0, 7, 7, 1,
                         6, 1, 3, 7};
    snn_pool2d_dims d = pool_dims(1, 1, 4, 4, 2, 2, 0);
    float out[4];
    int32_t argmax[4];
    k->max_pool2d_forward(out, argmax, x, &d);
    const float want[4] = {4, 5, 7, 7};
    const int32_t want_at[4] = {4, 7, 9, 10};
    for (int i = 0; i < 4; i++) {
        CHECK(out[i] == want[i]);
        CHECK(argmax[i] == want_at[i]);
    }

    /* backward routes dout to the winners; a second call adds the same again */
    const float dout[4] = {1, 2, 3, 4};
    float dx[16] = {0};
    k->max_pool2d_backward(dx, dout, argmax, &d);
    float want_dx[16] = {0};
    want_dx[4] = 1, want_dx[7] = 2, want_dx[9] = 3, want_dx[10] = 4;
    for (int i = 0; i < 16; i++) CHECK(dx[i] == want_dx[i]);
    k->max_pool2d_backward(dx, dout, argmax, &d);
    for (int i = 0; i < 16; i++) CHECK(dx[i] == 2.0f * want_dx[i]);
    k->max_pool2d_backward(NULL, dout, argmax, &d); /* NULL gradient: skipped */
}

/* All-negative input with padding: if padding counted as 0 it would win every window. */
static void test_max_pool_padding_never_wins(void)
{
    const float x[9] = {-1, -2, -3,
                        -4, -5, -6,
                        -7, -8, -9};
    snn_pool2d_dims d = pool_dims(1, 1, 3, 3, 3, 2, 1); /* 2x2 output */
    CHECK(d.H_out == 2 && d.W_out == 2);
    float out[4];
    int32_t argmax[4];
    k->max_pool2d_forward(out, argmax, x, &d);
    const float want[4] = {-1, -2, -4, -5};
    const int32_t want_at[4] = {0, 1, 3, 4};
    for (int i = 0; i < 4; i++) {
        CHECK(out[i] == want[i]);
        CHECK(argmax[i] == want_at[i]);
    }
}

/* Overlapping windows (K = 3, S = 1): one input that wins several windows collects all their
 * gradients. The 9 is in every 3x3 window of the 4x4 input, so it wins all 4. */
static void test_max_pool_overlap_accumulates(void)
{
    float x[16];
    for (int i = 0; i < 16; i++) x[i] = (float)(i % 5);
    x[5] = 9.0f;
    snn_pool2d_dims d = pool_dims(1, 1, 4, 4, 3, 1, 0);
    float out[4];
    int32_t argmax[4];
    k->max_pool2d_forward(out, argmax, x, &d);
    for (int i = 0; i < 4; i++) CHECK(argmax[i] == 5 && out[i] == 9.0f);
    const float dout[4] = {1, 10, 100, 1000};
    float dx[16] = {0};
    k->max_pool2d_backward(dx, dout, argmax, &d);
    CHECK(dx[5] == 1111.0f);
}

/* A NaN in a window wins (PyTorch propagates NaN through max-pool). */
static void test_max_pool_nan_propagates(void)
{
    float x[4] = {1, NAN, 3, 2};
    snn_pool2d_dims d = pool_dims(1, 1, 2, 2, 2, 2, 0);
    float out[1];
    int32_t argmax[1];
    k->max_pool2d_forward(out, argmax, x, &d);
    CHECK(isnan(out[0]) && argmax[0] == 1);

    /* 3x3, K = 3, S = 1, P = 1: every window (border and interior) holds the centre NaN and a
     * second NaN later in scan order; the first one seen must win everywhere it is first */
    float y[9] = {1, 2, 3, 4, NAN, 6, 7, 8, NAN};
    snn_pool2d_dims d3 = pool_dims(1, 1, 3, 3, 3, 1, 1);
    float out3[9];
    int32_t argmax3[9];
    k->max_pool2d_forward(out3, argmax3, y, &d3);
    for (int i = 0; i < 9; i++) CHECK(isnan(out3[i]) && argmax3[i] == 4);
}

/* 3x3 input 1..9, K = 2, S = 2, P = 1: every window is divided by 4, padding included. */
static void test_avg_pool_padding_hand(void)
{
    const float x[9] = {1, 2, 3,
                        4, 5, 6,
                        7, 8, 9};
    snn_pool2d_dims d = pool_dims(1, 1, 3, 3, 2, 2, 1);
    CHECK(d.H_out == 2 && d.W_out == 2);
    float out[4];
    k->avg_pool2d_forward(out, x, &d);
    /* windows: {1}, {2, 3}, {4, 7}, {5, 6, 8, 9}, each over 4 */
    const float want[4] = {0.25f, 1.25f, 2.75f, 7.0f};
    for (int i = 0; i < 4; i++) CHECK(out[i] == want[i]);

    const float dout[4] = {4, 8, 12, 16};
    float dx[9] = {0};
    k->avg_pool2d_backward(dx, dout, &d);
    const float want_dx[9] = {1, 2, 2,
                              3, 4, 4,
                              3, 4, 4};
    for (int i = 0; i < 9; i++) CHECK(dx[i] == want_dx[i]);
    k->avg_pool2d_backward(dx, dout, &d); /* accumulates */
    for (int i = 0; i < 9; i++) CHECK(dx[i] == 2.0f * want_dx[i]);
}

/* ---- the adjoint identity ------------------------------------------------------------------ */

/* avg-pool is linear, its backward the transposed map: <avg(x), dout> = <x, avg^T(dout)> for any
 * x and dout (in double, to rounding), on overlapping, strided and padded windows. */
static void test_avg_pool_adjoint(void)
{
    const int shapes[][7] = {{2, 3, 8, 8, 2, 2, 0}, {3, 5, 11, 9, 3, 2, 1}, {2, 2, 7, 10, 3, 1, 1},
                             {1, 4, 9, 9, 4, 3, 2}, {2, 2, 5, 3, 3, 3, 1}};
    snn_rng rng;
    snn_rng_seed(&rng, 1234);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int *v = shapes[s];
        const snn_pool2d_dims d = pool_dims(v[0], v[1], v[2], v[3], v[4], v[5], v[6]);
        const int64_t nin = (int64_t)d.N * d.C * d.H * d.W;
        const int64_t nout = (int64_t)d.N * d.C * d.H_out * d.W_out;
        float *x = falloc(nin), *dx = falloc(nin), *out = falloc(nout), *dout = falloc(nout);
        fill_uniform(x, nin, &rng, -2.0f, 2.0f);
        fill_uniform(dout, nout, &rng, -1.0f, 1.0f);
        k->avg_pool2d_forward(out, x, &d);
        k->avg_pool2d_backward(dx, dout, &d);
        double lhs = 0.0, rhs = 0.0;
        for (int64_t o = 0; o < nout; o++) lhs += (double)out[o] * (double)dout[o];
        for (int64_t i = 0; i < nin; i++) rhs += (double)x[i] * (double)dx[i];
        CHECK_CLOSE(lhs, rhs, 1e-4, 1e-5);
        ffree(x, nin), ffree(dx, nin), ffree(out, nout), ffree(dout, nout);
    }
}

/* Same bits with 1 thread and with all threads (planes are independent). */
static void test_threads_do_not_change_results(void)
{
    snn_pool2d_dims d = pool_dims(8, 16, 32, 32, 3, 2, 1);
    const int64_t nin = 8 * 16 * 32 * 32, nout = (int64_t)8 * 16 * d.H_out * d.W_out;
    float *x = falloc(nin), *dout = falloc(nout), *a = falloc(nin), *b = falloc(nin);
    snn_rng rng;
    snn_rng_seed(&rng, 99);
    fill_uniform(x, nin, &rng, -1.0f, 1.0f);
    fill_uniform(dout, nout, &rng, -1.0f, 1.0f);
    int saved = snn_get_num_threads();
    snn_set_num_threads(1);
    snn_avg_pool2d_backward_cpu(a, dout, &d);
    snn_set_num_threads(0);
    snn_avg_pool2d_backward_cpu(b, dout, &d);
    snn_set_num_threads(saved);
    CHECK(memcmp(a, b, (size_t)nin * sizeof *a) == 0);
    ffree(x, nin), ffree(dout, nout), ffree(a, nin), ffree(b, nin);
}

int main(void)
{
    const snn_kernels *const tables[2] = {&snn_kernels_ref, &snn_kernels_cpu};
    for (int t = 0; t < 2; t++) {
        k = tables[t];
        fprintf(stderr, "-- the %s kernels\n", k->name);
        RUN(test_max_pool_4x4_hand);
        RUN(test_max_pool_padding_never_wins);
        RUN(test_max_pool_overlap_accumulates);
        RUN(test_max_pool_nan_propagates);
        RUN(test_avg_pool_padding_hand);
        RUN(test_avg_pool_adjoint);
    }
    RUN(test_threads_do_not_change_results);
    return test_finish();
}
