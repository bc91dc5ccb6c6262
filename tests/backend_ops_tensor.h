/*
 * backend_ops_tensor.h - the parity harness's cases of the elementwise, reduction, GEMM, bias,
 * loss, random-mask and optimizer entries of kernels/kernels.h (part of backend_ops.h; the
 * convolution, pooling and batch-norm entries are in backend_ops_conv.h). Each op is a setup
 * (its buffers, in the order its run passes them) and a run (the entry's call).
 *
 * Sizes: 1, odd sizes, sizes around the 32-bit words of packed spikes and the CPU's 256-element
 * chunks, and sizes above the CPU's one-thread grain (32,768 elements: cpu_threads.h), so the
 * threaded paths run too.
 */

/* One function per entry: whether a side's table has it. */
#define BO_HAS(entry)                                                                         \
    static bool bo_has_##entry(const bo_side *s) { return s->k->entry != NULL; }

/* Every entry of snn_kernels is a pointer (name, 5 memory functions, 57 kernels): a new entry
 * changes the size, and this assert asks for its cases here, in backend_ops_conv.h or in
 * backend_ops_delay.h. (conv2d_backward_consuming_workspace_bytes sizes the workspace of
 * conv2d_backward_consuming's cases, backend_ops_conv.h.) */
_Static_assert(sizeof(snn_kernels) == 64 * sizeof(void *),
               "snn_kernels has a new entry: give it cases in tests/backend_ops_*.h");

/* ---- fill, axpy, lerp -------------------------------------------------------------------- */

typedef struct ew_params {
    int64_t n;
    float value;    /* fill's value, axpy's alpha, lerp's weight, unary's param */
    int op;         /* unary / binary op */
} ew_params;

BO_HAS(fill)
static void fill_setup(bo_case *c)
{
    bo_out(c, "out", BO_F32, BO_PARAMS(c, ew_params)->n, BO_EXACT);
}
static bool fill_run(const bo_case *c, bo_side *s)
{
    s->k->fill(s->arg[0], BO_PARAMS(c, ew_params)->value, BO_PARAMS(c, ew_params)->n);
    return true;
}
static const bo_op op_fill = {"fill", bo_has_fill, fill_setup, fill_run, NULL, false, 0};

BO_HAS(axpy)
static void axpy_setup(bo_case *c)
{
    const int64_t n = BO_PARAMS(c, ew_params)->n;
    bo_acc(c, "y", n, BO_ELEM);
    bo_in_uniform(c, "x", n, -1.0f, 1.0f);
}
static bool axpy_run(const bo_case *c, bo_side *s)
{
    const ew_params *p = BO_PARAMS(c, ew_params);
    s->k->axpy(s->arg[0], p->value, s->arg[1], p->n);
    return true;
}
static const bo_op op_axpy = {"axpy", bo_has_axpy, axpy_setup, axpy_run, NULL, false, 0};

BO_HAS(lerp)
/* y moves toward x; every 7th element has y == x, where y must stay exactly y */
static void lerp_setup(bo_case *c)
{
    const int64_t n = BO_PARAMS(c, ew_params)->n;
    const int y = bo_acc(c, "y", n, BO_ELEM);
    const int x = bo_in_uniform(c, "x", n, -1.0f, 1.0f);
    for (int64_t i = 0; i < n; i += 7) bo_f32(c, x)[i] = bo_f32(c, y)[i];
}
static bool lerp_run(const bo_case *c, bo_side *s)
{
    const ew_params *p = BO_PARAMS(c, ew_params);
    s->k->lerp(s->arg[0], s->arg[1], p->value, p->n);
    return true;
}
static const bo_op op_lerp = {"lerp", bo_has_lerp, lerp_setup, lerp_run, NULL, false, 0};

/* ---- spikes as bits ------------------------------------------------------------------------ */

