/*
 * test_loss_kernels.c - the CPU log-softmax, NLL and one-hot kernels (kernels/cpu/loss.c), called
 * directly: hand-computed rows, stability at large and infinite logits, a plain double
 * reference on random rows, accumulate semantics, a central finite-difference check of the
 * log-softmax backward, and cross-entropy's gradient softmax - one_hot.
 *
 *     ctest --test-dir build -R loss_kernels --output-on-failure
 */
#include <string.h>

#include "tensor/error.h"
#include "kernels/cpu/kernels_cpu.h"
#include "test.h"

static void fill_normal(float *x, int64_t n, snn_rng *rng, float mean, float std)
{
    for (int64_t i = 0; i < n; i++) x[i] = mean + std * snn_rng_normal(rng);
}

/* log-softmax of one row, plainly, in double */
static void log_softmax_f64(double *out, const double *x, int C)
{
    double m = x[0], s = 0.0;
    for (int c = 1; c < C; c++) m = fmax(m, x[c]);
    for (int c = 0; c < C; c++) s += exp(x[c] - m);
    for (int c = 0; c < C; c++) out[c] = x[c] - m - log(s);
}

/* ---- log-softmax -------------------------------------------------------------------------- */

/* [0, ln 2, ln 3]: exp sums to 1 + 2 + 3 = 6, so out = [-ln 6, -ln 3, -ln 2]. The second row is
 * the first moved by 1000: without subtracting the max, exp(1000) would overflow to inf. */
static void test_log_softmax_hand(void)
{
    const float x[6] = {0.0f, logf(2.0f), logf(3.0f), 1000.0f, 1000.0f + logf(2.0f),
                        1000.0f + logf(3.0f)};
    float out[6];
    snn_log_softmax_forward_cpu(out, x, 2, 3);
    const double want[3] = {-log(6.0), -log(3.0), -log(2.0)};
    for (int c = 0; c < 3; c++) CHECK_CLOSE(out[c], want[c], 1e-6, 1e-6);
    /* 1000 + ln 2 is rounded to float (ulp 6e-5), so the second row is only that close */
    for (int c = 0; c < 3; c++) CHECK_CLOSE(out[3 + c], want[c], 1e-4, 0.0);

    /* a -inf logit has probability 0: out = -inf there, the rest is the log-softmax of the rest */
    const float y[3] = {-INFINITY, 0.0f, 0.0f};
    snn_log_softmax_forward_cpu(out, y, 1, 3);
    CHECK(isinf(out[0]) && out[0] < 0.0f);
    CHECK_CLOSE(out[1], -log(2.0), 1e-7, 1e-6);
    CHECK_CLOSE(out[2], -log(2.0), 1e-7, 1e-6);

    /* a single class: log-softmax is 0 */
    const float z[1] = {42.0f};
    snn_log_softmax_forward_cpu(out, z, 1, 1);
    CHECK(out[0] == 0.0f);
}

