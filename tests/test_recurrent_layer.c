/*
 * test_recurrent_layer.c - the recurrent layer module (nn/layer_recurrent.c): its parameter
 * "w_rec" (shape, initial range, trainable), its forward against snn_recurrent_multistep, the
 * bookkeeping that makes it a neuron layer (firing rate, last spikes, snn_model_neuron_layers),
 * module printing, a SynOps count of its recurrent product checked by hand, a checkpoint saved
 * and loaded through the generic parameter list (with an optimizer's state), a training step
 * that moves w_rec, and the constructor's errors.
 * Run: ctest -R recurrent_layer
 */
#define _POSIX_C_SOURCE 200809L /* fmemopen, mkdtemp */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "snn.h"
#include "test.h"

#define T 6
#define N 3
#define IN 5
#define F 9

/* x (T, N, IN) drawn once, the input of every net here */
static float x_host[T * N * IN];

/* input Linear(IN, F) -> recurrent layer (F, cfg): the shape of an RSNN's first layers */
static snn_module *net_new(const snn_neuron_config *cfg, uint64_t seed)
{
    snn_rng rng;
    snn_rng_seed(&rng, seed);
    snn_module *net = snn_sequential_new();
    if (snn_module_add(net, "input", snn_linear_new(IN, F, false, &rng)) != SNN_OK ||
        snn_module_add(net, "rec", snn_recurrent_layer_new(F, cfg, &rng)) != SNN_OK) {
        snn_module_free(net);
        return NULL;
    }
    return net;
}

static void test_parameter(void)
{
    snn_neuron_config cfg = snn_neuron_config_default(SNN_NEURON_LIF);
    snn_rng rng;
    snn_rng_seed(&rng, 3);
    snn_module *m = snn_recurrent_layer_new(F, &cfg, &rng);
    CHECK(m != NULL);
    if (!m) return;
    CHECK(m->n_params == 1 && strcmp(m->params[0].name, "w_rec") == 0 && m->params[0].trainable);
    snn_tensor *w = m->params[0].tensor;
    CHECK(w->shape.ndim == 2 && w->shape.dim[0] == F && w->shape.dim[1] == F);
    CHECK(w->requires_grad && w->device == SNN_CPU);
    const float bound = 1.0f / sqrtf((float)F);
    float lo = 1.0f, hi = -1.0f;
    for (int i = 0; i < F * F; i++) {
        lo = fminf(lo, w->data[i]);
        hi = fmaxf(hi, w->data[i]);
    }
    CHECK(lo >= -bound && hi <= bound);
    CHECK(hi - lo > bound); /* drawn over the range, not a constant */
    CHECK(snn_module_num_parameters(m) == F * F);

    /* printing names its kind and its parameter */
    char buf[1024] = {0};
    FILE *f = fmemopen(buf, sizeof buf - 1, "w");
    CHECK(f != NULL);
    if (f) {
        snn_module_print(m, f);
        fclose(f);
        CHECK(strstr(buf, "RecurrentNeuronLayer") != NULL);
        CHECK(strstr(buf, "w_rec[9, 9]") != NULL);
        CHECK(strstr(buf, "81 params") != NULL);
    }
    snn_module_free(m);
}

/* The module runs the op with its own w_rec, and keeps the spikes and activity as a neuron
 * layer: the firing rate reads them, the model's list of neuron layers holds it. */
