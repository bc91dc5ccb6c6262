/*
 * test_time_checkpoint.c - BPTT with checkpoints over time (app/train_segments.c, the
 * differentiable carried state of nn/layer_neuron.c and neurons/carry.c):
 *   - in eval mode (batch-norm on running statistics, so that a segment sees what the whole
 *     sequence sees) the segmented step's loss, logits and every gradient are BPTT's, for
 *     segments of 1, 2 and 4 steps over T = 6 (the last one shorter), LIF and ALIF neurons;
 *   - in training mode with one segment (K = T) it is BPTT's step, dropout masks included (the
 *     recompute replays the random stream), and the running statistics end as BPTT leaves them;
 *   - with K < T the running statistics are those of one pass over the segments (the
 *     recompute's updates are undone): one count per segment;
 *   - bad segment lengths are refused, naming the flag.
 * Run: ctest -R time_checkpoint
 */
#include <math.h>
#include <string.h>

#include "app/train_segments.h"
#include "kernels/neuron_kernels.h"
#include "param_diff.h"
#include "test.h"

static snn_module *small_cnn(int T, snn_neuron_kind kind, float dropout, uint64_t seed)
{
    snn_model_config cfg = snn_model_config_default(SNN_MODEL_SPIKING_CNN);
    cfg.height = cfg.width = 8;
    cfg.classes = 3;
    cfg.width_base = 4;
    cfg.hidden = 16;
    cfg.time_steps = T;
    cfg.dropout = dropout;
    cfg.neuron = snn_neuron_config_default(kind);
    cfg.neuron.surrogate = snn_surrogate_default(SNN_SURROGATE_ATAN);
    cfg.neuron.tau_adapt = 3.0f; /* ALIF: an adaptation that matters within 6 steps */
    snn_rng rng;
    snn_rng_seed(&rng, seed);
    return snn_model_new(&cfg, &rng);
}

static void make_batch(int N, float *images, float *labels, uint64_t seed)
{
    snn_rng rng;
    snn_rng_seed(&rng, seed);
    for (int n = 0; n < N; n++) {
        labels[n] = (float)(n % 3);
        for (int i = 0; i < 64; i++)
            images[n * 64 + i] = 0.5f * snn_rng_normal(&rng) + (float)((i / 8) % 3 == n % 3);
    }
}

/* BPTT's step on `bptt` and the segmented one on `seg` (twins), same batch; returns the max
 * relative gradient difference and checks the loss and logits. */
static double compare(snn_module *bptt, snn_module *seg, int K, bool train)
{
    const int N = 5;
    float images[5 * 64], labels[5];
    make_batch(N, images, labels, 7);
    snn_module_train(bptt, train);
    snn_module_train(seg, train);
    double diff = (double)INFINITY;
    CHECK_OK(snn_step_begin());
    snn_tensor *x = snn_from_host(SNN_SHAPE(N, 1, 8, 8), images, SNN_CPU);
    snn_tensor *y = snn_from_host(SNN_SHAPE(N), labels, SNN_CPU);
    snn_module_zero_grad(bptt);
    snn_tensor *out = snn_module_forward(bptt, x);
    snn_tensor *loss = out ? snn_cross_entropy(out, y) : NULL;
    CHECK(loss && snn_backward(loss) == SNN_OK);
    snn_tensor *logits = NULL, *seg_loss = NULL;
    const train_segments_options o = {.segment = K};
    CHECK_OK(train_segments_step(seg, x, y, &o, &logits, &seg_loss));
    if (loss && logits && seg_loss) {
        CHECK(fabsf(seg_loss->data[0] - loss->data[0]) <= 1e-6f * (1.0f + fabsf(loss->data[0])));
        for (int i = 0; i < N * 3; i++)
            CHECK(fabsf(logits->data[i] - out->data[i]) <= 1e-5f * (1.0f + fabsf(out->data[i])));
        diff = param_max_diff(seg, bptt, true);
    }
    snn_step_end();
    CHECK(snn_model_config_of(seg)->time_steps == 6);
    return diff;
}

