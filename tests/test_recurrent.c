/*
 * test_recurrent.c - the recurrent spiking layer snn_recurrent_multistep (neurons/recurrent.c)
 * against its plain definition: the same dynamics unrolled into primitive ops on the tape.
 *
 * The reference writes each step t out of the library's primitives,
 *     I[t] = X[t]                                  t = 0  (S[-1] = 0)
 *     I[t] = snn_add(X[t], snn_linear(S[t-1], W))  t > 0  (S[t-1] W^T)
 *     S[t] = snn_neuron_step(I[t], cfg, state)     the single-step neuron, differentiable
 *                                                  through its state (V, and A for ALIF)
 * and the tape does BPTT by itself, node by node. Both versions compute L = sum_t sum(S[t] R[t])
 * for a fixed random R and must agree:
 *   - forward: the spikes, bit for bit (the same GEMM call, the same add, the same neuron
 *     kernel with T = 1), and the activity equal to the spikes (planes of one element);
 *   - backward: dL/dX and dL/dW_rec to 1e-6 + 1e-5 |want| (the sums over steps and rows are
 *     added in another order: one GEMM over all steps for dW_rec instead of one a step).
 * The spikes are discontinuous, so finite differences say nothing about these gradients (the
 * surrogate replaces dS/dH); the unrolled comparison is the gradient test, as
 * tests/test_neurons_grad.c does for the fused neurons.
 *
 * Combinations: IF and LIF x {hard V_reset 0, hard V_reset -0.5, soft} x detach_reset {off, on}
 * (LIF: decay_input on and off), ALIF x {hard, soft} x detach_reset when the device has its
 * kernels (else: refused with a message naming them), each at T = 1, 5 and 17, N = 3, F = 7.
 * Also: a hand-computed case (one neuron's spike pushes the other over threshold the next
 * step, its gradients by hand), no-grad mode, and the argument errors.
 * Run: ctest -R '^recurrent$'
 */
#include <string.h>

#include "autograd/autograd.h"
#include "kernels/neuron_kernels.h"
#include "neurons/neurons.h"
#include "test.h"

#define N 3
#define F 7
#define M (N * F)
#define T_MAX 17

static int combos;

/* Whether this build's CPU table runs ALIF (its kernels may land after this layer). */
static bool alif_available(void)
{
    const snn_neuron_kernels *k = snn_neuron_kernels_for(SNN_CPU);
    return k && k->alif_forward && k->alif_backward;
}

/* A STEP leaf that requires grad. */
static snn_tensor *leaf(snn_shape shape, const float *data)
{
    snn_tensor *t = snn_from_host(shape, data, SNN_CPU);
    if (t) t->requires_grad = true;
    return t;
}

typedef struct run_result {
    float spikes[T_MAX * M], activity[T_MAX * M], gx[T_MAX * M], gw[F * F];
    bool ok;
} run_result;

static run_result fused, unrolled;

/* The op: one node. */
static void run_fused(run_result *r, const snn_neuron_config *c, int T, const float *x,
                      const float *w, const float *seed)
{
    memset(r, 0, sizeof *r);
    CHECK_OK(snn_step_begin());
    snn_tensor *xt = leaf(SNN_SHAPE(T, N, F), x), *wt = leaf(SNN_SHAPE(F, F), w);
    snn_tensor *activity = NULL;
    snn_tensor *s = snn_recurrent_multistep(xt, wt, c, &activity);
    CHECK(s != NULL && activity != NULL);
    if (s && activity) {
        CHECK(activity->shape.ndim == 2 && activity->shape.dim[0] == T * N &&
              activity->shape.dim[1] == F);
        memcpy(r->spikes, s->data, (size_t)(T * M) * sizeof(float));
        memcpy(r->activity, activity->data, (size_t)(T * M) * sizeof(float));
        CHECK_OK(snn_backward_from(s, snn_from_host(SNN_SHAPE(T, N, F), seed, SNN_CPU)));
        CHECK(xt->grad != NULL && wt->grad != NULL);
        if (xt->grad) memcpy(r->gx, xt->grad->data, (size_t)(T * M) * sizeof(float));
        if (wt->grad) memcpy(r->gw, wt->grad->data, sizeof r->gw);
        r->ok = true;
    } else {
        fprintf(stderr, "snn_recurrent_multistep: %s\n", snn_last_error());
    }
    snn_step_end();
}

