/*
 * nir_run.c - an imported NIR graph, run step by step (nir_run.h):
 *
 *     for t = 0 .. T-1:
 *         for each node, in the order of the graph without its back edges:
 *             in = the sum of its inputs: a forward edge's source at step t,
 *                  a back edge's source at step t-1 (nothing at t = 0)
 *             out[node] = the node's step on in, with its state carried over from step t-1
 *         the graph's output at step t = out[Output]
 *
 * Every node steps on (N, ...) tensors with snn.c's differentiable ops, so the same code runs
 * on the CPU and CUDA, with or without a tape. The per-node math (NIR's equations, forward Euler
 * at the graph's dt; docs/nir.md has the table):
 *
 *   Affine, Linear, Conv2d, AvgPool2d   snn.c's layers on one step;  SumPool2d = AvgPool2d k^2
 *   Flatten        a view;  Scale  y = s x;  Threshold  y = (x > theta) = 1 - H(theta - x)
 *   LIF, IF, LI, I a leaky stage:  v[t] = v[t-1] + decay (v_leak - v[t-1]) + gain x[t]
 *                  (decay = dt / tau, gain = dt r / tau; IF and I: no leak, gain = dt r);
 *                  LIF and IF fire z = H(v - v_threshold) and set v = v_reset where z = 1
 *   CubaLIF, CubaLI  two stages: the synaptic current i[t] = i[t-1] - (dt / tau_syn) i[t-1]
 *                  + (dt w_in / tau_syn) x[t], then the membrane (LIF or LI) driven by i[t]
 *   Delay          y[t] = x[t - d] (zero before the first input), d = delay / dt per element
 * H(0) = 1 as in snn.c's neurons: a membrane exactly at v_threshold fires (NIR writes v > v_th;
 * they differ only on that set of measure zero). Membranes start at rest: v_leak where the node
 * has one, else v_reset (IF), else 0; synaptic currents start at 0.
 * A LIF or IF that snn.c's own neuron computes exactly (one tau, threshold and reset for the
 * node, v_leak = v_reset, and r = 1 or r = tau / dt) runs on its fused kernel, snn_neuron_step,
 * so a graph snn_nir_write made reads back with the model's own arithmetic.
 */
#include <string.h>

#include "nir_run.h"
#include "autograd/autograd.h"
#include "nn/nn_internal.h"
#include "tensor/arena.h"
#include "tensor/error.h"

/* (N, shape...) */
static snn_shape batched(int64_t n, snn_shape shape)
{
    snn_shape s = {.ndim = shape.ndim + 1};
    s.dim[0] = n;
    for (int d = 0; d < shape.ndim; d++) s.dim[d + 1] = shape.dim[d];
    return s;
}

static snn_tensor *param(const snn_module *m, int index)
{
    return index >= 0 ? m->params[index].tensor : NULL;
}

/* One step of a leaky stage (nir_run.h): advances *v and returns the spikes z, or v itself for
 * a stage that does not fire. */
static snn_tensor *stage_step(const snn_module *stage, snn_tensor *x, snn_tensor **v,
                              snn_surrogate surrogate)
{
    const nir_params_impl *p = stage->impl;
    snn_tensor *decay = param(stage, p->decay), *v_leak = param(stage, p->v_leak);
    snn_tensor *v_reset = param(stage, p->v_reset);
    /* at t = 0 the previous membrane is the rest value, a (shape) tensor that broadcasts */
    snn_tensor *previous = *v ? *v : v_leak ? v_leak : v_reset;
    snn_tensor *h = snn_mul(x, param(stage, p->gain));                        /* gain x[t] */
    if (previous && decay) {
        snn_tensor *leak = v_leak ? snn_sub(v_leak, previous) : snn_neg(previous);
        h = snn_add(snn_add(previous, snn_mul(decay, leak)), h);
    } else if (previous) {
        h = snn_add(previous, h);
    }
    if (!p->spiking) return *v = h;
    /* z = H(v - v_threshold); v = v - z (v - v_reset) */
    snn_tensor *z = snn_heaviside(snn_sub(h, param(stage, p->v_threshold)), surrogate);
    *v = snn_sub(h, snn_mul(z, snn_sub(h, v_reset)));
    return *v ? z : NULL;
}

