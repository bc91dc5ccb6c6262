/*
 * neuron_kernels.h - the neuron kernel table: one struct of function pointers per device
 * (internal). The autograd layer (neuron_op.c, single_step.c, heaviside.c) checks arguments,
 * allocates, and calls these; the kernels see only raw device pointers, dims and a params struct,
 * so the CUDA port (neurons/<name>.cu, same signatures, same order) is line for line.
 *
 * Conventions (as kernels/kernels.h):
 *   - argument order: outputs, saved-for-backward, inputs, parameters, dims;
 *   - forward kernels overwrite their outputs; backward kernels ACCUMULATE (+=) into gradient
 *     outputs, and a NULL pointer means "not needed / absent";
 *   - device scalars (PLIF's w, its gradient dw) stay device pointers: no host sync.
 *
 * Layout: every tensor is viewed as (T, M), M = N * C * plane elements per time step
 * (snn_neuron_dims, kernels/neuron_dims.h).
 */
#ifndef SNN_NEURON_KERNELS_H
#define SNN_NEURON_KERNELS_H

#include <stdbool.h>
#include <stdint.h>

#include "neuron_dims.h"
#include "neurons/neurons.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Everything a kernel needs to know about the neuron, flattened from snn_neuron_config. */
typedef struct snn_neuron_params {
    snn_neuron_kind kind;
    float v_th;                  /* IF/LIF/PLIF threshold */
    float v_reset;               /* hard-reset target and V[0]; 0 for soft reset */
    bool soft_reset;
    bool detach_reset;
    snn_surrogate_kind surrogate;
    float alpha;                 /* surrogate sharpness (ST-BIF: already alpha / theta) */
    float tau;                   /* LIF time constant (PLIF reads sigmoid(w) instead) */
    bool decay_input;
    float theta;                 /* ST-BIF threshold; V[0] = theta / 2 */
    float a_min, a_max;          /* ST-BIF bounds of the spike count A (integers, kept as floats) */
    float rho;                   /* ALIF: exp(-1 / tau_adapt), the adaptation's decay per step */
    float beta;                  /* ALIF: threshold V_th + beta A[t-1] */
} snn_neuron_params;

/* Forward over T steps for every element.
 *   spike   (T, M)  out: S (IF/LIF/PLIF) or theta * S (ST-BIF)
 *   h_seq   (T, M)  out, saved for backward: H[t]; NULL in no-grad mode
 *   v_last  (M)     out: V after the last step, or NULL; may alias v_init
 *   a_last  (M)     out: ST-BIF's A after the last step, or NULL; may alias a_init
 *   activity (T, N*C) out: spike counts per plane, or NULL
 *   x       (T, M)  in
 *   v_init  (M)     in: V before step 0, or NULL for V_reset (theta/2 for ST-BIF)
 *   a_init  (M)     in: ST-BIF's A before step 0, or NULL for 0
 *   w       [1]     in: PLIF's parameter (1/tau = sigmoid(w[0])), NULL for other kinds */
typedef void (*snn_neuron_forward_fn)(float *spike, float *h_seq, float *v_last, float *a_last,
                                      float *activity, const float *x, const float *v_init,
                                      const float *a_init, const float *w,
                                      const snn_neuron_params *p, const snn_neuron_dims *d);

/* BPTT backward (accumulates):
 *   dx      (T, M)  += dL/dX, or NULL
 *   dv_init (M)     += dL/dV_init, or NULL
 *   dw      [1]     += dL/dw (PLIF), or NULL
 *   dspike  (T, M)  dL/d(output), or NULL (no gradient reached the spikes)
 *   dv_last (M)     dL/dV_last, or NULL
 *   h_seq, spike, x, v_init, a_init, w: as given to / made by the forward */
typedef void (*snn_neuron_backward_fn)(float *dx, float *dv_init, float *dw, const float *dspike,
                                       const float *dv_last, const float *h_seq,
                                       const float *spike, const float *x, const float *v_init,
                                       const float *a_init, const float *w,
                                       const snn_neuron_params *p, const snn_neuron_dims *d);

