/*
 * arena.c - the step arena: every STEP tensor, saved buffer and tape node lives here.
 * See arena.h for the idea. Not thread-safe: ops run on the main thread only.
 */
#include <string.h>

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
    int current;      /* index of the block being filled; -1 before the first allocation */
    size_t used;      /* bytes used in blocks[current] */
    size_t below;     /* bytes in the blocks before blocks[current] (all of them count as used) */
    size_t in_use;    /* bytes handed out and not given back: the sum of the (aligned) sizes,
                         without the unused ends of the blocks left behind */
    size_t high_water;/* most in_use at once since the last coalesce */
    size_t last_peak; /* high_water of the last outermost step */
    size_t grown;     /* size of the last block added in this outermost step; 0: none yet */
} arena;

typedef struct mark {
    int current;
    size_t used, below, in_use;
} mark;

typedef struct frame {
    uint64_t id;
    mark marks[SNN_NUM_DEVICES];
    struct snn_node *tape_head;
} frame;

static arena arenas[SNN_NUM_DEVICES] = {{.current = -1}, {.current = -1}};
static frame frames[MAX_DEPTH];
static int depth;
static uint64_t next_id = 1;

struct snn_node *snn_tape_head;

/* The memory profile (snn_arena_profile): one record per allocation while it is on. */
typedef struct alloc_record {
    const char *fn;
    size_t bytes;
    snn_device device;
    int block;       /* where it starts: block index and offset in it */
    size_t offset;
} alloc_record;

static bool profiling;
static alloc_record *records;
static size_t n_records, records_capacity;
static size_t profile_high_water[SNN_NUM_DEVICES];

/* Forgets the records of `device` at or after (block, offset): memory given back. They are
 * the newest records of that device. */
static void drop_records_after(snn_device device, int at_block, size_t offset)
{
    for (size_t i = n_records; i-- > 0;) {
        const alloc_record *r = &records[i];
        if (r->device != device) continue;
        if (r->block < at_block || (r->block == at_block && r->offset < offset)) break;
        memmove(&records[i], &records[i + 1], (n_records - i - 1) * sizeof *records);
        n_records--;
    }
}

static void profile_record(const char *fn, size_t bytes, snn_device device, int at_block, size_t offset)
{
    if (n_records == records_capacity) {
        size_t capacity = records_capacity ? 2 * records_capacity : 4096;
        alloc_record *grown = snn_alloc(capacity * sizeof *grown, SNN_CPU);
        if (!grown) return; /* a profile with a hole beats a failed step */
        if (n_records) memcpy(grown, records, n_records * sizeof *grown);
        snn_free(records, records_capacity * sizeof *records, SNN_CPU);
        records = grown;
        records_capacity = capacity;
    }
    records[n_records++] = (alloc_record){fn, bytes, device, at_block, offset};
}

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
    SNN_ASSERT(from > a->current);
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
    const int next = a->current + 1;
    const size_t size = grow_size(a, need); /* before any release: it reads what is held */
    *tried = 0;
    if (next < a->nblocks && a->blocks[next].size < need) release_blocks_from(a, next, device);
    if (next == a->nblocks && (next == MAX_BLOCKS || !add_block(a, size, need, device, tried)))
        return false;
    a->below += a->current >= 0 ? a->blocks[a->current].size : 0;
    a->current = next;
    a->used = 0;
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
    if ((a->current < 0 || a->used + need > a->blocks[a->current].size) &&
        !next_block(a, need, device, &tried))
        goto out_of_memory;
    void *p = a->blocks[a->current].base + a->used;
    if (profiling) profile_record(fn, need, device, a->current, a->used);
    a->used += need;
    a->in_use += need;
    if (a->in_use > a->high_water) a->high_water = a->in_use;
    if (a->in_use > profile_high_water[device]) profile_high_water[device] = a->in_use;
    return p;

out_of_memory:
    if (a->nblocks == MAX_BLOCKS && !tried)
        return snn_error_null(SNN_ERR_MEMORY, "%s: out of %s memory (asked for %zu bytes; the "
                              "step arena has all its %d blocks, %zu bytes, %zu in use)", fn,
                              snn_device_name(device), bytes, MAX_BLOCKS, reserved_bytes(a),
                              a->in_use);
    /* name the block the arena asked for too: it is what did not fit, not the caller's bytes */
    return snn_error_null(SNN_ERR_MEMORY,
                          "%s: out of %s memory (asked for %zu bytes; the step arena, holding "
                          "%zu bytes in %d blocks with %zu in use, could not add a block of %zu "
                          "bytes, nor a smaller one down to the bytes asked for; %zu live in all)",
                          fn, snn_device_name(device), bytes, reserved_bytes(a), a->nblocks,
                          a->in_use, tried ? tried : bytes, snn_live_bytes(device));
}

/* A STEP tensor struct of `shape` on `device` in the host arena, without data. */
static snn_tensor *step_struct(const char *fn, snn_shape shape, snn_device device)
{
    snn_tensor *t = snn_step_alloc(fn, sizeof *t, SNN_CPU);
    if (!t) return NULL;
    memset(t, 0, sizeof *t);
    t->shape = shape;
    t->numel = snn_shape_numel(shape);
    t->device = device;
    t->lifetime = SNN_STEP;
    return t;
}

