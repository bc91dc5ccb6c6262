/*
 * test_batchnorm_sync.c - the batch-norm kernels cut apart for sync-BN (kernels/cpu/batchnorm.c,
 * kernels/kernels.h "across data-parallel ranks"), on the CPU:
 *   - with one rank the pieces give the fused kernels' bits (forward, running statistics,
 *     backward), also with a mean far from zero;
 *   - a batch split between two "ranks" of unequal size (stats merged, sums added, as distributed/
 *     does with an all-gather and an all-reduce) gives the whole batch's results;
 *   - snn_batchnorm2d through autograd with a one-rank sync set equals it without.
 *
 *     ctest --test-dir build -R batchnorm_sync --output-on-failure
 */
#include <string.h>

#include "autograd/autograd.h"
#include "tensor/error.h"
#include "kernels/cpu/kernels_cpu.h"
#include "test.h"

static float *falloc(int64_t n)
{
    float *p = snn_alloc((size_t)n * sizeof *p, SNN_CPU);
    SNN_ASSERT(p);
    memset(p, 0, (size_t)n * sizeof *p);
    return p;
}
static void ffree(float *p, int64_t n) { snn_free(p, (size_t)n * sizeof *p, SNN_CPU); }
static double *dalloc(int64_t n)
{
    double *p = snn_alloc((size_t)n * sizeof *p, SNN_CPU);
    SNN_ASSERT(p);
    memset(p, 0, (size_t)n * sizeof *p);
    return p;
}
static void dfree(double *p, int64_t n) { snn_free(p, (size_t)n * sizeof *p, SNN_CPU); }

static void fill_normal(float *x, int64_t n, snn_rng *rng, float mean, float std)
{
    for (int64_t i = 0; i < n; i++) x[i] = mean + std * snn_rng_normal(rng);
}

/* One rank: stats -> merge (R = 1) -> normalise, and sums -> apply with global = local, must
 * equal the fused forward and backward bit for bit. */
static void check_one_rank(int N, int C, int HW, float mean, float std)
{
    snn_rng rng;
    snn_rng_seed(&rng, (uint64_t)(N * 131 + C * 7 + HW));
    const int64_t n = (int64_t)N * C * HW;
    float *x = falloc(n), *dout = falloc(n), *gamma = falloc(C), *beta = falloc(C);
    fill_normal(x, n, &rng, mean, std);
    fill_normal(dout, n, &rng, 0.0f, 1.0f);
    fill_normal(gamma, C, &rng, 1.0f, 0.3f);
    fill_normal(beta, C, &rng, 0.0f, 0.3f);
    float *y1 = falloc(n), *y2 = falloc(n);
    float *m1 = falloc(C), *s1 = falloc(C), *m2 = falloc(C), *s2 = falloc(C);
    float *rm1 = falloc(C), *rv1 = falloc(C), *rm2 = falloc(C), *rv2 = falloc(C);
    for (int c = 0; c < C; c++) rm1[c] = rm2[c] = 0.1f * (float)c, rv1[c] = rv2[c] = 1.0f + 0.05f * (float)c;
    double *stats = dalloc(3 * C), *merged = dalloc(3 * C), *sums = dalloc(3 * C);

    snn_batchnorm_forward_train_cpu(y1, m1, s1, rm1, rv1, x, gamma, beta, N, C, HW, 0.1f, 1e-5f);
    snn_batchnorm_stats_cpu(stats, x, NULL, N, C, HW);
    snn_batchnorm_stats_merge_cpu(merged, m2, s2, rm2, rv2, stats, 1, C, 0.1f, 1e-5f);
    snn_batchnorm_normalise_cpu(y2, x, merged, s2, gamma, beta, N, C, HW);
    CHECK(test_same_bits(y1, y2, n));
    CHECK(test_same_bits(m1, m2, C) && test_same_bits(s1, s2, C));
    CHECK(test_same_bits(rm1, rm2, C) && test_same_bits(rv1, rv2, C));
    for (int c = 0; c < C; c++) CHECK(merged[3 * c] == (double)N * HW);

    float *dx1 = falloc(n), *dx2 = falloc(n), *dg1 = falloc(C), *dg2 = falloc(C);
    float *db1 = falloc(C), *db2 = falloc(C);
    snn_batchnorm_backward_cpu(dx1, dg1, db1, dout, x, gamma, m1, s1, N, C, HW);
    snn_batchnorm_backward_sums_cpu(sums, dout, x, m2, N, C, HW);
    snn_batchnorm_backward_apply_cpu(dx2, dg2, db2, dout, x, gamma, m2, s2, sums, sums, N, C, HW);
    CHECK(test_same_bits(dx1, dx2, n));
    CHECK(test_same_bits(dg1, dg2, C) && test_same_bits(db1, db2, C));

    float *bufs[] = {x, dout, y1, y2, dx1, dx2};
    for (int i = 0; i < 6; i++) ffree(bufs[i], n);
    float *cbufs[] = {gamma, beta, m1, s1, m2, s2, rm1, rv1, rm2, rv2, dg1, dg2, db1, db2};
    for (int i = 0; i < 14; i++) ffree(cbufs[i], C);
    dfree(stats, 3 * C);
    dfree(merged, 3 * C);
    dfree(sums, 3 * C);
}

