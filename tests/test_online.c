/*
 * test_online.c - training through time online (neurons/carry.c, nn/layer_neuron.c's carried
 * state, app/train_online.c):
 *   - the carrying op run over segments of T equals the multi-step op over all of T (spikes,
 *     activity, the state left behind), for every spiking kind; its consuming form is the same
 *     op with H over x;
 *   - its gradient is BPTT inside the segment from a constant state: the single-step op chained
 *     from a state that needs no gradient gives the same dx (and PLIF's dw);
 *   - bad states are refused, naming the argument;
 *   - a neuron layer with its state carried: two forwards continue each other, a reset starts
 *     over, and the batch size may change (behind a training-mode batch-norm the fusion rules
 *     run an IF / LIF one as snn_batchnorm_neuron_carry: tests/test_bn_neuron_carry.c);
 *   - the SLTT step: at T = 1 it is BPTT's step exactly (loss, logits, every gradient); in eval
 *     mode its logits and loss are those of the BPTT forward with the per-step loss; the model's
 *     T and its layers' mode are put back; SLTT-K with K = T is SLTT; it trains a small CNN.
 * Run: ctest -R online
 */
#include <math.h>
#include <string.h>

#include "app/train_online.h"
#include "kernels/neuron_kernels.h"
#include "param_diff.h"
#include "tensor/arena.h"
#include "test.h"

/* ALIF's kernels landed in the CPU table (they arrive with the kind's own tests) */
static bool alif_available(void)
{
    return snn_neuron_kernels_cpu.alif_forward && snn_neuron_kernels_cpu.alif_backward;
}

static snn_neuron_config config_of(snn_neuron_kind kind, snn_reset_mode reset)
{
    snn_neuron_config c = snn_neuron_config_default(kind);
    c.reset = reset;
    c.surrogate = snn_surrogate_default(SNN_SURROGATE_ATAN);
    c.levels = 8;
    c.symmetric = true;
    return c;
}

static bool has_a(snn_neuron_kind kind)
{
    return kind == SNN_NEURON_ALIF || kind == SNN_NEURON_STBIF;
}

/* A state of `n` elements at the kind's start: V_reset (theta/2 for ST-BIF), A = 0. */
static void reset_state(const snn_neuron_config *c, snn_tensor *v, snn_tensor *a)
{
    const float v0 = c->kind == SNN_NEURON_STBIF ? c->theta / 2.0f
                     : c->reset == SNN_RESET_SOFT ? 0.0f
                                                  : c->v_reset;
    CHECK_OK(snn_tensor_fill(v, v0));
    if (a) CHECK_OK(snn_tensor_fill(a, 0.0f));
}

/* Segments of 2 + 3 + 1 steps with the state carried == one multi-step run of 6. */
static void check_segments_equal_whole(snn_neuron_kind kind, snn_reset_mode reset)
{
    const int T = 6, N = 3, C = 2, P = 5, M = N * C * P;
    const int cuts[4] = {0, 2, 5, 6};
    snn_neuron_config c = config_of(kind, reset);
    snn_tensor *w = kind == SNN_NEURON_PLIF ? snn_plif_param_new(2.5f, SNN_CPU) : NULL;
    snn_tensor *v = snn_tensor_new(SNN_SHAPE(N, C, P), SNN_CPU);
    snn_tensor *a = has_a(kind) ? snn_tensor_new(SNN_SHAPE(N, C, P), SNN_CPU) : NULL;
    reset_state(&c, v, a);
    snn_rng rng;
    snn_rng_seed(&rng, 7 + (uint64_t)kind);
    CHECK_OK(snn_step_begin());
    snn_tensor *x = snn_empty(SNN_SHAPE(T, N, C, P), SNN_CPU);
    CHECK_OK(snn_tensor_normal_(x, &rng, 0.6f, 1.0f));
    snn_tensor *act = NULL;
    snn_tensor *whole = snn_neuron_multistep(x, &c, w, &act);
    CHECK(whole && act);
    int bad = 0;
    for (int s = 0; s < 3 && whole; s++) {
        const int t0 = cuts[s], steps = cuts[s + 1] - cuts[s];
        snn_tensor *xs = snn_from_host(SNN_SHAPE(steps, N, C, P), x->data + t0 * M, SNN_CPU);
        snn_tensor *as = NULL;
        snn_tensor *ys = snn_neuron_multistep_carry(xs, &c, w, v, a, &as);
        CHECK(ys && as);
        if (!ys || !as) break;
        for (int i = 0; i < steps * M; i++) bad += ys->data[i] != whole->data[t0 * M + i];
        for (int i = 0; i < steps * N * C; i++) bad += as->data[i] != act->data[t0 * N * C + i];
    }
    if (bad) fprintf(stderr, "  %s %s: %d values differ\n", snn_neuron_kind_name(kind),
                     reset == SNN_RESET_SOFT ? "soft" : "hard", bad);
    CHECK(bad == 0);
    /* the state left behind is the single-step API's after all 6 steps */
    snn_neuron_state st = {0};
    for (int t = 0; t < T; t++)
        CHECK(snn_neuron_step(snn_from_host(SNN_SHAPE(N, C, P), x->data + t * M, SNN_CPU), &c, w,
                              &st, NULL) != NULL);
    CHECK(st.v && memcmp(st.v->data, v->data, (size_t)M * sizeof(float)) == 0);
    if (a) CHECK(st.a && memcmp(st.a->data, a->data, (size_t)M * sizeof(float)) == 0);
    snn_step_end();
    snn_tensor_free(v);
    snn_tensor_free(a);
    snn_tensor_free(w);
}