/* Delay: out = sum over its delays d_k of mask_k x[t - d_k] (x[t - d] alone for one delay);
 * `past` holds the node's last `history` inputs, past[s % history] = x[s]. */
static snn_tensor *delay_step(const snn_module *params, snn_tensor *const *past, int history,
                              int t, snn_shape zero_shape, snn_device device)
{
    const nir_params_impl *p = params->impl;
    snn_tensor *out = NULL;
    for (int k = 0; k < p->n_delays; k++) {
        int s = t - p->delays[k];
        if (s < 0) continue;
        snn_tensor *x = past[s % history];
        if (p->n_delays > 1) x = snn_mul(x, nir_time_step(param(params, p->values), k));
        out = out ? snn_add(out, x) : x;
    }
    return out ? out : snn_zeros(zero_shape, device);
}

/* The input x at step t: x itself (N, ...) or its step t of (T, N, ...). */
static snn_tensor *input_at(snn_tensor *x, bool sequence, int t)
{
    return sequence ? nir_time_step(x, t) : x;
}

snn_status nir_run_steps(snn_module *m, snn_tensor *x, snn_tensor ***outputs, int *steps)
{
    const char *fn = "NIRGraph";
    nir_run *g = m->impl;
    char want[96], got[96];
    if (snn_check_tensor(fn, "x", x)) return snn_last_status();
    const int nd = g->in_shape.ndim;
    bool sequence = x->shape.ndim == nd + 2, fits = sequence || x->shape.ndim == nd + 1;
    for (int d = 0; fits && d < nd; d++)
        fits = x->shape.dim[x->shape.ndim - nd + d] == g->in_shape.dim[d];
    snn_shape example = batched(-1, g->in_shape);
    if (!fits)
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad argument 'x' (expected (N, ...) or (T, N, ...) "
                         "with the Input's per-sample shape, i.e. %s or (T, %s, got %s)", fn,
                         snn_shape_str(example, want, sizeof want), want + 1,
                         snn_shape_str(x->shape, got, sizeof got));
    const int T = sequence ? (int)x->shape.dim[0] : g->time_steps;
    if (T < 1)
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad argument 'x' (a sample without a time axis, "
                         "%s, is repeated over T steps, and this graph does not know T); hint: "
                         "give time_steps to snn_nir_load (snn-eval --T), or pass (T, N, ...)", fn,
                         snn_shape_str(x->shape, got, sizeof got));
    const int64_t n = x->shape.dim[sequence ? 1 : 0];
    const size_t slots = (size_t)g->n_nodes;
    int history = 0;
    for (int i = 0; i < g->n_nodes; i++) history += g->nodes[i].history;
    /* host scratch of this step: outputs now and at t-1, membranes, currents, kernel states */
    snn_tensor **out = snn_step_alloc(fn, (size_t)T * sizeof *out, SNN_CPU);
    snn_tensor **now = snn_step_alloc(fn, 4 * slots * sizeof *now, SNN_CPU);
    snn_tensor **past = snn_step_alloc(fn, (size_t)(history + 1) * sizeof *past, SNN_CPU);
    snn_neuron_state *kernel_state = snn_step_alloc(fn, slots * sizeof *kernel_state, SNN_CPU);
    if (!out || !now || !past || !kernel_state) return snn_last_status();
    memset(now, 0, 4 * slots * sizeof *now);
    snn_tensor **before = now + slots, **v = before + slots, **current = v + slots;
    for (int i = 0; i < g->n_nodes; i++) snn_neuron_state_reset(&kernel_state[i]);
    for (int t = 0; t < T; t++) {
        int ring = 0; /* where node i's inputs of the past start in `past` */
        for (int i = 0; i < g->n_nodes; i++) {
            const run_node *node = &g->nodes[i];
            snn_module *child = node->child >= 0 ? m->children[node->child] : NULL;
            snn_tensor *in = node->kind == NIR_INPUT ? input_at(x, sequence, t) : NULL;
            for (int k = 0; k < node->n_inputs; k++) {
                const run_input *e = &g->inputs[node->first_input + k];
                snn_tensor *term = e->previous ? before[e->from] : now[e->from];
                if (term) in = in ? snn_add(in, term) : term; /* converging edges sum */
            }
            if (!in) /* only back edges feed it, at t = 0: they carry zeros */
                in = snn_zeros(batched(n, node->in), x->device);
            snn_tensor *y = NULL;
            switch (node->kind) {
            case NIR_INPUT:
            case NIR_OUTPUT: y = in; break;
            case NIR_AFFINE:
            case NIR_CONV2D:
            case NIR_AVGPOOL2D: y = snn_module_forward(child, in); break;
            case NIR_SUMPOOL2D: y = snn_scale(snn_module_forward(child, in), node->scale); break;
            case NIR_FLATTEN: y = snn_reshape(in, batched(n, node->out)); break;
            case NIR_SCALE: y = snn_mul(in, param(child, ((nir_params_impl *)child->impl)->values));
                break;
            case NIR_THRESHOLD: {
                snn_tensor *theta = param(child, ((nir_params_impl *)child->impl)->values);
                y = snn_add_scalar(snn_neg(snn_heaviside(snn_sub(theta, in), g->surrogate)), 1.0f);
                break;
            }
            case NIR_DELAY:
                past[ring + t % node->history] = in;
                y = delay_step(child, past + ring, node->history, t, batched(n, node->out),
                               x->device);
                break;
            case NIR_CUBALIF:
            case NIR_CUBALI:
                in = stage_step(m->children[node->synapse], in, &current[i], g->surrogate);
                y = in ? stage_step(child, in, &v[i], g->surrogate) : NULL;
                break;
            default: /* LIF, IF, LI, I */
                if (node->kernel_neuron)
                    y = snn_neuron_step(in, &((snn_neuron_layer_impl *)child->impl)->config, NULL,
                                        &kernel_state[i], NULL);
                else
                    y = stage_step(child, in, &v[i], g->surrogate);
            }
            if (!y) {
                char why[512];
                snprintf(why, sizeof why, "%s", snn_last_error());
                return snn_error(snn_last_status(), "%s: node '%s' (%s) at step %d: %s", fn,
                                 node->name, nir_kind_name(node->kind), t, why);
            }
            now[i] = y;
            ring += node->history;
        }
        out[t] = now[g->output];
        memcpy(before, now, slots * sizeof *now);
    }
    *outputs = out;
    *steps = T;
    return SNN_OK;
}

