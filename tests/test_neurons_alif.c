/*
 * test_neurons_alif.c - the adaptive LIF neuron (ALIF, kernels/ref/alif.c, kernels/cpu/alif.c,
 * neurons/neuron_op.c, neurons/single_step.c):
 *   - a hand-computed trace of one neuron: the threshold rises after each spike (a current a
 *     plain LIF fires on does not fire), then decays back; and a hand-computed 2-step backward,
 *     with and without detach_reset;
 *   - the fused forward / backward against the same dynamics unrolled into primitive ops on the
 *     tape (snn_heaviside + elementwise ops; the tape does BPTT itself), over hard (V_reset 0 and
 *     -0.5) and soft reset x detach_reset x decay_input x the three surrogates:
 *       the reference and CPU kernel tables with a state in (V_init, A_init) and out (dL/dV_last,
 *       dL/dA_last), snn_neuron_multistep (no state), and snn_neuron_step driven step by step
 *       with the last V and A in the loss (so gradients must flow step to step through both);
 *     spikes, V_last and A_last exactly, gradients to |diff| <= 1e-6 + 1e-6 |want|;
 *   - no-grad mode gives the same spikes and saves nothing;
 *   - bad configs (tau_adapt <= 0, beta < 0, tau <= 1) are errors naming the field;
 *   - the spiking CNN with ALIF neurons runs forward and backward, and its tau_adapt and beta
 *     go through the checkpoint metadata (older metadata without them load the defaults).
 * Run: ctest -R neurons_alif
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/autograd.h"
#include "kernels/neuron_kernels.h"
#include "neurons/neurons.h"
#include "snn.h"
#include "test.h"

#define T 6
#define N 3
#define F 7
#define M (N * F)

static int combos;

/* ---- hand-computed cases -------------------------------------------------------------------- */

/* One neuron, tau 2 with decay_input (H = V + (X - V) / 2), hard reset to 0, V_th 1, beta 1,
 * tau_adapt 1 / ln 2 (rho = 1/2, so A halves each step and a spike adds 1/2):
 *   t  X   H      th = 1 + A[t-1]   S   V      A
 *   0  2   1      1                 1   0      0.5       (H = th: Heaviside(0) = 1)
 *   1  2   1      1.5               0   1      0.25      (a LIF would fire here: H = V_th)
 *   2  2   1.5    1.25              1   0      0.625
 *   3  2   1      1.625             0   1      0.3125
 *   4  0   0.5    1.3125            0   0.5    0.15625   (the threshold decays back ...)
 *   5  0   0.25   1.15625           0   0.25   0.078125
 *   6  2   1.125  1.078125          1   0      0.5390625 (... and the neuron fires again) */
static void test_hand_trace(void)
{
    snn_neuron_config c = snn_neuron_config_default(SNN_NEURON_ALIF);
    c.tau = 2.0f;
    c.beta = 1.0f;
    c.tau_adapt = (float)(1.0 / log(2.0));
    const float x[7] = {2, 2, 2, 2, 0, 0, 2};
    const float want_s[7] = {1, 0, 1, 0, 0, 0, 1};
    const float want_h[7] = {1, 1, 1.5f, 1, 0.5f, 0.25f, 1.125f};
    const float want_th[7] = {1, 1.5f, 1.25f, 1.625f, 1.3125f, 1.15625f, 1.078125f};
    const snn_neuron_params p = snn_neuron_params_from(&c);
    CHECK_CLOSE(p.rho, 0.5f, 1e-7, 0.0);
    const snn_neuron_dims d = {7, 1, 1, 1};
    const snn_neuron_kernels *tables[2] = {&snn_neuron_kernels_ref, &snn_neuron_kernels_cpu};
    for (int k = 0; k < 2; k++) {
        float s[7], h[7], th[7], v_last = -9.0f, a_last = -9.0f;
        tables[k]->alif_forward(s, h, th, &v_last, &a_last, NULL, x, NULL, NULL, &p, &d);
        for (int t = 0; t < 7; t++) {
            CHECK(s[t] == want_s[t]);
            CHECK_CLOSE(h[t], want_h[t], 1e-6, 0.0);
            CHECK_CLOSE(th[t], want_th[t], 1e-6, 0.0);
        }
        CHECK_CLOSE(v_last, 0.0f, 1e-6, 0.0);
        CHECK_CLOSE(a_last, 0.5390625f, 1e-6, 0.0);
    }
    /* the same through the op */
    CHECK_OK(snn_step_begin());
    snn_tensor *xt = snn_from_host(SNN_SHAPE(7, 1), x, SNN_CPU);
    snn_tensor *st = snn_neuron_multistep(xt, &c, NULL, NULL);
    CHECK(st != NULL);
    if (st)
        for (int t = 0; t < 7; t++) CHECK(st->data[t] == want_s[t]);
    snn_step_end();
}