static void test_one_rank_is_the_fused_kernel(void)
{
    check_one_rank(4, 3, 25, 0.0f, 1.0f);
    check_one_rank(7, 5, 1, 2.0f, 0.5f);
    check_one_rank(3, 2, 49, 1000.0f, 0.01f); /* |mean| >> std: the head/tail split matters */
}

/* Two ranks with N0 and N1 samples: the merged statistics and the summed backward sums give
 * the whole batch's forward and backward (up to the order of the sums). */
static void test_two_ranks_are_the_whole_batch(void)
{
    const int N0 = 3, N1 = 5, N = N0 + N1, C = 4, HW = 9;
    const int64_t n = (int64_t)N * C * HW, n0 = (int64_t)N0 * C * HW;
    snn_rng rng;
    snn_rng_seed(&rng, 99);
    float *x = falloc(n), *dout = falloc(n), *gamma = falloc(C), *beta = falloc(C);
    fill_normal(x, n, &rng, 3.0f, 2.0f);
    fill_normal(dout, n, &rng, 0.0f, 1.0f);
    fill_normal(gamma, C, &rng, 1.0f, 0.3f);
    fill_normal(beta, C, &rng, 0.0f, 0.3f);

    /* the whole batch, fused */
    float *y = falloc(n), *mean = falloc(C), *invstd = falloc(C), *rm = falloc(C), *rv = falloc(C);
    float *dx = falloc(n), *dg = falloc(C), *db = falloc(C);
    for (int c = 0; c < C; c++) rv[c] = 1.0f;
    snn_batchnorm_forward_train_cpu(y, mean, invstd, rm, rv, x, gamma, beta, N, C, HW, 0.1f, 1e-5f);
    snn_batchnorm_backward_cpu(dx, dg, db, dout, x, gamma, mean, invstd, N, C, HW);

    /* two ranks: rows [0, N0) and [N0, N) */
    const int Nr[2] = {N0, N1};
    const int64_t off[2] = {0, n0};
    double *all = dalloc(2 * 3 * C), *merged = dalloc(3 * C);
    double *local[2] = {dalloc(3 * C), dalloc(3 * C)}, *global = dalloc(3 * C);
    float *yr = falloc(n), *dxr = falloc(n), *dgr = falloc(C), *dbr = falloc(C);
    float *m[2] = {falloc(C), falloc(C)}, *s[2] = {falloc(C), falloc(C)};
    float *rmr[2] = {falloc(C), falloc(C)}, *rvr[2] = {falloc(C), falloc(C)};
    for (int r = 0; r < 2; r++)
        snn_batchnorm_stats_cpu(all + r * 3 * C, x + off[r], NULL, Nr[r], C, HW);
    for (int r = 0; r < 2; r++) { /* every rank merges the same gathered stats */
        for (int c = 0; c < C; c++) rvr[r][c] = 1.0f;
        snn_batchnorm_stats_merge_cpu(merged, m[r], s[r], rmr[r], rvr[r], all, 2, C, 0.1f, 1e-5f);
        snn_batchnorm_normalise_cpu(yr + off[r], x + off[r], merged, s[r], gamma, beta, Nr[r], C, HW);
        snn_batchnorm_backward_sums_cpu(local[r], dout + off[r], x + off[r], m[r], Nr[r], C, HW);
    }
    CHECK(test_same_bits(m[0], m[1], C) && test_same_bits(s[0], s[1], C) && test_same_bits(rvr[0], rvr[1], C));
    for (int i = 0; i < 3 * C; i++) global[i] = local[0][i] + local[1][i]; /* the all-reduce */
    for (int r = 0; r < 2; r++)
        snn_batchnorm_backward_apply_cpu(dxr + off[r], dgr, dbr, dout + off[r], x + off[r], gamma,
                                         m[r], s[r], local[r], global, Nr[r], C, HW);
    CHECK_ALL_CLOSE(m[0], mean, C, 1e-6, 1e-6);
    CHECK_ALL_CLOSE(s[0], invstd, C, 1e-6, 1e-6);
    CHECK_ALL_CLOSE(rmr[0], rm, C, 1e-6, 1e-6);
    CHECK_ALL_CLOSE(rvr[0], rv, C, 1e-6, 1e-6);
    CHECK_ALL_CLOSE(yr, y, n, 1e-5, 1e-5);
    CHECK_ALL_CLOSE(dxr, dx, n, 1e-5, 1e-5);
    CHECK_ALL_CLOSE(dgr, dg, C, 1e-5, 1e-5); /* the ranks' shares added, as the gradient all-reduce does */
    CHECK_ALL_CLOSE(dbr, db, C, 1e-5, 1e-5);
    for (int c = 0; c < C; c++) CHECK(global[3 * c + 2] == (double)N * HW);

    float *nb[] = {x, dout, y, dx, yr, dxr};
    for (int i = 0; i < 6; i++) ffree(nb[i], n);
    float *cb[] = {gamma, beta, mean, invstd, rm, rv, dg, db, dgr, dbr, m[0], m[1], s[0], s[1],
                   rmr[0], rmr[1], rvr[0], rvr[1]};
    for (int i = 0; i < 18; i++) ffree(cb[i], C);
    dfree(all, 6 * C);
    dfree(merged, 3 * C);
    dfree(local[0], 3 * C);
    dfree(local[1], 3 * C);
    dfree(global, 3 * C);
}

