/*
 * test_cuda_layers.c - the CUDA kernel table against the CPU reference, part 2: conv2d (im2col
 * + cuBLAS chunks, 1x1 without im2col, backward with every NULL gradient output), pooling (max
 * with argmax, average with padding) and batch-norm (training statistics, running statistics,
 * eval, backward), then the ops composed of kernels without one of their own: label-smoothed
 * cross-entropy, the TET loss and time-shared dropout, through the tape on both devices. Part 1
 * is test_cuda_kernels.c; the harness and tolerances are in cuda_parity.h. Without a GPU it
 * exits 77 (skipped).
 * Run on the GPU machine: ctest -R cuda_layers --output-on-failure
 */
#include "cuda_parity.h"
#include "snn.h"

static snn_conv2d_dims conv_dims(int N, int C_in, int H, int W, int C_out, int KH, int KW,
                                 int stride, int pad)
{
    snn_conv2d_dims d = {N, C_in, H, W, C_out, KH, KW, stride, pad, 0, 0};
    d.H_out = (H + 2 * pad - KH) / stride + 1;
    d.W_out = (W + 2 * pad - KW) / stride + 1;
    return d;
}

/* skip: bit 0 drops dx, bit 1 dweight, bit 2 dbias */
static void conv_case(snn_conv2d_dims d, bool with_bias, int skip)
{
    char what[200], dims[128];
    snprintf(dims, sizeof dims, "N=%d Cin=%d %dx%d Cout=%d k=%dx%d s=%d p=%d%s skip=%d", d.N,
             d.C_in, d.H, d.W, d.C_out, d.KH, d.KW, d.stride, d.pad, with_bias ? " bias" : "",
             skip);
    const size_t nx = (size_t)d.N * d.C_in * d.H * d.W;
    const size_t nw = (size_t)d.C_out * d.C_in * d.KH * d.KW;
    const size_t nout = (size_t)d.N * d.C_out * d.H_out * d.W_out;
    const size_t nb = (size_t)d.C_out;
    float *x = random_host(nx, -1.0f, 1.0f), *w = random_host(nw, -1.0f, 1.0f);
    float *bias = random_host(nb, -1.0f, 1.0f), *out = host_floats(nout);
    const size_t ws_cpu = cpu->conv2d_workspace_bytes(&d);
    const size_t ws_gpu = gpu->conv2d_workspace_bytes(&d);
    float *w_cpu = tracked_alloc(ws_cpu, SNN_CPU);
    float *w_gpu = tracked_alloc(ws_gpu, SNN_CUDA);
    float *d_x = dev_copy(x, nx), *d_w = dev_copy(w, nw), *d_bias = dev_copy(bias, nb);
    float *d_out = dev_floats(nout);

    cpu->conv2d_forward(out, x, w, with_bias ? bias : NULL, &d, w_cpu);
    gpu->conv2d_forward(d_out, d_x, d_w, with_bias ? d_bias : NULL, &d, w_gpu);
    snprintf(what, sizeof what, "conv2d_forward %s", dims);
    expect_norm(what, d_out, out, nout, NORM_TOL);

    float *dout = random_host(nout, -1.0f, 1.0f);
    float *dx = random_host(nx, -1.0f, 1.0f), *dw = random_host(nw, -1.0f, 1.0f);
    float *db = random_host(nb, -1.0f, 1.0f);
    float *d_dout = dev_copy(dout, nout), *d_dx = dev_copy(dx, nx), *d_dw = dev_copy(dw, nw);
    float *d_db = dev_copy(db, nb);
    cpu->conv2d_backward(skip & 1 ? NULL : dx, skip & 2 ? NULL : dw, skip & 4 ? NULL : db, dout,
                         x, w, &d, w_cpu);
    gpu->conv2d_backward(skip & 1 ? NULL : d_dx, skip & 2 ? NULL : d_dw, skip & 4 ? NULL : d_db,
                         d_dout, d_x, d_w, &d, w_gpu);
    snprintf(what, sizeof what, "conv2d_backward dx %s", dims);
    expect_norm(what, d_dx, dx, nx, NORM_TOL);
    snprintf(what, sizeof what, "conv2d_backward dweight %s", dims);
    expect_norm(what, d_dw, dw, nw, NORM_TOL);
    snprintf(what, sizeof what, "conv2d_backward dbias %s", dims);
    expect_close(what, d_db, db, nb, 1e-5, RTOL);
    release_all();
}

