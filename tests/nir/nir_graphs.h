/*
 * nir_graphs.h - NIR graphs written from C for the NIR tests (tests/test_nir_exec.c,
 * tests/test_nir_validate.c, tests/test_nir_cuda.c): a node per call on the graph container of
 * nir/nir_graph.h, parameters drawn from a seeded generator, and nir_write_hdf5 to a file that
 * snn_nir_load then reads as any other; then the test graphs themselves, each with an order
 * to run its nodes in for tests/nir/nir_reference.h.
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

/* ---- the test graphs, with an order to run them in (for tests/nir/nir_reference.h) ---------- */

/* input (5) -> fc1 -> LIF per neuron -> fc2 (Linear) -> CubaLI per neuron -> Scale -> output */
static inline void graph_leaky(nir_graph *g, bool varied)
{
    graph_input(g, "input", 1, (int64_t[]){5});
    graph_affine(g, "fc1", 6, 5, true);
    graph_neuron(g, "LIF", "lif", 1, (int64_t[]){6}, varied);
    graph_affine(g, "fc2", 6, 6, false);
    graph_neuron(g, "CubaLI", "cuba", 1, (int64_t[]){6}, varied);
    graph_floats(nir_add_node(g, "Scale", "scale"), "scale", 1, (int64_t[]){6}, 0.5f, 2.0f);
    graph_output(g, "output", 1, (int64_t[]){6});
    graph_chain(g, (const char *[]){"input", "fc1", "lif", "fc2", "cuba", "scale", "output"}, 7);
}
static inline void graph_leaky_varied(nir_graph *g) { graph_leaky(g, true); }
static const char *const leaky_order[] = {"input", "fc1", "lif", "fc2", "cuba", "scale", "output"};

/* input (5) -> fc1 -> IF -> fc2 -> I <- fc3 <- input;  I -> Threshold -> output */
static inline void graph_integrators(nir_graph *g)
{
    graph_input(g, "input", 1, (int64_t[]){5});
    graph_affine(g, "fc1", 6, 5, true);
    graph_neuron(g, "IF", "if", 1, (int64_t[]){6}, true);
    graph_affine(g, "fc2", 4, 6, true);
    graph_affine(g, "fc3", 4, 5, true);
    graph_neuron(g, "I", "integ", 1, (int64_t[]){4}, true);
    graph_floats(nir_add_node(g, "Threshold", "th"), "threshold", 1, (int64_t[]){4}, -0.5f, 0.5f);
    graph_output(g, "output", 1, (int64_t[]){4});
    graph_chain(g, (const char *[]){"input", "fc1", "if", "fc2", "integ", "th", "output"}, 7);
    nir_add_edge(g, "input", "fc3");
    nir_add_edge(g, "fc3", "integ");
}
static const char *const integrators_order[] = {"input", "fc1", "if", "fc2", "fc3", "integ",
                                                "th", "output"};

/* input (4) -> fc_in -> lif -> delay -> fc_rec -> lif (a cycle); lif -> fc_o -> li -> output,
 * fc_o -> integ -> integ (a self-loop), integ -> output */
static inline void graph_cycles(nir_graph *g)
{
    graph_input(g, "input", 1, (int64_t[]){4});
    graph_affine(g, "fc_in", 6, 4, true);
    graph_neuron(g, "LIF", "lif", 1, (int64_t[]){6}, true);
    nir_array *d = graph_floats(nir_add_node(g, "Delay", "delay"), "delay", 1, (int64_t[]){6},
                                0.0f, 0.0f);
    for (int k = 0; k < 6; k++) d->f[k] = 1e-3f * (float)(k % 4); /* 0 to 3 steps */
    graph_affine(g, "fc_rec", 6, 6, false);
    graph_affine(g, "fc_o", 3, 6, true);
    graph_neuron(g, "LI", "li", 1, (int64_t[]){3}, true);
    graph_neuron(g, "I", "integ", 1, (int64_t[]){3}, false);
    nir_find_array(nir_find_node(g, "integ"), "r")->f[0] = 20.0f; /* its loop: gain 1.02 */
    for (int k = 1; k < 3; k++) nir_find_array(nir_find_node(g, "integ"), "r")->f[k] = 20.0f;
    graph_output(g, "output", 1, (int64_t[]){3});
    graph_chain(g, (const char *[]){"input", "fc_in", "lif", "delay", "fc_rec", "lif"}, 6);
    graph_chain(g, (const char *[]){"lif", "fc_o", "li", "output"}, 4);
    graph_chain(g, (const char *[]){"fc_o", "integ", "integ", "output"}, 4);
}
static const char *const cycles_order[] = {"input", "fc_in", "lif", "delay", "fc_rec", "fc_o",
                                           "li", "integ", "output"};

