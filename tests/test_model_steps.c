/*
 * test_model_steps.c - snn_model_forward_steps (nn/model.c): a model's output at every time
 * step, (T, N, classes), what per-step losses such as TET (nn/loss_tet.c) take.
 *
 *   - the mean over T of the per-step outputs equals snn_module_forward's logits BIT FOR BIT, in
 *     training and in eval mode, for the spiking CNN, a small ResNet-18, the DVS net on event
 *     frames, a Poisson-encoded CNN and a CNN with dropout (for these two the model's random
 *     stream is put back between the two forwards, which must advance it alike);
 *   - a network converted from a QANN (first-step encoding): the SUM over T is its forward;
 *   - errors: a module that is not a model, an input of the wrong shape, a NULL input.
 * Run: ctest --test-dir build -R model_steps
 */
#include <string.h>

#include "ann2snn_models.h"
#include "snn.h"
#include "test.h"

/* Random host input of `shape` in [0, hi) (images, event counts). */
static float *random_host(snn_shape shape, uint64_t seed, float hi)
{
    int64_t n = 1;
    for (int d = 0; d < shape.ndim; d++) n *= shape.dim[d];
    float *x = malloc((size_t)n * sizeof *x);
    snn_rng rng;
    snn_rng_seed(&rng, seed);
    for (int64_t i = 0; x && i < n; i++) x[i] = hi * snn_rng_uniform(&rng);
    return x;
}

/* The readout of m's per-step outputs (the mean over T; the sum when `sum`) against m's forward
 * on the same input, in training or eval mode. */
static void check_steps(const char *name, snn_module *m, snn_shape shape, const float *host,
                        bool training, bool sum)
{
    const snn_model_config *c = snn_model_config_of(m);
    snn_module_train(m, training);
    const uint64_t state = snn_model_rng_state(m);
    snn_step_begin();
    snn_tensor *x = snn_from_host(shape, host, SNN_CPU);
    snn_tensor *logits = snn_module_forward(m, x);
    const uint64_t after_forward = snn_model_rng_state(m);
    snn_model_set_rng_state(m, state); /* the same Poisson spikes and dropout masks again */
    snn_tensor *steps = snn_model_forward_steps(m, x);
    CHECK(logits && steps);
    if (!logits || !steps) {
        fprintf(stderr, "  %s: %s\n", name, snn_last_error());
        snn_step_end();
        return;
    }
    CHECK(snn_model_rng_state(m) == after_forward);
    const int64_t N = logits->shape.dim[0], K = logits->shape.dim[1];
    CHECK(steps->shape.ndim == 3 && steps->shape.dim[0] == c->time_steps &&
          steps->shape.dim[1] == N && steps->shape.dim[2] == K);
    snn_tensor *readout = sum ? snn_sum(steps, 0, false) : snn_mean(steps, 0, false);
    const bool same = readout && readout->numel == logits->numel &&
                      memcmp(readout->data, logits->data, (size_t)logits->numel * sizeof(float)) == 0;
    if (!same) fprintf(stderr, "  %s (%s): the readout of the steps differs from the forward\n",
                       name, training ? "training" : "eval");
    CHECK(same);
    /* the steps differ from one another (else the test would not tell a mean from a step) */
    int64_t varies = 0;
    for (int64_t i = N * K; i < steps->numel; i++) varies += steps->data[i] != steps->data[i % (N * K)];
    if (!varies) fprintf(stderr, "  %s (%s): every step gives the same output\n", name,
                         training ? "training" : "eval");
    CHECK(varies > 0);
    snn_step_end();
}

static void check_model(const char *name, const snn_model_config *config, int batch)
{
    /* a low threshold, so that an untrained net's deep layers fire and the steps differ */
    snn_model_config cfg = *config;
    cfg.neuron.v_threshold = 0.2f;
    const snn_model_config *c = &cfg;
    snn_rng rng;
    snn_rng_seed(&rng, 5);
    snn_module *m = snn_model_new(c, &rng);
    CHECK(m != NULL);
    if (!m) {
        fprintf(stderr, "  %s: %s\n", name, snn_last_error());
        return;
    }
    const bool events = c->encoding == SNN_ENCODING_EVENTS;
    const snn_shape shape = events ? SNN_SHAPE(c->time_steps, batch, c->in_channels, c->height, c->width)
                                   : SNN_SHAPE(batch, c->in_channels, c->height, c->width);
    /* Poisson rates are in [0, 1]; the others larger, so that eval mode (running statistics
     * 0 and 1) fires too */
    float *host = random_host(shape, 17, c->encoding == SNN_ENCODING_POISSON ? 1.0f : 4.0f);
    for (int training = 1; training >= 0; training--) check_steps(name, m, shape, host, training, false);
    free(host);
    snn_module_free(m);
}

