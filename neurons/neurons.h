/*
 * neurons.h - spiking neurons: IF, LIF, ParametricLIF and ST-BIF, with surrogate gradients.
 *
 * Dimension glossary: T time steps, N batch, C channels, H height, W width, F features.
 * Multi-step data is (T, N, C, H, W) or (T, N, F), time first (SpikingJelly's multi-step mode).
 *
 * A neuron is a little dynamical system run once per time step, per element (DESIGN.md 4):
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

#include "tensor/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------------
 * Surrogate gradients: g is a smooth step (g(-inf) = 0, g(+inf) = 1); backward uses g'.
 *
 *   SIGMOID              g(x) = sigmoid(alpha x)
 *                        g'(x) = alpha sigmoid(alpha x) (1 - sigmoid(alpha x))        alpha = 4
 *   ATAN                 g(x) = arctan(pi/2 alpha x) / pi + 1/2
 *                        g'(x) = (alpha / 2) / (1 + (pi/2 alpha x)^2)                  alpha = 2
 *   PIECEWISE_QUADRATIC  g(x) = 0, -alpha^2/2 x|x| + alpha x + 1/2, 1
 *                        (for x < -1/alpha, |x| <= 1/alpha, x > 1/alpha)
 *                        g'(x) = max(0, alpha - alpha^2 |x|)                            alpha = 1
 * ------------------------------------------------------------------------------------------- */

typedef enum snn_surrogate_kind {
    SNN_SURROGATE_SIGMOID = 0,
    SNN_SURROGATE_ATAN,
    SNN_SURROGATE_PIECEWISE_QUADRATIC,
    SNN_SURROGATE_COUNT
} snn_surrogate_kind;

typedef struct snn_surrogate {
    snn_surrogate_kind kind;
    float alpha; /* sharpness: larger alpha, narrower and taller g' */
} snn_surrogate;

/* The kind with its default alpha (4, 2, 1). */
snn_surrogate snn_surrogate_default(snn_surrogate_kind kind);
/* g(x) and g'(x) of a surrogate (host functions; the kernels use the same inline math). */
float snn_surrogate_g(snn_surrogate s, float x);
float snn_surrogate_grad(snn_surrogate s, float x);
/* "sigmoid", "atan", "piecewise_quadratic" */
const char *snn_surrogate_name(snn_surrogate_kind kind);
/* Parses a name above (or "pwq") into the kind with its default alpha. */
snn_status snn_surrogate_parse(const char *name, snn_surrogate *out);

/* ---------------------------------------------------------------------------------------------
 * Neuron configuration
 * ------------------------------------------------------------------------------------------- */

typedef enum snn_neuron_kind {
    SNN_NEURON_IF = 0,  /* integrate-and-fire: H = V + X */
    SNN_NEURON_LIF,     /* leaky: fixed tau */
    SNN_NEURON_PLIF,    /* ParametricLIF: 1/tau = sigmoid(w), w learned (Fang et al., ICCV 2021) */
    SNN_NEURON_STBIF,   /* spike-threshold bipolar IF (SpikeZIP-TF): a quantized ANN as an SNN */
    SNN_NEURON_RELU,    /* ANN activation: y = max(x, 0), no time dynamics (models run T = 1) */
    SNN_NEURON_QCLIP,   /* ANN activation: ST-BIF's L-level quantizer with a learned step (LSQ);
                           a QANN made of it converts to ST-BIF (nn/ann2snn.c) */
    SNN_NEURON_COUNT
} snn_neuron_kind;

typedef enum snn_reset_mode {
    SNN_RESET_HARD = 0, /* V = V_reset after a spike */
    SNN_RESET_SOFT,     /* V = H - V_th after a spike (the excess is kept) */
} snn_reset_mode;

