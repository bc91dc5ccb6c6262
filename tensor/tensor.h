/**
 * @file
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
 *     snn_tensor *y = snn_linear(x, w, NULL);                     // x w^T, autograd.h
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

/** The most dims a tensor has. */
#define SNN_MAX_DIMS 6

/** Where a tensor's data live. */
typedef enum snn_device {
    SNN_CPU = 0,   /**< host memory, CPU kernels (the reference) */
    SNN_CUDA = 1,  /**< GPU memory, CUDA kernels (builds with SNN_CUDA) */
} snn_device;
/** Number of snn_device values (for per-device tables). */
#define SNN_NUM_DEVICES 2

/** What a call that can fail returns; the message is in snn_last_error(). */
typedef enum snn_status {
    SNN_OK = 0,           /**< success */
    SNN_ERR_ARGUMENT,     /**< a bad argument: wrong rank, shape, value, device mix */
    SNN_ERR_MEMORY,       /**< an allocation failed */
    SNN_ERR_IO,           /**< a file could not be opened, read or written */
    SNN_ERR_FORMAT,       /**< a file was read but its content is not what was expected */
    SNN_ERR_NUMERIC,      /**< NaN or infinity where a finite number is required */
    SNN_ERR_UNSUPPORTED,  /**< valid request this build cannot serve (e.g. CUDA without SNN_CUDA) */
    SNN_ERR_STATE,        /**< API used out of order (e.g. op outside snn_step_begin/end) */
} snn_status;

/* ---------------------------------------------------------------------------------------------
 * Shapes
 * ------------------------------------------------------------------------------------------- */

/** The dims of a tensor, outermost first: (T, N, C, H, W) is {5, {T, N, C, H, W}}. */
typedef struct snn_shape {
    int ndim;                    /**< 0 (a scalar) to SNN_MAX_DIMS */
    int64_t dim[SNN_MAX_DIMS];   /**< dim[0..ndim) are the sizes; the rest are unused */
} snn_shape;

/** SNN_SHAPE(2, 3, 4) is a snn_shape of 3 dims (1 to 6 arguments). */
#define SNN_SHAPE(...) ((snn_shape){SNN_COUNT_ARGS_(__VA_ARGS__, 6, 5, 4, 3, 2, 1, 0), {__VA_ARGS__}})
/** Helper of SNN_SHAPE: the number of its arguments. */
#define SNN_COUNT_ARGS_(a1, a2, a3, a4, a5, a6, n, ...) n

/** The number of elements of `shape`: the product of its dims (1 for 0 dims). */
int64_t snn_shape_numel(snn_shape shape);
/** True when `a` and `b` have the same ndim and the same sizes. */
bool snn_shape_equal(snn_shape a, snn_shape b);
/** Writes "[2, 3, 4]" into buf (`size` bytes, always NUL-terminated, cut if too small); returns
 * buf. */
const char *snn_shape_str(snn_shape shape, char *buf, size_t size);

/* ---------------------------------------------------------------------------------------------
 * The tensor
 * ------------------------------------------------------------------------------------------- */

/** Who releases a tensor (see the two lifetimes above). */
typedef enum snn_lifetime {
    SNN_OWNED = 0,   /**< made by snn_tensor_new, released by snn_tensor_free */
    SNN_STEP = 1,    /**< made inside a step, released by its snn_step_end */
} snn_lifetime;

struct snn_node; /* autograd/autograd.h */

/** A float32 tensor: contiguous, row-major, on one device. Fields are read freely; write only
 * `requires_grad`, `retain_grad` and `name` (the rest belong to the library). */
