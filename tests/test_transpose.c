/*
 * test_transpose.c - snn_transpose01 (autograd/fn_transpose.c): the first two axes swapped.
 *
 *   - the forward against the definition y[b, a, i] = x[a, b, i], written as index arithmetic;
 *   - the images-as-rows sequence the rsnn makes ((N, C, H, W) -> (H, N, C*W)) read back
 *     element by element;
 *   - the backward against central finite differences (snn_gradcheck), with a second use of
 *     the input so that the backward must accumulate;
 *   - bad arguments name the function and the argument.
 * The fast CPU and CUDA kernels are compared with the reference by test_backend_ops and
 * test_cuda_backend_ops (tests/backend_ops_tensor.h, op transpose01).
 *
 * Run: ctest -R '^transpose$', or build/bin/test_transpose.
 */
#include "test.h"

#include "autograd/autograd.h"

static snn_tensor *random_input(snn_shape shape, uint64_t seed)
{
    snn_rng rng;
    snn_rng_seed(&rng, seed);
    snn_tensor *x = snn_empty(shape, SNN_CPU);
    snn_tensor_uniform_(x, &rng, -1.0f, 1.0f);
    return x;
}

static void test_forward_matches_definition(void)
{
    snn_step_begin();
    const snn_shape shapes[] = {SNN_SHAPE(3, 5), SNN_SHAPE(4, 2, 3), SNN_SHAPE(2, 3, 2, 5),
                                SNN_SHAPE(1, 7, 2), SNN_SHAPE(6, 1)};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        snn_tensor *x = random_input(shapes[s], 1 + s);
        snn_tensor *y = snn_transpose01(x);
        CHECK(y != NULL);
        if (!y) continue;
        const int64_t A = x->shape.dim[0], B = x->shape.dim[1], inner = x->numel / (A * B);
        CHECK(y->shape.ndim == x->shape.ndim && y->shape.dim[0] == B && y->shape.dim[1] == A);
        for (int d = 2; d < x->shape.ndim; d++) CHECK(y->shape.dim[d] == x->shape.dim[d]);
        int wrong = 0;
        for (int64_t a = 0; a < A; a++)
            for (int64_t b = 0; b < B; b++)
                for (int64_t i = 0; i < inner; i++)
                    wrong += y->data[(b * A + a) * inner + i] != x->data[(a * B + b) * inner + i];
        CHECK(wrong == 0);
    }
    snn_step_end();
}

/* The rows encoding: x (N, C, H, W) as (N*C, H, W), swapped, viewed as (H, N, C*W), holds
 * at [t, n, c*W + w] the pixel x[n, c, t, w] */
static void test_images_as_rows(void)
{
    snn_step_begin();
    const int N = 3, C = 2, H = 4, W = 5;
    snn_tensor *x = random_input(SNN_SHAPE(N, C, H, W), 7);
    snn_tensor *y = snn_reshape(snn_transpose01(snn_reshape(x, SNN_SHAPE(N * C, H, W))),
                                SNN_SHAPE(H, N, C * W));
    CHECK(y != NULL);
    if (y) {
        int wrong = 0;
        for (int n = 0; n < N; n++)
            for (int c = 0; c < C; c++)
                for (int t = 0; t < H; t++)
                    for (int w = 0; w < W; w++)
                        wrong += y->data[((int64_t)t * N + n) * C * W + c * W + w] !=
                                 x->data[(((int64_t)n * C + c) * H + t) * W + w];
        CHECK(wrong == 0);
    }
    snn_step_end();
}

/* y = transpose(x) * r + x * x (through a reshape back to x's shape): x's gradient gathers a
 * transposed term and a plain one, so the backward must add into what is there */
static snn_tensor *f_transpose(snn_tensor *const *in, void *ctx)
{
    (void)ctx;
    snn_tensor *t = snn_transpose01(in[0]); // (B, A, inner)
    snn_tensor *back = snn_reshape(snn_transpose01(snn_scale(t, 0.5f)), in[0]->shape);
    return snn_add(snn_mul(t, t), snn_reshape(snn_add(back, snn_square(in[0])), t->shape));
}

static void test_backward_gradcheck(void)
{
    snn_step_begin();
    const snn_gradcheck_options opt = {.eps = 1e-2f, .atol = 1e-3f, .rtol = 1e-2f, .seed = 3};
    const snn_shape shapes[] = {SNN_SHAPE(3, 4), SNN_SHAPE(2, 3, 4), SNN_SHAPE(4, 1, 2)};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        snn_tensor *x = random_input(shapes[s], 11 + s);
        x->requires_grad = true;
        CHECK_OK(snn_gradcheck("transpose01", f_transpose, 1, &x, NULL, opt));
    }
    snn_step_end();
}

static void test_bad_arguments(void)
{
    snn_step_begin();
    CHECK(snn_transpose01(NULL) == NULL && strstr(snn_last_error(), "snn_transpose01"));
    snn_tensor *v = snn_zeros(SNN_SHAPE(5), SNN_CPU);
    CHECK(snn_transpose01(v) == NULL && strstr(snn_last_error(), "snn_transpose01: bad argument "
                                                                 "'x' (expected at least 2 dims"));
    snn_step_end();
}

int main(void)
{
    RUN(test_forward_matches_definition);
    RUN(test_images_as_rows);
    RUN(test_backward_gradcheck);
    RUN(test_bad_arguments);
    return test_finish();
}