static void test_segments_equal_whole_run(void)
{
    for (int kind = 0; kind < SNN_NEURON_COUNT; kind++) {
        if (snn_neuron_is_ann((snn_neuron_kind)kind)) continue;
        if (kind == SNN_NEURON_ALIF && !alif_available()) continue;
        check_segments_equal_whole((snn_neuron_kind)kind, SNN_RESET_HARD);
        check_segments_equal_whole((snn_neuron_kind)kind, SNN_RESET_SOFT);
    }
}

/* dx of a carried segment == dx of the single-step op chained from the same state, held
 * constant (a STEP copy that needs no gradient): BPTT inside the segment, nothing before. */
static void check_segment_gradient(snn_neuron_kind kind)
{
    const int T = 4, N = 2, F = 7, M = N * F;
    snn_neuron_config c = config_of(kind, SNN_RESET_HARD);
    snn_tensor *w = kind == SNN_NEURON_PLIF ? snn_plif_param_new(3.0f, SNN_CPU) : NULL;
    snn_tensor *v = snn_tensor_new(SNN_SHAPE(N, F), SNN_CPU);
    snn_tensor *a = has_a(kind) ? snn_tensor_new(SNN_SHAPE(N, F), SNN_CPU) : NULL;
    snn_rng rng;
    snn_rng_seed(&rng, 11 + (uint64_t)kind);
    CHECK_OK(snn_tensor_normal_(v, &rng, 0.2f, 0.4f)); /* a state mid-sequence */
    if (a) CHECK_OK(snn_tensor_fill(a, 0.5f)); /* ALIF: an adapted threshold */
    float x_host[4 * 2 * 7], coef_host[4 * 2 * 7], grad_x[2][4 * 2 * 7], grad_w[2] = {0, 0};
    for (int i = 0; i < T * M; i++) x_host[i] = 0.5f + snn_rng_normal(&rng);
    for (int i = 0; i < T * M; i++) coef_host[i] = snn_rng_normal(&rng);
    for (int way = 0; way < 2; way++) {
        CHECK_OK(snn_step_begin());
        if (w && w->grad) CHECK_OK(snn_tensor_fill(w->grad, 0.0f));
        snn_tensor *objective = NULL, *x = NULL, *xt[4] = {0};
        /* what enters: a STEP copy of the state, needing no gradient */
        snn_tensor *v_in = snn_step_tensor("test", v->shape, SNN_CPU);
        snn_tensor *a_in = a ? snn_step_tensor("test", a->shape, SNN_CPU) : NULL;
        CHECK_OK(snn_tensor_copy(v_in, v));
        if (a) CHECK_OK(snn_tensor_copy(a_in, a));
        if (way == 0) {
            x = snn_from_host(SNN_SHAPE(T, N, F), x_host, SNN_CPU);
            x->requires_grad = true;
            snn_tensor *y = snn_neuron_multistep_carry(x, &c, w, v_in, a_in, NULL);
            snn_tensor *coef = snn_from_host(SNN_SHAPE(T, N, F), coef_host, SNN_CPU);
            objective = y ? snn_sum_all(snn_mul(y, coef)) : NULL;
        } else {
            /* the single-step op chained T times from the same state */
            snn_neuron_state st = {.v = v_in, .a = a_in, .step_id = snn_step_id()};
            for (int t = 0; t < T; t++) {
                xt[t] = snn_from_host(SNN_SHAPE(N, F), x_host + t * M, SNN_CPU);
                xt[t]->requires_grad = true;
                snn_tensor *yt = snn_neuron_step(xt[t], &c, w, &st, NULL);
                snn_tensor *ct = snn_from_host(SNN_SHAPE(N, F), coef_host + t * M, SNN_CPU);
                snn_tensor *term = yt ? snn_sum_all(snn_mul(yt, ct)) : NULL;
                objective = t == 0 ? term : (term && objective ? snn_add(objective, term) : NULL);
            }
        }
        CHECK(objective != NULL);
        if (objective && snn_backward(objective) == SNN_OK) {
            for (int t = 0; t < T; t++)
                for (int i = 0; i < M; i++)
                    grad_x[way][t * M + i] = way == 0 ? x->grad->data[t * M + i]
                                                      : xt[t]->grad->data[i];
            if (w) grad_w[way] = w->grad->data[0];
        } else {
            CHECK(false);
        }
        snn_step_end();
    }
    double err = 0.0;
    for (int i = 0; i < T * M; i++) err = fmax(err, fabs((double)grad_x[0][i] - (double)grad_x[1][i]));
    if (err > 1e-6) fprintf(stderr, "  %s: max |dx diff| %g\n", snn_neuron_kind_name(kind), err);
    CHECK(err <= 1e-6);
    if (w) CHECK(fabsf(grad_w[0] - grad_w[1]) <= 1e-5f * (1.0f + fabsf(grad_w[1])));
    snn_tensor_free(v);
    snn_tensor_free(a);
    snn_tensor_free(w);
}