typedef struct snn_tensor {
    float *data;                 /**< numel floats on `device`; shared with `base` for a view */
    snn_shape shape;             /**< its dims */
    int64_t numel;               /**< snn_shape_numel(shape) */
    snn_device device;           /**< where `data` lives */
    snn_lifetime lifetime;       /**< who releases it */
    bool requires_grad;          /**< a leaf that wants .grad, or a result of such a leaf */
    struct snn_tensor *grad;     /**< same shape and device; NULL until backward writes one */
    struct snn_node *grad_fn;    /**< the tape node that produced it; NULL for a leaf */
    struct snn_tensor *base;     /**< for a view: the tensor whose data it shares; else NULL */
    const char *name;            /**< optional: used in messages and checkpoints */
    bool pooled;                 /**< data from the step pool: a gradient (given back as soon
                                      as backward is done with it), spikes that may be
                                      packed (snn_spikes_pack gives them back), or a conv's
                                      output that may be kept as bf16 (snn_values_keep_bf16) */
    bool retain_grad;            /**< keep .grad of a non-leaf STEP tensor after backward (as
                                      PyTorch's retain_grad()); leaves always keep theirs */
    bool spikes;                 /**< holds only 0 and 1 (the output of an IF, LIF or PLIF
                                      neuron): snn_spikes_pack may keep it as bits */
    uint32_t *spike_bits;        /**< spikes as bits, bit i % 32 of word i / 32 (step memory):
                                      made by snn_spikes_pack, which then sets `data` to
                                      NULL, or beside the floats by the fused neuron op */
    uint16_t *bf16;              /**< the values as bfloat16 (step memory), which they were
                                      rounded to: made by snn_values_round_bf16, kept for
                                      backward by snn_values_keep_bf16, which then sets `data`
                                      to NULL (autograd/bf16_keep.c) */
} snn_tensor;

/** OWNED: a zero-filled tensor of `shape` on `device`, owned by the caller; release it with
 * snn_tensor_free. NULL on error (a bad shape or device: SNN_ERR_ARGUMENT; out of memory:
 * SNN_ERR_MEMORY; CUDA in a build without it: SNN_ERR_UNSUPPORTED). */
snn_tensor *snn_tensor_new(snn_shape shape, snn_device device);
/** Frees data, grad and struct of an OWNED tensor `t`. NULL is a no-op. */
void snn_tensor_free(snn_tensor *t);
/** The gradient buffer of the OWNED tensor `t` (same shape and device), allocated zero-filled on
 * first use and owned by `t` (snn_tensor_free(t) frees it). NULL when out of memory. */
snn_tensor *snn_tensor_grad(snn_tensor *t);
/** OWNED: makes the gradient of the OWNED tensor `t` a view of t->numel floats of `storage` (an
 * OWNED tensor on t's device, not itself a view) from element `offset` on, so that many
 * gradients share one contiguous buffer (distributed/ all-reduces it in a few large pieces). A
 * gradient t had is freed; the view's floats are left as they are. snn_tensor_free(t) frees the
 * view, never the storage, which must outlive every view of it. SNN_ERR_ARGUMENT for NULL or
 * mismatched tensors or an offset out of range, SNN_ERR_MEMORY. */
snn_status snn_tensor_set_grad_view(snn_tensor *t, snn_tensor *storage, int64_t offset);

/** STEP: an uninitialised tensor of `shape` on `device`, living until the enclosing
 * snn_step_end(). NULL on error: a bad shape or device (SNN_ERR_ARGUMENT), no open step
 * (SNN_ERR_STATE), out of memory (SNN_ERR_MEMORY). The same holds for every STEP maker below. */
snn_tensor *snn_empty(snn_shape shape, snn_device device);
/** STEP: a zero-filled tensor of `shape` on `device` (errors as snn_empty). */
snn_tensor *snn_zeros(snn_shape shape, snn_device device);
/** STEP: a tensor of `shape` on `device` with every element `value` (errors as snn_empty). */
snn_tensor *snn_full(snn_shape shape, float value, snn_device device);
/** STEP: a tensor of `shape` on `device` holding a copy of the numel floats at `host` (not
 * NULL; the caller keeps `host`). Errors as snn_empty. */
snn_tensor *snn_from_host(snn_shape shape, const float *host, snn_device device);
/** STEP: a copy of `t` on `device` (a copy even when t is already there). Not differentiable.
 * NULL on error (t NULL, or as snn_empty). */
snn_tensor *snn_to_device(const snn_tensor *t, snn_device device);

