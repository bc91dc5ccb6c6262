/*
 * test_loss_kernels.c - the log-softmax, NLL and one-hot kernels called directly, on what a
 * parity check between two tables cannot show, each run on the reference kernels
 * (kernels/ref/loss.c) and the fast CPU ones (kernels/cpu/loss.c): hand-computed rows,
 * stability at large and infinite logits, accumulate semantics and NULL gradients, a central
 * finite-difference check of the log-softmax backward against the reference forward, and
 * cross-entropy's gradient softmax - one_hot. The two tables' agreement on random rows (wide,
 * narrow, threaded) is checked by the parity harness, tests/test_backend_ops.c.
 *
 *     ctest --test-dir build -R loss_kernels --output-on-failure
 */
#include <string.h>

#include "tensor/error.h"
#include "kernels/cpu/kernels_cpu.h"
#include "kernels/ref/kernels_ref.h"
#include "test.h"

static void fill_normal(float *x, int64_t n, snn_rng *rng, float mean, float std)
{
    for (int64_t i = 0; i < n; i++) x[i] = mean + std * snn_rng_normal(rng);
}

static const snn_kernels *k; /* the table under test: the reference, then the fast CPU one */

/* ---- log-softmax -------------------------------------------------------------------------- */

/* [0, ln 2, ln 3]: exp sums to 1 + 2 + 3 = 6, so out = [-ln 6, -ln 3, -ln 2]. The second row is
 * the first moved by 1000: without subtracting the max, exp(1000) would overflow to inf. */
static void test_log_softmax_hand(void)
{
    const float x[6] = {0.0f, logf(2.0f), logf(3.0f), 1000.0f, 1000.0f + logf(2.0f),
                        1000.0f + logf(3.0f)};
    float out[6];
    k->log_softmax_forward(out, x, 2, 3);
    const double want[3] = {-log(6.0), -log(3.0), -log(2.0)};
    for (int c = 0; c < 3; c++) CHECK_CLOSE(out[c], want[c], 1e-6, 1e-6);
    /* 1000 + ln 2 is rounded to float (ulp 6e-5), so the second row is only that close */
    for (int c = 0; c < 3; c++) CHECK_CLOSE(out[3 + c], want[c], 1e-4, 0.0);

    /* a -inf logit has probability 0: out = -inf there, the rest is the log-softmax of the rest */
    const float y[3] = {-INFINITY, 0.0f, 0.0f};
    k->log_softmax_forward(out, y, 1, 3);
    CHECK(isinf(out[0]) && out[0] < 0.0f);
    CHECK_CLOSE(out[1], -log(2.0), 1e-7, 1e-6);
    CHECK_CLOSE(out[2], -log(2.0), 1e-7, 1e-6);

    /* a single class: log-softmax is 0 */
    const float z[1] = {42.0f};
    k->log_softmax_forward(out, z, 1, 1);
    CHECK(out[0] == 0.0f);
}

/* out = log [0.5, 0.25, 0.25], dout = [1, 0, 0]: dx = dout - softmax * sum dout
 * = [1 - 0.5, -0.25, -0.25]; a second call doubles it. */
static void test_log_softmax_backward_hand(void)
{
    const float out[3] = {logf(0.5f), logf(0.25f), logf(0.25f)};
    const float dout[3] = {1.0f, 0.0f, 0.0f};
    float dx[3] = {0};
    k->log_softmax_backward(dx, dout, out, 1, 3);
    const float want[3] = {0.5f, -0.25f, -0.25f};
    for (int c = 0; c < 3; c++) CHECK_CLOSE(dx[c], want[c], 1e-7, 1e-6);
    k->log_softmax_backward(dx, dout, out, 1, 3);
    for (int c = 0; c < 3; c++) CHECK_CLOSE(dx[c], 2.0f * want[c], 1e-7, 1e-6);
    k->log_softmax_backward(NULL, dout, out, 1, 3); /* skipped */
}

/*
 * Finite differences: L(x) = sum w * log_softmax(x) for random w, with the reference's forward
 * (float, accumulated here in double), each logit moved by +-h, h = 1e-2, the difference
 * divided by the distance moved as stored in float. The forward's rounding (~1e-7 a row) over
 * the step gives ~1e-5 of error, truncation O(h^2) about as much: each table's backward must
 * match within |got - fd| <= 1e-4 + 1e-3 |fd|.
 */
