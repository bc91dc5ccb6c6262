/*
 * arena.c - the step arena: every STEP tensor, saved buffer and tape node lives here.
 * See arena.h for the idea. Not thread-safe: ops run on the main thread only. The profiler
 * that benchmarks turn on (snn_arena_profile) is arena_profile.c.
 */
#include "arena.h"
#include "error.h"

#define MAX_BLOCKS 64
#define MAX_DEPTH 64
#define HOST_ALIGN 64
#define DEVICE_ALIGN 256
#define FIRST_BLOCK_BYTES ((size_t)1 << 20)

typedef struct block {
    char *base;
    size_t size;
} block;

typedef struct arena {
    block blocks[MAX_BLOCKS];
    int nblocks;
    snn_arena_mark top; /* where the next allocation goes; (-1, 0, 0) when no step is open */
    size_t high_water;  /* most top.in_use at once since the last coalesce */
    size_t last_peak;   /* high_water of the last outermost step */
    size_t grown;       /* size of the last block added in this outermost step; 0: none yet */
} arena;

typedef struct frame {
    uint64_t id;
    snn_arena_mark marks[SNN_NUM_DEVICES]; /* each arena's top when the step began */
    struct snn_node *tape_head;
} frame;

static arena arenas[SNN_NUM_DEVICES] = {{.top.current = -1}, {.top.current = -1}};
static frame frames[MAX_DEPTH];
static int depth;
static uint64_t next_id = 1;

struct snn_node *snn_tape_head;

static size_t align_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

static size_t reserved_bytes(const arena *a)
{
    size_t total = 0;
    for (int i = 0; i < a->nblocks; i++) total += a->blocks[i].size;
    return total;
}

/* Gives back blocks[from..nblocks). Only blocks past the current one, which hold nothing: the
 * arena is a stack, so everything in them was given back by a step end or a scratch release. */
static void release_blocks_from(arena *a, int from, snn_device device)
{
    SNN_ASSERT(from > a->top.current);
    for (int i = from; i < a->nblocks; i++) {
        snn_free(a->blocks[i].base, a->blocks[i].size, device);
        a->blocks[i] = (block){NULL, 0};
    }
    a->nblocks = from;
}

/* The size of a new block for `need` bytes. Within one outermost step the blocks it adds
 * double (1 MiB, 2, 4, ... from an empty arena), so a step that grows from nothing takes
 * O(log) blocks and reserves at most about twice what it uses. But the first block a step
 * adds beyond what it started with - the one block that earlier steps were merged into -
 * starts at an eighth of that, not at twice it: the step holds the old block (its tensors
 * live there) while it fills the new one, and doubling the old block made a step that needs
 * H + 1 byte hold 3 H (on an 80 GB GPU, a 29 GB arena asked for another 58 GB and failed). */
static size_t grow_size(const arena *a, size_t need)
{
    size_t size = a->grown ? (a->grown <= SIZE_MAX / 2 ? 2 * a->grown : SIZE_MAX)
                           : reserved_bytes(a) / 8;
    if (size < FIRST_BLOCK_BYTES) size = FIRST_BLOCK_BYTES;
    return size > need ? size : need;
}

/* Appends a block of `size` bytes, or when that cannot be had of half that, and so on down to
 * `need` (a full device should still give a step the bytes it asks for). *tried: `size`. */
static bool add_block(arena *a, size_t size, size_t need, snn_device device, size_t *tried)
{
    *tried = size;
    for (;;) {
        void *p = snn_alloc(size, device);
        if (p) {
            a->blocks[a->nblocks++] = (block){p, size};
            a->grown = size;
            return true;
        }
        if (size == need) return false;
        size = size / 2 > need ? size / 2 : need;
    }
}

/* Moves the arena on to a block after the current one with room for `need` bytes: the next
 * block when it is large enough, else a new block. A next block that is too small is given
 * back before its replacement is taken, so the two are never held together. */
static bool next_block(arena *a, size_t need, snn_device device, size_t *tried)
{
    const int next = a->top.current + 1;
    const size_t size = grow_size(a, need); /* before any release: it reads what is held */
    *tried = 0;
    if (next < a->nblocks && a->blocks[next].size < need) release_blocks_from(a, next, device);
    if (next == a->nblocks && (next == MAX_BLOCKS || !add_block(a, size, need, device, tried)))
        return false;
    a->top.current = next;
    a->top.used = 0;
    return true;
}

