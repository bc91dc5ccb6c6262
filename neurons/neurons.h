/**
 * @file
 * neurons.h - spiking neurons: IF, LIF, ParametricLIF and ST-BIF, with surrogate gradients.
 *
 * Dimension glossary: T time steps, N batch, C channels, H height, W width, F features.
 * Multi-step data is (T, N, C, H, W) or (T, N, F), time first (SpikingJelly's multi-step mode).
 *
 * A neuron is a little dynamical system run once per time step, per element (docs/neurons.md):
 *
 *   charge   H[t] = f(V[t-1], X[t])             IF:  H = V + X
 *                                               LIF: H = V + (X - (V - V_reset)) / tau
 *   fire     S[t] = Heaviside(H[t] - V_th)      (Heaviside(0) = 1: H exactly at V_th fires)
 *   reset    V[t] = H[t] (1 - S[t]) + V_reset S[t]    hard
 *            V[t] = H[t] - V_th S[t]                  soft
 *
 * Heaviside has no useful derivative, so backward replaces dS/dH by a surrogate g'(H - V_th),
 * the slope of a smooth step g (Sigmoid, ATan, PiecewiseQuadratic: see snn_surrogate below).
 *
 * Worked example (CPU): a LIF layer over 4 time steps, trained through time.
 *
 *     snn_neuron_config cfg = snn_neuron_config_default(SNN_NEURON_LIF);
 *     cfg.surrogate = snn_surrogate_default(SNN_SURROGATE_ATAN);
 *     snn_step_begin();
 *     snn_tensor *x = ...;                                  // (T, N, C, H, W) currents
 *     snn_tensor *activity = NULL;                          // (T*N, C) spike counts, optional
 *     snn_tensor *s = snn_neuron_multistep(x, &cfg, NULL, &activity);
 *     ...                                                   // loss, snn_backward(loss)
 *     snn_step_end();
 *
 * The multi-step op is ONE autograd node: a fused forward loops over t inside each element and
 * a fused backward carries dL/dV backwards through time (BPTT). ParametricLIF takes its learned
 * parameter w (1/tau = sigmoid(w)) as an input tensor made by snn_plif_param_new.
 *
 * Defaults follow SpikingJelly: V_th = 1, hard reset to V_reset = 0, detach_reset off,
 * surrogate Sigmoid(alpha = 4), LIF tau = 2 with decay_input on.
 */
#ifndef SNN_NEURONS_H
#define SNN_NEURONS_H

#include <stdbool.h>
#include <stdint.h>

#include "../tensor/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------------
 * Surrogate gradients
 * ------------------------------------------------------------------------------------------- */

/**
 * Which surrogate gradient: g is a smooth step (g(-inf) = 0, g(+inf) = 1); backward uses g'.
 *
 *     SIGMOID              g(x) = sigmoid(alpha x)
 *                        g'(x) = alpha sigmoid(alpha x) (1 - sigmoid(alpha x))        alpha = 4
 *     ATAN                 g(x) = arctan(pi/2 alpha x) / pi + 1/2
 *                          g'(x) = (alpha / 2) / (1 + (pi/2 alpha x)^2)                alpha = 2
 *     PIECEWISE_QUADRATIC  g(x) = 0, -alpha^2/2 x|x| + alpha x + 1/2, 1
 *                          (for x < -1/alpha, |x| <= 1/alpha, x > 1/alpha)
 *                          g'(x) = max(0, alpha - alpha^2 |x|)                          alpha = 1
 */
typedef enum snn_surrogate_kind {
    SNN_SURROGATE_SIGMOID = 0,          /**< sigmoid(alpha x), the SpikingJelly default */
    SNN_SURROGATE_ATAN,                 /**< arctan, the Fashion-MNIST default of snn-train */
    SNN_SURROGATE_PIECEWISE_QUADRATIC,  /**< g' a triangle of half-width 1/alpha, for teaching */
    SNN_SURROGATE_COUNT                 /**< the number of kinds */
} snn_surrogate_kind;

