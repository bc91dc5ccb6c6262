/*
 * test_ema.c - the weights' moving average (nn/ema.c) and the lerp kernel it runs on:
 *   - three updates against values worked out by hand, through TensorFlow's warm-up
 *     d = min(decay, (1 + step) / (10 + step)) and past it, on every parameter AND buffer;
 *   - a tensor that stops changing keeps its average bit for bit (the lerp form);
 *   - the averaged model is a faithful copy: right after snn_ema_new it computes the model's
 *     logits bit for bit;
 *   - bad arguments (a decay outside (0, 1), a module that is not a model, step < 1, a model
 *     that does not match) are refused with a message and change nothing;
 *   - checkpoints: the average saved under "ema." names beside the model and optimizer,
 *     restored exactly, loaded alone into a model (what snn-eval does), and a resume that
 *     forgets it refused;
 *   - every allocation failure of snn_ema_new leaks nothing; no byte is held after free.
 * Run: ctest --test-dir build -R '^ema$'   (or build/bin/test_ema)
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "snn.h"
#include "tensor/error.h"
#include "kernels/kernels.h"
#include "test.h"

/* A small spiking CNN: 28x28 input, 2 and 4 channels, 8 hidden units, T = 2. */
static snn_module *tiny_model(uint64_t seed)
{
    snn_model_config c = snn_model_config_default(SNN_MODEL_SPIKING_CNN);
    c.width_base = 2;
    c.hidden = 8;
    c.time_steps = 2;
    snn_rng rng;
    snn_rng_seed(&rng, seed);
    snn_module *m = snn_model_new(&c, &rng);
    SNN_ASSERT(m);
    return m;
}

/* Sets every element of every parameter and buffer of `m` to `value`. */
static void fill_all(snn_module *m, float value)
{
    snn_param_list list;
    CHECK_OK(snn_module_parameters(m, &list));
    for (int i = 0; i < list.count; i++) CHECK_OK(snn_tensor_fill(list.items[i].tensor, value));
    snn_param_list_free(&list);
}

/* Whether every element of every tensor of `m` is within 1e-6 relative of `want`. */
static bool all_close(snn_module *m, double want)
{
    snn_param_list list;
    CHECK_OK(snn_module_parameters(m, &list));
    bool ok = list.count > 0;
    for (int i = 0; i < list.count; i++) {
        const snn_tensor *t = list.items[i].tensor;
        for (int64_t j = 0; j < t->numel; j++)
            if (!(fabs((double)t->data[j] - want) <= 1e-6 * fabs(want))) {
                if (ok)
                    fprintf(stderr, "  %s[%lld] = %.9g, want %.9g\n", list.items[i].name,
                            (long long)j, (double)t->data[j], want);
                ok = false;
            }
    }
    snn_param_list_free(&list);
    return ok;
}

/* Whether two models hold the same tensors bit for bit. */
static bool same_tensors(snn_module *a, snn_module *b)
{
    snn_param_list la, lb;
    CHECK_OK(snn_module_parameters(a, &la));
    CHECK_OK(snn_module_parameters(b, &lb));
    bool same = la.count == lb.count && la.count > 0;
    for (int i = 0; same && i < la.count; i++)
        same = la.items[i].tensor->numel == lb.items[i].tensor->numel &&
               memcmp(la.items[i].tensor->data, lb.items[i].tensor->data,
                      (size_t)la.items[i].tensor->numel * sizeof(float)) == 0;
    snn_param_list_free(&la);
    snn_param_list_free(&lb);
    return same;
}

/* The kernel alone: y += w (x - y), by hand, and y == x left exact. */
static void test_lerp_kernel(void)
{
    const snn_kernels *k = snn_kernels_for(SNN_CPU);
    float y[4] = {1.0f, -2.0f, 0.1f, 3.0f};
    const float x[4] = {3.0f, 2.0f, 0.1f, -1.0f};
    k->lerp(y, x, 0.25f, 4);
    /* 1 + 0.25 * 2 = 1.5; -2 + 0.25 * 4 = -1; 0.1 stays 0.1 exactly; 3 + 0.25 * -4 = 2 */
    CHECK(y[0] == 1.5f && y[1] == -1.0f && y[2] == 0.1f && y[3] == 2.0f);
}

