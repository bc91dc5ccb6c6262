/*
 * neuron_math.h - one time step of one neuron element, forward and backward, as inline
 * functions shared by the reference kernels (kernels/ref/lif.c, stbif.c, qclip.c), the fast
 * CPU kernels (kernels/cpu/) and the CUDA kernels (internal). The kernels are loops around
 * these; the equations live here once (docs/neurons.md derives them).
 *
 * IF / LIF / ParametricLIF, per element (k = 1/tau, or sigmoid(w) for PLIF):
 *   charge   IF          H = V + X
 *            LIF         H = V + (X - (V - V_reset)) / tau        decay_input
 *                        H = V - (V - V_reset) / tau + X          no decay_input
 *            PLIF        the same with "* k" for "/ tau"
 *   fire     S = Heaviside(H - V_th)  (1 when H >= V_th)
 *   reset    hard V = H (1 - S) + V_reset S      soft V = H - V_th S   (V_reset = 0 when soft)
 * Backward of one step, with G_S = dL/dS[t] and G_V = dL/dV[t] (carried back from t + 1):
 *   g = g'(H - V_th)
 *   dV/dH = (1 - S) + (V_reset - H) g   hard      (1 - S when detach_reset)
 *           1 - V_th g                  soft      (1 when detach_reset)
 *   G_H = G_S g + G_V dV/dH
 *   G_X = G_H dH/dX,   dH/dX = k with decay_input (IF, or no decay_input: 1)
 *   G_V[t-1] = G_H dH/dV,   dH/dV = 1 - k (IF: 1)
 *   PLIF: dL/dk += G_H dH/dk,   dH/dk = X - (V[t-1] - V_reset)
 *                               (no decay_input: -(V[t-1] - V_reset))
 *
 * ALIF, adaptive LIF (Bellec et al. 2018, LSNN), per element, A the adaptation (A[-1] = 0 or
 * the caller's state), rho = exp(-1 / tau_adapt):
 *   charge   H = LIF's charge with tau (k = 1/tau)
 *   thresh   th = V_th + beta A[t-1]
 *   fire     S = Heaviside(H - th)  (1 when H >= th)
 *   reset    hard V = H (1 - S) + V_reset S      soft V = H - th S   (V_reset = 0 when soft)
 *   adapt    A = rho A[t-1] + (1 - rho) S
 * Backward of one step, G_S = dL/dS[t] from the output, G_V = dL/dV[t], G_A = dL/dA[t]:
 *   g = g'(H - th),  keep = 0 with detach_reset, else 1
 *   hard: dV/dH = 1 - S, dV/dS = V_reset - H, dV/dth = 0;  soft: dV/dH = 1, dV/dS = -th,
 *         dV/dth = -S
 *   G_S' = G_S + (1 - rho) G_A + keep G_V dV/dS        (the total dL/dS[t])
 *   G_H = G_S' g + G_V dV/dH,   G_th = -G_S' g + G_V dV/dth
 *   G_X = G_H dH/dX,  G_V[t-1] = G_H (1 - k),  G_A[t-1] = rho G_A + beta G_th
 * detach_reset cuts only the reset's dependence on S; the adaptation keeps its gradient.
 *
 * ST-BIF (SpikeZIP-TF), with A the spikes emitted so far:
 *   H = V + X
 *   S = +1 if H >= theta and A < A_max;  -1 if H < 0 and A > A_min;  else 0
 *   V = H - theta S,  A = A + S,  output Y = theta S
 * Backward: the two gates (A < A_max, A > A_min) are constants; each threshold gets a sigmoid
 * surrogate of slope alpha / theta:
 *   dS/dH = [A < A_max] g'(H - theta) + [A > A_min] g'(H)
 *   dV/dH = 1 - theta dS/dH   (1 with detach_reset),   G_H = G_Y theta dS/dH + G_V dV/dH
 *   G_X = G_H,  G_V[t-1] = G_H
 *
 * QCLIP, the ANN quantizer ST-BIF converges to (stateless; LSQ's straight-through backward):
 *   y = s clip(floor(x/s + 1/2), A_min, A_max);  dy/dx = [A_min <= x/s <= A_max]
 *   dy/ds = floor(x/s + 1/2) - x/s inside, A_min below, A_max above
 */
