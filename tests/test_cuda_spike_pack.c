/*
 * test_cuda_spike_pack.c - spikes kept as bits for backward (autograd/spike_pack.c) on the GPU:
 *
 *   1. the CUDA pack / unpack kernels give the words and floats a plain loop gives, at lengths
 *      around a 32-bit word (spike_pack_check.h), so they match the CPU's bit for bit; and the
 *      conv backward that reads x as bits (conv2d_backward_bits) gives conv2d_backward's dx and
 *      dW bit for bit on the im2col and channels-last paths, in fp32, TF32 and BF16, and where
 *      conv2d_dx_over_dout says so (channels-last, the shape kept), with dx written over dout;
 *   2. a training step of ResNet-18, SEW-ResNet-18 and ResNet-50, fused and not, packing on and
 *      off: the same bits everywhere. At T = 2 the fused backward is the one-pass kernel, which
 *      reads a block's shortcut unpacked; at T = 17 it is the scratch path, which also unpacks
 *      its own spikes; and once in BF16, the precision the memory target is for;
 *   3. conv outputs kept as bf16 (spike_pack_check.h, part 3) on the GPU.
 * Without a GPU it exits 77 (skipped). Run: ctest --test-dir build -R cuda_spike_pack
 */
#include "spike_pack_check.h"
#ifdef SNN_WITH_CUDA
#include "tensor/cuda_options.h" /* snn_cuda_set_conv_path */
#include "kernels/cuda/kernels_cuda.h"  /* snn_conv2d_path_cuda */
#endif

static void test_kernels(void)
{
    check_pack_kernels(SNN_CUDA);
    check_fused_bits(SNN_CUDA);
}
/* conv2d_backward_bits against conv2d_backward on the same spikes as floats: dx and dW bit for
 * bit, on every path a conv takes (forced), in each precision; the NCHW implicit GEMM (IGEMM)
 * declines (false) and leaves its outputs alone. */
