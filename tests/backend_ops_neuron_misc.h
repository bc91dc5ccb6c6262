/*
 * backend_ops_neuron_misc.h - the parity harness's cases of the stateless entries of
 * kernels/neuron_kernels.h: heaviside (with every surrogate), plane_norm, qclip and the running
 * max-pool (part of backend_ops.h, through backend_ops_neuron.h).
 */

typedef struct misc_params {
    int64_t n;              /* elements (heaviside, qclip) */
    int64_t planes, plane;  /* plane_norm */
    snn_surrogate surrogate;
    snn_neuron_config cfg;  /* qclip: levels, symmetric */
    float step;             /* qclip's step */
    float grad_scale;
    int skip;               /* qclip backward: 1 drops dx, 2 drops dstep */
    snn_running_pool_dims pool;
    bool spikes;            /* running pool: inputs theta S in {-1, 0, 1} (else uniform) */
    int values;             /* plane_norm: 0 spikes {0, 1}, 1 ST-BIF's {-0.5, 0, 0.5}, 2 normal */
} misc_params;

BO_HAS_NEURON(heaviside_forward)
BO_HAS_NEURON(heaviside_backward)

/* x normal, with 0 every 7th element (Heaviside(0) = 1) and -0 at [1] (-0 >= 0 too) */
static int heaviside_input(bo_case *c, int64_t n)
{
    float *x = bo_f32(c, bo_in_normal(c, "x", n, 0.0f, 1.0f));
    for (int64_t i = 0; i < n; i += 7) x[i] = 0.0f;
    if (n > 1) x[1] = -0.0f;
    return 0;
}

static void heaviside_fwd_setup(bo_case *c)
{
    const misc_params *p = BO_PARAMS(c, misc_params);
    bo_out(c, "out", BO_F32, p->n, BO_EXACT);
    heaviside_input(c, p->n);
}
static bool heaviside_fwd_run(const bo_case *c, bo_side *s)
{
    s->nk->heaviside_forward(s->arg[0], s->arg[1], BO_PARAMS(c, misc_params)->n);
    return true;
}
static const bo_op op_heaviside_forward = {"heaviside_forward", bo_has_heaviside_forward,
                                           heaviside_fwd_setup, heaviside_fwd_run, NULL, false,
                                           0};

static void heaviside_bwd_setup(bo_case *c)
{
    const misc_params *p = BO_PARAMS(c, misc_params);
    bo_acc(c, "dx", p->n, BO_ELEM);
    bo_in_normal(c, "dout", p->n, 0.0f, 1.0f);
    heaviside_input(c, p->n);
}
static bool heaviside_bwd_run(const bo_case *c, bo_side *s)
{
    const misc_params *p = BO_PARAMS(c, misc_params);
    s->nk->heaviside_backward(s->arg[0], s->arg[1], s->arg[2], p->surrogate.kind,
                              p->surrogate.alpha, p->n);
    return true;
}
static const bo_op op_heaviside_backward = {"heaviside_backward", bo_has_heaviside_backward,
                                            heaviside_bwd_setup, heaviside_bwd_run, NULL, false,
                                            0};

/* ---- plane norms (the activity penalty) ---------------------------------------------------- */

BO_HAS_NEURON(plane_norm_forward)
BO_HAS_NEURON(plane_norm_backward)

/* 20% of the values nonzero (spikes, +-0.5) or all normal; every 5th plane silent (norm 0:
 * backward skips it) */
static int plane_input(bo_case *c, const misc_params *p)
{
    const int x = bo_in_normal(c, "x", p->planes * p->plane, 0.0f, 1.0f);
    float *v = bo_f32(c, x);
    for (int64_t i = 0; i < p->planes * p->plane; i++) {
        const float u = snn_rng_uniform(&bo_rng);
        if (p->values == 0) v[i] = u < 0.2f ? 1.0f : 0.0f;
        if (p->values == 1) v[i] = u < 0.1f ? 0.5f : u < 0.2f ? -0.5f : 0.0f;
        if ((i / p->plane) % 5 == 3) v[i] = 0.0f;
    }
    return x;
}

