/*
 * test_synops.c - the SynOps count (nn/synops.h) against counts made by hand and by a second,
 * output-side method.
 *
 * The library counts from the input side: each input element times its fan-out. The
 * reference here counts from the output side: for every output position, every kernel tap
 * that lands on an input (not on the padding) adds that input's value. Both must give the
 * same number; the tiny cases also have their counts worked out in the comments.
 *
 *   ctest --test-dir build -R synops --output-on-failure
 */
#include "snn.h"
#include "test.h"

/* sum over outputs (t n, o, oh, ow) and in-bounds taps (c, kh, kw) of x: the accumulates a conv
 * of this geometry does on spikes x (images, C, H, W), host memory */
static double conv_taps_reference(const float *x, int images, int C, int H, int W, int C_out,
                                  int K, int stride, int pad, double *dense)
{
    const int OH = (H + 2 * pad - K) / stride + 1, OW = (W + 2 * pad - K) / stride + 1;
    double ac = 0.0;
    *dense = 0.0;
    for (int n = 0; n < images; n++)
        for (int o = 0; o < C_out; o++)
            for (int oh = 0; oh < OH; oh++)
                for (int ow = 0; ow < OW; ow++)
                    for (int c = 0; c < C; c++)
                        for (int kh = 0; kh < K; kh++)
                            for (int kw = 0; kw < K; kw++) {
                                const int h = oh * stride - pad + kh, w = ow * stride - pad + kw;
                                if (h < 0 || h >= H || w < 0 || w >= W) continue;
                                ac += (double)x[(((int64_t)n * C + c) * H + h) * W + w];
                                *dense += 1.0;
                            }
    return ac;
}

/* One conv alone in a Sequential, run once on x (host floats of `shape`) with the count armed;
 * returns its record. */
static snn_synops_layer count_one_conv(snn_shape shape, const float *x, int C_out, int K,
                                       int stride, int pad)
{
    snn_rng rng;
    snn_rng_seed(&rng, 1);
    const int C = (int)shape.dim[shape.ndim - 3];
    snn_module *seq = snn_sequential_new();
    CHECK_OK(snn_module_add(seq, "conv", snn_conv2d_new(C, C_out, K, stride, pad, false, &rng)));
    snn_synops *count = snn_synops_new(seq);
    CHECK(count != NULL);
    snn_no_grad_begin();
    snn_step_begin();
    CHECK(snn_module_forward(seq, snn_from_host(shape, x, SNN_CPU)) != NULL);
    snn_step_end();
    snn_no_grad_end();
    CHECK_OK(snn_synops_status(count));
    int n = 0;
    const snn_synops_layer *layers = snn_synops_layers(count, &n);
    CHECK(n == 1);
    snn_synops_layer l = layers[0];
    CHECK(strcmp(l.name, "conv") == 0);
    snn_synops_free(count);
    CHECK(seq->plan == NULL); /* back outside any model */
    snn_module_free(seq);
    return l;
}

/* 3x3 plane, K 3, stride 1, pad 1, C_out 2: a window covers rows {-1..1}, {0..2}, {1..3}, so
 * fh = fw = (2, 3, 2). A corner spike feeds 2 x 2 x 2 = 8 outputs, the centre 2 x 3 x 3 = 18:
 * AC 26. Dense: one plane, 2 (2 + 3 + 2)^2 = 98, the ANN equivalent the same (N 1, C_in 1). */
static void test_conv_edges_by_hand(void)
{
    const float x[9] = {1, 0, 0,
                        0, 1, 0,
                        0, 0, 0};
    snn_synops_layer l = count_one_conv(SNN_SHAPE(1, 1, 3, 3), x, 2, 3, 1, 1);
    CHECK(l.spikes && l.binary);
    CHECK(l.ac == 26.0);
    CHECK(l.mac == 0.0);
    CHECK(l.dense_ops == 98.0);
    CHECK(l.ann_mac == 98.0);
    CHECK(l.input_sum == 2.0 && l.inputs == 9.0);
    CHECK(l.samples == 1 && l.steps == 1 && l.forwards == 1);
    CHECK(strcmp(l.kind, "Conv2d") == 0 && l.height == 3 && l.width == 3);
    CHECK_CLOSE(snn_synops_energy_pj(&l), 26.0 * 0.9, 1e-12, 1e-12);
    CHECK_CLOSE(snn_synops_ann_energy_pj(&l), 98.0 * 4.6, 1e-12, 1e-12);
    CHECK_CLOSE(snn_synops_work_fraction(&l), 26.0 / 98.0, 1e-15, 1e-15);
}

