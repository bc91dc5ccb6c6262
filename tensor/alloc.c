/*
 * alloc.c - snn_alloc / snn_free: the one door through which every byte of snn.c passes.
 *
 * As Lua's lua_Alloc, the caller passes the size back on free, so the counters need no header
 * in front of each block: live bytes and peak bytes per device, and a test hook that makes the
 * n-th allocation fail, so tests can prove that every failure path frees what it took, and a
 * cap on the live bytes of a device, so that a test can run a program as if on a smaller device
 * (an 80 GB GPU, scaled down) and see it fail where the device would.
 * Host blocks are 64-byte aligned (one cache line, a full AVX-512 vector).
 * Counters are atomic: the data loader's prefetch thread allocates too.
 */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "error.h"
#include "kernels/kernels.h"

#define SNN_HOST_ALIGN 64

static _Atomic size_t live_bytes[SNN_NUM_DEVICES];
static _Atomic size_t peak_bytes[SNN_NUM_DEVICES];
static _Atomic uint64_t allocations;
static _Atomic uint64_t fail_countdown; /* 0: off; 1: the next allocation fails */
static _Atomic size_t live_limit[SNN_NUM_DEVICES]; /* 0: none */

static void *host_alloc(size_t bytes)
{
    if (bytes > SIZE_MAX - SNN_HOST_ALIGN) return NULL; /* the rounding below would wrap */
    size_t rounded = (bytes + SNN_HOST_ALIGN - 1) / SNN_HOST_ALIGN * SNN_HOST_ALIGN;
    return aligned_alloc(SNN_HOST_ALIGN, rounded ? rounded : SNN_HOST_ALIGN);
}

static int injected_failure(void)
{
    uint64_t n = atomic_load(&fail_countdown);
    while (n > 0) {
        if (atomic_compare_exchange_weak(&fail_countdown, &n, n - 1)) return n == 1;
    }
    return 0;
}

void *snn_alloc(size_t bytes, snn_device device)
{
    SNN_ASSERT(device == SNN_CPU || device == SNN_CUDA);
    if (injected_failure()) return NULL;
    const size_t limit = atomic_load(&live_limit[device]);
    if (limit && (bytes > limit || atomic_load(&live_bytes[device]) > limit - bytes)) return NULL;
    void *p = NULL;
    if (device == SNN_CPU) {
        p = host_alloc(bytes);
    } else {
        const snn_kernels *k = snn_kernels_for(device);
        if (!k || !k->device_alloc) return NULL;
        p = k->device_alloc(bytes ? bytes : 1);
    }
    if (!p) return NULL;
    size_t live = atomic_fetch_add(&live_bytes[device], bytes) + bytes;
    size_t peak = atomic_load(&peak_bytes[device]);
    while (live > peak && !atomic_compare_exchange_weak(&peak_bytes[device], &peak, live)) {
    }
    atomic_fetch_add(&allocations, 1);
    return p;
}

void snn_free(void *p, size_t bytes, snn_device device)
{
    if (!p) return;
    SNN_ASSERT(atomic_load(&live_bytes[device]) >= bytes);
    atomic_fetch_sub(&live_bytes[device], bytes);
    if (device == SNN_CPU) {
        free(p);
    } else {
        const snn_kernels *k = snn_kernels_for(device);
        SNN_ASSERT(k && k->device_free);
        k->device_free(p);
    }
}

size_t snn_live_bytes(snn_device device) { return atomic_load(&live_bytes[device]); }
size_t snn_peak_bytes(snn_device device) { return atomic_load(&peak_bytes[device]); }
void snn_reset_peak_bytes(snn_device device) { atomic_store(&peak_bytes[device], atomic_load(&live_bytes[device])); }
uint64_t snn_alloc_count(void) { return atomic_load(&allocations); }
void snn_alloc_fail_after(uint64_t n) { atomic_store(&fail_countdown, n); }
void snn_alloc_limit(snn_device device, size_t bytes)
{
    SNN_ASSERT(device == SNN_CPU || device == SNN_CUDA);
    atomic_store(&live_limit[device], bytes);
}
