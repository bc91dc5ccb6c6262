/*
 * test_spike_pack.c - spikes kept as bits for backward (autograd/spike_pack.c), on the CPU:
 *
 *   1. the pack / unpack kernels against a plain loop, at lengths around a 32-bit word;
 *   2. snn_spikes_pack: what it takes (spikes made with a tape), what it refuses, naming the
 *      argument (a tensor not marked as spikes, spikes made without a tape, a view), what it
 *      leaves (data NULL, the bits, a second call a no-op), and that forward ops and
 *      snn_tensor_copy_to_host refuse a packed tensor while snn_saved_values and
 *      snn_spike_plane_norms read it;
 *   3. a training step of ResNet-18, SEW-ResNet-18 and ResNet-50 with packing on and off, with
 *      the fused batch-norm -> neuron ops and without: the same bits everywhere
 *      (spike_pack_check.h);
 *   4. conv outputs kept as bf16 (autograd/bf16_keep.c): the rounding kernels against values
 *      rounded by hand, the refusals, and a training step with and without (spike_pack_check.h).
 * Run: ctest --test-dir build -R spike_pack
 */
#include "spike_pack_check.h"
#include "tensor/error.h"

static void test_kernels(void)
{
    check_pack_kernels(SNN_CPU);
    check_fused_bits(SNN_CPU);
}

/* LIF spikes of a (T, N, C, H, W) current made with a tape; *x gets the current. */
static snn_tensor *lif_spikes(snn_tensor *w_owned, snn_tensor **x)
{
    snn_neuron_config cfg = snn_neuron_config_default(SNN_NEURON_LIF);
    snn_tensor *current = snn_mul(snn_full(SNN_SHAPE(2, 3, 4, 5, 5), 1.0f, SNN_CPU), w_owned);
    if (x) *x = current;
    return snn_neuron_multistep(current, &cfg, NULL, NULL);
}

static void test_pack_api(void)
{
    snn_rng rng;
    snn_rng_seed(&rng, 3);
    snn_tensor *scale = snn_tensor_new(SNN_SHAPE(2, 3, 4, 5, 5), SNN_CPU);
    snn_tensor_uniform_(scale, &rng, 0.0f, 4.0f);
    scale->requires_grad = true;
    CHECK_OK(snn_step_begin());
    snn_tensor *s = lif_spikes(scale, NULL);
    CHECK(s && s->spikes && s->pooled && s->data && !s->spike_bits);
    if (!s) {
        snn_step_end();
        snn_tensor_free(scale);
        return;
    }
    float *before = malloc((size_t)s->numel * sizeof *before);
    memcpy(before, s->data, (size_t)s->numel * sizeof *before);
    int ones = 0;
    for (int64_t i = 0; i < s->numel; i++) ones += before[i] == 1.0f;
    CHECK(ones > 0 && ones < s->numel); /* a test of bits needs both values */

    /* refused: a tensor not marked as spikes, a view of spikes */
    snn_tensor *plain = snn_full(SNN_SHAPE(4), 1.0f, SNN_CPU);
    CHECK(snn_spikes_pack(plain) == SNN_ERR_ARGUMENT);
    CHECK(strstr(snn_last_error(), "'t'") && strstr(snn_last_error(), "not marked as spikes"));
    CHECK(snn_spikes_pack(snn_flatten(s, 0, -1)) == SNN_ERR_ARGUMENT);
    CHECK(strstr(snn_last_error(), "a view") != NULL);
    CHECK(snn_spikes_pack(NULL) == SNN_ERR_ARGUMENT);
    snn_clear_error();

    /* packed: bits, no floats, the same values through snn_saved_values */
    CHECK_OK(snn_spikes_pack(s));
    CHECK(s->data == NULL && s->spike_bits != NULL && !s->pooled);
    CHECK_OK(snn_spikes_pack(s)); /* again: nothing to do */
    snn_step_scratch mark = snn_step_scratch_mark(SNN_CPU);
    const float *values = snn_saved_values("test", s);
    CHECK(values && test_same_bits(values, before, (long)s->numel));
    snn_step_scratch_release(SNN_CPU, mark);

    /* a conv reads it: as bits where the device's kernels can (CUDA's, which
     * snn_conv2d_reads_bits reports), else unpacked for the op (the CPU): the output of the
     * same conv on the floats, bit for bit; and its backward the same gradients */
    snn_tensor *w = snn_full(SNN_SHAPE(4, 4, 3, 3), 0.1f, SNN_CPU);
    for (int64_t i = 0; i < w->numel; i++) w->data[i] = (float)(i % 7) * 0.25f - 0.75f;
    w->requires_grad = true;
    CHECK(!snn_conv2d_reads_bits(s, w, 1, 1));
    snn_tensor *floats = snn_tensor_new(s->shape, SNN_CPU);
    memcpy(floats->data, before, (size_t)s->numel * sizeof *before);
    snn_tensor *y_bits = snn_conv2d(s, w, NULL, 1, 1);
    snn_tensor *y_floats = snn_conv2d(floats, w, NULL, 1, 1);
    CHECK(y_bits && y_floats && test_same_bits(y_bits->data, y_floats->data, (long)y_bits->numel));
    float *dw_floats = NULL;
    if (y_floats && snn_backward(snn_sum_all(snn_mul(y_floats, y_floats))) == SNN_OK) {
        dw_floats = malloc((size_t)w->numel * sizeof *dw_floats);
        memcpy(dw_floats, w->grad->data, (size_t)w->numel * sizeof *dw_floats);
        CHECK_OK(snn_tensor_fill(w->grad, 0.0f));
    }
    CHECK(dw_floats && y_bits && snn_backward(snn_sum_all(snn_mul(y_bits, y_bits))) == SNN_OK);
    CHECK(dw_floats && test_same_bits(w->grad->data, dw_floats, (long)w->numel));
    free(dw_floats);
    snn_tensor_free(floats);
    /* an op checks its other arguments against it by device and shape (snn_check_like), which
     * snn_check_same_device refuses for a tensor without values */
    snn_tensor *like = snn_full(s->shape, 0.0f, SNN_CPU);
    snn_tensor *other = snn_full(SNN_SHAPE(2, 3), 0.0f, SNN_CPU);
    CHECK(snn_check_same_device("test", "s", s, "like", like) == 1);
    snn_clear_error();
    CHECK(snn_check_like("test", "s", s, "like", like, true) == 0);
    CHECK(snn_check_like("test", "s", s, "other", other, false) == 0);
    CHECK(snn_check_like("test", "s", s, "other", other, true) == 1 &&
          strstr(snn_last_error(), "'other'") && strstr(snn_last_error(), "like 's'"));
    snn_clear_error();
    CHECK(snn_check_like("test", "s", s, "missing", NULL, false) == 1 &&
          strstr(snn_last_error(), "'missing'"));
    snn_clear_error();
    CHECK(snn_check_like("test", "gone", NULL, "like", like, false) == 1 &&
          strstr(snn_last_error(), "'gone'"));
    snn_clear_error();
    /* host copies and other forward ops refuse it, naming the argument */
    CHECK(snn_relu(s) == NULL && strstr(snn_last_error(), "'x'") &&
          strstr(snn_last_error(), "snn_spikes_pack"));
    snn_clear_error();
    CHECK(snn_tensor_copy_to_host(s, before) == SNN_ERR_ARGUMENT);
    snn_clear_error();
    CHECK(snn_flatten(s, 0, 1) == NULL && strstr(snn_last_error(), "snn_spikes_pack"));
    snn_clear_error();
    /* the activity penalty's op reads it: y = sqrt(count) per (t, n, c) plane */
    snn_tensor *norms = snn_spike_plane_norms(s);
    CHECK(norms != NULL && norms->numel == 2 * 3 * 4);
    if (norms) {
        for (int64_t g = 0; g < norms->numel; g++) {
            int count = 0;
            for (int p = 0; p < 25; p++) count += before[g * 25 + p] == 1.0f;
            CHECK(norms->data[g] == sqrtf((float)count));
        }
        /* and its backward unpacks the spikes: dL/ds = s / ||s|| on the planes that fired */
        CHECK_OK(snn_backward(snn_sum_all(norms)));
    }
    snn_step_end();

    /* spikes made without a tape stay floats in the arena: nothing to give back */
    CHECK_OK(snn_step_begin());
    snn_no_grad_begin();
    snn_tensor *eval = lif_spikes(scale, NULL);
    snn_no_grad_end();
    CHECK(eval && !eval->spikes && !eval->pooled);
    CHECK(snn_spikes_pack(eval) == SNN_ERR_ARGUMENT);
    CHECK(strstr(snn_last_error(), "not marked as spikes") != NULL);
    snn_clear_error();
    snn_step_end();
    free(before);
    snn_tensor_free(scale);
}

