/*
 * test_clip_grad.c - gradient clipping by the global L2 norm (nn/clip_grad.c,
 * snn_clip_grad_norm) against torch.nn.utils.clip_grad_norm_'s rule written as a plain loop:
 *
 *   - a norm above max_norm: the norm returned and every gradient scaled by
 *     max_norm / (norm + 1e-6), over parameters of several sizes (one of them 3 floats, one
 *     large enough for the threaded CPU sum);
 *   - a norm below max_norm: the gradients keep their bits;
 *   - parameters without a gradient and buffers are left out of the norm and untouched;
 *   - a NaN or inf gradient: the norm says so and no gradient moves;
 *   - bad arguments name the function and the argument;
 *   - on CUDA when a GPU is visible (else that part says it was skipped): the same model on the
 *     GPU clips to the CPU's values.
 * Run: ctest --test-dir build -R '^clip_grad$'   (or build/bin/test_clip_grad)
 */
#include <stdio.h>
#include <string.h>

#include "snn.h"
#include "tensor/error.h"
#include "test.h"

static const snn_module_ops test_ops = {.kind = "Test"};

enum { N_BIG = 70000 }; /* above the CPU's per-thread slice: the sum runs threaded */

/* net: "a" (3), "fc.weight" (N_BIG), "fc.bias" (5): trainable; "fc.running" (4): a buffer;
 * "b" (2): trainable, left without a gradient. Gradients drawn with `seed`, times `size`. */
static snn_module *make_net(uint64_t seed, float size)
{
    snn_rng rng;
    snn_rng_seed(&rng, seed);
    snn_module *net = snn_module_new(&test_ops, NULL);
    snn_module *fc = snn_module_new(&test_ops, NULL);
    SNN_ASSERT(net && fc);
    const int sizes[] = {3, N_BIG, 5};
    snn_tensor *params[3];
    for (int i = 0; i < 3; i++) {
        params[i] = snn_tensor_new(SNN_SHAPE(sizes[i]), SNN_CPU);
        SNN_ASSERT(params[i]);
        snn_tensor_uniform_(params[i], &rng, -1.0f, 1.0f);
        snn_tensor *g = snn_tensor_grad(params[i]);
        SNN_ASSERT(g);
        snn_tensor_uniform_(g, &rng, -size, size);
    }
    snn_module_add_param(net, "a", params[0], true);
    snn_module_add_param(fc, "weight", params[1], true);
    snn_module_add_param(fc, "bias", params[2], true);
    snn_module_add_param(fc, "running", snn_tensor_new(SNN_SHAPE(4), SNN_CPU), false);
    snn_module_add_param(net, "b", snn_tensor_new(SNN_SHAPE(2), SNN_CPU), true);
    CHECK_OK(snn_module_add(net, "fc", fc));
    return net;
}

/* The gradients of the trainable parameters that have one, copied to the host in order. */
static int grads_of(snn_module *net, float **out, int64_t *sizes)
{
    snn_param_list list;
    CHECK_OK(snn_module_parameters(net, &list));
    int n = 0;
    for (int i = 0; i < list.count; i++) {
        const snn_tensor *g = list.items[i].tensor->grad;
        if (!list.items[i].trainable || !g) continue;
        out[n] = malloc((size_t)g->numel * sizeof *out[n]);
        sizes[n] = g->numel;
        CHECK_OK(snn_tensor_copy_to_host(g, out[n]));
        n++;
    }
    snn_param_list_free(&list);
    return n;
}

static void free_grads(float **g, int n)
{
    for (int i = 0; i < n; i++) free(g[i]);
}

/* clip_grad_norm_'s rule as a loop: the norm in double, coef in float as PyTorch has it;
 * *clipped: whether it scaled */
static double plain_clip(float **g, const int64_t *sizes, int n, float max_norm, bool *clipped)
{
    double sumsq = 0.0;
    for (int i = 0; i < n; i++)
        for (int64_t j = 0; j < sizes[i]; j++) sumsq += (double)g[i][j] * (double)g[i][j];
    const double norm = sqrt(sumsq);
    const float coef = max_norm / ((float)norm + 1e-6f);
    *clipped = coef < 1.0f;
    if (coef < 1.0f)
        for (int i = 0; i < n; i++)
            for (int64_t j = 0; j < sizes[i]; j++) g[i][j] *= coef;
    return norm;
}

/* snn_clip_grad_norm on `net` against the plain loop over its gradients */
static void check_against_loop(snn_module *net, float max_norm, bool expect_clipped)
{
    float *want[4], *got[4];
    int64_t sizes[4];
    const int n = grads_of(net, want, sizes);
    CHECK(n == 3); /* "b" has no gradient, "fc.running" is a buffer */
    bool clipped = false;
    const double want_norm = plain_clip(want, sizes, n, max_norm, &clipped);
    float norm = -1.0f;
    CHECK_OK(snn_clip_grad_norm(net, max_norm, &norm));
    CHECK_CLOSE(norm, want_norm, 0.0, 1e-6);
    CHECK(clipped == expect_clipped);
    grads_of(net, got, sizes);
    for (int i = 0; i < n; i++) {
        if (expect_clipped) CHECK_ALL_CLOSE(got[i], want[i], sizes[i], 1e-9, 2e-6);
        else CHECK(test_same_bits(got[i], want[i], (long)sizes[i]));
    }
    if (expect_clipped) { /* the clipped gradients' norm is max_norm */
        double sumsq = 0.0;
        for (int i = 0; i < n; i++)
            for (int64_t j = 0; j < sizes[i]; j++) sumsq += (double)got[i][j] * (double)got[i][j];
        CHECK_CLOSE(sqrt(sumsq), max_norm, 0.0, 1e-5);
    }
    free_grads(want, n);
    free_grads(got, n);
}