/** A surrogate gradient: its kind and sharpness. */
typedef struct snn_surrogate {
    snn_surrogate_kind kind; /**< which g */
    float alpha; /**< sharpness: larger alpha, narrower and taller g' */
} snn_surrogate;

/** The surrogate `kind` with its default alpha (4, 2, 1). */
snn_surrogate snn_surrogate_default(snn_surrogate_kind kind);
/** g(x) of the surrogate `s` (a host function; the kernels use the same inline math). */
float snn_surrogate_g(snn_surrogate s, float x);
/** g'(x) of the surrogate `s`: what backward uses for dS/dH at x = H - V_th. */
float snn_surrogate_grad(snn_surrogate s, float x);
/** "sigmoid", "atan" or "piecewise_quadratic" (a static string). */
const char *snn_surrogate_name(snn_surrogate_kind kind);
/** Parses `name` (a name above, or "pwq") into *out, the kind with its default alpha;
 * SNN_ERR_ARGUMENT with a message for any other name. */
snn_status snn_surrogate_parse(const char *name, snn_surrogate *out);

/* ---------------------------------------------------------------------------------------------
 * Neuron configuration
 * ------------------------------------------------------------------------------------------- */

/** Which neuron model (docs/neurons.md section 1 has the equations). */
typedef enum snn_neuron_kind {
    SNN_NEURON_IF = 0,  /**< integrate-and-fire: H = V + X */
    SNN_NEURON_LIF,     /**< leaky: fixed tau */
    SNN_NEURON_PLIF,    /**< ParametricLIF: 1/tau = sigmoid(w), w learned (Fang et al. 2021) */
    SNN_NEURON_STBIF,   /**< spike-threshold bipolar IF (SpikeZIP-TF): a quantized ANN as an SNN */
    SNN_NEURON_RELU,    /**< ANN activation: y = max(x, 0), no time dynamics (models run T = 1) */
    SNN_NEURON_QCLIP,   /**< ANN activation: ST-BIF's L-level quantizer with a learned step (LSQ);
                             a QANN made of it converts to ST-BIF (nn/ann2snn.c) */
    SNN_NEURON_ALIF,    /**< adaptive LIF (Bellec et al. 2018, LSNN): each spike raises the
                             threshold, which decays back with time constant tau_adapt */
    SNN_NEURON_COUNT    /**< the number of kinds */
} snn_neuron_kind;

/** What a spike does to the membrane. */
typedef enum snn_reset_mode {
    SNN_RESET_HARD = 0, /**< V = V_reset after a spike */
    SNN_RESET_SOFT,     /**< V = H - V_th after a spike (the excess is kept) */
} snn_reset_mode;

/** A neuron layer's model and constants; start from snn_neuron_config_default(kind). */
typedef struct snn_neuron_config {
    snn_neuron_kind kind;    /**< the model */
    float v_threshold;       /**< V_th (IF, LIF, PLIF); default 1 */
    float v_reset;           /**< hard reset target, also V[0]; taken as 0 by soft reset */
    snn_reset_mode reset;    /**< IF, LIF, PLIF; default hard */
    bool detach_reset;       /**< the S in the reset is a constant in backward; default off */
    snn_surrogate surrogate; /**< default Sigmoid(alpha = 4) */
    float tau;               /**< LIF: the time constant (> 1); PLIF: tau0, the initial value */
    bool decay_input;        /**< LIF, PLIF: the input is divided by tau too; default on */
    /** ST-BIF's threshold, default 1: V[0] = theta/2, output theta S with S in {-1, 0, +1},
     * A = sum of S kept in [A_min, A_max] = [0, levels - 1], or [-levels/2, levels/2 - 1] when
     * symmetric. Its reset is always "subtract theta" (soft); detach_reset applies. The
     * surrogate's alpha is measured in units of 1/theta: the kernel uses slope alpha / theta
     * (the paper's 4/theta). QCLIP: the same levels and bounds; theta is the initial value of its
     * learned step. */
    float theta;
    int levels;              /**< L >= 2; default 8 */
    bool symmetric;          /**< default off (unsigned levels) */
    /** ALIF's adaptation A: the threshold is V_th + beta A[t-1], and A[t] = rho A[t-1] +
     * (1 - rho) S[t] with rho = exp(-1 / tau_adapt), A[-1] = 0 (kernels/neuron_math.h).
     * tau_adapt > 0, in time steps; default 20. */
    float tau_adapt;
    float beta;              /**< ALIF: how far one spike raises the threshold; >= 0, default 1.8 */
} snn_neuron_config;

