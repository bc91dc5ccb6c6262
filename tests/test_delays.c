/*
 * test_delays.c - learnable synaptic delays (DCLS-Delays): the delay kernel and the causal
 * temporal conv (autograd/fn_delay.c) against hand-computed values and loops in double, their
 * gradients against finite differences, the DelayLinear layer (nn/layer_delay.c) learning a
 * delay of 3 steps, rounding to a pure delay line, a checkpoint round trip, and the errors.
 * Every value check runs on both CPU tables (the reference loops and the fast GEMM-per-tap).
 *
 * Run: ctest -R delays, or build/bin/test_delays (SNN_TEST_ONLY=learns for one test).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "snn.h"
#include "test.h"

static const snn_kernel_set tables[2] = {SNN_KERNELS_REF, SNN_KERNELS_FAST};

/* A CPU STEP tensor with these values. */
static snn_tensor *host_tensor(snn_shape shape, const float *v, bool requires_grad)
{
    snn_tensor *t = snn_from_host(shape, v, SNN_CPU);
    if (t) t->requires_grad = requires_grad;
    return t;
}

/* p_k of one synapse, in double, straight from the definition (no max subtraction): the
 * hand computation the kernels are checked against, for sigmas where it does not underflow. */
static void taps_in_double(double *p, double d, double sigma, int D)
{
    double sum = 0.0;
    for (int k = 0; k < D; k++) sum += p[k] = exp(-(k - d) * (k - d) / (2.0 * sigma * sigma));
    for (int k = 0; k < D; k++) p[k] /= sum;
}

/* ---- the delay kernel ----------------------------------------------------------------------- */

static void test_kernel_values(void)
{
    for (int tb = 0; tb < 2; tb++) {
        CHECK_OK(snn_set_kernels(tables[tb]));
        snn_step_begin();
        const float w = 0.75f;
        /* d = 2 exactly, sigma small: all of w on tap 2, exactly, the others exactly 0 */
        float d = 2.0f;
        snn_tensor *K = snn_delay_kernel(host_tensor(SNN_SHAPE(1, 1), &w, false),
                                         host_tensor(SNN_SHAPE(1, 1), &d, false), 0.05f, 5);
        CHECK(K && K->shape.ndim == 3 && K->shape.dim[0] == 5);
        for (int k = 0; K && k < 5; k++) CHECK(K->data[k] == (k == 2 ? w : 0.0f));
        /* d = 1.5 with a tiny sigma: halfway, split evenly between taps 1 and 2; finite even
         * where 1 / (2 sigma^2) overflows a float */
        d = 1.5f;
        const float tiny[2] = {0.05f, 1e-30f};
        for (int s = 0; s < 2; s++) {
            K = snn_delay_kernel(host_tensor(SNN_SHAPE(1, 1), &w, false),
                                 host_tensor(SNN_SHAPE(1, 1), &d, false), tiny[s], 5);
            for (int k = 0; K && k < 5; k++)
                CHECK(K->data[k] == (k == 1 || k == 2 ? 0.5f * w : 0.0f));
        }
        /* d = 2.3, sigma = 1e-30: all on tap 2 (no NaN from 0 * inf or inf - inf) */
        d = 2.3f;
        K = snn_delay_kernel(host_tensor(SNN_SHAPE(1, 1), &w, false),
                             host_tensor(SNN_SHAPE(1, 1), &d, false), 1e-30f, 5);
        for (int k = 0; K && k < 5; k++) CHECK(K->data[k] == (k == 2 ? w : 0.0f));
        /* a wide sigma: nearly uniform; sigma 0.5 at d = 1.25 by hand:
         * phi = exp(-2 (k - 1.25)^2) = 0.043937, 0.882497, 0.324652, 0.002187, 6.7e-10 */
        d = 1.25f;
        K = snn_delay_kernel(host_tensor(SNN_SHAPE(1, 1), &w, false),
                             host_tensor(SNN_SHAPE(1, 1), &d, false), 0.5f, 5);
        const double phi[5] = {0.043937, 0.882497, 0.324652, 0.002187, 6.7e-10};
        const double sum = phi[0] + phi[1] + phi[2] + phi[3] + phi[4];
        for (int k = 0; K && k < 5; k++) CHECK_CLOSE(K->data[k], (double)w * phi[k] / sum, 2e-6, 1e-5);
        /* many synapses (O = 3, I = 4, D = 7) against the double loop; K is (D, O, I) */
        float wv[12], dv[12];
        for (int s = 0; s < 12; s++) wv[s] = 0.1f * (float)s - 0.5f, dv[s] = 0.47f * (float)s;
        K = snn_delay_kernel(host_tensor(SNN_SHAPE(3, 4), wv, false),
                             host_tensor(SNN_SHAPE(3, 4), dv, false), 1.3f, 7);
        for (int s = 0; K && s < 12; s++) {
            double p[7];
            taps_in_double(p, dv[s], 1.3, 7);
            double total = 0.0;
            for (int k = 0; k < 7; k++) {
                CHECK_CLOSE(K->data[k * 12 + s], (double)wv[s] * p[k], 1e-6, 1e-5);
                total += (double)K->data[k * 12 + s];
            }
            CHECK_CLOSE(total, wv[s], 1e-6, 1e-5); /* the taps sum to w */
        }
        snn_step_end();
    }
}

