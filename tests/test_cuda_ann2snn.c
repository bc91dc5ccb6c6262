/*
 * test_cuda_ann2snn.c - ANN -> SNN conversion on the GPU: its kernels against the reference,
 * and converted networks on CUDA. Skipped (exit 77) without a GPU.
 *
 *   qclip            forward and dx bit for bit (a division, a floor, a multiply; dx is dy or
 *                    nothing), dstep within 1e-5 relative of the CPU's plus 1e-6 of the sum of
 *                    |terms| (both sum in double, in different orders); unsigned and symmetric,
 *                    sizes below and above one block, a tie x = s / 2.
 *   running max-pool forward, argmax and backward bit for bit (the same additions in the same
 *                    order, _rn intrinsics), 2x2 and 3x3 windows, strides 2 and 3, ragged edges.
 *   networks         tiny QANN CNN, ResNet-18 and SEW-ResNet-18 (tests/ann2snn_models.h) on
 *                    CUDA, 8 images: the QANN's logits match the CPU QANN's to 1e-4 (cuBLAS
 *                    sums in its own order); converted on the GPU, the SNN's summed logits equal
 *                    the CUDA QANN's to 1e-5 of the largest logit at T* (CNN 9, ResNets 51) and
 *                    the CPU SNN's to 1e-4 - each for all images but at most one (a value
 *                    within rounding of a level boundary may land one level apart when the
 *                    sums run in another order); a CUDA training step of the QANN gives step
 *                    gradients within 5% of the CPU's (finite, nonzero).
 *   ReLU ANN         the CNN and SEW-ResNet-18 with ReLU (the profile's baseline): CUDA logits
 *                    within 1e-4 of the CPU's, a training step's loss within 1e-4 and its
 *                    stem-conv gradient within 1e-3 of the largest entry.
 *   sparse SNN       the converted CNN on CUDA, sparsified: the GEMM and event paths give the
 *                    same logits bit for bit, the dense SNN's predictions, logits within 1e-4
 *                    for at least 3/4 of the images.
 * Run on the GPU machine: ctest -R cuda_ann2snn (tools/gpu/convert.sh ann2snn).
 */
#include "ann2snn_models.h"
#include "cuda_neuron_parity.h"
#include "sparse/sparse.h"

/* ---- qclip -------------------------------------------------------------------------------- */

static void check_qclip(int64_t n, int levels, bool symmetric, float s)
{
    snprintf(label, sizeof label, "qclip n=%lld L=%d sym=%d s=%g", (long long)n, levels,
             symmetric, (double)s);
    snn_neuron_config c = snn_neuron_config_default(SNN_NEURON_QCLIP);
    c.levels = levels;
    c.symmetric = symmetric;
    const snn_neuron_params p = snn_neuron_params_from(&c);
    const float g = 0.0123f;
    CHECK_OK(snn_step_begin());
    float *x = host_floats(n), *dy = host_floats(n), *dx0 = host_floats(n);
    for (int64_t i = 0; i < n; i++) {
        x[i] = (snn_rng_uniform(&rng) * 2.0f - 1.0f) * s * (float)(levels + 2);
        dy[i] = snn_rng_normal(&rng);
        dx0[i] = snn_rng_normal(&rng);
    }
    x[0] = 0.5f * s; /* a tie */
    const float ds0 = 0.25f;
    /* CPU */
    float *y_cpu = host_floats(n), *dx_cpu = copy_of(dx0, n), ds_cpu = ds0;
    ref->qclip_forward(y_cpu, x, &s, &p, n);
    ref->qclip_backward(dx_cpu, &ds_cpu, dy, x, &s, &p, g, n);
    /* CUDA */
    float *dx_d = dev_from(dx0, n), *y_d = dev_full(n, NAN), *x_d = dev_from(x, n);
    float *dy_d = dev_from(dy, n), *s_d = dev_from(&s, 1), *ds_d = dev_from(&ds0, 1);
    gpu->qclip_forward(y_d, x_d, s_d, &p, n);
    gpu->qclip_backward(dx_d, ds_d, dy_d, x_d, s_d, &p, g, n);
    check_bits("y", download(y_d, n), y_cpu, n);
    check_bits("dx", download(dx_d, n), dx_cpu, n);
    double scale = 0.0;
    for (int64_t i = 0; i < n; i++) scale += fabs((double)dy[i]); /* |dy/ds| <= A_max + 1 */
    scale *= (double)g * (double)(levels + 1);
    const float ds_gpu = download(ds_d, 1)[0];
    test_checks++;
    if (!(fabs((double)ds_gpu - (double)ds_cpu) <= 1e-5 * fabs((double)ds_cpu) + 1e-6 * scale)) {
        test_failures++;
        fprintf(stderr, "%s: dstep %.9g vs %.9g\n", label, (double)ds_gpu, (double)ds_cpu);
    }
    /* dx alone (no dstep), and dstep alone */
    float *dx2 = dev_from(dx0, n);
    gpu->qclip_backward(dx2, NULL, dy_d, x_d, s_d, &p, g, n);
    check_bits("dx without dstep", download(dx2, n), dx_cpu, n);
    float *ds2 = dev_from(&ds0, 1);
    gpu->qclip_backward(NULL, ds2, dy_d, x_d, s_d, &p, g, n);
    const float ds_alone = download(ds2, 1)[0];
    test_checks++;
    if (!(fabs((double)ds_alone - (double)ds_cpu) <= 1e-5 * fabs((double)ds_cpu) + 1e-6 * scale)) {
        test_failures++;
        fprintf(stderr, "%s: dstep without dx %.9g vs %.9g\n", label, (double)ds_alone, (double)ds_cpu);
    }
    snn_step_end();
}

