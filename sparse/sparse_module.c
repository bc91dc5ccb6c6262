#define _POSIX_C_SOURCE 200809L /* clock_gettime: gcc -fopenmp declares it anyway, clang not */
/*
 * sparse_module.c - the SparseConv2d module: a conv that runs the sparse kernels on inputs whose
 * silent channels its source neuron layers' activity marks, and measures itself while the pass
 * (sparsify.c) calibrates it.
 *
 * Forward of a SparseConv2d. Dense (snn_conv2d, as before) when a tape is being recorded (the
 * sparse path has no backward), on CUDA in a build without SNN_CUDA, when the source's activity
 * is not from this step or does not match the input, or when the layer chose dense. Otherwise,
 * on the CPU, the batch's active channels are counted from the activity (T*N*C floats, cheap)
 * and a batch denser than calibrated - mean active channels per image above the calibrated 95th
 * percentile - falls back to dense; else the sparse kernel runs. On CUDA there is no density
 * check (it would need a host sync): sparse_conv.cu takes any density in one launch. On both, a
 * batch nearer one sample than the calibration batch runs the path chosen by a second,
 * one-sample calibration round (a kernel's speed-up depends on the batch: see sparse_forward).
 *
 * Calibration: every batch runs without a tape; each SparseConv2d runs dense (its output is
 * what the next layer sees), then times the GEMM and event kernels on the same tensors, and
 * records firing rate, silent planes, the active-channel histogram and max |sparse - dense|
 * (on CUDA the kernels are timed between device syncs; statistics from host copies).
 * sparsify.c decides from these.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "sparse_module.h"
#include "tensor/arena.h"
#include "tensor/error.h"

static double seconds_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The activity of the sources for this step, when it matches x (T*N images of C_in channels).
 * Several sources (a residual sum of spike tensors): their counts added, which is nonzero where
 * any operand fired - an op on the device, so no host sync on CUDA. */
static const snn_tensor *source_activity(const sparse_impl *s, const snn_tensor *x, int images)
{
    snn_tensor *sum = NULL;
    for (int i = 0; i < s->n_sources; i++) {
        const snn_neuron_layer_impl *n = s->sources[i]->impl;
        if (!n->last_activity || n->last_step != snn_step_id() || !snn_step_is_open(n->last_step))
            return NULL;
        snn_tensor *a = n->last_activity;
        if (a->device != x->device || a->shape.ndim != 2 || a->shape.dim[0] != images ||
            a->shape.dim[1] != s->conv.in_channels)
            return NULL;
        sum = sum ? snn_add(sum, a) : a;
        if (!sum) {
            snn_clear_error();
            return NULL;
        }
    }
    return sum;
}

/* Conv dims of x for this layer; false when x is not (N, C, H, W) or (T, N, C, H, W). */
static bool conv_dims(const sparse_impl *s, const snn_tensor *x, snn_conv2d_dims *d, snn_shape *out)
{
    int nd = x->shape.ndim;
    if ((nd != 4 && nd != 5) || x->shape.dim[nd - 3] != s->conv.in_channels) return false;
    int64_t images = nd == 5 ? x->shape.dim[0] * x->shape.dim[1] : x->shape.dim[0];
    *d = (snn_conv2d_dims){(int)images, s->conv.in_channels, (int)x->shape.dim[nd - 2],
                           (int)x->shape.dim[nd - 1], s->conv.out_channels, s->conv.kernel,
                           s->conv.kernel, s->conv.stride, s->conv.pad, 0, 0};
    if (d->H + 2 * d->pad < d->KH || d->W + 2 * d->pad < d->KW) return false;
    d->H_out = (d->H + 2 * d->pad - d->KH) / d->stride + 1;
    d->W_out = (d->W + 2 * d->pad - d->KW) / d->stride + 1;
    *out = x->shape;
    out->dim[nd - 3] = d->C_out;
    out->dim[nd - 2] = d->H_out;
    out->dim[nd - 1] = d->W_out;
    return true;
}

