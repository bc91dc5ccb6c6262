/*
 * test_cuda_delays.c - learnable synaptic delays on CUDA against the CPU: snn_delay_kernel and
 * snn_temporal_conv (autograd/fn_delay.c), forward and backward, through the tape on both
 * devices from the same host inputs; then the DelayLinear layer (nn/layer_delay.c) trained a
 * few Adam steps on each device, with its clamp going through the device, and rounded. The
 * kernels alone are in the parity harness (tests/test_cuda_backend_ops.c, in fp32, TF32 and
 * BF16); this checks the ops and the layer around them. Without a GPU it exits 77 (skipped).
 * Run on the GPU machine: ctest -R cuda_delays --output-on-failure
 *
 * Tolerances, in fp32 (the precision is set): the delay kernel per element within
 * 1e-5 (|cpu| + max |cpu|) (expf on the GPU and in libm differ by an ulp or two, and the
 * normaliser sums D of them); the conv and the gradients, sums in another order (one GEMM per
 * tap on cuBLAS vs the CPU's blocked SGEMM), within 1e-4 (|cpu| + max |cpu|). Rounded delay
 * lines: one non-zero tap per synapse, so the delay kernel must agree bit for bit.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "snn.h"
#include "test.h"

/* |got - want| <= rtol (|want| + max |want|) for every element */
static void expect_scaled(const char *what, const float *got, const float *want, long n,
                          double rtol)
{
    double scale = 0.0;
    for (long i = 0; i < n; i++) scale = fmax(scale, fabs((double)want[i]));
    long bad = -1;
    for (long i = 0; i < n && bad < 0; i++)
        if (!(fabs((double)got[i] - (double)want[i]) <= rtol * (fabs((double)want[i]) + scale)))
            bad = i;
    CHECK(bad < 0);
    if (bad >= 0)
        fprintf(stderr, "  %s[%ld]: cuda %.9g, cpu %.9g (max |cpu| %.3g)\n", what, bad,
                (double)got[bad], (double)want[bad], scale);
}

/* Host values U(lo, hi) (malloc'd). */
static float *host_uniform(long n, float lo, float hi, uint64_t seed)
{
    snn_rng rng;
    snn_rng_seed(&rng, seed);
    float *v = malloc((size_t)n * sizeof *v);
    for (long i = 0; v && i < n; i++) v[i] = lo + (hi - lo) * snn_rng_uniform(&rng);
    return v;
}

typedef struct delay_case {
    int T, N, I, O, D;
    float sigma;
} delay_case;

/* y = conv(x, kernel(w, d)), L = sum(y * r); host copies of K, y, dx, dw, dd on `device` */
typedef struct delay_results {
    float *K, *y, *dx, *dw, *dd;
} delay_results;

static delay_results run_on(const delay_case *c, snn_device device, const float *x,
                            const float *w, const float *d, const float *r)
{
    const long nx = (long)c->T * c->N * c->I, ny = (long)c->T * c->N * c->O;
    const long ns = (long)c->O * c->I, nk = ns * c->D;
    delay_results out = {malloc((size_t)nk * sizeof(float)), malloc((size_t)ny * sizeof(float)),
                         malloc((size_t)nx * sizeof(float)), malloc((size_t)ns * sizeof(float)),
                         malloc((size_t)ns * sizeof(float))};
    snn_step_begin();
    snn_tensor *xt = snn_from_host(SNN_SHAPE(c->T, c->N, c->I), x, device);
    snn_tensor *wt = snn_from_host(SNN_SHAPE(c->O, c->I), w, device);
    snn_tensor *dt = snn_from_host(SNN_SHAPE(c->O, c->I), d, device);
    snn_tensor *rt = snn_from_host(SNN_SHAPE(c->T, c->N, c->O), r, device);
    if (xt && wt && dt) xt->requires_grad = wt->requires_grad = dt->requires_grad = true;
    snn_tensor *K = snn_delay_kernel(wt, dt, c->sigma, c->D);
    snn_tensor *y = snn_temporal_conv(xt, K);
    snn_tensor *loss = snn_sum_all(snn_mul(y, rt));
    CHECK(loss != NULL);
    if (loss) {
        CHECK_OK(snn_backward(loss));
        CHECK_OK(snn_tensor_copy_to_host(K, out.K));
        CHECK_OK(snn_tensor_copy_to_host(y, out.y));
        CHECK_OK(snn_tensor_copy_to_host(xt->grad, out.dx));
        CHECK_OK(snn_tensor_copy_to_host(wt->grad, out.dw));
        CHECK_OK(snn_tensor_copy_to_host(dt->grad, out.dd));
    } else {
        fprintf(stderr, "  on %s: %s\n", snn_device_name(device), snn_last_error());
    }
    snn_step_end();
    return out;
}

static void free_results(delay_results *r)
{
    free(r->K), free(r->y), free(r->dx), free(r->dw), free(r->dd);
}

