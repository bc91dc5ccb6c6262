/*
 * test_loss_tet.c - the TET loss (nn/loss_tet.c; Deng et al., ICLR 2022, arXiv:2202.11946):
 *
 *     L = (1 - lambda) (1/T) sum_t CE_smooth(O[t], y) + lambda (1/(T N K)) sum (O - phi)^2
 *
 *   - value and gradient against a plain loop in double over random (T, N, K) outputs, for
 *     several lambda, phi and smoothing; the gradient's closed form is
 *         dL/dO[t,n,k] = (1 - lambda) (softmax(O[t,n])[k] - q[n,k]) / (T N)
 *                        + lambda 2 (O[t,n,k] - phi) / (T N K),
 *         q[n, k] = (1 - smoothing) [k == y_n] + smoothing / K;
 *   - a gradcheck;
 *   - lambda = 0 is the mean of the per-step cross-entropies (each step a separate
 *     snn_cross_entropy call), and bit for bit one cross-entropy over the T N rows;
 *   - on a spiking CNN's snn_model_forward_steps: at T = 1 with lambda = 0 it is the
 *     cross-entropy of snn_module_forward's logits bit for bit, and its backward reaches every
 *     trainable parameter;
 *   - bad arguments are named.
 * Run: ctest --test-dir build -R loss_tet
 */
#include <math.h>
#include <string.h>

#include "snn.h"
#include "test.h"

/* The loss and its gradient (T, N, K) in double, by the formula, with plain loops. */
static double tet_reference(const float *O, const float *y, int T, int N, int K, double lambda,
                            double phi, double eps, double *grad)
{
    double ce = 0.0, mse = 0.0;
    for (int t = 0; t < T; t++)
        for (int n = 0; n < N; n++) {
            const float *row = O + ((size_t)t * N + n) * K;
            double top = row[0], sum = 0.0;
            for (int k = 1; k < K; k++) top = fmax(top, row[k]);
            for (int k = 0; k < K; k++) sum += exp((double)row[k] - top);
            const double lse = top + log(sum);
            for (int k = 0; k < K; k++) {
                const double logp = (double)row[k] - lse;
                const double q = (1.0 - eps) * (k == (int)y[n]) + eps / K;
                ce += -q * logp; /* (1 - eps) (-logp[y]) + (eps / K) sum_k (-logp[k]) */
                const double d = (double)row[k] - phi;
                mse += d * d;
                grad[((size_t)t * N + n) * K + k] = (1.0 - lambda) * (exp(logp) - q) / (T * N) +
                                                    lambda * 2.0 * d / ((double)T * N * K);
            }
        }
    return (1.0 - lambda) * ce / (T * N) + lambda * mse / ((double)T * N * K);
}

static void test_against_the_formula(void)
{
    const struct { int T, N, K; float lambda, phi, smoothing; } cases[] = {
        {4, 8, 10, SNN_TET_LAMBDA, SNN_TET_PHI, 0.0f},
        {3, 5, 4, 0.05f, 1.0f, 0.1f},
        {2, 7, 3, 0.5f, -0.3f, 0.2f},
        {5, 3, 6, 1.0f, 2.0f, 0.0f},
        {1, 9, 5, 0.0f, 1.0f, 0.3f},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const int T = cases[c].T, N = cases[c].N, K = cases[c].K;
        snn_step_begin();
        snn_tensor *O = test_uniform(SNN_SHAPE(T, N, K), -3.0f, 3.0f, 100 + c);
        O->requires_grad = true;
        float yv[16];
        for (int n = 0; n < N; n++) yv[n] = (float)((n * 7 + (int)c) % K);
        snn_tensor *y = snn_from_host(SNN_SHAPE(N), yv, SNN_CPU);
        double grad[5 * 8 * 10];
        const double want = tet_reference(O->data, yv, T, N, K, cases[c].lambda, cases[c].phi,
                                          cases[c].smoothing, grad);
        snn_tensor *loss = snn_tet_loss(O, y, cases[c].lambda, cases[c].phi, cases[c].smoothing);
        CHECK(loss && loss->numel == 1);
        if (loss) {
            CHECK_CLOSE(loss->data[0], want, 1e-6, 1e-5);
            CHECK_OK(snn_backward(loss));
            double top = 0.0;
            for (int64_t i = 0; i < O->numel; i++) top = fmax(top, fabs(grad[i]));
            for (int64_t i = 0; i < O->numel && O->grad; i++)
                CHECK_CLOSE(O->grad->data[i], grad[i], 1e-5 * top, 1e-5);
        }
        snn_step_end();
    }
}

static snn_tensor *f_tet(snn_tensor *const *in, void *ctx)
{
    return snn_tet_loss(in[0], ctx, 0.3f, 0.5f, 0.1f);
}

static void test_gradcheck(void)
{
    snn_step_begin();
    snn_tensor *in[1] = {test_uniform(SNN_SHAPE(3, 4, 5), -2.0f, 2.0f, 7)};
    in[0]->requires_grad = true;
    float yv[4] = {4, 0, 2, 2};
    const snn_gradcheck_options opt = {.eps = 1e-2f, .atol = 1e-3f, .rtol = 1e-2f, .seed = 3};
    CHECK_OK(snn_gradcheck("tet_loss", f_tet, 1, in, snn_from_host(SNN_SHAPE(4), yv, SNN_CPU), opt));
    snn_step_end();
}