static void test_segment_gradient_is_bptt_from_a_constant_state(void)
{
    check_segment_gradient(SNN_NEURON_IF);
    check_segment_gradient(SNN_NEURON_LIF);
    check_segment_gradient(SNN_NEURON_PLIF);
    if (alif_available()) check_segment_gradient(SNN_NEURON_ALIF);
}

/* snn_neuron_multistep_carry_consume: the carry op's spikes, state and dx, with H written
 * over x (IF, LIF); for PLIF it is the carry op (H apart: its backward reads x). */
static void check_consume_is_the_carry_op(snn_neuron_kind kind)
{
    const int T = 3, N = 2, F = 5, n = T * N * F;
    const snn_neuron_config c = config_of(kind, SNN_RESET_HARD);
    snn_tensor *w = kind == SNN_NEURON_PLIF ? snn_plif_param_new(3.0f, SNN_CPU) : NULL;
    float x_host[3 * 2 * 5], spikes[2][3 * 2 * 5], state[2][2 * 5], dx[2][3 * 2 * 5];
    bool x_kept[2] = {true, true};
    snn_rng rng;
    snn_rng_seed(&rng, 21 + (uint64_t)kind);
    for (int i = 0; i < n; i++) x_host[i] = 0.6f + snn_rng_normal(&rng);
    for (int way = 0; way < 2; way++) {
        CHECK_OK(snn_step_begin());
        snn_tensor *v = snn_step_tensor("test", SNN_SHAPE(N, F), SNN_CPU);
        CHECK_OK(snn_tensor_fill(v, 0.1f));
        snn_tensor *x = snn_from_host(SNN_SHAPE(T, N, F), x_host, SNN_CPU);
        x->requires_grad = true;
        snn_tensor *y = way ? snn_neuron_multistep_carry_consume(x, &c, w, v, NULL, NULL)
                            : snn_neuron_multistep_carry(x, &c, w, v, NULL, NULL);
        CHECK(y && snn_backward(snn_sum_all(snn_mul(y, y))) == SNN_OK);
        if (y && x->grad) {
            memcpy(spikes[way], y->data, sizeof spikes[way]);
            memcpy(state[way], v->data, sizeof state[way]);
            memcpy(dx[way], x->grad->data, sizeof dx[way]);
            x_kept[way] = memcmp(x->data, x_host, sizeof x_host) == 0;
        }
        snn_step_end();
    }
    CHECK(memcmp(spikes[0], spikes[1], sizeof spikes[0]) == 0);
    CHECK(memcmp(state[0], state[1], sizeof state[0]) == 0);
    CHECK(memcmp(dx[0], dx[1], sizeof dx[0]) == 0);
    CHECK(x_kept[0] && x_kept[1] == (kind == SNN_NEURON_PLIF)); /* H over x: IF and LIF */
    snn_tensor_free(w);
}

