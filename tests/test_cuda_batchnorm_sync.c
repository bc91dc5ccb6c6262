/*
 * test_cuda_batchnorm_sync.c - the CUDA sync-BN batch-norm pieces (kernels/cuda/batchnorm_sync.cu)
 * among themselves, on the GPU: with one rank, stats -> merge -> normalise and
 * backward_sums -> backward_apply give the fused CUDA kernels' bits (forward_train, backward),
 * on shapes with one segment per channel and with many (the reductions' two code paths); and
 * the elementwise passes give the same bits four values at a time and one at a time. Their
 * agreement with the reference kernels (kernels/ref/batchnorm.c) is checked by the parity
 * harness, tests/test_cuda_backend_ops.c. Skipped (exit 77) without a GPU.
 *
 *     ctest --test-dir build -R cuda_batchnorm_sync --output-on-failure
 */
#include "cuda_parity.h"

/* One rank on the GPU: the pieces are the fused kernels, bit for bit. */
static void one_rank_is_fused(int N, int C, int HW, float mean)
{
    char what[160];
    const size_t n = (size_t)N * C * HW, nc = (size_t)C;
    float *x = random_host(n, mean - 2.0f, mean + 2.0f), *dout = random_host(n, -1.0f, 1.0f);
    float *gamma = random_host(nc, 0.5f, 1.5f), *beta = random_host(nc, -0.5f, 0.5f);
    float *rm = random_host(nc, -1.0f, 1.0f), *rv = random_host(nc, 0.5f, 2.0f);
    const float *dx_ = dev_copy(x, n), *ddout = dev_copy(dout, n);
    const float *dgamma_ = dev_copy(gamma, nc), *dbeta_ = dev_copy(beta, nc);
    double *dstats = tracked_alloc(3 * nc * sizeof(double), SNN_CUDA);
    double *dmerged = tracked_alloc(3 * nc * sizeof(double), SNN_CUDA);
    double *dsums = tracked_alloc(3 * nc * sizeof(double), SNN_CUDA);
    float *dy = dev_floats(n), *dmean = dev_floats(nc), *dinvstd = dev_floats(nc);

    float *fy = dev_floats(n), *fmean = dev_floats(nc), *finv = dev_floats(nc);
    float *frm = dev_copy(rm, nc), *frv = dev_copy(rv, nc);
    float *srm = dev_copy(rm, nc), *srv = dev_copy(rv, nc);
    gpu->batchnorm_forward_train(fy, fmean, finv, frm, frv, dx_, dgamma_, dbeta_, N, C, HW, 0.1f,
                                 1e-5f);
    gpu->batchnorm_stats(dstats, dx_, NULL, N, C, HW);
    gpu->batchnorm_stats_merge(dmerged, dmean, dinvstd, srm, srv, dstats, 1, C, 0.1f, 1e-5f);
    gpu->batchnorm_normalise(dy, dx_, dmerged, dinvstd, dgamma_, dbeta_, N, C, HW);
    float *h_fy = host_floats(n), *h_fmean = host_floats(nc), *h_finv = host_floats(nc);
    float *h_frm = host_floats(nc), *h_frv = host_floats(nc);
    download(h_fy, fy, n * sizeof(float));
    download(h_fmean, fmean, nc * sizeof(float));
    download(h_finv, finv, nc * sizeof(float));
    download(h_frm, frm, nc * sizeof(float));
    download(h_frv, frv, nc * sizeof(float));
    snprintf(what, sizeof what, "one rank = fused forward N=%d C=%d HW=%d", N, C, HW);
    expect_exact(what, dy, h_fy, n * sizeof(float));
    expect_exact(what, dmean, h_fmean, nc * sizeof(float));
    expect_exact(what, dinvstd, h_finv, nc * sizeof(float));
    expect_exact(what, srm, h_frm, nc * sizeof(float));
    expect_exact(what, srv, h_frv, nc * sizeof(float));

    float *fdx = dev_floats(n), *fdg = dev_floats(nc), *fdb = dev_floats(nc);
    float *sdx = dev_floats(n), *sdg = dev_floats(nc), *sdb = dev_floats(nc);
    gpu->fill(fdx, 0.0f, (int64_t)n), gpu->fill(sdx, 0.0f, (int64_t)n);
    gpu->fill(fdg, 0.0f, C), gpu->fill(sdg, 0.0f, C), gpu->fill(fdb, 0.0f, C);
    gpu->fill(sdb, 0.0f, C);
    gpu->batchnorm_backward(fdx, fdg, fdb, ddout, dx_, dgamma_, fmean, finv, N, C, HW);
    gpu->batchnorm_backward_sums(dsums, ddout, dx_, dmean, N, C, HW);
    gpu->batchnorm_backward_apply(sdx, sdg, sdb, ddout, dx_, dgamma_, dmean, dinvstd, dsums, dsums,
                                  N, C, HW);
    float *h_fdx = host_floats(n), *h_fdg = host_floats(nc), *h_fdb = host_floats(nc);
    download(h_fdx, fdx, n * sizeof(float));
    download(h_fdg, fdg, nc * sizeof(float));
    download(h_fdb, fdb, nc * sizeof(float));
    snprintf(what, sizeof what, "one rank = fused backward N=%d C=%d HW=%d", N, C, HW);
    expect_exact(what, sdx, h_fdx, n * sizeof(float));
    expect_exact(what, sdg, h_fdg, nc * sizeof(float));
    expect_exact(what, sdb, h_fdb, nc * sizeof(float));
    release_all();
}

static void test_one_rank_is_fused(void)
{
    one_rank_is_fused(4, 3, 25, 0.0f);      /* one segment per channel */
    one_rank_is_fused(2, 5, 1, 3.0f);       /* BatchNorm1d-like, HW = 1 */
    one_rank_is_fused(64, 8, 1024, 0.5f);   /* many segments per channel: partial sums + finish */
    one_rank_is_fused(32, 64, 256, -2.0f);  /* a ResNet-like layer */
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
        gpu->batchnorm_backward(dx[m], dg[m], db[m], dd, dxin, dgamma, mean[m], invstd[m], N, C,
                                HW);
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
    gpu->batchnorm_stats(stats, xa, NULL, N, C, HW);
    gpu->batchnorm_stats_merge(merged, mean[0], invstd[0], drm[0], drv[0], stats, 1, C, 0.1f,
                               1e-5f);
    gpu->batchnorm_normalise(out[0], xa, merged, invstd[0], dgamma, dbeta, N, C, HW);
    gpu->batchnorm_normalise(out[1], xm, merged, invstd[0], dgamma, dbeta, N, C, HW);
    download(h[0], out[0], n * sizeof(float));
    expect_exact("sync-BN normalise: quads = scalar", out[1], h[0], n * sizeof(float));
    release_all();
}

int main(void)
{
    parity_begin();
    RUN(test_one_rank_is_fused);
    RUN(test_quads_same_bits);
    return test_finish();
}
