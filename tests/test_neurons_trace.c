/*
 * test_neurons_trace.c - forward traces of every neuron and reset mode, computed by hand
 * (kernels/cpu/lif.c, kernels/cpu/stbif.c, neurons/neuron_op.c).
 *
 * Every input below is a multiple of 1/8 and every tau a power of two, so each trace is exact
 * in float and is compared with ==. The traces cover: H exactly at V_th (fires: Heaviside(0) = 1),
 * negative inputs and negative V, hard vs soft reset, V_reset != 0, decay_input on and off,
 * PLIF at w0 = -ln(tau0 - 1) (k = 1/2 exactly, so it must match LIF tau = 2), and ST-BIF with
 * unsigned and symmetric levels, both bounds reached, H exactly at theta.
 * Then: the kernel (chunked, OpenMP) against a plain scalar loop on random data of awkward
 * sizes, and the activity counts against counting the spikes by hand.
 * Run: ctest -R neurons_trace
 */
#include <string.h>

#include "autograd/autograd.h"
#include "kernels/neuron_kernels.h"
#include "tensor/error.h"
#include "neurons/neurons.h"
#include "test.h"

#define T6 6

/* One element over T6 steps through the op, and H through the kernel directly. */
static void check_trace(const char *name, const snn_neuron_config *cfg, snn_tensor *w,
                        const float x[T6], const float want_h[T6], const float want_s[T6])
{
    CHECK_OK(snn_step_begin());
    snn_tensor *xt = snn_from_host(SNN_SHAPE(T6, 1, 1), x, SNN_CPU);
    snn_tensor *s = snn_neuron_multistep(xt, cfg, w, NULL);
    CHECK(s != NULL);
    if (!s) {
        fprintf(stderr, "%s: %s\n", name, snn_last_error());
        snn_step_end();
        return;
    }
    int bad = 0;
    for (int t = 0; t < T6; t++) bad += s->data[t] != want_s[t];

    /* H straight from the kernel */
    snn_neuron_params p = snn_neuron_params_from(cfg);
    snn_neuron_dims d = {T6, 1, 1, 1};
    float spike[T6], h[T6], v_last;
    const snn_neuron_kernels *k = snn_neuron_kernels_for(SNN_CPU);
    snn_neuron_forward_fn f = cfg->kind == SNN_NEURON_STBIF ? k->stbif_forward : k->lif_forward;
    float a_last;
    f(spike, h, &v_last, &a_last, NULL, x, NULL, NULL, w ? w->data : NULL, &p, &d);
    for (int t = 0; t < T6; t++) bad += (h[t] != want_h[t]) + (spike[t] != want_s[t]);
    CHECK(bad == 0);
    if (bad) {
        fprintf(stderr, "trace %s:\n  t  H (want)  S (want)\n", name);
        for (int t = 0; t < T6; t++)
            fprintf(stderr, "  %d  %g (%g)  %g (%g)\n", t, (double)h[t], (double)want_h[t],
                    (double)s->data[t], (double)want_s[t]);
    }
    snn_step_end();
}

