/*
 * neuron_test_inputs.h - what the neuron parity tests share (the harness's
 * backend_ops_neuron*.h, cuda_neuron_parity.h): the 84 neuron configurations, their names,
 * input currents that make a fair share of neurons fire, and the scale of the tolerance of
 * PLIF's dw.
 */
#ifndef SNN_NEURON_TEST_INPUTS_H
#define SNN_NEURON_TEST_INPUTS_H

#include <math.h>
#include <stdio.h>

#include "kernels/neuron_kernels.h"
#include "kernels/neuron_math.h"
#include "neurons/neurons.h"

#define NEURON_TEST_CONFIGS 84

/* Every config: five IF / LIF / PLIF forms (LIF and PLIF with decay_input on and off; PLIF's
 * tau is its tau0) x 3 surrogates x hard and soft reset x detach_reset, with thresholds and
 * reset targets other than 1 and 0 on some; then ST-BIF's 4 and 8 levels x unsigned and
 * symmetric x 3 surrogates x detach_reset, theta 1 or 0.5. Returns the count. */
static inline int neuron_test_configs(snn_neuron_config out[NEURON_TEST_CONFIGS])
{
    const struct { snn_neuron_kind kind; bool decay_input; float tau; } lifs[] = {
        {SNN_NEURON_IF, true, 2.0f}, {SNN_NEURON_LIF, true, 2.0f}, {SNN_NEURON_LIF, false, 3.0f},
        {SNN_NEURON_PLIF, true, 2.0f}, {SNN_NEURON_PLIF, false, 3.0f}};
    int n = 0;
    for (size_t k = 0; k < sizeof lifs / sizeof lifs[0]; k++)
        for (int sg = 0; sg < SNN_SURROGATE_COUNT; sg++)
            for (int reset = 0; reset < 2; reset++)
                for (int detach = 0; detach < 2; detach++) {
                    snn_neuron_config c = snn_neuron_config_default(lifs[k].kind);
                    c.surrogate = snn_surrogate_default((snn_surrogate_kind)sg);
                    c.reset = reset ? SNN_RESET_SOFT : SNN_RESET_HARD;
                    c.detach_reset = detach != 0;
                    c.decay_input = lifs[k].decay_input;
                    c.tau = lifs[k].tau;
                    if (n % 2) c.v_reset = -0.125f;
                    if (n % 3 == 1) c.v_threshold = 0.75f;
                    out[n++] = c;
                }
    for (int levels = 4; levels <= 8; levels += 4)
        for (int sym = 0; sym < 2; sym++)
            for (int sg = 0; sg < SNN_SURROGATE_COUNT; sg++)
                for (int detach = 0; detach < 2; detach++) {
                    snn_neuron_config c = snn_neuron_config_default(SNN_NEURON_STBIF);
                    c.surrogate = snn_surrogate_default((snn_surrogate_kind)sg);
                    c.detach_reset = detach != 0;
                    c.levels = levels;
                    c.symmetric = sym != 0;
                    c.theta = n % 2 ? 0.5f : 1.0f;
                    out[n++] = c;
                }
    return n;
}

/* A config's name: "lif(no decay_input) atan soft detach v_th=0.75 v_reset=-0.125" */
static inline void neuron_test_name(char *out, size_t size, const snn_neuron_config *c)
{
    if (c->kind == SNN_NEURON_STBIF) {
        snprintf(out, size, "stbif L=%d%s %s%s theta=%g", c->levels,
                 c->symmetric ? " symmetric" : "", snn_surrogate_name(c->surrogate.kind),
                 c->detach_reset ? " detach" : "", (double)c->theta);
        return;
    }
    snprintf(out, size, "%s%s %s %s%s v_th=%g v_reset=%g", snn_neuron_kind_name(c->kind),
             c->kind != SNN_NEURON_IF && !c->decay_input ? "(no decay_input)" : "",
             snn_surrogate_name(c->surrogate.kind), c->reset == SNN_RESET_SOFT ? "soft" : "hard",
             c->detach_reset ? " detach" : "", (double)c->v_threshold, (double)c->v_reset);
}

/* Input currents x (n) that make a fair share of the neurons fire, with ~4% of them putting H
 * exactly on a threshold in the first step (IF and LIF from V = 0, ST-BIF from V = theta/2),
 * where Heaviside(0) = 1 and ST-BIF's H < 0 are decided: a port comparing with > instead of
 * >= fails there. */
static inline void neuron_test_currents(float *x, int64_t n, const snn_neuron_config *c,
                                        snn_rng *rng)
{
    const bool stbif = c->kind == SNN_NEURON_STBIF;
    const bool leaky_input = c->kind != SNN_NEURON_IF && c->decay_input;
    for (int64_t i = 0; i < n; i++) {
        const float u = snn_rng_uniform(rng);
        if (stbif) {
            x[i] = c->theta * 0.6f * snn_rng_normal(rng);
            if (u < 0.02f) x[i] = 0.5f * c->theta;        /* H = theta */
            else if (u < 0.04f) x[i] = -0.5f * c->theta;  /* H = 0: not below 0 */
        } else {
            x[i] = c->v_threshold * (leaky_input ? 1.2f * snn_rng_normal(rng) + 1.1f
                                                 : 0.6f * snn_rng_normal(rng) + 0.45f);
            if (u < 0.02f) x[i] = c->v_threshold * (leaky_input ? c->tau : 1.0f); /* H = V_th */
            else if (u < 0.04f) x[i] = 0.0f;
        }
    }
}

/* PLIF's dw is a sum over every element and step of G_H dH/dk (times k (1 - k)), whose terms
 * cancel: its error is bounded by the rounding of the terms times the sum of their
 * magnitudes, which can exceed |dw| by far. That sum, the same BPTT adding magnitudes, is the
 * scale of dw's tolerance.
 *   h (T, M): the forward's H; gs (T, M) or NULL; gvl (M) or NULL; x (T, M); v0 (M) or NULL */
static inline double plif_dw_scale(const snn_neuron_params *p, const snn_neuron_dims *d,
                                   const float *h, const float *gs, const float *gvl,
                                   const float *x, const float *v0, float w)
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

#endif /* SNN_NEURON_TEST_INPUTS_H */
