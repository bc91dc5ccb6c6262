/*
 * test_ann2snn.c - ANN -> SNN conversion (nn/ann2snn.c) and the ops it is made of (CPU).
 *
 *   qclip            the op's forward against the reference kernel (kernels/ref/qclip.c;
 *                    unsigned and symmetric levels, the clips, the step's floor, a tie, a step
 *                    below the clamp); backward against LSQ's closed form in double (the staircase
 *                    has no useful finite differences: as the spike's surrogate, the estimator is
 *                    checked against its formula).
 *   one layer        for random inputs (not multiples of anything) and non-power-of-two steps,
 *                    an ST-BIF layer fed the input at t = 0 sums, after max(A_max, -A_min)
 *                    steps, to EXACTLY the quantized activation snn_qclip computes: as counts,
 *                    A == q element for element.
 *   running max-pool the op against the reference kernel (kernels/ref/running_pool.c); its
 *                    summed output is the max-pool of the summed input; a silent plane stays
 *                    silent; gradcheck through time.
 *   first-step ops   values and gradcheck.
 *   whole networks   a tiny QANN CNN, ResNet-18 and SEW-ResNet-18 (random weights, batch-norm
 *                    statistics and steps, 4 levels): the converted SNN's summed logits equal the
 *                    QANN's to 1e-5 (relative to the largest logit) at the derived bound
 *                    T* = D_1 + (K - 1)(L - 1) (CNN 9, ResNets 51), and not at T = 1.
 *   sparse SNN       the converted CNN sparsified (GEMM and event paths) gives the dense SNN's
 *                    logits bit for bit: its spikes are -theta, 0, +theta.
 *   refusals         a LIF SNN, a ReLU ANN, an already converted SNN, a module the rewrite does
 *                    not know and a max-pool with overlapping windows are refused, each with a
 *                    message that names it (and where it is); so are NULL and T < 1.
 *   ANN models       relu / qclip models run T = 1 only, train (finite, nonzero step gradients),
 *                    and keep their levels through a checkpoint.
 * Run: ctest -R ann2snn
 */
#include <math.h>
#include <string.h>

#include "snn.h"
#include "ann2snn_models.h"
#include "kernels/neuron_kernels.h"
#include "kernels/ref/neuron_ref.h"
#include "sparse/sparse.h"
#include "test.h"

static snn_neuron_config qclip_config(int levels, bool symmetric)
{
    snn_neuron_config c = snn_neuron_config_default(SNN_NEURON_QCLIP);
    c.levels = levels;
    c.symmetric = symmetric;
    return c;
}

/* ---- qclip -------------------------------------------------------------------------------- */

static void test_qclip_forward(void)
{
    enum { T = 1, N = 3, F = 200 };
    snn_rng rng;
    snn_rng_seed(&rng, 1);
    const float steps[3] = {0.37f, 1.0f, 0.0f}; /* 0: below the clamp, the quantizer uses 1e-6 */
    for (int sym = 0; sym < 2; sym++) {
        for (int is = 0; is < 3; is++) {
            snn_neuron_config c = qclip_config(sym ? 8 : 4, sym != 0);
            int a_min, a_max;
            snn_stbif_bounds(&c, &a_min, &a_max);
            const float s = steps[is] > SNN_QCLIP_MIN_STEP ? steps[is] : SNN_QCLIP_MIN_STEP;
            CHECK_OK(snn_step_begin());
            snn_tensor *x = snn_empty(SNN_SHAPE(T, N, F), SNN_CPU);
            for (int64_t i = 0; i < x->numel; i++)
                x->data[i] = (snn_rng_uniform(&rng) * 2.0f - 1.0f) * s * (float)(a_max + 3);
            x->data[0] = 0.5f * s; /* a tie: rounds up */
            snn_tensor *step = snn_full(SNN_SHAPE(1), steps[is], SNN_CPU);
            snn_tensor *y = snn_qclip(x, step, &c);
            CHECK(y != NULL);
            /* the reference: s clip(floor(x / s + 1/2), A_min, A_max) */
            snn_tensor *ref = snn_empty(x->shape, SNN_CPU);
            const snn_neuron_params p = snn_neuron_params_from(&c);
            snn_qclip_forward_ref(ref->data, x->data, step->data, &p, x->numel);
            int bad = 0, lo = 0, hi = 0;
            for (int64_t i = 0; y && i < x->numel; i++) {
                const float want = ref->data[i];
                bad += y->data[i] != want;
                lo += want == s * (float)a_min;
                hi += want == s * (float)a_max;
            }
            CHECK(bad == 0);
            CHECK(lo > 0 && hi > 0);
            CHECK(y && y->data[0] == (sym ? 1.0f : 1.0f) * s);
            snn_step_end();
        }
    }
}