/* ---- the temporal conv -------------------------------------------------------------------- */

static void test_conv_values(void)
{
    for (int tb = 0; tb < 2; tb++) {
        CHECK_OK(snn_set_kernels(tables[tb]));
        snn_step_begin();
        /* one synapse, d = 2, small sigma: the spike train comes out 2 steps later */
        const float spikes[8] = {1, 0, 0, 1, 0, 1, 1, 0};
        const float delayed2[8] = {0, 0, 1, 0, 0, 1, 0, 1};
        const float w = 1.0f;
        float d = 2.0f;
        snn_tensor *x = host_tensor(SNN_SHAPE(8, 1, 1), spikes, false);
        snn_tensor *y = snn_temporal_conv(x, snn_delay_kernel(host_tensor(SNN_SHAPE(1, 1), &w, false),
                                                              host_tensor(SNN_SHAPE(1, 1), &d, false),
                                                              0.05f, 4));
        CHECK(y && y->shape.dim[0] == 8 && y->shape.dim[2] == 1);
        for (int t = 0; y && t < 8; t++) CHECK(y->data[t] == delayed2[t]);
        /* d = 2.5: half of each spike 2 steps later, half 3 steps later */
        d = 2.5f;
        y = snn_temporal_conv(x, snn_delay_kernel(host_tensor(SNN_SHAPE(1, 1), &w, false),
                                                  host_tensor(SNN_SHAPE(1, 1), &d, false), 0.05f, 4));
        for (int t = 0; y && t < 8; t++)
            CHECK(y->data[t] == 0.5f * delayed2[t] + 0.5f * (t >= 3 ? spikes[t - 3] : 0.0f));

        /* T = 6, N = 2, I = 3, O = 4, D = 3, and D = 9 > T, against the loop in double */
        const int Ds[2] = {3, 9};
        for (int di = 0; di < 2; di++) {
            const int T = 6, N = 2, I = 3, O = 4, D = Ds[di];
            snn_tensor *xs = test_uniform(SNN_SHAPE(T, N, I), -1, 1, 11);
            snn_tensor *Ks = test_uniform(SNN_SHAPE(D, O, I), -1, 1, 12 + (uint64_t)di);
            snn_tensor *ys = snn_temporal_conv(xs, Ks);
            CHECK(ys && ys->shape.dim[0] == T && ys->shape.dim[1] == N && ys->shape.dim[2] == O);
            for (int t = 0; ys && t < T; t++)
                for (int n = 0; n < N; n++)
                    for (int o = 0; o < O; o++) {
                        double want = 0.0;
                        for (int k = 0; k < D && k <= t; k++)
                            for (int i = 0; i < I; i++)
                                want += (double)xs->data[((t - k) * N + n) * I + i] *
                                        (double)Ks->data[(k * O + o) * I + i];
                        CHECK_CLOSE(ys->data[(t * N + n) * O + o], want, 1e-5, 1e-5);
                    }
        }
        snn_step_end();
    }
    CHECK_OK(snn_set_kernels(SNN_KERNELS_FAST));
}