/* Two steps, X = (2, 2), tau 2 (decay_input), hard reset to 0, V_th 1, beta 1.8, rho 1/2,
 * Sigmoid surrogate with alpha 2 (g'(u) = 2 sig(2u)(1 - sig(2u)), g'(0) = 1/2), L = S[1]:
 *   forward  t0: H = 1, th = 1, S = 1, V = 0, A = 0.5;  t1: H = 1, th = 1.9, S = 0
 *   backward t1: g1 = g'(-0.9) = 0.2434587; G_H = g1, G_th = -g1; dX[1] = g1/2;
 *               G_V = g1/2, G_A = beta G_th = -1.8 g1
 *            t0: G_S = (1 - rho) G_A + keep G_V (V_reset - H) = -0.9 g1 - keep 0.5 g1
 *               G_H = G_S g'(0) + G_V (1 - S) = G_S / 2;  G_th = -G_S / 2
 *               dX[0] = G_H / 2,  dV_init = G_H / 2,  dA_init = rho G_A + beta G_th
 *   keep 1: G_S = -1.4 g1: dX[0] = dV_init = -0.35 g1, dA_init = -0.9 g1 + 1.26 g1 = 0.36 g1
 *   keep 0 (detach_reset): G_S = -0.9 g1: dX[0] = dV_init = -0.225 g1,
 *                          dA_init = -0.9 g1 + 0.81 g1 = -0.09 g1 */
static void test_hand_backward(void)
{
    const double g1 = 0.24345868057417072;
    for (int detach = 0; detach < 2; detach++) {
        snn_neuron_config c = snn_neuron_config_default(SNN_NEURON_ALIF);
        c.tau = 2.0f;
        c.beta = 1.8f;
        c.tau_adapt = (float)(1.0 / log(2.0));
        c.surrogate = (snn_surrogate){SNN_SURROGATE_SIGMOID, 2.0f};
        c.detach_reset = detach != 0;
        const snn_neuron_params p = snn_neuron_params_from(&c);
        const snn_neuron_dims d = {2, 1, 1, 1};
        const float x[2] = {2, 2}, dspike[2] = {0, 1};
        const double want_dx0 = (detach ? -0.225 : -0.35) * g1;
        const double want_da = (detach ? -0.09 : 0.36) * g1;
        const snn_neuron_kernels *tables[2] = {&snn_neuron_kernels_ref, &snn_neuron_kernels_cpu};
        for (int k = 0; k < 2; k++) {
            float s[2], h[2], th[2];
            tables[k]->alif_forward(s, h, th, NULL, NULL, NULL, x, NULL, NULL, &p, &d);
            CHECK(s[0] == 1.0f && s[1] == 0.0f);
            CHECK_CLOSE(th[1], 1.9f, 1e-6, 0.0);
            float dx[2] = {0, 0}, dv = 0.0f, da = 0.0f;
            tables[k]->alif_backward(dx, &dv, &da, dspike, NULL, NULL, h, th, &p, &d);
            CHECK_CLOSE(dx[1], g1 / 2, 1e-6, 1e-5);
            CHECK_CLOSE(dx[0], want_dx0, 1e-6, 1e-5);
            CHECK_CLOSE(dv, want_dx0, 1e-6, 1e-5);
            CHECK_CLOSE(da, want_da, 1e-6, 1e-5);
        }
    }
}

/* ---- the unrolled reference ------------------------------------------------------------------ */

/* What each version produces. */
typedef struct alif_result {
    float spikes[T * M], v_last[M], a_last[M];
    float gx[T * M], gv0[M], ga0[M];
} alif_result;

static snn_tensor *leaf(const float *data)
{
    snn_tensor *t = snn_from_host(SNN_SHAPE(N, F), data, SNN_CPU);
    if (t) t->requires_grad = true;
    return t;
}

