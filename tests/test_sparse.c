/*
 * test_sparse.c - the sparse conv kernels and the sparsify pass (CPU).
 *
 * Kernels: on random {0, 1} inputs with whole channels silent, both sparse kernels (GEMM over the
 * active channels, event-driven) must equal the dense conv (im2col + blocked SGEMM) BIT FOR BIT,
 * with the activity given or found by a scan: 3x3 stride 1 and 2, 1x1 stride 2, K split into
 * 1, 2 and 3 SGEMM slices (one cut falls inside a channel), edge tiles (C_out 40, 7x7 outputs),
 * grouped small outputs with a partial last group, C_out 16 and 48 (half tiles), bias, all-zero
 * and all-active images; the same for non-binary values (SEW residual sums {1, 2, 3}, ST-BIF's
 * +-theta), which the kernels round exactly as the dense path does; all of it at 1, 2, 3 and 16
 * threads. The dense SGEMM keeps its grouping when no packing buffer can be had.
 * Pass: the spiking CNN gets conv2 only; the spiking ResNet-18 and the SEW-ResNet-18 every conv
 * but the stem (SEW: 10 of them read a residual sum, masked by the union of its operands); the
 * (SEW-)ResNet-50 all 52 of its bottleneck and downsample convs, 1x1 ones included (SEW: 18
 * through a residual sum).
 * Names, tensors and the number of parameters are unchanged, and the sparsified model's output
 * equals the dense model's bit for bit on both kernels (and on EVENT_SMEM, the CUDA kernel that
 * the CPU maps to its event path; the CPU calibration never times it). A batch denser than
 * calibrated falls back to dense; a forward with a tape runs dense. test_finish() checks that
 * nothing leaks.
 */
#include <string.h>

#include "snn.h"
#include "sparse/sparse.h"
#include "sparse/sparse_module.h"
#include "kernels/cpu/gemm.h"
#include "test.h"

/* x (N, C, H, W) random binary: each plane silent with probability p_silent, else each element
 * fires with probability rate; activity (N, C) the counts. all_on: every element 1. */
static int spike_values; /* 0: {0, 1}; 1: SEW sums {0, 1, 2, 3}; 2: ST-BIF {0, +-0.37} */

static void make_spikes(float *x, float *activity, int N, int C, int HW, double p_silent,
                        double rate, snn_rng *rng)
{
    for (int n = 0; n < N; n++) {
        for (int c = 0; c < C; c++) {
            float *p = x + ((int64_t)n * C + c) * HW;
            bool silent = (double)snn_rng_uniform(rng) < p_silent;
            int count = 0;
            for (int i = 0; i < HW; i++) {
                p[i] = !silent && (double)snn_rng_uniform(rng) < rate ? 1.0f : 0.0f;
                if (p[i] != 0.0f && spike_values == 1) p[i] = (float)(1 + snn_rng_below(rng, 3));
                if (p[i] != 0.0f && spike_values == 2) p[i] = snn_rng_below(rng, 2) ? 0.37f : -0.37f;
                count += p[i] != 0.0f;
            }
            activity[n * C + c] = (float)count;
        }
    }
}

typedef struct conv_case {
    int N, C_in, H, C_out, k, stride, pad;
    double p_silent, rate;
    bool bias;
} conv_case;

