/*
 * test_nir_fixtures.c - the four graphs the reference `nir` package wrote (nir.write, v1.0.7;
 * ../shared/fixtures/nir/), in the shapes snnTorch, Norse and Sinabs export:
 *   - each reads, is written by snn.c's writer and reads back to the same graph (nodes, types,
 *     every parameter's values, edges, dt), and the copy runs to the same outputs, bit for bit;
 *   - each runs in snn.c against tests/nir/nir_reference.h (NIR's equations, forward Euler, in
 *     double) on random inputs over several steps, every output within 1e-5: mlp_lif (LIF at
 *     tau = 2 dt), mlp_cubalif_li (CubaLIF, LI readout), rlif (a LIF whose spikes come back
 *     through a Linear one step later) and conv_if_events (Conv2d, IF, SumPool2d, Flatten) at
 *     dt = 1 and dt = 0.5 (its file's dt = 1e-3 charges the IF by a thousandth of its input,
 *     too little to fire in a few steps), each checked to be doing something (spikes reach
 *     the output; rlif's recurrence changes it).
 * Skipped (77) without HDF5 or without the fixtures.
 *
 *     ctest -R nir_fixtures --output-on-failure
 */
#include "test.h"

#ifndef SNN_WITH_NIR
int main(void)
{
    fprintf(stderr, "skipped: built without HDF5 (install libhdf5-dev for NIR)\n");
    return 77;
}
#else
#include <unistd.h>

#include "nir/nir.h"
#include "tests/nir/nir_reference.h"
#include "tests/nir/nir_test_run.h"
#include "snn.h"

#define FIXTURES "../shared/fixtures/nir/"

static char tmp[256];

/* Whether graphs a and b hold the same nodes, arrays (values included) and edges. */
static bool same_graph(nir_graph *a, nir_graph *b)
{
    bool same = a->n_nodes == b->n_nodes && a->n_edges == b->n_edges && a->dt == b->dt;
    for (int i = 0; same && i < a->n_nodes; i++) {
        nir_node *x = &a->nodes[i], *y = nir_find_node(b, x->name);
        same = y && strcmp(x->type, y->type) == 0 && x->n_arrays == y->n_arrays;
        for (int k = 0; same && k < x->n_arrays; k++) {
            nir_array *p = &x->arrays[k], *q = nir_find_array(y, p->name);
            same = q && p->is_int == q->is_int && p->is_text == q->is_text &&
                   p->ndim == q->ndim && p->numel == q->numel &&
                   memcmp(p->dim, q->dim, sizeof p->dim) == 0 && strcmp(p->text, q->text) == 0;
            if (same && !p->is_text)
                same = p->is_int ? memcmp(p->i, q->i, (size_t)p->numel * sizeof *p->i) == 0
                                 : memcmp(p->f, q->f, (size_t)p->numel * sizeof *p->f) == 0;
            if (!same) fprintf(stderr, "  node '%s' array '%s' differs\n", x->name, p->name);
        }
    }
    for (int e = 0; same && e < a->n_edges; e++)
        same = strcmp(a->edges[e].src, b->edges[e].src) == 0 &&
               strcmp(a->edges[e].dst, b->edges[e].dst) == 0;
    return same;
}

/* Random inputs for the graph: (T, N, in...) event counts 0..3 when `events`, else (N, in...)
 * uniform in [0, scale). Returns the values (malloc'd) and their shape. */
static float *random_input(const snn_nir_info *info, int T, int N, bool events, float scale,
                           uint64_t seed, snn_shape *shape)
{
    *shape = (snn_shape){.ndim = info->input.ndim + (events ? 2 : 1)};
    int d = 0;
    if (events) shape->dim[d++] = T;
    shape->dim[d++] = N;
    for (int k = 0; k < info->input.ndim; k++) shape->dim[d++] = info->input.dim[k];
    int64_t numel = snn_shape_numel(*shape);
    float *x = malloc((size_t)numel * sizeof *x);
    snn_rng rng;
    snn_rng_seed(&rng, seed);
    for (int64_t k = 0; k < numel; k++)
        x[k] = events ? (float)snn_rng_below(&rng, 4) : scale * snn_rng_uniform(&rng);
    return x;
}