/* Runs one sparse kernel into a new step tensor; NULL on failure (message set). */
static snn_tensor *run_sparse(const sparse_impl *s, snn_module *m, snn_tensor *x,
                              const snn_conv2d_dims *d, snn_shape shape, const snn_tensor *act,
                              snn_sparse_path path)
{
    snn_tensor *y = snn_step_tensor("SparseConv2d", shape, x->device);
    if (!y) return NULL;
    const float *bias = s->conv.bias ? m->params[1].tensor->data : NULL;
#ifdef SNN_WITH_CUDA
    if (x->device == SNN_CUDA) {
        /* any density, no host sync (sparse_conv.cu); the transposed weight kept since the
         * swap, or made for this call when the model moved to the GPU afterwards */
        snn_status st = s->wt_device
            ? snn_sparse_conv2d_prepared_cuda(y->data, x->data, s->wt_device, bias, d, act->data,
                                              path)
            : snn_sparse_conv2d_cuda(y->data, x->data, m->params[0].tensor->data, bias, d,
                                     act->data, path);
        return st == SNN_OK ? y : NULL;
    }
#endif
    if (snn_sparse_conv2d_cpu(y->data, x->data, s->wt, bias, d, act->data, path) != SNN_OK)
        return NULL;
    return y;
}

/* A host copy of a tensor's data (a step buffer); NULL on failure. */
static float *host_copy(const snn_tensor *t)
{
    if (t->device == SNN_CPU) return t->data;
    float *h = snn_step_alloc("SparseConv2d (calibration)", (size_t)t->numel * sizeof(float), SNN_CPU);
    if (h && snn_tensor_copy_to_host(t, h) != SNN_OK) return NULL;
    return h;
}

/* Measures the sparse kernels on this layer's real tensors against the dense output `dense`.
 * Everything it makes - the host copies, each kernel's output - is scratch, given back to both
 * arenas as soon as it has been compared: held to the end of the step (as before), a
 * calibration forward of a converted ResNet-18 at T = 51 kept three outputs per swapped conv on
 * the GPU (up to 856 MB each at 64 images) and five host copies, beside the forward itself. */
static void calibrate(sparse_impl *s, snn_module *m, snn_tensor *x, const snn_conv2d_dims *d,
                      snn_shape shape, const snn_tensor *act, snn_tensor *dense, double dense_s)
{
    const bool gpu = x->device != SNN_CPU;
    const snn_step_scratch host_mark = snn_step_scratch_mark(SNN_CPU);
    const snn_step_scratch device_mark = snn_step_scratch_mark(x->device);
    const float *a = host_copy(act), *xh = host_copy(x), *dh = host_copy(dense);
    if (!a || !xh || !dh) {
        snn_clear_error();
        if (gpu) snn_step_scratch_release(x->device, device_mark);
        snn_step_scratch_release(SNN_CPU, host_mark);
        return;
    }
    sparse_timings *tm = s->calibrating_one ? &s->at_one : &s->at_batch;
    if (!s->calibrating_one) {   /* statistics: the batch round's */
        for (int n = 0; n < d->N; n++) {
            int on = 0;
            for (int c = 0; c < d->C_in; c++) on += a[(int64_t)n * d->C_in + c] != 0.0f;
            s->hist[on]++;
            s->silent += d->C_in - on;
        }
        s->planes += (double)d->N * d->C_in;
        for (int64_t i = 0; i < x->numel; i++) s->nonzero += xh[i] != 0.0f;
        s->inputs += (double)x->numel;
        s->H = d->H;
        s->W = d->W;
    }
    tm->dense_s += dense_s;
    if (!tm->batches || d->N < tm->images) tm->images = d->N;
    tm->batches++;
    /* GEMM, EVENT, and on CUDA the event path with weights staged in shared memory (the CPU
     * has no such kernel: it would time its event path twice); one output held at a time */
    static const snn_sparse_path paths[3] = {SNN_SPARSE_GEMM, SNN_SPARSE_EVENT,
                                             SNN_SPARSE_EVENT_SMEM};
    double *const spent[3] = {&tm->gemm_s, &tm->event_s, &tm->event_smem_s};
    for (int k = 0; k < (gpu ? 3 : 2); k++) {
        const snn_sparse_path path = paths[k];
        const snn_step_scratch host_path = snn_step_scratch_mark(SNN_CPU);
        const snn_step_scratch device_path = snn_step_scratch_mark(x->device);
        snn_synchronize(x->device);
        double t0 = seconds_now();
        snn_tensor *y = run_sparse(s, m, x, d, shape, act, path);
        snn_synchronize(x->device);
        double t = seconds_now() - t0;
        const float *yh = y ? host_copy(y) : NULL;
        if (!yh) {
            snn_clear_error();
            t = INFINITY;
        } else {
            for (int64_t i = 0; i < y->numel; i++) {
                double diff = fabs((double)yh[i] - (double)dh[i]);
                if (!(diff <= s->max_diff)) s->max_diff = diff;  /* NaN propagates */
            }
        }
        if (gpu) snn_step_scratch_release(x->device, device_path);
        snn_step_scratch_release(SNN_CPU, host_path);
        *spent[k] += t;
    }
    if (gpu) snn_step_scratch_release(x->device, device_mark);
    snn_step_scratch_release(SNN_CPU, host_mark);
}