static void test_if(void)
{
    snn_neuron_config c = snn_neuron_config_default(SNN_NEURON_IF);
    const float x[T6] = {0.5f, 0.5f, 0.25f, -0.5f, 2.0f, 1.0f};
    {   /* hard reset to 0: H = V + X; V = 0 after a spike. t1 lands exactly on V_th = 1. */
        const float h[T6] = {0.5f, 1.0f, 0.25f, -0.25f, 1.75f, 1.0f};
        const float s[T6] = {0, 1, 0, 0, 1, 1};
        check_trace("if hard", &c, NULL, x, h, s);
    }
    {   /* soft reset: V = H - 1 keeps the excess 0.75 at t4 */
        c.reset = SNN_RESET_SOFT;
        const float h[T6] = {0.5f, 1.0f, 0.25f, -0.25f, 1.75f, 1.75f};
        const float s[T6] = {0, 1, 0, 0, 1, 1};
        check_trace("if soft", &c, NULL, x, h, s);
    }
    {   /* hard reset to V_reset = -0.5 with V_th = 0.5: V[0] = -0.5 too */
        c.reset = SNN_RESET_HARD;
        c.v_reset = -0.5f;
        c.v_threshold = 0.5f;
        const float h[T6] = {0.0f, 0.5f, -0.25f, -0.75f, 1.25f, 0.5f};
        const float s[T6] = {0, 1, 0, 0, 1, 1};
        check_trace("if hard v_reset -0.5", &c, NULL, x, h, s);
    }
    {   /* detach_reset changes nothing forward */
        c.detach_reset = true;
        const float h[T6] = {0.0f, 0.5f, -0.25f, -0.75f, 1.25f, 0.5f};
        const float s[T6] = {0, 1, 0, 0, 1, 1};
        check_trace("if hard v_reset -0.5 detach", &c, NULL, x, h, s);
    }
}

static void test_lif(void)
{
    snn_neuron_config c = snn_neuron_config_default(SNN_NEURON_LIF); /* tau 2, decay_input */
    const float x[T6] = {1.0f, 1.0f, 2.0f, -1.0f, 3.0f, 0.5f};
    {   /* H = V + (X - V) / 2 */
        const float h[T6] = {0.5f, 0.75f, 1.375f, -0.5f, 1.25f, 0.25f};
        const float s[T6] = {0, 0, 1, 0, 1, 0};
        check_trace("lif hard decay_input", &c, NULL, x, h, s);
    }
    {   /* soft: V = H - 1 = 0.375 after t2 */
        c.reset = SNN_RESET_SOFT;
        const float h[T6] = {0.5f, 0.75f, 1.375f, -0.3125f, 1.34375f, 0.421875f};
        const float s[T6] = {0, 0, 1, 0, 1, 0};
        check_trace("lif soft decay_input", &c, NULL, x, h, s);
    }
    {   /* hard to V_reset = -0.5: H = V + (X - (V + 0.5)) / 2, V[0] = -0.5 */
        c.reset = SNN_RESET_HARD;
        c.v_reset = -0.5f;
        const float h[T6] = {0.0f, 0.25f, 0.875f, -0.3125f, 1.09375f, -0.25f};
        const float s[T6] = {0, 0, 0, 0, 1, 0};
        check_trace("lif hard v_reset -0.5", &c, NULL, x, h, s);
    }
    {   /* no decay_input: H = V - V / 2 + X; t1 lands exactly on V_th */
        c = snn_neuron_config_default(SNN_NEURON_LIF);
        c.decay_input = false;
        const float x2[T6] = {0.5f, 0.75f, 0.25f, -1.0f, 2.0f, 0.5f};
        const float h[T6] = {0.5f, 1.0f, 0.25f, -0.875f, 1.5625f, 0.5f};
        const float s[T6] = {0, 1, 0, 0, 1, 0};
        check_trace("lif hard no decay_input", &c, NULL, x2, h, s);
        /* soft, no decay_input: after t1 V = 0 as well (H - 1 = 0) */
        c.reset = SNN_RESET_SOFT;
        const float h2[T6] = {0.5f, 1.0f, 0.25f, -0.875f, 1.5625f, 0.78125f};
        check_trace("lif soft no decay_input", &c, NULL, x2, h2, s);
    }
    {   /* tau = 4, decay_input: H = V + (X - V) / 4 */
        c = snn_neuron_config_default(SNN_NEURON_LIF);
        c.tau = 4.0f;
        const float x3[T6] = {4.0f, 2.0f, -4.0f, 0.0f, 8.0f, 0.0f};
        /* t0 H=1 fires (at V_th), V=0; t1 H=0.5; t2 H=0.5+(-4-0.5)/4=-0.625;
         * t3 H=-0.625+0.625/4=-0.46875; t4 H=-0.46875+(8+0.46875)/4=1.6484375 fires; t5 H=0 */
        const float h[T6] = {1.0f, 0.5f, -0.625f, -0.46875f, 1.6484375f, 0.0f};
        const float s[T6] = {1, 0, 0, 0, 1, 0};
        check_trace("lif tau 4", &c, NULL, x3, h, s);
    }
}