/* dx and dstep against LSQ's formula in double, for one random upstream gradient. */
static void test_qclip_estimator(void)
{
    enum { T = 2, N = 3, F = 50 };
    snn_rng rng;
    snn_rng_seed(&rng, 2);
    for (int sym = 0; sym < 2; sym++) {
        snn_neuron_config c = qclip_config(sym ? 8 : 4, sym != 0);
        int a_min, a_max;
        snn_stbif_bounds(&c, &a_min, &a_max);
        const float s = 0.43f;
        CHECK_OK(snn_step_begin());
        snn_tensor *x = snn_empty(SNN_SHAPE(T, N, F), SNN_CPU);
        snn_tensor *dy = snn_empty(SNN_SHAPE(T, N, F), SNN_CPU);
        for (int64_t i = 0; i < x->numel; i++) {
            x->data[i] = (snn_rng_uniform(&rng) * 2.0f - 1.0f) * s * (float)(a_max + 3);
            dy->data[i] = snn_rng_normal(&rng);
        }
        x->requires_grad = true;
        snn_tensor *step = snn_qclip_step_new(s, SNN_CPU);
        snn_tensor *y = snn_qclip(x, step, &c);
        CHECK(y != NULL);
        CHECK_OK(snn_backward_from(y, dy));
        double want_ds = 0.0;
        int bad = 0, inside = 0;
        for (int64_t i = 0; x->grad && i < x->numel; i++) {
            const float r = x->data[i] / s;
            const bool in = r >= (float)a_min && r <= (float)a_max;
            inside += in;
            bad += x->grad->data[i] != (in ? dy->data[i] : 0.0f);
            const double term = r < (float)a_min ? a_min : r > (float)a_max ? a_max
                                                                            : floor((double)r + 0.5) - (double)r;
            want_ds += (double)dy->data[i] * term;
        }
        want_ds /= sqrt((double)F * (double)(a_max > -a_min ? a_max : -a_min)); /* LSQ's g */
        CHECK(x->grad != NULL && bad == 0);
        CHECK(inside > 0 && inside < x->numel);
        CHECK(step->grad != NULL);
        if (step->grad) CHECK_CLOSE(step->grad->data[0], want_ds, 1e-6, 1e-5);
        snn_step_end();
        snn_tensor_free(step);
    }
}

/* ---- one layer: ST-BIF sums to the quantizer ---------------------------------------------- */

static void check_layer(int levels, bool symmetric, float s, uint64_t seed)
{
    enum { N = 40, F = 250, M = N * F };
    snn_neuron_config q = qclip_config(levels, symmetric);
    snn_neuron_config b = snn_neuron_config_default(SNN_NEURON_STBIF);
    b.levels = levels;
    b.symmetric = symmetric;
    b.theta = s;
    int a_min, a_max;
    snn_stbif_bounds(&q, &a_min, &a_max);
    const int T = a_max > -a_min ? a_max : -a_min; /* D_1: from A = 0 to either bound */
    snn_rng rng;
    snn_rng_seed(&rng, seed);
    CHECK_OK(snn_step_begin());
    snn_tensor *x = snn_empty(SNN_SHAPE(1, N, F), SNN_CPU);
    for (int i = 0; i < M; i++)
        x->data[i] = (snn_rng_uniform(&rng) * 2.0f - 1.0f) * s * (float)(levels + 2);
    snn_tensor *step = snn_full(SNN_SHAPE(1), s, SNN_CPU);
    snn_tensor *y = snn_qclip(x, step, &q);
    /* the input at t = 0 only, as a converted network presents it */
    snn_tensor *spikes = snn_neuron_multistep(snn_first_step(snn_reshape(x, SNN_SHAPE(N, F)), T),
                                              &b, NULL, NULL); /* (T, N, F) */
    CHECK(y && spikes);
    int bad = 0, fewer = 0;
    for (int i = 0; y && spikes && i < M; i++) {
        float count = 0.0f; /* A: theta S / theta is exactly S */
        for (int t = 0; t < T; t++) count += spikes->data[(int64_t)t * M + i] / s;
        bad += s * count != y->data[i];
        /* one step fewer is not enough for some element */
        fewer += T > 1 && count - spikes->data[(int64_t)(T - 1) * M + i] / s != y->data[i] / s;
    }
    if (bad) fprintf(stderr, "  L=%d sym=%d s=%g: %d of %d differ\n", levels, symmetric, (double)s, bad, M);
    CHECK(bad == 0);
    CHECK(T == 1 || fewer > 0);
    snn_step_end();
}

