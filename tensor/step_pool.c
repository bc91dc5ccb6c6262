/*
 * step_pool.c - step memory that can be given back before the step ends: the gradients of
 * activations.
 *
 * The step arena (arena.c) frees everything at once when the step ends, which suits the
 * forward activations: backward reads them until the end. A gradient of an activation is
 * different: it is born when the first consumer of the activation runs its backward and dead
 * as soon as the op that made the activation has run its own (it has been passed on to that
 * op's inputs). Kept in the arena, every such gradient of a training step would stay until the
 * end, doubling what the step holds; given back as it dies, only the few gradients on the
 * frontier of the backward pass are alive at once.
 *
 * So this is a small caching allocator beside the arena: blocks from snn_alloc, kept across
 * steps (no cudaMalloc in the steady state), handed out best-fit among the free blocks of at
 * most four times the size asked for (the same shapes come back every step, so nearly every
 * request finds its own size again; a ResNet's activations halve from stage to stage, and a
 * stage's blocks serve the next two). The bound was twice until 2026-11: four reserves less
 * (ResNet-18, CPU, batch 8, --keep-bf16: BPTT at T = 4, 16.7 -> 16.3 MB per image; an online
 * step, 6.0 -> 5.9), and without a bound the checkpointed steps' replay in nn/memory_walk.c
 * no longer bounds what they hold. A block taken inside a step and not given back is given back when
 * that step ends, so the step's "nothing outlives it" rule still holds. Device memory given
 * back here may still be read by queued kernels: the one CUDA stream orders them before any
 * kernel of the next user, as for the arena.
 */
#include <string.h>

#include "arena.h"
#include "error.h"

typedef struct pool_block {
    void *p;
    size_t size;
    int depth;   /* step depth that took it; 0 when free */
    /* who took it (the profile's): the op's name, and the op whose backward was running */
    const char *fn, *backward_op;
} pool_block;

/* One block in use when the pool reached its high-water mark (the profile's snapshot). */
typedef struct peak_row {
    const char *fn, *backward_op;
    size_t size;
} peak_row;

typedef struct pool {
    pool_block *blocks;
    int count, capacity;
    size_t in_use, peak_in_use; /* bytes handed out, now and at most */
    peak_row *peak;             /* while profiling: the blocks in use at peak_in_use */
    int peak_count, peak_capacity;
} pool;

static pool pools[SNN_NUM_DEVICES];
static const char *backward_op; /* the node whose backward runs (autograd/backward.c), or NULL */

const char *snn_step_pool_backward_op(const char *op)
{
    const char *before = backward_op;
    backward_op = op;
    return before;
}

/* The profile's snapshot of the blocks in use, taken at each new high-water mark (a host array
 * of the pool's size; left as it was if that cannot be had: the report then lags). */
static void snapshot_peak(pool *pl)
{
    if (pl->peak_capacity < pl->count) {
        peak_row *grown = snn_alloc((size_t)pl->capacity * sizeof *grown, SNN_CPU);
        if (!grown) {
            snn_clear_error();
            return;
        }
        snn_free(pl->peak, (size_t)pl->peak_capacity * sizeof *grown, SNN_CPU);
        pl->peak = grown;
        pl->peak_capacity = pl->capacity;
    }
    pl->peak_count = 0;
    for (int i = 0; i < pl->count; i++)
        if (pl->blocks[i].depth > 0)
            pl->peak[pl->peak_count++] = (peak_row){pl->blocks[i].fn, pl->blocks[i].backward_op,
                                                    pl->blocks[i].size};
}

static size_t pool_round(size_t bytes) { return (bytes + 255) / 256 * 256; }

