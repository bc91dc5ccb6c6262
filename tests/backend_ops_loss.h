/*
 * backend_ops_loss.h - the parity harness's cases of the loss, random-mask and optimizer
 * entries of kernels/kernels.h: log_softmax, nll, one_hot, dropout_mask, poisson_encode, SGD,
 * Adam and the multi-tensor Adam (part of backend_ops.h, through backend_ops_tensor.h).
 */

/* ---- losses -------------------------------------------------------------------------------- */

BO_HAS(log_softmax_forward)
static void log_softmax_fwd_setup(bo_case *c)
{
    const rows_params *p = BO_PARAMS(c, rows_params);
    const int64_t n = (int64_t)p->N * p->C;
    /* out = x - log sum exp(x): its error is absolute, a few ulps of the largest |x| and the
     * rounding of a C-term sum, so it is measured against the largest |out| (SUM) */
    bo_out(c, "out", BO_F32, n, BO_SUM);
    bo_in_normal(c, "x", n, 0.0f, 5.0f);
}
static bool log_softmax_fwd_run(const bo_case *c, bo_side *s)
{
    const rows_params *p = BO_PARAMS(c, rows_params);
    s->k->log_softmax_forward(s->arg[0], s->arg[1], p->N, p->C);
    return true;
}
static const bo_op op_log_softmax_forward = {"log_softmax_forward", bo_has_log_softmax_forward,
                                             log_softmax_fwd_setup, log_softmax_fwd_run, NULL,
                                             false, 0};

/* logp: the reference's log-softmax of random logits (both sides get it) */
static int logp_input(bo_case *c, const rows_params *p)
{
    const int64_t n = (int64_t)p->N * p->C;
    float *x = malloc((size_t)n * sizeof *x);
    SNN_ASSERT(x);
    for (int64_t i = 0; i < n; i++) x[i] = 5.0f * snn_rng_normal(&bo_rng);
    const int logp = bo_in_uniform(c, "logp", n, 0.0f, 0.0f);
    snn_log_softmax_forward_ref(bo_f32(c, logp), x, p->N, p->C);
    free(x);
    return logp;
}

BO_HAS(log_softmax_backward)
static void log_softmax_bwd_setup(bo_case *c)
{
    const rows_params *p = BO_PARAMS(c, rows_params);
    const int64_t n = (int64_t)p->N * p->C;
    bo_acc(c, "dx", n, BO_SUM);
    bo_in_uniform(c, "dout", n, -1.0f, 1.0f);
    logp_input(c, p);
}
static bool log_softmax_bwd_run(const bo_case *c, bo_side *s)
{
    const rows_params *p = BO_PARAMS(c, rows_params);
    s->k->log_softmax_backward(s->arg[0], s->arg[1], s->arg[2], p->N, p->C);
    return true;
}
static const bo_op op_log_softmax_backward = {"log_softmax_backward",
                                              bo_has_log_softmax_backward, log_softmax_bwd_setup,
                                              log_softmax_bwd_run, NULL, false, 0};

BO_HAS(nll_forward)
static void nll_fwd_setup(bo_case *c)
{
    const rows_params *p = BO_PARAMS(c, rows_params);
    bo_out(c, "loss", BO_F32, 1, BO_SUM);
    logp_input(c, p);
    bo_in_levels(c, "labels", p->N, p->C);
}
static bool nll_fwd_run(const bo_case *c, bo_side *s)
{
    const rows_params *p = BO_PARAMS(c, rows_params);
    s->k->nll_forward(s->arg[0], s->arg[1], s->arg[2], p->N, p->C, p->scale);
    return true;
}
static const bo_op op_nll_forward = {"nll_forward", bo_has_nll_forward, nll_fwd_setup,
                                     nll_fwd_run, NULL, false, 0};

BO_HAS(nll_backward)
/* dloss is a device scalar (no host sync) */
static void nll_bwd_setup(bo_case *c)
{
    const rows_params *p = BO_PARAMS(c, rows_params);
    bo_acc(c, "dlogp", (int64_t)p->N * p->C, BO_ELEM);
    bo_in_uniform(c, "dloss", 1, 0.5f, 1.5f);
    bo_in_levels(c, "labels", p->N, p->C);
}
static bool nll_bwd_run(const bo_case *c, bo_side *s)
{
    const rows_params *p = BO_PARAMS(c, rows_params);
    s->k->nll_backward(s->arg[0], s->arg[1], s->arg[2], p->N, p->C, p->scale);
    return true;
}
static const bo_op op_nll_backward = {"nll_backward", bo_has_nll_backward, nll_bwd_setup,
                                      nll_bwd_run, NULL, false, 0};