/* The plain definition: primitives step by step. */
static void run_unrolled(run_result *r, const snn_neuron_config *c, int T, const float *x,
                         const float *w, const float *seed)
{
    memset(r, 0, sizeof *r);
    CHECK_OK(snn_step_begin());
    snn_tensor *wt = leaf(SNN_SHAPE(F, F), w);
    snn_tensor *xs[T_MAX], *ss[T_MAX], *loss = NULL, *prev = NULL;
    snn_neuron_state state = {0};
    bool ok = true;
    for (int t = 0; t < T && ok; t++) {
        xs[t] = leaf(SNN_SHAPE(N, F), x + t * M);
        snn_tensor *in = t == 0 ? xs[t] : snn_add(xs[t], snn_linear(prev, wt, NULL));
        ss[t] = snn_neuron_step(in, c, NULL, &state, NULL);
        ok = ss[t] != NULL;
        if (!ok) break;
        snn_tensor *rt = snn_from_host(SNN_SHAPE(N, F), seed + t * M, SNN_CPU);
        snn_tensor *term = snn_sum_all(snn_mul(ss[t], rt));
        loss = loss ? snn_add(loss, term) : term;
        prev = ss[t];
    }
    CHECK(ok && loss != NULL);
    if (ok && loss) {
        CHECK_OK(snn_backward(loss));
        for (int t = 0; t < T; t++) {
            memcpy(r->spikes + t * M, ss[t]->data, M * sizeof(float));
            CHECK(xs[t]->grad != NULL);
            if (xs[t]->grad) memcpy(r->gx + t * M, xs[t]->grad->data, M * sizeof(float));
        }
        if (wt->grad) memcpy(r->gw, wt->grad->data, sizeof r->gw); /* NULL for T = 1 */
        r->ok = true;
    } else {
        fprintf(stderr, "unrolled reference: %s\n", snn_last_error());
    }
    snn_step_end();
}

static void check_combo(const snn_neuron_config *c, int T, uint64_t seed, const char *what)
{
    combos++;
    snn_rng rng;
    snn_rng_seed(&rng, seed);
    static float x[T_MAX * M], r[T_MAX * M], w[F * F];
    const bool leaky_input = c->kind != SNN_NEURON_IF && c->decay_input;
    for (int i = 0; i < T * M; i++) {
        /* around the threshold: leaky neurons that divide their input by tau need more */
        const float v0 = c->reset == SNN_RESET_SOFT ? 0.0f : c->v_reset; /* V[-1] */
        x[i] = leaky_input ? 1.2f * snn_rng_normal(&rng) + 1.0f - v0
                           : 0.6f * snn_rng_normal(&rng) + 0.35f - v0;
        r[i] = snn_rng_normal(&rng);
    }
    /* recurrent weights strong enough that the layer's own spikes change what fires */
    for (int i = 0; i < F * F; i++) w[i] = 1.2f * (2.0f * snn_rng_uniform(&rng) - 1.0f);

    const int fails_before = test_failures;
    run_fused(&fused, c, T, x, w, r);
    run_unrolled(&unrolled, c, T, x, w, r);
    if (!fused.ok || !unrolled.ok) {
        fprintf(stderr, "  ^ in combination: %s\n", what);
        return;
    }
    const int n = T * M;
    CHECK(test_same_bits(fused.spikes, unrolled.spikes, n));
    CHECK(test_same_bits(fused.activity, fused.spikes, n)); /* one element a plane */
    int fired = 0;
    for (int i = 0; i < n; i++) fired += fused.spikes[i] != 0.0f;
    CHECK(fired > 0 && fired < n); /* the traces must fire and rest, or the test is weak */
    CHECK_ALL_CLOSE(fused.gx, unrolled.gx, n, 1e-6, 1e-5);
    CHECK_ALL_CLOSE(fused.gw, unrolled.gw, F * F, 1e-6, 1e-5);
    double gx_norm = 0.0, gw_norm = 0.0;
    for (int i = 0; i < n; i++) gx_norm += fabs((double)unrolled.gx[i]);
    for (int i = 0; i < F * F; i++) gw_norm += fabs((double)unrolled.gw[i]);
    CHECK(gx_norm > 1e-3); /* the surrogate carried some gradient */
    if (T > 1) CHECK(gw_norm > 1e-3); else CHECK(gw_norm == 0.0); /* T = 1: W_rec unused */

    /* the recurrence matters: without it (the plain multi-step neuron) other spikes fire for
     * T > 1, and exactly the same for T = 1 */
    CHECK_OK(snn_step_begin());
    snn_tensor *plain = snn_neuron_multistep(snn_from_host(SNN_SHAPE(T, N, F), x, SNN_CPU), c,
                                             NULL, NULL);
    CHECK(plain != NULL);
    if (plain) {
        const bool same = test_same_bits(plain->data, fused.spikes, n);
        CHECK(T == 1 ? same : !same);
    }
    snn_step_end();
    if (test_failures != fails_before) fprintf(stderr, "  ^ in combination: %s\n", what);
}

