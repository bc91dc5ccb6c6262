/*
 * run_memory.h - the programs' size check: before a model is built, the bytes it and one step
 * need (snn_model_memory_estimate, nn/model_memory.c) are compared with what the device can
 * still give (snn_device_memory: MemAvailable capped by the memory cgroup, or cudaMemGetInfo),
 * and a size that cannot fit is refused with both numbers and the flags that change it.
 *
 * Without it, a width or batch too large was found out by the allocator, and with Linux's
 * overcommit that means the OOM killer (exit 137, no message, an hour of data loading lost)
 * whenever malloc said yes to more than the machine has.
 *
 * A run fits when its estimate is at most RUN_MEMORY_USABLE of what is available: the rest is
 * left for what the estimate does not count (the C library's own heap, other processes growing
 * meanwhile). SNN_MEMORY_LIMIT (bytes, or with a K/M/G/T suffix) caps what the programs take
 * as available on every device, for a machine shared with other jobs; the tests use it to
 * make "too large" deterministic.
 */
#ifndef SNN_APP_RUN_MEMORY_H
#define SNN_APP_RUN_MEMORY_H

#include <stdbool.h>
#include <stdint.h>

#include "snn.h"

#define RUN_MEMORY_USABLE 0.95

typedef struct run_memory_request {
    const char *program;     /* "snn-train" */
    const char *what;        /* "training" or "evaluating" */
    const char *size_flags;  /* the flags besides --batch-size that shrink it, or NULL */
    snn_model_config config;
    int batch_size;
    int64_t images;          /* the data set's size: a batch never holds more (0: no cap) */
    snn_device device;
    bool training;
    int optimizer_states;
    double host_extra;       /* host bytes besides the model: batches, a checkpoint being read */
    double held;             /* bytes of the estimate already allocated (a model loaded first) */
    bool unfused;            /* the model will run without fusion (--sync-bn: batch-norm and the
                              * neurons apart, nn/fusion_rules.c), which holds more */
    bool keep_bf16;          /* conv outputs kept as bf16 (--keep-bf16), which holds less */
    /* a training step through time (snn_model_memory_estimate_through_time): the state
     * carried (SNN_CARRY_CONSTANT: --train-mode sltt or ottt; SNN_CARRY_DIFFERENTIABLE:
     * --time-checkpoint K) over `steps` time steps a call (1; K); SNN_CARRY_NONE: plain BPTT */
    snn_state_carry carry;
    int steps;
    bool traces;             /* OTTT's presynaptic traces (--train-mode ottt) */
} run_memory_request;

/* Checks the request. Returns 0 when it fits (or when the device cannot tell, with a note) and
 * fills *out; else prints why and returns 2 (the command line must change). `host_per_image`
 * is the part of host_extra that grows with the batch (the loader's buffers). */
int run_memory_check(const run_memory_request *r, double host_per_image,
                     snn_memory_estimate *out);

/* The sparse pass (snn_sparsify) of a model of `config` (at its T) whose calibration batches
 * hold `batch` images: the most images per calibration forward (snn_sparse_options.max_images)
 * whose snn_sparsify_memory_estimate fits the device and the host, `held` bytes of it being
 * allocated already (the model's parameters, when the model exists). Returns `batch` when the
 * whole batch fits, fewer with a note saying so, or 0 after printing the refusal - both numbers
 * and `hint` (what to change) - when not even one image fits. A device that cannot tell its
 * memory: `batch`, with a note. */
int run_memory_sparse_images(const char *program, const snn_model_config *config, int batch,
                             snn_device device, double held, const char *hint);

#endif /* SNN_APP_RUN_MEMORY_H */
