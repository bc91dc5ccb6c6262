/*
 * test_dropout_kernels.c - the kernels driven by the counter hash snn_hash64, called directly,
 * each run on the reference kernels (kernels/ref/dropout.c, kernels/ref/encode.c) and the fast
 * CPU ones (kernels/cpu/dropout.c, kernels/cpu/encode.c): the dropout mask and the Poisson
 * encoder.
 *
 * Both draw from a documented recipe that checkpoints and resumed runs rely on, so the first
 * test pins the recipe's output: masks and spikes of given seeds, written down here as bit
 * patterns (drawn by the recipe of dropout.c's comment and by the loop nn/model.c ran before
 * the Poisson kernel existed; a recipe that changes fails them). Then properties: the dropout
 * mask is a pure function of (seed, index) (deterministic, independent of n and of threads),
 * takes only the values 0 and 1/(1-p), keeps u == p, keeps a fraction 1-p within 4 standard
 * deviations, and changes with the seed. The Poisson spikes are exactly 0 or 1; intensities
 * <= 0 and NaN never fire, >= 1 always fire, and u == pixel does not fire (strict <); a grey
 * image fires at its intensity within 4 standard deviations; step t is the T = 1 encoding with
 * seed + t n; 1 thread and all threads agree. The two tables' agreement bit for bit over
 * sizes, probabilities and seeds (wrapping 2^64) is checked by the parity harness,
 * tests/test_backend_ops.c.
 *
 *     ctest --test-dir build -R dropout_kernels --output-on-failure
 */
#include <string.h>

#include "tensor/error.h"
#include "kernels/cpu/kernels_cpu.h"
#include "kernels/ref/kernels_ref.h"
#include "test.h"

#define BIG 1000000

static float *falloc(int64_t n)
{
    float *p = snn_alloc((size_t)n * sizeof *p, SNN_CPU);
    SNN_ASSERT(p);
    return p;
}
static void ffree(float *p, int64_t n) { snn_free(p, (size_t)n * sizeof *p, SNN_CPU); }

static const snn_kernels *k; /* the table under test: the reference, then the fast CPU one */

/* Bit i of the result: element i of v is not 0 (n <= 64). */
static uint64_t nonzero_bits(const float *v, int n)
{
    uint64_t bits = 0;
    for (int i = 0; i < n; i++) bits |= (uint64_t)(v[i] != 0.0f) << i;
    return bits;
}

/* The recipe's output, pinned: which of the first and of the last 64 elements of a million
 * survive p = 0.3 with seed 0x5EED; the spikes of 32 grey pixels (0.5) over 2 steps with seed
 * 0, and with a seed whose keys wrap past 2^64 inside the tensor. */
static void test_recipe_pinned(void)
{
    float *mask = falloc(BIG);
    k->dropout_mask(mask, BIG, 0.3f, 0x5EEDull);
    CHECK(nonzero_bits(mask, 64) == 0x7fed3295b57bfee2ull);
    CHECK(nonzero_bits(mask + BIG - 64, 64) == 0x7ee5fb93fcc3e7fdull);
    ffree(mask, BIG);
    float pixels[32], spikes[64];
    for (int i = 0; i < 32; i++) pixels[i] = 0.5f;
    k->poisson_encode(spikes, pixels, 32, 2, 0);
    CHECK(nonzero_bits(spikes, 64) == 0x668b830a00354cb8ull);
    k->poisson_encode(spikes, pixels, 32, 2, UINT64_MAX - 40);
    CHECK(nonzero_bits(spikes, 64) == 0x6a99701442002c6cull);
}

/* The comparison is u >= p: an element whose u equals p exactly is kept. Take p = u of
 * element 5 (a multiple of 2^-24, exact in float), then element 5 must survive. */
