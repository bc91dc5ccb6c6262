/*
 * backend_ops_batchnorm.h - the parity harness's cases of the batch-norm entries of
 * kernels/kernels.h: training and eval forward, backward (also in place, x as fp32 or bf16), and
 * the pieces --sync-bn cuts them into (stats, stats_merge, normalise, backward_sums,
 * backward_apply), over affine and plain batch-norms, with and without running statistics,
 * every NULL gradient, BatchNorm1d (HW = 1), one value a channel, and inputs whose mean is far
 * larger than their spread (part of backend_ops.h, through backend_ops_conv.h).
 */

typedef struct bn_params {
    int N, C, HW;
    bool affine, running;
    float offset;      /* the inputs' mean: far from 0 tests the two-pass variance */
    int skip;          /* backward: bit 0 drops dx, bit 1 dgamma, bit 2 dbeta */
    int R;             /* stats_merge: ranks */
    bool bf16;         /* backward_in_place, stats: x as bfloat16 bits */
} bn_params;

static int64_t bn_numel(const bn_params *p) { return (int64_t)p->N * p->C * p->HW; }

/* The (C, 3) statistics or sums of a batch-norm, column by column: a count, a mean, a sum of
 * squares differ in scale by orders of magnitude, so each column is scaled by its own. */
static double bn_compare_columns(const bo_case *c, void *const *got, void *const *ref, char *why,
                                 size_t why_size)
{
    double worst = 0.0;
    for (int i = 0; i < c->nbuf; i++) {
        const bo_buf *b = &c->buf[i];
        if (b->check != BO_CUSTOM) continue;
        const double *g = got[i], *r = ref[i];
        const bo_tol tol = bo_tolerance_of(BO_SUM, NULL, NULL);
        for (int col = 0; col < 3; col++) {
            double scale = 0.0;
            for (int64_t row = 0; row < b->n / 3; row++)
                scale = fmax(scale, fabs(r[3 * row + col]));
            for (int64_t row = 0; row < b->n / 3; row++) {
                const int64_t e = 3 * row + col;
                const double ratio = bo_is_poison(g, BO_F64, e) ? (double)INFINITY
                                     : bo_ratio(g[e], r[e], 0.0, scale, &tol, 0x1.0p-52);
                if (!(ratio <= worst)) {
                    worst = isnan(ratio) ? (double)INFINITY : ratio;
                    if (!(worst <= 1.0))
                        snprintf(why, why_size, "'%s' [%lld, %d]: %.17g, reference %.17g",
                                 b->name, (long long)row, col, g[e], r[e]);
                }
            }
        }
    }
    return worst;
}

/* The output of a batch-norm's normalisation, (N, C, HW). Its kernels may round the double mean
 * to float before subtracting it (CUDA does; the CPU's keep a float head and tail: kernels.h,
 * batchnorm_normalise), which moves element (n, c, i) by up to |gamma[c] invstd[c]| ulp(mean[c])
 * / 2, far more than the SUM tolerance when |mean| is much larger than the spread. Each element
 * is allowed that on top of the SUM tolerance; mean (C) and invstd (C) are the reference's,
 * gamma NULL for a plain batch-norm. */
static double bn_compare_normalised(const bo_case *c, int out, void *const *got, void *const *ref,
                                    const double *mean, const float *invstd, const float *gamma,
                                    char *why, size_t why_size)
{
    const bn_params *p = BO_PARAMS(c, bn_params);
    const float *g = got[out], *r = ref[out];
    double scale = 0.0, worst = 0.0;
    for (int64_t e = 0; e < bn_numel(p); e++) scale = fmax(scale, fabs((double)r[e]));
    for (int64_t e = 0; e < bn_numel(p); e++) {
        const int ch = (int)(e / p->HW % p->C);
        const float m = (float)mean[ch];
        const double rounding = fabs((double)(gamma ? gamma[ch] : 1.0f) * (double)invstd[ch]) *
                                0.5 * (double)(nextafterf(fabsf(m), INFINITY) - fabsf(m));
        bo_tol tol = bo_tolerance_of(BO_SUM, NULL, NULL);
        tol.atol += rounding;
        const double ratio = bo_is_poison(g, BO_F32, e) ? (double)INFINITY
                             : bo_ratio(g[e], r[e], 0.0, scale, &tol, 0x1.0p-23);
        if (!(ratio <= worst)) {
            worst = isnan(ratio) ? (double)INFINITY : ratio;
            if (!(worst <= 1.0))
                snprintf(why, why_size, "'%s' [%lld]: %.9g, reference %.9g (tolerance: SUM + "
                         "%.3g for the mean's rounding)", c->buf[out].name, (long long)e,
                         (double)g[e], (double)r[e], rounding);
        }
    }
    return worst;
}

