/*
 * test_batchnorm_kernels.c - the CPU batch-norm kernels (kernels/cpu/batchnorm.c), called directly:
 * hand-computed tiny cases (statistics, running update with momentum, eval, backward),
 * a plain double-precision reference on random inputs (including |mean| >> std), accumulate
 * semantics, NULL arguments, a central finite-difference check of the training backward, and
 * thread independence.
 *
 *     ctest --test-dir build -R batchnorm_kernels --output-on-failure
 */
#include <string.h>

#include "tensor/error.h"
#include "kernels/cpu/kernels_cpu.h"
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

static double *dalloc(int64_t n)
{
    double *p = snn_alloc((size_t)n * sizeof *p, SNN_CPU);
    SNN_ASSERT(p);
    return p;
}
static void dfree(double *p, int64_t n) { snn_free(p, (size_t)n * sizeof *p, SNN_CPU); }

static void fill_normal(float *x, int64_t n, snn_rng *rng, float mean, float std)
{
    for (int64_t i = 0; i < n; i++) x[i] = mean + std * snn_rng_normal(rng);
}

/*
 * The training forward written plainly in double: out (N, C, HW) and, per channel, mean and
 * biased variance. gamma and beta in double so that finite differences can move them.
 */
static void bn_forward_f64(double *out, double *mean, double *var, const double *x,
                           const double *gamma, const double *beta, int N, int C, int HW,
                           double eps)
{
    const int64_t M = (int64_t)N * HW;
    for (int c = 0; c < C; c++) {
        double s = 0.0, sq = 0.0;
        for (int n = 0; n < N; n++)
            for (int i = 0; i < HW; i++) s += x[((int64_t)n * C + c) * HW + i];
        double mu = s / (double)M;
        for (int n = 0; n < N; n++)
            for (int i = 0; i < HW; i++) {
                double dev = x[((int64_t)n * C + c) * HW + i] - mu;
                sq += dev * dev;
            }
        double v = sq / (double)M;
        for (int n = 0; n < N; n++)
            for (int i = 0; i < HW; i++) {
                int64_t k = ((int64_t)n * C + c) * HW + i;
                out[k] = gamma[c] * (x[k] - mu) / sqrt(v + eps) + beta[c];
            }
        if (mean) mean[c] = mu;
        if (var) var[c] = v;
    }
}

/* sum_k w[k] out[k], the loss whose gradient with respect to out is w */
static double weighted_sum(const float *w, const double *out, int64_t n)
{
    double s = 0.0;
    for (int64_t k = 0; k < n; k++) s += (double)w[k] * out[k];
    return s;
}