/*
 * Three updates by hand. The model's every tensor is 0 when the average starts (so the average
 * starts at 0), then 1, 2 and 4 after optimizer steps 1, 2 and 3; decay 0.3:
 *   step 1: d = min(0.3, 2/11) = 2/11 (warm-up)   s = 2/11 * 0    + 9/11 * 1 = 0.818181818...
 *   step 2: d = min(0.3, 3/12) = 0.25 (warm-up)   s = 0.25 * s1   + 0.75 * 2 = 1.704545454...
 *   step 3: d = min(0.3, 4/13) = 0.3  (decay)     s = 0.3  * s2   + 0.7  * 4 = 3.311363636...
 * Every parameter and buffer (batch-norm running mean and variance) must hold s.
 */
static void test_three_updates_by_hand(void)
{
    snn_module *net = tiny_model(1);
    fill_all(net, 0.0f);
    snn_ema *ema = snn_ema_new(net, 0.3f);
    CHECK(ema != NULL);
    if (!ema) {
        snn_module_free(net);
        return;
    }
    CHECK(snn_ema_decay(ema) == 0.3f);
    CHECK(fabsf(snn_ema_decay_at(ema, 1) - 2.0f / 11.0f) < 1e-7f);
    CHECK(snn_ema_decay_at(ema, 2) == 0.25f);
    CHECK(snn_ema_decay_at(ema, 3) == 0.3f);
    CHECK(snn_ema_decay_at(ema, 1000000) == 0.3f);
    const double s1 = 9.0 / 11.0, s2 = 0.25 * s1 + 0.75 * 2.0, s3 = 0.3 * s2 + 0.7 * 4.0;
    const float w[3] = {1.0f, 2.0f, 4.0f};
    const double want[3] = {s1, s2, s3};
    for (int step = 1; step <= 3; step++) {
        fill_all(net, w[step - 1]);
        CHECK_OK(snn_ema_update(ema, net, step));
        CHECK(all_close(snn_ema_model(ema), want[step - 1]));
        CHECK(all_close(net, w[step - 1])); /* the model itself is not touched */
    }
    /* the buffers are in the average too: state = every parameter and buffer, "ema." named */
    snn_param_list params, state;
    CHECK_OK(snn_module_parameters(net, &params));
    CHECK_OK(snn_ema_state(ema, &state));
    CHECK(state.count == params.count);
    int buffers = 0;
    for (int i = 0; i < state.count && i < params.count; i++) {
        char want_name[160];
        snprintf(want_name, sizeof want_name, "ema.%s", params.items[i].name);
        CHECK(strcmp(state.items[i].name, want_name) == 0);
        buffers += strstr(params.items[i].name, "running_") != NULL;
    }
    CHECK(buffers == 4); /* bn1 and bn2: running_mean, running_var */
    snn_param_list_free(&params);
    snn_param_list_free(&state);
    snn_ema_free(ema);
    snn_module_free(net);
}

/* A model that does not change leaves its average bit-identical (s += (1 - d)(w - s) with
 * w == s adds exactly 0), however many updates run. */
static void test_fixed_point_is_exact(void)
{
    snn_module *net = tiny_model(2);
    snn_ema *ema = snn_ema_new(net, 0.999f);
    CHECK(ema != NULL);
    if (!ema) {
        snn_module_free(net);
        return;
    }
    for (int step = 1; step <= 50; step++) CHECK_OK(snn_ema_update(ema, net, step));
    CHECK(same_tensors(net, snn_ema_model(ema)));
    snn_ema_free(ema);
    snn_module_free(net);
}

