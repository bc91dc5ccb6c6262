/*
 * memory_probe.h - measures what one step of a model really takes, to hold it against
 * snn_model_memory_estimate (nn/model_memory.c). Shared by test_memory_estimate (CPU) and
 * test_cuda_memory_estimate (GPU).
 *
 * A probe builds the model on the device, gives the step arena one block far larger than the
 * step (snn_step_reserve), so the step runs in that one block and the arena's high-water mark
 * is exactly the bytes the step allocated there, then runs the step as snn-train (training:
 * zero grad, forward, loss, backward, argmax, optimizer step) or snn-eval (no tape, eval mode)
 * does. The step's memory is that mark plus what the step pool (tensor/step_pool.c) reserved
 * for the gradients of activations: its blocks stay allocated after the step, for the next.
 * With `as_snn_train` the arena gets exactly the estimated step less its gradient pool
 * instead, as snn-train gives it, and on CUDA the drop of the device's free memory over the
 * probe is recorded too: what the run took in all, cuBLAS and the kernels loaded on first use
 * included.
 */
#ifndef SNN_MEMORY_PROBE_H
#define SNN_MEMORY_PROBE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/train_online.h"
#include "app/train_segments.h"
#include "snn.h"
#include "tensor/arena.h"

typedef struct probe_case {
    const char *name;
    snn_model_config config;
    int batch;
    bool training;
    int optimizer_states;   /* 0 SGD, 1 SGD + momentum, 2 Adam */
    const snn_model_options *options; /* the model's (snn_model_set_options); NULL: defaults */
    /* a step through time (snn_model_memory_estimate_through_time): SNN_CARRY_CONSTANT, an
     * online step (app/train_online.c); SNN_CARRY_DIFFERENTIABLE, BPTT in segments of `steps`
     * (app/train_segments.c); SNN_CARRY_NONE (0), a plain step */
    snn_state_carry carry;
    int steps;
    bool traces;            /* OTTT's presynaptic traces (online only) */
} probe_case;

typedef struct probe_result {
    snn_memory_estimate estimate;
    int64_t parameter_count;  /* snn_module_num_parameters */
    double parameters;        /* bytes of every module tensor, buffers included */
    double step;              /* the arena's high-water mark during the step + pool */
    double pool;              /* the step pool's blocks after the step (part of `step`) */
    double owned;             /* live bytes after the step, less the arena and the pool:
                                 parameters, gradients, optimizer state, structs, per-device
                                 buffers */
    double device_used;       /* CUDA, as_snn_train: free memory before - after (else 0) */
} probe_result;

/* A case of `kind` at width `width`, T `T` (the other fields: the model's defaults). A case
 * whose config has first-step encoding and ST-BIF neurons is the network snn_ann_to_snn makes
 * from the QANN of the same kind and sizes (evaluation only). */
static inline probe_case probe_make(const char *name, snn_model_kind kind, int width, int T,
                                    int batch, bool training, int optimizer_states)
{
    probe_case c = {name, snn_model_config_default(kind), batch, training, optimizer_states,
                    NULL, SNN_CARRY_NONE, 0, false};
    c.config.width_base = width;
    c.config.time_steps = T;
    return c;
}

/* Runs the case on `device`; false (message in snn_last_error) when something failed. The
 * caller's arenas and buffers are released first (snn_shutdown) so that the live bytes start
 * from what the caller holds outside snn.c, normally nothing. */
