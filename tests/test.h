/*
 * test.h - the tiny harness every tests/test_*.c uses.
 *
 *     static void test_add(void) { CHECK(x == 1); CHECK_CLOSE(a, b, 1e-6, 1e-5); }
 *     int main(void) { RUN(test_add); return test_finish(); }
 *
 * A failed CHECK prints file:line and the expression, counts the failure and goes on; the
 * program's exit code is the verdict (ctest reads nothing else: a test that printed a failure
 * and exited 0 would pass). test_finish() also fails the run when snn.c
 * still holds memory after snn_shutdown(): every test proves it leaks nothing.
 * CUDA tests call test_require_cuda(), which exits 77 (ctest: skipped) without a GPU.
 */
#ifndef SNN_TEST_H
#define SNN_TEST_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/tensor.h"

static int test_failures;
static int test_checks;

#define CHECK(cond)                                                                   \
    do {                                                                              \
        test_checks++;                                                                \
        if (!(cond)) {                                                                \
            test_failures++;                                                          \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);  \
        }                                                                             \
    } while (0)

/* |got - want| <= atol + rtol * |want|; NaN never passes. */
#define CHECK_CLOSE(got, want, atol, rtol)                                                   \
    do {                                                                                     \
        double got_ = (double)(got), want_ = (double)(want);                                 \
        test_checks++;                                                                       \
        if (!(fabs(got_ - want_) <= (atol) + (rtol) * fabs(want_))) {                        \
            test_failures++;                                                                 \
            fprintf(stderr, "%s:%d: CHECK_CLOSE failed: %s = %.9g, want %s = %.9g\n",        \
                    __FILE__, __LINE__, #got, got_, #want, want_);                           \
        }                                                                                    \
    } while (0)

/* A call that must succeed: prints snn_last_error() when it does not. */
#define CHECK_OK(call)                                                                       \
    do {                                                                                     \
        test_checks++;                                                                       \
        snn_status status_ = (call);                                                         \
        if (status_ != SNN_OK) {                                                             \
            test_failures++;                                                                 \
            fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call,             \
                    snn_last_error());                                                       \
        }                                                                                    \
    } while (0)

/* Whether n floats are the same bit for bit (NaNs included; -0 differs from +0). */
static inline bool test_same_bits(const float *a, const float *b, long n)
{
    return memcmp(a, b, (size_t)n * sizeof *a) == 0;
}

/* Largest |got[i] - want[i]| / (atol + rtol |want[i]|) over n; <= 1 means all close. */
static inline double test_worst_ratio(const float *got, const float *want, long n, double atol,
                                      double rtol, long *where)
{
    double worst = 0.0;
    for (long i = 0; i < n; i++) {
        double r = fabs((double)got[i] - (double)want[i]) / (atol + rtol * fabs((double)want[i]));
        if (!(r <= worst)) { /* catches NaN */
            worst = isnan(r) ? (double)INFINITY : r;
            if (where) *where = i;
        }
    }
    return worst;
}

#define CHECK_ALL_CLOSE(got, want, n, atol, rtol)                                            \
    do {                                                                                     \
        long where_ = 0;                                                                     \
        double worst_ = test_worst_ratio((got), (want), (long)(n), (atol), (rtol), &where_); \
        test_checks++;                                                                       \
        if (!(worst_ <= 1.0)) {                                                              \
            test_failures++;                                                                 \
            fprintf(stderr, "%s:%d: CHECK_ALL_CLOSE(%s, %s) failed at [%ld]: %.9g vs %.9g\n", \
                    __FILE__, __LINE__, #got, #want, where_, (double)(got)[where_],          \
                    (double)(want)[where_]);                                                 \
        }                                                                                    \
    } while (0)

/* SNN_TEST_ONLY=text runs only the tests whose function name contains text (e.g. one test
 * under compute-sanitizer); the others print "skip". */
static inline int test_selected(const char *name)
{
    const char *only = getenv("SNN_TEST_ONLY");
    return !only || !*only || strstr(name, only) != NULL;
}

#define RUN(test_fn)                                                                         \
    do {                                                                                     \
        if (!test_selected(#test_fn)) {                                                      \
            fprintf(stderr, "%-6s %s\n", "skip", #test_fn);                                  \
            break;                                                                           \
        }                                                                                    \
        int before_ = test_failures;                                                         \
        test_fn();                                                                           \
        fprintf(stderr, "%-6s %s\n", test_failures == before_ ? "ok" : "FAIL", #test_fn);    \
    } while (0)

/* A tensor's values on the host (malloc'd; the caller frees them), or NULL for NULL. */
static inline float *test_to_host(const snn_tensor *t)
{
    if (!t) return NULL;
    float *h = malloc((size_t)(t->numel > 0 ? t->numel : 1) * sizeof *h);
    CHECK_OK(snn_tensor_copy_to_host(t, h));
    return h;
}

/* A CPU STEP tensor of `shape` filled with U(lo, hi) drawn from `seed` (inside a step). */
static inline snn_tensor *test_uniform(snn_shape shape, float lo, float hi, uint64_t seed)
{
    snn_rng rng;
    snn_rng_seed(&rng, seed);
    snn_tensor *t = snn_empty(shape, SNN_CPU);
    snn_tensor_uniform_(t, &rng, lo, hi);
    return t;
}

static inline void test_require_cuda(void)
{
    if (!snn_cuda_available()) {
        fprintf(stderr, "skipped: %s\n", snn_cuda_compiled() ? "no CUDA device visible"
                                                             : "built without SNN_CUDA");
        exit(77);
    }
}

/* Releases snn.c's arenas and checks that no byte is still held; returns the exit code. */
static inline int test_finish(void)
{
    snn_shutdown();
    for (int d = 0; d < SNN_NUM_DEVICES; d++) {
        if (snn_live_bytes((snn_device)d) != 0) {
            fprintf(stderr, "leak: %zu bytes still held on %s\n", snn_live_bytes((snn_device)d),
                    snn_device_name((snn_device)d));
            test_failures++;
        }
    }
    fprintf(stderr, "%d checks, %d failed\n", test_checks, test_failures);
    return test_failures ? EXIT_FAILURE : EXIT_SUCCESS;
}

#endif /* SNN_TEST_H */