static void check_case(conv_case cc, uint64_t seed)
{
    snn_rng rng;
    snn_rng_seed(&rng, seed);
    snn_conv2d_dims d = {cc.N, cc.C_in, cc.H, cc.H, cc.C_out, cc.k, cc.k, cc.stride, cc.pad, 0, 0};
    d.H_out = d.W_out = (cc.H + 2 * cc.pad - cc.k) / cc.stride + 1;
    const int HW = cc.H * cc.H;
    const int64_t nx = (int64_t)cc.N * cc.C_in * HW, nw = (int64_t)cc.C_out * cc.C_in * cc.k * cc.k;
    const int64_t ny = (int64_t)cc.N * cc.C_out * d.H_out * d.W_out;
    float *x = snn_alloc((size_t)nx * sizeof *x, SNN_CPU);
    float *act = snn_alloc((size_t)cc.N * cc.C_in * sizeof *act, SNN_CPU);
    float *w = snn_alloc((size_t)nw * sizeof *w, SNN_CPU);
    const size_t nwt = snn_sparse_weights_floats(cc.C_out, cc.C_in, cc.k, cc.k);
    float *wt = snn_alloc(nwt * sizeof *wt, SNN_CPU);
    float *b = snn_alloc((size_t)cc.C_out * sizeof *b, SNN_CPU);
    float *y = snn_alloc((size_t)ny * sizeof *y, SNN_CPU);
    make_spikes(x, act, cc.N, cc.C_in, HW, cc.p_silent, cc.rate, &rng);
    for (int64_t i = 0; i < nw; i++) w[i] = snn_rng_normal(&rng) * 0.1f;
    for (int i = 0; i < cc.C_out; i++) b[i] = snn_rng_normal(&rng);
    snn_sparse_prepare_weights(wt, w, cc.C_out, cc.C_in, cc.k, cc.k);

    snn_step_begin();
    snn_no_grad_begin();
    snn_tensor *tx = snn_from_host(SNN_SHAPE(cc.N, cc.C_in, cc.H, cc.H), x, SNN_CPU);
    snn_tensor *tw = snn_from_host(SNN_SHAPE(cc.C_out, cc.C_in, cc.k, cc.k), w, SNN_CPU);
    snn_tensor *tb = snn_from_host(SNN_SHAPE(cc.C_out), b, SNN_CPU);
    snn_tensor *dense = snn_conv2d(tx, tw, cc.bias ? tb : NULL, cc.stride, cc.pad);
    CHECK(dense != NULL);
    /* EVENT_SMEM is a CUDA kernel: on the CPU it runs the event path (and must equal it) */
    for (int path = SNN_SPARSE_GEMM; dense && path <= SNN_SPARSE_EVENT_SMEM; path++) {
        for (int scan = 0; scan < 2; scan++) {
            memset(y, 0xff, (size_t)ny * sizeof *y); /* NaN: every element must be written */
            CHECK_OK(snn_sparse_conv2d_cpu(y, x, wt, cc.bias ? b : NULL, &d, scan ? NULL : act,
                                           (snn_sparse_path)path));
            bool same = memcmp(y, dense->data, (size_t)ny * sizeof *y) == 0;
            if (!same) {
                int64_t i = 0;
                while (i < ny && y[i] == dense->data[i]) i++;
                fprintf(stderr, "  case N%d C%d H%d > %d k%d s%d, %s%s: first difference at %lld: "
                        "%.9g vs dense %.9g\n", cc.N, cc.C_in, cc.H, cc.C_out, cc.k, cc.stride,
                        snn_sparse_path_name((snn_sparse_path)path), scan ? " (scan)" : "",
                        (long long)i, i < ny ? (double)y[i] : 0.0,
                        i < ny ? (double)dense->data[i] : 0.0);
            }
            CHECK(same);
        }
    }
    snn_no_grad_end();
    snn_step_end();
    snn_free(x, (size_t)nx * sizeof *x, SNN_CPU);
    snn_free(act, (size_t)cc.N * cc.C_in * sizeof *act, SNN_CPU);
    snn_free(w, (size_t)nw * sizeof *w, SNN_CPU);
    snn_free(wt, nwt * sizeof *wt, SNN_CPU);
    snn_free(b, (size_t)cc.C_out * sizeof *b, SNN_CPU);
    snn_free(y, (size_t)ny * sizeof *y, SNN_CPU);
}

