/*
 * cuda_parity.h - the harness of the CUDA tests that check the CUDA kernel table on the GPU
 * (test_cuda_kernels.c, test_cuda_layers.c, test_cuda_igemm.c, test_cuda_batchnorm_sync.c):
 * the table, tracked host and device buffers released after each case, random inputs, and
 * the exact comparison of a device buffer with host values. The CUDA kernels' agreement with the
 * reference kernels is the parity harness's (tests/test_cuda_backend_ops.c, backend_ops.h); the
 * tests here check what it cannot (runs that must repeat their bits, paths that must give the
 * same bits, ops composed of kernels against the same ops on the CPU).
 * The CUDA table is reached through snn_kernels_for(SNN_CUDA), so the tests compile in a build
 * without CUDA and exit 77 (skipped) there.
 */
#ifndef SNN_CUDA_PARITY_H
#define SNN_CUDA_PARITY_H

#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "tensor/cuda_options.h"
#include "kernels/kernels.h"
#include "test.h"

static const snn_kernels *gpu; /* under test */
static snn_rng rng;

/* ---------------------------------------------------------------------------------------------
 * Memory: every buffer of a test is recorded and released by release_all() at its end, so
 * test_finish() can prove that nothing leaks on either device.
 * ------------------------------------------------------------------------------------------- */

typedef struct alloc_record {
    void *p;
    size_t bytes;
    snn_device device;
} alloc_record;

static alloc_record records[1024];
static int nrecords;

static inline void *tracked_alloc(size_t bytes, snn_device device)
{
    if (bytes == 0) bytes = 1;
    if (nrecords == (int)(sizeof records / sizeof records[0])) {
        fprintf(stderr, "cuda_parity.h: more than %d live allocations; call release_all() "
                "between cases\n", nrecords);
        exit(EXIT_FAILURE);
    }
    void *p = snn_alloc(bytes, device);
    if (!p) {
        fprintf(stderr, "cuda_parity.h: cannot allocate %zu bytes on %s\n", bytes,
                snn_device_name(device));
        exit(EXIT_FAILURE);
    }
    records[nrecords++] = (alloc_record){p, bytes, device};
    return p;
}

static inline void release_all(void)
{
    for (int i = nrecords - 1; i >= 0; i--)
        snn_free(records[i].p, records[i].bytes, records[i].device);
    nrecords = 0;
}

static inline float *host_floats(size_t n) { return tracked_alloc(n * sizeof(float), SNN_CPU); }
static inline float *dev_floats(size_t n) { return tracked_alloc(n * sizeof(float), SNN_CUDA); }

static inline void upload(void *dev, const void *host, size_t bytes)
{
    gpu->copy(dev, host, bytes, SNN_COPY_HOST_TO_DEVICE);
}

static inline void download(void *host, const void *dev, size_t bytes)
{
    gpu->copy(host, dev, bytes, SNN_COPY_DEVICE_TO_HOST);
}

/* host buffer of uniform values in [lo, hi) */
static inline float *random_host(size_t n, float lo, float hi)
{
    float *h = host_floats(n);
    for (size_t i = 0; i < n; i++) h[i] = lo + (hi - lo) * snn_rng_uniform(&rng);
    return h;
}

/* host buffer of small whole numbers in [0, levels): many exact ties */
static inline float *integer_host(size_t n, int levels)
{
    float *h = host_floats(n);
    for (size_t i = 0; i < n; i++) h[i] = (float)snn_rng_below(&rng, (uint64_t)levels);
    return h;
}

static inline float *dev_copy(const float *h, size_t n)
{
    float *d = dev_floats(n);
    upload(d, h, n * sizeof *h);
    return d;
}

/* ---------------------------------------------------------------------------------------------
 * Comparison: the GPU buffer is downloaded and compared with host values, bit for bit. `what`
 * names the case in the failure message.
 * ------------------------------------------------------------------------------------------- */

static inline void expect_exact(const char *what, const void *got_dev, const void *want,
                                size_t bytes)
{
    void *got = tracked_alloc(bytes, SNN_CPU);
    download(got, got_dev, bytes);
    test_checks++;
    if (memcmp(got, want, bytes) != 0) {
        test_failures++;
        const unsigned char *g = got, *w = want;
        size_t at = 0;
        while (at < bytes && g[at] == w[at]) at++;
        fprintf(stderr, "FAIL %s: not bit-identical (first difference at byte %zu of %zu)\n", what,
                at, bytes);
    }
}

/* ---------------------------------------------------------------------------------------------
 * The table
 * ------------------------------------------------------------------------------------------- */

/* Finds the CUDA table and seeds the inputs; exits 77 without a GPU. */
static inline void parity_begin(void)
{
    test_require_cuda();
    gpu = snn_kernels_for(SNN_CUDA);
    if (!gpu) {
        fprintf(stderr, "no kernel table: %s\n", snn_last_error());
        exit(EXIT_FAILURE);
    }
    snn_rng_seed(&rng, 20261122);
}

#endif /* SNN_CUDA_PARITY_H */