/* One ALIF step from primitives: returns S[t], updates *v to V[t] and *a to A[t]. */
static snn_tensor *unrolled_step(const snn_neuron_config *c, float rho, snn_tensor *x,
                                 snn_tensor **v, snn_tensor **a, snn_tensor *tau)
{
    const bool soft = c->reset == SNN_RESET_SOFT;
    const float vr = soft ? 0.0f : c->v_reset;
    snn_tensor *V = *v, *H;
    snn_tensor *vm = snn_add_scalar(V, -vr);                         /* V - V_reset */
    if (c->decay_input)
        H = snn_add(V, snn_div(snn_sub(x, vm), tau));                /* V + (X - (V - Vr))/tau */
    else
        H = snn_add(snn_sub(V, snn_div(vm, tau)), x);                /* V - (V - Vr)/tau + X */
    snn_tensor *th = snn_add_scalar(snn_scale(*a, c->beta), c->v_threshold); /* V_th + beta A */
    snn_tensor *S = snn_heaviside(snn_sub(H, th), c->surrogate);
    snn_tensor *Sr = c->detach_reset ? snn_detach(S) : S;            /* only the reset's S */
    if (soft)
        *v = snn_sub(H, snn_mul(th, Sr));                            /* V = H - th S */
    else                                                             /* V = H (1 - S) + Vr S */
        *v = snn_add(snn_mul(H, snn_add_scalar(snn_neg(Sr), 1.0f)), snn_scale(Sr, vr));
    *a = snn_add(snn_scale(*a, rho), snn_scale(S, 1.0f - rho));      /* rho A + (1 - rho) S */
    return S;
}

/* L = sum_t sum(S[t] R[t]) [+ sum(V_last RV)] [+ sum(A_last RA)], from V_init = v0 (NULL:
 * V_reset) and A_init = a0 (NULL: 0). */
static void run_unrolled(const snn_neuron_config *c, const float *x, const float *r,
                         const float *v0, const float *a0, const float *rv, const float *ra,
                         alif_result *out)
{
    const float rho = snn_neuron_params_from(c).rho;
    const float vr = c->reset == SNN_RESET_SOFT ? 0.0f : c->v_reset;
    float v_default[M], a_default[M];
    for (int i = 0; i < M; i++) v_default[i] = vr, a_default[i] = 0.0f;
    CHECK_OK(snn_step_begin());
    snn_tensor *V0 = leaf(v0 ? v0 : v_default), *A0 = leaf(a0 ? a0 : a_default);
    snn_tensor *V = V0, *A = A0, *xs[T], *ss[T], *loss = NULL;
    snn_tensor *tau = snn_full(SNN_SHAPE(1), c->tau, SNN_CPU);
    for (int t = 0; t < T; t++) {
        xs[t] = leaf(x + t * M);
        ss[t] = unrolled_step(c, rho, xs[t], &V, &A, tau);
        snn_tensor *term = snn_sum_all(snn_mul(ss[t], snn_from_host(SNN_SHAPE(N, F), r + t * M,
                                                                    SNN_CPU)));
        loss = loss ? snn_add(loss, term) : term;
    }
    if (rv) loss = snn_add(loss, snn_sum_all(snn_mul(V, snn_from_host(SNN_SHAPE(N, F), rv,
                                                                      SNN_CPU))));
    if (ra) loss = snn_add(loss, snn_sum_all(snn_mul(A, snn_from_host(SNN_SHAPE(N, F), ra,
                                                                      SNN_CPU))));
    CHECK(loss != NULL);
    if (loss) {
        CHECK_OK(snn_backward(loss));
        for (int t = 0; t < T; t++) {
            memcpy(out->spikes + t * M, ss[t]->data, M * sizeof(float));
            CHECK(xs[t]->grad != NULL);
            if (xs[t]->grad) memcpy(out->gx + t * M, xs[t]->grad->data, M * sizeof(float));
        }
        memcpy(out->v_last, V->data, sizeof out->v_last);
        memcpy(out->a_last, A->data, sizeof out->a_last);
        if (V0->grad) memcpy(out->gv0, V0->grad->data, sizeof out->gv0);
        if (A0->grad) memcpy(out->ga0, A0->grad->data, sizeof out->ga0);
    } else {
        fprintf(stderr, "unrolled: %s\n", snn_last_error());
    }
    snn_step_end();
}