static void test_forward_and_rates(void)
{
    snn_neuron_config cfg = snn_neuron_config_default(SNN_NEURON_LIF);
    snn_module *net = net_new(&cfg, 11);
    CHECK(net != NULL);
    if (!net) return;
    snn_module *rec = snn_module_child(net, "rec");
    CHECK_OK(snn_step_begin());
    snn_tensor *x = snn_from_host(SNN_SHAPE(T, N, IN), x_host, SNN_CPU);
    snn_tensor *s = snn_module_forward(net, x);
    CHECK(s != NULL);
    if (s) {
        CHECK(s->shape.ndim == 3 && s->shape.dim[0] == T && s->shape.dim[2] == F);
        snn_tensor *in = snn_module_forward(snn_module_child(net, "input"), x);
        snn_tensor *want = snn_recurrent_multistep(in, rec->params[0].tensor, &cfg, NULL);
        CHECK(want && test_same_bits(s->data, want->data, s->numel));
        double fired = 0.0;
        for (int64_t i = 0; i < s->numel; i++) fired += (double)s->data[i];
        CHECK(fired > 0.0 && fired < (double)s->numel);
        CHECK_CLOSE(snn_neuron_layer_firing_rate(rec), fired / (double)s->numel, 1e-7, 1e-6);
        CHECK(snn_neuron_layer_last_spikes(rec) == s);
        snn_module *layers[4];
        const char *names[4];
        CHECK(snn_model_neuron_layers(net, layers, names, 4) == 1);
        CHECK(layers[0] == rec && strcmp(names[0], "rec") == 0);
    }
    snn_step_end();
    CHECK(snn_neuron_layer_firing_rate(rec) == -1.0f); /* its step closed */
    snn_module_free(net);
}

/* SynOps: the recurrent product reads S[0..T-2], each spike fanned out to F neurons; the input
 * Linear's real-valued input is a MAC layer. */
static void test_synops(void)
{
    snn_neuron_config cfg = snn_neuron_config_default(SNN_NEURON_IF);
    snn_module *net = net_new(&cfg, 12);
    CHECK(net != NULL);
    if (!net) return;
    snn_synops *count = snn_synops_new(net);
    CHECK(count != NULL);
    double want_spikes = 0.0;
    CHECK_OK(snn_step_begin());
    snn_no_grad_begin();
    snn_tensor *s = snn_module_forward(net, snn_from_host(SNN_SHAPE(T, N, IN), x_host, SNN_CPU));
    snn_no_grad_end();
    CHECK(s != NULL);
    if (s)
        for (int64_t i = 0; i < (T - 1) * N * F; i++) /* S[0..T-2] */
            want_spikes += (double)s->data[i];
    snn_step_end();
    CHECK_OK(snn_synops_status(count));
    int n = 0;
    const snn_synops_layer *layers = snn_synops_layers(count, &n);
    CHECK(n == 2);
    if (n == 2) {
        const snn_synops_layer *in = &layers[0], *rec = &layers[1];
        CHECK(strcmp(in->name, "input") == 0 && strcmp(in->kind, "Linear") == 0 && !in->spikes);
        CHECK(strcmp(rec->name, "rec") == 0 && strcmp(rec->kind, "Recurrent") == 0);
        CHECK(rec->spikes && rec->binary && rec->forwards == 1 && rec->samples == N);
        CHECK(rec->steps == T && rec->in_channels == F && rec->out_channels == F);
        CHECK(want_spikes > 0.0);
        CHECK(rec->input_sum == want_spikes);
        CHECK(rec->inputs == (double)(T - 1) * N * F);
        CHECK(rec->ac == want_spikes * F && rec->mac == 0.0);
        CHECK(rec->dense_ops == (double)(T - 1) * N * F * F);
        CHECK(rec->ann_mac == (double)(T - 1) * N * F * F);
    }
    snn_synops_free(count);
    snn_module_free(net);
}

/* One training step of a net (input Linear -> recurrent layer): loss = sum(S R), backward,
 * one optimizer step. */
static void train_step(snn_module *net, snn_optimizer *opt, const float *r)
{
    CHECK_OK(snn_step_begin());
    snn_module_zero_grad(net);
    snn_tensor *s = snn_module_forward(net, snn_from_host(SNN_SHAPE(T, N, IN), x_host, SNN_CPU));
    CHECK(s != NULL);
    if (s) {
        snn_tensor *loss = snn_sum_all(snn_mul(s, snn_from_host(SNN_SHAPE(T, N, F), r, SNN_CPU)));
        CHECK_OK(snn_backward(loss));
        CHECK_OK(snn_optimizer_step(opt));
    }
    snn_step_end();
}

/* Checkpoint through the generic parameter list: a net trained one step, saved with its Adam
 * state, loaded into a net built from another seed: the same w_rec and optimizer state, so the
 * next step gives both the same bits. */
