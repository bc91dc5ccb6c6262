#define _DEFAULT_SOURCE /* popen, pclose */
/*
 * test_nir_interop.c - snn.c's NIR files against the reference `nir` package (nir.read and
 * nir.write, v1.0.7, vendored at ../shared/vendor/nir), both ways, through
 * tests/nir/nir_interop.py run by /usr/bin/python3 (with python3-numpy and python3-h5py):
 *   - snn.c -> nir: nir.read, with its type check, opens every file snn.c writes: the spiking
 *     CNN (LIF, IF, ParametricLIF), the CNN on event frames, the DVS net, the spiking ResNet-18
 *     and SEW-ResNet-18, the spiking ResNet-50, and the four fixtures written again by snn.c;
 *     it finds as many nodes and edges as snn.c wrote;
 *   - nir -> snn.c: graphs nir.write wrote (every node type snn.c reads, per-neuron
 *     parameters, a cycle, delays, padding 'same') read with the parameters the script
 *     summed, and run within 1e-5 of tests/nir/nir_reference.h;
 *   - and back: each of those, written again by snn.c, is the same graph to nir.read
 *     (nodes, types, every parameter array, edges).
 * Skipped (77) without HDF5, without python3, numpy or h5py, or without ../shared/vendor.
 *
 *     ctest -R nir_interop --output-on-failure
 */
#include "test.h"

#ifndef SNN_WITH_NIR
int main(void)
{
    fprintf(stderr, "skipped: built without HDF5 (install libhdf5-dev for NIR)\n");
    return 77;
}
#else
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nir/nir.h"
#include "tests/nir/nir_reference.h"
#include "tests/nir/nir_test_run.h"
#include "snn.h"

#define PYTHON "PYTHONPATH=../shared/vendor /usr/bin/python3 tests/nir/nir_interop.py"
#define FIXTURES "../shared/fixtures/nir/"

static char folder[128];