void *snn_step_alloc(const char *fn, size_t bytes, snn_device device)
{
    if (depth == 0)
        return snn_error_null(SNN_ERR_STATE,
                              "%s: no step is open; hint: wrap forward, backward and update in "
                              "snn_step_begin() ... snn_step_end()", fn);
    arena *a = &arenas[device];
    const size_t align = device == SNN_CPU ? HOST_ALIGN : DEVICE_ALIGN;
    size_t tried = 0;
    if (bytes > SIZE_MAX / 2) goto out_of_memory;
    const size_t need = align_up(bytes ? bytes : 1, align);
    snn_arena_mark *top = &a->top;
    if ((top->current < 0 || top->used + need > a->blocks[top->current].size) &&
        !next_block(a, need, device, &tried))
        goto out_of_memory;
    void *p = a->blocks[top->current].base + top->used;
    if (snn_arena_profiling) snn_arena_profile_alloc(fn, need, device, *top, top->in_use + need);
    top->used += need;
    top->in_use += need;
    if (top->in_use > a->high_water) a->high_water = top->in_use;
    return p;

out_of_memory:
    if (a->nblocks == MAX_BLOCKS && !tried)
        return snn_error_null(SNN_ERR_MEMORY, "%s: out of %s memory (asked for %zu bytes; the "
                              "step arena has all its %d blocks, %zu bytes, %zu in use)", fn,
                              snn_device_name(device), bytes, MAX_BLOCKS, reserved_bytes(a),
                              a->top.in_use);
    /* name the block the arena asked for too: it is what did not fit, not the caller's bytes */
    return snn_error_null(SNN_ERR_MEMORY,
                          "%s: out of %s memory (asked for %zu bytes; the step arena, holding "
                          "%zu bytes in %d blocks with %zu in use, could not add a block of %zu "
                          "bytes, nor a smaller one down to the bytes asked for; %zu live in all)",
                          fn, snn_device_name(device), bytes, reserved_bytes(a), a->nblocks,
                          a->top.in_use, tried ? tried : bytes, snn_live_bytes(device));
}

/* A STEP tensor struct of `shape` on `device` in the host arena, without data. */
static snn_tensor *step_struct(const char *fn, snn_shape shape, snn_device device)
{
    snn_tensor *t = snn_step_alloc(fn, sizeof *t, SNN_CPU);
    if (t)
        *t = (snn_tensor){.shape = shape, .numel = snn_shape_numel(shape), .device = device,
                          .lifetime = SNN_STEP};
    return t;
}

snn_tensor *snn_step_tensor(const char *fn, snn_shape shape, snn_device device)
{
    if (snn_check_shape(fn, shape)) return NULL;
    snn_tensor *t = step_struct(fn, shape, device);
    if (!t) return NULL;
    t->data = snn_step_alloc(fn, (size_t)t->numel * sizeof(float), device);
    return t->data ? t : NULL;
}

snn_tensor *snn_step_pooled_tensor(const char *fn, snn_shape shape, snn_device device)
{
    snn_tensor *t = step_struct(fn, shape, device);
    if (!t) return NULL;
    t->pooled = true;
    t->data = snn_step_pool_alloc(fn, (size_t)t->numel * sizeof(float), device);
    return t->data ? t : NULL;
}

void snn_step_pooled_tensor_give_back(snn_tensor *t)
{
    SNN_ASSERT(t && t->pooled && t->data);
    snn_step_pool_release(t->data, t->device);
    t->data = NULL;
    t->pooled = false;
}

snn_tensor *snn_step_view(const char *fn, snn_tensor *base, snn_shape shape)
{
    SNN_ASSERT(snn_shape_numel(shape) == base->numel);
    snn_tensor *t = step_struct(fn, shape, base->device);
    if (!t) return NULL;
    t->data = base->data;
    t->base = base->base ? base->base : base;
    return t;
}

snn_status snn_step_begin(void)
{
    if (depth == MAX_DEPTH)
        return snn_error(SNN_ERR_STATE, "snn_step_begin: steps nested deeper than %d; hint: a "
                         "loop is missing its snn_step_end()", MAX_DEPTH);
    frame *f = &frames[depth++];
    f->id = next_id++;
    for (int d = 0; d < SNN_NUM_DEVICES; d++) f->marks[d] = arenas[d].top;
    f->tape_head = snn_tape_head;
    return SNN_OK;
}