/* x: normal around the offset; gamma, beta */
static void bn_inputs(bo_case *c, const bn_params *p)
{
    bo_in_normal(c, "x", bn_numel(p), p->offset, 1.0f);
    bo_in_uniform(c, "gamma", p->C, 0.5f, 1.5f);
    bo_in_uniform(c, "beta", p->C, -0.5f, 0.5f);
}

/* running_var starts positive */
static void bn_running(bo_case *c, const bn_params *p)
{
    bo_acc(c, "running_mean", p->C, BO_SUM);
    float *rv = bo_f32(c, bo_acc(c, "running_var", p->C, BO_SUM));
    for (int i = 0; i < p->C; i++) rv[i] = 1.0f + 0.5f * rv[i];
}

BO_HAS(batchnorm_forward_train)
static void bn_train_setup(bo_case *c)
{
    const bn_params *p = BO_PARAMS(c, bn_params);
    bo_out(c, "out", BO_F32, bn_numel(p), BO_CUSTOM); /* bn_train_compare */
    bo_out(c, "save_mean", BO_F32, p->C, BO_SUM);
    bo_out(c, "save_invstd", BO_F32, p->C, BO_SUM);
    bn_running(c, p);
    bn_inputs(c, p);
}
static bool bn_train_run(const bo_case *c, bo_side *s)
{
    const bn_params *p = BO_PARAMS(c, bn_params);
    void **a = s->arg;
    s->k->batchnorm_forward_train(a[0], a[1], a[2], p->running ? a[3] : NULL,
                                  p->running ? a[4] : NULL, a[5], p->affine ? a[6] : NULL,
                                  p->affine ? a[7] : NULL, p->N, p->C, p->HW, 0.1f, 1e-5f);
    return true;
}
/* out (0) against the reference, with its save_mean (1) and save_invstd (2); gamma is 6 */
static double bn_train_compare(const bo_case *c, void *const *got, void *const *ref, char *why,
                               size_t why_size)
{
    const bn_params *p = BO_PARAMS(c, bn_params);
    double *mean = malloc((size_t)p->C * sizeof *mean);
    SNN_ASSERT(mean);
    for (int ch = 0; ch < p->C; ch++) mean[ch] = (double)((const float *)ref[1])[ch];
    const double worst = bn_compare_normalised(c, 0, got, ref, mean, ref[2],
                                               p->affine ? c->buf[6].init : NULL, why, why_size);
    free(mean);
    return worst;
}
static const bo_op op_batchnorm_forward_train = {"batchnorm_forward_train",
                                                 bo_has_batchnorm_forward_train, bn_train_setup,
                                                 bn_train_run, bn_train_compare, false, 0};

BO_HAS(batchnorm_forward_eval)
static void bn_eval_setup(bo_case *c)
{
    const bn_params *p = BO_PARAMS(c, bn_params);
    bo_out(c, "out", BO_F32, bn_numel(p), BO_ELEM);
    bn_inputs(c, p);
    bo_in_uniform(c, "running_mean", p->C, p->offset - 0.3f, p->offset + 0.3f);
    bo_in_uniform(c, "running_var", p->C, 0.5f, 2.0f);
}
static bool bn_eval_run(const bo_case *c, bo_side *s)
{
    const bn_params *p = BO_PARAMS(c, bn_params);
    void **a = s->arg;
    s->k->batchnorm_forward_eval(a[0], a[1], p->affine ? a[2] : NULL, p->affine ? a[3] : NULL,
                                 a[4], a[5], p->N, p->C, p->HW, 1e-5f);
    return true;
}
static const bo_op op_batchnorm_forward_eval = {"batchnorm_forward_eval",
                                                bo_has_batchnorm_forward_eval, bn_eval_setup,
                                                bn_eval_run, NULL, false, 0};