#ifndef SNN_NEURON_MATH_H
#define SNN_NEURON_MATH_H

#include "neuron_kernels.h"
#include "surrogate.h"

/* ---- IF / LIF / PLIF ---------------------------------------------------------------------- */

/* The decay factor k = 1/tau (LIF) or sigmoid(w) (PLIF); IF ignores it. */
SNN_HD static inline float snn_lif_decay(const snn_neuron_params *p, const float *w)
{
    return p->kind == SNN_NEURON_PLIF ? snn_sigmoidf(w[0]) : 1.0f / p->tau;
}

SNN_HD static inline float snn_lif_charge(const snn_neuron_params *p, float k, float v, float x)
{
    const float vr = p->v_reset;
    switch (p->kind) {
    case SNN_NEURON_LIF:
    case SNN_NEURON_ALIF: /* ALIF charges as LIF; only its threshold differs */
        return p->decay_input ? v + (x - (v - vr)) / p->tau : v - (v - vr) / p->tau + x;
    case SNN_NEURON_PLIF:
        return p->decay_input ? v + (x - (v - vr)) * k : v - (v - vr) * k + x;
    case SNN_NEURON_IF:
        return v + x;
    default: /* not a charging kind (the ops never send one here): NaN, never a silent IF */
        return NAN;
    }
}

SNN_HD static inline float snn_lif_fire(const snn_neuron_params *p, float h)
{
    return h >= p->v_th ? 1.0f : 0.0f; /* Heaviside(H - V_th) with Heaviside(0) = 1 */
}

SNN_HD static inline float snn_lif_reset(const snn_neuron_params *p, float h, float s)
{
    return p->soft_reset ? h - p->v_th * s : h * (1.0f - s) + p->v_reset * s;
}

/* dH/dX and dH/dV of the charge equation. */
SNN_HD static inline float snn_lif_dh_dx(const snn_neuron_params *p, float k)
{
    return (p->kind != SNN_NEURON_IF && p->decay_input) ? k : 1.0f;
}

SNN_HD static inline float snn_lif_dh_dv(const snn_neuron_params *p, float k)
{
    return p->kind == SNN_NEURON_IF ? 1.0f : 1.0f - k;
}

/* dH/dk for PLIF, given X[t] and V[t-1]. */
SNN_HD static inline float snn_lif_dh_dk(const snn_neuron_params *p, float x, float v_prev)
{
    const float takes_x = p->decay_input ? 1.0f : 0.0f; /* a factor, not a branch: vectorises */
    return x * takes_x - (v_prev - p->v_reset);
}

/* One backward step: returns G_H from G_S (gs), G_V (gv) and the saved H. */
SNN_HD static inline float snn_lif_grad_h(const snn_neuron_params *p, float h, float gs, float gv)
{
    const float s = snn_lif_fire(p, h);
    const float g = snn_surrogate_grad_inline(p->surrogate, p->alpha, h - p->v_th);
    /* detach_reset drops the reset's dependence on S: a 0/1 factor, not a branch, so that
     * the CPU loop vectorises (and the result is the same bit for bit) */
    const float keep = p->detach_reset ? 0.0f : 1.0f;
    const float dv_dh = p->soft_reset ? 1.0f - p->v_th * g * keep
                                      : (1.0f - s) + (p->v_reset - h) * g * keep;
    return gs * g + gv * dv_dh;
}

/* ---- ALIF (charge: snn_lif_charge; dH/dX, dH/dV: snn_lif_dh_dx, snn_lif_dh_dv) ------------- */

/* The threshold of this step from the adaptation after the previous one: V_th + beta A[t-1]. */
SNN_HD static inline float snn_alif_threshold(const snn_neuron_params *p, float a_prev)
{
    return p->v_th + p->beta * a_prev;
}

SNN_HD static inline float snn_alif_fire(float h, float th)
{
    return h >= th ? 1.0f : 0.0f; /* Heaviside(H - th) with Heaviside(0) = 1 */
}

SNN_HD static inline float snn_alif_reset(const snn_neuron_params *p, float h, float s, float th)
{
    return p->soft_reset ? h - th * s : h * (1.0f - s) + p->v_reset * s;
}