static void test_conv2d(void)
{
    conv_case(conv_dims(5, 3, 11, 11, 8, 3, 3, 1, 1), true, 0);
    conv_case(conv_dims(4, 16, 8, 8, 32, 1, 1, 1, 0), false, 0);  /* 1x1: no im2col */
    conv_case(conv_dims(4, 16, 8, 8, 32, 1, 1, 1, 0), true, 2);   /* 1x1, dweight NULL */
    conv_case(conv_dims(3, 8, 9, 7, 12, 3, 3, 2, 1), true, 0);    /* stride 2, non-square */
    conv_case(conv_dims(4, 8, 8, 8, 16, 1, 1, 2, 0), false, 0);   /* ResNet downsample */
    conv_case(conv_dims(2, 4, 10, 10, 6, 5, 5, 1, 2), true, 0);   /* 5x5 */
    conv_case(conv_dims(3, 4, 6, 5, 5, 3, 1, 1, 1), true, 0);     /* 3x1 kernel */
    conv_case(conv_dims(2, 6, 7, 7, 4, 3, 3, 3, 2), true, 0);     /* stride 3 > pad */
    for (int skip = 1; skip < 8; skip++)                           /* every NULL combination */
        conv_case(conv_dims(3, 5, 6, 6, 7, 3, 3, 1, 1), true, skip);
    /* ResNet-18 layer-1 shape: a chunk holds 12 images, so 30 make three, the last one short */
    conv_case(conv_dims(30, 64, 32, 32, 64, 3, 3, 1, 1), true, 0);
    /* 1x1 in two chunks (128 images per chunk) */
    conv_case(conv_dims(200, 128, 16, 16, 128, 1, 1, 1, 0), true, 0);
    /* late layer: 4x4 outputs, many images side by side in one SGEMM */
    conv_case(conv_dims(40, 64, 8, 8, 128, 3, 3, 2, 1), true, 0);
}

/* ---------------------------------------------------------------------------------------------
 * Pooling
 * ------------------------------------------------------------------------------------------- */

static snn_pool2d_dims pool_dims(int N, int C, int H, int W, int K, int stride, int pad)
{
    snn_pool2d_dims d = {N, C, H, W, K, stride, pad, 0, 0};
    d.H_out = (H + 2 * pad - K) / stride + 1;
    d.W_out = (W + 2 * pad - K) / stride + 1;
    return d;
}

static void pool_case(snn_pool2d_dims d)
{
    char what[160], dims[96];
    snprintf(dims, sizeof dims, "N=%d C=%d %dx%d K=%d s=%d p=%d", d.N, d.C, d.H, d.W, d.K,
             d.stride, d.pad);
    const size_t nx = (size_t)d.N * d.C * d.H * d.W;
    const size_t nout = (size_t)d.N * d.C * d.H_out * d.W_out;

    /* max: integer inputs make ties, so the first-in-scan-order rule is tested */
    float *x = integer_host(nx, 5), *out = host_floats(nout);
    int32_t *argmax = tracked_alloc(nout * sizeof *argmax, SNN_CPU);
    float *d_x = dev_copy(x, nx), *d_out = dev_floats(nout);
    int32_t *d_argmax = tracked_alloc(nout * sizeof *argmax, SNN_CUDA);
    cpu->max_pool2d_forward(out, argmax, x, &d);
    gpu->max_pool2d_forward(d_out, d_argmax, d_x, &d);
    snprintf(what, sizeof what, "max_pool2d_forward out %s", dims);
    expect_exact(what, d_out, out, nout * sizeof *out);
    snprintf(what, sizeof what, "max_pool2d_forward argmax %s", dims);
    expect_exact(what, d_argmax, argmax, nout * sizeof *argmax);

    float *dout = random_host(nout, -1.0f, 1.0f), *dx = random_host(nx, -1.0f, 1.0f);
    float *d_dout = dev_copy(dout, nout), *d_dx = dev_copy(dx, nx);
    cpu->max_pool2d_backward(dx, dout, argmax, &d);
    gpu->max_pool2d_backward(d_dx, d_dout, d_argmax, &d);
    snprintf(what, sizeof what, "max_pool2d_backward %s", dims);
    expect_close(what, d_dx, dx, nx, ATOL, RTOL);

    /* average */
    float *xa = random_host(nx, -1.0f, 1.0f);
    float *d_xa = dev_copy(xa, nx);
    cpu->avg_pool2d_forward(out, xa, &d);
    gpu->avg_pool2d_forward(d_out, d_xa, &d);
    snprintf(what, sizeof what, "avg_pool2d_forward %s", dims);
    expect_close(what, d_out, out, nout, ATOL, RTOL);
    float *dxa = random_host(nx, -1.0f, 1.0f);
    float *d_dxa = dev_copy(dxa, nx);
    cpu->avg_pool2d_backward(dxa, dout, &d);
    gpu->avg_pool2d_backward(d_dxa, d_dout, &d);
    snprintf(what, sizeof what, "avg_pool2d_backward %s", dims);
    expect_close(what, d_dxa, dxa, nx, ATOL, RTOL);
    release_all();
}

