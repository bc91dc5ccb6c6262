/*
 * tensor.h - the snn.c tensor: float32, contiguous, row-major, up to 6 dims, on one device.
 *
 * Dimension glossary used across snn.c:
 *   T time steps, N batch, C channels, H height, W width, K kernel size.
 *   Multi-step data is (T, N, C, H, W); stateless layers fold T*N into one batch.
 *
 * Two lifetimes, and only two:
 *   - OWNED tensors (parameters, optimizer state, running statistics) are made with
 *     snn_tensor_new() and released with snn_tensor_free() by whoever made them (a module).
 *   - STEP tensors (every activation, gradient of an activation, saved buffer) are made by ops
 *     inside snn_step_begin() / snn_step_end() and all released together at snn_step_end().
 *     A step tensor is never freed by hand, so a training loop cannot leak.
 *
 * Worked example (CPU):
 *
 *     snn_tensor *w = snn_tensor_new(SNN_SHAPE(3, 2), SNN_CPU);   // owned, zero-filled
 *     snn_step_begin();
 *     snn_tensor *x = snn_full(SNN_SHAPE(4, 2), 1.0f, SNN_CPU);   // step tensor
 *     snn_tensor *y = snn_matmul_nt(x, w);                        // see autograd.h
 *     if (!y) fprintf(stderr, "%s\n", snn_last_error());
 *     snn_step_end();                                             // x and y are gone
 *     snn_tensor_free(w);
 *
 * Errors: functions that return a tensor return NULL on bad input and leave a message in
 * snn_last_error() that names the function, the argument, what was expected and what came.
 * Ops given a NULL input return NULL and keep the first message, so a chain of calls can be
 * checked once at its end. Bugs inside snn.c abort with file:line (SNN_ASSERT in error.h).
 */
#ifndef SNN_TENSOR_H
#define SNN_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SNN_MAX_DIMS 6

typedef enum snn_device { SNN_CPU = 0, SNN_CUDA = 1 } snn_device;
#define SNN_NUM_DEVICES 2

typedef enum snn_status {
    SNN_OK = 0,
    SNN_ERR_ARGUMENT,     /* a bad argument: wrong rank, shape, value, device mix */
    SNN_ERR_MEMORY,       /* an allocation failed */
    SNN_ERR_IO,           /* a file could not be opened, read or written */
    SNN_ERR_FORMAT,       /* a file was read but its content is not what was expected */
    SNN_ERR_NUMERIC,      /* NaN or infinity where a finite number is required */
    SNN_ERR_UNSUPPORTED,  /* valid request this build cannot serve (e.g. CUDA without SNN_CUDA) */
    SNN_ERR_STATE,        /* API used out of order (e.g. op outside snn_step_begin/end) */
} snn_status;

/* ---------------------------------------------------------------------------------------------
 * Shapes
 * ------------------------------------------------------------------------------------------- */

typedef struct snn_shape {
    int ndim;
    int64_t dim[SNN_MAX_DIMS];
} snn_shape;

/* SNN_SHAPE(2, 3, 4) is a snn_shape of 3 dims. */
#define SNN_SHAPE(...) ((snn_shape){SNN_COUNT_ARGS_(__VA_ARGS__, 6, 5, 4, 3, 2, 1, 0), {__VA_ARGS__}})
#define SNN_COUNT_ARGS_(a1, a2, a3, a4, a5, a6, n, ...) n

int64_t snn_shape_numel(snn_shape shape);
bool snn_shape_equal(snn_shape a, snn_shape b);
/* Writes "[2, 3, 4]" into buf (always NUL-terminated); returns buf. */
const char *snn_shape_str(snn_shape shape, char *buf, size_t size);

/* ---------------------------------------------------------------------------------------------
 * The tensor
 * ------------------------------------------------------------------------------------------- */

typedef enum snn_lifetime { SNN_OWNED = 0, SNN_STEP = 1 } snn_lifetime;

struct snn_node; /* autograd/autograd.h */

typedef struct snn_tensor {
    float *data;                 /* numel floats on `device`; shared with `base` for a view */
    snn_shape shape;
    int64_t numel;
    snn_device device;
    snn_lifetime lifetime;
    bool requires_grad;          /* a leaf that wants .grad, or a result of such a leaf */
    struct snn_tensor *grad;     /* same shape and device; NULL until backward writes one */
    struct snn_node *grad_fn;    /* the tape node that produced it; NULL for a leaf */
    struct snn_tensor *base;     /* for a view: the tensor whose data it shares; else NULL */
    const char *name;            /* optional: used in messages and checkpoints */
} snn_tensor;

/* OWNED: zero-filled tensor owned by the caller; release with snn_tensor_free. NULL on error. */
snn_tensor *snn_tensor_new(snn_shape shape, snn_device device);
/* Frees data, grad and struct of an OWNED tensor. NULL is a no-op. */
void snn_tensor_free(snn_tensor *t);
/* OWNED: a grad buffer for an owned tensor, allocated on first use (zero-filled). */
snn_tensor *snn_tensor_grad(snn_tensor *t);
/* OWNED: makes t's gradient a view of t->numel floats of `storage` (an OWNED tensor on t's
 * device, not itself a view) from element `offset` on, so that many gradients share one
 * contiguous buffer (dist/ all-reduces it in a few large pieces). A gradient t had is freed;
 * the view's floats are left as they are. snn_tensor_free(t) frees the view, never the
 * storage, which must outlive every view of it. */