/* save_mean and save_invstd from the reference's training forward over x (buffer x) */
static void bn_saved(bo_case *c, const bn_params *p, int x)
{
    const int mean = bo_in_uniform(c, "save_mean", p->C, 0.0f, 0.0f);
    const int invstd = bo_in_uniform(c, "save_invstd", p->C, 0.0f, 0.0f);
    float *out = malloc((size_t)bn_numel(p) * sizeof *out);
    SNN_ASSERT(out);
    snn_batchnorm_forward_train_ref(out, bo_f32(c, mean), bo_f32(c, invstd), NULL, NULL,
                                    bo_f32(c, x), NULL, NULL, p->N, p->C, p->HW, 0.1f, 1e-5f);
    free(out);
}

BO_HAS(batchnorm_backward)
static void bn_bwd_setup(bo_case *c)
{
    const bn_params *p = BO_PARAMS(c, bn_params);
    bo_acc(c, "dx", bn_numel(p), BO_SUM);
    bo_acc(c, "dgamma", p->C, BO_SUM);
    bo_acc(c, "dbeta", p->C, BO_SUM);
    bo_in_uniform(c, "dout", bn_numel(p), -1.0f, 1.0f);
    bn_inputs(c, p);  /* x 4, gamma 5, beta 6 (unused) */
    bn_saved(c, p, 4);
}
static bool bn_bwd_run(const bo_case *c, bo_side *s)
{
    const bn_params *p = BO_PARAMS(c, bn_params);
    void **a = s->arg;
    s->k->batchnorm_backward(p->skip & 1 ? NULL : a[0], p->skip & 2 ? NULL : a[1],
                             p->skip & 4 ? NULL : a[2], a[3], a[4], p->affine ? a[5] : NULL,
                             a[7], a[8], p->N, p->C, p->HW);
    return true;
}
static const bo_op op_batchnorm_backward = {"batchnorm_backward", bo_has_batchnorm_backward,
                                            bn_bwd_setup, bn_bwd_run, NULL, false, 0};

BO_HAS(batchnorm_backward_in_place)
/* dx in: dL/dout, out: dL/dx; x is rounded to bf16 and given as its bits too, which the bf16
 * cases pass instead of x */
static void bn_bwd_in_place_setup(bo_case *c)
{
    const bn_params *p = BO_PARAMS(c, bn_params);
    bo_acc(c, "dx", bn_numel(p), BO_SUM);
    bo_acc(c, "dgamma", p->C, BO_SUM);
    bo_acc(c, "dbeta", p->C, BO_SUM);
    bn_inputs(c, p);  /* x 3, gamma 4, beta 5 (unused) */
    const int w = bo_buffer(c, "x_bf16", BO_U32, BO_IN, BO_EXACT, (bn_numel(p) + 1) / 2);
    float *x = bo_f32(c, 3);
    uint16_t *bits = c->buf[w].init;
    for (int64_t e = 0; e < bn_numel(p); e++) {
        bits[e] = snn_bf16_bits(x[e]);
        if (p->bf16) x[e] = snn_bf16_value(bits[e]); /* the statistics of the rounded values */
    }
    bn_saved(c, p, 3);
}
static bool bn_bwd_in_place_run(const bo_case *c, bo_side *s)
{
    const bn_params *p = BO_PARAMS(c, bn_params);
    void **a = s->arg;
    s->k->batchnorm_backward_in_place(a[0], p->skip & 2 ? NULL : a[1], p->skip & 4 ? NULL : a[2],
                                      p->bf16 ? NULL : a[3], p->bf16 ? a[6] : NULL,
                                      p->affine ? a[4] : NULL, a[7], a[8], p->N, p->C, p->HW);
    return true;
}
static const bo_op op_batchnorm_backward_in_place = {
    "batchnorm_backward_in_place", bo_has_batchnorm_backward_in_place, bn_bwd_in_place_setup,
    bn_bwd_in_place_run, NULL, false, 0};

