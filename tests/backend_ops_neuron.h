/*
 * backend_ops_neuron.h - the parity harness's cases of the multi-step neuron entries of
 * kernels/neuron_kernels.h: lif_forward / lif_backward (IF, LIF, PLIF) and stbif_forward /
 * stbif_backward (part of backend_ops.h; ALIF's alif_forward / alif_backward are in
 * backend_ops_neuron_alif.h, the batch-norm-fed kernels in backend_ops_neuron_bn.h, the
 * stateless ones in backend_ops_neuron_misc.h).
 *
 * Configs: every neuron (IF; LIF and PLIF with decay_input on and off; ST-BIF with 4 and 8
 * levels, unsigned and symmetric) with every surrogate, hard and soft reset, detach_reset on
 * and off, thresholds and reset targets other than 1 and 0 (neuron_test_inputs.h), on a small
 * 4-D shape and a 2-D one with T = 17; then shapes for a few configs: T = 1, one image,
 * planes not a multiple of the CPU's 256-element chunks, planes of one element, and sizes past
 * the CPU's one-thread grain.
 * Variants (neuron_variant) exercise what the contracts allow: an initial state, v_last
 * aliasing v_init, no h_seq (no-grad), NULL gradient outputs, dspike NULL.
 *
 * What must agree: spikes, H, V_last, A_last and activity bit for bit (the forward evaluates
 * the same neuron_math.h expressions in the same order on every table; the CUDA kernels round
 * explicitly so that nvcc cannot contract them); gradients as sums (BPTT carries the rounding
 * of the fast exp and of fma contraction through T steps); PLIF's dw, a sum over every element
 * and step whose terms cancel, relative to the sum of its terms' magnitudes.
 */

_Static_assert(sizeof(snn_neuron_kernels) == 17 * sizeof(void *),
               "snn_neuron_kernels has a new entry: give it cases in tests/backend_ops_neuron*.h");

#define BO_HAS_NEURON(entry)                                                                  \
    static bool bo_has_##entry(const bo_side *s) { return s->nk->entry != NULL; }

typedef enum neuron_variant {
    NV_PLAIN,   /* forward: every output, no state;  backward: dx (and dw), dspike */
    NV_STATE,   /* forward: V_init (A_init), every output;  backward: also dV_init, dV_last */
    NV_ALIAS,   /* forward: v_last aliasing v_init, no h_seq or activity;
                 * backward: dspike and dx NULL, only dV_last reaches the neuron */
    NV_NOGRAD,  /* forward: h_seq and v_last NULL;  backward (PLIF): dw alone */
} neuron_variant;

static const char *const variant_names[4] = {"", " state", " aliased state", " no-grad"};
static const char *const variant_names_bwd[4] = {"", " state", " dV_last only", " dw only"};

typedef struct neuron_params {
    snn_neuron_config cfg;
    snn_neuron_dims d;
    neuron_variant variant;
    int residual;       /* lif_bn: 0 none, 1 floats, 2 bits, 3 a batch-norm's (residual_bn) */
    bool bn;            /* lif_bn: a batch-norm in front (else X = x + residual) */
    int outputs;        /* lif_bn_forward: bit 0 spike, 1 spike_bits, 2 h_seq, 3 activity */
    bool repeated;      /* lif_bn: x (and backward's dX) one step, read at every step */
    bool x_bf16;        /* lif_bn: x rounded to bf16 and given to the kernel as its bits */
} neuron_params;

static int64_t neuron_step(const neuron_params *p) { return snn_neuron_dims_step(&p->d); }
static int64_t neuron_numel(const neuron_params *p) { return p->d.T * neuron_step(p); }
static bool is_stbif(const neuron_params *p) { return p->cfg.kind == SNN_NEURON_STBIF; }
static bool is_plif(const neuron_params *p) { return p->cfg.kind == SNN_NEURON_PLIF; }

/* A buffer the case does not use: passed as NULL, never compared. */
static int bo_unused(bo_case *c, const char *name)
{
    return bo_buffer(c, name, BO_F32, BO_REF, BO_CUSTOM, 1);
}

