/*
 * test_cuda_bn_sums.c - the batch-norm sums that the fused neuron backward makes on its way
 * (snn_neuron_bn_input.dy_sums: kernels/cuda/lif_bn_backward.cu's dy_sums_partials and
 * dy_sums_finish_kernel, or the batch-norm's own pass where that kernel cannot), on the GPU:
 *   1. against the reference's batchnorm_backward_sums (snn_batchnorm_backward_sums_ref, on
 *      the host) of the dX the same launch wrote and of x as floats, per channel: sum dX and
 *      sum dX (x - mean) within 1e-5 of the sum of their terms' magnitudes (floats inside a
 *      block, then double: kernels/neuron_kernels.h), the count exactly;
 *   2. dX and dresidual bit for bit as the same launch without dy_sums wrote them (the sums
 *      only read);
 *   3. batchnorm_backward_in_place_sums given batchnorm_backward_sums's sums gives
 *      batchnorm_backward_in_place's bits (dx, dgamma, dbeta).
 * Shapes: planes of 2048 and 1024 (several blocks a plane), 256, 64 and 32 (several planes a
 * block, and a last block half past M), 16 and 8 (several planes a warp), and the repeated
 * stem, where the kernel makes them; planes of 49 and 1, T = 6, where the pass after it does.
 * x as floats and as bf16; the common neuron (LIF, ATan: the kernel's fixed instance) and IF;
 * no residual, a residual of floats, and one made by a batch-norm (residual_bn). The op's use
 * of them in TF32 and BF16 training (neurons/bn_neuron.c) is test_cuda_bn_neuron's case 7.
 * Skipped (exit 77) without a GPU.
 *
 *     ctest --test-dir build -R cuda_bn_sums --output-on-failure
 */
#include <math.h>

#include "cuda_parity.h"
#include "kernels/neuron_kernels.h"
#include "kernels/ref/kernels_ref.h"

typedef struct sums_case {
    int64_t T, N, C, plane;
    bool x_bf16;
    int residual;  /* 0 none, 1 floats, 2 a batch-norm's output (residual_bn) */
    bool repeated; /* the stem: x and dX are one step */
    bool lif;      /* LIF + ATan (the fixed instance), else IF */
} sums_case;

/* A batch-norm's statistics of x (images, C, plane) on the device: merged (C, 3), mean and
 * invstd (C) */
static void device_stats(double *merged, float *mean, float *invstd, const float *x,
                         int64_t images, int64_t C, int64_t plane)
{
    double *stats = tracked_alloc(3 * (size_t)C * sizeof(double), SNN_CUDA);
    gpu->batchnorm_stats(stats, x, NULL, (int)images, (int)C, (int)plane);
    gpu->batchnorm_stats_merge(merged, mean, invstd, NULL, NULL, stats, 1, (int)C, 0.1f, 1e-5f);
}