/* 4x4 plane, K 3, stride 2, pad 1: two output rows, windows {-1..1} and {1..3}, so
 * fh = fw = (1, 2, 1, 1). C_out 3; (T 2, N 1, C 1) with spikes at t0 (1, 1): 3 x 2 x 2 = 12,
 * t1 (3, 0): 3 x 1 x 1 = 3, t1 (0, 3): 3. AC 18. Dense: 2 planes x 3 x 5 x 5 = 150; the ANN
 * equivalent runs once per sample: 1 x 1 x 3 x 25 = 75. */
static void test_conv_stride_by_hand(void)
{
    float x[2 * 16] = {0};
    x[0 * 16 + 1 * 4 + 1] = 1.0f;
    x[1 * 16 + 3 * 4 + 0] = 1.0f;
    x[1 * 16 + 0 * 4 + 3] = 1.0f;
    snn_synops_layer l = count_one_conv(SNN_SHAPE(2, 1, 1, 4, 4), x, 3, 3, 2, 1);
    CHECK(l.spikes);
    CHECK(l.ac == 18.0);
    CHECK(l.dense_ops == 150.0);
    CHECK(l.ann_mac == 75.0);
    CHECK(l.samples == 1 && l.steps == 2);
}

/* Random spikes over shapes with every edge case (stride 1 and 2, pad 0 to 2, a plane smaller
 * than the kernel's reach): the input side equals the output side. */
static void test_conv_random_against_taps(void)
{
    const int cases[][7] = {/* T N C H W: images = T N; C_out K stride pad */
                            {2, 3, 5, 7, 6, 4, 3},   /* stride 1, pad 1 */
                            {1, 2, 3, 9, 8, 2, 3},   /* stride 2, pad 1 */
                            {3, 1, 2, 5, 5, 3, 5},   /* K 5 stride 1 pad 2 */
                            {2, 2, 4, 6, 7, 5, 1},   /* 1x1 stride 2 */
                            {1, 1, 2, 4, 4, 2, 3}};  /* stride 2, pad 0 */
    const int geometry[][2] = {{1, 1}, {2, 1}, {1, 2}, {2, 0}, {2, 0}};
    snn_rng rng;
    snn_rng_seed(&rng, 7);
    for (int i = 0; i < 5; i++) {
        const int T = cases[i][0], N = cases[i][1], C = cases[i][2], H = cases[i][3];
        const int W = cases[i][4], C_out = cases[i][5], K = cases[i][6];
        const int stride = geometry[i][0], pad = geometry[i][1];
        const int n = T * N * C * H * W;
        float *x = malloc((size_t)n * sizeof *x);
        for (int j = 0; j < n; j++) x[j] = snn_rng_uniform(&rng) < 0.3f ? 1.0f : 0.0f;
        double dense = 0.0;
        const double ac = conv_taps_reference(x, T * N, C, H, W, C_out, K, stride, pad, &dense);
        snn_synops_layer l = count_one_conv(SNN_SHAPE(T, N, C, H, W), x, C_out, K, stride, pad);
        CHECK(l.spikes && l.binary);
        CHECK(l.ac == ac);
        CHECK(l.dense_ops == dense); /* every in-bounds tap of every output, once */
        CHECK(l.ann_mac == dense / T);
        CHECK(l.samples == N && l.steps == T);
        /* a 2, as a SEW block's sum of two spike trains gives: two spikes, counted twice */
        x[n / 2] = 2.0f;
        const double ac2 = conv_taps_reference(x, T * N, C, H, W, C_out, K, stride, pad, &dense);
        snn_synops_layer c = count_one_conv(SNN_SHAPE(T, N, C, H, W), x, C_out, K, stride, pad);
        CHECK(c.spikes && !c.binary);
        CHECK(c.ac == ac2 && c.mac == 0.0);
        /* the same input, made real by one value: all of it is MAC, none AC */
        x[n / 2] = 0.5f;
        snn_synops_layer r = count_one_conv(SNN_SHAPE(T, N, C, H, W), x, C_out, K, stride, pad);
        CHECK(!r.spikes);
        CHECK(r.ac == 0.0 && r.mac == dense && r.dense_ops == dense);
        CHECK_CLOSE(snn_synops_work_fraction(&r), 1.0, 0.0, 0.0);
        free(x);
    }
}

