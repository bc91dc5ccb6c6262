/*
 * test_nir_validate.c - graphs snn.c cannot run are refused when they are read (snn_nir_load),
 * not at the first forward pass, with a message that names the file, the node (or the edge),
 * what was expected and what came. One test per check of nir/nir_check.c, each on a graph
 * written from C (tests/nir/nir_graphs.h) that is right but for one thing.
 *
 *     ctest -R nir_validate --output-on-failure
 */
#include "test.h"

#ifndef SNN_WITH_NIR
int main(void)
{
    fprintf(stderr, "skipped: built without HDF5 (install libhdf5-dev for NIR)\n");
    return 77;
}
#else
#include <unistd.h>

#include "nir/nir.h"
#include "tests/nir/nir_graphs.h"
#include "snn.h"

static char path[256];

/* Writes g (dt `file_dt`), frees it, and reads it with options.dt = `dt`: the module or NULL. */
static snn_module *write_and_load(nir_graph *g, double file_dt, double dt)
{
    g->dt = file_dt;
    CHECK_OK(nir_write_hdf5(g, path));
    nir_graph_free(g);
    snn_nir_options o = snn_nir_options_default();
    o.dt = dt;
    return snn_nir_load(path, &o);
}

/* g must be refused with a message naming the file, `node` (quoted) and holding `phrase`. */
static void refused(const char *what, nir_graph *g, const char *node, const char *phrase)
{
    snn_module *m = write_and_load(g, 1e-3, 0.0);
    char quoted[128];
    snprintf(quoted, sizeof quoted, "'%s'", node);
    const char *message = m ? "(loaded)" : snn_last_error();
    bool ok = !m && strstr(message, path) && strstr(message, quoted) && strstr(message, phrase);
    CHECK(ok);
    const char *after_path = strstr(message, path); /* print the part after the file's name */
    fprintf(stderr, "  %-26s %s\n", what, after_path ? after_path + strlen(path) + 2 : message);
    snn_module_free(m);
}

/* Gives node n's array `name` another length: the old one is renamed "unused" (a parameter
 * snn.c does not read) and a new one of `length` values (2 ms each) takes its name. */
static void replace(nir_node *n, const char *name, int64_t length)
{
    snprintf(nir_find_array(n, name)->name, 32, "unused");
    graph_floats(n, name, 1, (int64_t[]){length}, 2e-3f, 2e-3f);
}

/* input (F) -> fc (Affine out x in) -> output (out) */
static void affine_graph(nir_graph *g, int64_t features, int64_t out, int64_t in, bool bias)
{
    graph_input(g, "input", 1, (int64_t[]){features});
    graph_affine(g, "fc", out, in, bias);
    graph_output(g, "output", 1, (int64_t[]){out});
    graph_chain(g, (const char *[]){"input", "fc", "output"}, 3);
}

/* input (6) -> fc -> LIF (6) -> output, the LIF given by the caller's edits */
static nir_node *lif_graph(nir_graph *g)
{
    graph_input(g, "input", 1, (int64_t[]){6});
    graph_affine(g, "fc", 6, 6, true);
    nir_node *lif = graph_neuron(g, "LIF", "lif", 1, (int64_t[]){6}, true);
    graph_output(g, "output", 1, (int64_t[]){6});
    graph_chain(g, (const char *[]){"input", "fc", "lif", "output"}, 4);
    return lif;
}

/* input (3, 8, 8) -> conv (weight (4, c_in, 3, 3)) -> output */
static nir_node *conv_graph(nir_graph *g, int64_t c_in)
{
    graph_input(g, "input", 3, (int64_t[]){3, 8, 8});
    nir_node *c = nir_add_node(g, "Conv2d", "conv");
    graph_floats(c, "weight", 4, (int64_t[]){4, c_in, 3, 3}, -0.5f, 0.5f);
    graph_floats(c, "bias", 1, (int64_t[]){4}, 0.0f, 0.0f);
    nir_add_ints(c, "stride", 2, (int64_t[]){1, 1});
    nir_add_ints(c, "padding", 2, (int64_t[]){1, 1});
    graph_output(g, "output", 3, (int64_t[]){4, 8, 8});
    graph_chain(g, (const char *[]){"input", "conv", "output"}, 3);
    return c;
}