static void test_lambda_zero_is_per_step_cross_entropy(void)
{
    const int T = 4, N = 6, K = 5;
    snn_step_begin();
    snn_tensor *O = test_uniform(SNN_SHAPE(T, N, K), -3.0f, 3.0f, 11);
    float yv[6] = {0, 4, 2, 1, 3, 3}, rep[4 * 6];
    snn_tensor *y = snn_from_host(SNN_SHAPE(N), yv, SNN_CPU);
    for (int s = 0; s < 2; s++) {
        const float smoothing = s ? 0.1f : 0.0f;
        snn_tensor *tet = snn_tet_loss(O, y, 0.0f, SNN_TET_PHI, smoothing);
        /* each step on its own, as the paper writes it: (1/T) sum_t CE(O[t], y) */
        double mean = 0.0;
        for (int t = 0; t < T; t++) {
            snn_tensor *step = snn_from_host(SNN_SHAPE(N, K), O->data + (size_t)t * N * K, SNN_CPU);
            snn_tensor *ce = snn_cross_entropy_smooth(step, y, smoothing);
            CHECK(ce != NULL);
            if (ce) mean += (double)ce->data[0] / (double)T;
        }
        CHECK(tet != NULL);
        if (tet) CHECK_CLOSE(tet->data[0], mean, 1e-6, 1e-6);
        /* and exactly one cross-entropy over the T N rows with the labels repeated */
        for (int t = 0; t < T; t++) memcpy(rep + t * N, yv, sizeof yv);
        snn_tensor *rows = snn_reshape(O, SNN_SHAPE(T * N, K));
        snn_tensor *all = snn_cross_entropy_smooth(rows, snn_from_host(SNN_SHAPE(T * N), rep, SNN_CPU),
                                                   smoothing);
        CHECK(tet && all && tet->data[0] == all->data[0]);
    }
    snn_step_end();
}

static void test_on_a_model(void)
{
    snn_rng rng;
    snn_rng_seed(&rng, 9);
    snn_model_config c = snn_model_config_default(SNN_MODEL_SPIKING_CNN);
    c.width_base = 4, c.hidden = 16, c.time_steps = 1;
    snn_module *m = snn_model_new(&c, &rng);
    CHECK(m != NULL);
    if (!m) return;
    snn_tensor *x = snn_tensor_new(SNN_SHAPE(3, 1, 28, 28), SNN_CPU);
    CHECK_OK(snn_tensor_uniform_(x, &rng, 0.0f, 1.0f));
    const float yv[3] = {1, 7, 3};
    /* T = 1, lambda = 0: the per-step loss is the usual one, bit for bit */
    snn_step_begin();
    snn_tensor *y = snn_from_host(SNN_SHAPE(3), yv, SNN_CPU);
    snn_tensor *ce = snn_cross_entropy(snn_module_forward(m, x), y);
    snn_tensor *tet = snn_tet_loss(snn_model_forward_steps(m, x), y, 0.0f, SNN_TET_PHI, 0.0f);
    CHECK(ce && tet && ce->data[0] == tet->data[0]);
    snn_step_end();
    /* T = 4 with the defaults: the gradient reaches every trainable parameter */
    CHECK_OK(snn_model_set_time_steps(m, 4));
    snn_step_begin();
    snn_module_zero_grad(m);
    y = snn_from_host(SNN_SHAPE(3), yv, SNN_CPU);
    tet = snn_tet_loss(snn_model_forward_steps(m, x), y, SNN_TET_LAMBDA, SNN_TET_PHI, 0.1f);
    CHECK(tet && isfinite(tet->data[0]));
    if (tet) {
        CHECK_OK(snn_backward(tet));
        snn_param_list list;
        CHECK_OK(snn_module_parameters(m, &list));
        int without = 0;
        for (int p = 0; p < list.count; p++)
            without += list.items[p].trainable && !list.items[p].tensor->grad;
        CHECK(without == 0);
        snn_param_list_free(&list);
    }
    snn_step_end();
    snn_tensor_free(x);
    snn_module_free(m);
}

static void test_errors(void)
{
    snn_step_begin();
    snn_tensor *O = snn_zeros(SNN_SHAPE(2, 3, 4), SNN_CPU);
    float yv[3] = {0, 1, 2};
    snn_tensor *y = snn_from_host(SNN_SHAPE(3), yv, SNN_CPU);
    struct { snn_tensor *O, *y; float lambda, phi, smoothing; const char *arg; } bad[] = {
        {snn_zeros(SNN_SHAPE(6, 4), SNN_CPU), y, 0.0f, 1.0f, 0.0f, "'step_logits'"},
        {O, snn_zeros(SNN_SHAPE(2), SNN_CPU), 0.0f, 1.0f, 0.0f, "'labels'"},
        {O, y, -0.1f, 1.0f, 0.0f, "'lambda'"},
        {O, y, 1.5f, 1.0f, 0.0f, "'lambda'"},
        {O, y, NAN, 1.0f, 0.0f, "'lambda'"},
        {O, y, 0.1f, INFINITY, 0.0f, "'phi'"},
        {O, y, 0.1f, NAN, 0.0f, "'phi'"},
        {O, y, 0.1f, 1.0f, 1.0f, "'smoothing'"},
        {O, y, 0.1f, 1.0f, -0.5f, "'smoothing'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snn_clear_error();
        CHECK(snn_tet_loss(bad[i].O, bad[i].y, bad[i].lambda, bad[i].phi, bad[i].smoothing) == NULL);
        const bool named = strstr(snn_last_error(), "snn_tet_loss") && strstr(snn_last_error(), bad[i].arg);
        if (!named) fprintf(stderr, "  case %zu: '%s'\n", i, snn_last_error());
        CHECK(named);
    }
    snn_clear_error();
    snn_step_end();
}

int main(void)
{
    snn_set_num_threads(2);
    RUN(test_against_the_formula);
    RUN(test_gradcheck);
    RUN(test_lambda_zero_is_per_step_cross_entropy);
    RUN(test_on_a_model);
    RUN(test_errors);
    return test_finish();
}