static void test_conv_backward_bits(void)
{
#ifdef SNN_WITH_CUDA
    const snn_kernels *gpu = snn_kernels_for(SNN_CUDA);
    CHECK(gpu->conv2d_backward_bits != NULL);
    const snn_conv2d_dims shapes[3] = {
        {6, 64, 8, 8, 64, 3, 3, 1, 1, 8, 8},    /* a basic block's 3x3 */
        {5, 32, 9, 9, 64, 3, 3, 2, 1, 5, 5},    /* stride 2, odd planes */
        {4, 64, 8, 8, 128, 1, 1, 2, 0, 4, 4},   /* the downsample's 1x1 stride 2 */
    };
    const snn_precision precisions[3] = {SNN_PRECISION_FP32, SNN_PRECISION_TF32,
                                         SNN_PRECISION_BF16};
    const snn_conv_path paths[3] = {SNN_CONV_PATH_IM2COL, SNN_CONV_PATH_NHWC,
                                    SNN_CONV_PATH_IGEMM};
    snn_rng rng;
    snn_rng_seed(&rng, 23);
    for (int sh = 0; sh < 3; sh++) {
        const snn_conv2d_dims *d = &shapes[sh];
        const int64_t nx = (int64_t)d->N * d->C_in * d->H * d->W;
        const int64_t ny = (int64_t)d->N * d->C_out * d->H_out * d->W_out;
        const int64_t nw = (int64_t)d->C_out * d->C_in * d->KH * d->KW;
        float *x = malloc((size_t)nx * sizeof *x), *dy = malloc((size_t)ny * sizeof *dy);
        float *w = malloc((size_t)nw * sizeof *w);
        for (int64_t i = 0; i < nx; i++) x[i] = snn_rng_uniform(&rng) < 0.3f ? 1.0f : 0.0f;
        for (int64_t i = 0; i < ny; i++) dy[i] = snn_rng_normal(&rng);
        for (int64_t i = 0; i < nw; i++) w[i] = 0.1f * snn_rng_normal(&rng);
        for (int pr = 0; pr < 3; pr++)
            for (int pa = 0; pa < 3; pa++) {
                CHECK_OK(snn_set_precision(precisions[pr]));
                snn_cuda_set_conv_path(paths[pa]);
                CHECK_OK(snn_step_begin());
                float *xd = snn_step_alloc("test", (size_t)nx * 4, SNN_CUDA);
                float *dyd = snn_step_alloc("test", (size_t)ny * 4, SNN_CUDA);
                float *wd = snn_step_alloc("test", (size_t)nw * 4, SNN_CUDA);
                uint32_t *bits = snn_step_alloc("test", (size_t)(nx + 31) / 32 * 4, SNN_CUDA);
                float *grads[2][2]; /* [floats, bits][dx, dw] */
                for (int v = 0; v < 2; v++) {
                    grads[v][0] = snn_step_alloc("test", (size_t)nx * 4, SNN_CUDA);
                    grads[v][1] = snn_step_alloc("test", (size_t)nw * 4, SNN_CUDA);
                }
                float *ws = snn_step_alloc("test", gpu->conv2d_workspace_bytes(d), SNN_CUDA);
                gpu->copy(xd, x, (size_t)nx * 4, SNN_COPY_HOST_TO_DEVICE);
                gpu->copy(dyd, dy, (size_t)ny * 4, SNN_COPY_HOST_TO_DEVICE);
                gpu->copy(wd, w, (size_t)nw * 4, SNN_COPY_HOST_TO_DEVICE);
                gpu->pack_bits(bits, xd, nx);
                for (int v = 0; v < 2; v++) {
                    gpu->fill(grads[v][0], 0.25f, nx); /* accumulated into */
                    gpu->fill(grads[v][1], -0.5f, nw);
                }
                gpu->conv2d_backward(grads[0][0], grads[0][1], NULL, dyd, xd, wd, d, ws);
                const bool took = gpu->conv2d_backward_bits(grads[1][0], grads[1][1], NULL, dyd,
                                                            bits, wd, d, ws);
                float *host[2][2];
                for (int v = 0; v < 2; v++)
                    for (int g = 0; g < 2; g++) {
                        const int64_t n = g ? nw : nx;
                        host[v][g] = malloc((size_t)n * 4);
                        gpu->copy(host[v][g], grads[v][g], (size_t)n * 4,
                                  SNN_COPY_DEVICE_TO_HOST);
                    }
                gpu->synchronize();
                /* the NCHW implicit GEMM (TF32 / BF16 only) declines */
                const bool igemm = snn_conv2d_path_cuda(d) == SNN_CONV_PATH_IGEMM;
                CHECK(took == !igemm);
                if (took) {
                    CHECK(test_same_bits(host[0][0], host[1][0], (long)nx));
                    CHECK(test_same_bits(host[0][1], host[1][1], (long)nw));
                } else { /* declined: untouched */
                    bool untouched = true;
                    for (int64_t i = 0; i < nx; i++) untouched &= host[1][0][i] == 0.25f;
                    for (int64_t i = 0; i < nw; i++) untouched &= host[1][1][i] == -0.5f;
                    CHECK(untouched);
                }
                for (int v = 0; v < 2; v++) free(host[v][0]), free(host[v][1]);
                snn_step_end();
            }
        free(x), free(dy), free(w);
    }
    snn_cuda_set_conv_path(SNN_CONV_PATH_AUTO);
    CHECK_OK(snn_set_precision(SNN_PRECISION_FP32));
#endif
}

/* The training's conv backward on a basic block's 3x3 (x as bits, as the model keeps it) with
 * dx written over dout, against the same call into a zeroed dx of its own: the same values and
 * the same weight gradient, bit for bit. conv2d_dx_over_dout must say yes on the channels-last
 * path in TF32 and BF16, and no on im2col and in fp32 (which always runs im2col). */
