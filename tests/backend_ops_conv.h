/*
 * backend_ops_conv.h - the parity harness's cases of the convolution and pooling entries of
 * kernels/kernels.h (part of backend_ops.h; batch-norm: backend_ops_batchnorm.h).
 *
 * Conv shapes: 3x3, 1x1, 5x5 and 3x1 windows, strides 1, 2 and 3, padding 0-2, odd and
 * non-square planes, one image, one channel, 4x4 planes (the CPU groups many images into one
 * SGEMM), sizes that take the CPU's threaded paths, and channel counts that are multiples of 32
 * on planes of 8x8 and more (the CUDA channels-last kernels take those) beside ones that are
 * not. On CUDA every conv case runs in fp32 and, in TF32 and BF16, on each conv path that takes
 * it (test_cuda_backend_ops.c). Inputs are uniform in [-1, 1] or, for a spiking layer's input,
 * spikes in {0, 1}.
 */

typedef struct conv_params {
    snn_conv2d_dims d;   /* first: bo_conv_of reads it */
    bool bias;
    bool spikes;      /* x in {0, 1} */
    int skip;         /* backward: bit 0 drops dx, bit 1 dweight, bit 2 dbias */
} conv_params;

static snn_conv2d_dims conv_dims(int N, int C_in, int H, int W, int C_out, int KH, int KW,
                                 int stride, int pad)
{
    snn_conv2d_dims d = {N, C_in, H, W, C_out, KH, KW, stride, pad, 0, 0};
    d.H_out = (H + 2 * pad - KH) / stride + 1;
    d.W_out = (W + 2 * pad - KW) / stride + 1;
    return d;
}

static int64_t conv_x_numel(const snn_conv2d_dims *d)
{
    return (int64_t)d->N * d->C_in * d->H * d->W;
}
static int64_t conv_w_numel(const snn_conv2d_dims *d)
{
    return (int64_t)d->C_out * d->C_in * d->KH * d->KW;
}
static int64_t conv_out_numel(const snn_conv2d_dims *d)
{
    return (int64_t)d->N * d->C_out * d->H_out * d->W_out;
}

/* x: uniform, or spikes */
static int conv_input(bo_case *c, const conv_params *p)
{
    const int x = p->spikes ? bo_in_levels(c, "x", conv_x_numel(&p->d), 2)
                            : bo_in_uniform(c, "x", conv_x_numel(&p->d), -1.0f, 1.0f);
    bo_operand(c, x);
    return x;
}

static float *conv_workspace(const bo_case *c, bo_side *s)
{
    return bo_scratch(s, s->k->conv2d_workspace_bytes(&BO_PARAMS(c, conv_params)->d));
}

BO_HAS(conv2d_forward)
static void conv_fwd_setup(bo_case *c)
{
    const conv_params *p = BO_PARAMS(c, conv_params);
    bo_out(c, "out", BO_F32, conv_out_numel(&p->d), BO_MMA);
    conv_input(c, p);
    bo_operand(c, bo_in_uniform(c, "weight", conv_w_numel(&p->d), -1.0f, 1.0f));
    bo_in_uniform(c, "bias", p->d.C_out, -1.0f, 1.0f);
}
static bool conv_fwd_run(const bo_case *c, bo_side *s)
{
    const conv_params *p = BO_PARAMS(c, conv_params);
    s->k->conv2d_forward(s->arg[0], s->arg[1], s->arg[2], p->bias ? s->arg[3] : NULL, &p->d,
                         conv_workspace(c, s));
    return true;
}
static const bo_op op_conv2d_forward = {"conv2d_forward", bo_has_conv2d_forward, conv_fwd_setup,
                                        conv_fwd_run, NULL, true, BO_MMA_CONV};

/* The gradients (dx, dweight, dbias), then dout, x (4), weight (5), and dout again (6),
 * unrounded: dbias is a plain sum of dout, which no tensor core rounds, so the reference takes
 * it from there in TF32 / BF16 modes (conv_backward_on). */
static void conv_bwd_buffers(bo_case *c, const conv_params *p)
{
    bo_acc(c, "dx", conv_x_numel(&p->d), BO_MMA);
    bo_acc(c, "dweight", conv_w_numel(&p->d), BO_MMA);
    bo_acc(c, "dbias", p->d.C_out, BO_SUM);
    bo_operand(c, bo_in_uniform(c, "dout", conv_out_numel(&p->d), -1.0f, 1.0f));
}

static void conv_dout_unrounded(bo_case *c, const conv_params *p)
{
    bo_in_copy(c, "dout (unrounded)", BO_F32, bo_f32(c, 3), conv_out_numel(&p->d));
}

/* conv2d_backward with the case's NULL gradients; on the reference side dbias comes from the
 * unrounded dout. x is the side's x (unpacked from bits on the reference side). */
