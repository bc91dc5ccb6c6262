/*
 * test_cuda_recurrent.c - the recurrent spiking layer snn_recurrent_multistep
 * (neurons/recurrent.c) on CUDA against the CPU, through the public API: spikes, activity and
 * the gradients of x and w_rec after backward through the tape, for IF, LIF and ALIF (when the
 * CUDA table has ALIF's kernels; else its refusal), hard and soft reset, detach_reset on and
 * off, T = 1, 5, 17, with small odd shapes and one wider than a cuBLAS tile; and the layer
 * module moved to the GPU.
 *
 * The op has no kernel of its own: each step is the device's GEMM (cuBLAS) and the neuron
 * table's forward. The inputs and weights are multiples of 1/64 with few bits, so every sum
 * S[t-1] W_rec^T is exact in any order (and in TF32): the currents, hence the spikes and the
 * activity, must be equal bit for bit. Gradients are real-valued sums whose order cuBLAS picks:
 * |gpu - cpu| <= 1e-5 (max |cpu| of the tensor) + 1e-5 |cpu|.
 *
 * Without a GPU (or in a build without CUDA) it exits 77: ctest reports it as skipped.
 * Run on the GPU machine: ctest -R cuda_recurrent --output-on-failure
 */
#include <string.h>

#include "kernels/neuron_kernels.h"
#include "snn.h"
#include "test.h"

#define T_MAX 17
#define N_MAX 5
#define F_MAX 37
#define NUMEL_MAX (T_MAX * N_MAX * F_MAX)

typedef struct result {
    float spikes[NUMEL_MAX], activity[NUMEL_MAX], gx[NUMEL_MAX], gw[F_MAX * F_MAX];
    bool ok;
} result;

static result cpu, gpu;
static int cases;

/* An OWNED tensor on `device` holding host values, requires_grad set. */
static snn_tensor *param_on(snn_device device, snn_shape shape, const float *host)
{
    snn_tensor *t = snn_tensor_new(shape, device);
    if (!t) return NULL;
    CHECK_OK(snn_tensor_copy_from_host(t, host));
    t->requires_grad = true;
    return t;
}

static void run(result *res, snn_device device, const snn_neuron_config *c, int T, int N, int F,
                const float *x_host, const float *w_host, const float *r)
{
    memset(res, 0, sizeof *res);
    snn_tensor *x = param_on(device, SNN_SHAPE(T, N, F), x_host);
    snn_tensor *w = param_on(device, SNN_SHAPE(F, F), w_host);
    CHECK(x && w);
    CHECK_OK(snn_step_begin());
    snn_tensor *activity = NULL;
    snn_tensor *s = x && w ? snn_recurrent_multistep(x, w, c, &activity) : NULL;
    CHECK(s != NULL && activity != NULL);
    if (s && activity) {
        CHECK_OK(snn_tensor_copy_to_host(s, res->spikes));
        CHECK_OK(snn_tensor_copy_to_host(activity, res->activity));
        CHECK_OK(snn_backward_from(s, snn_from_host(SNN_SHAPE(T, N, F), r, device)));
        CHECK_OK(snn_tensor_copy_to_host(x->grad, res->gx));
        if (T > 1) CHECK_OK(snn_tensor_copy_to_host(w->grad, res->gw)); /* T = 1: no grad */
        res->ok = true;
    } else {
        fprintf(stderr, "snn_recurrent_multistep on %s: %s\n", snn_device_name(device),
                snn_last_error());
    }
    snn_step_end();
    snn_tensor_free(x);
    snn_tensor_free(w);
}

/* Gradients: within 1e-5 of the tensor's scale, plus 1e-5 relative. */
static void check_grad(const float *got, const float *want, int n, const char *what)
{
    double scale = 0.0;
    for (int i = 0; i < n; i++) scale = fmax(scale, fabs((double)want[i]));
    long where = 0;
    const double worst = test_worst_ratio(got, want, n, 1e-5 * scale + 1e-12, 1e-5, &where);
    CHECK(worst <= 1.0);
    if (!(worst <= 1.0))
        fprintf(stderr, "%s: [%ld] gpu %.9g, cpu %.9g\n", what, where, (double)got[where],
                (double)want[where]);
}

static void check_case(const snn_neuron_config *c, int T, int N, int F, uint64_t seed)
{
    cases++;
    snn_rng rng;
    snn_rng_seed(&rng, seed);
    static float x[NUMEL_MAX], r[NUMEL_MAX], w[F_MAX * F_MAX];
    const int n = T * N * F;
    /* multiples of 1/64: every sum of currents is exact whatever its order */
    for (int i = 0; i < n; i++) {
        x[i] = floorf(64.0f * (0.8f * snn_rng_normal(&rng) + 0.7f)) / 64.0f;
        r[i] = snn_rng_normal(&rng);
    }
    const float bound = 1.5f / sqrtf((float)F);
    for (int i = 0; i < F * F; i++)
        w[i] = floorf(64.0f * bound * (2.0f * snn_rng_uniform(&rng) - 1.0f)) / 64.0f;
    run(&cpu, SNN_CPU, c, T, N, F, x, w, r);
    run(&gpu, SNN_CUDA, c, T, N, F, x, w, r);
    char what[160];
    snprintf(what, sizeof what, "%s reset=%s detach=%d T=%d N=%d F=%d",
             snn_neuron_kind_name(c->kind), c->reset == SNN_RESET_SOFT ? "soft" : "hard",
             c->detach_reset, T, N, F);
    if (!cpu.ok || !gpu.ok) {
        fprintf(stderr, "  ^ in %s\n", what);
        return;
    }
    const int before = test_failures;
    CHECK(test_same_bits(gpu.spikes, cpu.spikes, n));
    CHECK(test_same_bits(gpu.activity, cpu.activity, n));
    int fired = 0;
    for (int i = 0; i < n; i++) fired += cpu.spikes[i] != 0.0f;
    /* the case must exercise both outcomes; one step of 21 elements may charge none to the
     * threshold (H = X / tau at t = 0), so that is asked of T > 1 only */
    CHECK(fired < n && (T == 1 || fired > 0));
    check_grad(gpu.gx, cpu.gx, n, "dx");
    check_grad(gpu.gw, cpu.gw, F * F, "dw_rec");
    if (test_failures != before) fprintf(stderr, "  ^ in %s\n", what);
}

