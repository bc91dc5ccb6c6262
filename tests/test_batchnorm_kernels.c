/*
 * test_batchnorm_kernels.c - the batch-norm kernels called directly, on what a parity check
 * between two tables cannot show, each run on the reference kernels (kernels/ref/batchnorm.c)
 * and the fast CPU ones (kernels/cpu/batchnorm.c): hand-computed tiny cases (statistics, the
 * running update with momentum, eval, backward), accumulate semantics, NULL arguments, the
 * in-place backward against the plain one (fp32 and bf16 x), and a
 * central finite-difference check of the training backward against the reference forward;
 * also the fast kernels' thread independence. The two tables' agreement on random inputs
 * (including |mean| >> std, BatchNorm1d, the threaded paths, every NULL gradient and the
 * --sync-bn pieces) is checked by the parity harness, tests/test_backend_ops.c.
 *
 *     ctest --test-dir build -R batchnorm_kernels --output-on-failure
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

static void fill_normal(float *x, int64_t n, snn_rng *rng, float mean, float std)
{
    for (int64_t i = 0; i < n; i++) x[i] = mean + std * snn_rng_normal(rng);
}

/* ---- hand-computed cases, on each table ----------------------------------------------------- */

static const snn_kernels *k; /* the table under test: the reference, then the fast CPU one */

/*
 * N = 2, C = 2, HW = 2, eps = 0.
 *   channel 0: {1, 3, 5, 7}: mean 4, biased var (9+1+1+9)/4 = 5, unbiased 20/3
 *   channel 1: {-1, 1, -1, 1}: mean 0, biased var 1, unbiased 4/3
 */
static void test_forward_train_hand(void)
{
    const float x[8] = {1, 3, -1, 1,    /* n = 0: c0 (1, 3), c1 (-1, 1) */
                        5, 7, -1, 1};   /* n = 1: c0 (5, 7), c1 (-1, 1) */
    const float gamma[2] = {2.0f, 0.5f}, beta[2] = {1.0f, -1.0f};
    float out[8], mean[2], invstd[2];
    float rmean[2] = {0.0f, 0.0f}, rvar[2] = {1.0f, 1.0f};
    k->batchnorm_forward_train(out, mean, invstd, rmean, rvar, x, gamma, beta, 2, 2, 2,
                                    0.1f, 0.0f);
    const double r5 = 1.0 / sqrt(5.0);
    CHECK(mean[0] == 4.0f && mean[1] == 0.0f);
    CHECK_CLOSE(invstd[0], r5, 0.0, 1e-7);
    CHECK(invstd[1] == 1.0f);
    /* channel 0: 2 (x - 4) / sqrt(5) + 1;  channel 1: 0.5 x - 1 */
    const double want[8] = {1 - 6 * r5, 1 - 2 * r5, -1.5, -0.5,
                            1 + 2 * r5, 1 + 6 * r5, -1.5, -0.5};
    for (int i = 0; i < 8; i++) CHECK_CLOSE(out[i], want[i], 1e-6, 1e-6);
    /* running <- 0.9 running + 0.1 batch, with the unbiased variance */
    CHECK_CLOSE(rmean[0], 0.4, 1e-7, 1e-6);
    CHECK_CLOSE(rmean[1], 0.0, 1e-7, 1e-6);
    CHECK_CLOSE(rvar[0], 0.9 + 0.1 * 20.0 / 3.0, 1e-7, 1e-6);
    CHECK_CLOSE(rvar[1], 0.9 + 0.1 * 4.0 / 3.0, 1e-7, 1e-6);
    /* a second step moves the running statistics again: 0.9 * 0.4 + 0.1 * 4 = 0.76 */
    k->batchnorm_forward_train(out, mean, invstd, rmean, rvar, x, gamma, beta, 2, 2, 2,
                                    0.1f, 0.0f);
    CHECK_CLOSE(rmean[0], 0.76, 1e-7, 1e-6);
    CHECK_CLOSE(rvar[0], 0.9 * (0.9 + 0.1 * 20.0 / 3.0) + 0.1 * 20.0 / 3.0, 1e-7, 1e-6);
    /* momentum 1 replaces the running statistics by the batch's */
    k->batchnorm_forward_train(out, mean, invstd, rmean, rvar, x, gamma, beta, 2, 2, 2,
                                    1.0f, 0.0f);
    CHECK_CLOSE(rmean[0], 4.0, 1e-7, 1e-6);
    CHECK_CLOSE(rvar[1], 4.0 / 3.0, 1e-7, 1e-6);
}

