/*
 * test_nir_rsnn.c - the recurrent SNN (nn/model_rsnn.c) written as a NIR graph
 * (nir/nir_export.c) and run back by snn.c's NIR executor (nir/nir_run.c):
 *   - an rsnn with LIF neurons, 2 layers, on event steps (T, N, F): the graph holds a Linear
 *     "recK.w_rec" from each neuron node back to itself (one back edge a layer) and an LI node for
 *     the readout, and its Output at every step equals the model's per-step outputs
 *     (snn_model_forward_steps: the readout's U[t]);
 *   - the rows encoding: the graph's Input is one row (C*W features), and fed the image's rows as
 *     (T = H, N, C*W) steps it gives the model's outputs on the image; that model has dropout
 *     on its spikes, the identity in eval, which the graph leaves out;
 *   - ALIF is refused with a message naming the layer (NIR has no adaptive threshold).
 * Skipped (77) in a build without the NIR library (no HDF5).
 * Run: ctest -R '^nir_rsnn$', or build/bin/test_nir_rsnn.
 */
#define _POSIX_C_SOURCE 200809L /* mkstemp */

#include <stdio.h>
#include <unistd.h>

#include "test.h"

#ifdef SNN_WITH_NIR
#include "nir/nir.h"
#include "tests/nir/nir_test_run.h"

#define MAX_OUT 4096

/* The model's per-step outputs on x and the NIR graph's on `steps` (its Input's sequence):
 * equal within float rounding. */
static void check_graph_matches(snn_module *m, snn_tensor *x, snn_shape steps_shape,
                                const float *steps, int T)
{
    char path[] = "/tmp/test_nir_rsnn_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0) return;
    close(fd);
    CHECK_OK(snn_nir_write(path, m));
    snn_module *g = nir_test_load(path, T, 0.0, SNN_CPU);
    if (g) {
        snn_nir_info info;
        CHECK_OK(snn_nir_graph_info(g, &info));
        CHECK(info.back_edges == snn_model_config_of(m)->layers);
        snn_no_grad_begin();
        snn_step_begin();
        snn_tensor *want = snn_model_forward_steps(m, x); // (T, N, K)
        CHECK(want != NULL && want->numel <= MAX_OUT);
        /* the recurrent edges carry something: the layers fire, but not always */
        for (int l = 1; l <= 2; l++) {
            char name[16];
            snprintf(name, sizeof name, "rec%d", l);
            const float rate = snn_neuron_layer_firing_rate(snn_module_child(m, name));
            fprintf(stderr, "  %s fires %.3f\n", name, (double)rate);
            CHECK(rate > 0.02f && rate < 0.95f);
        }
        static float got[MAX_OUT];
        if (want && want->numel <= MAX_OUT &&
            nir_test_steps_on_host(g, steps_shape, steps, SNN_CPU, got, want->numel)) {
            CHECK_ALL_CLOSE(got, want->data, want->numel, 1e-5, 1e-4);
        }
        snn_step_end();
        snn_no_grad_end();
    }
    snn_module_free(g);
    remove(path);
}

/* dropout > 0: the model has dropout layers, the identity in eval, which the export leaves out */
static snn_module *small_rsnn(snn_encoding encoding, snn_neuron_kind neuron, uint64_t seed,
                              float dropout)
{
    snn_model_config c = snn_model_config_default(SNN_MODEL_RSNN);
    c.in_channels = 2, c.height = 4, c.width = 3, c.classes = 3;
    c.hidden = 7, c.layers = 2, c.encoding = encoding;
    c.time_steps = encoding == SNN_ENCODING_ROWS ? 4 : 9;
    c.neuron = snn_neuron_config_default(neuron);
    c.neuron.v_threshold = 0.2f; /* small inputs: let the layers fire */
    c.dropout = dropout;
    snn_rng rng;
    snn_rng_seed(&rng, seed);
    snn_module *m = snn_model_new(&c, &rng);
    if (!m) fprintf(stderr, "  %s\n", snn_last_error());
    CHECK(m != NULL);
    if (m) snn_module_train(m, false);
    return m;
}

static void fill_uniform(float *x, int64_t n, uint64_t seed)
{
    snn_rng rng;
    snn_rng_seed(&rng, seed);
    for (int64_t i = 0; i < n; i++) x[i] = 2.0f * snn_rng_uniform(&rng);
}

static void test_events_graph_runs_as_the_model(void)
{
    snn_module *m = small_rsnn(SNN_ENCODING_EVENTS, SNN_NEURON_LIF, 1, 0.0f);
    if (!m) return;
    enum { T = 9, N = 3, F = 24 };
    static float x[T * N * F];
    fill_uniform(x, T * N * F, 2);
    snn_step_begin();
    snn_tensor *xt = snn_from_host(SNN_SHAPE(T, N, F), x, SNN_CPU);
    check_graph_matches(m, xt, SNN_SHAPE(T, N, F), x, T);
    snn_step_end();
    snn_module_free(m);
}

static void test_rows_graph_takes_one_row_a_step(void)
{
    snn_module *m = small_rsnn(SNN_ENCODING_ROWS, SNN_NEURON_LIF, 3, 0.3f);
    if (!m) return;
    enum { N = 2, C = 2, H = 4, W = 3 };
    static float image[N * C * H * W], rows[H * N * C * W];
    fill_uniform(image, N * C * H * W, 4);
    /* step t, sample n: row t of every channel, channel-major (c * W + w) */
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++)
            for (int t = 0; t < H; t++)
                for (int w = 0; w < W; w++)
                    rows[(t * N + n) * C * W + c * W + w] = image[((n * C + c) * H + t) * W + w];
    snn_step_begin();
    snn_tensor *x = snn_from_host(SNN_SHAPE(N, C, H, W), image, SNN_CPU);
    check_graph_matches(m, x, SNN_SHAPE(H, N, C * W), rows, H);
    snn_step_end();
    snn_module_free(m);
}

static void test_alif_refused_naming_the_layer(void)
{
    snn_module *m = small_rsnn(SNN_ENCODING_EVENTS, SNN_NEURON_ALIF, 5, 0.0f);
    if (!m) return;
    CHECK(snn_nir_write("/tmp/test_nir_rsnn_alif.nir", m) == SNN_ERR_UNSUPPORTED);
    CHECK(strstr(snn_last_error(), "'rec1' is an adaptive LIF neuron") != NULL);
    CHECK(access("/tmp/test_nir_rsnn_alif.nir", F_OK) != 0);
    snn_module_free(m);
}

int main(void)
{
    RUN(test_events_graph_runs_as_the_model);
    RUN(test_rows_graph_takes_one_row_a_step);
    RUN(test_alif_refused_naming_the_layer);
    return test_finish();
}
#else
int main(void)
{
    fprintf(stderr, "skipped: built without the NIR library (no HDF5)\n");
    return 77;
}
#endif