static void test_pool2d(void)
{
    pool_case(pool_dims(4, 3, 8, 8, 2, 2, 0));
    pool_case(pool_dims(2, 5, 9, 7, 3, 2, 1));   /* overlapping windows with padding */
    pool_case(pool_dims(3, 2, 7, 9, 3, 1, 1));   /* stride 1 */
    pool_case(pool_dims(64, 32, 28, 28, 2, 2, 0));
    pool_case(pool_dims(2, 2, 5, 5, 4, 3, 2));   /* windows that see mostly padding */
}

/* ---------------------------------------------------------------------------------------------
 * Batch-norm
 * ------------------------------------------------------------------------------------------- */

static void batchnorm_case(int N, int C, int HW, bool affine, bool running, int skip)
{
    char what[160], dims[96];
    snprintf(dims, sizeof dims, "N=%d C=%d HW=%d%s%s skip=%d", N, C, HW,
             affine ? " affine" : "", running ? " running" : "", skip);
    const size_t n = (size_t)N * C * HW, c = (size_t)C;
    float *x = random_host(n, -1.0f, 3.0f); /* mean away from 0 */
    float *gamma = random_host(c, 0.5f, 1.5f), *beta = random_host(c, -0.5f, 0.5f);
    float *rmean = random_host(c, -0.1f, 0.1f), *rvar = random_host(c, 0.5f, 1.5f);
    float *out = host_floats(n), *mean = host_floats(c), *invstd = host_floats(c);
    float *d_x = dev_copy(x, n), *d_gamma = dev_copy(gamma, c), *d_beta = dev_copy(beta, c);
    float *d_rmean = dev_copy(rmean, c), *d_rvar = dev_copy(rvar, c);
    float *d_out = dev_floats(n), *d_mean = dev_floats(c), *d_invstd = dev_floats(c);

    cpu->batchnorm_forward_train(out, mean, invstd, running ? rmean : NULL, running ? rvar : NULL,
                                 x, affine ? gamma : NULL, affine ? beta : NULL, N, C, HW, 0.1f,
                                 1e-5f);
    gpu->batchnorm_forward_train(d_out, d_mean, d_invstd, running ? d_rmean : NULL,
                                 running ? d_rvar : NULL, d_x, affine ? d_gamma : NULL,
                                 affine ? d_beta : NULL, N, C, HW, 0.1f, 1e-5f);
    snprintf(what, sizeof what, "batchnorm_forward_train out %s", dims);
    expect_close(what, d_out, out, n, 1e-5, RTOL);
    snprintf(what, sizeof what, "batchnorm_forward_train save_mean %s", dims);
    expect_close(what, d_mean, mean, c, ATOL, RTOL);
    snprintf(what, sizeof what, "batchnorm_forward_train save_invstd %s", dims);
    expect_close(what, d_invstd, invstd, c, ATOL, RTOL);
    snprintf(what, sizeof what, "batchnorm_forward_train running_mean %s", dims);
    expect_close(what, d_rmean, rmean, c, ATOL, RTOL);
    snprintf(what, sizeof what, "batchnorm_forward_train running_var %s", dims);
    expect_close(what, d_rvar, rvar, c, ATOL, RTOL);

    /* eval, with the updated running statistics */
    cpu->batchnorm_forward_eval(out, x, affine ? gamma : NULL, affine ? beta : NULL, rmean, rvar,
                                N, C, HW, 1e-5f);
    gpu->batchnorm_forward_eval(d_out, d_x, affine ? d_gamma : NULL, affine ? d_beta : NULL,
                                d_rmean, d_rvar, N, C, HW, 1e-5f);
    snprintf(what, sizeof what, "batchnorm_forward_eval %s", dims);
    expect_close(what, d_out, out, n, 1e-5, RTOL);

    /* backward from the CPU's saved statistics on both sides; skip: bit 0 dx, 1 dgamma, 2 dbeta */
    float *d_mean_cpu = dev_copy(mean, c), *d_invstd_cpu = dev_copy(invstd, c);
    float *dout = random_host(n, -1.0f, 1.0f), *dx = random_host(n, -1.0f, 1.0f);
    float *dgamma = random_host(c, -1.0f, 1.0f), *dbeta = random_host(c, -1.0f, 1.0f);
    float *d_dout = dev_copy(dout, n), *d_dx = dev_copy(dx, n);
    float *d_dgamma = dev_copy(dgamma, c), *d_dbeta = dev_copy(dbeta, c);
    cpu->batchnorm_backward(skip & 1 ? NULL : dx, skip & 2 ? NULL : dgamma, skip & 4 ? NULL : dbeta,
                            dout, x, affine ? gamma : NULL, mean, invstd, N, C, HW);
    gpu->batchnorm_backward(skip & 1 ? NULL : d_dx, skip & 2 ? NULL : d_dgamma,
                            skip & 4 ? NULL : d_dbeta, d_dout, d_x, affine ? d_gamma : NULL,
                            d_mean_cpu, d_invstd_cpu, N, C, HW);
    snprintf(what, sizeof what, "batchnorm_backward dx %s", dims);
    expect_close(what, d_dx, dx, n, 1e-5, RTOL);
    snprintf(what, sizeof what, "batchnorm_backward dgamma %s", dims);
    expect_close(what, d_dgamma, dgamma, c, 1e-5, RTOL);
    snprintf(what, sizeof what, "batchnorm_backward dbeta %s", dims);
    expect_close(what, d_dbeta, dbeta, c, 1e-5, RTOL);
    release_all();
}