/* The packed gradient path, against the floats: the neuron's BPTT reads its spikes, unpacked. */
static void test_neuron_backward_reads_bits(void)
{
    float *grads[2] = {NULL, NULL};
    const int64_t n = 2 * 3 * 4 * 5 * 5;
    for (int pack = 0; pack < 2; pack++) {
        snn_tensor *scale = snn_tensor_new(SNN_SHAPE(2, 3, 4, 5, 5), SNN_CPU);
        snn_rng rng;
        snn_rng_seed(&rng, 8);
        snn_tensor_uniform_(scale, &rng, 0.0f, 4.0f);
        scale->requires_grad = true;
        CHECK_OK(snn_step_begin());
        snn_tensor *s = lif_spikes(scale, NULL);
        snn_tensor *g = snn_full(SNN_SHAPE(2, 3, 4, 5, 5), 0.0f, SNN_CPU);
        for (int64_t i = 0; i < g->numel; i++) g->data[i] = (float)((i * 7) % 5) - 2.0f;
        snn_tensor *loss = snn_sum_all(snn_mul(s, g)); /* mul's backward reads s too */
        if (pack) CHECK_OK(snn_spikes_pack(s));
        CHECK_OK(snn_backward(loss));
        grads[pack] = malloc((size_t)n * sizeof(float));
        memcpy(grads[pack], scale->grad->data, (size_t)n * sizeof(float));
        snn_step_end();
        snn_tensor_free(scale);
    }
    bool nonzero = false;
    for (int64_t i = 0; i < n; i++) nonzero |= grads[0][i] != 0.0f;
    CHECK(nonzero && test_same_bits(grads[0], grads[1], (long)n));
    free(grads[0]), free(grads[1]);
}

static void test_models(void) { check_models_packing(SNN_CPU, 2); }
static void test_bf16_kept(void)
{
    check_bf16_kernels(SNN_CPU);
    check_bf16_refusals(SNN_CPU);
    check_models_bf16_kept(SNN_CPU, 2);
}

int main(void)
{
    RUN(test_kernels);
    RUN(test_pack_api);
    RUN(test_neuron_backward_reads_bits);
    RUN(test_models);
    RUN(test_bf16_kept);
    return test_finish();
}