static void test_qclip(void)
{
    check_qclip(1, 4, false, 0.37f);
    check_qclip(1000, 4, false, 0.37f);
    check_qclip(300000, 4, false, 0.37f);
    check_qclip(300000, 8, true, 1.7f);
    check_qclip(4097, 2, true, 0.05f);
}

/* ---- the running max-pool ----------------------------------------------------------------- */

static void check_pool(int T, int planes, int H, int W, int K, int stride)
{
    snprintf(label, sizeof label, "running pool T=%d planes=%d %dx%d K=%d s=%d", T, planes, H, W,
             K, stride);
    snn_running_pool_dims d = {T, planes, H, W, K, stride, (H - K) / stride + 1, (W - K) / stride + 1};
    const int64_t nx = (int64_t)T * planes * H * W, ny = (int64_t)T * planes * d.H_out * d.W_out;
    CHECK_OK(snn_step_begin());
    float *x = host_floats(nx), *dy = host_floats(ny), *dx0 = host_floats(nx);
    for (int64_t i = 0; i < nx; i++) {
        /* signed spikes of two sizes, mostly silent, and some exact ties */
        const float u = snn_rng_uniform(&rng);
        x[i] = u < 0.7f ? 0.0f : u < 0.85f ? 0.37f : u < 0.95f ? -0.37f : 0.74f;
        dx0[i] = snn_rng_normal(&rng);
    }
    for (int64_t i = 0; i < ny; i++) dy[i] = snn_rng_normal(&rng);
    float *y_cpu = host_floats(ny), *dx_cpu = copy_of(dx0, nx);
    int32_t *a_cpu = (int32_t *)host_floats(ny);
    ref->running_max_pool_forward(y_cpu, a_cpu, x, &d);
    ref->running_max_pool_backward(dx_cpu, dy, a_cpu, &d);
    float *y_d = dev_full(ny, NAN), *x_d = dev_from(x, nx), *dy_d = dev_from(dy, ny);
    float *dx_d = dev_from(dx0, nx);
    int32_t *a_d = (int32_t *)dev_full(ny, NAN);
    gpu->running_max_pool_forward(y_d, a_d, x_d, &d);
    gpu->running_max_pool_backward(dx_d, dy_d, a_d, &d);
    check_bits("y", download(y_d, ny), y_cpu, ny);
    check_bits("argmax", download((const float *)a_d, ny), (const float *)a_cpu, ny);
    check_bits("dx", download(dx_d, nx), dx_cpu, nx);
    /* without argmax (no-grad mode) the same y */
    float *y2 = dev_full(ny, NAN);
    gpu->running_max_pool_forward(y2, NULL, x_d, &d);
    check_bits("y without argmax", download(y2, ny), y_cpu, ny);
    snn_step_end();
}

static void test_running_pool(void)
{
    check_pool(1, 3, 4, 4, 2, 2);
    check_pool(9, 64, 28, 28, 2, 2);
    check_pool(16, 40, 14, 14, 2, 2);
    check_pool(5, 7, 11, 10, 3, 3);   /* ragged: the last rows and columns are left out */
    check_pool(4, 5, 9, 9, 2, 3);     /* stride above the window: gaps between windows */
}

