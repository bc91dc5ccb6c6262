/*
 * test_pool2d_kernels.c - the CPU max-pool and avg-pool kernels (kernels/cpu/pool2d.c), called
 * directly: hand-computed tiny cases, plain-loop references on random inputs (over a padded
 * copy of the input, a different way to write the same math; exact where the summation order
 * is the same), spike inputs full of ties, accumulate semantics, the adjoint (dot-product)
 * identity between forward and backward, and thread independence.
 *
 *     ctest --test-dir build -R pool2d_kernels --output-on-failure
 */
#include <string.h>

#include "tensor/error.h"
#include "kernels/cpu/kernels_cpu.h"
#include "test.h"

/* ---- helpers --------------------------------------------------------------------------------- */

static float *falloc(int64_t n)
{
    float *p = snn_alloc((size_t)n * sizeof *p, SNN_CPU);
    SNN_ASSERT(p);
    memset(p, 0, (size_t)n * sizeof *p);
    return p;
}
static void ffree(float *p, int64_t n) { snn_free(p, (size_t)n * sizeof *p, SNN_CPU); }

static int32_t *ialloc(int64_t n)
{
    int32_t *p = snn_alloc((size_t)n * sizeof *p, SNN_CPU);
    SNN_ASSERT(p);
    return p;
}
static void ifree(int32_t *p, int64_t n) { snn_free(p, (size_t)n * sizeof *p, SNN_CPU); }

static snn_pool2d_dims pool_dims(int N, int C, int H, int W, int K, int S, int P)
{
    snn_pool2d_dims d = {.N = N, .C = C, .H = H, .W = W, .K = K, .stride = S, .pad = P};
    d.H_out = (H + 2 * P - K) / S + 1;
    d.W_out = (W + 2 * P - K) / S + 1;
    return d;
}

/* Exact equality, element by element (CHECK_ALL_CLOSE with zero tolerance divides 0 by 0). */
static bool all_equal(const float *a, const float *b, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (a[i] != b[i]) {
            fprintf(stderr, "  first difference at [%lld]: %.9g vs %.9g\n", (long long)i,
                    (double)a[i], (double)b[i]);
            return false;
        }
    return true;
}

static void fill_uniform(float *x, int64_t n, snn_rng *rng, float lo, float hi)
{
    for (int64_t i = 0; i < n; i++) x[i] = lo + (hi - lo) * snn_rng_uniform(rng);
}

/* ---- hand-computed cases ------------------------------------------------------------------- */

/* 4x4, K = S = 2: each 2x2 block's max; the last block holds a tie (7 at (2,2) and (3,3)) that
 * the first in scan order must win. */
static void test_max_pool_4x4_hand(void)
{
    const float x[16] = {1, 3, 2, 0,
                         4, 2, 1, 5,
                         0, 7, 7, 1,
                         6, 1, 3, 7};
    snn_pool2d_dims d = pool_dims(1, 1, 4, 4, 2, 2, 0);
    float out[4];
    int32_t argmax[4];
    snn_max_pool2d_forward_cpu(out, argmax, x, &d);
    const float want[4] = {4, 5, 7, 7};
    const int32_t want_at[4] = {4, 7, 9, 10};
    for (int i = 0; i < 4; i++) {
        CHECK(out[i] == want[i]);
        CHECK(argmax[i] == want_at[i]);
    }

    /* backward routes dout to the winners; a second call adds the same again */
    const float dout[4] = {1, 2, 3, 4};
    float dx[16] = {0};
    snn_max_pool2d_backward_cpu(dx, dout, argmax, &d);
    float want_dx[16] = {0};
    want_dx[4] = 1, want_dx[7] = 2, want_dx[9] = 3, want_dx[10] = 4;
    for (int i = 0; i < 16; i++) CHECK(dx[i] == want_dx[i]);
    snn_max_pool2d_backward_cpu(dx, dout, argmax, &d);
    for (int i = 0; i < 16; i++) CHECK(dx[i] == 2.0f * want_dx[i]);
    snn_max_pool2d_backward_cpu(NULL, dout, argmax, &d); /* NULL gradient: skipped */
}

