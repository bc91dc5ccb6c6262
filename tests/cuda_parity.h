/*
 * cuda_parity.h - the harness of the CUDA parity tests (test_cuda_kernels.c, test_cuda_layers.c):
 * the CPU and CUDA kernel tables, tracked host and device buffers released after each case,
 * random inputs, and the three comparisons every parity test makes:
 *   - elementwise results:  |got - want| <= ATOL + RTOL |want| per element (1e-6, 1e-5);
 *   - GEMM and conv2d, whose sums run over K = 10^2..10^4 terms in different orders:
 *     ||got - want|| / ||want|| < 1e-5 (fp32), < 2e-3 with TF32 tensor cores;
 *   - exact (bit for bit): copies, fill, the dropout mask, argmax, one-hot, max-pool values.
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

#define ATOL 1e-6
#define RTOL 1e-5
#define NORM_TOL 1e-5
#define TF32_NORM_TOL 2e-3

static const snn_kernels *cpu; /* the reference */
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

static void *tracked_alloc(size_t bytes, snn_device device)
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

static void release_all(void)
{
    for (int i = nrecords - 1; i >= 0; i--)
        snn_free(records[i].p, records[i].bytes, records[i].device);
    nrecords = 0;
}

static float *host_floats(size_t n) { return tracked_alloc(n * sizeof(float), SNN_CPU); }
static float *dev_floats(size_t n) { return tracked_alloc(n * sizeof(float), SNN_CUDA); }

static void upload(void *dev, const void *host, size_t bytes)
{
    gpu->copy(dev, host, bytes, SNN_COPY_HOST_TO_DEVICE);
}

static void download(void *host, const void *dev, size_t bytes)
{
    gpu->copy(host, dev, bytes, SNN_COPY_DEVICE_TO_HOST);
}

/* host buffer of uniform values in [lo, hi) */
static float *random_host(size_t n, float lo, float hi)
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

static float *dev_copy(const float *h, size_t n)
{
    float *d = dev_floats(n);
    upload(d, h, n * sizeof *h);
    return d;
}

/* ---------------------------------------------------------------------------------------------
 * Comparisons: the GPU buffer is downloaded and compared with the CPU's result. `what` names
 * the case in the failure message.
 * ------------------------------------------------------------------------------------------- */

static inline void expect_close(const char *what, const float *got_dev, const float *want, size_t n,
                         double atol, double rtol)
{
    float *got = host_floats(n);
    download(got, got_dev, n * sizeof *got);
    long where = 0;
    double worst = test_worst_ratio(got, want, (long)n, atol, rtol, &where);
    test_checks++;
    if (!(worst <= 1.0)) {
        test_failures++;
        fprintf(stderr,
                "FAIL %s: [%ld] cuda %.9g vs cpu %.9g (worst |diff| / (%g + %g |ref|) = %.3g)\n",
                what, where, (double)got[where], (double)want[where], atol, rtol, worst);
    }
}

static inline void expect_norm(const char *what, const float *got_dev, const float *want, size_t n,
                        double tol)
{
    float *got = host_floats(n);
    download(got, got_dev, n * sizeof *got);
    double diff = 0.0, ref = 0.0;
    for (size_t i = 0; i < n; i++) {
        double e = (double)got[i] - (double)want[i];
        diff += e * e;
        ref += (double)want[i] * (double)want[i];
    }
    double rel = sqrt(diff) / (sqrt(ref) > 0.0 ? sqrt(ref) : 1.0);
    test_checks++;
    if (!(rel < tol)) {
        test_failures++;
        fprintf(stderr, "FAIL %s: ||cuda - cpu|| / ||cpu|| = %.3g (limit %.1g)\n", what, rel, tol);
    }
}

static inline void expect_exact(const char *what, const void *got_dev, const void *want, size_t bytes)
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
 * The table, memory, fill, axpy
 * ------------------------------------------------------------------------------------------- */

/* Finds both tables and seeds the inputs; exits 77 without a GPU. */
static void parity_begin(void)
{
    test_require_cuda();
    cpu = snn_kernels_for(SNN_CPU);
    gpu = snn_kernels_for(SNN_CUDA);
    if (!cpu || !gpu) {
        fprintf(stderr, "no kernel table: %s\n", snn_last_error());
        exit(EXIT_FAILURE);
    }
    snn_rng_seed(&rng, 20261122);
}

#endif /* SNN_CUDA_PARITY_H */
