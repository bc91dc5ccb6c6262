/*
 * test_dropout_kernels.c - the CPU dropout mask (tensor/dropout.c), called directly: the mask
 * follows the documented recipe bit for bit (the CUDA kernel is held to the same recipe), is a
 * pure function of (seed, index) (deterministic, independent of n and of threads), takes only
 * the values 0 and 1/(1-p), keeps a fraction 1-p within 4 standard deviations, and changes
 * with the seed.
 *
 *     ctest --test-dir build -R dropout_kernels --output-on-failure
 */
#include <string.h>

#include "tensor/error.h"
#include "tensor/kernels_cpu.h"
#include "test.h"

#define BIG 1000000

static float *falloc(int64_t n)
{
    float *p = snn_alloc((size_t)n * sizeof *p, SNN_CPU);
    SNN_ASSERT(p);
    return p;
}
static void ffree(float *p, int64_t n) { snn_free(p, (size_t)n * sizeof *p, SNN_CPU); }

/* The recipe of dropout.c, written out again from its comment, one element at a time. */
static float recipe(uint64_t seed, uint64_t i, float p)
{
    uint64_t key = seed * 0xD1B54A32D192ED03ull + i;
    float u = (float)(snn_hash64(key) >> 40) / 16777216.0f;
    return u >= p ? 1.0f / (1.0f - p) : 0.0f;
}

static void test_matches_recipe(void)
{
    const float p = 0.3f;
    const uint64_t seed = 0x5EEDull;
    float *mask = falloc(BIG);
    snn_dropout_mask_cpu(mask, BIG, p, seed);
    int64_t bad = 0;
    for (int64_t i = 0; i < BIG; i++) bad += mask[i] != recipe(seed, (uint64_t)i, p);
    CHECK(bad == 0);
    ffree(mask, BIG);
}

/* The comparison is u >= p: an element whose u equals p exactly is kept. Take p = u of
 * element 5 (a multiple of 2^-24, exact in float), then element 5 must survive. */
static void test_boundary_is_kept(void)
{
    const uint64_t seed = 77;
    uint64_t key = seed * 0xD1B54A32D192ED03ull + 5;
    const float p = (float)(snn_hash64(key) >> 40) / 16777216.0f;
    float mask[8];
    snn_dropout_mask_cpu(mask, 8, p, seed);
    CHECK(mask[5] == 1.0f / (1.0f - p));
}

/* Same seed, same mask; the mask of a short tensor is the prefix of a long one's (element i
 * depends on (seed, i) only); 1 thread and all threads agree. */
static void test_deterministic(void)
{
    float *a = falloc(BIG), *b = falloc(BIG), *c = falloc(1000);
    snn_dropout_mask_cpu(a, BIG, 0.5f, 42);
    snn_dropout_mask_cpu(b, BIG, 0.5f, 42);
    CHECK(memcmp(a, b, BIG * sizeof *a) == 0);
    snn_dropout_mask_cpu(c, 1000, 0.5f, 42);
    CHECK(memcmp(a, c, 1000 * sizeof *a) == 0);
    int saved = snn_get_num_threads();
    snn_set_num_threads(1);
    snn_dropout_mask_cpu(b, BIG, 0.5f, 42);
    snn_set_num_threads(saved);
    CHECK(memcmp(a, b, BIG * sizeof *a) == 0);
    ffree(a, BIG), ffree(b, BIG), ffree(c, 1000);
}

/* For each p: every value is 0 or 1/(1-p), and the kept count is within 4 sigma of n (1-p),
 * sigma = sqrt(n p (1-p)) (binomial). */
static void test_values_and_keep_fraction(void)
{
    const float ps[4] = {0.1f, 0.25f, 0.5f, 0.9f};
    float *mask = falloc(BIG);
    for (int k = 0; k < 4; k++) {
        const float p = ps[k], scale = 1.0f / (1.0f - p);
        snn_dropout_mask_cpu(mask, BIG, p, 1000 + (uint64_t)k);
        int64_t kept = 0, other = 0;
        for (int64_t i = 0; i < BIG; i++) {
            kept += mask[i] == scale;
            other += mask[i] != scale && mask[i] != 0.0f;
        }
        const double expect = BIG * (1.0 - (double)p);
        const double sigma = sqrt(BIG * (double)p * (1.0 - (double)p));
        CHECK(other == 0);
        CHECK(fabs((double)kept - expect) <= 4.0 * sigma);
        fprintf(stderr, "  p = %.2f: kept %lld of %d (expected %.0f +- %.0f)\n", (double)p,
                (long long)kept, BIG, expect, sigma);
    }
    ffree(mask, BIG);
}

/* p = 0 keeps everything with scale exactly 1; p = 1 drops everything (no inf, no NaN). */
static void test_edge_probabilities(void)
{
    float *mask = falloc(BIG);
    snn_dropout_mask_cpu(mask, BIG, 0.0f, 7);
    int64_t ones = 0;
    for (int64_t i = 0; i < BIG; i++) ones += mask[i] == 1.0f;
    CHECK(ones == BIG);
    snn_dropout_mask_cpu(mask, BIG, 1.0f, 7);
    int64_t zeros = 0;
    for (int64_t i = 0; i < BIG; i++) zeros += mask[i] == 0.0f;
    CHECK(zeros == BIG);
    ffree(mask, BIG);
}

/* Masks of neighbouring seeds are independent: with p = 0.5 they agree on half the elements,
 * within 4 sigma (sigma = sqrt(n / 4)). Also neighbouring elements are uncorrelated. */
static void test_seeds_independent(void)
{
    float *a = falloc(BIG), *b = falloc(BIG);
    snn_dropout_mask_cpu(a, BIG, 0.5f, 1);
    snn_dropout_mask_cpu(b, BIG, 0.5f, 2);
    int64_t agree = 0, agree_next = 0;
    for (int64_t i = 0; i < BIG; i++) agree += a[i] == b[i];
    for (int64_t i = 0; i + 1 < BIG; i++) agree_next += a[i] == a[i + 1];
    const double sigma = sqrt(BIG / 4.0);
    CHECK(fabs((double)agree - BIG / 2.0) <= 4.0 * sigma);
    CHECK(fabs((double)agree_next - (BIG - 1) / 2.0) <= 4.0 * sigma);
    ffree(a, BIG), ffree(b, BIG);
}

int main(void)
{
    RUN(test_matches_recipe);
    RUN(test_boundary_is_kept);
    RUN(test_deterministic);
    RUN(test_values_and_keep_fraction);
    RUN(test_edge_probabilities);
    RUN(test_seeds_independent);
    return test_finish();
}