/* ALIF (adaptive LIF, kernels/neuron_math.h has the equations), forward over T steps:
 *   spike   (T, M)  out: S
 *   h_seq   (T, M)  out, saved for backward: H[t]; NULL in no-grad mode
 *   th_seq  (T, M)  out, saved for backward: the threshold V_th + beta A[t-1]; NULL likewise
 *   v_last, a_last (M) out: V and A after the last step, or NULL; may alias v_init, a_init
 *   activity (T, N*C) out, or NULL
 *   x       (T, M)  in
 *   v_init, a_init (M) in: V and A before step 0, or NULL for V_reset and 0
 * Backward (accumulates; H, S and the threshold come from h_seq and th_seq, nothing else):
 *   dx (T, M), dv_init (M), da_init (M)  += their gradients, each may be NULL
 *   dspike (T, M), dv_last (M), da_last (M)  the incoming gradients, each may be NULL (zero) */
typedef void (*snn_alif_forward_fn)(float *spike, float *h_seq, float *th_seq, float *v_last,
                                    float *a_last, float *activity, const float *x,
                                    const float *v_init, const float *a_init,
                                    const snn_neuron_params *p, const snn_neuron_dims *d);
typedef void (*snn_alif_backward_fn)(float *dx, float *dv_init, float *da_init,
                                     const float *dspike, const float *dv_last,
                                     const float *da_last, const float *h_seq,
                                     const float *th_seq, const snn_neuron_params *p,
                                     const snn_neuron_dims *d);

/* The input of a neuron layer fed by a training-mode batch-norm and, optionally, a residual
 * (snn_batchnorm_neuron), and the layer's state where it carries one between calls
 * (snn_batchnorm_neuron_carry / _state): per element i of channel c = (i / plane) % C at step t,
 *   X[t, i] = (x[t, i] - mean[c]) (gamma[c] invstd[c]) + beta[c]   [+ residual[t, i]]
 * with the expression and rounding of the device's own batch-norm normalise (kernels/kernels.h
 * batchnorm_normalise: the CPU splits the double mean into a float head and tail, CUDA rounds it
 * to float), then the add of elementwise.c / .cu: the bits of the separate ops. With stats NULL
 * there is no batch-norm: X = x + residual (snn_neuron_multistep_residual).
 * The residual may itself be a training-mode batch-norm's output, made as it is loaded and
 * never stored (residual_bn: a ResNet block's downsample shortcut, where the op's backward
 * would otherwise keep the (T, M) floats for this one read; snn_batchnorm_neuron_bn_residual):
 *   residual[t, i] = (rx[t, i] - mean_r[c]) (gamma_r[c] invstd_r[c]) + beta_r[c]
 * with the same expression and rounding as x's, so the bits of the batch-norm's own output. */
typedef struct snn_bn_residual {
    const float *x;                   /* (T, M) that batch-norm's input rx, or NULL: x_bf16 */
    const uint16_t *x_bf16;           /* (T, M) rx as bfloat16 bits, read where x is NULL */
    const double *stats;              /* (C, 3) its (count, mean, M2) */
    const float *invstd;              /* (C) */
    const float *gamma, *beta;        /* (C) each, or NULL (1 and 0) */
} snn_bn_residual;