/* A rank with no values (count 0) is skipped by the merge. */
static void test_merge_skips_empty_ranks(void)
{
    const int C = 2;
    double stats[3 * 3 * 2] = {0, 0, 0, 0, 0, 0,           /* rank 0: nothing */
                               4, 1.0, 2.0, 4, -1.0, 8.0,  /* rank 1 */
                               0, 0, 0, 0, 0, 0};          /* rank 2: nothing */
    double merged[6];
    float mean[2], invstd[2];
    snn_batchnorm_stats_merge_cpu(merged, mean, invstd, NULL, NULL, stats, 3, C, 0.1f, 1e-5f);
    CHECK(merged[0] == 4 && merged[1] == 1.0 && merged[2] == 2.0);
    CHECK(merged[3] == 4 && merged[4] == -1.0 && merged[5] == 8.0);
    CHECK_CLOSE(invstd[0], 1.0 / sqrt(0.5 + 1e-5), 1e-6, 1e-6);
}

/* ---- through autograd: a one-rank sync is the plain batch-norm -------------------------------- */

static snn_status one_gather(void *ctx, double *recv, const double *send, int64_t n)
{
    (void)ctx;
    memcpy(recv, send, (size_t)n * sizeof *recv);
    return SNN_OK;
}
static snn_status one_reduce(void *ctx, double *buf, int64_t n)
{
    (void)ctx;
    (void)buf;
    (void)n;
    return SNN_OK;
}
static snn_status failing_reduce(void *ctx, double *buf, int64_t n)
{
    (void)ctx;
    (void)buf;
    (void)n;
    return snn_error(SNN_ERR_IO, "rank 1 closed its connection");
}