static void test_op_against_cpu(void)
{
    const snn_neuron_kernels *k = snn_neuron_kernels_for(SNN_CUDA);
    const bool alif = k && k->alif_forward && k->alif_backward;
    const snn_neuron_kind kinds[3] = {SNN_NEURON_IF, SNN_NEURON_LIF, SNN_NEURON_ALIF};
    static const int Ts[3] = {1, 5, 17};
    static const int shapes[2][2] = {{3, 7}, {5, 37}}; /* (N, F) */
    uint64_t seed = 1;
    for (int ik = 0; ik < (alif ? 3 : 2); ik++)
        for (int soft = 0; soft < 2; soft++)
            for (int detach = 0; detach < 2; detach++)
                for (int it = 0; it < 3; it++)
                    for (int is = 0; is < 2; is++) {
                        snn_neuron_config c = snn_neuron_config_default(kinds[ik]);
                        c.surrogate = snn_surrogate_default(
                            (snn_surrogate_kind)(seed % SNN_SURROGATE_COUNT));
                        c.reset = soft ? SNN_RESET_SOFT : SNN_RESET_HARD;
                        c.detach_reset = detach != 0;
                        if (kinds[ik] == SNN_NEURON_ALIF) c.tau_adapt = 5.0f, c.beta = 0.5f;
                        check_case(&c, Ts[it], shapes[is][0], shapes[is][1], seed++);
                    }
    if (!alif) {
        /* refused on the GPU, naming the missing kernel */
        snn_neuron_config c = snn_neuron_config_default(SNN_NEURON_ALIF);
        CHECK_OK(snn_step_begin());
        snn_tensor *s = snn_recurrent_multistep(snn_zeros(SNN_SHAPE(2, 3, 7), SNN_CUDA),
                                                snn_zeros(SNN_SHAPE(7, 7), SNN_CUDA), &c, NULL);
        CHECK(s == NULL && snn_last_status() == SNN_ERR_UNSUPPORTED &&
              strstr(snn_last_error(), "alif_forward") != NULL);
        snn_step_end();
        fprintf(stderr, "ALIF: no CUDA kernels in this build; checked that it is refused\n");
    }
}

/* x and w_rec on two devices: refused, naming both. */
static void test_devices_differ(void)
{
    snn_neuron_config c = snn_neuron_config_default(SNN_NEURON_LIF);
    CHECK_OK(snn_step_begin());
    snn_tensor *s = snn_recurrent_multistep(snn_zeros(SNN_SHAPE(2, 3, 7), SNN_CPU),
                                            snn_zeros(SNN_SHAPE(7, 7), SNN_CUDA), &c, NULL);
    CHECK(s == NULL && snn_last_status() == SNN_ERR_ARGUMENT);
    CHECK(strstr(snn_last_error(), "'x'") && strstr(snn_last_error(), "'w_rec'"));
    snn_step_end();
}

/* The layer module moved to the GPU: the same spikes as on the CPU. */
static void test_module_on_gpu(void)
{
    snn_neuron_config c = snn_neuron_config_default(SNN_NEURON_LIF);
    snn_rng rng;
    snn_rng_seed(&rng, 3);
    snn_module *m = snn_recurrent_layer_new(16, &c, &rng);
    CHECK(m != NULL);
    if (!m) return;
    /* weights with few bits, as above: the currents are exact on both devices */
    snn_tensor *w = m->params[0].tensor;
    for (int i = 0; i < 16 * 16; i++) w->data[i] = floorf(64.0f * w->data[i]) / 64.0f;
    static float x[4 * 2 * 16], on_cpu[4 * 2 * 16], on_gpu[4 * 2 * 16];
    for (int i = 0; i < 4 * 2 * 16; i++)
        x[i] = floorf(64.0f * (snn_rng_normal(&rng) + 1.0f)) / 64.0f;
    CHECK_OK(snn_step_begin());
    snn_tensor *s = snn_module_forward(m, snn_from_host(SNN_SHAPE(4, 2, 16), x, SNN_CPU));
    CHECK(s != NULL);
    if (s) CHECK_OK(snn_tensor_copy_to_host(s, on_cpu));
    snn_step_end();
    CHECK_OK(snn_module_to(m, SNN_CUDA));
    CHECK_OK(snn_step_begin());
    s = snn_module_forward(m, snn_from_host(SNN_SHAPE(4, 2, 16), x, SNN_CUDA));
    CHECK(s != NULL);
    if (s) {
        CHECK_OK(snn_tensor_copy_to_host(s, on_gpu));
        CHECK(test_same_bits(on_gpu, on_cpu, 4 * 2 * 16));
        CHECK(snn_neuron_layer_firing_rate(m) >= 0.0f);
    }
    snn_step_end();
    snn_module_free(m);
}

int main(void)
{
    test_require_cuda();
    RUN(test_op_against_cpu);
    RUN(test_devices_differ);
    RUN(test_module_on_gpu);
    fprintf(stderr, "%d cases\n", cases);
    return test_finish();
}
