/*
 * synops.c - the SynOps count of nn/synops.h: what each conv and linear layer of a model did
 * with the inputs it really received, accumulates (AC) for spikes, multiply-accumulates (MAC)
 * for real values, and the ANN equivalent.
 *
 * Dimension glossary: T time steps, N batch, C channels, H, W the input plane, K kernel, OH, OW
 * the output plane, F features.
 *
 * The fan-out of a conv's input element (c, h, w) is C_out fh(h) fw(w): fh(h) counts the output
 * rows oh whose window [oh stride - pad, oh stride - pad + K) covers row h. In the middle of a
 * plane that is about K / stride; at an edge, where windows reach into the padding, fewer. The
 * ops of a forward are then
 *     AC  = C_out sum_{h, w} fh(h) fw(w) S(h, w),   S(h, w) = sum_{t, n, c} x[t, n, c, h, w]
 *     dense = rows C_out (sum_h fh(h)) (sum_w fw(w)),   rows = the (t, n, c) planes
 * so one pass over x, adding each plane into S (H W doubles), gives both; the same pass notes
 * whether any value was other than 0 and 1, or other than a spike count (AC counts a SEW sum's
 * 2 as two spikes). A linear layer's fan-out is out_features for every input: AC = F_out sum x,
 * dense = numel F_out.
 *
 * Memory traffic: reads x once (on CUDA: copies it to the host in slices of STAGING_FLOATS
 * first); writes H W doubles.
 *
 * Test: tests/test_synops.c (hand-counted layers with known spikes).
 */
#include <string.h>
#include <time.h>

#include "model_internal.h"
#include "nn_internal.h"
#include "synops.h"
#include "tensor/error.h"

/* The most floats one slice of a device tensor copied to the host holds (16 MiB). */
#define STAGING_FLOATS ((size_t)1 << 22)

/* A layer of the model that may be counted, found when the count is armed. */
typedef struct synops_slot {
    const snn_module *module;
    char name[112];
    int index; /* into layers[]: -1 until its first forward */
} synops_slot;

struct snn_synops {
    snn_module *model;        /* the tree counted */
    snn_plan *plan;           /* the plan its modules point to, which points back here */
    snn_plan *own_plan;       /* a module outside any model: a plan of the count's own */
    synops_slot *slots;
    int n_slots;
    snn_synops_layer *layers; /* n_slots entries; the first count are used, in forward order */
    double *spike_ops;        /* per layer: sum of x fan-out, its AC once it proves spike-fed */
    int count;
    snn_status status;        /* the first error met while counting */
    char message[256];
    double seconds;           /* spent inside snn_synops_observe */
    /* scratch, grown as needed */
    float *staging;           /* a device tensor's slice on the host */
    size_t staging_floats;
    double *plane_sum;        /* S(h, w) of the forward being counted */
    size_t plane_floats;
    int *fan;                 /* fh (H entries) then fw (W entries) */
    size_t fan_ints;
};

static bool counted_kind(const snn_module *m)
{
    return m->ops == &snn_conv2d_ops || m->ops == &snn_linear_ops ||
           m->ops == &snn_first_step_linear_ops || m->ops == &snn_recurrent_layer_ops;
}

/* ---- arming --------------------------------------------------------------------------------- */

static int count_layers(const snn_module *m)
{
    int n = counted_kind(m);
    for (int i = 0; i < m->n_children; i++) n += count_layers(m->children[i]);
    return n;
}

static int find_layers(const snn_module *m, const char *prefix, synops_slot *slots, int at)
{
    for (int i = 0; i < m->n_children; i++) {
        const snn_module *child = m->children[i];
        char name[112];
        snprintf(name, sizeof name, "%s%s%s", prefix, prefix[0] ? "." : "", child->name);
        if (counted_kind(child)) {
            slots[at].module = child;
            snprintf(slots[at].name, sizeof slots[at].name, "%s", name);
            slots[at++].index = -1;
        }
        at = find_layers(child, name, slots, at);
    }
    return at;
}

