/*
 * ema.c - an exponential moving average of a model's weights, evaluated in place of the weights
 * themselves (Polyak averaging; B. Polyak, A. Juditsky, SIAM J. Control Optim. 1992, and
 * TensorFlow's tf.train.ExponentialMovingAverage, whose warm-up this follows).
 *
 * Why average: late in training, SGD and Adam keep the weights moving around a minimum at the
 * scale of the learning rate, and each step's weights carry the noise of its batch. The
 * average over the last few hundred steps sits closer to the centre of that region; evaluated,
 * it usually scores as well as or better than the last weights, more steadily from epoch to
 * epoch, at the cost of one more copy of the model and one pass over it per step.
 *
 * After each optimizer step, for every tensor w of the model and its shadow s:
 *
 *     d = min(decay, (1 + step) / (10 + step))        step = optimizer steps taken, >= 1
 *     s = d s + (1 - d) w                              computed as s += (1 - d)(w - s)
 *
 * The warm-up term (1 + step) / (10 + step) is TensorFlow's num_updates rule: 2/11 = 0.18 at
 * the first update, 0.5 at step 8, 0.9 at step 80, 0.99 at step 890, so it takes over from
 * `decay` (0.999: after ~9000 steps) only once the average has seen enough steps. Without
 * it the shadow starts as the random initialisation and keeps weight decay^step of it: with
 * decay 0.999, 37% after 1000 steps, so a short run would evaluate a mostly untrained net. With
 * it that share is prod_k d_k = 10! (step + 1)! / (step + 10)!: 6e-5 after 10 steps.
 *
 * Every parameter AND buffer is averaged: the batch-norm running mean and variance describe the
 * activations of the weights that produced them; averaging them with the same rule gives the
 * averaged weights statistics from the same span of training (PyTorch's AveragedModel with
 * use_buffers=True, timm's ModelEmaV2 do the same).
 *
 * Where the average lives: in a second model, built with snn_model_new from the model's own
 * configuration and owned by the snn_ema. Its tensors are the shadows, so evaluating the
 * average is running that model (snn_ema_model), with no swapping of data pointers in and out
 * of the trained model (which a failure half-way would leave mixed), and a checkpoint stores
 * it as named tensors ("ema.<name>", snn_ema_state). The update is the kernel table's `lerp`
 * (kernels/cpu/elementwise.c, .cu): one pass per tensor, 8 B read and 4 B written per element, on
 * the model's device, without a host synchronisation.
 *
 * Test: tests/test_ema.c (ctest -R '^ema$'); CUDA parity: tests/test_cuda_ema.c.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "nn.h"
#include "tensor/error.h"
#include "kernels/kernels.h"

struct snn_ema {
    float decay;
    snn_module *model;        /* the averaged model: its tensors are the shadows (owned) */
};

/* Checks that `a` (the model) and `b` (the average) hold tensors of the same names, sizes and
 * device, in the same order. */
static snn_status check_pair(const char *fn, const snn_param_list *a, const snn_param_list *b)
{
    if (a->count != b->count)
        return snn_error(SNN_ERR_STATE, "%s: the model has %d parameters and buffers, its average "
                         "%d; hint: make the average from this model, after snn_module_to()", fn,
                         a->count, b->count);
    for (int i = 0; i < a->count; i++) {
        const snn_tensor *w = a->items[i].tensor, *s = b->items[i].tensor;
        if (strcmp(a->items[i].name, b->items[i].name) != 0 || w->numel != s->numel)
            return snn_error(SNN_ERR_STATE, "%s: the model's tensor %d is '%s' (%lld elements), "
                             "the average's '%s' (%lld); hint: the model must be the one the "
                             "average was made from", fn, i, a->items[i].name,
                             (long long)w->numel, b->items[i].name, (long long)s->numel);
        if (w->device != s->device)
            return snn_error(SNN_ERR_STATE, "%s: '%s' is on %s but its average is on %s; hint: "
                             "make the average after snn_module_to()", fn, a->items[i].name,
                             snn_device_name(w->device), snn_device_name(s->device));
    }
    return SNN_OK;
}