BO_HAS(one_hot)
static void one_hot_setup(bo_case *c)
{
    const rows_params *p = BO_PARAMS(c, rows_params);
    bo_out(c, "out", BO_F32, (int64_t)p->N * p->C, BO_EXACT);
    bo_in_levels(c, "labels", p->N, p->C);
}
static bool one_hot_run(const bo_case *c, bo_side *s)
{
    const rows_params *p = BO_PARAMS(c, rows_params);
    s->k->one_hot(s->arg[0], s->arg[1], p->N, p->C);
    return true;
}
static const bo_op op_one_hot = {"one_hot", bo_has_one_hot, one_hot_setup, one_hot_run, NULL,
                                 false, 0};

/* ---- masks and spikes from the hash -------------------------------------------------------- */

typedef struct hash_params {
    int64_t n;
    int T;
    float p;
    uint64_t seed;
} hash_params;

BO_HAS(dropout_mask)
static void dropout_setup(bo_case *c)
{
    bo_out(c, "mask", BO_F32, BO_PARAMS(c, hash_params)->n, BO_EXACT);
}
static bool dropout_run(const bo_case *c, bo_side *s)
{
    const hash_params *p = BO_PARAMS(c, hash_params);
    s->k->dropout_mask(s->arg[0], p->n, p->p, p->seed);
    return true;
}
static const bo_op op_dropout_mask = {"dropout_mask", bo_has_dropout_mask, dropout_setup,
                                      dropout_run, NULL, false, 0};

BO_HAS(poisson_encode)
/* pixels in [-0.1, 1.1] plus the edges: 0, -0, 1, NaN, +-inf, a subnormal, and pixels equal to
 * their own u at t = 0 (strict <: no spike there) */
static void poisson_setup(bo_case *c)
{
    const hash_params *p = BO_PARAMS(c, hash_params);
    bo_out(c, "spikes", BO_F32, (int64_t)p->T * p->n, BO_EXACT);
    float *pixels = bo_f32(c, bo_in_uniform(c, "pixels", p->n, -0.1f, 1.1f));
    const float edges[] = {0.0f, -0.0f, 1.0f, NAN, INFINITY, -INFINITY, 1e-40f};
    for (int64_t e = 0; e < 7 && 2 * e + 1 < p->n; e++) pixels[2 * e + 1] = edges[e];
    for (int64_t i = 20; i < p->n && i < 30; i++)
        pixels[i] = (float)(snn_hash64(p->seed + (uint64_t)i) >> 40) * 0x1.0p-24f;
}
static bool poisson_run(const bo_case *c, bo_side *s)
{
    const hash_params *p = BO_PARAMS(c, hash_params);
    s->k->poisson_encode(s->arg[0], s->arg[1], p->n, p->T, p->seed);
    return true;
}
static const bo_op op_poisson_encode = {"poisson_encode", bo_has_poisson_encode, poisson_setup,
                                        poisson_run, NULL, false, 0};

/* ---- optimizers ---------------------------------------------------------------------------- */

typedef struct optim_params {
    int64_t n;
    snn_sgd_params sgd;
    snn_adam_params adam;
    int count;          /* adam_update_many: tensors */
} optim_params;

BO_HAS(sgd_update)
static void sgd_setup(bo_case *c)
{
    const optim_params *p = BO_PARAMS(c, optim_params);
    bo_acc(c, "p", p->n, BO_ELEM);
    float *vel = bo_f32(c, bo_acc(c, "velocity", p->n, BO_ELEM));
    for (int64_t i = 0; i < p->n; i++) vel[i] *= 0.1f;
    bo_in_uniform(c, "grad", p->n, -1.0f, 1.0f);
}
static bool sgd_run(const bo_case *c, bo_side *s)
{
    const optim_params *p = BO_PARAMS(c, optim_params);
    /* without momentum there is no buffer: velocity NULL */
    s->k->sgd_update(s->arg[0], p->sgd.momentum != 0.0f ? s->arg[1] : NULL, s->arg[2], p->n,
                     &p->sgd);
    return true;
}
static const bo_op op_sgd_update = {"sgd_update", bo_has_sgd_update, sgd_setup, sgd_run, NULL,
                                    false, 0};