snn_synops *snn_synops_new(snn_module *model)
{
    const char *fn = "snn_synops_new";
    if (!model)
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument 'model' (expected a model or "
                              "a module, got NULL)", fn);
    /* a model's own plan; a module outside any model gets a plan of the count's, with no
     * option set: it runs as it did without one (nn/model_options.c) */
    snn_plan *plan = snn_model_config_of(model) ? &((snn_model_impl *)model->impl)->plan
                                                : model->plan;
    if (plan && plan->synops)
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument 'model' (expected one without "
                              "a count, got one already counted; snn_synops_free that first)",
                              fn);
    snn_synops *s = snn_alloc(sizeof *s, SNN_CPU);
    if (!s) return snn_error_null(SNN_ERR_MEMORY, "%s: out of host memory", fn);
    memset(s, 0, sizeof *s);
    s->model = model;
    s->n_slots = count_layers(model);
    if (!plan) {
        plan = s->own_plan = snn_alloc(sizeof *s->own_plan, SNN_CPU);
        if (plan) memset(plan, 0, sizeof *plan);
    }
    if (s->n_slots) {
        s->slots = snn_alloc((size_t)s->n_slots * sizeof *s->slots, SNN_CPU);
        s->layers = snn_alloc((size_t)s->n_slots * sizeof *s->layers, SNN_CPU);
        s->spike_ops = snn_alloc((size_t)s->n_slots * sizeof *s->spike_ops, SNN_CPU);
    }
    if (!plan || (s->n_slots && (!s->slots || !s->layers || !s->spike_ops))) {
        snn_synops_free(s);
        return snn_error_null(SNN_ERR_MEMORY, "%s: out of host memory", fn);
    }
    find_layers(model, "", s->slots, 0);
    s->plan = plan;
    snn_module_set_plan(model, plan); /* modules swapped in since (ann2snn) too */
    plan->synops = s;
    return s;
}

void snn_synops_stop(snn_synops *s)
{
    if (!s || !s->plan) return;
    if (s->plan->synops == s) s->plan->synops = NULL;
    if (s->own_plan) snn_module_set_plan(s->model, NULL); /* back outside any model */
    s->plan = NULL;
}

void snn_synops_free(snn_synops *s)
{
    if (!s) return;
    snn_synops_stop(s);
    snn_free(s->own_plan, sizeof *s->own_plan, SNN_CPU);
    snn_free(s->slots, (size_t)s->n_slots * sizeof *s->slots, SNN_CPU);
    snn_free(s->layers, (size_t)s->n_slots * sizeof *s->layers, SNN_CPU);
    snn_free(s->spike_ops, (size_t)s->n_slots * sizeof *s->spike_ops, SNN_CPU);
    snn_free(s->staging, s->staging_floats * sizeof *s->staging, SNN_CPU);
    snn_free(s->plane_sum, s->plane_floats * sizeof *s->plane_sum, SNN_CPU);
    snn_free(s->fan, s->fan_ints * sizeof *s->fan, SNN_CPU);
    snn_free(s, sizeof *s, SNN_CPU);
}

/* ---- counting ------------------------------------------------------------------------------- */

/* Notes the first error of the count (the forward goes on without it). */
static void count_failed(snn_synops *s, snn_status status, const char *what)
{
    if (s->status != SNN_OK) return;
    s->status = status;
    snprintf(s->message, sizeof s->message, "snn_synops: %s", what);
}

/* Grows *buf (holding *have items of `size` bytes) to at least `need`; false when out of
 * memory (the old buffer is kept). */
static bool grow(void **buf, size_t *have, size_t need, size_t size)
{
    if (*have >= need) return true;
    void *p = snn_alloc(need * size, SNN_CPU);
    if (!p) return false;
    snn_free(*buf, *have * size, SNN_CPU);
    *buf = p;
    *have = need;
    return true;
}

/* What sum_planes met besides 0 and 1 (bits of its result). */
enum { NOT_BINARY = 1, NOT_COUNT = 2 };

/* Adds n planes of v into sum[0..plane); returns whether every value was 0 or 1. One pass
 * without branches, so that the compiler vectorises it. */
static bool add_planes(double *restrict sum, const float *restrict v, int64_t n, int64_t plane)
{
    int binary = 1;
    for (int64_t p = 0; p < n; p++, v += plane)
        for (int64_t i = 0; i < plane; i++) {
            sum[i] += (double)v[i];
            binary &= (v[i] == 0.0f) | (v[i] == 1.0f);
        }
    return binary;
}

/* Whether every one of the n values is a spike count: an integer >= 0 (below 2^24, where every
 * integer is a float and (int) of it is exact). Asked only of values that are not all 0 and 1. */
static bool all_counts(const float *v, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (!(v[i] >= 0.0f && v[i] < 16777216.0f && (float)(int)v[i] == v[i])) return false;
    return true;
}