static void test_one_layer_exact(void)
{
    const float steps[3] = {0.3137f, 1.0f, 2.71828f};
    const int levels[3] = {2, 4, 16};
    uint64_t seed = 30;
    for (int il = 0; il < 3; il++)
        for (int sym = 0; sym < 2; sym++)
            for (int is = 0; is < 3; is++) check_layer(levels[il], sym != 0, steps[is], seed++);
}

/* ---- the running max-pool and the first-step ops ------------------------------------------ */

static void test_running_pool(void)
{
    enum { T = 5, N = 2, C = 3, H = 5, W = 6, K = 2 };  /* 5x6: the last row is left out */
    const int HO = (H - K) / K + 1, WO = (W - K) / K + 1;
    snn_rng rng;
    snn_rng_seed(&rng, 5);
    CHECK_OK(snn_step_begin());
    snn_tensor *x = snn_empty(SNN_SHAPE(T, N, C, H, W), SNN_CPU);
    /* integer multiples of 1/4 (every sum exact), plane (n 1, c 2) silent at t = 3 */
    for (int64_t i = 0; i < x->numel; i++) x->data[i] = (float)((int)snn_rng_below(&rng, 9) - 4) / 4.0f;
    const int64_t plane = H * W, step = (int64_t)N * C * plane;
    for (int i = 0; i < plane; i++) x->data[3 * step + (1 * C + 2) * plane + i] = 0.0f;
    snn_tensor *y = snn_running_max_pool2d(x, K, K);
    CHECK(y && y->shape.ndim == 5 && y->shape.dim[3] == HO && y->shape.dim[4] == WO);
    /* the reference kernel's output, bit for bit */
    const snn_running_pool_dims d = {T, N * C, H, W, K, K, HO, WO};
    snn_tensor *ref = snn_empty(SNN_SHAPE(T, N, C, HO, WO), SNN_CPU);
    snn_running_max_pool_forward_ref(ref->data, NULL, x->data, &d);
    CHECK(y && test_same_bits(y->data, ref->data, (long)ref->numel));
    int bad_sum = 0;
    for (int q = 0; y && q < N * C; q++)
        for (int oh = 0; oh < HO; oh++)
            for (int ow = 0; ow < WO; ow++) {
                /* the emitted changes add up to the max over the window of the summed input */
                float S[K * K] = {0}, total = 0.0f, m = -INFINITY;
                for (int t = 0; t < T; t++) {
                    const float *xt = x->data + t * step + q * plane;   /* (H, W) */
                    for (int e = 0; e < K * K; e++)
                        S[e] += xt[(oh * K + e / K) * W + ow * K + e % K];
                    total += y->data[t * N * C * HO * WO + (q * HO + oh) * WO + ow];
                }
                for (int e = 0; e < K * K; e++) m = fmaxf(m, S[e]);
                bad_sum += total != m;
            }
    CHECK(bad_sum == 0);
    int silent = 0;
    for (int i = 0; y && i < HO * WO; i++) silent += y->data[3 * N * C * HO * WO + (1 * C + 2) * HO * WO + i] == 0.0f;
    CHECK(silent == HO * WO);
    CHECK(snn_running_max_pool2d(x, 3, 2) == NULL);                       /* overlapping */
    CHECK(strstr(snn_last_error(), "overlapping") != NULL);
    snn_clear_error();
    CHECK(snn_running_max_pool2d(snn_reshape(x, SNN_SHAPE(T * N, C, H, W)), K, K) == NULL);
    snn_clear_error();
    snn_step_end();
}

static const snn_gradcheck_options OPT = {.eps = 1e-3f, .atol = 1e-3f, .rtol = 1e-2f, .seed = 7};

static snn_tensor *f_running_pool(snn_tensor *const *in, void *ctx)
{
    (void)ctx;
    return snn_running_max_pool2d(in[0], 2, 2);
}