/* eps enters as 1 / sqrt(var + eps): a constant channel gives out = beta, not NaN */
static void test_forward_train_eps(void)
{
    const float x[4] = {3, 3, 3, 3};
    const float gamma[1] = {2.0f}, beta[1] = {0.5f};
    float out[4], mean[1], invstd[1];
    k->batchnorm_forward_train(out, mean, invstd, NULL, NULL, x, gamma, beta, 2, 1, 2, 0.1f,
                                    1e-5f);
    CHECK_CLOSE(invstd[0], 1.0 / sqrt(1e-5), 0.0, 1e-6);
    for (int i = 0; i < 4; i++) CHECK(out[i] == 0.5f);
}

/* eval: out = gamma (x - rm) / sqrt(rv + eps) + beta, with rm = {1, 2}, rv = {4, 0.25}, eps = 0:
 * channel 0 gives 2 (x - 1) / 2 + 1 = x, channel 1 gives 0.5 (x - 2) / 0.5 - 1 = x - 3 */
static void test_forward_eval_hand(void)
{
    const float x[8] = {1, 3, -1, 1, 5, 7, -1, 1};
    const float gamma[2] = {2.0f, 0.5f}, beta[2] = {1.0f, -1.0f};
    const float rmean[2] = {1.0f, 2.0f}, rvar[2] = {4.0f, 0.25f};
    float out[8];
    k->batchnorm_forward_eval(out, x, gamma, beta, rmean, rvar, 2, 2, 2, 0.0f);
    const float want[8] = {1, 3, -4, -2, 5, 7, -4, -2};
    for (int i = 0; i < 8; i++) CHECK_CLOSE(out[i], want[i], 1e-6, 1e-6);
    /* affine = False: gamma = 1, beta = 0 */
    k->batchnorm_forward_eval(out, x, NULL, NULL, rmean, rvar, 2, 2, 2, 0.0f);
    CHECK_CLOSE(out[0], 0.0, 1e-7, 0.0);
    CHECK_CLOSE(out[2], -6.0, 1e-6, 1e-6);
}

/*
 * Backward, C = 1, x = {-1, 1, -1, 1} (mean 0, invstd 1, xhat = x), gamma = 0.5,
 * dout = {1, 2, 3, 4}: sum dout = 10, sum dout xhat = -1 + 2 - 3 + 4 = 2, M = 4,
 * dx = 0.5 / 4 (4 dout - 10 - 2 xhat) = {-0.5, -0.5, 0.5, 0.5}.
 */
static void test_backward_hand(void)
{
    const float x[4] = {-1, 1, -1, 1}, dout[4] = {1, 2, 3, 4};
    const float gamma[1] = {0.5f}, mean[1] = {0.0f}, invstd[1] = {1.0f};
    float dx[4] = {0}, dgamma[1] = {0}, dbeta[1] = {0};
    k->batchnorm_backward(dx, dgamma, dbeta, dout, x, gamma, mean, invstd, 2, 1, 2);
    const float want[4] = {-0.5f, -0.5f, 0.5f, 0.5f};
    for (int i = 0; i < 4; i++) CHECK_CLOSE(dx[i], want[i], 1e-7, 1e-6);
    CHECK(dgamma[0] == 2.0f && dbeta[0] == 10.0f);
    /* accumulate: a second call doubles everything */
    k->batchnorm_backward(dx, dgamma, dbeta, dout, x, gamma, mean, invstd, 2, 1, 2);
    for (int i = 0; i < 4; i++) CHECK_CLOSE(dx[i], 2.0f * want[i], 1e-7, 1e-6);
    CHECK(dgamma[0] == 4.0f && dbeta[0] == 20.0f);
    /* NULL outputs are skipped, the others still computed */
    k->batchnorm_backward(NULL, dgamma, NULL, dout, x, gamma, mean, invstd, 2, 1, 2);
    CHECK(dgamma[0] == 6.0f && dbeta[0] == 20.0f);
    k->batchnorm_backward(dx, NULL, NULL, dout, x, gamma, mean, invstd, 2, 1, 2);
    for (int i = 0; i < 4; i++) CHECK_CLOSE(dx[i], 3.0f * want[i], 1e-7, 1e-6);
}

/* In place: dx holds dout on entry and gets, bit for bit, what batchnorm_backward adds to a
 * zeroed dx, with the same dgamma and dbeta; with x as bf16 bits (x NULL), the same as with x
 * unpacked. Planes of 1029 values: more than the CPU's 256-value chunks of bf16, and a tail
 * shorter than its 8 lanes. Hand-computed: test_backward_hand's case. */
