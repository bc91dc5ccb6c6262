/*
 * cuda_neuron_parity.h - the harness of the CUDA neuron parity tests (test_cuda_neurons.c: the
 * kernel level and heaviside kernels; test_cuda_neuron_ops.c: the public op and the single-step
 * API): the CPU and CUDA neuron tables, buffers, the bitwise and tolerance comparisons, input
 * generators, and the matrix of 84 neuron configurations each test runs through. What must
 * agree and how closely is stated at the top of test_cuda_neurons.c.
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
#include "test.h"

#define GRAD_RTOL 1e-5 /* dx, dV_init: relative to max(|want|, max |want| of the tensor) */
#define DW_RTOL 1e-4   /* PLIF's dw */

static const snn_neuron_kernels *cpu; /* the reference */
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
static inline float *host_floats(int64_t n) { return must(snn_empty(SNN_SHAPE(n > 0 ? n : 1), SNN_CPU))->data; }

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
            double rel = fabs((double)got[i] - (double)want[i]) / fmax(fabs((double)want[i]), 1e-30);
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
 * term carries the backward's last-bit differences; a sum's error is bounded by the error of
 * its terms times the sum of their magnitudes, which can exceed |dw| by far when the terms
 * cancel. So the check is |got - want| <= DW_RTOL |want| + DW_SCALE_TOL sum |terms|, with
 * that sum recomputed here on the CPU (the same BPTT, summing magnitudes).
 *   h (T, M): the CPU forward's H; gs (T, M) or NULL; gvl (M) or NULL; x (T, M); v0 (M) or NULL */
#define DW_SCALE_TOL 1e-5

static inline double plif_dw_scale(const snn_neuron_params *p, const snn_neuron_dims *d, const float *h,
                            const float *gs, const float *gvl, const float *x, const float *v0,
                            float w)
{
    const int64_t T = d->T, M = snn_neuron_dims_step(d);
    const float k = snn_lif_decay(p, &w), dh_dv = snn_lif_dh_dv(p, k);
    double sum = 0.0;
    for (int64_t i = 0; i < M; i++) {
        float gv = gvl ? gvl[i] : 0.0f;
        for (int64_t t = T - 1; t >= 0; t--) {
            const float gh = snn_lif_grad_h(p, h[t * M + i], gs ? gs[t * M + i] : 0.0f, gv);
            gv = gh * dh_dv;
            float v_prev = v0 ? v0[i] : p->v_reset;
            if (t > 0) {
                const float hp = h[(t - 1) * M + i];
                v_prev = snn_lif_reset(p, hp, snn_lif_fire(p, hp));
            }
            sum += fabs((double)gh * (double)snn_lif_dh_dk(p, x[t * M + i], v_prev));
        }
    }
    return sum * (double)k * (1.0 - (double)k);
}