static void test_checkpoint_and_training(void)
{
    snn_neuron_config cfg = snn_neuron_config_default(SNN_NEURON_LIF);
    cfg.surrogate = snn_surrogate_default(SNN_SURROGATE_ATAN);
    static float r[T * N * F];
    snn_rng rng;
    snn_rng_seed(&rng, 99);
    for (int i = 0; i < T * N * F; i++) r[i] = snn_rng_normal(&rng);

    snn_module *a = net_new(&cfg, 21), *b = net_new(&cfg, 22);
    CHECK(a && b);
    if (!a || !b) {
        snn_module_free(a);
        snn_module_free(b);
        return;
    }
    snn_optimizer *opt_a = snn_adam_new(a, 1e-2f, 0.0f, false);
    snn_optimizer *opt_b = snn_adam_new(b, 1e-2f, 0.0f, false);
    snn_tensor *wa = snn_module_child(a, "rec")->params[0].tensor;
    snn_tensor *wb = snn_module_child(b, "rec")->params[0].tensor;
    float before[F * F];
    memcpy(before, wa->data, sizeof before);
    train_step(a, opt_a, r);
    CHECK(wa->grad != NULL);
    CHECK(!test_same_bits(before, wa->data, F * F)); /* the step moved w_rec */
    CHECK(!test_same_bits(wa->data, wb->data, F * F));

    char dir[] = "/tmp/snn_test_recurrent_XXXXXX", path[96];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/rec.safetensors", dir);
    CHECK_OK(snn_checkpoint_save(path, a, opt_a, NULL));
    CHECK_OK(snn_checkpoint_load(path, b, opt_b));
    CHECK(test_same_bits(wa->data, wb->data, F * F));
    /* the next step from the loaded state: the same bits on both */
    train_step(a, opt_a, r);
    train_step(b, opt_b, r);
    CHECK(test_same_bits(wa->data, wb->data, F * F));
    unlink(path);
    rmdir(dir);
    snn_optimizer_free(opt_a);
    snn_optimizer_free(opt_b);
    snn_module_free(a);
    snn_module_free(b);
}

static void test_constructor_errors(void)
{
    snn_neuron_config cfg = snn_neuron_config_default(SNN_NEURON_LIF);
    snn_rng rng;
    snn_rng_seed(&rng, 1);
    CHECK(!snn_recurrent_layer_new(0, &cfg, &rng));
    CHECK(snn_last_status() == SNN_ERR_ARGUMENT && strstr(snn_last_error(), "'features'"));
    CHECK(!snn_recurrent_layer_new(F, &cfg, NULL));
    CHECK(snn_last_status() == SNN_ERR_ARGUMENT && strstr(snn_last_error(), "'rng'"));
    CHECK(!snn_recurrent_layer_new(F, NULL, &rng));
    CHECK(snn_last_status() == SNN_ERR_ARGUMENT);
    snn_neuron_config plif = snn_neuron_config_default(SNN_NEURON_PLIF);
    CHECK(!snn_recurrent_layer_new(F, &plif, &rng));
    CHECK(snn_last_status() == SNN_ERR_ARGUMENT && strstr(snn_last_error(), "'cfg'") &&
          strstr(snn_last_error(), "plif"));
    /* a forward on a bad input names the op's argument */
    snn_module *m = snn_recurrent_layer_new(F, &cfg, &rng);
    CHECK(m != NULL);
    CHECK_OK(snn_step_begin());
    CHECK(!snn_module_forward(m, snn_zeros(SNN_SHAPE(T, N, F + 1), SNN_CPU)));
    CHECK(strstr(snn_last_error(), "'w_rec'") != NULL);
    snn_step_end();
    snn_module_free(m);
}

int main(void)
{
    snn_set_num_threads(2);
    snn_rng rng;
    snn_rng_seed(&rng, 5);
    for (int i = 0; i < T * N * IN; i++) x_host[i] = 1.5f * snn_rng_normal(&rng) + 0.5f;
    RUN(test_parameter);
    RUN(test_forward_and_rates);
    RUN(test_synops);
    RUN(test_checkpoint_and_training);
    RUN(test_constructor_errors);
    return test_finish();
}
