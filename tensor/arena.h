/*
 * arena.h - the step arena (internal): bump allocation of STEP memory, released per step.
 *
 * One arena per device. snn_step_begin() records where each arena's top is; snn_step_end()
 * moves the tops back, which releases every tensor, saved buffer and tape node made inside the
 * step in O(1). Blocks are kept for the next step, and when the outermost step ends with the
 * arena spread over several blocks they are merged into one block of the total size, so from
 * the second step on a training loop makes no allocation at all (no cudaMalloc in the steady
 * state on CUDA: this arena is the caching allocator).
 */
#ifndef SNN_ARENA_H
#define SNN_ARENA_H

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

/* A STEP tensor struct that shares `base`'s data (a view); shape must have base's numel. */
snn_tensor *snn_step_view(const char *fn, snn_tensor *base, snn_shape shape);

/* Scratch inside an op: memory taken after a mark is given back by the release, so a workspace
 * that only lives during one kernel does not stay reserved until the step ends. Only valid when
 * nothing that must outlive the op was allocated after the mark (queued device work is ordered
 * on the one stream, so the next op may safely reuse the bytes). */
typedef struct snn_step_scratch {
    int current;
    size_t used, below;
} snn_step_scratch;

snn_step_scratch snn_step_scratch_mark(snn_device device);
void snn_step_scratch_release(snn_device device, snn_step_scratch mark);

/* The autograd tape's newest node. It lives in the host arena, so snn_step_end() puts it back
 * to what it was at the matching snn_step_begin(); autograd/tape.c pushes onto it. */
extern struct snn_node *snn_tape_head;

/* Frees every arena block (snn_shutdown calls it; no step may be open). */
void snn_arena_release_all(void);

#ifdef __cplusplus
}
#endif

#endif /* SNN_ARENA_H */
