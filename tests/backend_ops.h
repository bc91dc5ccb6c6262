/*
 * backend_ops.h - the parity harness: every kernel of a table under test (the fast CPU table,
 * the CUDA table) against the reference table (kernels/ref/), case by case, as ggml's
 * test-backend-ops checks every backend against its CPU path. Programs: test_backend_ops.c
 * (fast CPU, label cpu) and test_cuda_backend_ops.c (CUDA in fp32, TF32 and BF16, label cuda).
 *
 * A case is an op (one table entry), its parameters and its buffers. For each case the runner
 *   1. draws the inputs, seeded from the case's name (so SNN_TEST_OP=conv2d alone draws the same
 *      values): random, never all zeros;
 *   2. fills every output with a poison NaN, so that an element the entry leaves unwritten (or
 *      reads before writing) fails, and every accumulated gradient with random values, the same
 *      on both sides (backward kernels add into what their gradients held);
 *   3. runs the case on the reference table, on host memory;
 *   4. for each mode of the backend under test (a precision; on CUDA also a forced conv path),
 *      copies the inputs to the backend's device, runs the case on its table, copies the results
 *      back and compares every output, and checks that no input changed;
 *   5. prints one row: op, case, backend, mode, worst error ratio, OK or FAIL,
 * and ends with the counts. The exit code is the verdict (ctest reads nothing else). An entry
 * may decline a case (return false, touching nothing: a conv path that does not take the dims);
 * it must then have left its outputs alone. Run without a filter, every entry the table has
 * must run some case, and take (not decline) at least one.
 *
 * The comparison. Integer and bit outputs (argmax, packed bits, activity counts, one-hot, the
 * dropout mask, Poisson spikes, spikes) must be equal; the one exception, spikes a fused kernel
 * computes from its own rounding of the batch-norm, is explained in backend_ops_neuron_bn.h.
 * A float output passes where, for every element i,
 *     |got_i - ref_i| <= atol + scaled * max_j |ref_j| + rtol * |ref_i| + ulp(ref_i)
 * and the worst ratio of the left side to the right is what the table prints (<= 1 passes).
 * For an accumulated output, ref and max |ref| are the increments (the values minus the start),
 * so a wrong gradient cannot hide behind the random values it was added to. The `scaled` term is
 * why this is not a plain atol + rtol |ref| check: a sum computed in another order errs in
 * proportion to the terms it adds, not to its result, which may cancel to near zero; the largest
 * output of the tensor measures those terms. It is also why this is not ggml's normalised mean
 * square error: an NMSE of 1e-6 over a million elements lets one element be wholly wrong, while
 * here every element must be close. Tolerances (bo_check below): ELEM for one rounding or a
 * libm call apart, SUM for sums in another order, MMA for products on tensor cores, whose
 * tolerance is the mode's. Where a TF32 or BF16 mode's kernels round their operands in a known
 * way (bf16: to nearest even; TF32: to nearest, ties away, as cvt.rna), the reference runs on
 * operands rounded the same way, so that only the order of the fp32 sums differs and the
 * tolerance can stay tight (test_cuda_backend_ops.c lists the modes).
 *
 * Environment: SNN_TEST_OP=text runs only the ops whose name contains text (e.g. conv2d),
 * SNN_TEST_MODE=text only the modes whose name contains it (e.g. bf16).
 * Adding an op: a setup (buffers) and a run (the entry's call), listed in backend_ops_*.h; the
 * static asserts on the tables' sizes there fail when an entry has been added without one.
 */
#ifndef SNN_BACKEND_OPS_H
#define SNN_BACKEND_OPS_H

#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/neuron_kernels.h"
#include "kernels/neuron_math.h"
#include "kernels/ref/kernels_ref.h"
#include "kernels/ref/neuron_ref.h"
#include "tensor/error.h"
#include "neuron_test_inputs.h"
#include "test.h"

#define BO_MAX_BUFS 24
#define BO_PARAM_BYTES 256