/* Adds x's values into plane_sum[0..plane), plane by plane (x holds a whole number of planes),
 * reading a device tensor through the staging buffer. Returns NOT_BINARY when a value other
 * than 0 and 1 came, with NOT_COUNT when one was no spike count (an integer >= 0) either; 0
 * when all were spikes; -1 when it could not read x (the count's error set). */
static int sum_planes(snn_synops *s, const snn_tensor *x, int64_t plane)
{
    const int64_t planes = x->numel / plane;
    int64_t per_slice = planes; /* planes read at once */
    const snn_kernels *k = NULL;
    if (x->device != SNN_CPU) {
        k = snn_kernels_for(x->device);
        per_slice = (int64_t)STAGING_FLOATS / plane;
        if (per_slice < 1) per_slice = 1;
        if (!k || !grow((void **)&s->staging, &s->staging_floats, (size_t)(per_slice * plane),
                        sizeof *s->staging)) {
            count_failed(s, SNN_ERR_MEMORY, "out of host memory for a slice of a device input");
            return -1;
        }
    }
    int met = 0;
    for (int64_t first = 0; first < planes; first += per_slice) {
        const int64_t n = planes - first < per_slice ? planes - first : per_slice;
        const float *v = x->data + first * plane;
        if (k) {
            k->copy(s->staging, v, (size_t)(n * plane) * sizeof *v, SNN_COPY_DEVICE_TO_HOST);
            k->synchronize();
            v = s->staging;
        }
        if (!add_planes(s->plane_sum, v, n, plane)) {
            met |= NOT_BINARY;
            if (!(met & NOT_COUNT) && !all_counts(v, n * plane)) met |= NOT_COUNT;
        }
    }
    return met;
}

/* fh[h] for h in [0, H): the output rows (of `out` rows) whose window covers input row h. */
static void window_cover(int *fh, int H, int out, int kernel, int stride, int pad)
{
    for (int h = 0; h < H; h++) fh[h] = 0;
    for (int o = 0; o < out; o++)
        for (int i = 0; i < kernel; i++) {
            const int h = o * stride - pad + i;
            if (h >= 0 && h < H) fh[h]++;
        }
}

/* The layer's record, made at its first forward; NULL for a module the count does not know. */
static snn_synops_layer *layer_of(snn_synops *s, const snn_module *m)
{
    for (int i = 0; i < s->n_slots; i++) {
        synops_slot *slot = &s->slots[i];
        if (slot->module != m) continue;
        if (slot->index < 0) {
            snn_synops_layer *l = &s->layers[s->count];
            memset(l, 0, sizeof *l);
            snprintf(l->name, sizeof l->name, "%s", slot->name);
            l->spikes = l->binary = true; /* until a value says otherwise */
            s->spike_ops[s->count] = 0.0;
            slot->index = s->count++;
        }
        return &s->layers[slot->index];
    }
    return NULL;
}

/* A conv's forward on x (N, C, H, W) or (T, N, C, H, W). */
static void count_conv(snn_synops *s, snn_synops_layer *l, const snn_module *m,
                       const snn_tensor *x)
{
    const snn_conv_impl *c = m->impl;
    const int nd = x->shape.ndim;
    if (nd != 4 && nd != 5) return; /* the conv refuses it with its own message */
    const int H = (int)x->shape.dim[nd - 2], W = (int)x->shape.dim[nd - 1];
    const int OH = (H + 2 * c->pad - c->kernel) / c->stride + 1;
    const int OW = (W + 2 * c->pad - c->kernel) / c->stride + 1;
    const int64_t plane = (int64_t)H * W, planes = x->numel / plane;
    if (OH < 1 || OW < 1 || planes < 1) return;
    if (!grow((void **)&s->plane_sum, &s->plane_floats, (size_t)plane, sizeof *s->plane_sum) ||
        !grow((void **)&s->fan, &s->fan_ints, (size_t)(H + W), sizeof *s->fan)) {
        count_failed(s, SNN_ERR_MEMORY, "out of host memory for a plane's sums");
        return;
    }
    memset(s->plane_sum, 0, (size_t)plane * sizeof *s->plane_sum);
    const int other = sum_planes(s, x, plane);
    if (other < 0) return;
    int *fh = s->fan, *fw = s->fan + H;
    window_cover(fh, H, OH, c->kernel, c->stride, c->pad);
    window_cover(fw, W, OW, c->kernel, c->stride, c->pad);
    double weighted = 0.0, sum = 0.0, fh_sum = 0.0, fw_sum = 0.0;
    for (int h = 0; h < H; h++) {
        fh_sum += fh[h];
        for (int w = 0; w < W; w++) {
            weighted += (double)fh[h] * fw[w] * s->plane_sum[(int64_t)h * W + w];
            sum += s->plane_sum[(int64_t)h * W + w];
        }
    }
    for (int w = 0; w < W; w++) fw_sum += fw[w];
    const int64_t N = x->shape.dim[nd - 4]; /* (N, C, ...) or (T, N, C, ...) */
    l->kind = "Conv2d";
    l->in_channels = c->in_channels, l->out_channels = c->out_channels;
    l->kernel = c->kernel, l->stride = c->stride, l->pad = c->pad;
    l->height = H, l->width = W;
    l->steps = nd == 5 ? x->shape.dim[0] : 1;
    l->samples += N;
    l->spikes = l->spikes && !(other & NOT_COUNT);
    l->binary = l->binary && !(other & NOT_BINARY);
    l->inputs += (double)x->numel;
    l->input_sum += sum;
    s->spike_ops[l - s->layers] += c->out_channels * weighted;
    l->dense_ops += (double)planes * c->out_channels * fh_sum * fw_sum;
    l->ann_mac += (double)N * c->in_channels * c->out_channels * fh_sum * fw_sum;
}

