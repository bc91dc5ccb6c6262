/*
 * test_optim_kernels.c - the SGD and Adam/AdamW updates called directly, each run on the
 * reference kernels (kernels/ref/optim.c) and the fast CPU ones (kernels/cpu/optim.c): steps
 * worked by hand (plain, weight decay, momentum, dampening, Nesterov, the first step's buffer,
 * Adam's first two steps with the float betas' bias corrections, Adam vs AdamW decay). The two
 * tables' agreement on random vectors over every option, with sizes past the threaded path's
 * threshold, and the multi-tensor Adam, are checked by the parity harness,
 * tests/test_backend_ops.c.
 *
 *     ctest --test-dir build -R optim_kernels --output-on-failure
 */

#include "kernels/cpu/kernels_cpu.h"
#include "kernels/ref/kernels_ref.h"
#include "test.h"

static const snn_kernels *k; /* the table under test: the reference, then the fast CPU one */

/* ---- SGD by hand: p = 1, grad = 0.5, lr = 0.1 ---------------------------------------------- */

static void test_sgd_plain_and_weight_decay(void)
{
    float p[1] = {1.0f};
    const float g[1] = {0.5f};
    snn_sgd_params hp = {.lr = 0.1f};
    k->sgd_update(p, NULL, g, 1, &hp); /* no momentum: no state needed */
    CHECK_CLOSE(p[0], 0.95, 1e-7, 0.0);
    /* weight decay 0.1: g = 0.5 + 0.1 * 1 = 0.6, p = 1 - 0.06 */
    p[0] = 1.0f;
    hp.weight_decay = 0.1f;
    k->sgd_update(p, NULL, g, 1, &hp);
    CHECK_CLOSE(p[0], 0.94, 1e-7, 0.0);
}

/*
 * momentum 0.9, two steps with grad 0.5:
 *   plain:    buf = 0.5, p = 1 - 0.05 = 0.95;   buf = 0.9 * 0.5 + 0.5 = 0.95, p = 0.95 - 0.095
 *   nesterov: buf = 0.5, g = 0.5 + 0.45 = 0.95, p = 0.905;
 *             buf = 0.95, g = 0.5 + 0.855 = 1.355, p = 0.905 - 0.1355 = 0.7695
 *   dampening 0.5: the second buf = 0.9 * 0.5 + 0.5 * 0.5 = 0.7 (the first is undamped)
 */
static void test_sgd_momentum_nesterov_dampening(void)
{
    const float g[1] = {0.5f};
    float p[1] = {1.0f}, buf[1] = {123.0f}; /* the first step must ignore the old buffer */
    snn_sgd_params hp = {.lr = 0.1f, .momentum = 0.9f, .first_step = true};
    k->sgd_update(p, buf, g, 1, &hp);
    CHECK_CLOSE(buf[0], 0.5, 1e-7, 0.0);
    CHECK_CLOSE(p[0], 0.95, 1e-7, 0.0);
    hp.first_step = false;
    k->sgd_update(p, buf, g, 1, &hp);
    CHECK_CLOSE(buf[0], 0.95, 1e-7, 0.0);
    CHECK_CLOSE(p[0], 0.855, 1e-7, 0.0);

    p[0] = 1.0f, buf[0] = 123.0f;
    hp.nesterov = true, hp.first_step = true;
    k->sgd_update(p, buf, g, 1, &hp);
    CHECK_CLOSE(p[0], 0.905, 1e-7, 0.0);
    hp.first_step = false;
    k->sgd_update(p, buf, g, 1, &hp);
    CHECK_CLOSE(buf[0], 0.95, 1e-7, 0.0);
    CHECK_CLOSE(p[0], 0.7695, 1e-7, 0.0);

    p[0] = 1.0f, buf[0] = 123.0f;
    hp.nesterov = false, hp.dampening = 0.5f, hp.first_step = true;
    k->sgd_update(p, buf, g, 1, &hp);
    CHECK_CLOSE(buf[0], 0.5, 1e-7, 0.0);
    hp.first_step = false;
    k->sgd_update(p, buf, g, 1, &hp);
    CHECK_CLOSE(buf[0], 0.7, 1e-7, 0.0);
    CHECK_CLOSE(p[0], 0.95 - 0.07, 1e-7, 0.0);
}

/* ---- Adam by hand: p = 1, lr = 0.1, beta1 = 0.9, beta2 = 0.999, eps = 1e-8 ----------------- */

/*
 * The betas reach the kernel as floats: 0.999f = 0.99900001287, so 1 - beta2 = 0.99998713e-3,
 * 1.3e-5 away (relative) from 1e-3. The optimizer must therefore compute the bias corrections
 * from the same float betas, 1 - (double)beta^t, or Adam's first step would not be exactly lr.
 * The hand numbers below are for the exact decimals; the checks against them allow 2e-5
 * relative for the float betas, and the checks against the formula with the float betas are
 * tight (1e-6).
 */
