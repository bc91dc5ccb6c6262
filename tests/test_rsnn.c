/*
 * test_rsnn.c - the recurrent SNN (nn/model_rsnn.c, SNN_MODEL_RSNN):
 *
 *   - it builds and runs forward and backward on the CPU with images read as rows and as
 *     pixels, and with event steps (T, N, F) and frames (T, N, C, H, W); every parameter gets a
 *     gradient;
 *   - the sequence it makes of an image, and the leaky-integrator readout's closed form, against
 *     the recurrence U[t] = U[t-1] + (I[t] - U[t-1]) / tau written as a loop, from the model's
 *     own currents (its layers run by hand on a sequence built by index arithmetic);
 *   - bad configurations and inputs give errors naming the field or argument;
 *   - dropout on each recurrent layer's spikes: the identity in eval (the logits of the same
 *     model without it, bit for bit); in training the model's forward is the layers run by
 *     hand with the masks applied, each mask (N, hidden) shared by all T steps; a restored
 *     random stream draws the same masks; the memory estimate counts the masks;
 *   - a checkpoint round trip (a 2-layer model gives the same logits; a checkpoint written
 *     without "snn.model.layers" loads as 1 layer);
 *   - it learns: two classes that differ only in the ORDER of two input bursts (the same
 *     spikes in total) are separated in a few hundred Adam steps.
 *
 * Run: ctest -R '^rsnn$', or build/bin/test_rsnn.
 */
#define _POSIX_C_SOURCE 200809L /* open_memstream */

#include <stdio.h>
#include <unistd.h>

#include "test.h"

#include "nn/nn.h"
#include "nn/nn_internal.h" /* snn_dropout_impl: the seed of a dropout layer's last mask */

static snn_tensor *uniform(snn_shape shape, float lo, float hi, uint64_t seed)
{
    snn_rng rng;
    snn_rng_seed(&rng, seed);
    snn_tensor *x = snn_empty(shape, SNN_CPU);
    snn_tensor_uniform_(x, &rng, lo, hi);
    return x;
}

static snn_model_config small_config(snn_encoding encoding, int layers)
{
    snn_model_config c = snn_model_config_default(SNN_MODEL_RSNN);
    c.in_channels = 2, c.height = 5, c.width = 3, c.classes = 4;
    c.hidden = 6, c.layers = layers, c.encoding = encoding;
    c.time_steps = encoding == SNN_ENCODING_ROWS     ? 5
                   : encoding == SNN_ENCODING_PIXELS ? 15
                                                     : 7;
    c.neuron.v_threshold = 0.3f; /* small nets with small inputs: let them fire */
    return c;
}

/* forward + cross-entropy + backward on x; every trainable parameter gets a nonzero gradient */
static void check_forward_backward(snn_encoding encoding, snn_shape input, int layers)
{
    snn_rng rng;
    snn_rng_seed(&rng, 1);
    snn_model_config c = small_config(encoding, layers);
    snn_module *m = snn_model_new(&c, &rng);
    CHECK(m != NULL);
    if (!m) {
            return;
    }
    CHECK(snn_model_config_of(m) != NULL && snn_model_config_of(m)->layers == layers);
    snn_module_zero_grad(m);
    snn_step_begin();
    snn_tensor *x = uniform(input, 0.0f, 2.0f, 2);
    snn_tensor *labels = snn_from_host(SNN_SHAPE(3), (const float[]){0, 3, 1}, SNN_CPU);
    snn_tensor *logits = snn_module_forward(m, x);
    CHECK(logits && logits->shape.ndim == 2 && logits->shape.dim[0] == 3 &&
          logits->shape.dim[1] == 4);
    if (!logits) fprintf(stderr, "  %s\n", snn_last_error());
    snn_tensor *loss = logits ? snn_cross_entropy(logits, labels) : NULL;
    CHECK(loss && isfinite(snn_tensor_item(loss)));
    if (loss) CHECK_OK(snn_backward(loss));
    snn_param_list list;
    CHECK_OK(snn_module_parameters(m, &list));
    CHECK(list.count == 4 * layers + 2 - layers); /* fc_k weight, bias; rec_k w_rec; fc_out */
    for (int i = 0; i < list.count; i++) {
        const snn_tensor *g = list.items[i].tensor->grad;
        double norm = 0.0;
        for (int64_t j = 0; g && j < g->numel; j++) norm += fabs((double)g->data[j]);
        if (!(norm > 0.0)) fprintf(stderr, "  no gradient for %s\n", list.items[i].name);
        CHECK(norm > 0.0);
    }
    snn_param_list_free(&list);
    snn_step_end();
    snn_module_free(m);
}