static void test_plif(void)
{
    /* w0 = -ln(2 - 1) = 0, sigmoid(0) = 1/2 exactly: the LIF tau = 2 traces again. */
    snn_tensor *w = snn_plif_param_new(2.0f, SNN_CPU);
    CHECK(w && w->requires_grad && w->data[0] == 0.0f);
    CHECK_CLOSE(snn_plif_tau(w), 2.0, 0, 1e-7);
    snn_neuron_config c = snn_neuron_config_default(SNN_NEURON_PLIF);
    const float x[T6] = {1.0f, 1.0f, 2.0f, -1.0f, 3.0f, 0.5f};
    {
        const float h[T6] = {0.5f, 0.75f, 1.375f, -0.5f, 1.25f, 0.25f};
        const float s[T6] = {0, 0, 1, 0, 1, 0};
        check_trace("plif hard decay_input", &c, w, x, h, s);
    }
    {
        c.reset = SNN_RESET_SOFT;
        const float h[T6] = {0.5f, 0.75f, 1.375f, -0.3125f, 1.34375f, 0.421875f};
        const float s[T6] = {0, 0, 1, 0, 1, 0};
        check_trace("plif soft decay_input", &c, w, x, h, s);
    }
    {
        c = snn_neuron_config_default(SNN_NEURON_PLIF);
        c.decay_input = false;
        const float x2[T6] = {0.5f, 0.75f, 0.25f, -1.0f, 2.0f, 0.5f};
        const float h[T6] = {0.5f, 1.0f, 0.25f, -0.875f, 1.5625f, 0.5f};
        const float s[T6] = {0, 1, 0, 0, 1, 0};
        check_trace("plif hard no decay_input", &c, w, x2, h, s);
    }
    /* tau0 = 3: w0 = -ln 2, and 1/sigmoid(w0) = 3 */
    snn_tensor *w3 = snn_plif_param_new(3.0f, SNN_CPU);
    CHECK_CLOSE(w3->data[0], -0.69314718, 1e-7, 0);
    CHECK_CLOSE(snn_plif_tau(w3), 3.0, 0, 1e-6);
    snn_tensor_free(w3);
    CHECK(snn_plif_param_new(1.0f, SNN_CPU) == NULL);
    snn_clear_error();
    snn_tensor_free(w);
}

static void test_stbif(void)
{
    snn_neuron_config c = snn_neuron_config_default(SNN_NEURON_STBIF);
    {   /* theta 1, 4 unsigned levels, A in [0, 3]; V[0] = 0.5. t1: H = 1 exactly fires. */
        c.levels = 4;
        const float x[T6] = {1.0f, 0.5f, 2.0f, -2.5f, -1.0f, 0.0f};
        const float h[T6] = {1.5f, 1.0f, 2.0f, -1.5f, -1.5f, -0.5f};
        const float y[T6] = {1, 1, 1, -1, -1, -1};
        check_trace("stbif unsigned L4", &c, NULL, x, h, y);
    }
    {   /* theta 0.5, 2 levels: A in [0, 1]; both bounds stop spikes (t1, t2 and t4, t5) */
        c.theta = 0.5f;
        c.levels = 2;
        const float x[T6] = {2.0f, 0.0f, 0.0f, -3.0f, 0.0f, 0.0f};
        const float h[T6] = {2.25f, 1.75f, 1.75f, -1.25f, -0.75f, -0.75f};
        const float y[T6] = {0.5f, 0, 0, -0.5f, 0, 0};
        check_trace("stbif unsigned L2 theta 0.5", &c, NULL, x, h, y);
    }
    {   /* symmetric 4 levels: A in [-2, 1]; negative spikes until A = -2 */
        c.theta = 1.0f;
        c.levels = 4;
        c.symmetric = true;
        const float x[T6] = {-1.0f, -1.0f, -1.0f, 0.0f, 3.0f, 0.0f};
        const float h[T6] = {-0.5f, -0.5f, -0.5f, -0.5f, 2.5f, 1.5f};
        const float y[T6] = {-1, -1, 0, 0, 1, 1};
        check_trace("stbif symmetric L4", &c, NULL, x, h, y);
    }
}

