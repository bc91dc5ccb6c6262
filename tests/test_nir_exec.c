/*
 * test_nir_exec.c - the NIR executor (nir/nir_run.c) on graphs written from C
 * (tests/nir/nir_graphs.h), every node kind it runs, against tests/nir/nir_reference.h (NIR's
 * equations in double) within 1e-5:
 *   - LIF with a value per neuron (tau, r, v_leak != v_reset, thresholds), Linear, CubaLI,
 *     Scale; IF and I with r per neuron, converging edges, Threshold per neuron;
 *   - cycles: a LIF fed back through a Delay (a delay per neuron, 0 to 3 steps) and a Linear,
 *     an I node feeding itself, two terms summed into the Output;
 *   - Conv2d with padding "same", CubaLIF per neuron on (C, H, W), AvgPool2d, SumPool2d,
 *     Flatten, Affine, on (T, N, C, H, W) sequences;
 * and: a sequence of repeated frames gives what the repeated image gives; gradients through
 * the executor (gradcheck of a recurrent graph without spikes; weight gradients through spikes
 * by the surrogate); the time-axis ops; snn_nir_write of an imported graph keeps its new
 * weights; a dt given by the caller wins over the file's; an input without a time axis needs T.
 *
 *     ctest -R nir_exec --output-on-failure
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

#include "autograd/autograd.h"
#include "nir/nir.h"
#include "tests/nir/nir_graphs.h"
#include "tests/nir/nir_reference.h"
#include "tests/nir/nir_test_run.h"
#include "nir/nir_run.h"
#include "snn.h"

static char path[256];

/* ---- running ------------------------------------------------------------------------------- */

/* Writes g (dt 1e-3) to `path`, frees it, and loads it with T and dt (0: the file's). */
static snn_module *load(nir_graph *g, int T, double dt)
{
    g->dt = 1e-3;
    CHECK_OK(nir_write_hdf5(g, path));
    nir_graph_free(g);
    return nir_test_load(path, T, dt, SNN_CPU);
}

/* The Output at every step, (T, N, out...), into host memory y. */
static bool steps_on_host(snn_module *m, snn_shape shape, const float *x, float *y, int64_t count)
{
    return nir_test_steps_on_host(m, shape, x, SNN_CPU, y, count);
}

/* Builds a graph with `make`, runs it in snn.c and in the reference on x of `shape` (a
 * sequence when it has a time axis) over T steps; returns the largest |difference| and counts
 * in *nonzero the reference's outputs that are not 0. */
static double against_reference(void (*make)(nir_graph *), const char *const *order, int n_order,
                                snn_shape shape, bool sequence, int T, float scale,
                                int64_t *nonzero)
{
    nir_graph g = {0}, read;
    make(&g);
    snn_module *m = load(&g, T, 0.0);
    if (!m) return INFINITY;
    snn_nir_info info;
    CHECK_OK(snn_nir_graph_info(m, &info));
    const int N = (int)shape.dim[sequence ? 1 : 0];
    const int64_t count = (int64_t)T * N * snn_shape_numel(info.output);
    const int64_t numel = snn_shape_numel(shape);
    float *x = malloc((size_t)numel * sizeof *x), *y = malloc((size_t)count * sizeof *y);
    double *want = malloc((size_t)count * sizeof *want);
    for (int64_t k = 0; k < numel; k++) x[k] = graph_uniform(0.0f, scale);
    CHECK_OK(nir_read_hdf5(&read, path));
    double worst = INFINITY;
    *nonzero = 0;
    if (steps_on_host(m, shape, x, y, count) &&
        ref_run(&read, order, n_order, 1e-3, x, sequence, T, N, want) == 0) {
        worst = 0.0;
        for (int64_t k = 0; k < count; k++) {
            worst = fmax(worst, fabs((double)y[k] - want[k]));
            *nonzero += want[k] != 0.0;
        }
    }
    nir_graph_free(&read);
    free(x), free(y), free(want);
    snn_module_free(m);
    return worst;
}