static void test_forward_backward_rows_pixels_events(void)
{
    check_forward_backward(SNN_ENCODING_ROWS, SNN_SHAPE(3, 2, 5, 3), 1);
    check_forward_backward(SNN_ENCODING_ROWS, SNN_SHAPE(3, 2, 5, 3), 2);
    check_forward_backward(SNN_ENCODING_PIXELS, SNN_SHAPE(3, 2, 5, 3), 1);
    check_forward_backward(SNN_ENCODING_EVENTS, SNN_SHAPE(7, 3, 30), 1);
    check_forward_backward(SNN_ENCODING_EVENTS, SNN_SHAPE(7, 3, 2, 5, 3), 3);
}

/* The leaky integrator as a loop over t: U[t] = U[t-1] + (I[t] - U[t-1]) / tau, U[-1] = 0;
 * u (T, M) receives every U[t], mean (M) their mean over t. In double. */
static void leaky_loop(double *u, double *mean, const float *I, int T, int M, double tau)
{
    for (int j = 0; j < M; j++) {
        double U = 0.0, sum = 0.0;
        for (int t = 0; t < T; t++) {
            U = U + ((double)I[(int64_t)t * M + j] - U) / tau;
            u[(int64_t)t * M + j] = U;
            sum += U;
        }
        mean[j] = sum / T;
    }
}

/* The model's currents, its layers run by hand on the sequence built by index arithmetic, the
 * readout as a loop: snn_module_forward and snn_model_forward_steps must agree with both */