static const char *reset_name(const snn_neuron_config *c)
{
    if (c->reset == SNN_RESET_SOFT) return "soft";
    return c->v_reset == 0.0f ? "hard(0)" : "hard(-0.5)";
}

static void test_against_unrolled_if_lif(void)
{
    static const int Ts[3] = {1, 5, 17};
    const snn_neuron_kind kinds[2] = {SNN_NEURON_IF, SNN_NEURON_LIF};
    uint64_t seed = 1;
    for (int ik = 0; ik < 2; ik++)
        for (int reset = 0; reset < 3; reset++)
            for (int detach = 0; detach < 2; detach++)
                for (int decay = 0; decay < (kinds[ik] == SNN_NEURON_IF ? 1 : 2); decay++)
                    for (int it = 0; it < 3; it++) {
                        snn_neuron_config c = snn_neuron_config_default(kinds[ik]);
                        /* the surrogates take turns */
                        c.surrogate = snn_surrogate_default(
                            (snn_surrogate_kind)(seed % SNN_SURROGATE_COUNT));
                        c.reset = reset == 2 ? SNN_RESET_SOFT : SNN_RESET_HARD;
                        c.v_reset = reset == 1 ? -0.5f : 0.0f;
                        c.detach_reset = detach != 0;
                        c.decay_input = decay == 0;
                        char what[160];
                        snprintf(what, sizeof what, "%s %s reset=%s detach=%d decay_input=%d T=%d",
                                 snn_neuron_kind_name(c.kind), snn_surrogate_name(c.surrogate.kind),
                                 reset_name(&c), detach, c.decay_input, Ts[it]);
                        check_combo(&c, Ts[it], seed++, what);
                    }
}

static void test_against_unrolled_alif(void)
{
    if (!alif_available()) {
        /* refused, naming the missing kernel, never run through a NULL pointer */
        snn_neuron_config c = snn_neuron_config_default(SNN_NEURON_ALIF);
        CHECK_OK(snn_step_begin());
        snn_tensor *s = snn_recurrent_multistep(snn_zeros(SNN_SHAPE(2, N, F), SNN_CPU),
                                                snn_zeros(SNN_SHAPE(F, F), SNN_CPU), &c, NULL);
        CHECK(s == NULL && snn_last_status() == SNN_ERR_UNSUPPORTED);
        CHECK(strstr(snn_last_error(), "alif_forward") != NULL);
        snn_step_end();
        fprintf(stderr, "ALIF: no CPU kernels in this build; checked that it is refused\n");
        return;
    }
    static const int Ts[3] = {1, 5, 17};
    uint64_t seed = 500;
    for (int reset = 0; reset < 2; reset++)
        for (int detach = 0; detach < 2; detach++)
            for (int it = 0; it < 3; it++) {
                snn_neuron_config c = snn_neuron_config_default(SNN_NEURON_ALIF);
                c.surrogate =
                    snn_surrogate_default((snn_surrogate_kind)(seed % SNN_SURROGATE_COUNT));
                c.reset = reset ? SNN_RESET_SOFT : SNN_RESET_HARD;
                c.detach_reset = detach != 0;
                c.tau_adapt = 5.0f; /* adaptation that changes within the run */
                c.beta = 0.5f;
                char what[160];
                snprintf(what, sizeof what, "alif %s reset=%s detach=%d T=%d",
                         snn_surrogate_name(c.surrogate.kind), reset_name(&c), detach, Ts[it]);
                check_combo(&c, Ts[it], seed++, what);
            }
}

/* Sigmoid(alpha = 4)'s g'(x), in double: 4 s (1 - s), s = sigmoid(4 x). */
static double sigmoid4_grad(double x)
{
    const double s = 1.0 / (1.0 + exp(-4.0 * x));
    return 4.0 * s * (1.0 - s);
}

