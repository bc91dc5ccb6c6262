/*
 * test_autograd.c - the tape, backward, no-grad mode, and a gradcheck of every smooth op.
 * Run: ctest --test-dir build -R '^autograd$'
 *
 * Values are checked against hand-computed numbers; gradients against central differences
 * (autograd/gradcheck.c) with eps = 1e-2, atol = 1e-3, rtol = 1e-2: float32 kernels give
 * difference quotients good to ~1e-5 / eps, so these bounds leave a margin of ~10x.
 */
#include <string.h>

#include "snn.h"
#include "test.h"

static const snn_gradcheck_options OPT = {.eps = 1e-2f, .atol = 1e-3f, .rtol = 1e-2f, .seed = 7};

/* A CPU step tensor of the given shape, filled with U(lo, hi), requiring grad. */
static snn_tensor *random_input(snn_shape shape, float lo, float hi, uint64_t seed)
{
    snn_tensor *t = test_uniform(shape, lo, hi, seed);
    t->requires_grad = true;
    return t;
}

/* ---- the tape ----------------------------------------------------------------------------- */

static void test_values_and_backward_by_hand(void)
{
    snn_step_begin();
    float av[3] = {1, 2, 3}, bv[3] = {4, 5, 6};
    snn_tensor *a = snn_from_host(SNN_SHAPE(3), av, SNN_CPU);
    snn_tensor *b = snn_from_host(SNN_SHAPE(3), bv, SNN_CPU);
    a->requires_grad = b->requires_grad = true;
    /* L = sum(a * b + a) = 4 + 10 + 18 + 6 = 38; dL/da = b + 1; dL/db = a */
    snn_tensor *loss = snn_sum_all(snn_add(snn_mul(a, b), a));
    CHECK(loss && loss->numel == 1);
    CHECK_CLOSE(snn_tensor_item(loss), 38.0, 0, 0);
    CHECK_OK(snn_backward(loss));
    for (int i = 0; i < 3; i++) {
        CHECK_CLOSE(a->grad->data[i], bv[i] + 1.0f, 0, 0);
        CHECK_CLOSE(b->grad->data[i], av[i], 0, 0);
    }
    snn_step_end();
}

/* snn_backward_from_many: y = a * b and z = a + y, seeded with gy and gz, one walk of the
 * tape: dL/da = gy b + gz (1 + b), dL/db = gy a + gz a, where a shared node (y, which z
 * reads) gets its seed and z's share before it runs. Bad arguments are refused before any
 * seed, naming the pair. */
static void test_backward_from_many_by_hand(void)
{
    snn_step_begin();
    float av[3] = {1, 2, 3}, bv[3] = {4, 5, 6}, gyv[3] = {1, -2, 0.5f}, gzv[3] = {3, 0, -1};
    snn_tensor *a = snn_from_host(SNN_SHAPE(3), av, SNN_CPU);
    snn_tensor *b = snn_from_host(SNN_SHAPE(3), bv, SNN_CPU);
    a->requires_grad = b->requires_grad = true;
    snn_tensor *y = snn_mul(a, b), *z = snn_add(a, y);
    snn_tensor *gy = snn_from_host(SNN_SHAPE(3), gyv, SNN_CPU);
    snn_tensor *gz = snn_from_host(SNN_SHAPE(3), gzv, SNN_CPU);
    snn_tensor *outs[2] = {y, z};
    const snn_tensor *seeds[2] = {gy, gz};
    CHECK_OK(snn_backward_from_many(2, outs, seeds));
    for (int i = 0; i < 3; i++) {
        CHECK_CLOSE(a->grad->data[i], gyv[i] * bv[i] + gzv[i] * (1.0f + bv[i]), 0, 0);
        CHECK_CLOSE(b->grad->data[i], (gyv[i] + gzv[i]) * av[i], 0, 0);
    }
    /* a seed of another shape, or an output that needs no gradient: refused, nothing run */
    snn_tensor *wrong = snn_zeros(SNN_SHAPE(4), SNN_CPU);
    const snn_tensor *bad_seeds[2] = {gy, wrong};
    const float a0 = a->grad->data[0];
    CHECK(snn_backward_from_many(2, outs, bad_seeds) == SNN_ERR_ARGUMENT);
    CHECK(strstr(snn_last_error(), "snn_backward_from_many") &&
          strstr(snn_last_error(), "seeds[1]"));
    CHECK(a->grad->data[0] == a0);
    snn_tensor *constant[1] = {gy};
    CHECK(snn_backward_from_many(1, constant, seeds) == SNN_ERR_ARGUMENT);
    CHECK(strstr(snn_last_error(), "outs[0]"));
    CHECK(snn_backward_from_many(0, outs, seeds) == SNN_ERR_ARGUMENT);
    snn_clear_error();
    snn_step_end();
}