static void test_consume_is_the_carry_op(void)
{
    check_consume_is_the_carry_op(SNN_NEURON_IF);
    check_consume_is_the_carry_op(SNN_NEURON_LIF);
    check_consume_is_the_carry_op(SNN_NEURON_PLIF);
}

/* bad states: named, with the shape expected */
static void test_bad_state_is_refused(void)
{
    snn_neuron_config c = config_of(SNN_NEURON_LIF, SNN_RESET_HARD);
    snn_tensor *v = snn_tensor_new(SNN_SHAPE(5), SNN_CPU), *a = snn_tensor_new(SNN_SHAPE(6), SNN_CPU);
    CHECK_OK(snn_step_begin());
    snn_tensor *x = snn_full(SNN_SHAPE(3, 2, 3), 0.5f, SNN_CPU);
    CHECK(snn_neuron_multistep_carry(x, &c, NULL, v, NULL, NULL) == NULL);
    CHECK(strstr(snn_last_error(), "'v_state'") && strstr(snn_last_error(), "expected 6"));
    CHECK(snn_neuron_multistep_carry(x, &c, NULL, NULL, NULL, NULL) == NULL);
    CHECK(strstr(snn_last_error(), "'v_state'") != NULL);
    CHECK(snn_neuron_multistep_carry(x, &c, NULL, a, a, NULL) == NULL); /* LIF has no A */
    CHECK(strstr(snn_last_error(), "'a_state'") != NULL);
    a->requires_grad = true;
    CHECK(snn_neuron_multistep_carry(x, &c, NULL, a, NULL, NULL) == NULL);
    CHECK(strstr(snn_last_error(), "requires_grad") != NULL);
    a->requires_grad = false;
    snn_neuron_config relu = snn_neuron_config_default(SNN_NEURON_RELU);
    CHECK(snn_neuron_multistep_carry(x, &relu, NULL, a, NULL, NULL) == NULL);
    CHECK(strstr(snn_last_error(), "no state") != NULL);
    snn_step_end();
    snn_tensor_free(v);
    snn_tensor_free(a);
}

/* A layer carrying its state: forwards of 2 then 3 steps == one of 5; a reset starts over; a
 * new batch size remakes the state. */
static void test_layer_carries_state(void)
{
    snn_neuron_config c = config_of(SNN_NEURON_LIF, SNN_RESET_SOFT);
    snn_module *layer = snn_neuron_layer_new(&c);
    snn_rng rng;
    snn_rng_seed(&rng, 3);
    float xs[5 * 4 * 6];
    for (int i = 0; i < 5 * 24; i++) xs[i] = 0.7f * snn_rng_normal(&rng) + 0.4f;
    CHECK_OK(snn_step_begin());
    snn_tensor *whole = snn_module_forward(layer, snn_from_host(SNN_SHAPE(5, 4, 6), xs, SNN_CPU));
    snn_neuron_layer_set_carry(layer, SNN_CARRY_CONSTANT);
    snn_tensor *first = snn_module_forward(layer, snn_from_host(SNN_SHAPE(2, 4, 6), xs, SNN_CPU));
    snn_tensor *second =
        snn_module_forward(layer, snn_from_host(SNN_SHAPE(3, 4, 6), xs + 2 * 24, SNN_CPU));
    CHECK(whole && first && second);
    if (whole && first && second) {
        CHECK(memcmp(first->data, whole->data, 2 * 24 * sizeof(float)) == 0);
        CHECK(memcmp(second->data, whole->data + 2 * 24, 3 * 24 * sizeof(float)) == 0);
    }
    snn_module_reset_state(layer);
    snn_tensor *again = snn_module_forward(layer, snn_from_host(SNN_SHAPE(2, 4, 6), xs, SNN_CPU));
    CHECK(again && memcmp(again->data, whole->data, 2 * 24 * sizeof(float)) == 0);
    /* another batch size: the state is made again, from V_reset */
    snn_tensor *other = snn_module_forward(layer, snn_from_host(SNN_SHAPE(1, 2, 6), xs, SNN_CPU));
    CHECK(other && memcmp(other->data, whole->data, 12 * sizeof(float)) == 0);
    snn_step_end();
    CHECK(snn_neuron_layers_set_carry(layer, SNN_CARRY_NONE) == 1);
    snn_module_free(layer);
}

