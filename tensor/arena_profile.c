/*
 * arena_profile.c - the memory profile of a step, for benchmarks (snn_arena_profile, arena.h):
 * while it is on, one record per allocation the step arena makes (the name the op passed, the
 * bytes, and where in the arena it lies), so that a benchmark can print what a training step
 * holds, op by op.
 *
 * The arena is a stack, so memory given back (a scratch release, a step's end) is always the
 * newest records of that device, which are dropped. The records themselves live
 * in host memory of their own, given back when the profile is turned off or at snn_shutdown().
 * Test: tests/test_memory_diet.c (memory_diet_check.h reads the profile).
 */
#include <string.h>

#include "arena.h"
#include "error.h"
#include "kernels/kernels.h"

bool snn_arena_profiling;

typedef struct alloc_record {
    const char *fn;
    size_t bytes;
    snn_device device;
    snn_arena_mark at; /* where it starts: block and offset in it */
} alloc_record;

static alloc_record *records;
static size_t n_records, records_capacity;
static size_t high_water[SNN_NUM_DEVICES]; /* most bytes in use at once since the profile began */
/* the records as they were when a device's high-water was last raised (what it held then) */
static alloc_record *peak[SNN_NUM_DEVICES];
static size_t n_peak[SNN_NUM_DEVICES], peak_capacity[SNN_NUM_DEVICES];

static void profile_off(void) { snn_arena_profile(false); }

/* peak[device] <- the records now (a copy per raise of the high-water: profiling only) */
static void keep_peak(snn_device device)
{
    if (n_records > peak_capacity[device]) {
        alloc_record *grown = snn_alloc(records_capacity * sizeof *grown, SNN_CPU);
        if (!grown) return; /* the last copy stays */
        snn_free(peak[device], peak_capacity[device] * sizeof *grown, SNN_CPU);
        peak[device] = grown;
        peak_capacity[device] = records_capacity;
    }
    if (n_records) memcpy(peak[device], records, n_records * sizeof *records);
    n_peak[device] = n_records;
}

void snn_arena_profile_alloc(const char *fn, size_t bytes, snn_device device, snn_arena_mark at,
                             size_t in_use)
{
    const bool raised = in_use > high_water[device];
    if (raised) high_water[device] = in_use;
    if (n_records == records_capacity) {
        size_t capacity = records_capacity ? 2 * records_capacity : 4096;
        alloc_record *grown = snn_alloc(capacity * sizeof *grown, SNN_CPU);
        if (!grown) return; /* a profile with a hole beats a failed step */
        if (n_records) memcpy(grown, records, n_records * sizeof *grown);
        snn_free(records, records_capacity * sizeof *records, SNN_CPU);
        records = grown;
        records_capacity = capacity;
        snn_on_shutdown(profile_off); /* the records go back at shutdown at the latest */
    }
    records[n_records++] = (alloc_record){fn, bytes, device, at};
    if (raised) keep_peak(device);
}

static bool before(snn_arena_mark a, snn_arena_mark b)
{
    return a.current < b.current || (a.current == b.current && a.used < b.used);
}

void snn_arena_profile_free(snn_device device, snn_arena_mark at)
{
    /* the device's records from `at` on are its newest: they follow its last one before `at`;
     * the other device's records among them stay */
    size_t from = n_records;
    while (from > 0 && (records[from - 1].device != device || !before(records[from - 1].at, at)))
        from--;
    size_t kept = from;
    for (size_t i = from; i < n_records; i++)
        if (records[i].device != device) records[kept++] = records[i];
    n_records = kept;
}

void snn_arena_profile(bool on)
{
    snn_arena_profiling = on;
    n_records = 0;
    for (int d = 0; d < SNN_NUM_DEVICES; d++) high_water[d] = n_peak[d] = 0;
    if (!on && records) {
        snn_free(records, records_capacity * sizeof *records, SNN_CPU);
        records = NULL;
        records_capacity = 0;
    }
    for (int d = 0; !on && d < SNN_NUM_DEVICES; d++) {
        snn_free(peak[d], peak_capacity[d] * sizeof *peak[d], SNN_CPU);
        peak[d] = NULL;
        peak_capacity[d] = 0;
    }
}

/* One row per distinct name of the device's records in recs, in order of first appearance
 * (names are string literals of the ops, compared by content). */
static void report(const alloc_record *recs, size_t n, snn_device device,
                   void (*row)(const char *fn, size_t bytes, int count, void *ctx), void *ctx)
{
    for (size_t i = 0; i < n; i++) {
        if (recs[i].device != device) continue;
        bool seen = false;
        for (size_t j = 0; j < i && !seen; j++)
            seen = recs[j].device == device && strcmp(recs[j].fn, recs[i].fn) == 0;
        if (seen) continue;
        size_t bytes = 0;
        int count = 0;
        for (size_t j = i; j < n; j++)
            if (recs[j].device == device && strcmp(recs[j].fn, recs[i].fn) == 0) {
                bytes += recs[j].bytes;
                count++;
            }
        row(recs[i].fn, bytes, count, ctx);
    }
}

size_t snn_arena_profile_report(snn_device device,
                                void (*row)(const char *fn, size_t bytes, int count, void *ctx),
                                void *ctx)
{
    report(records, n_records, device, row, ctx);
    return high_water[device];
}

size_t snn_arena_profile_report_high_water(snn_device device,
                                           void (*row)(const char *fn, size_t bytes, int count,
                                                       void *ctx),
                                           void *ctx)
{
    report(peak[device], n_peak[device], device, row, ctx);
    return high_water[device];
}
