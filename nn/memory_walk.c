/*
 * memory_walk.c - the bookkeeping of the memory estimate (nn/model_memory.c): what each
 * allocation of a step costs in the step arena, the host arena and the step pool, as the ops
 * make them (autograd/fn_*.c, neurons/neuron_op.c, tensor/arena.c, tensor/step_pool.c).
 *
 * The arena never frees inside a step, so its high-water mark is the sum of what was put in
 * it (each allocation rounded up: 64 B on the host, 256 B on CUDA), plus the largest scratch
 * that an op takes and gives back. The step pool does give blocks back, so what it holds is
 * found by replaying its events against a copy of its policy: the forward's spikes taken and,
 * once packed, given back; then the backward's gradients, as backward.c takes and returns them.
 *
 * Test: tests/test_memory_estimate.c (through snn_model_memory_estimate).
 */
#include <math.h>

#include "memory_walk.h"
#include "autograd/autograd.h"
#include "tensor/error.h"

double snn_walk_round_up(double bytes, double align) { return ceil(bytes / align) * align; }
double snn_walk_struct_bytes(void) { return snn_walk_round_up((double)sizeof(snn_tensor), 64.0); }
/* A tape node and its op's saved state, which is private to each op (autograd/fn_*.c,
 * neurons/neuron_op.c) and at most 192 bytes in the host arena: 64 for conv, batch-norm and the
 * reductions, 128 for a neuron layer, 192 for the binary ops (the residual addition). */
static double node_bytes(void) { return snn_walk_round_up((double)sizeof(snn_node), 64.0) + 192.0; }
double snn_walk_node_bytes(void) { return node_bytes(); }

/* One device allocation of `numel` 4-byte elements. */
void snn_walk_alloc(snn_walk *w, double numel)
{
    const double bytes = snn_walk_round_up(4.0 * numel, w->align);
    w->device += bytes;
    if (bytes > w->largest) w->largest = bytes;
}

/* A backward that takes `bytes` of scratch and reads tensors u0 and u1 (ids, or -1), which it
 * unpacks (4 B an element, autograd/spike_pack.c) if they are bits by then. */
void snn_walk_backward_scratch(snn_walk *w, double bytes, int u0, int u1)
{
    if (!w->training) return;
    SNN_ASSERT(w->scratches < WALK_MAX_SCRATCH);
    w->scratch_bytes[w->scratches] = bytes;
    w->scratch_consuming_bytes[w->scratches] = bytes;
    w->scratch_node[w->scratches] = -1;
    w->scratch_unpacks[w->scratches][0] = u0;
    w->scratch_unpacks[w->scratches][1] = u1;
    w->scratches++;
}

void snn_walk_backward_scratch_consuming(snn_walk *w, int node, double bytes)
{
    if (!w->training || node < 0) return;
    SNN_ASSERT(w->scratches > 0);
    w->scratch_node[w->scratches - 1] = node;
    w->scratch_consuming_bytes[w->scratches - 1] = bytes;
}

/* The largest backward scratch, with the unpacked inputs. */
double snn_walk_largest_backward_scratch(const snn_walk *w)
{
    double most = 0.0;
    for (int i = 0; i < w->scratches; i++) {
        const int n = w->scratch_node[i];
        double bytes = n >= 0 && !w->retained[n] ? w->scratch_consuming_bytes[i]
                                                 : w->scratch_bytes[i];
        for (int j = 0; j < 2; j++) {
            const int t = w->scratch_unpacks[i][j];
            if (t >= 0 && w->packed[t]) bytes += snn_walk_round_up(4.0 * w->numel[t], w->align);
        }
        if (bytes > most) most = bytes;
    }
    return most;
}

/* A step tensor that never gets a gradient (the input batch, labels, argmax, one-hot). */
void snn_walk_constant(snn_walk *w, double numel)
{
    w->host += snn_walk_struct_bytes();
    snn_walk_alloc(w, numel);
}

/* In training, a tape node making a tensor of `numel` elements from in0 and in1 (ids, or -1):
 * the node and the gradient's struct in the host arena, the gradient's data recorded for the
 * pool. Returns the tensor's id; -1 without a tape. */
