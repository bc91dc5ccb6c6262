/*
 * train_segments.c - BPTT with checkpoints over time: the memory of T steps traded for one
 * more forward pass.
 *
 * BPTT keeps every step's activations from the forward until the backward reaches them, so
 * what a step holds grows with T. Cut the T steps into C = T / K segments of K steps. What links
 * segment c to segment c + 1 is the neurons' state (V, and A for ALIF), one value per neuron.
 * So:
 *
 *   forward, no tape:   for c = 0 .. C-2:  save S_c (the state entering c), run c, keep o[t]
 *   the last segment:   run C-1 WITH a tape, the state entering as a leaf that requires grad
 *                       (SNN_CARRY_DIFFERENTIABLE); L = CE(mean_t o[t], y), the earlier
 *                       segments' o[t] as constants; backward of L, which gives C-1's share
 *                       of the gradients, G_o = dL/do[t] = dL/dmean / T (the same every t)
 *                       and G_S <- the gradient that reached S_(C-1)
 *   backward:           for c = C-2 .. 0:
 *                           restore S_c; run c again with a tape, its state entering as a leaf;
 *                           backward of  sum_t <o[t], G_o> + <S_(c+1), G_S>
 *                           (the vector-Jacobian product of the segment, as one scalar);
 *                           G_S <- the gradient that reached S_c
 *
 * The parameters' gradients add up over the segments to BPTT's through all T steps; what is
 * held at once is one segment's graph plus C saved states: O(K + T/K) activations per neuron
 * instead of O(T), smallest near K = sqrt(T) (Chen et al. 2016's sqrt(n) checkpointing, here
 * along time). The price: the forward of all segments but the last runs twice, (C - 1) / C of
 * a forward more than BPTT (the last one's graph, made once, is the first the backward needs).
 *
 * Two things a recompute must not change: the random stream (dropout masks, Poisson spikes)
 * is set back to where it was before segment c; and batch-norm's running statistics, updated
 * by the forward, are put back after the recomputes. Batch-norm's statistics are over the K N
 * samples of a segment, where BPTT's are over T N: with K = T the step is BPTT's exactly.
 */
#include "app/train_segments.h"

#include <string.h>

#include "tensor/arena.h"
#include "tensor/error.h"

snn_status train_segments_check(const char *prog, snn_module *model, int segment)
{
    const snn_model_config *c = snn_model_config_of(model);
    if (!c)
        return snn_error(SNN_ERR_ARGUMENT, "%s: --time-checkpoint: expected a model made by "
                         "snn_model_new", prog);
    if (segment < 1 || segment > c->time_steps)
        return snn_error(SNN_ERR_ARGUMENT, "%s: --time-checkpoint %d: expected 1 .. T (%d) time "
                         "steps per segment", prog, segment, c->time_steps);
    if (c->encoding != SNN_ENCODING_DIRECT && c->encoding != SNN_ENCODING_POISSON)
        return snn_error(SNN_ERR_ARGUMENT, "%s: --time-checkpoint takes images with direct or "
                         "Poisson encoding for now; hint: event frames and sequences train "
                         "without it", prog);
    if (snn_neuron_is_ann(c->neuron.kind))
        return snn_error(SNN_ERR_ARGUMENT, "%s: --time-checkpoint: a %s model is an ANN (T = 1)",
                         prog, snn_neuron_kind_name(c->neuron.kind));
    /* each segment's forward draws its own dropout masks, where the model shares one over all
     * T steps; with one segment (K = T) the mask is the model's */
    if (c->dropout > 0.0f && segment < c->time_steps)
        return snn_error(SNN_ERR_ARGUMENT, "%s: --time-checkpoint %d: expected --dropout 0 or "
                         "K = T (%d) (the dropout mask is shared by all T steps, which segments "
                         "of K steps cannot do)", prog, segment, c->time_steps);
    return SNN_OK;
}

/* A STEP copy of `t` (NULL stays NULL). */
static snn_tensor *step_copy(const char *fn, const snn_tensor *t, bool *failed)
{
    if (!t) return NULL;
    snn_tensor *c = snn_step_tensor(fn, t->shape, t->device);
    if (!c || snn_tensor_copy(c, t) != SNN_OK) *failed = true;
    return c;
}

/* A zeroed table of `count` entries of `size` bytes in the host's step memory (it lives until
 * the step that train_segments_step runs in ends), or NULL with the error set. */
static void *step_table(size_t count, size_t size)
{
    void *t = snn_step_alloc("train_segments_step", count * size + 1, SNN_CPU);
    if (t) memset(t, 0, count * size + 1);
    return t;
}