/* All-negative input with padding: if padding counted as 0 it would win every window. */
static void test_max_pool_padding_never_wins(void)
{
    const float x[9] = {-1, -2, -3,
                        -4, -5, -6,
                        -7, -8, -9};
    snn_pool2d_dims d = pool_dims(1, 1, 3, 3, 3, 2, 1); /* 2x2 output */
    CHECK(d.H_out == 2 && d.W_out == 2);
    float out[4];
    int32_t argmax[4];
    snn_max_pool2d_forward_cpu(out, argmax, x, &d);
    const float want[4] = {-1, -2, -4, -5};
    const int32_t want_at[4] = {0, 1, 3, 4};
    for (int i = 0; i < 4; i++) {
        CHECK(out[i] == want[i]);
        CHECK(argmax[i] == want_at[i]);
    }
}

/* Overlapping windows (K = 3, S = 1): one input that wins several windows collects all their
 * gradients. The 9 is in every 3x3 window of the 4x4 input, so it wins all 4. */
static void test_max_pool_overlap_accumulates(void)
{
    float x[16];
    for (int i = 0; i < 16; i++) x[i] = (float)(i % 5);
    x[5] = 9.0f;
    snn_pool2d_dims d = pool_dims(1, 1, 4, 4, 3, 1, 0);
    float out[4];
    int32_t argmax[4];
    snn_max_pool2d_forward_cpu(out, argmax, x, &d);
    for (int i = 0; i < 4; i++) CHECK(argmax[i] == 5 && out[i] == 9.0f);
    const float dout[4] = {1, 10, 100, 1000};
    float dx[16] = {0};
    snn_max_pool2d_backward_cpu(dx, dout, argmax, &d);
    CHECK(dx[5] == 1111.0f);
}

/* A NaN in a window wins (PyTorch propagates NaN through max-pool). */
static void test_max_pool_nan_propagates(void)
{
    float x[4] = {1, NAN, 3, 2};
    snn_pool2d_dims d = pool_dims(1, 1, 2, 2, 2, 2, 0);
    float out[1];
    int32_t argmax[1];
    snn_max_pool2d_forward_cpu(out, argmax, x, &d);
    CHECK(isnan(out[0]) && argmax[0] == 1);

    /* 3x3, K = 3, S = 1, P = 1: every window (border and interior) holds the centre NaN and a
     * second NaN later in scan order; the first one seen must win everywhere it is first */
    float y[9] = {1, 2, 3, 4, NAN, 6, 7, 8, NAN};
    snn_pool2d_dims d3 = pool_dims(1, 1, 3, 3, 3, 1, 1);
    float out3[9];
    int32_t argmax3[9];
    snn_max_pool2d_forward_cpu(out3, argmax3, y, &d3);
    for (int i = 0; i < 9; i++) CHECK(isnan(out3[i]) && argmax3[i] == 4);
}

/* 3x3 input 1..9, K = 2, S = 2, P = 1: every window is divided by 4, padding included. */
static void test_avg_pool_padding_hand(void)
{
    const float x[9] = {1, 2, 3,
                        4, 5, 6,
                        7, 8, 9};
    snn_pool2d_dims d = pool_dims(1, 1, 3, 3, 2, 2, 1);
    CHECK(d.H_out == 2 && d.W_out == 2);
    float out[4];
    snn_avg_pool2d_forward_cpu(out, x, &d);
    /* windows: {1}, {2, 3}, {4, 7}, {5, 6, 8, 9}, each over 4 */
    const float want[4] = {0.25f, 1.25f, 2.75f, 7.0f};
    for (int i = 0; i < 4; i++) CHECK(out[i] == want[i]);

    const float dout[4] = {4, 8, 12, 16};
    float dx[9] = {0};
    snn_avg_pool2d_backward_cpu(dx, dout, &d);
    const float want_dx[9] = {1, 2, 2,
                              3, 4, 4,
                              3, 4, 4};
    for (int i = 0; i < 9; i++) CHECK(dx[i] == want_dx[i]);
    snn_avg_pool2d_backward_cpu(dx, dout, &d); /* accumulates */
    for (int i = 0; i < 9; i++) CHECK(dx[i] == 2.0f * want_dx[i]);
}

/* ---- plain-loop references on random inputs ------------------------------------------------ */