static void test_ops_match_cpu(void)
{
    const delay_case cases[] = {
        {1, 1, 1, 1, 1, 0.5f},        /* one step, one tap */
        {12, 4, 5, 3, 6, 3.0f},       /* sigma = D / 2 */
        {7, 3, 9, 4, 10, 0.5f},       /* D > T, the end of the anneal */
        {50, 32, 70, 64, 25, 1.5f},   /* a hidden layer of SHD's size, shortened */
    };
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const delay_case *c = &cases[ci];
        const long nx = (long)c->T * c->N * c->I, ny = (long)c->T * c->N * c->O;
        const long ns = (long)c->O * c->I;
        float *x = host_uniform(nx, 0.0f, 1.0f, 100 + ci);
        for (long i = 0; i < nx; i++) x[i] = x[i] < 0.3f ? 1.0f : 0.0f; /* spikes */
        float *w = host_uniform(ns, -1.0f, 1.0f, 200 + ci);
        float *d = host_uniform(ns, 0.0f, (float)(c->D - 1), 300 + ci);
        float *r = host_uniform(ny, -1.0f, 1.0f, 400 + ci);
        delay_results cpu = run_on(c, SNN_CPU, x, w, d, r);
        delay_results gpu = run_on(c, SNN_CUDA, x, w, d, r);
        fprintf(stderr, "  T=%d N=%d I=%d O=%d D=%d sigma=%g\n", c->T, c->N, c->I, c->O, c->D,
                (double)c->sigma);
        expect_scaled("K", gpu.K, cpu.K, ns * c->D, 1e-5);
        expect_scaled("y", gpu.y, cpu.y, ny, 1e-4);
        expect_scaled("dx", gpu.dx, cpu.dx, nx, 1e-4);
        expect_scaled("dw", gpu.dw, cpu.dw, ns, 1e-4);
        expect_scaled("dd", gpu.dd, cpu.dd, ns, 1e-4);
        free_results(&cpu), free_results(&gpu);
        free(x), free(w), free(d), free(r);
    }
}

/* The layer: 20 Adam steps with sigma annealed and d clamped, on each device from the same
 * initial values; then rounded, where the delays (integers) must agree exactly. */
static void train_layer(snn_device device, float *w_out, float *d_out, float *y_out)
{
    enum { T = 24, N = 8, I = 6, O = 5, D = 8, STEPS = 20 };
    snn_rng rng;
    snn_rng_seed(&rng, 9);
    snn_module *fc = snn_delay_linear_new(I, O, D, &rng);
    CHECK(fc != NULL);
    if (!fc) return;
    CHECK_OK(snn_module_to(fc, device));
    snn_optimizer *opt = snn_adam_new(fc, 0.05f, 0.0f, false);
    float *x = host_uniform(T * N * I, 0.0f, 1.0f, 77);
    for (int i = 0; i < T * N * I; i++) x[i] = x[i] < 0.3f ? 1.0f : 0.0f;
    float *target = host_uniform(T * N * O, 0.0f, 1.0f, 78);
    for (int step = 0; opt && step < STEPS; step++) {
        CHECK_OK(snn_delay_linear_set_sigma(fc, 4.0f - 3.5f * (float)step / (STEPS - 1)));
        snn_step_begin();
        snn_module_zero_grad(fc);
        snn_tensor *y = snn_module_forward(fc, snn_from_host(SNN_SHAPE(T, N, I), x, device));
        snn_tensor *loss = snn_mse_loss(y, snn_from_host(SNN_SHAPE(T, N, O), target, device));
        CHECK_OK(snn_backward(loss));
        CHECK_OK(snn_optimizer_step(opt));
        CHECK_OK(snn_delay_linear_clamp(fc));
        snn_step_end();
    }
    CHECK_OK(snn_tensor_copy_to_host(fc->params[0].tensor, w_out));
    CHECK_OK(snn_tensor_copy_to_host(fc->params[1].tensor, d_out));
    CHECK_OK(snn_delay_linear_round(fc));
    snn_no_grad_begin();
    snn_step_begin();
    snn_tensor *y = snn_module_forward(fc, snn_from_host(SNN_SHAPE(T, N, I), x, device));
    CHECK(y != NULL);
    if (y) CHECK_OK(snn_tensor_copy_to_host(y, y_out));
    snn_step_end();
    snn_no_grad_end();
    free(x), free(target);
    snn_optimizer_free(opt);
    snn_module_free(fc);
}

static void test_layer_matches_cpu(void)
{
    float w_cpu[30], d_cpu[30], w_gpu[30], d_gpu[30];
    static float y_cpu[24 * 8 * 5], y_gpu[24 * 8 * 5];
    train_layer(SNN_CPU, w_cpu, d_cpu, y_cpu);
    train_layer(SNN_CUDA, w_gpu, d_gpu, y_gpu);
    expect_scaled("trained w", w_gpu, w_cpu, 30, 1e-3);
    expect_scaled("trained d", d_gpu, d_cpu, 30, 1e-3);
    for (int s = 0; s < 30; s++) CHECK(d_gpu[s] >= 0.0f && d_gpu[s] <= 7.0f); /* clamped */
    /* rounded: the same integer delays unless a delay sits within the training's drift of a
     * half; then y is sum_i w x[t - d] on both */
    int same_delays = 0;
    for (int s = 0; s < 30; s++) same_delays += rintf(d_gpu[s]) == rintf(d_cpu[s]);
    CHECK(same_delays == 30);
    if (same_delays == 30) expect_scaled("rounded y", y_gpu, y_cpu, 24 * 8 * 5, 1e-4);
}

int main(void)
{
    test_require_cuda();
    CHECK_OK(snn_set_precision(SNN_PRECISION_FP32));
    RUN(test_ops_match_cpu);
    RUN(test_layer_matches_cpu);
    return test_finish();
}
