/*
 * test_neurons_state.c - neuron state across calls (neurons/single_step.c, neuron_op.c):
 *   - the single-step API driven T times equals the multi-step op, spikes and activity, for
 *     every kind (ST-BIF included, whose state has A as well as V);
 *   - snn_neuron_state_reset between batches restores V[0] (and A = 0), and a different batch
 *     size after a reset works; without a reset it is an error that says so;
 *   - a state whose step has closed is treated as reset (its memory is gone), nested steps too;
 *   - the multi-step op starts from V[0] on every call (no state leaks between batches);
 *   - no-grad mode updates the state in place (a long simulation does not grow the arena).
 * Run: ctest -R neurons_state
 */
#include <string.h>

#include "autograd/autograd.h"
#include "neurons/neurons.h"
#include "test.h"

static snn_neuron_config config_of(snn_neuron_kind kind)
{
    snn_neuron_config c = snn_neuron_config_default(kind);
    c.reset = SNN_RESET_SOFT; /* the state then carries the excess over the threshold */
    c.levels = 8;
    c.symmetric = true;
    return c;
}

/* Single-step over x (T, N, C, P) from a fresh state == multi-step, spikes and activity. */
static void check_single_equals_multi(snn_neuron_kind kind, snn_tensor *w, int N, uint64_t seed,
                                      snn_neuron_state *st)
{
    const int T = 5, C = 3, P = 4;
    snn_neuron_config c = config_of(kind);
    snn_rng rng;
    snn_rng_seed(&rng, seed);
    snn_tensor *x = snn_empty(SNN_SHAPE(T, N, C, 2, 2), SNN_CPU);
    CHECK_OK(snn_tensor_normal_(x, &rng, 0.5f, 1.0f));
    snn_tensor *act = NULL;
    snn_tensor *y = snn_neuron_multistep(x, &c, w, &act);
    CHECK(y && act);
    if (!y || !act) return;
    const int M = N * C * P;
    int bad = 0;
    for (int t = 0; t < T; t++) {
        snn_tensor *xt = snn_from_host(SNN_SHAPE(N, C, 2, 2), x->data + t * M, SNN_CPU);
        snn_tensor *at = NULL;
        snn_tensor *yt = snn_neuron_step(xt, &c, w, st, &at);
        CHECK(yt && at);
        if (!yt || !at) return;
        CHECK(at->shape.ndim == 2 && at->shape.dim[0] == N && at->shape.dim[1] == C);
        for (int i = 0; i < M; i++) bad += yt->data[i] != y->data[t * M + i];
        for (int i = 0; i < N * C; i++) bad += at->data[i] != act->data[t * N * C + i];
    }
    CHECK(bad == 0);
}

static void test_single_step_equals_multistep(void)
{
    for (int kind = 0; kind < SNN_NEURON_COUNT; kind++) {
        if (snn_neuron_is_ann((snn_neuron_kind)kind)) continue; /* stateless: test_ann2snn.c */
        snn_tensor *w = kind == SNN_NEURON_PLIF ? snn_plif_param_new(2.5f, SNN_CPU) : NULL;
        snn_neuron_state st;
        snn_neuron_state_reset(&st);
        CHECK_OK(snn_step_begin());
        check_single_equals_multi((snn_neuron_kind)kind, w, 2, 1, &st);
        /* next batch: reset, then a new batch size */
        snn_neuron_state_reset(&st);
        check_single_equals_multi((snn_neuron_kind)kind, w, 5, 2, &st);
        snn_neuron_state_reset(&st);
        check_single_equals_multi((snn_neuron_kind)kind, w, 1, 3, &st);
        snn_step_end();
        snn_tensor_free(w);
    }
}

static void test_batch_change_without_reset_is_an_error(void)
{
    snn_neuron_config c = config_of(SNN_NEURON_LIF);
    snn_neuron_state st = {0};
    CHECK_OK(snn_step_begin());
    CHECK(snn_neuron_step(snn_full(SNN_SHAPE(2, 3), 0.7f, SNN_CPU), &c, NULL, &st, NULL) != NULL);
    CHECK(snn_neuron_step(snn_full(SNN_SHAPE(4, 3), 0.7f, SNN_CPU), &c, NULL, &st, NULL) == NULL);
    CHECK(strstr(snn_last_error(), "snn_neuron_state_reset") != NULL);
    CHECK(strstr(snn_last_error(), "[2, 3]") && strstr(snn_last_error(), "[4, 3]"));
    snn_clear_error();
    snn_neuron_state_reset(&st);
    CHECK(snn_neuron_step(snn_full(SNN_SHAPE(4, 3), 0.7f, SNN_CPU), &c, NULL, &st, NULL) != NULL);
    CHECK(snn_neuron_step(snn_full(SNN_SHAPE(4, 3), 0.7f, SNN_CPU), &c, NULL, NULL, NULL) == NULL);
    snn_clear_error();
    snn_step_end();
}

/* Soft IF with X = 0.75: H = .75 (no spike), 1.5 (spike, V .5), 1.25 (spike, V .25), 1.0 (spike
 * exactly at V_th, V 0). After a reset, or in a new step, the sequence must start over. */