static void test_round_trips(void)
{
    const char *names[] = {"mlp_lif", "mlp_cubalif_li", "conv_if_events", "rlif"};
    for (int f = 0; f < 4; f++) {
        char path[256];
        snprintf(path, sizeof path, FIXTURES "%s.nir", names[f]);
        nir_graph a, b;
        CHECK_OK(nir_read_hdf5(&a, path));
        snn_module *m = nir_test_load(path, 5, 0.0, SNN_CPU);
        if (!m) {
            nir_graph_free(&a);
            continue;
        }
        CHECK_OK(snn_nir_write(tmp, m));
        CHECK_OK(nir_read_hdf5(&b, tmp));
        bool same = same_graph(&a, &b);
        CHECK(same);
        snn_module *copy = nir_test_load(tmp, 5, 0.0, SNN_CPU);
        snn_nir_info info;
        CHECK_OK(snn_nir_graph_info(m, &info));
        snn_shape shape;
        bool events = strcmp(names[f], "conv_if_events") == 0;
        float *x = random_input(&info, 5, 2, events, 2.0f, 7, &shape);
        int64_t count = 5 * 2 * snn_shape_numel(info.output);
        float *y0 = malloc((size_t)count * sizeof *y0), *y1 = malloc((size_t)count * sizeof *y1);
        bool ran = copy && nir_test_steps_on_host(m, shape, x, SNN_CPU, y0, count) &&
                   nir_test_steps_on_host(copy, shape, x, SNN_CPU, y1, count);
        CHECK(ran && test_same_bits(y0, y1, (long)count));
        fprintf(stderr, "  %-16s %d nodes, %d edges, dt %g: read, written, read back: %s\n",
                names[f], a.n_nodes, a.n_edges, a.dt, same && ran ? "the same" : "DIFFERENT");
        free(x), free(y0), free(y1);
        snn_module_free(m);
        snn_module_free(copy);
        nir_graph_free(&a);
        nir_graph_free(&b);
    }
    remove(tmp);
}

static int64_t nonzero; /* the last compare's outputs that are not 0 (spikes, where they spike) */

/* Runs fixture `name` in snn.c and in the reference over T steps for N samples; returns the
 * largest |difference|, and in *activity the largest |output| (nonzero counts the outputs that
 * are not 0). `zero_node`: a Linear whose weights the reference zeroes (to measure
 * in *without how far the output moves without it; NULL: none). */
static double compare(const char *name, const char *const *order, int n_order, double dt,
                      int T, int N, bool events, float scale, double *activity,
                      const char *zero_node, double *without)
{
    char path[256];
    snprintf(path, sizeof path, FIXTURES "%s.nir", name);
    snn_module *m = nir_test_load(path, T, dt, SNN_CPU);
    if (!m) return INFINITY;
    snn_nir_info info;
    CHECK_OK(snn_nir_graph_info(m, &info));
    snn_shape shape;
    float *x = random_input(&info, T, N, events, scale, 11, &shape);
    const int64_t count = (int64_t)T * N * snn_shape_numel(info.output);
    float *y = malloc((size_t)count * sizeof *y);
    double *want = malloc((size_t)count * sizeof *want);
    double *plain = malloc((size_t)count * sizeof *plain);
    nir_graph g;
    CHECK_OK(nir_read_hdf5(&g, path));
    double worst = INFINITY;
    if (nir_test_steps_on_host(m, shape, x, SNN_CPU, y, count) &&
        ref_run(&g, order, n_order, info.dt, x, events, T, N, want) == 0) {
        worst = 0.0;
        *activity = 0.0;
        nonzero = 0;
        for (int64_t k = 0; k < count; k++) {
            nonzero += want[k] != 0.0;
            worst = fmax(worst, fabs((double)y[k] - want[k]));
            *activity = fmax(*activity, fabs(want[k]));
        }
    }
    if (zero_node) { /* the same input with the recurrent weights zeroed */
        nir_array *w = nir_find_array(nir_find_node(&g, zero_node), "weight");
        memset(w->f, 0, (size_t)w->numel * sizeof *w->f);
        *without = 0.0;
        if (ref_run(&g, order, n_order, info.dt, x, events, T, N, plain) == 0)
            for (int64_t k = 0; k < count; k++) *without = fmax(*without, fabs(plain[k] - want[k]));
    }
    nir_graph_free(&g);
    free(x), free(y), free(want), free(plain);
    snn_module_free(m);
    return worst;
}

