/*
 * test_neurons_grad.c - the fused BPTT backward of every neuron against the gradient of the
 * same dynamics unrolled into primitive ops on the tape (kernels/cpu/lif.c, stbif.c, neuron_op.c).
 *
 * The reference writes each time step out of autograd primitives (snn_add, snn_sub, snn_mul,
 * snn_div, snn_scale, snn_neg, snn_add_scalar, snn_detach, snn_sigmoid) plus snn_heaviside, the
 * spike op whose backward is the surrogate. The tape then does BPTT by itself, one small node at
 * a time. Both versions compute L = sum_t sum(S[t] * R[t]) for a fixed random R and must agree:
 *   - forward: the spikes, exactly;
 *   - backward: dL/dX (and dL/dw for PLIF) to |diff| <= 1e-6 + 1e-6 |want|.
 * A third version, the single-step API driven step by step, must agree too.
 *
 * Combinations: IF, LIF, PLIF x {hard V_reset 0, hard V_reset -0.5, soft} x detach_reset
 * {off, on} x surrogate {Sigmoid 4, ATan 2, PiecewiseQuadratic 1} (x decay_input {on, off} for
 * LIF and PLIF, with LIF tau 2 and 3, PLIF tau0 2 and 3); ST-BIF x levels {4 unsigned,
 * 8 symmetric} x detach_reset x surrogate, with theta 1 and 0.5.
 * Run: ctest -R neurons_grad
 */
#include <string.h>

#include "autograd/autograd.h"
#include "neurons/neurons.h"
#include "test.h"

#define T 6
#define N 3
#define F 7
#define M (N * F)

static int combos;

/* A STEP leaf of shape (N, F) that requires grad. */
static snn_tensor *leaf(const float *data)
{
    snn_tensor *t = snn_from_host(SNN_SHAPE(N, F), data, SNN_CPU);
    if (t) t->requires_grad = true;
    return t;
}

/* One step of IF / LIF / PLIF from primitives: returns S[t], updates *v to V[t]. */
static snn_tensor *unrolled_lif_step(const snn_neuron_config *c, snn_tensor *x, snn_tensor **v,
                                     snn_tensor *k_or_tau)
{
    const bool soft = c->reset == SNN_RESET_SOFT;
    const float vr = soft ? 0.0f : c->v_reset;
    snn_tensor *V = *v, *H;
    if (c->kind == SNN_NEURON_IF) {
        H = snn_add(V, x);                                          /* H = V + X */
    } else {
        snn_tensor *vm = snn_add_scalar(V, -vr);                    /* V - V_reset */
        /* LIF divides by tau, PLIF multiplies by k = sigmoid(w) */
        if (c->decay_input) {
            snn_tensor *in = snn_sub(x, vm);                        /* X - (V - V_reset) */
            snn_tensor *dec = c->kind == SNN_NEURON_LIF ? snn_div(in, k_or_tau)
                                                        : snn_mul(in, k_or_tau);
            H = snn_add(V, dec);
        } else {
            snn_tensor *dec = c->kind == SNN_NEURON_LIF ? snn_div(vm, k_or_tau)
                                                        : snn_mul(vm, k_or_tau);
            H = snn_add(snn_sub(V, dec), x);                        /* V - (V - V_reset)/tau + X */
        }
    }
    snn_tensor *S = snn_heaviside(snn_add_scalar(H, -c->v_threshold), c->surrogate);
    snn_tensor *Sr = c->detach_reset ? snn_detach(S) : S;
    if (soft)
        *v = snn_sub(H, snn_scale(Sr, c->v_threshold));             /* V = H - V_th S */
    else                                                            /* V = H (1 - S) + V_reset S */
        *v = snn_add(snn_mul(H, snn_add_scalar(snn_neg(Sr), 1.0f)), snn_scale(Sr, vr));
    return S;
}

/* One step of ST-BIF from primitives; the gates come from the host copy of A (constants). */
static snn_tensor *unrolled_stbif_step(const snn_neuron_config *c, snn_tensor *x, snn_tensor **v,
                                       float *a_host)
{
    int amin, amax;
    snn_stbif_bounds(c, &amin, &amax);
    float up_gate[M], dn_gate[M];
    for (int i = 0; i < M; i++) {
        up_gate[i] = a_host[i] < (float)amax ? 1.0f : 0.0f;
        dn_gate[i] = a_host[i] > (float)amin ? 1.0f : 0.0f;
    }
    snn_surrogate sg = {c->surrogate.kind, c->surrogate.alpha / c->theta}; /* slope alpha/theta */
    snn_tensor *H = snn_add(*v, x);                                           /* H = V + X */
    snn_tensor *up = snn_mul(snn_heaviside(snn_add_scalar(H, -c->theta), sg), /* [H >= theta] */
                             snn_from_host(SNN_SHAPE(N, F), up_gate, SNN_CPU));
    snn_tensor *neg = snn_add_scalar(snn_neg(snn_heaviside(H, sg)), 1.0f);    /* [H < 0] */
    snn_tensor *dn = snn_mul(neg, snn_from_host(SNN_SHAPE(N, F), dn_gate, SNN_CPU));
    snn_tensor *S = snn_sub(up, dn);
    snn_tensor *Sr = c->detach_reset ? snn_detach(S) : S;
    *v = snn_sub(H, snn_scale(Sr, c->theta));                                 /* V = H - theta S */
    for (int i = 0; i < M; i++) a_host[i] += S->data[i];
    return snn_scale(S, c->theta);                                            /* Y = theta S */
}