typedef struct snn_neuron_config {
    snn_neuron_kind kind;
    float v_threshold;       /* V_th (IF, LIF, PLIF); default 1 */
    float v_reset;           /* hard reset target, also V[0]; ignored (taken as 0) by soft reset */
    snn_reset_mode reset;    /* IF, LIF, PLIF; default hard */
    bool detach_reset;       /* the S in the reset is a constant in backward; default off */
    snn_surrogate surrogate; /* default Sigmoid(alpha = 4) */
    float tau;               /* LIF: the time constant (> 1); PLIF: tau0, the initial value */
    bool decay_input;        /* LIF, PLIF: the input is divided by tau too; default on */
    /* ST-BIF: V[0] = theta/2, output theta S with S in {-1, 0, +1}, A = sum of S kept in
     * [A_min, A_max] = [0, levels - 1], or [-levels/2, levels/2 - 1] when symmetric. Its reset
     * is always "subtract theta" (soft); detach_reset applies. The surrogate's alpha is measured
     * in units of 1/theta: the kernel uses slope alpha / theta (the paper's 4/theta).
     * QCLIP: the same levels and bounds; theta is the initial value of the learned step. */
    float theta;             /* default 1 */
    int levels;              /* L >= 2; default 8 */
    bool symmetric;          /* default off (unsigned levels) */
} snn_neuron_config;

/* The defaults above for `kind`. */
snn_neuron_config snn_neuron_config_default(snn_neuron_kind kind);
/* SNN_OK, or SNN_ERR_ARGUMENT with a message naming `fn` and the bad field. */
snn_status snn_neuron_config_check(const char *fn, const snn_neuron_config *cfg);
/* "if", "lif", "plif", "stbif", "relu", "qclip" */
const char *snn_neuron_kind_name(snn_neuron_kind kind);
snn_status snn_neuron_kind_parse(const char *name, snn_neuron_kind *out);
/* ST-BIF bounds of the spike count A for a config (QCLIP: the bounds of its levels). */
void snn_stbif_bounds(const snn_neuron_config *cfg, int *a_min, int *a_max);
/* True for the ANN activations (RELU, QCLIP): stateless, a model made of them runs T = 1. */
bool snn_neuron_is_ann(snn_neuron_kind kind);

/* ---------------------------------------------------------------------------------------------
 * ParametricLIF's parameter
 * ------------------------------------------------------------------------------------------- */

/* OWNED 1-element tensor w = -ln(tau0 - 1), so that 1/tau = sigmoid(w) starts at 1/tau0;
 * requires_grad is set. tau0 > 1. Free with snn_tensor_free. NULL on error. */
snn_tensor *snn_plif_param_new(float tau0, snn_device device);
/* The tau that w stands for: 1 / sigmoid(w). NaN on error. */
float snn_plif_tau(const snn_tensor *w);

/* ---------------------------------------------------------------------------------------------
 * Multi-step neurons (one fused autograd node)
 * ------------------------------------------------------------------------------------------- */

/* x: (T, N, ...) input currents. Returns the spikes, a STEP tensor of x's shape (0/1; for
 * ST-BIF theta * S in {-theta, 0, theta}). The state starts at V[0] = V_reset (theta/2 for
 * ST-BIF) on every call. The ANN kinds (RELU, QCLIP) have no state: they run snn_relu or
 * snn_qclip on x, and their activity is NULL (no spikes to count).
 *   w:        PLIF's parameter (snn_plif_param_new), QCLIP's step (snn_qclip_step_new); must
 *             be NULL for the other kinds.
 *   activity: when not NULL, receives a STEP tensor (T*N, C) holding, per time step, sample
 *             and channel, the number of elements that spiked in that channel's plane (nonzero
 *             outputs for ST-BIF). C is dim 2 of x ((T, N, C, H, W): plane H*W; (T, N, F): C = F,
 *             plane 1; (T, N): C = 1). Not differentiable. The sparse pass reads it.
 * Records one tape node when x or w requires grad; in no-grad mode saves nothing. */