typedef enum bo_type { BO_F32, BO_F64, BO_I32, BO_U32 } bo_type;

/* What a buffer is to its case. */
typedef enum bo_role {
    BO_IN,  /* read by the entry: the same values on both sides, checked unchanged after */
    BO_OUT, /* overwritten by the entry: poisoned before, compared after */
    BO_ACC, /* added into or updated in place: the same start on both sides, compared after */
    BO_REF  /* written by the reference side only, for a case's own comparison (compare hook) */
} bo_role;

/* How an output is compared (the tolerances: bo_tolerance_of). */
typedef enum bo_check {
    BO_EXACT,  /* equal values */
    BO_ELEM,   /* elementwise math: one rounding, an fma or a libm function apart */
    BO_SUM,    /* sums (reductions, statistics, BPTT) in another order */
    BO_MMA,    /* GEMM and convolution: the mode's tolerance (bo_mode.mma) */
    BO_CUSTOM  /* compared by the case's compare hook only */
} bo_check;

/* Which operands of an op a tensor-core precision rounds (bo_mode.rounding). */
typedef enum bo_rounding { BO_ROUND_NONE, BO_ROUND_TF32, BO_ROUND_BF16, BO_ROUNDINGS } bo_rounding;
typedef enum bo_mma_kind { BO_MMA_GEMM, BO_MMA_CONV, BO_MMA_KINDS } bo_mma_kind;

/* |got - ref| <= atol + scaled * max |ref| + rtol |ref| (+ one ulp of ref) */
typedef struct bo_tol {
    double atol, scaled, rtol;
} bo_tol;

typedef struct bo_buf {
    const char *name;
    bo_type type;
    bo_role role;
    bo_check check;
    bool operand;       /* a tensor-core operand: rounded for the reference in TF32 / BF16 modes */
    int64_t n;          /* elements */
    double scale;       /* > 0: the "max |ref|" of the tolerance, when the case knows better
                         * (a scalar summed from terms that cancel) */
    void *init;         /* host: the input, or the start of an ACC buffer; NULL for OUT */
} bo_buf;

typedef struct bo_case bo_case;

/* One side of a comparison: a table and the case's buffers on its device. */
typedef struct bo_side {
    const snn_kernels *k;
    const snn_neuron_kernels *nk;
    snn_device device;
    bool is_ref;               /* the reference side (host memory, kernels/ref/) */
    void *arg[BO_MAX_BUFS];    /* each buffer of the case on this side's device */
    void *scratch[8];          /* bo_scratch's allocations, freed after the run */
    size_t scratch_bytes[8];
    int nscratch;
    bo_rounding rounding;      /* how the reference's operands were rounded (bo_side_load) */
} bo_side;

/* An op: one entry of a table, how to set up its buffers and how to call it. */
typedef struct bo_op {
    const char *name;
    bool (*has)(const bo_side *s);          /* the side's table has the entry */
    void (*setup)(bo_case *c);              /* buffers and their inputs (bo_in_* / bo_out / ...) */
    bool (*run)(const bo_case *c, bo_side *s); /* false: the entry declined, doing nothing */
    /* after the standard comparisons: returns the worst ratio of the case's own checks */
    double (*compare)(const bo_case *c, void *const *got, void *const *ref, char *why,
                      size_t why_size);
    bool precision;    /* reads the CUDA precision (GEMM, conv): runs in TF32 / BF16 modes too */
    bo_mma_kind mma;   /* which operand rounding and tolerance of the mode apply */
} bo_op;

struct bo_case {
    const bo_op *op;
    char label[112];
    _Alignas(8) unsigned char params[BO_PARAM_BYTES];
    bool conv;            /* a convolution: params begin with its snn_conv2d_dims (bo_conv_of) */
    bo_buf buf[BO_MAX_BUFS];
    int nbuf;
};

#define BO_PARAMS(c, type) ((const type *)(const void *)(c)->params)