static void test_reset_restores_initial_state(void)
{
    snn_neuron_config c = config_of(SNN_NEURON_IF);
    const float want[4] = {0, 1, 1, 1};
    snn_neuron_state st = {0};
    CHECK_OK(snn_step_begin());
    for (int round = 0; round < 3; round++) {
        for (int t = 0; t < 4; t++) {
            snn_tensor *y = snn_neuron_step(snn_full(SNN_SHAPE(3), 0.75f, SNN_CPU), &c, NULL, &st,
                                            NULL);
            CHECK(y && y->data[0] == want[t] && y->data[2] == y->data[0]);
        }
        if (round == 0) snn_neuron_state_reset(&st);
        if (round == 1) {
            /* a closed step resets too: end this one, open another */
            snn_step_end();
            CHECK_OK(snn_step_begin());
        }
    }
    snn_step_end();

    /* ST-BIF: the reset puts V back to theta/2 and A to 0 */
    snn_neuron_config cs = config_of(SNN_NEURON_STBIF);
    snn_neuron_state_reset(&st);
    CHECK_OK(snn_step_begin());
    for (int round = 0; round < 2; round++) {
        /* X = 3 then silence: +1 spikes at t = 0, 1, 2 (A = 3 = round(3)), then nothing */
        for (int t = 0; t < 5; t++) {
            snn_tensor *y = snn_neuron_step(snn_full(SNN_SHAPE(2), t == 0 ? 3.0f : 0.0f, SNN_CPU),
                                            &cs, NULL, &st, NULL);
            CHECK(y && y->data[0] == (t < 3 ? 1.0f : 0.0f));
        }
        CHECK(st.a && st.a->data[0] == 3.0f && st.v->data[0] == 0.5f);
        snn_neuron_state_reset(&st);
        CHECK(st.v == NULL && st.a == NULL);
    }
    snn_step_end();
}

static void test_state_from_closed_nested_step(void)
{
    snn_neuron_config c = config_of(SNN_NEURON_LIF);
    snn_neuron_state st = {0};
    CHECK_OK(snn_step_begin());
    CHECK_OK(snn_step_begin());
    CHECK(snn_neuron_step(snn_full(SNN_SHAPE(2, 2), 0.9f, SNN_CPU), &c, NULL, &st, NULL) != NULL);
    CHECK(st.v && st.step_id == snn_step_id());
    snn_step_end(); /* the inner step took st.v with it */
    CHECK(!snn_step_is_open(st.step_id));
    /* another batch size, no explicit reset: the stale state counts as reset */
    snn_tensor *y = snn_neuron_step(snn_full(SNN_SHAPE(3, 2), 0.9f, SNN_CPU), &c, NULL, &st, NULL);
    CHECK(y != NULL && st.v && st.v->shape.dim[0] == 3);
    /* and from V = 0: H = 0.45, no spike */
    CHECK(y && y->data[0] == 0.0f && st.v->data[0] == 0.45f);
    snn_step_end();
}

static void test_multistep_is_stateless(void)
{
    snn_neuron_config c = config_of(SNN_NEURON_LIF);
    CHECK_OK(snn_step_begin());
    snn_tensor *x = snn_full(SNN_SHAPE(3, 2, 4), 0.8f, SNN_CPU);
    snn_tensor *a = snn_neuron_multistep(x, &c, NULL, NULL);
    snn_tensor *x5 = snn_full(SNN_SHAPE(3, 5, 4), 0.8f, SNN_CPU); /* another batch size */
    snn_tensor *b = snn_neuron_multistep(x5, &c, NULL, NULL);
    snn_tensor *a2 = snn_neuron_multistep(x, &c, NULL, NULL);
    CHECK(a && b && a2);
    if (a && b && a2) {
        CHECK(memcmp(a->data, a2->data, (size_t)a->numel * sizeof(float)) == 0);
        for (int t = 0; t < 3; t++) CHECK(b->data[t * 20] == a->data[t * 8]);
    }
    snn_step_end();
}

/* Empty planes (H = 0) still give a well-defined activity: zeros. */
static void test_empty_planes(void)
{
    snn_neuron_config c = config_of(SNN_NEURON_LIF);
    CHECK_OK(snn_step_begin());
    snn_tensor *act = NULL;
    snn_tensor *y = snn_neuron_multistep(snn_zeros(SNN_SHAPE(2, 3, 4, 0, 5), SNN_CPU), &c, NULL,
                                         &act);
    CHECK(y && act && act->numel == 24);
    for (int64_t i = 0; act && i < act->numel; i++) CHECK(act->data[i] == 0.0f);
    snn_neuron_state st = {0};
    y = snn_neuron_step(snn_zeros(SNN_SHAPE(3, 4, 0), SNN_CPU), &c, NULL, &st, &act);
    CHECK(y && act && act->numel == 12);
    for (int64_t i = 0; act && i < act->numel; i++) CHECK(act->data[i] == 0.0f);
    snn_step_end();
}

static void test_no_grad_updates_in_place(void)
{
    snn_neuron_config c = config_of(SNN_NEURON_STBIF);
    snn_neuron_state st = {0};
    CHECK_OK(snn_step_begin());
    snn_no_grad_begin();
    snn_tensor *x = snn_full(SNN_SHAPE(64), 0.3f, SNN_CPU);
    CHECK(snn_neuron_step(x, &c, NULL, &st, NULL) != NULL);
    snn_tensor *v = st.v, *a = st.a;
    for (int t = 0; t < 1000; t++) CHECK(snn_neuron_step(x, &c, NULL, &st, NULL) != NULL);
    CHECK(st.v == v && st.a == a); /* the same V and A tensors, overwritten */
    snn_no_grad_end();
    snn_step_end();
}

int main(void)
{
    snn_set_num_threads(2);
    RUN(test_single_step_equals_multistep);
    RUN(test_batch_change_without_reset_is_an_error);
    RUN(test_reset_restores_initial_state);
    RUN(test_state_from_closed_nested_step);
    RUN(test_multistep_is_stateless);
    RUN(test_no_grad_updates_in_place);
    RUN(test_empty_planes);
    return test_finish();
}