BO_HAS(batchnorm_backward_in_place_sums)
/* batchnorm_backward_in_place's buffers, then its sums (C, 3) as the reference takes them of
 * dout (dx's initial values) and x (rounded where bf16), which both sides are given */
static void bn_bwd_in_place_sums_setup(bo_case *c)
{
    const bn_params *p = BO_PARAMS(c, bn_params);
    bn_bwd_in_place_setup(c); /* dx 0, dgamma 1, dbeta 2, x 3, gamma 4, beta 5, x_bf16 6,
                               * save_mean 7, save_invstd 8 */
    const int sums = bo_buffer(c, "sums", BO_F64, BO_IN, BO_EXACT, 3 * (int64_t)p->C);
    snn_batchnorm_backward_sums_ref(c->buf[sums].init, bo_f32(c, 0), bo_f32(c, 3), bo_f32(c, 7),
                                    p->N, p->C, p->HW);
}
static bool bn_bwd_in_place_sums_run(const bo_case *c, bo_side *s)
{
    const bn_params *p = BO_PARAMS(c, bn_params);
    void **a = s->arg;
    s->k->batchnorm_backward_in_place_sums(p->skip & 1 ? NULL : a[0], p->skip & 2 ? NULL : a[1],
                                           p->skip & 4 ? NULL : a[2], p->bf16 ? NULL : a[3],
                                           p->bf16 ? a[6] : NULL, p->affine ? a[4] : NULL, a[7],
                                           a[8], a[9], p->N, p->C, p->HW);
    return true;
}
static const bo_op op_batchnorm_backward_in_place_sums = {
    "batchnorm_backward_in_place_sums", bo_has_batchnorm_backward_in_place_sums,
    bn_bwd_in_place_sums_setup, bn_bwd_in_place_sums_run, NULL, false, 0};

BO_HAS(batchnorm_stats)
/* stats 0, x 1; with bf16, x rounded to bf16 and its bits 2, which both sides read (x NULL):
 * the statistics of a conv output kept as bf16 */
static void bn_stats_setup(bo_case *c)
{
    const bn_params *p = BO_PARAMS(c, bn_params);
    bo_out(c, "stats", BO_F64, 3 * (int64_t)p->C, BO_CUSTOM);
    float *x = bo_f32(c, bo_in_normal(c, "x", bn_numel(p), p->offset, 1.0f));
    if (!p->bf16) return;
    const int w = bo_buffer(c, "x_bf16", BO_U32, BO_IN, BO_EXACT, (bn_numel(p) + 1) / 2);
    uint16_t *bits = c->buf[w].init;
    for (int64_t e = 0; e < bn_numel(p); e++) {
        bits[e] = snn_bf16_bits(x[e]);
        x[e] = snn_bf16_value(bits[e]);
    }
}
static bool bn_stats_run(const bo_case *c, bo_side *s)
{
    const bn_params *p = BO_PARAMS(c, bn_params);
    s->k->batchnorm_stats(s->arg[0], p->bf16 ? NULL : s->arg[1], p->bf16 ? s->arg[2] : NULL,
                          p->N, p->C, p->HW);
    return true;
}
static const bo_op op_batchnorm_stats = {"batchnorm_stats", bo_has_batchnorm_stats,
                                         bn_stats_setup, bn_stats_run, bn_compare_columns, false,
                                         0};

/* The merged (C, 3) statistics of x over one rank, as the reference computes them; also
 * save_invstd into invstd (C) when not NULL. */
