/*
 * memory_diet_check.h - what test_memory_diet.c (CPU) and test_cuda_memory_diet.c check of the
 * ops that write over an input the caller gives up (snn_neuron_multistep_consume,
 * snn_add_into): the same outputs and gradients as the plain ops, bit for bit, in less memory.
 *
 * The graph checked, on a (T, N, C, H, W) current x and a residual r of the same shape:
 *     y = sn(x0 + r), x0 = x + 0  plain: snn_add, snn_neuron_multistep
 *     y = sn(add_into(x0', r))   diet:  x0' a fresh copy of x0 (it is written over)
 * loss = sum(y * g) for a fixed random g, so dL/dy = g reaches the surrogate.
 */
#ifndef SNN_MEMORY_DIET_CHECK_H
#define SNN_MEMORY_DIET_CHECK_H

#include <stdlib.h>
#include <string.h>

#include "snn.h"
#include "tensor/arena.h"
#include "test.h"

typedef struct diet_result {
    float *spikes, *dx, *dr; /* host copies */
    size_t neuron_bytes;     /* the neuron op's allocations in the step (arena profile) */
} diet_result;

static void count_neuron_bytes(const char *fn, size_t bytes, int count, void *ctx)
{
    (void)count;
    if (strstr(fn, "snn_neuron_multistep")) *(size_t *)ctx += bytes;
}

static diet_result run_diet_graph(snn_neuron_kind kind, bool diet, snn_device device,
                                  const float *x_host, const float *r_host, const float *g_host,
                                  snn_shape shape)
{
    diet_result res = {0};
    const int64_t n = snn_shape_numel(shape);
    res.spikes = malloc((size_t)n * sizeof(float));
    res.dx = malloc((size_t)n * sizeof(float));
    res.dr = malloc((size_t)n * sizeof(float));
    snn_neuron_config cfg = snn_neuron_config_default(kind);
    snn_tensor *w = kind == SNN_NEURON_PLIF ? snn_plif_param_new(cfg.tau, device) : NULL;
    snn_arena_profile(true);
    snn_step_begin();
    snn_tensor *x = snn_from_host(shape, x_host, device), *r = snn_from_host(shape, r_host, device);
    snn_tensor *g = snn_from_host(shape, g_host, device);
    x->requires_grad = r->requires_grad = true;
    x->retain_grad = r->retain_grad = true;
    /* x + 0 makes a non-leaf copy that the diet may write over, leaving x itself intact */
    snn_tensor *x0 = snn_add_scalar(x, 0.0f);
    snn_tensor *sum = diet ? snn_add_into(x0, r) : snn_add(x0, r);
    snn_tensor *y = diet ? snn_neuron_multistep_consume(sum, &cfg, w, NULL)
                         : snn_neuron_multistep(sum, &cfg, w, NULL);
    snn_tensor *loss = snn_sum_all(snn_mul(y, g));
    CHECK(loss != NULL);
    if (loss) {
        CHECK_OK(snn_backward(loss));
        snn_tensor_copy_to_host(y, res.spikes);
        CHECK(x->grad && r->grad);
        if (x->grad) snn_tensor_copy_to_host(x->grad, res.dx);
        if (r->grad) snn_tensor_copy_to_host(r->grad, res.dr);
    }
    snn_arena_profile_report(device, count_neuron_bytes, &res.neuron_bytes);
    snn_step_end();
    snn_arena_profile(false);
    if (w) snn_tensor_free(w);
    return res;
}

static void diet_result_free(diet_result *r)
{
    free(r->spikes);
    free(r->dx);
    free(r->dr);
}

static int count_differences(const float *a, const float *b, int64_t n)
{
    int d = 0;
    for (int64_t i = 0; i < n; i++) d += memcmp(&a[i], &b[i], sizeof a[i]) != 0;
    return d;
}

/* The diet graph equals the plain one bit for bit; IF / LIF keep H in the sum's memory. */
static void check_diet(snn_neuron_kind kind, snn_device device)
{
    const snn_shape shape = SNN_SHAPE(4, 3, 5, 6, 7); /* (T, N, C, H, W) */
    const int64_t n = snn_shape_numel(shape);
    snn_rng rng;
    snn_rng_seed(&rng, 21);
    float *x = malloc((size_t)n * sizeof *x), *r = malloc((size_t)n * sizeof *r);
    float *g = malloc((size_t)n * sizeof *g);
    for (int64_t i = 0; i < n; i++) {
        x[i] = 1.5f * snn_rng_normal(&rng);
        r[i] = 0.5f * snn_rng_normal(&rng);
        g[i] = snn_rng_normal(&rng);
    }
    diet_result plain = run_diet_graph(kind, false, device, x, r, g, shape);
    diet_result diet = run_diet_graph(kind, true, device, x, r, g, shape);
    CHECK(count_differences(plain.spikes, diet.spikes, n) == 0);
    CHECK(count_differences(plain.dx, diet.dx, n) == 0);
    CHECK(count_differences(plain.dr, diet.dr, n) == 0);
    const size_t one = (size_t)n * sizeof(float);
    if (kind == SNN_NEURON_IF || kind == SNN_NEURON_LIF) {
        /* plain: H; diet: nothing (H lives in the sum's memory). The spikes come from the step
         * pool (neuron_op.c: spikes made with a tape may be packed to bits), which the arena
         * profile does not see. On the CPU the tensor structs share the host arena: a view's
         * struct costs a few hundred bytes. */
        CHECK(plain.neuron_bytes >= one);
        CHECK(diet.neuron_bytes + one <= plain.neuron_bytes + 1024 &&
              diet.neuron_bytes + one + 1024 >= plain.neuron_bytes);
        if (diet.neuron_bytes + one > plain.neuron_bytes + 1024)
            fprintf(stderr, "  neuron op bytes: plain %zu, diet %zu, one activation %zu\n",
                    plain.neuron_bytes, diet.neuron_bytes, one);
    } else {
        CHECK(diet.neuron_bytes == plain.neuron_bytes);
    }
    int64_t fired = 0;
    for (int64_t i = 0; i < n; i++) fired += plain.spikes[i] != 0.0f;
    CHECK(fired > n / 20 && fired < n - n / 20); /* the check saw both outcomes */
    diet_result_free(&plain);
    diet_result_free(&diet);
    free(x);
    free(r);
    free(g);
}

#endif /* SNN_MEMORY_DIET_CHECK_H */