static void check_readout(snn_encoding encoding)
{
    snn_rng rng;
    snn_rng_seed(&rng, 5);
    snn_model_config c = small_config(encoding, 2);
    snn_module *m = snn_model_new(&c, &rng);
    CHECK(m != NULL);
    if (!m) return;
    snn_module_train(m, false);
    snn_step_begin();
    const int N = 3, C = c.in_channels, H = c.height, W = c.width, T = c.time_steps, K = c.classes;
    const int F = encoding == SNN_ENCODING_ROWS ? C * W : C;
    snn_tensor *x = uniform(SNN_SHAPE(N, C, H, W), 0.0f, 2.0f, 9);
    snn_tensor *seq = snn_empty(SNN_SHAPE(T, N, F), SNN_CPU); // (T, N, F)
    for (int n = 0; n < N; n++)
        for (int ch = 0; ch < C; ch++)
            for (int h = 0; h < H; h++)
                for (int w = 0; w < W; w++) {
                    /* rows: step h, feature ch*W + w;  pixels: step h*W + w, feature ch */
                    const int t = encoding == SNN_ENCODING_ROWS ? h : h * W + w;
                    const int f = encoding == SNN_ENCODING_ROWS ? ch * W + w : ch;
                    seq->data[((int64_t)t * N + n) * F + f] =
                        x->data[(((int64_t)n * C + ch) * H + h) * W + w];
                }
    snn_tensor *I = seq;
    for (int i = 0; i + 1 < m->n_children && I; i++) I = snn_module_forward(m->children[i], I);
    CHECK(I && I->shape.dim[0] == T && I->shape.dim[1] == N && I->shape.dim[2] == K);
    snn_tensor *logits = snn_module_forward(m, x);
    snn_tensor *steps = snn_model_forward_steps(m, x);
    CHECK(logits && steps && steps->shape.ndim == 3 && steps->shape.dim[0] == T);
    if (I && logits && steps) {
        double u[16 * 3 * 4], mean[3 * 4];
        leaky_loop(u, mean, I->data, T, N * K, 2.0);
        float uf[16 * 3 * 4], meanf[3 * 4];
        for (int j = 0; j < T * N * K; j++) uf[j] = (float)u[j];
        for (int j = 0; j < N * K; j++) meanf[j] = (float)mean[j];
        CHECK_ALL_CLOSE(logits->data, meanf, N * K, 1e-5, 1e-5);
        CHECK_ALL_CLOSE(steps->data, uf, T * N * K, 1e-5, 1e-5);
        /* the currents must not be all alike, or the readout test would test little */
        double spread = 0.0;
        for (int j = 1; j < T * N * K; j++) spread += fabs((double)I->data[j] - (double)I->data[0]);
        CHECK(spread > 1e-3);
    }
    /* the readout module alone, on random currents with T = 11 */
    snn_module *readout = snn_module_child(m, "readout");
    CHECK(readout != NULL);
    snn_tensor *cur = uniform(SNN_SHAPE(11, 2, 5), -3.0f, 3.0f, 13);
    snn_tensor *y = readout ? snn_module_forward(readout, cur) : NULL;
    CHECK(y && y->shape.ndim == 2 && y->shape.dim[0] == 2 && y->shape.dim[1] == 5);
    if (y) {
        double u[11 * 10], mean[10];
        float meanf[10];
        leaky_loop(u, mean, cur->data, 11, 10, 2.0);
        for (int j = 0; j < 10; j++) meanf[j] = (float)mean[j];
        CHECK_ALL_CLOSE(y->data, meanf, 10, 1e-5, 1e-5);
    }
    snn_step_end();
    snn_module_free(m);
}

static void test_sequences_and_readout_against_loops(void)
{
    check_readout(SNN_ENCODING_ROWS);
    check_readout(SNN_ENCODING_PIXELS);
}

/* snn_model_new(c) fails, and its message holds `want` */
static void check_refused(snn_model_config c, const char *want)
{
    snn_rng rng;
    snn_rng_seed(&rng, 0);
    snn_module *m = snn_model_new(&c, &rng);
    CHECK(m == NULL);
    snn_module_free(m);
    if (!strstr(snn_last_error(), want))
        fprintf(stderr, "  expected '%s' in: %s\n", want, snn_last_error());
    CHECK(strstr(snn_last_error(), want) != NULL);
}