static void bn_merged(double *merged, float *invstd, const float *x, const bn_params *p)
{
    double *stats = malloc(3 * (size_t)p->C * sizeof *stats);
    float *mean = malloc((size_t)p->C * sizeof *mean), *inv = malloc((size_t)p->C * sizeof *inv);
    SNN_ASSERT(stats && mean && inv);
    snn_batchnorm_stats_ref(stats, x, NULL, p->N, p->C, p->HW);
    snn_batchnorm_stats_merge_ref(merged, mean, inv, NULL, NULL, stats, 1, p->C, 0.1f, 1e-5f);
    if (invstd) memcpy(invstd, inv, (size_t)p->C * sizeof *inv);
    free(stats), free(mean), free(inv);
}

BO_HAS(batchnorm_stats_merge)
/* R ranks, rank r holding N + r images (unequal counts) */
static void bn_merge_setup(bo_case *c)
{
    const bn_params *p = BO_PARAMS(c, bn_params);
    bo_out(c, "merged", BO_F64, 3 * (int64_t)p->C, BO_CUSTOM);
    bo_out(c, "save_mean", BO_F32, p->C, BO_SUM);
    bo_out(c, "save_invstd", BO_F32, p->C, BO_SUM);
    bn_running(c, p);
    const int stats = bo_buffer(c, "stats", BO_F64, BO_IN, BO_EXACT, 3 * (int64_t)p->R * p->C);
    for (int r = 0; r < p->R; r++) {
        const int64_t n = (int64_t)(p->N + r) * p->C * p->HW;
        float *x = malloc((size_t)n * sizeof *x);
        SNN_ASSERT(x);
        for (int64_t i = 0; i < n; i++) x[i] = p->offset + (float)r + snn_rng_normal(&bo_rng);
        snn_batchnorm_stats_ref((double *)c->buf[stats].init + 3 * r * p->C, x, NULL, p->N + r,
                                p->C, p->HW);
        free(x);
    }
}
static bool bn_merge_run(const bo_case *c, bo_side *s)
{
    const bn_params *p = BO_PARAMS(c, bn_params);
    void **a = s->arg;
    s->k->batchnorm_stats_merge(a[0], a[1], a[2], p->running ? a[3] : NULL,
                                p->running ? a[4] : NULL, a[5], p->R, p->C, 0.1f, 1e-5f);
    return true;
}
static const bo_op op_batchnorm_stats_merge = {"batchnorm_stats_merge",
                                               bo_has_batchnorm_stats_merge, bn_merge_setup,
                                               bn_merge_run, bn_compare_columns, false, 0};

BO_HAS(batchnorm_normalise)
static void bn_norm_setup(bo_case *c)
{
    const bn_params *p = BO_PARAMS(c, bn_params);
    bo_out(c, "out", BO_F32, bn_numel(p), BO_CUSTOM); /* bn_norm_compare */
    bn_inputs(c, p); /* x 1, gamma 2, beta 3 */
    const int merged = bo_buffer(c, "merged", BO_F64, BO_IN, BO_EXACT, 3 * (int64_t)p->C);
    const int invstd = bo_in_uniform(c, "save_invstd", p->C, 0.0f, 0.0f);
    bn_merged(c->buf[merged].init, bo_f32(c, invstd), bo_f32(c, 1), p);
}
static bool bn_norm_run(const bo_case *c, bo_side *s)
{
    const bn_params *p = BO_PARAMS(c, bn_params);
    void **a = s->arg;
    s->k->batchnorm_normalise(a[0], a[1], a[4], a[5], p->affine ? a[2] : NULL,
                              p->affine ? a[3] : NULL, p->N, p->C, p->HW);
    return true;
}
/* out (0) against the reference; the mean is column 1 of merged (4), invstd 5, gamma 2 */
static double bn_norm_compare(const bo_case *c, void *const *got, void *const *ref, char *why,
                              size_t why_size)
{
    const bn_params *p = BO_PARAMS(c, bn_params);
    const double *merged = c->buf[4].init;
    double *mean = malloc((size_t)p->C * sizeof *mean);
    SNN_ASSERT(mean);
    for (int ch = 0; ch < p->C; ch++) mean[ch] = merged[3 * ch + 1];
    const double worst = bn_compare_normalised(c, 0, got, ref, mean, c->buf[5].init,
                                               p->affine ? c->buf[2].init : NULL, why, why_size);
    free(mean);
    return worst;
}
static const bo_op op_batchnorm_normalise = {"batchnorm_normalise", bo_has_batchnorm_normalise,
                                             bn_norm_setup, bn_norm_run, bn_norm_compare, false,
                                             0};