static void test_weights_against_inputs(void)
{
    nir_graph g = {0};
    affine_graph(&g, 5, 3, 6, true);
    refused("Affine of another input", &g, "fc", "takes an input of 6 features, its input has "
            "shape (5)");
    g = (nir_graph){0};
    affine_graph(&g, 5, 3, 4, false);
    refused("Linear of another input", &g, "fc", "(Linear): weight (3, 4)");
    g = (nir_graph){0};
    graph_input(&g, "input", 3, (int64_t[]){2, 3, 4});
    graph_affine(&g, "fc", 3, 24, true);
    graph_output(&g, "output", 1, (int64_t[]){3});
    graph_chain(&g, (const char *[]){"input", "fc", "output"}, 3);
    refused("Affine of an image", &g, "fc", "hint: a Flatten node before it");
    g = (nir_graph){0};
    affine_graph(&g, 5, 3, 5, true);
    replace(nir_find_node(&g, "fc"), "bias", 2); /* (3) expected */
    refused("Affine bias too short", &g, "fc", "parameter 'bias' has shape (2), expected");
    g = (nir_graph){0};
    conv_graph(&g, 2);
    refused("Conv2d channels", &g, "conv", "takes 2 input channels (C, H, W), its input has "
            "shape (3, 8, 8)");
    g = (nir_graph){0};
    nir_add_ints(conv_graph(&g, 3), "input_shape", 2, (int64_t[]){10, 10});
    refused("Conv2d input_shape", &g, "conv", "input_shape is not its input's 8 x 8");
    g = (nir_graph){0};
    nir_add_int(conv_graph(&g, 3), "groups", 3);
    refused("Conv2d groups", &g, "conv", "groups = 3");
}

static void test_neuron_parameters(void)
{
    nir_graph g = {0};
    nir_node *lif = lif_graph(&g);
    replace(lif, "tau", 5); /* one short */
    refused("LIF tau of the wrong length", &g, "lif", "parameter 'tau' has shape (5), expected "
            "its input's shape (6)");
    g = (nir_graph){0};
    lif = lif_graph(&g);
    nir_find_array(lif, "v_threshold")->name[0] = 'w'; /* renamed: missing */
    refused("LIF without v_threshold", &g, "lif", "has no parameter 'v_threshold'");
    g = (nir_graph){0};
    nir_find_array(lif_graph(&g), "tau")->f[2] = 5e-4f;
    refused("LIF tau below dt", &g, "lif", "tau[2] = 0.0005 is shorter than the time step");
    g = (nir_graph){0};
    graph_input(&g, "input", 1, (int64_t[]){3});
    graph_floats(nir_add_node(&g, "Delay", "delay"), "delay", 1, (int64_t[]){3}, 1.5e-3f, 1.5e-3f);
    graph_output(&g, "output", 1, (int64_t[]){3});
    graph_chain(&g, (const char *[]){"input", "delay", "output"}, 3);
    refused("Delay between steps", &g, "delay", "is not a whole number of time steps");
}

