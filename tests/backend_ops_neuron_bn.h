/*
 * backend_ops_neuron_bn.h - the parity harness's cases of lif_bn_forward and lif_bn_backward,
 * the IF / LIF kernels fed by a training-mode batch-norm and a residual (part of
 * backend_ops.h, through backend_ops_neuron.h). The reference table has no such fused entries:
 * its side runs what they fuse, the reference's batchnorm_normalise, the add (binary_forward;
 * residual bits unpacked first), lif_forward (lif_backward, axpy into dresidual), pack_bits.
 *
 * Why these outputs are compared differently. A device's fused kernel makes X with its own
 * batch-norm's rounding (kernels/neuron_kernels.h: the CPU splits the double mean into a float
 * head and tail, CUDA rounds it to float; the reference computes in double), so X and H may
 * differ from the reference's in the last bits, and where H lands within that much of V_th a
 * spike may legitimately flip, after which the element's whole trajectory differs. So:
 *   forward:  H as a sum (SUM), spikes equal, along each element's time line up to the first step
 *             whose spike differs; that step must have the reference's H within 1e-5 (relative)
 *             of V_th (an explained flip), and the element is not compared after it. Activity
 *             and the spike bits must be exactly those of the spikes the kernel wrote.
 *   backward: dX and dresidual as sums, except on elements whose reference H comes within that
 *             distance of V_th at some step (where a flip changes the gradient wholesale).
 * Either way at most 16 + M / 1000 elements may be set aside, and the count is printed.
 *
 * The carried state (snn_batchnorm_neuron_carry / _state) rides in the same input: forward
 * NV_STATE reads V_init and writes V_last, NV_ALIAS updates one state in place; backward
 * NV_STATE takes dS and dL/dV_last together (one recurrence on the GPU, two runs of
 * lif_backward in the op on the CPU) and writes V_last too (what the carry op's backward does,
 * neurons/bn_neuron.c), NV_ALIAS dL/dV_last alone, both adding dL/dV_init.
 * V_last and dV_init are compared as the other outputs, element by element, leaving out the
 * elements set aside above.
 *
 * The repeated stem (x_repeated, snn_batchnorm_neuron_repeat): x is one step (M), the
 * reference normalises it once and repeats it over T; backward's dX is (M), the reference's
 * per-step dX added from 0 in step order, as the repeat's backward does.
 *
 * x kept as bf16 (x_bf16: a third of the cases): x's values are rounded to bf16, the reference
 * reads them as floats and the device's kernel reads their bits (in.x NULL), so the two must
 * agree as closely as with floats.
 *
 * The residual made by a batch-norm (residual 3, residual_bn): the buffers rx, r_stats,
 * r_invstd, r_gamma, r_beta just before x_bf16; the reference normalises rx (its
 * batchnorm_normalise) and adds it, the device's kernel makes it as it loads rx. No dresidual:
 * the op takes dL/dresidual = dX (neurons/bn_neuron.c).
 */

BO_HAS_NEURON(lif_bn_forward)
BO_HAS_NEURON(lif_bn_backward)

/* Distance to V_th within which a spike may flip on rounding alone. */
static double bn_flip_zone(const snn_neuron_params *q, double h)
{
    return 1e-5 * fmax(1.0, fmax(fabs((double)q->v_th), fabs(h)));
}

/* The bn input's buffers from index `first` on: x, stats, invstd, gamma, beta, residual,
 * residual_bits (unused ones as bo_unused). X = BN(x) (+ residual) fires at a fair rate. */
