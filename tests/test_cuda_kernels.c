/*
 * test_cuda_kernels.c - the CUDA kernel table (the tensor/ .cu files) against the CPU reference
 * (the tensor/ .c files) on random inputs, part 1: memory, elementwise, reductions, GEMM, bias,
 * losses, dropout, Poisson encoding and optimizers (test_cuda_layers.c has conv2d, pooling and
 * batch-norm).
 * Every CUDA kernel is checked against the CPU reference this way; the harness and its three
 * kinds of comparison (elementwise, norm-wise for sums, exact) are in cuda_parity.h.
 *
 * For each entry the same host inputs go to snn_kernels_cpu and, copied to the GPU, to the
 * CUDA table reached through snn_kernels_for(SNN_CUDA) (so this file compiles in a build
 * without CUDA too); the results are compared:
 *   - elementwise results:  |got - want| <= ATOL + RTOL |want| per element (1e-6, 1e-5);
 *   - GEMM and conv2d, whose sums run over K = 10^2..10^4 terms in different orders:
 *     ||got - want|| / ||want|| < 1e-5 (fp32), < 2e-3 with TF32 tensor cores;
 *   - exact (bit for bit): copies, fill, the dropout mask, the Poisson spikes, argmax
 *     (max-pool and rows), one-hot, max-pool values.
 * Backward kernels accumulate: their gradient outputs are pre-filled with the same random
 * values on both sides, and every NULL gradient output is exercised. Shapes include odd sizes,
 * padding and strides, sizes that span several blocks, chunks and segments, and one-scalar
 * reductions over 4M elements (the multi-block paths).
 *
 * Without a GPU the test exits 77, which ctest reports as skipped (never as passed).
 * Run on the GPU machine: ctest -R cuda_kernels --output-on-failure
 * (and compute-sanitizer --tool memcheck build/bin/test_cuda_kernels).
 */
#include "cuda_parity.h"

static void test_table_complete(void)
{
#define HAS(entry) CHECK(gpu->entry != NULL)
    CHECK(gpu->name && strcmp(gpu->name, "cuda") == 0);
    HAS(device_alloc); HAS(device_free); HAS(copy); HAS(synchronize); HAS(memory_info);
    HAS(fill); HAS(axpy); HAS(lerp); HAS(pack_bits); HAS(unpack_bits); HAS(unary_forward);
    HAS(unary_backward); HAS(binary_forward); HAS(binary_backward); HAS(sum_dim);
    HAS(expand_dim); HAS(gemm); HAS(bias_forward); HAS(bias_backward);
    HAS(conv2d_workspace_bytes); HAS(conv2d_forward); HAS(conv2d_backward);
    HAS(conv2d_backward_bits); HAS(conv2d_forward_bn_eval); HAS(max_pool2d_forward);
    HAS(max_pool2d_backward);
    HAS(avg_pool2d_forward); HAS(avg_pool2d_backward); HAS(batchnorm_forward_train);
    HAS(batchnorm_forward_eval); HAS(batchnorm_backward); HAS(log_softmax_forward);
    HAS(log_softmax_backward); HAS(nll_forward); HAS(nll_backward); HAS(one_hot);
    HAS(argmax_rows); HAS(dropout_mask); HAS(sgd_update); HAS(adam_update); HAS(adam_update_many);
    HAS(sumsq_and_finite); HAS(poisson_encode);
#undef HAS
}

static void test_copy_and_fill(void)
{
    const size_t n = 1000003;
    float *h = random_host(n, -1.0f, 1.0f);
    float *d1 = dev_copy(h, n);
    float *d2 = dev_floats(n);
    gpu->copy(d2, d1, n * sizeof *h, SNN_COPY_DEVICE_TO_DEVICE);
    expect_exact("copy host -> device -> device -> host", d2, h, n * sizeof *h);

    float *want = host_floats(n);
    cpu->fill(want, -2.5f, (int64_t)n);
    gpu->fill(d2, -2.5f, (int64_t)n);
    expect_exact("fill", d2, want, n * sizeof *want);
    gpu->synchronize();
    release_all();
}

static void test_axpy(void)
{
    const size_t n = (1u << 20) + 3;
    float *x = random_host(n, -1.0f, 1.0f), *y = random_host(n, -1.0f, 1.0f);
    float *dx = dev_copy(x, n), *dy = dev_copy(y, n);
    cpu->axpy(y, 0.37f, x, (int64_t)n);
    gpu->axpy(dy, 0.37f, dx, (int64_t)n);
    expect_close("axpy", dy, y, n, ATOL, RTOL);
    release_all();
}

