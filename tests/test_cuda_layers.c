/*
 * test_cuda_layers.c - ops composed of CUDA kernels, without a kernel of their own, against the
 * same ops on the CPU: label-smoothed cross-entropy, the TET loss and time-shared dropout,
 * through the tape on both devices. The kernels themselves (conv2d, pooling, batch-norm and
 * every other entry) are checked against the reference kernels by the parity harness,
 * tests/test_cuda_backend_ops.c; test_cuda_kernels.c has what the harness cannot show. And
 * OTTT's traced conv and linear (snn_conv2d_traced, snn_linear_traced: the conv and GEMM
 * kernels with the trace as dW's input). Without a GPU it exits 77 (skipped).
 * Run on the GPU machine: ctest -R cuda_layers --output-on-failure
 */
#include "cuda_parity.h"
#include "snn.h"

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

/* OTTT's traced ops on each device from the same host x (spikes), trace, weights and dY:
 * the output, dX, dW and db within 1e-5 (|cpu| + max |cpu|) (sums in other orders). */
static void test_traced_ops(void)
{
    for (int conv = 0; conv < 2; conv++) {
        const snn_shape xs = conv ? SNN_SHAPE(1, 8, 16, 12, 12) : SNN_SHAPE(1, 8, 96);
        const snn_shape ws = conv ? SNN_SHAPE(24, 16, 3, 3) : SNN_SHAPE(40, 96);
        const snn_shape ys = conv ? SNN_SHAPE(1, 8, 24, 12, 12) : SNN_SHAPE(1, 8, 40);
        const size_t nx = (size_t)snn_shape_numel(xs), nw = (size_t)snn_shape_numel(ws);
        const size_t ny = (size_t)snn_shape_numel(ys), nb = (size_t)ws.dim[0];
        float *x = integer_host(nx, 2), *a = random_host(nx, 0.0f, 3.0f);
        float *w = random_host(nw, -0.3f, 0.3f), *b = random_host(nb, -0.5f, 0.5f);
        float *dy = random_host(ny, -1.0f, 1.0f);
        float *out[2][4]; /* [device][y, dx, dw, db] */
        const size_t sizes[4] = {ny, nx, nw, nb};
        for (int dev = 0; dev < 2; dev++) {
            for (int k = 0; k < 4; k++) out[dev][k] = host_floats(sizes[k]);
            const snn_device device = dev ? SNN_CUDA : SNN_CPU;
            snn_step_begin();
            snn_tensor *tx = snn_from_host(xs, x, device), *ta = snn_from_host(xs, a, device);
            snn_tensor *tw = snn_from_host(ws, w, device), *tb = snn_from_host(SNN_SHAPE(nb), b,
                                                                               device);
            tx->requires_grad = tw->requires_grad = tb->requires_grad = true;
            snn_tensor *y = conv ? snn_conv2d_traced(tx, ta, tw, tb, 1, 1, false)
                                 : snn_linear_traced(tx, ta, tw, tb);
            snn_tensor *seed = snn_from_host(ys, dy, device);
            CHECK(y && seed && snn_backward_from(y, seed) == SNN_OK);
            if (y && tx->grad && tw->grad && tb->grad) {
                CHECK_OK(snn_tensor_copy_to_host(y, out[dev][0]));
                CHECK_OK(snn_tensor_copy_to_host(tx->grad, out[dev][1]));
                CHECK_OK(snn_tensor_copy_to_host(tw->grad, out[dev][2]));
                CHECK_OK(snn_tensor_copy_to_host(tb->grad, out[dev][3]));
            }
            snn_step_end();
        }
        const char *names[4] = {"y", "dx", "dw", "db"};
        for (int k = 0; k < 4; k++) {
            char what[64];
            snprintf(what, sizeof what, "%s: %s", conv ? "snn_conv2d_traced" : "snn_linear_traced",
                     names[k]);
            expect_scaled(what, out[1][k], out[0][k], sizes[k], 1e-5);
        }
        release_all();
    }
}

int main(void)
{
    parity_begin();
    RUN(test_losses_composed);
    RUN(test_dropout_shared_op);
    RUN(test_traced_ops);
    return test_finish();
}
