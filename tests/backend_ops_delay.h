/*
 * backend_ops_delay.h - the parity harness's cases of the learnable-delay entries of
 * kernels/kernels.h: delay_kernel_forward / _backward (the Gaussian delay kernel) and
 * temporal_conv_forward / _backward (the causal temporal conv, one GEMM per tap outside the
 * reference) (part of backend_ops.h, through backend_ops_tensor.h).
 *
 * Shapes: one synapse and one tap; D > T (taps that reach no output); sigma wide (D/2, the
 * start of training), 0.5 (the end) and 0.05 (a rounded delay line: one tap a synapse); delays
 * anywhere in [0, D - 1] and a few outside it (before the module clamps them); sizes past the
 * CPU GEMM's blocks.
 */

typedef struct delay_kernel_params {
    int O, I, D;
    float sigma;
    int skip;          /* backward: 1 dw = NULL, 2 dd = NULL */
} delay_kernel_params;

/* d uniform in [-0.5, D - 0.5] (a few outside [0, D - 1]); every 5th exactly on a tap, every
 * 7th exactly halfway between two (the even split) */
static int delay_input(bo_case *c, const delay_kernel_params *p)
{
    const int64_t n = (int64_t)p->O * p->I;
    const int d = bo_in_uniform(c, "d", n, -0.5f, (float)p->D - 0.5f);
    float *v = bo_f32(c, d);
    for (int64_t s = 0; s < n; s += 5) v[s] = (float)(s % p->D);
    for (int64_t s = 3; s < n && p->D > 1; s += 7) v[s] = (float)(s % (p->D - 1)) + 0.5f;
    return d;
}

BO_HAS(delay_kernel_forward)
static void delay_kernel_fwd_setup(bo_case *c)
{
    const delay_kernel_params *p = BO_PARAMS(c, delay_kernel_params);
    const int64_t n = (int64_t)p->O * p->I;
    /* a D-term normaliser and libm's or the GPU's expf: a sum's tolerance */
    bo_out(c, "K", BO_F32, n * p->D, BO_SUM);
    bo_in_uniform(c, "w", n, -1.0f, 1.0f);
    delay_input(c, p);
}
static bool delay_kernel_fwd_run(const bo_case *c, bo_side *s)
{
    const delay_kernel_params *p = BO_PARAMS(c, delay_kernel_params);
    s->k->delay_kernel_forward(s->arg[0], s->arg[1], s->arg[2], p->O, p->I, p->D, p->sigma);
    return true;
}
static const bo_op op_delay_kernel_forward = {"delay_kernel_forward", bo_has_delay_kernel_forward,
                                              delay_kernel_fwd_setup, delay_kernel_fwd_run, NULL,
                                              false, 0};

BO_HAS(delay_kernel_backward)
static void delay_kernel_bwd_setup(bo_case *c)
{
    const delay_kernel_params *p = BO_PARAMS(c, delay_kernel_params);
    const int64_t n = (int64_t)p->O * p->I;
    bo_acc(c, "dw", n, BO_SUM);
    bo_acc(c, "dd", n, BO_SUM);
    bo_in_uniform(c, "dK", n * p->D, -1.0f, 1.0f);
    bo_in_uniform(c, "w", n, -1.0f, 1.0f);
    delay_input(c, p);
}
static bool delay_kernel_bwd_run(const bo_case *c, bo_side *s)
{
    const delay_kernel_params *p = BO_PARAMS(c, delay_kernel_params);
    s->k->delay_kernel_backward(p->skip == 1 ? NULL : s->arg[0], p->skip == 2 ? NULL : s->arg[1],
                                s->arg[2], s->arg[3], s->arg[4], p->O, p->I, p->D, p->sigma);
    return true;
}
static const bo_op op_delay_kernel_backward = {"delay_kernel_backward",
                                               bo_has_delay_kernel_backward,
                                               delay_kernel_bwd_setup, delay_kernel_bwd_run, NULL,
                                               false, 0};

typedef struct temporal_conv_params {
    int T, N, I, O, D;
    int skip;          /* backward: 1 dx = NULL, 2 dK = NULL */
} temporal_conv_params;

BO_HAS(temporal_conv_forward)
/* x: spikes (0 or 1), as the layer takes them; K: a real kernel */
static void temporal_conv_fwd_setup(bo_case *c)
{
    const temporal_conv_params *p = BO_PARAMS(c, temporal_conv_params);
    bo_out(c, "y", BO_F32, (int64_t)p->T * p->N * p->O, BO_MMA);
    bo_operand(c, bo_in_levels(c, "x", (int64_t)p->T * p->N * p->I, 2));
    bo_operand(c, bo_in_uniform(c, "K", (int64_t)p->D * p->O * p->I, -1.0f, 1.0f));
}
static bool temporal_conv_fwd_run(const bo_case *c, bo_side *s)
{
    const temporal_conv_params *p = BO_PARAMS(c, temporal_conv_params);
    s->k->temporal_conv_forward(s->arg[0], s->arg[1], s->arg[2], p->T, p->N, p->I, p->O, p->D);
    return true;
}
static const bo_op op_temporal_conv_forward = {"temporal_conv_forward",
                                               bo_has_temporal_conv_forward,
                                               temporal_conv_fwd_setup, temporal_conv_fwd_run,
                                               NULL, true, BO_MMA_GEMM};