static void test_broadcast_by_hand(void)
{
    snn_step_begin();
    float xv[6] = {1, 2, 3, 4, 5, 6}, bv[3] = {10, 20, 30};
    snn_tensor *x = snn_from_host(SNN_SHAPE(2, 3), xv, SNN_CPU);
    snn_tensor *b = snn_from_host(SNN_SHAPE(3), bv, SNN_CPU);
    b->requires_grad = true;
    snn_tensor *y = snn_add(x, b); /* (2, 3) + (3) */
    CHECK(y && snn_shape_equal(y->shape, SNN_SHAPE(2, 3)));
    CHECK(y->data[0] == 11 && y->data[5] == 36);
    CHECK_OK(snn_backward(snn_sum_all(y)));
    for (int i = 0; i < 3; i++) CHECK(b->grad->data[i] == 2.0f); /* two rows */
    /* shapes that do not broadcast are refused with both shapes named */
    snn_tensor *c = snn_zeros(SNN_SHAPE(4), SNN_CPU);
    CHECK(snn_add(x, c) == NULL);
    CHECK(strstr(snn_last_error(), "[4]") && strstr(snn_last_error(), "[2, 3]"));
    snn_clear_error();
    snn_step_end();
}

static void test_owned_parameter_accumulates(void)
{
    snn_tensor *w = snn_tensor_new(SNN_SHAPE(2), SNN_CPU);
    w->requires_grad = true;
    w->data[0] = 3;
    w->data[1] = -1;
    for (int step = 0; step < 2; step++) {
        snn_step_begin();
        /* L = sum(w^2): dL/dw = 2w, accumulated over two steps = 4w */
        CHECK_OK(snn_backward(snn_sum_all(snn_square(w))));
        snn_step_end();
    }
    CHECK(w->grad && w->grad->lifetime == SNN_OWNED);
    CHECK(w->grad->data[0] == 12.0f && w->grad->data[1] == -4.0f);
    snn_tensor_free(w);
}

static void test_no_grad_records_nothing(void)
{
    snn_step_begin();
    snn_tensor *x = random_input(SNN_SHAPE(4, 4), -1, 1, 1);
    snn_no_grad_begin();
    snn_tensor *y = snn_relu(snn_mul(x, x));
    snn_no_grad_end();
    CHECK(y && !y->requires_grad && y->grad_fn == NULL);
    CHECK(snn_backward(snn_sum_all(y)) == SNN_ERR_ARGUMENT); /* nothing to differentiate */
    CHECK(strstr(snn_last_error(), "does not require grad") != NULL);
    snn_clear_error();
    /* the tape is released with the step: a fresh step starts empty */
    snn_tensor *z = snn_sum_all(snn_square(x));
    CHECK(z->grad_fn && z->grad_fn->prev && strcmp(z->grad_fn->op, "snn_sum_all") == 0);
    snn_step_end();
    snn_step_begin();
    snn_tensor *u = random_input(SNN_SHAPE(2), 0, 1, 2);
    snn_tensor *v = snn_neg(u);
    CHECK(v->grad_fn && v->grad_fn->prev == NULL);
    snn_step_end();
}

static void test_errors_propagate(void)
{
    snn_step_begin();
    snn_tensor *x = snn_zeros(SNN_SHAPE(2, 3), SNN_CPU);
    /* the first failure's message survives the rest of the chain */
    snn_tensor *y = snn_relu(snn_exp(snn_matmul(x, x)));
    CHECK(y == NULL);
    CHECK(strstr(snn_last_error(), "snn_matmul") && strstr(snn_last_error(), "'b'"));
    snn_clear_error();
    CHECK(snn_backward(x) == SNN_ERR_ARGUMENT && strstr(snn_last_error(), "1 element"));
    snn_clear_error();
    CHECK(snn_conv2d(x, x, NULL, 1, 0) == NULL && strstr(snn_last_error(), "4-D"));
    snn_clear_error();
    snn_step_end();
}

/* ---- gradchecks --------------------------------------------------------------------------- */