/* The same, running the CPU forward itself (for the op-level checks, whose H is internal). */
static inline double plif_dw_scale_of(const snn_neuron_config *c, const snn_neuron_dims *d,
                               const float *x, const float *gs, float tau0)
{
    CHECK_OK(snn_step_begin());
    const snn_neuron_params p = snn_neuron_params_from(c);
    const int64_t n = d->T * snn_neuron_dims_step(d);
    float *s = must(snn_empty(SNN_SHAPE(n), SNN_CPU))->data;
    float *h = must(snn_empty(SNN_SHAPE(n), SNN_CPU))->data;
    const float w = -logf(tau0 - 1.0f);
    snn_neuron_kernels_cpu.lif_forward(s, h, NULL, NULL, NULL, x, NULL, NULL, &w, &p, d);
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

/* Input currents that make a fair share of the neurons fire (as tests/test_neurons_grad.c),
 * with ~4% of them set to values that put H exactly on a threshold in the first step (IF and
 * LIF from V = 0, ST-BIF from V = theta/2), where Heaviside(0) = 1 and ST-BIF's H < 0 are
 * decided: a port that compares with > instead of >= fails there. */
static inline void fill_currents(float *x, int64_t n, const snn_neuron_config *c)
{
    const bool stbif = c->kind == SNN_NEURON_STBIF;
    const bool leaky_input = c->kind != SNN_NEURON_IF && c->decay_input;
    for (int64_t i = 0; i < n; i++) {
        const float u = snn_rng_uniform(&rng);
        if (stbif) {
            x[i] = c->theta * 0.6f * snn_rng_normal(&rng);
            if (u < 0.02f) x[i] = 0.5f * c->theta;        /* H = theta */
            else if (u < 0.04f) x[i] = -0.5f * c->theta;  /* H = 0: not below 0 */
        } else {
            x[i] = leaky_input ? 1.2f * snn_rng_normal(&rng) + 1.1f
                               : 0.6f * snn_rng_normal(&rng) + 0.45f;
            x[i] *= c->v_threshold;
            if (u < 0.02f) x[i] = c->v_threshold * (leaky_input ? c->tau : 1.0f); /* H = V_th */
            else if (u < 0.04f) x[i] = 0.0f;
        }
    }
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

/* Calls f for every neuron x surrogate x reset x detach_reset combination (84 of them). */
static inline void for_each_config(config_fn f)
{
    int index = 0;
    /* IF, LIF and PLIF with decay_input on and off */
    const struct { snn_neuron_kind kind; bool decay_input; float tau; const char *name; } lifs[] = {
        {SNN_NEURON_IF, true, 2.0f, "if"},
        {SNN_NEURON_LIF, true, 2.0f, "lif"},
        {SNN_NEURON_LIF, false, 3.0f, "lif(no decay_input)"},
        {SNN_NEURON_PLIF, true, 2.0f, "plif"},
        {SNN_NEURON_PLIF, false, 3.0f, "plif(no decay_input)"},
    };
    for (size_t k = 0; k < sizeof lifs / sizeof lifs[0]; k++)
        for (int sg = 0; sg < SNN_SURROGATE_COUNT; sg++)
            for (int reset = 0; reset < 2; reset++)
                for (int detach = 0; detach < 2; detach++) {
                    snn_neuron_config c = snn_neuron_config_default(lifs[k].kind);
                    c.surrogate = snn_surrogate_default((snn_surrogate_kind)sg);
                    c.reset = reset ? SNN_RESET_SOFT : SNN_RESET_HARD;
                    c.detach_reset = detach != 0;
                    c.decay_input = lifs[k].decay_input;
                    c.tau = lifs[k].tau; /* PLIF: tau0 */
                    /* vary the threshold and the hard-reset target too */
                    if (index % 2) c.v_reset = -0.125f;
                    if (index % 3 == 1) c.v_threshold = 0.75f;
                    snprintf(label, sizeof label, "%s, %s, %s reset%s, v_th %g, v_reset %g",
                             lifs[k].name, snn_surrogate_name(c.surrogate.kind),
                             reset ? "soft" : "hard", detach ? ", detach_reset" : "",
                             (double)c.v_threshold, (double)c.v_reset);
                    f(&c, lifs[k].tau, index++);
                }
    /* ST-BIF: levels 4 and 8, unsigned and symmetric */
    for (int levels = 4; levels <= 8; levels += 4)
        for (int sym = 0; sym < 2; sym++)
            for (int sg = 0; sg < SNN_SURROGATE_COUNT; sg++)
                for (int detach = 0; detach < 2; detach++) {
                    snn_neuron_config c = snn_neuron_config_default(SNN_NEURON_STBIF);
                    c.surrogate = snn_surrogate_default((snn_surrogate_kind)sg);
                    c.detach_reset = detach != 0;
                    c.levels = levels;
                    c.symmetric = sym != 0;
                    c.theta = index % 2 ? 0.5f : 1.0f;
                    snprintf(label, sizeof label, "stbif L=%d %s, %s%s, theta %g", levels,
                             sym ? "symmetric" : "unsigned", snn_surrogate_name(c.surrogate.kind),
                             detach ? ", detach_reset" : "", (double)c.theta);
                    f(&c, 2.0f, index++);
                }
}

static char base_label[400];

/* Finds both tables and seeds the inputs; exits 77 without a GPU. 0 on success. */
static inline int neuron_parity_begin(void)
{
    test_require_cuda();
    cpu = snn_neuron_kernels_for(SNN_CPU);
    gpu = snn_neuron_kernels_for(SNN_CUDA);
    CHECK(cpu != NULL && gpu != NULL);
    if (!cpu || !gpu) {
        fprintf(stderr, "no CUDA neuron kernel table: %s\n", snn_last_error());
        return 1;
    }
    CHECK(gpu->lif_forward && gpu->lif_backward && gpu->stbif_forward && gpu->stbif_backward &&
          gpu->heaviside_forward && gpu->heaviside_backward);
    snn_rng_seed(&rng, 20261122);
    return 0;
}

#endif /* SNN_CUDA_NEURON_PARITY_H */
