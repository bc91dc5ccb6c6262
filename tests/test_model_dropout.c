/*
 * test_model_dropout.c - dropout in the classifier of the spiking CNN and the DVS net, and
 * before the ResNets' fc (snn_model_config.dropout; nn/model_cnn.c, nn/model_resnet.c,
 * nn/model.c), with one mask per sample shared by every time step (snn_dropout_shared; the
 * op's own tests are in test_autograd.c).
 *
 *   - layout: flatten -> dropout1 -> fc1 -> neuron -> dropout2 -> fc2, only when dropout > 0;
 *     the same parameters (names, shapes, values drawn) as without, so checkpoints match;
 *   - the Dropout layer with shared_dims 1 drops the same units at every step;
 *   - eval: the logits of the model without dropout, bit for bit; training: other logits, a
 *     different mask each forward;
 *   - the masks come from the model's random stream, advanced once per training forward (never
 *     in eval, never without dropout, so runs without dropout draw as before): restoring the
 *     stream (as a resumed run does from "snn.model.rng") gives the same logits bit for bit,
 *     also in a model loaded from a checkpoint;
 *   - the field round-trips through checkpoint metadata; metadata without it read as 0;
 *   - ResNet-18: one layer, between flatten and fc, the same parameters as without; eval is
 *     the plain net's logits bit for bit, training draws a mask per forward from the stream;
 *   - a bad value is refused naming the field.
 * Run: ctest --test-dir build -R model_dropout
 */
#define _POSIX_C_SOURCE 200809L /* mkdtemp */

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "nn/nn_internal.h"
#include "snn.h"
#include "test.h"

static snn_model_config small_cnn(float dropout)
{
    snn_model_config c = snn_model_config_default(SNN_MODEL_SPIKING_CNN);
    c.width_base = 8, c.hidden = 32, c.time_steps = 3;
    c.neuron.v_threshold = 0.3f; /* an untrained net whose classifier fires */
    c.dropout = dropout;
    return c;
}

static snn_module *build(const snn_model_config *c, uint64_t seed)
{
    snn_rng rng;
    snn_rng_seed(&rng, seed);
    snn_module *m = snn_model_new(c, &rng);
    CHECK(m != NULL);
    if (!m) fprintf(stderr, "  snn_model_new: %s\n", snn_last_error());
    return m;
}

/* The logits of one forward of m on x (host, N images of the model's shape) into out. */
static void logits_of(snn_module *m, const float *x, int N, float *out)
{
    const snn_model_config *c = snn_model_config_of(m);
    snn_step_begin();
    snn_tensor *t = snn_from_host(SNN_SHAPE(N, c->in_channels, c->height, c->width), x, SNN_CPU);
    snn_tensor *logits = snn_module_forward(m, t);
    CHECK(logits != NULL);
    if (logits) memcpy(out, logits->data, (size_t)logits->numel * sizeof *out);
    snn_step_end();
}

static float *images(int N, uint64_t seed)
{
    float *x = malloc((size_t)N * 28 * 28 * sizeof *x);
    snn_rng rng;
    snn_rng_seed(&rng, seed);
    for (int i = 0; x && i < N * 28 * 28; i++) x[i] = 3.0f * snn_rng_uniform(&rng);
    return x;
}

static bool same(const float *a, const float *b, size_t n) { return memcmp(a, b, n * sizeof *a) == 0; }