static void test_bad_configs_and_inputs(void)
{
    snn_model_config c = small_config(SNN_ENCODING_ROWS, 1);
    c.layers = 0;
    check_refused(c, "bad config 'layers' (the rsnn's recurrent layers: expected 1..64, got 0)");
    c = small_config(SNN_ENCODING_ROWS, 1);
    c.time_steps = 7;
    check_refused(c, "the rows encoding of 5x3 images takes T = H = 5 steps, got 7");
    c = small_config(SNN_ENCODING_PIXELS, 1);
    c.time_steps = 5;
    check_refused(c, "the pixels encoding of 5x3 images takes T = H*W = 15 steps, got 5");
    c = small_config(SNN_ENCODING_ROWS, 1);
    c.encoding = SNN_ENCODING_DIRECT;
    check_refused(c, "the rsnn takes sequences: expected rows, pixels or events, got direct");
    c = small_config(SNN_ENCODING_ROWS, 1);
    c.neuron = snn_neuron_config_default(SNN_NEURON_PLIF);
    check_refused(c, "take if, lif or alif neurons, got plif");
    c = small_config(SNN_ENCODING_ROWS, 1);
    c.hidden = 0;
    check_refused(c, "bad config 'hidden'");
    c = snn_model_config_default(SNN_MODEL_SPIKING_CNN);
    c.encoding = SNN_ENCODING_ROWS;
    c.time_steps = 28;
    check_refused(c, "the rows encoding reads an image as a sequence, which only the rsnn takes");
    c = snn_model_config_default(SNN_MODEL_RESNET18);
    c.encoding = SNN_ENCODING_PIXELS;
    check_refused(c, "which only the rsnn takes; got model resnet18");

    /* inputs of the wrong shape, and T that the image fixes */
    snn_rng rng;
    snn_rng_seed(&rng, 0);
    c = small_config(SNN_ENCODING_ROWS, 1);
    snn_module *m = snn_model_new(&c, &rng);
    snn_step_begin();
    CHECK(snn_module_forward(m, snn_zeros(SNN_SHAPE(3, 2, 3, 5), SNN_CPU)) == NULL);
    CHECK(strstr(snn_last_error(), "RecurrentSNN: bad argument 'x' (expected (N, 2, 5, 3) images, "
                                   "read as 5 steps, got [3, 2, 3, 5])") != NULL);
    snn_step_end();
    CHECK(snn_model_set_time_steps(m, 6) == SNN_ERR_ARGUMENT);
    CHECK(strstr(snn_last_error(), "fixed by the image size") != NULL);
    CHECK_OK(snn_model_set_time_steps(m, 5));
    snn_module_free(m);
    c = small_config(SNN_ENCODING_EVENTS, 1);
    m = snn_model_new(&c, &rng);
    snn_step_begin();
    CHECK(snn_module_forward(m, snn_zeros(SNN_SHAPE(6, 3, 30), SNN_CPU)) == NULL);
    CHECK(strstr(snn_last_error(), "expected (T=7, N, 30) steps or (T=7, N, 2, 5, 3) frames, got "
                                   "[6, 3, 30])") != NULL);
    CHECK(snn_module_forward(m, snn_zeros(SNN_SHAPE(7, 3, 31), SNN_CPU)) == NULL);
    snn_step_end();
    /* T of event steps may change: no image fixes it */
    CHECK_OK(snn_model_set_time_steps(m, 9));
    snn_module_free(m);
}

/* The mask a dropout layer applied in its last training forward: its op on ones, with the
 * seed that forward used (the layer keeps it; a forward of the layer itself would draw anew). */
static snn_tensor *mask_of(snn_module *dropout, int64_t T, int64_t N, int64_t H)
{
    const snn_dropout_impl *d = dropout->impl;
    snn_tensor *ones = snn_empty(SNN_SHAPE(T, N, H), SNN_CPU);
    for (int64_t i = 0; i < ones->numel; i++) ones->data[i] = 1.0f;
    return snn_dropout_shared(ones, d->p, true, d->seed, d->shared_dims); // (T, N, H): 0 or 2
}