static snn_tensor *f_add(snn_tensor *const *in, void *ctx) { (void)ctx; return snn_add(in[0], in[1]); }
static snn_tensor *f_sub(snn_tensor *const *in, void *ctx) { (void)ctx; return snn_sub(in[0], in[1]); }
static snn_tensor *f_mul(snn_tensor *const *in, void *ctx) { (void)ctx; return snn_mul(in[0], in[1]); }
static snn_tensor *f_div(snn_tensor *const *in, void *ctx) { (void)ctx; return snn_div(in[0], in[1]); }
static snn_tensor *f_unary(snn_tensor *const *in, void *ctx)
{
    snn_tensor *(*op)(snn_tensor *) = *(snn_tensor *(**)(snn_tensor *))ctx;
    return op(in[0]);
}
static snn_tensor *f_scale(snn_tensor *const *in, void *ctx) { (void)ctx; return snn_add_scalar(snn_scale(in[0], -1.5f), 0.25f); }

static void test_gradcheck_elementwise(void)
{
    snn_step_begin();
    snn_tensor *in[2];
    /* same shapes, and broadcasting in both directions */
    snn_shape shapes[3][2] = {{SNN_SHAPE(3, 4), SNN_SHAPE(3, 4)},
                              {SNN_SHAPE(2, 3, 4), SNN_SHAPE(3, 1)},
                              {SNN_SHAPE(1, 4), SNN_SHAPE(3, 1)}};
    snn_gradcheck_fn fns[4] = {f_add, f_sub, f_mul, f_div};
    const char *names[4] = {"add", "sub", "mul", "div"};
    for (int s = 0; s < 3; s++) {
        for (int f = 0; f < 4; f++) {
            in[0] = random_input(shapes[s][0], -1, 1, 10 + (uint64_t)s);
            in[1] = random_input(shapes[s][1], 0.5f, 2, 20 + (uint64_t)s); /* away from 0 for div */
            CHECK_OK(snn_gradcheck(names[f], fns[f], 2, in, NULL, OPT));
        }
    }
    snn_tensor *(*unaries[6])(snn_tensor *) = {snn_neg, snn_exp, snn_log, snn_sigmoid, snn_square, snn_relu};
    const char *unames[6] = {"neg", "exp", "log", "sigmoid", "square", "relu"};
    for (int u = 0; u < 6; u++) {
        /* log needs x > 0; relu needs x away from its kink at 0 */
        in[0] = random_input(SNN_SHAPE(5, 3), 0.2f, 2.0f, 30 + (uint64_t)u);
        if (u == 5) for (int i = 0; i < 15; i++) in[0]->data[i] *= (i % 2) ? 1.0f : -1.0f;
        CHECK_OK(snn_gradcheck(unames[u], f_unary, 1, in, &unaries[u], OPT));
    }
    in[0] = random_input(SNN_SHAPE(7), -1, 1, 40);
    CHECK_OK(snn_gradcheck("scale+add_scalar", f_scale, 1, in, NULL, OPT));
    snn_step_end();
}

static snn_tensor *f_sum_dim(snn_tensor *const *in, void *ctx) { return snn_sum(in[0], *(int *)ctx, false); }
static snn_tensor *f_mean_dim(snn_tensor *const *in, void *ctx) { return snn_mean(in[0], *(int *)ctx, true); }
static snn_tensor *f_mean_all(snn_tensor *const *in, void *ctx) { (void)ctx; return snn_mean_all(in[0]); }
static snn_tensor *f_repeat(snn_tensor *const *in, void *ctx) { (void)ctx; return snn_repeat_time(in[0], 3); }
static snn_tensor *f_reshape(snn_tensor *const *in, void *ctx)
{
    (void)ctx;
    return snn_mul(snn_flatten(snn_reshape(in[0], SNN_SHAPE(2, -1, 2)), 0, 1), in[1]);
}