snn_tensor *snn_step_tensor(const char *fn, snn_shape shape, snn_device device)
{
    char buf[96];
    if (shape.ndim < 0 || shape.ndim > SNN_MAX_DIMS)
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad shape (expected 0 to %d dims, got %d)",
                              fn, SNN_MAX_DIMS, shape.ndim);
    for (int d = 0; d < shape.ndim; d++)
        if (shape.dim[d] < 0)
            return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad shape %s (negative size in dim %d)",
                                  fn, snn_shape_str(shape, buf, sizeof buf), d);
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
    for (int d = 0; d < SNN_NUM_DEVICES; d++) {
        f->marks[d].current = arenas[d].current;
        f->marks[d].used = arenas[d].used;
        f->marks[d].below = arenas[d].below;
        f->marks[d].in_use = arenas[d].in_use;
    }
    f->tape_head = snn_tape_head;
    return SNN_OK;
}

/* After the outermost step: merge a multi-block arena into one block as large as the most the
 * step had in use at once (not the sum of the blocks, which doubled as they were added, nor
 * their unused ends: in one block the step's allocations lie end to end). The old blocks are
 * given back before the new one is taken. */
static void coalesce(arena *a, snn_device device)
{
    a->last_peak = a->high_water;
    a->high_water = 0;
    a->grown = 0;
    if (a->nblocks <= 1) return;
    size_t total = (a->last_peak + ((size_t)1 << 20) - 1) >> 20 << 20; /* whole MiB */
    release_blocks_from(a, 0, device);
    void *p = total ? snn_alloc(total, device) : NULL;
    if (p) { /* on failure the arena simply starts empty again */
        a->blocks[0].base = p;
        a->blocks[0].size = total;
        a->nblocks = 1;
    }
}

void snn_step_end(void)
{
    SNN_ASSERT(depth > 0 && "snn_step_end() without snn_step_begin()");
    frame *f = &frames[--depth];
    for (int d = 0; d < SNN_NUM_DEVICES; d++) {
        arenas[d].current = f->marks[d].current;
        arenas[d].used = f->marks[d].used;
        arenas[d].below = f->marks[d].below;
        arenas[d].in_use = f->marks[d].in_use;
        if (depth == 0) {
            /* Device work queued in this step may still read arena memory that the next step
             * will overwrite; the single stream orders that, so no synchronisation is needed. */
            coalesce(&arenas[d], (snn_device)d);
            arenas[d].current = -1;
            arenas[d].used = 0;
            arenas[d].below = 0;
            arenas[d].in_use = 0;
        }
    }
    snn_tape_head = f->tape_head;
    snn_step_pool_end(depth);
    if (profiling) { /* the step's allocations are gone */
        for (int d = 0; d < SNN_NUM_DEVICES && depth > 0; d++)
            drop_records_after((snn_device)d, f->marks[d].current, f->marks[d].used);
        if (depth == 0) n_records = 0;
    }
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
    size_t size = (bytes + ((size_t)1 << 20) - 1) >> 20 << 20; /* whole MiB, as coalesce */
    if (size == 0 || (a->nblocks >= 1 && a->blocks[0].size >= size)) return SNN_OK;
    release_blocks_from(a, 0, device); /* first: the old and the new are not held together */
    void *p = snn_alloc(size, device);
    if (!p)
        return snn_error(SNN_ERR_MEMORY, "%s: out of %s memory for a step arena of %zu bytes "
                         "(%zu live)", fn, snn_device_name(device), size, snn_live_bytes(device));
    a->blocks[0].base = p;
    a->blocks[0].size = size;
    a->nblocks = 1;
    return SNN_OK;
}

size_t snn_step_peak_bytes(snn_device device)
{
    return device == SNN_CPU || device == SNN_CUDA ? arenas[device].last_peak : 0;
}

void snn_arena_release_all(void)
{
    SNN_ASSERT(depth == 0 && "snn_shutdown() with a step still open");
    snn_arena_profile(false);
    snn_step_pool_release_all();
    for (int d = 0; d < SNN_NUM_DEVICES; d++) {
        arena *a = &arenas[d];
        a->current = -1; /* no step is open: every block is free */
        release_blocks_from(a, 0, (snn_device)d);
        a->used = a->below = a->in_use = a->high_water = a->last_peak = a->grown = 0;
    }
}

snn_step_scratch snn_step_scratch_mark(snn_device device)
{
    const arena *a = &arenas[device];
    return (snn_step_scratch){a->current, a->used, a->below, a->in_use};
}

void snn_step_scratch_release(snn_device device, snn_step_scratch at)
{
    arena *a = &arenas[device];
    SNN_ASSERT(depth > 0 && (at.current < a->current ||
                             (at.current == a->current && at.used <= a->used)));
    if (profiling) drop_records_after(device, at.current, at.used);
    a->current = at.current;
    a->used = at.used;
    a->below = at.below;
    a->in_use = at.in_use;
}

void snn_arena_profile(bool on)
{
    profiling = on;
    n_records = 0;
    for (int d = 0; d < SNN_NUM_DEVICES; d++) profile_high_water[d] = 0;
    if (!on && records) {
        snn_free(records, records_capacity * sizeof *records, SNN_CPU);
        records = NULL;
        records_capacity = 0;
    }
}

size_t snn_arena_profile_report(snn_device device,
                                void (*row)(const char *fn, size_t bytes, int count, void *ctx),
                                void *ctx)
{
    /* one row per distinct name, in order of first appearance (names are string literals of
     * the ops, compared by content) */
    for (size_t i = 0; i < n_records; i++) {
        if (records[i].device != device) continue;
        bool seen = false;
        for (size_t j = 0; j < i && !seen; j++)
            seen = records[j].device == device && strcmp(records[j].fn, records[i].fn) == 0;
        if (seen) continue;
        size_t bytes = 0;
        int count = 0;
        for (size_t j = i; j < n_records; j++)
            if (records[j].device == device && strcmp(records[j].fn, records[i].fn) == 0) {
                bytes += records[j].bytes;
                count++;
            }
        row(records[i].fn, bytes, count, ctx);
    }
    return profile_high_water[device];
}
