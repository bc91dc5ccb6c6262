/*
 * layer_delay.c - DelayLinear: a fully connected layer between spiking layers whose synapses
 * each have a weight and a learnable delay (DCLS-Delays: Hammouamri, Khalfaoui-Hassani,
 * Masquelier, ICLR 2024, https://arxiv.org/abs/2306.17670).
 *
 *   x (T, N, I) -> y (T, N, O),   y[t, n, o] = sum_i w[o, i] x[t - d[o, i], n, i]   (rounded)
 *
 * Training: the delay d[o, i] is real, in [0, D - 1], and the synapse's kernel over the taps
 * k = 0..D-1 is w[o, i] times a normalised Gaussian centred at d[o, i] of width sigma
 * (snn_delay_kernel), applied as a causal temporal convolution (snn_temporal_conv), so d gets
 * a gradient from its neighbouring taps. sigma starts wide (D / 2: every delay feels the whole
 * window) and the caller anneals it toward 0.5 (snn_delay_linear_set_sigma), as the paper
 * does; after each optimizer step snn_delay_linear_clamp keeps d in [0, D - 1].
 * Inference: snn_delay_linear_round rounds every d to an integer and sets sigma to
 * SNN_DELAY_SIGMA_ROUND, so each synapse has exactly one non-zero tap: a pure delay line.
 *
 * Parameters "w" (O, I) ~ U(-1/sqrt(I), 1/sqrt(I)) (PyTorch's Linear) and "d" (O, I) ~
 * U(0, D - 1); both trainable and saved by checkpoints like any parameter. sigma is not a
 * parameter: the training schedule owns it (a rounded layer is remade by calling
 * snn_delay_linear_round after loading). The test: tests/test_delays.c.
 */
#include <math.h>

#include "nn.h"
#include "nn_internal.h"
#include "tensor/error.h"

typedef struct delay_linear_impl {
    int D;          /* taps: delays 0..D-1 steps */
    float sigma;    /* the Gaussian's width in steps */
} delay_linear_impl;

static snn_tensor *delay_linear_forward(snn_module *m, snn_tensor *x)
{
    const delay_linear_impl *impl = m->impl;
    snn_tensor *K = snn_delay_kernel(m->params[0].tensor, m->params[1].tensor, impl->sigma,
                                     impl->D);                  /* (D, O, I) */
    return snn_temporal_conv(x, K);                             /* (T, N, O) */
}

static const snn_module_ops snn_delay_linear_ops = {"DelayLinear", delay_linear_forward, NULL,
                                                    NULL};

snn_module *snn_delay_linear_new(int in_features, int out_features, int max_delay, snn_rng *rng)
{
    if (in_features < 1 || out_features < 1 || max_delay < 1 || !rng)
        return snn_error_null(SNN_ERR_ARGUMENT, "snn_delay_linear_new: bad arguments (expected "
                              "in >= 1, out >= 1, max_delay >= 1 and an rng, got in %d, out %d, "
                              "max_delay %d, rng %s)", in_features, out_features, max_delay,
                              rng ? "set" : "NULL");
    const delay_linear_impl impl = {max_delay, fmaxf(0.5f * (float)max_delay, 0.5f)};
    snn_module *m = snn_module_new_copy(&snn_delay_linear_ops, &impl, sizeof impl);
    if (!m) return NULL;
    const float bound = 1.0f / sqrtf((float)in_features);
    if (snn_module_add_uniform(m, "w", SNN_SHAPE(out_features, in_features), bound, rng) != SNN_OK) {
        snn_module_free(m);
        return NULL;
    }
    snn_tensor *d = snn_tensor_new(SNN_SHAPE(out_features, in_features), SNN_CPU);
    if (!d || snn_tensor_uniform_(d, rng, 0.0f, (float)(max_delay - 1)) != SNN_OK) {
        snn_tensor_free(d);
        snn_module_free(m);
        return NULL;
    }
    snn_module_add_param(m, "d", d, true);
    return m;
}

/* The layer's state, or NULL with an error naming fn when m is not a DelayLinear. */
static delay_linear_impl *delay_impl(const char *fn, const snn_module *m)
{
    if (!m || m->ops != &snn_delay_linear_ops)
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument 'm' (expected a DelayLinear "
                              "module, got %s)", fn, m ? m->ops->kind : "NULL");
    return m->impl;
}

snn_status snn_delay_linear_set_sigma(snn_module *m, float sigma)
{
    delay_linear_impl *impl = delay_impl("snn_delay_linear_set_sigma", m);
    if (!impl) return snn_last_status();
    if (!(sigma > 0.0f) || isinf(sigma))
        return snn_error(SNN_ERR_ARGUMENT, "snn_delay_linear_set_sigma: bad argument 'sigma' "
                         "(expected a finite width > 0, got %g)", (double)sigma);
    impl->sigma = sigma;
    return SNN_OK;
}

float snn_delay_linear_sigma(const snn_module *m)
{
    const delay_linear_impl *impl = delay_impl("snn_delay_linear_sigma", m);
    return impl ? impl->sigma : -1.0f;
}

/* d <- f(d) elementwise, through the host: d is O I floats, far less than one step's
 * activations, so a copy each way costs less than a kernel of its own would be worth (on CUDA
 * it waits for the queued work: call it once per optimizer step, not per layer call). */
static snn_status map_delays(const char *fn, snn_module *m, bool round_them)
{
    delay_linear_impl *impl = delay_impl(fn, m);
    if (!impl) return snn_last_status();
    snn_tensor *d = m->params[1].tensor;
    const size_t bytes = (size_t)d->numel * sizeof(float);
    float *host = snn_alloc(bytes, SNN_CPU);
    if (!host) return snn_last_status();
    snn_status s = snn_tensor_copy_to_host(d, host);
    const float hi = (float)(impl->D - 1);
    for (int64_t i = 0; s == SNN_OK && i < d->numel; i++) {
        float v = fminf(fmaxf(host[i], 0.0f), hi); /* a NaN stays NaN: fmaxf keeps 0 ... */
        if (isnan(host[i])) v = host[i];            /* ... so put it back, for the NaN check */
        host[i] = round_them ? rintf(v) : v;
    }
    if (s == SNN_OK) s = snn_tensor_copy_from_host(d, host);
    snn_free(host, bytes, SNN_CPU);
    return s;
}

snn_status snn_delay_linear_clamp(snn_module *m)
{
    return map_delays("snn_delay_linear_clamp", m, false);
}

snn_status snn_delay_linear_round(snn_module *m)
{
    snn_status s = map_delays("snn_delay_linear_round", m, true);
    if (s != SNN_OK) return s;
    ((delay_linear_impl *)m->impl)->sigma = SNN_DELAY_SIGMA_ROUND;
    return SNN_OK;
}