/* One step's segments: C segments over L neuron layers. The tables are step memory. */
typedef struct segments {
    int T, K, C, L;
    snn_module **layer;    /* (L) the model's neuron layers */
    snn_tensor **saved_v;  /* (C, L) S_c, [c L + l]; c = 0 is the reset state (NULL) */
    snn_tensor **saved_a;  /* (C, L) ALIF's A, likewise */
    uint64_t *rng;         /* (C) the model's stream before segment c */
    snn_tensor **out;      /* (C) o[t] of segment c, (K_c, N, classes) */
} segments;

static int steps_in(const segments *s, int c)
{
    return c < s->C - 1 ? s->K : s->T - c * s->K;
}

/* The forward without a tape of every segment but the last, saving what the recomputes start
 * from; the carried state is then the one entering the last segment. */
static snn_status forward_all_but_last(segments *s, snn_module *model, snn_tensor *x, int64_t N,
                                       int classes)
{
    const char *fn = "train_segments_step";
    bool failed = false;
    snn_status status = SNN_OK;
    for (int c = 0; c < s->C - 1 && status == SNN_OK; c++) {
        for (int l = 0; c > 0 && l < s->L; l++) {
            snn_neuron_carried st = snn_neuron_layer_carried(s->layer[l]);
            s->saved_v[c * s->L + l] = step_copy(fn, st.v, &failed);
            s->saved_a[c * s->L + l] = step_copy(fn, st.a, &failed);
        }
        s->rng[c] = snn_model_rng_state(model);
        s->out[c] = snn_step_tensor(fn, SNN_SHAPE(steps_in(s, c), N, classes), x->device);
        if (failed || !s->out[c]) return snn_last_status();
        status = snn_model_set_time_steps(model, steps_in(s, c));
        if (status != SNN_OK) break;
        snn_step_begin();
        snn_no_grad_begin();
        snn_tensor *o = snn_model_forward_steps(model, x);
        status = o ? snn_tensor_copy(s->out[c], o) : snn_last_status();
        snn_no_grad_end();
        snn_step_end();
    }
    return status;
}

/* After a segment's backward: g_v / g_a <- the gradient of the state that entered it (zeros
 * where none reached it). */
static snn_status read_state_gradients(const segments *s, snn_tensor **g_v, snn_tensor **g_a)
{
    snn_status status = SNN_OK;
    for (int l = 0; status == SNN_OK && l < s->L; l++) {
        snn_neuron_carried st = snn_neuron_layer_carried(s->layer[l]);
        status = st.v_in->grad ? snn_tensor_copy(g_v[l], st.v_in->grad)
                               : snn_tensor_fill(g_v[l], 0.0f);
        if (status == SNN_OK && g_a[l])
            status = st.a_in && st.a_in->grad ? snn_tensor_copy(g_a[l], st.a_in->grad)
                                              : snn_tensor_fill(g_a[l], 0.0f);
    }
    return status;
}

/* Segment c again with a tape from its saved state, and the backward of
 * sum <o, g_out> + sum_l <V_out_l, g_v_l> + <A_out_l, g_a_l> (one walk of the tape from those
 * outputs, each seeded with its gradient); g_v / g_a then get the gradient of the state that
 * entered (zeros where none reached it). */
static snn_status backward_segment(segments *s, int c, snn_module *model, snn_tensor *x,
                                   snn_tensor *g_out, snn_tensor **g_v, snn_tensor **g_a)
{
    if (c == 0) snn_module_reset_state(model);
    for (int l = 0; c > 0 && l < s->L; l++) {
        snn_neuron_carried st = snn_neuron_layer_carried(s->layer[l]);
        if (snn_tensor_copy(st.v, s->saved_v[c * s->L + l]) != SNN_OK ||
            (st.a && snn_tensor_copy(st.a, s->saved_a[c * s->L + l]) != SNN_OK))
            return snn_last_status();
    }
    snn_model_set_rng_state(model, s->rng[c]);
    snn_status status = snn_model_set_time_steps(model, steps_in(s, c));
    if (status != SNN_OK) return status;
    snn_step_begin();
    snn_tensor *o = snn_model_forward_steps(model, x); /* (K_c, N, classes) */
    /* the seeds: dL/do[t] = g_out at every step, and the states' gradients */
    snn_tensor **outs = step_table(1 + 2 * (size_t)s->L, sizeof *outs);
    const snn_tensor **seeds = step_table(1 + 2 * (size_t)s->L, sizeof *seeds);
    if (!outs || !seeds) {
        snn_step_end();
        return snn_last_status();
    }
    int n = 0;
    snn_no_grad_begin();
    outs[n] = o, seeds[n++] = o ? snn_repeat_time(g_out, steps_in(s, c)) : NULL;
    snn_no_grad_end();
    bool ok = o && seeds[0];
    for (int l = 0; ok && l < s->L; l++) {
        snn_neuron_carried st = snn_neuron_layer_carried(s->layer[l]);
        outs[n] = st.v_out, seeds[n++] = g_v[l];
        if (g_a[l] && st.a_out) outs[n] = st.a_out, seeds[n++] = g_a[l];
    }
    status = ok ? snn_backward_from_many(n, outs, seeds) : snn_last_status();
    if (status == SNN_OK) status = read_state_gradients(s, g_v, g_a);
    snn_step_end();
    return status;
}