static void conv_backward_on(const bo_case *c, bo_side *s, const float *x)
{
    const conv_params *p = BO_PARAMS(c, conv_params);
    float *dx = p->skip & 1 ? NULL : s->arg[0], *dw = p->skip & 2 ? NULL : s->arg[1];
    float *db = p->skip & 4 ? NULL : s->arg[2];
    float *ws = conv_workspace(c, s);
    if (!s->is_ref) {
        s->k->conv2d_backward(dx, dw, db, s->arg[3], x, s->arg[5], &p->d, ws);
        return;
    }
    s->k->conv2d_backward(dx, dw, NULL, s->arg[3], x, s->arg[5], &p->d, ws);
    if (db) s->k->conv2d_backward(NULL, NULL, db, s->arg[6], x, s->arg[5], &p->d, ws);
}

BO_HAS(conv2d_backward)
static void conv_bwd_setup(bo_case *c)
{
    const conv_params *p = BO_PARAMS(c, conv_params);
    conv_bwd_buffers(c, p);
    conv_input(c, p);
    bo_operand(c, bo_in_uniform(c, "weight", conv_w_numel(&p->d), -1.0f, 1.0f));
    conv_dout_unrounded(c, p);
}
static bool conv_bwd_run(const bo_case *c, bo_side *s)
{
    conv_backward_on(c, s, s->arg[4]);
    return true;
}
static const bo_op op_conv2d_backward = {"conv2d_backward", bo_has_conv2d_backward,
                                         conv_bwd_setup, conv_bwd_run, NULL, true, BO_MMA_CONV};

BO_HAS(conv2d_forward_bits)
/* x as spikes kept as bits; the reference (which has no such entry) unpacks them and runs its
 * conv2d_forward. The table's entry must give that output where conv2d_reads_bits says it
 * takes these dims, and decline, doing nothing, where it says not */
static void conv_fwd_bits_setup(bo_case *c)
{
    const conv_params *p = BO_PARAMS(c, conv_params);
    bo_out(c, "out", BO_F32, conv_out_numel(&p->d), BO_MMA);
    const int64_t n = conv_x_numel(&p->d);
    uint32_t *bits = c->buf[bo_in_words(c, "x_bits", (n + 31) / 32)].init;
    if (n % 32) bits[n / 32] &= (1u << (n % 32)) - 1u; /* the unused bits are 0 (pack_bits) */
    bo_operand(c, bo_in_uniform(c, "weight", conv_w_numel(&p->d), -1.0f, 1.0f));
    bo_in_uniform(c, "bias", p->d.C_out, -1.0f, 1.0f);
}
static bool conv_fwd_bits_run(const bo_case *c, bo_side *s)
{
    const conv_params *p = BO_PARAMS(c, conv_params);
    float *bias = p->bias ? s->arg[3] : NULL;
    if (!s->is_ref) {
        const bool reads = s->k->conv2d_reads_bits && s->k->conv2d_reads_bits(&p->d);
        const bool took = s->k->conv2d_forward_bits(s->arg[0], s->arg[1], s->arg[2], bias, &p->d,
                                                    conv_workspace(c, s));
        CHECK(took == reads); /* the entry and its predicate agree */
        return took;
    }
    const int64_t n = conv_x_numel(&p->d);
    float *x = bo_scratch(s, (size_t)n * sizeof *x);
    s->k->unpack_bits(x, s->arg[1], n);
    s->k->conv2d_forward(s->arg[0], x, s->arg[2], bias, &p->d, conv_workspace(c, s));
    return true;
}
static const bo_op op_conv2d_forward_bits = {"conv2d_forward_bits", bo_has_conv2d_forward_bits,
                                             conv_fwd_bits_setup, conv_fwd_bits_run, NULL, true,
                                             BO_MMA_CONV};

BO_HAS(conv2d_backward_bits)
/* x as spikes kept as bits; the reference (which has no such entry) unpacks them and runs its
 * conv2d_backward: the table's entry must give those gradients, or decline and do nothing */
static void conv_bits_setup(bo_case *c)
{
    const conv_params *p = BO_PARAMS(c, conv_params);
    conv_bwd_buffers(c, p);
    const int64_t n = conv_x_numel(&p->d);
    uint32_t *bits = c->buf[bo_in_words(c, "x_bits", (n + 31) / 32)].init;
    if (n % 32) bits[n / 32] &= (1u << (n % 32)) - 1u; /* the unused bits are 0 (pack_bits) */
    bo_operand(c, bo_in_uniform(c, "weight", conv_w_numel(&p->d), -1.0f, 1.0f));
    conv_dout_unrounded(c, p);
}
static bool conv_bits_run(const bo_case *c, bo_side *s)
{
    const conv_params *p = BO_PARAMS(c, conv_params);
    if (!s->is_ref)
        return s->k->conv2d_backward_bits(p->skip & 1 ? NULL : s->arg[0],
                                          p->skip & 2 ? NULL : s->arg[1],
                                          p->skip & 4 ? NULL : s->arg[2], s->arg[3], s->arg[4],
                                          s->arg[5], &p->d, conv_workspace(c, s));
    const int64_t n = conv_x_numel(&p->d);
    float *x = bo_scratch(s, (size_t)n * sizeof *x);
    s->k->unpack_bits(x, s->arg[4], n);
    conv_backward_on(c, s, x);
    return true;
}
static const bo_op op_conv2d_backward_bits = {"conv2d_backward_bits", bo_has_conv2d_backward_bits,
                                              conv_bits_setup, conv_bits_run, NULL, true,
                                              BO_MMA_CONV};

