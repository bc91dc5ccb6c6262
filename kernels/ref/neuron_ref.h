/*
 * neuron_ref.h - prototypes of the reference neuron kernels that make up
 * snn_neuron_kernels_ref (internal). Each is documented at its entry in
 * kernels/neuron_kernels.h and, with its equations, at the top of the file named beside it.
 * The fast CPU kernels (kernels/cpu/neuron_cpu.h) have the same signatures and must compute
 * the same functions.
 */
#ifndef SNN_NEURON_REF_H
#define SNN_NEURON_REF_H

#include "kernels/neuron_kernels.h"

/* lif.c: IF, LIF and ParametricLIF */
void snn_lif_forward_ref(float *spike, float *h_seq, float *v_last, float *a_last,
                         float *activity, const float *x, const float *v_init,
                         const float *a_init, const float *w, const snn_neuron_params *p,
                         const snn_neuron_dims *d);
void snn_lif_backward_ref(float *dx, float *dv_init, float *dw, const float *dspike,
                          const float *dv_last, const float *h_seq, const float *spike,
                          const float *x, const float *v_init, const float *a_init,
                          const float *w, const snn_neuron_params *p, const snn_neuron_dims *d);

/* alif.c: adaptive LIF */
void snn_alif_forward_ref(float *spike, float *h_seq, float *th_seq, float *v_last,
                          float *a_last, float *activity, const float *x, const float *v_init,
                          const float *a_init, const snn_neuron_params *p,
                          const snn_neuron_dims *d);
void snn_alif_backward_ref(float *dx, float *dv_init, float *da_init, const float *dspike,
                           const float *dv_last, const float *da_last, const float *h_seq,
                           const float *th_seq, const snn_neuron_params *p,
                           const snn_neuron_dims *d);

/* stbif.c: ST-BIF */
void snn_stbif_forward_ref(float *spike, float *h_seq, float *v_last, float *a_last,
                           float *activity, const float *x, const float *v_init,
                           const float *a_init, const float *w, const snn_neuron_params *p,
                           const snn_neuron_dims *d);
void snn_stbif_backward_ref(float *dx, float *dv_init, float *dw, const float *dspike,
                            const float *dv_last, const float *h_seq, const float *spike,
                            const float *x, const float *v_init, const float *a_init,
                            const float *w, const snn_neuron_params *p,
                            const snn_neuron_dims *d);

/* heaviside.c: the spike function with a surrogate gradient */
void snn_heaviside_forward_ref(float *out, const float *x, int64_t n);
void snn_heaviside_backward_ref(float *dx, const float *dout, const float *x,
                                snn_surrogate_kind kind, float alpha, int64_t n);

/* plane_norm.c: the L2 norm of each (t, n, c) plane */
void snn_plane_norm_forward_ref(float *norm, const float *x, int64_t planes, int64_t plane);
void snn_plane_norm_backward_ref(float *dx, const float *dnorm, const float *x,
                                 const float *norm, int64_t planes, int64_t plane);

/* qclip.c: the quantized clip activation (LSQ) */
void snn_qclip_forward_ref(float *y, const float *x, const float *step,
                           const snn_neuron_params *p, int64_t n);
void snn_qclip_backward_ref(float *dx, float *dstep, const float *dy, const float *x,
                            const float *step, const snn_neuron_params *p, float grad_scale,
                            int64_t n);

/* running_pool.c: the running max-pool of converted SNNs */
void snn_running_max_pool_forward_ref(float *y, int32_t *argmax, const float *x,
                                      const snn_running_pool_dims *d);
void snn_running_max_pool_backward_ref(float *dx, const float *dy, const int32_t *argmax,
                                       const snn_running_pool_dims *d);

#endif /* SNN_NEURON_REF_H */