static void run_case(const sums_case *k)
{
    const snn_neuron_kernels *nk = snn_neuron_kernels_for(SNN_CUDA);
    snn_neuron_config cfg = snn_neuron_config_default(k->lif ? SNN_NEURON_LIF : SNN_NEURON_IF);
    cfg.surrogate = snn_surrogate_default(SNN_SURROGATE_ATAN);
    const snn_neuron_params q = snn_neuron_params_from(&cfg);
    const snn_neuron_dims d = {k->T, k->N, k->C, k->plane};
    const int64_t M = snn_neuron_dims_step(&d), n = k->T * M;
    const int64_t images = k->repeated ? k->N : k->T * k->N, xn = images * k->C * k->plane;
    const size_t C = (size_t)k->C;
    char what[160];
    snprintf(what, sizeof what, "T=%lld N=%lld C=%lld plane=%lld%s%s%s %s", (long long)k->T,
             (long long)k->N, (long long)k->C, (long long)k->plane, k->x_bf16 ? " x bf16" : "",
             k->residual == 1 ? " residual" : k->residual == 2 ? " residual_bn" : "",
             k->repeated ? " repeated" : "", k->lif ? "lif" : "if");

    /* x: floats, the values rounded to bf16 where the kernel reads bits */
    float *x = random_host((size_t)xn, -1.0f, 2.0f);
    uint16_t *bits = (uint16_t *)tracked_alloc((size_t)xn * sizeof *bits, SNN_CPU);
    for (int64_t e = 0; e < xn; e++) {
        bits[e] = snn_bf16_bits(x[e]);
        if (k->x_bf16) x[e] = snn_bf16_value(bits[e]);
    }
    const float *dx_f = dev_copy(x, (size_t)xn);
    uint16_t *dx_bits = tracked_alloc((size_t)xn * sizeof *bits, SNN_CUDA);
    upload(dx_bits, bits, (size_t)xn * sizeof *bits);
    double *merged = tracked_alloc(3 * C * sizeof(double), SNN_CUDA);
    float *mean = dev_floats(C), *invstd = dev_floats(C);
    device_stats(merged, mean, invstd, dx_f, images, k->C, k->plane);
    float *gamma = dev_copy(random_host(C, 0.8f, 1.6f), C);
    float *beta = dev_copy(random_host(C, 0.4f, 1.2f), C);
    float *dspike = dev_copy(random_host((size_t)n, -1.0f, 1.0f), (size_t)n);

    snn_neuron_bn_input in = {.x = k->x_bf16 ? NULL : dx_f, .x_bf16 = k->x_bf16 ? dx_bits : NULL,
                              .stats = merged, .invstd = invstd, .gamma = gamma, .beta = beta,
                              .x_repeated = k->repeated};
    float *res_init = k->residual == 1 ? random_host((size_t)n, -0.5f, 1.0f) : NULL;
    if (res_init) in.residual = dev_copy(res_init, (size_t)n);
    snn_bn_residual rbn = {0};
    if (k->residual == 2) {
        rbn.x = dev_copy(random_host((size_t)n, -1.0f, 1.0f), (size_t)n);
        double *r_merged = tracked_alloc(3 * C * sizeof(double), SNN_CUDA);
        float *r_mean = dev_floats(C), *r_invstd = dev_floats(C);
        device_stats(r_merged, r_mean, r_invstd, rbn.x, images, k->C, k->plane);
        rbn.stats = r_merged, rbn.invstd = r_invstd;
        rbn.gamma = dev_copy(random_host(C, 0.5f, 1.0f), C);
        rbn.beta = dev_copy(random_host(C, -0.2f, 0.2f), C);
        in.residual_bn = &rbn;
    }

    /* the launch without the sums, then with them: dX (and dresidual) the same bits */
    const int64_t dx_n = k->repeated ? M : n;
    float *dX_plain = dev_floats((size_t)dx_n), *dX = dev_floats((size_t)dx_n);
    float *dres_plain = res_init ? dev_copy(res_init, (size_t)n) : NULL;
    float *dres = res_init ? dev_copy(res_init, (size_t)n) : NULL;
    nk->lif_bn_backward(dX_plain, dres_plain, dspike, &in, &q, &d);
    double *sums = tracked_alloc(3 * C * sizeof(double), SNN_CUDA);
    in.dy_sums = sums;
    nk->lif_bn_backward(dX, dres, dspike, &in, &q, &d);
    float *h_dX = host_floats((size_t)dx_n);
    download(h_dX, dX_plain, (size_t)dx_n * sizeof(float));
    char what2[200];
    snprintf(what2, sizeof what2, "dX with dy_sums, %s", what);
    expect_exact(what2, dX, h_dX, (size_t)dx_n * sizeof(float));
    if (dres) {
        float *h_dres = host_floats((size_t)n);
        download(h_dres, dres_plain, (size_t)n * sizeof(float));
        snprintf(what2, sizeof what2, "dresidual with dy_sums, %s", what);
        expect_exact(what2, dres, h_dres, (size_t)n * sizeof(float));
    }

    /* the sums against the reference's (kernels/ref/batchnorm_sync.c) of that dX and x as
     * floats, on the host */
    double *h_got = (double *)tracked_alloc(3 * C * sizeof(double), SNN_CPU);
    double *h_want = (double *)tracked_alloc(3 * C * sizeof(double), SNN_CPU);
    float *h_mean = host_floats(C);
    download(h_got, sums, 3 * C * sizeof(double));
    download(h_mean, mean, C * sizeof(float));
    snn_batchnorm_backward_sums_ref(h_want, h_dX, x, h_mean, (int)images, (int)k->C,
                                    (int)k->plane);
    double worst = 0.0;
    for (int64_t c = 0; c < k->C; c++) {
        double scale[2] = {0.0, 0.0}; /* the sums of the terms' magnitudes */
        for (int64_t m = 0; m < images; m++)
            for (int64_t i = 0; i < k->plane; i++) {
                const int64_t e = (m * k->C + c) * k->plane + i;
                scale[0] += fabs((double)h_dX[e]);
                scale[1] += fabs((double)h_dX[e] * ((double)x[e] - (double)h_mean[c]));
            }
        for (int col = 0; col < 2; col++) {
            const double err = fabs(h_got[3 * c + col] - h_want[3 * c + col]);
            const double ratio = err / (1e-5 * scale[col] + 1e-30);
            if (!(ratio <= worst)) worst = isnan(ratio) ? (double)INFINITY : ratio;
        }
        CHECK(h_got[3 * c + 2] == (double)(images * k->plane)); /* the count */
    }
    CHECK(worst <= 1.0);
    if (!(worst <= 1.0))
        fprintf(stderr, "FAIL %s: the sums differ from the reference's by %.3g of the "
                "tolerance\n", what, worst);
    printf("  %-60s sums within %.3f of the tolerance\n", what, worst);

    /* the in-place backward, given the device's own pass's sums, is batchnorm_backward_in_place */
    if (!k->repeated) {
        double *want = tracked_alloc(3 * C * sizeof(double), SNN_CUDA);
        gpu->batchnorm_backward_sums(want, dX, dx_f, mean, (int)images, (int)k->C,
                                     (int)k->plane);
        float *a = dev_floats((size_t)n), *b = dev_floats((size_t)n);
        float *ga = dev_floats(C), *gb = dev_floats(C), *ba = dev_floats(C), *bb = dev_floats(C);
        upload(a, h_dX, (size_t)n * sizeof(float)), upload(b, h_dX, (size_t)n * sizeof(float));
        gpu->fill(ga, 0.0f, k->C), gpu->fill(gb, 0.0f, k->C);
        gpu->fill(ba, 0.0f, k->C), gpu->fill(bb, 0.0f, k->C);
        gpu->batchnorm_backward_in_place(a, ga, ba, in.x, in.x_bf16, gamma, mean, invstd,
                                         (int)images, (int)k->C, (int)k->plane);
        gpu->batchnorm_backward_in_place_sums(b, gb, bb, in.x, in.x_bf16, gamma, mean, invstd,
                                              want, (int)images, (int)k->C, (int)k->plane);
        float *h = host_floats((size_t)n);
        snprintf(what2, sizeof what2, "in_place_sums = in_place, %s", what);
        download(h, a, (size_t)n * sizeof(float));
        expect_exact(what2, b, h, (size_t)n * sizeof(float));
        download(h, ga, C * sizeof(float));
        expect_exact(what2, gb, h, C * sizeof(float));
        download(h, ba, C * sizeof(float));
        expect_exact(what2, bb, h, C * sizeof(float));
    }
    release_all();
}

static void test_sums(void)
{
    const sums_case cases[] = {
        /* the kernel makes them */
        {4, 4, 16, 1024, false, 0, false, true},
        {4, 2, 8, 2048, false, 1, false, false},
        {4, 8, 32, 256, true, 1, false, true},
        {3, 6, 24, 64, false, 2, false, false},
        {2, 5, 7, 32, true, 0, false, true}, /* M = 1120: the last block half past M */
        {4, 3, 16, 64, true, 2, false, true},
        {4, 8, 16, 16, false, 0, false, true}, /* two planes a warp */
        {3, 4, 8, 8, true, 1, false, false},
        {4, 4, 8, 64, true, 0, true, true},    /* the repeated stem */
        {2, 3, 8, 16, false, 0, true, false},
        /* the pass after the kernel */
        {4, 3, 5, 49, false, 1, false, false},
        {4, 2, 6, 1, false, 0, false, true},
        {6, 4, 8, 64, false, 0, false, true},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(&cases[i]);
}

int main(void)
{
    parity_begin();
    RUN(test_sums);
    return test_finish();
}