BO_HAS(pack_bits)
/* spikes, with some other values: any x != 0 is a 1 bit, and -0 is a 0 bit */
static void pack_setup(bo_case *c)
{
    const int64_t n = BO_PARAMS(c, ew_params)->n;
    bo_out(c, "bits", BO_U32, (n + 31) / 32, BO_EXACT);
    float *x = bo_f32(c, bo_in_levels(c, "x", n, 2));
    const float odd[4] = {-0.0f, 0.5f, -2.0f, 1e-30f};
    for (int64_t i = 5; i < n; i += 11) x[i] = odd[(i / 11) % 4];
}
static bool pack_run(const bo_case *c, bo_side *s)
{
    s->k->pack_bits(s->arg[0], s->arg[1], BO_PARAMS(c, ew_params)->n);
    return true;
}
static const bo_op op_pack_bits = {"pack_bits", bo_has_pack_bits, pack_setup, pack_run, NULL,
                                   false, 0};

BO_HAS(unpack_bits)
static void unpack_setup(bo_case *c)
{
    const int64_t n = BO_PARAMS(c, ew_params)->n;
    bo_out(c, "x", BO_F32, n, BO_EXACT);
    bo_in_words(c, "bits", (n + 31) / 32);
}
static bool unpack_run(const bo_case *c, bo_side *s)
{
    s->k->unpack_bits(s->arg[0], s->arg[1], BO_PARAMS(c, ew_params)->n);
    return true;
}
static const bo_op op_unpack_bits = {"unpack_bits", bo_has_unpack_bits, unpack_setup, unpack_run,
                                     NULL, false, 0};

/* ---- values as bfloat16 -------------------------------------------------------------------- */

/* 16-bit values travel in 32-bit words, two a word (the low half first, as the bytes lie) */
static int64_t bf16_words(int64_t n) { return (n + 1) / 2; }

BO_HAS(round_bf16)
/* x in place: uniform values, and every kind of number the rounding treats apart: ties (the
 * dropped half exactly 0x8000, with an even and an odd kept bit), values that round up into the
 * next binade and past the largest bf16 to infinity, infinities, zeros of both signs and
 * subnormals */
static void round_bf16_setup(bo_case *c)
{
    const int64_t n = BO_PARAMS(c, ew_params)->n;
    float *x = bo_f32(c, bo_acc(c, "x", n, BO_EXACT));
    const uint32_t odd[10] = {0x3f808000u, 0x3f818000u, 0xbf7fffffu, 0x7f7fffffu, 0xff7fc000u,
                              0x7f800000u, 0x80000000u, 0x00000000u, 0x00008001u, 0x807f8000u};
    for (int64_t i = 3, k = 0; i < n; i += 7, k++) memcpy(&x[i], &odd[k % 10], sizeof(float));
    bo_out(c, "bf16", BO_U32, bf16_words(n), BO_EXACT);
}
static bool round_bf16_run(const bo_case *c, bo_side *s)
{
    s->k->round_bf16(s->arg[0], s->arg[1], BO_PARAMS(c, ew_params)->n);
    return true;
}
static const bo_op op_round_bf16 = {"round_bf16", bo_has_round_bf16, round_bf16_setup,
                                    round_bf16_run, NULL, false, 0};

BO_HAS(unpack_bf16)
/* bf16 numbers from normal values (no NaN: their bits are compared as floats) */
static void unpack_bf16_setup(bo_case *c)
{
    const int64_t n = BO_PARAMS(c, ew_params)->n;
    bo_out(c, "x", BO_F32, n, BO_EXACT);
    const int w = bo_buffer(c, "bf16", BO_U32, BO_IN, BO_EXACT, bf16_words(n));
    uint16_t *b = c->buf[w].init;
    for (int64_t i = 0; i < 2 * bf16_words(n); i++)
        b[i] = snn_bf16_bits(3.0f * snn_rng_normal(&bo_rng));
}
static bool unpack_bf16_run(const bo_case *c, bo_side *s)
{
    s->k->unpack_bf16(s->arg[0], s->arg[1], BO_PARAMS(c, ew_params)->n);
    return true;
}
static const bo_op op_unpack_bf16 = {"unpack_bf16", bo_has_unpack_bf16, unpack_bf16_setup,
                                     unpack_bf16_run, NULL, false, 0};

/* ---- unary and binary ops ------------------------------------------------------------------ */