static void check_combo(const snn_neuron_config *c, uint64_t seed, const char *what)
{
    combos++;
    snn_rng rng;
    snn_rng_seed(&rng, seed);
    float x[T * M], r[T * M];
    for (int i = 0; i < T * M; i++) {
        /* around the threshold: leaky neurons that divide their input by tau need more */
        const bool leaky_input = c->kind != SNN_NEURON_IF && c->decay_input;
        if (c->kind == SNN_NEURON_STBIF) x[i] = 0.6f * snn_rng_normal(&rng);
        else if (leaky_input) x[i] = 1.2f * snn_rng_normal(&rng) + 1.1f;
        else x[i] = 0.6f * snn_rng_normal(&rng) + 0.45f;
        r[i] = snn_rng_normal(&rng);
    }
    const bool plif = c->kind == SNN_NEURON_PLIF;
    /* three copies of PLIF's w, one per version, so their gradients stay apart */
    snn_tensor *w[3] = {NULL, NULL, NULL};
    if (plif)
        for (int i = 0; i < 3; i++) w[i] = snn_plif_param_new(c->tau, SNN_CPU);

    int fails_before = test_failures;
    /* Each version runs in its own step: snn_backward walks the whole tape of the open steps. */
    float spikes[3][T * M], gx[3][T * M], gw[3] = {0, 0, 0};
    memset(spikes, 0, sizeof spikes);
    memset(gx, 0, sizeof gx);

    /* 1. the fused op: one node */
    CHECK_OK(snn_step_begin());
    snn_tensor *xf = snn_from_host(SNN_SHAPE(T, N, F), x, SNN_CPU);
    xf->requires_grad = true;
    snn_tensor *sf = snn_neuron_multistep(xf, c, w[0], NULL);
    CHECK(sf != NULL);
    if (sf) {
        CHECK_OK(snn_backward_from(sf, snn_from_host(SNN_SHAPE(T, N, F), r, SNN_CPU)));
        memcpy(spikes[0], sf->data, sizeof spikes[0]);
        if (xf->grad) memcpy(gx[0], xf->grad->data, sizeof gx[0]);
    } else {
        fprintf(stderr, "%s: %s\n", what, snn_last_error());
    }
    snn_step_end();

    /* 2. unrolled into primitives */
    CHECK_OK(snn_step_begin());
    snn_tensor *xs[T], *loss = NULL, *ss[T];
    snn_tensor *V = snn_full(SNN_SHAPE(N, F), c->kind == SNN_NEURON_STBIF ? 0.5f * c->theta
                             : (c->reset == SNN_RESET_SOFT ? 0.0f : c->v_reset), SNN_CPU);
    snn_tensor *k_or_tau = NULL;
    if (c->kind == SNN_NEURON_LIF) k_or_tau = snn_full(SNN_SHAPE(1), c->tau, SNN_CPU);
    if (plif) k_or_tau = snn_sigmoid(w[1]);
    float a_host[M] = {0};
    for (int t = 0; t < T; t++) {
        xs[t] = leaf(x + t * M);
        ss[t] = c->kind == SNN_NEURON_STBIF ? unrolled_stbif_step(c, xs[t], &V, a_host)
                                            : unrolled_lif_step(c, xs[t], &V, k_or_tau);
        snn_tensor *rt = snn_from_host(SNN_SHAPE(N, F), r + t * M, SNN_CPU);
        snn_tensor *term = snn_sum_all(snn_mul(ss[t], rt));
        loss = loss ? snn_add(loss, term) : term;
    }
    CHECK(loss != NULL);
    if (loss) {
        CHECK_OK(snn_backward(loss));
        for (int t = 0; t < T; t++) {
            memcpy(spikes[1] + t * M, ss[t]->data, M * sizeof(float));
            CHECK(xs[t]->grad != NULL);
            if (xs[t]->grad) memcpy(gx[1] + t * M, xs[t]->grad->data, M * sizeof(float));
        }
    } else {
        fprintf(stderr, "%s: %s\n", what, snn_last_error());
    }
    snn_step_end();

    /* 3. the single-step API, step by step */
    CHECK_OK(snn_step_begin());
    snn_tensor *x1[T], *loss1 = NULL;
    snn_neuron_state st = {0};
    for (int t = 0; t < T; t++) {
        x1[t] = leaf(x + t * M);
        snn_tensor *s1 = snn_neuron_step(x1[t], c, w[2], &st, NULL);
        CHECK(s1 != NULL);
        if (!s1) break;
        memcpy(spikes[2] + t * M, s1->data, M * sizeof(float));
        snn_tensor *rt = snn_from_host(SNN_SHAPE(N, F), r + t * M, SNN_CPU);
        snn_tensor *term = snn_sum_all(snn_mul(s1, rt));
        loss1 = loss1 ? snn_add(loss1, term) : term;
    }
    if (loss1) {
        CHECK_OK(snn_backward(loss1));
        for (int t = 0; t < T; t++) {
            CHECK(x1[t]->grad != NULL);
            if (x1[t]->grad) memcpy(gx[2] + t * M, x1[t]->grad->data, M * sizeof(float));
        }
    }
    snn_step_end();

    if (plif)
        for (int i = 0; i < 3; i++) gw[i] = w[i]->grad ? w[i]->grad->data[0] : NAN;

    /* compare: spikes exactly, gradients to 1e-6 */
    int spikes_bad = 0, fired = 0;
    for (int i = 0; i < T * M; i++) {
        spikes_bad += (spikes[0][i] != spikes[1][i]) + (spikes[2][i] != spikes[1][i]);
        fired += spikes[0][i] != 0.0f;
    }
    CHECK(spikes_bad == 0);
    CHECK(fired > 0 && fired < T * M); /* the traces must fire and rest, or the test is weak */
    CHECK_ALL_CLOSE(gx[0], gx[1], T * M, 1e-6, 1e-6);
    CHECK_ALL_CLOSE(gx[2], gx[1], T * M, 1e-6, 1e-6);
    double gnorm = 0.0;
    for (int i = 0; i < T * M; i++) gnorm += fabs((double)gx[1][i]);
    CHECK(gnorm > 1e-3); /* the surrogate must have carried some gradient */
    if (plif) {
        CHECK_CLOSE(gw[0], gw[1], 1e-6, 1e-6);
        CHECK_CLOSE(gw[2], gw[1], 1e-6, 1e-6);
        CHECK(fabsf(gw[1]) > 1e-4f);
    }
    if (test_failures != fails_before) fprintf(stderr, "  ^ in combination: %s\n", what);
    for (int i = 0; i < 3; i++) snn_tensor_free(w[i]);
}