static void test_kernels_bitwise(void)
{
    const conv_case cases[] = {
        {3, 16, 8, 32, 3, 1, 1, 0.6, 0.1, false},     /* one K slice (K = 144) */
        {2, 64, 12, 64, 3, 1, 1, 0.6, 0.05, false},   /* K = 576: 2 slices of 288 */
        {2, 128, 8, 32, 3, 1, 1, 0.5, 0.1, true},     /* K = 1152: 3 slices of 384, cut in a channel */
        {5, 64, 8, 128, 3, 2, 1, 0.7, 0.1, false},    /* stride 2, 4x4 out: groups of 16, partial */
        {5, 64, 8, 128, 1, 2, 0, 0.7, 0.1, false},    /* 1x1 stride 2 (the downsample) */
        {3, 24, 7, 40, 3, 1, 1, 0.5, 0.2, true},      /* edge tiles: C_out 40, 7x7 */
        {2, 32, 9, 32, 3, 2, 1, 0.5, 0.2, false},     /* odd size, stride 2 */
        {2, 16, 10, 16, 3, 1, 1, 0.3, 0.1, false},    /* C_out 16: the half-width tile */
        {2, 32, 8, 48, 3, 1, 1, 0.5, 0.1, true},      /* C_out 48: a full and a half tile */
        {1, 8, 4, 8, 3, 1, 1, 0.5, 0.3, false},       /* below 32^3: the unpacked SGEMM path */
        {4, 32, 8, 64, 3, 1, 1, 1.0, 0.1, false},     /* all-zero images */
        {3, 32, 8, 64, 3, 1, 1, 0.0, 1.0, true},      /* all-active, every element 1 */
        {1, 4, 80, 8, 3, 1, 1, 0.3, 0.05, false},     /* 80 wide: the event path's whole-image
                                                         form (the banded one needs W <= 64) */
        {1, 4, 70, 8, 3, 2, 1, 0.3, 0.05, false},     /* 70 wide, stride 2: the same */
    };
    /* Every thread count: sparse == dense must not depend on it. 16 runs last, after 1, 2 and
     * 3, and alternates with the sparse kernels' N-thread regions (N = 2, 3, 5 images) in every
     * case: OpenMP ends and starts threads at each switch of team size, several hundred in
     * all, which once exhausted the SGEMM's packing-buffer slots (one per thread ever started)
     * and sent the later threads down a path that rounds differently. */
    const int thread_counts[] = {1, 2, 3, 16};
    const int threads = snn_get_num_threads();
    for (size_t tc = 0; tc < sizeof thread_counts / sizeof thread_counts[0]; tc++) {
        snn_set_num_threads(thread_counts[tc]);
        for (spike_values = 0; spike_values <= 2; spike_values++) {
            /* {0, 1} spikes, then values that are not spikes: the kernels round as the dense
             * path does, so any values whose zeros are the skipped ones give the dense result
             * bit for bit (SEW sums, ST-BIF +-theta) */
            for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
                check_case(cases[i], 100 + i + 50 * (size_t)spike_values);
        }
    }
    spike_values = 0;
    snn_set_num_threads(threads);
}

/* The dense SGEMM gives the same bits when it cannot get a packing buffer (no memory, or more
 * live threads than it has buffer slots): the sparse kernels reproduce its K slices and
 * rounding, so its grouping must not depend on whether memory could be had. */
static void test_gemm_without_buffer(void)
{
    enum { M = 64, N = 192, K = 1152 };  /* the blocked path, 3 K slices of 384 */
    CHECK(snn_gemm_k_slice_cpu(M, N, K) == 384);
    snn_rng rng;
    snn_rng_seed(&rng, 11);
    float *a = snn_alloc((size_t)M * K * sizeof *a, SNN_CPU);
    float *b = snn_alloc((size_t)K * N * sizeof *b, SNN_CPU);
    float *c = snn_alloc((size_t)M * N * sizeof *c, SNN_CPU);
    float *ref = snn_alloc((size_t)M * N * sizeof *ref, SNN_CPU);
    for (int i = 0; i < M * K; i++) a[i] = snn_rng_normal(&rng);
    for (int i = 0; i < K * N; i++) b[i] = snn_rng_uniform(&rng) < 0.2f ? 1.0f : 0.0f;
    for (int t = 0; t < 2; t++) {  /* trans_b too: B^T stored (N, K) is just other data here */
        for (int i = 0; i < M * N; i++) ref[i] = c[i] = snn_rng_normal(&rng);
        snn_gemm_serial_cpu(false, t, M, N, K, 0.5f, a, K, b, t ? K : N, 0.75f, ref, N);
        snn_gemm_release_cpu();  /* this thread's buffer is gone ... */
        snn_alloc_fail_after(1); /* ... and cannot come back for this call */
        snn_gemm_serial_cpu(false, t, M, N, K, 0.5f, a, K, b, t ? K : N, 0.75f, c, N);
        snn_alloc_fail_after(0);
        CHECK(memcmp(c, ref, (size_t)M * N * sizeof *c) == 0);
    }
    snn_free(a, (size_t)M * K * sizeof *a, SNN_CPU);
    snn_free(b, (size_t)K * N * sizeof *b, SNN_CPU);
    snn_free(c, (size_t)M * N * sizeof *c, SNN_CPU);
    snn_free(ref, (size_t)M * N * sizeof *ref, SNN_CPU);
}

