/*
 * backend_ops_neuron_alif.h - the parity harness's cases of ALIF's entries of
 * kernels/neuron_kernels.h, alif_forward and alif_backward (part of backend_ops.h, included by
 * backend_ops_neuron.h, whose variants it follows).
 *
 * Configs: hard (V_reset 0 and -0.125) and soft reset x detach_reset x decay_input x the three
 * surrogates, with tau 2 or 3, tau_adapt 5 or 20, beta 1.8 or 0.4, V_th 1 or 0.75, on a small
 * 4-D shape and a 2-D one with T = 17; then the shapes of backend_ops_neuron.h (T = 1, one
 * image, planes not a multiple of the CPU's 256-element chunks, planes of one element, sizes
 * past the CPU's one-thread grain) for a few configs.
 * Variants: PLAIN (no state; backward dx from dspike), STATE (V_init and A_init in, every
 * output; backward also dV_init, dA_init from dV_last, dA_last), ALIAS (v_last and a_last are
 * v_init and a_init, updated in place, no h_seq / th_seq / activity; backward: dx and dspike
 * NULL, only dV_last and dA_last reach the neuron), NOGRAD (forward: h_seq, th_seq, v_last,
 * a_last NULL; backward: the NULLs mixed, dV_init and dV_last NULL but A's given).
 *
 * What must agree: spikes, H, the thresholds, V_last, A_last and activity bit for bit (the
 * same neuron_math.h expressions in the same order; alif.cu rounds explicitly); gradients as
 * sums (BPTT carries the fast exp's rounding and fma contraction through T steps).
 */

BO_HAS_NEURON(alif_forward)
BO_HAS_NEURON(alif_backward)

/* V_init in [-V_th/2, V_th) and A_init in [0, 1) (A is a decaying average of 0/1 spikes) when
 * the variant has state; else unused buffers */
static void alif_state(bo_case *c, const neuron_params *p)
{
    if (p->variant != NV_STATE && p->variant != NV_ALIAS) {
        bo_unused(c, "v_init"), bo_unused(c, "a_init");
        return;
    }
    bo_in_uniform(c, "v_init", neuron_step(p), -0.5f * p->cfg.v_threshold, p->cfg.v_threshold);
    bo_in_uniform(c, "a_init", neuron_step(p), 0.0f, 1.0f);
}

/* forward buffers: spike 0, h_seq 1, th_seq 2, v_last 3, a_last 4, activity 5, x 6, v_init 7,
 * a_init 8 (NV_ALIAS: v_last and a_last are the state, updated in place) */
static void alif_fwd_setup(bo_case *c)
{
    const neuron_params *p = BO_PARAMS(c, neuron_params);
    const int64_t n = neuron_numel(p), M = neuron_step(p), planes = p->d.N * p->d.C;
    const bool alias = p->variant == NV_ALIAS, nograd = p->variant == NV_NOGRAD;
    bo_out(c, "spike", BO_F32, n, BO_EXACT);
    if (alias || nograd) bo_unused(c, "h_seq"), bo_unused(c, "th_seq");
    else bo_out(c, "h_seq", BO_F32, n, BO_EXACT), bo_out(c, "th_seq", BO_F32, n, BO_EXACT);
    if (nograd) bo_unused(c, "v_last"), bo_unused(c, "a_last");
    else bo_out(c, "v_last", BO_F32, M, BO_EXACT), bo_out(c, "a_last", BO_F32, M, BO_EXACT);
    if (alias) bo_unused(c, "activity");
    else bo_out(c, "activity", BO_F32, p->d.T * planes, BO_EXACT);
    neuron_currents(c, p);
    alif_state(c, p);
    if (alias) /* v_last (3) and a_last (4) take over v_init's (7) and a_init's (8) values */
        for (int k = 0; k < 2; k++) {
            bo_buf *state = &c->buf[3 + k], *init = &c->buf[7 + k];
            *state = *init;
            state->name = k ? "a_last = a_init" : "v_last = v_init";
            state->role = BO_ACC;
            *init = (bo_buf){k ? "a_init" : "v_init", BO_F32, BO_REF, BO_CUSTOM, false, 1, 0.0,
                             NULL};
        }
}

