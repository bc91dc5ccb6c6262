/*
 * nir_graph.h - the in-memory NIR graph shared by nir/ (private): named nodes holding named
 * arrays (float32 parameters, int64 shapes and sizes, short strings such as padding "same"),
 * and edges between node names, in the order the file lists them.
 *
 *   nir_graph.c   the container: add nodes, arrays, edges; find; free
 *   nir_export.c  an snn.c model -> graph (batch-norm folding, neuron parameter mapping)
 *   nir_hdf5.c    graph <-> the HDF5 layout of the nir Python package
 *   nir_check.c   graph -> checked graph: node kinds, back edges, execution order, shapes, dt
 *   nir_import.c  checked graph -> a runnable snn_module; nir_run.c runs it step by step
 */
#ifndef SNN_NIR_GRAPH_H
#define SNN_NIR_GRAPH_H

#include "nir.h"

#define NIR_MAX_ARRAYS 16
#define NIR_NAME 96

#define NIR_TEXT 32

typedef struct nir_array {
    char name[32];            /* "weight", "tau", "stride", ... */
    bool is_int;              /* int64 values (shapes, strides) or float32 (parameters) */
    bool is_text;             /* a string (Conv2d's padding "same"): `text`, no numbers */
    char text[NIR_TEXT];
    int ndim;                 /* 0 for a scalar */
    int64_t dim[4];
    int64_t numel;
    float *f;                 /* (numel) when !is_int */
    int64_t *i;               /* (numel) when is_int */
} nir_array;

typedef struct nir_node {
    char name[NIR_NAME];      /* "conv1", "layer1.0.sn1", "input", "output" */
    char type[16];            /* "Conv2d", "LIF", ... */
    nir_array arrays[NIR_MAX_ARRAYS];
    int n_arrays;
} nir_node;

typedef struct nir_edge {
    char src[NIR_NAME], dst[NIR_NAME];
} nir_edge;

typedef struct nir_graph {
    nir_node *nodes;
    int n_nodes, cap_nodes;
    nir_edge *edges;
    int n_edges, cap_edges;
    int64_t time_steps;       /* metadata: the T the model ran with (0: unknown) */
    double dt;                /* metadata: the time step the graph is meant to run at (0: none) */
    char version[16];         /* /version: the NIR version that wrote the file */
    char source[32];          /* metadata "source" ("snn.c"), or "" */
} nir_graph;

void nir_graph_free(nir_graph *g);
/* Appends a node (type, name); NULL on no memory or a duplicate name (message set). */
nir_node *nir_add_node(nir_graph *g, const char *type, const char *name);
nir_node *nir_find_node(nir_graph *g, const char *name);
/* Adds an array of the given shape to a node; returns it zero-filled, NULL on no memory. */
nir_array *nir_add_array(nir_node *n, const char *name, bool is_int, int ndim, const int64_t *dim);
nir_array *nir_find_array(nir_node *n, const char *name);
/* Convenience: a 1-D int64 array of `count` values, an int64 scalar, a float array filled. */
snn_status nir_add_ints(nir_node *n, const char *name, int count, const int64_t *values);
snn_status nir_add_int(nir_node *n, const char *name, int64_t value);
snn_status nir_add_filled(nir_node *n, const char *name, int ndim, const int64_t *dim, float v);
/* A string array (shorter than NIR_TEXT characters). */
snn_status nir_add_text(nir_node *n, const char *name, const char *text);
snn_status nir_add_edge(nir_graph *g, const char *src, const char *dst);

/* nir_export.c */
snn_status nir_from_model(nir_graph *g, snn_module *model);
/* nir_hdf5.c */
snn_status nir_write_hdf5(const nir_graph *g, const char *path);
snn_status nir_read_hdf5(nir_graph *g, const char *path);

#endif /* SNN_NIR_GRAPH_H */