static const char *const unary_names[SNN_UNARY_COUNT] = {
    "neg", "exp", "log", "relu", "sigmoid", "scale", "add_scalar", "square", "heaviside"};
static const char *const binary_names[SNN_BINARY_COUNT] = {"add", "sub", "mul", "div"};

/* x for a unary op: log's domain is positive; 0 (relu's and heaviside's kink) appears */
static int unary_input(bo_case *c, const ew_params *p)
{
    const float lo = p->op == SNN_UNARY_LOG ? 0.05f : -4.0f;
    const int x = bo_in_uniform(c, "x", p->n, lo, 4.0f);
    if (p->op != SNN_UNARY_LOG)
        for (int64_t i = 3; i < p->n; i += 97) bo_f32(c, x)[i] = 0.0f;
    return x;
}

BO_HAS(unary_forward)
static void unary_fwd_setup(bo_case *c)
{
    const ew_params *p = BO_PARAMS(c, ew_params);
    bo_out(c, "out", BO_F32, p->n, BO_ELEM);
    unary_input(c, p);
}
static bool unary_fwd_run(const bo_case *c, bo_side *s)
{
    const ew_params *p = BO_PARAMS(c, ew_params);
    s->k->unary_forward((snn_unary_op)p->op, s->arg[0], s->arg[1], p->value, p->n);
    return true;
}
static const bo_op op_unary_forward = {"unary_forward", bo_has_unary_forward, unary_fwd_setup,
                                       unary_fwd_run, NULL, false, 0};

BO_HAS(unary_backward)
/* both sides get the reference's forward output */
static void unary_bwd_setup(bo_case *c)
{
    const ew_params *p = BO_PARAMS(c, ew_params);
    bo_acc(c, "dx", p->n, BO_ELEM);
    bo_in_uniform(c, "dout", p->n, -1.0f, 1.0f);
    const int x = unary_input(c, p);
    const int out = bo_in_uniform(c, "out", p->n, 0.0f, 0.0f);
    snn_unary_forward_ref((snn_unary_op)p->op, bo_f32(c, out), bo_f32(c, x), p->value, p->n);
}
static bool unary_bwd_run(const bo_case *c, bo_side *s)
{
    const ew_params *p = BO_PARAMS(c, ew_params);
    s->k->unary_backward((snn_unary_op)p->op, s->arg[0], s->arg[1], s->arg[2], s->arg[3],
                         p->value, p->n);
    return true;
}
static const bo_op op_unary_backward = {"unary_backward", bo_has_unary_backward, unary_bwd_setup,
                                        unary_bwd_run, NULL, false, 0};

typedef struct binary_params {
    int op;
    int skip;            /* backward: 1 drops da, 2 drops db */
    snn_broadcast bc;
} binary_params;

/* The broadcast of a op b, as autograd/fn_elementwise.c builds it. */
static snn_broadcast make_broadcast(snn_shape a, snn_shape b)
{
    snn_broadcast bc;
    memset(&bc, 0, sizeof bc);
    const int ndim = a.ndim > b.ndim ? a.ndim : b.ndim;
    bc.out.ndim = ndim;
    int64_t stride_a = 1, stride_b = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        const int da = d - (ndim - a.ndim), db = d - (ndim - b.ndim);
        const int64_t sa = da >= 0 ? a.dim[da] : 1, sb = db >= 0 ? b.dim[db] : 1;
        bc.out.dim[d] = sa > sb ? sa : sb;
        bc.stride_a[d] = sa == 1 ? 0 : stride_a;
        bc.stride_b[d] = sb == 1 ? 0 : stride_b;
        stride_a *= sa;
        stride_b *= sb;
    }
    bc.numel = snn_shape_numel(bc.out);
    bc.numel_a = snn_shape_numel(a);
    bc.numel_b = snn_shape_numel(b);
    bc.same_shape = snn_shape_equal(a, b);
    return bc;
}