/* Copies each (n, c) plane into a (H + 2P, W + 2P) buffer whose border holds `pad_value`. */
static void pad_planes(float *xp, const float *x, const snn_pool2d_dims *d, float pad_value)
{
    const int Hp = d->H + 2 * d->pad, Wp = d->W + 2 * d->pad;
    for (int64_t plane = 0; plane < (int64_t)d->N * d->C; plane++)
        for (int h = 0; h < Hp; h++)
            for (int w = 0; w < Wp; w++) {
                int ih = h - d->pad, iw = w - d->pad;
                bool inside = ih >= 0 && ih < d->H && iw >= 0 && iw < d->W;
                xp[(plane * Hp + h) * Wp + w] =
                    inside ? x[(plane * d->H + ih) * d->W + iw] : pad_value;
            }
}

/* binary: inputs are spikes in {0, 1} (what pools see in a spiking net), so most windows hold
 * ties and the first-maximum rule is exercised on every path */
static void check_random_case(int N, int C, int H, int W, int K, int S, int P, bool binary,
                              snn_rng *rng)
{
    snn_pool2d_dims d = pool_dims(N, C, H, W, K, S, P);
    const int Hp = H + 2 * P, Wp = W + 2 * P;
    const int64_t planes = (int64_t)N * C, nin = planes * H * W;
    const int64_t nout = planes * d.H_out * d.W_out, npad = planes * Hp * Wp;
    float *x = falloc(nin), *xp = falloc(npad), *out = falloc(nout), *ref = falloc(nout);
    float *dout = falloc(nout), *dx = falloc(nin), *dx_ref = falloc(nin);
    int32_t *argmax = ialloc(nout), *argmax_ref = ialloc(nout);
    fill_uniform(x, nin, rng, -2.0f, 2.0f);
    if (binary)
        for (int64_t i = 0; i < nin; i++) x[i] = x[i] < -1.0f ? 1.0f : 0.0f;
    fill_uniform(dout, nout, rng, -1.0f, 1.0f);

    /* max-pool: reference over a -inf padded copy, first maximum wins */
    pad_planes(xp, x, &d, -INFINITY);
    for (int64_t plane = 0; plane < planes; plane++)
        for (int oh = 0; oh < d.H_out; oh++)
            for (int ow = 0; ow < d.W_out; ow++) {
                float best = -INFINITY;
                int bh = -1, bw = -1;
                for (int kh = 0; kh < K; kh++)
                    for (int kw = 0; kw < K; kw++) {
                        float v = xp[(plane * Hp + oh * S + kh) * Wp + ow * S + kw];
                        if (bh < 0 || v > best) best = v, bh = oh * S + kh, bw = ow * S + kw;
                    }
                int64_t o = (plane * d.H_out + oh) * d.W_out + ow;
                ref[o] = best;
                argmax_ref[o] = (bh - P) * W + (bw - P);
            }
    snn_max_pool2d_forward_cpu(out, argmax, x, &d);
    int argmax_same = 1;
    for (int64_t o = 0; o < nout; o++) argmax_same &= argmax[o] == argmax_ref[o];
    CHECK(argmax_same);
    CHECK(all_equal(out, ref, nout)); /* a max is exact */

    /* max-pool backward: plain scatter in output order; same order, so exact */
    for (int64_t o = 0; o < nout; o++) {
        int64_t plane = o / ((int64_t)d.H_out * d.W_out);
        dx_ref[plane * H * W + argmax_ref[o]] += dout[o];
    }
    snn_max_pool2d_backward_cpu(dx, dout, argmax, &d);
    CHECK(all_equal(dx, dx_ref, nin));

    /* avg-pool: reference over a zero-padded copy, sum of K*K over K*K (adding the padded
     * zeros does not change a float sum, so the result is exact) */
    pad_planes(xp, x, &d, 0.0f);
    for (int64_t plane = 0; plane < planes; plane++)
        for (int oh = 0; oh < d.H_out; oh++)
            for (int ow = 0; ow < d.W_out; ow++) {
                float sum = 0.0f;
                for (int kh = 0; kh < K; kh++)
                    for (int kw = 0; kw < K; kw++)
                        sum += xp[(plane * Hp + oh * S + kh) * Wp + ow * S + kw];
                ref[(plane * d.H_out + oh) * d.W_out + ow] = sum / (float)(K * K);
            }
    snn_avg_pool2d_forward_cpu(out, x, &d);
    CHECK(all_equal(out, ref, nout));

    /* avg-pool backward: scatter into the padded buffer, then crop */
    memset(xp, 0, (size_t)npad * sizeof *xp);
    for (int64_t plane = 0; plane < planes; plane++)
        for (int oh = 0; oh < d.H_out; oh++)
            for (int ow = 0; ow < d.W_out; ow++) {
                float g = dout[(plane * d.H_out + oh) * d.W_out + ow] / (float)(K * K);
                for (int kh = 0; kh < K; kh++)
                    for (int kw = 0; kw < K; kw++)
                        xp[(plane * Hp + oh * S + kh) * Wp + ow * S + kw] += g;
            }
    for (int64_t plane = 0; plane < planes; plane++)
        for (int h = 0; h < H; h++)
            for (int w = 0; w < W; w++)
                dx_ref[(plane * H + h) * W + w] = xp[(plane * Hp + h + P) * Wp + w + P];
    memset(dx, 0, (size_t)nin * sizeof *dx);
    snn_avg_pool2d_backward_cpu(dx, dout, &d);
    if (S >= K) {
        CHECK(all_equal(dx, dx_ref, nin)); /* one contribution per input: exact */
    } else {
        /* overlapping windows: the kernel adds an input's contributions in another order */
        CHECK_ALL_CLOSE(dx, dx_ref, nin, 1e-6, 1e-6);
    }

    /* adjoint identity: <avg(x), dout> = <x, avg^T(dout)> (in double, to rounding) */
    double lhs = 0.0, rhs = 0.0;
    for (int64_t o = 0; o < nout; o++) lhs += (double)out[o] * (double)dout[o];
    for (int64_t i = 0; i < nin; i++) rhs += (double)x[i] * (double)dx[i];
    CHECK_CLOSE(lhs, rhs, 1e-4, 1e-5);

    ffree(x, nin), ffree(xp, npad), ffree(out, nout), ffree(ref, nout);
    ffree(dout, nout), ffree(dx, nin), ffree(dx_ref, nin);
    ifree(argmax, nout), ifree(argmax_ref, nout);
}