static void test_node_kinds(void)
{
    struct {
        const char *what;
        void (*make)(nir_graph *);
        const char *const *order;
        int n_order;
        snn_shape shape;
        bool sequence;
        int T;
        float scale;
    } cases[] = {
        {"LIF, CubaLI, Scale per neuron", graph_leaky_varied, leaky_order, 7, SNN_SHAPE(3, 5),
         false, 10, 2.0f},
        {"IF, I, Threshold, converging", graph_integrators, integrators_order, 8, SNN_SHAPE(3, 5),
         false, 10, 2.0f},
        {"cycles: Delay, a self-loop", graph_cycles, cycles_order, 9, SNN_SHAPE(12, 3, 4), true,
         12, 2.0f},
        {"Conv2d, CubaLIF, pools, Flatten", graph_conv, conv_order, 8, SNN_SHAPE(6, 2, 2, 8, 8),
         true, 6, 2.0f},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int64_t nonzero = 0;
        double worst = against_reference(cases[c].make, cases[c].order, cases[c].n_order,
                                         cases[c].shape, cases[c].sequence, cases[c].T,
                                         cases[c].scale, &nonzero);
        fprintf(stderr, "  %-34s max |snn.c - reference| %.2e (%lld outputs not 0)\n",
                cases[c].what, worst, (long long)nonzero);
        CHECK(worst <= 1e-5);
        CHECK(nonzero > 0);
    }
}

/* A sequence of T copies of the image gives what the image repeated over T gives. */
static void test_sequence_equals_repeat(void)
{
    nir_graph g = {0};
    graph_leaky(&g, true);
    snn_module *m = load(&g, 6, 0.0);
    if (!m) return;
    const int T = 6, N = 3, F = 5;
    float x[3 * 5], xs[6 * 3 * 5], a[6 * 3 * 6], b[6 * 3 * 6];
    for (int k = 0; k < N * F; k++) x[k] = graph_uniform(0.0f, 2.0f);
    for (int t = 0; t < T; t++) memcpy(xs + t * N * F, x, sizeof x);
    CHECK(steps_on_host(m, SNN_SHAPE(N, F), x, a, T * N * 6));
    CHECK(steps_on_host(m, SNN_SHAPE(T, N, F), xs, b, T * N * 6));
    CHECK(test_same_bits(a, b, T * N * 6));
    snn_module_free(m);
}

static snn_module *grad_graph;

static snn_tensor *graph_steps(snn_tensor *const *inputs, void *ctx)
{
    (void)ctx;
    return snn_nir_forward_steps(grad_graph, inputs[0]);
}

static void test_gradients(void)
{
    /* gradcheck of x -> the Output at every step (T = 6 > 4: the stack's tree), through a
     * cycle, a Delay with two delays, LI and CubaLI */
    nir_graph g = {0};
    graph_smooth(&g);
    grad_graph = load(&g, 6, 0.0);
    if (!grad_graph) return;
    snn_step_begin();
    snn_tensor *x = test_uniform(SNN_SHAPE(2, 3), 0.0f, 2.0f, 5);
    x->requires_grad = true;
    snn_gradcheck_options o = {.eps = 1e-2f, .atol = 1e-3f, .rtol = 1e-2f, .seed = 3};
    CHECK_OK(snn_gradcheck("nir graph steps", graph_steps, 1, &x, NULL, o));
    snn_tensor *xs = test_uniform(SNN_SHAPE(6, 2, 3), 0.0f, 2.0f, 6); /* a sequence: steps of x */
    xs->requires_grad = true;
    CHECK_OK(snn_gradcheck("nir graph steps, sequence", graph_steps, 1, &xs, NULL, o));
    snn_step_end();
    snn_module_free(grad_graph);

    /* through spikes (the surrogate): the first Affine's weights get a gradient, per-neuron
     * LIF (elementwise ops) and uniform LIF (snn.c's kernel) alike */
    for (int varied = 0; varied < 2; varied++) {
        nir_graph h = {0};
        graph_leaky(&h, varied == 1);
        snn_module *m = load(&h, 6, 0.0);
        if (!m) continue;
        snn_module_zero_grad(m);
        snn_step_begin();
        snn_tensor *in = test_uniform(SNN_SHAPE(4, 5), 0.0f, 3.0f, 8);
        float labels_host[4] = {0, 1, 2, 3};
        snn_tensor *labels = snn_from_host(SNN_SHAPE(4), labels_host, SNN_CPU);
        snn_tensor *loss = snn_cross_entropy(snn_module_forward(m, in), labels);
        CHECK(loss != NULL);
        if (loss) CHECK_OK(snn_backward(loss));
        snn_step_end();
        snn_tensor *w = m->children[0]->params[0].tensor;
        float *grad = w->grad ? test_to_host(w->grad) : NULL;
        double norm = 0.0;
        for (int64_t k = 0; grad && k < w->numel; k++) norm += fabs((double)grad[k]);
        fprintf(stderr, "  %-34s |dloss / dfc1.weight| summed: %.4f\n",
                varied ? "spiking, per-neuron LIF" : "spiking, snn.c's LIF kernel", norm);
        CHECK(grad && norm > 0.0 && isfinite(norm));
        free(grad);
        snn_module_free(m);
    }
}