/** Copies t->numel floats from host memory `host` into `t`; synchronises when on CUDA.
 * SNN_ERR_ARGUMENT when t is NULL. */
snn_status snn_tensor_copy_from_host(snn_tensor *t, const float *host);
/** Copies the t->numel floats of `t` to host memory `host`; waits for the GPU when on CUDA.
 * SNN_ERR_ARGUMENT when t is NULL. */
snn_status snn_tensor_copy_to_host(const snn_tensor *t, float *host);
/** dst <- src, any devices; the shapes may differ but the numel must agree (SNN_ERR_ARGUMENT
 * otherwise, or when one is NULL). */
snn_status snn_tensor_copy(snn_tensor *dst, const snn_tensor *src);
/** Sets every element of `t` to `value`. SNN_ERR_ARGUMENT when t is NULL. */
snn_status snn_tensor_fill(snn_tensor *t, float value);
/** The single value of a 1-element tensor `t` (synchronises when on CUDA). NaN on error (t NULL
 * or not 1 element; message set). */
float snn_tensor_item(const snn_tensor *t);

/* ---------------------------------------------------------------------------------------------
 * Steps: the arena that owns every STEP tensor and the autograd tape.
 * ------------------------------------------------------------------------------------------- */

/** Opens a step: every STEP tensor and tape node made until the matching snn_step_end()
 * belongs to it. Steps nest (up to 64 deep; deeper is SNN_ERR_STATE, usually a loop that
 * misses its snn_step_end). */
snn_status snn_step_begin(void);
/** Releases every STEP tensor and tape node made since the matching snn_step_begin(); calling
 * it with no step open is a bug (abort). */
void snn_step_end(void);
/** Number of steps open now (0 outside any step). */
int snn_step_depth(void);
/** Id of the innermost open step (0 outside any step); ids are never reused. */
uint64_t snn_step_id(void);
/** True while the step with this `id` is open. */
bool snn_step_is_open(uint64_t id);
/** Bytes reserved by the step arenas of `device` (they are reused, not freed, between steps). */
size_t snn_arena_reserved_bytes(snn_device device);
/** Gives the arena of `device` one block of at least `bytes` now, outside any step, so that a
 * first step whose size is known ahead (nn.h: snn_model_memory_estimate, its step less its
 * gradient_pool) fits in it. Without it the first step grows the arena block by block (1 MiB,
 * then doubling), which reserves up to twice what the step uses until the step ends: on CUDA,
 * where cudaMalloc reserves for real, that can fail a step that fits. (A step that outgrows the
 * block of earlier steps adds blocks from an eighth of that block up, doubling.) The blocks held
 * before are given back first. SNN_ERR_STATE inside a step, SNN_ERR_ARGUMENT for a bad device,
 * SNN_ERR_MEMORY (arena left empty) when the block cannot be had. */
snn_status snn_step_reserve(snn_device device, size_t bytes);
/** The most bytes the arena of `device` had in use at once during the last outermost step (0
 * before the first): what the step's allocations took at their high-water mark, end to end,
 * without the unused ends of blocks it grew through - the size of one block that holds the step
 * (the arena merges into a block of this size when the step ends). The gradients of
 * activations are not in it: their data come from a pool beside the arena that gives each back
 * as soon as backward is done with it (tensor/step_pool.c). */
size_t snn_step_peak_bytes(snn_device device);
/** Frees the arena blocks and every per-device resource (cuBLAS handle, CUDA stream, GEMM
 * scratch); call at exit, with no step open. snn.c may be used again afterwards. */
void snn_shutdown(void);

/* ---------------------------------------------------------------------------------------------
 * Memory: every byte snn.c takes, host or device, goes through snn_alloc.
 * ------------------------------------------------------------------------------------------- */

/** `bytes` of memory on `device`, uninitialised, counted in snn_live_bytes. Returns NULL on
 * failure (no message: the caller names what it was allocating). */
void *snn_alloc(size_t bytes, snn_device device);
/** Releases `p` from snn_alloc on `device`; `bytes` must be the size asked for. NULL is a
 * no-op. */