/* The last segment, run once with a tape from the state forward_all_but_last left: the loss
 * of the time-mean logits over all T steps (the earlier segments' o[t] are constants here),
 * its backward (the last segment's share of the gradients), and what the earlier segments'
 * backward needs: g_out = dL/do[t] and g_v / g_a, the gradient of the state that entered.
 * mean and loss get the step's time-mean logits and loss. All four are made by the caller,
 * outside this segment's step, whose graph is gone when this returns. */
static snn_status last_segment(segments *s, snn_module *model, snn_tensor *x, snn_tensor *y,
                               float label_smoothing, snn_tensor *mean, snn_tensor *loss,
                               snn_tensor *g_out, snn_tensor **g_v, snn_tensor **g_a)
{
    const int c = s->C - 1;
    snn_status status = snn_model_set_time_steps(model, steps_in(s, c));
    if (status != SNN_OK) return status;
    snn_step_begin();
    snn_tensor *o = snn_model_forward_steps(model, x); /* (K_c, N, classes) */
    snn_tensor *sum = o ? snn_sum(o, 0, false) : NULL;
    snn_no_grad_begin();
    snn_tensor *earlier = NULL; /* sum over the earlier segments' steps: constants */
    for (int k = 0; sum && k < c; k++) {
        snn_tensor *part = snn_sum(s->out[k], 0, false);
        earlier = earlier ? snn_add(earlier, part) : part;
        if (!earlier) sum = NULL;
    }
    snn_no_grad_end();
    if (sum && earlier) sum = snn_add(sum, earlier);
    snn_tensor *m = sum ? snn_scale(sum, 1.0f / (float)s->T) : NULL; /* (N, classes) */
    if (m) m->retain_grad = true;
    snn_tensor *l = m ? snn_cross_entropy_smooth(m, y, label_smoothing) : NULL;
    status = l ? snn_backward(l) : snn_last_status();
    if (status == SNN_OK && !m->grad)
        status = snn_error(SNN_ERR_STATE, "train_segments_step: no gradient reached the "
                           "time-mean logits");
    if (status == SNN_OK) {
        snn_no_grad_begin();
        snn_tensor *g = snn_scale(m->grad, 1.0f / (float)s->T); /* dL/do[t], the same every t */
        snn_no_grad_end();
        status = g ? snn_tensor_copy(g_out, g) : snn_last_status();
    }
    if (status == SNN_OK) status = snn_tensor_copy(mean, m);
    if (status == SNN_OK) status = snn_tensor_copy(loss, l);
    if (status == SNN_OK && c > 0) status = read_state_gradients(s, g_v, g_a);
    snn_step_end();
    return status;
}

/* The model's buffers (batch-norm's running statistics, its counts): STEP copies in *copies
 * (NULL for a trainable parameter), to be put back after the recomputes. *list holds the
 * model's tensors (free it after the restore). */
static snn_status save_buffers(snn_module *model, snn_param_list *list, snn_tensor ***copies_out)
{
    snn_status status = snn_module_parameters(model, list);
    if (status != SNN_OK) return status;
    snn_tensor **copies = step_table((size_t)list->count, sizeof *copies);
    if (!copies) return snn_last_status();
    *copies_out = copies;
    bool failed = false;
    for (int i = 0; status == SNN_OK && i < list->count; i++)
        copies[i] = list->items[i].trainable ? NULL
                                             : step_copy("train_segments_step",
                                                         list->items[i].tensor, &failed);
    return status != SNN_OK ? status : failed ? snn_last_status() : SNN_OK;
}