/* ---- gradients ---------------------------------------------------------------------------- */

static const snn_gradcheck_options OPT = {.eps = 1e-2f, .atol = 1e-3f, .rtol = 1e-2f, .seed = 5};

static snn_tensor *f_delay_kernel(snn_tensor *const *in, void *ctx)
{
    return snn_delay_kernel(in[0], in[1], *(const float *)ctx, 6);
}
static snn_tensor *f_temporal_conv(snn_tensor *const *in, void *ctx)
{
    (void)ctx;
    return snn_temporal_conv(in[0], in[1]);
}
/* the layer's composition: x -> conv(x, kernel(w, d)) */
static snn_tensor *f_delay_layer(snn_tensor *const *in, void *ctx)
{
    return snn_temporal_conv(in[0], snn_delay_kernel(in[1], in[2], *(const float *)ctx, 4));
}

static void test_gradcheck(void)
{
    for (int tb = 0; tb < 2; tb++) {
        CHECK_OK(snn_set_kernels(tables[tb]));
        snn_step_begin();
        const float sigmas[3] = {3.0f, 0.8f, 0.5f};
        for (int s = 0; s < 3; s++) {
            snn_tensor *in[3];
            in[0] = test_uniform(SNN_SHAPE(3, 4), -1, 1, 21);
            in[1] = test_uniform(SNN_SHAPE(3, 4), 0.3f, 4.7f, 22); /* delays inside [0, 5] */
            in[0]->requires_grad = in[1]->requires_grad = true;
            float sigma = sigmas[s];
            CHECK_OK(snn_gradcheck("delay_kernel", f_delay_kernel, 2, in, &sigma, OPT));
        }
        snn_tensor *in[3];
        in[0] = test_uniform(SNN_SHAPE(5, 2, 3), -1, 1, 31);   /* x (T, N, I) */
        in[1] = test_uniform(SNN_SHAPE(3, 4, 3), -1, 1, 32);   /* K (D, O, I) */
        in[0]->requires_grad = in[1]->requires_grad = true;
        CHECK_OK(snn_gradcheck("temporal_conv", f_temporal_conv, 2, in, NULL, OPT));
        in[1] = test_uniform(SNN_SHAPE(7, 2, 3), -1, 1, 33);   /* D = 7 > T = 5 */
        in[1]->requires_grad = true;
        CHECK_OK(snn_gradcheck("temporal_conv D > T", f_temporal_conv, 2, in, NULL, OPT));
        in[0] = test_uniform(SNN_SHAPE(6, 2, 3), -1, 1, 41);   /* x */
        in[1] = test_uniform(SNN_SHAPE(2, 3), -1, 1, 42);      /* w (O, I) */
        in[2] = test_uniform(SNN_SHAPE(2, 3), 0.2f, 2.8f, 43); /* d */
        in[0]->requires_grad = in[1]->requires_grad = in[2]->requires_grad = true;
        float sigma = 1.0f;
        CHECK_OK(snn_gradcheck("delay layer", f_delay_layer, 3, in, &sigma, OPT));
        snn_step_end();
    }
    CHECK_OK(snn_set_kernels(SNN_KERNELS_FAST));
}

/* dd at a rounded delay is 0 (the mass on one tap has no neighbour to move to), and w's
 * gradient is that one tap's */
static void test_gradient_of_a_rounded_delay(void)
{
    snn_step_begin();
    const float w = -0.4f, d = 3.0f, dK[5] = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f};
    snn_tensor *wt = host_tensor(SNN_SHAPE(1, 1), &w, true);
    snn_tensor *dt = host_tensor(SNN_SHAPE(1, 1), &d, true);
    snn_tensor *K = snn_delay_kernel(wt, dt, SNN_DELAY_SIGMA_ROUND, 5);
    CHECK_OK(snn_backward_from(K, host_tensor(SNN_SHAPE(5, 1, 1), dK, false)));
    CHECK(wt->grad && wt->grad->data[0] == 0.4f);
    CHECK(dt->grad && dt->grad->data[0] == 0.0f);
    snn_step_end();
}

