/*
 * nir_graph.c - the in-memory NIR graph: nodes with named arrays, and edges. Every numeric
 * array is one snn_alloc block, freed with the graph; a string array holds its text inline.
 */
#include <string.h>

#include "nir_graph.h"
#include "tensor/error.h"

static void array_free(nir_array *a)
{
    if (a->f) snn_free(a->f, (size_t)a->numel * sizeof *a->f, SNN_CPU);
    if (a->i) snn_free(a->i, (size_t)a->numel * sizeof *a->i, SNN_CPU);
    memset(a, 0, sizeof *a);
}

void nir_graph_free(nir_graph *g)
{
    for (int n = 0; n < g->n_nodes; n++)
        for (int a = 0; a < g->nodes[n].n_arrays; a++) array_free(&g->nodes[n].arrays[a]);
    snn_free(g->nodes, (size_t)g->cap_nodes * sizeof *g->nodes, SNN_CPU);
    snn_free(g->edges, (size_t)g->cap_edges * sizeof *g->edges, SNN_CPU);
    memset(g, 0, sizeof *g);
}

/* Doubles a block of `*cap` items of `size` bytes holding `n`. */
static bool grow(void **items, int *cap, int n, size_t size)
{
    int bigger = *cap ? 2 * *cap : 32;
    void *p = snn_alloc((size_t)bigger * size, SNN_CPU);
    if (!p) return false;
    if (n) memcpy(p, *items, (size_t)n * size);
    snn_free(*items, (size_t)*cap * size, SNN_CPU);
    *items = p;
    *cap = bigger;
    return true;
}

nir_node *nir_find_node(nir_graph *g, const char *name)
{
    for (int i = 0; i < g->n_nodes; i++)
        if (strcmp(g->nodes[i].name, name) == 0) return &g->nodes[i];
    return NULL;
}

nir_node *nir_add_node(nir_graph *g, const char *type, const char *name)
{
    if (strlen(name) >= NIR_NAME || strlen(type) >= sizeof g->nodes[0].type)
        return snn_error_null(SNN_ERR_FORMAT, "NIR: node name '%s' or type '%s' too long", name, type);
    if (nir_find_node(g, name))
        return snn_error_null(SNN_ERR_FORMAT, "NIR: two nodes named '%s'", name);
    if (g->n_nodes == g->cap_nodes && !grow((void **)&g->nodes, &g->cap_nodes, g->n_nodes, sizeof *g->nodes))
        return snn_error_null(SNN_ERR_MEMORY, "NIR: out of memory for nodes");
    nir_node *n = &g->nodes[g->n_nodes++];
    memset(n, 0, sizeof *n);
    snprintf(n->name, sizeof n->name, "%s", name);
    snprintf(n->type, sizeof n->type, "%s", type);
    return n;
}

nir_array *nir_find_array(nir_node *n, const char *name)
{
    for (int i = 0; i < n->n_arrays; i++)
        if (strcmp(n->arrays[i].name, name) == 0) return &n->arrays[i];
    return NULL;
}

nir_array *nir_add_array(nir_node *n, const char *name, bool is_int, int ndim, const int64_t *dim)
{
    if (n->n_arrays == NIR_MAX_ARRAYS || ndim < 0 || ndim > 4 || strlen(name) >= 32)
        return snn_error_null(SNN_ERR_FORMAT, "NIR: node '%s': too many arrays or a bad array "
                              "'%s' (%d dims)", n->name, name, ndim);
    nir_array *a = &n->arrays[n->n_arrays];
    memset(a, 0, sizeof *a);
    snprintf(a->name, sizeof a->name, "%s", name);
    a->is_int = is_int;
    a->ndim = ndim;
    a->numel = 1;
    for (int d = 0; d < ndim; d++) {
        if (dim[d] < 0 || dim[d] > ((int64_t)1 << 31) || (dim[d] && a->numel > ((int64_t)1 << 32) / dim[d]))
            return snn_error_null(SNN_ERR_FORMAT, "NIR: node '%s' array '%s': implausible size",
                                  n->name, name);
        a->dim[d] = dim[d];
        a->numel *= dim[d];
    }
    size_t bytes = (size_t)(a->numel ? a->numel : 1) * (is_int ? sizeof(int64_t) : sizeof(float));
    void *p = snn_alloc(bytes, SNN_CPU);
    if (!p) return snn_error_null(SNN_ERR_MEMORY, "NIR: out of memory for '%s.%s'", n->name, name);
    memset(p, 0, bytes);
    if (a->numel == 0) a->numel = 1; /* keep the block's size and numel in step */
    if (is_int) a->i = p;
    else a->f = p;
    n->n_arrays++;
    return a;
}

snn_status nir_add_ints(nir_node *n, const char *name, int count, const int64_t *values)
{
    int64_t dim = count;
    nir_array *a = nir_add_array(n, name, true, 1, &dim);
    if (!a) return snn_last_status();
    memcpy(a->i, values, (size_t)count * sizeof *values);
    return SNN_OK;
}

snn_status nir_add_int(nir_node *n, const char *name, int64_t value)
{
    nir_array *a = nir_add_array(n, name, true, 0, NULL);
    if (!a) return snn_last_status();
    a->i[0] = value;
    return SNN_OK;
}

snn_status nir_add_filled(nir_node *n, const char *name, int ndim, const int64_t *dim, float v)
{
    nir_array *a = nir_add_array(n, name, false, ndim, dim);
    if (!a) return snn_last_status();
    for (int64_t k = 0; k < a->numel; k++) a->f[k] = v;
    return SNN_OK;
}

snn_status nir_add_text(nir_node *n, const char *name, const char *text)
{
    if (n->n_arrays == NIR_MAX_ARRAYS || strlen(name) >= 32 || strlen(text) >= NIR_TEXT)
        return snn_error(SNN_ERR_FORMAT, "NIR: node '%s': too many arrays, or a string '%s' = "
                         "'%s' over %d characters", n->name, name, text, NIR_TEXT - 1);
    nir_array *a = &n->arrays[n->n_arrays++];
    memset(a, 0, sizeof *a);
    snprintf(a->name, sizeof a->name, "%s", name);
    snprintf(a->text, sizeof a->text, "%s", text);
    a->is_text = true;
    return SNN_OK;
}

snn_status nir_add_edge(nir_graph *g, const char *src, const char *dst)
{
    if (strlen(src) >= NIR_NAME || strlen(dst) >= NIR_NAME)
        return snn_error(SNN_ERR_FORMAT, "NIR: edge name too long ('%s' -> '%s')", src, dst);
    if (g->n_edges == g->cap_edges && !grow((void **)&g->edges, &g->cap_edges, g->n_edges, sizeof *g->edges))
        return snn_error(SNN_ERR_MEMORY, "NIR: out of memory for edges");
    nir_edge *e = &g->edges[g->n_edges++];
    snprintf(e->src, sizeof e->src, "%s", src);
    snprintf(e->dst, sizeof e->dst, "%s", dst);
    return SNN_OK;
}