/* A small CNN (8x8 images, 2 classes) and a batch whose class is which half is bright. */
static snn_module *small_cnn(int T, uint64_t seed)
{
    snn_model_config cfg = snn_model_config_default(SNN_MODEL_SPIKING_CNN);
    cfg.height = cfg.width = 8;
    cfg.classes = 2;
    cfg.width_base = 4;
    cfg.hidden = 16;
    cfg.time_steps = T;
    cfg.neuron.surrogate = snn_surrogate_default(SNN_SURROGATE_ATAN);
    snn_rng rng;
    snn_rng_seed(&rng, seed);
    return snn_model_new(&cfg, &rng);
}

static void make_batch(int N, float *images, float *labels, snn_rng *rng)
{
    for (int n = 0; n < N; n++) {
        labels[n] = (float)(n % 2);
        for (int i = 0; i < 64; i++) {
            const bool top = i < 32;
            images[n * 64 + i] = 0.3f * snn_rng_normal(rng) + ((n % 2) == top ? 1.0f : 0.0f);
        }
    }
}

/* At T = 1 there is no time to drop: the SLTT step is BPTT's step with the cross-entropy. */
static void test_sltt_at_one_step_is_bptt(void)
{
    const int N = 6;
    snn_module *bptt = small_cnn(1, 21), *sltt = small_cnn(1, 21);
    float images[6 * 64], labels[6];
    snn_rng rng;
    snn_rng_seed(&rng, 4);
    make_batch(N, images, labels, &rng);
    CHECK_OK(snn_step_begin());
    snn_tensor *x = snn_from_host(SNN_SHAPE(N, 1, 8, 8), images, SNN_CPU);
    snn_tensor *y = snn_from_host(SNN_SHAPE(N), labels, SNN_CPU);
    snn_module_zero_grad(bptt);
    snn_tensor *out = snn_module_forward(bptt, x);
    snn_tensor *loss = snn_cross_entropy(out, y);
    CHECK(loss && snn_backward(loss) == SNN_OK);
    snn_tensor *logits = NULL, *online_loss = NULL;
    const train_online_options o = {0};
    CHECK_OK(train_online_step(sltt, x, y, 0, &o, &logits, &online_loss));
    CHECK(logits && online_loss && loss);
    if (logits && online_loss && loss) {
        CHECK(fabsf(online_loss->data[0] - loss->data[0]) <= 1e-6f);
        for (int i = 0; i < N * 2; i++) CHECK(fabsf(logits->data[i] - out->data[i]) <= 1e-6f);
        const double diff = param_max_diff(sltt, bptt, true);
        if (diff > 1e-5) fprintf(stderr, "  max relative gradient difference %g\n", diff);
        CHECK(diff <= 1e-5);
    }
    snn_step_end();
    snn_module_free(bptt);
    snn_module_free(sltt);
}

/* In eval mode (running statistics, so that one step at a time sees what all T see) the SLTT
 * step's logits and loss are the BPTT forward's: the mean over t of o[t] and of CE(o[t], y).
 * The model's T and its layers' mode are put back; K = T is plain SLTT, gradients too. */