/* Linear 4 -> 5 on (T 2, N 3, 4) spikes: each spike feeds 5 outputs. 7 spikes: AC 35; dense
 * 24 x 5 = 120; the ANN equivalent 3 samples x 4 x 5 = 60. Then a flat (N, F) real input:
 * MAC = dense = 2 x 4 x 5 = 40. */
static void test_linear(void)
{
    snn_rng rng;
    snn_rng_seed(&rng, 2);
    snn_module *seq = snn_sequential_new();
    CHECK_OK(snn_module_add(seq, "fc", snn_linear_new(4, 5, true, &rng)));
    float x[24] = {0};
    const int ones[7] = {0, 3, 5, 8, 13, 21, 23};
    for (int i = 0; i < 7; i++) x[ones[i]] = 1.0f;
    snn_synops *count = snn_synops_new(seq);
    snn_no_grad_begin();
    snn_step_begin();
    CHECK(snn_module_forward(seq, snn_from_host(SNN_SHAPE(2, 3, 4), x, SNN_CPU)) != NULL);
    snn_step_end();
    int n = 0;
    const snn_synops_layer *l = snn_synops_layers(count, &n);
    CHECK(n == 1 && strcmp(l[0].kind, "Linear") == 0);
    CHECK(l[0].spikes && l[0].ac == 35.0 && l[0].dense_ops == 120.0 && l[0].ann_mac == 60.0);
    CHECK(l[0].samples == 3 && l[0].steps == 2);
    CHECK(l[0].in_channels == 4 && l[0].out_channels == 5);
    snn_synops_free(count);

    count = snn_synops_new(seq);
    const float flat[8] = {0.25f, 1, 0, 2, 0, 0, 1, 0};
    snn_step_begin();
    CHECK(snn_module_forward(seq, snn_from_host(SNN_SHAPE(2, 4), flat, SNN_CPU)) != NULL);
    snn_step_end();
    snn_no_grad_end();
    l = snn_synops_layers(count, &n);
    CHECK(n == 1 && !l[0].spikes && !l[0].binary && l[0].ac == 0.0 && l[0].mac == 40.0);
    CHECK(l[0].ann_mac == 40.0 && l[0].samples == 2 && l[0].steps == 1);
    CHECK_CLOSE(snn_synops_energy_pj(&l[0]), 40.0 * 4.6, 1e-12, 1e-12);
    snn_synops_free(count);
    snn_module_free(seq);
}

/* The spiking CNN in evaluation, where conv -> bn runs as one fused op: the count still sees
 * each conv's input. conv1 takes the image (direct encoding: once, not T times): MAC. conv2
 * takes the max-pooled spikes of sn1, which the test pools itself and counts by taps. Two
 * batches add up. */