static snn_tensor *f_first_step(snn_tensor *const *in, void *ctx)
{
    (void)ctx;
    return snn_first_step(in[0], 3);
}

static snn_tensor *f_add_first_step(snn_tensor *const *in, void *ctx)
{
    (void)ctx;
    return snn_add_first_step(in[0], in[1]);
}

static snn_tensor *random_input(snn_shape shape, uint64_t seed)
{
    snn_rng rng;
    snn_rng_seed(&rng, seed);
    snn_tensor *t = snn_empty(shape, SNN_CPU);
    for (int64_t i = 0; i < t->numel; i++) t->data[i] = snn_rng_uniform(&rng) * 2.0f - 1.0f;
    t->requires_grad = true;
    return t;
}

static void test_gradchecks(void)
{
    CHECK_OK(snn_step_begin());
    snn_tensor *in[2] = {random_input(SNN_SHAPE(3, 1, 2, 4, 4), 11), NULL};
    CHECK_OK(snn_gradcheck("running_max_pool2d", f_running_pool, 1, in, NULL, OPT));
    in[0] = random_input(SNN_SHAPE(2, 3), 12);
    CHECK_OK(snn_gradcheck("first_step", f_first_step, 1, in, NULL, OPT));
    in[0] = random_input(SNN_SHAPE(3, 2, 4, 2, 3), 13);
    in[1] = random_input(SNN_SHAPE(4), 14);
    CHECK_OK(snn_gradcheck("add_first_step", f_add_first_step, 2, in, NULL, OPT));
    /* values: the bias lands on t = 0 only */
    snn_no_grad_begin();
    snn_tensor *y = snn_add_first_step(in[0], in[1]);
    int bad = 0;
    for (int64_t i = 0; y && i < y->numel; i++) {
        const int64_t t = i / (2 * 4 * 6), c = i / 6 % 4;
        bad += y->data[i] != in[0]->data[i] + (t == 0 ? in[1]->data[c] : 0.0f);
    }
    CHECK(y && bad == 0);
    snn_tensor *z = snn_first_step(in[1], 3);
    CHECK(z && z->shape.dim[0] == 3 && z->data[1] == in[1]->data[1] && z->data[5] == 0.0f);
    snn_no_grad_end();
    snn_step_end();
}

/* ---- whole networks ----------------------------------------------------------------------- */

static void check_network(snn_model_kind kind, int want_bound)
{
    enum { N = 3 };
    const snn_model_config c = tiny_qann(kind);
    snn_module *qann = tiny_qann_new(kind, 40 + (uint64_t)kind, SNN_CPU);
    if (!qann) return;
    snn_rng rng;
    snn_rng_seed(&rng, 45);
    const snn_shape shape = SNN_SHAPE(N, c.in_channels, c.height, c.width);
    const int64_t nx = N * c.in_channels * c.height * c.width, ny = N * c.classes;
    float *x = snn_alloc((size_t)nx * sizeof *x, SNN_CPU);
    float *want = snn_alloc((size_t)ny * sizeof *want, SNN_CPU), *got = snn_alloc((size_t)ny * sizeof *got, SNN_CPU);
    for (int64_t i = 0; i < nx; i++) x[i] = snn_rng_normal(&rng);
    run_logits(qann, x, shape, SNN_CPU, want, ny);

    const int bound = snn_ann_to_snn_time_bound(qann);
    CHECK(bound == want_bound);
    snn_module *snn = snn_ann_to_snn(qann, bound);
    CHECK(snn != NULL);
    if (snn) {
        CHECK(snn_ann_to_snn_time_bound(snn) == bound);
        CHECK(snn_model_config_of(snn)->neuron.kind == SNN_NEURON_STBIF);
        run_logits(snn, x, shape, SNN_CPU, got, ny);
        const double scale = fmax(1.0, max_abs(want, ny)), diff = max_diff(got, want, ny);
        fprintf(stderr, "  %s: T* = %d, max |SNN - QANN| = %.3g (largest logit %.3g)\n",
                snn_model_kind_name(kind), bound, diff, max_abs(want, ny));
        CHECK(diff <= 1e-5 * scale);
        /* not vacuous: one step is far from enough */
        CHECK_OK(snn_model_set_time_steps(snn, 1));
        run_logits(snn, x, shape, SNN_CPU, got, ny);
        CHECK(max_diff(got, want, ny) > 1e-3 * scale);
        /* the QANN is untouched by the conversion */
        run_logits(qann, x, shape, SNN_CPU, got, ny);
        CHECK(memcmp(got, want, (size_t)ny * sizeof *got) == 0);
    }
    snn_module_free(snn);
    snn_module_free(qann);
    snn_free(x, (size_t)nx * sizeof *x, SNN_CPU);
    snn_free(want, (size_t)ny * sizeof *want, SNN_CPU);
    snn_free(got, (size_t)ny * sizeof *got, SNN_CPU);
}