/* the norm of spikes is exact (a whole-number sum, then a correctly rounded sqrt) */
static void plane_fwd_setup(bo_case *c)
{
    const misc_params *p = BO_PARAMS(c, misc_params);
    bo_out(c, "norm", BO_F32, p->planes, p->values == 0 ? BO_EXACT : BO_SUM);
    plane_input(c, p);
}
static bool plane_fwd_run(const bo_case *c, bo_side *s)
{
    const misc_params *p = BO_PARAMS(c, misc_params);
    s->nk->plane_norm_forward(s->arg[0], s->arg[1], p->planes, p->plane);
    return true;
}
static const bo_op op_plane_norm_forward = {"plane_norm_forward", bo_has_plane_norm_forward,
                                            plane_fwd_setup, plane_fwd_run, NULL, false, 0};

/* norm: the reference's forward */
static void plane_bwd_setup(bo_case *c)
{
    const misc_params *p = BO_PARAMS(c, misc_params);
    bo_acc(c, "dx", p->planes * p->plane, BO_ELEM);
    bo_in_normal(c, "dnorm", p->planes, 0.0f, 1.0f);
    const int x = plane_input(c, p);
    const int norm = bo_in_uniform(c, "norm", p->planes, 0.0f, 0.0f);
    snn_plane_norm_forward_ref(bo_f32(c, norm), bo_f32(c, x), p->planes, p->plane);
}
static bool plane_bwd_run(const bo_case *c, bo_side *s)
{
    const misc_params *p = BO_PARAMS(c, misc_params);
    s->nk->plane_norm_backward(s->arg[0], s->arg[1], s->arg[2], s->arg[3], p->planes, p->plane);
    return true;
}
static const bo_op op_plane_norm_backward = {"plane_norm_backward", bo_has_plane_norm_backward,
                                             plane_bwd_setup, plane_bwd_run, NULL, false, 0};

/* ---- QCLIP, the quantizer ST-BIF replaces ---------------------------------------------------- */

BO_HAS_NEURON(qclip_forward)
BO_HAS_NEURON(qclip_backward)

/* x spans the clipped range and past it on both sides; some x / s land exactly on a level's
 * midpoint (floor(r + 1/2) decides) and on the bounds */
static int qclip_input(bo_case *c, const misc_params *p, const snn_neuron_params *q)
{
    const float s = snn_qclip_step_value(p->step);
    const int x = bo_in_uniform(c, "x", p->n, (q->a_min - 2.0f) * s, (q->a_max + 2.0f) * s);
    float *v = bo_f32(c, x);
    for (int64_t i = 0; i < p->n; i += 13) v[i] = ((float)(i % 7) + q->a_min - 0.5f) * s;
    for (int64_t i = 5; i < p->n; i += 29) v[i] = (i % 2 ? q->a_max : q->a_min) * s;
    return x;
}

static void qclip_fwd_setup(bo_case *c)
{
    const misc_params *p = BO_PARAMS(c, misc_params);
    const snn_neuron_params q = snn_neuron_params_from(&p->cfg);
    bo_out(c, "y", BO_F32, p->n, BO_EXACT); /* divide, add, floor, clip, multiply: no fma */
    qclip_input(c, p, &q);
    bo_in_copy(c, "step", BO_F32, &p->step, 1);
}
static bool qclip_fwd_run(const bo_case *c, bo_side *s)
{
    const misc_params *p = BO_PARAMS(c, misc_params);
    const snn_neuron_params q = snn_neuron_params_from(&p->cfg);
    s->nk->qclip_forward(s->arg[0], s->arg[1], s->arg[2], &q, p->n);
    return true;
}
static const bo_op op_qclip_forward = {"qclip_forward", bo_has_qclip_forward, qclip_fwd_setup,
                                       qclip_fwd_run, NULL, false, 0};

/* dstep's tolerance scale: grad_scale times the sum of |dy dy/ds| (its terms cancel) */
static void qclip_bwd_setup(bo_case *c)
{
    const misc_params *p = BO_PARAMS(c, misc_params);
    const snn_neuron_params q = snn_neuron_params_from(&p->cfg);
    bo_acc(c, "dx", p->n, BO_ELEM);
    const int dstep = bo_acc(c, "dstep", 1, BO_SUM);
    const int dy = bo_in_normal(c, "dy", p->n, 0.0f, 1.0f);
    const int x = qclip_input(c, p, &q);
    bo_in_copy(c, "step", BO_F32, &p->step, 1);
    const float s = snn_qclip_step_value(p->step);
    double sum = 0.0;
    for (int64_t i = 0; i < p->n; i++)
        sum += fabs((double)bo_f32(c, dy)[i] * (double)snn_qclip_dy_ds(&q, bo_f32(c, x)[i] / s));
    c->buf[dstep].scale = sum * fabs((double)p->grad_scale);
}
static bool qclip_bwd_run(const bo_case *c, bo_side *s)
{
    const misc_params *p = BO_PARAMS(c, misc_params);
    const snn_neuron_params q = snn_neuron_params_from(&p->cfg);
    s->nk->qclip_backward(p->skip == 1 ? NULL : s->arg[0], p->skip == 2 ? NULL : s->arg[1],
                          s->arg[2], s->arg[3], s->arg[4], &q, p->grad_scale, p->n);
    return true;
}
static const bo_op op_qclip_backward = {"qclip_backward", bo_has_qclip_backward, qclip_bwd_setup,
                                        qclip_bwd_run, NULL, false, 0};

