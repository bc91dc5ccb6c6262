/*
 * test_backend_ops.c - the parity harness (backend_ops.h) on the fast CPU tables,
 * snn_kernels_cpu and snn_neuron_kernels_cpu (kernels/cpu/), against the reference tables
 * (kernels/ref/): every entry, in fp32, over the shapes each fast kernel special-cases
 * (blocked, vectorised, threaded). The CUDA table has its own program, test_cuda_backend_ops.c.
 *
 * It prints one row per case (op, case, backend, mode, worst error ratio, OK / FAIL) and the
 * counts, and fails by its exit code.
 *     ctest --test-dir build -R '^backend_ops$' --output-on-failure
 *     SNN_TEST_OP=conv2d build/bin/test_backend_ops     (one op, e.g. while debugging it)
 */
#include "backend_ops.h"

static const bo_mode cpu_modes[] = {
    {"fp32", SNN_PRECISION_FP32, 0, false, {BO_ROUND_NONE, BO_ROUND_NONE},
     {{0.0, 1e-5, 1e-5}, {0.0, 1e-5, 1e-5}}},
};

int main(void)
{
    /* at least two threads, so that the threaded paths run on a one-core machine too (they give
     * the one-thread bits at any count: tests/test_cpu_threads.c) */
    if (snn_get_num_threads() < 2) snn_set_num_threads(2);
    const bo_backend cpu = {"cpu", &snn_kernels_cpu, &snn_neuron_kernels_cpu, SNN_CPU,
                            cpu_modes, 1, NULL, NULL, false};
    return bo_main(&cpu);
}