static void test_sltt_forward_is_the_whole_run(void)
{
    const int N = 4, T = 3;
    snn_module *model = small_cnn(T, 22), *twin = small_cnn(T, 22);
    snn_module_train(model, false);
    snn_module_train(twin, false);
    float images[4 * 64], labels[4];
    snn_rng rng;
    snn_rng_seed(&rng, 5);
    make_batch(N, images, labels, &rng);
    CHECK_OK(snn_step_begin());
    snn_tensor *x = snn_from_host(SNN_SHAPE(N, 1, 8, 8), images, SNN_CPU);
    snn_tensor *y = snn_from_host(SNN_SHAPE(N), labels, SNN_CPU);
    snn_no_grad_begin();
    snn_tensor *steps = snn_model_forward_steps(model, x); /* (T, N, 2) */
    snn_no_grad_end();
    CHECK(steps != NULL);
    snn_tensor *logits = NULL, *loss = NULL, *logits_k = NULL, *loss_k = NULL;
    const train_online_options all = {0}, k_is_t = {.backward_steps = T};
    CHECK_OK(train_online_step(model, x, y, 0, &all, &logits, &loss));
    CHECK_OK(train_online_step(twin, x, y, 0, &k_is_t, &logits_k, &loss_k));
    CHECK(snn_model_config_of(model)->time_steps == T);
    if (steps && logits && loss) {
        double mean_loss = 0.0;
        for (int t = 0; t < T; t++) {
            snn_tensor *ot = snn_from_host(SNN_SHAPE(N, 2), steps->data + t * N * 2, SNN_CPU);
            mean_loss += (double)snn_cross_entropy(ot, y)->data[0] / (double)T;
        }
        for (int i = 0; i < N * 2; i++) {
            float mean = 0.0f;
            for (int t = 0; t < T; t++) mean += steps->data[t * N * 2 + i] / (float)T;
            CHECK(fabsf(logits->data[i] - mean) <= 1e-5f * (1.0f + fabsf(mean)));
        }
        CHECK(fabs((double)loss->data[0] - mean_loss) <= 1e-5 * (1.0 + mean_loss));
        CHECK(param_max_diff(model, twin, true) == 0.0);
        /* each batch starts from V_reset: the same batch again gives the same logits */
        snn_tensor *logits2 = NULL, *loss2 = NULL;
        CHECK_OK(train_online_step(model, x, y, 1, &all, &logits2, &loss2));
        CHECK(logits2 && memcmp(logits2->data, logits->data, (size_t)N * 2 * sizeof(float)) == 0);
    }
    /* the layers no longer carry: a plain forward starts from V_reset, as before the step */
    snn_no_grad_begin();
    snn_tensor *again = snn_model_forward_steps(model, x);
    snn_no_grad_end();
    CHECK(again && steps && memcmp(again->data, steps->data, (size_t)steps->numel * 4) == 0);
    snn_step_end();
    snn_module_free(model);
    snn_module_free(twin);
}

/* In training mode, SLTT-1 runs T - 1 of its steps without a tape (their conv outputs given
 * back after the batch-norm, their spikes kept as bits, their state advanced in forward) and
 * SLTT all T with one (the state advanced in backward): the same forward values, so the same
 * logits, loss and running statistics, bit for bit; a CNN and a ResNet-18 (its blocks' fused
 * tails, the downsample's conv -> batch-norm). */
static void check_forward_only_steps_change_nothing(snn_model_kind kind)
{
    const int N = 4, T = 3;
    snn_model_config cfg = snn_model_config_default(kind);
    cfg.height = cfg.width = 8, cfg.in_channels = 1, cfg.classes = 2, cfg.width_base = 4;
    cfg.hidden = 16;
    cfg.time_steps = T;
    snn_module *model[2];
    for (int i = 0; i < 2; i++) {
        snn_rng rng;
        snn_rng_seed(&rng, 24);
        model[i] = snn_model_new(&cfg, &rng);
    }
    float images[4 * 64], labels[4], logits[2][4 * 2], loss[2] = {0.0f, 1.0f};
    snn_rng rng;
    snn_rng_seed(&rng, 7);
    make_batch(N, images, labels, &rng);
    for (int i = 0; i < 2; i++) {
        CHECK_OK(snn_step_begin());
        const train_online_options o = {.backward_steps = i ? 1 : 0, .seed = 3};
        snn_tensor *lg = NULL, *ls = NULL;
        CHECK_OK(train_online_step(model[i], snn_from_host(SNN_SHAPE(N, 1, 8, 8), images,
                                                           SNN_CPU),
                                   snn_from_host(SNN_SHAPE(N), labels, SNN_CPU), 0, &o, &lg, &ls));
        if (lg && ls) memcpy(logits[i], lg->data, sizeof logits[i]), loss[i] = ls->data[0];
        snn_step_end();
    }
    CHECK(memcmp(logits[0], logits[1], sizeof logits[0]) == 0 && loss[0] == loss[1]);
    CHECK(param_max_diff(model[0], model[1], false) == 0.0); /* the buffers: running stats */
    snn_module_free(model[0]);
    snn_module_free(model[1]);
}

static void test_forward_only_steps_change_nothing(void)
{
    check_forward_only_steps_change_nothing(SNN_MODEL_SPIKING_CNN);
    check_forward_only_steps_change_nothing(SNN_MODEL_RESNET18);
}