static void test_layout(void)
{
    const snn_model_kind kinds[2] = {SNN_MODEL_SPIKING_CNN, SNN_MODEL_DVS_NET};
    for (int k = 0; k < 2; k++) {
        snn_model_config c = snn_model_config_default(kinds[k]);
        c.width_base = 4, c.hidden = 16;
        if (kinds[k] == SNN_MODEL_DVS_NET) c.height = c.width = 32;
        snn_module *plain = build(&c, 3);
        c.dropout = 0.25f;
        snn_module *with = build(&c, 3);
        if (!plain || !with) goto next;
        /* two children more, where the PLIF paper puts them: before fc1 and before fc2 */
        CHECK(with->n_children == plain->n_children + 2);
        for (int i = 0; i < plain->n_children; i++) CHECK(plain->children[i]->ops != &snn_dropout_ops);
        int at[2] = {-1, -1}, found = 0;
        for (int i = 0; i < with->n_children; i++)
            if (with->children[i]->ops == &snn_dropout_ops && found < 2) at[found++] = i;
        CHECK(found == 2 && at[0] > 0 && at[1] > 0);
        if (found == 2) {
            CHECK(strcmp(with->children[at[0]]->name, "dropout1") == 0);
            CHECK(strcmp(with->children[at[0] - 1]->name, "flatten") == 0);
            CHECK(strcmp(with->children[at[0] + 1]->name, "fc1") == 0);
            CHECK(strcmp(with->children[at[1]]->name, "dropout2") == 0);
            CHECK(with->children[at[1] - 1]->ops == &snn_neuron_layer_ops);
            CHECK(strcmp(with->children[at[1] + 1]->name, "fc2") == 0);
            for (int j = 0; j < 2; j++) {
                const snn_dropout_impl *d = with->children[at[j]]->impl;
                CHECK(d->p == 0.25f && d->shared_dims == 1);
            }
        }
        /* the same tensors, with the same names and values: dropout has no parameters and
         * draws nothing from the builder's generator */
        snn_param_list a, b;
        CHECK_OK(snn_module_parameters(plain, &a));
        CHECK_OK(snn_module_parameters(with, &b));
        CHECK(a.count == b.count);
        for (int i = 0; i < a.count && a.count == b.count; i++) {
            CHECK(strcmp(a.items[i].name, b.items[i].name) == 0);
            CHECK(a.items[i].tensor->numel == b.items[i].tensor->numel &&
                  same(a.items[i].tensor->data, b.items[i].tensor->data,
                       (size_t)a.items[i].tensor->numel));
        }
        snn_param_list_free(&a);
        snn_param_list_free(&b);
    next:
        snn_module_free(plain);
        snn_module_free(with);
    }
}

static void test_layer_shares_the_mask_over_time(void)
{
    snn_module *d = snn_dropout_shared_new(0.5f, 99, 1);
    CHECK(d != NULL);
    if (!d) return;
    snn_step_begin();
    const int T = 5, N = 4, F = 64;
    snn_tensor *y = snn_module_forward(d, snn_full(SNN_SHAPE(T, N, F), 1.0f, SNN_CPU));
    CHECK(y != NULL);
    int64_t differ = 0, dropped = 0;
    for (int64_t i = 0; y && i < (int64_t)N * F; i++) {
        dropped += y->data[i] == 0.0f;
        for (int t = 1; t < T; t++) differ += y->data[(int64_t)t * N * F + i] != y->data[i];
    }
    CHECK(differ == 0 && dropped > 0 && dropped < N * F);
    snn_step_end();
    snn_clear_error();
    CHECK(snn_dropout_shared_new(0.5f, 1, -1) == NULL && strstr(snn_last_error(), "'shared_dims'"));
    CHECK(snn_dropout_shared_new(1.0f, 1, 1) == NULL && strstr(snn_last_error(), "'p'"));
    snn_clear_error();
    snn_module_free(d);
}

static void test_eval_training_and_stream(void)
{
    const int N = 6, K = 10;
    snn_model_config c0 = small_cnn(0.0f), c1 = small_cnn(0.5f);
    snn_module *plain = build(&c0, 7), *with = build(&c1, 7);
    float *x = images(N, 41);
    float a[6 * 10], b[6 * 10], b2[6 * 10], b3[6 * 10];
    if (!plain || !with || !x) goto done;

    /* eval: dropout is the identity, the stream stays where it is */
    snn_module_train(plain, false);
    snn_module_train(with, false);
    uint64_t s0 = snn_model_rng_state(with);
    logits_of(plain, x, N, a);
    logits_of(with, x, N, b);
    CHECK(same(a, b, (size_t)N * K));
    CHECK(snn_model_rng_state(with) == s0);

    /* training: one step of the stream per forward; a model without dropout keeps its stream */
    snn_module_train(plain, true);
    snn_module_train(with, true);
    const uint64_t p0 = snn_model_rng_state(plain);
    logits_of(plain, x, N, a);
    CHECK(snn_model_rng_state(plain) == p0);
    logits_of(with, x, N, b);
    const uint64_t s1 = snn_model_rng_state(with);
    CHECK(s1 == snn_hash64(s0));
    CHECK(!same(a, b, (size_t)N * K));  /* the masks change the logits */
    logits_of(with, x, N, b2);
    CHECK(snn_model_rng_state(with) == snn_hash64(s1));
    CHECK(!same(b, b2, (size_t)N * K)); /* a new mask each forward */

    /* a resumed run: the stream put back gives the same masks, so the same logits */
    snn_model_set_rng_state(with, s0);
    logits_of(with, x, N, b3);
    CHECK(same(b, b3, (size_t)N * K));
    logits_of(with, x, N, b3);
    CHECK(same(b2, b3, (size_t)N * K));
done:
    free(x);
    snn_module_free(plain);
    snn_module_free(with);
}