BO_HAS(conv2d_dx_over_dout)
/* conv2d_backward with dx == dout where the table says it takes that (conv2d_dx_over_dout): the
 * table's side copies dout into dx and runs the backward with both pointing there; the
 * reference runs its conv2d_backward into a zeroed dx. A table that does not take these dims
 * declines, doing nothing. Buffers as conv2d_backward's, but dx is written, not added into. */
static void conv_over_setup(bo_case *c)
{
    const conv_params *p = BO_PARAMS(c, conv_params);
    bo_out(c, "dx", BO_F32, conv_x_numel(&p->d), BO_MMA);
    bo_acc(c, "dweight", conv_w_numel(&p->d), BO_MMA);
    bo_acc(c, "dbias", p->d.C_out, BO_SUM);
    bo_operand(c, bo_in_uniform(c, "dout", conv_out_numel(&p->d), -1.0f, 1.0f));
    conv_input(c, p);
    bo_operand(c, bo_in_uniform(c, "weight", conv_w_numel(&p->d), -1.0f, 1.0f));
    conv_dout_unrounded(c, p);
}
static bool conv_over_run(const bo_case *c, bo_side *s)
{
    const conv_params *p = BO_PARAMS(c, conv_params);
    if (s->is_ref) {
        s->k->fill(s->arg[0], 0.0f, conv_x_numel(&p->d));
        conv_backward_on(c, s, s->arg[4]);
        return true;
    }
    if (!s->k->conv2d_dx_over_dout(&p->d)) return false;
    SNN_ASSERT(conv_x_numel(&p->d) == conv_out_numel(&p->d));
    s->k->copy(s->arg[0], s->arg[3], (size_t)conv_out_numel(&p->d) * sizeof(float),
               SNN_COPY_DEVICE_TO_DEVICE);
    s->k->conv2d_backward(s->arg[0], s->arg[1], s->arg[2], s->arg[0], s->arg[4], s->arg[5], &p->d,
                          conv_workspace(c, s)); /* dbias: the table reads dout before dx */
    return true;
}
static const bo_op op_conv2d_dx_over_dout = {"conv2d_dx_over_dout", bo_has_conv2d_dx_over_dout,
                                             conv_over_setup, conv_over_run, NULL, true,
                                             BO_MMA_CONV};

BO_HAS(conv2d_backward_consuming)
/* conv2d_backward_consuming (dout given up) without a batch-norm: the table's side copies dout
 * into a buffer it gives up, dx itself where the shape is kept and over is asked (dx written,
 * not added), and runs the entry in its own workspace size (NaN-filled: an entry that kept x's
 * copy outside dout, or wrote past it, fails or is the sanitizer's); the reference runs its
 * conv2d_backward. Buffers as conv2d_backward's (dx written where over). The entry declines
 * where its kernels cannot, doing nothing. Its bits against conv2d_backward(_bits,
 * _bn_dout) with x as bits and a batch-norm's record: tests/test_cuda_igemm.c. */
typedef struct conv_consume_params {
    conv_params conv; /* first: BO_PARAMS(c, conv_params) reads it */
    bool over;
} conv_consume_params;
static void conv_consume_setup(bo_case *c)
{
    const conv_consume_params *p = BO_PARAMS(c, conv_consume_params);
    if (p->over) conv_over_setup(c);
    else conv_bwd_setup(c);
}
static bool conv_consume_run(const bo_case *c, bo_side *s)
{
    const conv_consume_params *p = BO_PARAMS(c, conv_consume_params);
    const snn_conv2d_dims *d = &p->conv.d;
    if (s->is_ref) {
        if (p->over) s->k->fill(s->arg[0], 0.0f, conv_x_numel(d));
        conv_backward_on(c, s, s->arg[4]);
        return true;
    }
    if (p->over && !s->k->conv2d_dx_over_dout(d)) return false;
    const size_t ny = (size_t)conv_out_numel(d);
    float *dout = p->over ? s->arg[0] : bo_scratch(s, ny * sizeof(float));
    s->k->copy(dout, s->arg[3], ny * sizeof(float), SNN_COPY_DEVICE_TO_DEVICE);
    float *ws = bo_scratch(s, s->k->conv2d_backward_consuming_workspace_bytes(d));
    return s->k->conv2d_backward_consuming(p->over ? dout : s->arg[0], s->arg[1], s->arg[2],
                                           dout, NULL, s->arg[4], NULL, s->arg[5], d, ws);
}
static const bo_op op_conv2d_backward_consuming = {
    "conv2d_backward_consuming", bo_has_conv2d_backward_consuming, conv_consume_setup,
    conv_consume_run, NULL, true, BO_MMA_CONV};

