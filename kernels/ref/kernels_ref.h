/*
 * kernels_ref.h - prototypes of the reference tensor kernels that make up snn_kernels_ref
 * (internal). Each is documented at its entry in kernels/kernels.h and, with its equation, at
 * the top of the file named beside it. The fast CPU kernels (kernels/cpu/kernels_cpu.h) have
 * the same signatures and must compute the same functions.
 */
#ifndef SNN_KERNELS_REF_H
#define SNN_KERNELS_REF_H

#include "kernels/kernels.h"

/* elementwise.c */
void snn_fill_ref(float *out, float value, int64_t n);
void snn_axpy_ref(float *y, float alpha, const float *x, int64_t n);
void snn_lerp_ref(float *y, const float *x, float weight, int64_t n);
void snn_unary_forward_ref(snn_unary_op op, float *out, const float *x, float param, int64_t n);
void snn_unary_backward_ref(snn_unary_op op, float *dx, const float *dout, const float *x,
                            const float *out, float param, int64_t n);
void snn_binary_forward_ref(snn_binary_op op, float *out, const float *a, const float *b,
                            const snn_broadcast *bc);
void snn_binary_backward_ref(snn_binary_op op, float *da, float *db, const float *dout,
                             const float *a, const float *b, const snn_broadcast *bc);

/* bits.c */
void snn_pack_bits_ref(uint32_t *bits, const float *x, int64_t n);
void snn_unpack_bits_ref(float *x, const uint32_t *bits, int64_t n);

/* bf16.c */
uint16_t snn_bf16_bits(float v);      /* v rounded to bf16 (nearest, ties to even), its bits */
float snn_bf16_value(uint16_t bits);  /* the bf16 `bits` as fp32 (exact) */
void snn_round_bf16_ref(float *x, uint16_t *bf16_out, int64_t n);
void snn_unpack_bf16_ref(float *x, const uint16_t *bf16_in, int64_t n);

/* reduce.c */
void snn_sum_dim_ref(float *out, const float *x, int64_t outer, int64_t dim, int64_t inner,
                     float scale);
void snn_expand_dim_ref(float *out, const float *x, int64_t outer, int64_t dim, int64_t inner,
                        float scale, bool accumulate);
void snn_sumsq_and_finite_ref(float *out, const float *x, int64_t n);
void snn_argmax_rows_ref(float *out, const float *x, int N, int C);

/* transpose.c */
void snn_transpose01_ref(float *out, const float *x, int64_t rows, int64_t cols, int64_t inner,
                         bool accumulate);

/* gemm.c */
void snn_gemm_ref(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float *A,
                  int lda, const float *B, int ldb, float beta, float *C, int ldc);
void snn_bias_forward_ref(float *out, const float *bias, int64_t outer, int64_t channels,
                          int64_t inner);
void snn_bias_backward_ref(float *dbias, const float *dout, int64_t outer, int64_t channels,
                           int64_t inner);

/* conv2d.c */
size_t snn_conv2d_workspace_bytes_ref(const snn_conv2d_dims *d);
void snn_conv2d_forward_ref(float *out, const float *x, const float *weight, const float *bias,
                            const snn_conv2d_dims *d, float *workspace);
void snn_conv2d_backward_ref(float *dx, float *dweight, float *dbias, const float *dout,
                             const float *x, const float *weight, const snn_conv2d_dims *d,
                             float *workspace);
void snn_conv2d_forward_bn_eval_ref(float *out, const float *x, const float *weight,
                                    const float *bias, const snn_bn_eval *bn,
                                    const snn_conv2d_dims *d, float *workspace);

/* pool2d.c */
void snn_max_pool2d_forward_ref(float *out, int32_t *argmax, const float *x,
                                const snn_pool2d_dims *d);
void snn_max_pool2d_backward_ref(float *dx, const float *dout, const int32_t *argmax,
                                 const snn_pool2d_dims *d);
void snn_avg_pool2d_forward_ref(float *out, const float *x, const snn_pool2d_dims *d);
void snn_avg_pool2d_backward_ref(float *dx, const float *dout, const snn_pool2d_dims *d);