/* Two IF neurons (V_th 1, hard reset to 0, Sigmoid(4)), N = 1, T = 3. Neuron 0 gets X = 1 at
 * t = 0 and fires; W_rec[1][0] = 1.5 carries its spike to neuron 1, whose H[1] = 1.5 crosses
 * the threshold at t = 1 although its own input is 0 throughout. L = S_1[1]. By hand, with
 * g(h) = g'(h - 1):
 *   G_H1[1] = 1 g(1.5)                       dX_1[1] = g(1.5)   (IF: dH/dX = 1)
 *   G_V1[0] = G_H1[1] (dH/dV = 1)            neuron 1 at t = 0: H = 0, S = 0, hard reset
 *                                            dV/dH = (1 - S) + (0 - H) g = 1
 *   dX_1[0] = G_S1[0] g(0) + G_V1[0] = g(1.5)          (G_S1[0] = W_rec[1][1] G_I1[1] = 0)
 *   G_S0[0] = W_rec[1][0] G_I1[1] = 1.5 g(1.5)  neuron 0 at t = 0: H = 1, S = 1
 *   dX_0[0] = 1.5 g(1.5) g(1) + G_V0[0] ((1 - S) + (0 - H) g(1)) = 1.5 g(1.5) g(1)
 *             (G_V0[0] = 0: neuron 0 gets no gradient at t >= 1)
 *   dW_rec[1][0] = G_I1[1] S0[0] = g(1.5); every other entry 0 (S1[0] = 0, G_I0[1] = 0,
 *   G_I[2] = 0). */
static void test_hand_computed(void)
{
    snn_neuron_config c = snn_neuron_config_default(SNN_NEURON_IF);
    c.surrogate = snn_surrogate_default(SNN_SURROGATE_SIGMOID);
    const float x[3 * 2] = {1.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f}; /* (T, 1, 2) */
    const float w[2 * 2] = {0.0f, 0.0f, 1.5f, 0.0f};             /* W_rec[1][0] = 1.5 */
    const float r[3 * 2] = {0.0f, 0.0f, 0.0f, 1.0f, 0.0f, 0.0f}; /* L = S_1[1] */
    CHECK_OK(snn_step_begin());
    snn_tensor *xt = leaf(SNN_SHAPE(3, 1, 2), x), *wt = leaf(SNN_SHAPE(2, 2), w);
    snn_tensor *s = snn_recurrent_multistep(xt, wt, &c, NULL);
    CHECK(s != NULL);
    if (s) {
        const float want_s[6] = {1, 0, 0, 1, 0, 0};
        for (int i = 0; i < 6; i++) CHECK(s->data[i] == want_s[i]);
        CHECK_OK(snn_backward_from(s, snn_from_host(SNN_SHAPE(3, 1, 2), r, SNN_CPU)));
        const double g15 = sigmoid4_grad(0.5), g1 = sigmoid4_grad(0.0);
        const double want_dx[6] = {1.5 * g15 * g1, g15, 0.0, g15, 0.0, 0.0};
        const double want_dw[4] = {0.0, 0.0, g15, 0.0};
        for (int i = 0; i < 6; i++) CHECK_CLOSE(xt->grad->data[i], want_dx[i], 1e-7, 1e-6);
        for (int i = 0; i < 4; i++) CHECK_CLOSE(wt->grad->data[i], want_dw[i], 1e-7, 1e-6);
    }
    /* without the recurrent weight neuron 1 never fires */
    const float zero_w[4] = {0, 0, 0, 0};
    snn_tensor *s0 = snn_recurrent_multistep(snn_from_host(SNN_SHAPE(3, 1, 2), x, SNN_CPU),
                                             snn_from_host(SNN_SHAPE(2, 2), zero_w, SNN_CPU), &c,
                                             NULL);
    CHECK(s0 != NULL);
    if (s0) CHECK(s0->data[1] == 0.0f && s0->data[3] == 0.0f && s0->data[5] == 0.0f);
    snn_step_end();
}