BO_HAS(conv2d_backward_bn_dout)
/* conv2d_backward whose dout is made from a training batch-norm's dL/dout (snn_bn_dout). The
 * reference (which has no such entry) makes dout from dX as the entry documents it (below),
 * rounds it as the mode's tensor cores take their operands (where the table's copy rounds it),
 * and runs its conv2d_backward, into a zeroed dx where the table's side writes dx over dX
 * (conv_bn_params.over). The table's entry must give those gradients, or decline and do
 * nothing. Buffers: dx 0, dweight 1, dX 2 (the batch-norm's dL/dout), weight 3, x 4 (the
 * conv's input: floats, or spikes as bits), x_bn 5 (the batch-norm's input, the conv's output:
 * floats, or 6 its bf16 bits), gamma 7, save_mean 8, save_invstd 9, sums 10 (of dX and x_bn). */
typedef struct conv_bn_params {
    snn_conv2d_dims d; /* first: bo_conv_of reads it */
    bool x_bits;       /* the conv's x: spikes as bits */
    bool x_bn_bf16;    /* the batch-norm's x: kept as bf16 */
    bool over;         /* dx written over dX */
    int skip;          /* bit 0 drops dx, bit 1 dweight */
} conv_bn_params;

/* dout from dX with the batch-norm's in-place backward's float roundings (kernels/cuda/bn_dx.cuh:
 * c0, c1 from the sums in double, then t = dX - c0, u = x - mean, dout = a fma(-u, c1, t)):
 * the floats the entry's copy rounds, so that the reference's operand is the table's, bit for
 * bit, and the tolerance stays that of the products' order. The reference's own
 * batchnorm_backward_in_place_sums works in double: a dout a rounding apart would round to
 * another bf16 here and there, a 2^-8 error the conv then sums (the batch-norm's kernels are
 * held to that reference by their own cases, backend_ops_batchnorm.h). */
static void bn_dout_floats(float *dout, const float *dX, const float *x_bn, const float *gamma,
                           const float *mean, const float *invstd, const double *sums, int N,
                           int C, int HW)
{
    for (int c = 0; c < C; c++) {
        const float k = invstd[c], a = gamma[c] * k;
        const double M = sums[3 * c + 2];
        const float c0 = (float)(sums[3 * c] / M);
        const float c1 = (float)(sums[3 * c + 1] * (double)k / M * (double)k);
        for (int n = 0; n < N; n++)
            for (int i = 0; i < HW; i++) {
                const int64_t at = ((int64_t)n * C + c) * HW + i;
                const float t = dX[at] - c0, u = x_bn[at] - mean[c];
                dout[at] = fmaf(a, fmaf(-u, c1, t), 0.0f);
            }
    }
}

static void conv_bn_dout_setup(bo_case *c)
{
    const conv_bn_params *p = BO_PARAMS(c, conv_bn_params);
    const int64_t nx = conv_x_numel(&p->d), ny = conv_out_numel(&p->d);
    const int C = p->d.C_out, HW = p->d.H_out * p->d.W_out;
    if (p->over) bo_out(c, "dx", BO_F32, nx, BO_MMA);
    else bo_acc(c, "dx", nx, BO_MMA);
    bo_acc(c, "dweight", conv_w_numel(&p->d), BO_MMA);
    bo_in_uniform(c, "dX", ny, -1.0f, 1.0f);
    bo_operand(c, bo_in_uniform(c, "weight", conv_w_numel(&p->d), -1.0f, 1.0f));
    if (p->x_bits) {
        uint32_t *bits = c->buf[bo_in_words(c, "x_bits", (nx + 31) / 32)].init;
        if (nx % 32) bits[nx / 32] &= (1u << (nx % 32)) - 1u; /* unused bits 0 (pack_bits) */
    } else {
        bo_operand(c, bo_in_levels(c, "x", nx, 2));
    }
    float *x_bn = bo_f32(c, bo_in_normal(c, "x_bn", ny, 0.3f, 1.0f));
    uint16_t *x_bn_bits = c->buf[bo_buffer(c, "x_bn_bf16", BO_U32, BO_IN, BO_EXACT,
                                           (ny + 1) / 2)].init;
    if (p->x_bn_bf16)
        for (int64_t e = 0; e < ny; e++) {
            x_bn_bits[e] = snn_bf16_bits(x_bn[e]);
            x_bn[e] = snn_bf16_value(x_bn_bits[e]);
        }
    bo_in_uniform(c, "gamma", C, 0.5f, 1.5f);
    bo_in_uniform(c, "save_mean", C, 0.0f, 0.6f);
    bo_in_uniform(c, "save_invstd", C, 0.5f, 2.0f);
    const int sums = bo_buffer(c, "sums", BO_F64, BO_IN, BO_EXACT, 3 * (int64_t)C);
    snn_batchnorm_backward_sums_ref(c->buf[sums].init, bo_f32(c, 2), x_bn, bo_f32(c, 8),
                                    p->d.N, C, HW);
}
static bool conv_bn_dout_run(const bo_case *c, bo_side *s)
{
    const conv_bn_params *p = BO_PARAMS(c, conv_bn_params);
    void **a = s->arg;
    const int64_t nx = conv_x_numel(&p->d), ny = conv_out_numel(&p->d);
    const int C = p->d.C_out, HW = p->d.H_out * p->d.W_out;
    const float *x_bn = p->x_bn_bf16 ? NULL : a[5];
    const uint16_t *x_bn_bf16 = p->x_bn_bf16 ? a[6] : NULL;
    float *dx = p->skip & 1 ? NULL : a[0], *dw = p->skip & 2 ? NULL : a[1];
    float *ws = bo_scratch(s, s->k->conv2d_workspace_bytes(&p->d));
    if (!s->is_ref) {
        if (p->over && !(s->k->conv2d_dx_over_dout && s->k->conv2d_dx_over_dout(&p->d)))
            return false;
        const float *dX = a[2];
        if (p->over) {
            SNN_ASSERT(nx == ny);
            s->k->copy(a[0], a[2], (size_t)ny * sizeof(float), SNN_COPY_DEVICE_TO_DEVICE);
            dX = a[0];
        }
        const snn_bn_dout bn = {x_bn, x_bn_bf16, a[7], a[8], a[9], a[10]};
        return s->k->conv2d_backward_bn_dout(dx, dw, NULL, dX, &bn, p->x_bits ? NULL : a[4],
                                             p->x_bits ? a[4] : NULL, a[3], &p->d, ws);
    }
    float *dout = bo_scratch(s, (size_t)ny * sizeof *dout);
    bn_dout_floats(dout, a[2], a[5], a[7], a[8], a[9], a[10], p->d.N, C, HW); /* 5: as floats */
    for (int64_t e = 0; e < ny; e++) dout[e] = bo_round(dout[e], s->rounding);
    const float *x = a[4];
    if (p->x_bits) {
        float *unpacked = bo_scratch(s, (size_t)nx * sizeof *unpacked);
        s->k->unpack_bits(unpacked, a[4], nx);
        x = unpacked;
    }
    if (p->over && dx) s->k->fill(dx, 0.0f, nx);
    s->k->conv2d_backward(dx, dw, NULL, dout, x, a[3], &p->d, ws);
    return true;
}
static const bo_op op_conv2d_backward_bn_dout = {
    "conv2d_backward_bn_dout", bo_has_conv2d_backward_bn_dout, conv_bn_dout_setup,
    conv_bn_dout_run, NULL, true, BO_MMA_CONV};