static bool alif_fwd_run(const bo_case *c, bo_side *s)
{
    const neuron_params *p = BO_PARAMS(c, neuron_params);
    const snn_neuron_params q = snn_neuron_params_from(&p->cfg);
    void **a = s->arg;
    const bool alias = p->variant == NV_ALIAS, nograd = p->variant == NV_NOGRAD;
    const bool state = p->variant == NV_STATE;
    s->nk->alif_forward(a[0], alias || nograd ? NULL : a[1], alias || nograd ? NULL : a[2],
                        nograd ? NULL : a[3], nograd ? NULL : a[4], alias ? NULL : a[5], a[6],
                        alias ? a[3] : state ? a[7] : NULL, alias ? a[4] : state ? a[8] : NULL,
                        &q, &p->d);
    return true;
}
static const bo_op op_alif_forward = {"alif_forward", bo_has_alif_forward, alif_fwd_setup,
                                      alif_fwd_run, NULL, false, 0};

/* backward buffers: dx 0, dv_init 1, da_init 2, dspike 3, dv_last 4, da_last 5, h_seq 6,
 * th_seq 7, x 8, v_init 9, a_init 10; h_seq and th_seq from the reference's forward */
static void alif_bwd_setup(bo_case *c)
{
    const neuron_params *p = BO_PARAMS(c, neuron_params);
    const snn_neuron_params q = snn_neuron_params_from(&p->cfg);
    const int64_t n = neuron_numel(p), M = neuron_step(p);
    const neuron_variant v = p->variant;
    const bool state = v == NV_STATE || v == NV_ALIAS;
    if (v == NV_ALIAS) bo_unused(c, "dx");
    else bo_acc(c, "dx", n, BO_SUM);
    if (state) bo_acc(c, "dv_init", M, BO_SUM);
    else bo_unused(c, "dv_init");
    if (state || v == NV_NOGRAD) bo_acc(c, "da_init", M, BO_SUM);
    else bo_unused(c, "da_init");
    if (v == NV_ALIAS) bo_unused(c, "dspike");
    else bo_in_normal(c, "dspike", n, 0.0f, 1.0f);
    if (state) bo_in_normal(c, "dv_last", M, 0.0f, 1.0f);
    else bo_unused(c, "dv_last");
    if (state || v == NV_NOGRAD) bo_in_normal(c, "da_last", M, 0.0f, 1.0f);
    else bo_unused(c, "da_last");
    const int h = bo_in_uniform(c, "h_seq", n, 0.0f, 0.0f);
    const int th = bo_in_uniform(c, "th_seq", n, 0.0f, 0.0f);
    const int x = neuron_currents(c, p);
    alif_state(c, p);
    float *spike = malloc((size_t)(n > 0 ? n : 1) * sizeof *spike); /* not compared */
    SNN_ASSERT(spike);
    snn_alif_forward_ref(spike, bo_f32(c, h), bo_f32(c, th), NULL, NULL, NULL, bo_f32(c, x),
                         state ? bo_f32(c, 9) : NULL, state ? bo_f32(c, 10) : NULL, &q, &p->d);
    free(spike);
}

static bool alif_bwd_run(const bo_case *c, bo_side *s)
{
    const neuron_params *p = BO_PARAMS(c, neuron_params);
    const snn_neuron_params q = snn_neuron_params_from(&p->cfg);
    void **a = s->arg;
    const neuron_variant v = p->variant;
    const bool state = v == NV_STATE || v == NV_ALIAS, a_grads = state || v == NV_NOGRAD;
    s->nk->alif_backward(v == NV_ALIAS ? NULL : a[0], state ? a[1] : NULL,
                         a_grads ? a[2] : NULL, v == NV_ALIAS ? NULL : a[3],
                         state ? a[4] : NULL, a_grads ? a[5] : NULL, a[6], a[7], &q, &p->d);
    return true;
}
static const bo_op op_alif_backward = {"alif_backward", bo_has_alif_backward, alif_bwd_setup,
                                       alif_bwd_run, NULL, false, 0};

