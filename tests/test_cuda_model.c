/*
 * test_cuda_model.c - models on the GPU against the CPU. Skipped (exit 77) without a GPU.
 *   - the golden check of test_model.c: the tiny spiking ResNet-18 on CUDA against the PyTorch
 *     reference file;
 *   - the spiking CNN with dropout (config.dropout, masks shared over T) in training mode: the
 *     same weights and the same model stream on both devices draw the same masks (a hash of
 *     seed and index, kernels/cpu/dropout.c), so the per-step outputs agree within 1e-4 + 1e-4 |cpu|
 *     for at least three quarters of them (the convs sum in other orders, which may flip a spike
 *     whose membrane sits within rounding of the threshold and move the outputs after it), and
 *     both streams advance alike. Control: with the GPU's stream one step further (other
 *     masks) fewer than half agree, so the check sees the masks.
 */
#include "model_golden.h"

static void test_golden_cuda(void) { golden_check(SNN_CUDA); }

/* The per-step outputs (T, N, K) of m's training forward on host images x into out. */
static void steps_on(snn_module *m, snn_device device, const float *x, snn_shape shape, float *out)
{
    snn_step_begin();
    snn_tensor *steps = snn_model_forward_steps(m, snn_from_host(shape, x, device));
    CHECK(steps != NULL);
    if (steps) CHECK_OK(snn_tensor_copy_to_host(steps, out));
    else fprintf(stderr, "  forward on %s: %s\n", snn_device_name(device), snn_last_error());
    snn_step_end();
}

static int64_t count_close(const float *got, const float *want, int64_t n)
{
    int64_t close = 0;
    for (int64_t i = 0; i < n; i++)
        close += fabs((double)got[i] - (double)want[i]) <= 1e-4 + 1e-4 * fabs((double)want[i]);
    return close;
}

static void test_cnn_dropout_cpu_vs_cuda(void)
{
    snn_model_config c = snn_model_config_default(SNN_MODEL_SPIKING_CNN);
    c.width_base = 8, c.hidden = 64, c.time_steps = 4, c.dropout = 0.5f;
    c.neuron.v_threshold = 0.3f; /* an untrained net whose classifier fires */
    snn_rng rng;
    snn_rng_seed(&rng, 21);
    snn_module *cpu = snn_model_new(&c, &rng);
    snn_rng_seed(&rng, 21);
    snn_module *gpu = snn_model_new(&c, &rng);
    CHECK(cpu && gpu);
    const int N = 8;
    const snn_shape shape = SNN_SHAPE(N, 1, 28, 28);
    const int64_t n = (int64_t)c.time_steps * N * c.classes;
    float *x = malloc((size_t)N * 28 * 28 * sizeof *x);
    float *want = malloc((size_t)n * sizeof *want), *got = malloc((size_t)n * sizeof *got);
    if (cpu && gpu && x && want && got && snn_module_to(gpu, SNN_CUDA) == SNN_OK) {
        for (int i = 0; i < N * 28 * 28; i++) x[i] = 3.0f * snn_rng_uniform(&rng);
        CHECK(snn_model_rng_state(cpu) == snn_model_rng_state(gpu));
        steps_on(cpu, SNN_CPU, x, shape, want);
        steps_on(gpu, SNN_CUDA, x, shape, got);
        CHECK(snn_model_rng_state(cpu) == snn_model_rng_state(gpu));
        const int64_t close = count_close(got, want, n);
        fprintf(stderr, "  %lld of %lld per-step outputs agree\n", (long long)close, (long long)n);
        CHECK(4 * close >= 3 * n);
        /* control: other masks on the GPU */
        steps_on(gpu, SNN_CUDA, x, shape, got);
        const int64_t control = count_close(got, want, n);
        fprintf(stderr, "  with other masks: %lld of %lld\n", (long long)control, (long long)n);
        CHECK(2 * control < n);
    } else {
        CHECK(false);
        fprintf(stderr, "  setup: %s\n", snn_last_error());
    }
    free(x);
    free(want);
    free(got);
    snn_module_free(cpu);
    snn_module_free(gpu);
}

int main(void)
{
    test_require_cuda();
    RUN(test_golden_cuda);
    RUN(test_cnn_dropout_cpu_vs_cuda);
    return test_finish();
}