/* A linear layer's forward on x (..., F): (N, F) or (T, N, F). */
static void count_linear(snn_synops *s, snn_synops_layer *l, const snn_module *m,
                         const snn_tensor *x)
{
    const snn_tensor *weight = m->params[0].tensor; /* (F_out, F) */
    const int nd = x->shape.ndim;
    const int64_t F = nd ? x->shape.dim[nd - 1] : 0, F_out = weight->shape.dim[0];
    if (nd < 1 || F != weight->shape.dim[1] || x->numel < 1) return; /* refused by the layer */
    if (!grow((void **)&s->plane_sum, &s->plane_floats, (size_t)F, sizeof *s->plane_sum)) {
        count_failed(s, SNN_ERR_MEMORY, "out of host memory for a layer's sums");
        return;
    }
    memset(s->plane_sum, 0, (size_t)F * sizeof *s->plane_sum);
    const int other = sum_planes(s, x, F);
    if (other < 0) return;
    double sum = 0.0;
    for (int64_t i = 0; i < F; i++) sum += s->plane_sum[i];
    const int64_t N = nd >= 2 ? x->shape.dim[nd - 2] : 1;
    l->kind = "Linear";
    l->in_channels = (int)F, l->out_channels = (int)F_out;
    l->steps = nd >= 3 ? x->shape.dim[nd - 3] : 1;
    l->samples += N;
    l->spikes = l->spikes && !(other & NOT_COUNT);
    l->binary = l->binary && !(other & NOT_BINARY);
    l->inputs += (double)x->numel;
    l->input_sum += sum;
    s->spike_ops[l - s->layers] += (double)F_out * sum;
    l->dense_ops += (double)x->numel * (double)F_out;
    l->ann_mac += (double)N * (double)F * (double)F_out;
}