static void test_gradcheck_reduce_and_shape(void)
{
    snn_step_begin();
    snn_tensor *in[2];
    for (int dim = -3; dim < 3; dim++) {
        in[0] = random_input(SNN_SHAPE(2, 3, 4), -1, 1, 50 + (uint64_t)(dim + 3));
        CHECK_OK(snn_gradcheck("sum", f_sum_dim, 1, in, &dim, OPT));
        CHECK_OK(snn_gradcheck("mean", f_mean_dim, 1, in, &dim, OPT));
    }
    in[0] = random_input(SNN_SHAPE(4, 5), -1, 1, 60);
    CHECK_OK(snn_gradcheck("mean_all", f_mean_all, 1, in, NULL, OPT));
    CHECK_OK(snn_gradcheck("repeat_time", f_repeat, 1, in, NULL, OPT));
    in[0] = random_input(SNN_SHAPE(2, 6), -1, 1, 61);
    in[1] = random_input(SNN_SHAPE(6, 2), -1, 1, 62);
    CHECK_OK(snn_gradcheck("reshape+flatten", f_reshape, 2, in, NULL, OPT));
    /* values by hand: mean over dim 1 of [[1, 2, 3], [4, 5, 6]] = [2, 5] */
    float v[6] = {1, 2, 3, 4, 5, 6};
    snn_tensor *m = snn_mean(snn_from_host(SNN_SHAPE(2, 3), v, SNN_CPU), 1, false);
    CHECK(m && m->numel == 2 && m->data[0] == 2.0f && m->data[1] == 5.0f);
    snn_tensor *r = snn_repeat_time(snn_from_host(SNN_SHAPE(2), v, SNN_CPU), 3);
    CHECK(r && r->shape.dim[0] == 3 && r->data[4] == 1.0f && r->data[5] == 2.0f);
    snn_step_end();
}

static snn_tensor *f_matmul(snn_tensor *const *in, void *ctx) { (void)ctx; return snn_matmul(in[0], in[1]); }
static snn_tensor *f_linear(snn_tensor *const *in, void *ctx) { (void)ctx; return snn_linear(in[0], in[1], in[2]); }

static void test_gradcheck_linear(void)
{
    snn_step_begin();
    snn_tensor *in[3];
    in[0] = random_input(SNN_SHAPE(3, 5), -1, 1, 70);
    in[1] = random_input(SNN_SHAPE(5, 4), -1, 1, 71);
    CHECK_OK(snn_gradcheck("matmul", f_matmul, 2, in, NULL, OPT));
    in[0] = random_input(SNN_SHAPE(2, 3, 5), -1, 1, 72); /* leading dims fold into rows */
    in[1] = random_input(SNN_SHAPE(4, 5), -1, 1, 73);
    in[2] = random_input(SNN_SHAPE(4), -1, 1, 74);
    CHECK_OK(snn_gradcheck("linear", f_linear, 3, in, NULL, OPT));
    /* values by hand: [1 2] [[1 0] [0 1] [1 1]]^T + [0 0 1] = [1 2 4] */
    float xv[2] = {1, 2}, wv[6] = {1, 0, 0, 1, 1, 1}, bv[3] = {0, 0, 1};
    snn_tensor *y = snn_linear(snn_from_host(SNN_SHAPE(1, 2), xv, SNN_CPU),
                               snn_from_host(SNN_SHAPE(3, 2), wv, SNN_CPU),
                               snn_from_host(SNN_SHAPE(3), bv, SNN_CPU));
    CHECK(y && y->data[0] == 1.0f && y->data[1] == 2.0f && y->data[2] == 4.0f);
    snn_step_end();
}

typedef struct conv_case {
    int stride, pad;
    bool bias;
} conv_case;

static snn_tensor *f_conv(snn_tensor *const *in, void *ctx)
{
    conv_case *c = ctx;
    return snn_conv2d(in[0], in[1], c->bias ? in[2] : NULL, c->stride, c->pad);
}

static void test_gradcheck_conv2d(void)
{
    snn_step_begin();
    conv_case cases[4] = {{1, 1, true}, {2, 1, false}, {1, 0, true}, {2, 0, true}};
    int ksize[4] = {3, 3, 1, 1};
    for (int i = 0; i < 4; i++) {
        snn_tensor *in[3];
        in[0] = random_input(SNN_SHAPE(2, 3, 5, 5), -1, 1, 80 + (uint64_t)i);
        in[1] = random_input(SNN_SHAPE(4, 3, ksize[i], ksize[i]), -1, 1, 90 + (uint64_t)i);
        in[2] = random_input(SNN_SHAPE(4), -1, 1, 100 + (uint64_t)i);
        CHECK_OK(snn_gradcheck("conv2d", f_conv, 3, in, &cases[i], OPT));
    }
    /* 5-D input: T*N images, output keeps (T, N) */
    snn_tensor *x = random_input(SNN_SHAPE(2, 3, 1, 4, 4), -1, 1, 110);
    snn_tensor *w = random_input(SNN_SHAPE(2, 1, 3, 3), -1, 1, 111);
    snn_tensor *y = snn_conv2d(x, w, NULL, 1, 1);
    CHECK(y && snn_shape_equal(y->shape, SNN_SHAPE(2, 3, 2, 4, 4)));
    /* by hand: a 3x3 all-ones kernel over an all-ones 3x3 image, pad 1: corner 4, edge 6, centre 9 */
    snn_tensor *ones = snn_full(SNN_SHAPE(1, 1, 3, 3), 1.0f, SNN_CPU);
    snn_tensor *k = snn_full(SNN_SHAPE(1, 1, 3, 3), 1.0f, SNN_CPU);
    snn_tensor *z = snn_conv2d(ones, k, NULL, 1, 1);
    CHECK(z && z->data[0] == 4.0f && z->data[1] == 6.0f && z->data[4] == 9.0f);
    snn_step_end();
}