static void test_dropout_on_spikes(void)
{
    snn_rng rng, rng_plain;
    snn_rng_seed(&rng, 11);
    snn_rng_seed(&rng_plain, 11);
    snn_model_config c = small_config(SNN_ENCODING_EVENTS, 2), plain = c;
    c.dropout = 0.5f;
    snn_module *m = snn_model_new(&c, &rng), *p = snn_model_new(&plain, &rng_plain);
    CHECK(m && p);
    if (!m || !p) {
        snn_module_free(m);
        snn_module_free(p);
        return;
    }
    static const char *const order[] = {"fc1", "rec1", "dropout1", "fc2",
                                        "rec2", "dropout2", "fc_out", "readout"};
    CHECK(m->n_children == 8);
    for (int i = 0; i < m->n_children && i < 8; i++)
        CHECK(strcmp(m->children[i]->name, order[i]) == 0);
    CHECK(snn_module_num_parameters(m) == snn_module_num_parameters(p));

    const int64_t T = c.time_steps, N = 3, H = c.hidden;
    snn_step_begin();
    snn_tensor *x = uniform(SNN_SHAPE(T, N, 30), 0.0f, 2.0f, 12);
    /* eval: dropout is the identity; the weights are the plain model's (no draws of its own) */
    snn_module_train(m, false);
    snn_module_train(p, false);
    snn_tensor *a = snn_module_forward(m, x), *b = snn_module_forward(p, x);
    CHECK(a && b && test_same_bits(a->data, b->data, a->numel));

    /* training: the forward against the layers run by hand with the masks it drew */
    snn_module_train(m, true);
    const uint64_t state = snn_model_rng_state(m);
    snn_tensor *y = snn_module_forward(m, x);
    snn_tensor *mask1 = mask_of(m->children[2], T, N, H), *mask2 = mask_of(m->children[5], T, N, H);
    CHECK(y && mask1 && mask2);
    if (!y || !mask1 || !mask2) {
        snn_step_end();
        snn_module_free(m);
        snn_module_free(p);
        return;
    }
    int dropped = 0, kept = 0, shared = 1;
    for (int k = 0; k < 2; k++) {
        const float *mk = (k ? mask2 : mask1)->data;
        for (int64_t j = 0; j < N * H; j++) {
            dropped += mk[j] == 0.0f, kept += mk[j] == 2.0f;
            for (int64_t t = 1; t < T; t++) shared &= mk[t * N * H + j] == mk[j];
        }
    }
    CHECK(shared && dropped > 0 && kept > 0 && dropped + kept == 2 * N * H);
    snn_tensor *h = x;
    for (int i = 0; i < m->n_children - 1 && h; i++) {
        if (i == 2 || i == 5) h = snn_mul(h, i == 2 ? mask1 : mask2); /* the dropout layers */
        else h = snn_module_forward(m->children[i], h);
    }
    snn_tensor *by_hand = h ? snn_module_forward(m->children[m->n_children - 1], h) : NULL;
    CHECK(by_hand && test_same_bits(by_hand->data, y->data, y->numel));
    CHECK(!test_same_bits(y->data, a->data, y->numel));
    /* the next forward draws other masks; the stream set back draws these again */
    snn_tensor *y2 = snn_module_forward(m, x);
    CHECK(y2 && !test_same_bits(y2->data, y->data, y->numel));
    snn_model_set_rng_state(m, state);
    snn_tensor *y3 = snn_module_forward(m, x);
    CHECK(y3 && test_same_bits(y3->data, y->data, y->numel));
    /* backward through the masks reaches the first layer */
    snn_module_zero_grad(m);
    snn_tensor *labels = snn_from_host(SNN_SHAPE(3), (const float[]){0, 3, 1}, SNN_CPU);
    snn_tensor *loss = y3 ? snn_cross_entropy(y3, labels) : NULL;
    CHECK(loss && snn_backward(loss) == SNN_OK);
    const snn_tensor *g = m->children[0]->params[0].tensor->grad;
    double norm = 0.0;
    for (int64_t j = 0; g && j < g->numel; j++) norm += fabs((double)g->data[j]);
    CHECK(norm > 0.0);
    snn_step_end();

    /* the estimate: a mask (N, H) and a product (T, N, H) per layer in training; none in eval */
    snn_memory_estimate with, without;
    CHECK_OK(snn_model_memory_estimate(&c, 8, SNN_CPU, true, 2, &with));
    CHECK_OK(snn_model_memory_estimate(&plain, 8, SNN_CPU, true, 2, &without));
    CHECK(with.step > without.step);
    CHECK_OK(snn_model_memory_estimate(&c, 8, SNN_CPU, false, 0, &with));
    CHECK_OK(snn_model_memory_estimate(&plain, 8, SNN_CPU, false, 0, &without));
    CHECK(with.step == without.step);
    snn_module_free(m);
    snn_module_free(p);
}