static void test_poisson_without_dropout_draws_as_before(void)
{
    /* the Poisson encoder advances the stream once per forward (state -> hash(state)), and
     * nothing else touches it when the model has no dropout */
    snn_model_config c = small_cnn(0.0f);
    c.encoding = SNN_ENCODING_POISSON;
    snn_module *m = build(&c, 8);
    float *x = images(2, 5), out[2 * 10];
    for (int i = 0; x && i < 2 * 28 * 28; i++) x[i] /= 3.0f; /* rates in [0, 1) */
    if (m && x) {
        const uint64_t s0 = snn_model_rng_state(m);
        logits_of(m, x, 2, out);
        CHECK(snn_model_rng_state(m) == snn_hash64(s0));
        /* with dropout: one step for the masks, then the encoder's */
        snn_model_config cd = c;
        cd.dropout = 0.1f;
        snn_module *d = build(&cd, 8);
        if (d) {
            logits_of(d, x, 2, out);
            CHECK(snn_model_rng_state(d) == snn_hash64(snn_hash64(s0)));
        }
        snn_module_free(d);
    }
    free(x);
    snn_module_free(m);
}

static void test_checkpoint(void)
{
    char dir[64] = "/tmp/snn_test_model_dropout_XXXXXX", path[96];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/dropout.safetensors", dir);
    const int N = 4, K = 10;
    snn_model_config c = small_cnn(0.375f);
    snn_module *m = build(&c, 12);
    float *x = images(N, 77);
    float want[4 * 10], got[4 * 10];
    if (!m || !x) goto done;
    /* as snn-train does: the model's stream goes into the metadata */
    snn_metadata meta = {0};
    CHECK_OK(snn_metadata_set(&meta, "snn.model.rng", "%llu",
                              (unsigned long long)snn_model_rng_state(m)));
    CHECK_OK(snn_checkpoint_save(path, m, NULL, &meta));
    logits_of(m, x, N, want); /* the next training forward after the save */

    snn_metadata back;
    snn_module *loaded = snn_checkpoint_load_model(path, SNN_CPU, &back);
    CHECK(loaded != NULL);
    if (loaded) {
        CHECK(snn_model_config_of(loaded)->dropout == 0.375f);
        const char *r = snn_metadata_get(&back, "snn.model.rng");
        CHECK(r != NULL);
        if (r) snn_model_set_rng_state(loaded, strtoull(r, NULL, 10));
        logits_of(loaded, x, N, got);
        CHECK(same(want, got, (size_t)N * K));
    }
    snn_module_free(loaded);
    unlink(path);
    rmdir(dir);

    /* metadata written before the field existed: no "snn.model.dropout", read as 0 */
    snn_metadata full = {0}, old = {0};
    CHECK_OK(snn_model_config_to_metadata(&c, &full));
    CHECK(snn_metadata_get(&full, "snn.model.dropout") != NULL);
    for (int i = 0; i < full.count; i++)
        if (strcmp(full.keys[i], "snn.model.dropout") != 0)
            CHECK_OK(snn_metadata_set(&old, full.keys[i], "%s", full.values[i]));
    snn_model_config read;
    CHECK_OK(snn_model_config_from_metadata(&old, &read));
    CHECK(read.dropout == 0.0f && read.width_base == c.width_base);
    CHECK_OK(snn_model_config_from_metadata(&full, &read));
    CHECK(read.dropout == 0.375f);
    CHECK_OK(snn_metadata_set(&full, "snn.model.dropout", "half"));
    CHECK(snn_model_config_from_metadata(&full, &read) == SNN_ERR_FORMAT);
    CHECK(strstr(snn_last_error(), "snn.model.dropout") != NULL);
    snn_clear_error();
done:
    free(x);
    snn_module_free(m);
}