/* A[t] = rho A[t-1] + (1 - rho) S[t] */
SNN_HD static inline float snn_alif_adapt(const snn_neuron_params *p, float a_prev, float s)
{
    return p->rho * a_prev + (1.0f - p->rho) * s;
}

/* One backward step: returns G_H from G_S (gs, the output's gradient), G_V (gv), the saved H and
 * threshold th; *ga holds G_A = dL/dA[t] on entry and dL/dA[t-1] on return. */
SNN_HD static inline float snn_alif_grad_step(const snn_neuron_params *p, float h, float th,
                                              float gs, float gv, float *ga)
{
    const float s = snn_alif_fire(h, th);
    const float g = snn_surrogate_grad_inline(p->surrogate, p->alpha, h - th);
    /* 0/1 factors, not branches, so that the CPU loop vectorises */
    const float keep = p->detach_reset ? 0.0f : 1.0f;
    const float soft = p->soft_reset ? 1.0f : 0.0f, hard = 1.0f - soft;
    const float dv_ds = soft * -th + hard * (p->v_reset - h);
    const float dv_dh = soft + hard * (1.0f - s);
    const float dv_dth = soft * -s;
    const float gs_total = gs + (1.0f - p->rho) * *ga + keep * gv * dv_ds;
    const float gh = gs_total * g + gv * dv_dh;
    const float gth = -gs_total * g + gv * dv_dth;
    *ga = p->rho * *ga + p->beta * gth;
    return gh;
}

/* ---- ST-BIF ------------------------------------------------------------------------------- */

SNN_HD static inline float snn_stbif_fire(const snn_neuron_params *p, float h, float a)
{
    if (h >= p->theta && a < p->a_max) return 1.0f;
    if (h < 0.0f && a > p->a_min) return -1.0f;
    return 0.0f;
}

/* One backward step: G_H from G_Y (gy, the gradient of the output theta S), G_V, H and the
 * spike count before this step. */
SNN_HD static inline float snn_stbif_grad_h(const snn_neuron_params *p, float h, float a_prev,
                                            float gy, float gv)
{
    /* Written without branches (gates as 0/1 factors) so that the CPU loop vectorises. */
    const float up = a_prev < p->a_max ? 1.0f : 0.0f, down = a_prev > p->a_min ? 1.0f : 0.0f;
    const float ds_dh = up * snn_surrogate_grad_inline(p->surrogate, p->alpha, h - p->theta) +
                        down * snn_surrogate_grad_inline(p->surrogate, p->alpha, h);
    const float keep = p->detach_reset ? 0.0f : 1.0f;
    const float dv_dh = 1.0f - p->theta * ds_dh * keep;
    return gy * p->theta * ds_dh + gv * dv_dh;
}

/* ---- QCLIP (the quantizer ST-BIF replaces; qclip.c) ------------------------------------------
 * r = x / s, y = s clip(floor(r + 1/2), A_min, A_max). Division, add, floor, compare, multiply:
 * nothing for nvcc to contract, so the CUDA forward gives the CPU's bits. */

/* The step the quantizer uses: the learned one, kept away from 0. */
SNN_HD static inline float snn_qclip_step_value(float step)
{
    return step > SNN_QCLIP_MIN_STEP ? step : SNN_QCLIP_MIN_STEP;
}

/* The level of r = x / s: clip(floor(r + 1/2), A_min, A_max); NaN stays NaN. */
SNN_HD static inline float snn_qclip_level(const snn_neuron_params *p, float r)
{
    const float q = floorf(r + 0.5f);
    return q < p->a_min ? p->a_min : (q > p->a_max ? p->a_max : q);
}

/* LSQ's dy/ds at r = x / s: floor(r + 1/2) - r inside [A_min, A_max], the bound outside. */
SNN_HD static inline float snn_qclip_dy_ds(const snn_neuron_params *p, float r)
{
    if (r < p->a_min) return p->a_min;
    if (r > p->a_max) return p->a_max;
    return floorf(r + 0.5f) - r;
}

/* LSQ's dy/dx at r = x / s: 1 inside [A_min, A_max], 0 outside (and for NaN). */
SNN_HD static inline bool snn_qclip_passes(const snn_neuron_params *p, float r)
{
    return r >= p->a_min && r <= p->a_max;
}

#endif /* SNN_NEURON_MATH_H */