void snn_synops_observe(snn_synops *s, const snn_module *m, const snn_tensor *x)
{
    /* a recurrent layer's product reads its own spikes, not x: snn_synops_observe_recurrent */
    if (!counted_kind(m) || m->ops == &snn_recurrent_layer_ops || !x || s->status != SNN_OK)
        return;
    snn_synops_layer *l = layer_of(s, m);
    if (!l) return; /* not in the model when the count was armed */
    if (!x->data) {
        count_failed(s, SNN_ERR_STATE, "an input held as packed bits, which the count cannot "
                     "read; count forwards without a tape (snn_no_grad_begin)");
        return;
    }
    struct timespec t0, t1;
    timespec_get(&t0, TIME_UTC);
    if (m->ops == &snn_conv2d_ops) count_conv(s, l, m, x);
    else count_linear(s, l, m, x);
    l->forwards++;
    /* AC while every value so far was a spike; from the first other value on, MAC */
    l->ac = l->spikes ? s->spike_ops[l - s->layers] : 0.0;
    l->mac = l->spikes ? 0.0 : l->dense_ops;
    timespec_get(&t1, TIME_UTC);
    s->seconds += (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
}

/* A recurrent layer's product S[t-1] W_rec^T (nn/layer_recurrent.c) over the spikes (T, N, F)
 * its forward made: step t reads S[t-1], so the inputs are S[0..T-2] (S[-1] = 0 is never
 * multiplied), each spike fanned out to the F neurons: AC = F sum S[0..T-2], dense = (T-1) N F
 * F. Its ANN equivalent is the same product on real values at every step, an RNN over the same
 * T steps (a feed-forward layer's runs once per sample; a recurrence has no T = 1 form). */
void snn_synops_observe_recurrent(snn_synops *s, const snn_module *m, const snn_tensor *spikes)
{
    if (!spikes || spikes->shape.ndim != 3 || s->status != SNN_OK) return;
    snn_synops_layer *l = layer_of(s, m);
    if (!l) return; /* not in the model when the count was armed */
    if (!spikes->data) {
        count_failed(s, SNN_ERR_STATE, "a recurrent layer's spikes held as packed bits, which "
                     "the count cannot read; count forwards without a tape (snn_no_grad_begin)");
        return;
    }
    struct timespec t0, t1;
    timespec_get(&t0, TIME_UTC);
    const int64_t T = spikes->shape.dim[0], N = spikes->shape.dim[1], F = spikes->shape.dim[2];
    const int64_t read = T > 1 ? (T - 1) * N * F : 0; /* S[0..T-2] */
    int other = 0;
    double sum = 0.0;
    if (read > 0 && F > 0) {
        if (!grow((void **)&s->plane_sum, &s->plane_floats, (size_t)F, sizeof *s->plane_sum)) {
            count_failed(s, SNN_ERR_MEMORY, "out of host memory for a layer's sums");
            return;
        }
        memset(s->plane_sum, 0, (size_t)F * sizeof *s->plane_sum);
        snn_tensor head = *spikes; /* the first T-1 steps: a prefix of the same memory */
        head.numel = read;
        other = sum_planes(s, &head, F);
        if (other < 0) return;
        for (int64_t i = 0; i < F; i++) sum += s->plane_sum[i];
    }
    l->kind = "Recurrent";
    l->in_channels = l->out_channels = (int)F;
    l->steps = T;
    l->samples += N;
    l->spikes = l->spikes && !(other & NOT_COUNT);
    l->binary = l->binary && !(other & NOT_BINARY);
    l->inputs += (double)read;
    l->input_sum += sum;
    s->spike_ops[l - s->layers] += (double)F * sum;
    l->dense_ops += (double)read * (double)F;
    l->ann_mac += (double)read * (double)F;
    l->forwards++;
    l->ac = l->spikes ? s->spike_ops[l - s->layers] : 0.0;
    l->mac = l->spikes ? 0.0 : l->dense_ops;
    timespec_get(&t1, TIME_UTC);
    s->seconds += (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
}

/* ---- reading it ---------------------------------------------------------------------------- */

snn_status snn_synops_status(const snn_synops *s)
{
    if (!s) return snn_error(SNN_ERR_ARGUMENT, "snn_synops_status: bad argument 's' (got NULL)");
    if (s->status != SNN_OK) return snn_error(s->status, "%s", s->message);
    return SNN_OK;
}

const snn_synops_layer *snn_synops_layers(const snn_synops *s, int *count)
{
    *count = s ? s->count : 0;
    return s ? s->layers : NULL;
}

snn_synops_layer snn_synops_total(const snn_synops *s)
{
    snn_synops_layer t;
    memset(&t, 0, sizeof t);
    snprintf(t.name, sizeof t.name, "total");
    t.kind = "";
    t.spikes = true;
    for (int i = 0; s && i < s->count; i++) {
        const snn_synops_layer *l = &s->layers[i];
        if (i == 0) t.samples = l->samples, t.forwards = l->forwards;
        if (l->steps > t.steps) t.steps = l->steps;
        t.spikes = t.spikes && l->spikes;
        t.inputs += l->inputs;
        t.input_sum += l->input_sum;
        t.dense_ops += l->dense_ops;
        t.ac += l->ac;
        t.mac += l->mac;
        t.ann_mac += l->ann_mac;
    }
    return t;
}

double snn_synops_seconds(const snn_synops *s) { return s ? s->seconds : 0.0; }

double snn_synops_energy_pj(const snn_synops_layer *layer)
{
    return layer->ac * SNN_SYNOPS_AC_PJ + layer->mac * SNN_SYNOPS_MAC_PJ;
}

double snn_synops_ann_energy_pj(const snn_synops_layer *layer)
{
    return layer->ann_mac * SNN_SYNOPS_MAC_PJ;
}

double snn_synops_work_fraction(const snn_synops_layer *layer)
{
    if (!(layer->dense_ops > 0.0)) return 0.0;
    return layer->spikes ? layer->ac / layer->dense_ops : 1.0;
}