/* ---- the pass ----------------------------------------------------------------------------- */

static snn_tensor *random_images(snn_shape shape, snn_rng *rng)
{
    snn_tensor *t = snn_tensor_new(shape, SNN_CPU);
    snn_tensor_normal_(t, rng, 0.5f, 1.0f);
    return t;
}

/* Output of the model on x without a tape, copied into out (numel floats). */
static void run_model(snn_module *m, snn_tensor *x, float *out, int64_t numel)
{
    snn_no_grad_begin();
    snn_step_begin();
    snn_tensor *y = snn_module_forward(m, x);
    CHECK(y != NULL && y->numel == numel);
    if (y && y->numel == numel) memcpy(out, y->data, (size_t)numel * sizeof *out);
    snn_step_end();
    snn_no_grad_end();
}

static bool name_in(const char *name, const char *const *names, int n)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(name, names[i])) return true;
    return false;
}

/* The model of cfg from a generator seeded with `seed` (left in *rng for the inputs), in eval
 * mode; NULL (a failed check) if it cannot be built. */
static snn_module *eval_model(const snn_model_config *cfg, uint64_t seed, snn_rng *rng)
{
    snn_rng_seed(rng, seed);
    snn_module *m = snn_model_new(cfg, rng);
    CHECK(m != NULL);
    if (m) snn_module_train(m, false);
    return m;
}

/* The spiking CNN at a test's size: its one spike-fed conv is conv2. */
static snn_model_config small_cnn(void)
{
    snn_model_config cfg = snn_model_config_default(SNN_MODEL_SPIKING_CNN);
    cfg.width_base = 16;
    cfg.hidden = 32;
    cfg.time_steps = 2;
    return cfg;
}

/* Builds the model, sparsifies it (forced path), and checks the swapped set, names and output. */
static void check_model(snn_model_config cfg, const char *const *expect, int n_expect,
                        int expect_residual, int images)
{
    snn_rng rng;
    snn_module *m = eval_model(&cfg, 42, &rng);
    if (!m) return;
    snn_tensor *batches[2];
    for (int i = 0; i < 2; i++)
        batches[i] = random_images(SNN_SHAPE(images, cfg.in_channels, cfg.height, cfg.width), &rng);
    const int64_t out_n = (int64_t)images * cfg.classes;
    float dense_out[64 * 10], sparse_out[64 * 10];
    run_model(m, batches[1], dense_out, out_n);

    snn_param_list before = {0}, after = {0};
    CHECK_OK(snn_module_parameters(m, &before));
    snn_sparse_options o = snn_sparse_options_default();
    o.force = SNN_SPARSE_GEMM;
    o.quiet = true;
    snn_sparse_report rep;
    CHECK_OK(snn_sparsify(m, batches, 2, &o, &rep));
    CHECK(rep.count == n_expect);
    CHECK(rep.residual_sum_fed == expect_residual);
    for (int i = 0; i < rep.count; i++) {
        bool ok = name_in(rep.layers[i].name, expect, n_expect);
        if (!ok) fprintf(stderr, "  unexpected swap: %s\n", rep.layers[i].name);
        CHECK(ok);
        CHECK(rep.layers[i].max_abs_diff == 0.0);
        /* the CPU times GEMM and event, never the CUDA-only event-smem kernel */
        CHECK(rep.layers[i].event_smem_ms == 0.0);
    }
    CHECK_OK(snn_module_parameters(m, &after));
    CHECK(before.count == after.count);
    for (int i = 0; i < before.count && i < after.count; i++) {
        CHECK(!strcmp(before.items[i].name, after.items[i].name));
        CHECK(before.items[i].tensor == after.items[i].tensor);
    }
    snn_param_list_free(&before);
    snn_param_list_free(&after);

    for (int path = SNN_SPARSE_GEMM; path <= SNN_SPARSE_EVENT_SMEM; path++) {
        CHECK(snn_sparse_set_path(m, (snn_sparse_path)path) == n_expect);
        memset(sparse_out, 0, sizeof sparse_out);
        run_model(m, batches[1], sparse_out, out_n);
        CHECK(memcmp(sparse_out, dense_out, (size_t)out_n * sizeof(float)) == 0);
    }
    /* the sparse kernels really ran (no fallback on a batch like the calibration ones) */
    snn_sparse_report after_rep;
    snn_sparse_collect(m, &after_rep);
    /* every swapped layer ran a sparse kernel in all three passes (the batch was a calibration
     * batch, so it is not denser than the calibrated 95th percentile) */
    for (int i = 0; i < after_rep.count; i++) CHECK(after_rep.layers[i].sparse_calls == 3);
    for (int i = 0; i < 2; i++) snn_tensor_free(batches[i]);
    snn_module_free(m);
}

