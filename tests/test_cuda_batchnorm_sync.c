/*
 * test_cuda_batchnorm_sync.c - the CUDA twins of the sync-BN batch-norm pieces
 * (kernels/cuda/batchnorm.cu, end of file) against the CPU reference (kernels/cpu/batchnorm.c), and the
 * one-rank identity on the GPU: stats -> merge -> normalise and sums -> apply give the fused
 * CUDA kernels' bits. Shapes with one segment per channel and with many (the reductions' two
 * code paths). Skipped (exit 77) without a GPU.
 *
 *     ctest --test-dir build -R cuda_batchnorm_sync --output-on-failure
 */
#include "cuda_parity.h"

static double *host_doubles(size_t n) { return tracked_alloc(n * sizeof(double), SNN_CPU); }
static double *dev_doubles(size_t n) { return tracked_alloc(n * sizeof(double), SNN_CUDA); }

/* |got - want| <= tol (|want| + scale) over doubles downloaded from the device */
static void expect_close_f64(const char *what, const double *got_dev, const double *want, size_t n,
                             double tol)
{
    double *got = host_doubles(n);
    download(got, got_dev, n * sizeof *got);
    test_checks++;
    for (size_t i = 0; i < n; i++) {
        double scale = fabs(want[i]) > 1.0 ? fabs(want[i]) : 1.0;
        if (!(fabs(got[i] - want[i]) <= tol * scale)) {
            test_failures++;
            fprintf(stderr, "FAIL %s: [%zu] cuda %.17g vs cpu %.17g\n", what, i, got[i], want[i]);
            return;
        }
    }
}