BO_HAS(binary_forward)
static void binary_fwd_setup(bo_case *c)
{
    const snn_broadcast *bc = &BO_PARAMS(c, binary_params)->bc;
    bo_out(c, "out", BO_F32, bc->numel, BO_ELEM);
    bo_in_uniform(c, "a", bc->numel_a, -2.0f, 2.0f);
    bo_in_uniform(c, "b", bc->numel_b, 0.5f, 2.0f); /* away from 0: div stays tame */
}
static bool binary_fwd_run(const bo_case *c, bo_side *s)
{
    const binary_params *p = BO_PARAMS(c, binary_params);
    s->k->binary_forward((snn_binary_op)p->op, s->arg[0], s->arg[1], s->arg[2], &p->bc);
    return true;
}
static const bo_op op_binary_forward = {"binary_forward", bo_has_binary_forward,
                                        binary_fwd_setup, binary_fwd_run, NULL, false, 0};

BO_HAS(binary_backward)
/* a broadcast operand's gradient is a sum over the dims it was repeated along */
static void binary_bwd_setup(bo_case *c)
{
    const snn_broadcast *bc = &BO_PARAMS(c, binary_params)->bc;
    bo_acc(c, "da", bc->numel_a, BO_SUM);
    bo_acc(c, "db", bc->numel_b, BO_SUM);
    bo_in_uniform(c, "dout", bc->numel, -1.0f, 1.0f);
    bo_in_uniform(c, "a", bc->numel_a, -2.0f, 2.0f);
    bo_in_uniform(c, "b", bc->numel_b, 0.5f, 2.0f);
}
static bool binary_bwd_run(const bo_case *c, bo_side *s)
{
    const binary_params *p = BO_PARAMS(c, binary_params);
    s->k->binary_backward((snn_binary_op)p->op, p->skip == 1 ? NULL : s->arg[0],
                          p->skip == 2 ? NULL : s->arg[1], s->arg[2], s->arg[3], s->arg[4],
                          &p->bc);
    return true;
}
static const bo_op op_binary_backward = {"binary_backward", bo_has_binary_backward,
                                         binary_bwd_setup, binary_bwd_run, NULL, false, 0};

/* ---- reductions ---------------------------------------------------------------------------- */

typedef struct dim_params {
    int64_t outer, dim, inner;
    float scale;
    bool accumulate;
} dim_params;

BO_HAS(sum_dim)
static void sum_dim_setup(bo_case *c)
{
    const dim_params *p = BO_PARAMS(c, dim_params);
    bo_out(c, "out", BO_F32, p->outer * p->inner, BO_SUM);
    bo_in_uniform(c, "x", p->outer * p->dim * p->inner, -1.0f, 1.0f);
}
static bool sum_dim_run(const bo_case *c, bo_side *s)
{
    const dim_params *p = BO_PARAMS(c, dim_params);
    s->k->sum_dim(s->arg[0], s->arg[1], p->outer, p->dim, p->inner, p->scale);
    return true;
}
static const bo_op op_sum_dim = {"sum_dim", bo_has_sum_dim, sum_dim_setup, sum_dim_run, NULL,
                                 false, 0};

BO_HAS(expand_dim)
static void expand_dim_setup(bo_case *c)
{
    const dim_params *p = BO_PARAMS(c, dim_params);
    const int64_t n = p->outer * p->dim * p->inner;
    if (p->accumulate) bo_acc(c, "out", n, BO_ELEM);
    else bo_out(c, "out", BO_F32, n, BO_EXACT); /* one product: the same bits everywhere */
    bo_in_uniform(c, "x", p->outer * p->inner, -1.0f, 1.0f);
}
static bool expand_dim_run(const bo_case *c, bo_side *s)
{
    const dim_params *p = BO_PARAMS(c, dim_params);
    s->k->expand_dim(s->arg[0], s->arg[1], p->outer, p->dim, p->inner, p->scale, p->accumulate);
    return true;
}
static const bo_op op_expand_dim = {"expand_dim", bo_has_expand_dim, expand_dim_setup,
                                    expand_dim_run, NULL, false, 0};

/* transpose01: x (rows, cols, inner) -> out (cols, rows, inner); the rows and pixels
 * encodings of the recurrent SNN (nn/model_rsnn.c) */
