/*
 * test_conv2d_kernels.c - the CPU conv2d kernels (kernels/cpu/conv2d.c: im2col + SGEMM) against a
 * direct 7-loop convolution written here, forward and backward.
 *
 * Covered: stride 1, 2 and 3; pad 0, 1 and 2; 3x3, 1x1, 5x5 and 3x1 kernels; the 1x1 stride-1
 * path that skips im2col; small outputs that are batched several images per SGEMM (including a
 * last, shorter group); with and without bias; every combination of NULL gradient outputs;
 * backward's accumulation (+=) into gradients that already hold values; 1 and 2 threads, and
 * bitwise-equal results when run twice. A 1-channel case is worked by hand.
 *
 * The reference sums in double; the kernels' float sums are checked with
 * |got - want| <= 1e-5 + 1e-4 |want| (inputs are uniform in [-1, 1], sums of at most ~600 terms).
 *
 * Run: ctest -R conv2d_kernels --output-on-failure   (or build/bin/test_conv2d_kernels)
 */
#include <stdbool.h>
#include <string.h>

#include "tensor/error.h"
#include "kernels/cpu/kernels_cpu.h"
#include "test.h"

#define ATOL 1e-5
#define RTOL 1e-4

static float *alloc_floats(size_t n)
{
    float *p = snn_alloc((n ? n : 1) * sizeof *p, SNN_CPU);
    SNN_ASSERT(p);
    return p;
}
static void free_floats(float *p, size_t n) { snn_free(p, (n ? n : 1) * sizeof *p, SNN_CPU); }

static void fill_uniform(float *p, size_t n, snn_rng *rng)
{
    for (size_t i = 0; i < n; i++) p[i] = 2.0f * snn_rng_uniform(rng) - 1.0f;
}

static snn_conv2d_dims make_dims(int N, int C_in, int H, int W, int C_out, int KH, int KW,
                                 int stride, int pad)
{
    snn_conv2d_dims d = {N, C_in, H, W, C_out, KH, KW, stride, pad, 0, 0};
    d.H_out = (H + 2 * pad - KH) / stride + 1;
    d.W_out = (W + 2 * pad - KW) / stride + 1;
    return d;
}

/* ---------------------------------------------------------------------------------------------
 * The reference: the definition of cross-correlation, one output (or one gradient) at a time.
 * ------------------------------------------------------------------------------------------- */

/* x at (n, ci, ih, iw), 0 in the padding */
static double x_at(const float *x, const snn_conv2d_dims *d, int n, int ci, int ih, int iw)
{
    if (ih < 0 || ih >= d->H || iw < 0 || iw >= d->W) return 0.0;
    return x[(((size_t)n * d->C_in + ci) * d->H + ih) * d->W + iw];
}

/* out[n, co, oh, ow] = bias[co] + sum_{ci, kh, kw} w[co, ci, kh, kw] x[n, ci, ih, iw] */
static void direct_forward(float *out, const float *x, const float *w, const float *bias,
                           const snn_conv2d_dims *d)
{
    for (int n = 0; n < d->N; n++)
        for (int co = 0; co < d->C_out; co++)
            for (int oh = 0; oh < d->H_out; oh++)
                for (int ow = 0; ow < d->W_out; ow++) {
                    double sum = bias ? (double)bias[co] : 0.0;
                    for (int ci = 0; ci < d->C_in; ci++)
                        for (int kh = 0; kh < d->KH; kh++)
                            for (int kw = 0; kw < d->KW; kw++)
                                sum += (double)w[((co * d->C_in + ci) * d->KH + kh) * d->KW + kw] *
                                       x_at(x, d, n, ci, oh * d->stride - d->pad + kh,
                                            ow * d->stride - d->pad + kw);
                    out[(((size_t)n * d->C_out + co) * d->H_out + oh) * d->W_out + ow] = (float)sum;
                }
}

/* dx += ..., dw += ..., db += ... straight from the formulas in conv2d.c's header: every output
 * position (n, co, oh, ow) sends dout times the weight back to each input it read, and dout
 * times that input to the weight. */
