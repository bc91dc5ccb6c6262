/*
 * arena.h - the step arena (internal): bump allocation of STEP memory, released per step.
 *
 * One arena per device. snn_step_begin() records where each arena's top is; snn_step_end()
 * moves the tops back, which releases every tensor, saved buffer and tape node made inside the
 * step in O(1). Blocks are kept for the next step, and when the outermost step ends with the
 * arena spread over several blocks they are merged into one block of the most the step had in
 * use at once, so from the second step on a training loop makes no allocation at all (no
 * cudaMalloc in the steady state on CUDA: this arena is the caching allocator). A later step
 * that needs more than that block adds blocks starting at an eighth of it (arena.c,
 * grow_size), and a block is always given back before its replacement is taken.
 */
#ifndef SNN_ARENA_H
#define SNN_ARENA_H

#include <stdbool.h>
#include <stddef.h>

#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* `bytes` of step memory on `device`, aligned for any kernel (64 B host, 256 B device).
 * NULL with a message naming `fn` when no step is open or memory runs out. */
void *snn_step_alloc(const char *fn, size_t bytes, snn_device device);

/* A STEP tensor struct with uninitialised data; NULL with a message naming `fn` on failure. */
snn_tensor *snn_step_tensor(const char *fn, snn_shape shape, snn_device device);

/* A STEP tensor whose data come from the step pool (pooled = true): memory that can go back
 * before the step ends (the spikes snn_spikes_pack turns into bits). */
snn_tensor *snn_step_pooled_tensor(const char *fn, snn_shape shape, snn_device device);
/* Gives such a tensor's data back to the step pool before the step ends: t->data becomes NULL
 * and t->pooled false (the caller's promise that nothing reads the floats again; kernels
 * already queued on the one stream still read them first). */
void snn_step_pooled_tensor_give_back(snn_tensor *t);

/* A STEP tensor struct that shares `base`'s data (a view); shape must have base's numel. */
snn_tensor *snn_step_view(const char *fn, snn_tensor *base, snn_shape shape);

/* A place in a device's arena: the block being filled (-1: none yet), the bytes used in it,
 * and the bytes handed out and not given back (the sum of the aligned sizes, without the
 * unused ends of the blocks left behind). The arena's top is one; snn_step_begin() saves it
 * and snn_step_end() returns to it. */
typedef struct snn_arena_mark {
    int current;
    size_t used, in_use;
} snn_arena_mark;

/* Scratch inside an op: memory taken after a mark is given back by the release, so a workspace
 * that only lives during one kernel does not stay reserved until the step ends. Only valid when
 * nothing that must outlive the op was allocated after the mark (queued device work is ordered
 * on the one stream, so the next op may safely reuse the bytes). */
typedef snn_arena_mark snn_step_scratch;

snn_step_scratch snn_step_scratch_mark(snn_device device);
void snn_step_scratch_release(snn_device device, snn_step_scratch mark);

/* The autograd tape's newest node. It lives in the host arena, so snn_step_end() puts it back
 * to what it was at the matching snn_step_begin(); autograd/tape.c pushes onto it. */
extern struct snn_node *snn_tape_head;

/* Frees every arena block and step pool block (snn_shutdown calls it; no step may be open). */
void snn_arena_release_all(void);

/* The step pool (step_pool.c): step memory that may be given back before its step ends, for
 * the gradients of activations. A block not given back is given back when the step that took
 * it ends. */
void *snn_step_pool_alloc(const char *fn, size_t bytes, snn_device device);
void snn_step_pool_release(void *p, snn_device device);
void snn_step_pool_end(int depth);          /* gives back what steps deeper than `depth` took */
size_t snn_step_pool_peak_bytes(snn_device device);      /* most bytes handed out at once */
void snn_step_pool_reset_peak(snn_device device);
size_t snn_step_pool_reserved_bytes(snn_device device);  /* held from snn_alloc, in use or not */
/* The pool's side of the memory profile (while snn_arena_profiling is on): each block taken
 * remembers the name its op passed and the op whose backward was running then (backward.c
 * names it, and puts back the name before it when the node is done, so a backward run inside
 * a node's backward leaves its node named: snn_step_pool_backward_op, NULL outside);
 * snn_step_pool_profile_report_peak calls `row` once per such pair with what was in use when
 * the pool last reached its high-water mark (since snn_step_pool_reset_peak): where the
 * gradients' memory peaks, and why. */
const char *snn_step_pool_backward_op(const char *op); /* returns the op named before */
void snn_step_pool_profile_report_peak(snn_device device,
                                       void (*row)(const char *fn, const char *backward_op,
                                                   size_t bytes, int count, void *ctx),
                                       void *ctx);
void snn_step_pool_release_all(void);

/* Memory profile of a step, for benchmarks (arena_profile.c): while on, the arena records
 * every allocation it makes (the name the op passed, the bytes); scratch given back is dropped
 * from the record. snn_arena_profile_report() calls `row` once per name with what is held now
 * (call it before snn_step_end) and returns the device arena's high-water mark since the
 * profile began; snn_arena_profile_report_high_water() the same of what was held when that mark
 * was reached (where a step's memory peaks, and why). snn_shutdown() turns it off. */
void snn_arena_profile(bool on);
size_t snn_arena_profile_report(snn_device device,
                                void (*row)(const char *fn, size_t bytes, int count, void *ctx),
                                void *ctx);
size_t snn_arena_profile_report_high_water(snn_device device,
                                           void (*row)(const char *fn, size_t bytes, int count,
                                                       void *ctx),
                                           void *ctx);
/* The profiler's side of the arena (arena.c calls these only while snn_arena_profiling is
 * on): `bytes` handed out at place `at`, after which `in_use` bytes of the device are in use;
 * and everything at or after `at` given back. */
extern bool snn_arena_profiling;
void snn_arena_profile_alloc(const char *fn, size_t bytes, snn_device device, snn_arena_mark at,
                             size_t in_use);
void snn_arena_profile_free(snn_device device, snn_arena_mark at);

#ifdef __cplusplus
}
#endif

#endif /* SNN_ARENA_H */