static void test_model_fused(void)
{
    snn_model_config cfg = snn_model_config_default(SNN_MODEL_SPIKING_CNN);
    cfg.height = cfg.width = 8;
    cfg.width_base = 3;
    cfg.hidden = 6;
    cfg.time_steps = 2;
    cfg.neuron.kind = SNN_NEURON_IF;
    snn_rng rng;
    snn_rng_seed(&rng, 3);
    snn_module *net = snn_model_new(&cfg, &rng);
    CHECK(net != NULL);
    if (!net) return;
    snn_module_train(net, false);
    CHECK(snn_model_options_of(net).fuse); /* the fast CPU kernels' default */
    snn_module *neurons[8];
    const char *names[8];
    CHECK(snn_model_neuron_layers(net, neurons, names, 8) == 3);
    snn_synops *count = snn_synops_new(net);
    CHECK(count != NULL);
    CHECK(snn_synops_new(net) == NULL && snn_last_status() == SNN_ERR_ARGUMENT); /* one count */
    snn_clear_error();
    double conv2_ac = 0.0, conv2_dense = 0.0, fc1_spikes = 0.0;
    const int N = 3;
    float image[3 * 64];
    snn_no_grad_begin();
    for (int batch = 0; batch < 2; batch++) {
        for (int i = 0; i < N * 64; i++) image[i] = 3.0f * snn_rng_uniform(&rng);
        snn_step_begin();
        CHECK(snn_module_forward(net, snn_from_host(SNN_SHAPE(N, 1, 8, 8), image, SNN_CPU)));
        /* conv2's input: sn1's spikes (T, N, 3, 8, 8) pooled 2x2 */
        snn_tensor *pooled = snn_max_pool2d(snn_neuron_layer_last_spikes(neurons[0]), 2, 2, 0);
        snn_tensor *flat = snn_neuron_layer_last_spikes(neurons[2]); /* fc2's input */
        CHECK(pooled && flat);
        if (pooled && flat) {
            double dense = 0.0;
            conv2_ac += conv_taps_reference(pooled->data, 2 * N, 3, 4, 4, 3, 3, 1, 1, &dense);
            conv2_dense += dense;
            for (int64_t i = 0; i < flat->numel; i++) fc1_spikes += (double)flat->data[i];
        }
        snn_step_end();
    }
    snn_no_grad_end();
    CHECK_OK(snn_synops_status(count));
    int n = 0;
    const snn_synops_layer *l = snn_synops_layers(count, &n);
    CHECK(n == 4);
    if (n == 4) {
        CHECK(strcmp(l[0].name, "conv1") == 0 && strcmp(l[1].name, "conv2") == 0);
        CHECK(strcmp(l[2].name, "fc1") == 0 && strcmp(l[3].name, "fc2") == 0);
        /* conv1: the image, real, once per sample: 2 N images x 1 x 3 x (2 + 6 x 3 + 2)^2 */
        CHECK(!l[0].spikes && l[0].steps == 1 && l[0].samples == 2 * N);
        CHECK(l[0].mac == 2.0 * N * 3 * 22 * 22 && l[0].mac == l[0].ann_mac);
        CHECK(l[1].spikes && l[1].steps == 2 && l[1].samples == 2 * N && l[1].forwards == 2);
        CHECK(l[1].ac == conv2_ac && l[1].dense_ops == conv2_dense);
        CHECK(conv2_ac > 0.0); /* the case is not empty */
        CHECK(l[1].ann_mac == conv2_dense / 2);
        CHECK(l[2].spikes && l[3].spikes);
        CHECK(l[3].ac == 10.0 * fc1_spikes); /* fc2: 6 -> 10, each spike of sn3 feeds 10 */
        snn_synops_layer total = snn_synops_total(count);
        CHECK(strcmp(total.name, "total") == 0 && total.samples == 2 * N && total.steps == 2);
        CHECK(total.ac == l[1].ac + l[2].ac + l[3].ac && total.mac == l[0].mac);
        CHECK(total.ann_mac == l[0].ann_mac + l[1].ann_mac + l[2].ann_mac + l[3].ann_mac);
        CHECK_CLOSE(snn_synops_energy_pj(&total),
                    0.9 * total.ac + 4.6 * total.mac, 1e-9, 1e-12);
    }
    snn_synops_free(count);
    snn_module_free(net);
}

static void test_bad_arguments(void)
{
    CHECK(snn_synops_new(NULL) == NULL && snn_last_status() == SNN_ERR_ARGUMENT);
    CHECK(strstr(snn_last_error(), "snn_synops_new") != NULL);
    snn_clear_error();
    CHECK(snn_synops_status(NULL) == SNN_ERR_ARGUMENT);
    snn_clear_error();
    snn_synops_free(NULL);
    snn_synops_layer total = snn_synops_total(NULL);
    CHECK(total.ac == 0.0 && snn_synops_work_fraction(&total) == 0.0);
}

int main(void)
{
    RUN(test_conv_edges_by_hand);
    RUN(test_conv_stride_by_hand);
    RUN(test_conv_random_against_taps);
    RUN(test_linear);
    RUN(test_model_fused);
    RUN(test_bad_arguments);
    return test_finish();
}