/* nir_time_stack and nir_time_step, forward and backward, for T = 1, 4, 5, 17 */
static void test_time_ops(void)
{
    const int counts[] = {1, 4, 5, 17};
    for (int c = 0; c < 4; c++) {
        const int T = counts[c];
        snn_step_begin();
        snn_tensor *steps[17];
        for (int t = 0; t < T; t++) {
            steps[t] = test_uniform(SNN_SHAPE(2, 3), -1.0f, 1.0f, (uint64_t)(10 + t));
            steps[t]->requires_grad = true;
        }
        snn_tensor *stack = nir_time_stack(steps, T);
        CHECK(stack && stack->shape.ndim == 3 && stack->shape.dim[0] == T);
        snn_tensor *r = test_uniform(SNN_SHAPE(T, 2, 3), -1.0f, 1.0f, 99);
        if (stack) CHECK_OK(snn_backward(snn_sum_all(snn_mul(stack, r))));
        float *hs = test_to_host(stack), *hr = test_to_host(r);
        bool same = hs != NULL, grads = true;
        for (int t = 0; t < T && same; t++) {
            float *ht = test_to_host(steps[t]), *hg = test_to_host(steps[t]->grad);
            same = test_same_bits(ht, hs + 6 * t, 6);
            grads = grads && hg && test_same_bits(hg, hr + 6 * t, 6);
            free(ht), free(hg);
        }
        CHECK(same && grads);
        /* a step of the stack is that step, and its gradient lands there */
        snn_tensor *whole = test_uniform(SNN_SHAPE(T, 2, 3), -1.0f, 1.0f, 7);
        whole->requires_grad = true;
        snn_tensor *last = nir_time_step(whole, T - 1);
        CHECK(last && last->numel == 6);
        if (last) CHECK_OK(snn_backward(snn_sum_all(last)));
        float *hw = test_to_host(whole), *hl = test_to_host(last), *hg = test_to_host(whole->grad);
        CHECK(hl && test_same_bits(hl, hw + 6 * (T - 1), 6));
        double inside = 0.0, outside = 0.0;
        for (int k = 0; hg && k < 6 * T; k++) {
            if (k >= 6 * (T - 1)) inside += (double)hg[k];
            else outside += (double)hg[k];
        }
        CHECK(inside == 6.0 && outside == 0.0);
        free(hs), free(hr), free(hw), free(hl), free(hg);
        snn_step_end();
    }
}

