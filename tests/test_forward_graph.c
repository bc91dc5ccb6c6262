/*
 * test_forward_graph.c - nn/forward_graph.c on the CPU: the API's refusals (training mode, a
 * wrong input shape) and the forward it runs, the eager one, bit for bit. The CUDA Graph itself
 * is tested by test_cuda_forward_graph.c.
 */
#include <string.h>

#include "forward_graph_check.h"

static void test_cpu_matches_eager(void) { check_graph_matches_eager(SNN_MODEL_SPIKING_CNN, SNN_CPU); }

static void test_refusals(void)
{
    snn_rng rng;
    snn_rng_seed(&rng, 3);
    snn_model_config c = snn_model_config_default(SNN_MODEL_SPIKING_CNN);
    c.width_base = 4;
    snn_module *model = snn_model_new(&c, &rng);
    const snn_shape shape = SNN_SHAPE(2, 1, 28, 28);
    snn_module_train(model, true);
    CHECK(snn_forward_graph_new(model, shape, SNN_CPU) == NULL);
    CHECK(strstr(snn_last_error(), "training mode") != NULL);
    snn_module_train(model, false);
    snn_forward_graph *g = snn_forward_graph_new(model, shape, SNN_CPU);
    CHECK(g != NULL);
    snn_step_begin();
    CHECK(snn_forward_graph_run(g, snn_zeros(SNN_SHAPE(3, 1, 28, 28), SNN_CPU)) == NULL);
    CHECK(strstr(snn_last_error(), "recorded for [2, 1, 28, 28]") != NULL);
    snn_step_end();
    snn_forward_graph_free(g);
    snn_module_free(model);
}

int main(void)
{
    RUN(test_refusals);
    RUN(test_cpu_matches_eager);
    return test_finish();
}