typedef struct snn_neuron_bn_input {
    const float *x;                   /* (T, M) the batch-norm's input, or NULL: x_bf16 */
    const uint16_t *x_bf16;           /* (T, M) x as bfloat16 bits, read where x is NULL (a
                                       * conv output kept as bf16, autograd/bf16_keep.c: the
                                       * kernels read it as it is, no fp32 copy) */
    const double *stats;              /* (C, 3) (count, mean, M2) from batchnorm_stats_merge, or
                                       * NULL: no batch-norm (then invstd, gamma, beta unused) */
    const float *invstd;              /* (C) */
    const float *gamma, *beta;        /* (C) each, or NULL (1 and 0) */
    const float *residual;            /* (T, M), or NULL */
    const uint32_t *residual_bits;    /* (T, M) spikes kept as bits (autograd/spike_pack.c: bit
                                       * e % 32 of word e / 32 is element e = t M + i), read
                                       * where residual is NULL; or NULL */
    /* The membrane state, as lif_forward / lif_backward take it; each NULL when absent. */
    const float *v_init;              /* (M) V before step 0, or NULL: V_reset */
    float *v_last;                    /* (M) out: V after the last step, from forward, or
                                       * from lif_bn_backward (the carry op's deferred state);
                                       * may alias v_init (each element's V_init is read
                                       * first) */
    const float *dv_last;             /* (M) backward in: dL/dV_last, or NULL: zero */
    float *dv_init;                   /* (M) backward out: += dL/dV_init */
    /* (C, 3) backward out, or NULL: the sums batchnorm_backward_sums (kernels/kernels.h)
     * would take of the batch-norm's dL/dout = dX and x, (sum dX, sum dX (x - mean), count)
     * per channel over the images it normalised (T N; N where x_repeated), made as dX is
     * written (mean: stats' mean rounded to float, the batch-norm's save_mean), for
     * batchnorm_backward_in_place_sums. Their order of addition is the kernel's own, so they
     * equal batchnorm_backward_sums's to rounding, not bit for bit: TF32 and BF16 training ask
     * for them, fp32 keeps the separate pass (neurons/bn_neuron.c). */
    double *dy_sums;
    /* x is (M), not (T, M): every step reads the same x (the stem of a directly encoded
     * image, snn_batchnorm_neuron_repeat: X[t, i] = bn(x[i]) at each t, the repeat over T
     * never written). Backward's dX is then (M) too, the sum over t of dL/dX[t], added in
     * the order t = 0, 1, ... from 0 (as the repeat's backward adds it; CUDA past 16 steps:
     * chunk by chunk from the last, each in step order). No residual. */
    bool x_repeated;
    /* The residual as a batch-norm's output (see above), or NULL: read where residual and
     * residual_bits are NULL (stats not NULL, x not repeated). A host pointer: CUDA passes the
     * struct to its kernels as an argument of its own (48 more bytes in this one, passed by
     * value, cost the T > 16 backward kernel 29 registers, kernels/cuda/lif_bn_backward.cu). */
    const snn_bn_residual *residual_bn;
} snn_neuron_bn_input;

/* IF and LIF on the batch-norm-fed input: lif_forward's outputs with X made from `in` on the
 * fly (X itself is never stored), from in->v_init, V left in in->v_last (each when not NULL).
 * spike may be NULL: backward's recompute of H. spike_bits,
 * if not NULL (spike then not NULL), gets the spikes as bits too, as pack_bits would write
 * them (kernels/kernels.h): a tape's spikes, ready for snn_spikes_pack. */
typedef void (*snn_neuron_bn_forward_fn)(float *spike, uint32_t *spike_bits, float *h_seq,
                                         float *activity, const snn_neuron_bn_input *in,
                                         const snn_neuron_params *p, const snn_neuron_dims *d);

/* BPTT of IF / LIF on the batch-norm-fed input (in->stats not NULL), H recomputed in registers
 * (never stored) from in->v_init:
 *   dX      (T, M)  = dL/dX (written, not accumulated: the input of the batch-norm's backward;
 *                     (M), the sum over t, where in->x_repeated)
 *   dresidual (T, M) += dL/dX when not NULL (the residual add's backward)
 *   dspike  (T, M)  dL/dS, or NULL
 *   in->dv_last, in->dv_init: the state's gradients, as lif_backward's dv_last and dv_init
 *   in->v_last: V after the last step when not NULL, as lif_bn_forward writes it
 *   in->dy_sums: the batch-norm backward's sums of dX, when not NULL (see there)
 * with the bits of lif_bn_forward (h_seq) -> fill dX with 0 -> lif_backward -> axpy where one
 * of dspike and in->dv_last is given. Where both are (a differentiable state, in
 * snn_batchnorm_neuron_state, whose spikes and V_out both reach the loss), one recurrence takes
 * both: the sum of the two runs of lif_backward the multi-step state op's two nodes make
 * (neurons/carry.c), up to rounding. For T <= SNN_NEURON_BN_BACKWARD_MAX_T (CUDA: 16 steps
 * in registers, longer runs in chunks of 16, each recomputed from V_init, a cost that grows as
 * T^2 / 32 steps); a device may leave it NULL (the CPU does), and the op then runs the
 * sequence with H in scratch, with lif_backward once for each gradient (the unfused op's
 * bits). */
#define SNN_NEURON_BN_BACKWARD_MAX_T 64
typedef void (*snn_neuron_bn_backward_fn)(float *dX, float *dresidual, const float *dspike,
                                          const snn_neuron_bn_input *in,
                                          const snn_neuron_params *p, const snn_neuron_dims *d);

/* The running max-pool's geometry (running_pool.c): x (T, planes, H, W) -> y (T, planes,
 * H_out, W_out), K x K windows at stride >= K (no overlap), no padding. */
typedef struct snn_running_pool_dims {
    int64_t T, planes;        /* planes = N * C */
    int H, W, K, stride;
    int H_out, W_out;         /* (H - K) / stride + 1, likewise W */
} snn_running_pool_dims;