/* lerp (the weights' moving average): random y and x, and y == x, which must stay exact */
static void test_lerp(void)
{
    const size_t n = (1u << 20) + 3;
    float *x = random_host(n, -1.0f, 1.0f), *y = random_host(n, -1.0f, 1.0f);
    for (size_t i = 0; i < n; i += 7) x[i] = y[i];
    float *dx = dev_copy(x, n), *dy = dev_copy(y, n);
    const float weights[3] = {0.001f, 0.37f, 9.0f / 11.0f};
    for (int w = 0; w < 3; w++) {
        cpu->lerp(y, x, weights[w], (int64_t)n);
        gpu->lerp(dy, dx, weights[w], (int64_t)n);
    }
    expect_close("lerp", dy, y, n, ATOL, RTOL);
    float *back = host_floats(n);
    gpu->copy(back, dy, n * sizeof *back, SNN_COPY_DEVICE_TO_HOST);
    gpu->synchronize();
    int moved = 0;
    for (size_t i = 0; i < n; i += 7) moved += back[i] != x[i];
    CHECK(moved == 0);
    release_all();
}

/* ---------------------------------------------------------------------------------------------
 * Unary and binary ops
 * ------------------------------------------------------------------------------------------- */

static const char *unary_names[SNN_UNARY_COUNT] = {
    "neg", "exp", "log", "relu", "sigmoid", "scale", "add_scalar", "square", "heaviside"};

static void test_unary(void)
{
    const size_t n = 100003;
    char what[96];
    for (int op = 0; op < SNN_UNARY_COUNT; op++) {
        const float lo = op == SNN_UNARY_LOG ? 0.05f : -4.0f;
        float *x = random_host(n, lo, 4.0f);
        x[0] = 0.0f; /* relu and heaviside at their kink */
        if (op == SNN_UNARY_LOG) x[0] = 1.0f;
        float *out = host_floats(n);
        float *dx_x = dev_copy(x, n), *d_out = dev_floats(n);
        cpu->unary_forward((snn_unary_op)op, out, x, 0.75f, (int64_t)n);
        gpu->unary_forward((snn_unary_op)op, d_out, dx_x, 0.75f, (int64_t)n);
        snprintf(what, sizeof what, "unary_forward %s", unary_names[op]);
        expect_close(what, d_out, out, n, ATOL, RTOL);

        /* backward: both sides get the CPU's `out`, and the same pre-filled dx */
        float *dout = random_host(n, -1.0f, 1.0f);
        float *dx = random_host(n, -1.0f, 1.0f);
        float *d_dout = dev_copy(dout, n), *d_dx = dev_copy(dx, n), *d_out_cpu = dev_copy(out, n);
        cpu->unary_backward((snn_unary_op)op, dx, dout, x, out, 0.75f, (int64_t)n);
        gpu->unary_backward((snn_unary_op)op, d_dx, d_dout, dx_x, d_out_cpu, 0.75f, (int64_t)n);
        snprintf(what, sizeof what, "unary_backward %s", unary_names[op]);
        expect_close(what, d_dx, dx, n, ATOL, RTOL);
        release_all();
    }
}

/* The broadcast of a op b, built as autograd/fn_elementwise.c builds it. */
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

static const char *binary_names[SNN_BINARY_COUNT] = {"add", "sub", "mul", "div"};