int snn_walk_record(snn_walk *w, double numel, int in0, int in1)
{
    if (!w->training) return -1;
    SNN_ASSERT(w->nodes < WALK_MAX_NODES);
    w->host += node_bytes() + snn_walk_struct_bytes();
    w->numel[w->nodes] = numel;
    w->in[w->nodes][0] = in0;
    w->in[w->nodes][1] = in1;
    return w->nodes++;
}

/* An op's output, made from in0 and in1; in training also its tape node and gradient. */
int snn_walk_output(snn_walk *w, double numel, int in0, int in1)
{
    snn_walk_constant(w, numel);
    return snn_walk_record(w, numel, in0, in1);
}

/* The spikes of an IF / LIF / PLIF layer made from in0 and in1: in training they come from the
 * step pool (whether or not they will be packed), else they are an output as any other. */
int snn_walk_spikes_output(snn_walk *w, double numel, int in0, int in1)
{
    if (!w->training) return snn_walk_output(w, numel, in0, in1);
    w->host += snn_walk_struct_bytes();
    const int id = snn_walk_record(w, numel, in0, in1);
    SNN_ASSERT(w->events < WALK_MAX_NODES);
    w->pooled_spikes[id] = true;
    w->event_id[w->events] = id;
    w->event_take[w->events++] = true;
    return id;
}

double snn_walk_bits_bytes(const snn_walk *w, double numel)
{
    return snn_walk_round_up(4.0 * ceil(numel / 32.0), w->align);
}

/* snn_spikes_forward_done on tensor `id`: with packing on, spikes from the pool become bits in
 * the arena (unless the fused op wrote them already) and give their block back */
void snn_walk_spikes_done(snn_walk *w, int id)
{
    if (!w->packing || id < 0 || !w->pooled_spikes[id] || w->packed[id]) return;
    w->packed[id] = true;
    if (!w->bits_made[id]) w->device += snn_walk_bits_bytes(w, w->numel[id]);
    SNN_ASSERT(w->events < WALK_MAX_NODES);
    w->event_id[w->events] = id;
    w->event_take[w->events++] = false;
}

int snn_walk_conv_output(snn_walk *w, double numel, int in)
{
    if (!w->training || !w->keep_bf16) return snn_walk_output(w, numel, in, -1);
    w->host += snn_walk_struct_bytes();
    const int id = snn_walk_record(w, numel, in, -1);
    SNN_ASSERT(w->events < WALK_MAX_NODES);
    w->pooled_values[id] = true;
    w->event_id[w->events] = id;
    w->event_take[w->events++] = true;
    return id;
}

void snn_walk_bf16_round(snn_walk *w, int id)
{
    if (id < 0 || !w->pooled_values[id] || w->bf16_made[id]) return;
    w->bf16_made[id] = true;
    w->device += snn_walk_round_up(2.0 * w->numel[id], w->align);
}

void snn_walk_bf16_done(snn_walk *w, int id)
{
    if (id < 0 || !w->bf16_made[id] || w->packed[id]) return;
    w->packed[id] = true;
    SNN_ASSERT(w->events < WALK_MAX_NODES);
    w->event_id[w->events] = id;
    w->event_take[w->events++] = false;
}

/* A view (flatten, reshape) of `in`: a struct, and in training a node and a gradient of its own. */
int snn_walk_view(snn_walk *w, double numel, int in)
{
    w->host += snn_walk_struct_bytes();
    return snn_walk_record(w, numel, in, -1);
}

/* A copy of the step pool's policy (tensor/step_pool.c): blocks rounded to 256 bytes, the
 * smallest free block of at most four times the size asked for, else a new block. */
typedef struct pool_copy {
    double size[WALK_MAX_NODES + 2 * WALK_MAX_STATES];
    bool busy[WALK_MAX_NODES + 2 * WALK_MAX_STATES];
    int blocks;
    double reserved;          /* the sum of the blocks' sizes */
} pool_copy;

static int pool_take(pool_copy *p, double numel)
{
    double need = snn_walk_round_up(4.0 * numel, 256.0);
    int best = -1;
    for (int b = 0; b < p->blocks; b++)
        if (!p->busy[b] && p->size[b] >= need && p->size[b] <= 4.0 * need &&
            (best < 0 || p->size[b] < p->size[best]))
            best = b;
    if (best < 0) {
        SNN_ASSERT(p->blocks < WALK_MAX_NODES + 2 * WALK_MAX_STATES);
        best = p->blocks++;
        p->size[best] = need;
        p->reserved += need;
    }
    p->busy[best] = true;
    return best;
}