/* Most elements a running max-pool window may hold (K <= 4): its running sums live in registers. */
#define SNN_RUNNING_POOL_MAX_WINDOW 16

typedef struct snn_neuron_kernels {
    const char *name; /* "ref", "cpu", "cuda" */
    /* IF, LIF and PLIF: one fused kernel, the kind selects the charge equation (lif.c) */
    snn_neuron_forward_fn lif_forward;
    snn_neuron_backward_fn lif_backward;
    /* IF and LIF fed by a batch-norm (and a residual) in one pass (lif.c) */
    snn_neuron_bn_forward_fn lif_bn_forward;
    snn_neuron_bn_backward_fn lif_bn_backward; /* NULL on the CPU */
    /* ALIF (alif.c) */
    snn_alif_forward_fn alif_forward;
    snn_alif_backward_fn alif_backward;
    /* ST-BIF (stbif.c) */
    snn_neuron_forward_fn stbif_forward;
    snn_neuron_backward_fn stbif_backward;
    /* out[i] = x[i] >= 0 ? 1 : 0 (heaviside.c) */
    void (*heaviside_forward)(float *out, const float *x, int64_t n);
    /* dx[i] += dout[i] * g'(x[i]) */
    void (*heaviside_backward)(float *dx, const float *dout, const float *x,
                               snn_surrogate_kind kind, float alpha, int64_t n);
    /* x viewed as (planes, plane): norm[g] = sqrt(sum_p x[g, p]^2) (plane_norm.c) */
    void (*plane_norm_forward)(float *norm, const float *x, int64_t planes, int64_t plane);
    /* dx[g, p] += dnorm[g] * x[g, p] / norm[g], nothing where norm[g] = 0 */
    void (*plane_norm_backward)(float *dx, const float *dnorm, const float *x, const float *norm,
                                int64_t planes, int64_t plane);
    /* QCLIP (qclip.c), n elements; step [1] is a device scalar (no host sync):
     *   y[i] = s clip(floor(x[i]/s + 1/2), A_min, A_max),  s = max(step[0], SNN_QCLIP_MIN_STEP) */
    void (*qclip_forward)(float *y, const float *x, const float *step, const snn_neuron_params *p,
                          int64_t n);
    /* dx[i] += dy[i] where A_min <= x/s <= A_max; dstep[0] += grad_scale sum_i dy[i] dy/ds
     * (LSQ, neuron_math.h); either output may be NULL */
    void (*qclip_backward)(float *dx, float *dstep, const float *dy, const float *x,
                           const float *step, const snn_neuron_params *p, float grad_scale,
                           int64_t n);
    /* The running max-pool (running_pool.c): y[t] = P(S[t]) - P(S[t-1]), S the running sum
     * of x over t. argmax (T, planes, H_out, W_out): the window index kh K + kw of each max,
     * or NULL when backward will not run. */
    void (*running_max_pool_forward)(float *y, int32_t *argmax, const float *x,
                                     const snn_running_pool_dims *d);
    /* dx (T, planes, H, W) += the gradient through time from dy and the forward's argmax */
    void (*running_max_pool_backward)(float *dx, const float *dy, const int32_t *argmax,
                                      const snn_running_pool_dims *d);
} snn_neuron_kernels;

/* The table of a device, or NULL when this build or machine has none (neuron_dispatch.c). */
const snn_neuron_kernels *snn_neuron_kernels_for(snn_device device);
/* Same, storing "<fn>: ... no <device> neuron kernels" when NULL. */
const snn_neuron_kernels *snn_neuron_kernels_or_error(const char *fn, snn_device device);

extern const snn_neuron_kernels snn_neuron_kernels_ref; /* kernels/ref/neuron_table.c */
extern const snn_neuron_kernels snn_neuron_kernels_cpu; /* kernels/cpu/neuron_table.c */
#ifdef SNN_WITH_CUDA
/* kernels/cuda/neuron_table.cu defines it once the CUDA port lands (see neuron_dispatch.c). */
extern const snn_neuron_kernels snn_neuron_kernels_cuda;
#endif

/* The kernel params for a config (checked already); shared by every op in neurons/. */
snn_neuron_params snn_neuron_params_from(const snn_neuron_config *cfg);

#ifdef __cplusplus
}
#endif

#endif /* SNN_NEURON_KERNELS_H */