static void run_bn(bool synced, float *y_out, float *dgamma_out, float *dx_out, snn_status *st)
{
    snn_rng rng;
    snn_rng_seed(&rng, 5);
    const int N = 6, C = 3, H = 4, W = 4;
    snn_tensor *gamma = snn_tensor_new(SNN_SHAPE(C), SNN_CPU), *beta = snn_tensor_new(SNN_SHAPE(C), SNN_CPU);
    snn_tensor *rm = snn_tensor_new(SNN_SHAPE(C), SNN_CPU), *rv = snn_tensor_new(SNN_SHAPE(C), SNN_CPU);
    snn_tensor_fill(gamma, 1.5f);
    snn_tensor_fill(rv, 1.0f);
    gamma->requires_grad = beta->requires_grad = true;
    snn_batchnorm_sync one = {NULL, 1, one_gather, synced ? one_reduce : failing_reduce};
    snn_batchnorm_set_sync(synced || st ? &one : NULL);
    snn_step_begin();
    snn_tensor *x = snn_empty(SNN_SHAPE(N, C, H, W), SNN_CPU);
    fill_normal(x->data, x->numel, &rng, 0.5f, 2.0f);
    x->requires_grad = true;
    snn_tensor *y = snn_batchnorm2d(x, gamma, beta, rm, rv, true, 0.1f, 1e-5f);
    snn_tensor *w = snn_empty(y->shape, SNN_CPU);
    fill_normal(w->data, w->numel, &rng, 0.0f, 1.0f);
    snn_status s = snn_backward(snn_sum_all(snn_mul(y, w)));
    if (st) *st = s;
    if (y_out) memcpy(y_out, y->data, (size_t)y->numel * sizeof(float));
    if (dx_out && x->grad) memcpy(dx_out, x->grad->data, (size_t)x->numel * sizeof(float));
    if (dgamma_out && gamma->grad) memcpy(dgamma_out, gamma->grad->data, (size_t)C * sizeof(float));
    snn_step_end();
    snn_batchnorm_set_sync(NULL);
    snn_tensor_free(gamma);
    snn_tensor_free(beta);
    snn_tensor_free(rm);
    snn_tensor_free(rv);
}

static void test_autograd_sync(void)
{
    enum { NUMEL = 6 * 3 * 16 };
    static float y1[NUMEL], y2[NUMEL], dx1[NUMEL], dx2[NUMEL];
    float dg1[3], dg2[3];
    run_bn(false, y1, dg1, dx1, NULL);
    run_bn(true, y2, dg2, dx2, NULL);
    CHECK(test_same_bits(y1, y2, NUMEL));
    CHECK(test_same_bits(dx1, dx2, NUMEL));
    CHECK(test_same_bits(dg1, dg2, 3));
    /* a collective that fails in the backward fails snn_backward with its message */
    snn_status st = SNN_OK;
    run_bn(false, NULL, NULL, NULL, &st);
    CHECK(st == SNN_ERR_IO);
    CHECK(strstr(snn_last_error(), "batchnorm") && strstr(snn_last_error(), "rank 1 closed"));
    snn_clear_error();
}

int main(void)
{
    RUN(test_one_rank_is_the_fused_kernel);
    RUN(test_two_ranks_are_the_whole_batch);
    RUN(test_merge_skips_empty_ranks);
    RUN(test_autograd_sync);
    return test_finish();
}