static void check_shape(int N, int C, int HW, float mean)
{
    char what[160];
    const size_t n = (size_t)N * C * HW;
    float *x = random_host(n, mean - 2.0f, mean + 2.0f), *dout = random_host(n, -1.0f, 1.0f);
    float *gamma = random_host((size_t)C, 0.5f, 1.5f), *beta = random_host((size_t)C, -0.5f, 0.5f);
    float *dx_ = dev_copy(x, n), *ddout = dev_copy(dout, n);
    float *dgamma_ = dev_copy(gamma, (size_t)C), *dbeta_ = dev_copy(beta, (size_t)C);

    /* stats: CPU and CUDA sum in different orders, both in double */
    double *stats = host_doubles(3 * (size_t)C), *dstats = dev_doubles(3 * (size_t)C);
    cpu->batchnorm_stats(stats, x, N, C, HW);
    gpu->batchnorm_stats(dstats, dx_, N, C, HW);
    snprintf(what, sizeof what, "batchnorm_stats N=%d C=%d HW=%d", N, C, HW);
    expect_close_f64(what, dstats, stats, 3 * (size_t)C, 1e-9);

    /* merge of three ranks' stats (the CPU's, shifted): the same double arithmetic */
    const int R = 3;
    double *all = host_doubles((size_t)R * 3 * C);
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) {
            all[((size_t)r * C + c) * 3] = stats[3 * c] * (r + 1);
            all[((size_t)r * C + c) * 3 + 1] = stats[3 * c + 1] + 0.25 * r;
            all[((size_t)r * C + c) * 3 + 2] = stats[3 * c + 2] * (1.0 + r);
        }
    double *dall = dev_doubles((size_t)R * 3 * C);
    upload(dall, all, (size_t)R * 3 * C * sizeof(double));
    double *merged = host_doubles(3 * (size_t)C), *dmerged = dev_doubles(3 * (size_t)C);
    float *mean_c = host_floats((size_t)C), *invstd_c = host_floats((size_t)C);
    float *rm = random_host((size_t)C, -1.0f, 1.0f), *rv = random_host((size_t)C, 0.5f, 2.0f);
    float *dmean = dev_floats((size_t)C), *dinvstd = dev_floats((size_t)C);
    float *drm = dev_copy(rm, (size_t)C), *drv = dev_copy(rv, (size_t)C);
    cpu->batchnorm_stats_merge(merged, mean_c, invstd_c, rm, rv, all, R, C, 0.1f, 1e-5f);
    gpu->batchnorm_stats_merge(dmerged, dmean, dinvstd, drm, drv, dall, R, C, 0.1f, 1e-5f);
    snprintf(what, sizeof what, "batchnorm_stats_merge C=%d", C);
    expect_close_f64(what, dmerged, merged, 3 * (size_t)C, 1e-12);
    expect_close(what, dmean, mean_c, (size_t)C, ATOL, RTOL);
    expect_close(what, dinvstd, invstd_c, (size_t)C, ATOL, RTOL);
    expect_close(what, drm, rm, (size_t)C, ATOL, RTOL);
    expect_close(what, drv, rv, (size_t)C, ATOL, RTOL);

    /* normalise with the merged statistics (both sides from the CPU's merged, uploaded) */
    upload(dmerged, merged, 3 * (size_t)C * sizeof(double));
    upload(dinvstd, invstd_c, (size_t)C * sizeof(float));
    upload(dmean, mean_c, (size_t)C * sizeof(float));
    float *y = host_floats(n), *dy = dev_floats(n);
    cpu->batchnorm_normalise(y, x, merged, invstd_c, gamma, beta, N, C, HW);
    gpu->batchnorm_normalise(dy, dx_, dmerged, dinvstd, dgamma_, dbeta_, N, C, HW);
    snprintf(what, sizeof what, "batchnorm_normalise N=%d C=%d HW=%d", N, C, HW);
    expect_close(what, dy, y, n, ATOL, RTOL);

    /* backward sums, then apply with made-up global sums (another rank's share added) */
    double *sums = host_doubles(3 * (size_t)C), *dsums = dev_doubles(3 * (size_t)C);
    cpu->batchnorm_backward_sums(sums, dout, x, mean_c, N, C, HW);
    gpu->batchnorm_backward_sums(dsums, ddout, dx_, dmean, N, C, HW);
    snprintf(what, sizeof what, "batchnorm_backward_sums N=%d C=%d HW=%d", N, C, HW);
    expect_close_f64(what, dsums, sums, 3 * (size_t)C, 1e-9);
    double *global = host_doubles(3 * (size_t)C), *dglobal = dev_doubles(3 * (size_t)C);
    for (int c = 0; c < C; c++) {
        global[3 * c] = 2.0 * sums[3 * c] + 0.5;
        global[3 * c + 1] = 1.5 * sums[3 * c + 1] - 0.25;
        global[3 * c + 2] = 2.0 * sums[3 * c + 2];
    }
    upload(dsums, sums, 3 * (size_t)C * sizeof(double));
    upload(dglobal, global, 3 * (size_t)C * sizeof(double));
    float *gdx = random_host(n, -1.0f, 1.0f), *gdg = random_host((size_t)C, -1.0f, 1.0f);
    float *gdb = random_host((size_t)C, -1.0f, 1.0f);
    float *dgdx = dev_copy(gdx, n), *dgdg = dev_copy(gdg, (size_t)C), *dgdb = dev_copy(gdb, (size_t)C);
    cpu->batchnorm_backward_apply(gdx, gdg, gdb, dout, x, gamma, mean_c, invstd_c, sums, global,
                                  N, C, HW);
    gpu->batchnorm_backward_apply(dgdx, dgdg, dgdb, ddout, dx_, dgamma_, dmean, dinvstd, dsums,
                                  dglobal, N, C, HW);
    snprintf(what, sizeof what, "batchnorm_backward_apply N=%d C=%d HW=%d", N, C, HW);
    expect_close(what, dgdx, gdx, n, ATOL, RTOL);
    expect_close(what, dgdg, gdg, (size_t)C, ATOL, RTOL);
    expect_close(what, dgdb, gdb, (size_t)C, ATOL, RTOL);

    /* one rank on the GPU: the pieces are the fused kernels, bit for bit */
    float *fy = dev_floats(n), *fmean = dev_floats((size_t)C), *finv = dev_floats((size_t)C);
    float *frm = dev_copy(rm, (size_t)C), *frv = dev_copy(rv, (size_t)C);
    float *srm = dev_copy(rm, (size_t)C), *srv = dev_copy(rv, (size_t)C);
    gpu->batchnorm_forward_train(fy, fmean, finv, frm, frv, dx_, dgamma_, dbeta_, N, C, HW, 0.1f,
                                 1e-5f);
    gpu->batchnorm_stats(dstats, dx_, N, C, HW);
    gpu->batchnorm_stats_merge(dmerged, dmean, dinvstd, srm, srv, dstats, 1, C, 0.1f, 1e-5f);
    gpu->batchnorm_normalise(dy, dx_, dmerged, dinvstd, dgamma_, dbeta_, N, C, HW);
    float *h_fy = host_floats(n), *h_fmean = host_floats((size_t)C), *h_finv = host_floats((size_t)C);
    float *h_frm = host_floats((size_t)C), *h_frv = host_floats((size_t)C);
    download(h_fy, fy, n * sizeof(float));
    download(h_fmean, fmean, (size_t)C * sizeof(float));
    download(h_finv, finv, (size_t)C * sizeof(float));
    download(h_frm, frm, (size_t)C * sizeof(float));
    download(h_frv, frv, (size_t)C * sizeof(float));
    snprintf(what, sizeof what, "one rank = fused forward N=%d C=%d HW=%d", N, C, HW);
    expect_exact(what, dy, h_fy, n * sizeof(float));
    expect_exact(what, dmean, h_fmean, (size_t)C * sizeof(float));
    expect_exact(what, dinvstd, h_finv, (size_t)C * sizeof(float));
    expect_exact(what, srm, h_frm, (size_t)C * sizeof(float));
    expect_exact(what, srv, h_frv, (size_t)C * sizeof(float));

    float *fdx = dev_floats(n), *fdg = dev_floats((size_t)C), *fdb = dev_floats((size_t)C);
    float *sdx = dev_floats(n), *sdg = dev_floats((size_t)C), *sdb = dev_floats((size_t)C);
    gpu->fill(fdx, 0.0f, (int64_t)n), gpu->fill(sdx, 0.0f, (int64_t)n);
    gpu->fill(fdg, 0.0f, C), gpu->fill(sdg, 0.0f, C), gpu->fill(fdb, 0.0f, C), gpu->fill(sdb, 0.0f, C);
    gpu->batchnorm_backward(fdx, fdg, fdb, ddout, dx_, dgamma_, fmean, finv, N, C, HW);
    gpu->batchnorm_backward_sums(dsums, ddout, dx_, dmean, N, C, HW);
    gpu->batchnorm_backward_apply(sdx, sdg, sdb, ddout, dx_, dgamma_, dmean, dinvstd, dsums, dsums,
                                  N, C, HW);
    float *h_fdx = host_floats(n), *h_fdg = host_floats((size_t)C), *h_fdb = host_floats((size_t)C);
    download(h_fdx, fdx, n * sizeof(float));
    download(h_fdg, fdg, (size_t)C * sizeof(float));
    download(h_fdb, fdb, (size_t)C * sizeof(float));
    snprintf(what, sizeof what, "one rank = fused backward N=%d C=%d HW=%d", N, C, HW);
    expect_exact(what, sdx, h_fdx, n * sizeof(float));
    expect_exact(what, sdg, h_fdg, (size_t)C * sizeof(float));
    expect_exact(what, sdb, h_fdb, (size_t)C * sizeof(float));
    release_all();
}

