/*
 * test_batchnorm_running.c - how far BatchNorm2d's running statistics move (nn/layer_norm.c):
 *   - the first batches are averaged: the running mean after k <= 10 batches is the plain mean
 *     of the batches' means (the factor is max(momentum, 1 / (n + 1))), the starting values
 *     (mean 0, variance 1) gone after the first; from the 11th on, the exponential average by
 *     momentum as before; num_batches_tracked counts the training batches, evaluation none;
 *   - the fused op bn -> neuron (nn/fusion_rules.c), which runs in place of the layer in
 *     training, counts and moves the statistics as the layer alone does;
 *   - a file without the count (a checkpoint written before it existed) loads with
 *     SNN_BN_LONG_TRAINED, and the next batch moves the statistics by the momentum; a file
 *     without any other tensor of the layer is still refused.
 * Run: ctest --test-dir build -R batchnorm_running --output-on-failure
 */
#include <string.h>

#include "nn/nn.h"
#include "test.h"

enum { N = 4, C = 3, HW = 4 }; /* batches of (N, C, 2, 2) */

/* Batch `seed` (inside a step), with its per-channel mean into mean[C] and its unbiased
 * variance (what the running variance averages, as PyTorch) into var[C] when not NULL. */
static snn_tensor *batch(uint64_t seed, double *mean, double *var)
{
    /* a different offset per batch, so that a plain mean and an exponential one differ */
    float offset = 0.5f * (float)(seed % 7);
    snn_tensor *x = test_uniform(SNN_SHAPE(N, C, 2, 2), offset - 1.0f, offset + 2.0f, seed);
    for (int c = 0; c < C; c++) {
        double sum = 0.0, squares = 0.0;
        for (int n = 0; n < N; n++)
            for (int i = 0; i < HW; i++) sum += (double)x->data[(n * C + c) * HW + i];
        mean[c] = sum / (N * HW);
        for (int n = 0; n < N; n++)
            for (int i = 0; i < HW; i++) {
                double d = (double)x->data[(n * C + c) * HW + i] - mean[c];
                squares += d * d;
            }
        if (var) var[c] = squares / (N * HW - 1);
    }
    return x;
}

/* The value of a BatchNorm2d's buffer `name` at index i. */
static float buffer(snn_module *bn, const char *name, int i)
{
    for (int p = 0; p < bn->n_params; p++)
        if (strcmp(bn->params[p].name, name) == 0) return bn->params[p].tensor->data[i];
    CHECK(!"no such buffer");
    return 0.0f;
}

static void test_first_batches_are_averaged(void)
{
    snn_module *bn = snn_batchnorm2d_new(C);
    snn_module_train(bn, true);
    double expected[C] = {0.0, 0.0, 0.0}, sum[C] = {0.0, 0.0, 0.0};
    for (int k = 1; k <= 14; k++) {
        snn_step_begin();
        double mean[C], var[C];
        snn_tensor *x = batch((uint64_t)k, mean, var);
        CHECK(snn_module_forward(bn, x) != NULL);
        snn_step_end();
        double factor = 1.0 / k > 0.1 ? 1.0 / k : 0.1;
        for (int c = 0; c < C; c++) {
            sum[c] += mean[c];
            expected[c] = (1.0 - factor) * expected[c] + factor * mean[c];
            CHECK_CLOSE(buffer(bn, "running_mean", c), expected[c], 1e-6, 1e-5);
            if (k <= 10) /* the plain mean of the batches' means */
                CHECK_CLOSE(buffer(bn, "running_mean", c), sum[c] / k, 1e-6, 1e-5);
        }
        CHECK(buffer(bn, "num_batches_tracked", 0) == (float)k);
        if (k == 1) /* the starting variance of 1 weighs nothing after the first batch */
            for (int c = 0; c < C; c++)
                CHECK_CLOSE(buffer(bn, "running_var", c), var[c], 1e-6, 1e-5);
    }
    /* evaluation neither counts nor moves them */
    snn_module_train(bn, false);
    float before = buffer(bn, "running_mean", 0);
    snn_step_begin();
    double mean[C];
    CHECK(snn_module_forward(bn, batch(99, mean, NULL)) != NULL);
    snn_step_end();
    CHECK(buffer(bn, "running_mean", 0) == before);
    CHECK(buffer(bn, "num_batches_tracked", 0) == 14.0f);
    snn_module_free(bn);
}