/* delay.c */
void snn_delay_kernel_forward_ref(float *K, const float *w, const float *d, int O, int I, int D,
                                  float sigma);
void snn_delay_kernel_backward_ref(float *dw, float *dd, const float *dK, const float *w,
                                   const float *d, int O, int I, int D, float sigma);
void snn_temporal_conv_forward_ref(float *y, const float *x, const float *K, int T, int N, int I,
                                   int O, int D);
void snn_temporal_conv_backward_ref(float *dx, float *dK, const float *dy, const float *x,
                                    const float *K, int T, int N, int I, int O, int D);

/* batchnorm.c */
void snn_batchnorm_forward_train_ref(float *out, float *save_mean, float *save_invstd,
                                     float *running_mean, float *running_var, const float *x,
                                     const float *gamma, const float *beta, int N, int C, int HW,
                                     float momentum, float eps);
void snn_batchnorm_forward_eval_ref(float *out, const float *x, const float *gamma,
                                    const float *beta, const float *running_mean,
                                    const float *running_var, int N, int C, int HW, float eps);
void snn_batchnorm_backward_ref(float *dx, float *dgamma, float *dbeta, const float *dout,
                                const float *x, const float *gamma, const float *save_mean,
                                const float *save_invstd, int N, int C, int HW);
void snn_batchnorm_backward_in_place_ref(float *dx, float *dgamma, float *dbeta, const float *x,
                                         const uint16_t *x_bf16, const float *gamma,
                                         const float *save_mean, const float *save_invstd, int N,
                                         int C, int HW);
void snn_batchnorm_backward_in_place_sums_ref(float *dx, float *dgamma, float *dbeta,
                                              const float *x, const uint16_t *x_bf16,
                                              const float *gamma, const float *save_mean,
                                              const float *save_invstd, const double *sums, int N,
                                              int C, int HW);

/* batchnorm_sync.c */
void snn_batchnorm_stats_ref(double *stats, const float *x, const uint16_t *x_bf16, int N, int C,
                             int HW);
void snn_batchnorm_stats_merge_ref(double *merged, float *save_mean, float *save_invstd,
                                   float *running_mean, float *running_var, const double *stats,
                                   int R, int C, float momentum, float eps);
void snn_batchnorm_normalise_ref(float *out, const float *x, const double *merged,
                                 const float *save_invstd, const float *gamma, const float *beta,
                                 int N, int C, int HW);
void snn_batchnorm_backward_sums_ref(double *sums, const float *dout, const float *x,
                                     const float *save_mean, int N, int C, int HW);
void snn_batchnorm_backward_apply_ref(float *dx, float *dgamma, float *dbeta, const float *dout,
                                      const float *x, const float *gamma, const float *save_mean,
                                      const float *save_invstd, const double *local,
                                      const double *global, int N, int C, int HW);

/* loss.c */
void snn_log_softmax_forward_ref(float *out, const float *x, int N, int C);
void snn_log_softmax_backward_ref(float *dx, const float *dout, const float *out, int N, int C);
void snn_nll_forward_ref(float *loss, const float *logp, const float *labels, int N, int C,
                         float scale);
void snn_nll_backward_ref(float *dlogp, const float *dloss, const float *labels, int N, int C,
                          float scale);
void snn_one_hot_ref(float *out, const float *labels, int N, int C);

/* dropout.c, encode.c */
void snn_dropout_mask_ref(float *mask, int64_t n, float p, uint64_t seed);
void snn_poisson_encode_ref(float *spikes, const float *pixels, int64_t n, int T, uint64_t seed);

/* optim.c */
void snn_sgd_update_ref(float *p, float *velocity, const float *grad, int64_t n,
                        const snn_sgd_params *hp);
void snn_adam_update_ref(float *p, float *m, float *v, const float *grad, int64_t n,
                         const snn_adam_params *hp);
void snn_adam_update_many_ref(const snn_adam_tensor *tensors, int count,
                              const snn_adam_params *hp);

#endif /* SNN_KERNELS_REF_H */