static snn_tensor *sparse_forward(snn_module *m, snn_tensor *x)
{
    sparse_impl *s = m->impl;
    snn_tensor *w = m->params[0].tensor, *b = s->conv.bias ? m->params[1].tensor : NULL;
    snn_tensor *inputs[3] = {x, w, b};
    snn_conv2d_dims d;
    snn_shape shape;
    const snn_tensor *act = NULL;
#ifdef SNN_WITH_CUDA
    const bool device_ok = x && (x->device == SNN_CPU || x->device == SNN_CUDA);
#else
    const bool device_ok = x && x->device == SNN_CPU;
#endif
    bool sparse_ok = device_ok && !snn_should_record(3, inputs) && conv_dims(s, x, &d, &shape) &&
                     s->wt && (act = source_activity(s, x, d.N)) != NULL;
    if (!sparse_ok || s->disabled ||
        (s->path == SNN_SPARSE_DENSE && s->path_one == SNN_SPARSE_DENSE && !s->calibrating))
        return snn_conv2d(x, w, b, s->conv.stride, s->conv.pad);
    if (s->calibrating) {
        snn_synchronize(x->device);
        double t0 = seconds_now();
        snn_tensor *y = snn_conv2d(x, w, b, s->conv.stride, s->conv.pad);
        snn_synchronize(x->device);
        double t = seconds_now() - t0;
        if (y) calibrate(s, m, x, &d, shape, act, y, t);
        return y;
    }
    /* The batch size picks the timings that apply: a batch nearer one sample than the
     * calibration batch on a log scale (N^2 < calibrated x one-sample images) runs the path the
     * one-sample round chose - on the CPU as on the GPU, a kernel that wins on 256 images can
     * lose on 4 (the GEMM path's packing, the event path's per-image setup), and the GPU's
     * sparse kernels fill it by images. Without that round (calibration batches of one sample),
     * CUDA keeps the older rule: under half the calibrated images, dense. */
    const int calibrated = s->at_batch.images, one = s->at_one.batches ? s->at_one.images : 0;
    snn_sparse_path path = s->path;
    if (one > 0 && (int64_t)d.N * d.N < (int64_t)calibrated * one)
        path = s->path_one;
    else if (one == 0 && x->device == SNN_CUDA && 2 * d.N < calibrated)
        path = SNN_SPARSE_DENSE;
    if (path == SNN_SPARSE_DENSE) {
        s->fallbacks++;
        return snn_conv2d(x, w, b, s->conv.stride, s->conv.pad);
    }
    /* CPU: a batch denser than calibrated goes dense (a read of T*N*C counts). CUDA: no density
     * check, since reading the activity would sync (the kernels take any density). */
    if (x->device == SNN_CPU) {
        int64_t active = 0;
        for (int64_t i = 0; i < act->numel; i++) active += act->data[i] != 0.0f;
        if (active > (int64_t)s->active_limit * d.N) {
            s->fallbacks++;
            return snn_conv2d(x, w, b, s->conv.stride, s->conv.pad);
        }
    }
    s->sparse_calls++;
    return run_sparse(s, m, x, &d, shape, act, path);
}

