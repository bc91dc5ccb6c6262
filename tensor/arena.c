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
    size_t high_water;/* most bytes in use at once since the last coalesce */
    size_t last_peak; /* high_water of the last outermost step */
} arena;

typedef struct mark {
    int current;
    size_t used, below;
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

static int replace_block(arena *a, int i, size_t size, snn_device device)
{
    void *p = snn_alloc(size, device);
    if (!p) return 0;
    if (a->blocks[i].base) snn_free(a->blocks[i].base, a->blocks[i].size, device);
    a->blocks[i].base = p;
    a->blocks[i].size = size;
    return 1;
}

void *snn_step_alloc(const char *fn, size_t bytes, snn_device device)
{
    if (depth == 0)
        return snn_error_null(SNN_ERR_STATE,
                              "%s: no step is open; hint: wrap forward, backward and update in "
                              "snn_step_begin() ... snn_step_end()", fn);
    arena *a = &arenas[device];
    size_t need = align_up(bytes ? bytes : 1, device == SNN_CPU ? HOST_ALIGN : DEVICE_ALIGN);
    if (a->current >= 0 && a->used + need <= a->blocks[a->current].size) {
        void *p = a->blocks[a->current].base + a->used;
        if (profiling) profile_record(fn, need, device, a->current, a->used);
        a->used += need;
        if (a->below + a->used > a->high_water) a->high_water = a->below + a->used;
        if (a->below + a->used > profile_high_water[device])
            profile_high_water[device] = a->below + a->used;
        return p;
    }
    /* Move on to the next block, growing or adding one if it is too small. */
    int next = a->current + 1;
    size_t last = a->current >= 0 ? a->blocks[a->current].size : FIRST_BLOCK_BYTES / 2;
    size_t size = need > 2 * last ? need : 2 * last;
    if (next < a->nblocks && a->blocks[next].size < need) {
        if (!replace_block(a, next, size, device)) goto out_of_memory;
    } else if (next == a->nblocks) {
        if (next == MAX_BLOCKS) goto out_of_memory;
        a->blocks[next].base = NULL;
        if (!replace_block(a, next, size, device)) goto out_of_memory;
        a->nblocks++;
    }
    a->below += a->current >= 0 ? a->blocks[a->current].size : 0;
    a->current = next;
    a->used = need;
    if (profiling) profile_record(fn, need, device, next, 0);
    if (a->below + a->used > a->high_water) a->high_water = a->below + a->used;
    if (a->below + a->used > profile_high_water[device])
        profile_high_water[device] = a->below + a->used;
    return a->blocks[next].base;

out_of_memory:
    return snn_error_null(SNN_ERR_MEMORY,
                          "%s: out of %s memory (asked for %zu bytes; the step arena holds %zu "
                          "bytes, %zu live in all)", fn, snn_device_name(device), bytes,
                          snn_arena_reserved_bytes(device), snn_live_bytes(device));
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
    snn_tensor *t = snn_step_alloc(fn, sizeof *t, SNN_CPU);
    if (!t) return NULL;
    memset(t, 0, sizeof *t);
    t->shape = shape;
    t->numel = snn_shape_numel(shape);
    t->device = device;
    t->lifetime = SNN_STEP;
    t->data = snn_step_alloc(fn, (size_t)t->numel * sizeof(float), device);
    return t->data ? t : NULL;
}

snn_tensor *snn_step_view(const char *fn, snn_tensor *base, snn_shape shape)
{
    SNN_ASSERT(snn_shape_numel(shape) == base->numel);
    snn_tensor *t = snn_step_alloc(fn, sizeof *t, SNN_CPU);
    if (!t) return NULL;
    memset(t, 0, sizeof *t);
    t->data = base->data;
    t->shape = shape;
    t->numel = base->numel;
    t->device = base->device;
    t->lifetime = SNN_STEP;
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
    }
    f->tape_head = snn_tape_head;
    return SNN_OK;
}

/* After the outermost step: merge a multi-block arena into one block as large as the most the
 * step had in use at once (not the sum of the blocks, which doubled as they were added). */
static void coalesce(arena *a, snn_device device)
{
    size_t high_water = a->high_water;
    a->last_peak = high_water;
    a->high_water = 0;
    if (a->nblocks <= 1) return;
    size_t total = (high_water + ((size_t)1 << 20) - 1) >> 20 << 20; /* whole MiB */
    for (int i = 0; i < a->nblocks; i++) snn_free(a->blocks[i].base, a->blocks[i].size, device);
    a->nblocks = 0;
    void *p = snn_alloc(total, device);
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
        if (depth == 0) {
            /* Device work queued in this step may still read arena memory that the next step
             * will overwrite; the single stream orders that, so no synchronisation is needed. */
            coalesce(&arenas[d], (snn_device)d);
            arenas[d].current = -1;
            arenas[d].used = 0;
            arenas[d].below = 0;
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

size_t snn_arena_reserved_bytes(snn_device device)
{
    size_t total = 0;
    for (int i = 0; i < arenas[device].nblocks; i++) total += arenas[device].blocks[i].size;
    return total;
}

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
    for (int i = 0; i < a->nblocks; i++) snn_free(a->blocks[i].base, a->blocks[i].size, device);
    a->nblocks = 0;
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
        for (int i = 0; i < a->nblocks; i++) snn_free(a->blocks[i].base, a->blocks[i].size, (snn_device)d);
        a->nblocks = 0;
        a->current = -1;
        a->used = a->below = a->high_water = a->last_peak = 0;
    }
}

snn_step_scratch snn_step_scratch_mark(snn_device device)
{
    const arena *a = &arenas[device];
    return (snn_step_scratch){a->current, a->used, a->below};
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