/* The dims of a convolution case (the modes' conv paths read them). */
static inline const snn_conv2d_dims *bo_conv_of(const bo_case *c)
{
    return (const snn_conv2d_dims *)(const void *)c->params;
}

/* A mode of the backend under test: a precision and, on CUDA, a forced conv path. */
typedef struct bo_mode {
    const char *name;
    snn_precision precision;
    int conv_path;                       /* SNN_CONV_PATH_* (tensor/cuda_options.h), or 0 */
    bool conv_only;                      /* runs only the cases that have conv dims */
    bo_rounding rounding[BO_MMA_KINDS];  /* how the reference's operands are rounded */
    bo_tol mma[BO_MMA_KINDS];            /* the tolerance of BO_MMA outputs */
} bo_mode;

typedef struct bo_backend {
    const char *name;
    const snn_kernels *k;
    const snn_neuron_kernels *nk;
    snn_device device;
    const bo_mode *modes;
    int nmodes;
    void (*set_mode)(const bo_mode *m);                    /* or NULL (one mode) */
    bool (*takes)(const bo_mode *m, const bo_case *c);     /* or NULL: every case */
    bool large_cases; /* also the largest shapes (slow on the single-threaded reference) */
} bo_backend;

/* bo_backend.large_cases of the run: the case lists read it */
static bool bo_large_cases;

/* ---------------------------------------------------------------------------------------------
 * Cases and their buffers
 * ------------------------------------------------------------------------------------------- */

typedef struct bo_list {
    bo_case *cases;
    int count, capacity;
} bo_list;

static snn_rng bo_rng; /* the inputs of the case being set up */

static size_t bo_type_size(bo_type t) { return t == BO_F64 ? sizeof(double) : sizeof(float); }