static void bn_input_setup(bo_case *c, const neuron_params *p)
{
    const int64_t n = neuron_numel(p);
    const bn_params bp = {(int)((p->repeated ? 1 : p->d.T) * p->d.N), (int)p->d.C,
                          (int)p->d.plane, true, false, 0.5f, 0, 1, false};
    const int64_t x_numel = p->repeated ? neuron_step(p) : n;
    const int x = bo_in_normal(c, "x", x_numel, 0.5f, 1.0f);
    float *xv = bo_f32(c, x);
    for (int64_t e = 0; p->x_bf16 && e < x_numel; e++) /* the values kept as bf16 */
        xv[e] = snn_bf16_value(snn_bf16_bits(xv[e]));
    if (p->bn) {
        const int stats = bo_buffer(c, "stats", BO_F64, BO_IN, BO_EXACT, 3 * p->d.C);
        const int invstd = bo_in_uniform(c, "invstd", p->d.C, 0.0f, 0.0f);
        bn_merged(c->buf[stats].init, bo_f32(c, invstd), bo_f32(c, x), &bp);
        bo_in_uniform(c, "gamma", p->d.C, 0.8f, 1.6f);
        bo_in_uniform(c, "beta", p->d.C, 0.4f, 1.2f);
    } else {
        bo_unused(c, "stats"), bo_unused(c, "invstd"), bo_unused(c, "gamma");
        bo_unused(c, "beta");
    }
    if (p->residual == 1) bo_in_uniform(c, "residual", n, -0.5f, 1.0f);
    else bo_unused(c, "residual");
    if (p->residual == 2) {
        uint32_t *bits = c->buf[bo_in_words(c, "residual_bits", (n + 31) / 32)].init;
        if (n % 32) bits[n / 32] &= (1u << (n % 32)) - 1u;
    } else {
        bo_unused(c, "residual_bits");
    }
}

/* With residual 3, the residual's batch-norm's buffers (the file comment), before x_bf16 */
static void bn_residual_setup(bo_case *c, const neuron_params *p)
{
    if (p->residual != 3) return;
    const int64_t n = neuron_numel(p);
    const bn_params bp = {(int)(p->d.T * p->d.N), (int)p->d.C, (int)p->d.plane, true, false,
                          0.5f, 0, 1, false};
    const int rx = bo_in_normal(c, "rx", n, -0.3f, 0.8f);
    const int stats = bo_buffer(c, "r_stats", BO_F64, BO_IN, BO_EXACT, 3 * p->d.C);
    const int invstd = bo_in_uniform(c, "r_invstd", p->d.C, 0.0f, 0.0f);
    bn_merged(c->buf[stats].init, bo_f32(c, invstd), bo_f32(c, rx), &bp);
    bo_in_uniform(c, "r_gamma", p->d.C, 0.5f, 1.2f);
    bo_in_uniform(c, "r_beta", p->d.C, -0.4f, 0.3f);
}

/* A side's residual_bn from those buffers (in->residual_bn points to *r), where the case has it */
static void bn_residual_input(const bo_case *c, const bo_side *s, const neuron_params *p,
                              snn_bn_residual *r, snn_neuron_bn_input *in)
{
    if (p->residual != 3) return;
    const int first = c->nbuf - 5 - (p->x_bf16 ? 1 : 0);
    *r = (snn_bn_residual){.x = s->arg[first], .stats = s->arg[first + 1],
                           .invstd = s->arg[first + 2], .gamma = s->arg[first + 3],
                           .beta = s->arg[first + 4]};
    in->residual_bn = r;
}

/* With x_bf16, the last buffer: x's bits as bf16 (x, buffer `x`, holds their values: the
 * reference reads those); the device's kernel gets these with in.x NULL (bn_input_x). */
static void bn_x_bf16_setup(bo_case *c, const neuron_params *p, int x)
{
    if (!p->x_bf16) return;
    const int64_t x_numel = p->repeated ? neuron_step(p) : neuron_numel(p);
    const int w = bo_buffer(c, "x_bf16", BO_U32, BO_IN, BO_EXACT, (x_numel + 1) / 2);
    uint16_t *bits = c->buf[w].init;
    const float *v = bo_f32(c, x);
    for (int64_t e = 0; e < x_numel; e++) bits[e] = snn_bf16_bits(v[e]);
}

/* A device side's x: the bf16 bits where the case gives them */
static void bn_input_x(const bo_case *c, const bo_side *s, const neuron_params *p,
                       snn_neuron_bn_input *in)
{
    if (!p->x_bf16 || s->is_ref) return;
    in->x = NULL;
    in->x_bf16 = s->arg[c->nbuf - 1];
}

/* Whether a case carries the membrane state (the file comment). */
static bool bn_carries(const neuron_params *p)
{
    return p->variant == NV_STATE || p->variant == NV_ALIAS;
}

/* The snn_neuron_bn_input of a side, from the buffers at `first` (bn_input_setup's order); the
 * state's fields stay NULL for the caller to set. */