/* input (2, 8, 8) -> conv ("same") -> CubaLIF (4, 8, 8) -> AvgPool2d 2 -> SumPool2d 2 ->
 * Flatten -> fc -> output (3) */
static inline void graph_conv(nir_graph *g)
{
    graph_input(g, "input", 3, (int64_t[]){2, 8, 8});
    nir_node *c = nir_add_node(g, "Conv2d", "conv");
    graph_floats(c, "weight", 4, (int64_t[]){4, 2, 3, 3}, -0.6f, 0.6f);
    graph_floats(c, "bias", 1, (int64_t[]){4}, -0.1f, 0.3f);
    nir_add_ints(c, "stride", 2, (int64_t[]){1, 1});
    nir_add_text(c, "padding", "same");
    nir_add_ints(c, "dilation", 2, (int64_t[]){1, 1});
    nir_add_int(c, "groups", 1);
    graph_neuron(g, "CubaLIF", "cuba", 3, (int64_t[]){4, 8, 8}, true);
    nir_node *p = nir_add_node(g, "AvgPool2d", "avg");
    nir_add_ints(p, "kernel_size", 2, (int64_t[]){2, 2});
    nir_add_ints(p, "stride", 2, (int64_t[]){2, 2});
    nir_add_ints(p, "padding", 2, (int64_t[]){0, 0});
    p = nir_add_node(g, "SumPool2d", "sum");
    nir_add_ints(p, "kernel_size", 2, (int64_t[]){2, 2});
    nir_add_ints(p, "stride", 2, (int64_t[]){2, 2});
    nir_add_ints(p, "padding", 2, (int64_t[]){0, 0});
    nir_node *f = nir_add_node(g, "Flatten", "flat");
    nir_add_ints(f, "input_type", 3, (int64_t[]){4, 2, 2});
    nir_add_int(f, "start_dim", 0);
    nir_add_int(f, "end_dim", -1);
    graph_affine(g, "fc", 3, 16, true);
    graph_output(g, "output", 1, (int64_t[]){3});
    graph_chain(g, (const char *[]){"input", "conv", "cuba", "avg", "sum", "flat", "fc", "output"},
                8);
}
static const char *const conv_order[] = {"input", "conv", "cuba", "avg", "sum", "flat", "fc",
                                         "output"};

/* graph_cycles without spikes: LI in the loop (smooth), for gradcheck */
static inline void graph_smooth(nir_graph *g)
{
    graph_input(g, "input", 1, (int64_t[]){3});
    graph_affine(g, "fc", 4, 3, true);
    graph_neuron(g, "LI", "li", 1, (int64_t[]){4}, true);
    nir_array *d = graph_floats(nir_add_node(g, "Delay", "delay"), "delay", 1, (int64_t[]){4},
                                0.0f, 0.0f);
    for (int k = 0; k < 4; k++) d->f[k] = 1e-3f * (float)(k % 2);
    graph_neuron(g, "CubaLI", "cuba", 1, (int64_t[]){4}, true);
    graph_affine(g, "fc_rec", 4, 4, false);
    graph_affine(g, "fc_out", 2, 4, true);
    graph_output(g, "output", 1, (int64_t[]){2});
    graph_chain(g, (const char *[]){"input", "fc", "li", "delay", "cuba", "fc_out", "output"}, 7);
    graph_chain(g, (const char *[]){"cuba", "fc_rec", "li"}, 3);
}

#endif /* SNN_TEST_NIR_GRAPHS_H */