BO_HAS(conv2d_forward_bn_eval)
/* gamma and beta may be NULL (bias = false drops them too here) */
static void conv_bn_setup(bo_case *c)
{
    const conv_params *p = BO_PARAMS(c, conv_params);
    const int C = p->d.C_out;
    bo_out(c, "out", BO_F32, conv_out_numel(&p->d), BO_MMA);
    conv_input(c, p);
    bo_operand(c, bo_in_uniform(c, "weight", conv_w_numel(&p->d), -1.0f, 1.0f));
    bo_in_uniform(c, "bias", C, -1.0f, 1.0f);
    bo_in_uniform(c, "gamma", C, 0.5f, 1.5f);
    bo_in_uniform(c, "beta", C, -0.5f, 0.5f);
    bo_in_uniform(c, "running_mean", C, -0.3f, 0.3f);
    bo_in_uniform(c, "running_var", C, 0.5f, 2.0f);
}
static bool conv_bn_run(const bo_case *c, bo_side *s)
{
    const conv_params *p = BO_PARAMS(c, conv_params);
    const snn_bn_eval bn = {p->bias ? s->arg[4] : NULL, p->bias ? s->arg[5] : NULL, s->arg[6],
                            s->arg[7], 1e-5f};
    s->k->conv2d_forward_bn_eval(s->arg[0], s->arg[1], s->arg[2], p->bias ? s->arg[3] : NULL,
                                 &bn, &p->d, conv_workspace(c, s));
    return true;
}
static const bo_op op_conv2d_forward_bn_eval = {"conv2d_forward_bn_eval",
                                                bo_has_conv2d_forward_bn_eval, conv_bn_setup,
                                                conv_bn_run, NULL, true, BO_MMA_CONV};

/* ---- pooling ------------------------------------------------------------------------------- */

typedef struct pool_params {
    snn_pool2d_dims d;
    bool spikes;       /* x in {0, 1}: ties everywhere; else whole numbers in [0, 5) */
} pool_params;

static snn_pool2d_dims pool_dims(int N, int C, int H, int W, int K, int stride, int pad)
{
    snn_pool2d_dims d = {N, C, H, W, K, stride, pad, 0, 0};
    d.H_out = (H + 2 * pad - K) / stride + 1;
    d.W_out = (W + 2 * pad - K) / stride + 1;
    return d;
}

static int64_t pool_in(const snn_pool2d_dims *d) { return (int64_t)d->N * d->C * d->H * d->W; }
static int64_t pool_out(const snn_pool2d_dims *d)
{
    return (int64_t)d->N * d->C * d->H_out * d->W_out;
}

