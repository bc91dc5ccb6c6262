/*
 * kernels_cuda.h - the CUDA launchers that make up snn_kernels_cuda (internal header).
 *
 * Each launcher has exactly the signature of its table entry in kernels.h, where its semantics
 * are specified, and must agree with the CPU function of the same name with _cpu in place of
 * _cuda (tests/test_cuda_kernels.c checks every one). Pointers are device pointers; every
 * launcher queues its work on the one stream (cuda_common.cuh) and returns without waiting.
 * The file that defines each group is named above it.
 */
#ifndef SNN_KERNELS_CUDA_H
#define SNN_KERNELS_CUDA_H

#include "kernels/kernels.h"

/* A bf16 number as stored (1 sign, 8 exponent and 7 mantissa bits: the top half of an fp32).
 * CUDA code sees cuda_bf16.h's __nv_bfloat16; C code (benches, tests) an opaque 2-byte struct
 * of the same size, so that it can pass device pointers to the bf16 functions below. */
#ifdef __CUDACC__
#include <cuda_bf16.h>
typedef __nv_bfloat16 snn_bf16;
#else
typedef struct snn_bf16 {
    uint16_t bits;
} snn_bf16;
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* backend_cuda.cu: memory */
void *snn_device_alloc_cuda(size_t bytes);
void snn_device_free_cuda(void *p);
void snn_copy_cuda(void *dst, const void *src, size_t bytes, snn_copy_kind kind);
void snn_synchronize_cuda(void);
int snn_memory_info_cuda(size_t *available, size_t *total);

/* elementwise.cu */
void snn_fill_cuda(float *out, float value, int64_t n);
void snn_axpy_cuda(float *y, float alpha, const float *x, int64_t n);
void snn_pack_bits_cuda(uint32_t *bits, const float *x, int64_t n);
void snn_unpack_bits_cuda(float *x, const uint32_t *bits, int64_t n);
void snn_round_bf16_cuda(float *x, uint16_t *bf16_out, int64_t n);
void snn_unpack_bf16_cuda(float *x, const uint16_t *bf16_in, int64_t n);
void snn_lerp_cuda(float *y, const float *x, float weight, int64_t n);
void snn_unary_forward_cuda(snn_unary_op op, float *out, const float *x, float param,
                            int64_t n);
void snn_unary_backward_cuda(snn_unary_op op, float *dx, const float *dout, const float *x,
                             const float *out, float param, int64_t n);
void snn_binary_forward_cuda(snn_binary_op op, float *out, const float *a, const float *b,
                             const snn_broadcast *bc);
void snn_binary_backward_cuda(snn_binary_op op, float *da, float *db, const float *dout,
                              const float *a, const float *b, const snn_broadcast *bc);

/* reduce.cu */
void snn_sum_dim_cuda(float *out, const float *x, int64_t outer, int64_t dim, int64_t inner,
                      float scale);
void snn_expand_dim_cuda(float *out, const float *x, int64_t outer, int64_t dim, int64_t inner,
                         float scale, bool accumulate);
void snn_sumsq_and_finite_cuda(float *out, const float *x, int64_t n);
void snn_argmax_rows_cuda(float *out, const float *x, int N, int C);

/* transpose.cu */
void snn_transpose01_cuda(float *out, const float *x, int64_t rows, int64_t cols, int64_t inner,
                          bool accumulate);

/* gemm.cu */
void snn_gemm_cuda(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float *A,
                   int lda, const float *B, int ldb, float beta, float *C, int ldc);
/* `batch` independent row-major GEMMs C_i = alpha op(A_i) op(B_i) + beta C_i, where
 * X_i = X + i * stride_x (a stride of 0 shares one matrix across the batch). conv2d uses it. */
void snn_gemm_strided_batched_cuda(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                                   const float *A, int lda, int64_t stride_a, const float *B,
                                   int ldb, int64_t stride_b, float beta, float *C, int ldc,
                                   int64_t stride_c, int batch);
/* The same two with bf16 operands A and B (CUDA_R_16BF), fp32 C, fp32 accumulation
 * (CUBLAS_COMPUTE_32F), whatever the precision setting: conv2d.cu's BF16 path. K >= 1. */