static void test_clips_above_and_keeps_below(void)
{
    snn_module *net = make_net(1, 0.5f); /* norm about 0.5 sqrt(N_BIG / 3): 76 */
    check_against_loop(net, 1.0f, true);
    check_against_loop(net, 1.5f, false); /* now at 1: below, kept */
    check_against_loop(net, 0.8f, true);  /* coef 0.8: a small cut is a cut */
    snn_module_free(net);
    net = make_net(2, 1e-3f);
    check_against_loop(net, 0.01f, true);
    check_against_loop(net, 5.0f, false);
    snn_module_free(net);
    /* a module without any gradient: norm 0 */
    snn_module *empty = snn_module_new(&test_ops, NULL);
    float norm = -1.0f;
    CHECK_OK(snn_clip_grad_norm(empty, 1.0f, &norm));
    CHECK(norm == 0.0f);
    CHECK_OK(snn_clip_grad_norm(empty, 1.0f, NULL));
    snn_module_free(empty);
}

static void test_non_finite_left_alone(void)
{
    const float bad[] = {NAN, INFINITY};
    for (int b = 0; b < 2; b++) {
        snn_module *net = make_net(3, 1.0f);
        snn_tensor *g = snn_module_child(net, "fc")->params[1].tensor->grad; /* fc.bias */
        g->data[2] = bad[b];
        float *before[4], *after[4];
        int64_t sizes[4];
        const int n = grads_of(net, before, sizes);
        float norm = 0.0f;
        CHECK_OK(snn_clip_grad_norm(net, 1.0f, &norm));
        CHECK(b == 0 ? isnan(norm) : isinf(norm));
        grads_of(net, after, sizes);
        for (int i = 0; i < n; i++) CHECK(test_same_bits(after[i], before[i], (long)sizes[i]));
        free_grads(before, n);
        free_grads(after, n);
        snn_module_free(net);
    }
}

static void test_bad_arguments(void)
{
    float norm = 7.0f;
    CHECK(snn_clip_grad_norm(NULL, 1.0f, &norm) == SNN_ERR_ARGUMENT);
    CHECK(strstr(snn_last_error(), "snn_clip_grad_norm: bad argument 'module' (got NULL)"));
    CHECK(norm == 0.0f);
    snn_module *net = make_net(4, 1.0f);
    const float bad[] = {0.0f, -1.0f, NAN, INFINITY};
    for (int i = 0; i < 4; i++) {
        CHECK(snn_clip_grad_norm(net, bad[i], &norm) == SNN_ERR_ARGUMENT);
        CHECK(strstr(snn_last_error(), "snn_clip_grad_norm: bad argument 'max_norm' (expected a "
                                       "finite value > 0, got"));
    }
    snn_module_free(net);
}

/* The same gradients on the GPU clip to the CPU's values (the sums differ in order only). */
static void test_cuda_matches_cpu(void)
{
    if (!snn_cuda_available()) {
        fprintf(stderr, "  the CUDA part skipped: no GPU visible\n");
        return;
    }
    const float max_norms[] = {1.0f, 1e4f}; /* clipped, then not */
    for (int c = 0; c < 2; c++) {
        snn_module *cpu = make_net(5, 0.5f), *gpu = make_net(5, 0.5f);
        float *host[4];
        int64_t sizes[4];
        const int n = grads_of(cpu, host, sizes);
        CHECK_OK(snn_module_to(gpu, SNN_CUDA)); /* gradients stay behind: set them again */
        snn_param_list list;
        CHECK_OK(snn_module_parameters(gpu, &list));
        for (int i = 0, j = 0; i < list.count; i++)
            if (list.items[i].trainable && strcmp(list.items[i].name, "b") != 0)
                CHECK_OK(snn_tensor_copy_from_host(snn_tensor_grad(list.items[i].tensor),
                                                   host[j++]));
        snn_param_list_free(&list);
        free_grads(host, n);
        float norm_cpu = 0.0f, norm_gpu = 0.0f;
        CHECK_OK(snn_clip_grad_norm(cpu, max_norms[c], &norm_cpu));
        CHECK_OK(snn_clip_grad_norm(gpu, max_norms[c], &norm_gpu));
        CHECK_CLOSE(norm_gpu, norm_cpu, 0.0, 1e-6);
        float *want[4], *got[4];
        CHECK(grads_of(cpu, want, sizes) == n && grads_of(gpu, got, sizes) == n);
        for (int i = 0; i < n; i++) CHECK_ALL_CLOSE(got[i], want[i], sizes[i], 1e-9, 2e-6);
        free_grads(want, n);
        free_grads(got, n);
        snn_module_free(cpu);
        snn_module_free(gpu);
    }
}

int main(void)
{
    RUN(test_clips_above_and_keeps_below);
    RUN(test_non_finite_left_alone);
    RUN(test_bad_arguments);
    RUN(test_cuda_matches_cpu);
    return test_finish();
}