static void test_log_softmax_random(void)
{
    enum { N = 300, C = 13 }; /* small: one thread (the next case takes the OpenMP path) */
    snn_rng rng;
    snn_rng_seed(&rng, 3);
    static float x[N * C], out[N * C], ref[N * C];
    fill_normal(x, N * C, &rng, 0.0f, 5.0f);
    snn_log_softmax_forward_cpu(out, x, N, C);
    for (int n = 0; n < N; n++) {
        double xd[C], od[C];
        for (int c = 0; c < C; c++) xd[c] = x[n * C + c];
        log_softmax_f64(od, xd, C);
        for (int c = 0; c < C; c++) ref[n * C + c] = (float)od[c];
    }
    CHECK_ALL_CLOSE(out, ref, N * C, 2e-6, 1e-6);

    /* wide rows, enough elements for the OpenMP path: 64 x 1000 */
    enum { N2 = 64, C2 = 1000 };
    float *x2 = snn_alloc(N2 * C2 * sizeof *x2, SNN_CPU), *o2 = snn_alloc(N2 * C2 * sizeof *o2,
                                                                         SNN_CPU);
    double *xd2 = snn_alloc(C2 * sizeof *xd2, SNN_CPU), *od2 = snn_alloc(C2 * sizeof *od2, SNN_CPU);
    SNN_ASSERT(x2 && o2 && xd2 && od2);
    fill_normal(x2, N2 * C2, &rng, 1.0f, 3.0f);
    snn_log_softmax_forward_cpu(o2, x2, N2, C2);
    double worst = 0.0;
    for (int n = 0; n < N2; n++) {
        for (int c = 0; c < C2; c++) xd2[c] = x2[n * C2 + c];
        log_softmax_f64(od2, xd2, C2);
        for (int c = 0; c < C2; c++) {
            double err = fabs((double)o2[n * C2 + c] - od2[c]) / (1e-5 + 1e-6 * fabs(od2[c]));
            worst = fmax(worst, err);
        }
    }
    CHECK(worst <= 1.0);
    snn_free(x2, N2 * C2 * sizeof *x2, SNN_CPU), snn_free(o2, N2 * C2 * sizeof *o2, SNN_CPU);
    snn_free(xd2, C2 * sizeof *xd2, SNN_CPU), snn_free(od2, C2 * sizeof *od2, SNN_CPU);
}

/* out = log [0.5, 0.25, 0.25], dout = [1, 0, 0]: dx = dout - softmax * sum dout
 * = [1 - 0.5, -0.25, -0.25]; a second call doubles it. */
static void test_log_softmax_backward_hand(void)
{
    const float out[3] = {logf(0.5f), logf(0.25f), logf(0.25f)};
    const float dout[3] = {1.0f, 0.0f, 0.0f};
    float dx[3] = {0};
    snn_log_softmax_backward_cpu(dx, dout, out, 1, 3);
    const float want[3] = {0.5f, -0.25f, -0.25f};
    for (int c = 0; c < 3; c++) CHECK_CLOSE(dx[c], want[c], 1e-7, 1e-6);
    snn_log_softmax_backward_cpu(dx, dout, out, 1, 3);
    for (int c = 0; c < 3; c++) CHECK_CLOSE(dx[c], 2.0f * want[c], 1e-7, 1e-6);
    snn_log_softmax_backward_cpu(NULL, dout, out, 1, 3); /* skipped */
}

/*
 * Finite differences: L(x) = sum w * log_softmax(x) for random w, evaluated in double at float
 * inputs moved by +-h, h = 1e-3 (truncation ~1e-7 here). The float backward kernel must match:
 * |got - fd| <= 1e-5 + 1e-4 |fd|.
 */
static void test_log_softmax_backward_finite_differences(void)
{
    enum { N = 4, C = 7 };
    const double h = 1e-3;
    snn_rng rng;
    snn_rng_seed(&rng, 17);
    float x[N * C], w[N * C], out[N * C], dx[N * C] = {0};
    fill_normal(x, N * C, &rng, 0.0f, 2.0f);
    fill_normal(w, N * C, &rng, 0.0f, 1.0f);
    snn_log_softmax_forward_cpu(out, x, N, C);
    snn_log_softmax_backward_cpu(dx, w, out, N, C);
    for (int n = 0; n < N; n++) {
        double xd[C], od[C];
        for (int c = 0; c < C; c++) xd[c] = x[n * C + c];
        for (int c = 0; c < C; c++) {
            double l[2];
            for (int side = 0; side < 2; side++) {
                xd[c] = (double)x[n * C + c] + (side ? -h : h);
                log_softmax_f64(od, xd, C);
                l[side] = 0.0;
                for (int j = 0; j < C; j++) l[side] += (double)w[n * C + j] * od[j];
            }
            xd[c] = x[n * C + c];
            CHECK_CLOSE(dx[n * C + c], (l[0] - l[1]) / (2 * h), 1e-5, 1e-4);
        }
    }
}