/* Runs the script with `args`; every line it prints goes to `line` (with ctx); its exit code. */
static int python(const char *args, void (*line)(const char *text, void *ctx), void *ctx)
{
    char command[4096];
    snprintf(command, sizeof command, PYTHON " %s 2>&1", args);
    FILE *p = popen(command, "r");
    if (!p) return -1;
    char text[1024];
    while (fgets(text, sizeof text, p)) {
        text[strcspn(text, "\n")] = '\0';
        if (line) line(text, ctx);
        else fprintf(stderr, "  python: %s\n", text);
    }
    int status = pclose(p);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* ---- snn.c -> nir ------------------------------------------------------------------------- */

#define MAX_FILES 16

typedef struct written {
    char path[MAX_FILES][160];
    int nodes[MAX_FILES], edges[MAX_FILES];
    bool seen[MAX_FILES];
    int count;
} written;

static void note_file(written *w, const char *path)
{
    nir_graph g;
    if (nir_read_hdf5(&g, path) != SNN_OK) return;
    snprintf(w->path[w->count], sizeof w->path[0], "%s", path);
    w->nodes[w->count] = g.n_nodes;
    w->edges[w->count++] = g.n_edges;
    nir_graph_free(&g);
}

static void model_file(written *w, const char *name, snn_model_config c)
{
    snn_rng rng;
    snn_rng_seed(&rng, 1);
    snn_module *model = snn_model_new(&c, &rng);
    char path[160];
    snprintf(path, sizeof path, "%s/%s.nir", folder, name);
    CHECK(model != NULL);
    if (model) CHECK_OK(snn_nir_write(path, model));
    snn_module_free(model);
    note_file(w, path);
}

/* "ok FILE NODES EDGES": nir.read opened it and found these */
static void checked_line(const char *text, void *ctx)
{
    written *w = ctx;
    char path[160];
    int nodes, edges;
    if (sscanf(text, "ok %159s %d %d", path, &nodes, &edges) == 3) {
        for (int k = 0; k < w->count; k++)
            if (strcmp(w->path[k], path) == 0) {
                w->seen[k] = true;
                CHECK(nodes == w->nodes[k] && edges == w->edges[k]);
            }
        return;
    }
    fprintf(stderr, "  python: %s\n", text);
}

static void test_nir_reads_snn_files(void)
{
    written w = {0};
    snn_model_config c = snn_model_config_default(SNN_MODEL_SPIKING_CNN);
    c.width_base = 4, c.hidden = 16, c.time_steps = 3;
    model_file(&w, "cnn_lif", c);
    c.neuron = snn_neuron_config_default(SNN_NEURON_IF);
    model_file(&w, "cnn_if", c);
    c.neuron = snn_neuron_config_default(SNN_NEURON_PLIF);
    model_file(&w, "cnn_plif", c);
    c = snn_model_config_default(SNN_MODEL_SPIKING_CNN);
    c.width_base = 4, c.hidden = 16, c.time_steps = 3, c.in_channels = 2, c.height = c.width = 34;
    c.encoding = SNN_ENCODING_EVENTS;
    model_file(&w, "cnn_events", c);
    c = snn_model_config_default(SNN_MODEL_DVS_NET);
    c.width_base = 4, c.hidden = 16, c.time_steps = 3, c.height = c.width = 32;
    model_file(&w, "dvsnet", c);
    c = snn_model_config_default(SNN_MODEL_RESNET18);
    c.width_base = 4, c.time_steps = 2, c.in_channels = 1, c.height = c.width = 16;
    model_file(&w, "resnet18", c);
    c.kind = SNN_MODEL_SEW_RESNET18;
    model_file(&w, "sew_resnet18", c);
    c.kind = SNN_MODEL_RESNET50, c.width_base = 2;
    model_file(&w, "resnet50", c);
    const char *fixtures[] = {"mlp_lif", "mlp_cubalif_li", "conv_if_events", "rlif"};
    for (int f = 0; f < 4; f++) { /* read by snn.c, written again */
        char in[160], out[160];
        snprintf(in, sizeof in, FIXTURES "%s.nir", fixtures[f]);
        snprintf(out, sizeof out, "%s/again_%s.nir", folder, fixtures[f]);
        snn_module *m = snn_nir_read(in, 2, SNN_CPU);
        if (!m) continue; /* the fixtures are optional here */
        CHECK_OK(snn_nir_write(out, m));
        snn_module_free(m);
        note_file(&w, out);
    }
    char args[4096] = "check";
    for (int k = 0; k < w.count; k++)
        snprintf(args + strlen(args), sizeof args - strlen(args), " %s", w.path[k]);
    CHECK(python(args, checked_line, &w) == 0);
    int seen = 0;
    for (int k = 0; k < w.count; k++) seen += w.seen[k];
    fprintf(stderr, "  nir.read opened %d of the %d files snn.c wrote\n", seen, w.count);
    CHECK(seen == w.count && w.count >= 8);
    for (int k = 0; k < w.count; k++) remove(w.path[k]);
}

/* ---- nir -> snn.c -> nir ------------------------------------------------------------------- */

/* The sum of a numeric array's values (int or float) in double. */
static double array_sum(const nir_array *a)
{
    double sum = 0.0;
    for (int64_t k = 0; k < a->numel; k++) sum += a->is_int ? (double)a->i[k] : (double)a->f[k];
    return sum;
}

/* Runs `path`'s graph in snn.c and the reference on random inputs (T steps, N samples); the
 * largest |difference|, and in *nonzero the reference's outputs that are not 0. */
static double run_against_reference(const char *path, const char *const *order, int n_order,
                                    int T, int N, int64_t *nonzero)
{
    snn_module *m = nir_test_load(path, T, 0.0, SNN_CPU);
    if (!m) return INFINITY;
    snn_nir_info info;
    CHECK_OK(snn_nir_graph_info(m, &info));
    snn_shape shape = {.ndim = info.input.ndim + 1};
    shape.dim[0] = N;
    for (int d = 0; d < info.input.ndim; d++) shape.dim[d + 1] = info.input.dim[d];
    const int64_t numel = snn_shape_numel(shape);
    const int64_t count = (int64_t)T * N * snn_shape_numel(info.output);
    float *x = malloc((size_t)numel * sizeof *x), *y = malloc((size_t)count * sizeof *y);
    double *want = malloc((size_t)count * sizeof *want);
    snn_rng rng;
    snn_rng_seed(&rng, 3);
    for (int64_t k = 0; k < numel; k++) x[k] = 2.0f * snn_rng_uniform(&rng);
    double worst = INFINITY;
    nir_graph g;
    CHECK_OK(nir_read_hdf5(&g, path));
    snn_no_grad_begin();
    snn_step_begin();
    snn_tensor *out = snn_nir_forward_steps(m, snn_from_host(shape, x, SNN_CPU));
    if (out && out->numel == count) snn_tensor_copy_to_host(out, y);
    snn_step_end();
    snn_no_grad_end();
    if (out && ref_run(&g, order, n_order, info.dt, x, false, T, N, want) == 0) {
        worst = 0.0;
        *nonzero = 0;
        for (int64_t k = 0; k < count; k++) {
            worst = fmax(worst, fabs((double)y[k] - want[k]));
            *nonzero += want[k] != 0.0;
        }
    }
    nir_graph_free(&g);
    free(x), free(y), free(want);
    snn_module_free(m);
    return worst;
}

/* One graph of the manifest: its counts, its arrays' sums, its run, its copy by snn.c. */
static void check_python_graph(const char *name, int nodes, int edges, double dt, char **order,
                               int n_order, char (*arrays)[3][64], int n_arrays)
{
    char path[200], again[200];
    snprintf(path, sizeof path, "%s/%s.nir", folder, name);
    nir_graph g;
    CHECK_OK(nir_read_hdf5(&g, path));
    CHECK(g.n_nodes == nodes && g.n_edges == edges && fabs(g.dt - dt) <= 1e-12);
    int matched = 0;
    for (int a = 0; a < n_arrays; a++) {
        nir_node *n = nir_find_node(&g, arrays[a][0]);
        char *field = arrays[a][1];
        int64_t numel = 0;
        double sum = 0.0;
        sscanf(arrays[a][2], "%lld %lf", (long long *)&numel, &sum);
        nir_array *arr = n ? nir_find_array(n, field) : NULL;
        bool ok = arr && arr->numel == numel &&
                  fabs(array_sum(arr) - sum) <= 1e-5 * (1.0 + fabs(sum));
        if (!ok)
            fprintf(stderr, "  %s: %s.%s not as nir.write wrote it\n", name, arrays[a][0], field);
        matched += ok;
    }
    CHECK(matched == n_arrays);
    nir_graph_free(&g);
    int64_t nonzero = 0;
    double worst = run_against_reference(path, (const char *const *)order, n_order, 10, 3,
                                         &nonzero);
    fprintf(stderr, "  %-14s %d nodes, %d edges, %d arrays as written; max |snn.c - reference| "
            "%.2e (%lld outputs not 0)\n", name, nodes, edges, matched, worst, (long long)nonzero);
    CHECK(worst <= 1e-5 && nonzero > 0);
    /* and back: snn.c writes it again, nir.read finds the same graph */
    CHECK(snprintf(again, sizeof again, "%s/%s_again.nir", folder, name) < (int)sizeof again);
    snn_module *m = snn_nir_read(path, 2, SNN_CPU);
    CHECK(m && snn_nir_write(again, m) == SNN_OK);
    snn_module_free(m);
    char args[512];
    snprintf(args, sizeof args, "same %s %s", path, again);
    CHECK(python(args, NULL, NULL) == 0);
    remove(path);
    remove(again);
}

static void test_snn_reads_nir_files(void)
{
    char args[256], manifest[200];
    snprintf(args, sizeof args, "write %s", folder);
    CHECK(python(args, NULL, NULL) == 0);
    snprintf(manifest, sizeof manifest, "%s/manifest.txt", folder);
    FILE *f = fopen(manifest, "r");
    CHECK(f != NULL);
    if (!f) return;
    char line[2048], name[64] = "";
    char words[16][64], *order[16];
    static char arrays[64][3][64];
    int nodes = 0, edges = 0, n_order = 0, n_arrays = 0, graphs = 0;
    double dt = 0.0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        if (sscanf(line, "graph %63s %d %d %lf", name, &nodes, &edges, &dt) == 4) {
            n_order = n_arrays = 0;
        } else if (strncmp(line, "order ", 6) == 0) {
            for (char *w = strtok(line + 6, " "); w && n_order < 16; w = strtok(NULL, " ")) {
                snprintf(words[n_order], sizeof words[0], "%s", w);
                order[n_order] = words[n_order];
                n_order++;
            }
        } else if (strncmp(line, "array ", 6) == 0 && n_arrays < 64) {
            char node[64], field[64];
            long long numel;
            double sum;
            if (sscanf(line, "array %63s %63s %lld %lf", node, field, &numel, &sum) == 4) {
                snprintf(arrays[n_arrays][0], 64, "%s", node);
                snprintf(arrays[n_arrays][1], 64, "%s", field);
                snprintf(arrays[n_arrays][2], 64, "%lld %.17g", numel, sum);
                n_arrays++;
            }
        } else if (strcmp(line, "end") == 0) {
            check_python_graph(name, nodes, edges, dt, order, n_order, arrays, n_arrays);
            graphs++;
        }
    }
    fclose(f);
    remove(manifest);
    CHECK(graphs == 3);
}

int main(void)
{
    if (access("../shared/vendor/nir/__init__.py", R_OK) != 0 ||
        system("PYTHONPATH=../shared/vendor /usr/bin/python3 -c 'import numpy, h5py, nir' "
               "> /dev/null 2>&1") != 0) {
        fprintf(stderr, "skipped: needs /usr/bin/python3 with numpy and h5py (Debian "
                "python3-numpy, python3-h5py) and the nir package at ../shared/vendor\n");
        return 77;
    }
    snprintf(folder, sizeof folder, "/tmp/snn_test_nir_interop_%d", (int)getpid());
    if (mkdir(folder, 0700) != 0) {
        fprintf(stderr, "cannot make %s\n", folder);
        return 1;
    }
    RUN(test_nir_reads_snn_files);
    RUN(test_snn_reads_nir_files);
    rmdir(folder);
    return test_finish();
}
#endif