static snn_tensor *f_maxpool(snn_tensor *const *in, void *ctx) { (void)ctx; return snn_max_pool2d(in[0], 2, 2, 0); }
static snn_tensor *f_avgpool(snn_tensor *const *in, void *ctx) { (void)ctx; return snn_avg_pool2d(in[0], 3, 2, 1); }

static void test_gradcheck_pool(void)
{
    snn_step_begin();
    snn_tensor *in[1];
    /* distinct values at least 0.05 apart, so +-eps never changes which one is the max */
    in[0] = snn_empty(SNN_SHAPE(2, 2, 4, 4), SNN_CPU);
    for (int i = 0; i < 64; i++) in[0]->data[i] = 0.05f * (float)((i * 37) % 64) - 1.6f;
    in[0]->requires_grad = true;
    CHECK_OK(snn_gradcheck("max_pool2d", f_maxpool, 1, in, NULL, OPT));
    in[0] = random_input(SNN_SHAPE(2, 2, 5, 5), -1, 1, 120);
    CHECK_OK(snn_gradcheck("avg_pool2d", f_avgpool, 1, in, NULL, OPT));
    snn_step_end();
}

typedef struct bn_case {
    snn_tensor *running_mean, *running_var;
    bool training;
} bn_case;

static snn_tensor *f_bn(snn_tensor *const *in, void *ctx)
{
    bn_case *c = ctx;
    return snn_batchnorm2d(in[0], in[1], in[2], c->running_mean, c->running_var, c->training, 0.0f,
                           1e-5f);
}

static void test_gradcheck_batchnorm(void)
{
    snn_tensor *rm = snn_tensor_new(SNN_SHAPE(3), SNN_CPU), *rv = snn_tensor_new(SNN_SHAPE(3), SNN_CPU);
    for (int c = 0; c < 3; c++) {
        rm->data[c] = 0.1f * (float)c;
        rv->data[c] = 1.0f + 0.5f * (float)c;
    }
    snn_step_begin();
    snn_tensor *in[3];
    for (int training = 0; training < 2; training++) {
        /* momentum 0 keeps the running statistics fixed across the many evaluations */
        bn_case c = {rm, rv, training == 1};
        in[0] = random_input(SNN_SHAPE(4, 3, 3, 3), -2, 2, 130);
        in[1] = random_input(SNN_SHAPE(3), 0.5f, 1.5f, 131);
        in[2] = random_input(SNN_SHAPE(3), -0.5f, 0.5f, 132);
        CHECK_OK(snn_gradcheck(training ? "batchnorm2d(train)" : "batchnorm2d(eval)", f_bn, 3, in,
                               &c, OPT));
    }
    snn_step_end();
    snn_tensor_free(rm);
    snn_tensor_free(rv);
}

/* snn_conv2d_batchnorm_eval: without a tape, one op with the bits of conv then eval-mode
 * batch-norm; with one, exactly those two recorded ops (so the gradient is theirs); a
 * batch-norm vector of the wrong size is named. */