static void test_pass_cnn(void)
{
    const char *expect[] = {"conv2"};
    check_model(small_cnn(), expect, 1, 0, 4);
}

static const char *const resnet_convs[] = {
    "layer1.0.conv1", "layer1.0.conv2", "layer1.1.conv1", "layer1.1.conv2",
    "layer2.0.conv1", "layer2.0.conv2", "layer2.0.downsample.0", "layer2.1.conv1", "layer2.1.conv2",
    "layer3.0.conv1", "layer3.0.conv2", "layer3.0.downsample.0", "layer3.1.conv1", "layer3.1.conv2",
    "layer4.0.conv1", "layer4.0.conv2", "layer4.0.downsample.0", "layer4.1.conv1", "layer4.1.conv2",
};

static void test_pass_resnet(void)
{
    snn_model_config cfg = snn_model_config_default(SNN_MODEL_RESNET18);
    cfg.width_base = 8;
    cfg.height = cfg.width = 16;
    cfg.time_steps = 2;
    check_model(cfg, resnet_convs, 19, 0, 2);
}

static void test_pass_sew(void)
{
    snn_model_config cfg = snn_model_config_default(SNN_MODEL_SEW_RESNET18);
    cfg.width_base = 8;
    cfg.height = cfg.width = 16;
    cfg.time_steps = 2;
    /* every conv but the stem too: a block's conv2 reads its sn1; the other 7 conv1 and the 3
     * downsample convs read a residual sum of spike tensors (values 0, 1, 2, ...), masked by the
     * union of the operands' activities; the output still equals dense bit for bit */
    check_model(cfg, resnet_convs, 19, 10, 2);
}

/* The 52 convs of a ResNet-50 after the stem: conv1 (1x1), conv2 (3x3), conv3 (1x1) of each of
 * its 3, 4, 6, 3 bottleneck blocks, and the downsample of each stage's first block. */
static int resnet50_convs(char names[][48])
{
    static const int blocks[4] = {3, 4, 6, 3};
    int n = 0;
    for (int l = 0; l < 4; l++)
        for (int b = 0; b < blocks[l]; b++) {
            for (int c = 1; c <= 3; c++)
                snprintf(names[n++], sizeof names[0], "layer%d.%d.conv%d", l + 1, b, c);
            if (b == 0) snprintf(names[n++], sizeof names[0], "layer%d.0.downsample.0", l + 1);
        }
    return n;
}