/* forward: the mean over the T steps of the Output node, (N, ...) */
static snn_tensor *graph_forward(snn_module *m, snn_tensor *x)
{
    snn_tensor **out;
    int T;
    if (nir_run_steps(m, x, &out, &T) != SNN_OK) return NULL;
    snn_tensor *sum = out[0];
    for (int t = 1; t < T; t++) sum = snn_add(sum, out[t]);
    return snn_scale(sum, 1.0f / (float)T);
}

static void graph_free(snn_module *m)
{
    nir_run *g = m->impl;
    nir_graph_free(&g->graph);
    snn_free(g->nodes, (size_t)g->n_nodes * sizeof *g->nodes, SNN_CPU);
    snn_free(g->inputs, (size_t)g->n_inputs * sizeof *g->inputs, SNN_CPU);
    snn_free(g, sizeof *g, SNN_CPU);
}

const snn_module_ops nir_graph_ops = {"NIRGraph", graph_forward, graph_free, NULL};

snn_tensor *snn_nir_forward_steps(snn_module *graph, snn_tensor *x)
{
    if (!graph || graph->ops != &nir_graph_ops)
        return snn_error_null(SNN_ERR_ARGUMENT, "snn_nir_forward_steps: bad argument 'graph' "
                              "(expected a module made by snn_nir_load or snn_nir_read)");
    snn_tensor **out;
    int T;
    if (nir_run_steps(graph, x, &out, &T) != SNN_OK) return NULL;
    return nir_time_stack(out, T);
}

/* ---- NIRParams: a node's parameters, stepped by the graph ---------------------------------- */

static snn_tensor *params_forward(snn_module *m, snn_tensor *x)
{
    (void)x;
    return snn_error_null(SNN_ERR_STATE, "NIRParams '%s': holds a NIR node's parameters and "
                          "steps only inside its NIRGraph (run the graph)", m->name);
}

static void params_free(snn_module *m)
{
    snn_free(m->impl, sizeof(nir_params_impl), SNN_CPU);
}

const snn_module_ops nir_params_ops = {"NIRParams", params_forward, params_free, NULL};