static void test_conv_dx_over_dout(void)
{
#ifdef SNN_WITH_CUDA
    const snn_kernels *gpu = snn_kernels_for(SNN_CUDA);
    CHECK(gpu->conv2d_dx_over_dout != NULL);
    const snn_conv2d_dims d = {6, 64, 8, 8, 64, 3, 3, 1, 1, 8, 8};
    const int64_t n = (int64_t)d.N * d.C_in * d.H * d.W, nw = (int64_t)d.C_out * d.C_in * 9;
    float *x = malloc((size_t)n * sizeof *x), *dy = malloc((size_t)n * sizeof *dy);
    float *w = malloc((size_t)nw * sizeof *w);
    snn_rng rng;
    snn_rng_seed(&rng, 29);
    for (int64_t i = 0; i < n; i++) x[i] = snn_rng_uniform(&rng) < 0.3f ? 1.0f : 0.0f;
    for (int64_t i = 0; i < n; i++) dy[i] = snn_rng_normal(&rng);
    for (int64_t i = 0; i < nw; i++) w[i] = 0.1f * snn_rng_normal(&rng);
    const snn_precision precisions[3] = {SNN_PRECISION_FP32, SNN_PRECISION_TF32,
                                         SNN_PRECISION_BF16};
    const snn_conv_path paths[2] = {SNN_CONV_PATH_IM2COL, SNN_CONV_PATH_NHWC};
    for (int pr = 0; pr < 3; pr++)
        for (int pa = 0; pa < 2; pa++) {
            CHECK_OK(snn_set_precision(precisions[pr]));
            snn_cuda_set_conv_path(paths[pa]);
            const bool expected = pr > 0 && pa == 1;
            CHECK(gpu->conv2d_dx_over_dout(&d) == expected);
            if (!expected) continue;
            CHECK_OK(snn_step_begin());
            float *xd = snn_step_alloc("test", (size_t)n * 4, SNN_CUDA);
            float *dyd = snn_step_alloc("test", (size_t)n * 4, SNN_CUDA);
            float *over = snn_step_alloc("test", (size_t)n * 4, SNN_CUDA);
            float *wd = snn_step_alloc("test", (size_t)nw * 4, SNN_CUDA);
            uint32_t *bits = snn_step_alloc("test", (size_t)(n + 31) / 32 * 4, SNN_CUDA);
            float *dx = snn_step_alloc("test", (size_t)n * 4, SNN_CUDA);
            float *dw[2] = {snn_step_alloc("test", (size_t)nw * 4, SNN_CUDA),
                            snn_step_alloc("test", (size_t)nw * 4, SNN_CUDA)};
            float *ws = snn_step_alloc("test", gpu->conv2d_workspace_bytes(&d), SNN_CUDA);
            gpu->copy(xd, x, (size_t)n * 4, SNN_COPY_HOST_TO_DEVICE);
            gpu->copy(dyd, dy, (size_t)n * 4, SNN_COPY_HOST_TO_DEVICE);
            gpu->copy(over, dy, (size_t)n * 4, SNN_COPY_HOST_TO_DEVICE);
            gpu->copy(wd, w, (size_t)nw * 4, SNN_COPY_HOST_TO_DEVICE);
            gpu->pack_bits(bits, xd, n);
            gpu->fill(dx, 0.0f, n);
            gpu->fill(dw[0], -0.5f, nw);
            gpu->fill(dw[1], -0.5f, nw);
            CHECK(gpu->conv2d_backward_bits(dx, dw[0], NULL, dyd, bits, wd, &d, ws));
            CHECK(gpu->conv2d_backward_bits(over, dw[1], NULL, over, bits, wd, &d, ws));
            float *h[4];
            for (int i = 0; i < 4; i++) h[i] = malloc((size_t)(i < 2 ? n : nw) * 4);
            gpu->copy(h[0], dx, (size_t)n * 4, SNN_COPY_DEVICE_TO_HOST);
            gpu->copy(h[1], over, (size_t)n * 4, SNN_COPY_DEVICE_TO_HOST);
            gpu->copy(h[2], dw[0], (size_t)nw * 4, SNN_COPY_DEVICE_TO_HOST);
            gpu->copy(h[3], dw[1], (size_t)nw * 4, SNN_COPY_DEVICE_TO_HOST);
            gpu->synchronize();
            bool same = true; /* 0 + v is v, but -0 + 0 is +0: compare values */
            for (int64_t i = 0; i < n; i++) same &= h[0][i] == h[1][i];
            CHECK(same);
            CHECK(test_same_bits(h[2], h[3], (long)nw));
            for (int i = 0; i < 4; i++) free(h[i]);
            snn_step_end();
        }
    free(x), free(dy), free(w);
    snn_cuda_set_conv_path(SNN_CONV_PATH_AUTO);
    CHECK_OK(snn_set_precision(SNN_PRECISION_FP32));
#endif
}

static void test_models_t2(void) { check_models_packing(SNN_CUDA, 2); }
static void test_models_t17(void) { check_models_packing(SNN_CUDA, 17); }

static void test_models_bf16(void)
{
    CHECK_OK(snn_set_precision(SNN_PRECISION_BF16));
    check_models_packing(SNN_CUDA, 4);
    CHECK_OK(snn_set_precision(SNN_PRECISION_FP32));
}

/* conv outputs kept as bf16 (the option on): in fp32, where the CPU's checks hold, at T = 2
 * (the one-pass fused backward) and T = 17 (the scratch path) */
static void test_bf16_kept(void)
{
    check_bf16_kernels(SNN_CUDA);
    check_bf16_refusals(SNN_CUDA);
    check_models_bf16_kept(SNN_CUDA, 2);
    check_models_bf16_kept(SNN_CUDA, 17);
}

int main(void)
{
    test_require_cuda();
    RUN(test_kernels);
    RUN(test_conv_backward_bits);
    RUN(test_conv_dx_over_dout);
    RUN(test_models_t2);
    RUN(test_models_t17);
    RUN(test_models_bf16);
    RUN(test_bf16_kept);
    return test_finish();
}