/* ---- the running max-pool of converted SNNs -------------------------------------------------- */

BO_HAS_NEURON(running_max_pool_forward)
BO_HAS_NEURON(running_max_pool_backward)

static int64_t rpool_in(const snn_running_pool_dims *d) { return d->T * d->planes * d->H * d->W; }
static int64_t rpool_out(const snn_running_pool_dims *d)
{
    return d->T * d->planes * d->H_out * d->W_out;
}

/* x: ST-BIF outputs (whole numbers -1, 0, 1: running sums tie, exactly) or uniform values */
static int rpool_input(bo_case *c, const misc_params *p)
{
    if (!p->spikes) return bo_in_uniform(c, "x", rpool_in(&p->pool), -1.0f, 1.0f);
    const int x = bo_in_levels(c, "x", rpool_in(&p->pool), 3);
    for (int64_t i = 0; i < rpool_in(&p->pool); i++) bo_f32(c, x)[i] -= 1.0f;
    return x;
}

static void rpool_fwd_setup(bo_case *c)
{
    const misc_params *p = BO_PARAMS(c, misc_params);
    bo_out(c, "y", BO_F32, rpool_out(&p->pool), p->spikes ? BO_EXACT : BO_ELEM);
    bo_out(c, "argmax", BO_I32, rpool_out(&p->pool), BO_EXACT);
    rpool_input(c, p);
}
static bool rpool_fwd_run(const bo_case *c, bo_side *s)
{
    const misc_params *p = BO_PARAMS(c, misc_params);
    s->nk->running_max_pool_forward(s->arg[0], s->arg[1], s->arg[2], &p->pool);
    return true;
}
static const bo_op op_running_max_pool_forward = {"running_max_pool_forward",
                                                  bo_has_running_max_pool_forward,
                                                  rpool_fwd_setup, rpool_fwd_run, NULL, false, 0};

/* argmax from the reference's forward */
static void rpool_bwd_setup(bo_case *c)
{
    const misc_params *p = BO_PARAMS(c, misc_params);
    bo_acc(c, "dx", rpool_in(&p->pool), BO_SUM);
    bo_in_normal(c, "dy", rpool_out(&p->pool), 0.0f, 1.0f);
    const int argmax = bo_buffer(c, "argmax", BO_I32, BO_IN, BO_EXACT, rpool_out(&p->pool));
    float *x = malloc((size_t)rpool_in(&p->pool) * sizeof *x);
    float *y = malloc((size_t)rpool_out(&p->pool) * sizeof *y);
    SNN_ASSERT(x && y);
    for (int64_t i = 0; i < rpool_in(&p->pool); i++)
        x[i] = (float)snn_rng_below(&bo_rng, 3) - 1.0f;
    snn_running_max_pool_forward_ref(y, c->buf[argmax].init, x, &p->pool);
    free(x), free(y);
}
static bool rpool_bwd_run(const bo_case *c, bo_side *s)
{
    const misc_params *p = BO_PARAMS(c, misc_params);
    s->nk->running_max_pool_backward(s->arg[0], s->arg[1], s->arg[2], &p->pool);
    return true;
}
static const bo_op op_running_max_pool_backward = {"running_max_pool_backward",
                                                   bo_has_running_max_pool_backward,
                                                   rpool_bwd_setup, rpool_bwd_run, NULL, false,
                                                   0};