/* No-grad mode: the same spikes, no tape node, nothing saved. */
static void test_no_grad(void)
{
    snn_neuron_config c = snn_neuron_config_default(SNN_NEURON_LIF);
    snn_rng rng;
    snn_rng_seed(&rng, 7);
    static float x[5 * M], w[F * F];
    for (int i = 0; i < 5 * M; i++) x[i] = 1.2f * snn_rng_normal(&rng) + 1.0f;
    for (int i = 0; i < F * F; i++) w[i] = snn_rng_normal(&rng);
    CHECK_OK(snn_step_begin());
    snn_tensor *xt = leaf(SNN_SHAPE(5, N, F), x), *wt = leaf(SNN_SHAPE(F, F), w);
    snn_tensor *with_tape = snn_recurrent_multistep(xt, wt, &c, NULL);
    snn_no_grad_begin();
    snn_tensor *without = snn_recurrent_multistep(xt, wt, &c, NULL);
    snn_no_grad_end();
    CHECK(with_tape && without);
    if (with_tape && without) {
        CHECK(with_tape->requires_grad && !without->requires_grad && !without->grad_fn);
        CHECK(test_same_bits(with_tape->data, without->data, 5 * M));
    }
    snn_step_end();
}

static void test_errors(void)
{
    snn_neuron_config c = snn_neuron_config_default(SNN_NEURON_LIF);
    CHECK_OK(snn_step_begin());
    snn_tensor *x = snn_zeros(SNN_SHAPE(4, N, F), SNN_CPU);
    snn_tensor *w = snn_zeros(SNN_SHAPE(F, F), SNN_CPU);
    /* x not 3-D */
    CHECK(!snn_recurrent_multistep(snn_zeros(SNN_SHAPE(4, N * F), SNN_CPU), w, &c, NULL));
    CHECK(snn_last_status() == SNN_ERR_ARGUMENT && strstr(snn_last_error(), "'x'") &&
          strstr(snn_last_error(), "3-D"));
    /* w_rec not (F, F) */
    CHECK(!snn_recurrent_multistep(x, snn_zeros(SNN_SHAPE(F, F + 1), SNN_CPU), &c, NULL));
    CHECK(snn_last_status() == SNN_ERR_ARGUMENT && strstr(snn_last_error(), "'w_rec'") &&
          strstr(snn_last_error(), "[7, 8]"));
    CHECK(!snn_recurrent_multistep(x, snn_zeros(SNN_SHAPE(F * F), SNN_CPU), &c, NULL));
    CHECK(strstr(snn_last_error(), "'w_rec'") != NULL);
    /* cfg */
    CHECK(!snn_recurrent_multistep(x, w, NULL, NULL));
    CHECK(snn_last_status() == SNN_ERR_ARGUMENT && strstr(snn_last_error(), "'cfg'"));
    const snn_neuron_kind refused[4] = {SNN_NEURON_PLIF, SNN_NEURON_STBIF, SNN_NEURON_RELU,
                                        SNN_NEURON_QCLIP};
    for (int i = 0; i < 4; i++) {
        snn_neuron_config bad = snn_neuron_config_default(refused[i]);
        CHECK(!snn_recurrent_multistep(x, w, &bad, NULL));
        CHECK(snn_last_status() == SNN_ERR_ARGUMENT && strstr(snn_last_error(), "'cfg'") &&
              strstr(snn_last_error(), snn_neuron_kind_name(refused[i])));
    }
    snn_neuron_config bad_tau = c;
    bad_tau.tau = 0.5f; /* a field the config check refuses */
    CHECK(!snn_recurrent_multistep(x, w, &bad_tau, NULL));
    CHECK(snn_last_status() == SNN_ERR_ARGUMENT);
    /* a NULL input keeps the error of what made it */
    CHECK(!snn_recurrent_multistep(NULL, w, &c, NULL));
    CHECK(!snn_recurrent_multistep(x, NULL, &c, NULL));
    /* empty runs are fine: no step, or no sample */
    snn_tensor *act = NULL;
    snn_tensor *s = snn_recurrent_multistep(snn_zeros(SNN_SHAPE(0, N, F), SNN_CPU), w, &c, &act);
    CHECK(s && act && s->numel == 0);
    s = snn_recurrent_multistep(snn_zeros(SNN_SHAPE(3, 0, F), SNN_CPU), w, &c, &act);
    CHECK(s && act && s->numel == 0);
    snn_step_end();
}

int main(void)
{
    snn_set_num_threads(2);
    RUN(test_hand_computed);
    RUN(test_against_unrolled_if_lif);
    RUN(test_against_unrolled_alif);
    RUN(test_no_grad);
    RUN(test_errors);
    fprintf(stderr, "%d neuron x option x T combinations checked\n", combos);
    return test_finish();
}