void snn_gemm_bf16_cuda(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                        const snn_bf16 *A, int lda, const snn_bf16 *B, int ldb, float beta,
                        float *C, int ldc);
void snn_gemm_bf16_strided_batched_cuda(bool trans_a, bool trans_b, int M, int N, int K,
                                        float alpha, const snn_bf16 *A, int lda, int64_t stride_a,
                                        const snn_bf16 *B, int ldb, int64_t stride_b, float beta,
                                        float *C, int ldc, int64_t stride_c, int batch);
/* dst[i] = src[i] rounded to bf16 (to nearest, ties to even), n elements. */
void snn_to_bf16_cuda(snn_bf16 *dst, const float *src, int64_t n);

/* bias.cu */
void snn_bias_forward_cuda(float *out, const float *bias, int64_t outer, int64_t channels,
                           int64_t inner);
void snn_bias_backward_cuda(float *dbias, const float *dout, int64_t outer, int64_t channels,
                            int64_t inner);

/* conv2d.cu */
size_t snn_conv2d_workspace_bytes_cuda(const snn_conv2d_dims *d);
void snn_conv2d_forward_cuda(float *out, const float *x, const float *weight, const float *bias,
                             const snn_conv2d_dims *d, float *workspace);
void snn_conv2d_forward_bn_eval_cuda(float *out, const float *x, const float *weight,
                                     const float *bias, const snn_bn_eval *bn,
                                     const snn_conv2d_dims *d, float *workspace);
bool snn_conv2d_backward_bits_cuda(float *dx, float *dweight, float *dbias, const float *dout,
                                   const uint32_t *x_bits, const float *weight,
                                   const snn_conv2d_dims *d, float *workspace);
bool snn_conv2d_dx_over_dout_cuda(const snn_conv2d_dims *d);
bool snn_conv2d_backward_consuming_cuda(float *dx, float *dweight, float *dbias, float *dout,
                                        const snn_bn_dout *bn, const float *x,
                                        const uint32_t *x_bits, const float *weight,
                                        const snn_conv2d_dims *d, float *workspace);
size_t snn_conv2d_backward_consuming_workspace_bytes_cuda(const snn_conv2d_dims *d);
bool snn_conv2d_backward_bn_dout_cuda(float *dx, float *dweight, float *dbias, const float *dX,
                                      const snn_bn_dout *bn, const float *x,
                                      const uint32_t *x_bits, const float *weight,
                                      const snn_conv2d_dims *d, float *workspace);
bool snn_conv2d_forward_bits_cuda(float *out, const uint32_t *x_bits, const float *weight,
                                  const float *bias, const snn_conv2d_dims *d, float *workspace);
bool snn_conv2d_reads_bits_cuda(const snn_conv2d_dims *d);
void snn_conv2d_backward_cuda(float *dx, float *dweight, float *dbias, const float *dout,
                              const float *x, const float *weight, const snn_conv2d_dims *d,
                              float *workspace);

/* conv2d_igemm.cu: the TF32 / BF16 tensor-core convolution that conv2d.cu hands over to when
 * the precision is not fp32; the same semantics as the conv2d entries (dbias is conv2d.cu's) */
size_t snn_conv2d_igemm_workspace_bytes_cuda(const snn_conv2d_dims *d);
/* conv_path.cu: the kernels a conv of these dims runs on under the current precision and conv
 * path (cuda_options.h): SNN_CONV_PATH_IM2COL (fp32 always; conv2d.cu), _IGEMM (the kernel
 * below) or _NHWC (conv2d_nhwc.cu); never _AUTO. The one rule every conv entry follows. An int,
 * so that C code without cuda_options.h may call it. */
int snn_conv2d_path_cuda(const snn_conv2d_dims *d);
void snn_conv2d_igemm_forward_cuda(float *out, const float *x, const float *weight,
                                   const float *bias, const snn_conv2d_dims *d, void *workspace);