static void binary_case(snn_binary_op op, snn_shape sa, snn_shape sb, int skip)
{
    char what[256], bufa[64], bufb[64];
    snn_shape_str(sa, bufa, sizeof bufa);
    snn_shape_str(sb, bufb, sizeof bufb);
    const snn_broadcast bc = make_broadcast(sa, sb);
    const size_t na = (size_t)bc.numel_a, nb = (size_t)bc.numel_b, n = (size_t)bc.numel;
    float *a = random_host(na, -2.0f, 2.0f);
    float *b = random_host(nb, 0.5f, 2.0f); /* away from 0: DIV stays tame */
    float *out = host_floats(n);
    float *d_a = dev_copy(a, na), *d_b = dev_copy(b, nb), *d_out = dev_floats(n);
    cpu->binary_forward(op, out, a, b, &bc);
    gpu->binary_forward(op, d_out, d_a, d_b, &bc);
    snprintf(what, sizeof what, "binary_forward %s %s %s", binary_names[op], bufa, bufb);
    expect_close(what, d_out, out, n, ATOL, RTOL);

    /* skip: 0 both gradients, 1 da NULL, 2 db NULL */
    float *dout = random_host(n, -1.0f, 1.0f);
    float *da = random_host(na, -1.0f, 1.0f), *db = random_host(nb, -1.0f, 1.0f);
    float *d_dout = dev_copy(dout, n), *d_da = dev_copy(da, na), *d_db = dev_copy(db, nb);
    cpu->binary_backward(op, skip == 1 ? NULL : da, skip == 2 ? NULL : db, dout, a, b, &bc);
    gpu->binary_backward(op, skip == 1 ? NULL : d_da, skip == 2 ? NULL : d_db, d_dout, d_a, d_b,
                         &bc);
    /* the CPU adds one float term at a time, the GPU sums in double first: allow the CPU's
     * rounding over the longest sum (terms of size ~2, up to ~10^4 of them) */
    const double atol = 1e-5 * (double)(n / (na < nb ? na : nb));
    snprintf(what, sizeof what, "binary_backward %s %s %s da%s", binary_names[op], bufa, bufb,
             skip == 1 ? " (NULL)" : "");
    expect_close(what, d_da, da, na, atol > ATOL ? atol : ATOL, RTOL);
    snprintf(what, sizeof what, "binary_backward %s %s %s db%s", binary_names[op], bufa, bufb,
             skip == 2 ? " (NULL)" : "");
    expect_close(what, d_db, db, nb, atol > ATOL ? atol : ATOL, RTOL);
    release_all();
}

static void test_binary(void)
{
    for (int op = 0; op < SNN_BINARY_COUNT; op++) {
        binary_case((snn_binary_op)op, SNN_SHAPE(1000, 37), SNN_SHAPE(1000, 37), 0);
        binary_case((snn_binary_op)op, SNN_SHAPE(4, 3, 5, 6), SNN_SHAPE(3, 1, 1), 0);
        binary_case((snn_binary_op)op, SNN_SHAPE(1, 5, 1), SNN_SHAPE(4, 1, 6), 0);
        binary_case((snn_binary_op)op, SNN_SHAPE(7), SNN_SHAPE(3, 2, 7), 0);
        /* a bias-like operand summed over 32*16*16 = 8192 terms: the block-per-element path */
        binary_case((snn_binary_op)op, SNN_SHAPE(32, 24, 16, 16), SNN_SHAPE(24, 1, 1), 0);
    }
    binary_case(SNN_BINARY_MUL, SNN_SHAPE(4, 3, 5, 6), SNN_SHAPE(3, 1, 1), 1);
    binary_case(SNN_BINARY_DIV, SNN_SHAPE(4, 3, 5, 6), SNN_SHAPE(3, 1, 1), 2);
    binary_case(SNN_BINARY_SUB, SNN_SHAPE(100, 10), SNN_SHAPE(100, 10), 1);
    binary_case(SNN_BINARY_DIV, SNN_SHAPE(100, 10), SNN_SHAPE(100, 10), 2);
}

/* ---------------------------------------------------------------------------------------------
 * Reductions
 * ------------------------------------------------------------------------------------------- */

static void sum_dim_case(int64_t outer, int64_t dim, int64_t inner, float scale)
{
    char what[128];
    const size_t n = (size_t)(outer * dim * inner), m = (size_t)(outer * inner);
    float *x = random_host(n, -1.0f, 1.0f);
    float *out = host_floats(m);
    float *d_x = dev_copy(x, n), *d_out = dev_floats(m);
    cpu->sum_dim(out, x, outer, dim, inner, scale);
    gpu->sum_dim(d_out, d_x, outer, dim, inner, scale);
    snprintf(what, sizeof what, "sum_dim (%lld, %lld, %lld)", (long long)outer, (long long)dim,
             (long long)inner);
    /* both sum in double: they differ by float rounding of the result only */
    expect_close(what, d_out, out, m, ATOL, RTOL);

    /* expand_dim back, overwriting and accumulating */
    float *y = random_host(n, -1.0f, 1.0f);
    float *d_y = dev_copy(y, n);
    cpu->expand_dim(y, out, outer, dim, inner, 0.5f, true);
    float *d_out_cpu = dev_copy(out, m);
    gpu->expand_dim(d_y, d_out_cpu, outer, dim, inner, 0.5f, true);
    snprintf(what, sizeof what, "expand_dim accumulate (%lld, %lld, %lld)", (long long)outer,
             (long long)dim, (long long)inner);
    expect_close(what, d_y, y, n, ATOL, RTOL);
    cpu->expand_dim(y, out, outer, dim, inner, -2.0f, false);
    gpu->expand_dim(d_y, d_out_cpu, outer, dim, inner, -2.0f, false);
    snprintf(what, sizeof what, "expand_dim overwrite (%lld, %lld, %lld)", (long long)outer,
             (long long)dim, (long long)inner);
    expect_exact(what, d_y, y, n * sizeof *y);
    release_all();
}