static snn_status run(segments *s, snn_module *model, snn_tensor *x, snn_tensor *y,
                      const train_segments_options *o, snn_tensor **logits, snn_tensor **loss)
{
    const char *fn = "train_segments_step";
    const snn_model_config *c = snn_model_config_of(model);
    const int64_t N = x->shape.dim[0];
    snn_neuron_layers_set_carry(model, SNN_CARRY_CONSTANT);
    snn_module_reset_state(model);
    snn_status status = forward_all_but_last(s, model, x, N, c->classes);
    if (status != SNN_OK) return status;

    /* what outlives the last segment's step: the time-mean logits, the loss, dL/do[t], and
     * (with earlier segments, whose forward made the layers' state) the gradient of the state
     * entering each segment */
    snn_tensor *mean = snn_step_tensor(fn, SNN_SHAPE(N, c->classes), x->device);
    snn_tensor *loss_value = snn_step_tensor(fn, SNN_SHAPE(1), x->device);
    snn_tensor *g_out = snn_step_tensor(fn, SNN_SHAPE(N, c->classes), x->device);
    snn_tensor **g_v = step_table((size_t)s->L, sizeof *g_v);
    snn_tensor **g_a = step_table((size_t)s->L, sizeof *g_a);
    if (!mean || !loss_value || !g_out || !g_v || !g_a) return snn_last_status();
    for (int l = 0; s->C > 1 && l < s->L; l++) {
        snn_neuron_carried st = snn_neuron_layer_carried(s->layer[l]);
        if (!st.v)
            return snn_error(SNN_ERR_STATE, "%s: neuron layer %d has no carried state after "
                             "the forward", fn, l);
        g_v[l] = snn_step_tensor(fn, st.v->shape, st.v->device);
        g_a[l] = st.a ? snn_step_tensor(fn, st.a->shape, st.a->device) : NULL;
        if (!g_v[l] || (st.a && !g_a[l])) return snn_last_status();
    }

    /* the last segment, once, with the loss; then the others, from the last but one */
    snn_module_zero_grad(model);
    snn_neuron_layers_set_carry(model, SNN_CARRY_DIFFERENTIABLE);
    status = last_segment(s, model, x, y, o->label_smoothing, mean, loss_value, g_out, g_v, g_a);
    if (status != SNN_OK) return status;
    /* the forward is done: the random stream and the running statistics as it left them, to
     * be put back after the recomputes */
    const uint64_t rng_after = snn_model_rng_state(model);
    snn_param_list buffers = {0};
    snn_tensor **buffer_copy = NULL;
    status = save_buffers(model, &buffers, &buffer_copy);
    for (int k = s->C - 2; status == SNN_OK && k >= 0; k--)
        status = backward_segment(s, k, model, x, g_out, g_v, g_a);
    snn_model_set_rng_state(model, rng_after);
    for (int i = 0; buffer_copy && i < buffers.count; i++)
        if (buffer_copy[i] && status == SNN_OK)
            status = snn_tensor_copy(buffers.items[i].tensor, buffer_copy[i]);
    snn_param_list_free(&buffers);
    if (status == SNN_OK) *logits = mean, *loss = loss_value;
    return status;
}

snn_status train_segments_step(snn_module *model, snn_tensor *x, snn_tensor *y,
                               const train_segments_options *o, snn_tensor **logits,
                               snn_tensor **loss)
{
    *logits = *loss = NULL;
    const snn_model_config *c = snn_model_config_of(model);
    if (train_segments_check("train_segments_step", model, o->segment) != SNN_OK)
        return snn_last_status();
    if (snn_check_tensor("train_segments_step", "x", x) ||
        snn_check_tensor("train_segments_step", "y", y))
        return snn_last_status();
    segments s = {.T = c->time_steps, .K = o->segment};
    s.C = (s.T + s.K - 1) / s.K;
    s.L = snn_neuron_layers_collect(model, NULL, 0);
    s.layer = step_table((size_t)s.L, sizeof *s.layer);
    s.saved_v = step_table((size_t)s.C * (size_t)s.L, sizeof *s.saved_v);
    s.saved_a = step_table((size_t)s.C * (size_t)s.L, sizeof *s.saved_a);
    s.rng = step_table((size_t)s.C, sizeof *s.rng);
    s.out = step_table((size_t)s.C, sizeof *s.out);
    if (!s.layer || !s.saved_v || !s.saved_a || !s.rng || !s.out) return snn_last_status();
    snn_neuron_layers_collect(model, s.layer, s.L);
    const int T = s.T;
    snn_status status = run(&s, model, x, y, o, logits, loss);
    snn_neuron_layers_set_carry(model, SNN_CARRY_NONE);
    snn_status restored = snn_model_set_time_steps(model, T);
    return status != SNN_OK ? status : restored;
}