static void test_pass_resnet50(void)
{
    char names[64][48];
    const char *expect[64];
    const int n = resnet50_convs(names);
    for (int i = 0; i < n; i++) expect[i] = names[i];
    CHECK(n == 52);
    snn_model_config cfg = snn_model_config_default(SNN_MODEL_RESNET50);
    cfg.width_base = 4;
    cfg.height = cfg.width = 16;
    cfg.time_steps = 2;
    check_model(cfg, expect, n, 0, 2);   /* the 1x1 convs too: they read spikes */
    /* SEW: the conv1 of the 15 blocks after layer1.0 and the downsample of stages 2-4 read a
     * residual sum (layer3.5.conv1 the union of 6 neuron layers) */
    cfg.kind = SNN_MODEL_SEW_RESNET50;
    check_model(cfg, expect, n, 18, 2);
}

/* stem conv -> neuron -> conv: calibrated on weak inputs (few spikes), run on strong ones. */
static void test_fallback_and_tape(void)
{
    snn_rng rng;
    snn_rng_seed(&rng, 5);
    snn_module *m = snn_sequential_new();
    snn_neuron_config nc = snn_neuron_config_default(SNN_NEURON_IF);
    CHECK_OK(snn_module_add(m, "stem", snn_conv2d_new(4, 16, 3, 1, 1, false, &rng)));
    CHECK_OK(snn_module_add(m, "sn", snn_neuron_layer_new(&nc)));
    CHECK_OK(snn_module_add(m, "conv", snn_conv2d_new(16, 32, 3, 1, 1, true, &rng)));
    snn_tensor *weak = snn_tensor_new(SNN_SHAPE(2, 3, 4, 8, 8), SNN_CPU);
    snn_tensor *strong = snn_tensor_new(SNN_SHAPE(2, 3, 4, 8, 8), SNN_CPU);
    snn_tensor_normal_(weak, &rng, 0.0f, 1.0f);
    snn_tensor_normal_(strong, &rng, 0.0f, 1.0f);
    for (int64_t i = 0; i < weak->numel; i++) {
        weak->data[i] = weak->data[i] > 2.0f ? 0.5f : 0.0f;   /* few inputs, few spikes */
        strong->data[i] = 20.0f * fabsf(strong->data[i]) + 1.0f;
    }
    const int64_t out_n = 2 * 3 * 32 * 8 * 8;
    float *dense_out = snn_alloc((size_t)out_n * sizeof(float), SNN_CPU);
    float *got = snn_alloc((size_t)out_n * sizeof(float), SNN_CPU);
    run_model(m, strong, dense_out, out_n);

    snn_sparse_options o = snn_sparse_options_default();
    o.force = SNN_SPARSE_EVENT;
    o.quiet = true;
    snn_sparse_report rep;
    snn_tensor *calib[1] = {weak};
    CHECK_OK(snn_sparsify(m, calib, 1, &o, &rep));
    CHECK(rep.count == 1 && !strcmp(rep.layers[0].name, "conv") && !strcmp(rep.layers[0].source, "sn"));
    CHECK(rep.convs_seen == 2);
    run_model(m, strong, got, out_n);
    CHECK(memcmp(got, dense_out, (size_t)out_n * sizeof(float)) == 0);
    snn_sparse_collect(m, &rep);
    CHECK(rep.layers[0].fallbacks == 1 && rep.layers[0].sparse_calls == 0);
    run_model(m, weak, got, out_n);
    snn_sparse_collect(m, &rep);
    CHECK(rep.layers[0].fallbacks == 1 && rep.layers[0].sparse_calls == 1);

    /* with a tape the layer runs the dense conv and records its node */
    snn_step_begin();
    snn_tensor *y = snn_module_forward(m, strong);
    CHECK(y && y->grad_fn && !strcmp(y->grad_fn->op, "snn_conv2d"));
    snn_step_end();
    /* bad arguments */
    CHECK(snn_sparsify(NULL, calib, 1, &o, NULL) == SNN_ERR_ARGUMENT);
    CHECK(snn_sparsify(m, calib, 0, &o, NULL) == SNN_ERR_ARGUMENT);
    snn_no_grad_begin();
    CHECK(snn_sparsify(m, calib, 1, &o, NULL) == SNN_ERR_STATE);
    snn_no_grad_end();
    snn_clear_error();

    snn_free(dense_out, (size_t)out_n * sizeof(float), SNN_CPU);
    snn_free(got, (size_t)out_n * sizeof(float), SNN_CPU);
    snn_tensor_free(weak);
    snn_tensor_free(strong);
    snn_module_free(m);
}

