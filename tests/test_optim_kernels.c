/*
 * test_optim_kernels.c - the CPU SGD and Adam/AdamW updates (kernels/cpu/optim.c), called directly:
 * steps worked by hand (plain, weight decay, momentum, dampening, Nesterov, Adam's first two
 * steps, Adam vs AdamW decay), and several steps on random vectors against PyTorch's algorithm
 * written as a plain double loop, over every option combination, with n large enough for the
 * OpenMP path.
 *
 *     ctest --test-dir build -R optim_kernels --output-on-failure
 */
#include <string.h>

#include "tensor/error.h"
#include "kernels/cpu/kernels_cpu.h"
#include "test.h"

/* ---- SGD by hand: p = 1, grad = 0.5, lr = 0.1 ---------------------------------------------- */

static void test_sgd_plain_and_weight_decay(void)
{
    float p[1] = {1.0f};
    const float g[1] = {0.5f};
    snn_sgd_params hp = {.lr = 0.1f};
    snn_sgd_update_cpu(p, NULL, g, 1, &hp); /* no momentum: no state needed */
    CHECK_CLOSE(p[0], 0.95, 1e-7, 0.0);
    /* weight decay 0.1: g = 0.5 + 0.1 * 1 = 0.6, p = 1 - 0.06 */
    p[0] = 1.0f;
    hp.weight_decay = 0.1f;
    snn_sgd_update_cpu(p, NULL, g, 1, &hp);
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
    snn_sgd_update_cpu(p, buf, g, 1, &hp);
    CHECK_CLOSE(buf[0], 0.5, 1e-7, 0.0);
    CHECK_CLOSE(p[0], 0.95, 1e-7, 0.0);
    hp.first_step = false;
    snn_sgd_update_cpu(p, buf, g, 1, &hp);
    CHECK_CLOSE(buf[0], 0.95, 1e-7, 0.0);
    CHECK_CLOSE(p[0], 0.855, 1e-7, 0.0);

    p[0] = 1.0f, buf[0] = 123.0f;
    hp.nesterov = true, hp.first_step = true;
    snn_sgd_update_cpu(p, buf, g, 1, &hp);
    CHECK_CLOSE(p[0], 0.905, 1e-7, 0.0);
    hp.first_step = false;
    snn_sgd_update_cpu(p, buf, g, 1, &hp);
    CHECK_CLOSE(buf[0], 0.95, 1e-7, 0.0);
    CHECK_CLOSE(p[0], 0.7695, 1e-7, 0.0);

    p[0] = 1.0f, buf[0] = 123.0f;
    hp.nesterov = false, hp.dampening = 0.5f, hp.first_step = true;
    snn_sgd_update_cpu(p, buf, g, 1, &hp);
    CHECK_CLOSE(buf[0], 0.5, 1e-7, 0.0);
    hp.first_step = false;
    snn_sgd_update_cpu(p, buf, g, 1, &hp);
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
    snn_adam_update_cpu(p, m, v, g1, 1, &hp);
    CHECK_CLOSE(m[0], 0.05, 0.0, 2e-5);
    CHECK_CLOSE(v[0], 2.5e-4, 0.0, 2e-5);
    CHECK_CLOSE(v[0], (1.0 - B2) * 0.25, 0.0, 1e-6);
    CHECK_CLOSE(p[0], 0.9, 1e-7, 0.0); /* consistent bias correction: exactly lr */
    hp = adam_params(2, 0.0f, false);
    snn_adam_update_cpu(p, m, v, g2, 1, &hp);
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
    snn_adam_update_cpu(p, m, v, g, 1, &hp);
    CHECK_CLOSE(m[0], 0.06, 0.0, 2e-5);
    CHECK_CLOSE(v[0], 3.6e-4, 0.0, 2e-5);
    CHECK_CLOSE(p[0], 0.9, 1e-7, 0.0);

    p[0] = 1.0f, m[0] = 0.0f, v[0] = 0.0f;
    hp = adam_params(1, 0.1f, true);
    snn_adam_update_cpu(p, m, v, g, 1, &hp);
    CHECK_CLOSE(m[0], 0.05, 0.0, 2e-5);
    CHECK_CLOSE(v[0], 2.5e-4, 0.0, 2e-5);
    CHECK_CLOSE(p[0], 0.89, 1e-7, 0.0);
}

/* ---- several steps on random vectors against PyTorch's algorithm in double ------------------ */

#define NBIG 100000 /* above the OpenMP threshold */
#define STEPS 5

typedef struct vecs {
    float *p, *s1, *s2, *g;       /* kernel's parameter, state(s), gradient */
    double *pd, *s1d, *s2d;       /* the double reference's */
} vecs;

static void *xalloc(size_t bytes)
{
    void *p = snn_alloc(bytes, SNN_CPU);
    SNN_ASSERT(p);
    memset(p, 0, bytes);
    return p;
}

static vecs vecs_new(snn_rng *rng)
{
    vecs a;
    a.p = xalloc(NBIG * sizeof *a.p), a.s1 = xalloc(NBIG * sizeof *a.s1);
    a.s2 = xalloc(NBIG * sizeof *a.s2), a.g = xalloc(NBIG * sizeof *a.g);
    a.pd = xalloc(NBIG * sizeof *a.pd), a.s1d = xalloc(NBIG * sizeof *a.s1d);
    a.s2d = xalloc(NBIG * sizeof *a.s2d);
    for (int i = 0; i < NBIG; i++) {
        a.p[i] = snn_rng_normal(rng);
        a.pd[i] = a.p[i];
    }
    return a;
}