static const char *const alif_variant_names_bwd[4] = {"", " state", " dV/dA_last only",
                                                       " dA, no dV"};

static void alif_add(bo_list *l, const snn_neuron_config *cfg, snn_neuron_dims d,
                     neuron_variant v, bool forward)
{
    neuron_params p;
    memset(&p, 0, sizeof p);
    p.cfg = *cfg, p.d = d, p.variant = v;
    char full[160]; /* short: the label has 112 characters */
    snprintf(full, sizeof full, "alif%s %.4s %s%s vth=%g vr=%g tau=%g ta=%g b=%g",
             cfg->decay_input ? "" : "(no di)", snn_surrogate_name(cfg->surrogate.kind),
             cfg->reset == SNN_RESET_SOFT ? "soft" : "hard", cfg->detach_reset ? " detach" : "",
             (double)cfg->v_threshold, (double)cfg->v_reset, (double)cfg->tau,
             (double)cfg->tau_adapt, (double)cfg->beta);
    if (forward)
        bo_add(l, &op_alif_forward, &p, sizeof p, "%s (%lld, %lld, %lld, %lld)%s", full,
               (long long)d.T, (long long)d.N, (long long)d.C, (long long)d.plane,
               variant_names[v]);
    bo_add(l, &op_alif_backward, &p, sizeof p, "%s (%lld, %lld, %lld, %lld)%s", full,
           (long long)d.T, (long long)d.N, (long long)d.C, (long long)d.plane,
           alif_variant_names_bwd[v]);
}

/* The 24 ALIF configs (see the file header); returns the count. */
static int alif_test_configs(snn_neuron_config out[24])
{
    int n = 0;
    for (int sg = 0; sg < SNN_SURROGATE_COUNT; sg++)
        for (int reset = 0; reset < 2; reset++)
            for (int detach = 0; detach < 2; detach++)
                for (int decay = 0; decay < 2; decay++) {
                    snn_neuron_config c = snn_neuron_config_default(SNN_NEURON_ALIF);
                    c.surrogate = snn_surrogate_default((snn_surrogate_kind)sg);
                    c.reset = reset ? SNN_RESET_SOFT : SNN_RESET_HARD;
                    c.detach_reset = detach != 0;
                    c.decay_input = decay == 0;
                    c.tau = n % 2 ? 3.0f : 2.0f;
                    c.tau_adapt = n % 4 < 2 ? 5.0f : 20.0f;
                    c.beta = n % 3 ? 1.8f : 0.4f;
                    if (n % 5 == 1) c.v_reset = -0.125f;
                    if (n % 3 == 1) c.v_threshold = 0.75f;
                    out[n++] = c;
                }
    return n;
}

static void bo_neuron_alif_cases(bo_list *l, const snn_neuron_dims *small, int nsmall,
                                 const snn_neuron_dims *shapes, int nshapes)
{
    snn_neuron_config configs[24];
    const int count = alif_test_configs(configs);
    for (int i = 0; i < count; i++) {
        const snn_neuron_config *c = &configs[i];
        /* the forward reads neither the surrogate nor detach_reset: one of each suffices */
        const bool forward = c->surrogate.kind == SNN_SURROGATE_ATAN && !c->detach_reset;
        for (int s = 0; s < nsmall; s++)
            for (int v = NV_PLAIN; v <= NV_STATE; v++)
                alif_add(l, c, small[s], (neuron_variant)v, forward);
        alif_add(l, c, small[0], NV_ALIAS, forward);
        alif_add(l, c, small[0], NV_NOGRAD, forward);
    }
    const int picks[] = {1, 6, 13, 23}; /* hard / soft, detach, decay_input on / off */
    for (int s = 0; s < nshapes; s++)
        for (size_t k = 0; k < sizeof picks / sizeof picks[0]; k++)
            for (int v = NV_PLAIN; v <= NV_STATE; v++)
                alif_add(l, &configs[picks[k]], shapes[s], (neuron_variant)v, true);
}