static void test_sum_dim(void)
{
    sum_dim_case(1, (1 << 22) + 17, 1, 0.25f);  /* one scalar from 4M values: row segments */
    sum_dim_case(37, 1000, 1, 1.0f);            /* rows */
    sum_dim_case(1000, 7, 1, 1.0f);             /* short rows: one thread each */
    sum_dim_case(3, 100000, 5, 0.5f);           /* narrow columns: dim split in segments */
    sum_dim_case(16, 33, 64, 1.0f / 33.0f);     /* a mean over a middle axis */
    sum_dim_case(1, 1, 1000, 2.0f);             /* dim 1 */
}

static void test_sumsq_and_finite(void)
{
    const size_t sizes[] = {1, 1000, (1u << 22) + 5};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        const size_t n = sizes[s];
        float *x = random_host(n, -1.0f, 1.0f);
        float want[2], got[2];
        float *d_x = dev_copy(x, n), *d_out = dev_floats(2);
        cpu->sumsq_and_finite(want, x, (int64_t)n);
        gpu->sumsq_and_finite(d_out, d_x, (int64_t)n);
        download(got, d_out, sizeof got);
        CHECK_CLOSE(got[0], want[0], ATOL, RTOL);
        CHECK(got[1] == 0.0f && want[1] == 0.0f);

        x[n / 2] = INFINITY;
        upload(d_x + n / 2, x + n / 2, sizeof *x);
        gpu->sumsq_and_finite(d_out, d_x, (int64_t)n);
        download(got, d_out, sizeof got);
        CHECK(got[1] == 1.0f);
        x[n / 2] = NAN;
        upload(d_x + n / 2, x + n / 2, sizeof *x);
        gpu->sumsq_and_finite(d_out, d_x, (int64_t)n);
        download(got, d_out, sizeof got);
        CHECK(got[1] == 1.0f);
        release_all();
    }
}

static void test_argmax_rows(void)
{
    const int shapes[][2] = {{100, 10}, {33, 1000}, {5, 1}, {4096, 3}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int N = shapes[s][0], C = shapes[s][1];
        const size_t n = (size_t)N * C;
        /* few levels: many rows have tied maxima, and the first must win */
        float *x = integer_host(n, 4);
        float *want = host_floats((size_t)N);
        float *d_x = dev_copy(x, n), *d_out = dev_floats((size_t)N);
        cpu->argmax_rows(want, x, N, C);
        gpu->argmax_rows(d_out, d_x, N, C);
        expect_exact("argmax_rows (ties)", d_out, want, (size_t)N * sizeof *want);
        release_all();
    }
}

/* ---------------------------------------------------------------------------------------------
 * GEMM
 * ------------------------------------------------------------------------------------------- */