static snn_neuron_bn_input bn_input_of(const neuron_params *p, void *const *a, int first)
{
    const snn_neuron_bn_input in = {.x = a[first], .stats = p->bn ? a[first + 1] : NULL,
                                    .invstd = p->bn ? a[first + 2] : NULL,
                                    .gamma = p->bn ? a[first + 3] : NULL,
                                    .beta = p->bn ? a[first + 4] : NULL,
                                    .residual = p->residual == 1 ? a[first + 5] : NULL,
                                    .residual_bits = p->residual == 2 ? a[first + 6] : NULL,
                                    .x_repeated = p->repeated};
    return in;
}

/* A per-element output (V_last, dV_init: M floats) against the reference, SUM's tolerance
 * scaled by the largest change from its start; elements marked in `skip` left out. Returns the
 * worst ratio, or infinity with `why` set. */
static double bn_state_compare(const bo_buf *b, const float *g, const float *r,
                               const bool *skip, char *why, size_t why_size)
{
    const bo_tol tol = bo_tolerance_of(BO_SUM, NULL, NULL);
    const float *start = b->init;
    double scale = 0.0, worst = 0.0;
    for (int64_t i = 0; i < b->n; i++)
        scale = fmax(scale, fabs((double)r[i] - (start ? (double)start[i] : 0.0)));
    for (int64_t i = 0; i < b->n; i++) {
        if (skip[i]) continue;
        const double ratio = bo_is_poison(g, BO_F32, i) ? (double)INFINITY
                             : bo_ratio((double)g[i], (double)r[i],
                                        start ? (double)start[i] : 0.0, scale, &tol, 0x1.0p-23);
        if (!(ratio <= worst)) worst = isnan(ratio) ? (double)INFINITY : ratio;
        if (!(worst <= 1.0)) {
            snprintf(why, why_size, "'%s' [e=%lld]: %.9g, reference %.9g", b->name,
                     (long long)i, (double)g[i], (double)r[i]);
            return (double)INFINITY;
        }
    }
    return worst;
}

/* The reference's X (T, M) from in: normalise, then add the residual (scratch on s). */
static float *bn_reference_x(bo_side *s, const neuron_params *p, const snn_neuron_bn_input *in)
{
    const int64_t n = neuron_numel(p), M = neuron_step(p);
    float *X = bo_scratch(s, (size_t)n * sizeof *X);
    const int64_t steps_in_x = in->x_repeated ? 1 : p->d.T; /* the repeated stem: x is one */
    if (in->stats)
        snn_batchnorm_normalise_ref(X, in->x, in->stats, in->invstd, in->gamma, in->beta,
                                    (int)(steps_in_x * p->d.N), (int)p->d.C, (int)p->d.plane);
    else
        memcpy(X, in->x, (size_t)(steps_in_x * M) * sizeof *X);
    for (int64_t t = steps_in_x; t < p->d.T; t++) memcpy(X + t * M, X, (size_t)M * sizeof *X);
    const float *residual = in->residual;
    if (in->residual_bn) { /* the residual's batch-norm, then the same add */
        const snn_bn_residual *r = in->residual_bn;
        float *made = bo_scratch(s, (size_t)n * sizeof *made);
        snn_batchnorm_normalise_ref(made, r->x, r->stats, r->invstd, r->gamma, r->beta,
                                    (int)(p->d.T * p->d.N), (int)p->d.C, (int)p->d.plane);
        residual = made;
    }
    if (in->residual_bits) {
        float *unpacked = bo_scratch(s, (size_t)n * sizeof *unpacked);
        snn_unpack_bits_ref(unpacked, in->residual_bits, n);
        residual = unpacked;
    }
    if (residual) {
        const snn_shape shape = SNN_SHAPE(n);
        const snn_broadcast bc = make_broadcast(shape, shape);
        snn_binary_forward_ref(SNN_BINARY_ADD, X, X, residual, &bc);
    }
    return X;
}

/* forward buffers: spike 0, spike_bits 1, h_seq 2, activity 3, h_ref 4 (the reference's H),
 * then the bn input from 5 */