/* ---- networks on CUDA --------------------------------------------------------------------- */

/* Images whose logits differ by more than tol: two summation orders can put a pre-activation
 * that sits within rounding of a level boundary on either side of it (a one-level flip), which
 * moves that image's logits by far more than rounding; it is rare (a few per 10^5 values), so
 * one such image of eight is allowed, and printed. */
static int images_off(const float *a, const float *b, int images, int classes, double tol)
{
    int off = 0;
    for (int i = 0; i < images; i++) {
        bool bad = false;
        for (int k = 0; k < classes; k++)
            bad |= !(fabs((double)a[i * classes + k] - (double)b[i * classes + k]) <= tol);
        off += bad;
    }
    return off;
}

static void check_network(snn_model_kind kind, int bound)
{
    enum { N = 8 };
    const snn_model_config c = tiny_qann(kind);
    snn_module *q_cpu = tiny_qann_new(kind, 80 + (uint64_t)kind, SNN_CPU);
    snn_module *q_gpu = tiny_qann_new(kind, 80 + (uint64_t)kind, SNN_CUDA);
    if (!q_cpu || !q_gpu) {
        snn_module_free(q_cpu);
        snn_module_free(q_gpu);
        return;
    }
    const snn_shape shape = SNN_SHAPE(N, c.in_channels, c.height, c.width);
    const int64_t nx = N * c.in_channels * c.height * c.width, ny = N * c.classes;
    float x[N * 28 * 28 > N * 3 * 8 * 8 ? N * 28 * 28 : N * 3 * 8 * 8];
    float q_c[N * 10], q_g[N * 10], s_c[N * 10], s_g[N * 10]; /* (N, classes) */
    for (int64_t i = 0; i < nx; i++) x[i] = snn_rng_normal(&rng);
    run_logits(q_cpu, x, shape, SNN_CPU, q_c, ny);
    run_logits(q_gpu, x, shape, SNN_CUDA, q_g, ny);
    snn_module *snn_c = snn_ann_to_snn(q_cpu, bound), *snn_g = snn_ann_to_snn(q_gpu, bound);
    CHECK(snn_c && snn_g);
    if (!snn_c || !snn_g) fprintf(stderr, "  %s: %s\n", snn_model_kind_name(kind), snn_last_error());
    if (snn_c && snn_g) {
        run_logits(snn_c, x, shape, SNN_CPU, s_c, ny);
        run_logits(snn_g, x, shape, SNN_CUDA, s_g, ny);
        const double scale = fmax(1.0, max_abs(q_g, ny));
        const int off_q = images_off(q_g, q_c, N, c.classes, 1e-4 * scale);
        const int off_s = images_off(s_g, q_g, N, c.classes, 1e-5 * scale);
        const int off_d = images_off(s_g, s_c, N, c.classes, 1e-4 * scale);
        fprintf(stderr, "  %s: max |QANN cuda - cpu| %.3g (%d images off), |SNN cuda - QANN cuda| "
                "%.3g at T* = %d (%d off), |SNN cuda - cpu| %.3g (%d off)\n",
                snn_model_kind_name(kind), max_diff(q_g, q_c, ny), off_q, max_diff(s_g, q_g, ny),
                bound, off_s, max_diff(s_g, s_c, ny), off_d);
        CHECK(off_q <= 1 && off_s <= 1 && off_d <= 1);
    }
    snn_module_free(snn_c);
    snn_module_free(snn_g);
    snn_module_free(q_cpu);
    snn_module_free(q_gpu);
}