/* m in [-0.1, 0.1), v in [0, 0.01) (a second moment is never negative) */
static void adam_state(bo_case *c, int m, int v, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        bo_f32(c, m)[i] *= 0.1f;
        bo_f32(c, v)[i] = 0.005f * (bo_f32(c, v)[i] + 1.0f);
    }
}

BO_HAS(adam_update)
static void adam_setup(bo_case *c)
{
    const optim_params *p = BO_PARAMS(c, optim_params);
    bo_acc(c, "p", p->n, BO_ELEM);
    const int m = bo_acc(c, "m", p->n, BO_ELEM), v = bo_acc(c, "v", p->n, BO_ELEM);
    adam_state(c, m, v, p->n);
    bo_in_uniform(c, "grad", p->n, -1.0f, 1.0f);
}
static bool adam_run(const bo_case *c, bo_side *s)
{
    const optim_params *p = BO_PARAMS(c, optim_params);
    s->k->adam_update(s->arg[0], s->arg[1], s->arg[2], s->arg[3], p->n, &p->adam);
    return true;
}
static const bo_op op_adam_update = {"adam_update", bo_has_adam_update, adam_setup, adam_run,
                                     NULL, false, 0};

/* adam_update_many: tensor i has adam_many_size(i) elements, at adam_many_offset(i) in four
 * shared buffers (p, m, v, grad), each tensor's start 256-byte aligned as separate allocations
 * would be; sizes around the CUDA kernel's 4096-element chunk, an empty tensor, each tensor at
 * its own step count; more tensors than one CUDA launch takes (32). */
static int64_t adam_many_size(int i)
{
    const int64_t sizes[6] = {1, 4095, 4096, 4097, 10003, 0};
    return sizes[i % 6];
}
static int64_t adam_many_offset(int i)
{
    int64_t offset = 0;
    for (int j = 0; j < i; j++) offset += (adam_many_size(j) + 63) / 64 * 64;
    return offset;
}

BO_HAS(adam_update_many)
static void adam_many_setup(bo_case *c)
{
    const optim_params *p = BO_PARAMS(c, optim_params);
    const int64_t n = adam_many_offset(p->count);
    bo_acc(c, "p", n, BO_ELEM);
    const int m = bo_acc(c, "m", n, BO_ELEM), v = bo_acc(c, "v", n, BO_ELEM);
    adam_state(c, m, v, n);
    bo_in_uniform(c, "grad", n, -1.0f, 1.0f);
}
static bool adam_many_run(const bo_case *c, bo_side *s)
{
    const optim_params *p = BO_PARAMS(c, optim_params);
    snn_adam_tensor tensors[64];
    SNN_ASSERT(p->count <= 64);
    for (int i = 0; i < p->count; i++) {
        const int64_t at = adam_many_offset(i);
        const float t = (float)(1 + 7 * i);
        tensors[i] = (snn_adam_tensor){(float *)s->arg[0] + at, (float *)s->arg[1] + at,
                                       (float *)s->arg[2] + at, (const float *)s->arg[3] + at,
                                       adam_many_size(i), 1.0f - powf(p->adam.beta1, t),
                                       1.0f - powf(p->adam.beta2, t)};
    }
    s->k->adam_update_many(tensors, p->count, &p->adam);
    return true;
}
static const bo_op op_adam_update_many = {"adam_update_many", bo_has_adam_update_many,
                                          adam_many_setup, adam_many_run, NULL, false, 0};

/* ---- the list ------------------------------------------------------------------------------ */