static void lif_bn_fwd_setup(bo_case *c)
{
    const neuron_params *p = BO_PARAMS(c, neuron_params);
    const int64_t n = neuron_numel(p);
    if (p->outputs & 1) bo_out(c, "spike", BO_F32, n, BO_CUSTOM);
    else bo_unused(c, "spike");
    if (p->outputs & 2) bo_out(c, "spike_bits", BO_U32, (n + 31) / 32, BO_CUSTOM);
    else bo_unused(c, "spike_bits");
    if (p->outputs & 4) bo_out(c, "h_seq", BO_F32, n, BO_CUSTOM);
    else bo_unused(c, "h_seq");
    if (p->outputs & 8) bo_out(c, "activity", BO_F32, p->d.T * p->d.N * p->d.C, BO_CUSTOM);
    else bo_unused(c, "activity");
    bo_buffer(c, "h_ref", BO_F32, BO_REF, BO_CUSTOM, n);
    bn_input_setup(c, p);
    /* the state: V_init 12 and V_last 13, or (NV_ALIAS) one state 12 updated in place */
    const int64_t m = neuron_step(p);
    if (p->variant == NV_STATE) {
        bo_in_uniform(c, "v_init", m, -0.5f, 0.9f);
        bo_out(c, "v_last", BO_F32, m, BO_CUSTOM);
    } else if (p->variant == NV_ALIAS) {
        float *v = bo_f32(c, bo_buffer(c, "v_state", BO_F32, BO_ACC, BO_CUSTOM, m));
        for (int64_t e = 0; e < m; e++) v[e] = -0.5f + 1.4f * snn_rng_uniform(&bo_rng);
        bo_unused(c, "v_last");
    } else {
        bo_unused(c, "v_init"), bo_unused(c, "v_last");
    }
    bn_residual_setup(c, p);
    bn_x_bf16_setup(c, p, 5);
}

static bool lif_bn_fwd_run(const bo_case *c, bo_side *s)
{
    const neuron_params *p = BO_PARAMS(c, neuron_params);
    const snn_neuron_params q = snn_neuron_params_from(&p->cfg);
    void **a = s->arg;
    float *spike = p->outputs & 1 ? a[0] : NULL, *h = p->outputs & 4 ? a[2] : NULL;
    uint32_t *bits = p->outputs & 2 ? a[1] : NULL;
    float *act = p->outputs & 8 ? a[3] : NULL;
    snn_neuron_bn_input in = bn_input_of(p, a, 5);
    snn_bn_residual r;
    bn_input_x(c, s, p, &in);
    bn_residual_input(c, s, p, &r, &in);
    if (bn_carries(p)) in.v_init = a[12], in.v_last = p->variant == NV_ALIAS ? a[12] : a[13];
    if (!s->is_ref) {
        s->nk->lif_bn_forward(spike, bits, h, act, &in, &q, &p->d);
        return true;
    }
    const float *X = bn_reference_x(s, p, &in);
    const int64_t n = neuron_numel(p);
    float *S = spike ? spike : bo_scratch(s, (size_t)n * sizeof *S);
    snn_lif_forward_ref(S, a[4], in.v_last, NULL, act, X, in.v_init, NULL, NULL, &q, &p->d);
    if (h) memcpy(h, a[4], (size_t)n * sizeof *h);
    if (bits) snn_pack_bits_ref(bits, S, n);
    return true;
}