/* The kernels of a table directly, with the state in and out. */
static void run_kernels(const snn_neuron_kernels *k, const snn_neuron_config *c, const float *x,
                        const float *r, const float *v0, const float *a0, const float *rv,
                        const float *ra, alif_result *out)
{
    const snn_neuron_params p = snn_neuron_params_from(c);
    const snn_neuron_dims d = {T, N, F, 1};
    float h[T * M], th[T * M];
    k->alif_forward(out->spikes, h, th, out->v_last, out->a_last, NULL, x, v0, a0, &p, &d);
    memset(out->gx, 0, sizeof out->gx);
    memset(out->gv0, 0, sizeof out->gv0);
    memset(out->ga0, 0, sizeof out->ga0);
    k->alif_backward(out->gx, out->gv0, out->ga0, r, rv, ra, h, th, &p, &d);
}

/* snn_neuron_multistep: one node, no state; L on the spikes only. */
static void run_multistep(const snn_neuron_config *c, const float *x, const float *r,
                          alif_result *out)
{
    CHECK_OK(snn_step_begin());
    snn_tensor *xf = snn_from_host(SNN_SHAPE(T, N, F), x, SNN_CPU);
    xf->requires_grad = true;
    snn_tensor *sf = snn_neuron_multistep(xf, c, NULL, NULL);
    CHECK(sf != NULL);
    if (sf) {
        CHECK_OK(snn_backward_from(sf, snn_from_host(SNN_SHAPE(T, N, F), r, SNN_CPU)));
        memcpy(out->spikes, sf->data, sizeof out->spikes);
        CHECK(xf->grad != NULL);
        if (xf->grad) memcpy(out->gx, xf->grad->data, sizeof out->gx);
    } else {
        fprintf(stderr, "multistep: %s\n", snn_last_error());
    }
    snn_step_end();
}

/* snn_neuron_step, step by step from a reset state; L with the last V and A. */
static void run_single_step(const snn_neuron_config *c, const float *x, const float *r,
                            const float *rv, const float *ra, alif_result *out)
{
    CHECK_OK(snn_step_begin());
    snn_tensor *xs[T], *loss = NULL;
    snn_neuron_state st = {0};
    for (int t = 0; t < T; t++) {
        xs[t] = leaf(x + t * M);
        snn_tensor *s = snn_neuron_step(xs[t], c, NULL, &st, NULL);
        CHECK(s != NULL);
        if (!s) {
            fprintf(stderr, "single step: %s\n", snn_last_error());
            break;
        }
        CHECK(st.v != NULL && st.a != NULL);
        memcpy(out->spikes + t * M, s->data, M * sizeof(float));
        snn_tensor *term = snn_sum_all(snn_mul(s, snn_from_host(SNN_SHAPE(N, F), r + t * M,
                                                                SNN_CPU)));
        loss = loss ? snn_add(loss, term) : term;
    }
    if (loss && st.v && st.a) {
        memcpy(out->v_last, st.v->data, sizeof out->v_last);
        memcpy(out->a_last, st.a->data, sizeof out->a_last);
        loss = snn_add(loss, snn_sum_all(snn_mul(st.v, snn_from_host(SNN_SHAPE(N, F), rv,
                                                                     SNN_CPU))));
        loss = snn_add(loss, snn_sum_all(snn_mul(st.a, snn_from_host(SNN_SHAPE(N, F), ra,
                                                                     SNN_CPU))));
        CHECK_OK(snn_backward(loss));
        for (int t = 0; t < T; t++) {
            CHECK(xs[t]->grad != NULL);
            if (xs[t]->grad) memcpy(out->gx + t * M, xs[t]->grad->data, M * sizeof(float));
        }
    }
    snn_step_end();
}

static bool same_floats(const float *a, const float *b, int n)
{
    return memcmp(a, b, (size_t)n * sizeof *a) == 0;
}