static void test_networks(void)
{
    /* CNN: K = 3 quantizers on a path, L = 4: 3 + 2 * 3; ResNet-18: K = 17: 3 + 16 * 3;
     * ResNet-34: K = 33 (16 basic blocks); ResNet-50: K = 49 (16 bottlenecks of three) */
    check_network(SNN_MODEL_SPIKING_CNN, 9);
    check_network(SNN_MODEL_RESNET18, 51);
    check_network(SNN_MODEL_SEW_RESNET18, 51);
    check_network(SNN_MODEL_SEW_RESNET34, 99);
    check_network(SNN_MODEL_RESNET50, 147);
}

/* The converted CNN, sparsified: ST-BIF's signed spikes through both CPU sparse paths. */
static void test_sparse_snn(void)
{
    enum { N = 4 };
    snn_module *qann = tiny_qann_new(SNN_MODEL_SPIKING_CNN, 50, SNN_CPU);
    snn_module *snn = qann ? snn_ann_to_snn(qann, 9) : NULL;
    CHECK(snn != NULL);
    if (!snn) {
        snn_module_free(qann);
        return;
    }
    const int64_t nx = N * 28 * 28, ny = N * 10;
    float x[N * 28 * 28], dense[N * 10], sparse[N * 10];
    snn_rng rng;
    snn_rng_seed(&rng, 51);
    for (int64_t i = 0; i < nx; i++) x[i] = snn_rng_normal(&rng);
    run_logits(snn, x, SNN_SHAPE(N, 1, 28, 28), SNN_CPU, dense, ny);
    CHECK_OK(snn_step_begin());
    snn_tensor *batch = snn_from_host(SNN_SHAPE(N, 1, 28, 28), x, SNN_CPU);
    for (int path = SNN_SPARSE_GEMM; path <= SNN_SPARSE_EVENT; path++) {
        snn_sparse_options o = snn_sparse_options_default();
        o.force = (snn_sparse_path)path;
        o.quiet = true;
        snn_sparse_report rep;
        CHECK_OK(snn_sparsify(snn, &batch, 1, &o, &rep));
        CHECK(rep.count == 1 && strcmp(rep.layers[0].name, "conv2") == 0); /* after the pool */
        CHECK(rep.count == 1 && rep.layers[0].max_abs_diff == 0.0);
        run_logits(snn, x, SNN_SHAPE(N, 1, 28, 28), SNN_CPU, sparse, ny);
        snn_sparse_collect(snn, &rep);
        CHECK(rep.count == 1 && rep.layers[0].sparse_calls > 0);
        CHECK(memcmp(sparse, dense, sizeof dense) == 0);
    }
    snn_step_end();
    snn_module_free(snn);
    snn_module_free(qann);
}

/* ---- refusals and ANN models -------------------------------------------------------------- */

static snn_tensor *odd_forward(snn_module *m, snn_tensor *x)
{
    (void)m;
    return x;
}

static const snn_module_ops odd_ops = {"Odd", odd_forward, NULL, NULL};

static void expect_refused(snn_module *m, const char *says)
{
    snn_clear_error();
    snn_module *snn = snn_ann_to_snn(m, 8);
    CHECK(snn == NULL);
    CHECK(strstr(snn_last_error(), "snn_ann_to_snn") != NULL);
    if (!strstr(snn_last_error(), says)) fprintf(stderr, "  message: %s\n", snn_last_error());
    CHECK(strstr(snn_last_error(), says) != NULL);
    snn_module_free(snn);
    snn_clear_error();
}