/** The defaults above for `kind`. */
snn_neuron_config snn_neuron_config_default(snn_neuron_kind kind);
/** Checks every field of `cfg` for its kind: SNN_OK, or SNN_ERR_ARGUMENT with a message naming
 * `fn` (the caller, for the message) and the bad field. */
snn_status snn_neuron_config_check(const char *fn, const snn_neuron_config *cfg);
/** "if", "lif", "plif", "stbif", "relu", "qclip" or "alif" (a static string). */
const char *snn_neuron_kind_name(snn_neuron_kind kind);
/** Parses `name` (one of the names above) into *out; SNN_ERR_ARGUMENT with a message for any
 * other name. */
snn_status snn_neuron_kind_parse(const char *name, snn_neuron_kind *out);
/** The ST-BIF bounds [*a_min, *a_max] of the spike count A for `cfg` (levels, symmetric);
 * for QCLIP the bounds of its levels. */
void snn_stbif_bounds(const snn_neuron_config *cfg, int *a_min, int *a_max);
/** True for the ANN activations (RELU, QCLIP): stateless, a model made of them runs T = 1. */
bool snn_neuron_is_ann(snn_neuron_kind kind);
/** True for the kinds whose input a batch-norm and a residual can feed in the neuron kernel
 * (IF, LIF): what snn_batchnorm_neuron and snn_neuron_multistep_residual run. */
bool snn_neuron_takes_bn_input(snn_neuron_kind kind);
/** True for the kinds whose output is 0 or 1 (IF, LIF, PLIF; ST-BIF's is theta S): made with a
 * tape, it is marked as spikes (snn_tensor.spikes) and may be kept as bits (snn_spikes_pack). */
bool snn_neuron_spikes_are_binary(snn_neuron_kind kind);

/* ---------------------------------------------------------------------------------------------
 * ParametricLIF's parameter
 * ------------------------------------------------------------------------------------------- */

/** OWNED 1-element tensor w = -ln(tau0 - 1) on `device`, so that 1/tau = sigmoid(w) starts at
 * 1/tau0; requires_grad is set. tau0 > 1. Free with snn_tensor_free. NULL on error
 * (SNN_ERR_ARGUMENT for tau0 <= 1, or as snn_tensor_new). */
snn_tensor *snn_plif_param_new(float tau0, snn_device device);
/** The tau that PLIF's parameter `w` stands for: 1 / sigmoid(w). NaN on error (w NULL or not
 * 1 element; message set). */
float snn_plif_tau(const snn_tensor *w);

/* ---------------------------------------------------------------------------------------------
 * Multi-step neurons (one fused autograd node)
 * ------------------------------------------------------------------------------------------- */

/** Runs the neurons of `cfg` over all T steps of x: (T, N, ...) input currents. Returns the
 * spikes, a STEP tensor of x's shape (0/1; for ST-BIF theta * S in {-theta, 0, theta}), or NULL
 * on error (a bad cfg, a missing or unexpected w, shapes, devices: SNN_ERR_ARGUMENT; as every
 * op otherwise). The state starts at V[0] = V_reset (theta/2 for ST-BIF) on every call.
 *
 *   - w: PLIF's parameter (snn_plif_param_new), on x's device; must be NULL for the other kinds.
 *   - activity: when not NULL, receives a STEP tensor (T*N, C) holding, per time step, sample
 *     and channel, the number of elements that spiked in that channel's plane (nonzero outputs
 *     for ST-BIF). C is dim 2 of x ((T, N, C, H, W): plane H*W; (T, N, F): C = F, plane 1;
 *     (T, N): C = 1). Not differentiable. The sparse pass reads it.
 *
 * Records one tape node when x or w requires grad; in no-grad mode saves nothing. */