static void direct_backward(float *dx, float *dw, float *db, const float *dout, const float *x,
                            const float *w, const snn_conv2d_dims *d)
{
    size_t x_size = (size_t)d->N * d->C_in * d->H * d->W;
    size_t w_size = (size_t)d->C_out * d->C_in * d->KH * d->KW;
    size_t g_bytes = (x_size + w_size + (size_t)d->C_out) * sizeof(double);
    double *gx = snn_alloc(g_bytes, SNN_CPU); /* (N, C_in, H, W) then dw, then db */
    SNN_ASSERT(gx);
    memset(gx, 0, g_bytes);
    double *gw = gx + x_size, *gb = gw + w_size;
    for (int n = 0; n < d->N; n++)
        for (int co = 0; co < d->C_out; co++)
            for (int oh = 0; oh < d->H_out; oh++)
                for (int ow = 0; ow < d->W_out; ow++) {
                    double g = dout[(((size_t)n * d->C_out + co) * d->H_out + oh) * d->W_out + ow];
                    gb[co] += g;
                    for (int ci = 0; ci < d->C_in; ci++)
                        for (int kh = 0; kh < d->KH; kh++)
                            for (int kw = 0; kw < d->KW; kw++) {
                                int ih = oh * d->stride - d->pad + kh;
                                int iw = ow * d->stride - d->pad + kw;
                                size_t wi = ((size_t)(co * d->C_in + ci) * d->KH + kh) * d->KW + kw;
                                gw[wi] += g * x_at(x, d, n, ci, ih, iw);
                                if (ih >= 0 && ih < d->H && iw >= 0 && iw < d->W)
                                    gx[(((size_t)n * d->C_in + ci) * d->H + ih) * d->W + iw] +=
                                        g * (double)w[wi];
                            }
                }
    if (dx) for (size_t i = 0; i < x_size; i++) dx[i] = (float)((double)dx[i] + gx[i]);
    if (dw) for (size_t i = 0; i < w_size; i++) dw[i] = (float)((double)dw[i] + gw[i]);
    if (db) for (int i = 0; i < d->C_out; i++) db[i] = (float)((double)db[i] + gb[i]);
    snn_free(gx, g_bytes, SNN_CPU);
}

/* ---------------------------------------------------------------------------------------------
 * Tests
 * ------------------------------------------------------------------------------------------- */

/* One input plane 3x3, one 2x2 filter, stride 1, no padding, worked by hand:
 *   x = [1 2 3; 4 5 6; 7 8 9], w = [1 0; 0 -1], bias 0.5
 *   out[i, j] = x[i, j] - x[i+1, j+1] + 0.5 = -4 + 0.5 everywhere = [-3.5 -3.5; -3.5 -3.5]
 * Backward with dout = [1 2; 3 4]:
 *   dbias = 10
 *   dw[a, b] = sum_{i,j} dout[i, j] x[i+a, j+b]: dw[0,0] = 1+4+12+20 = 37, dw[0,1] = 2+6+15+24 = 47,
 *              dw[1,0] = 4+10+21+32 = 67, dw[1,1] = 5+12+24+36 = 77
 *   dx[p, q] = sum dout[i, j] w[p-i, q-j]: + dout at its own position, - dout one step up-left:
 *              dx = [1 2 0; 3 4-1 -2; 0 -3 -4] = [1 2 0; 3 3 -2; 0 -3 -4] */