/* ---- the layer ---------------------------------------------------------------------------- */

/* The target: the input delayed by `delay` steps, (T, N, 1) */
static void make_delay_task(float *x, float *target, int T, int N, int delay, snn_rng *rng)
{
    for (int i = 0; i < T * N; i++) x[i] = snn_rng_uniform(rng) < 0.3f ? 1.0f : 0.0f;
    for (int t = 0; t < T; t++)
        for (int n = 0; n < N; n++) target[t * N + n] = t >= delay ? x[(t - delay) * N + n] : 0.0f;
}

/* One synapse starting at d = 0.5, w = 0.5 learns a delay of 3 steps with Adam while sigma
 * anneals from D / 2 = 4 to 0.5; then rounded, it reproduces the target exactly. */
static void test_learns_delay(void)
{
    enum { T = 32, N = 16, D = 8, STEPS = 300 };
    snn_rng rng;
    snn_rng_seed(&rng, 3);
    snn_module *fc = snn_delay_linear_new(1, 1, D, &rng);
    CHECK(fc && fc->n_params == 2 && strcmp(fc->params[1].name, "d") == 0);
    if (!fc) return;
    CHECK_CLOSE(snn_delay_linear_sigma(fc), 4.0, 0, 0);
    fc->params[0].tensor->data[0] = 0.5f;
    fc->params[1].tensor->data[0] = 0.5f;
    snn_optimizer *opt = snn_adam_new(fc, 0.05f, 0.0f, false);
    CHECK(opt != NULL);
    static float x[T * N], target[T * N];
    float loss_first = 0.0f, loss_last = 0.0f;
    for (int step = 0; opt && step < STEPS; step++) {
        CHECK_OK(snn_delay_linear_set_sigma(fc, 4.0f + (0.5f - 4.0f) * (float)step / (STEPS - 1)));
        make_delay_task(x, target, T, N, 3, &rng);
        snn_step_begin();
        snn_module_zero_grad(fc);
        snn_tensor *y = snn_module_forward(fc, snn_from_host(SNN_SHAPE(T, N, 1), x, SNN_CPU));
        snn_tensor *loss = snn_mse_loss(y, snn_from_host(SNN_SHAPE(T, N, 1), target, SNN_CPU));
        if (!loss) {
            CHECK(loss != NULL);
            snn_step_end();
            break;
        }
        if (step == 0) loss_first = snn_tensor_item(loss);
        loss_last = snn_tensor_item(loss);
        CHECK_OK(snn_backward(loss));
        CHECK_OK(snn_optimizer_step(opt));
        CHECK_OK(snn_delay_linear_clamp(fc));
        snn_step_end();
    }
    const float d = fc->params[1].tensor->data[0], w = fc->params[0].tensor->data[0];
    fprintf(stderr, "  learned: d = %.4f (target 3), w = %.4f (target 1), loss %.4g -> %.4g\n",
            (double)d, (double)w, (double)loss_first, (double)loss_last);
    CHECK(fabsf(d - 3.0f) < 0.5f);
    CHECK(loss_last < 0.1f * loss_first);

    /* rounded: d = 3 exactly, one tap, and the output is w times the target, bit for bit */
    CHECK_OK(snn_delay_linear_round(fc));
    CHECK(fc->params[1].tensor->data[0] == 3.0f);
    CHECK(snn_delay_linear_sigma(fc) == SNN_DELAY_SIGMA_ROUND);
    make_delay_task(x, target, T, N, 3, &rng);
    snn_no_grad_begin();
    snn_step_begin();
    snn_tensor *y = snn_module_forward(fc, snn_from_host(SNN_SHAPE(T, N, 1), x, SNN_CPU));
    const float wr = fc->params[0].tensor->data[0];
    for (int i = 0; y && i < T * N; i++) CHECK(y->data[i] == wr * target[i]);
    snn_step_end();
    snn_no_grad_end();
    snn_optimizer_free(opt);
    snn_module_free(fc);
}