static void test_sync_pieces(void)
{
    check_shape(4, 3, 25, 0.0f);      /* one segment per channel */
    check_shape(2, 5, 1, 3.0f);       /* BatchNorm1d-like, HW = 1 */
    check_shape(64, 8, 1024, 0.5f);   /* many segments per channel: partial sums + finish */
    check_shape(32, 64, 256, -2.0f);  /* a ResNet-like layer */
}

/* A device copy of host h (n floats) one float past a 16-byte boundary: kernels/cuda/batchnorm.cu
 * then takes its scalar kernels instead of the four-at-a-time ones. */
static float *dev_copy_misaligned(const float *h, size_t n)
{
    float *d = dev_floats(n + 1) + 1;
    upload(d, h, n * sizeof(float));
    return d;
}

/* The elementwise passes four values at a time (HW % 4 == 0, 16-byte aligned pointers) and one
 * at a time compute each value alike: the same data at aligned and misaligned addresses give
 * the same bits, for the training forward, the eval forward, the backward and sync-BN's
 * normalise. */
static void test_quads_same_bits(void)
{
    const int N = 6, C = 16, HW = 64;
    const size_t n = (size_t)N * C * HW, nc = (size_t)C;
    float *x = random_host(n, -1.0f, 3.0f), *dout = random_host(n, -1.0f, 1.0f);
    float *dx0 = random_host(n, -1.0f, 1.0f);
    float *gamma = random_host(nc, 0.5f, 1.5f), *beta = random_host(nc, -0.5f, 0.5f);
    float *rm = random_host(nc, -0.5f, 0.5f), *rv = random_host(nc, 0.5f, 2.0f);
    const float *dgamma = dev_copy(gamma, nc), *dbeta = dev_copy(beta, nc);
    float *out[2], *mean[2], *invstd[2], *drm[2], *drv[2], *dx[2], *dg[2], *db[2];
    for (int m = 0; m < 2; m++) { /* 0: aligned, 1: one float past */
        const float *dxin = m ? dev_copy_misaligned(x, n) : dev_copy(x, n);
        const float *dd = m ? dev_copy_misaligned(dout, n) : dev_copy(dout, n);
        out[m] = m ? dev_copy_misaligned(dx0, n) : dev_copy(dx0, n);
        mean[m] = dev_floats(nc), invstd[m] = dev_floats(nc);
        drm[m] = dev_copy(rm, nc), drv[m] = dev_copy(rv, nc);
        gpu->batchnorm_forward_train(out[m], mean[m], invstd[m], drm[m], drv[m], dxin, dgamma,
                                     dbeta, N, C, HW, 0.1f, 1e-5f);
        dx[m] = m ? dev_copy_misaligned(dx0, n) : dev_copy(dx0, n);
        dg[m] = dev_copy(gamma, nc), db[m] = dev_copy(beta, nc);
        gpu->batchnorm_backward(dx[m], dg[m], db[m], dd, dxin, dgamma, mean[m], invstd[m], N, C, HW);
    }
    float *h[2] = {host_floats(n), host_floats(n)};
    download(h[0], out[0], n * sizeof(float));
    expect_exact("training forward: quads = scalar", out[1], h[0], n * sizeof(float));
    download(h[0], dx[0], n * sizeof(float));
    expect_exact("backward dx: quads = scalar", dx[1], h[0], n * sizeof(float));
    for (int m = 0; m < 2; m++) {
        const float *dxin = m ? dev_copy_misaligned(x, n) : dev_copy(x, n);
        gpu->batchnorm_forward_eval(out[m], dxin, dgamma, dbeta, drm[0], drv[0], N, C, HW, 1e-5f);
    }
    download(h[0], out[0], n * sizeof(float));
    expect_exact("eval forward: quads = scalar", out[1], h[0], n * sizeof(float));
    double *stats = (double *)tracked_alloc(3 * nc * sizeof(double), SNN_CUDA);
    double *merged = (double *)tracked_alloc(3 * nc * sizeof(double), SNN_CUDA);
    const float *xa = dev_copy(x, n), *xm = dev_copy_misaligned(x, n);
    gpu->batchnorm_stats(stats, xa, N, C, HW);
    gpu->batchnorm_stats_merge(merged, mean[0], invstd[0], drm[0], drv[0], stats, 1, C, 0.1f, 1e-5f);
    gpu->batchnorm_normalise(out[0], xa, merged, invstd[0], dgamma, dbeta, N, C, HW);
    gpu->batchnorm_normalise(out[1], xm, merged, invstd[0], dgamma, dbeta, N, C, HW);
    download(h[0], out[0], n * sizeof(float));
    expect_exact("sync-BN normalise: quads = scalar", out[1], h[0], n * sizeof(float));
    release_all();
}

int main(void)
{
    (void)expect_norm; /* harness helpers this test has no use for */
    (void)integer_host;
    parity_begin();
    RUN(test_sync_pieces);
    RUN(test_quads_same_bits);
    return test_finish();
}