static void test_hand_case(void)
{
    snn_conv2d_dims d = make_dims(1, 1, 3, 3, 1, 2, 2, 1, 0);
    const float x[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, w[4] = {1, 0, 0, -1}, bias[1] = {0.5f};
    const float dout[4] = {1, 2, 3, 4};
    size_t ws = snn_conv2d_workspace_bytes_cpu(&d);
    float *workspace = snn_alloc(ws, SNN_CPU);
    float out[4];
    snn_conv2d_forward_cpu(out, x, w, bias, &d, workspace);
    for (int i = 0; i < 4; i++) CHECK_CLOSE(out[i], -3.5, 1e-6, 0);

    float dx[9] = {0}, dw[4] = {0}, db[1] = {0};
    snn_conv2d_backward_cpu(dx, dw, db, dout, x, w, &d, workspace);
    const float want_dx[9] = {1, 2, 0, 3, 3, -2, 0, -3, -4}, want_dw[4] = {37, 47, 67, 77};
    CHECK_ALL_CLOSE(dx, want_dx, 9, 1e-6, 0);
    CHECK_ALL_CLOSE(dw, want_dw, 4, 1e-6, 0);
    CHECK_CLOSE(db[0], 10.0, 1e-6, 0);
    snn_free(workspace, ws, SNN_CPU);
}

/* Forward and backward of one shape against the direct loops: with/without bias, every NULL
 * combination of (dx, dweight, dbias), gradients pre-filled to test +=, and run twice to check
 * that the result is bitwise reproducible. Returns the number of failed comparisons. */
static int check_shape(const snn_conv2d_dims *d, snn_rng *rng)
{
    size_t x_size = (size_t)d->N * d->C_in * d->H * d->W;
    size_t w_size = (size_t)d->C_out * d->C_in * d->KH * d->KW;
    size_t o_size = (size_t)d->N * d->C_out * d->H_out * d->W_out;
    size_t b_size = (size_t)d->C_out;
    float *x = alloc_floats(x_size), *w = alloc_floats(w_size), *bias = alloc_floats(b_size);
    float *dout = alloc_floats(o_size), *out = alloc_floats(o_size), *want = alloc_floats(o_size);
    fill_uniform(x, x_size, rng);
    fill_uniform(w, w_size, rng);
    fill_uniform(bias, b_size, rng);
    fill_uniform(dout, o_size, rng);
    size_t ws = snn_conv2d_workspace_bytes_cpu(d);
    float *workspace = snn_alloc(ws ? ws : 1, SNN_CPU);
    SNN_ASSERT(workspace);
    int failures = 0;
    long where = 0;

    for (int with_bias = 0; with_bias < 2; with_bias++) {
        const float *b = with_bias ? bias : NULL;
        for (size_t i = 0; i < o_size; i++) out[i] = NAN; /* forward must overwrite all */
        snn_conv2d_forward_cpu(out, x, w, b, d, workspace);
        direct_forward(want, x, w, b, d);
        if (test_worst_ratio(out, want, (long)o_size, ATOL, RTOL, &where) > 1.0) {
            fprintf(stderr, "forward (bias %d) differs at %ld: %g vs %g\n", with_bias, where,
                    (double)out[where], (double)want[where]);
            failures++;
        }
    }

    float *init_dx = alloc_floats(x_size), *init_dw = alloc_floats(w_size);
    float *init_db = alloc_floats(b_size);
    fill_uniform(init_dx, x_size, rng);
    fill_uniform(init_dw, w_size, rng);
    fill_uniform(init_db, b_size, rng);
    float *dx = alloc_floats(x_size), *dw = alloc_floats(w_size), *db = alloc_floats(b_size);
    float *want_dx = alloc_floats(x_size), *want_dw = alloc_floats(w_size);
    float *want_db = alloc_floats(b_size);
    memcpy(want_dx, init_dx, x_size * sizeof *dx);
    memcpy(want_dw, init_dw, w_size * sizeof *dw);
    memcpy(want_db, init_db, b_size * sizeof *db);
    direct_backward(want_dx, want_dw, want_db, dout, x, w, d);

    float *first_dx = alloc_floats(x_size), *first_dw = alloc_floats(w_size);
    for (int mask = 0; mask < 8; mask++) { /* bit 0: dx, bit 1: dweight, bit 2: dbias */
        memcpy(dx, init_dx, x_size * sizeof *dx);
        memcpy(dw, init_dw, w_size * sizeof *dw);
        memcpy(db, init_db, b_size * sizeof *db);
        snn_conv2d_backward_cpu(mask & 1 ? dx : NULL, mask & 2 ? dw : NULL, mask & 4 ? db : NULL,
                                dout, x, w, d, workspace);
        /* a skipped output is untouched; a computed one is init + gradient */
        const float *ex = mask & 1 ? want_dx : init_dx, *ew = mask & 2 ? want_dw : init_dw;
        const float *eb = mask & 4 ? want_db : init_db;
        if (test_worst_ratio(dx, ex, (long)x_size, ATOL, RTOL, &where) > 1.0) {
            fprintf(stderr, "dx (mask %d) differs at %ld: %g vs %g\n", mask, where,
                    (double)dx[where], (double)ex[where]);
            failures++;
        }
        if (test_worst_ratio(dw, ew, (long)w_size, ATOL, RTOL, &where) > 1.0) {
            fprintf(stderr, "dweight (mask %d) differs at %ld: %g vs %g\n", mask, where,
                    (double)dw[where], (double)ew[where]);
            failures++;
        }
        if (test_worst_ratio(db, eb, (long)b_size, ATOL, RTOL, &where) > 1.0) {
            fprintf(stderr, "dbias (mask %d) differs at %ld: %g vs %g\n", mask, where,
                    (double)db[where], (double)eb[where]);
            failures++;
        }
        if (mask == 7) { /* keep the full result for the reproducibility check */
            memcpy(first_dx, dx, x_size * sizeof *dx);
            memcpy(first_dw, dw, w_size * sizeof *dw);
        }
    }
    /* the same call again gives the same bits */
    memcpy(dx, init_dx, x_size * sizeof *dx);
    memcpy(dw, init_dw, w_size * sizeof *dw);
    snn_conv2d_backward_cpu(dx, dw, NULL, dout, x, w, d, workspace);
    if (memcmp(dx, first_dx, x_size * sizeof *dx) || memcmp(dw, first_dw, w_size * sizeof *dw)) {
        fprintf(stderr, "backward is not reproducible\n");
        failures++;
    }

    if (failures)
        fprintf(stderr, "  shape N %d C_in %d H %d W %d C_out %d K %dx%d stride %d pad %d, "
                "%d threads\n", d->N, d->C_in, d->H, d->W, d->C_out, d->KH, d->KW, d->stride,
                d->pad, snn_get_num_threads());

    free_floats(first_dx, x_size);
    free_floats(first_dw, w_size);
    free_floats(dx, x_size);
    free_floats(dw, w_size);
    free_floats(db, b_size);
    free_floats(want_dx, x_size);
    free_floats(want_dw, w_size);
    free_floats(want_db, b_size);
    free_floats(init_dx, x_size);
    free_floats(init_dw, w_size);
    free_floats(init_db, b_size);
    snn_free(workspace, ws ? ws : 1, SNN_CPU);
    free_floats(x, x_size);
    free_floats(w, w_size);
    free_floats(bias, b_size);
    free_floats(dout, o_size);
    free_floats(out, o_size);
    free_floats(want, o_size);
    return failures;
}

static const int shapes[][9] = {
    /* N, C_in, H, W, C_out, KH, KW, stride, pad */
    {2, 3, 7, 7, 4, 3, 3, 1, 1},      /* 3x3 same padding */
    {3, 2, 8, 6, 5, 3, 3, 2, 1},      /* stride 2, non-square input */
    {2, 3, 9, 9, 4, 3, 3, 2, 0},      /* stride 2, no padding */
    {2, 4, 5, 5, 3, 1, 1, 1, 0},      /* 1x1 stride 1: no im2col (P < 128 groups 2 images) */
    {3, 6, 12, 12, 5, 1, 1, 1, 0},    /* 1x1 stride 1, P = 144: the direct path */
    {2, 4, 6, 6, 3, 1, 1, 2, 0},      /* 1x1 stride 2 (ResNet shortcut) */
    {1, 1, 4, 4, 1, 3, 3, 1, 0},      /* one channel, one image */
    {2, 2, 7, 7, 3, 5, 5, 1, 2},      /* 5x5, pad 2 */
    {2, 3, 8, 7, 2, 3, 1, 1, 1},      /* 3x1 kernel */
    {2, 2, 10, 10, 3, 3, 3, 3, 1},    /* stride 3 */
    {17, 8, 4, 4, 16, 3, 3, 1, 1},    /* 4x4 output: groups of 16 images, last group of 1 */
    {33, 4, 8, 8, 6, 3, 3, 2, 1},     /* 4x4 output from stride 2 */
    {5, 16, 8, 8, 24, 3, 3, 1, 1},    /* 8x8 output: groups of 4 images */
    {4, 32, 14, 14, 64, 3, 3, 1, 1},  /* Fashion-MNIST second conv (smaller batch) */
    {3, 1, 28, 28, 32, 3, 3, 1, 1},   /* Fashion-MNIST first conv */
    {2, 64, 8, 8, 128, 1, 1, 2, 0},   /* ResNet downsampling shortcut */
};

static void run_shapes(int threads)
{
    snn_set_num_threads(threads);
    snn_rng rng;
    snn_rng_seed(&rng, 42 + (uint64_t)threads);
    int failures = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int *v = shapes[s];
        snn_conv2d_dims d = make_dims(v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8]);
        failures += check_shape(&d, &rng);
    }
    CHECK(failures == 0);
}

static void test_shapes_one_thread(void) { run_shapes(1); }
static void test_shapes_two_threads(void) { run_shapes(2); }

/* With more threads than groups (one image), the threaded SGEMM does the work. */
static void test_single_image_threaded_gemm(void)
{
    snn_set_num_threads(2);
    snn_rng rng;
    snn_rng_seed(&rng, 3);
    snn_conv2d_dims d = make_dims(1, 64, 16, 16, 64, 3, 3, 1, 1);
    CHECK(check_shape(&d, &rng) == 0);
}

int main(void)
{
    int threads = snn_get_num_threads();
    RUN(test_hand_case);
    RUN(test_shapes_one_thread);
    RUN(test_shapes_two_threads);
    RUN(test_single_image_threaded_gemm);
    snn_set_num_threads(threads);
    return test_finish();
}
