/*
 * cuda_neuron_parity.h - the harness of the CUDA neuron tests that run the public ops on both
 * devices (test_cuda_neuron_ops.c: snn_neuron_multistep, the single-step API, snn_heaviside;
 * test_cuda_activity_penalty.c; test_cuda_ann2snn.c) and of test_cuda_neurons.c: the
 * reference and CUDA neuron tables, buffers, the bitwise and tolerance comparisons, input
 * generators, and the 84 neuron configurations (neuron_test_inputs.h) each test runs through.
 * The CUDA neuron kernels themselves are checked against the reference kernels by the parity
 * harness, tests/test_cuda_backend_ops.c.
 */
#ifndef SNN_CUDA_NEURON_PARITY_H
#define SNN_CUDA_NEURON_PARITY_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "autograd/autograd.h"
#include "kernels/neuron_kernels.h"
#include "kernels/neuron_math.h"
#include "neurons/neurons.h"
#include "kernels/kernels.h"
#include "kernels/ref/neuron_ref.h"
#include "neuron_test_inputs.h"
#include "test.h"

#define GRAD_RTOL 1e-5 /* dx, dV_init: relative to max(|want|, max |want| of the tensor) */
#define DW_RTOL 1e-4   /* PLIF's dw */

static const snn_neuron_kernels *ref; /* the reference (kernels/ref/), on the host */
static const snn_neuron_kernels *gpu; /* under test */
static snn_rng rng;
static char label[400];               /* the case being run, for failure messages */
static int cases;

/* ---------------------------------------------------------------------------------------------
 * Buffers: STEP tensors, released by the snn_step_end() that closes each case.
 * ------------------------------------------------------------------------------------------- */

static inline snn_tensor *must(snn_tensor *t)
{
    if (!t) {
        fprintf(stderr, "test_cuda_neurons: %s\n", snn_last_error());
        exit(EXIT_FAILURE);
    }
    return t;
}

/* n host floats (CPU step tensor) */
static inline float *host_floats(int64_t n)
{
    return must(snn_empty(SNN_SHAPE(n > 0 ? n : 1), SNN_CPU))->data;
}

/* a device copy of n host floats */
static inline float *dev_from(const float *host, int64_t n)
{
    return must(snn_from_host(SNN_SHAPE(n > 0 ? n : 1), host, SNN_CUDA))->data;
}

/* n device floats, all `value` (NaN: a forward output that must be overwritten) */
static inline float *dev_full(int64_t n, float value)
{
    return must(snn_full(SNN_SHAPE(n > 0 ? n : 1), value, SNN_CUDA))->data;
}

/* a host copy of n device floats (synchronises) */
static inline float *download(const float *dev, int64_t n)
{
    float *host = host_floats(n);
    snn_synchronize(SNN_CUDA);
    snn_kernels_for(SNN_CUDA)->copy(host, dev, (size_t)n * sizeof(float),
                                    SNN_COPY_DEVICE_TO_HOST);
    snn_synchronize(SNN_CUDA);
    return host;
}

static inline float *copy_of(const float *src, int64_t n)
{
    float *p = host_floats(n);
    memcpy(p, src, (size_t)n * sizeof(float));
    return p;
}

/* ---------------------------------------------------------------------------------------------
 * Comparisons
 * ------------------------------------------------------------------------------------------- */

/* Bit-for-bit: counts the elements whose bits differ (so -0 != +0 and NaN != anything). */
static inline void check_bits(const char *what, const float *got, const float *want, int64_t n)
{
    int64_t bad = 0, first = -1;
    double worst = 0.0;
    for (int64_t i = 0; i < n; i++) {
        if (memcmp(&got[i], &want[i], sizeof(float)) != 0) {
            if (first < 0) first = i;
            bad++;
            const double diff = fabs((double)got[i] - (double)want[i]);
            const double rel = diff / fmax(fabs((double)want[i]), 1e-30);
            if (!(rel <= worst)) worst = rel;
        }
    }
    test_checks++;
    if (bad) {
        test_failures++;
        fprintf(stderr, "%s: %s differs (bitwise) in %lld of %lld elements, first [%lld]: %.9g "
                "vs %.9g (worst rel. err %.3g)\n", label, what, (long long)bad, (long long)n,
                (long long)first, (double)got[first], (double)want[first], worst);
    }
}