void snn_conv2d_igemm_backward_cuda(float *dx, float *dweight, const float *dout, const float *x,
                                    const float *weight, const snn_conv2d_dims *d,
                                    void *workspace);

/* dw[i] += sum over s < splits of partial[s n + i], s ascending (deterministic): the split-K
 * weight gradients of conv2d_igemm.cu and conv2d_nhwc.cu; n < 2^31 */
void snn_conv2d_split_sum_cuda(float *dw, const float *partial, int64_t n, int splits);
/* The split of a weight gradient's K (> 0) into at most max_splits ranges of whole slices:
 * *k_per_split gets a range's length, the result is how many ranges are non-empty. */
static inline int snn_conv2d_split_k(int K, int slice, int max_splits, int *k_per_split)
{
    const int tiles = (K + slice - 1) / slice;
    int splits = max_splits < tiles ? max_splits : tiles;
    if (splits < 1) splits = 1;
    *k_per_split = (tiles + splits - 1) / splits * slice;
    return (K + *k_per_split - 1) / *k_per_split;
}

/* conv2d_nhwc.cu: the TF32 / BF16 convolution on channels-last copies (strides 1-4, C_in and C_out
 * multiples of 32), the same semantics as the conv2d entries (dbias is conv2d.cu's) */
bool snn_conv2d_nhwc_supports(const snn_conv2d_dims *d);
size_t snn_conv2d_nhwc_workspace_bytes_cuda(const snn_conv2d_dims *d);
size_t snn_conv2d_nhwc_consuming_workspace_bytes_cuda(const snn_conv2d_dims *d);
/* x_bits: x as spikes kept as bits, read where x is NULL (by the channels-last copy) */
void snn_conv2d_nhwc_forward_cuda(float *out, const float *x, const uint32_t *x_bits,
                                  const float *weight, const float *bias,
                                  const snn_bn_eval *bn, const snn_conv2d_dims *d,
                                  void *workspace);
/* Whether the backward below takes dx == dout: stride 1 and a conv that keeps its shape, so
 * each chunk's dx covers exactly the chunk of dout already copied (channels-last) */
bool snn_conv2d_nhwc_dx_over_dout(const snn_conv2d_dims *d);
/* x_bits: x as spikes kept as bits (autograd/spike_pack.c), read where x is NULL; dx == dout
 * where snn_conv2d_nhwc_dx_over_dout: dx is then written, not added. bn: dout holds a
 * batch-norm's dL/dout, whose dL/dx (the conv's dout) the copy of dout makes (snn_bn_dout);
 * else NULL. consumed: dout itself where the caller gives it up (x's copy may then live in it,
 * in the smaller workspace snn_conv2d_nhwc_consuming_workspace_bytes_cuda), else NULL */
void snn_conv2d_nhwc_backward_cuda(float *dx, float *dweight, const float *dout, float *consumed,
                                   const float *x, const uint32_t *x_bits, const float *weight,
                                   const snn_bn_dout *bn, const snn_conv2d_dims *d,
                                   void *workspace);

/* pool2d.cu */
void snn_max_pool2d_forward_cuda(float *out, int32_t *argmax, const float *x,
                                 const snn_pool2d_dims *d);
void snn_max_pool2d_backward_cuda(float *dx, const float *dout, const int32_t *argmax,
                                  const snn_pool2d_dims *d);
void snn_avg_pool2d_forward_cuda(float *out, const float *x, const snn_pool2d_dims *d);
void snn_avg_pool2d_backward_cuda(float *dx, const float *dout, const snn_pool2d_dims *d);

/* delay.cu */
void snn_delay_kernel_forward_cuda(float *K, const float *w, const float *d, int O, int I, int D,
                                   float sigma);
void snn_delay_kernel_backward_cuda(float *dw, float *dd, const float *dK, const float *w,
                                    const float *d, int O, int I, int D, float sigma);
void snn_temporal_conv_forward_cuda(float *y, const float *x, const float *K, int T, int N,
                                    int I, int O, int D);
void snn_temporal_conv_backward_cuda(float *dx, float *dK, const float *dy, const float *x,
                                     const float *K, int T, int N, int I, int O, int D);