static inline bool probe_run(const probe_case *pc, snn_device device, bool as_snn_train,
                             probe_result *r)
{
    memset(r, 0, sizeof *r);
    const snn_model_config *c = &pc->config;
    const snn_status estimated =
        pc->carry != SNN_CARRY_NONE
            ? snn_model_memory_estimate_through_time(c, pc->options, pc->carry, pc->steps,
                                                     pc->traces, pc->batch, device,
                                                     pc->optimizer_states, &r->estimate)
            : snn_model_memory_estimate_with(c, pc->options, pc->batch, device, pc->training,
                                             pc->optimizer_states, &r->estimate);
    if (estimated != SNN_OK) return false;
    snn_shutdown();
    size_t base = snn_live_bytes(device), free_before = 0, free_after = 0, size = 0;
    bool measure_free = as_snn_train && device == SNN_CUDA &&
                        snn_device_memory(device, &free_before, &size) == SNN_OK;
    snn_rng rng;
    snn_rng_seed(&rng, 1);
    snn_module *model = NULL;
    if (c->encoding == SNN_ENCODING_FIRST_STEP) {
        /* a converted network: its QANN (same kind and sizes, qclip, T = 1), converted */
        snn_model_config q = *c;
        q.neuron = snn_neuron_config_default(SNN_NEURON_QCLIP);
        q.neuron.levels = c->neuron.levels;
        q.neuron.symmetric = c->neuron.symmetric;
        q.time_steps = 1;
        q.encoding = SNN_ENCODING_DIRECT;
        snn_module *qann = snn_model_new(&q, &rng);
        model = qann ? snn_ann_to_snn(qann, c->time_steps) : NULL;
        snn_module_free(qann);
    } else {
        model = snn_model_new(c, &rng);
    }
    bool ok = model && snn_module_to(model, device) == SNN_OK &&
              (!pc->options || snn_model_set_options(model, pc->options) == SNN_OK);
    snn_optimizer *opt = NULL;
    if (ok && pc->training) {
        opt = pc->optimizer_states == 2 ? snn_adam_new(model, 1e-3f, 0.0f, false)
                                        : snn_sgd_new(model, 0.1f, pc->optimizer_states ? 0.9f : 0.0f,
                                                      0.0f, false);
        ok = opt != NULL;
    }
    if (ok) {
        snn_param_list all;
        ok = snn_module_parameters(model, &all) == SNN_OK;
        for (int i = 0; ok && i < all.count; i++) r->parameters += 4.0 * (double)all.items[i].tensor->numel;
        if (ok) snn_param_list_free(&all);
        r->parameter_count = snn_module_num_parameters(model);
    }
    /* one block far larger than the step: the high-water mark is then the step's own bytes */
    if (ok) {
        double block = as_snn_train ? r->estimate.step - r->estimate.gradient_pool
                                    : 2.0 * r->estimate.step + 67108864.0;
        ok = snn_step_reserve(device, (size_t)block) == SNN_OK;
    }
    float *host = NULL, *labels = NULL;
    /* event frames come as (T, N, C, H, W) */
    const bool events = c->encoding == SNN_ENCODING_EVENTS;
    size_t image = (size_t)c->in_channels * (size_t)c->height * (size_t)c->width *
                   (size_t)(events ? c->time_steps : 1);
    if (ok) {
        host = malloc((size_t)pc->batch * image * sizeof *host);
        labels = malloc((size_t)pc->batch * sizeof *labels);
        ok = host && labels;
    }
    for (size_t i = 0; ok && i < (size_t)pc->batch * image; i++) host[i] = snn_rng_uniform(&rng);
    for (int i = 0; ok && i < pc->batch; i++) labels[i] = (float)(i % c->classes);
    if (ok) {
        snn_module_train(model, pc->training);
        if (!pc->training) snn_no_grad_begin();
        snn_step_begin();
        snn_shape xs = events ? SNN_SHAPE(c->time_steps, pc->batch, c->in_channels, c->height,
                                          c->width)
                              : SNN_SHAPE(pc->batch, c->in_channels, c->height, c->width);
        snn_tensor *x = snn_from_host(xs, host, device);
        snn_tensor *y = snn_from_host(SNN_SHAPE(pc->batch), labels, device);
        if (pc->training) snn_module_zero_grad(model);
        snn_tensor *out = NULL, *loss = NULL;
        if (x && y && pc->carry == SNN_CARRY_CONSTANT) { /* backward inside, step by step */
            const train_online_options o = {.seed = 1, .traces = pc->traces};
            ok = train_online_step(model, x, y, 0, &o, &out, &loss) == SNN_OK;
        } else if (x && y && pc->carry == SNN_CARRY_DIFFERENTIABLE) {
            const train_segments_options o = {.segment = pc->steps};
            ok = train_segments_step(model, x, y, &o, &out, &loss) == SNN_OK;
        } else {
            out = x && y ? snn_module_forward(model, x) : NULL;
            if (out) loss = c->spiking_readout ? snn_mse_loss(out, snn_one_hot(y, c->classes))
                                               : snn_cross_entropy(out, y);
            ok = loss != NULL;
            if (ok && pc->training) ok = snn_backward(loss) == SNN_OK;
        }
        if (ok) ok = snn_argmax(out) != NULL;
        if (ok && pc->training) ok = snn_optimizer_step(opt) == SNN_OK;
        snn_synchronize(device);
        snn_step_end();
        if (!pc->training) snn_no_grad_end();
    }
    if (ok) {
        r->pool = (double)snn_step_pool_reserved_bytes(device);
        r->step = (double)snn_step_peak_bytes(device) + r->pool;
        r->owned = (double)(snn_live_bytes(device) - base - snn_arena_reserved_bytes(device)) -
                   r->pool; /* the carried state included (snn_memory_estimate.state) */
        if (measure_free && snn_device_memory(device, &free_after, &size) == SNN_OK)
            r->device_used = free_before > free_after ? (double)(free_before - free_after) : 0.0;
    }
    free(host);
    free(labels);
    snn_optimizer_free(opt);
    snn_module_free(model);
    snn_shutdown();
    return ok;
}

/* "12.3 MiB" */
static inline const char *probe_mib(double bytes, char *buf, size_t size)
{
    snprintf(buf, size, "%.1f MiB", bytes / 1048576.0);
    return buf;
}

#endif /* SNN_MEMORY_PROBE_H */