/* ---- hand-computed cases ------------------------------------------------------------------- */

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
    snn_batchnorm_forward_train_cpu(out, mean, invstd, rmean, rvar, x, gamma, beta, 2, 2, 2,
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
    snn_batchnorm_forward_train_cpu(out, mean, invstd, rmean, rvar, x, gamma, beta, 2, 2, 2,
                                    0.1f, 0.0f);
    CHECK_CLOSE(rmean[0], 0.76, 1e-7, 1e-6);
    CHECK_CLOSE(rvar[0], 0.9 * (0.9 + 0.1 * 20.0 / 3.0) + 0.1 * 20.0 / 3.0, 1e-7, 1e-6);
    /* momentum 1 replaces the running statistics by the batch's */
    snn_batchnorm_forward_train_cpu(out, mean, invstd, rmean, rvar, x, gamma, beta, 2, 2, 2,
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
    snn_batchnorm_forward_train_cpu(out, mean, invstd, NULL, NULL, x, gamma, beta, 2, 1, 2, 0.1f,
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
    snn_batchnorm_forward_eval_cpu(out, x, gamma, beta, rmean, rvar, 2, 2, 2, 0.0f);
    const float want[8] = {1, 3, -4, -2, 5, 7, -4, -2};
    for (int i = 0; i < 8; i++) CHECK_CLOSE(out[i], want[i], 1e-6, 1e-6);
    /* affine = False: gamma = 1, beta = 0 */
    snn_batchnorm_forward_eval_cpu(out, x, NULL, NULL, rmean, rvar, 2, 2, 2, 0.0f);
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
    snn_batchnorm_backward_cpu(dx, dgamma, dbeta, dout, x, gamma, mean, invstd, 2, 1, 2);
    const float want[4] = {-0.5f, -0.5f, 0.5f, 0.5f};
    for (int i = 0; i < 4; i++) CHECK_CLOSE(dx[i], want[i], 1e-7, 1e-6);
    CHECK(dgamma[0] == 2.0f && dbeta[0] == 10.0f);
    /* accumulate: a second call doubles everything */
    snn_batchnorm_backward_cpu(dx, dgamma, dbeta, dout, x, gamma, mean, invstd, 2, 1, 2);
    for (int i = 0; i < 4; i++) CHECK_CLOSE(dx[i], 2.0f * want[i], 1e-7, 1e-6);
    CHECK(dgamma[0] == 4.0f && dbeta[0] == 20.0f);
    /* NULL outputs are skipped, the others still computed */
    snn_batchnorm_backward_cpu(NULL, dgamma, NULL, dout, x, gamma, mean, invstd, 2, 1, 2);
    CHECK(dgamma[0] == 6.0f && dbeta[0] == 20.0f);
    snn_batchnorm_backward_cpu(dx, NULL, NULL, dout, x, gamma, mean, invstd, 2, 1, 2);
    for (int i = 0; i < 4; i++) CHECK_CLOSE(dx[i], 3.0f * want[i], 1e-7, 1e-6);
}

/* ---- random inputs against the double reference ------------------------------------------- */

static void check_forward_random(int N, int C, int HW, float offset, snn_rng *rng)
{
    const int64_t n = (int64_t)N * C * HW;
    float *x = falloc(n), *out = falloc(n), *gamma = falloc(C), *beta = falloc(C);
    float *mean = falloc(C), *invstd = falloc(C), *rmean = falloc(C), *rvar = falloc(C);
    double *xd = dalloc(n), *ref = dalloc(n), *gd = dalloc(C), *bd = dalloc(C);
    double *mu = dalloc(C), *var = dalloc(C);
    fill_normal(x, n, rng, offset, 1.0f);
    fill_normal(gamma, C, rng, 1.0f, 0.3f);
    fill_normal(beta, C, rng, 0.0f, 0.3f);
    for (int c = 0; c < C; c++) rmean[c] = 0.5f, rvar[c] = 2.0f;
    for (int64_t i = 0; i < n; i++) xd[i] = x[i];
    for (int c = 0; c < C; c++) gd[c] = gamma[c], bd[c] = beta[c];
    const float eps = 1e-5f, momentum = 0.1f;
    bn_forward_f64(ref, mu, var, xd, gd, bd, N, C, HW, eps);
    snn_batchnorm_forward_train_cpu(out, mean, invstd, rmean, rvar, x, gamma, beta, N, C, HW,
                                    momentum, eps);
    const double M = (double)N * HW;
    for (int c = 0; c < C; c++) {
        CHECK_CLOSE(mean[c], mu[c], 1e-6, 1e-6);
        CHECK_CLOSE(invstd[c], 1.0 / sqrt(var[c] + (double)eps), 0.0, 1e-6);
        CHECK_CLOSE(rmean[c], 0.9 * 0.5 + 0.1 * mu[c], 1e-6, 1e-6);
        CHECK_CLOSE(rvar[c], 0.9 * 2.0 + 0.1 * var[c] * M / (M - 1.0), 1e-6, 1e-6);
    }
    float *ref_f = falloc(n);
    for (int64_t i = 0; i < n; i++) ref_f[i] = (float)ref[i];
    /* out is O(1): the float error is a few ulps of |x - mean| * invstd * gamma */
    CHECK_ALL_CLOSE(out, ref_f, n, 1e-5, 1e-5);
    ffree(ref_f, n);
    ffree(x, n), ffree(out, n), ffree(gamma, C), ffree(beta, C);
    ffree(mean, C), ffree(invstd, C), ffree(rmean, C), ffree(rvar, C);
    dfree(xd, n), dfree(ref, n), dfree(gd, C), dfree(bd, C), dfree(mu, C), dfree(var, C);
}

static void test_forward_random(void)
{
    snn_rng rng;
    snn_rng_seed(&rng, 7);
    check_forward_random(4, 3, 25, 0.0f, &rng);
    check_forward_random(5, 7, 1, 2.0f, &rng);       /* BatchNorm1d: HW = 1 */
    check_forward_random(3, 2, 13, 1000.0f, &rng);   /* |mean| >> std: needs the two-pass var */
    check_forward_random(16, 8, 1024, 0.5f, &rng);   /* large enough for the OpenMP path */
}

/* Backward against the closed form in double, and against itself after a first call. */
static void test_backward_random(void)
{
    const int N = 6, C = 4, HW = 9;
    const int64_t n = (int64_t)N * C * HW;
    snn_rng rng;
    snn_rng_seed(&rng, 11);
    float *x = falloc(n), *out = falloc(n), *dout = falloc(n), *dx = falloc(n), *ref = falloc(n);
    float gamma[4], beta[4], mean[4], invstd[4], dgamma[4] = {0}, dbeta[4] = {0};
    fill_normal(x, n, &rng, 0.3f, 2.0f);
    fill_normal(dout, n, &rng, 0.0f, 1.0f);
    fill_normal(gamma, C, &rng, 1.0f, 0.5f);
    fill_normal(beta, C, &rng, 0.0f, 0.5f);
    snn_batchnorm_forward_train_cpu(out, mean, invstd, NULL, NULL, x, gamma, beta, N, C, HW, 0.1f,
                                    1e-5f);
    double ref_dg[4], ref_db[4];
    for (int c = 0; c < C; c++) {
        double sdy = 0.0, sdyx = 0.0, M = (double)N * HW;
        for (int b = 0; b < N; b++)
            for (int i = 0; i < HW; i++) {
                int64_t k = ((int64_t)b * C + c) * HW + i;
                sdy += (double)dout[k];
                sdyx += (double)dout[k] * ((double)x[k] - (double)mean[c]) * (double)invstd[c];
            }
        ref_dg[c] = sdyx, ref_db[c] = sdy;
        for (int b = 0; b < N; b++)
            for (int i = 0; i < HW; i++) {
                int64_t k = ((int64_t)b * C + c) * HW + i;
                double xhat = ((double)x[k] - (double)mean[c]) * (double)invstd[c];
                ref[k] = (float)((double)gamma[c] * (double)invstd[c] / M *
                                 (M * (double)dout[k] - sdy - xhat * sdyx));
            }
    }
    for (int64_t i = 0; i < n; i++) dx[i] = 0.25f; /* accumulate onto something non-zero */
    snn_batchnorm_backward_cpu(dx, dgamma, dbeta, dout, x, gamma, mean, invstd, N, C, HW);
    for (int64_t i = 0; i < n; i++) dx[i] -= 0.25f;
    CHECK_ALL_CLOSE(dx, ref, n, 1e-5, 1e-4);
    for (int c = 0; c < C; c++) {
        CHECK_CLOSE(dgamma[c], ref_dg[c], 1e-5, 1e-5);
        CHECK_CLOSE(dbeta[c], ref_db[c], 1e-5, 1e-5);
    }
    ffree(x, n), ffree(out, n), ffree(dout, n), ffree(dx, n), ffree(ref, n);
}

/*
 * Finite differences: L(x, gamma, beta) = sum_k w[k] out[k] with random weights w, so
 * dL/dout = w. The forward is evaluated in double (bn_forward_f64) at float inputs moved by
 * +-h, h = 1e-3 (truncation error O(h^2) ~ 1e-6 relative; the double rounding is ~1e-13).
 * The float backward kernel must match: |got - fd| <= 2e-4 + 2e-3 |fd|.
 */
static void test_backward_finite_differences(void)
{
    const int N = 3, C = 2, HW = 5;
    const int64_t n = (int64_t)N * C * HW;
    const double h = 1e-3, eps = 1e-5;
    snn_rng rng;
    snn_rng_seed(&rng, 2024);
    float x[30], w[30], out[30], dx[30] = {0}, gamma[2], beta[2], mean[2], invstd[2];
    float dgamma[2] = {0}, dbeta[2] = {0};
    fill_normal(x, n, &rng, 0.5f, 1.5f);
    fill_normal(w, n, &rng, 0.0f, 1.0f);
    fill_normal(gamma, C, &rng, 1.0f, 0.5f);
    fill_normal(beta, C, &rng, 0.0f, 0.5f);
    snn_batchnorm_forward_train_cpu(out, mean, invstd, NULL, NULL, x, gamma, beta, N, C, HW, 0.1f,
                                    (float)eps);
    snn_batchnorm_backward_cpu(dx, dgamma, dbeta, w, x, gamma, mean, invstd, N, C, HW);

    double xd[30], od[30], gd[2], bd[2];
    for (int64_t i = 0; i < n; i++) xd[i] = x[i];
    for (int c = 0; c < C; c++) gd[c] = gamma[c], bd[c] = beta[c];
    /* L as a function of the double copies */
#define LOSS_NOW() \
    (bn_forward_f64(od, NULL, NULL, xd, gd, bd, N, C, HW, eps), weighted_sum(w, od, n))
    for (int64_t i = 0; i < n; i++) {
        xd[i] = (double)x[i] + h;
        double lp = LOSS_NOW();
        xd[i] = (double)x[i] - h;
        double lm = LOSS_NOW();
        xd[i] = x[i];
        CHECK_CLOSE(dx[i], (lp - lm) / (2 * h), 2e-4, 2e-3);
    }
    for (int c = 0; c < C; c++) {
        gd[c] = (double)gamma[c] + h;
        double lp = LOSS_NOW();
        gd[c] = (double)gamma[c] - h;
        double lm = LOSS_NOW();
        gd[c] = gamma[c];
        CHECK_CLOSE(dgamma[c], (lp - lm) / (2 * h), 2e-4, 2e-3);
        bd[c] = (double)beta[c] + h;
        lp = LOSS_NOW();
        bd[c] = (double)beta[c] - h;
        lm = LOSS_NOW();
        bd[c] = beta[c];
        CHECK_CLOSE(dbeta[c], (lp - lm) / (2 * h), 2e-4, 2e-3);
    }
#undef LOSS_NOW
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
    CHECK(test_same_bits(dx1, dx2, n) && test_same_bits(dg1, dg2, C) && test_same_bits(db1, db2, C));
    ffree(x, n), ffree(dout, n), ffree(out1, n), ffree(out2, n), ffree(dx1, n), ffree(dx2, n);
}

int main(void)
{
    RUN(test_forward_train_hand);
    RUN(test_forward_train_eps);
    RUN(test_forward_eval_hand);
    RUN(test_backward_hand);
    RUN(test_forward_random);
    RUN(test_backward_random);
    RUN(test_backward_finite_differences);
    RUN(test_threads_do_not_change_results);
    return test_finish();
}