static void test_checkpoint_round_trip(void)
{
    char path[] = "/tmp/test_rsnn_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0) return;
    close(fd);
    snn_rng rng;
    snn_rng_seed(&rng, 3);
    snn_model_config c = small_config(SNN_ENCODING_PIXELS, 2);
    c.neuron.tau = 3.0f;
    snn_module *m = snn_model_new(&c, &rng);
    snn_module_train(m, false);
    CHECK_OK(snn_checkpoint_save(path, m, NULL, NULL));
    snn_metadata meta;
    snn_module *back = snn_checkpoint_load_model(path, SNN_CPU, &meta);
    CHECK(back != NULL);
    if (back) {
        const snn_model_config *b = snn_model_config_of(back);
        CHECK(b->kind == SNN_MODEL_RSNN && b->layers == 2 && b->hidden == 6 &&
              b->encoding == SNN_ENCODING_PIXELS && b->time_steps == 15 && b->neuron.tau == 3.0f);
        snn_module_train(back, false);
        snn_step_begin();
        snn_tensor *x = uniform(SNN_SHAPE(3, 2, 5, 3), 0.0f, 2.0f, 4);
        snn_tensor *y0 = snn_module_forward(m, x), *y1 = snn_module_forward(back, x);
        CHECK(y0 && y1 && test_same_bits(y0->data, y1->data, y0->numel));
        snn_step_end();
    }
    snn_module_free(back);
    /* a checkpoint of before the field: no "snn.model.layers", read as 1 layer */
    snn_metadata old = {0};
    for (int i = 0; i < meta.count; i++)
        if (strcmp(meta.keys[i], "snn.model.layers") != 0)
            CHECK_OK(snn_metadata_set(&old, meta.keys[i], "%s", meta.values[i]));
    CHECK(snn_metadata_get(&meta, "snn.model.layers") != NULL);
    snn_model_config read;
    CHECK_OK(snn_model_config_from_metadata(&old, &read));
    CHECK(read.layers == 1 && read.kind == SNN_MODEL_RSNN);
    /* the other models store no layers and read 0 */
    snn_model_config cnn = snn_model_config_default(SNN_MODEL_SPIKING_CNN);
    snn_metadata cm = {0};
    CHECK_OK(snn_model_config_to_metadata(&cnn, &cm));
    CHECK(snn_metadata_get(&cm, "snn.model.layers") == NULL);
    CHECK_OK(snn_model_config_from_metadata(&cm, &read));
    CHECK(read.layers == 0);
    snn_module_free(m);
    remove(path);
}

static void test_print_and_memory_estimate(void)
{
    snn_rng rng;
    snn_rng_seed(&rng, 0);
    snn_model_config c = snn_model_config_default(SNN_MODEL_RSNN);
    c.layers = 2;
    snn_module *m = snn_model_new(&c, &rng);
    CHECK(m != NULL);
    if (!m) return;
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    snn_module_print(m, f);
    fclose(f);
    CHECK(strstr(text, "RecurrentSNN") && strstr(text, "rec2") && strstr(text, "w_rec") &&
          strstr(text, "fc_out") && strstr(text, "LeakyIntegratorReadout"));
    free(text);
    /* 28 x 256 + 256 + 256^2 (fc1, rec1) + 256^2 + 256 + 256^2 (fc2, rec2) + 256 x 10 + 10 */
    const int64_t want = 28 * 256 + 256 + 3 * 256 * 256 + 256 + 256 * 10 + 10;
    CHECK(snn_module_num_parameters(m) == want);
    snn_memory_estimate e;
    CHECK_OK(snn_model_memory_estimate(&c, 64, SNN_CPU, true, 2, &e));
    CHECK(e.parameter_count == want && e.step > 0.0 && e.total > e.step);
    snn_module_free(m);
}

/* Two classes, the same two bursts in opposite order: class 0 drives input 0 in the first half
 * of the sequence and input 1 in the second, class 1 the reverse; plus noise. Only the order
 * tells them apart, which needs memory across steps. */
