/*
 * test_cuda_backend_ops.c - the parity harness (backend_ops.h) on the CUDA tables,
 * snn_kernels_cuda and snn_neuron_kernels_cuda (kernels/cuda/), against the reference tables
 * (kernels/ref/) on the host: every entry in fp32, and the entries that read the precision
 * (GEMM and the convolutions) in TF32 and BF16 too, each convolution on every conv path that
 * takes its shape (forced with snn_cuda_set_conv_path: im2col + cuBLAS, the NCHW implicit GEMM,
 * the channels-last kernels). The fast CPU table has its own program, test_backend_ops.c.
 *
 * Modes and tolerances (BO_MMA outputs; the other checks are the same in every mode,
 * backend_ops_compare.h):
 *   fp32          every case; GEMM and conv as sums in another order (1e-5 of the largest
 *                 output + 1e-5 relative), as on the CPU;
 *   tf32 igemm,   the implicit GEMMs round x, the weight and dout to TF32 themselves (cvt.rna:
 *   tf32 nhwc     to nearest, ties away); the reference runs on operands rounded the same way,
 *                 so only the order of the fp32 sums differs: 5e-5 of the largest output;
 *   bf16 <path>   the convolutions on every path round their operands to bf16 (to nearest
 *                 even): the same, on bf16-rounded operands;
 *   tf32 im2col   cuBLAS's TF32 rounding is its own (it is not cvt.rna: measured 3e-4 of the
 *                 largest output from the rna-rounded reference): the unrounded reference at
 *                 TF32's own tolerance, 2e-3 of the largest output (10 mantissa bits: 2^-11
 *                 relative per operand, over K terms of random sign); the GEMM in TF32 too;
 *   GEMM in BF16  the linear layers hand cuBLAS fp32 operands (CUBLAS_COMPUTE_32F_FAST_16BF,
 *                 kernels/cuda/gemm.cu), rounded as cuBLAS chooses: the unrounded reference at
 *                 bf16's tolerance, 1e-2 of the largest output (8 mantissa bits).
 * dbias is never rounded (a plain sum of dout): its reference always takes the fp32 dout.
 * conv2d_backward_bits declines (returns false, touching nothing) on the implicit-GEMM path;
 * those rows read "declined" and check that nothing was written.
 *
 * Without a GPU (or in a build without CUDA) it exits 77, which ctest reports as skipped.
 * Run on the GPU machine:
 *     ctest --test-dir build -R '^cuda_backend_ops$' --output-on-failure
 *     SNN_TEST_OP=conv2d SNN_TEST_MODE=bf16 build/bin/test_cuda_backend_ops   (a subset)
 */
#include "backend_ops.h"
#ifdef SNN_WITH_CUDA
#include "kernels/cuda/kernels_cuda.h" /* snn_conv2d_nhwc_supports, snn_conv2d_path_cuda */
#include "tensor/cuda_options.h"       /* snn_conv_path, snn_cuda_set_conv_path */
#define PATH_AUTO SNN_CONV_PATH_AUTO
#define PATH_IGEMM SNN_CONV_PATH_IGEMM
#define PATH_IM2COL SNN_CONV_PATH_IM2COL
#define PATH_NHWC SNN_CONV_PATH_NHWC
#else
enum { PATH_AUTO, PATH_IGEMM, PATH_IM2COL, PATH_NHWC };
#endif

#define FP32_TOL {0.0, 1e-5, 1e-5}
#define ROUNDED_TOL {0.0, 5e-5, 1e-5}
#define TF32_TOL {0.0, 2e-3, 0.0}
#define BF16_TOL {0.0, 1e-2, 0.0}

/* name, precision, conv path, conv only, rounding {GEMM, conv}, tolerance {GEMM, conv} */
static const bo_mode cuda_modes[] = {
    {"fp32", SNN_PRECISION_FP32, PATH_AUTO, false, {BO_ROUND_NONE, BO_ROUND_NONE},
     {FP32_TOL, FP32_TOL}},
    {"tf32 im2col", SNN_PRECISION_TF32, PATH_IM2COL, false, {BO_ROUND_NONE, BO_ROUND_NONE},
     {TF32_TOL, TF32_TOL}},
    {"tf32 igemm", SNN_PRECISION_TF32, PATH_IGEMM, true, {BO_ROUND_NONE, BO_ROUND_TF32},
     {TF32_TOL, ROUNDED_TOL}},
    {"tf32 nhwc", SNN_PRECISION_TF32, PATH_NHWC, true, {BO_ROUND_NONE, BO_ROUND_TF32},
     {TF32_TOL, ROUNDED_TOL}},
    {"bf16 im2col", SNN_PRECISION_BF16, PATH_IM2COL, false, {BO_ROUND_NONE, BO_ROUND_BF16},
     {BF16_TOL, ROUNDED_TOL}},
    {"bf16 igemm", SNN_PRECISION_BF16, PATH_IGEMM, true, {BO_ROUND_NONE, BO_ROUND_BF16},
     {BF16_TOL, ROUNDED_TOL}},
    {"bf16 nhwc", SNN_PRECISION_BF16, PATH_NHWC, true, {BO_ROUND_NONE, BO_ROUND_BF16},
     {BF16_TOL, ROUNDED_TOL}},
};

static void set_mode(const bo_mode *m)
{
    SNN_ASSERT(snn_set_precision(m->precision) == SNN_OK);
#ifdef SNN_WITH_CUDA
    snn_cuda_set_conv_path((snn_conv_path)m->conv_path);
#endif
}

/* A forced path runs every conv, except the channels-last one, which takes only its shapes
 * (strides 1-4, channel counts that are multiples of 32); under any other a conv would run
 * on the automatic path, already covered. After set_mode, the path taken must be the one
 * forced: a case on a path it did not take would test nothing new. */
static bool takes(const bo_mode *m, const bo_case *c)
{
#ifdef SNN_WITH_CUDA
    if (!c->conv || m->precision == SNN_PRECISION_FP32) return true;
    if (m->conv_path == PATH_NHWC && !snn_conv2d_nhwc_supports(bo_conv_of(c))) return false;
    set_mode(m);
    const bool taken = snn_conv2d_path_cuda(bo_conv_of(c)) == m->conv_path;
    set_mode(&cuda_modes[0]);
    test_checks++;
    if (!taken) {
        test_failures++;
        printf("FAIL: %s %s: mode %s does not take the path it forces\n", c->op->name, c->label,
               m->name);
    }
    return taken;
#else
    (void)m, (void)c;
    return true;
#endif
}

int main(void)
{
    test_require_cuda();
    const snn_kernels *k = snn_kernels_for(SNN_CUDA);
    const snn_neuron_kernels *nk = snn_neuron_kernels_for(SNN_CUDA);
    if (!k || !nk) {
        fprintf(stderr, "no CUDA kernel table: %s\n", snn_last_error());
        return EXIT_FAILURE;
    }
    const bo_backend cuda = {"cuda", k, nk, SNN_CUDA, cuda_modes,
                             (int)(sizeof cuda_modes / sizeof cuda_modes[0]), set_mode, takes,
                             true};
    return bo_main(&cuda);
}