/* |got - want| <= rtol (|want| + max|want|) for every element. */
static inline void check_close(const char *what, const float *got, const float *want, int64_t n,
                        double rtol)
{
    double scale = 0.0;
    for (int64_t i = 0; i < n; i++) scale = fmax(scale, fabs((double)want[i]));
    long where = 0;
    const double worst = test_worst_ratio(got, want, (long)n, rtol * scale + 1e-30, rtol, &where);
    test_checks++;
    if (!(worst <= 1.0)) {
        test_failures++;
        fprintf(stderr, "%s: %s beyond %g relative at [%ld]: %.9g vs %.9g (worst ratio %.3g, "
                "scale %.3g)\n", label, what, rtol, where, (double)got[where],
                (double)want[where], worst, scale);
    }
}

/* PLIF's dw is a sum of n T terms k (1 - k) G_H dH/dk in another order on each side, and each
 * term carries the backward's last-bit differences; so the check is
 * |got - want| <= DW_RTOL |want| + DW_SCALE_TOL sum |terms| (plif_dw_scale,
 * neuron_test_inputs.h). */
#define DW_SCALE_TOL 1e-5

/* plif_dw_scale, running the reference forward for H (the op-level checks' H is internal). */
static inline double plif_dw_scale_of(const snn_neuron_config *c, const snn_neuron_dims *d,
                               const float *x, const float *gs, float tau0)
{
    CHECK_OK(snn_step_begin());
    const snn_neuron_params p = snn_neuron_params_from(c);
    const int64_t n = d->T * snn_neuron_dims_step(d);
    float *s = must(snn_empty(SNN_SHAPE(n), SNN_CPU))->data;
    float *h = must(snn_empty(SNN_SHAPE(n), SNN_CPU))->data;
    const float w = -logf(tau0 - 1.0f);
    snn_lif_forward_ref(s, h, NULL, NULL, NULL, x, NULL, NULL, &w, &p, d);
    const double scale = plif_dw_scale(&p, d, h, gs, NULL, x, NULL, w);
    snn_step_end();
    return scale;
}

static inline void check_dw(float got, float want, double scale)
{
    test_checks++;
    const double err = fabs((double)got - (double)want);
    if (!(err <= DW_RTOL * fabs((double)want) + DW_SCALE_TOL * scale)) {
        test_failures++;
        fprintf(stderr, "%s: dw %.9g vs %.9g (sum of |terms| %.6g)\n", label, (double)got,
                (double)want, scale);
    }
}

/* ---------------------------------------------------------------------------------------------
 * Inputs
 * ------------------------------------------------------------------------------------------- */

/* Input currents that make a fair share of the neurons fire (neuron_test_inputs.h). */
static inline void fill_currents(float *x, int64_t n, const snn_neuron_config *c)
{
    neuron_test_currents(x, n, c, &rng);
}

static inline void fill_uniform(float *p, int64_t n, float lo, float hi)
{
    for (int64_t i = 0; i < n; i++) p[i] = lo + (hi - lo) * snn_rng_uniform(&rng);
}

static inline void fill_normal(float *p, int64_t n)
{
    for (int64_t i = 0; i < n; i++) p[i] = snn_rng_normal(&rng);
}

/* PLIF's w for tau0, as snn_plif_param_new makes it. */
static inline float plif_w(float tau0) { return -logf(tau0 - 1.0f); }

/* ---------------------------------------------------------------------------------------------
 * The matrix of configs
 * ------------------------------------------------------------------------------------------- */

typedef void (*config_fn)(const snn_neuron_config *c, float tau0, int index);

/* Calls f for every neuron configuration of neuron_test_configs (84), with `label` set to its
 * name and tau0 its tau (PLIF's initial tau). */
static inline void for_each_config(config_fn f)
{
    snn_neuron_config configs[NEURON_TEST_CONFIGS];
    const int count = neuron_test_configs(configs);
    for (int i = 0; i < count; i++) {
        neuron_test_name(label, sizeof label, &configs[i]);
        f(&configs[i], configs[i].tau, i);
    }
}

static char base_label[400];

/* Finds both tables and seeds the inputs; exits 77 without a GPU. 0 on success. */
static inline int neuron_parity_begin(void)
{
    test_require_cuda();
    ref = &snn_neuron_kernels_ref;
    gpu = snn_neuron_kernels_for(SNN_CUDA);
    CHECK(gpu != NULL);
    if (!gpu) {
        fprintf(stderr, "no CUDA neuron kernel table: %s\n", snn_last_error());
        return 1;
    }
    CHECK(gpu->lif_forward && gpu->lif_backward && gpu->stbif_forward && gpu->stbif_backward &&
          gpu->heaviside_forward && gpu->heaviside_backward);
    snn_rng_seed(&rng, 20261122);
    return 0;
}

#endif /* SNN_CUDA_NEURON_PARITY_H */