/* SLTT-2 and OTTT-2 train: 60 Adam steps on the bright-half task take the loss well down. */
static void check_online_trains(bool traces)
{
    const int N = 16, T = 4;
    snn_module *model = small_cnn(T, 23);
    snn_optimizer *opt = snn_adam_new(model, 1e-2f, 0.0f, false);
    float images[16 * 64], labels[16], first = 0.0f, last = 0.0f;
    snn_rng rng;
    snn_rng_seed(&rng, 6);
    const train_online_options o = {.backward_steps = 2, .seed = 9, .traces = traces};
    for (int step = 0; step < 60; step++) {
        make_batch(N, images, labels, &rng);
        CHECK_OK(snn_step_begin());
        snn_tensor *logits = NULL, *loss = NULL;
        CHECK_OK(train_online_step(model, snn_from_host(SNN_SHAPE(N, 1, 8, 8), images, SNN_CPU),
                                   snn_from_host(SNN_SHAPE(N), labels, SNN_CPU), step, &o,
                                   &logits, &loss));
        if (loss) {
            if (step < 5) first += loss->data[0] / 5.0f;
            if (step >= 55) last += loss->data[0] / 5.0f;
        }
        CHECK_OK(snn_optimizer_step(opt));
        snn_step_end();
    }
    fprintf(stderr, "  %s-2 of 4: loss %.3f over the first 5 steps, %.3f over the last 5\n",
            traces ? "OTTT" : "SLTT", (double)first, (double)last);
    CHECK(last < 0.5f * first && last < 0.3f);
    snn_optimizer_free(opt);
    snn_module_free(model);
}

static void test_online_trains(void)
{
    check_online_trains(false);
    check_online_trains(true);
}

/* The traced ops (OTTT): the output and dX of the plain op on x, dW and db of the plain op
 * on the trace, for the same dY = R (L = sum(Y R)); a trace of another shape is refused, named. */
static void check_traced_op(bool conv)
{
    const snn_shape xs = conv ? SNN_SHAPE(1, 2, 3, 5, 5) : SNN_SHAPE(1, 3, 7);
    const snn_shape ws = conv ? SNN_SHAPE(4, 3, 3, 3) : SNN_SHAPE(5, 7);
    const snn_shape bs = SNN_SHAPE(conv ? 4 : 5);
    enum { Y, DX, DW, DB, OUTS };
    float got[3][OUTS][200]; /* way 0 traced; 1 plain on x; 2 plain on the trace */
    memset(got, 0, sizeof got);
    for (int way = 0; way < 3; way++) {
        CHECK_OK(snn_step_begin());
        snn_rng rng;
        snn_rng_seed(&rng, 31);
        snn_tensor *x = snn_step_tensor("test", xs, SNN_CPU), *a = snn_step_tensor("test", xs, SNN_CPU);
        snn_tensor *w = snn_step_tensor("test", ws, SNN_CPU), *b = snn_step_tensor("test", bs, SNN_CPU);
        CHECK_OK(snn_tensor_normal_(a, &rng, 0.5f, 1.0f));
        CHECK_OK(snn_tensor_normal_(w, &rng, 0.0f, 0.5f));
        CHECK_OK(snn_tensor_normal_(b, &rng, 0.0f, 0.5f));
        for (int64_t e = 0; e < x->numel; e++) x->data[e] = (float)(e % 3 == 0); /* spikes */
        snn_tensor *in = way == 2 ? a : x;
        in->requires_grad = w->requires_grad = b->requires_grad = true;
        snn_tensor *y = way == 0 ? (conv ? snn_conv2d_traced(x, a, w, b, 1, 1, false)
                                         : snn_linear_traced(x, a, w, b))
                                 : (conv ? snn_conv2d(in, w, b, 1, 1) : snn_linear(in, w, b));
        snn_tensor *r = y ? snn_step_tensor("test", y->shape, SNN_CPU) : NULL;
        if (r) CHECK_OK(snn_tensor_normal_(r, &rng, 0.0f, 1.0f));
        CHECK(y && r && y->numel <= 200 && snn_backward(snn_sum_all(snn_mul(y, r))) == SNN_OK);
        if (y && in->grad && w->grad && b->grad) {
            memcpy(got[way][Y], y->data, (size_t)y->numel * sizeof(float));
            memcpy(got[way][DX], in->grad->data, (size_t)in->numel * sizeof(float));
            memcpy(got[way][DW], w->grad->data, (size_t)w->numel * sizeof(float));
            memcpy(got[way][DB], b->grad->data, (size_t)b->numel * sizeof(float));
        }
        if (way == 0) { /* a trace of another shape */
            snn_tensor *short_trace = snn_step_tensor("test", bs, SNN_CPU);
            CHECK((conv ? snn_conv2d_traced(x, short_trace, w, b, 1, 1, false)
                        : snn_linear_traced(x, short_trace, w, b)) == NULL);
            CHECK(strstr(snn_last_error(), "'trace'") != NULL);
            snn_clear_error();
        }
        snn_step_end();
    }
    CHECK(memcmp(got[0][Y], got[1][Y], sizeof got[0][Y]) == 0);
    CHECK(memcmp(got[0][DX], got[1][DX], sizeof got[0][DX]) == 0);
    CHECK(memcmp(got[0][DW], got[2][DW], sizeof got[0][DW]) == 0);
    CHECK(memcmp(got[0][DB], got[2][DB], sizeof got[0][DB]) == 0);
    CHECK(memcmp(got[0][DW], got[1][DW], sizeof got[0][DW]) != 0); /* the trace mattered */
}