/* ---- the chunked, threaded kernel against a plain scalar loop --------------------------- */

static float ref_step(const snn_neuron_config *c, float k, float *v, float *a, float x)
{
    if (c->kind == SNN_NEURON_STBIF) {
        int amin, amax;
        snn_stbif_bounds(c, &amin, &amax);
        float h = *v + x, s = 0.0f;
        if (h >= c->theta && *a < (float)amax) s = 1.0f;
        else if (h < 0.0f && *a > (float)amin) s = -1.0f;
        *v = h - c->theta * s;
        *a += s;
        return c->theta * s;
    }
    float vr = c->reset == SNN_RESET_SOFT ? 0.0f : c->v_reset, h;
    if (c->kind == SNN_NEURON_ALIF) { /* LIF's charge; threshold V_th + beta A, A its trace */
        const float rho = expf(-1.0f / c->tau_adapt), th = c->v_threshold + c->beta * *a;
        h = c->decay_input ? *v + (x - (*v - vr)) / c->tau : *v - (*v - vr) / c->tau + x;
        const float s = h >= th ? 1.0f : 0.0f;
        *v = c->reset == SNN_RESET_SOFT ? h - th * s : (s != 0.0f ? vr : h);
        *a = rho * *a + (1.0f - rho) * s;
        return s;
    }
    if (c->kind == SNN_NEURON_IF) h = *v + x;
    else if (c->kind == SNN_NEURON_LIF)
        h = c->decay_input ? *v + (x - (*v - vr)) / c->tau : *v - (*v - vr) / c->tau + x;
    else h = c->decay_input ? *v + (x - (*v - vr)) * k : *v - (*v - vr) * k + x;
    float s = h >= c->v_threshold ? 1.0f : 0.0f;
    *v = c->reset == SNN_RESET_SOFT ? h - c->v_threshold * s : (s != 0.0f ? vr : h);
    return s;
}

static void check_against_loop(snn_neuron_kind kind, snn_shape shape, uint64_t seed)
{
    snn_rng rng;
    snn_rng_seed(&rng, seed);
    snn_neuron_config c = snn_neuron_config_default(kind);
    c.reset = snn_rng_below(&rng, 2) ? SNN_RESET_SOFT : SNN_RESET_HARD;
    c.decay_input = snn_rng_below(&rng, 2) != 0;
    c.symmetric = snn_rng_below(&rng, 2) != 0;
    snn_tensor *w = kind == SNN_NEURON_PLIF ? snn_plif_param_new(3.0f, SNN_CPU) : NULL;
    CHECK_OK(snn_step_begin());
    snn_tensor *x = snn_empty(shape, SNN_CPU);
    CHECK_OK(snn_tensor_normal_(x, &rng, 0.4f, 1.0f));
    snn_tensor *act = NULL;
    snn_tensor *s = snn_neuron_multistep(x, &c, w, &act);
    CHECK(s && act);
    if (!s || !act) {
        fprintf(stderr, "%s\n", snn_last_error());
        snn_step_end();
        snn_tensor_free(w);
        return;
    }
    int64_t T = shape.dim[0], N = shape.dim[1], C = shape.ndim >= 3 ? shape.dim[2] : 1;
    int64_t M = x->numel / T, P = M / (N * C);
    CHECK(act->shape.ndim == 2 && act->shape.dim[0] == T * N && act->shape.dim[1] == C);
    float k = w ? 1.0f / (1.0f + expf(-w->data[0])) : 0.0f;
    long bad = 0, bad_act = 0;
    for (int64_t i = 0; i < M; i++) {
        float v = kind == SNN_NEURON_STBIF ? 0.5f * c.theta
                  : (c.reset == SNN_RESET_SOFT ? 0.0f : c.v_reset);
        float a = 0.0f;
        for (int64_t t = 0; t < T; t++)
            bad += ref_step(&c, k, &v, &a, x->data[t * M + i]) != s->data[t * M + i];
    }
    for (int64_t t = 0; t < T; t++)
        for (int64_t q = 0; q < N * C; q++) {
            float count = 0.0f;
            for (int64_t j = 0; j < P; j++) count += s->data[t * M + q * P + j] != 0.0f;
            bad_act += act->data[t * N * C + q] != count;
        }
    CHECK(bad == 0);
    CHECK(bad_act == 0);
    float rate = snn_activity_rate(act, x->numel);
    double total = 0.0;
    for (int64_t i = 0; i < s->numel; i++) total += s->data[i] != 0.0f;
    CHECK_CLOSE(rate, total / (double)x->numel, 1e-7, 1e-6);
    snn_step_end();
    snn_tensor_free(w);
}