static void test_batchnorm(void)
{
    batchnorm_case(8, 16, 49, true, true, 0);
    batchnorm_case(64, 3, 1024, true, true, 0);   /* few channels, long sums */
    batchnorm_case(128, 10, 1, true, true, 0);    /* BatchNorm1d */
    batchnorm_case(4, 300, 7, false, false, 0);   /* no affine, no running statistics */
    batchnorm_case(1, 5, 1, true, true, 0);       /* M = 1: no Bessel correction */
    batchnorm_case(4096, 4, 3, true, true, 0);    /* segments walking planes shorter than a block */
    batchnorm_case(20000, 2, 1, true, true, 0);   /* segments with HW = 1 */
    for (int skip = 1; skip < 8; skip++) batchnorm_case(6, 8, 25, true, true, skip);
}

/* ---------------------------------------------------------------------------------------------
 * Losses and dropout composed of ops (autograd/fn_loss.c, autograd/fn_dropout.c, nn/loss_tet.c):
 * the same host inputs through the tape on each device, backward included. These ops have no
 * kernel of their own, so this checks that their composition runs on CUDA tensors (labels
 * repeated on the device, broadcast masks) and agrees with the CPU:
 *   - losses: the value within 1e-5 relative (sums in other orders); gradients per element
 *     within 1e-5 (|cpu| + max |cpu|) (a gradient near zero is a difference of nearly equal
 *     softmax and target values, so its error scales with the row's largest terms);
 *   - dropout: values and gradients bit for bit (the mask is the same hash on both devices,
 *     and y = x mask, dx = dy mask are single products).
 * ------------------------------------------------------------------------------------------- */

typedef struct loss_case {
    const char *name;
    int T;                    /* 0: cross_entropy_smooth on (N, K); else tet_loss on (T, N, K) */
    int N, K;
    float smoothing, lambda, phi;
} loss_case;

/* The loss of the case and dlogits on `device`, from host logits x and labels, into host
 * buffers. */
static void loss_on(const loss_case *c, snn_device device, const float *x, const float *labels,
                    float *loss, float *dx)
{
    const snn_shape shape = c->T ? SNN_SHAPE(c->T, c->N, c->K) : SNN_SHAPE(c->N, c->K);
    snn_step_begin();
    snn_tensor *logits = snn_from_host(shape, x, device);
    snn_tensor *y = snn_from_host(SNN_SHAPE(c->N), labels, device);
    if (logits) logits->requires_grad = true;
    snn_tensor *l = !logits || !y ? NULL
                    : c->T ? snn_tet_loss(logits, y, c->lambda, c->phi, c->smoothing)
                           : snn_cross_entropy_smooth(logits, y, c->smoothing);
    CHECK(l != NULL);
    if (l) {
        CHECK_OK(snn_backward(l));
        CHECK_OK(snn_tensor_copy_to_host(l, loss));
        CHECK(logits->grad != NULL);
        if (logits->grad) CHECK_OK(snn_tensor_copy_to_host(logits->grad, dx));
    } else {
        fprintf(stderr, "%s on %s: %s\n", c->name, snn_device_name(device), snn_last_error());
    }
    snn_step_end();
}