static void test_backward_in_place(void)
{
    const float xh[4] = {-1, 1, -1, 1}, gamma1[1] = {0.5f}, mean1[1] = {0.0f}, inv1[1] = {1.0f};
    float dh[4] = {1, 2, 3, 4}, dgh[1] = {0}, dbh[1] = {0};
    k->batchnorm_backward_in_place(dh, dgh, dbh, xh, NULL, gamma1, mean1, inv1, 2, 1, 2);
    const float want[4] = {-0.5f, -0.5f, 0.5f, 0.5f};
    for (int i = 0; i < 4; i++) CHECK_CLOSE(dh[i], want[i], 1e-7, 1e-6);
    CHECK(dgh[0] == 2.0f && dbh[0] == 10.0f);

    const int N = 3, C = 2, HW = 1029;
    const int64_t n = (int64_t)N * C * HW;
    snn_rng rng;
    snn_rng_seed(&rng, 7);
    float *x = falloc(n), *out = falloc(n), *dout = falloc(n), *dx = falloc(n), *io = falloc(n);
    uint16_t *bits = snn_alloc((size_t)n * sizeof *bits, SNN_CPU);
    SNN_ASSERT(bits);
    float gamma[2], mean[2], invstd[2];
    fill_normal(x, n, &rng, 0.3f, 1.0f);
    fill_normal(dout, n, &rng, 0.0f, 1.0f);
    fill_normal(gamma, C, &rng, 1.0f, 0.3f);
    for (int pass = 0; pass < 2; pass++) { /* fp32 x, then x rounded to bf16 and passed as bits */
        if (pass == 1) snn_round_bf16_ref(x, bits, n);
        k->batchnorm_forward_train(out, mean, invstd, NULL, NULL, x, gamma, NULL, N, C, HW, 0.1f,
                                   1e-5f);
        float dg[2] = {0}, db[2] = {0}, dg_io[2] = {0}, db_io[2] = {0};
        memset(dx, 0, (size_t)n * sizeof *dx);
        k->batchnorm_backward(dx, dg, db, dout, x, gamma, mean, invstd, N, C, HW);
        memcpy(io, dout, (size_t)n * sizeof *io);
        k->batchnorm_backward_in_place(io, dg_io, db_io, pass ? NULL : x, pass ? bits : NULL,
                                       gamma, mean, invstd, N, C, HW);
        CHECK(test_same_bits(io, dx, n));
        CHECK(test_same_bits(dg_io, dg, C) && test_same_bits(db_io, db, C));
        /* NULL dgamma, dbeta are skipped; dx is still replaced */
        memcpy(io, dout, (size_t)n * sizeof *io);
        k->batchnorm_backward_in_place(io, NULL, NULL, pass ? NULL : x, pass ? bits : NULL, gamma,
                                       mean, invstd, N, C, HW);
        CHECK(test_same_bits(io, dx, n));
    }
    snn_free(bits, (size_t)n * sizeof *bits, SNN_CPU);
    ffree(x, n), ffree(out, n), ffree(dout, n), ffree(dx, n), ffree(io, n);
}

/*
 * Finite differences: L(x, gamma, beta) = sum_k w[k] out[k] with random weights w, so
 * dL/dout = w, and out the reference's training forward (kernels/ref/batchnorm.c). Each input
 * moves by +-h, h = 1e-2, and the difference is divided by the moved distance as stored in
 * float. The float forward rounds L by ~1e-6, which the step turns into ~1e-4 of error in the
 * quotient; truncation is O(h^2) ~ 1e-5. So each table's backward kernel must match within
 * |got - fd| <= 5e-4 + 2e-3 |fd|: far inside what a wrong term in the gradient would give.
 */
static double bn_loss(const float *x, const float *gamma, const float *beta, const float *w,
                      int N, int C, int HW, float eps)
{
    float out[30], mean[2], invstd[2];
    SNN_ASSERT(N * C * HW <= 30 && C <= 2);
    snn_batchnorm_forward_train_ref(out, mean, invstd, NULL, NULL, x, gamma, beta, N, C, HW, 0.1f,
                                    eps);
    double sum = 0.0;
    for (int i = 0; i < N * C * HW; i++) sum += (double)w[i] * (double)out[i];
    return sum;
}

/* (L(v + h) - L(v - h)) / (the distance moved), v one of the inputs */
static double bn_central_difference(float *v, const float *x, const float *gamma,
                                    const float *beta, const float *w, int N, int C, int HW,
                                    float eps)
{
    const float saved = *v, h = 1e-2f;
    *v = saved + h;
    const float up = *v;
    const double lp = bn_loss(x, gamma, beta, w, N, C, HW, eps);
    *v = saved - h;
    const float down = *v;
    const double lm = bn_loss(x, gamma, beta, w, N, C, HW, eps);
    *v = saved;
    return (lp - lm) / ((double)up - (double)down);
}