static void test_log_softmax_backward_finite_differences(void)
{
    enum { N = 4, C = 7 };
    const float h = 1e-2f;
    snn_rng rng;
    snn_rng_seed(&rng, 17);
    float x[N * C], w[N * C], out[N * C], dx[N * C] = {0};
    fill_normal(x, N * C, &rng, 0.0f, 2.0f);
    fill_normal(w, N * C, &rng, 0.0f, 1.0f);
    k->log_softmax_forward(out, x, N, C);
    k->log_softmax_backward(dx, w, out, N, C);
    for (int n = 0; n < N; n++) {
        float row[C], od[C];
        memcpy(row, x + n * C, sizeof row);
        for (int c = 0; c < C; c++) {
            double l[2];
            float moved[2];
            for (int side = 0; side < 2; side++) {
                row[c] = x[n * C + c] + (side ? -h : h);
                moved[side] = row[c];
                snn_log_softmax_forward_ref(od, row, 1, C);
                l[side] = 0.0;
                for (int j = 0; j < C; j++) l[side] += (double)w[n * C + j] * (double)od[j];
            }
            row[c] = x[n * C + c];
            CHECK_CLOSE(dx[n * C + c], (l[0] - l[1]) / ((double)moved[0] - (double)moved[1]),
                        1e-4, 1e-3);
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
    k->nll_forward(loss, logp, labels, 2, 3, 0.5f);
    CHECK(loss[0] == 3.5f);
    const float dloss[1] = {2.0f};
    float dlogp[6] = {0};
    k->nll_backward(dlogp, dloss, labels, 2, 3, 0.5f);
    const float want[6] = {0, 0, -1, -1, 0, 0};
    for (int i = 0; i < 6; i++) CHECK(dlogp[i] == want[i]);
    k->nll_backward(dlogp, dloss, labels, 2, 3, 0.5f);
    for (int i = 0; i < 6; i++) CHECK(dlogp[i] == 2.0f * want[i]);
    k->nll_backward(NULL, dloss, labels, 2, 3, 0.5f); /* skipped */
}

static void test_one_hot(void)
{
    const float labels[3] = {2.0f, 0.0f, 1.0f};
    float out[9];
    for (int i = 0; i < 9; i++) out[i] = 7.0f; /* overwritten, not accumulated */
    k->one_hot(out, labels, 3, 3);
    const float want[9] = {0, 0, 1, 1, 0, 0, 0, 1, 0};
    for (int i = 0; i < 9; i++) CHECK(out[i] == want[i]);
}

/* Cross-entropy composed from the kernels: dlogits = scale (softmax - one_hot) dloss, with
 * softmax the exp of the reference's log-softmax, and the loss -mean logp[label]. */
static void test_cross_entropy_gradient(void)
{
    enum { N = 5, C = 4 };
    snn_rng rng;
    snn_rng_seed(&rng, 23);
    float x[N * C], logp[N * C], labels[N], onehot[N * C], dlogp[N * C] = {0}, dx[N * C] = {0};
    float ref[N * C];
    fill_normal(x, N * C, &rng, 0.0f, 1.5f);
    for (int n = 0; n < N; n++) labels[n] = (float)snn_rng_below(&rng, C);
    const float scale = 1.0f / N, dloss[1] = {1.0f};
    float loss[1];
    k->log_softmax_forward(logp, x, N, C);
    k->nll_forward(loss, logp, labels, N, C, scale);
    k->nll_backward(dlogp, dloss, labels, N, C, scale);
    k->log_softmax_backward(dx, dlogp, logp, N, C);
    k->one_hot(onehot, labels, N, C);
    snn_log_softmax_forward_ref(ref, x, N, C);
    double ce = 0.0;
    for (int n = 0; n < N; n++) {
        ce -= (double)ref[n * C + (int)labels[n]] / N;
        for (int c = 0; c < C; c++)
            CHECK_CLOSE(dx[n * C + c],
                        (exp((double)ref[n * C + c]) - (double)onehot[n * C + c]) / N, 1e-7,
                        1e-5);
    }
    CHECK_CLOSE(loss[0], ce, 1e-6, 1e-6);
}

int main(void)
{
    const snn_kernels *const tables[2] = {&snn_kernels_ref, &snn_kernels_cpu};
    for (int t = 0; t < 2; t++) {
        k = tables[t];
        fprintf(stderr, "-- the %s kernels\n", k->name);
        RUN(test_log_softmax_hand);
        RUN(test_log_softmax_backward_hand);
        RUN(test_log_softmax_backward_finite_differences);
        RUN(test_nll_hand);
        RUN(test_one_hot);
        RUN(test_cross_entropy_gradient);
    }
    return test_finish();
}