snn_tensor *snn_neuron_multistep(snn_tensor *x, const snn_neuron_config *cfg, snn_tensor *w,
                                 snn_tensor **activity);

/** The same, for a caller that never reads x's values again (a model whose neuron follows a
 * batch-norm or a residual sum used by nothing else): IF and LIF keep the membrane H they save
 * for backward in x's memory instead of a new tensor (their backward reads H and the spikes,
 * never x), one activation less per neuron layer. PLIF (its backward reads x), ST-BIF and
 * no-grad mode behave as snn_neuron_multistep. x's gradient is unaffected. */
snn_tensor *snn_neuron_multistep_consume(snn_tensor *x, const snn_neuron_config *cfg, snn_tensor *w,
                                         snn_tensor **activity);

/** The same run, starting from the state in v_state (and a_state: ALIF's adaptation, ST-BIF's
 * spike count; NULL for the other kinds) and leaving the state after the last step there: a
 * model run one step or one segment of steps per call, its neurons remembering where they were
 * (neurons/carry.c). The states are OWNED tensors of x's shape without T ((N, ...) elements) on
 * x's device, requires_grad off; fill them with V_reset (theta/2 for ST-BIF) and 0 to start.
 * For autograd the state that enters is a constant: gradients reach x and w through these
 * steps only, never the calls before (online training, SLTT: docs/temporal.md). */
snn_tensor *snn_neuron_multistep_carry(snn_tensor *x, const snn_neuron_config *cfg, snn_tensor *w,
                                       snn_tensor *v_state, snn_tensor *a_state,
                                       snn_tensor **activity);

/** snn_neuron_multistep_carry for a caller that gives x up, as snn_neuron_multistep_consume:
 * IF and LIF keep H in x's memory (an online step's first neuron layer, fed by the stem's
 * batch-norm: nn/layer_neuron.c). The same spikes, state and gradients. */
snn_tensor *snn_neuron_multistep_carry_consume(snn_tensor *x, const snn_neuron_config *cfg,
                                               snn_tensor *w, snn_tensor *v_state,
                                               snn_tensor *a_state, snn_tensor **activity);

/** The same run as a function of its state, differentiable in it: from v_in (and a_in for ALIF
 * and ST-BIF) of x's shape without T, to the spikes (returned) and the state after the last
 * step (*v_out, *a_out: new STEP tensors). In grad mode a gradient reaching *v_out or *a_out
 * flows back through the T steps into x, w and v_in / a_in when they require it (ST-BIF's
 * spike count is not differentiable). What BPTT with time checkpoints recomputes, one segment
 * of steps at a time (app/train_segments.c, docs/temporal.md). */
snn_tensor *snn_neuron_multistep_state(snn_tensor *x, const snn_neuron_config *cfg, snn_tensor *w,
                                       snn_tensor *v_in, snn_tensor *a_in, snn_tensor **v_out,
                                       snn_tensor **a_out, snn_tensor **activity);

/** A training-mode batch-norm of x, plus residual when not NULL, into IF or LIF neurons, as one
 * node: the spikes of
 *     snn_neuron_multistep(snn_add_into(snn_batchnorm2d(x, gamma, beta, running_mean,
 *                          running_var, true, momentum, eps), residual), cfg, NULL, activity)
 * with the same bits (spikes, activity, running statistics, every gradient; on CUDA from 17 to
 * 64 steps the gradients to rounding), without storing the batch-norm's output or the
 * membrane H: backward recomputes H from x (neurons/bn_neuron.c).
 * x and residual are (T, N, C, H, W) on one device; gamma, beta and the running statistics
 * (C). Refused (SNN_ERR_ARGUMENT) for other neuron kinds and shapes, and (SNN_ERR_UNSUPPORTED)
 * while the batch-norm is synced across ranks: run the separate ops there. */