static void test_conv_batchnorm_eval(void)
{
    snn_step_begin();
    snn_tensor *x = random_input(SNN_SHAPE(2, 4, 5, 5), -1, 1, 150);
    snn_tensor *w = random_input(SNN_SHAPE(6, 4, 3, 3), -0.5f, 0.5f, 151);
    snn_tensor *b = random_input(SNN_SHAPE(6), -0.5f, 0.5f, 152);
    snn_tensor *gamma = random_input(SNN_SHAPE(6), 0.5f, 1.5f, 153);
    snn_tensor *beta = random_input(SNN_SHAPE(6), -0.5f, 0.5f, 154);
    snn_tensor *rm = random_input(SNN_SHAPE(6), -0.2f, 0.2f, 155);
    snn_tensor *rv = random_input(SNN_SHAPE(6), 0.5f, 2.0f, 156);
    rm->requires_grad = rv->requires_grad = false;
    for (int stride = 1; stride <= 2; stride++) {
        snn_no_grad_begin();
        snn_tensor *want = snn_batchnorm2d(snn_conv2d(x, w, b, stride, 1), gamma, beta, rm, rv,
                                           false, 0.1f, 1e-5f);
        snn_tensor *got = snn_conv2d_batchnorm_eval(x, w, b, gamma, beta, rm, rv, 1e-5f, stride, 1);
        snn_no_grad_end();
        CHECK(got && want && got->grad_fn == NULL);
        if (got && want) {
            CHECK(snn_shape_equal(got->shape, want->shape));
            CHECK(test_same_bits(got->data, want->data, (long)want->numel));
        }
    }
    /* with a tape: the gradient reaches the conv's weight through the batch-norm */
    snn_tensor *y = snn_conv2d_batchnorm_eval(x, w, NULL, gamma, beta, rm, rv, 1e-5f, 1, 1);
    CHECK(y && y->grad_fn && strcmp(y->grad_fn->op, "snn_conv2d") != 0);
    CHECK_OK(snn_backward(snn_sum_all(y)));
    CHECK(w->grad != NULL && x->grad != NULL);
    /* a wrong size is named */
    snn_no_grad_begin();
    snn_tensor *short_beta = random_input(SNN_SHAPE(5), 0, 1, 157);
    CHECK(snn_conv2d_batchnorm_eval(x, w, b, gamma, short_beta, rm, rv, 1e-5f, 1, 1) == NULL);
    CHECK(strstr(snn_last_error(), "snn_conv2d_batchnorm_eval") && strstr(snn_last_error(), "beta"));
    snn_clear_error();
    snn_no_grad_end();
    snn_step_end();
}

static snn_tensor *f_ce(snn_tensor *const *in, void *ctx) { return snn_cross_entropy(in[0], ctx); }
static snn_tensor *f_mse(snn_tensor *const *in, void *ctx) { (void)ctx; return snn_mse_loss(in[0], in[1]); }
static snn_tensor *f_dropout(snn_tensor *const *in, void *ctx) { (void)ctx; return snn_dropout(in[0], 0.3f, true, 99); }

static void test_gradcheck_losses(void)
{
    snn_step_begin();
    snn_tensor *in[2];
    float labels_v[4] = {0, 2, 1, 2};
    snn_tensor *labels = snn_from_host(SNN_SHAPE(4), labels_v, SNN_CPU);
    in[0] = random_input(SNN_SHAPE(4, 3), -2, 2, 140);
    CHECK_OK(snn_gradcheck("cross_entropy", f_ce, 1, in, labels, OPT));
    in[0] = random_input(SNN_SHAPE(4, 3), -1, 1, 141);
    in[1] = random_input(SNN_SHAPE(4, 3), -1, 1, 142);
    CHECK_OK(snn_gradcheck("mse", f_mse, 2, in, NULL, OPT));
    in[0] = random_input(SNN_SHAPE(50), -1, 1, 143);
    CHECK_OK(snn_gradcheck("dropout", f_dropout, 1, in, NULL, OPT));
    /* by hand: equal logits over 4 classes give log 4 */
    snn_tensor *z = snn_zeros(SNN_SHAPE(4, 4), SNN_CPU);
    snn_tensor *l = snn_cross_entropy(z, labels);
    CHECK(l);
    CHECK_CLOSE(snn_tensor_item(l), logf(4.0f), 1e-6, 0);
    /* a label out of range is named */
    float bad_v[4] = {0, 5, 1, 2};
    CHECK(snn_cross_entropy(z, snn_from_host(SNN_SHAPE(4), bad_v, SNN_CPU)) == NULL);
    CHECK(strstr(snn_last_error(), "labels") && strstr(snn_last_error(), "5"));
    snn_clear_error();
    snn_tensor *oh = snn_one_hot(labels, 3);
    CHECK(oh && oh->data[0] == 1 && oh->data[1] == 0 && oh->data[5] == 1 && oh->data[7] == 1);
    float sc[6] = {0.1f, 0.7f, 0.2f, 0.5f, 0.5f, 0.4f};
    snn_tensor *am = snn_argmax(snn_from_host(SNN_SHAPE(2, 3), sc, SNN_CPU));
    CHECK(am && am->data[0] == 1.0f && am->data[1] == 0.0f); /* first of a tie */
    snn_step_end();
}

/* ---- label smoothing and time-shared dropout ---------------------------------------------- */