/* Input currents that make a fair share of the neurons fire (neuron_test_inputs.h). */
static int neuron_currents(bo_case *c, const neuron_params *p)
{
    const int x = bo_in_uniform(c, "x", neuron_numel(p), 0.0f, 0.0f);
    neuron_test_currents(bo_f32(c, x), neuron_numel(p), &p->cfg, &bo_rng);
    return x;
}

/* V_init (and ST-BIF's A_init: whole numbers in [A_min, A_max]) when the variant has state */
static void neuron_state(bo_case *c, const neuron_params *p, const snn_neuron_params *q)
{
    const int64_t M = neuron_step(p);
    if (p->variant != NV_STATE && p->variant != NV_ALIAS) {
        bo_unused(c, "v_init"), bo_unused(c, "a_init");
        return;
    }
    const float top = is_stbif(p) ? p->cfg.theta : p->cfg.v_threshold;
    bo_in_uniform(c, "v_init", M, -0.5f * top, (is_stbif(p) ? 1.5f : 1.0f) * top);
    if (!is_stbif(p)) {
        bo_unused(c, "a_init");
        return;
    }
    float *a = bo_f32(c, bo_in_uniform(c, "a_init", M, 0.0f, 0.0f));
    for (int64_t i = 0; i < M; i++)
        a[i] = q->a_min + (float)snn_rng_below(&bo_rng, (uint64_t)(q->a_max - q->a_min + 1.0f));
}

/* PLIF's w for its tau0 (as snn_plif_param_new makes it), or unused */
static int neuron_w(bo_case *c, const neuron_params *p)
{
    if (!is_plif(p)) return bo_unused(c, "w");
    const float w = -logf(p->cfg.tau - 1.0f);
    return bo_in_copy(c, "w", BO_F32, &w, 1);
}

static snn_neuron_forward_fn neuron_forward_of(const bo_side *s, const neuron_params *p)
{
    return is_stbif(p) ? s->nk->stbif_forward : s->nk->lif_forward;
}

static bool bo_has_neuron_forward(const bo_side *s)
{
    return s->nk->lif_forward != NULL && s->nk->stbif_forward != NULL;
}
static bool bo_has_neuron_backward(const bo_side *s)
{
    return s->nk->lif_backward != NULL && s->nk->stbif_backward != NULL;
}

/* forward buffers: spike 0, h_seq 1, v_last 2, a_last 3, activity 4, x 5, v_init 6,
 * a_init 7, w 8 (NV_ALIAS: v_last and a_last are the state, updated in place) */
static void neuron_fwd_setup(bo_case *c)
{
    const neuron_params *p = BO_PARAMS(c, neuron_params);
    const snn_neuron_params q = snn_neuron_params_from(&p->cfg);
    const int64_t n = neuron_numel(p), M = neuron_step(p), planes = p->d.N * p->d.C;
    bo_out(c, "spike", BO_F32, n, BO_EXACT);
    if (p->variant == NV_ALIAS || p->variant == NV_NOGRAD) bo_unused(c, "h_seq");
    else bo_out(c, "h_seq", BO_F32, n, BO_EXACT);
    if (p->variant == NV_NOGRAD) bo_unused(c, "v_last");
    else bo_out(c, "v_last", BO_F32, M, BO_EXACT);
    if (is_stbif(p) && p->variant != NV_NOGRAD) bo_out(c, "a_last", BO_F32, M, BO_EXACT);
    else bo_unused(c, "a_last");
    if (p->variant == NV_ALIAS) bo_unused(c, "activity");
    else bo_out(c, "activity", BO_F32, p->d.T * planes, BO_EXACT);
    neuron_currents(c, p);
    neuron_state(c, p, &q);
    neuron_w(c, p);
    if (p->variant == NV_ALIAS) { /* the state is read and written in place: v_last (2) and
                                   * a_last (3) take over v_init's (6) and a_init's (7) values */
        for (int k = 0; k < (is_stbif(p) ? 2 : 1); k++) {
            bo_buf *state = &c->buf[2 + k], *init = &c->buf[6 + k];
            *state = *init;
            state->name = k ? "a_last = a_init" : "v_last = v_init";
            state->role = BO_ACC;
            *init = (bo_buf){k ? "a_init" : "v_init", BO_F32, BO_REF, BO_CUSTOM, false, 1, 0.0,
                             NULL};
        }
    }
}