snn_tensor *snn_batchnorm_neuron(snn_tensor *x, snn_tensor *gamma, snn_tensor *beta,
                                 snn_tensor *running_mean, snn_tensor *running_var,
                                 float momentum, float eps, snn_tensor *residual,
                                 const snn_neuron_config *cfg, snn_tensor **activity);

/** A training-mode batch-norm's parameters and constants, as snn_batchnorm2d takes them. */
typedef struct snn_batchnorm_args {
    snn_tensor *gamma;        /**< (C) the scale */
    snn_tensor *beta;         /**< (C) the shift */
    snn_tensor *running_mean; /**< (C) updated by the forward */
    snn_tensor *running_var;  /**< (C) updated by the forward */
    float momentum;           /**< of the running statistics' update, in [0, 1] */
    float eps;                /**< added to the variance, > 0 */
} snn_batchnorm_args;

/** snn_batchnorm_neuron whose residual is itself a training-mode batch-norm's output (a ResNet
 * block's downsample shortcut, bn_r(conv(x))), as one node: the spikes of
 *     snn_batchnorm_neuron(x, bn..., snn_batchnorm2d(rx, r..., true, r->momentum, r->eps),
 *                          cfg, activity)
 * with the same bits (and the residual batch-norm's running statistics and gradients: rx's,
 * r->gamma's, r->beta's), without storing that residual: the neurons make it from rx as they
 * load it, in forward and in backward's recompute of H, so a step keeps rx (which the
 * batch-norm's backward needs anyway) and not the residual too (neurons/bn_neuron.c). x and rx
 * are (T, N, C, H, W) on one device; rx may be kept as bf16 already (snn_values_keep_bf16:
 * the op reads its bits, for the statistics too), where the device has the fused kernel.
 * Refused as snn_batchnorm_neuron, naming rx or r's tensors. */
snn_tensor *snn_batchnorm_neuron_bn_residual(snn_tensor *x, const snn_batchnorm_args *bn,
                                             snn_tensor *rx, const snn_batchnorm_args *r,
                                             const snn_neuron_config *cfg,
                                             snn_tensor **activity);

/** The stem of a directly encoded image: a training-mode batch-norm of x, the same input at
 * each of `time_steps` steps, into IF or LIF neurons, as one node: the spikes of
 *     snn_neuron_multistep(snn_repeat_time(snn_batchnorm2d(x, gamma, beta, running_mean,
 *                          running_var, true, momentum, eps), time_steps), cfg, NULL, activity)
 * with the same bits (spikes, activity, running statistics, every gradient; on CUDA from 17 to
 * 64 steps the gradients to rounding), without the batch-norm's output, the repeat over T or
 * H: the neurons read bn(x) at every step, and backward sums dL/dX over the steps in the
 * repeat's order. On the CPU its backward holds H and every step's dL/dX in scratch, more than
 * the repeat: the models use it on CUDA alone (nn/fusion_rules.c). x (N, C, H, W), spikes
 * (time_steps, N, C, H, W). Refused as snn_batchnorm_neuron, and for time_steps outside
 * 1..1024. */
snn_tensor *snn_batchnorm_neuron_repeat(snn_tensor *x, snn_tensor *gamma, snn_tensor *beta,
                                        snn_tensor *running_mean, snn_tensor *running_var,
                                        float momentum, float eps, int time_steps,
                                        const snn_neuron_config *cfg, snn_tensor **activity);