static void test_eval_mode_gradients_are_bptt(void)
{
    const snn_neuron_kind kinds[2] = {SNN_NEURON_LIF, SNN_NEURON_ALIF};
    for (int k = 0; k < 2; k++) {
        if (kinds[k] == SNN_NEURON_ALIF && !snn_neuron_kernels_cpu.alif_forward) continue;
        const int segments[3] = {1, 2, 4};
        for (int i = 0; i < 3; i++) {
            snn_module *bptt = small_cnn(6, kinds[k], 0.0f, 31), *seg = small_cnn(6, kinds[k], 0.0f, 31);
            const double diff = compare(bptt, seg, segments[i], false);
            if (diff > 1e-5)
                fprintf(stderr, "  %s, K = %d: max relative gradient difference %g\n",
                        snn_neuron_kind_name(kinds[k]), segments[i], diff);
            CHECK(diff <= 1e-5);
            snn_module_free(bptt);
            snn_module_free(seg);
        }
    }
}

/* training mode, one segment: BPTT's step, dropout masks and running statistics included */
static void test_one_segment_is_bptt_in_training(void)
{
    snn_module *bptt = small_cnn(6, SNN_NEURON_LIF, 0.3f, 32), *seg = small_cnn(6, SNN_NEURON_LIF, 0.3f, 32);
    const double diff = compare(bptt, seg, 6, true);
    if (diff > 1e-5) fprintf(stderr, "  max relative gradient difference %g\n", diff);
    CHECK(diff <= 1e-5);
    CHECK(param_max_diff(seg, bptt, false) <= 1e-6); /* weights equal; buffers: BPTT's */
    CHECK(snn_model_rng_state(seg) == snn_model_rng_state(bptt));
    snn_module_free(bptt);
    snn_module_free(seg);
}

/* K < T in training: each batch-norm counted once per segment, as one pass leaves it */
static void test_running_statistics_of_one_pass(void)
{
    snn_module *seg = small_cnn(6, SNN_NEURON_LIF, 0.0f, 33);
    snn_module_train(seg, true);
    float images[4 * 64], labels[4];
    make_batch(4, images, labels, 8);
    CHECK_OK(snn_step_begin());
    snn_tensor *logits = NULL, *loss = NULL;
    const train_segments_options o = {.segment = 4}; /* segments of 4 and 2 */
    CHECK_OK(train_segments_step(seg, snn_from_host(SNN_SHAPE(4, 1, 8, 8), images, SNN_CPU),
                                 snn_from_host(SNN_SHAPE(4), labels, SNN_CPU), &o, &logits, &loss));
    snn_step_end();
    snn_param_list list = {0};
    CHECK_OK(snn_module_parameters(seg, &list));
    int counts = 0;
    for (int i = 0; i < list.count; i++) {
        if (!strstr(list.items[i].name, "num_batches_tracked")) continue;
        counts++;
        /* bn1 runs once per forward on the N images (the stem, before the repeat over T) */
        CHECK(list.items[i].tensor->data[0] == 2.0f);
    }
    CHECK(counts == 2);
    snn_param_list_free(&list);
    snn_module_free(seg);
}

static void test_bad_segments_are_refused(void)
{
    snn_module *m = small_cnn(6, SNN_NEURON_LIF, 0.0f, 34);
    CHECK(train_segments_check("snn-train", m, 0) == SNN_ERR_ARGUMENT);
    CHECK(strstr(snn_last_error(), "--time-checkpoint 0") && strstr(snn_last_error(), "1 .. T (6)"));
    CHECK(train_segments_check("snn-train", m, 7) == SNN_ERR_ARGUMENT);
    CHECK(train_segments_check("snn-train", m, 3) == SNN_OK);
    snn_module_free(m);
    /* dropout shares one mask over all T steps: only one segment keeps that */
    m = small_cnn(6, SNN_NEURON_LIF, 0.3f, 35);
    CHECK(train_segments_check("snn-train", m, 3) == SNN_ERR_ARGUMENT);
    CHECK(strstr(snn_last_error(), "--dropout 0") != NULL);
    CHECK(train_segments_check("snn-train", m, 6) == SNN_OK);
    snn_module_free(m);
}

int main(void)
{
    snn_set_num_threads(2);
    RUN(test_eval_mode_gradients_are_bptt);
    RUN(test_one_segment_is_bptt_in_training);
    RUN(test_running_statistics_of_one_pass);
    RUN(test_bad_segments_are_refused);
    return test_finish();
}