static void gemm_case(bool ta, bool tb, int M, int N, int K, float alpha, float beta, int pad,
                      double tol)
{
    char what[128];
    /* stored shapes: A (M, K) or (K, M); B (K, N) or (N, K); leading dims padded by `pad` */
    const int a_rows = ta ? K : M, a_cols = ta ? M : K;
    const int b_rows = tb ? N : K, b_cols = tb ? K : N;
    const int lda = a_cols + pad, ldb = b_cols + pad, ldc = N + pad;
    const size_t na = (size_t)a_rows * lda, nb = (size_t)b_rows * ldb, nc = (size_t)M * ldc;
    float *A = random_host(na, -1.0f, 1.0f), *B = random_host(nb, -1.0f, 1.0f);
    float *C = random_host(nc, -1.0f, 1.0f);
    float *d_A = dev_copy(A, na), *d_B = dev_copy(B, nb), *d_C = dev_copy(C, nc);
    if (beta == 0.0f) {
        /* beta = 0 must ignore C: give the GPU NaN there, the CPU its random values */
        float *nan_c = host_floats(nc);
        for (size_t i = 0; i < nc; i++) nan_c[i] = NAN;
        upload(d_C, nan_c, nc * sizeof *nan_c);
    }
    cpu->gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    gpu->gemm(ta, tb, M, N, K, alpha, d_A, lda, d_B, ldb, beta, d_C, ldc);
    if (beta == 0.0f && pad > 0) {
        /* the padding columns of C are not part of the product: compare only M x N */
        float *got = host_floats(nc);
        download(got, d_C, nc * sizeof *got);
        for (int i = 0; i < M; i++)
            for (int j = N; j < ldc; j++) got[(size_t)i * ldc + j] = C[(size_t)i * ldc + j];
        upload(d_C, got, nc * sizeof *got);
    }
    snprintf(what, sizeof what, "gemm %c%c M=%d N=%d K=%d alpha=%g beta=%g ld+%d", ta ? 'T' : 'N',
             tb ? 'T' : 'N', M, N, K, (double)alpha, (double)beta, pad);
    expect_norm(what, d_C, C, nc, tol);
    release_all();
}

static void test_gemm(void)
{
    for (int t = 0; t < 4; t++) {
        const bool ta = t & 1, tb = (t >> 1) & 1;
        gemm_case(ta, tb, 37, 53, 71, 1.0f, 0.0f, 0, NORM_TOL);
        gemm_case(ta, tb, 64, 33, 129, 0.5f, 0.75f, 3, NORM_TOL);
        gemm_case(ta, tb, 1, 300, 17, -1.0f, 1.0f, 0, NORM_TOL);
        gemm_case(ta, tb, 128, 10, 784, 1.0f, 0.0f, 5, NORM_TOL);
    }
    gemm_case(false, true, 64, 64, 20000, 1.0f, 1.0f, 0, NORM_TOL); /* long K (a dweight) */
#ifdef SNN_WITH_CUDA
    /* TF32 tensor cores: 10-bit mantissa inputs, fp32 accumulation */
    snn_cuda_set_tf32(true);
    CHECK(snn_cuda_tf32());
    gemm_case(false, false, 256, 256, 256, 1.0f, 0.0f, 0, TF32_NORM_TOL);
    gemm_case(true, true, 130, 70, 500, 1.0f, 1.0f, 2, TF32_NORM_TOL);
    snn_cuda_set_tf32(false);
#endif
}

/* ---------------------------------------------------------------------------------------------
 * Bias
 * ------------------------------------------------------------------------------------------- */

static void bias_case(int64_t outer, int64_t channels, int64_t inner)
{
    char what[128];
    const size_t n = (size_t)(outer * channels * inner), c = (size_t)channels;
    float *out = random_host(n, -1.0f, 1.0f), *bias = random_host(c, -1.0f, 1.0f);
    float *d_out = dev_copy(out, n), *d_bias = dev_copy(bias, c);
    cpu->bias_forward(out, bias, outer, channels, inner);
    gpu->bias_forward(d_out, d_bias, outer, channels, inner);
    snprintf(what, sizeof what, "bias_forward (%lld, %lld, %lld)", (long long)outer,
             (long long)channels, (long long)inner);
    expect_exact(what, d_out, out, n * sizeof *out);

    float *dout = random_host(n, -1.0f, 1.0f), *dbias = random_host(c, -1.0f, 1.0f);
    float *d_dout = dev_copy(dout, n), *d_dbias = dev_copy(dbias, c);
    cpu->bias_backward(dbias, dout, outer, channels, inner);
    gpu->bias_backward(d_dbias, d_dout, outer, channels, inner);
    snprintf(what, sizeof what, "bias_backward (%lld, %lld, %lld)", (long long)outer,
             (long long)channels, (long long)inner);
    expect_close(what, d_dbias, dbias, c, ATOL, RTOL);
    release_all();
}

static void test_bias(void)
{
    bias_case(8, 64, 196);     /* conv */
    bias_case(128, 10, 1);     /* linear */
    bias_case(3, 5000, 1);     /* wide linear: one thread per channel */
    bias_case(2, 3, 100000);   /* few channels: segments */
    bias_case(5, 7, 9);
}

/* ---------------------------------------------------------------------------------------------
 * conv2d
 * ------------------------------------------------------------------------------------------- */