/* One QANN training step on each device: the steps' gradients (LSQ) agree. */
static void test_training_step(void)
{
    enum { N = 4 };
    snn_module *m[2] = {tiny_qann_new(SNN_MODEL_SPIKING_CNN, 90, SNN_CPU),
                        tiny_qann_new(SNN_MODEL_SPIKING_CNN, 90, SNN_CUDA)};
    float x[N * 28 * 28], labels[N] = {1, 4, 4, 9}, grads[2][3];
    for (int i = 0; i < N * 28 * 28; i++) x[i] = snn_rng_normal(&rng);
    for (int d = 0; d < 2 && m[0] && m[1]; d++) {
        const snn_device device = d ? SNN_CUDA : SNN_CPU;
        CHECK_OK(snn_step_begin());
        snn_module_train(m[d], true);
        snn_tensor *y = snn_module_forward(m[d], snn_from_host(SNN_SHAPE(N, 1, 28, 28), x, device));
        snn_tensor *loss = snn_cross_entropy(y, snn_from_host(SNN_SHAPE(N), labels, device));
        CHECK(loss != NULL);
        if (loss) CHECK_OK(snn_backward(loss));
        int k = 0;
        for (int i = 0; i < m[d]->n_children; i++) {
            snn_module *ch = m[d]->children[i];
            if (ch->n_params == 1 && strcmp(ch->params[0].name, "step") == 0 && k < 3) {
                snn_tensor *g = ch->params[0].tensor->grad; /* OWNED, on the model's device */
                grads[d][k] = NAN;
                if (g) CHECK_OK(snn_tensor_copy_to_host(g, &grads[d][k]));
                k++;
            }
        }
        CHECK(k == 3);
        snn_step_end();
    }
    /* the kernels are compared exactly above; here the whole step, where the two devices' conv
     * orders may flip a level of a batch-norm output near a boundary: close, not equal */
    for (int k = 0; m[0] && m[1] && k < 3; k++) {
        fprintf(stderr, "  step gradient %d: cuda %.6g, cpu %.6g\n", k, (double)grads[1][k],
                (double)grads[0][k]);
        CHECK(isfinite(grads[1][k]) && grads[1][k] != 0.0f);
        CHECK_CLOSE(grads[1][k], grads[0][k], 1e-5, 5e-2);
    }
    snn_module_free(m[0]);
    snn_module_free(m[1]);
}

static void test_networks(void)
{
    check_network(SNN_MODEL_SPIKING_CNN, 9);
    check_network(SNN_MODEL_RESNET18, 51);
    check_network(SNN_MODEL_SEW_RESNET18, 51);
}

/* The ReLU ANN (the profile's baseline, T = 1) on CUDA: the CPU's logits in eval mode, and in
 * one training step (batch statistics) the CPU's loss and first-conv gradient. ReLU has no level
 * to flip, so these are rounding-close for every image. */
static void check_relu_model(snn_model_kind kind)
{
    enum { N = 4 };
    snn_model_config c = tiny_qann(kind);
    c.neuron = snn_neuron_config_default(SNN_NEURON_RELU);
    snn_module *m[2] = {NULL, NULL};
    for (int d = 0; d < 2; d++) {
        snn_rng init;
        snn_rng_seed(&init, 100 + (uint64_t)kind); /* the same weights on both devices */
        m[d] = snn_model_new(&c, &init);
        CHECK(m[d] != NULL);
        if (m[d] && d == 1 && snn_module_to(m[d], SNN_CUDA) != SNN_OK) {
            CHECK(false);
            snn_module_free(m[d]);
            m[d] = NULL;
        }
    }
    const snn_shape shape = SNN_SHAPE(N, c.in_channels, c.height, c.width);
    const int64_t nx = N * c.in_channels * c.height * c.width, ny = N * c.classes;
    float x[N * 28 * 28 > N * 3 * 8 * 8 ? N * 28 * 28 : N * 3 * 8 * 8];
    float logits[2][N * 10], labels[N] = {0, 3, 5, 9}, loss[2] = {NAN, NAN};
    float grad[2][64];
    int64_t n_grad = 0;
    for (int64_t i = 0; i < nx; i++) x[i] = snn_rng_normal(&rng);
    for (int d = 0; d < 2 && m[0] && m[1]; d++) {
        const snn_device device = d ? SNN_CUDA : SNN_CPU;
        run_logits(m[d], x, shape, device, logits[d], ny);
        CHECK_OK(snn_step_begin());
        snn_module_train(m[d], true);
        snn_tensor *y = snn_module_forward(m[d], snn_from_host(shape, x, device));
        snn_tensor *l = y ? snn_cross_entropy(y, snn_from_host(SNN_SHAPE(N), labels, device)) : NULL;
        CHECK(l != NULL);
        if (l && snn_backward(l) == SNN_OK) loss[d] = snn_tensor_item(l);
        snn_tensor *w = m[d]->children[0]->params[0].tensor; /* the stem conv's weight */
        n_grad = w->numel;
        CHECK(w->grad != NULL && n_grad <= 64);
        if (w->grad && n_grad <= 64) CHECK_OK(snn_tensor_copy_to_host(w->grad, grad[d]));
        snn_step_end();
    }
    if (m[0] && m[1]) {
        const double scale = fmax(1.0, max_abs(logits[0], ny));
        fprintf(stderr, "  relu %s: max |logits cuda - cpu| %.3g, loss %.7g vs %.7g, max |dW cuda - "
                "cpu| %.3g of %.3g\n", snn_model_kind_name(kind), max_diff(logits[1], logits[0], ny),
                (double)loss[1], (double)loss[0], max_diff(grad[1], grad[0], n_grad),
                max_abs(grad[0], n_grad));
        CHECK(max_diff(logits[1], logits[0], ny) <= 1e-4 * scale);
        CHECK_CLOSE(loss[1], loss[0], 1e-6, 1e-4);
        CHECK(max_abs(grad[0], n_grad) > 0.0);
        CHECK(max_diff(grad[1], grad[0], n_grad) <= 1e-3 * max_abs(grad[0], n_grad));
    }
    snn_module_free(m[0]);
    snn_module_free(m[1]);
}