/* One step's forward and backward of `w` against the pool `p`, as the step pool sees them:
 * first the forward's spikes (and conv outputs kept as bf16), taken and, when packed, given
 * back in order (those never packed hold their block to the end); then the backward of the
 * recorded tape, as backward.c runs it: the loss (the last node) gets its seed first; then
 * each node, newest first, has a block taken for each input's gradient that has none yet, and
 * gives its own back (unless its gradient is retained: kept to the end), or hands it to its
 * first input (hand_over: that input takes no block).
 * With `state_grads` (a checkpointed step's segment, app/train_segments.c), the carried
 * states' gradients too: `seeded` sets of V_out's seeds (one block per carried state), taken
 * with the loss's seed when backward starts (snn_backward_from_many), and the gradient of the
 * state that entered, taken by each layer's neuron op as its backward runs. At the end every
 * block is free again, as when a nested step ends. */
/* The forward's events of `w` against the pool `p`: spikes (and conv outputs kept as bf16)
 * taken and, when packed, given back in order (those never packed hold their block to the
 * end). `untaped`: a forward without a tape, where only the fused op's spikes come from the
 * pool (app/train_segments.c's forward of the segments before the last). */
static void replay_forward(pool_copy *p, const snn_walk *w, bool untaped)
{
    int spike_block[WALK_MAX_NODES];
    for (int e = 0; e < w->events; e++) {
        const int id = w->event_id[e];
        if (untaped && !w->pooled_untaped[id]) continue;
        if (w->event_take[e]) spike_block[id] = pool_take(p, w->numel[id]);
        else p->busy[spike_block[id]] = false;
    }
}

static void replay(pool_copy *p, const snn_walk *w, bool state_grads, int seeded)
{
    replay_forward(p, w, false);
    int grad[WALK_MAX_NODES]; /* each tensor's block; -1 while it has none */
    for (int i = 0; i < w->nodes; i++) grad[i] = -1;
    grad[w->nodes - 1] = pool_take(p, w->numel[w->nodes - 1]);
    for (int k = 0; state_grads && k < seeded; k++)
        for (int i = 0; i < w->states; i++) pool_take(p, w->state_numel[i]);
    for (int n = w->nodes - 1; n >= 0; n--) {
        if (grad[n] < 0) continue; /* not on the loss's path */
        bool handed = false;
        for (int i = 0; i < 2; i++) {
            int t = w->in[n][i];
            if (t < 0 || grad[t] >= 0) continue;
            if (i == 0 && w->hand_over[n] && !w->retained[n] && w->numel[t] == w->numel[n]) {
                grad[t] = grad[n]; /* the same block, now the input's */
                handed = true;
            } else {
                grad[t] = pool_take(p, w->numel[t]);
            }
        }
        for (int i = 0; state_grads && i < w->states; i++)
            if (w->state_node[i] == n) pool_take(p, w->state_numel[i]);
        if (!w->retained[n] && !handed) p->busy[grad[n]] = false;
    }
    for (int b = 0; b < p->blocks; b++) p->busy[b] = false;
}

double snn_walk_segments_pool_bytes(const snn_walk *last, const snn_walk *segment)
{
    pool_copy p = {.blocks = 0};
    if (segment && segment->nodes > 0) { /* the forward of the segments before the last */
        replay_forward(&p, segment, true);
        for (int b = 0; b < p.blocks; b++) p.busy[b] = false;
    }
    if (last->nodes > 0) replay(&p, last, true, 0);                  /* the states' gradients */
    if (segment && segment->nodes > 0) replay(&p, segment, true, 1); /* and V_out's seeds */
    return p.reserved;
}

double snn_walk_gradient_pool_bytes(const snn_walk *w)
{
    pool_copy p = {.blocks = 0};
    if (w->nodes > 0) replay(&p, w, false, 0);
    return p.reserved;
}

void snn_walk_param(snn_walk *w, double numel, bool trainable)
{
    w->params += numel;
    w->param_calls += 1.0;
    if (trainable) w->trainable += numel;
    else w->buffer_groups += 1.0;
}