/* bn -> LIF on (T, N, C, H, W) in training runs as one fused op: it must count the batches and
 * move the statistics as the layer alone does on the same input. */
static void test_fused_op_counts_too(void)
{
    snn_neuron_config lif = snn_neuron_config_default(SNN_NEURON_LIF);
    snn_module *pair = snn_sequential_new(), *alone = snn_batchnorm2d_new(C);
    CHECK_OK(snn_module_add(pair, "bn", snn_batchnorm2d_new(C)));
    CHECK_OK(snn_module_add(pair, "sn", snn_neuron_layer_new(&lif)));
    snn_module_train(pair, true);
    snn_module_train(alone, true);
    snn_module *bn = snn_module_child(pair, "bn");
    for (int k = 1; k <= 3; k++) {
        snn_step_begin();
        snn_tensor *x = test_uniform(SNN_SHAPE(2, N, C, 2, 2), -1.0f, 2.0f + (float)k, 40 + k);
        CHECK(snn_module_forward(pair, x) != NULL);
        CHECK(snn_module_forward(alone, x) != NULL);
        snn_step_end();
    }
    CHECK(buffer(bn, "num_batches_tracked", 0) == 3.0f);
    CHECK(buffer(alone, "num_batches_tracked", 0) == 3.0f);
    for (int c = 0; c < C; c++) {
        CHECK_CLOSE(buffer(bn, "running_mean", c), buffer(alone, "running_mean", c), 1e-6, 1e-5);
        CHECK_CLOSE(buffer(bn, "running_var", c), buffer(alone, "running_var", c), 1e-6, 1e-5);
    }
    snn_module_free(alone);
    snn_module_free(pair);
}

static void test_file_without_the_count(void)
{
    const char *path = "/tmp/snn_test_batchnorm_running.safetensors";
    snn_module *old = snn_batchnorm2d_new(C);
    snn_param_list all;
    CHECK_OK(snn_module_parameters(old, &all));
    for (int c = 0; c < C; c++) all.items[2].tensor->data[c] = 0.25f; /* running_mean */
    snn_param_list four = {all.items, 4}; /* weight, bias, running_mean, running_var */
    CHECK(strcmp(all.items[4].name, "num_batches_tracked") == 0);
    CHECK_OK(snn_safetensors_save(path, &four, NULL));

    snn_module *bn = snn_batchnorm2d_new(C);
    snn_param_list wanted;
    CHECK_OK(snn_module_parameters(bn, &wanted));
    CHECK_OK(snn_safetensors_load(path, &wanted, false, NULL, NULL));
    CHECK(buffer(bn, "num_batches_tracked", 0) == SNN_BN_LONG_TRAINED);
    CHECK(buffer(bn, "running_mean", 0) == 0.25f);
    /* long trained: the next batch moves the mean by the momentum, 0.1 */
    snn_module_train(bn, true);
    snn_step_begin();
    double mean[C];
    CHECK(snn_module_forward(bn, batch(5, mean, NULL)) != NULL);
    snn_step_end();
    for (int c = 0; c < C; c++)
        CHECK_CLOSE(buffer(bn, "running_mean", c), 0.9 * 0.25 + 0.1 * mean[c], 1e-6, 1e-5);

    /* any other tensor missing is still an error that names it */
    snn_param_list three = {all.items, 3};
    CHECK_OK(snn_safetensors_save(path, &three, NULL));
    CHECK(snn_safetensors_load(path, &wanted, false, NULL, NULL) == SNN_ERR_FORMAT);
    CHECK(strstr(snn_last_error(), "running_var") != NULL);
    snn_clear_error();
    remove(path);
    snn_param_list_free(&wanted);
    snn_param_list_free(&all);
    snn_module_free(bn);
    snn_module_free(old);
}

int main(void)
{
    RUN(test_first_batches_are_averaged);
    RUN(test_fused_op_counts_too);
    RUN(test_file_without_the_count);
    return test_finish();
}
