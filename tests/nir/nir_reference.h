/*
 * nir_reference.h - a NIR graph simulated from NIR's equations in plain loops and double
 * precision, the reference the NIR tests hold snn.c's executor to (tests/test_nir_fixtures.c,
 * tests/test_nir_exec.c). It shares nothing with nir/nir_run.c but the graph reader.
 *
 * Each node, per sample and element, forward Euler at step dt (v: membrane, i: synaptic current,
 * x: the node's input, the sum of its incoming edges):
 *   LIF      v += dt / tau (v_leak - v + r x);  z = v > v_threshold;  v = v_reset where z
 *   IF       v += dt r x;                      z = v > v_threshold;  v = v_reset where z
 *   LI       v += dt / tau (v_leak - v + r x)                               (output v)
 *   I        v += dt r x                                                    (output v)
 *   CubaLIF  i += dt / tau_syn (w_in x - i);  v += dt / tau_mem (v_leak - v + r i); z; reset
 *   CubaLI   the same without firing                                        (output v)
 *   Delay    y[t] = x[t - delay / dt], 0 before;   Scale  y = s x;   Threshold  y = x > theta
 *   Affine   y = W x + b;  Linear  y = W x;  Conv2d  cross-correlation, zero padding
 *   SumPool2d, AvgPool2d  sum, mean over each window;  Flatten  the same values
 * Membranes start at v_leak (LIF, LI, Cuba*), v_reset (IF) or 0 (I); currents at 0.
 * The caller gives the order the nodes run in; an edge whose source does not run before its
 * destination in that order (a node's edge to itself included) carries the value of step t-1.
 */
#ifndef SNN_TEST_NIR_REFERENCE_H
#define SNN_TEST_NIR_REFERENCE_H

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nir/nir_graph.h"

typedef struct ref_node {
    nir_node *node;
    int ndim;
    int64_t dim[4];
    int64_t numel;            /* per sample */
    double *out, *prev;       /* (N, numel) at this step and the last */
    double *v, *i;            /* (N, numel) states */
    double *history;          /* Delay: (T, N, numel) every input so far */
} ref_node;

/* A float parameter's value at element k (or its only value), `fallback` when absent. */
static inline double ref_param(nir_node *n, const char *name, int64_t k, double fallback)
{
    nir_array *a = nir_find_array(n, name);
    if (!a) return fallback;
    return (double)a->f[a->numel == 1 ? 0 : k];
}

static inline int64_t ref_int(nir_node *n, const char *name, int index, int64_t fallback)
{
    nir_array *a = nir_find_array(n, name);
    if (!a || !a->is_int) return fallback;
    return a->i[a->numel == 1 ? 0 : index];
}

/* out (C_out, H', W') of in (C_in, H, W): cross-correlation of one sample */
static inline void ref_conv(nir_node *n, const ref_node *src, const double *in, ref_node *r,
                            double *out)
{
    nir_array *w = nir_find_array(n, "weight");
    const int64_t co = w->dim[0], ci = w->dim[1], k = w->dim[2];
    const int64_t s = ref_int(n, "stride", 0, 1);
    nir_array *pa = nir_find_array(n, "padding");
    int64_t p = pa && pa->is_text ? (strcmp(pa->text, "same") == 0 ? (k - 1) / 2 : 0)
                                  : ref_int(n, "padding", 0, 0);
    const int64_t H = src->dim[1], W = src->dim[2], Ho = r->dim[1], Wo = r->dim[2];
    for (int64_t o = 0; o < co; o++)
        for (int64_t y = 0; y < Ho; y++)
            for (int64_t x = 0; x < Wo; x++) {
                double acc = ref_param(n, "bias", o, 0.0);
                for (int64_t c = 0; c < ci; c++)
                    for (int64_t a = 0; a < k; a++)
                        for (int64_t b = 0; b < k; b++) {
                            int64_t iy = y * s - p + a, ix = x * s - p + b;
                            if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
                            acc += (double)w->f[((o * ci + c) * k + a) * k + b] *
                                   in[(c * H + iy) * W + ix];
                        }
                out[(o * Ho + y) * Wo + x] = acc;
            }
}