/* |got - want| <= rtol (|want| + max |want|) for every element */
static void expect_scaled(const char *what, const float *got, const float *want, size_t n,
                          double rtol)
{
    double top = 0.0;
    for (size_t i = 0; i < n; i++) top = fmax(top, fabs((double)want[i]));
    size_t bad = 0, where = 0;
    for (size_t i = 0; i < n; i++)
        if (!(fabs((double)got[i] - (double)want[i]) <= rtol * (fabs((double)want[i]) + top)))
            bad += 1, where = i;
    test_checks++;
    if (bad) {
        test_failures++;
        fprintf(stderr, "FAIL %s: %zu of %zu differ, e.g. [%zu] cuda %.9g vs cpu %.9g\n", what,
                bad, n, where, (double)got[where], (double)want[where]);
    }
}

static void test_losses_composed(void)
{
    const loss_case cases[] = {
        {"cross_entropy_smooth 0.1", 0, 64, 10, 0.1f, 0, 0},
        {"cross_entropy_smooth 0.3, K 1000", 0, 7, 1000, 0.3f, 0, 0},
        {"cross_entropy_smooth 0", 0, 33, 11, 0.0f, 0, 0},
        {"tet T4 lambda 1e-3", 4, 32, 10, 0.0f, 1e-3f, 1.0f},
        {"tet T6 lambda 0.05 smoothing 0.1", 6, 17, 11, 0.1f, 0.05f, 1.0f},
        {"tet T2 lambda 0", 2, 128, 100, 0.0f, 0.0f, 1.0f},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const loss_case *c = &cases[i];
        const size_t n = (size_t)(c->T ? c->T : 1) * (size_t)c->N * (size_t)c->K;
        float *x = random_host(n, -4.0f, 4.0f);
        float *labels = integer_host((size_t)c->N, c->K);
        float loss[2] = {NAN, NAN}, *dx_cpu = host_floats(n), *dx_gpu = host_floats(n);
        loss_on(c, SNN_CPU, x, labels, &loss[0], dx_cpu);
        loss_on(c, SNN_CUDA, x, labels, &loss[1], dx_gpu);
        char what[128];
        snprintf(what, sizeof what, "%s: loss", c->name);
        test_checks++;
        if (!(fabs((double)loss[1] - (double)loss[0]) <= 1e-5 * fabs((double)loss[0]))) {
            test_failures++;
            fprintf(stderr, "FAIL %s: cuda %.9g vs cpu %.9g\n", what, (double)loss[1], (double)loss[0]);
        }
        snprintf(what, sizeof what, "%s: dlogits", c->name);
        expect_scaled(what, dx_gpu, dx_cpu, n, 1e-5);
        release_all();
    }
}

static void test_dropout_shared_op(void)
{
    const int T = 4, N = 16, F = 300;
    const size_t n = (size_t)T * N * F;
    float *x = random_host(n, -1.0f, 1.0f), *dy = random_host(n, -1.0f, 1.0f);
    float *y[2] = {host_floats(n), host_floats(n)}, *dx[2] = {host_floats(n), host_floats(n)};
    for (int dev = 0; dev < 2; dev++) {
        const snn_device device = dev ? SNN_CUDA : SNN_CPU;
        snn_step_begin();
        snn_tensor *t = snn_from_host(SNN_SHAPE(T, N, F), x, device);
        if (t) t->requires_grad = true;
        snn_tensor *out = snn_dropout_shared(t, 0.3f, true, 4242, 1);
        snn_tensor *seed = snn_from_host(SNN_SHAPE(T, N, F), dy, device);
        CHECK(out && seed);
        if (out && seed) {
            CHECK_OK(snn_backward_from(out, seed));
            CHECK_OK(snn_tensor_copy_to_host(out, y[dev]));
            CHECK(t->grad != NULL);
            if (t->grad) CHECK_OK(snn_tensor_copy_to_host(t->grad, dx[dev]));
        }
        snn_step_end();
    }
    test_checks += 2;
    if (memcmp(y[1], y[0], n * sizeof(float)) != 0) {
        test_failures++;
        fprintf(stderr, "FAIL dropout_shared: the outputs are not bit-identical\n");
    }
    if (memcmp(dx[1], dx[0], n * sizeof(float)) != 0) {
        test_failures++;
        fprintf(stderr, "FAIL dropout_shared: the gradients are not bit-identical\n");
    }
    release_all();
}

int main(void)
{
    parity_begin();
    RUN(test_conv2d);
    RUN(test_pool2d);
    RUN(test_batchnorm);
    RUN(test_losses_composed);
    RUN(test_dropout_shared_op);
    return test_finish();
}