BO_HAS(max_pool2d_forward)
/* small whole numbers: many ties, which the first in scan order must win */
static void max_fwd_setup(bo_case *c)
{
    const pool_params *p = BO_PARAMS(c, pool_params);
    bo_out(c, "out", BO_F32, pool_out(&p->d), BO_EXACT);
    bo_out(c, "argmax", BO_I32, pool_out(&p->d), BO_EXACT);
    bo_in_levels(c, "x", pool_in(&p->d), p->spikes ? 2 : 5);
}
static bool max_fwd_run(const bo_case *c, bo_side *s)
{
    s->k->max_pool2d_forward(s->arg[0], s->arg[1], s->arg[2], &BO_PARAMS(c, pool_params)->d);
    return true;
}
static const bo_op op_max_pool2d_forward = {"max_pool2d_forward", bo_has_max_pool2d_forward,
                                            max_fwd_setup, max_fwd_run, NULL, false, 0};

BO_HAS(max_pool2d_backward)
/* argmax from the reference's forward */
static void max_bwd_setup(bo_case *c)
{
    const pool_params *p = BO_PARAMS(c, pool_params);
    bo_acc(c, "dx", pool_in(&p->d), BO_SUM);
    bo_in_uniform(c, "dout", pool_out(&p->d), -1.0f, 1.0f);
    const int argmax = bo_buffer(c, "argmax", BO_I32, BO_IN, BO_EXACT, pool_out(&p->d));
    float *x = malloc((size_t)pool_in(&p->d) * sizeof *x);
    float *out = malloc((size_t)pool_out(&p->d) * sizeof *out);
    SNN_ASSERT(x && out);
    for (int64_t i = 0; i < pool_in(&p->d); i++) x[i] = (float)snn_rng_below(&bo_rng, 5);
    snn_max_pool2d_forward_ref(out, c->buf[argmax].init, x, &p->d);
    free(x), free(out);
}
static bool max_bwd_run(const bo_case *c, bo_side *s)
{
    s->k->max_pool2d_backward(s->arg[0], s->arg[1], s->arg[2], &BO_PARAMS(c, pool_params)->d);
    return true;
}
static const bo_op op_max_pool2d_backward = {"max_pool2d_backward", bo_has_max_pool2d_backward,
                                             max_bwd_setup, max_bwd_run, NULL, false, 0};

BO_HAS(avg_pool2d_forward)
static void avg_fwd_setup(bo_case *c)
{
    const pool_params *p = BO_PARAMS(c, pool_params);
    bo_out(c, "out", BO_F32, pool_out(&p->d), BO_SUM);
    bo_in_uniform(c, "x", pool_in(&p->d), -1.0f, 1.0f);
}
static bool avg_fwd_run(const bo_case *c, bo_side *s)
{
    s->k->avg_pool2d_forward(s->arg[0], s->arg[1], &BO_PARAMS(c, pool_params)->d);
    return true;
}
static const bo_op op_avg_pool2d_forward = {"avg_pool2d_forward", bo_has_avg_pool2d_forward,
                                            avg_fwd_setup, avg_fwd_run, NULL, false, 0};

BO_HAS(avg_pool2d_backward)
static void avg_bwd_setup(bo_case *c)
{
    const pool_params *p = BO_PARAMS(c, pool_params);
    bo_acc(c, "dx", pool_in(&p->d), BO_SUM);
    bo_in_uniform(c, "dout", pool_out(&p->d), -1.0f, 1.0f);
}
static bool avg_bwd_run(const bo_case *c, bo_side *s)
{
    s->k->avg_pool2d_backward(s->arg[0], s->arg[1], &BO_PARAMS(c, pool_params)->d);
    return true;
}
static const bo_op op_avg_pool2d_backward = {"avg_pool2d_backward", bo_has_avg_pool2d_backward,
                                             avg_bwd_setup, avg_bwd_run, NULL, false, 0};

#include "backend_ops_batchnorm.h"

/* ---- the list ------------------------------------------------------------------------------ */