static void make_order_batch(snn_tensor *x, snn_tensor *labels, snn_rng *rng)
{
    const int64_t T = x->shape.dim[0], N = x->shape.dim[1], F = x->shape.dim[2];
    for (int64_t n = 0; n < N; n++) {
        const int label = snn_rng_uniform(rng) < 0.5f;
        labels->data[n] = (float)label;
        for (int64_t t = 0; t < T; t++) {
            const bool first = t < T / 2;
            for (int64_t f = 0; f < F; f++) {
                const int64_t driven = first == (label == 0) ? 0 : 1;
                const float noise = snn_rng_uniform(rng) < 0.1f ? 1.0f : 0.0f;
                x->data[(t * N + n) * F + f] = (f == driven) ? 1.0f : noise;
            }
        }
    }
}

static void test_learns_temporal_order(void)
{
    snn_rng rng, data;
    snn_rng_seed(&rng, 7);
    snn_rng_seed(&data, 8);
    snn_model_config c = snn_model_config_default(SNN_MODEL_RSNN);
    c.encoding = SNN_ENCODING_EVENTS;
    c.in_channels = 1, c.height = 1, c.width = 4, c.classes = 2;
    c.time_steps = 12, c.hidden = 24, c.layers = 1;
    snn_module *m = snn_model_new(&c, &rng);
    snn_optimizer *opt = m ? snn_adam_new(m, 1e-2f, 0.0f, false) : NULL;
    CHECK(opt != NULL);
    if (!opt) {
        snn_module_free(m);
        return;
    }
    double first = 0.0, last = 0.0;
    const int steps = 300, window = 20;
    for (int step = 0; step < steps; step++) {
        snn_step_begin();
        snn_module_zero_grad(m);
        snn_tensor *x = snn_empty(SNN_SHAPE(12, 32, 4), SNN_CPU);
        snn_tensor *labels = snn_empty(SNN_SHAPE(32), SNN_CPU);
        make_order_batch(x, labels, &data);
        snn_tensor *loss = snn_cross_entropy(snn_module_forward(m, x), labels);
        CHECK(loss != NULL);
        if (!loss) {
            snn_step_end();
            break;
        }
        const double value = snn_tensor_item(loss);
        if (step < window) first += value / window;
        if (step >= steps - window) last += value / window;
        CHECK_OK(snn_backward(loss));
        CHECK_OK(snn_optimizer_step(opt));
        snn_step_end();
    }
    fprintf(stderr, "  order task: mean loss %.4f over the first %d steps, %.4f over the last %d\n",
            first, window, last, window);
    CHECK(first > 0.5);  /* chance: ln 2 = 0.69 */
    CHECK(last < 0.1);
    /* and it generalises to fresh sequences */
    snn_module_train(m, false);
    snn_step_begin();
    snn_tensor *x = snn_empty(SNN_SHAPE(12, 200, 4), SNN_CPU);
    snn_tensor *labels = snn_empty(SNN_SHAPE(200), SNN_CPU);
    make_order_batch(x, labels, &data);
    snn_tensor *pred = snn_argmax(snn_module_forward(m, x));
    int right = 0;
    for (int n = 0; pred && n < 200; n++) right += pred->data[n] == labels->data[n];
    fprintf(stderr, "  order task: %d of 200 fresh sequences right\n", right);
    CHECK(right >= 196);
    snn_step_end();
    snn_optimizer_free(opt);
    snn_module_free(m);
}

int main(void)
{
    snn_set_num_threads(2);
    RUN(test_forward_backward_rows_pixels_events);
    RUN(test_sequences_and_readout_against_loops);
    RUN(test_bad_configs_and_inputs);
    RUN(test_dropout_on_spikes);
    RUN(test_checkpoint_round_trip);
    RUN(test_print_and_memory_estimate);
    RUN(test_learns_temporal_order);
    return test_finish();
}