/* Right after snn_ema_new the averaged model is the model: same logits, bit for bit. */
static void test_average_model_is_faithful(void)
{
    snn_module *net = tiny_model(3);
    snn_ema *ema = snn_ema_new(net, 0.99f);
    CHECK(ema != NULL);
    if (!ema) {
        snn_module_free(net);
        return;
    }
    CHECK(snn_model_config_of(snn_ema_model(ema)) != NULL);
    CHECK(!snn_ema_model(ema)->training);
    float image[2 * 28 * 28];
    for (int i = 0; i < 2 * 28 * 28; i++) image[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
    snn_module_train(net, false);
    snn_no_grad_begin();
    snn_step_begin();
    snn_tensor *x = snn_from_host(SNN_SHAPE(2, 1, 28, 28), image, SNN_CPU);
    snn_tensor *a = x ? snn_module_forward(net, x) : NULL;
    snn_tensor *b = x ? snn_module_forward(snn_ema_model(ema), x) : NULL;
    CHECK(a && b);
    if (a && b)
        CHECK(a->numel == 20 && memcmp(a->data, b->data, (size_t)a->numel * sizeof(float)) == 0);
    snn_step_end();
    snn_no_grad_end();
    snn_ema_free(ema);
    snn_module_free(net);
}

static void test_bad_arguments(void)
{
    snn_module *net = tiny_model(4);
    const float bad[5] = {0.0f, 1.0f, -0.5f, 1.5f, NAN};
    for (int i = 0; i < 5; i++) {
        CHECK(snn_ema_new(net, bad[i]) == NULL);
        CHECK(snn_last_status() == SNN_ERR_ARGUMENT);
        CHECK(strstr(snn_last_error(), "snn_ema_new: bad argument 'decay' (expected 0 < decay < 1") != NULL);
    }
    CHECK(snn_ema_new(net, 1.0f) == NULL && strstr(snn_last_error(), "got 1)") != NULL);
    CHECK(snn_ema_new(NULL, 0.9f) == NULL && snn_last_status() == SNN_ERR_ARGUMENT);
    /* a module that is not a model: no configuration to build the average from */
    snn_module *seq = snn_sequential_new();
    CHECK(snn_ema_new(seq, 0.9f) == NULL && strstr(snn_last_error(), "kind 'Sequential'") != NULL);
    snn_module_free(seq);

    snn_ema *ema = snn_ema_new(net, 0.9f);
    CHECK(ema != NULL);
    if (ema) {
        CHECK(snn_ema_update(ema, net, 0) == SNN_ERR_ARGUMENT);
        CHECK(strstr(snn_last_error(), "bad argument 'step'") != NULL);
        CHECK(snn_ema_update(NULL, net, 1) == SNN_ERR_ARGUMENT);
        CHECK(snn_ema_update(ema, NULL, 1) == SNN_ERR_ARGUMENT);
        /* another model: refused, and the average does not move */
        snn_model_config c = *snn_model_config_of(net);
        c.hidden = 16;
        snn_rng rng;
        snn_rng_seed(&rng, 9);
        snn_module *other = snn_model_new(&c, &rng);
        CHECK(other != NULL);
        CHECK(snn_ema_update(ema, other, 1) == SNN_ERR_STATE);
        CHECK(strstr(snn_last_error(), "snn_ema_update") != NULL);
        CHECK(same_tensors(net, snn_ema_model(ema)));
        snn_module_free(other);
    }
    CHECK(snn_ema_model(NULL) == NULL && isnan(snn_ema_decay(NULL)));
    snn_param_list none;
    CHECK(snn_ema_state(NULL, &none) == SNN_ERR_ARGUMENT && none.count == 0);
    snn_ema_free(ema);
    snn_ema_free(NULL);
    snn_module_free(net);
}

/* The average in a checkpoint: saved beside the model and the optimizer, restored exactly into
 * a fresh run; loaded alone into a model; and required when resuming with an optimizer. */
static void test_checkpoint(void)
{
    char path[64];
    snprintf(path, sizeof path, "/tmp/snn_test_ema_%ld.safetensors", (long)getpid());
    snn_module *net = tiny_model(5);
    snn_optimizer *opt = snn_adam_new(net, 1e-3f, 0.0f, false);
    snn_ema *ema = snn_ema_new(net, 0.9f);
    CHECK(opt && ema);
    if (!opt || !ema) {
        snn_ema_free(ema);
        snn_optimizer_free(opt);
        snn_module_free(net);
        return;
    }
    for (int step = 1; step <= 3; step++) {
        fill_all(net, (float)step * 0.5f);
        CHECK_OK(snn_ema_update(ema, net, step));
    }
    snn_param_list state;
    CHECK_OK(snn_ema_state(ema, &state));
    CHECK_OK(snn_checkpoint_save_extra(path, net, opt, &state, NULL));
    snn_param_list_free(&state);

    /* a fresh model, optimizer and average get everything back bit for bit */
    snn_module *net2 = tiny_model(6);
    snn_optimizer *opt2 = snn_adam_new(net2, 1e-3f, 0.0f, false);
    snn_ema *ema2 = snn_ema_new(net2, 0.9f);
    CHECK(opt2 && ema2);
    if (opt2 && ema2) {
        /* resuming without the average is refused: the file holds tensors not asked for */
        CHECK(snn_checkpoint_load(path, net2, opt2) == SNN_ERR_FORMAT);
        CHECK(strstr(snn_last_error(), "ema.") != NULL);
        CHECK_OK(snn_ema_state(ema2, &state));
        CHECK_OK(snn_checkpoint_load_extra(path, net2, opt2, &state));
        snn_param_list_free(&state);
        CHECK(same_tensors(net, net2));
        CHECK(same_tensors(snn_ema_model(ema), snn_ema_model(ema2)));
        CHECK(!same_tensors(net2, snn_ema_model(ema2)));
    }
    snn_ema_free(ema2);
    snn_optimizer_free(opt2);
    snn_module_free(net2);

    /* the averaged weights alone, into a plain model (snn-eval's way) */
    snn_module *plain = snn_checkpoint_load_model(path, SNN_CPU, NULL);
    CHECK(plain != NULL);
    if (plain) {
        CHECK(same_tensors(plain, net));
        CHECK_OK(snn_checkpoint_load_prefixed(path, plain, SNN_EMA_PREFIX));
        CHECK(same_tensors(plain, snn_ema_model(ema)));
        CHECK(snn_checkpoint_load_prefixed(path, plain, "swa.") == SNN_ERR_FORMAT);
        CHECK(strstr(snn_last_error(), "no tensor 'swa.") != NULL);
    }
    snn_module_free(plain);
    snn_ema_free(ema);
    snn_optimizer_free(opt);
    snn_module_free(net);
    unlink(path);
}

/* Every allocation of snn_ema_new can fail: NULL, SNN_ERR_MEMORY, nothing leaked; and a freed
 * average holds no byte. */
static void test_memory(void)
{
    snn_module *net = tiny_model(7);
    const size_t before = snn_live_bytes(SNN_CPU);
    int failures = 0;
    for (uint64_t n = 1; n < 400; n++) {
        snn_alloc_fail_after(n);
        snn_ema *ema = snn_ema_new(net, 0.9f);
        snn_alloc_fail_after(0);
        if (ema) {
            snn_ema_free(ema);
            break;
        }
        failures++;
        CHECK(snn_last_status() == SNN_ERR_MEMORY);
        CHECK(snn_live_bytes(SNN_CPU) == before);
    }
    CHECK(failures >= 5);
    snn_ema *ema = snn_ema_new(net, 0.9f);
    CHECK(ema != NULL && snn_live_bytes(SNN_CPU) > before);
    CHECK_OK(snn_ema_update(ema, net, 1));
    snn_ema_free(ema);
    CHECK(snn_live_bytes(SNN_CPU) == before);
    snn_module_free(net);
}

int main(void)
{
    RUN(test_lerp_kernel);
    RUN(test_three_updates_by_hand);
    RUN(test_fixed_point_is_exact);
    RUN(test_average_model_is_faithful);
    RUN(test_bad_arguments);
    RUN(test_checkpoint);
    RUN(test_memory);
    return test_finish();
}