typedef struct transpose_params {
    int64_t rows, cols, inner;
    bool accumulate;
} transpose_params;

BO_HAS(transpose01)
static void transpose01_setup(bo_case *c)
{
    const transpose_params *p = BO_PARAMS(c, transpose_params);
    const int64_t n = p->rows * p->cols * p->inner;
    if (p->accumulate) bo_acc(c, "out", n, BO_ELEM);
    else bo_out(c, "out", BO_F32, n, BO_EXACT); /* a copy: the same bits everywhere */
    bo_in_uniform(c, "x", n, -1.0f, 1.0f);
}
static bool transpose01_run(const bo_case *c, bo_side *s)
{
    const transpose_params *p = BO_PARAMS(c, transpose_params);
    s->k->transpose01(s->arg[0], s->arg[1], p->rows, p->cols, p->inner, p->accumulate);
    return true;
}
static const bo_op op_transpose01 = {"transpose01", bo_has_transpose01, transpose01_setup,
                                     transpose01_run, NULL, false, 0};

BO_HAS(sumsq_and_finite)
/* x: uniform, or with an inf or a NaN at one place (value 1, 2) */
static void sumsq_setup(bo_case *c)
{
    const ew_params *p = BO_PARAMS(c, ew_params);
    bo_out(c, "out", BO_F32, 2, BO_CUSTOM);
    float *x = bo_f32(c, bo_in_uniform(c, "x", p->n, -1.0f, 1.0f));
    if (p->value == 1.0f) x[p->n / 2] = INFINITY;
    if (p->value == 2.0f) x[p->n / 3] = NAN;
}
static bool sumsq_run(const bo_case *c, bo_side *s)
{
    s->k->sumsq_and_finite(s->arg[0], s->arg[1], BO_PARAMS(c, ew_params)->n);
    return true;
}
/* out[0], the sum of squares, as a sum; out[1], the flag, exactly */
static double sumsq_compare(const bo_case *c, void *const *got, void *const *ref, char *why,
                            size_t why_size)
{
    (void)c;
    const float *g = got[0], *r = ref[0];
    const bo_tol tol = bo_tolerance_of(BO_SUM, NULL, NULL);
    double worst = bo_ratio((double)g[0], (double)r[0], 0.0, fabs((double)r[0]), &tol, 0x1.0p-23);
    if (g[1] != r[1]) worst = (double)INFINITY;
    if (!(worst <= 1.0))
        snprintf(why, why_size, "out = (%.9g, %g), reference (%.9g, %g)", (double)g[0],
                 (double)g[1], (double)r[0], (double)r[1]);
    return worst;
}
static const bo_op op_sumsq_and_finite = {"sumsq_and_finite", bo_has_sumsq_and_finite,
                                          sumsq_setup, sumsq_run, sumsq_compare, false, 0};

typedef struct rows_params {
    int N, C;
    float scale;
} rows_params;

BO_HAS(argmax_rows)
static void argmax_setup(bo_case *c)
{
    const rows_params *p = BO_PARAMS(c, rows_params);
    bo_out(c, "out", BO_F32, p->N, BO_EXACT);
    bo_in_levels(c, "x", (int64_t)p->N * p->C, 4); /* few levels: ties, the first must win */
}
static bool argmax_run(const bo_case *c, bo_side *s)
{
    const rows_params *p = BO_PARAMS(c, rows_params);
    s->k->argmax_rows(s->arg[0], s->arg[1], p->N, p->C);
    return true;
}
static const bo_op op_argmax_rows = {"argmax_rows", bo_has_argmax_rows, argmax_setup, argmax_run,
                                     NULL, false, 0};

/* ---- GEMM and bias ------------------------------------------------------------------------- */

typedef struct gemm_params {
    bool ta, tb;
    int M, N, K, pad;     /* pad: leading dimensions this much larger than the rows */
    float alpha, beta;
} gemm_params;

BO_HAS(gemm)
/* C (M, N + pad) starts random; with beta = 0 its M x N part is NaN, which must not be read;
 * the padding columns must stay as they were. */