static void test_kernel_vs_plain_loop(void)
{
    for (int kind = 0; kind < SNN_NEURON_COUNT; kind++) {
        const snn_neuron_kind k = (snn_neuron_kind)kind;
        if (snn_neuron_is_ann(k)) continue; /* the ANN activations: test_ann2snn.c */
        const uint64_t seed = 10u * (uint64_t)kind;
        check_against_loop(k, SNN_SHAPE(5, 3, 7, 5, 5), seed + 1);   /* plane 25 */
        check_against_loop(k, SNN_SHAPE(3, 2, 3, 20, 21), seed + 2); /* plane 420 > chunk */
        check_against_loop(k, SNN_SHAPE(4, 5, 1000), seed + 3);      /* (T, N, F) */
        check_against_loop(k, SNN_SHAPE(2, 777), seed + 4);          /* (T, N) */
    }
}

static void test_errors(void)
{
    snn_neuron_config c = snn_neuron_config_default(SNN_NEURON_LIF);
    CHECK_OK(snn_step_begin());
    snn_tensor *x = snn_zeros(SNN_SHAPE(4), SNN_CPU);
    CHECK(snn_neuron_multistep(x, &c, NULL, NULL) == NULL);
    CHECK(strstr(snn_last_error(), "snn_neuron_multistep") && strstr(snn_last_error(), "'x'"));
    snn_clear_error();
    snn_tensor *x2 = snn_zeros(SNN_SHAPE(4, 2), SNN_CPU);
    c.tau = 0.5f;
    CHECK(snn_neuron_multistep(x2, &c, NULL, NULL) == NULL);
    CHECK(strstr(snn_last_error(), "tau") != NULL);
    snn_clear_error();
    c = snn_neuron_config_default(SNN_NEURON_PLIF);
    CHECK(snn_neuron_multistep(x2, &c, NULL, NULL) == NULL);
    CHECK(strstr(snn_last_error(), "snn_plif_param_new") != NULL);
    snn_clear_error();
    c = snn_neuron_config_default(SNN_NEURON_STBIF);
    c.levels = 5;
    c.symmetric = true;
    CHECK(snn_neuron_multistep(x2, &c, NULL, NULL) == NULL);
    CHECK(strstr(snn_last_error(), "levels") != NULL);
    snn_clear_error();
    CHECK(snn_neuron_multistep(x2, NULL, NULL, NULL) == NULL);
    snn_clear_error();
    /* a NULL input keeps the message of whatever made it */
    snn_error(SNN_ERR_MEMORY, "earlier failure");
    CHECK(snn_neuron_multistep(NULL, &c, NULL, NULL) == NULL);
    CHECK(strcmp(snn_last_error(), "earlier failure") == 0);
    snn_clear_error();
    snn_step_end();
    snn_neuron_kind kind;
    CHECK_OK(snn_neuron_kind_parse("plif", &kind));
    CHECK(kind == SNN_NEURON_PLIF);
    CHECK(snn_neuron_kind_parse("izhikevich", &kind) == SNN_ERR_ARGUMENT);
    snn_clear_error();
}