void snn_free(void *p, size_t bytes, snn_device device);
/** Bytes allocated on `device` and not yet freed (tests check it is 0 at exit). */
size_t snn_live_bytes(snn_device device);
/** High-water mark of snn_live_bytes(device). */
size_t snn_peak_bytes(snn_device device);
/** Starts the high-water mark again from what is live now (benchmarks measure one phase). */
void snn_reset_peak_bytes(snn_device device);
/** Successful allocations so far, all devices. */
uint64_t snn_alloc_count(void);
/** Test hook: the n-th allocation from now (1 = the next) fails; 0 turns it off. */
void snn_alloc_fail_after(uint64_t n);
/** Test hook: an allocation on `device` that would take its live bytes above `bytes` fails, as
 * on a device of that size (0 turns it off). */
void snn_alloc_limit(snn_device device, size_t bytes);

/* ---------------------------------------------------------------------------------------------
 * Errors
 * ------------------------------------------------------------------------------------------- */

/** The message of the last error ("" when none): names the function, the argument, what was
 * expected and what came. Valid until the next error of the same thread (each thread has its
 * own). */
const char *snn_last_error(void);
/** The status of the last error (SNN_OK when none). */
snn_status snn_last_status(void);
/** Forgets the last error. */
void snn_clear_error(void);

/* ---------------------------------------------------------------------------------------------
 * Devices and threads
 * ------------------------------------------------------------------------------------------- */

/** "cpu" or "cuda" (a static string). */
const char *snn_device_name(snn_device device);
/** Parses `name` ("cpu" or "cuda") into *out; SNN_ERR_ARGUMENT with a message otherwise. */
snn_status snn_device_parse(const char *name, snn_device *out);
/** True when this build has the CUDA backend (SNN_CUDA). */
bool snn_cuda_compiled(void);
/** True when built with SNN_CUDA and a GPU is visible. */
bool snn_cuda_available(void);
/** Waits for all queued work on `device` (no-op on the CPU). */
void snn_synchronize(snn_device device);
/** Sets the OpenMP threads of the CPU kernels to `n`; <= 0 means all cores. */
void snn_set_num_threads(int n);
/** The OpenMP threads the CPU kernels use. */
int snn_get_num_threads(void);
/** Writes into *available the bytes `device` can still give now and into *total its size (CPU:
 * MemAvailable, capped by the process's memory cgroup; CUDA: cudaMemGetInfo).
 * SNN_ERR_ARGUMENT for a NULL pointer; SNN_ERR_UNSUPPORTED with a message (both set to 0) when
 * it cannot tell or the device is missing. tensor/memory_info.c says how each number is read. */
snn_status snn_device_memory(snn_device device, size_t *available, size_t *total);

/* ---------------------------------------------------------------------------------------------
 * Which kernels run on the CPU
 * ------------------------------------------------------------------------------------------- */

/** The two kernel tables of the CPU. CUDA tensors always run the CUDA kernels. */
typedef enum snn_kernel_set {
    SNN_KERNELS_FAST = 0, /**< blocked, vectorised, threaded (kernels/cpu/): the default */
    SNN_KERNELS_REF = 1,  /**< the reference (kernels/ref/): plain loops, one file per op
                               family, one thread. What a student reads, and what every other
                               kernel is tested against; the main job trains on it, slower */
} snn_kernel_set;

/** The name of `k`: "fast" or "ref" ("unknown" for a value out of the enum). */
const char *snn_kernel_set_name(snn_kernel_set k);
/** Parses `name` ("fast" or "ref") into *out; SNN_ERR_ARGUMENT with a message otherwise (NULL
 * included; *out is then unchanged). */
snn_status snn_kernel_set_parse(const char *name, snn_kernel_set *out);
/** Selects the CPU's kernels for every later op (process-wide, as the precision is). Until it
 * is called, the environment variable SNN_KERNELS (ref or fast) decides, and without it the
 * fast kernels run. Tensors and models need no rebuilding: both tables use the same host
 * memory. SNN_ERR_ARGUMENT for a value out of the enum. */
snn_status snn_set_kernels(snn_kernel_set k);
/** The CPU's kernel set now (reads SNN_KERNELS on the first call; a bad value there is
 * reported on stderr once and the fast kernels run). */