/** snn_batchnorm_neuron for a layer that carries its state between calls: the spikes of
 *     snn_neuron_multistep_carry(snn_add_into(snn_batchnorm2d(x, ...), residual), cfg, NULL,
 *                                v_state, NULL, activity)
 * with the same bits (spikes, the state left in v_state, running statistics, every gradient).
 * v_state: as snn_neuron_multistep_carry's, (N, C, H, W) elements, OWNED, no gradient; the
 * state that enters is a constant (online training, SLTT: docs/temporal.md).
 * When. Without a tape the state advances at once. With one, it advances in the op's backward:
 * backward recomputes H from the state that entered, and then leaves the state after the last
 * step in v_state. So the step keeps no copy of the state (4 B per neuron), but v_state holds
 * the entering state until backward has run through the op: run it before the next call (as
 * SLTT does). A call on a v_state whose last taped call has not run its backward is refused
 * (SNN_ERR_STATE, naming 'v_state'), and so is a backward whose state was reset or freed first
 * (snn_batchnorm_neuron_carry_forget). Refused as snn_batchnorm_neuron, and for a v_state that
 * does not fit. */
snn_tensor *snn_batchnorm_neuron_carry(snn_tensor *x, snn_tensor *gamma, snn_tensor *beta,
                                       snn_tensor *running_mean, snn_tensor *running_var,
                                       float momentum, float eps, snn_tensor *residual,
                                       const snn_neuron_config *cfg, snn_tensor *v_state,
                                       snn_tensor **activity);

/** How many taped snn_batchnorm_neuron_carry calls of this process still wait for their
 * backward to advance their state: each such call adds one, its backward takes it away. An
 * online step reads it before a time step and after its backward (app/train_online.c): a
 * difference means a layer whose backward did not run, and whose state would be stale. */
int snn_batchnorm_neuron_carry_pending(void);

/** The owner of a carry op's v_state sets it anew (a reset) or frees it: a taped call on it
 * that has not run its backward no longer waits, and that backward, if it runs, fails
 * (SNN_ERR_STATE) instead of recomputing H from a state that is not the one it started from.
 * nn/layer_neuron.c calls it; NULL or a state with nothing pending: nothing. */
void snn_batchnorm_neuron_carry_forget(const snn_tensor *v_state);

/** The same as a function of the state, differentiable in it: the spikes and *v_out (a new
 * STEP tensor, the state after the last step) of
 *     snn_neuron_multistep_state(snn_add_into(snn_batchnorm2d(x, ...), residual), cfg, NULL,
 *                                v_in, NULL, v_out, NULL, activity)
 * with the same bits, dL/dv_in included (BPTT with time checkpoints: app/train_segments.c).
 * v_in: (N, C, H, W) elements on x's device, may require grad. *v_out keeps its gradient after
 * backward (retain_grad). Refused as snn_batchnorm_neuron, for a v_in that does not fit and a
 * NULL v_out. */
snn_tensor *snn_batchnorm_neuron_state(snn_tensor *x, snn_tensor *gamma, snn_tensor *beta,
                                       snn_tensor *running_mean, snn_tensor *running_var,
                                       float momentum, float eps, snn_tensor *residual,
                                       const snn_neuron_config *cfg, snn_tensor *v_in,
                                       snn_tensor **v_out, snn_tensor **activity);

/** The spikes of snn_neuron_multistep(snn_add_into(x, residual), cfg, NULL, activity) for IF
 * or LIF neurons, bit for bit, without writing the sum: the neuron kernel adds the residual as
 * it loads x (inference: a ResNet block's output neurons, neurons/bn_neuron.c). x and residual
 * (T, N, ...) of one shape and device. When a gradient would be recorded, or for other kinds,
 * it is those two ops (x must then be a STEP tensor, as snn_add_into asks). */
snn_tensor *snn_neuron_multistep_residual(snn_tensor *x, snn_tensor *residual,
                                          const snn_neuron_config *cfg, snn_tensor **activity);

/** Firing rate of an `activity` tensor (as snn_neuron_multistep gives it): the sum of its
 * counts / input_numel, the number of elements of the neurons' input. Reads the device. NaN on
 * error (activity NULL, input_numel <= 0; message set). */