static void bo_neuron_misc_cases(bo_list *l)
{
    const int64_t sizes[] = {1, 1000, (1 << 16) + 3};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        misc_params p;
        memset(&p, 0, sizeof p);
        p.n = sizes[i] == (1 << 16) + 3 && bo_large_cases ? (1 << 20) + 3 : sizes[i];
        bo_add(l, &op_heaviside_forward, &p, sizeof p, "n=%lld", (long long)p.n);
        for (int sg = 0; sg < SNN_SURROGATE_COUNT; sg++)
            for (int custom = 0; custom < 2; custom++) {
                p.surrogate = snn_surrogate_default((snn_surrogate_kind)sg);
                if (custom) p.surrogate.alpha *= 2.5f;
                bo_add(l, &op_heaviside_backward, &p, sizeof p, "n=%lld %s alpha=%g",
                       (long long)p.n, snn_surrogate_name(p.surrogate.kind),
                       (double)p.surrogate.alpha);
            }
    }
    /* planes of 1, 31 and 32 (the CUDA kernel's thread-per-plane / warp-per-plane switch),
     * 49, 37 x 41 (several warps' strides), 64, 1024, 100003 */
    const int64_t norms[][2] = {{60, 49}, {528, 1}, {42, 31}, {42, 32}, {18, 37 * 41},
                                {64, 1024}, {4096, 64}, {1, 100003}};
    const char *const values[3] = {"spikes", "+-0.5", "normal"};
    for (size_t i = 0; i < sizeof norms / sizeof norms[0]; i++)
        for (int v = 0; v < 3; v++) {
            misc_params p;
            memset(&p, 0, sizeof p);
            p.planes = norms[i][0], p.plane = norms[i][1], p.values = v;
            bo_add(l, &op_plane_norm_forward, &p, sizeof p, "%lld planes of %lld, %s",
                   (long long)p.planes, (long long)p.plane, values[v]);
            bo_add(l, &op_plane_norm_backward, &p, sizeof p, "%lld planes of %lld, %s",
                   (long long)p.planes, (long long)p.plane, values[v]);
        }
    const float steps[] = {0.25f, 0.7f, 1e-9f}; /* the last is below SNN_QCLIP_MIN_STEP */
    for (int levels = 4; levels <= 8; levels += 4)
        for (int sym = 0; sym < 2; sym++)
            for (size_t s = 0; s < sizeof steps / sizeof steps[0]; s++)
                for (int64_t n = 37; n <= 100003; n += 99966) {
                    misc_params p;
                    memset(&p, 0, sizeof p);
                    p.cfg = snn_neuron_config_default(SNN_NEURON_QCLIP);
                    p.cfg.levels = levels, p.cfg.symmetric = sym != 0;
                    p.n = n, p.step = steps[s];
                    p.grad_scale = 1.0f / sqrtf((float)n * (float)(levels - 1));
                    p.skip = (int)((s + (size_t)levels) % 3);
                    bo_add(l, &op_qclip_forward, &p, sizeof p, "L=%d%s step=%g n=%lld", levels,
                           sym ? " symmetric" : "", (double)p.step, (long long)n);
                    bo_add(l, &op_qclip_backward, &p, sizeof p, "L=%d%s step=%g n=%lld%s",
                           levels, sym ? " symmetric" : "", (double)p.step, (long long)n,
                           p.skip == 1 ? " dx NULL" : p.skip == 2 ? " dstep NULL" : "");
                }
    /* T, planes, H, W, K, stride: windows of 2x2 and 3x3 at their stride and wider, odd sizes
     * with a margin, K = 4 (the most a window may hold), T = 1 and 17 */
    const int pools[][6] = {{4, 6, 8, 8, 2, 2},  {3, 5, 9, 7, 3, 3}, {1, 2, 5, 5, 2, 3},
                            {17, 2, 4, 4, 2, 2}, {2, 3, 8, 8, 4, 4}, {2, 64, 32, 32, 2, 2}};
    for (size_t i = 0; i < sizeof pools / sizeof pools[0]; i++)
        for (int spikes = 0; spikes < 2; spikes++) {
            misc_params p;
            memset(&p, 0, sizeof p);
            const int *v = pools[i];
            p.pool = (snn_running_pool_dims){v[0], v[1], v[2], v[3], v[4], v[5],
                                             (v[2] - v[4]) / v[5] + 1, (v[3] - v[4]) / v[5] + 1};
            p.spikes = spikes != 0;
            bo_add(l, &op_running_max_pool_forward, &p, sizeof p,
                   "T=%d planes=%d %dx%d K=%d s=%d%s", v[0], v[1], v[2], v[3], v[4], v[5],
                   spikes ? " spikes" : "");
            if (spikes)
                bo_add(l, &op_running_max_pool_backward, &p, sizeof p,
                       "T=%d planes=%d %dx%d K=%d s=%d", v[0], v[1], v[2], v[3], v[4], v[5]);
        }
}