static void test_random_vs_plain_loops(void)
{
    snn_rng rng;
    snn_rng_seed(&rng, 1234);
    for (int binary = 0; binary < 2; binary++) {
        check_random_case(2, 3, 8, 8, 2, 2, 0, binary, &rng);    /* the spiking CNN's pool */
        check_random_case(3, 5, 11, 9, 3, 2, 1, binary, &rng);   /* ResNet stem pool, odd sizes */
        check_random_case(2, 2, 7, 10, 3, 1, 1, binary, &rng);   /* overlapping, stride 1 */
        check_random_case(1, 4, 9, 9, 4, 3, 2, binary, &rng);    /* even window, pad = K / 2 */
        check_random_case(2, 2, 5, 3, 3, 3, 1, binary, &rng);    /* no interior column */
        check_random_case(8, 16, 32, 32, 2, 2, 0, binary, &rng); /* the OpenMP path */
    }
}

/* Same bits with 1 thread and with all threads (planes are independent). */
static void test_threads_do_not_change_results(void)
{
    snn_pool2d_dims d = pool_dims(8, 16, 32, 32, 3, 2, 1);
    const int64_t nin = 8 * 16 * 32 * 32, nout = (int64_t)8 * 16 * d.H_out * d.W_out;
    float *x = falloc(nin), *dout = falloc(nout), *a = falloc(nin), *b = falloc(nin);
    snn_rng rng;
    snn_rng_seed(&rng, 99);
    fill_uniform(x, nin, &rng, -1.0f, 1.0f);
    fill_uniform(dout, nout, &rng, -1.0f, 1.0f);
    int saved = snn_get_num_threads();
    snn_set_num_threads(1);
    snn_avg_pool2d_backward_cpu(a, dout, &d);
    snn_set_num_threads(0);
    snn_avg_pool2d_backward_cpu(b, dout, &d);
    snn_set_num_threads(saved);
    CHECK(memcmp(a, b, (size_t)nin * sizeof *a) == 0);
    ffree(x, nin), ffree(dout, nout), ffree(a, nin), ffree(b, nin);
}

int main(void)
{
    RUN(test_max_pool_4x4_hand);
    RUN(test_max_pool_padding_never_wins);
    RUN(test_max_pool_overlap_accumulates);
    RUN(test_max_pool_nan_propagates);
    RUN(test_avg_pool_padding_hand);
    RUN(test_random_vs_plain_loops);
    RUN(test_threads_do_not_change_results);
    return test_finish();
}
