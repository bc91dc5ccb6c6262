/*
 * dispatch.c - picks the kernel table of a device: on the CPU the fast table or the reference
 * one (snn_set_kernels, SNN_KERNELS), on CUDA the CUDA table; and at snn_shutdown() gives back
 * what the tables' kernels hold between calls (snn_on_shutdown). The one place in tensor/ that
 * knows whether this build has CUDA (docs/architecture.md, "Kernels and devices"): everything
 * else asks snn_kernels_for().
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arena.h"
#include "cuda_options.h"
#include "error.h"
#include "kernels/kernels.h"

/* -1 until the first question: then SNN_KERNELS, or the fast kernels */
static int kernel_set = -1;

const char *snn_kernel_set_name(snn_kernel_set k)
{
    switch (k) {
    case SNN_KERNELS_FAST: return "fast";
    case SNN_KERNELS_REF: return "ref";
    }
    return "unknown";
}

snn_status snn_kernel_set_parse(const char *name, snn_kernel_set *out)
{
    if (name && strcmp(name, "fast") == 0) *out = SNN_KERNELS_FAST;
    else if (name && strcmp(name, "ref") == 0) *out = SNN_KERNELS_REF;
    else
        return snn_error(SNN_ERR_ARGUMENT, "snn_kernel_set_parse: bad argument 'name' (expected "
                         "ref or fast, got %s%s%s)", name ? "'" : "", name ? name : "NULL",
                         name ? "'" : "");
    return SNN_OK;
}

snn_status snn_set_kernels(snn_kernel_set k)
{
    if (k != SNN_KERNELS_FAST && k != SNN_KERNELS_REF)
        return snn_error(SNN_ERR_ARGUMENT, "snn_set_kernels: bad argument 'k' (expected "
                         "SNN_KERNELS_FAST or SNN_KERNELS_REF, got %d)", (int)k);
    kernel_set = (int)k;
    return SNN_OK;
}

snn_kernel_set snn_get_kernels(void)
{
    if (kernel_set < 0) {
        snn_kernel_set k = SNN_KERNELS_FAST;
        const char *env = getenv("SNN_KERNELS");
        if (env && *env && snn_kernel_set_parse(env, &k) != SNN_OK) {
            fprintf(stderr, "snn.c: ignoring SNN_KERNELS=%s (expected ref or fast); the fast "
                    "kernels run\n", env);
            snn_clear_error();
        }
        kernel_set = (int)k;
    }
    return (snn_kernel_set)kernel_set;
}

const snn_kernels *snn_kernels_for(snn_device device)
{
    switch (device) {
    case SNN_CPU: return snn_get_kernels() == SNN_KERNELS_REF ? &snn_kernels_ref : &snn_kernels_cpu;
#ifdef SNN_WITH_CUDA
    case SNN_CUDA: return snn_cuda_device_count() > 0 ? &snn_kernels_cuda : NULL;
#else
    case SNN_CUDA: return NULL;
#endif
    }
    return NULL;
}

const snn_kernels *snn_kernels_or_error(const char *fn, snn_device device)
{
    const snn_kernels *k = snn_kernels_for(device);
    if (k) return k;
    if (device == SNN_CUDA && snn_cuda_compiled())
        return snn_error_null(SNN_ERR_UNSUPPORTED, "%s: no CUDA device is visible; hint: run on a "
                              "machine with an NVIDIA GPU or use --device cpu", fn);
    return snn_error_null(SNN_ERR_UNSUPPORTED, "%s: this build has no %s backend; hint: "
                          "configure with -DSNN_CUDA=ON on a machine with nvcc", fn,
                          snn_device_name(device));
}

bool snn_cuda_compiled(void)
{
#ifdef SNN_WITH_CUDA
    return true;
#else
    return false;
#endif
}

bool snn_cuda_available(void) { return snn_kernels_for(SNN_CUDA) != NULL; }

snn_status snn_set_precision(snn_precision p)
{
    if (p != SNN_PRECISION_FP32 && p != SNN_PRECISION_TF32 && p != SNN_PRECISION_BF16)
        return snn_error(SNN_ERR_ARGUMENT, "snn_set_precision: bad argument 'p' (expected "
                         "SNN_PRECISION_FP32, _TF32 or _BF16, got %d)", (int)p);
#ifdef SNN_WITH_CUDA
    snn_cuda_set_precision(p);
    return SNN_OK;
#else
    if (p == SNN_PRECISION_FP32) return SNN_OK;
    return snn_error(SNN_ERR_UNSUPPORTED, "snn_set_precision: %s runs on the GPU's tensor cores "
                     "and this build has no CUDA backend; hint: use fp32, or configure with "
                     "-DSNN_CUDA=ON on a machine with nvcc", snn_precision_name(p));
#endif
}

snn_precision snn_get_precision(void)
{
#ifdef SNN_WITH_CUDA
    return snn_cuda_precision();
#else
    return SNN_PRECISION_FP32;
#endif
}

/* The releases registered since the last shutdown; NULL: a free place. Atomic, so that two
 * threads registering at once each find a place, and one function takes one place. */
typedef void (*release_fn)(void);
static _Atomic(release_fn) releases[SNN_MAX_SHUTDOWN_RELEASES];

void snn_on_shutdown(void (*release)(void))
{
    for (int i = 0; i < SNN_MAX_SHUTDOWN_RELEASES; i++) {
        release_fn expected = NULL;
        if (atomic_compare_exchange_strong(&releases[i], &expected, release) ||
            expected == release)
            return; /* registered now, or before */
    }
    SNN_ASSERT(!"snn_on_shutdown: more releases than SNN_MAX_SHUTDOWN_RELEASES");
}

void snn_shutdown(void)
{
    snn_arena_release_all();
    for (int i = 0; i < SNN_MAX_SHUTDOWN_RELEASES; i++) {
        release_fn release = atomic_exchange(&releases[i], NULL);
        if (release) release();
    }
#ifdef SNN_WITH_CUDA
    snn_cuda_shutdown();
#endif
}