static void test_backward_finite_differences(void)
{
    const int N = 3, C = 2, HW = 5;
    const int64_t n = (int64_t)N * C * HW;
    const float eps = 1e-5f;
    snn_rng rng;
    snn_rng_seed(&rng, 2024);
    float x[30], w[30], out[30], dx[30] = {0}, gamma[2], beta[2], mean[2], invstd[2];
    float dgamma[2] = {0}, dbeta[2] = {0};
    fill_normal(x, n, &rng, 0.5f, 1.5f);
    fill_normal(w, n, &rng, 0.0f, 1.0f);
    fill_normal(gamma, C, &rng, 1.0f, 0.5f);
    fill_normal(beta, C, &rng, 0.0f, 0.5f);
    k->batchnorm_forward_train(out, mean, invstd, NULL, NULL, x, gamma, beta, N, C, HW, 0.1f,
                               eps);
    k->batchnorm_backward(dx, dgamma, dbeta, w, x, gamma, mean, invstd, N, C, HW);
    for (int64_t i = 0; i < n; i++)
        CHECK_CLOSE(dx[i], bn_central_difference(&x[i], x, gamma, beta, w, N, C, HW, eps), 5e-4,
                    2e-3);
    for (int c = 0; c < C; c++) {
        CHECK_CLOSE(dgamma[c], bn_central_difference(&gamma[c], x, gamma, beta, w, N, C, HW, eps),
                    5e-4, 2e-3);
        CHECK_CLOSE(dbeta[c], bn_central_difference(&beta[c], x, gamma, beta, w, N, C, HW, eps),
                    5e-4, 2e-3);
    }
}

/* ---- threads ----------------------------------------------------------------------------- */

/* Forward and backward give the same bits with 1 thread and with all threads. */
static void test_threads_do_not_change_results(void)
{
    const int N = 16, C = 8, HW = 1024;
    const int64_t n = (int64_t)N * C * HW;
    snn_rng rng;
    snn_rng_seed(&rng, 5);
    float *x = falloc(n), *dout = falloc(n);
    float *out1 = falloc(n), *out2 = falloc(n), *dx1 = falloc(n), *dx2 = falloc(n);
    float gamma[8], beta[8], m1[8], m2[8], s1[8], s2[8];
    float dg1[8] = {0}, dg2[8] = {0}, db1[8] = {0}, db2[8] = {0};
    fill_normal(x, n, &rng, 0.1f, 1.0f);
    fill_normal(dout, n, &rng, 0.0f, 1.0f);
    fill_normal(gamma, C, &rng, 1.0f, 0.2f);
    fill_normal(beta, C, &rng, 0.0f, 0.2f);
    int saved = snn_get_num_threads();
    snn_set_num_threads(1);
    snn_batchnorm_forward_train_cpu(out1, m1, s1, NULL, NULL, x, gamma, beta, N, C, HW, 0.1f,
                                    1e-5f);
    snn_batchnorm_backward_cpu(dx1, dg1, db1, dout, x, gamma, m1, s1, N, C, HW);
    snn_set_num_threads(0);
    snn_batchnorm_forward_train_cpu(out2, m2, s2, NULL, NULL, x, gamma, beta, N, C, HW, 0.1f,
                                    1e-5f);
    snn_batchnorm_backward_cpu(dx2, dg2, db2, dout, x, gamma, m2, s2, N, C, HW);
    snn_set_num_threads(saved);
    CHECK(test_same_bits(out1, out2, n) && test_same_bits(m1, m2, C) && test_same_bits(s1, s2, C));
    CHECK(test_same_bits(dx1, dx2, n));
    CHECK(test_same_bits(dg1, dg2, C) && test_same_bits(db1, db2, C));
    ffree(x, n), ffree(dout, n), ffree(out1, n), ffree(out2, n), ffree(dx1, n), ffree(dx2, n);
}

int main(void)
{
    const snn_kernels *const tables[2] = {&snn_kernels_ref, &snn_kernels_cpu};
    for (int t = 0; t < 2; t++) {
        k = tables[t];
        fprintf(stderr, "-- the %s kernels\n", k->name);
        RUN(test_forward_train_hand);
        RUN(test_forward_train_eps);
        RUN(test_forward_eval_hand);
        RUN(test_backward_hand);
        RUN(test_backward_in_place);
        RUN(test_backward_finite_differences);
    }
    RUN(test_threads_do_not_change_results);
    return test_finish();
}