static void loss_case(int N, int C)
{
    char what[128];
    const size_t n = (size_t)N * C;
    float *x = random_host(n, -5.0f, 5.0f), *out = host_floats(n);
    float *labels = integer_host((size_t)N, C);
    float *d_x = dev_copy(x, n), *d_out = dev_floats(n), *d_labels = dev_copy(labels, (size_t)N);
    cpu->log_softmax_forward(out, x, N, C);
    gpu->log_softmax_forward(d_out, d_x, N, C);
    snprintf(what, sizeof what, "log_softmax_forward N=%d C=%d", N, C);
    expect_close(what, d_out, out, n, ATOL, RTOL);

    float *dout = random_host(n, -1.0f, 1.0f), *dx = random_host(n, -1.0f, 1.0f);
    float *d_dout = dev_copy(dout, n), *d_dx = dev_copy(dx, n), *d_out_cpu = dev_copy(out, n);
    cpu->log_softmax_backward(dx, dout, out, N, C);
    gpu->log_softmax_backward(d_dx, d_dout, d_out_cpu, N, C);
    snprintf(what, sizeof what, "log_softmax_backward N=%d C=%d", N, C);
    expect_close(what, d_dx, dx, n, 1e-5, RTOL);

    float loss = 0.0f, dloss = 0.7f;
    float *d_loss = dev_floats(1), *d_dloss = dev_copy(&dloss, 1);
    const float scale = 1.0f / (float)N;
    cpu->nll_forward(&loss, out, labels, N, C, scale);
    gpu->nll_forward(d_loss, d_out_cpu, d_labels, N, C, scale);
    snprintf(what, sizeof what, "nll_forward N=%d C=%d", N, C);
    expect_close(what, d_loss, &loss, 1, ATOL, RTOL);

    float *dlogp = random_host(n, -1.0f, 1.0f);
    float *d_dlogp = dev_copy(dlogp, n);
    cpu->nll_backward(dlogp, &dloss, labels, N, C, scale);
    gpu->nll_backward(d_dlogp, d_dloss, d_labels, N, C, scale);
    snprintf(what, sizeof what, "nll_backward N=%d C=%d", N, C);
    expect_close(what, d_dlogp, dlogp, n, ATOL, RTOL);

    float *onehot = host_floats(n);
    cpu->one_hot(onehot, labels, N, C);
    gpu->one_hot(d_out, d_labels, N, C);
    snprintf(what, sizeof what, "one_hot N=%d C=%d", N, C);
    expect_exact(what, d_out, onehot, n * sizeof *onehot);
    release_all();
}

static void test_losses(void)
{
    loss_case(64, 10);
    loss_case(7, 1000);
    loss_case(1000, 3);
    loss_case(1, 1);
}

/* ---------------------------------------------------------------------------------------------
 * Dropout and optimizers
 * ------------------------------------------------------------------------------------------- */

static void test_dropout_mask(void)
{
    const size_t n = 1000003;
    const float ps[] = {0.0f, 0.1f, 0.5f, 0.9f, 1.0f};
    const uint64_t seeds[] = {0, 1, 12345678901ull};
    char what[96];
    float *want = host_floats(n), *d_mask = dev_floats(n);
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) {
        for (size_t s = 0; s < sizeof seeds / sizeof seeds[0]; s++) {
            cpu->dropout_mask(want, (int64_t)n, ps[i], seeds[s]);
            gpu->dropout_mask(d_mask, (int64_t)n, ps[i], seeds[s]);
            snprintf(what, sizeof what, "dropout_mask p=%g seed=%llu", (double)ps[i],
                     (unsigned long long)seeds[s]);
            expect_exact(what, d_mask, want, n * sizeof *want);
        }
    }
    release_all();
}

/* Poisson spikes (T, n) from pixels (n): bit for bit the CPU's. Pixels are random in
 * [-0.1, 1.1] plus the edges: 0, -0, 1, NaN, +-inf, a subnormal, and pixels equal to their
 * own u at t = 0 (strict <: no spike there).
 * Sizes: one pixel, a partial block, n over the grid cap (the grid-stride loop), long T; seeds
 * include one whose keys wrap past 2^64. */