static void test_traced_ops(void)
{
    check_traced_op(true);
    check_traced_op(false);
}

/* OTTT: at T = 1 the trace is the input itself, so its step is SLTT's, every gradient equal;
 * at T = 3 the traces carry the steps before, and the gradients differ; the layers' traces are
 * off again after the step. */
static void test_ottt_against_sltt(void)
{
    for (int T = 1; T <= 3; T += 2) {
        snn_module *sltt = small_cnn(T, 25), *ottt = small_cnn(T, 25);
        float images[4 * 64], labels[4];
        snn_rng rng;
        snn_rng_seed(&rng, 8);
        make_batch(4, images, labels, &rng);
        for (int way = 0; way < 2; way++) {
            CHECK_OK(snn_step_begin());
            const train_online_options o = {.seed = 1, .traces = way == 1};
            snn_tensor *logits = NULL, *loss = NULL;
            CHECK_OK(train_online_step(way ? ottt : sltt,
                                       snn_from_host(SNN_SHAPE(4, 1, 8, 8), images, SNN_CPU),
                                       snn_from_host(SNN_SHAPE(4), labels, SNN_CPU), 0, &o,
                                       &logits, &loss));
            snn_step_end();
        }
        const double diff = param_max_diff(sltt, ottt, true);
        if (T == 1) CHECK(diff == 0.0);
        else CHECK(diff > 1e-3);
        /* traces off again: a forward over all T steps runs (a traced layer refuses T > 1) */
        CHECK_OK(snn_step_begin());
        CHECK(snn_module_forward(ottt, snn_from_host(SNN_SHAPE(4, 1, 8, 8), images, SNN_CPU)));
        snn_step_end();
        snn_module_free(sltt);
        snn_module_free(ottt);
    }
}

/* A model with dropout shares one mask over all T steps; one-step forwards cannot: refused. */
static void test_dropout_is_refused(void)
{
    snn_model_config cfg = snn_model_config_default(SNN_MODEL_SPIKING_CNN);
    cfg.height = cfg.width = 8;
    cfg.classes = 2;
    cfg.width_base = 4;
    cfg.hidden = 16;
    cfg.dropout = 0.3f;
    snn_rng rng;
    snn_rng_seed(&rng, 24);
    snn_module *m = snn_model_new(&cfg, &rng);
    CHECK(train_online_check("snn-train", "ottt", m) == SNN_ERR_ARGUMENT);
    CHECK(strstr(snn_last_error(), "--train-mode ottt: expected --dropout 0") != NULL);
    snn_module_free(m);
    snn_module *plain = small_cnn(3, 25);
    CHECK(train_online_check("snn-train", "sltt", plain) == SNN_OK);
    snn_module_free(plain);
}

int main(void)
{
    snn_set_num_threads(2);
    RUN(test_segments_equal_whole_run);
    RUN(test_segment_gradient_is_bptt_from_a_constant_state);
    RUN(test_consume_is_the_carry_op);
    RUN(test_forward_only_steps_change_nothing);
    RUN(test_bad_state_is_refused);
    RUN(test_layer_carries_state);
    RUN(test_sltt_at_one_step_is_bptt);
    RUN(test_sltt_forward_is_the_whole_run);
    RUN(test_online_trains);
    RUN(test_traced_ops);
    RUN(test_ottt_against_sltt);
    RUN(test_dropout_is_refused);
    return test_finish();
}