snn_tensor *snn_neuron_multistep(snn_tensor *x, const snn_neuron_config *cfg, snn_tensor *w,
                                 snn_tensor **activity);

/* Firing rate of an activity tensor: sum of counts / (elements of the input). NaN on error. */
float snn_activity_rate(const snn_tensor *activity, int64_t input_numel);

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

#define SNN_QCLIP_MIN_STEP 1e-6f

/* OWNED 1-element step tensor holding `step` (> 0), requires_grad set. NULL on error. */
snn_tensor *snn_qclip_step_new(float step, snn_device device);
/* x: (T, N, ...); step: 1 element on x's device; cfg: a QCLIP config (levels, symmetric). */
snn_tensor *snn_qclip(snn_tensor *x, snn_tensor *step, const snn_neuron_config *cfg);

/* ---------------------------------------------------------------------------------------------
 * The max-pool of a converted SNN (nn/ann2snn.c): the max-pool of the running sums of its
 * input, emitted as changes, so that what it has emitted by step t is the max-pool of all it
 * has received (a QANN's max-pool sees the whole quantized activation, an SNN only its spikes
 * so far; the max of sums is not the sum of per-step maxima):
 *
 *   S[t] = x[0] + ... + x[t]            y[t] = P(S[t]) - P(S[t-1]),  P(S[-1]) = 0
 *   so  y[0] + ... + y[t] = P(S[t])     (P: K x K max-pool at stride >= K, no padding)
 *
 * x: (T, N, C, H, W). A plane that is silent at step t stays silent in y[t]. Differentiable.
 * ------------------------------------------------------------------------------------------- */
snn_tensor *snn_running_max_pool2d(snn_tensor *x, int kernel, int stride);

/* ---------------------------------------------------------------------------------------------
 * Single-step neurons: one time step per call, state kept by the caller.
 *
 *     snn_neuron_state st = {0};                  // or snn_neuron_state_reset(&st)
 *     snn_step_begin();
 *     for (int t = 0; t < T; t++) s[t] = snn_neuron_step(x[t], &cfg, NULL, &st, NULL);
 *     snn_step_end();                             // st is stale now: the next call resets it
 *
 * The state's tensors are STEP tensors: they die with the step that made them, and a state
 * from a closed step is treated as reset. Each call is differentiable (through x, w and the
 * previous V) when grad mode is on, so BPTT works step by step too.
 * ------------------------------------------------------------------------------------------- */

typedef struct snn_neuron_state {
    snn_tensor *v;     /* (N, ...) membrane after the last step; NULL = reset */
    snn_tensor *a;     /* ST-BIF: (N, ...) spike count A; NULL otherwise */
    uint64_t step_id;  /* the step that made v and a (snn_step_id) */
} snn_neuron_state;

/* Back to V = V_reset (theta/2, A = 0 for ST-BIF); a new batch size is fine afterwards. */
void snn_neuron_state_reset(snn_neuron_state *state);

/* x: (N, ...) one time step. Returns the spikes (x's shape) and advances `state`.
 * activity as in snn_neuron_multistep, with shape (N, C). A state of another shape than x is an
 * error (reset it between batches). */
snn_tensor *snn_neuron_step(snn_tensor *x, const snn_neuron_config *cfg, snn_tensor *w,
                            snn_neuron_state *state, snn_tensor **activity);

/* ---------------------------------------------------------------------------------------------
 * The spike function as a primitive op, for composing neurons from primitives (the unrolled
 * reference the fused kernels are tested against, or new neuron models):
 *   forward  y = Heaviside(x) = (x >= 0 ? 1 : 0)
 *   backward dx += dy * g'(x) of the surrogate
 * ------------------------------------------------------------------------------------------- */
snn_tensor *snn_heaviside(snn_tensor *x, snn_surrogate surrogate);

#ifdef __cplusplus
}
#endif

#endif /* SNN_NEURONS_H */