/* One node's step for sample n: in (numel of its input) -> r->out[n]. */
static inline void ref_step(ref_node *r, const ref_node *src, const double *in, int n, int t,
                            int N, double dt)
{
    nir_node *node = r->node;
    const char *type = node->type;
    const int64_t m = r->numel;
    double *out = r->out + n * m, *v = r->v + n * m, *cur = r->i + n * m;
    if (strcmp(type, "Affine") == 0 || strcmp(type, "Linear") == 0) {
        nir_array *w = nir_find_array(node, "weight");
        for (int64_t o = 0; o < w->dim[0]; o++) {
            double acc = ref_param(node, "bias", o, 0.0);
            for (int64_t k = 0; k < w->dim[1]; k++) acc += (double)w->f[o * w->dim[1] + k] * in[k];
            out[o] = acc;
        }
    } else if (strcmp(type, "Conv2d") == 0) {
        ref_conv(node, src, in, r, out);
    } else if (strcmp(type, "SumPool2d") == 0 || strcmp(type, "AvgPool2d") == 0) {
        const int64_t k = ref_int(node, "kernel_size", 0, 1), s = ref_int(node, "stride", 0, k);
        const int64_t H = src->dim[1], W = src->dim[2];
        for (int64_t c = 0; c < r->dim[0]; c++)
            for (int64_t y = 0; y < r->dim[1]; y++)
                for (int64_t x = 0; x < r->dim[2]; x++) {
                    double acc = 0.0;
                    for (int64_t a = 0; a < k; a++)
                        for (int64_t b = 0; b < k; b++)
                            acc += in[(c * H + y * s + a) * W + x * s + b];
                    out[(c * r->dim[1] + y) * r->dim[2] + x] =
                        type[0] == 'S' ? acc : acc / (double)(k * k);
                }
    } else if (strcmp(type, "Delay") == 0) {
        double *h = r->history + ((int64_t)t * N + n) * m;
        memcpy(h, in, (size_t)m * sizeof *h);
        for (int64_t k = 0; k < m; k++) {
            int64_t d = (int64_t)floor(ref_param(node, "delay", k, 0.0) / dt + 0.5);
            out[k] = t - d >= 0 ? r->history[((t - d) * N + n) * m + k] : 0.0;
        }
    } else {
        const bool lif = strcmp(type, "LIF") == 0, iff = strcmp(type, "IF") == 0;
        const bool li = strcmp(type, "LI") == 0, integ = strcmp(type, "I") == 0;
        const bool cuba = strncmp(type, "Cuba", 4) == 0;
        const bool fires = lif || iff || strcmp(type, "CubaLIF") == 0;
        for (int64_t k = 0; k < m; k++) {
            const double x = in[k];
            if (strcmp(type, "Input") == 0 || strcmp(type, "Output") == 0 ||
                strcmp(type, "Flatten") == 0) {
                out[k] = x;
            } else if (strcmp(type, "Scale") == 0) {
                out[k] = ref_param(node, "scale", k, 1.0) * x;
            } else if (strcmp(type, "Threshold") == 0) {
                out[k] = x > ref_param(node, "threshold", k, 0.0) ? 1.0 : 0.0;
            } else if (lif || li) {
                v[k] += dt / ref_param(node, "tau", k, 1.0) *
                        (ref_param(node, "v_leak", k, 0.0) - v[k] +
                         ref_param(node, "r", k, 1.0) * x);
            } else if (iff || integ) {
                v[k] += dt * ref_param(node, "r", k, 1.0) * x;
            } else if (cuba) {
                cur[k] += dt / ref_param(node, "tau_syn", k, 1.0) *
                          (ref_param(node, "w_in", k, 1.0) * x - cur[k]);
                v[k] += dt / ref_param(node, "tau_mem", k, 1.0) *
                        (ref_param(node, "v_leak", k, 0.0) - v[k] +
                         ref_param(node, "r", k, 1.0) * cur[k]);
            }
            if (!(lif || li || iff || integ || cuba)) continue;
            out[k] = v[k];
            if (fires) {
                bool z = v[k] > ref_param(node, "v_threshold", k, 1.0);
                out[k] = z ? 1.0 : 0.0;
                if (z) v[k] = ref_param(node, "v_reset", k, 0.0);
            }
        }
    }
}

/* Simulates g over T steps for N samples: x (T, N, in...) when sequence, else (N, in...) at every
 * step; y (T, N, out...) receives the Output node's values. `order` lists every node's name in
 * the order they run. 0, or -1 with a message (a node it does not know, a bad order). */