static snn_tensor *f_ce_smooth(snn_tensor *const *in, void *ctx)
{
    return snn_cross_entropy_smooth(in[0], ctx, 0.2f);
}

static void test_label_smoothing(void)
{
    snn_step_begin();
    /* N = 2, K = 3, eps = 0.1. With logp = log_softmax(x) and q = (1 - eps) onehot(y) + eps/K,
     *   L = (1/N) sum_n [ (1 - eps) (-logp[n, y_n]) + (eps/K) sum_k (-logp[n, k]) ]
     *   dL/dx[n, k] = (softmax(x)[n, k] - q[n, k]) / N
     * Row 0: lse(1, 2, 3) = 3.40760596, logp = (-2.40760596, -1.40760596, -0.40760596):
     *   0.9 * 0.40760596 + (0.1/3) * 4.22281789 = 0.50760596
     * Row 1: lse(0.5, -1, 0) = 1.10413061, logp = (-0.60413061, -2.10413061, -1.10413061):
     *   0.9 * 0.60413061 + (0.1/3) * 3.81239182 = 0.67079727
     * L = (0.50760596 + 0.67079727) / 2 = 0.58920162 (in double: 0.5892016182238878; plain
     * cross-entropy, eps = 0: (0.40760596 + 0.60413061) / 2 = 0.5058682848905545). */
    float xv[6] = {1.0f, 2.0f, 3.0f, 0.5f, -1.0f, 0.0f}, yv[2] = {2, 0};
    const double want_grad[6] = {0.02834861991852355, 0.10569756886073213, -0.13404618877925584,
                                 -0.19339197303357686, 0.04430915948819776, 0.14908281354537908};
    snn_tensor *x = snn_from_host(SNN_SHAPE(2, 3), xv, SNN_CPU);
    snn_tensor *y = snn_from_host(SNN_SHAPE(2), yv, SNN_CPU);
    x->requires_grad = true;
    snn_tensor *loss = snn_cross_entropy_smooth(x, y, 0.1f);
    CHECK(loss && loss->numel == 1);
    if (loss) {
        CHECK_CLOSE(snn_tensor_item(loss), 0.5892016182238878, 1e-6, 1e-6);
        CHECK_OK(snn_backward(loss));
        for (int i = 0; i < 6 && x->grad; i++) CHECK_CLOSE(x->grad->data[i], want_grad[i], 1e-6, 1e-5);
    }
    /* smoothing 0 is snn_cross_entropy, bit for bit */
    snn_tensor *plain = snn_cross_entropy(x, y), *zero = snn_cross_entropy_smooth(x, y, 0.0f);
    CHECK(plain && zero && plain->data[0] == zero->data[0]);
    if (zero) CHECK_CLOSE(zero->data[0], 0.5058682848905545, 1e-6, 1e-6);
    /* bad smoothing: outside [0, 1) or NaN, named */
    const float bad[4] = {-0.1f, 1.0f, 2.0f, NAN};
    for (int i = 0; i < 4; i++) {
        snn_clear_error();
        CHECK(snn_cross_entropy_smooth(x, y, bad[i]) == NULL);
        CHECK(strstr(snn_last_error(), "snn_cross_entropy_smooth") &&
              strstr(snn_last_error(), "'smoothing'"));
    }
    /* a NULL input keeps the message of the op that failed before */
    snn_clear_error();
    CHECK(snn_cross_entropy_smooth(snn_reshape(x, SNN_SHAPE(7)), y, 0.1f) == NULL);
    CHECK(strstr(snn_last_error(), "snn_reshape") != NULL);
    snn_clear_error();
    snn_tensor *in[1] = {random_input(SNN_SHAPE(5, 4), -2, 2, 150)};
    float lv[5] = {3, 0, 1, 3, 2};
    CHECK_OK(snn_gradcheck("cross_entropy_smooth", f_ce_smooth, 1, in,
                           snn_from_host(SNN_SHAPE(5), lv, SNN_CPU), OPT));
    snn_step_end();
}

static snn_tensor *f_dropout_shared(snn_tensor *const *in, void *ctx)
{
    (void)ctx;
    return snn_dropout_shared(in[0], 0.4f, true, 1234, 1);
}