static bool neuron_fwd_run(const bo_case *c, bo_side *s)
{
    const neuron_params *p = BO_PARAMS(c, neuron_params);
    const snn_neuron_params q = snn_neuron_params_from(&p->cfg);
    void **a = s->arg;
    const bool alias = p->variant == NV_ALIAS, nograd = p->variant == NV_NOGRAD;
    const bool stbif = is_stbif(p);
    float *v_init = alias ? a[2] : p->variant == NV_STATE ? a[6] : NULL;
    float *a_init = !stbif ? NULL : alias ? a[3] : p->variant == NV_STATE ? a[7] : NULL;
    neuron_forward_of(s, p)(a[0], alias || nograd ? NULL : a[1], nograd ? NULL : a[2],
                            stbif && !nograd ? a[3] : NULL, alias ? NULL : a[4], a[5], v_init,
                            a_init, is_plif(p) ? a[8] : NULL, &q, &p->d);
    return true;
}
static const bo_op op_neuron_forward = {"lif_forward/stbif_forward", bo_has_neuron_forward,
                                        neuron_fwd_setup, neuron_fwd_run, NULL, false, 0};

/* backward buffers: dx 0, dv_init 1, dw 2, dspike 3, dv_last 4, h_seq 5, spike 6, x 7,
 * v_init 8, a_init 9, w 10; h_seq and spike from the reference's forward */
static void neuron_bwd_setup(bo_case *c)
{
    const neuron_params *p = BO_PARAMS(c, neuron_params);
    const snn_neuron_params q = snn_neuron_params_from(&p->cfg);
    const int64_t n = neuron_numel(p), M = neuron_step(p);
    const neuron_variant v = p->variant;
    const bool state = v == NV_STATE || v == NV_ALIAS;
    if (v == NV_ALIAS || v == NV_NOGRAD) bo_unused(c, "dx");
    else bo_acc(c, "dx", n, BO_SUM);
    if (state) bo_acc(c, "dv_init", M, BO_SUM);
    else bo_unused(c, "dv_init");
    const int dw = is_plif(p) ? bo_acc(c, "dw", 1, BO_SUM) : bo_unused(c, "dw");
    const int dspike = v == NV_ALIAS ? bo_unused(c, "dspike")
                                     : bo_in_normal(c, "dspike", n, 0.0f, 1.0f);
    const int dv_last = state ? bo_in_normal(c, "dv_last", M, 0.0f, 1.0f)
                              : bo_unused(c, "dv_last");
    const int h = bo_in_uniform(c, "h_seq", n, 0.0f, 0.0f);
    const int spike = bo_in_uniform(c, "spike", n, 0.0f, 0.0f);
    const int x = neuron_currents(c, p);
    neuron_state(c, p, &q);
    const int w = neuron_w(c, p);
    const float *v0 = state ? bo_f32(c, 8) : NULL;
    const float *a0 = state && is_stbif(p) ? bo_f32(c, 9) : NULL;
    const float *wp = is_plif(p) ? bo_f32(c, w) : NULL;
    (is_stbif(p) ? snn_stbif_forward_ref : snn_lif_forward_ref)(
        bo_f32(c, spike), bo_f32(c, h), NULL, NULL, NULL, bo_f32(c, x), v0, a0, wp, &q, &p->d);
    if (is_plif(p))
        c->buf[dw].scale = plif_dw_scale(&q, &p->d, bo_f32(c, h),
                                         v == NV_ALIAS ? NULL : bo_f32(c, dspike),
                                         state ? bo_f32(c, dv_last) : NULL, bo_f32(c, x), v0,
                                         wp[0]);
}