static void test_relu_models(void)
{
    check_relu_model(SNN_MODEL_SPIKING_CNN);
    check_relu_model(SNN_MODEL_SEW_RESNET18);
}

/* The converted CNN on CUDA, sparsified: its signed spikes through both CUDA sparse paths. */
static void test_sparse_snn(void)
{
    enum { N = 8 };
    snn_module *qann = tiny_qann_new(SNN_MODEL_SPIKING_CNN, 95, SNN_CUDA);
    snn_module *snn = qann ? snn_ann_to_snn(qann, 9) : NULL;
    CHECK(snn != NULL);
    float x[N * 28 * 28], dense[N * 10], gemm[N * 10], event[N * 10];
    for (int i = 0; i < N * 28 * 28; i++) x[i] = snn_rng_normal(&rng);
    if (snn) {
        run_logits(snn, x, SNN_SHAPE(N, 1, 28, 28), SNN_CUDA, dense, N * 10);
        snn_tensor *batch = snn_tensor_new(SNN_SHAPE(N, 1, 28, 28), SNN_CUDA);
        CHECK_OK(snn_tensor_copy_from_host(batch, x));
        snn_sparse_options o = snn_sparse_options_default();
        o.force = SNN_SPARSE_GEMM;
        o.quiet = true;
        snn_sparse_report rep;
        CHECK_OK(snn_sparsify(snn, &batch, 1, &o, &rep));
        CHECK(rep.count == 1);
        run_logits(snn, x, SNN_SHAPE(N, 1, 28, 28), SNN_CUDA, gemm, N * 10);
        CHECK(snn_sparse_set_path(snn, SNN_SPARSE_EVENT) == 1);
        run_logits(snn, x, SNN_SHAPE(N, 1, 28, 28), SNN_CUDA, event, N * 10);
        snn_sparse_collect(snn, &rep);
        CHECK(rep.count == 1 && rep.layers[0].sparse_calls == 2);
        CHECK(memcmp(gemm, event, sizeof gemm) == 0);
        /* the sparse kernels sum in k order, cuBLAS in its own: as in test_cuda_sparse.c, a spike
         * may flip, so most logits (not all) agree to 1e-4 and the predictions must */
        const int off = images_off(gemm, dense, N, 10, 1e-4 * fmax(1.0, max_abs(dense, N * 10)));
        fprintf(stderr, "  sparse SNN: max |sparse - dense| %.3g (%d images off)\n",
                max_diff(gemm, dense, N * 10), off);
        CHECK(off <= N / 4);
        for (int i = 0; i < N; i++) {
            int a = 0, b = 0;
            for (int k = 1; k < 10; k++) {
                if (dense[i * 10 + k] > dense[i * 10 + a]) a = k;
                if (gemm[i * 10 + k] > gemm[i * 10 + b]) b = k;
            }
            CHECK(a == b);
        }
        snn_tensor_free(batch);
    }
    snn_module_free(snn);
    snn_module_free(qann);
}

int main(void)
{
    (void)cases, (void)base_label; /* the harness's configuration matrix: not used here */
    if (neuron_parity_begin()) return test_finish();
    CHECK(gpu->qclip_forward && gpu->qclip_backward && gpu->running_max_pool_forward &&
          gpu->running_max_pool_backward);
    RUN(test_qclip);
    RUN(test_running_pool);
    RUN(test_networks);
    RUN(test_training_step);
    RUN(test_relu_models);
    RUN(test_sparse_snn);
    return test_finish();
}