/* The forward's comparison (the file comment): returns the worst H ratio, or infinity. */
static double lif_bn_fwd_compare(const bo_case *c, void *const *got, void *const *ref, char *why,
                             size_t why_size)
{
    const neuron_params *p = BO_PARAMS(c, neuron_params);
    const snn_neuron_params q = snn_neuron_params_from(&p->cfg);
    const int64_t T = p->d.T, M = neuron_step(p), plane = p->d.plane;
    const float *h_ref = ref[4], *h = p->outputs & 4 ? got[2] : NULL;
    const float *s_got = p->outputs & 1 ? got[0] : NULL, *s_ref = p->outputs & 1 ? ref[0] : NULL;
    /* H is a running sum of X over the steps: SUM's tolerance, scaled by the largest |H| */
    const bo_tol tol = bo_tolerance_of(BO_SUM, NULL, NULL);
    double scale = 0.0, worst = 0.0;
    for (int64_t i = 0; i < T * M; i++) scale = fmax(scale, fabs((double)h_ref[i]));
    int64_t flips = 0;
    bool *flipped = calloc((size_t)M, sizeof *flipped); /* the elements not compared after */
    SNN_ASSERT(flipped);
    for (int64_t e = 0; e < M; e++)
        for (int64_t t = 0; t < T; t++) {
            const int64_t i = t * M + e;
            if (h) {
                const double r = bo_is_poison(h, BO_F32, i) ? (double)INFINITY
                                 : bo_ratio((double)h[i], (double)h_ref[i], 0.0, scale, &tol,
                                            0x1.0p-23);
                if (!(r <= 1.0) && fabs((double)h_ref[i] - (double)q.v_th) >
                                       bn_flip_zone(&q, (double)h_ref[i])) {
                    snprintf(why, why_size, "h_seq [t=%lld, e=%lld]: %.9g, reference %.9g",
                             (long long)t, (long long)e, (double)h[i], (double)h_ref[i]);
                    free(flipped);
                    return (double)INFINITY;
                }
                if (r <= 1.0 && r > worst) worst = r;
            }
            const float sg = s_got ? s_got[i] : h ? (h[i] >= q.v_th ? 1.0f : 0.0f) : 0.0f;
            const float sr = s_ref ? s_ref[i] : (h_ref[i] >= q.v_th ? 1.0f : 0.0f);
            if (sg == sr && !(h && !(bo_ratio((double)h[i], (double)h_ref[i], 0.0, scale, &tol,
                                              0x1.0p-23) <= 1.0)))
                continue;
            if (fabs((double)h_ref[i] - (double)q.v_th) > bn_flip_zone(&q, (double)h_ref[i])) {
                snprintf(why, why_size, "spike [t=%lld, e=%lld]: %g, reference %g (reference H "
                         "%.9g, V_th %g)", (long long)t, (long long)e, (double)sg, (double)sr,
                         (double)h_ref[i], (double)q.v_th);
                free(flipped);
                return (double)INFINITY;
            }
            flips++; /* explained: the rest of this element's time line is not compared */
            flipped[e] = true;
            break;
        }
    if (flips > 16 + M / 1000) {
        snprintf(why, why_size, "%lld elements flipped at the threshold", (long long)flips);
        free(flipped);
        return (double)INFINITY;
    }
    /* the state left, where the element's spikes were the reference's all along */
    if (bn_carries(p)) {
        const int k = p->variant == NV_ALIAS ? 12 : 13;
        const double r = bn_state_compare(&c->buf[k], got[k], ref[k], flipped, why, why_size);
        worst = fmax(worst, r);
    }
    free(flipped);
    if (!(worst <= 1.0)) return (double)INFINITY;
    /* activity and bits: exactly those of the kernel's own spikes */
    if (s_got && (p->outputs & 8)) {
        const float *act = got[3];
        for (int64_t t = 0; t < T; t++)
            for (int64_t g = 0; g < p->d.N * p->d.C; g++) {
                float count = 0.0f;
                for (int64_t k = 0; k < plane; k++) count += s_got[t * M + g * plane + k];
                if (act[t * p->d.N * p->d.C + g] != count) {
                    snprintf(why, why_size, "activity [t=%lld, plane %lld]: %g, its spikes %g",
                             (long long)t, (long long)g, (double)act[t * p->d.N * p->d.C + g],
                             (double)count);
                    return (double)INFINITY;
                }
            }
    }
    if (s_got && (p->outputs & 2)) {
        const uint32_t *bits = got[1];
        for (int64_t w = 0; w < (T * M + 31) / 32; w++) {
            uint32_t want = 0;
            for (int64_t k = 0; k < 32 && 32 * w + k < T * M; k++)
                if (s_got[32 * w + k] != 0.0f) want |= 1u << k;
            if (bits[w] != want) {
                snprintf(why, why_size, "spike_bits [%lld]: %08x, its spikes %08x", (long long)w,
                         bits[w], want);
                return (double)INFINITY;
            }
        }
    }
    if (flips)
        printf("    (%lld elements flipped at the threshold, explained)\n", (long long)flips);
    return worst;
}
static const bo_op op_lif_bn_forward = {"lif_bn_forward", bo_has_lif_bn_forward, lif_bn_fwd_setup,
                                        lif_bn_fwd_run, lif_bn_fwd_compare, false, 0};