static void bo_conv_cases(bo_list *l)
{
    const snn_conv2d_dims shapes[] = {
        conv_dims(2, 3, 7, 7, 4, 3, 3, 1, 1),       /* 3x3, same padding */
        conv_dims(3, 2, 8, 6, 5, 3, 3, 2, 1),       /* stride 2, non-square */
        conv_dims(2, 3, 9, 9, 4, 3, 3, 2, 0),       /* stride 2, no padding */
        conv_dims(2, 4, 5, 5, 3, 1, 1, 1, 0),       /* 1x1: no im2col, images grouped */
        conv_dims(3, 6, 12, 12, 5, 1, 1, 1, 0),     /* 1x1 on 144 positions: one image a GEMM */
        conv_dims(2, 4, 6, 6, 3, 1, 1, 2, 0),       /* 1x1 stride 2 (a ResNet shortcut) */
        conv_dims(1, 1, 4, 4, 1, 3, 3, 1, 0),       /* one image, one channel, a 4x4 plane */
        conv_dims(2, 2, 7, 7, 3, 5, 5, 1, 2),       /* 5x5 */
        conv_dims(2, 3, 8, 7, 2, 3, 1, 1, 1),       /* 3x1 */
        conv_dims(2, 2, 10, 10, 3, 3, 3, 3, 1),     /* stride 3 */
        conv_dims(17, 8, 4, 4, 16, 3, 3, 1, 1),     /* 4x4 planes: 16 images a group, then 1 */
        conv_dims(40, 16, 4, 4, 16, 3, 3, 1, 1),    /* the same, shape kept: dx over dout */
        conv_dims(33, 4, 8, 8, 6, 3, 3, 2, 1),      /* 4x4 outputs from stride 2 */
        conv_dims(3, 1, 28, 28, 32, 3, 3, 1, 1),    /* the Fashion-MNIST CNN's first conv */
        conv_dims(4, 32, 14, 14, 64, 3, 3, 1, 1),   /* its second (threaded on the CPU) */
        conv_dims(1, 64, 16, 16, 64, 3, 3, 1, 1),   /* one image over the threads */
        conv_dims(1, 33, 5, 5, 65, 3, 3, 1, 1),     /* 33 / 65 channels: no tile filled */
        /* channel counts that are multiples of 32 on planes of 8x8 and more */
        conv_dims(3, 32, 7, 9, 96, 3, 3, 1, 1),     /* odd plane */
        conv_dims(2, 64, 10, 10, 32, 5, 5, 1, 2),   /* 5x5 */
        conv_dims(2, 32, 9, 9, 32, 3, 3, 1, 0),     /* no padding */
        conv_dims(3, 32, 6, 5, 64, 3, 1, 1, 1),     /* 3x1 */
        conv_dims(5, 32, 8, 8, 64, 1, 1, 1, 0),     /* 1x1 */
        conv_dims(1, 160, 6, 6, 160, 3, 3, 1, 1),   /* one image, 160 channels */
        conv_dims(2, 32, 9, 7, 64, 3, 3, 2, 1),     /* stride 2, odd sizes */
        conv_dims(3, 32, 8, 8, 64, 1, 1, 2, 0),     /* 1x1 stride 2 */
        conv_dims(2, 64, 11, 10, 32, 5, 5, 2, 2),   /* 5x5 stride 2 */
        conv_dims(2, 32, 7, 7, 32, 3, 3, 3, 2),     /* stride 3 > pad */
        conv_dims(2, 32, 10, 10, 32, 2, 2, 2, 0),   /* 2x2 / 2: patches */
        conv_dims(3, 64, 8, 8, 96, 3, 3, 1, 1),     /* halo tiles of several images */
        conv_dims(3, 32, 16, 8, 32, 3, 3, 1, 1),
        conv_dims(8, 64, 8, 8, 128, 3, 3, 2, 1),    /* a late ResNet stage: 4x4 outputs */
    };
    /* large (bo_large_cases: the CUDA program): the models' layers (the Fashion-MNIST CNN at
     * width 128, ResNet-18's stages at the batches the CUDA kernels tile them), a batch the CUDA
     * im2col workspace (256 MiB) takes in chunks, one the channels-last copies (32 MiB) take in
     * two */
    const snn_conv2d_dims large[] = {
        conv_dims(8, 1, 28, 28, 128, 3, 3, 1, 1),
        conv_dims(8, 128, 14, 14, 128, 3, 3, 1, 1),
        conv_dims(12, 64, 32, 32, 64, 3, 3, 1, 1),   /* layer1 */
        conv_dims(12, 64, 32, 32, 128, 1, 1, 2, 0),  /* the downsampling shortcut */
        conv_dims(12, 128, 16, 16, 256, 3, 3, 2, 1), /* layer3 */
        conv_dims(24, 512, 4, 4, 512, 3, 3, 1, 1),   /* layer4 */
        conv_dims(160, 8, 64, 64, 8, 5, 5, 1, 2),    /* im2col in several chunks */
        conv_dims(34, 32, 128, 128, 32, 1, 1, 1, 0), /* channels-last copies in two chunks */
    };
    const int count = (int)(sizeof shapes / sizeof shapes[0]);
    const int total = count + (bo_large_cases ? (int)(sizeof large / sizeof large[0]) : 0);
    for (int i = 0; i < total; i++) {
        const snn_conv2d_dims d = i < count ? shapes[i] : large[i - count];
        char dims[80];
        snprintf(dims, sizeof dims, "N=%d Cin=%d %dx%d Cout=%d k=%dx%d s=%d p=%d", d.N, d.C_in,
                 d.H, d.W, d.C_out, d.KH, d.KW, d.stride, d.pad);
        const bool spikes = d.C_in >= 8 && i % 2 == 0; /* the spiking layers' inputs */
        const conv_params p = {d, i % 3 != 1, spikes, 0};
        bo_case *c = bo_add(l, &op_conv2d_forward, &p, sizeof p, "%s%s%s", dims,
                            p.bias ? " bias" : "", spikes ? " spikes" : "");
        c->conv = true;
        c = bo_add(l, &op_conv2d_backward, &p, sizeof p, "%s%s", dims, spikes ? " spikes" : "");
        c->conv = true;
        c = bo_add(l, &op_conv2d_forward_bn_eval, &p, sizeof p, "%s%s", dims,
                   p.bias ? " bias gamma beta" : "");
        c->conv = true;
        c = bo_add(l, &op_conv2d_forward_bits, &p, sizeof p, "%s%s", dims, p.bias ? " bias" : "");
        c->conv = true;
        c = bo_add(l, &op_conv2d_backward_bits, &p, sizeof p, "%s", dims);
        c->conv = true;
        c = bo_add(l, &op_conv2d_dx_over_dout, &p, sizeof p, "%s", dims);
        c->conv = true;
        const conv_consume_params u = {p, snn_conv2d_keeps_shape(&d) && i % 2 == 0};
        c = bo_add(l, &op_conv2d_backward_consuming, &u, sizeof u, "%s%s", dims,
                   u.over ? " dx over dout" : "");
        c->conv = true;
        /* dout from a batch-norm: the conv's x as floats or bits, the batch-norm's x as floats
         * or bf16, dx added or (where the shape is kept) written over dX */
        const bool keeps = snn_conv2d_keeps_shape(&d);
        const conv_bn_params q = {d, spikes, i % 2 == 1, keeps && i % 3 == 0, 0};
        c = bo_add(l, &op_conv2d_backward_bn_dout, &q, sizeof q, "%s%s%s%s", dims,
                   q.x_bits ? " x bits" : "", q.x_bn_bf16 ? " x_bn bf16" : "",
                   q.over ? " dx over dX" : "");
        c->conv = true;
    }
    /* every combination of NULL gradients, on a small shape and on a channels-last one */
    for (int skip = 1; skip < 8; skip++)
        for (int k = 0; k < 2; k++) {
            const snn_conv2d_dims d = k ? conv_dims(3, 32, 8, 8, 32, 3, 3, 1, 1)
                                        : conv_dims(3, 5, 6, 6, 7, 3, 3, 1, 1);
            const conv_params p = {d, true, false, skip};
            const char *what[8] = {"", "dx", "dweight", "dx dweight", "dbias", "dx dbias",
                                   "dweight dbias", "all"};
            bo_case *c = bo_add(l, &op_conv2d_backward, &p, sizeof p,
                                "N=3 Cin=%d %dx%d Cout=%d k=3x3 s=1 p=1, %s NULL", d.C_in, d.H,
                                d.W, d.C_out, what[skip]);
            c->conv = true;
            c = bo_add(l, &op_conv2d_backward_bits, &p, sizeof p,
                       "N=3 Cin=%d %dx%d Cout=%d k=3x3 s=1 p=1, %s NULL", d.C_in, d.H, d.W,
                       d.C_out, what[skip]);
            c->conv = true;
            if (skip < 4) { /* (it never takes dbias) */
                const conv_bn_params q = {d, false, false, false, skip};
                c = bo_add(l, &op_conv2d_backward_bn_dout, &q, sizeof q,
                           "N=3 Cin=%d %dx%d Cout=%d k=3x3 s=1 p=1, %s NULL", d.C_in, d.H,
                           d.W, d.C_out, what[skip]);
                c->conv = true;
            }
        }

    const snn_pool2d_dims pools[] = {
        pool_dims(4, 3, 8, 8, 2, 2, 0),      /* the spiking CNN's pool */
        pool_dims(2, 5, 9, 7, 3, 2, 1),      /* overlapping windows with padding */
        pool_dims(3, 2, 7, 9, 3, 1, 1),      /* stride 1 */
        pool_dims(1, 4, 9, 9, 4, 3, 2),      /* an even window, pad = K / 2 */
        pool_dims(2, 2, 5, 3, 3, 3, 1),      /* no interior column */
        pool_dims(2, 2, 5, 5, 4, 3, 2),      /* windows that see mostly padding */
        pool_dims(1, 1, 4, 4, 2, 2, 0),      /* one 4x4 plane */
        pool_dims(8, 16, 32, 32, 2, 2, 0),   /* threaded on the CPU */
        pool_dims(64, 32, 28, 28, 2, 2, 0),
    };
    for (size_t i = 0; i < sizeof pools / sizeof pools[0]; i++) {
        const snn_pool2d_dims *d = &pools[i];
        char dims[64];
        snprintf(dims, sizeof dims, "N=%d C=%d %dx%d K=%d s=%d p=%d", d->N, d->C, d->H, d->W,
                 d->K, d->stride, d->pad);
        for (int spikes = 0; spikes < 2; spikes++) {
            const pool_params p = {*d, spikes != 0};
            bo_add(l, &op_max_pool2d_forward, &p, sizeof p, "%s%s", dims,
                   spikes ? " spikes" : " ties");
        }
        const pool_params p = {*d, false};
        bo_add(l, &op_max_pool2d_backward, &p, sizeof p, "%s", dims);
        bo_add(l, &op_avg_pool2d_forward, &p, sizeof p, "%s", dims);
        bo_add(l, &op_avg_pool2d_backward, &p, sizeof p, "%s", dims);
    }
    bo_batchnorm_cases(l);
}
