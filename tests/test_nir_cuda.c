/*
 * test_nir_cuda.c - the NIR executor on CUDA (label "cuda"; exits 77 without a GPU): the
 * graphs of tests/test_nir_exec.c (per-neuron LIF and CubaLI, IF / I / Threshold, a cycle
 * through a Delay and a self-loop, Conv2d with CubaLIF and pools) and the fixtures
 * mlp_cubalif_li and rlif run on the GPU within 1e-5 of tests/nir/nir_reference.h, as on the
 * CPU; and the gradient of a recurrent graph without spikes with respect to its input matches
 * the CPU's within 1e-4.
 *
 *     ctest -R nir_cuda --output-on-failure      (on the GPU machine)
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
#include "snn.h"

static char path[256];

/* Runs the graph in `file` on `device` and in the reference over T steps for N samples on x
 * (a sequence when `sequence`); the largest |difference|. */
static double on_device(const char *file, const char *const *order, int n_order, bool sequence,
                        int T, int N, snn_device device)
{
    snn_module *m = nir_test_load(file, T, 0.0, device);
    if (!m) return INFINITY;
    snn_nir_info info;
    CHECK_OK(snn_nir_graph_info(m, &info));
    snn_shape shape = {.ndim = info.input.ndim + (sequence ? 2 : 1)};
    int d = 0;
    if (sequence) shape.dim[d++] = T;
    shape.dim[d++] = N;
    for (int k = 0; k < info.input.ndim; k++) shape.dim[d++] = info.input.dim[k];
    const int64_t numel = snn_shape_numel(shape);
    const int64_t count = (int64_t)T * N * snn_shape_numel(info.output);
    float *x = malloc((size_t)numel * sizeof *x), *y = malloc((size_t)count * sizeof *y);
    double *want = malloc((size_t)count * sizeof *want), worst = INFINITY;
    snn_rng rng;
    snn_rng_seed(&rng, 4);
    for (int64_t k = 0; k < numel; k++) x[k] = 2.0f * snn_rng_uniform(&rng);
    nir_graph g;
    CHECK_OK(nir_read_hdf5(&g, file));
    bool ran = nir_test_steps_on_host(m, shape, x, device, y, count);
    if (ran && ref_run(&g, order, n_order, info.dt, x, sequence, T, N, want) == 0) {
        worst = 0.0;
        for (int64_t k = 0; k < count; k++) worst = fmax(worst, fabs((double)y[k] - want[k]));
    }
    nir_graph_free(&g);
    free(x), free(y), free(want);
    snn_module_free(m);
    return worst;
}

static void test_graphs_on_cuda(void)
{
    struct {
        const char *what;
        void (*make)(nir_graph *);
        const char *const *order;
        int n_order;
        bool sequence;
        int T, N;
    } cases[] = {
        {"LIF, CubaLI, Scale per neuron", graph_leaky_varied, leaky_order, 7, false, 10, 3},
        {"IF, I, Threshold, converging", graph_integrators, integrators_order, 8, false, 10, 3},
        {"cycles: Delay, a self-loop", graph_cycles, cycles_order, 9, true, 12, 3},
        {"Conv2d, CubaLIF, pools, Flatten", graph_conv, conv_order, 8, true, 6, 2},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        nir_graph g = {0};
        cases[c].make(&g);
        g.dt = 1e-3;
        CHECK_OK(nir_write_hdf5(&g, path));
        nir_graph_free(&g);
        double worst = on_device(path, cases[c].order, cases[c].n_order, cases[c].sequence,
                                 cases[c].T, cases[c].N, SNN_CUDA);
        fprintf(stderr, "  %-34s cuda: max |snn.c - reference| %.2e\n", cases[c].what, worst);
        CHECK(worst <= 1e-5);
    }
    const char *cuba[] = {"input", "fc1", "cuba1", "fc2", "li", "output"};
    const char *rlif[] = {"input", "fc_in", "lif", "fc_rec", "fc_out", "output"};
    if (access("../shared/fixtures/nir/rlif.nir", R_OK) == 0) {
        double a = on_device("../shared/fixtures/nir/mlp_cubalif_li.nir", cuba, 6, false, 16, 4,
                             SNN_CUDA);
        double b = on_device("../shared/fixtures/nir/rlif.nir", rlif, 6, false, 40, 4, SNN_CUDA);
        fprintf(stderr, "  fixtures on cuda: mlp_cubalif_li %.2e, rlif %.2e\n", a, b);
        CHECK(a <= 1e-5 && b <= 1e-5);
    }
}

/* d(sum(steps * R)) / dx of the smooth recurrent graph, on `device`, into host memory dx */
static void input_gradient(snn_device device, const float *x, const float *r, float *dx)
{
    snn_module *m = nir_test_load(path, 6, 0.0, device);
    if (!m) return;
    snn_step_begin();
    snn_tensor *in = snn_from_host(SNN_SHAPE(2, 3), x, device);
    in->requires_grad = true;
    snn_tensor *steps = snn_nir_forward_steps(m, in);
    snn_tensor *loss = snn_sum_all(snn_mul(steps, snn_from_host(SNN_SHAPE(6, 2, 2), r, device)));
    CHECK(loss && snn_backward(loss) == SNN_OK && in->grad);
    if (in->grad) snn_tensor_copy_to_host(in->grad, dx);
    snn_step_end();
    snn_module_free(m);
}

static void test_gradient_on_cuda(void)
{
    nir_graph g = {0};
    graph_smooth(&g);
    g.dt = 1e-3;
    CHECK_OK(nir_write_hdf5(&g, path));
    nir_graph_free(&g);
    float x[6], r[24], cpu[6] = {0}, gpu[6] = {0};
    for (int k = 0; k < 6; k++) x[k] = graph_uniform(0.0f, 2.0f);
    for (int k = 0; k < 24; k++) r[k] = graph_uniform(-1.0f, 1.0f);
    input_gradient(SNN_CPU, x, r, cpu);
    input_gradient(SNN_CUDA, x, r, gpu);
    CHECK_ALL_CLOSE(gpu, cpu, 6, 1e-4, 1e-4);
}

int main(void)
{
    test_require_cuda();
    snprintf(path, sizeof path, "/tmp/snn_test_nir_cuda_%d.nir", (int)getpid());
    snn_rng_seed(&graph_rng, 2024);
    RUN(test_graphs_on_cuda);
    RUN(test_gradient_on_cuda);
    remove(path);
    return test_finish();
}
#endif