static void sparse_free(snn_module *m)
{
    sparse_impl *s = m->impl;
    snn_free(s->wt, s->wt_floats * sizeof(float), SNN_CPU);
    snn_free(s->wt_device, s->wt_device_floats * sizeof(float), SNN_CUDA);
    snn_free(s->hist, (size_t)(s->conv.in_channels + 1) * sizeof *s->hist, SNN_CPU);
    snn_free(s, sizeof *s, SNN_CPU);
}

static const snn_module_ops sparse_conv_ops = {"SparseConv2d", sparse_forward, sparse_free, NULL};

bool snn_is_sparse_conv(const snn_module *m) { return m && m->ops == &sparse_conv_ops; }

snn_module *snn_sparse_module_new(const snn_conv_impl *c, int n_sources)
{
    sparse_impl *s = snn_alloc(sizeof *s, SNN_CPU);
    if (!s) return snn_error_null(SNN_ERR_MEMORY, "snn_sparsify: out of host memory");
    *s = (sparse_impl){.conv = *c, .n_sources = n_sources, .path = SNN_SPARSE_DENSE,
                       .path_one = SNN_SPARSE_DENSE};
    s->wt_floats = snn_sparse_weights_floats(c->out_channels, c->in_channels, c->kernel, c->kernel);
    s->wt = snn_alloc(s->wt_floats * sizeof(float), SNN_CPU);
    s->hist = snn_alloc((size_t)(c->in_channels + 1) * sizeof *s->hist, SNN_CPU);
    snn_module *m = s->wt && s->hist ? snn_module_new(&sparse_conv_ops, s) : NULL;
    if (!m) {
        snn_free(s->wt, s->wt_floats * sizeof(float), SNN_CPU);
        snn_free(s->hist, (size_t)(c->in_channels + 1) * sizeof *s->hist, SNN_CPU);
        snn_free(s, sizeof *s, SNN_CPU);
        return snn_error_null(SNN_ERR_MEMORY, "snn_sparsify: out of host memory");
    }
    return m;
}

/* wt <- the module's weight, copied to the host when it lives on the GPU; and on the GPU also
 * wt_device, the same layout made there (the CUDA kernels' form of the weight). */
snn_status snn_sparse_module_prepare(snn_module *m)
{
    sparse_impl *s = m->impl;
    const snn_tensor *w = m->params[0].tensor;
    size_t bytes = (size_t)w->numel * sizeof(float);
    float *host = snn_alloc(bytes, SNN_CPU);
    if (!host) return snn_error(SNN_ERR_MEMORY, "snn_sparsify: out of host memory");
    snn_status st = snn_tensor_copy_to_host(w, host);
    if (st == SNN_OK)
        snn_sparse_prepare_weights(s->wt, host, s->conv.out_channels, s->conv.in_channels,
                                   s->conv.kernel, s->conv.kernel);
    snn_free(host, bytes, SNN_CPU);
    snn_free(s->wt_device, s->wt_device_floats * sizeof(float), SNN_CUDA);
    s->wt_device = NULL;
    s->wt_device_floats = 0;
#ifdef SNN_WITH_CUDA
    /* a weight past 2^31 floats has no CUDA sparse kernel (it reports so when run) */
    if (st == SNN_OK && w->device == SNN_CUDA && w->numel <= INT32_MAX) {
        s->wt_device = snn_alloc(bytes, SNN_CUDA);
        if (!s->wt_device) return snn_error(SNN_ERR_MEMORY, "snn_sparsify: out of device memory");
        s->wt_device_floats = (size_t)w->numel;
        snn_sparse_transpose_weights_cuda(s->wt_device, w->data, s->conv.out_channels,
                                          w->numel / s->conv.out_channels);
    }
#endif
    return st;
}

snn_status snn_sparse_refresh_weights(snn_module *model)
{
    if (!model) return SNN_OK;
    if (snn_is_sparse_conv(model)) {
        snn_status st = snn_sparse_module_prepare(model);
        if (st != SNN_OK) return st;
    }
    for (int i = 0; i < model->n_children; i++) {
        snn_status st = snn_sparse_refresh_weights(model->children[i]);
        if (st != SNN_OK) return st;
    }
    return SNN_OK;
}