static void check_combo(const snn_neuron_config *c, uint64_t seed, const char *what)
{
    combos++;
    snn_rng rng;
    snn_rng_seed(&rng, seed);
    float x[T * M], r[T * M], v0[M], a0[M], rv[M], ra[M];
    for (int i = 0; i < T * M; i++) {
        x[i] = c->decay_input ? 1.2f * snn_rng_normal(&rng) + 1.9f
                              : 0.6f * snn_rng_normal(&rng) + 0.75f;
        r[i] = snn_rng_normal(&rng);
    }
    for (int i = 0; i < M; i++) {
        v0[i] = snn_rng_uniform(&rng) - 0.3f;
        a0[i] = snn_rng_uniform(&rng);
        rv[i] = snn_rng_normal(&rng);
        ra[i] = snn_rng_normal(&rng);
    }
    const int fails_before = test_failures;
    static alif_result want, got;

    /* 1. the kernel tables with a state in and out */
    run_unrolled(c, x, r, v0, a0, rv, ra, &want);
    int fired = 0;
    for (int i = 0; i < T * M; i++) fired += want.spikes[i] != 0.0f;
    if (getenv("ALIF_FIRED")) fprintf(stderr, "fired %d of %d: %s\n", fired, T * M, what);
    CHECK(fired > T * M / 10 && fired < T * M * 9 / 10); /* fire and rest, or the test is weak */
    double gnorm = 0.0, ganorm = 0.0;
    for (int i = 0; i < T * M; i++) gnorm += fabs((double)want.gx[i]);
    for (int i = 0; i < M; i++) ganorm += fabs((double)want.ga0[i]);
    CHECK(gnorm > 1e-2 && ganorm > 1e-3); /* the surrogate carried gradient, A too */
    const snn_neuron_kernels *tables[2] = {&snn_neuron_kernels_ref, &snn_neuron_kernels_cpu};
    for (int k = 0; k < 2; k++) {
        run_kernels(tables[k], c, x, r, v0, a0, rv, ra, &got);
        CHECK(same_floats(got.spikes, want.spikes, T * M));
        CHECK(same_floats(got.v_last, want.v_last, M));
        CHECK(same_floats(got.a_last, want.a_last, M));
        CHECK_ALL_CLOSE(got.gx, want.gx, T * M, 1e-6, 1e-6);
        CHECK_ALL_CLOSE(got.gv0, want.gv0, M, 1e-6, 1e-6);
        CHECK_ALL_CLOSE(got.ga0, want.ga0, M, 1e-6, 1e-6);
    }

    /* 2. the multi-step op, no state, L on the spikes */
    run_unrolled(c, x, r, NULL, NULL, NULL, NULL, &want);
    run_multistep(c, x, r, &got);
    CHECK(same_floats(got.spikes, want.spikes, T * M));
    CHECK_ALL_CLOSE(got.gx, want.gx, T * M, 1e-6, 1e-6);

    /* 3. the single-step API: the gradient of the last V and A must reach every step's x */
    run_unrolled(c, x, r, NULL, NULL, rv, ra, &want);
    run_single_step(c, x, r, rv, ra, &got);
    CHECK(same_floats(got.spikes, want.spikes, T * M));
    CHECK(same_floats(got.v_last, want.v_last, M));
    CHECK(same_floats(got.a_last, want.a_last, M));
    CHECK_ALL_CLOSE(got.gx, want.gx, T * M, 1e-6, 1e-6);

    if (test_failures != fails_before) fprintf(stderr, "  ^ in combination: %s\n", what);
}

static void test_against_unrolled(void)
{
    uint64_t seed = 1;
    for (int sur = 0; sur < SNN_SURROGATE_COUNT; sur++)
        for (int reset = 0; reset < 3; reset++)
            for (int detach = 0; detach < 2; detach++)
                for (int decay = 0; decay < 2; decay++) {
                    snn_neuron_config c = snn_neuron_config_default(SNN_NEURON_ALIF);
                    c.surrogate = snn_surrogate_default((snn_surrogate_kind)sur);
                    c.reset = reset == 2 ? SNN_RESET_SOFT : SNN_RESET_HARD;
                    c.v_reset = reset == 1 ? -0.5f : 0.0f;
                    c.detach_reset = detach != 0;
                    c.decay_input = decay == 0;
                    c.tau = seed % 2 ? 2.0f : 3.0f;
                    c.tau_adapt = seed % 3 ? 4.0f : 10.0f;
                    c.beta = (seed / 2) % 2 ? 1.8f : 0.7f;
                    char what[192];
                    snprintf(what, sizeof what, "alif %s %s reset=%g detach=%d decay_input=%d "
                             "tau=%g tau_adapt=%g beta=%g", snn_surrogate_name(c.surrogate.kind),
                             reset == 2 ? "soft" : "hard", (double)c.v_reset, detach,
                             c.decay_input, (double)c.tau, (double)c.tau_adapt, (double)c.beta);
                    check_combo(&c, seed++, what);
                }
}

