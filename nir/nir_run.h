/*
 * nir_run.h - an imported NIR graph as a module (private to nir/): the graph's nodes in the
 * order they run, each with its inputs and its parameters, and the step-by-step executor.
 *
 *   nir_import.c  builds it from a checked graph (nir_check.h): the layers and parameter
 *                 tensors, each neuron discretised at the graph's dt
 *   nir_run.c     runs it: for t = 0 .. T-1, every node in order, on (N, ...) tensors
 *   nir_time.c    the two time-axis ops it needs: a step of a sequence, and stacking steps
 *
 * Dimension glossary: T time steps, N batch; per-sample shapes are NIR's (no batch).
 */
#ifndef SNN_NIR_RUN_H
#define SNN_NIR_RUN_H

#include "nir_check.h"

/* The most distinct delays one Delay node may hold (each is a mask and a product per step). */
#define NIR_MAX_DELAYS 16

/* Where a node's input comes from: node `from` (an index into nir_run.nodes) at this step, or
 * at the previous one for a back edge (NIR's one-step semantics of a cycle). */
typedef struct run_input {
    int from;
    bool previous;
} run_input;

/* One node as it runs. */
typedef struct run_node {
    nir_kind kind;
    const char *name;          /* the node's name in the graph (for messages) */
    snn_shape in, out;         /* its (summed) input and its output, per sample */
    int child;                 /* the module's child that holds its layer or parameters; -1 */
    int synapse;               /* CubaLIF, CubaLI: the child of the synaptic stage; -1 */
    bool kernel_neuron;        /* LIF, IF run by snn.c's neuron kernel (snn_neuron_step) */
    float scale;               /* SumPool2d: k * k (AvgPool2d's mean times the window) */
    int first_input, n_inputs; /* its inputs: nir_run.inputs[first_input ..] */
    int history;               /* Delay: the inputs it keeps (its longest delay + 1) */
} run_node;

/* The NIRGraph module's state (its impl). */
typedef struct nir_run {
    nir_graph graph;           /* owned: the graph as read, written back by snn_nir_write */
    run_node *nodes;           /* (n_nodes) in execution order */
    int n_nodes;
    run_input *inputs;         /* (n_inputs) every node's inputs, node after node */
    int n_inputs;
    int output;                /* the Output node's index in nodes[] */
    int time_steps;            /* T for an input without a time axis; 0: unknown */
    double dt;                 /* the Euler step the neurons were discretised with (0: none) */
    bool dt_from_file;
    int n_back;                /* back edges (a recurrent graph has some) */
    snn_shape in_shape;        /* the Input node's, per sample */
    snn_shape out_shape;       /* the Output node's, per sample */
    snn_surrogate surrogate;   /* the spikes' surrogate gradient */
} nir_run;

/* The parameters of one node's child of kind "NIRParams": named buffers, and which is which.
 * A leaky stage (a neuron's membrane, or its synaptic current) steps, per element,
 *     v[t] = v[t-1] + decay (v_leak - v[t-1]) + gain x[t]
 * with decay = dt / tau and gain = dt r / tau (no leak term where there is no tau), and a
 * spiking one then fires z = H(v - v_threshold) and resets v to v_reset where it fired. */
typedef struct nir_params_impl {
    nir_kind kind;             /* the node's kind */
    bool spiking;              /* a leaky stage that fires and resets */
    int decay, gain, v_leak, v_threshold, v_reset; /* leaky stage: param indices, -1: absent */
    int values;                /* Scale's scale, Threshold's threshold, Delay's masks; -1 */
    int n_delays;              /* Delay: its distinct delays in steps (masks (n_delays, ...) */
    int delays[NIR_MAX_DELAYS];/*        hold 1 where an element has delays[k], when > 1) */
} nir_params_impl;

extern const snn_module_ops nir_graph_ops;
extern const snn_module_ops nir_params_ops;

/* nir_import.c: whether snn.c's own neuron computes the LIF or IF node n at step dt exactly
 * (one tau, threshold and reset for the node; v_leak = v_reset; r = 1 or r = tau / dt for a
 * LIF, dt r = 1 for an IF), and its config (tau in steps) when it does. */
bool nir_kernel_neuron(nir_node *n, nir_kind kind, double dt, snn_surrogate surrogate,
                       snn_neuron_config *cfg);

/* nir_import.c: the module for a checked graph; takes over c->graph's contents (left empty). */
snn_module *nir_build(nir_checked *c, int time_steps, snn_surrogate surrogate, snn_device device,
                      const char *source);

/* nir_run.c: the Output node's value at every step, outputs[t] for t < *steps (host array in
 * step memory). x: (N, ...) repeated over the graph's T, or (T, N, ...) a step at a time. */
snn_status nir_run_steps(snn_module *m, snn_tensor *x, snn_tensor ***outputs, int *steps);

/* nir_time.c: x[t] of x (T, ...) as a (...) tensor; differentiable (a view of x's data). */
snn_tensor *nir_time_step(snn_tensor *x, int t);
/* nir_time.c: the `count` tensors of one shape (...) stacked into (count, ...); differentiable. */
snn_tensor *nir_time_stack(snn_tensor *const *steps, int count);

#endif /* SNN_NIR_RUN_H */