static void test_structure(void)
{
    nir_graph g = {0};
    affine_graph(&g, 5, 3, 5, true);
    nir_add_edge(&g, "fc", "nowhere");
    refused("edge to a missing node", &g, "nowhere", "edge 'fc' -> 'nowhere'");
    g = (nir_graph){0};
    affine_graph(&g, 5, 3, 5, true);
    graph_floats(nir_add_node(&g, "Conv1d", "c1d"), "weight", 3, (int64_t[]){3, 3, 3}, 0, 0);
    nir_add_edge(&g, "fc", "c1d");
    refused("unsupported node type", &g, "c1d", "(Conv1d): snn.c does not run this node type");
    g = (nir_graph){0};
    graph_affine(&g, "fc", 3, 5, true);
    graph_output(&g, "output", 1, (int64_t[]){3});
    nir_add_edge(&g, "fc", "output");
    g.dt = 1e-3;
    CHECK_OK(nir_write_hdf5(&g, path));
    nir_graph_free(&g);
    CHECK(snn_nir_read(path, 4, SNN_CPU) == NULL &&
          strstr(snn_last_error(), "0 Input and 1 Output nodes (expected one of each)"));
    g = (nir_graph){0};
    graph_input(&g, "input", 1, (int64_t[]){5});
    graph_affine(&g, "fc", 3, 5, true);
    nir_add_edge(&g, "input", "fc");
    CHECK_OK(nir_write_hdf5(&g, path));
    nir_graph_free(&g);
    CHECK(snn_nir_read(path, 4, SNN_CPU) == NULL &&
          strstr(snn_last_error(), "1 Input and 0 Output nodes"));
    g = (nir_graph){0};
    affine_graph(&g, 5, 3, 5, true);
    graph_affine(&g, "lonely", 3, 3, true);
    nir_add_edge(&g, "lonely", "output");
    refused("a node the Input misses", &g, "lonely", "no path of edges leads to it from the Input");
    g = (nir_graph){0};
    affine_graph(&g, 5, 3, 5, true);
    graph_affine(&g, "fc4", 4, 5, true);
    nir_add_edge(&g, "input", "fc4");
    nir_add_edge(&g, "fc4", "output");
    refused("converging shapes differ", &g, "output", "its inputs differ in shape: (3) from "
            "'fc', (4) from 'fc4'");
    g = (nir_graph){0};
    affine_graph(&g, 5, 3, 5, true);
    nir_find_array(nir_find_node(&g, "output"), "shape")->i[0] = 4;
    refused("Output shape", &g, "output", "its shape says (4), its input has shape (3)");
    g = (nir_graph){0};
    graph_input(&g, "input", 3, (int64_t[]){2, 3, 4});
    nir_node *f = nir_add_node(&g, "Flatten", "flat");
    nir_add_ints(f, "input_type", 3, (int64_t[]){2, 4, 3});
    nir_add_int(f, "start_dim", 0);
    nir_add_int(f, "end_dim", -1);
    graph_output(&g, "output", 1, (int64_t[]){24});
    graph_chain(&g, (const char *[]){"input", "flat", "output"}, 3);
    refused("Flatten input_type", &g, "flat", "its input_type says (2, 4, 3), its input has "
            "shape (2, 3, 4)");
}

/* dt: neither in the file nor given -> refused, naming the first node that needs one; given ->
 * read. A graph without dynamics needs none. */
static void test_dt(void)
{
    nir_graph g = {0};
    lif_graph(&g);
    snn_module *m = write_and_load(&g, 0.0, 0.0);
    CHECK(m == NULL && strstr(snn_last_error(), "'lif'") &&
          strstr(snn_last_error(), "need the time step dt, and the file's metadata has none"));
    fprintf(stderr, "  %-26s %s\n", "no dt", snn_last_error());
    snn_nir_options o = snn_nir_options_default();
    o.dt = 1e-3;
    m = snn_nir_load(path, &o);
    CHECK(m != NULL);
    snn_module_free(m);
    g = (nir_graph){0};
    affine_graph(&g, 5, 3, 5, true);
    m = write_and_load(&g, 0.0, 0.0);
    CHECK(m != NULL);
    snn_module_free(m);
}

int main(void)
{
    snprintf(path, sizeof path, "/tmp/snn_test_nir_validate_%d.nir", (int)getpid());
    snn_rng_seed(&graph_rng, 7);
    RUN(test_weights_against_inputs);
    RUN(test_neuron_parameters);
    RUN(test_structure);
    RUN(test_dt);
    remove(path);
    return test_finish();
}
#endif