static void report(const char *what, double worst, double activity)
{
    fprintf(stderr, "  %-34s max |snn.c - reference| %.2e (largest output %.3f, %lld nonzero)\n",
            what, worst, activity, (long long)nonzero);
}

static void test_mlp_lif(void)
{
    const char *order[] = {"input", "fc1", "lif1", "fc2", "lif2", "output"};
    double activity = 0.0;
    double worst = compare("mlp_lif", order, 6, 0.0, 12, 4, false, 4.0f, &activity, NULL, NULL);
    report("mlp_lif (dt 1e-3, T 12)", worst, activity);
    CHECK(worst <= 1e-5);
    CHECK(activity == 1.0); /* lif2 fired */
}

static void test_mlp_cubalif_li(void)
{
    const char *order[] = {"input", "fc1", "cuba1", "fc2", "li", "output"};
    double activity = 0.0;
    double worst = compare("mlp_cubalif_li", order, 6, 0.0, 16, 4, false, 2.0f, &activity, NULL,
                           NULL);
    report("mlp_cubalif_li (dt 1e-3, T 16)", worst, activity);
    CHECK(worst <= 1e-5);
    CHECK(activity > 1e-2); /* the LI readout has no bias: only CubaLIF spikes move it */
}

static void test_rlif(void)
{
    /* fc_rec runs after lif: its edge back into lif carries the spikes of step t-1 */
    const char *order[] = {"input", "fc_in", "lif", "fc_rec", "fc_out", "output"};
    double activity = 0.0, without = 0.0;
    double worst = compare("rlif", order, 6, 0.0, 40, 4, false, 2.0f, &activity, "fc_rec",
                           &without);
    report("rlif (dt 1e-3, T 40)", worst, activity);
    fprintf(stderr, "  %-34s the recurrence moves the output by up to %.3f\n", "", without);
    CHECK(worst <= 1e-5);
    CHECK(without > 1e-2); /* spikes happened, and came back */
}

static void test_conv_if_events(void)
{
    const char *order[] = {"input", "conv1", "if1", "pool1", "flat", "fc", "if2", "output"};
    const double dts[] = {1.0, 0.5}; /* snn.c's IF kernel (dt r = 1), then the per-step ops */
    for (int k = 0; k < 2; k++) {
        double activity = 0.0;
        double worst = compare("conv_if_events", order, 8, dts[k], 6, 3, true, 0.0f, &activity,
                               NULL, NULL);
        char what[64];
        snprintf(what, sizeof what, "conv_if_events (dt %g, T 6)", dts[k]);
        report(what, worst, activity);
        CHECK(worst <= 1e-5);
        CHECK(activity == 1.0); /* if2 fired */
    }
}

int main(void)
{
    if (access(FIXTURES "rlif.nir", R_OK) != 0) {
        fprintf(stderr, "skipped: the fixtures are not at " FIXTURES " (run from the repository "
                "root, beside ../shared)\n");
        return 77;
    }
    snprintf(tmp, sizeof tmp, "/tmp/snn_test_nir_fixtures_%d.nir", (int)getpid());
    RUN(test_round_trips);
    RUN(test_mlp_lif);
    RUN(test_mlp_cubalif_li);
    RUN(test_rlif);
    RUN(test_conv_if_events);
    return test_finish();
}
#endif
