/*
 * forward_graph_check.h - what test_forward_graph.c (CPU) and test_cuda_forward_graph.c check
 * of nn/forward_graph.c: the recorded forward gives the eager forward's logits bit for bit, for
 * several inputs in a row, and sees a parameter changed in place after the recording.
 */
#ifndef SNN_FORWARD_GRAPH_CHECK_H
#define SNN_FORWARD_GRAPH_CHECK_H

#include <stdlib.h>

#include "snn.h"
#include "test.h"

/* Logits of the eager eval forward of x (host, shape) on the model's device, into `out`. */
static void eager_logits(snn_module *model, snn_shape shape, const float *x, snn_device device,
                         float *out)
{
    snn_step_begin();
    snn_no_grad_begin();
    snn_tensor *logits = snn_module_forward(model, snn_from_host(shape, x, device));
    snn_no_grad_end();
    CHECK(logits != NULL);
    if (logits) snn_tensor_copy_to_host(logits, out);
    snn_step_end();
}

static void check_graph_matches_eager(snn_model_kind kind, snn_device device)
{
    snn_rng rng;
    snn_rng_seed(&rng, 11);
    snn_model_config c = snn_model_config_default(kind);
    c.time_steps = 2;
    c.width_base = 8;
    snn_module *model = snn_model_new(&c, &rng);
    CHECK(model != NULL);
    if (!model) return;
    CHECK_OK(snn_module_to(model, device));
    snn_module_train(model, false);
    const snn_shape shape = SNN_SHAPE(3, c.in_channels, c.height, c.width);
    const int n = 3 * c.in_channels * c.height * c.width, classes = c.classes;
    float *x = malloc((size_t)n * sizeof *x), *want = malloc((size_t)3 * classes * sizeof *want);
    float *got = malloc((size_t)3 * classes * sizeof *got);
    snn_forward_graph *g = snn_forward_graph_new(model, shape, device);
    CHECK(g != NULL);
    for (int round = 0; g && round < 4; round++) {
        for (int i = 0; i < n; i++) x[i] = 2.0f * snn_rng_normal(&rng);
        if (round == 3) { /* a parameter changed in place after the recording is seen */
            snn_tensor *w = model->children[0]->params[0].tensor;
            float *h = malloc((size_t)w->numel * sizeof *h);
            snn_tensor_copy_to_host(w, h);
            for (int64_t i = 0; i < w->numel; i++) h[i] *= 1.5f;
            snn_tensor_copy_from_host(w, h);
            free(h);
        }
        eager_logits(model, shape, x, device, want);
        snn_step_begin();
        snn_tensor *logits = snn_forward_graph_run(g, snn_from_host(shape, x, device));
        CHECK(logits != NULL);
        if (logits) snn_tensor_copy_to_host(logits, got);
        snn_step_end();
        int differ = 0;
        for (int i = 0; i < 3 * classes; i++) differ += got[i] != want[i];
        if (differ) fprintf(stderr, "  round %d: %d of %d logits differ from the eager forward\n",
                            round, differ, 3 * classes);
        CHECK(differ == 0);
    }
    snn_forward_graph_free(g);
    free(x);
    free(want);
    free(got);
    snn_module_free(model);
}

#endif /* SNN_FORWARD_GRAPH_CHECK_H */