static void test_resnet(void)
{
    snn_model_config c = snn_model_config_default(SNN_MODEL_RESNET18);
    c.width_base = 4, c.height = c.width = 8, c.time_steps = 2;
    c.neuron.v_threshold = 0.3f;
    snn_module *plain = build(&c, 5);
    c.dropout = 0.5f;
    snn_module *with = build(&c, 5);
    enum { N = 3, K = 10 };
    float x[N * 3 * 8 * 8], a[N * K], b[N * K], b2[N * K];
    snn_rng rng;
    snn_rng_seed(&rng, 21);
    for (int i = 0; i < N * 3 * 8 * 8; i++) x[i] = 2.0f * snn_rng_uniform(&rng);
    if (!plain || !with) goto done;
    /* one child more, between flatten and fc, shared over T */
    CHECK(with->n_children == plain->n_children + 1);
    const int at = with->n_children - 2;
    CHECK(with->children[at]->ops == &snn_dropout_ops);
    CHECK(strcmp(with->children[at]->name, "dropout") == 0);
    CHECK(strcmp(with->children[at - 1]->name, "flatten") == 0);
    CHECK(strcmp(with->children[at + 1]->name, "fc") == 0);
    const snn_dropout_impl *d = with->children[at]->impl;
    CHECK(d->p == 0.5f && d->shared_dims == 1);
    /* the same parameters, names and values */
    snn_param_list pa, pb;
    CHECK_OK(snn_module_parameters(plain, &pa));
    CHECK_OK(snn_module_parameters(with, &pb));
    CHECK(pa.count == pb.count);
    for (int i = 0; i < pa.count && pa.count == pb.count; i++)
        CHECK(strcmp(pa.items[i].name, pb.items[i].name) == 0 &&
              pa.items[i].tensor->numel == pb.items[i].tensor->numel &&
              same(pa.items[i].tensor->data, pb.items[i].tensor->data,
                   (size_t)pa.items[i].tensor->numel));
    snn_param_list_free(&pa);
    snn_param_list_free(&pb);
    /* eval: the plain net's logits; training: other logits, a new mask each forward, the
     * same again from the same stream */
    snn_module_train(plain, false);
    snn_module_train(with, false);
    logits_of(plain, x, N, a);
    logits_of(with, x, N, b);
    CHECK(same(a, b, (size_t)N * K));
    snn_module_train(plain, true);
    snn_module_train(with, true);
    const uint64_t s0 = snn_model_rng_state(with);
    logits_of(plain, x, N, a);
    logits_of(with, x, N, b);
    CHECK(snn_model_rng_state(with) == snn_hash64(s0));
    CHECK(!same(a, b, (size_t)N * K));
    logits_of(with, x, N, b2);
    CHECK(!same(b, b2, (size_t)N * K));
    snn_model_set_rng_state(with, s0);
    logits_of(with, x, N, b2);
    CHECK(same(b, b2, (size_t)N * K));
done:
    snn_module_free(plain);
    snn_module_free(with);
}

static void test_bad_configs(void)
{
    snn_rng rng;
    snn_rng_seed(&rng, 1);
    const float bad[4] = {-0.1f, 1.0f, 1.5f, NAN};
    for (int i = 0; i < 4; i++) {
        snn_model_config c = small_cnn(bad[i]);
        snn_clear_error();
        CHECK(snn_model_new(&c, &rng) == NULL);
        CHECK(strstr(snn_last_error(), "'dropout'") != NULL);
    }
    snn_clear_error();
}

int main(void)
{
    snn_set_num_threads(2);
    RUN(test_layout);
    RUN(test_layer_shares_the_mask_over_time);
    RUN(test_eval_training_and_stream);
    RUN(test_poisson_without_dropout_draws_as_before);
    RUN(test_checkpoint);
    RUN(test_resnet);
    RUN(test_bad_configs);
    return test_finish();
}