/* Appends a case of op with params (copied) and a label made from fmt. */
static bo_case *bo_add(bo_list *l, const bo_op *op, const void *params, size_t params_size,
                       const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static bo_case *bo_add(bo_list *l, const bo_op *op, const void *params, size_t params_size,
                       const char *fmt, ...)
{
    SNN_ASSERT(params_size <= BO_PARAM_BYTES);
    if (l->count == l->capacity) {
        l->capacity = l->capacity ? 2 * l->capacity : 256;
        l->cases = realloc(l->cases, (size_t)l->capacity * sizeof *l->cases);
        SNN_ASSERT(l->cases);
    }
    bo_case *c = &l->cases[l->count++];
    memset(c, 0, sizeof *c);
    c->op = op;
    memcpy(c->params, params, params_size);
    va_list args;
    va_start(args, fmt);
    vsnprintf(c->label, sizeof c->label, fmt, args);
    va_end(args);
    return c;
}

static int bo_buffer(bo_case *c, const char *name, bo_type type, bo_role role, bo_check check,
                     int64_t n)
{
    SNN_ASSERT(c->nbuf < BO_MAX_BUFS && n >= 0);
    bo_buf *b = &c->buf[c->nbuf];
    memset(b, 0, sizeof *b);
    b->name = name, b->type = type, b->role = role, b->check = check, b->n = n;
    if (role == BO_IN || role == BO_ACC) {
        b->init = calloc((size_t)(n > 0 ? n : 1), bo_type_size(type));
        SNN_ASSERT(b->init);
    }
    return c->nbuf++;
}

static float *bo_f32(bo_case *c, int i) { return c->buf[i].init; }

/* An input of n floats, uniform in [lo, hi). */
static int bo_in_uniform(bo_case *c, const char *name, int64_t n, float lo, float hi)
{
    const int i = bo_buffer(c, name, BO_F32, BO_IN, BO_EXACT, n);
    float *v = bo_f32(c, i);
    for (int64_t e = 0; e < n; e++) v[e] = lo + (hi - lo) * snn_rng_uniform(&bo_rng);
    return i;
}

/* An input of n floats, normal with this mean and standard deviation. */
static int bo_in_normal(bo_case *c, const char *name, int64_t n, float mean, float std)
{
    const int i = bo_buffer(c, name, BO_F32, BO_IN, BO_EXACT, n);
    float *v = bo_f32(c, i);
    for (int64_t e = 0; e < n; e++) v[e] = mean + std * snn_rng_normal(&bo_rng);
    return i;
}

/* An input of n whole numbers in [0, levels) as floats (labels, ties, spikes for levels 2). */
static int bo_in_levels(bo_case *c, const char *name, int64_t n, int levels)
{
    const int i = bo_buffer(c, name, BO_F32, BO_IN, BO_EXACT, n);
    float *v = bo_f32(c, i);
    for (int64_t e = 0; e < n; e++) v[e] = (float)snn_rng_below(&bo_rng, (uint64_t)levels);
    return i;
}

/* An input of n random 32-bit words (packed spikes). */
static int bo_in_words(bo_case *c, const char *name, int64_t n)
{
    const int i = bo_buffer(c, name, BO_U32, BO_IN, BO_EXACT, n);
    uint32_t *v = c->buf[i].init;
    for (int64_t e = 0; e < n; e++) v[e] = (uint32_t)snn_rng_u64(&bo_rng);
    return i;
}

/* An input of n given values. */
static int bo_in_copy(bo_case *c, const char *name, bo_type type, const void *values, int64_t n)
{
    const int i = bo_buffer(c, name, type, BO_IN, BO_EXACT, n);
    memcpy(c->buf[i].init, values, (size_t)n * bo_type_size(type));
    return i;
}

/* An output of n elements, poisoned before each run. */
static int bo_out(bo_case *c, const char *name, bo_type type, int64_t n, bo_check check)
{
    return bo_buffer(c, name, type, BO_OUT, check, n);
}

/* An accumulated (or in-place) output of n floats that starts uniform in [-1, 1). */
static int bo_acc(bo_case *c, const char *name, int64_t n, bo_check check)
{
    const int i = bo_buffer(c, name, BO_F32, BO_ACC, check, n);
    float *v = bo_f32(c, i);
    for (int64_t e = 0; e < n; e++) v[e] = 2.0f * snn_rng_uniform(&bo_rng) - 1.0f;
    return i;
}

static void bo_operand(bo_case *c, int i) { c->buf[i].operand = true; }

static void bo_free_buffers(bo_case *c)
{
    for (int i = 0; i < c->nbuf; i++) free(c->buf[i].init), c->buf[i].init = NULL;
    c->nbuf = 0;
}

/* ---------------------------------------------------------------------------------------------
 * Sides: buffers on a device, scratch, poison
 * ------------------------------------------------------------------------------------------- */

/* The poison: quiet NaNs with a payload no arithmetic makes (a result of a NaN operand keeps or
 * loses the payload, but a value computed from real inputs never has it). As floats, the low
 * and high halves are also NaN as bf16. */
#define BO_POISON_F32 0x7fc5a5a5u
#define BO_POISON_F64 0x7ff8a5a5a5a5a5a5ull
#define BO_POISON_INT 0xa5a5a5a5u

static void bo_poison(void *host, bo_type t, int64_t n)
{
    if (t == BO_F64) {
        const uint64_t bits = BO_POISON_F64;
        for (int64_t i = 0; i < n; i++) memcpy((double *)host + i, &bits, sizeof bits);
        return;
    }
    const uint32_t bits = t == BO_F32 ? BO_POISON_F32 : BO_POISON_INT;
    for (int64_t i = 0; i < n; i++) memcpy((uint32_t *)host + i, &bits, sizeof bits);
}

static bool bo_is_poison(const void *p, bo_type t, int64_t i)
{
    if (t == BO_F64) {
        uint64_t bits;
        memcpy(&bits, (const double *)p + i, sizeof bits);
        return bits == BO_POISON_F64;
    }
    uint32_t bits;
    memcpy(&bits, (const uint32_t *)p + i, sizeof bits);
    return bits == (t == BO_F32 ? BO_POISON_F32 : BO_POISON_INT);
}

/* Scratch memory on the side's device for one run (a workspace, an intermediate of the
 * reference's composition), filled with NaN: 0x7fc07fc0 is NaN as one float and as two bf16,
 * so a kernel that reads scratch it never wrote spreads NaN into its result. */
static void *bo_scratch(bo_side *s, size_t bytes)
{
    SNN_ASSERT(s->nscratch < 8);
    if (bytes == 0) bytes = sizeof(float);
    void *p = snn_alloc(bytes, s->device);
    SNN_ASSERT(p);
    const uint32_t bits = 0x7fc07fc0u;
    float nan_both;
    memcpy(&nan_both, &bits, sizeof nan_both);
    s->k->fill(p, nan_both, (int64_t)(bytes / sizeof(float)));
    s->scratch[s->nscratch] = p, s->scratch_bytes[s->nscratch++] = bytes;
    return p;
}

/* Rounds f as the tensor cores take it: bf16 to nearest even, TF32 to nearest with ties away
 * from zero (cvt.rna.tf32.f32). The inputs here are finite. */
static float bo_round(float f, bo_rounding r)
{
    if (r == BO_ROUND_NONE) return f;
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if (r == BO_ROUND_BF16) u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    else u = (u + 0x1000u) & 0xffffe000u;
    memcpy(&f, &u, sizeof f);
    return f;
}

static size_t bo_bytes(const bo_buf *b)
{
    return (size_t)(b->n > 0 ? b->n : 1) * bo_type_size(b->type);
}

/* Puts the case's buffers on the side's device: inputs (operands rounded as `r` says),
 * accumulators' starts, poisoned outputs. */
static void bo_side_load(bo_side *s, const bo_case *c, bo_rounding r)
{
    for (int i = 0; i < c->nbuf; i++) {
        const bo_buf *b = &c->buf[i];
        const size_t bytes = bo_bytes(b);
        void *host = malloc(bytes);
        SNN_ASSERT(host);
        if (b->init) memcpy(host, b->init, bytes);
        else bo_poison(host, b->type, b->n > 0 ? b->n : 1);
        if (b->operand && r != BO_ROUND_NONE && b->type == BO_F32)
            for (int64_t e = 0; e < b->n; e++) ((float *)host)[e] = bo_round(((float *)host)[e], r);
        s->arg[i] = snn_alloc(bytes, s->device);
        SNN_ASSERT(s->arg[i]);
        s->k->copy(s->arg[i], host, bytes, SNN_COPY_HOST_TO_DEVICE);
        free(host);
    }
    s->nscratch = 0;
    s->rounding = r;
}

/* Copies every buffer back into malloc'd host arrays (out[i]) and frees the device's. */
static void bo_side_unload(bo_side *s, const bo_case *c, void **out)
{
    s->k->synchronize();
    for (int i = 0; i < c->nbuf; i++) {
        const size_t bytes = bo_bytes(&c->buf[i]);
        out[i] = malloc(bytes);
        SNN_ASSERT(out[i]);
        s->k->copy(out[i], s->arg[i], bytes, SNN_COPY_DEVICE_TO_HOST);
    }
    s->k->synchronize();
    for (int i = 0; i < c->nbuf; i++) snn_free(s->arg[i], bo_bytes(&c->buf[i]), s->device);
    for (int i = 0; i < s->nscratch; i++) snn_free(s->scratch[i], s->scratch_bytes[i], s->device);
    s->nscratch = 0;
}

static void bo_free_all(void **v, int n)
{
    for (int i = 0; i < n; i++) free(v[i]), v[i] = NULL;
}

/* The comparison, the runner, and the cases: tensor ops, convolution / pooling / batch-norm,
 * neurons. They form one header with this one (each program is one translation unit). */
#include "backend_ops_compare.h"
#include "backend_ops_runner.h"
#include "backend_ops_tensor.h"
#include "backend_ops_conv.h"
#include "backend_ops_neuron.h"

#endif /* SNN_BACKEND_OPS_H */