static snn_module *find_sparse_conv(snn_module *m)
{
    if (snn_is_sparse_conv(m)) return m;
    for (int i = 0; i < m->n_children; i++) {
        snn_module *found = find_sparse_conv(m->children[i]);
        if (found) return found;
    }
    return NULL;
}

/* The one-sample round: snn_sparsify times each layer again on one sample of each calibration
 * batch, and a batch nearer one sample than the calibration batch (on a log scale) runs the
 * path those timings chose, the others the calibration batch's path. The timings pick the
 * paths, so the rule is checked with paths set by hand; outputs stay the dense ones. */
static void test_batch_size_picks_path(void)
{
    const snn_model_config cfg = small_cnn();
    snn_rng rng;
    snn_module *m = eval_model(&cfg, 7, &rng);
    if (!m) return;
    snn_tensor *batches[2], *one = random_images(SNN_SHAPE(1, 1, 28, 28), &rng);
    for (int i = 0; i < 2; i++) batches[i] = random_images(SNN_SHAPE(8, 1, 28, 28), &rng);
    float dense_batch[8 * 10], dense_one[10], got[8 * 10];
    run_model(m, batches[1], dense_batch, 8 * 10);
    run_model(m, one, dense_one, 10);

    snn_sparse_options o = snn_sparse_options_default();
    o.quiet = true;
    snn_sparse_report rep;
    CHECK_OK(snn_sparsify(m, batches, 2, &o, &rep));
    CHECK(rep.count == 1);
    /* one sample = T images, timed with every kernel */
    CHECK(rep.layers[0].one_images == cfg.time_steps);
    CHECK(rep.layers[0].one_dense_ms > 0.0 && rep.layers[0].one_best_ms > 0.0);
    snn_module *conv = find_sparse_conv(m);
    CHECK(conv != NULL);
    if (!conv) return;
    sparse_impl *s = conv->impl;
    CHECK(s->at_batch.images == 8 * cfg.time_steps && s->at_one.images == cfg.time_steps);

    /* sparse at the calibration size, dense at one sample */
    s->path = SNN_SPARSE_EVENT;
    s->path_one = SNN_SPARSE_DENSE;
    run_model(m, one, got, 10);
    CHECK(memcmp(got, dense_one, sizeof dense_one) == 0);
    snn_sparse_collect(m, &rep);
    CHECK(rep.layers[0].fallbacks == 1 && rep.layers[0].sparse_calls == 0);
    run_model(m, batches[1], got, 8 * 10);
    CHECK(memcmp(got, dense_batch, sizeof dense_batch) == 0);
    snn_sparse_collect(m, &rep);
    CHECK(rep.layers[0].fallbacks == 1 && rep.layers[0].sparse_calls == 1);
    /* and the other way round */
    s->path = SNN_SPARSE_DENSE;
    s->path_one = SNN_SPARSE_GEMM;
    run_model(m, one, got, 10);
    CHECK(memcmp(got, dense_one, sizeof dense_one) == 0);
    run_model(m, batches[1], got, 8 * 10);
    snn_sparse_collect(m, &rep);
    CHECK(rep.layers[0].fallbacks == 2 && rep.layers[0].sparse_calls == 2);
    /* a forced path is both */
    CHECK(snn_sparse_set_path(m, SNN_SPARSE_EVENT) == 1);
    CHECK(s->path == SNN_SPARSE_EVENT && s->path_one == SNN_SPARSE_EVENT);

    for (int i = 0; i < 2; i++) snn_tensor_free(batches[i]);
    snn_tensor_free(one);
    snn_module_free(m);
}

int main(void)
{
    RUN(test_kernels_bitwise);
    RUN(test_gemm_without_buffer);
    RUN(test_pass_cnn);
    RUN(test_pass_resnet);
    RUN(test_pass_sew);
    RUN(test_pass_resnet50);
    RUN(test_fallback_and_tape);
    RUN(test_batch_size_picks_path);
    return test_finish();
}