/* batchnorm.cu */
void snn_batchnorm_forward_train_cuda(float *out, float *save_mean, float *save_invstd,
                                      float *running_mean, float *running_var, const float *x,
                                      const float *gamma, const float *beta, int N, int C,
                                      int HW, float momentum, float eps);
void snn_batchnorm_forward_eval_cuda(float *out, const float *x, const float *gamma,
                                     const float *beta, const float *running_mean,
                                     const float *running_var, int N, int C, int HW, float eps);
void snn_batchnorm_backward_cuda(float *dx, float *dgamma, float *dbeta, const float *dout,
                                 const float *x, const float *gamma, const float *save_mean,
                                 const float *save_invstd, int N, int C, int HW);
void snn_batchnorm_backward_in_place_cuda(float *dx, float *dgamma, float *dbeta, const float *x,
                                          const uint16_t *x_bf16, const float *gamma,
                                          const float *save_mean, const float *save_invstd,
                                          int N, int C, int HW);
void snn_batchnorm_backward_in_place_sums_cuda(float *dx, float *dgamma, float *dbeta,
                                               const float *x, const uint16_t *x_bf16,
                                               const float *gamma, const float *save_mean,
                                               const float *save_invstd, const double *sums,
                                               int N, int C, int HW);
/* chan (C, 4) = (gamma invstd, save_mean, c0, c1) per channel from bn's sums: what the conv's
 * copy of dout needs to make the batch-norm's dx as it loads (bn_dx.cuh, conv2d_nhwc.cu);
 * chan 16-byte aligned */
void snn_bn_dout_channels_cuda(float *chan, const snn_bn_dout *bn, int C);
void snn_batchnorm_stats_cuda(double *stats, const float *x, const uint16_t *x_bf16, int N, int C,
                              int HW);
void snn_batchnorm_stats_merge_cuda(double *merged, float *save_mean, float *save_invstd,
                                    float *running_mean, float *running_var, const double *stats,
                                    int R, int C, float momentum, float eps);
void snn_batchnorm_normalise_cuda(float *out, const float *x, const double *merged,
                                  const float *save_invstd, const float *gamma, const float *beta,
                                  int N, int C, int HW);
void snn_batchnorm_backward_sums_cuda(double *sums, const float *dout, const float *x,
                                      const float *save_mean, int N, int C, int HW);
void snn_bn_neuron_dy_sums_cuda(double *sums, const float *dout, const float *x,
                                const uint16_t *x_bf16, const double *stats, int N, int C, int HW);
void snn_batchnorm_backward_apply_cuda(float *dx, float *dgamma, float *dbeta, const float *dout,
                                       const float *x, const float *gamma, const float *save_mean,
                                       const float *save_invstd, const double *local,
                                       const double *global, int N, int C, int HW);

/* loss.cu */
void snn_log_softmax_forward_cuda(float *out, const float *x, int N, int C);
void snn_log_softmax_backward_cuda(float *dx, const float *dout, const float *out, int N, int C);
void snn_nll_forward_cuda(float *loss, const float *logp, const float *labels, int N, int C,
                          float scale);
void snn_nll_backward_cuda(float *dlogp, const float *dloss, const float *labels, int N, int C,
                           float scale);
void snn_one_hot_cuda(float *out, const float *labels, int N, int C);

/* dropout.cu */
void snn_dropout_mask_cuda(float *mask, int64_t n, float p, uint64_t seed);

/* encode.cu */
void snn_poisson_encode_cuda(float *spikes, const float *pixels, int64_t n, int T,
                             uint64_t seed);

/* optim.cu */
void snn_sgd_update_cuda(float *p, float *velocity, const float *grad, int64_t n,
                         const snn_sgd_params *hp);
void snn_adam_update_cuda(float *p, float *m, float *v, const float *grad, int64_t n,
                          const snn_adam_params *hp);
void snn_adam_update_many_cuda(const snn_adam_tensor *tensors, int count,
                               const snn_adam_params *hp);

#ifdef __cplusplus
}
#endif

#endif /* SNN_KERNELS_CUDA_H */