static void test_mean_of_steps_is_the_forward(void)
{
    snn_model_config cnn = snn_model_config_default(SNN_MODEL_SPIKING_CNN);
    cnn.width_base = 8, cnn.hidden = 32, cnn.time_steps = 3;
    check_model("cnn", &cnn, 4);

    snn_model_config resnet = snn_model_config_default(SNN_MODEL_RESNET18);
    resnet.width_base = 4, resnet.height = resnet.width = 8, resnet.time_steps = 2;
    check_model("resnet18", &resnet, 3);

    snn_model_config dvs = snn_model_config_default(SNN_MODEL_DVS_NET);
    dvs.width_base = 4, dvs.height = dvs.width = 32, dvs.hidden = 16, dvs.time_steps = 3;
    check_model("dvsnet", &dvs, 2);

    snn_model_config poisson = cnn;
    poisson.encoding = SNN_ENCODING_POISSON;
    poisson.neuron = snn_neuron_config_default(SNN_NEURON_IF);
    check_model("cnn poisson", &poisson, 4);

    snn_model_config dropout = cnn;
    dropout.dropout = 0.5f;
    check_model("cnn dropout", &dropout, 4);
}

static void test_converted_network_sums(void)
{
    snn_module *qann = tiny_qann_new(SNN_MODEL_SPIKING_CNN, 31, SNN_CPU);
    snn_module *snn = qann ? snn_ann_to_snn(qann, 6) : NULL;
    CHECK(snn != NULL);
    if (snn) {
        CHECK(snn_model_config_of(snn)->encoding == SNN_ENCODING_FIRST_STEP);
        const snn_shape shape = SNN_SHAPE(3, 1, 28, 28);
        float *host = random_host(shape, 23, 1.0f);
        check_steps("converted cnn", snn, shape, host, false, true);
        free(host);
    }
    snn_module_free(snn);
    snn_module_free(qann);
}

static void test_errors(void)
{
    snn_rng rng;
    snn_rng_seed(&rng, 1);
    snn_model_config c = snn_model_config_default(SNN_MODEL_SPIKING_CNN);
    c.width_base = 4, c.hidden = 8;
    snn_module *m = snn_model_new(&c, &rng);
    snn_module *layer = snn_linear_new(4, 2, true, &rng);
    CHECK(m && layer);
    snn_step_begin();
    snn_tensor *x = snn_zeros(SNN_SHAPE(2, 1, 28, 28), SNN_CPU);
    snn_clear_error();
    CHECK(snn_model_forward_steps(layer, x) == NULL);
    CHECK(strstr(snn_last_error(), "snn_model_forward_steps") && strstr(snn_last_error(), "'model'") &&
          strstr(snn_last_error(), "Linear"));
    snn_clear_error();
    CHECK(snn_model_forward_steps(NULL, x) == NULL && strstr(snn_last_error(), "'model'"));
    snn_clear_error();
    CHECK(snn_model_forward_steps(m, snn_zeros(SNN_SHAPE(2, 3, 28, 28), SNN_CPU)) == NULL);
    CHECK(strstr(snn_last_error(), "snn_model_forward_steps") && strstr(snn_last_error(), "'x'"));
    snn_clear_error();
    CHECK(snn_model_forward_steps(m, NULL) == NULL && strstr(snn_last_error(), "'x'"));
    snn_clear_error();
    snn_step_end();
    snn_module_free(layer);
    snn_module_free(m);
}

int main(void)
{
    snn_set_num_threads(2);
    RUN(test_mean_of_steps_is_the_forward);
    RUN(test_converted_network_sums);
    RUN(test_errors);
    return test_finish();
}