static void test_boundary_is_kept(void)
{
    const uint64_t seed = 77;
    uint64_t key = seed * 0xD1B54A32D192ED03ull + 5;
    const float p = (float)(snn_hash64(key) >> 40) / 16777216.0f;
    float mask[8];
    k->dropout_mask(mask, 8, p, seed);
    CHECK(mask[5] == 1.0f / (1.0f - p));
}

/* Same seed, same mask; the mask of a short tensor is the prefix of a long one's (element i
 * depends on (seed, i) only); 1 thread and all threads agree. */
static void test_deterministic(void)
{
    float *a = falloc(BIG), *b = falloc(BIG), *c = falloc(1000);
    k->dropout_mask(a, BIG, 0.5f, 42);
    k->dropout_mask(b, BIG, 0.5f, 42);
    CHECK(memcmp(a, b, BIG * sizeof *a) == 0);
    k->dropout_mask(c, 1000, 0.5f, 42);
    CHECK(memcmp(a, c, 1000 * sizeof *a) == 0);
    int saved = snn_get_num_threads();
    snn_set_num_threads(1);
    k->dropout_mask(b, BIG, 0.5f, 42);
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
    for (int j = 0; j < 4; j++) {
        const float p = ps[j], scale = 1.0f / (1.0f - p);
        k->dropout_mask(mask, BIG, p, 1000 + (uint64_t)j);
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
    k->dropout_mask(mask, BIG, 0.0f, 7);
    int64_t ones = 0;
    for (int64_t i = 0; i < BIG; i++) ones += mask[i] == 1.0f;
    CHECK(ones == BIG);
    k->dropout_mask(mask, BIG, 1.0f, 7);
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
    k->dropout_mask(a, BIG, 0.5f, 1);
    k->dropout_mask(b, BIG, 0.5f, 2);
    int64_t agree = 0, agree_next = 0;
    for (int64_t i = 0; i < BIG; i++) agree += a[i] == b[i];
    for (int64_t i = 0; i + 1 < BIG; i++) agree_next += a[i] == a[i + 1];
    const double sigma = sqrt(BIG / 4.0);
    CHECK(fabs((double)agree - BIG / 2.0) <= 4.0 * sigma);
    CHECK(fabs((double)agree_next - (BIG - 1) / 2.0) <= 4.0 * sigma);
    ffree(a, BIG), ffree(b, BIG);
}

/* ---- Poisson encoding ----------------------------------------------------------------------- */

/* u of flat index j, the threshold a pixel must exceed to fire there */
static float poisson_u(uint64_t seed, int64_t j)
{
    return (float)(snn_hash64(seed + (uint64_t)j) >> 40) / 16777216.0f;
}

/* Hand-built pixels around the thresholds of their own elements, T = 2, n = 8. */
static void test_poisson_edges(void)
{
    enum { N = 8, STEPS = 2 };
    const uint64_t seed = 99;
    float pixels[N], spikes[STEPS * N];
    const float u2 = poisson_u(seed, 2), u3 = poisson_u(seed, 3);
    pixels[0] = 0.0f;                         /* never fires: u >= 0 */
    pixels[1] = 1.0f;                         /* always fires: u <= 1 - 2^-24 */
    pixels[2] = u2;                           /* u == pixel at t = 0: strict <, no spike */
    pixels[3] = nextafterf(u3, 2.0f);         /* just above u at t = 0: a spike */
    pixels[4] = -3.0f;                        /* negative: never */
    pixels[5] = 7.0f;                         /* above 1: always */
    pixels[6] = NAN;                          /* NaN compares false: never */
    pixels[7] = INFINITY;                     /* always */
    k->poisson_encode(spikes, pixels, N, STEPS, seed);
    for (int t = 0; t < STEPS; t++) {
        const float *row = spikes + t * N;
        CHECK(row[0] == 0.0f && row[1] == 1.0f && row[4] == 0.0f && row[5] == 1.0f);
        CHECK(row[6] == 0.0f && row[7] == 1.0f);
    }
    CHECK(spikes[2] == 0.0f && spikes[3] == 1.0f);
    /* at t = 1 the same pixels meet fresh thresholds u(seed, 8 + i) */
    CHECK(spikes[N + 2] == (poisson_u(seed, N + 2) < u2 ? 1.0f : 0.0f));
    CHECK(spikes[N + 3] == (poisson_u(seed, N + 3) < pixels[3] ? 1.0f : 0.0f));
    /* n = 0 or T = 0 writes nothing */
    float guard = -1.0f;
    k->poisson_encode(&guard, pixels, 0, STEPS, seed);
    k->poisson_encode(&guard, pixels, N, 0, seed);
    CHECK(guard == -1.0f);
}

/* A grey image of intensity r fires a fraction r of its spikes, within 4 sigma
 * (sigma = sqrt(T n r (1 - r)), binomial); T = 4 steps of n = 250,000 pixels. */
static void test_poisson_rate(void)
{
    const int64_t n = 250000;
    const int T = 4;
    const float rates[3] = {0.05f, 0.3f, 0.77f};
    float *pixels = falloc(n), *spikes = falloc(T * n);
    for (int q = 0; q < 3; q++) {
        const double r = (double)rates[q], total = (double)(T * n);
        for (int64_t i = 0; i < n; i++) pixels[i] = rates[q];
        k->poisson_encode(spikes, pixels, n, T, 5000 + (uint64_t)q);
        int64_t fired = 0;
        for (int64_t j = 0; j < T * n; j++) fired += spikes[j] == 1.0f;
        const double expect = total * r, sigma = sqrt(total * r * (1.0 - r));
        CHECK(fabs((double)fired - expect) <= 4.0 * sigma);
        fprintf(stderr, "  rate %.2f: %lld spikes of %.0f (expected %.0f +- %.0f)\n", r,
                (long long)fired, total, expect, sigma);
    }
    ffree(pixels, n), ffree(spikes, T * n);
}

/* The key of (t, i) is seed + t n + i: step t of a T-step encoding is the one-step encoding
 * with seed + t n. And the result does not depend on the thread count. */
static void test_poisson_layout_and_threads(void)
{
    const int64_t n = 70001;
    const int T = 3;
    const uint64_t seed = 0xFEEDull;
    snn_rng rng;
    snn_rng_seed(&rng, 12);
    float *pixels = falloc(n), *all = falloc(T * n), *one = falloc(n), *serial = falloc(T * n);
    for (int64_t i = 0; i < n; i++) pixels[i] = snn_rng_uniform(&rng);
    k->poisson_encode(all, pixels, n, T, seed);
    for (int t = 0; t < T; t++) {
        k->poisson_encode(one, pixels, n, 1, seed + (uint64_t)(t * n));
        CHECK(memcmp(one, all + t * n, (size_t)n * sizeof *one) == 0);
    }
    int saved = snn_get_num_threads();
    snn_set_num_threads(1);
    k->poisson_encode(serial, pixels, n, T, seed);
    snn_set_num_threads(saved);
    CHECK(memcmp(all, serial, (size_t)(T * n) * sizeof *all) == 0);
    ffree(pixels, n), ffree(all, T * n), ffree(one, n), ffree(serial, T * n);
}

int main(void)
{
    const snn_kernels *const tables[2] = {&snn_kernels_ref, &snn_kernels_cpu};
    for (int t = 0; t < 2; t++) {
        k = tables[t];
        fprintf(stderr, "-- the %s kernels\n", k->name);
        RUN(test_recipe_pinned);
        RUN(test_boundary_is_kept);
        RUN(test_deterministic);
        RUN(test_values_and_keep_fraction);
        RUN(test_edge_probabilities);
        RUN(test_seeds_independent);
        RUN(test_poisson_edges);
        RUN(test_poisson_rate);
        RUN(test_poisson_layout_and_threads);
    }
    return test_finish();
}