BO_HAS(temporal_conv_backward)
static void temporal_conv_bwd_setup(bo_case *c)
{
    const temporal_conv_params *p = BO_PARAMS(c, temporal_conv_params);
    bo_acc(c, "dx", (int64_t)p->T * p->N * p->I, BO_MMA);
    bo_acc(c, "dK", (int64_t)p->D * p->O * p->I, BO_MMA);
    bo_operand(c, bo_in_uniform(c, "dy", (int64_t)p->T * p->N * p->O, -1.0f, 1.0f));
    bo_operand(c, bo_in_levels(c, "x", (int64_t)p->T * p->N * p->I, 2));
    bo_operand(c, bo_in_uniform(c, "K", (int64_t)p->D * p->O * p->I, -1.0f, 1.0f));
}
static bool temporal_conv_bwd_run(const bo_case *c, bo_side *s)
{
    const temporal_conv_params *p = BO_PARAMS(c, temporal_conv_params);
    s->k->temporal_conv_backward(p->skip == 1 ? NULL : s->arg[0], p->skip == 2 ? NULL : s->arg[1],
                                 s->arg[2], s->arg[3], s->arg[4], p->T, p->N, p->I, p->O, p->D);
    return true;
}
static const bo_op op_temporal_conv_backward = {"temporal_conv_backward",
                                                bo_has_temporal_conv_backward,
                                                temporal_conv_bwd_setup, temporal_conv_bwd_run,
                                                NULL, true, BO_MMA_GEMM};

static void bo_delay_cases(bo_list *l)
{
    const delay_kernel_params kernels[] = {
        {1, 1, 1, 0.5f, 0},      /* one tap: p = 1 whatever d is */
        {3, 5, 8, 4.0f, 0},      /* sigma = D / 2: the start of training */
        {7, 4, 6, 0.5f, 0},      /* the end of the anneal */
        {9, 11, 10, 0.05f, 0},   /* a rounded delay line: all the mass on one tap */
        {64, 100, 25, 3.0f, 0},  /* a layer: 6400 synapses, past one thread block */
    };
    const int nk = (int)(sizeof kernels / sizeof kernels[0]);
    for (int i = 0; i < nk; i++) {
        const delay_kernel_params *p = &kernels[i];
        bo_add(l, &op_delay_kernel_forward, p, sizeof *p, "O=%d I=%d D=%d sigma=%g", p->O, p->I,
               p->D, (double)p->sigma);
    }
    for (int i = 0; i < nk; i++)
        for (int skip = 0; skip < 3; skip++) {
            if (skip && i != 1) continue;
            delay_kernel_params p = kernels[i];
            p.skip = skip;
            bo_add(l, &op_delay_kernel_backward, &p, sizeof p, "O=%d I=%d D=%d sigma=%g%s", p.O,
                   p.I, p.D, (double)p.sigma,
                   skip == 1 ? " dw=NULL" : skip == 2 ? " dd=NULL" : "");
        }

    const temporal_conv_params convs[] = {
        {1, 1, 1, 1, 1, 0},        /* one step, one tap: a linear layer */
        {6, 2, 3, 4, 3, 0},        /* small */
        {5, 3, 7, 2, 9, 0},        /* D > T: taps 5..8 reach no output */
        {20, 16, 40, 24, 8, 0},    /* a hidden layer's shape */
        {40, 8, 130, 70, 12, 0},   /* rows and columns past the CPU GEMM's blocks */
    };
    const int nc = (int)(sizeof convs / sizeof convs[0]);
    for (int i = 0; i < nc; i++) {
        const temporal_conv_params *p = &convs[i];
        bo_add(l, &op_temporal_conv_forward, p, sizeof *p, "T=%d N=%d I=%d O=%d D=%d", p->T, p->N,
               p->I, p->O, p->D);
    }
    for (int i = 0; i < nc; i++)
        for (int skip = 0; skip < 3; skip++) {
            if (skip && i != 1) continue;
            temporal_conv_params p = convs[i];
            p.skip = skip;
            bo_add(l, &op_temporal_conv_backward, &p, sizeof p, "T=%d N=%d I=%d O=%d D=%d%s", p.T,
                   p.N, p.I, p.O, p.D, skip == 1 ? " dx=NULL" : skip == 2 ? " dK=NULL" : "");
        }
}