/* backward buffers: dX 0, dresidual 1, dspike 2, h_ref 3, then the bn input from 4 */
static void lif_bn_bwd_setup(bo_case *c)
{
    const neuron_params *p = BO_PARAMS(c, neuron_params);
    const int64_t n = neuron_numel(p);
    bo_out(c, "dX", BO_F32, p->repeated ? neuron_step(p) : n, BO_CUSTOM);
    if (p->residual == 1 || p->residual == 2) bo_acc(c, "dresidual", n, BO_CUSTOM);
    else bo_unused(c, "dresidual");
    if (p->variant == NV_ALIAS) bo_unused(c, "dspike");
    else bo_in_normal(c, "dspike", n, 0.0f, 1.0f);
    bo_buffer(c, "h_ref", BO_F32, BO_REF, BO_CUSTOM, n);
    bn_input_setup(c, p);
    /* the state: V_init 11, dL/dV_last 12, dL/dV_init 13 (accumulated), V_last 14 */
    const int64_t m = neuron_step(p);
    if (bn_carries(p)) {
        bo_in_uniform(c, "v_init", m, -0.5f, 0.9f);
        bo_in_normal(c, "dv_last", m, 0.0f, 1.0f);
        bo_acc(c, "dv_init", m, BO_CUSTOM);
    } else {
        bo_unused(c, "v_init"), bo_unused(c, "dv_last"), bo_unused(c, "dv_init");
    }
    if (p->variant == NV_STATE) bo_out(c, "v_last", BO_F32, m, BO_CUSTOM);
    else bo_unused(c, "v_last");
    bn_residual_setup(c, p);
    bn_x_bf16_setup(c, p, 4);
}

static bool lif_bn_bwd_run(const bo_case *c, bo_side *s)
{
    const neuron_params *p = BO_PARAMS(c, neuron_params);
    const snn_neuron_params q = snn_neuron_params_from(&p->cfg);
    void **a = s->arg;
    snn_neuron_bn_input in = bn_input_of(p, a, 4);
    snn_bn_residual r;
    bn_input_x(c, s, p, &in);
    bn_residual_input(c, s, p, &r, &in);
    if (bn_carries(p)) in.v_init = a[11], in.dv_last = a[12], in.dv_init = a[13];
    if (p->variant == NV_STATE) in.v_last = a[14];
    float *dres = p->residual == 1 || p->residual == 2 ? a[1] : NULL;
    const float *dspike = p->variant == NV_ALIAS ? NULL : a[2];
    if (!s->is_ref) {
        s->nk->lif_bn_backward(a[0], dres, dspike, &in, &q, &p->d);
        return true;
    }
    const int64_t n = neuron_numel(p);
    const float *X = bn_reference_x(s, p, &in);
    float *S = bo_scratch(s, (size_t)n * sizeof *S);
    snn_lif_forward_ref(S, a[3], in.v_last, NULL, NULL, X, in.v_init, NULL, NULL, &q, &p->d);
    float *dX = p->repeated ? bo_scratch(s, (size_t)n * sizeof *dX) : a[0]; /* (T, M) */
    snn_fill_ref(dX, 0.0f, n);
    snn_lif_backward_ref(dX, in.dv_init, NULL, dspike, in.dv_last, a[3], S, X, in.v_init, NULL,
                         NULL, &q, &p->d);
    if (dres) snn_axpy_ref(dres, 1.0f, dX, n);
    if (p->repeated) { /* the repeat's backward */
        const int64_t M = neuron_step(p);
        snn_fill_ref(a[0], 0.0f, M);
        for (int64_t t = 0; t < p->d.T; t++) snn_axpy_ref(a[0], 1.0f, dX + t * M, M);
    }
    return true;
}

