/*
 * conv_path.cu - the one place that decides which kernels run a CUDA convolution. Three paths
 * compute the same conv (kernels/kernels.h, conv2d entries; reference: kernels/ref/conv2d.c):
 *
 *   IM2COL  the column matrix and cuBLAS (conv2d.cu), in fp32, TF32 or BF16 arithmetic;
 *   IGEMM   the implicit GEMM on NCHW tensors, mma.sync on tensor cores (conv2d_igemm.cu);
 *   NHWC    the implicit GEMM on channels-last copies, 16-byte loads and ldmatrix
 *           (conv2d_nhwc.cu; channel counts that are multiples of 32, strides 1-4).
 *
 * The rule, for a conv of dims d under the process-wide precision and conv path
 * (tensor/cuda_options.h):
 *
 *   fp32                       -> IM2COL (the bit-reproducible default, tested against the CPU)
 *   path forced IGEMM / IM2COL -> that path, on any shape
 *   NHWC takes d and (forced NHWC, or nhwc_pays)  -> NHWC
 *   igemm_pays                 -> IGEMM
 *   otherwise                  -> IM2COL
 *
 * Each test below is a threshold from measurements of every ResNet-18 and Fashion-MNIST CNN
 * conv shape on each path and precision (bench_conv2d_cuda, 256 images); the tables and the
 * device they ran on are in docs/benchmarks.md, "Conv paths". bench_conv2d_cuda's decision
 * check prints, per layer, the measured winner beside the path this file picks: a mismatch where
 * one path is clearly faster is the cue to change a threshold here.
 *
 * The choice is a pure function of the dims and the options, so the workspace size
 * (snn_conv2d_workspace_bytes_cuda) and both passes of one conv always agree on the path.
 * Test: tests/test_cuda_igemm.c (every path forced, and AUTO: the path taken is the one
 * snn_conv2d_path_cuda reports), tests/test_cuda_spike_pack.c (the weight gradient from bits on
 * each path).
 */
#include <stdint.h>

#include "kernels/cuda/cuda_common.cuh"
#include "tensor/cuda_options.h"
#include "kernels/cuda/kernels_cuda.h"

/* ==== The NCHW implicit GEMM (conv2d_igemm.cu) against im2col + cuBLAS ====================
 * Both in the same precision. The kernel wins only on full-resolution planes (ResNet-18's
 * 32x32 layer1), where im2col's column matrix is nine times the activation and moving it costs
 * more than cuBLAS's tuned tiles gain. On 16x16 and smaller planes cuBLAS wins by 1.3-3x; at
 * stride 2 this kernel's dgrad also multiplies the zeros of the dilated window (4x the work);
 * with 1 or 3 input channels most of each 32-long slice of the reduction is padding; and a
 * batch too small to give every SM a tile (inference at batch 1) leaves the GPU idle.
 *
 * The BF16 row is the TF32 rule, measured again on bf16 operands: the kernel still wins only on
 * the 32x32 planes, and the stem (3 channels) is a tie either way. The channels-last kernel
 * (nhwc_pays below) comes first, so these rows now decide only the full-resolution shapes whose
 * channels are not multiples of 32. To send every BF16 conv to cuBLAS, set min_plane to
 * INT32_MAX and make nhwc_pays false. Measured: docs/benchmarks.md, "Conv paths". */
typedef struct igemm_rule {
    int64_t min_plane;     /* H_out W_out at least this (full-resolution planes) */
    int min_channels;      /* C_in and C_out at least this */
    int64_t min_positions; /* N H_out W_out at least this: a tile for every SM */
} igemm_rule;

static igemm_rule igemm_rule_for(snn_precision p)
{
    /* 128 * 132: a 128-position tile for each of the 132 SMs of an H100 */
    const igemm_rule tf32 = {1024, 16, 128 * 132};
    const igemm_rule bf16 = {1024, 16, 128 * 132};
    const igemm_rule never = {INT32_MAX, INT32_MAX, INT64_MAX};
    return p == SNN_PRECISION_TF32 ? tf32 : p == SNN_PRECISION_BF16 ? bf16 : never;
}

/* Whether the implicit-GEMM kernel beats im2col + cuBLAS (same precision) on these dims:
 * stride 1 and a real window (KH KW > 1) always, the table's thresholds for the rest. */
static bool igemm_pays(const snn_conv2d_dims *d, snn_precision p)
{
    const igemm_rule r = igemm_rule_for(p);
    const int64_t plane = (int64_t)d->H_out * d->W_out;
    return d->stride == 1 && d->KH * d->KW > 1 && d->C_in >= r.min_channels &&
           d->C_out >= r.min_channels && plane >= r.min_plane &&
           (int64_t)d->N * plane >= r.min_positions;
}

/* ==== The channels-last kernel (conv2d_nhwc.cu) against the other two =====================
 * On a shape it takes. It wins on planes down to 8x8 in both precisions, by 1.5-2.4x over the
 * best older path on the full- and half-resolution planes; at 4x4 cuBLAS's side-by-side product
 * (conv2d.cu) is faster, because the weight gradient's tile grid is thin there. Strided, it
 * wins in BF16 down to 8x8 outputs and in TF32 on 16x16 outputs; at 8x8 TF32 is a tie, so TF32
 * keeps it to planes of 256 positions and up. Below 64 tiles of 128 positions (inference at
 * batch 1: 4 images) it leaves the GPU idle, as the NCHW kernel does, and the batch-1 forward
 * ran twice as long when it was taken there. Measured: docs/benchmarks.md, "Conv paths". */
static bool nhwc_pays(const snn_conv2d_dims *d, snn_precision p)
{
    const int64_t plane = (int64_t)d->H_out * d->W_out;
    return plane >= 64 && (int64_t)d->N * plane >= 64 * 128 &&
           (p == SNN_PRECISION_BF16 || d->stride == 1 || plane >= 256);
}

/* Which kernels run this conv: im2col + cuBLAS, the NCHW implicit GEMM or the channels-last
 * one. A pure function of the dims and the process-wide options, so the
 * workspace size and both passes agree. */
static snn_conv_path conv_path_for(const snn_conv2d_dims *d)
{
    const snn_precision p = snn_cuda_precision();
    if (p == SNN_PRECISION_FP32) return SNN_CONV_PATH_IM2COL;
    const snn_conv_path forced = snn_cuda_conv_path();
    if (forced == SNN_CONV_PATH_IGEMM || forced == SNN_CONV_PATH_IM2COL) return forced;
    if (snn_conv2d_nhwc_supports(d) && (forced == SNN_CONV_PATH_NHWC || nhwc_pays(d, p)))
        return SNN_CONV_PATH_NHWC;
    return igemm_pays(d, p) ? SNN_CONV_PATH_IGEMM : SNN_CONV_PATH_IM2COL;
}

extern "C" int snn_conv2d_path_cuda(const snn_conv2d_dims *d) { return (int)conv_path_for(d); }
