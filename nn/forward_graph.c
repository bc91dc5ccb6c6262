/*
 * forward_graph.c - an inference forward of fixed input shape, recorded once and replayed with
 * one launch: a CUDA Graph of the eval-mode, no-grad forward of a model.
 *
 * Why: at batch 1 a spiking ResNet-18 forward is ~150 small kernels, each a few microseconds of
 * GPU work behind a few microseconds of host-side launch; the host is the bottleneck. A graph
 * hands the whole sequence to the driver at once.
 *
 * How: the graph owns one step, opened by snn_forward_graph_new and closed by
 * snn_forward_graph_free. In it sit the input buffer and, after a capture, every tensor the
 * forward made, the output included, at addresses the graph has baked in. new runs the forward
 * once eagerly in a nested step (so the step arena grows its blocks and cuBLAS picks its
 * kernels), ends that step (the blocks stay: arenas only coalesce at depth 0), then records
 * the same forward on the stream: the arena hands out the same bytes again, so nothing is
 * allocated while recording. run copies the input into the buffer and launches the graph.
 *
 *     snn_module_train(model, false);
 *     snn_forward_graph *g = snn_forward_graph_new(model, SNN_SHAPE(1, 3, 32, 32), SNN_CUDA);
 *     for (...) { snn_tensor *logits = snn_forward_graph_run(g, x); ... }
 *     snn_forward_graph_free(g);
 *
 * Rules that follow from the recording: parameters may change in place (an optimizer step, a
 * checkpoint load) and the replay reads the new values, but the model's structure, its mode,
 * the precision and the conv path are the ones recorded. Steps the caller opens while the
 * graph lives nest inside its step, so free it in the scope it was made in, after those steps
 * end. On the CPU there is nothing to record: run is the eager forward in the caller's step.
 */
#include "nn.h"
#include "tensor/error.h"
#ifdef SNN_WITH_CUDA
#include "tensor/cuda_options.h"
#endif

struct snn_forward_graph {
    snn_module *model;
    snn_device device;
    snn_shape shape;
    int depth;              /* snn_step_depth() inside the graph's step */
    snn_tensor *input;      /* CUDA: in the graph's step, at the address the graph reads */
    snn_tensor *output;     /* CUDA: the recorded forward's result */
    void *graph;            /* CUDA: the instantiated graph */
};

static bool same_shape(snn_shape a, snn_shape b)
{
    if (a.ndim != b.ndim) return false;
    for (int i = 0; i < a.ndim; i++)
        if (a.dim[i] != b.dim[i]) return false;
    return true;
}

static snn_tensor *eval_forward(snn_module *model, snn_tensor *x)
{
    snn_no_grad_begin();
    snn_tensor *out = snn_module_forward(model, x);
    snn_no_grad_end();
    return out;
}

snn_forward_graph *snn_forward_graph_new(snn_module *model, snn_shape input_shape, snn_device device)
{
    const char *fn = "snn_forward_graph_new";
    if (!model) return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument 'model' (NULL)", fn);
    if (model->training)
        return snn_error_null(SNN_ERR_STATE, "%s: the model is in training mode; hint: "
                              "snn_module_train(model, false) first (a graph records the eval "
                              "forward)", fn);
    if (input_shape.ndim < 1 || input_shape.ndim > SNN_MAX_DIMS)
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument 'input_shape' (expected 1 to %d "
                              "dims, got %d)", fn, SNN_MAX_DIMS, input_shape.ndim);
    snn_forward_graph *g = snn_alloc(sizeof *g, SNN_CPU);
    if (!g) return snn_error_null(SNN_ERR_MEMORY, "%s: out of host memory", fn);
    *g = (snn_forward_graph){.model = model, .device = device, .shape = input_shape};
    if (device == SNN_CPU) return g; /* nothing to record */
#ifdef SNN_WITH_CUDA
    if (snn_step_begin() != SNN_OK) goto fail_no_step;
    g->depth = snn_step_depth();
    g->input = snn_empty(input_shape, device);
    if (!g->input || snn_tensor_fill(g->input, 0.0f) != SNN_OK) goto fail;
    /* 1. eagerly, in a nested step: the arena grows, cuBLAS and the kernels warm up */
    if (snn_step_begin() != SNN_OK) goto fail;
    snn_tensor *warm = eval_forward(model, g->input);
    snn_step_end();
    if (!warm) goto fail;
    /* 2. recorded: the same allocations land on the same bytes */
    snn_synchronize(device);
    if (snn_cuda_graph_capture_begin() != SNN_OK) goto fail;
    g->output = eval_forward(model, g->input);
    g->graph = snn_cuda_graph_capture_end();
    if (!g->output || !g->graph) {
        if (g->graph) snn_cuda_graph_free(g->graph);
        if (!g->output) /* the forward's message says why; the capture must still be closed */
            snn_error(SNN_ERR_STATE, "%s: the recorded forward failed: %s", fn, snn_last_error());
        goto fail;
    }
    return g;
fail:
    snn_step_end();
fail_no_step:
    snn_free(g, sizeof *g, SNN_CPU);
    return NULL;
#else
    snn_free(g, sizeof *g, SNN_CPU);
    return snn_error_null(SNN_ERR_UNSUPPORTED, "%s: this build has no CUDA (configure with "
                          "-DSNN_CUDA=ON)", fn);
#endif
}

snn_tensor *snn_forward_graph_run(snn_forward_graph *g, const snn_tensor *x)
{
    const char *fn = "snn_forward_graph_run";
    if (!g) return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument 'graph' (NULL)", fn);
    if (snn_check_tensor(fn, "x", x)) return NULL;
    if (!same_shape(x->shape, g->shape) || x->device != g->device) {
        char want[96], got[96];
        snn_shape_str(g->shape, want, sizeof want);
        snn_shape_str(x->shape, got, sizeof got);
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument 'x' (the graph was recorded "
                              "for %s on %s, got %s on %s)", fn, want, snn_device_name(g->device),
                              got, snn_device_name(x->device));
    }
    if (g->device == SNN_CPU) return eval_forward(g->model, (snn_tensor *)x);
#ifdef SNN_WITH_CUDA
    if (snn_step_depth() < g->depth)
        return snn_error_null(SNN_ERR_STATE, "%s: the graph's step was ended by the caller; "
                              "hint: end your own steps before snn_forward_graph_free", fn);
    if (snn_tensor_copy(g->input, x) != SNN_OK) return NULL;
    if (snn_cuda_graph_launch(g->graph) != SNN_OK) return NULL;
    return g->output;
#else
    return NULL;
#endif
}

void snn_forward_graph_free(snn_forward_graph *g)
{
    if (!g) return;
#ifdef SNN_WITH_CUDA
    if (g->device != SNN_CPU) {
        snn_synchronize(g->device);
        snn_cuda_graph_free(g->graph);
        SNN_ASSERT(snn_step_depth() == g->depth && "snn_forward_graph_free inside a step opened after it");
        snn_step_end();
    }
#endif
    snn_free(g, sizeof *g, SNN_CPU);
}