BO_HAS(batchnorm_backward_sums)
static void bn_sums_setup(bo_case *c)
{
    const bn_params *p = BO_PARAMS(c, bn_params);
    bo_out(c, "sums", BO_F64, 3 * (int64_t)p->C, BO_CUSTOM);
    bo_in_uniform(c, "dout", bn_numel(p), -1.0f, 1.0f);
    const int x = bo_in_normal(c, "x", bn_numel(p), p->offset, 1.0f);
    bn_saved(c, p, x); /* save_mean 3, save_invstd 4 (unused) */
}
static bool bn_sums_run(const bo_case *c, bo_side *s)
{
    const bn_params *p = BO_PARAMS(c, bn_params);
    s->k->batchnorm_backward_sums(s->arg[0], s->arg[1], s->arg[2], s->arg[3], p->N, p->C, p->HW);
    return true;
}
static const bo_op op_batchnorm_backward_sums = {"batchnorm_backward_sums",
                                                 bo_has_batchnorm_backward_sums, bn_sums_setup,
                                                 bn_sums_run, bn_compare_columns, false, 0};

BO_HAS(batchnorm_backward_apply)
/* local: this rank's sums (the reference's); global: those plus a second rank's */
static void bn_apply_setup(bo_case *c)
{
    const bn_params *p = BO_PARAMS(c, bn_params);
    const int64_t n = bn_numel(p);
    bo_acc(c, "dx", n, BO_SUM);
    bo_acc(c, "dgamma", p->C, BO_SUM);
    bo_acc(c, "dbeta", p->C, BO_SUM);
    const int dout = bo_in_uniform(c, "dout", n, -1.0f, 1.0f);
    bn_inputs(c, p); /* x 4, gamma 5, beta 6 (unused) */
    bn_saved(c, p, 4); /* save_mean 7, save_invstd 8 */
    const int local = bo_buffer(c, "local", BO_F64, BO_IN, BO_EXACT, 3 * (int64_t)p->C);
    const int global = bo_buffer(c, "global", BO_F64, BO_IN, BO_EXACT, 3 * (int64_t)p->C);
    double *loc = c->buf[local].init, *glob = c->buf[global].init;
    snn_batchnorm_backward_sums_ref(loc, bo_f32(c, dout), bo_f32(c, 4), bo_f32(c, 7), p->N, p->C,
                                    p->HW);
    float *other = malloc(2 * (size_t)n * sizeof *other);
    SNN_ASSERT(other);
    for (int64_t i = 0; i < n; i++) other[i] = 2.0f * snn_rng_uniform(&bo_rng) - 1.0f;
    for (int64_t i = 0; i < n; i++) other[n + i] = p->offset + snn_rng_normal(&bo_rng);
    snn_batchnorm_backward_sums_ref(glob, other, other + n, bo_f32(c, 7), p->N, p->C, p->HW);
    for (int64_t i = 0; i < 3 * (int64_t)p->C; i++) glob[i] += loc[i];
    free(other);
}
static bool bn_apply_run(const bo_case *c, bo_side *s)
{
    const bn_params *p = BO_PARAMS(c, bn_params);
    void **a = s->arg;
    s->k->batchnorm_backward_apply(p->skip & 1 ? NULL : a[0], p->skip & 2 ? NULL : a[1],
                                   p->skip & 4 ? NULL : a[2], a[3], a[4],
                                   p->affine ? a[5] : NULL, a[7], a[8], a[9], a[10], p->N, p->C,
                                   p->HW);
    return true;
}
static const bo_op op_batchnorm_backward_apply = {"batchnorm_backward_apply",
                                                  bo_has_batchnorm_backward_apply,
                                                  bn_apply_setup, bn_apply_run, NULL, false, 0};