/* ---- NLL and one-hot ---------------------------------------------------------------------- */

/* logp = [[-1, -2, -3], [-4, -5, -6]], labels [2, 0], scale 0.5 (the mean):
 * loss = -0.5 (-3 - 4) = 3.5; with dloss = 2, dlogp[0, 2] and dlogp[1, 0] get -0.5 * 2 = -1. */
static void test_nll_hand(void)
{
    const float logp[6] = {-1, -2, -3, -4, -5, -6}, labels[2] = {2.0f, 0.0f};
    float loss[1] = {123.0f};
    snn_nll_forward_cpu(loss, logp, labels, 2, 3, 0.5f);
    CHECK(loss[0] == 3.5f);
    const float dloss[1] = {2.0f};
    float dlogp[6] = {0};
    snn_nll_backward_cpu(dlogp, dloss, labels, 2, 3, 0.5f);
    const float want[6] = {0, 0, -1, -1, 0, 0};
    for (int i = 0; i < 6; i++) CHECK(dlogp[i] == want[i]);
    snn_nll_backward_cpu(dlogp, dloss, labels, 2, 3, 0.5f);
    for (int i = 0; i < 6; i++) CHECK(dlogp[i] == 2.0f * want[i]);
    snn_nll_backward_cpu(NULL, dloss, labels, 2, 3, 0.5f); /* skipped */
}

static void test_one_hot(void)
{
    const float labels[3] = {2.0f, 0.0f, 1.0f};
    float out[9];
    for (int i = 0; i < 9; i++) out[i] = 7.0f; /* overwritten, not accumulated */
    snn_one_hot_cpu(out, labels, 3, 3);
    const float want[9] = {0, 0, 1, 1, 0, 0, 0, 1, 0};
    for (int i = 0; i < 9; i++) CHECK(out[i] == want[i]);
}

/* Cross-entropy composed from the kernels: dlogits = scale (softmax - one_hot) dloss. */
static void test_cross_entropy_gradient(void)
{
    enum { N = 5, C = 4 };
    snn_rng rng;
    snn_rng_seed(&rng, 23);
    float x[N * C], logp[N * C], labels[N], onehot[N * C], dlogp[N * C] = {0}, dx[N * C] = {0};
    fill_normal(x, N * C, &rng, 0.0f, 1.5f);
    for (int n = 0; n < N; n++) labels[n] = (float)snn_rng_below(&rng, C);
    const float scale = 1.0f / N, dloss[1] = {1.0f};
    float loss[1];
    snn_log_softmax_forward_cpu(logp, x, N, C);
    snn_nll_forward_cpu(loss, logp, labels, N, C, scale);
    snn_nll_backward_cpu(dlogp, dloss, labels, N, C, scale);
    snn_log_softmax_backward_cpu(dx, dlogp, logp, N, C);
    snn_one_hot_cpu(onehot, labels, N, C);
    double ce = 0.0;
    for (int n = 0; n < N; n++) {
        double xd[C], od[C];
        for (int c = 0; c < C; c++) xd[c] = x[n * C + c];
        log_softmax_f64(od, xd, C);
        ce -= od[(int)labels[n]] / N;
        for (int c = 0; c < C; c++)
            CHECK_CLOSE(dx[n * C + c], (exp(od[c]) - (double)onehot[n * C + c]) / N, 1e-7, 1e-5);
    }
    CHECK_CLOSE(loss[0], ce, 1e-6, 1e-6);
}

int main(void)
{
    RUN(test_log_softmax_hand);
    RUN(test_log_softmax_random);
    RUN(test_log_softmax_backward_hand);
    RUN(test_log_softmax_backward_finite_differences);
    RUN(test_nll_hand);
    RUN(test_one_hot);
    RUN(test_cross_entropy_gradient);
    return test_finish();
}