static void bo_loss_cases(bo_list *l)
{
    const int rows[][2] = {{64, 10}, {7, 1000}, {1000, 3}, {1, 1}, {300, 13}, {64, 1000}};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const rows_params p = {rows[i][0], rows[i][1], 1.0f / (float)rows[i][0]};
        bo_add(l, &op_log_softmax_forward, &p, sizeof p, "N=%d C=%d", p.N, p.C);
        bo_add(l, &op_log_softmax_backward, &p, sizeof p, "N=%d C=%d", p.N, p.C);
        bo_add(l, &op_nll_forward, &p, sizeof p, "N=%d C=%d scale=1/N", p.N, p.C);
        bo_add(l, &op_nll_backward, &p, sizeof p, "N=%d C=%d scale=1/N", p.N, p.C);
        bo_add(l, &op_one_hot, &p, sizeof p, "N=%d C=%d", p.N, p.C);
    }

    const float ps[] = {0.0f, 0.1f, 0.5f, 0.9f, 1.0f};
    const uint64_t seeds[] = {0, 1, 12345678901ull};
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++)
        for (size_t s = 0; s < sizeof seeds / sizeof seeds[0]; s++) {
            const hash_params p = {i == 2 ? 1000003 : 4099, 1, ps[i], seeds[s]};
            bo_add(l, &op_dropout_mask, &p, sizeof p, "n=%lld p=%g seed=%llu", (long long)p.n,
                   (double)p.p, (unsigned long long)p.seed);
        }
    /* the last (large cases only) is past the CUDA grid's cap: the grid-stride loop */
    const struct { int64_t n; int T; } codes[] = {{1, 1}, {37, 4}, {100003, 4}, {4099, 33},
                                                  {1000003, 4}};
    const uint64_t code_seeds[] = {0, 12345678901ull, UINT64_MAX - 5}; /* the last wraps 2^64 */
    const size_t ncodes = sizeof codes / sizeof codes[0] - (bo_large_cases ? 0 : 1);
    for (size_t i = 0; i < ncodes; i++)
        for (size_t s = 0; s < sizeof code_seeds / sizeof code_seeds[0]; s++) {
            const hash_params p = {codes[i].n, codes[i].T, 0.0f, code_seeds[s]};
            bo_add(l, &op_poisson_encode, &p, sizeof p, "n=%lld T=%d seed=%llu", (long long)p.n,
                   p.T, (unsigned long long)p.seed);
        }

    /* SGD: lr, momentum, dampening, weight decay, nesterov, first step */
    const snn_sgd_params sgds[] = {
        {0.05f, 0.0f, 0.0f, 0.0f, false, false}, {0.05f, 0.0f, 0.0f, 5e-4f, false, false},
        {0.05f, 0.9f, 0.0f, 5e-4f, false, true}, {0.05f, 0.9f, 0.0f, 5e-4f, false, false},
        {0.05f, 0.9f, 0.1f, 0.0f, false, false}, {0.05f, 0.9f, 0.0f, 1e-4f, true, false},
    };
    for (size_t i = 0; i < sizeof sgds / sizeof sgds[0]; i++)
        for (int64_t n = 37; n <= 100003; n += 99966) {
            optim_params p;
            memset(&p, 0, sizeof p);
            p.n = n, p.sgd = sgds[i];
            bo_add(l, &op_sgd_update, &p, sizeof p, "n=%lld mom=%g damp=%g wd=%g%s%s",
                   (long long)n, (double)p.sgd.momentum, (double)p.sgd.dampening,
                   (double)p.sgd.weight_decay, p.sgd.nesterov ? " nesterov" : "",
                   p.sgd.first_step ? " first" : "");
        }
    /* Adam: coupled weight decay or AdamW's, at steps 1, 3, 100 */
    const struct { bool decoupled; float wd; int t; } adams[] = {
        {false, 0.0f, 1}, {false, 1e-2f, 3}, {true, 1e-2f, 100}};
    for (size_t i = 0; i < sizeof adams / sizeof adams[0]; i++) {
        optim_params p;
        memset(&p, 0, sizeof p);
        p.adam = (snn_adam_params){1e-3f, 0.9f, 0.999f, 1e-8f, adams[i].wd, adams[i].decoupled,
                                   0.0f, 0.0f};
        p.adam.bias_correction1 = 1.0f - powf(p.adam.beta1, (float)adams[i].t);
        p.adam.bias_correction2 = 1.0f - powf(p.adam.beta2, (float)adams[i].t);
        for (p.n = 37; p.n <= 100003; p.n += 99966)
            bo_add(l, &op_adam_update, &p, sizeof p, "n=%lld %s wd=%g t=%d", (long long)p.n,
                   adams[i].decoupled ? "adamw" : "adam", (double)adams[i].wd, adams[i].t);
    }
    for (int count = 6; count <= 40; count += 34)
        for (int decoupled = 0; decoupled < 2; decoupled++) {
            optim_params p;
            memset(&p, 0, sizeof p);
            p.adam = (snn_adam_params){1e-3f, 0.9f, 0.999f, 1e-8f, 1e-2f, decoupled != 0,
                                       0.0f, 0.0f};
            p.count = count;
            bo_add(l, &op_adam_update_many, &p, sizeof p, "%d tensors %s", count,
                   decoupled ? "adamw" : "adam");
        }
}