static void test_poisson_encode(void)
{
    const struct { int64_t n; int T; } shapes[] = {{1, 1}, {37, 4}, {1000003, 4}, {4099, 257}};
    const uint64_t seeds[] = {0, 12345678901ull, UINT64_MAX - 5};
    char what[96];
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        const int64_t n = shapes[k].n;
        const int T = shapes[k].T;
        const size_t total = (size_t)(T * n);
        for (size_t s = 0; s < sizeof seeds / sizeof seeds[0]; s++) {
            float *pixels = random_host((size_t)n, -0.1f, 1.1f);
            const float edges[] = {0.0f, -0.0f, 1.0f, NAN, INFINITY, -INFINITY, 1e-40f};
            for (int64_t e = 0; e < 7 && 2 * e + 1 < n; e++) pixels[2 * e + 1] = edges[e];
            for (int64_t i = 20; i < n && i < 30; i++) /* u of (t = 0, i) exactly */
                pixels[i] = (float)(snn_hash64(seeds[s] + (uint64_t)i) >> 40) * 0x1.0p-24f;
            float *want = host_floats(total), *d_spikes = dev_floats(total);
            float *d_pixels = dev_copy(pixels, (size_t)n);
            cpu->poisson_encode(want, pixels, n, T, seeds[s]);
            gpu->poisson_encode(d_spikes, d_pixels, n, T, seeds[s]);
            snprintf(what, sizeof what, "poisson_encode n=%lld T=%d seed=%llu", (long long)n, T,
                     (unsigned long long)seeds[s]);
            expect_exact(what, d_spikes, want, total * sizeof *want);
            release_all();
        }
    }
}

static void sgd_case(float momentum, float dampening, bool nesterov, bool first, float wd)
{
    char what[128];
    const size_t n = 100003;
    float *p = random_host(n, -1.0f, 1.0f), *g = random_host(n, -1.0f, 1.0f);
    float *vel = random_host(n, -0.1f, 0.1f);
    float *d_p = dev_copy(p, n), *d_g = dev_copy(g, n), *d_vel = dev_copy(vel, n);
    const snn_sgd_params hp = {0.05f, momentum, dampening, wd, nesterov, first};
    const bool has_buf = momentum != 0.0f; /* velocity may be NULL without momentum */
    cpu->sgd_update(p, has_buf ? vel : NULL, g, (int64_t)n, &hp);
    gpu->sgd_update(d_p, has_buf ? d_vel : NULL, d_g, (int64_t)n, &hp);
    snprintf(what, sizeof what, "sgd_update p mom=%g damp=%g nesterov=%d first=%d wd=%g",
             (double)momentum, (double)dampening, nesterov, first, (double)wd);
    expect_close(what, d_p, p, n, ATOL, RTOL);
    snprintf(what, sizeof what, "sgd_update velocity mom=%g damp=%g nesterov=%d first=%d",
             (double)momentum, (double)dampening, nesterov, first);
    expect_close(what, d_vel, vel, n, ATOL, RTOL);
    release_all();
}

static void adam_case(bool decoupled, float wd, int t)
{
    char what[96];
    const size_t n = 100003;
    float *p = random_host(n, -1.0f, 1.0f), *g = random_host(n, -1.0f, 1.0f);
    float *m = random_host(n, -0.1f, 0.1f), *v = random_host(n, 0.0f, 0.01f);
    float *d_p = dev_copy(p, n), *d_g = dev_copy(g, n), *d_m = dev_copy(m, n),
          *d_v = dev_copy(v, n);
    snn_adam_params hp = {1e-3f, 0.9f, 0.999f, 1e-8f, wd, decoupled, 0.0f, 0.0f};
    hp.bias_correction1 = 1.0f - powf(hp.beta1, (float)t);
    hp.bias_correction2 = 1.0f - powf(hp.beta2, (float)t);
    cpu->adam_update(p, m, v, g, (int64_t)n, &hp);
    gpu->adam_update(d_p, d_m, d_v, d_g, (int64_t)n, &hp);
    snprintf(what, sizeof what, "adam_update p decoupled=%d wd=%g t=%d", decoupled, (double)wd, t);
    expect_close(what, d_p, p, n, ATOL, RTOL);
    snprintf(what, sizeof what, "adam_update m decoupled=%d t=%d", decoupled, t);
    expect_close(what, d_m, m, n, ATOL, RTOL);
    snprintf(what, sizeof what, "adam_update v decoupled=%d t=%d", decoupled, t);
    expect_close(what, d_v, v, n, ATOL, RTOL);
    release_all();
}