/* The backward's comparison (the file comment). */
static double lif_bn_bwd_compare(const bo_case *c, void *const *got, void *const *ref, char *why,
                             size_t why_size)
{
    const neuron_params *p = BO_PARAMS(c, neuron_params);
    const snn_neuron_params q = snn_neuron_params_from(&p->cfg);
    const int64_t T = p->d.T, M = neuron_step(p);
    const float *h_ref = ref[3];
    bool *near = calloc((size_t)M, sizeof *near);
    SNN_ASSERT(near);
    int64_t set_aside = 0;
    for (int64_t e = 0; e < M; e++) {
        for (int64_t t = 0; t < T && !near[e]; t++)
            near[e] = fabs((double)h_ref[t * M + e] - (double)q.v_th) <=
                      bn_flip_zone(&q, (double)h_ref[t * M + e]);
        set_aside += near[e];
    }
    const bo_tol tol = bo_tolerance_of(BO_SUM, NULL, NULL);
    double worst = 0.0;
    for (int k = 0; k < (p->residual == 1 || p->residual == 2 ? 2 : 1) && worst <= 1.0; k++) {
        const bo_buf *b = &c->buf[k];
        const float *g = got[k], *r = ref[k], *start = b->init;
        double scale = 0.0;
        for (int64_t i = 0; i < b->n; i++)
            scale = fmax(scale, fabs((double)r[i] - (start ? (double)start[i] : 0.0)));
        for (int64_t i = 0; i < b->n && worst <= 1.0; i++) {
            if (near[i % M]) continue;
            const double ratio = bo_is_poison(g, BO_F32, i) ? (double)INFINITY
                                 : bo_ratio((double)g[i], (double)r[i],
                                            start ? (double)start[i] : 0.0, scale, &tol,
                                            0x1.0p-23);
            if (!(ratio <= worst)) worst = isnan(ratio) ? (double)INFINITY : ratio;
            if (!(worst <= 1.0))
                snprintf(why, why_size, "'%s' [t=%lld, e=%lld]: %.9g, reference %.9g", b->name,
                         (long long)(i / M), (long long)(i % M), (double)g[i], (double)r[i]);
        }
    }
    for (int k = 13; k <= (p->variant == NV_STATE ? 14 : 13) && bn_carries(p) && worst <= 1.0;
         k++)
        worst = fmax(worst, bn_state_compare(&c->buf[k], got[k], ref[k], near, why, why_size));
    free(near);
    if (set_aside > 16 + M / 1000) {
        snprintf(why, why_size, "%lld elements near the threshold", (long long)set_aside);
        return (double)INFINITY;
    }
    if (set_aside)
        printf("    (%lld elements near the threshold not compared)\n", (long long)set_aside);
    return worst;
}
static const bo_op op_lif_bn_backward = {"lif_bn_backward", bo_has_lif_bn_backward,
                                         lif_bn_bwd_setup, lif_bn_bwd_run, lif_bn_bwd_compare,
                                         false, 0};