/* clamp keeps d in [0, D - 1]; round goes to the nearest integer, ties to even */
static void test_clamp_and_round(void)
{
    snn_rng rng;
    snn_rng_seed(&rng, 4);
    snn_module *fc = snn_delay_linear_new(3, 2, 5, &rng);
    if (!fc) {
        CHECK(fc != NULL);
        return;
    }
    float *d = fc->params[1].tensor->data;
    for (int s = 0; s < 6; s++) CHECK(d[s] >= 0.0f && d[s] <= 4.0f); /* the initial draw */
    const float before[6] = {-1.0f, 0.2f, 4.7f, 2.5f, 3.5f, 1.49f};
    const float clamped[6] = {0.0f, 0.2f, 4.0f, 2.5f, 3.5f, 1.49f};
    const float rounded[6] = {0.0f, 0.0f, 4.0f, 2.0f, 4.0f, 1.0f};
    memcpy(d, before, sizeof before);
    CHECK_OK(snn_delay_linear_clamp(fc));
    for (int s = 0; s < 6; s++) CHECK(d[s] == clamped[s]);
    CHECK_OK(snn_delay_linear_round(fc));
    for (int s = 0; s < 6; s++) CHECK(d[s] == rounded[s]);

    /* the rounded layer is a delay line: y[t, n, o] = sum_i w[o, i] x[t - d[o, i], n, i] */
    enum { T = 9, N = 2, I = 3, O = 2 };
    const float *w = fc->params[0].tensor->data;
    snn_step_begin();
    snn_tensor *x = test_uniform(SNN_SHAPE(T, N, I), 0, 1, 51);
    snn_tensor *y = snn_module_forward(fc, x);
    CHECK(y && y->shape.dim[2] == O);
    for (int t = 0; y && t < T; t++)
        for (int n = 0; n < N; n++)
            for (int o = 0; o < O; o++) {
                double want = 0.0;
                for (int i = 0; i < I; i++) {
                    const int src = t - (int)rounded[o * I + i];
                    if (src >= 0) want += (double)w[o * I + i] * (double)x->data[(src * N + n) * I + i];
                }
                CHECK_CLOSE(y->data[(t * N + n) * O + o], want, 1e-6, 1e-6);
            }
    snn_step_end();
    snn_module_free(fc);
}

/* w and d go through a checkpoint like any parameter */
static void test_checkpoint_round_trip(void)
{
    snn_rng rng;
    snn_rng_seed(&rng, 6);
    snn_module *a = snn_delay_linear_new(4, 3, 10, &rng);
    snn_module *b = snn_delay_linear_new(4, 3, 10, &rng); /* other values */
    if (!a || !b) {
        CHECK(a && b);
        snn_module_free(a), snn_module_free(b);
        return;
    }
    CHECK(memcmp(a->params[1].tensor->data, b->params[1].tensor->data, 12 * sizeof(float)) != 0);
    char path[128];
    snprintf(path, sizeof path, "/tmp/snn_test_delays_%d.safetensors", (int)getpid());
    CHECK_OK(snn_checkpoint_save(path, a, NULL, NULL));
    CHECK_OK(snn_checkpoint_load(path, b, NULL));
    for (int p = 0; p < 2; p++) {
        CHECK(strcmp(a->params[p].name, b->params[p].name) == 0);
        CHECK(test_same_bits(a->params[p].tensor->data, b->params[p].tensor->data, 12));
    }
    remove(path);
    snn_module_free(a);
    snn_module_free(b);
}

/* ---- errors ------------------------------------------------------------------------------- */

