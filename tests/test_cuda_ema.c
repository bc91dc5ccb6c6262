/*
 * test_cuda_ema.c - the weights' moving average (nn/ema.c) on the GPU against the CPU: the same
 * small spiking CNN on both devices, the same weights after each of 5 "optimizer steps"
 * (random values, through the warm-up and past it), and the averages compared element by
 * element, parameters and batch-norm buffers alike (|got - want| <= 1e-6 + 1e-5 |want|: the
 * GPU may fuse the lerp into one fma, a rounding less than the CPU). A tensor that stops
 * changing must keep its average bit for bit on the GPU too.
 * Skipped (exit 77) without a GPU.  Run: ctest -R cuda_ema --output-on-failure
 */
#include <stdlib.h>
#include <string.h>

#include "snn.h"
#include "tensor/error.h"
#include "test.h"

static snn_module *tiny_model(void)
{
    snn_model_config c = snn_model_config_default(SNN_MODEL_SPIKING_CNN);
    c.width_base = 4;
    c.hidden = 16;
    c.time_steps = 2;
    snn_rng rng;
    snn_rng_seed(&rng, 11);
    snn_module *m = snn_model_new(&c, &rng);
    SNN_ASSERT(m);
    return m;
}

/* Gives every tensor of both models the same random values (the first `frozen` tensors keep
 * theirs: they stop changing). */
static void set_weights(snn_module *cpu, snn_module *gpu, snn_rng *rng, int frozen)
{
    snn_param_list a, b;
    CHECK_OK(snn_module_parameters(cpu, &a));
    CHECK_OK(snn_module_parameters(gpu, &b));
    for (int i = frozen; i < a.count && i < b.count; i++) {
        snn_tensor *t = a.items[i].tensor;
        for (int64_t j = 0; j < t->numel; j++) t->data[j] = snn_rng_uniform(rng) * 2.0f - 1.0f;
        CHECK_OK(snn_tensor_copy(b.items[i].tensor, t));
    }
    snn_param_list_free(&a);
    snn_param_list_free(&b);
}

static void test_parity(void)
{
    snn_module *cpu = tiny_model(), *gpu = tiny_model();
    CHECK_OK(snn_module_to(gpu, SNN_CUDA));
    snn_ema *ea = snn_ema_new(cpu, 0.5f), *eb = snn_ema_new(gpu, 0.5f);
    CHECK(ea && eb);
    if (ea && eb) {
        snn_rng rng;
        snn_rng_seed(&rng, 5);
        for (int step = 1; step <= 5; step++) { /* d = 2/11, 1/4, 4/13, 5/14, then 0.5 */
            set_weights(cpu, gpu, &rng, 1);
            CHECK_OK(snn_ema_update(ea, cpu, step));
            CHECK_OK(snn_ema_update(eb, gpu, step));
        }
        snn_param_list a, b;
        CHECK_OK(snn_ema_state(ea, &a));
        CHECK_OK(snn_ema_state(eb, &b));
        CHECK(a.count == b.count && a.count > 4);
        for (int i = 0; i < a.count && i < b.count; i++) {
            const snn_tensor *t = a.items[i].tensor, *u = b.items[i].tensor;
            CHECK(u->device == SNN_CUDA && t->numel == u->numel);
            float *host = malloc((size_t)u->numel * sizeof *host);
            CHECK_OK(snn_tensor_copy_to_host(u, host));
            if (i == 0) /* never changed: exact on both devices */
                CHECK(memcmp(host, t->data, (size_t)t->numel * sizeof *host) == 0);
            CHECK_ALL_CLOSE(host, t->data, t->numel, 1e-6, 1e-5);
            free(host);
        }
        snn_param_list_free(&a);
        snn_param_list_free(&b);
    }
    snn_ema_free(ea);
    snn_ema_free(eb);
    snn_module_free(cpu);
    snn_module_free(gpu);
}

int main(void)
{
    test_require_cuda();
    RUN(test_parity);
    return test_finish();
}