/* snn_nir_write of an imported graph: the same graph with the layers' current weights */
static void test_write_back(void)
{
    nir_graph g = {0};
    graph_leaky(&g, true);
    snn_module *m = load(&g, 4, 0.0);
    if (!m) return;
    nir_graph before, after;
    CHECK_OK(nir_read_hdf5(&before, path));
    CHECK_OK(snn_tensor_fill(m->children[0]->params[0].tensor, 0.25f)); /* fc1.weight */
    CHECK_OK(snn_nir_write(path, m));
    CHECK_OK(nir_read_hdf5(&after, path));
    nir_array *w = nir_find_array(nir_find_node(&after, "fc1"), "weight");
    bool all = w && w->numel == 30;
    for (int64_t k = 0; all && k < w->numel; k++) all = w->f[k] == 0.25f;
    CHECK(all);
    nir_array *a = nir_find_array(nir_find_node(&before, "lif"), "tau");
    nir_array *b = nir_find_array(nir_find_node(&after, "lif"), "tau");
    CHECK(a && b && a->numel == b->numel && test_same_bits(a->f, b->f, (long)a->numel));
    CHECK(after.dt == 1e-3 && after.n_edges == before.n_edges);
    nir_graph_free(&before);
    nir_graph_free(&after);
    snn_module_free(m);
}

/* The caller's dt wins over the file's: an LI at 2 ms steps, as the reference at 2 ms */
static void test_dt_given(void)
{
    nir_graph g = {0};
    graph_input(&g, "input", 1, (int64_t[]){3});
    graph_neuron(&g, "LI", "li", 1, (int64_t[]){3}, true);
    graph_output(&g, "output", 1, (int64_t[]){3});
    graph_chain(&g, (const char *[]){"input", "li", "output"}, 3);
    snn_module *m = load(&g, 5, 2e-3);
    if (!m) return;
    snn_nir_info info;
    CHECK_OK(snn_nir_graph_info(m, &info));
    CHECK(info.dt == 2e-3 && !info.dt_from_file && info.back_edges == 0);
    float x[6] = {0.5f, 1.0f, 1.5f, 2.0f, 0.0f, 1.0f}, y[30];
    double want[30];
    nir_graph read;
    CHECK_OK(nir_read_hdf5(&read, path));
    const char *order[] = {"input", "li", "output"};
    CHECK(steps_on_host(m, SNN_SHAPE(2, 3), x, y, 30));
    CHECK(ref_run(&read, order, 3, 2e-3, x, false, 5, 2, want) == 0);
    double worst = 0.0;
    for (int k = 0; k < 30; k++) worst = fmax(worst, fabs((double)y[k] - want[k]));
    CHECK(worst <= 1e-6);
    nir_graph_free(&read);
    snn_module_free(m);
}

/* Without T (none given, none in the file) an input without a time axis is refused, with a
 * hint; a sequence runs */
static void test_time_steps_needed(void)
{
    nir_graph g = {0};
    graph_leaky(&g, false);
    snn_module *m = load(&g, 0, 0.0);
    if (!m) return;
    snn_step_begin();
    snn_tensor *y = snn_module_forward(m, test_uniform(SNN_SHAPE(2, 5), 0.0f, 1.0f, 1));
    CHECK(y == NULL && strstr(snn_last_error(), "time_steps"));
    y = snn_module_forward(m, test_uniform(SNN_SHAPE(3, 2, 5), 0.0f, 1.0f, 1));
    CHECK(y != NULL && y->shape.ndim == 2 && y->shape.dim[1] == 6);
    y = snn_module_forward(m, test_uniform(SNN_SHAPE(2, 4), 0.0f, 1.0f, 1)); /* 4 features */
    CHECK(y == NULL && strstr(snn_last_error(), "'x'"));
    snn_step_end();
    snn_module_free(m);
}

int main(void)
{
    snprintf(path, sizeof path, "/tmp/snn_test_nir_exec_%d.nir", (int)getpid());
    snn_rng_seed(&graph_rng, 2024);
    RUN(test_node_kinds);
    RUN(test_sequence_equals_repeat);
    RUN(test_gradients);
    RUN(test_time_ops);
    RUN(test_write_back);
    RUN(test_dt_given);
    RUN(test_time_steps_needed);
    remove(path);
    return test_finish();
}
#endif
