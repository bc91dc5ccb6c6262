/*
 * test_neurons_surrogate.c - the surrogate gradient functions (kernels/surrogate.h):
 *   - defaults (Sigmoid 4, ATan 2, PiecewiseQuadratic 1), names and parsing;
 *   - g'(x) against its closed form, written here again in double;
 *   - g'(x) against central finite differences of g (g is smooth away from PWQ's kinks);
 *   - g is a step: g(0) = 1/2, g -> 0 and 1 far out, and g' integrates to g(L) - g(-L);
 *   - the vectorisable exp of the fast kernels' Sigmoid surrogate (kernels/fast_expf.h)
 *     against exp in double.
 * Run: ctest -R neurons_surrogate
 */
#include <float.h>
#include <math.h>
#include <string.h>

#include "neurons/neurons.h"
#include "kernels/fast_expf.h"
#include "kernels/surrogate.h"
#include "test.h"

static const double pi = 3.14159265358979323846;

/* The closed forms of docs/neurons.md section 2 (kernels/surrogate.h), in double. */
static double closed_grad(snn_surrogate s, double x)
{
    double a = s.alpha;
    switch (s.kind) {
    case SNN_SURROGATE_SIGMOID: {
        double sg = 1.0 / (1.0 + exp(-a * x));
        return a * sg * (1.0 - sg);
    }
    case SNN_SURROGATE_ATAN: {
        double u = pi / 2.0 * a * x;
        return (a / 2.0) / (1.0 + u * u);
    }
    default: {
        double d = a - a * a * fabs(x);
        return d > 0.0 ? d : 0.0;
    }
    }
}

static void test_defaults_and_names(void)
{
    CHECK(snn_surrogate_default(SNN_SURROGATE_SIGMOID).alpha == 4.0f);
    CHECK(snn_surrogate_default(SNN_SURROGATE_ATAN).alpha == 2.0f);
    CHECK(snn_surrogate_default(SNN_SURROGATE_PIECEWISE_QUADRATIC).alpha == 1.0f);
    for (int k = 0; k < SNN_SURROGATE_COUNT; k++) {
        snn_surrogate s;
        CHECK_OK(snn_surrogate_parse(snn_surrogate_name((snn_surrogate_kind)k), &s));
        CHECK(s.kind == (snn_surrogate_kind)k);
    }
    snn_surrogate s;
    CHECK_OK(snn_surrogate_parse("pwq", &s));
    CHECK(s.kind == SNN_SURROGATE_PIECEWISE_QUADRATIC);
    CHECK(snn_surrogate_parse("relu", &s) == SNN_ERR_ARGUMENT);
    CHECK(strstr(snn_last_error(), "relu") != NULL);
    snn_clear_error();
}

static void test_grad_closed_form(void)
{
    const float alphas[] = {0.5f, 1.0f, 2.0f, 4.0f, 10.0f};
    for (int k = 0; k < SNN_SURROGATE_COUNT; k++)
        for (int ia = 0; ia < 5; ia++) {
            snn_surrogate s = {(snn_surrogate_kind)k, alphas[ia]};
            for (int i = -400; i <= 400; i++) {
                float x = (float)i * 0.01f;
                CHECK_CLOSE(snn_surrogate_grad(s, x), closed_grad(s, (double)x), 1e-6, 1e-5);
            }
        }
    /* the peaks: sigmoid alpha/4, atan alpha/2, pwq alpha */
    CHECK_CLOSE(snn_surrogate_grad(snn_surrogate_default(SNN_SURROGATE_SIGMOID), 0.0f), 1.0, 0, 1e-7);
    CHECK_CLOSE(snn_surrogate_grad(snn_surrogate_default(SNN_SURROGATE_ATAN), 0.0f), 1.0, 0, 1e-7);
    CHECK_CLOSE(snn_surrogate_grad(snn_surrogate_default(SNN_SURROGATE_PIECEWISE_QUADRATIC), 0.0f),
                1.0, 0, 1e-7);
}

static void test_grad_finite_differences(void)
{
    const float eps = 1e-3f;
    for (int k = 0; k < SNN_SURROGATE_COUNT; k++) {
        snn_surrogate s = snn_surrogate_default((snn_surrogate_kind)k);
        double worst = 0.0;
        for (int i = -300; i <= 300; i++) {
            float x = (float)i * 0.01f + 0.005f; /* off the PWQ kinks at 0 and +-1 */
            double numeric = ((double)snn_surrogate_g(s, x + eps) -
                              (double)snn_surrogate_g(s, x - eps)) / (2.0 * (double)eps);
            double err = fabs(numeric - (double)snn_surrogate_grad(s, x));
            if (err > worst) worst = err;
        }
        /* float g, eps 1e-3: rounding ~ 6e-8 / 2e-3 = 3e-5, truncation ~ eps^2 g''' / 6 */
        CHECK(worst < 2e-4);
    }
}

static void test_g_is_a_step(void)
{
    for (int k = 0; k < SNN_SURROGATE_COUNT; k++) {
        snn_surrogate s = snn_surrogate_default((snn_surrogate_kind)k);
        CHECK_CLOSE(snn_surrogate_g(s, 0.0f), 0.5, 1e-7, 0);
        CHECK(snn_surrogate_g(s, -100.0f) < 0.01f);
        CHECK(snn_surrogate_g(s, 100.0f) > 0.99f);
        /* trapezoid integral of g' over [-L, L] equals g(L) - g(-L) */
        const double L = 20.0, h = 1e-3;
        double integral = 0.0;
        for (double x = -L; x < L; x += h)
            integral += 0.5 * h * ((double)snn_surrogate_grad(s, (float)x) +
                                   (double)snn_surrogate_grad(s, (float)(x + h)));
        double want = (double)snn_surrogate_g(s, (float)L) - (double)snn_surrogate_g(s, (float)-L);
        CHECK_CLOSE(integral, want, 1e-4, 0);
    }
}

/* snn_expf_vec (kernels/fast_expf.h) against exp in double, over its whole range. */
static void test_expf_vec(void)
{
    double worst = 0.0;
    for (int i = -870000; i <= 880000; i++) {
        float x = (float)i * 1e-4f;
        double want = exp((double)x);
        double rel = fabs((double)snn_expf_vec(x) - want) / want;
        if (rel > worst) worst = rel;
    }
    CHECK(worst < 3.0e-7); /* 2.5 ulp of float (2^-23 = 1.19e-7) */
    fprintf(stderr, "snn_expf_vec: worst relative error %.3g on [-87, 88]\n", worst);
    CHECK(snn_expf_vec(0.0f) == 1.0f);
    CHECK(snn_expf_vec(-1000.0f) > 0.0f && snn_expf_vec(1000.0f) < INFINITY);
    /* far from the threshold the Sigmoid surrogate is tiny but a normal float, never a
     * denormal (which costs ~100 cycles per operation) */
    float far = snn_surrogate_grad(snn_surrogate_default(SNN_SURROGATE_SIGMOID), 50.0f);
    CHECK(far < 1e-30f && far >= FLT_MIN);
}

int main(void)
{
    RUN(test_defaults_and_names);
    RUN(test_grad_closed_form);
    RUN(test_grad_finite_differences);
    RUN(test_g_is_a_step);
    RUN(test_expf_vec);
    return test_finish();
}