static void test_dropout_shared(void)
{
    snn_step_begin();
    /* (T, N, F) = (4, 64, 1000) ones: y[t] is the mask itself, the same at every t */
    const int T = 4, N = 64, F = 1000;
    const float p = 0.3f, keep = 1.0f / (1.0f - p);
    snn_tensor *x = snn_full(SNN_SHAPE(T, N, F), 1.0f, SNN_CPU);
    snn_tensor *y = snn_dropout_shared(x, p, true, 77, 1);
    CHECK(y && snn_shape_equal(y->shape, x->shape));
    if (y) {
        int64_t dropped = 0, other = 0, differ = 0;
        const int64_t per_step = (int64_t)N * F;
        for (int64_t i = 0; i < per_step; i++) {
            dropped += y->data[i] == 0.0f;
            other += y->data[i] != 0.0f && y->data[i] != keep; /* kept values are x / (1 - p) */
            for (int t = 1; t < T; t++) differ += y->data[t * per_step + i] != y->data[i];
        }
        CHECK(differ == 0 && other == 0);
        /* 64000 draws: the dropped fraction's standard deviation is sqrt(p (1 - p) / n) = 0.0018 */
        CHECK_CLOSE((double)dropped / (double)per_step, p, 0.01, 0);
        /* the mask is snn_dropout's for a tensor of the unshared shape (N, F), same seed */
        snn_tensor *flat = snn_dropout(snn_full(SNN_SHAPE(N, F), 1.0f, SNN_CPU), p, true, 77);
        CHECK(flat && memcmp(flat->data, y->data, (size_t)per_step * sizeof(float)) == 0);
    }
    /* shared_dims = 0 is snn_dropout bit for bit; eval and p = 0 are the identity (x itself) */
    snn_tensor *r = random_input(SNN_SHAPE(3, 5, 7), -1, 1, 160);
    snn_tensor *a = snn_dropout_shared(r, 0.5f, true, 9, 0), *b = snn_dropout(r, 0.5f, true, 9);
    CHECK(a && b && memcmp(a->data, b->data, (size_t)r->numel * sizeof(float)) == 0);
    CHECK(snn_dropout_shared(r, 0.5f, false, 9, 1) == r);
    CHECK(snn_dropout_shared(r, 0.0f, true, 9, 2) == r);
    /* x (T, N, F) requiring grad: dx = dy * mask, the same mask at every t */
    snn_tensor *g = snn_dropout_shared(r, 0.5f, true, 9, 1);
    snn_tensor *mask = snn_dropout(snn_full(SNN_SHAPE(5, 7), 1.0f, SNN_CPU), 0.5f, true, 9);
    CHECK(g && mask && snn_backward_from(g, snn_full(g->shape, 1.0f, SNN_CPU)) == SNN_OK);
    int64_t wrong = 0;
    if (g && mask && r->grad)
        for (int64_t i = 0; i < r->numel; i++) wrong += r->grad->data[i] != mask->data[i % 35];
    CHECK(r->grad && wrong == 0);
    /* bad arguments are named */
    snn_clear_error();
    CHECK(snn_dropout_shared(r, 0.5f, true, 9, 3) == NULL); /* shares every dim: no mask left */
    CHECK(strstr(snn_last_error(), "snn_dropout_shared") && strstr(snn_last_error(), "'shared_dims'"));
    snn_clear_error();
    CHECK(snn_dropout_shared(r, 0.5f, true, 9, -1) == NULL);
    CHECK(snn_dropout_shared(r, 1.0f, true, 9, 1) == NULL && strstr(snn_last_error(), "'p'"));
    CHECK(snn_dropout_shared(r, NAN, true, 9, 1) == NULL);
    snn_clear_error();
    snn_tensor *in[1] = {random_input(SNN_SHAPE(3, 4, 6), -1, 1, 161)};
    CHECK_OK(snn_gradcheck("dropout_shared", f_dropout_shared, 1, in, NULL, OPT));
    snn_step_end();
}

int main(void)
{
    snn_set_num_threads(2);
    RUN(test_values_and_backward_by_hand);
    RUN(test_backward_from_many_by_hand);
    RUN(test_broadcast_by_hand);
    RUN(test_owned_parameter_accumulates);
    RUN(test_no_grad_records_nothing);
    RUN(test_errors_propagate);
    RUN(test_gradcheck_elementwise);
    RUN(test_gradcheck_reduce_and_shape);
    RUN(test_gradcheck_linear);
    RUN(test_gradcheck_conv2d);
    RUN(test_gradcheck_pool);
    RUN(test_gradcheck_batchnorm);
    RUN(test_conv_batchnorm_eval);
    RUN(test_gradcheck_losses);
    RUN(test_label_smoothing);
    RUN(test_dropout_shared);
    return test_finish();
}