/* No-grad mode: the same spikes, no tape, and the single-step state updated in place. */
static void test_no_grad(void)
{
    snn_neuron_config c = snn_neuron_config_default(SNN_NEURON_ALIF);
    snn_rng rng;
    snn_rng_seed(&rng, 77);
    float x[T * M];
    for (int i = 0; i < T * M; i++) x[i] = 1.2f * snn_rng_normal(&rng) + 1.4f;
    float with_grad[T * M];
    CHECK_OK(snn_step_begin());
    snn_tensor *xt = snn_from_host(SNN_SHAPE(T, N, F), x, SNN_CPU);
    xt->requires_grad = true;
    snn_tensor *s = snn_neuron_multistep(xt, &c, NULL, NULL);
    CHECK(s != NULL && s->requires_grad);
    if (s) memcpy(with_grad, s->data, sizeof with_grad);
    snn_step_end();

    CHECK_OK(snn_step_begin());
    snn_no_grad_begin();
    xt = snn_from_host(SNN_SHAPE(T, N, F), x, SNN_CPU);
    xt->requires_grad = true;
    s = snn_neuron_multistep(xt, &c, NULL, NULL);
    CHECK(s != NULL && !s->requires_grad);
    if (s) CHECK(same_floats(s->data, with_grad, T * M));
    snn_neuron_state st = {0};
    snn_tensor *v_first = NULL, *a_first = NULL;
    for (int t = 0; t < T; t++) {
        snn_tensor *s1 = snn_neuron_step(snn_from_host(SNN_SHAPE(N, F), x + t * M, SNN_CPU), &c,
                                         NULL, &st, NULL);
        CHECK(s1 != NULL);
        if (!s1) break;
        CHECK(same_floats(s1->data, with_grad + t * M, M));
        if (t == 0) v_first = st.v, a_first = st.a;
        CHECK(st.v == v_first && st.a == a_first && st.a != NULL); /* in place */
    }
    snn_no_grad_end();
    snn_step_end();
}

/* Bad configs are errors that name the field. */
static void expect_refused(const snn_neuron_config *c, const char *field)
{
    CHECK_OK(snn_step_begin());
    snn_tensor *x = snn_full(SNN_SHAPE(2, 3), 1.0f, SNN_CPU);
    snn_tensor *s = snn_neuron_multistep(x, c, NULL, NULL);
    CHECK(s == NULL);
    CHECK(snn_last_status() == SNN_ERR_ARGUMENT);
    CHECK(strstr(snn_last_error(), field) != NULL);
    CHECK(strstr(snn_last_error(), "snn_neuron_multistep") != NULL);
    snn_neuron_state st = {0};
    CHECK(snn_neuron_step(snn_full(SNN_SHAPE(3), 1.0f, SNN_CPU), c, NULL, &st, NULL) == NULL);
    CHECK(strstr(snn_last_error(), field) != NULL);
    snn_step_end();
    CHECK(snn_neuron_config_check("here", c) == SNN_ERR_ARGUMENT);
    CHECK(strstr(snn_last_error(), field) != NULL);
}

static void test_bad_config(void)
{
    const float bad_tau_adapt[] = {0.0f, -1.0f, NAN, INFINITY};
    for (size_t i = 0; i < sizeof bad_tau_adapt / sizeof bad_tau_adapt[0]; i++) {
        snn_neuron_config c = snn_neuron_config_default(SNN_NEURON_ALIF);
        c.tau_adapt = bad_tau_adapt[i];
        expect_refused(&c, "cfg.tau_adapt");
    }
    const float bad_beta[] = {-0.5f, NAN, INFINITY};
    for (size_t i = 0; i < sizeof bad_beta / sizeof bad_beta[0]; i++) {
        snn_neuron_config c = snn_neuron_config_default(SNN_NEURON_ALIF);
        c.beta = bad_beta[i];
        expect_refused(&c, "cfg.beta");
    }
    snn_neuron_config c = snn_neuron_config_default(SNN_NEURON_ALIF);
    c.tau = 1.0f;
    expect_refused(&c, "cfg.tau");
    /* beta = 0 is a plain LIF: allowed, and it fires as LIF does */
    c = snn_neuron_config_default(SNN_NEURON_ALIF);
    c.beta = 0.0f;
    snn_neuron_config lif = snn_neuron_config_default(SNN_NEURON_LIF);
    lif.tau = c.tau;
    CHECK_OK(snn_step_begin());
    snn_tensor *x = test_uniform(SNN_SHAPE(T, N, F), 0.0f, 3.0f, 5);
    snn_tensor *sa = snn_neuron_multistep(x, &c, NULL, NULL);
    snn_tensor *sl = snn_neuron_multistep(x, &lif, NULL, NULL);
    CHECK(sa != NULL && sl != NULL);
    if (sa && sl) CHECK(same_floats(sa->data, sl->data, T * M));
    snn_step_end();
    /* the default config is valid, and its name round-trips */
    c = snn_neuron_config_default(SNN_NEURON_ALIF);
    CHECK_OK(snn_neuron_config_check("here", &c));
    CHECK(c.tau_adapt == 20.0f && c.beta == 1.8f);
    snn_neuron_kind kind;
    CHECK_OK(snn_neuron_kind_parse("alif", &kind));
    CHECK(kind == SNN_NEURON_ALIF);
}