static void bo_batchnorm_cases(bo_list *l)
{
    const bn_params shapes[] = {
        {8, 16, 49, true, true, 1.0f, 0, 1, false},
        {64, 3, 1024, true, true, 1.0f, 0, 2, false},    /* few channels, long sums (threaded) */
        {128, 10, 1, true, true, 0.0f, 0, 3, false},     /* BatchNorm1d */
        {4, 300, 7, false, false, 1.0f, 0, 2, false},    /* no affine, no running statistics */
        {1, 5, 1, true, true, 0.0f, 0, 1, false},     /* one value a channel: no Bessel */
        {4096, 4, 3, true, true, 1.0f, 0, 2, false},     /* planes shorter than the CUDA blocks */
        {20000, 2, 1, true, true, 1.0f, 0, 1, false},
        {3, 2, 13, true, true, 1000.0f, 0, 2, false},    /* |mean| >> std */
        {16, 8, 1024, true, true, 0.5f, 0, 4, false},
        {32, 64, 256, true, true, -2.0f, 0, 2, false},   /* a ResNet-like layer */
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const bn_params *p = &shapes[i];
        char dims[80];
        snprintf(dims, sizeof dims, "N=%d C=%d HW=%d%s%s mean~%g", p->N, p->C, p->HW,
                 p->affine ? " affine" : "", p->running ? " running" : "", (double)p->offset);
        bo_add(l, &op_batchnorm_forward_train, p, sizeof *p, "%s", dims);
        bo_add(l, &op_batchnorm_forward_eval, p, sizeof *p, "%s", dims);
        bo_add(l, &op_batchnorm_backward, p, sizeof *p, "%s", dims);
        bo_add(l, &op_batchnorm_backward_in_place, p, sizeof *p, "%s", dims);
        bn_params rounded = *p;
        rounded.bf16 = true;
        bo_add(l, &op_batchnorm_backward_in_place, &rounded, sizeof rounded, "%s, x bf16", dims);
        bo_add(l, &op_batchnorm_backward_in_place_sums, p, sizeof *p, "%s", dims);
        bo_add(l, &op_batchnorm_backward_in_place_sums, &rounded, sizeof rounded, "%s, x bf16",
               dims);
        bo_add(l, &op_batchnorm_stats, p, sizeof *p, "%s", dims);
        bo_add(l, &op_batchnorm_stats, &rounded, sizeof rounded, "%s, x bf16", dims);
        bo_add(l, &op_batchnorm_stats_merge, p, sizeof *p, "%s, %d ranks", dims, p->R);
        bo_add(l, &op_batchnorm_normalise, p, sizeof *p, "%s", dims);
        bo_add(l, &op_batchnorm_backward_sums, p, sizeof *p, "%s", dims);
        bo_add(l, &op_batchnorm_backward_apply, p, sizeof *p, "%s", dims);
    }
    for (int skip = 1; skip < 8; skip++) {
        const bn_params p = {6, 8, 25, true, true, 1.0f, skip, 1, false};
        const char *what[8] = {"", "dx", "dgamma", "dx dgamma", "dbeta", "dx dbeta",
                               "dgamma dbeta", "all"};
        bo_add(l, &op_batchnorm_backward, &p, sizeof p, "N=6 C=8 HW=25 affine, %s NULL",
               what[skip]);
        bo_add(l, &op_batchnorm_backward_apply, &p, sizeof p, "N=6 C=8 HW=25 affine, %s NULL",
               what[skip]);
        if (!(skip & 1)) /* in place, dx holds dout: always given */
            bo_add(l, &op_batchnorm_backward_in_place, &p, sizeof p,
                   "N=6 C=8 HW=25 affine, %s NULL", what[skip]);
        /* with the sums given, dx may be NULL (dgamma and dbeta alone: grad_deferred.c) */
        bo_add(l, &op_batchnorm_backward_in_place_sums, &p, sizeof p,
               "N=6 C=8 HW=25 affine, %s NULL", what[skip]);
    }
}