static inline int ref_run(nir_graph *g, const char *const *order, int count, double dt,
                          const float *x, bool sequence, int T, int N, double *y)
{
    if (count != g->n_nodes) {
        fprintf(stderr, "ref_run: %d names for %d nodes\n", count, g->n_nodes);
        return -1;
    }
    ref_node *r = calloc((size_t)count, sizeof *r);
    int *position = calloc((size_t)count, sizeof *position); /* node index -> place in order */
    int status = 0;
    for (int k = 0; k < count && status == 0; k++) {
        nir_node *n = nir_find_node(g, order[k]);
        if (!n) {
            fprintf(stderr, "ref_run: no node '%s'\n", order[k]);
            status = -1;
            break;
        }
        r[k].node = n;
        position[n - g->nodes] = k;
    }
    /* shapes, in order: a node's first input that runs before it gives its input shape */
    for (int k = 0; k < count && status == 0; k++) {
        ref_node *me = &r[k];
        const ref_node *src = NULL;
        for (int e = 0; e < g->n_edges && !src; e++)
            if (strcmp(g->edges[e].dst, me->node->name) == 0) {
                int p = position[nir_find_node(g, g->edges[e].src) - g->nodes];
                if (p < k) src = &r[p];
            }
        const char *type = me->node->type;
        if (strcmp(type, "Input") == 0) {
            nir_array *s = nir_find_array(me->node, "shape");
            me->ndim = (int)s->numel;
            for (int d = 0; d < me->ndim; d++) me->dim[d] = s->i[d];
        } else if (!src) {
            fprintf(stderr, "ref_run: '%s' runs before all its inputs\n", me->node->name);
            status = -1;
            break;
        } else if (strcmp(type, "Affine") == 0 || strcmp(type, "Linear") == 0) {
            me->ndim = 1;
            me->dim[0] = nir_find_array(me->node, "weight")->dim[0];
        } else if (strcmp(type, "Conv2d") == 0 || strstr(type, "Pool2d")) {
            bool conv = type[0] == 'C';
            nir_array *w = nir_find_array(me->node, "weight");
            int64_t size = conv ? w->dim[2] : ref_int(me->node, "kernel_size", 0, 1);
            int64_t s = ref_int(me->node, "stride", 0, conv ? 1 : size);
            nir_array *pa = nir_find_array(me->node, "padding");
            int64_t p = pa && pa->is_text ? (strcmp(pa->text, "same") == 0 ? (size - 1) / 2 : 0)
                                          : ref_int(me->node, "padding", 0, 0);
            me->ndim = 3;
            me->dim[0] = conv ? w->dim[0] : src->dim[0];
            me->dim[1] = (src->dim[1] + 2 * p - size) / s + 1;
            me->dim[2] = (src->dim[2] + 2 * p - size) / s + 1;
        } else if (strcmp(type, "Flatten") == 0) {
            me->ndim = 1;
            me->dim[0] = src->numel;
        } else {
            me->ndim = src->ndim;
            memcpy(me->dim, src->dim, sizeof me->dim);
        }
        me->numel = 1;
        for (int d = 0; d < me->ndim; d++) me->numel *= me->dim[d];
        size_t bytes = (size_t)(N * me->numel) * sizeof(double);
        me->out = calloc(1, bytes), me->prev = calloc(1, bytes);
        me->v = calloc(1, bytes), me->i = calloc(1, bytes);
        if (strcmp(type, "Delay") == 0) me->history = calloc((size_t)T, bytes);
        for (int64_t j = 0; j < N * me->numel; j++) /* the rest values */
            me->v[j] = ref_param(me->node, strcmp(type, "IF") == 0 ? "v_reset" : "v_leak",
                                 j % me->numel, 0.0);
    }
    int64_t in_numel = r[0].numel, max_numel = 1;
    for (int k = 0; k < count; k++) max_numel = r[k].numel > max_numel ? r[k].numel : max_numel;
    double *in = calloc((size_t)max_numel, sizeof *in);
    for (int t = 0; t < T && status == 0; t++) {
        for (int k = 0; k < count; k++) {
            ref_node *me = &r[k];
            const ref_node *src = NULL;
            for (int n = 0; n < N; n++) {
                int64_t m = strcmp(me->node->type, "Input") == 0 ? me->numel : 0;
                memset(in, 0, (size_t)max_numel * sizeof *in);
                if (m) {
                    const float *xs = x + ((sequence ? (int64_t)t * N : 0) + n) * in_numel;
                    for (int64_t j = 0; j < m; j++) in[j] = (double)xs[j];
                }
                for (int e = 0; e < g->n_edges; e++) {
                    if (strcmp(g->edges[e].dst, me->node->name) != 0) continue;
                    int p = position[nir_find_node(g, g->edges[e].src) - g->nodes];
                    const ref_node *from = &r[p];
                    if (!src && p < k) src = from;
                    const double *value = (p < k ? from->out : from->prev) + n * from->numel;
                    for (int64_t j = 0; j < from->numel; j++) in[j] += value[j];
                }
                ref_step(me, src, in, n, t, N, dt);
            }
        }
        for (int k = 0; k < count; k++)
            memcpy(r[k].prev, r[k].out, (size_t)(N * r[k].numel) * sizeof(double));
        for (int k = 0; k < count; k++)
            if (strcmp(r[k].node->type, "Output") == 0)
                memcpy(y + (int64_t)t * N * r[k].numel, r[k].out,
                       (size_t)(N * r[k].numel) * sizeof(double));
    }
    for (int k = 0; k < count; k++) {
        free(r[k].out), free(r[k].prev), free(r[k].v), free(r[k].i), free(r[k].history);
    }
    free(in);
    free(r);
    free(position);
    return status;
}

#endif /* SNN_TEST_NIR_REFERENCE_H */