/* No-grad mode saves nothing: the arena holds the spikes only. */
static void test_no_grad_saves_nothing(void)
{
    snn_neuron_config c = snn_neuron_config_default(SNN_NEURON_LIF);
    snn_tensor *w = snn_plif_param_new(2.0f, SNN_CPU);
    snn_neuron_config cp = snn_neuron_config_default(SNN_NEURON_PLIF);
    CHECK_OK(snn_step_begin());
    snn_tensor *x = snn_zeros(SNN_SHAPE(4, 2, 8), SNN_CPU);
    x->requires_grad = true;
    snn_no_grad_begin();
    snn_tensor *s = snn_neuron_multistep(x, &c, NULL, NULL);
    CHECK(s && s->grad_fn == NULL && !s->requires_grad);
    snn_tensor *s2 = snn_neuron_multistep(x, &cp, w, NULL);
    CHECK(s2 && s2->grad_fn == NULL);
    snn_no_grad_end();
    snn_tensor *s3 = snn_neuron_multistep(x, &c, NULL, NULL);
    CHECK(s3 && s3->grad_fn != NULL && s3->requires_grad);
    snn_tensor *x_const = snn_zeros(SNN_SHAPE(4, 2, 8), SNN_CPU);
    snn_tensor *s4 = snn_neuron_multistep(x_const, &c, NULL, NULL);
    CHECK(s4 && s4->grad_fn == NULL);
    snn_tensor *s5 = snn_neuron_multistep(x_const, &cp, w, NULL); /* w requires grad */
    CHECK(s5 && s5->grad_fn != NULL);
    snn_step_end();
    snn_tensor_free(w);
}

/* The primitive spike op: Heaviside(0) = 1, and backward is dy * g'(x). */
static void test_heaviside_op(void)
{
    const float x[6] = {-1.0f, 0.0f, 1e-30f, -1e-30f, 0.25f, -0.25f};
    const float want[6] = {0, 1, 1, 0, 1, 0};
    const float dy[6] = {1.0f, 2.0f, -1.0f, 0.5f, 3.0f, 1.0f};
    snn_surrogate sg = snn_surrogate_default(SNN_SURROGATE_ATAN);
    CHECK_OK(snn_step_begin());
    snn_tensor *xt = snn_from_host(SNN_SHAPE(6), x, SNN_CPU);
    xt->requires_grad = true;
    snn_tensor *y = snn_heaviside(xt, sg);
    CHECK(y && y->grad_fn);
    if (y) {
        for (int i = 0; i < 6; i++) CHECK(y->data[i] == want[i]);
        CHECK_OK(snn_backward_from(y, snn_from_host(SNN_SHAPE(6), dy, SNN_CPU)));
        for (int i = 0; i < 6 && xt->grad; i++)
            CHECK_CLOSE(xt->grad->data[i], dy[i] * snn_surrogate_grad(sg, x[i]), 0, 1e-7);
    }
    snn_surrogate bad = {SNN_SURROGATE_SIGMOID, 0.0f};
    CHECK(snn_heaviside(xt, bad) == NULL && strstr(snn_last_error(), "alpha"));
    snn_clear_error();
    snn_step_end();
}

int main(void)
{
    snn_set_num_threads(2);
    RUN(test_if);
    RUN(test_lif);
    RUN(test_plif);
    RUN(test_stbif);
    RUN(test_kernel_vs_plain_loop);
    RUN(test_errors);
    RUN(test_no_grad_saves_nothing);
    RUN(test_heaviside_op);
    return test_finish();
}