/* adam_update_many against one adam_update per tensor on the GPU (bit for bit) and against the
 * CPU's (within tolerance): sizes around the 4096-element block chunk, an empty tensor, each
 * tensor at its own step count, and more tensors than one launch takes (32). */
static void adam_many_case(bool decoupled, int count)
{
    char what[96];
    const int64_t sizes[6] = {1, 4095, 4096, 4097, 100003, 0};
    snn_adam_params hp = {1e-3f, 0.9f, 0.999f, 1e-8f, 1e-2f, decoupled, 0.0f, 0.0f};
    snn_adam_tensor *many = tracked_alloc((size_t)count * sizeof *many, SNN_CPU);
    snn_adam_tensor *host = tracked_alloc((size_t)count * sizeof *host, SNN_CPU);
    float **one = tracked_alloc((size_t)count * 3 * sizeof *one, SNN_CPU);
    for (int i = 0; i < count; i++) {
        const size_t n = (size_t)sizes[i % 6];
        const size_t alloc = n ? n : 1;
        float *p = random_host(alloc, -1.0f, 1.0f), *g = random_host(alloc, -1.0f, 1.0f);
        float *m = random_host(alloc, -0.1f, 0.1f), *v = random_host(alloc, 0.0f, 0.01f);
        const int t = 1 + 7 * i;
        const float bc1 = 1.0f - powf(hp.beta1, (float)t), bc2 = 1.0f - powf(hp.beta2, (float)t);
        many[i] = (snn_adam_tensor){dev_copy(p, alloc), dev_copy(m, alloc), dev_copy(v, alloc),
                                    dev_copy(g, alloc), (int64_t)n, bc1, bc2};
        host[i] = (snn_adam_tensor){p, m, v, g, (int64_t)n, bc1, bc2};
        /* the same tensor again, for one adam_update call each */
        one[3 * i] = dev_copy(p, alloc), one[3 * i + 1] = dev_copy(m, alloc);
        one[3 * i + 2] = dev_copy(v, alloc);
        snn_adam_params each = hp;
        each.bias_correction1 = bc1, each.bias_correction2 = bc2;
        gpu->adam_update(one[3 * i], one[3 * i + 1], one[3 * i + 2], many[i].grad, (int64_t)n,
                         &each);
    }
    gpu->adam_update_many(many, count, &hp);
    cpu->adam_update_many(host, count, &hp);
    for (int i = 0; i < count; i++) {
        const size_t n = (size_t)many[i].n;
        if (n == 0) continue;
        float *got = host_floats(n);
        const float *dev[3] = {many[i].p, many[i].m, many[i].v};
        const float *want_cpu[3] = {host[i].p, host[i].m, host[i].v};
        for (int k = 0; k < 3; k++) {
            download(got, one[3 * i + k], n * sizeof(float));
            snprintf(what, sizeof what, "adam_update_many = adam_update (%c) tensor %d of %d, n %zu",
                     "pmv"[k], i, count, n);
            expect_exact(what, dev[k], got, n * sizeof(float));
            snprintf(what, sizeof what, "adam_update_many (%c) against the CPU, tensor %d", "pmv"[k], i);
            expect_close(what, dev[k], want_cpu[k], n, ATOL, RTOL);
        }
    }
    release_all();
}

static void test_optimizers(void)
{
    adam_many_case(false, 6);
    adam_many_case(true, 40);
    sgd_case(0.0f, 0.0f, false, false, 0.0f);
    sgd_case(0.0f, 0.0f, false, false, 5e-4f);
    sgd_case(0.9f, 0.0f, false, true, 5e-4f);
    sgd_case(0.9f, 0.0f, false, false, 5e-4f);
    sgd_case(0.9f, 0.1f, false, false, 0.0f);
    sgd_case(0.9f, 0.0f, true, false, 1e-4f);
    adam_case(false, 0.0f, 1);
    adam_case(false, 1e-2f, 3);
    adam_case(true, 1e-2f, 100);
}

int main(void)
{
    parity_begin();
    RUN(test_table_complete);
    RUN(test_copy_and_fill);
    RUN(test_axpy);
    RUN(test_lerp);
    RUN(test_unary);
    RUN(test_binary);
    RUN(test_sum_dim);
    RUN(test_sumsq_and_finite);
    RUN(test_argmax_rows);
    RUN(test_gemm);
    RUN(test_bias);
    RUN(test_losses);
    RUN(test_dropout_mask);
    RUN(test_poisson_encode);
    RUN(test_optimizers);
    return test_finish();
}