static const double B1 = (double)0.9f, B2 = (double)0.999f;

static snn_adam_params adam_params(int t, float wd, bool decoupled)
{
    snn_adam_params hp = {.lr = 0.1f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f,
                          .weight_decay = wd, .decoupled = decoupled};
    hp.bias_correction1 = (float)(1.0 - pow(B1, t));
    hp.bias_correction2 = (float)(1.0 - pow(B2, t));
    return hp;
}

/*
 * step 1, grad 0.5: m = 0.05, v = 0.001 * 0.25 = 2.5e-4, bc1 = 0.1, bc2 = 0.001,
 *   m / bc1 = 0.5, sqrt(v / bc2) = 0.5: p = 1 - 0.1 * 0.5 / (0.5 + 1e-8) = 0.9 + 2e-9
 *   (Adam's first step is lr * sign(grad))
 * step 2, grad -0.25: m = 0.045 - 0.025 = 0.02, v = 0.999 * 2.5e-4 + 0.001 * 0.0625 = 3.1225e-4,
 *   bc1 = 0.19, bc2 = 0.001999: p = 0.9 - 0.1 (0.02 / 0.19) / sqrt(3.1225e-4 / 0.001999)
 *   = 0.9 - 0.1 * 0.1052632 / 0.3952250 = 0.9 - 0.0266337 = 0.8733663
 */
static void test_adam_two_steps_hand(void)
{
    float p[1] = {1.0f}, m[1] = {0.0f}, v[1] = {0.0f};
    const float g1[1] = {0.5f}, g2[1] = {-0.25f};
    snn_adam_params hp = adam_params(1, 0.0f, false);
    k->adam_update(p, m, v, g1, 1, &hp);
    CHECK_CLOSE(m[0], 0.05, 0.0, 2e-5);
    CHECK_CLOSE(v[0], 2.5e-4, 0.0, 2e-5);
    CHECK_CLOSE(v[0], (1.0 - B2) * 0.25, 0.0, 1e-6);
    CHECK_CLOSE(p[0], 0.9, 1e-7, 0.0); /* consistent bias correction: exactly lr */
    hp = adam_params(2, 0.0f, false);
    k->adam_update(p, m, v, g2, 1, &hp);
    CHECK_CLOSE(m[0], 0.02, 0.0, 2e-5);
    CHECK_CLOSE(v[0], 3.1225e-4, 0.0, 2e-5);
    CHECK_CLOSE(p[0], 0.8733663, 2e-6, 0.0);
    const double m2 = B1 * (1.0 - B1) * 0.5 + (1.0 - B1) * -0.25;
    const double v2 = B2 * (1.0 - B2) * 0.25 + (1.0 - B2) * 0.0625;
    const double want = 0.9 - 0.1 * (m2 / (1.0 - B1 * B1)) / (sqrt(v2 / (1.0 - B2 * B2)) + 1e-8);
    CHECK_CLOSE(p[0], want, 1e-7, 0.0);
}

/*
 * weight decay 0.1, step 1, grad 0.5:
 *   Adam (coupled):    g = 0.5 + 0.1 * 1 = 0.6 enters m and v: m = 0.06, v = 3.6e-4; the
 *                      normalised step is still lr, so p = 0.9
 *   AdamW (decoupled): p = 1 * (1 - 0.1 * 0.1) = 0.99 first, m and v see 0.5 only: p = 0.89
 */
static void test_adam_vs_adamw(void)
{
    const float g[1] = {0.5f};
    float p[1] = {1.0f}, m[1] = {0.0f}, v[1] = {0.0f};
    snn_adam_params hp = adam_params(1, 0.1f, false);
    k->adam_update(p, m, v, g, 1, &hp);
    CHECK_CLOSE(m[0], 0.06, 0.0, 2e-5);
    CHECK_CLOSE(v[0], 3.6e-4, 0.0, 2e-5);
    CHECK_CLOSE(p[0], 0.9, 1e-7, 0.0);

    p[0] = 1.0f, m[0] = 0.0f, v[0] = 0.0f;
    hp = adam_params(1, 0.1f, true);
    k->adam_update(p, m, v, g, 1, &hp);
    CHECK_CLOSE(m[0], 0.05, 0.0, 2e-5);
    CHECK_CLOSE(v[0], 2.5e-4, 0.0, 2e-5);
    CHECK_CLOSE(p[0], 0.89, 1e-7, 0.0);
}

int main(void)
{
    const snn_kernels *const tables[2] = {&snn_kernels_ref, &snn_kernels_cpu};
    for (int t = 0; t < 2; t++) {
        k = tables[t];
        fprintf(stderr, "-- the %s kernels\n", k->name);
        RUN(test_sgd_plain_and_weight_decay);
        RUN(test_sgd_momentum_nesterov_dampening);
        RUN(test_adam_two_steps_hand);
        RUN(test_adam_vs_adamw);
    }
    return test_finish();
}