/* Gives back every block (no step may be open), then takes one of `bytes` rounded up to whole
 * MiB (none for 0): the old blocks and the new one are never held together. False when the
 * block cannot be had; the arena is then empty. */
static bool one_block(arena *a, size_t bytes, snn_device device)
{
    const size_t size = (bytes + ((size_t)1 << 20) - 1) >> 20 << 20;
    release_blocks_from(a, 0, device);
    void *p = size ? snn_alloc(size, device) : NULL;
    if (p) a->blocks[a->nblocks++] = (block){p, size};
    return p || !size;
}

/* After the outermost step: merge a multi-block arena into one block as large as the most the
 * step had in use at once (not the sum of the blocks, which doubled as they were added, nor
 * their unused ends: in one block the step's allocations lie end to end). On failure the
 * arena simply starts empty again. */
static void coalesce(arena *a, snn_device device)
{
    a->last_peak = a->high_water;
    a->high_water = 0;
    a->grown = 0;
    if (a->nblocks > 1) one_block(a, a->last_peak, device);
}

void snn_step_end(void)
{
    SNN_ASSERT(depth > 0 && "snn_step_end() without snn_step_begin()");
    frame *f = &frames[--depth];
    for (int d = 0; d < SNN_NUM_DEVICES; d++) {
        arenas[d].top = f->marks[d]; /* the outermost step began on an empty arena */
        if (snn_arena_profiling) snn_arena_profile_free((snn_device)d, f->marks[d]);
        /* Device work queued in this step may still read arena memory that the next step will
         * overwrite; the single stream orders that, so no synchronisation is needed. */
        if (depth == 0) coalesce(&arenas[d], (snn_device)d);
    }
    snn_tape_head = f->tape_head;
    snn_step_pool_end(depth);
}

int snn_step_depth(void) { return depth; }
uint64_t snn_step_id(void) { return depth ? frames[depth - 1].id : 0; }

bool snn_step_is_open(uint64_t id)
{
    for (int i = 0; i < depth; i++)
        if (frames[i].id == id) return true;
    return false;
}

size_t snn_arena_reserved_bytes(snn_device device) { return reserved_bytes(&arenas[device]); }

snn_status snn_step_reserve(snn_device device, size_t bytes)
{
    const char *fn = "snn_step_reserve";
    if (depth > 0)
        return snn_error(SNN_ERR_STATE, "%s: a step is open; hint: reserve before the first "
                         "snn_step_begin()", fn);
    if (device != SNN_CPU && device != SNN_CUDA)
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad argument 'device' (%d)", fn, (int)device);
    arena *a = &arenas[device];
    if (bytes == 0 || (a->nblocks >= 1 && a->blocks[0].size >= bytes)) return SNN_OK;
    if (!one_block(a, bytes, device))
        return snn_error(SNN_ERR_MEMORY, "%s: out of %s memory for a step arena of %zu bytes "
                         "(%zu live)", fn, snn_device_name(device), bytes, snn_live_bytes(device));
    return SNN_OK;
}

size_t snn_step_peak_bytes(snn_device device)
{
    return device == SNN_CPU || device == SNN_CUDA ? arenas[device].last_peak : 0;
}

void snn_arena_release_all(void)
{
    SNN_ASSERT(depth == 0 && "snn_shutdown() with a step still open");
    snn_step_pool_release_all();
    for (int d = 0; d < SNN_NUM_DEVICES; d++) { /* no step is open: every block is free */
        release_blocks_from(&arenas[d], 0, (snn_device)d);
        arenas[d] = (arena){.top.current = -1};
    }
}

snn_step_scratch snn_step_scratch_mark(snn_device device) { return arenas[device].top; }

void snn_step_scratch_release(snn_device device, snn_step_scratch at)
{
    const snn_arena_mark top = arenas[device].top;
    SNN_ASSERT(depth > 0 && (at.current < top.current ||
                             (at.current == top.current && at.used <= top.used)));
    if (snn_arena_profiling) snn_arena_profile_free(device, at);
    arenas[device].top = at;
}