float snn_activity_rate(const snn_tensor *activity, int64_t input_numel);

/* ---------------------------------------------------------------------------------------------
 * A recurrent layer of spiking neurons (recurrent.c): RLIF, and with ALIF neurons an LSNN's
 * layer. Each step's input adds the layer's own spikes of the step before:
 *
 *   I[t] = X[t] + S[t-1] W_rec^T,  S[-1] = 0;   then one neuron step on I[t] (V, A carried)
 *
 * One autograd node, trained by BPTT through both the membrane and the recurrent weights.
 * ------------------------------------------------------------------------------------------- */

/** Runs a recurrent layer of the neurons of `cfg` (IF, LIF or ALIF) over x: (T, N, F) input
 * currents, with w_rec (F, F) the recurrent weights (row o: what neuron o receives from each
 * neuron's last spike), on x's device. Returns the spikes, a STEP tensor (T, N, F) of 0 / 1, or
 * NULL on error: SNN_ERR_ARGUMENT naming the argument for x not 3-D, w_rec not (F, F), tensors
 * on two devices, a NULL or bad cfg or another neuron kind; SNN_ERR_UNSUPPORTED where the
 * device lacks the kind's kernels; as every op otherwise. The state starts at V = V_reset (0
 * for soft reset), A = 0 on every call. activity: as snn_neuron_multistep's, (T*N, F) spike
 * counts, when not NULL. Differentiable in x and w_rec (one tape node when either requires
 * grad; no-grad mode saves nothing). */
snn_tensor *snn_recurrent_multistep(snn_tensor *x, snn_tensor *w_rec, const snn_neuron_config *cfg,
                                    snn_tensor **activity);

/* ---------------------------------------------------------------------------------------------
 * The quantized clip activation (QCLIP) of a QANN: the quantizer ST-BIF stands in for.
 *
 *   y = s clip(floor(x / s + 1/2), A_min, A_max),  s = max(step[0], SNN_QCLIP_MIN_STEP)
 *
 * with ST-BIF's bounds (snn_stbif_bounds). The step is learned as in LSQ (Esser et al.,
 * "Learned Step Size Quantization", ICLR 2020): backward is the straight-through estimator
 *   dx += dy                            where A_min <= x/s <= A_max, else nothing
 *   dstep += g sum dy (floor(x/s + 1/2) - x/s  inside,  A_min below,  A_max above)
 *   g = 1 / sqrt(F max(A_max, -A_min)),  F = elements per sample (x is (T, N, ...))
 * ------------------------------------------------------------------------------------------- */

/** The smallest step QCLIP uses (a learned step below it is taken as this). */
#define SNN_QCLIP_MIN_STEP 1e-6f

/** OWNED 1-element step tensor holding `step` (> 0), requires_grad set. NULL on error. */
snn_tensor *snn_qclip_step_new(float step, snn_device device);
/** The quantized clip of x (T, N, ...) above; step: 1 element on x's device; cfg: a QCLIP config
 * (levels, symmetric). Differentiable in x and step. */
snn_tensor *snn_qclip(snn_tensor *x, snn_tensor *step, const snn_neuron_config *cfg);

/* ---------------------------------------------------------------------------------------------
 * The max-pool of a converted SNN (nn/ann2snn.c): the max-pool of the running sums of its
 * input, emitted as changes, so that what it has emitted by step t is the max-pool of all it
 * has received (a QANN's max-pool sees the whole quantized activation, an SNN only its spikes
 * so far; the max of sums is not the sum of per-step maxima):
 *
 *   S[t] = x[0] + ... + x[t]            y[t] = P(S[t]) - P(S[t-1]),  P(S[-1]) = 0
 *   so  y[0] + ... + y[t] = P(S[t])     (P: K x K max-pool at stride >= K, no padding)
 * ------------------------------------------------------------------------------------------- */