snn_status snn_tensor_set_grad_view(snn_tensor *t, snn_tensor *storage, int64_t offset);

/* STEP tensors: live until the enclosing snn_step_end(). */
snn_tensor *snn_empty(snn_shape shape, snn_device device);            /* uninitialised */
snn_tensor *snn_zeros(snn_shape shape, snn_device device);
snn_tensor *snn_full(snn_shape shape, float value, snn_device device);
snn_tensor *snn_from_host(snn_shape shape, const float *host, snn_device device);
/* A step copy of t on `device` (a copy even when t is already there). Not differentiable. */
snn_tensor *snn_to_device(const snn_tensor *t, snn_device device);

/* Copies between a tensor and host memory (numel floats); synchronises when on CUDA. */
snn_status snn_tensor_copy_from_host(snn_tensor *t, const float *host);
snn_status snn_tensor_copy_to_host(const snn_tensor *t, float *host);
/* dst <- src, same numel, any devices. */
snn_status snn_tensor_copy(snn_tensor *dst, const snn_tensor *src);
snn_status snn_tensor_fill(snn_tensor *t, float value);
/* The single value of a 1-element tensor (synchronises when on CUDA). NaN on error. */
float snn_tensor_item(const snn_tensor *t);

/* ---------------------------------------------------------------------------------------------
 * Steps: the arena that owns every STEP tensor and the autograd tape.
 * ------------------------------------------------------------------------------------------- */

/* Opens a step; steps nest. Returns SNN_ERR_MEMORY only if the bookkeeping cannot grow. */
snn_status snn_step_begin(void);
/* Releases every STEP tensor and tape node made since the matching snn_step_begin(). */
void snn_step_end(void);
/* Number of steps open now (0 outside any step). */
int snn_step_depth(void);
/* Id of the innermost open step (0 outside any step); ids are never reused. */
uint64_t snn_step_id(void);
/* True while the step with this id is open. */
bool snn_step_is_open(uint64_t id);
/* Bytes reserved by the step arenas of a device (they are reused, not freed, between steps). */
size_t snn_arena_reserved_bytes(snn_device device);
/* Frees the arena blocks and every per-device resource; call at exit (steps must be closed). */
void snn_shutdown(void);

/* ---------------------------------------------------------------------------------------------
 * Memory: every byte snn.c takes, host or device, goes through snn_alloc.
 * ------------------------------------------------------------------------------------------- */

/* Returns NULL on failure (no message: the caller names what it was allocating). */
void *snn_alloc(size_t bytes, snn_device device);
/* Releases memory from snn_alloc; `bytes` must be the size asked for. NULL is a no-op. */
void snn_free(void *p, size_t bytes, snn_device device);
size_t snn_live_bytes(snn_device device);   /* allocated and not yet freed */
size_t snn_peak_bytes(snn_device device);   /* high-water mark of snn_live_bytes */
uint64_t snn_alloc_count(void);             /* successful allocations so far, all devices */
/* Test hook: the n-th allocation from now (1 = the next) fails; 0 turns it off. */
void snn_alloc_fail_after(uint64_t n);

/* ---------------------------------------------------------------------------------------------
 * Errors
 * ------------------------------------------------------------------------------------------- */

const char *snn_last_error(void);   /* "" when none */
snn_status snn_last_status(void);
void snn_clear_error(void);

/* ---------------------------------------------------------------------------------------------
 * Devices and threads
 * ------------------------------------------------------------------------------------------- */

const char *snn_device_name(snn_device device);            /* "cpu", "cuda" */
/* Parses "cpu" or "cuda"; SNN_ERR_ARGUMENT with a message otherwise. */
snn_status snn_device_parse(const char *name, snn_device *out);
bool snn_cuda_compiled(void);    /* built with SNN_CUDA */
bool snn_cuda_available(void);   /* built with SNN_CUDA and a GPU is visible */
/* Waits for all queued device work (no-op on the CPU). */
void snn_synchronize(snn_device device);
void snn_set_num_threads(int n); /* OpenMP threads for CPU kernels; <= 0 means all cores */
int snn_get_num_threads(void);

/* ---------------------------------------------------------------------------------------------
 * Random numbers: xoshiro256** (Blackman & Vigna), a plain struct so that checkpoints can save
 * it and a resumed run draws exactly the same numbers.
 * ------------------------------------------------------------------------------------------- */

typedef struct snn_rng {
    uint64_t s[4];
} snn_rng;

void snn_rng_seed(snn_rng *rng, uint64_t seed);
uint64_t snn_rng_u64(snn_rng *rng);
float snn_rng_uniform(snn_rng *rng);                 /* [0, 1) with 24 random bits */
float snn_rng_normal(snn_rng *rng);                  /* standard normal, Box-Muller */
uint64_t snn_rng_below(snn_rng *rng, uint64_t n);    /* uniform in [0, n), unbiased */
/* In place on any device (drawn on the host, then copied): U[lo, hi) and N(mean, std^2). */
snn_status snn_tensor_uniform_(snn_tensor *t, snn_rng *rng, float lo, float hi);
snn_status snn_tensor_normal_(snn_tensor *t, snn_rng *rng, float mean, float std);

#ifdef __cplusplus
}
#endif

#endif /* SNN_TENSOR_H */