static void bo_neuron_bn_cases(bo_list *l)
{
    const snn_neuron_dims shapes[] = {{4, 3, 5, 49}, {1, 1, 3, 37}, {17, 2, 33, 1},
                                      {2, 8, 64, 64}, {3, 2, 3, 37 * 41}};
    const char *const residuals[4] = {"", " + residual", " + residual bits",
                                      " + bn(residual)"};
    for (int kind = 0; kind < 2; kind++)
        for (int soft = 0; soft < 2; soft++)
            for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
                for (int variant = 0; variant < 5; variant++) {
                    snn_neuron_config cfg = snn_neuron_config_default(kind ? SNN_NEURON_LIF
                                                                           : SNN_NEURON_IF);
                    cfg.surrogate = snn_surrogate_default(SNN_SURROGATE_ATAN);
                    cfg.reset = soft ? SNN_RESET_SOFT : SNN_RESET_HARD;
                    if (variant % 2) cfg.v_threshold = 0.75f, cfg.v_reset = -0.125f;
                    neuron_params p;
                    memset(&p, 0, sizeof p);
                    p.cfg = cfg, p.d = shapes[s];
                    /* variants: (residual, bn, outputs) */
                    const int residual[5] = {0, 1, 2, 3, 2}, outputs[5] = {11, 15, 11, 4, 9};
                    p.residual = residual[variant];
                    p.bn = variant != 4;
                    p.outputs = outputs[variant];
                    /* a carried state on some: read and written apart, or in place */
                    const neuron_variant state[3] = {NV_PLAIN, NV_STATE, NV_ALIAS};
                    p.variant = state[(s + (size_t)variant + (size_t)kind) % 3];
                    p.x_bf16 = (s + (size_t)variant + (size_t)soft) % 3 == 0;
                    char name[96];
                    neuron_test_name(name, sizeof name, &cfg);
                    const snn_neuron_dims *d = &p.d;
                    bo_add(l, &op_lif_bn_forward, &p, sizeof p,
                           "%s (%lld, %lld, %lld, %lld) %s%s%s, out %s%s%s%s%s", name,
                           (long long)d->T, (long long)d->N, (long long)d->C,
                           (long long)d->plane, p.bn ? "bn" : "x", p.x_bf16 ? " (bf16)" : "",
                           residuals[p.residual], p.outputs & 1 ? "S" : "",
                           p.outputs & 2 ? " bits" : "", p.outputs & 4 ? " H" : "",
                           p.outputs & 8 ? " activity" : "", variant_names[p.variant]);
                }
    /* lif_bn_backward: T over the CUDA kernel's three specialisations (T <= 4, 8, 16) and
     * the 16-step one's chunks (17: two, 40: three, the last one short), every surrogate,
     * with and without dspike */
    const int64_t steps[] = {1, 2, 4, 5, 8, 9, 16, 17, 40};
    for (size_t t = 0; t < sizeof steps / sizeof steps[0]; t++)
        for (int sg = 0; sg < SNN_SURROGATE_COUNT; sg++)
            for (int variant = 0; variant < 4; variant++) {
                snn_neuron_config cfg = snn_neuron_config_default(variant & 1 ? SNN_NEURON_LIF
                                                                              : SNN_NEURON_IF);
                cfg.surrogate = snn_surrogate_default((snn_surrogate_kind)sg);
                cfg.reset = variant & 2 ? SNN_RESET_SOFT : SNN_RESET_HARD;
                cfg.detach_reset = (t + (size_t)sg) % 2 == 1;
                neuron_params p;
                memset(&p, 0, sizeof p);
                p.cfg = cfg;
                p.d = (snn_neuron_dims){steps[t], 3, 5, t % 2 ? 49 : 33};
                p.bn = true;
                p.residual = (int)((t + (size_t)variant) % 4);
                /* no state; the state with dS and dV_last both; dV_last alone (dS NULL) */
                const neuron_variant state[3] = {NV_PLAIN, NV_STATE, NV_ALIAS};
                p.variant = state[(t + (size_t)sg + (size_t)variant) % 3];
                p.x_bf16 = (t + (size_t)sg + (size_t)variant) % 2 == 0;
                char name[96];
                neuron_test_name(name, sizeof name, &cfg);
                bo_add(l, &op_lif_bn_backward, &p, sizeof p,
                       "%s (%lld, 3, 5, %lld) bn%s%s%s", name, (long long)p.d.T,
                       (long long)p.d.plane, p.x_bf16 ? " (x bf16)" : "", residuals[p.residual],
                       variant_names_bwd[p.variant]);
            }
    /* the repeated stem: x one step, no residual, no state; forward T over the CUDA kernel's
     * step blocks, backward over its three specialisations */
    const snn_neuron_dims repeated_shapes[] = {{1, 2, 5, 49}, {4, 3, 5, 49}, {6, 2, 64, 64},
                                               {9, 2, 3, 37}, {16, 3, 5, 33}, {17, 2, 33, 7}};
    for (size_t s = 0; s < sizeof repeated_shapes / sizeof repeated_shapes[0]; s++)
        for (int kind = 0; kind < 2; kind++) {
            snn_neuron_config cfg = snn_neuron_config_default(kind ? SNN_NEURON_LIF
                                                                   : SNN_NEURON_IF);
            cfg.surrogate = snn_surrogate_default((snn_surrogate_kind)(s % SNN_SURROGATE_COUNT));
            cfg.reset = (s + (size_t)kind) % 2 ? SNN_RESET_SOFT : SNN_RESET_HARD;
            neuron_params p;
            memset(&p, 0, sizeof p);
            p.cfg = cfg, p.d = repeated_shapes[s];
            p.bn = true, p.repeated = true;
            p.outputs = s % 2 ? 15 : 11;
            p.x_bf16 = (s + (size_t)kind) % 2 == 1;
            char name[96];
            neuron_test_name(name, sizeof name, &cfg);
            const snn_neuron_dims *d = &p.d;
            const char *bf16 = p.x_bf16 ? " (x bf16)" : "";
            bo_add(l, &op_lif_bn_forward, &p, sizeof p,
                   "%s (%lld, %lld, %lld, %lld) bn repeated%s", name, (long long)d->T,
                   (long long)d->N, (long long)d->C, (long long)d->plane, bf16);
            if (d->T <= SNN_NEURON_BN_BACKWARD_MAX_T)
                bo_add(l, &op_lif_bn_backward, &p, sizeof p,
                       "%s (%lld, %lld, %lld, %lld) bn repeated%s", name, (long long)d->T,
                       (long long)d->N, (long long)d->C, (long long)d->plane, bf16);
        }
}