static void gemm_setup(bo_case *c)
{
    const gemm_params *p = BO_PARAMS(c, gemm_params);
    const int a_rows = p->ta ? p->K : p->M, a_cols = p->ta ? p->M : p->K;
    const int b_rows = p->tb ? p->N : p->K, b_cols = p->tb ? p->K : p->N;
    const int ldc = p->N + p->pad;
    float *C = bo_f32(c, bo_acc(c, "C", (int64_t)p->M * ldc, BO_MMA));
    if (p->beta == 0.0f)
        for (int i = 0; i < p->M; i++)
            for (int j = 0; j < p->N; j++) C[(int64_t)i * ldc + j] = NAN;
    bo_operand(c, bo_in_uniform(c, "A", (int64_t)a_rows * (a_cols + p->pad), -1.0f, 1.0f));
    bo_operand(c, bo_in_uniform(c, "B", (int64_t)b_rows * (b_cols + p->pad), -1.0f, 1.0f));
}
static bool gemm_run(const bo_case *c, bo_side *s)
{
    const gemm_params *p = BO_PARAMS(c, gemm_params);
    const int lda = (p->ta ? p->M : p->K) + p->pad, ldb = (p->tb ? p->K : p->N) + p->pad;
    s->k->gemm(p->ta, p->tb, p->M, p->N, p->K, p->alpha, s->arg[1], lda, s->arg[2], ldb, p->beta,
               s->arg[0], p->N + p->pad);
    return true;
}
static const bo_op op_gemm = {"gemm", bo_has_gemm, gemm_setup, gemm_run, NULL, true, BO_MMA_GEMM};

typedef struct bias_params {
    int64_t outer, channels, inner;
} bias_params;

BO_HAS(bias_forward)
static void bias_fwd_setup(bo_case *c)
{
    const bias_params *p = BO_PARAMS(c, bias_params);
    bo_acc(c, "out", p->outer * p->channels * p->inner, BO_EXACT); /* one add */
    bo_in_uniform(c, "bias", p->channels, -1.0f, 1.0f);
}
static bool bias_fwd_run(const bo_case *c, bo_side *s)
{
    const bias_params *p = BO_PARAMS(c, bias_params);
    s->k->bias_forward(s->arg[0], s->arg[1], p->outer, p->channels, p->inner);
    return true;
}
static const bo_op op_bias_forward = {"bias_forward", bo_has_bias_forward, bias_fwd_setup,
                                      bias_fwd_run, NULL, false, 0};

BO_HAS(bias_backward)
static void bias_bwd_setup(bo_case *c)
{
    const bias_params *p = BO_PARAMS(c, bias_params);
    bo_acc(c, "dbias", p->channels, BO_SUM);
    bo_in_uniform(c, "dout", p->outer * p->channels * p->inner, -1.0f, 1.0f);
}
static bool bias_bwd_run(const bo_case *c, bo_side *s)
{
    const bias_params *p = BO_PARAMS(c, bias_params);
    s->k->bias_backward(s->arg[0], s->arg[1], p->outer, p->channels, p->inner);
    return true;
}
static const bo_op op_bias_backward = {"bias_backward", bo_has_bias_backward, bias_bwd_setup,
                                       bias_bwd_run, NULL, false, 0};

#include "backend_ops_loss.h"
#include "backend_ops_delay.h"

/* ---- the list ------------------------------------------------------------------------------ */