/** The running max-pool above of x (T, N, C, H, W), K = `kernel` at `stride` (>= kernel, no
 * padding). A plane that is silent at step t stays silent in y[t]. Differentiable. */
snn_tensor *snn_running_max_pool2d(snn_tensor *x, int kernel, int stride);

/* ---------------------------------------------------------------------------------------------
 * Single-step neurons
 * ------------------------------------------------------------------------------------------- */

/**
 * The state of single-step neurons (snn_neuron_step): one time step per call, state kept by the
 * caller.
 *
 *     snn_neuron_state st = {0};                  // or snn_neuron_state_reset(&st)
 *     snn_step_begin();
 *     for (int t = 0; t < T; t++) s[t] = snn_neuron_step(x[t], &cfg, NULL, &st, NULL);
 *     snn_step_end();                             // st is stale now: the next call resets it
 *
 * The state's tensors are STEP tensors: they die with the step that made them, and a state
 * from a closed step is treated as reset. Each call is differentiable (through x, w and the
 * previous V) when grad mode is on, so BPTT works step by step too.
 */
typedef struct snn_neuron_state {
    snn_tensor *v;     /**< (N, ...) membrane after the last step; NULL = reset */
    snn_tensor *a;     /**< (N, ...) ST-BIF's spike count A, or ALIF's adaptation A (its
                            gradient flows step to step as V's); NULL otherwise */
    uint64_t step_id;  /**< the step that made v and a (snn_step_id) */
} snn_neuron_state;

/** Puts `state` back to V = V_reset (theta/2, A = 0 for ST-BIF); a new batch size is fine
 * afterwards. Nothing is freed (its tensors belong to their step). */
void snn_neuron_state_reset(snn_neuron_state *state);

/** Runs one time step of the neurons of `cfg` on x: (N, ...) input currents. Returns the
 * spikes (a STEP tensor of x's shape) and advances `state`; w and activity as in
 * snn_neuron_multistep, activity with shape (N, C). NULL on error as snn_neuron_multistep; a
 * state of another shape than x is SNN_ERR_ARGUMENT (reset it between batches). */
snn_tensor *snn_neuron_step(snn_tensor *x, const snn_neuron_config *cfg, snn_tensor *w,
                            snn_neuron_state *state, snn_tensor **activity);

/* ---------------------------------------------------------------------------------------------
 * The spike function as a primitive op
 * ------------------------------------------------------------------------------------------- */

/**
 * The spike function as a primitive op, for composing neurons from primitives (the unrolled
 * reference the fused kernels are tested against, or new neuron models):
 *
 *     forward   y = Heaviside(x) = (x >= 0 ? 1 : 0)
 *     backward  dx += dy * g'(x) of the surrogate
 *
 * Returns a STEP tensor of x's shape, or NULL on error as every op (autograd.h).
 */
snn_tensor *snn_heaviside(snn_tensor *x, snn_surrogate surrogate);

/* ---------------------------------------------------------------------------------------------
 * The L2 norm of each (t, n, c) plane of a spike tensor (plane_norm.c), the group-lasso term of
 * the activity penalty (nn.h: snn_activity_penalty):
 *   forward  y[t, n, c] = sqrt(sum over the plane of x^2)    (= sqrt(spike count) for {0, 1})
 *   backward dx += dy * x / y, nothing where y = 0 (a silent plane: subgradient 0)
 * x: (T, N, C, ...) -> (T, N, C); (T, N, F) -> (T, N, F) (planes of one element: |x|);
 * (T, N) -> (T, N). Differentiable in x; through the neuron's spike output it reaches the
 * membrane by the surrogate. CPU and CUDA.
 * ------------------------------------------------------------------------------------------- */

/** The L2 norm of each (t, n, c) plane of x (above): a STEP tensor (T, N, C), or NULL on error as
 * every op. */
snn_tensor *snn_spike_plane_norms(snn_tensor *x);

#ifdef __cplusplus
}
#endif

#endif /* SNN_NEURONS_H */
