/*
 * kernels_cpu.h - prototypes of the CPU kernels that make up snn_kernels_cpu (internal).
 * Each is documented at its entry in kernels.h; the file that defines it is named beside it.
 */
#ifndef SNN_KERNELS_CPU_H
#define SNN_KERNELS_CPU_H

#include "kernels/kernels.h"

/* elementwise.c */
void snn_fill_cpu(float *out, float value, int64_t n);
void snn_axpy_cpu(float *y, float alpha, const float *x, int64_t n);
void snn_pack_bits_cpu(uint32_t *bits, const float *x, int64_t n);
void snn_unpack_bits_cpu(float *x, const uint32_t *bits, int64_t n);
void snn_lerp_cpu(float *y, const float *x, float weight, int64_t n);
void snn_unary_forward_cpu(snn_unary_op op, float *out, const float *x, float param, int64_t n);
void snn_unary_backward_cpu(snn_unary_op op, float *dx, const float *dout, const float *x,
                            const float *out, float param, int64_t n);
void snn_binary_forward_cpu(snn_binary_op op, float *out, const float *a, const float *b,
                            const snn_broadcast *bc);
void snn_binary_backward_cpu(snn_binary_op op, float *da, float *db, const float *dout,
                             const float *a, const float *b, const snn_broadcast *bc);

/* reduce.c */
void snn_sum_dim_cpu(float *out, const float *x, int64_t outer, int64_t dim, int64_t inner,
                     float scale);
void snn_expand_dim_cpu(float *out, const float *x, int64_t outer, int64_t dim, int64_t inner,
                        float scale, bool accumulate);
void snn_sumsq_and_finite_cpu(float *out, const float *x, int64_t n);
void snn_argmax_rows_cpu(float *out, const float *x, int N, int C);

/* gemm_threads.c, gemm.c: the fast SGEMM (its reference: snn_gemm_ref, kernels/ref/gemm.c) */
void snn_gemm_cpu(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float *A,
                  int lda, const float *B, int ldb, float beta, float *C, int ldc);

/* bias.c */
void snn_bias_forward_cpu(float *out, const float *bias, int64_t outer, int64_t channels,
                          int64_t inner);
void snn_bias_backward_cpu(float *dbias, const float *dout, int64_t outer, int64_t channels,
                           int64_t inner);

/* conv2d.c */
size_t snn_conv2d_workspace_bytes_cpu(const snn_conv2d_dims *d);
void snn_conv2d_forward_bn_eval_cpu(float *out, const float *x, const float *weight,
                                    const float *bias, const snn_bn_eval *bn,
                                    const snn_conv2d_dims *d, float *workspace);
void snn_conv2d_forward_cpu(float *out, const float *x, const float *weight, const float *bias,
                            const snn_conv2d_dims *d, float *workspace);
bool snn_conv2d_dx_over_dout_cpu(const snn_conv2d_dims *d);
void snn_conv2d_backward_cpu(float *dx, float *dweight, float *dbias, const float *dout,
                             const float *x, const float *weight, const snn_conv2d_dims *d,
                             float *workspace);

/* pool2d.c */
void snn_max_pool2d_forward_cpu(float *out, int32_t *argmax, const float *x,
                                const snn_pool2d_dims *d);
void snn_max_pool2d_backward_cpu(float *dx, const float *dout, const int32_t *argmax,
                                 const snn_pool2d_dims *d);
void snn_avg_pool2d_forward_cpu(float *out, const float *x, const snn_pool2d_dims *d);
void snn_avg_pool2d_backward_cpu(float *dx, const float *dout, const snn_pool2d_dims *d);

/* temporal_conv.c (the delay kernel's construction is the reference loop: delay.c there) */
void snn_temporal_conv_forward_cpu(float *y, const float *x, const float *K, int T, int N, int I,
                                   int O, int D);
void snn_temporal_conv_backward_cpu(float *dx, float *dK, const float *dy, const float *x,
                                    const float *K, int T, int N, int I, int O, int D);

/* batchnorm.c */
void snn_batchnorm_forward_train_cpu(float *out, float *save_mean, float *save_invstd,
                                     float *running_mean, float *running_var, const float *x,
                                     const float *gamma, const float *beta, int N, int C, int HW,
                                     float momentum, float eps);
void snn_batchnorm_forward_eval_cpu(float *out, const float *x, const float *gamma,
                                    const float *beta, const float *running_mean,
                                    const float *running_var, int N, int C, int HW, float eps);
void snn_batchnorm_backward_cpu(float *dx, float *dgamma, float *dbeta, const float *dout,
                                const float *x, const float *gamma, const float *save_mean,
                                const float *save_invstd, int N, int C, int HW);
void snn_batchnorm_backward_in_place_cpu(float *dx, float *dgamma, float *dbeta, const float *x,
                                         const uint16_t *x_bf16, const float *gamma,
                                         const float *save_mean, const float *save_invstd, int N,
                                         int C, int HW);
void snn_batchnorm_backward_in_place_sums_cpu(float *dx, float *dgamma, float *dbeta,
                                              const float *x, const uint16_t *x_bf16,
                                              const float *gamma, const float *save_mean,
                                              const float *save_invstd, const double *sums, int N,
                                              int C, int HW);
void snn_batchnorm_stats_cpu(double *stats, const float *x, const uint16_t *x_bf16, int N, int C,
                             int HW);
void snn_batchnorm_stats_merge_cpu(double *merged, float *save_mean, float *save_invstd,
                                   float *running_mean, float *running_var, const double *stats,
                                   int R, int C, float momentum, float eps);
void snn_batchnorm_normalise_cpu(float *out, const float *x, const double *merged,
                                 const float *save_invstd, const float *gamma, const float *beta,
                                 int N, int C, int HW);
void snn_batchnorm_backward_sums_cpu(double *sums, const float *dout, const float *x,
                                     const float *save_mean, int N, int C, int HW);
void snn_batchnorm_backward_apply_cpu(float *dx, float *dgamma, float *dbeta, const float *dout,
                                      const float *x, const float *gamma, const float *save_mean,
                                      const float *save_invstd, const double *local,
                                      const double *global, int N, int C, int HW);

/* loss.c */
void snn_log_softmax_forward_cpu(float *out, const float *x, int N, int C);
void snn_log_softmax_backward_cpu(float *dx, const float *dout, const float *out, int N, int C);
void snn_one_hot_cpu(float *out, const float *labels, int N, int C);

/* dropout.c */
void snn_dropout_mask_cpu(float *mask, int64_t n, float p, uint64_t seed);

/* encode.c */
void snn_poisson_encode_cpu(float *spikes, const float *pixels, int64_t n, int T, uint64_t seed);

/* optim.c */
void snn_sgd_update_cpu(float *p, float *velocity, const float *grad, int64_t n,
                        const snn_sgd_params *hp);
void snn_adam_update_cpu(float *p, float *m, float *v, const float *grad, int64_t n,
                         const snn_adam_params *hp);
void snn_adam_update_many_cpu(const snn_adam_tensor *tensors, int count, const snn_adam_params *hp);

#endif /* SNN_KERNELS_CPU_H */