snn_kernel_set snn_get_kernels(void);

/* ---------------------------------------------------------------------------------------------
 * Precision of the GPU's matrix products
 * ------------------------------------------------------------------------------------------- */

/** Precision of the GPU's matrix products (conv2d, linear). Tensors, master weights, optimizer
 * state, membrane potentials and batch-norm statistics are fp32 in every mode; what changes is
 * how the products round their operands on the tensor cores (and, where a model asks for it
 * with its option keep_bf16, that the conv outputs backward reads are kept as bf16: nn/plan.h). Spikes (0, 1) and spike counts are
 * exact in all three, so a spiking layer's rounding enters only through weights, batch-norm
 * outputs and gradients. The CPU kernels are always fp32. */
typedef enum snn_precision {
    SNN_PRECISION_FP32 = 0,  /**< no rounding: cuBLAS SGEMM on the CUDA cores, the
                                  bit-reproducible default and the reference the other two are
                                  tested against */
    SNN_PRECISION_TF32 = 1,  /**< operands rounded to a 10-bit mantissa (relative error ~5e-4 per
                                  product term), fp32 accumulation; convolutions by the
                                  implicit-GEMM kernel (kernels/cuda/conv/conv2d_igemm.cu) */
    SNN_PRECISION_BF16 = 2,  /**< operands rounded to an 8-bit mantissa (~4e-3), fp32
                                  accumulation, twice TF32's rate */
} snn_precision;

/** The name of `p`: "fp32", "tf32" or "bf16" ("unknown" for a value out of the enum). */
const char *snn_precision_name(snn_precision p);
/** Parses `name` ("fp32", "tf32" or "bf16") into *out; SNN_ERR_ARGUMENT with a message
 * otherwise (NULL included; *out is then unchanged). */
snn_status snn_precision_parse(const char *name, snn_precision *out);
/** Sets the precision of every later CUDA product (process-wide). TF32 and BF16 need a build
 * with CUDA (SNN_ERR_UNSUPPORTED otherwise); FP32 always succeeds; a value out of the enum is
 * SNN_ERR_ARGUMENT. */
snn_status snn_set_precision(snn_precision p);
/** The precision set by snn_set_precision (SNN_PRECISION_FP32 until then, and always in a build
 * without CUDA). */
snn_precision snn_get_precision(void);

/* ---------------------------------------------------------------------------------------------
 * Random numbers
 * ------------------------------------------------------------------------------------------- */

/** A random stream: xoshiro256** (Blackman & Vigna), a plain struct so that checkpoints can
 * save it and a resumed run draws exactly the same numbers. Seed it with snn_rng_seed. */
typedef struct snn_rng {
    uint64_t s[4];   /**< the generator state */
} snn_rng;

/** Seeds `rng` from `seed` (each state word through a splitmix64 hash, so any seed, 0 included,
 * is fine). */
void snn_rng_seed(snn_rng *rng, uint64_t seed);
/** The next 64 random bits of `rng`. */
uint64_t snn_rng_u64(snn_rng *rng);
/** Uniform in [0, 1) with 24 random bits. */
float snn_rng_uniform(snn_rng *rng);
/** Standard normal (Box-Muller). */
float snn_rng_normal(snn_rng *rng);
/** Uniform in [0, n), unbiased (n >= 1). */
uint64_t snn_rng_below(snn_rng *rng, uint64_t n);
/** Fills `t` (any device; drawn on the host, then copied) with U[lo, hi) from `rng`.
 * SNN_ERR_ARGUMENT for a NULL t or rng, SNN_ERR_MEMORY when the host buffer cannot be had. */
snn_status snn_tensor_uniform_(snn_tensor *t, snn_rng *rng, float lo, float hi);
/** Fills `t` with N(mean, std^2) from `rng`; as snn_tensor_uniform_. */
snn_status snn_tensor_normal_(snn_tensor *t, snn_rng *rng, float mean, float std);

#ifdef __cplusplus
}
#endif

#endif /* SNN_TENSOR_H */