/* The spiking CNN with ALIF neurons trains (forward and backward through every layer, the
 * builders' consume path included), and its config survives the checkpoint metadata; metadata
 * from before ALIF (no "snn.neuron.alif") load the defaults. */
static void test_model(void)
{
    snn_model_config c = snn_model_config_default(SNN_MODEL_SPIKING_CNN);
    c.width_base = 4, c.hidden = 16, c.time_steps = 3;
    c.neuron = snn_neuron_config_default(SNN_NEURON_ALIF);
    c.neuron.v_threshold = 0.3f; /* an untrained net whose layers fire */
    c.neuron.tau_adapt = 7.5f;
    c.neuron.beta = 0.25f;
    snn_rng rng;
    snn_rng_seed(&rng, 3);
    snn_module *m = snn_model_new(&c, &rng);
    CHECK(m != NULL);
    if (!m) {
        fprintf(stderr, "%s\n", snn_last_error());
        return;
    }
    CHECK_OK(snn_step_begin());
    snn_tensor *x = test_uniform(SNN_SHAPE(2, c.in_channels, c.height, c.width), 0.0f, 3.0f, 9);
    snn_tensor *logits = snn_module_forward(m, x);
    CHECK(logits != NULL);
    if (logits) {
        CHECK_OK(snn_backward(snn_sum_all(logits)));
        snn_param_list params = {0};
        CHECK_OK(snn_module_parameters(m, &params));
        double gsum = 0.0;
        for (int i = 0; i < params.count; i++) {
            const snn_tensor *g = params.items[i].tensor->grad;
            for (int64_t e = 0; g && e < g->numel; e++) gsum += fabs((double)g->data[e]);
        }
        CHECK(gsum > 0.0 && isfinite(gsum));
        snn_param_list_free(&params);
    } else {
        fprintf(stderr, "%s\n", snn_last_error());
    }
    snn_step_end();
    snn_module_free(m);

    snn_metadata full = {0}, old = {0};
    CHECK_OK(snn_model_config_to_metadata(&c, &full));
    snn_model_config back;
    CHECK_OK(snn_model_config_from_metadata(&full, &back));
    CHECK(back.neuron.kind == SNN_NEURON_ALIF);
    CHECK(back.neuron.tau_adapt == 7.5f && back.neuron.beta == 0.25f);
    for (int i = 0; i < full.count; i++)
        if (strcmp(full.keys[i], "snn.neuron.alif") != 0)
            CHECK_OK(snn_metadata_set(&old, full.keys[i], "%s", full.values[i]));
    CHECK_OK(snn_model_config_from_metadata(&old, &back));
    CHECK(back.neuron.tau_adapt == 20.0f && back.neuron.beta == 1.8f);
    CHECK_OK(snn_metadata_set(&full, "snn.neuron.alif", "fast"));
    CHECK(snn_model_config_from_metadata(&full, &back) == SNN_ERR_FORMAT);
    CHECK(strstr(snn_last_error(), "snn.neuron.alif") != NULL);
    snn_clear_error();
}

int main(void)
{
    snn_set_num_threads(2);
    RUN(test_hand_trace);
    RUN(test_hand_backward);
    RUN(test_against_unrolled);
    RUN(test_no_grad);
    RUN(test_bad_config);
    RUN(test_model);
    fprintf(stderr, "%d ALIF option combinations checked\n", combos);
    return test_finish();
}