/* The call failed with SNN_ERR_ARGUMENT and a message holding `a` and `b`. */
static void check_error(const void *result, const char *a, const char *b)
{
    CHECK(result == NULL);
    CHECK(snn_last_status() == SNN_ERR_ARGUMENT);
    CHECK(strstr(snn_last_error(), a) != NULL);
    CHECK(strstr(snn_last_error(), b) != NULL);
    if (!strstr(snn_last_error(), a) || !strstr(snn_last_error(), b))
        fprintf(stderr, "  message: %s\n", snn_last_error());
    snn_clear_error();
}

static void test_errors(void)
{
    snn_step_begin();
    snn_tensor *w = test_uniform(SNN_SHAPE(2, 3), -1, 1, 61);
    snn_tensor *d = test_uniform(SNN_SHAPE(2, 3), 0, 3, 62);
    check_error(snn_delay_kernel(test_uniform(SNN_SHAPE(6), 0, 1, 1), d, 1.0f, 4), "'w'", "2-D");
    check_error(snn_delay_kernel(w, test_uniform(SNN_SHAPE(3, 2), 0, 1, 1), 1.0f, 4), "'d'",
                "snn_delay_kernel");
    check_error(snn_delay_kernel(w, d, 1.0f, 0), "'D'", "got 0");
    check_error(snn_delay_kernel(w, d, 0.0f, 4), "'sigma'", "> 0");
    check_error(snn_delay_kernel(w, d, -1.0f, 4), "'sigma'", "got -1");
    check_error(snn_delay_kernel(w, d, NAN, 4), "'sigma'", "nan");
    check_error(snn_delay_kernel(w, d, INFINITY, 4), "'sigma'", "inf");
    snn_tensor *x = test_uniform(SNN_SHAPE(5, 2, 3), 0, 1, 63);
    snn_tensor *K = test_uniform(SNN_SHAPE(4, 2, 3), 0, 1, 64);
    check_error(snn_temporal_conv(test_uniform(SNN_SHAPE(10, 3), 0, 1, 1), K), "'x'", "(T, N, I)");
    check_error(snn_temporal_conv(x, test_uniform(SNN_SHAPE(2, 3), 0, 1, 1)), "'K'", "(D, O, I)");
    check_error(snn_temporal_conv(x, test_uniform(SNN_SHAPE(4, 2, 5), 0, 1, 1)), "'K'",
                "(D, O, 3)");
    check_error(snn_temporal_conv(x, NULL), "snn_temporal_conv", "'K'");
    snn_step_end();

    snn_rng rng;
    snn_rng_seed(&rng, 7);
    check_error(snn_delay_linear_new(3, 2, 0, &rng), "snn_delay_linear_new", "max_delay 0");
    check_error(snn_delay_linear_new(0, 2, 4, &rng), "snn_delay_linear_new", "in 0");
    snn_module *lin = snn_linear_new(3, 2, false, &rng);
    CHECK(snn_delay_linear_set_sigma(lin, 1.0f) == SNN_ERR_ARGUMENT &&
          strstr(snn_last_error(), "DelayLinear") && strstr(snn_last_error(), "Linear"));
    snn_clear_error();
    CHECK(snn_delay_linear_clamp(lin) == SNN_ERR_ARGUMENT);
    snn_clear_error();
    snn_module *fc = snn_delay_linear_new(3, 2, 4, &rng);
    CHECK(snn_delay_linear_set_sigma(fc, 0.0f) == SNN_ERR_ARGUMENT &&
          strstr(snn_last_error(), "'sigma'"));
    snn_clear_error();
    /* the layer's forward names the op that refused the input */
    snn_step_begin();
    check_error(snn_module_forward(fc, test_uniform(SNN_SHAPE(5, 2, 4), 0, 1, 1)),
                "snn_temporal_conv", "(D, O, 4)");
    snn_step_end();
    snn_module_free(fc);
    snn_module_free(lin);
}

int main(void)
{
    RUN(test_kernel_values);
    RUN(test_conv_values);
    RUN(test_gradcheck);
    RUN(test_gradient_of_a_rounded_delay);
    RUN(test_learns_delay);
    RUN(test_clamp_and_round);
    RUN(test_checkpoint_round_trip);
    RUN(test_errors);
    return test_finish();
}