void *snn_step_pool_alloc(const char *fn, size_t bytes, snn_device device)
{
    if (snn_step_depth() == 0)
        return snn_error_null(SNN_ERR_STATE, "%s: no step is open; hint: wrap forward, backward "
                              "and update in snn_step_begin() ... snn_step_end()", fn);
    pool *pl = &pools[device];
    const size_t need = pool_round(bytes ? bytes : 1);
    int best = -1;
    for (int i = 0; i < pl->count; i++) {
        const pool_block *b = &pl->blocks[i];
        if (b->depth == 0 && b->size >= need && b->size <= 4 * need &&
            (best < 0 || b->size < pl->blocks[best].size))
            best = i;
    }
    if (best < 0) {
        if (pl->count == pl->capacity) {
            const int capacity = pl->capacity ? 2 * pl->capacity : 64;
            pool_block *grown = snn_alloc((size_t)capacity * sizeof *grown, SNN_CPU);
            if (!grown) goto out_of_memory;
            if (pl->count) memcpy(grown, pl->blocks, (size_t)pl->count * sizeof *grown);
            snn_free(pl->blocks, (size_t)pl->capacity * sizeof *grown, SNN_CPU);
            pl->blocks = grown;
            pl->capacity = capacity;
        }
        void *p = snn_alloc(need, device);
        if (!p) goto out_of_memory;
        pl->blocks[pl->count] = (pool_block){p, need, 0, NULL, NULL};
        best = pl->count++;
    }
    pool_block *b = &pl->blocks[best];
    b->depth = snn_step_depth();
    b->fn = fn;
    b->backward_op = backward_op;
    pl->in_use += b->size;
    if (pl->in_use > pl->peak_in_use) {
        pl->peak_in_use = pl->in_use;
        if (snn_arena_profiling) snapshot_peak(pl);
    }
    return b->p;

out_of_memory:
    return snn_error_null(SNN_ERR_MEMORY, "%s: out of %s memory (asked for %zu bytes; the step "
                          "pool holds %zu bytes in use, %zu live in all)", fn,
                          snn_device_name(device), bytes, pl->in_use, snn_live_bytes(device));
}

void snn_step_pool_release(void *p, snn_device device)
{
    if (!p) return;
    pool *pl = &pools[device];
    for (int i = 0; i < pl->count; i++) {
        pool_block *b = &pl->blocks[i];
        if (b->p == p) {
            SNN_ASSERT(b->depth > 0 && "step pool block given back twice");
            b->depth = 0;
            pl->in_use -= b->size;
            return;
        }
    }
    SNN_ASSERT(!"snn_step_pool_release: not a step pool block");
}

void snn_step_pool_end(int depth)
{
    for (int d = 0; d < SNN_NUM_DEVICES; d++) {
        pool *pl = &pools[d];
        for (int i = 0; i < pl->count; i++) {
            pool_block *b = &pl->blocks[i];
            if (b->depth > depth) {
                b->depth = 0;
                pl->in_use -= b->size;
            }
        }
    }
}

size_t snn_step_pool_peak_bytes(snn_device device) { return pools[device].peak_in_use; }

void snn_step_pool_reset_peak(snn_device device)
{
    pool *pl = &pools[device];
    pl->peak_in_use = pl->in_use;
    pl->peak_count = 0;
    if (snn_arena_profiling) snapshot_peak(pl);
}

void snn_step_pool_profile_report_peak(snn_device device,
                                       void (*row)(const char *fn, const char *backward_op,
                                                   size_t bytes, int count, void *ctx),
                                       void *ctx)
{
    const pool *pl = &pools[device];
    /* one row per (fn, backward_op) pair, in the order first seen */
    for (int i = 0; i < pl->peak_count; i++) {
        const peak_row *r = &pl->peak[i];
        bool seen = false;
        for (int j = 0; j < i && !seen; j++)
            seen = pl->peak[j].fn == r->fn && pl->peak[j].backward_op == r->backward_op;
        if (seen) continue;
        size_t bytes = 0;
        int count = 0;
        for (int j = i; j < pl->peak_count; j++)
            if (pl->peak[j].fn == r->fn && pl->peak[j].backward_op == r->backward_op)
                bytes += pl->peak[j].size, count++;
        row(r->fn, r->backward_op, bytes, count, ctx);
    }
}

size_t snn_step_pool_reserved_bytes(snn_device device)
{
    size_t total = 0;
    for (int i = 0; i < pools[device].count; i++) total += pools[device].blocks[i].size;
    return total;
}

void snn_step_pool_release_all(void)
{
    for (int d = 0; d < SNN_NUM_DEVICES; d++) {
        pool *pl = &pools[d];
        for (int i = 0; i < pl->count; i++) {
            SNN_ASSERT(pl->blocks[i].depth == 0 && "snn_shutdown() with a step still open");
            snn_free(pl->blocks[i].p, pl->blocks[i].size, (snn_device)d);
        }
        snn_free(pl->blocks, (size_t)pl->capacity * sizeof *pl->blocks, SNN_CPU);
        snn_free(pl->peak, (size_t)pl->peak_capacity * sizeof *pl->peak, SNN_CPU);
        *pl = (pool){0};
    }
}