static bool neuron_bwd_run(const bo_case *c, bo_side *s)
{
    const neuron_params *p = BO_PARAMS(c, neuron_params);
    const snn_neuron_params q = snn_neuron_params_from(&p->cfg);
    void **a = s->arg;
    const neuron_variant v = p->variant;
    const bool state = v == NV_STATE || v == NV_ALIAS;
    const snn_neuron_backward_fn backward = is_stbif(p) ? s->nk->stbif_backward
                                                        : s->nk->lif_backward;
    backward(v == NV_ALIAS || v == NV_NOGRAD ? NULL : a[0], state ? a[1] : NULL,
             is_plif(p) ? a[2] : NULL, v == NV_ALIAS ? NULL : a[3], state ? a[4] : NULL, a[5],
             a[6], a[7], state ? a[8] : NULL, state && is_stbif(p) ? a[9] : NULL,
             is_plif(p) ? a[10] : NULL, &q, &p->d);
    return true;
}
static const bo_op op_neuron_backward = {"lif_backward/stbif_backward", bo_has_neuron_backward,
                                         neuron_bwd_setup, neuron_bwd_run, NULL, false, 0};

#include "backend_ops_neuron_alif.h"
#include "backend_ops_neuron_bn.h"
#include "backend_ops_neuron_misc.h"

/* ---- the list ------------------------------------------------------------------------------ */

static void neuron_add(bo_list *l, const snn_neuron_config *cfg, snn_neuron_dims d,
                       neuron_variant v, bool forward, bool backward)
{
    neuron_params p;
    memset(&p, 0, sizeof p);
    p.cfg = *cfg, p.d = d, p.variant = v;
    char name[96];
    neuron_test_name(name, sizeof name, cfg);
    if (forward)
        bo_add(l, &op_neuron_forward, &p, sizeof p, "%s (%lld, %lld, %lld, %lld)%s", name,
               (long long)d.T, (long long)d.N, (long long)d.C, (long long)d.plane,
               variant_names[v]);
    if (backward && !(v == NV_NOGRAD && cfg->kind != SNN_NEURON_PLIF))
        bo_add(l, &op_neuron_backward, &p, sizeof p, "%s (%lld, %lld, %lld, %lld)%s", name,
               (long long)d.T, (long long)d.N, (long long)d.C, (long long)d.plane,
               variant_names_bwd[v]);
}

static void bo_neuron_cases(bo_list *l)
{
    snn_neuron_config configs[NEURON_TEST_CONFIGS];
    const int count = neuron_test_configs(configs);
    const snn_neuron_dims small[] = {{4, 3, 5, 49}, {17, 2, 33, 1}};
    for (int i = 0; i < count; i++) {
        const snn_neuron_config *c = &configs[i];
        /* the forward reads neither the surrogate nor detach_reset: one of each suffices */
        const bool forward = c->surrogate.kind == SNN_SURROGATE_ATAN && !c->detach_reset;
        for (int s = 0; s < 2; s++)
            for (int v = NV_PLAIN; v <= NV_STATE; v++)
                neuron_add(l, c, small[s], (neuron_variant)v, forward, true);
        neuron_add(l, c, small[0], NV_ALIAS, forward, true);
        neuron_add(l, c, small[0], NV_NOGRAD, forward, true);
    }
    /* shapes, for a few configs: T = 1; one image; a plane of 37 x 41 (not a multiple of 256);
     * planes of 1; 256 and 512 elements a plane; past the CPU's grain; on CUDA (large cases)
     * a million elements a step too, grids of a thousand blocks */
    const snn_neuron_dims shapes[] = {{1, 1, 3, 37}, {1, 8, 16, 64}, {3, 2, 3, 37 * 41},
                                      {2, 4, 16, 256}, {5, 40, 1, 1}, {17, 1, 1, 300},
                                      {2, 8, 16, 512}, {2, 16, 64, 1024}};
    const int picks[] = {1, 14, 38, 52, 65, 80}; /* IF, LIF soft, PLIF x 2, ST-BIF x 2 */
    const size_t nshapes = sizeof shapes / sizeof shapes[0] - (bo_large_cases ? 0 : 1);
    for (size_t s = 0; s < nshapes; s++)
        for (size_t k = 0; k < sizeof picks / sizeof picks[0]; k++)
            for (int v = NV_PLAIN; v <= NV_STATE; v++)
                neuron_add(l, &configs[picks[k] % count], shapes[s], (neuron_variant)v, true,
                           true);
    bo_neuron_alif_cases(l, small, 2, shapes, (int)nshapes);
    bo_neuron_bn_cases(l);
    bo_neuron_misc_cases(l);
}