static void bo_tensor_cases(bo_list *l)
{
    const int64_t sizes[] = {1, 31, 32, 33, 257, 1000, 100003};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        const int64_t n = sizes[i];
        ew_params p = {n, -2.5f, 0};
        bo_add(l, &op_fill, &p, sizeof p, "n=%lld value=-2.5", (long long)n);
        p.value = 0.37f;
        bo_add(l, &op_axpy, &p, sizeof p, "n=%lld alpha=0.37", (long long)n);
        bo_add(l, &op_pack_bits, &p, sizeof p, "n=%lld", (long long)n);
        bo_add(l, &op_unpack_bits, &p, sizeof p, "n=%lld", (long long)n);
        bo_add(l, &op_round_bf16, &p, sizeof p, "n=%lld", (long long)n);
        bo_add(l, &op_unpack_bf16, &p, sizeof p, "n=%lld", (long long)n);
        bo_add(l, &op_sumsq_and_finite, &p, sizeof p, "n=%lld", (long long)n);
    }
    const float weights[] = {0.001f, 0.37f, 9.0f / 11.0f};
    for (int w = 0; w < 3; w++)
        for (int64_t n = 37; n <= 100003; n += 99966) {
            const ew_params p = {n, weights[w], 0};
            bo_add(l, &op_lerp, &p, sizeof p, "n=%lld weight=%g", (long long)n, (double)p.value);
        }
    for (int flag = 1; flag <= 2; flag++) {
        const ew_params p = {(int64_t)(1 << 20) + 5, (float)flag, 0};
        bo_add(l, &op_sumsq_and_finite, &p, sizeof p, "n=%lld with %s", (long long)p.n,
               flag == 1 ? "inf" : "NaN");
    }
    const ew_params big = {(int64_t)(1 << 20) + 5, 0.0f, 0};
    bo_add(l, &op_sumsq_and_finite, &big, sizeof big, "n=%lld", (long long)big.n);

    for (int op = 0; op < SNN_UNARY_COUNT; op++)
        for (int64_t n = 37; n <= 100003; n += 99966) {
            const ew_params p = {n, 0.75f, op};
            bo_add(l, &op_unary_forward, &p, sizeof p, "%s n=%lld", unary_names[op], (long long)n);
            bo_add(l, &op_unary_backward, &p, sizeof p, "%s n=%lld", unary_names[op],
                   (long long)n);
        }

    const struct { snn_shape a, b; } pairs[] = {
        {SNN_SHAPE(1000, 37), SNN_SHAPE(1000, 37)},     /* same shape: a flat loop */
        {SNN_SHAPE(4, 3, 5, 6), SNN_SHAPE(3, 1, 1)},    /* a per-channel operand */
        {SNN_SHAPE(1, 5, 1), SNN_SHAPE(4, 1, 6)},       /* both broadcast */
        {SNN_SHAPE(7), SNN_SHAPE(3, 2, 7)},             /* fewer dims */
        {SNN_SHAPE(32, 24, 16, 16), SNN_SHAPE(24, 1, 1)}, /* a bias summed over 8192 terms */
        {SNN_SHAPE(1), SNN_SHAPE(2, 3)},                /* a scalar */
    };
    for (int op = 0; op < SNN_BINARY_COUNT; op++)
        for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
            char sa[64], sb[64];
            snn_shape_str(pairs[i].a, sa, sizeof sa);
            snn_shape_str(pairs[i].b, sb, sizeof sb);
            for (int skip = 0; skip < 3; skip++) {
                const binary_params p = {op, skip, make_broadcast(pairs[i].a, pairs[i].b)};
                if (skip == 0)
                    bo_add(l, &op_binary_forward, &p, sizeof p, "%s %s %s", binary_names[op], sa,
                           sb);
                if (skip == 0 || i == 1 || i == 0)
                    bo_add(l, &op_binary_backward, &p, sizeof p, "%s %s %s%s", binary_names[op],
                           sa, sb, skip == 1 ? " da=NULL" : skip == 2 ? " db=NULL" : "");
            }
        }

    const dim_params dims[] = {
        {1, (1 << 20) + 17, 1, 0.25f, false}, /* one scalar from 1M values */
        {37, 1000, 1, 1.0f, false},           /* rows */
        {1000, 7, 1, 1.0f, false},            /* short rows */
        {3, 100000, 5, 0.5f, false},          /* narrow columns */
        {16, 33, 64, 1.0f / 33.0f, false},    /* a mean over a middle axis */
        {1, 1, 1000, 2.0f, false},            /* dim 1 */
    };
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++) {
        dim_params p = dims[i];
        bo_add(l, &op_sum_dim, &p, sizeof p, "(%lld, %lld, %lld) scale=%g", (long long)p.outer,
               (long long)p.dim, (long long)p.inner, (double)p.scale);
        for (int acc = 0; acc < 2; acc++) {
            p.accumulate = acc != 0;
            p.scale = acc ? 0.5f : -2.0f;
            bo_add(l, &op_expand_dim, &p, sizeof p, "(%lld, %lld, %lld) scale=%g%s",
                   (long long)p.outer, (long long)p.dim, (long long)p.inner, (double)p.scale,
                   acc ? " accumulate" : "");
        }
    }

    /* rows encoding (N*C, H, W), pixels (N*C, H*W, 1), a 1-row and a 1-column case */
    const transpose_params transposes[] = {
        {128, 28, 28, false}, {96, 784, 1, false}, {1, 37, 5, false}, {53, 1, 3, false},
        {7, 9, 11, false},
    };
    for (size_t i = 0; i < sizeof transposes / sizeof transposes[0]; i++) {
        for (int acc = 0; acc < 2; acc++) {
            transpose_params p = transposes[i];
            p.accumulate = acc != 0;
            bo_add(l, &op_transpose01, &p, sizeof p, "(%lld, %lld, %lld)%s", (long long)p.rows,
                   (long long)p.cols, (long long)p.inner, acc ? " accumulate" : "");
        }
    }

    const int argmax_shapes[][2] = {{100, 10}, {33, 1000}, {5, 1}, {4096, 3}, {1, 7}};
    for (size_t i = 0; i < sizeof argmax_shapes / sizeof argmax_shapes[0]; i++) {
        const rows_params p = {argmax_shapes[i][0], argmax_shapes[i][1], 1.0f};
        bo_add(l, &op_argmax_rows, &p, sizeof p, "N=%d C=%d (ties)", p.N, p.C);
    }

    /* GEMM: every transpose; odd sizes, M = 1, a K past the CPU's KC = 512 block, sizes past
     * its MC and NC blocks, leading dims larger than the rows, alpha and beta */
    const gemm_params gemms[] = {
        {false, false, 37, 53, 71, 0, 1.0f, 0.0f},    {false, false, 64, 33, 129, 3, 0.5f, 0.75f},
        {false, false, 1, 300, 17, 0, -1.0f, 1.0f},   {false, false, 128, 10, 784, 5, 1.0f, 0.0f},
        {false, false, 1, 1, 1, 0, 1.0f, 0.0f},       {false, false, 200, 1100, 40, 1, 1.0f, 0.0f},
        {false, false, 130, 70, 1100, 2, 1.0f, 1.0f},
    };
    for (size_t i = 0; i < sizeof gemms / sizeof gemms[0]; i++)
        for (int t = 0; t < 4; t++) {
            gemm_params p = gemms[i];
            p.ta = t & 1, p.tb = (t >> 1) & 1;
            bo_add(l, &op_gemm, &p, sizeof p, "%c%c M=%d N=%d K=%d alpha=%g beta=%g ld+%d",
                   p.ta ? 'T' : 'N', p.tb ? 'T' : 'N', p.M, p.N, p.K, (double)p.alpha,
                   (double)p.beta, p.pad);
        }
    const gemm_params long_k = {false, true, 64, 64, 20000, 0, 1.0f, 1.0f}; /* a dweight */
    bo_add(l, &op_gemm, &long_k, sizeof long_k, "NT M=64 N=64 K=20000 alpha=1 beta=1");

    const bias_params biases[] = {{8, 64, 196}, {128, 10, 1}, {3, 5000, 1}, {2, 3, 100000},
                                  {5, 7, 9}, {1, 1, 1}};
    for (size_t i = 0; i < sizeof biases / sizeof biases[0]; i++) {
        const bias_params *p = &biases[i];
        bo_add(l, &op_bias_forward, p, sizeof *p, "(%lld, %lld, %lld)", (long long)p->outer,
               (long long)p->channels, (long long)p->inner);
        bo_add(l, &op_bias_backward, p, sizeof *p, "(%lld, %lld, %lld)", (long long)p->outer,
               (long long)p->channels, (long long)p->inner);
    }
    bo_loss_cases(l);
    bo_delay_cases(l);
}
