/*
 * nir_graphs.h - NIR graphs written from C for the NIR tests (tests/test_nir_exec.c,
 * tests/test_nir_validate.c, tests/test_nir_cuda.c): a node per call on the graph container of
 * nir/nir_graph.h, parameters drawn from a seeded generator, and nir_write_hdf5 to a file that
 * snn_nir_load then reads as any other.
 *
 *     nir_graph g = {0};
 *     graph_input(&g, "input", 1, (int64_t[]){5});
 *     graph_affine(&g, "fc", 6, 5, true);
 *     graph_neuron(&g, "LIF", "lif", 1, (int64_t[]){6}, true);
 *     graph_output(&g, "output", 1, (int64_t[]){6});
 *     graph_chain(&g, (const char *[]){"input", "fc", "lif", "output"}, 4);
 *     g.dt = 1e-3;
 *     nir_write_hdf5(&g, path);
 */
#ifndef SNN_TEST_NIR_GRAPHS_H
#define SNN_TEST_NIR_GRAPHS_H

#include <string.h>

#include "nir/nir_graph.h"

static snn_rng graph_rng;

/* a uniform value in [lo, hi) */
static inline float graph_uniform(float lo, float hi)
{
    return lo + (hi - lo) * snn_rng_uniform(&graph_rng);
}

/* A float array of `ndim` dims filled with U(lo, hi) (lo == hi: that value). */
static inline nir_array *graph_floats(nir_node *n, const char *name, int ndim, const int64_t *dim,
                                      float lo, float hi)
{
    nir_array *a = nir_add_array(n, name, false, ndim, dim);
    for (int64_t k = 0; a && k < a->numel; k++) a->f[k] = lo == hi ? lo : graph_uniform(lo, hi);
    return a;
}

static inline nir_node *graph_input(nir_graph *g, const char *name, int ndim, const int64_t *dim)
{
    nir_node *n = nir_add_node(g, "Input", name);
    nir_add_ints(n, "shape", ndim, dim);
    return n;
}

static inline nir_node *graph_output(nir_graph *g, const char *name, int ndim, const int64_t *dim)
{
    nir_node *n = nir_add_node(g, "Output", name);
    nir_add_ints(n, "shape", ndim, dim);
    return n;
}

/* Affine (bias) or Linear: weight (out, in) ~ U(+-1/sqrt(in)) times 2 */
static inline nir_node *graph_affine(nir_graph *g, const char *name, int64_t out, int64_t in,
                                     bool bias)
{
    nir_node *n = nir_add_node(g, bias ? "Affine" : "Linear", name);
    float bound = 2.0f / sqrtf((float)in);
    graph_floats(n, "weight", 2, (int64_t[]){out, in}, -bound, bound);
    if (bias) graph_floats(n, "bias", 1, (int64_t[]){out}, -0.2f, 0.2f);
    return n;
}

/* A neuron node of NIR type `type` (LIF, IF, LI, I, CubaLIF, CubaLI) over `dim`, with every
 * parameter its type has: one value per neuron, varied per neuron when `varied`, in ranges
 * that make it fire within a few steps at dt = 1e-3 (time constants 2..8 ms). */
static inline nir_node *graph_neuron(nir_graph *g, const char *type, const char *name, int ndim,
                                     const int64_t *dim, bool varied)
{
    nir_node *n = nir_add_node(g, type, name);
    const float v = varied ? 1.0f : 0.0f; /* how far values spread */
    const bool cuba = strncmp(type, "Cuba", 4) == 0;
    const bool fires = strcmp(type, "LIF") == 0 || strcmp(type, "IF") == 0 ||
                       strcmp(type, "CubaLIF") == 0;
    const bool leaky = strcmp(type, "LIF") == 0 || strcmp(type, "LI") == 0 || cuba;
    if (leaky && !cuba) graph_floats(n, "tau", ndim, dim, 3e-3f - 1e-3f * v, 3e-3f + 5e-3f * v);
    if (cuba) {
        graph_floats(n, "tau_syn", ndim, dim, 2e-3f, 2e-3f + 2e-3f * v);
        graph_floats(n, "tau_mem", ndim, dim, 4e-3f, 4e-3f + 4e-3f * v);
        graph_floats(n, "w_in", ndim, dim, 1.0f, 1.0f + 0.5f * v);
    }
    /* IF and I integrate dt r x: r ~ 1 / dt keeps their charge per step near x */
    const float r = leaky ? 1.0f : 500.0f;
    graph_floats(n, "r", ndim, dim, r, r * (1.0f + 0.5f * v));
    if (leaky) graph_floats(n, "v_leak", ndim, dim, 0.0f, 0.2f * v);
    if (fires) {
        graph_floats(n, "v_threshold", ndim, dim, 0.8f, 0.8f + 0.4f * v);
        graph_floats(n, "v_reset", ndim, dim, 0.0f, -0.1f * v);
    }
    return n;
}

/* Edges a -> b -> c ... along `names`. */
static inline void graph_chain(nir_graph *g, const char *const *names, int count)
{
    for (int k = 0; k + 1 < count; k++) nir_add_edge(g, names[k], names[k + 1]);
}

#endif /* SNN_TEST_NIR_GRAPHS_H */