static const char *reset_name(const snn_neuron_config *c)
{
    if (c->reset == SNN_RESET_SOFT) return "soft";
    return c->v_reset == 0.0f ? "hard(0)" : "hard(-0.5)";
}

static void test_if_lif_plif(void)
{
    const snn_neuron_kind kinds[3] = {SNN_NEURON_IF, SNN_NEURON_LIF, SNN_NEURON_PLIF};
    uint64_t seed = 1;
    for (int ik = 0; ik < 3; ik++)
        for (int sur = 0; sur < SNN_SURROGATE_COUNT; sur++)
            for (int reset = 0; reset < 3; reset++)
                for (int detach = 0; detach < 2; detach++)
                    for (int decay = 0; decay < (kinds[ik] == SNN_NEURON_IF ? 1 : 2); decay++) {
                        snn_neuron_config c = snn_neuron_config_default(kinds[ik]);
                        c.surrogate = snn_surrogate_default((snn_surrogate_kind)sur);
                        c.reset = reset == 2 ? SNN_RESET_SOFT : SNN_RESET_HARD;
                        c.v_reset = reset == 1 ? -0.5f : 0.0f;
                        c.detach_reset = detach != 0;
                        c.decay_input = decay == 0;
                        c.tau = (seed / 2) % 2 ? 2.0f : 3.0f;
                        char what[160];
                        snprintf(what, sizeof what, "%s %s reset=%s detach=%d decay_input=%d tau=%g",
                                 snn_neuron_kind_name(c.kind), snn_surrogate_name(c.surrogate.kind),
                                 reset_name(&c), detach, c.decay_input, (double)c.tau);
                        check_combo(&c, seed++, what);
                    }
}

static void test_stbif(void)
{
    uint64_t seed = 1000;
    for (int sur = 0; sur < SNN_SURROGATE_COUNT; sur++)
        for (int sym = 0; sym < 2; sym++)
            for (int detach = 0; detach < 2; detach++)
                for (int th = 0; th < 2; th++) {
                    snn_neuron_config c = snn_neuron_config_default(SNN_NEURON_STBIF);
                    c.surrogate = snn_surrogate_default((snn_surrogate_kind)sur);
                    c.symmetric = sym != 0;
                    c.levels = sym ? 8 : 4;
                    c.detach_reset = detach != 0;
                    c.theta = th ? 0.5f : 1.0f;
                    char what[160];
                    snprintf(what, sizeof what, "stbif %s levels=%d %s detach=%d theta=%g",
                             snn_surrogate_name(c.surrogate.kind), c.levels,
                             sym ? "symmetric" : "unsigned", detach, (double)c.theta);
                    check_combo(&c, seed++, what);
                }
}

int main(void)
{
    snn_set_num_threads(2);
    RUN(test_if_lif_plif);
    RUN(test_stbif);
    fprintf(stderr, "%d neuron x option combinations checked\n", combos);
    return test_finish();
}
