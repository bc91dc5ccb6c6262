/*
 * ann2snn_models.h - the tiny QANNs that test_ann2snn.c (CPU) and test_cuda_ann2snn.c convert:
 * the spiking CNN, ResNet-18 and SEW-ResNet-18 builders with qclip activations (4 levels,
 * unsigned), a few channels wide, and parameters drawn so that the quantizers use all their
 * levels (the defaults, batch-norm statistics 0 and 1 and steps of 1, would quantize nearly
 * every pre-activation to 0 and make the equivalence checks vacuous).
 */
#ifndef SNN_TESTS_ANN2SNN_MODELS_H
#define SNN_TESTS_ANN2SNN_MODELS_H

#include <string.h>

#include "snn.h"
#include "test.h"

static inline snn_model_config tiny_qann(snn_model_kind kind)
{
    snn_model_config c = snn_model_config_default(kind);
    c.neuron = snn_neuron_config_default(SNN_NEURON_QCLIP);
    c.neuron.levels = 4;
    c.time_steps = 1;
    if (kind == SNN_MODEL_SPIKING_CNN) {
        c.width_base = 4, c.hidden = 8;
    } else {
        c.width_base = 2, c.height = 8, c.width = 8;
    }
    return c;
}

static inline bool ends_with(const char *s, const char *tail)
{
    size_t a = strlen(s), b = strlen(tail);
    return a >= b && strcmp(s + a - b, tail) == 0;
}

/* Batch-norm statistics and affine parameters, and the steps, drawn so that the pre-activations
 * spread over the levels; the conv and linear weights keep their initialisation. */
static inline void randomize(snn_module *m, snn_rng *rng)
{
    snn_param_list list = {0};
    CHECK_OK(snn_module_parameters(m, &list));
    for (int i = 0; i < list.count; i++) {
        snn_tensor *t = list.items[i].tensor;
        const char *name = list.items[i].name;
        float lo = 0.0f, hi = 0.0f;
        if (ends_with(name, "running_var")) lo = 0.05f, hi = 0.3f;
        else if (ends_with(name, "running_mean")) lo = -0.3f, hi = 0.3f;
        else if (ends_with(name, "step")) lo = 0.2f, hi = 0.6f;
        else if (t->shape.ndim == 1 && ends_with(name, "weight")) lo = 0.5f, hi = 1.5f;
        else if (t->shape.ndim == 1 && ends_with(name, "bias")) lo = -0.3f, hi = 0.6f;
        else continue;
        CHECK_OK(snn_tensor_uniform_(t, rng, lo, hi));
    }
    snn_param_list_free(&list);
}

/* A tiny QANN of `kind` with randomized parameters, on `device` (the same numbers for a seed
 * on every device: everything is drawn on the host). NULL on failure. */
static inline snn_module *tiny_qann_new(snn_model_kind kind, uint64_t seed, snn_device device)
{
    snn_model_config c = tiny_qann(kind);
    snn_rng rng;
    snn_rng_seed(&rng, seed);
    snn_module *m = snn_model_new(&c, &rng);
    CHECK(m != NULL);
    if (!m) return NULL;
    randomize(m, &rng);
    if (snn_module_to(m, device) != SNN_OK) {
        CHECK(false);
        snn_module_free(m);
        return NULL;
    }
    return m;
}

/* logits (N, classes) of m on the host images x (eval mode, no tape) into out[n]. */
static inline void run_logits(snn_module *m, const float *x, snn_shape shape, snn_device device,
                              float *out, int64_t n)
{
    snn_module_train(m, false);
    snn_no_grad_begin();
    CHECK_OK(snn_step_begin());
    snn_tensor *y = snn_module_forward(m, snn_from_host(shape, x, device));
    CHECK(y && y->numel == n);
    if (y && y->numel == n) CHECK_OK(snn_tensor_copy_to_host(y, out));
    if (!y) fprintf(stderr, "  %s\n", snn_last_error());
    snn_step_end();
    snn_no_grad_end();
}

static inline double max_abs(const float *a, int64_t n)
{
    double m = 0.0;
    for (int64_t i = 0; i < n; i++) m = fmax(m, fabs((double)a[i]));
    return m;
}

static inline double max_diff(const float *a, const float *b, int64_t n)
{
    double m = 0.0;
    for (int64_t i = 0; i < n; i++) m = fmax(m, fabs((double)a[i] - (double)b[i]));
    return m;
}

#endif /* SNN_TESTS_ANN2SNN_MODELS_H */
