/*
 * nir_check.h - a NIR graph checked at load time (private to nir/): what each node is, which
 * edges close a cycle, the order the nodes run in, the shape on every edge and the time step.
 *
 * Shapes are per sample, without the batch (NIR's convention): an Input of shape (784) takes
 * (N, 784) at each time step. nir_check() refuses, naming the node and what was expected and
 * what came, every graph snn.c cannot run: an unknown or unsupported node type, an edge to a
 * missing node, no (or several) Input or Output nodes, a node the Input does not reach, an
 * Affine / Linear / Conv2d whose weight does not fit its input, neuron parameters whose shape
 * is not their input's, and dynamics that need a dt when there is none.
 *
 * Recurrent edges (NIR's one-step semantics): the edges are walked depth first from the Input
 * node in the file's order; an edge that reaches a node still on the walk's path closes a
 * cycle and is a back edge. The nodes run in a topological order of the graph without its back
 * edges, and a back edge delivers its source's output of the previous step (zero at t = 0), so
 * every cycle is delayed by exactly one step.
 */
#ifndef SNN_NIR_CHECK_H
#define SNN_NIR_CHECK_H

#include "nir_graph.h"

/* The node types snn.c runs (NIR's names in nir_kind_name). */
typedef enum nir_kind {
    NIR_INPUT,
    NIR_OUTPUT,
    NIR_AFFINE,    /* Affine (with bias) and Linear (without) */
    NIR_CONV2D,
    NIR_SUMPOOL2D,
    NIR_AVGPOOL2D,
    NIR_FLATTEN,
    NIR_SCALE,
    NIR_THRESHOLD,
    NIR_DELAY,
    NIR_LIF,
    NIR_IF,
    NIR_LI,
    NIR_I,
    NIR_CUBALIF,
    NIR_CUBALI,
    NIR_KIND_COUNT
} nir_kind;

/* A square window of Conv2d or a pooling node: kernel k, stride, zero padding on each side. */
typedef struct nir_window {
    int kernel, stride, pad;
} nir_window;

typedef struct nir_checked {
    nir_graph *graph;         /* the graph checked (not owned; nir_build takes its contents) */
    int n_nodes, n_edges;     /* the graph's, as checked */
    nir_kind *kind;           /* (n_nodes) */
    snn_shape *in_shape;      /* (n_nodes) the shape a node's summed input has */
    snn_shape *out_shape;     /* (n_nodes) */
    nir_window *window;       /* (n_nodes) Conv2d, SumPool2d, AvgPool2d: their window */
    int *order;               /* (n_nodes) node indices in the order they run */
    int *src, *dst;           /* (n_edges) the node indices of each edge */
    bool *back;               /* (n_edges) true for an edge that closes a cycle */
    int input, output;        /* the Input and Output nodes */
    int n_back;               /* back edges: > 0 for a recurrent graph */
    double dt;                /* the time step the dynamics run at (0: no node needs one) */
    bool dt_from_file;        /* dt is the file's metadata (false: the caller's) */
} nir_checked;

/* NIR's name of a kind ("LIF"); "?" out of range. */
const char *nir_kind_name(nir_kind kind);

/* True for the kinds with dynamics in time (neurons, Delay): they need dt. */
bool nir_kind_needs_dt(nir_kind kind);

/* Checks `g` (read from `source`, for messages) and fills *c. `dt` > 0 is the caller's time
 * step (it wins over the file's metadata); 0 takes the file's. SNN_OK, or the refusal
 * (SNN_ERR_UNSUPPORTED for what snn.c does not run, SNN_ERR_FORMAT for a graph that is not
 * consistent, SNN_ERR_ARGUMENT for a missing dt) with *c empty. Free with nir_checked_free. */
snn_status nir_check(nir_graph *g, double dt, const char *source, nir_checked *c);
void nir_checked_free(nir_checked *c);

/* The error every refusal of node `n` gives: "snn_nir_read: '<source>' node '<name>' (<type>):
 * <why>" with why made by printf from `fmt`. Returns `status`. */
snn_status nir_refuse(snn_status status, const char *source, const nir_node *n, const char *fmt,
                      ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

/* True when every value of the numeric array `a` is the same. */
bool nir_is_uniform(const nir_array *a);

#endif /* SNN_NIR_CHECK_H */