static void test_refusals(void)
{
    snn_rng rng;
    snn_rng_seed(&rng, 60);
    snn_model_config c = tiny_qann(SNN_MODEL_SPIKING_CNN);
    c.neuron = snn_neuron_config_default(SNN_NEURON_LIF);
    c.time_steps = 4;
    snn_module *m = snn_model_new(&c, &rng);
    expect_refused(m, "spiking network (lif");
    snn_module_free(m);

    c = tiny_qann(SNN_MODEL_SPIKING_CNN);
    c.neuron = snn_neuron_config_default(SNN_NEURON_RELU);
    m = snn_model_new(&c, &rng);
    expect_refused(m, "ReLU");
    snn_module_free(m);

    c = tiny_qann(SNN_MODEL_RESNET18);
    m = snn_model_new(&c, &rng);
    snn_module *snn = snn_ann_to_snn(m, 4);
    expect_refused(snn, "already converted"); /* converting twice */
    CHECK(snn_ann_to_snn(m, 0) == NULL && strstr(snn_last_error(), "time_steps"));
    snn_clear_error();
    snn_module_free(snn);
    CHECK_OK(snn_module_add(m, "odd", snn_module_new(&odd_ops, NULL)));
    expect_refused(m, "a Odd module at odd");
    snn_module_free(m);

    c = tiny_qann(SNN_MODEL_SPIKING_CNN);
    m = snn_model_new(&c, &rng);
    snn_module *pool = snn_max_pool2d_new(3, 2);
    snn_module_free(m->children[3]); /* pool1 */
    m->children[3] = pool;
    snprintf(pool->name, sizeof pool->name, "pool1");
    expect_refused(m, "overlapping windows (kernel 3, stride 2) at pool1");
    snn_module_free(m);

    CHECK(snn_ann_to_snn(NULL, 4) == NULL);
    snn_clear_error();
    CHECK(snn_ann_to_snn_time_bound(NULL) == -1);
    snn_clear_error();
}

static void test_ann_models(void)
{
    snn_rng rng;
    snn_rng_seed(&rng, 70);
    snn_model_config c = tiny_qann(SNN_MODEL_SPIKING_CNN);
    c.time_steps = 2;
    CHECK(snn_model_new(&c, &rng) == NULL && strstr(snn_last_error(), "ANN"));
    snn_clear_error();
    c.time_steps = 1;
    c.neuron = qclip_config(4, true);
    snn_module *m = snn_model_new(&c, &rng);
    CHECK(m != NULL);
    if (!m) return;
    CHECK(snn_model_set_time_steps(m, 2) != SNN_OK);
    snn_clear_error();
    /* one training step: the steps get finite gradients, some nonzero */
    float x[2 * 28 * 28], labels[2] = {3, 7};
    for (int i = 0; i < 2 * 28 * 28; i++) x[i] = snn_rng_normal(&rng);
    CHECK_OK(snn_step_begin());
    snn_module_train(m, true);
    snn_tensor *y = snn_module_forward(m, snn_from_host(SNN_SHAPE(2, 1, 28, 28), x, SNN_CPU));
    snn_tensor *loss = snn_cross_entropy(y, snn_from_host(SNN_SHAPE(2), labels, SNN_CPU));
    CHECK(loss != NULL);
    if (loss) CHECK_OK(snn_backward(loss));
    snn_step_end();
    int steps = 0, nonzero = 0, finite = 0;
    for (int i = 0; i < m->n_children; i++) {
        snn_module *ch = m->children[i];
        if (ch->n_params != 1 || strcmp(ch->params[0].name, "step") != 0) continue;
        steps++;
        snn_tensor *g = ch->params[0].tensor->grad;
        finite += g && isfinite(g->data[0]);
        nonzero += g && g->data[0] != 0.0f;
    }
    CHECK(steps == 3 && finite == 3 && nonzero > 0);
    /* the levels survive a checkpoint's metadata */
    snn_metadata meta = {0};
    snn_model_config back;
    CHECK_OK(snn_model_config_to_metadata(snn_model_config_of(m), &meta));
    CHECK_OK(snn_model_config_from_metadata(&meta, &back));
    CHECK(back.neuron.kind == SNN_NEURON_QCLIP && back.neuron.levels == 4 && back.neuron.symmetric);
    snn_module_free(m);
}

int main(void)
{
    snn_set_num_threads(2);
    RUN(test_qclip_forward);
    RUN(test_qclip_estimator);
    RUN(test_one_layer_exact);
    RUN(test_running_pool);
    RUN(test_gradchecks);
    RUN(test_networks);
    RUN(test_sparse_snn);
    RUN(test_refusals);
    RUN(test_ann_models);
    return test_finish();
}