snn_ema *snn_ema_new(snn_module *model, float decay)
{
    const char *fn = "snn_ema_new";
    if (!(decay > 0.0f && decay < 1.0f)) /* also refuses NaN */
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument 'decay' (expected 0 < decay < "
                              "1, got %g); hint: 0.999 averages over about the last 1000 steps",
                              fn, (double)decay);
    if (!model) return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument 'model' (got NULL)", fn);
    const snn_model_config *config = snn_model_config_of(model);
    if (!config)
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument 'model' (expected a model made "
                              "by snn_model_new, got a module of kind '%s')", fn,
                              model->ops && model->ops->kind ? model->ops->kind : "?");
    snn_param_list from = {0}, to = {0};
    if (snn_module_parameters(model, &from) != SNN_OK) return NULL;
    if (from.count == 0) {
        snn_param_list_free(&from);
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument 'model' (it has no parameters "
                              "to average)", fn);
    }
    snn_ema *ema = snn_alloc(sizeof *ema, SNN_CPU);
    if (!ema) {
        snn_param_list_free(&from);
        return snn_error_null(SNN_ERR_MEMORY, "%s: out of host memory", fn);
    }
    ema->decay = decay;
    /* the same architecture; its initial weights are overwritten by the copy below */
    snn_rng rng;
    snn_rng_seed(&rng, config->seed);
    ema->model = snn_model_new(config, &rng);
    snn_status s = ema->model ? SNN_OK : snn_last_status();
    if (s == SNN_OK) s = snn_module_to(ema->model, from.items[0].tensor->device);
    if (s == SNN_OK) s = snn_module_parameters(ema->model, &to);
    if (s == SNN_OK) s = check_pair(fn, &from, &to);
    /* the average starts as the model (TensorFlow's shadow variables start as their variable) */
    for (int i = 0; s == SNN_OK && i < from.count; i++)
        s = snn_tensor_copy(to.items[i].tensor, from.items[i].tensor);
    snn_param_list_free(&to);
    snn_param_list_free(&from);
    if (s != SNN_OK) {
        snn_ema_free(ema);
        return NULL;
    }
    snn_model_set_rng_state(ema->model, snn_model_rng_state(model));
    snn_module_train(ema->model, false); /* it is only ever evaluated */
    return ema;
}

float snn_ema_decay_at(const snn_ema *ema, int64_t step)
{
    if (!ema) return NAN;
    if (step < 0) step = 0;
    /* in double: (1 + step) / (10 + step) is exact enough for any step a run reaches */
    const double warm = (1.0 + (double)step) / (10.0 + (double)step);
    return (float)fmin((double)ema->decay, warm);
}

snn_status snn_ema_update(snn_ema *ema, snn_module *model, int64_t step)
{
    const char *fn = "snn_ema_update";
    if (!ema || !model)
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad argument '%s' (got NULL)", fn,
                         !ema ? "ema" : "model");
    if (step < 1)
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad argument 'step' (expected the optimizer steps "
                         "taken, >= 1 after a step, got %lld)", fn, (long long)step);
    snn_param_list from = {0}, to = {0};
    snn_status s = snn_module_parameters(model, &from);
    if (s == SNN_OK) s = snn_module_parameters(ema->model, &to);
    /* everything is checked before any shadow moves: a bad pair leaves the average as it was */
    if (s == SNN_OK) s = check_pair(fn, &from, &to);
    const snn_kernels *k = NULL;
    if (s == SNN_OK && !(k = snn_kernels_or_error(fn, from.items[0].tensor->device)))
        s = snn_last_status();
    if (s == SNN_OK && !k->lerp)
        s = snn_error(SNN_ERR_UNSUPPORTED, "%s: the %s backend has no kernel 'lerp'", fn, k->name);
    if (s == SNN_OK) {
        /* 1 - d in double, then rounded once: s += (1 - d)(w - s) */
        const float weight = (float)(1.0 - (double)snn_ema_decay_at(ema, step));
        for (int i = 0; i < from.count; i++)
            k->lerp(to.items[i].tensor->data, from.items[i].tensor->data, weight,
                    from.items[i].tensor->numel);
    }
    snn_param_list_free(&to);
    snn_param_list_free(&from);
    return s;
}

snn_module *snn_ema_model(snn_ema *ema) { return ema ? ema->model : NULL; }

float snn_ema_decay(const snn_ema *ema) { return ema ? ema->decay : NAN; }

snn_status snn_ema_state(snn_ema *ema, snn_param_list *out)
{
    const char *fn = "snn_ema_state";
    if (!out) return snn_error(SNN_ERR_ARGUMENT, "%s: bad argument 'out' (got NULL)", fn);
    out->items = NULL;
    out->count = 0;
    if (!ema) return snn_error(SNN_ERR_ARGUMENT, "%s: bad argument 'ema' (got NULL)", fn);
    if (snn_module_parameters(ema->model, out) != SNN_OK) return snn_last_status();
    for (int i = 0; i < out->count; i++) {
        snn_named_param *p = &out->items[i];
        char name[sizeof p->name];
        int n = snprintf(name, sizeof name, "%s%s", SNN_EMA_PREFIX, p->name);
        if (n < 0 || (size_t)n >= sizeof name) {
            snn_status s = snn_error(SNN_ERR_ARGUMENT, "%s: the name '%s%s' is longer than %zu "
                                     "characters", fn, SNN_EMA_PREFIX, p->name, sizeof name - 1);
            snn_param_list_free(out);
            return s;
        }
        memcpy(p->name, name, sizeof name);
        p->trainable = false;
    }
    return SNN_OK;
}

void snn_ema_free(snn_ema *ema)
{
    if (!ema) return;
    snn_module_free(ema->model);
    snn_free(ema, sizeof *ema, SNN_CPU);
}