static void vecs_free(vecs *a)
{
    snn_free(a->p, NBIG * sizeof *a->p, SNN_CPU), snn_free(a->s1, NBIG * sizeof *a->s1, SNN_CPU);
    snn_free(a->s2, NBIG * sizeof *a->s2, SNN_CPU), snn_free(a->g, NBIG * sizeof *a->g, SNN_CPU);
    snn_free(a->pd, NBIG * sizeof *a->pd, SNN_CPU);
    snn_free(a->s1d, NBIG * sizeof *a->s1d, SNN_CPU);
    snn_free(a->s2d, NBIG * sizeof *a->s2d, SNN_CPU);
}

/* worst |p - pd| / (atol + rtol |pd|) */
static double worst_param_error(const vecs *a, double atol, double rtol)
{
    double worst = 0.0;
    for (int i = 0; i < NBIG; i++)
        worst = fmax(worst, fabs((double)a->p[i] - a->pd[i]) / (atol + rtol * fabs(a->pd[i])));
    return worst;
}

static void check_sgd_random(float momentum, float dampening, float wd, bool nesterov)
{
    snn_rng rng;
    snn_rng_seed(&rng, 31);
    vecs a = vecs_new(&rng);
    const double lr = 0.05;
    for (int t = 0; t < STEPS; t++) {
        for (int i = 0; i < NBIG; i++) a.g[i] = snn_rng_normal(&rng);
        snn_sgd_params hp = {.lr = (float)lr, .momentum = momentum, .dampening = dampening,
                             .weight_decay = wd, .nesterov = nesterov, .first_step = t == 0};
        snn_sgd_update_cpu(a.p, momentum != 0.0f ? a.s1 : NULL, a.g, NBIG, &hp);
        /* torch.optim.SGD, step by step */
        for (int i = 0; i < NBIG; i++) {
            double d_p = (double)a.g[i] + (double)wd * a.pd[i];
            if (momentum != 0.0f) {
                double *buf = &a.s1d[i];
                *buf = t == 0 ? d_p : (double)momentum * *buf + (1.0 - (double)dampening) * d_p;
                d_p = nesterov ? d_p + (double)momentum * *buf : *buf;
            }
            a.pd[i] -= lr * d_p;
        }
    }
    double worst = worst_param_error(&a, 1e-6, 1e-5);
    CHECK(worst <= 1.0);
    if (!(worst <= 1.0))
        fprintf(stderr, "  sgd mu=%g damp=%g wd=%g nesterov=%d: worst ratio %g\n",
                (double)momentum, (double)dampening, (double)wd, nesterov, worst);
    vecs_free(&a);
}

static void test_sgd_random_vs_reference(void)
{
    check_sgd_random(0.0f, 0.0f, 0.0f, false);
    check_sgd_random(0.0f, 0.0f, 5e-4f, false);
    check_sgd_random(0.9f, 0.0f, 5e-4f, false);
    check_sgd_random(0.9f, 0.0f, 5e-4f, true);
    check_sgd_random(0.9f, 0.1f, 0.0f, false);
}

static void check_adam_random(float wd, bool decoupled)
{
    snn_rng rng;
    snn_rng_seed(&rng, 37);
    vecs a = vecs_new(&rng);
    const double lr = 1e-2, b1 = B1, b2 = B2, eps = (double)1e-8f;
    for (int t = 1; t <= STEPS; t++) {
        for (int i = 0; i < NBIG; i++) a.g[i] = 0.1f * snn_rng_normal(&rng);
        const double bc1 = 1.0 - pow(b1, t), bc2 = 1.0 - pow(b2, t);
        snn_adam_params hp = {.lr = (float)lr, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f,
                              .weight_decay = wd, .decoupled = decoupled,
                              .bias_correction1 = (float)bc1, .bias_correction2 = (float)bc2};
        snn_adam_update_cpu(a.p, a.s1, a.s2, a.g, NBIG, &hp);
        /* torch.optim.Adam / AdamW, step by step */
        for (int i = 0; i < NBIG; i++) {
            double g = a.g[i];
            if (decoupled) a.pd[i] *= 1.0 - lr * (double)wd;
            else g += (double)wd * a.pd[i];
            a.s1d[i] = b1 * a.s1d[i] + (1.0 - b1) * g;
            a.s2d[i] = b2 * a.s2d[i] + (1.0 - b2) * g * g;
            a.pd[i] -= lr * (a.s1d[i] / bc1) / (sqrt(a.s2d[i] / bc2) + eps);
        }
    }
    /* p moves by ~lr per step; the float step's relative error is ~1e-6 of lr, but an element
     * whose v is tiny divides a rounding error by it: allow 1e-6 + 1e-5 |p| */
    double worst = worst_param_error(&a, 1e-6, 1e-5);
    CHECK(worst <= 1.0);
    if (!(worst <= 1.0))
        fprintf(stderr, "  adam wd=%g decoupled=%d: worst ratio %g\n", (double)wd, decoupled,
                worst);
    vecs_free(&a);
}

static void test_adam_random_vs_reference(void)
{
    check_adam_random(0.0f, false);
    check_adam_random(1e-2f, false);   /* Adam with L2 in the gradient */
    check_adam_random(1e-2f, true);    /* AdamW */
}

int main(void)
{
    RUN(test_sgd_plain_and_weight_decay);
    RUN(test_sgd_momentum_nesterov_dampening);
    RUN(test_adam_two_steps_hand);
    RUN(test_adam_vs_adamw);
    RUN(test_sgd_random_vs_reference);
    RUN(test_adam_random_vs_reference);
    return test_finish();
}
