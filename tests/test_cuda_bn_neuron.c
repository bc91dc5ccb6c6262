/*
 * test_cuda_bn_neuron.c - snn_batchnorm_neuron on the GPU (neurons/bn_neuron.c, the
 * lif_bn_forward kernel of lif.cu):
 *   1. against the separate ops on the GPU (snn_batchnorm2d -> snn_add_into ->
 *      snn_neuron_multistep), bit for bit: spikes, activity, running statistics and the
 *      gradients of x, gamma, beta and the residual for L = sum(S * R);
 *   2. against the CPU's fused op: the CPU batch-norm keeps the mean as a float head and tail,
 *      CUDA as one float (kernels/cpu/batchnorm.c, batchnorm.cu), so X may differ in its last bit
 *      and a value on the threshold may spike on one side only: spikes agree on >= 99.9% of
 *      the elements, running statistics to 1e-5 relative, dbeta to 1e-3 of its scale;
 *   3. snn_neuron_multistep_residual (inference) against the add and the neurons, bit for bit;
 *   4. one fp32 training step of a ResNet-18 on the GPU with fusion on and off: the same
 *      loss and gradients; then its inference with fusion on and off: the same logits.
 *   5. the carrying variants (snn_batchnorm_neuron_carry, _state) against the same ops ending
 *      in snn_neuron_multistep_carry / _state, bit for bit: spikes, the state left, and the
 *      gradients of x, gamma, beta, the residual and V_in; to 1e-5 where dS and dV_last both
 *      reach the one-pass kernel (its one recurrence against the unfused op's two).
 *   6. the repeated stem (snn_batchnorm_neuron_repeat, x_repeated in lif.cu and
 *      lif_bn_backward.cu) against snn_batchnorm2d -> snn_repeat_time -> snn_neuron_multistep
 *      on the GPU, bit for bit: the kernel adds the steps' dL/dX in the repeat's order up to
 *      16 steps.
 *   7. in TF32 and BF16 training (the batch-norm's sums from the neuron kernel,
 *      lif_bn_backward.cu's dy_sums) against the same op in fp32: the gradients to 1e-5, the
 *      forward bit for bit.
 *   8. a conv before the op in BF16: the op leaves dL/dy for the conv's channels-last copy to
 *      make (autograd/grad_deferred.c); the gradients equal those of the step that makes it in
 *      place first, with a second reader of y and on a plane whose conv takes another path.
 * Past 16 steps lif_bn_backward runs in chunks (T = 17 here), a kernel of its own, whose
 * gradients are compared to 1e-5 (chunked(), below); at T = 66 the scratch path's are bit for
 * bit again.
 * Shapes: planes of 64 (the batch-norm's four-wide kernels), of 49 (scalar ones) and of 1;
 * several blocks of the neuron kernel; T from 2 to 17 (every backward kernel and the scratch
 * path). Without a GPU it exits 77 (skipped).
 * Run on the GPU machine: ctest -R cuda_bn_neuron --output-on-failure
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/autograd.h"
#include "kernels/neuron_kernels.h"
#include "nn/nn.h"
#include "neurons/neurons.h"
#include "test.h"

static float *host_uniform(int64_t n, float lo, float hi, uint64_t seed)
{
    snn_rng rng;
    snn_rng_seed(&rng, seed);
    float *h = malloc((size_t)n * sizeof *h);
    for (int64_t i = 0; i < n; i++) h[i] = lo + (hi - lo) * snn_rng_uniform(&rng);
    return h;
}

static snn_tensor *step_tensor(snn_shape shape, float lo, float hi, uint64_t seed, snn_device dev,
                               bool grad)
{
    int64_t n = 1;
    for (int d = 0; d < shape.ndim; d++) n *= shape.dim[d];
    float *h = host_uniform(n, lo, hi, seed);
    snn_tensor *t = snn_from_host(shape, h, dev);
    free(h);
    if (t) t->requires_grad = grad;
    return t;
}

static snn_tensor *owned(snn_shape shape, float lo, float hi, uint64_t seed, snn_device dev)
{
    float *h = host_uniform(shape.dim[0], lo, hi, seed);
    snn_tensor *t = snn_tensor_new(shape, dev);
    snn_tensor_copy_from_host(t, h);
    free(h);
    return t;
}

typedef struct result {
    int64_t n, C, planes;
    float *spikes, *activity, *rm, *rv, *dx, *dgamma, *dbeta, *dres;
} result;

static void result_free(result *r)
{
    free(r->spikes), free(r->activity), free(r->rm), free(r->rv);
    free(r->dx), free(r->dgamma), free(r->dbeta), free(r->dres);
}

/* What a run left, copied to the host: its spikes and activity, the running statistics, the
 * leaves' gradients (res may be NULL); n: the elements of x. */
static result take(int64_t n, snn_tensor *spikes, snn_tensor *act, snn_tensor *rm,
                   snn_tensor *rv, snn_tensor *x, snn_tensor *gamma, snn_tensor *beta,
                   snn_tensor *res)
{
    result r = {0};
    r.n = n, r.C = rm->numel, r.planes = act ? act->numel : 0;
    r.spikes = test_to_host(spikes), r.activity = test_to_host(act);
    r.rm = test_to_host(rm), r.rv = test_to_host(rv);
    r.dx = test_to_host(x->grad), r.dgamma = test_to_host(gamma->grad);
    r.dbeta = test_to_host(beta->grad);
    r.dres = res ? test_to_host(res->grad) : NULL;
    return r;
}

static result run(snn_device dev, bool fused, snn_shape shape, bool with_residual,
                  const snn_neuron_config *cfg)
{
    const int64_t C = shape.dim[2];
    result r = {0};
    CHECK_OK(snn_step_begin());
    snn_tensor *x = step_tensor(shape, -1.5f, 2.5f, 21, dev, true);
    snn_tensor *gamma = step_tensor(SNN_SHAPE(C), 0.5f, 1.5f, 22, dev, true);
    snn_tensor *beta = step_tensor(SNN_SHAPE(C), -0.3f, 0.6f, 23, dev, true);
    snn_tensor *res = with_residual ? step_tensor(shape, 0.0f, 1.0f, 24, dev, true) : NULL;
    snn_tensor *rm = owned(SNN_SHAPE(C), -0.2f, 0.2f, 25, dev);
    snn_tensor *rv = owned(SNN_SHAPE(C), 0.5f, 2.0f, 26, dev);
    snn_tensor *act = NULL, *s;
    if (fused) {
        s = snn_batchnorm_neuron(x, gamma, beta, rm, rv, 0.1f, 1e-5f, res, cfg, &act);
    } else {
        snn_tensor *y = snn_batchnorm2d(x, gamma, beta, rm, rv, true, 0.1f, 1e-5f);
        if (res) y = snn_add_into(y, res);
        s = snn_neuron_multistep(y, cfg, NULL, &act);
    }
    CHECK(s != NULL);
    if (s) {
        snn_tensor *R = step_tensor(shape, -1.0f, 1.0f, 27, dev, false);
        CHECK_OK(snn_backward(snn_sum_all(snn_mul(s, R))));
        r = take(s->numel, s, act, rm, rv, x, gamma, beta, res);
    }
    snn_step_end();
    snn_tensor_free(rm), snn_tensor_free(rv);
    return r;
}

static bool bits(const float *a, const float *b, int64_t n)
{
    if (!a || !b) return a == b;
    return test_same_bits(a, b, (long)n);
}

/* T = 4, 3, 2 take lif_bn_backward's 4-step kernel; T = 6 its 8-step one, T = 9 its 16-step one,
 * T = 17 the 16-step one in two chunks, and T = 66 (past SNN_NEURON_BN_BACKWARD_MAX_T) the
 * scratch path (H written, then lif_backward and axpy) */
static const snn_shape shapes[7] = {{5, {4, 16, 32, 8, 8}}, {5, {3, 4, 5, 7, 7}},
                                    {5, {2, 3, 8, 1, 1}},   {5, {6, 2, 4, 5, 5}},
                                    {5, {9, 2, 3, 4, 4}},   {5, {17, 2, 3, 3, 3}},
                                    {5, {66, 2, 3, 2, 2}}};
#define SHAPES 7

static bool same(const float *a, const float *b, int64_t n, bool summed);

/* Whether lif_bn_backward runs T steps in chunks (lif_bn_backward_chunked_kernel, 16 < T <=
 * SNN_NEURON_BN_BACKWARD_MAX_T). Its gradients equal the separate ops' to rounding, not bit for
 * bit: ptxas fuses the surrogate gradient's multiply-adds (neuron_math.h, surrogate.h) as it
 * sees fit in each kernel, and the repeated stem's sum adds the chunks from the last. */
static bool chunked(int64_t T)
{
    return T > 16 && T <= SNN_NEURON_BN_BACKWARD_MAX_T;
}

static void configs(snn_neuron_config cfg[3])
{
    cfg[0] = snn_neuron_config_default(SNN_NEURON_LIF);
    cfg[0].surrogate = snn_surrogate_default(SNN_SURROGATE_ATAN);
    cfg[1] = snn_neuron_config_default(SNN_NEURON_IF);
    cfg[1].reset = SNN_RESET_SOFT;
    cfg[2] = snn_neuron_config_default(SNN_NEURON_LIF);
    cfg[2].v_reset = -0.5f;
    cfg[2].detach_reset = true;
    cfg[2].decay_input = false;
}

static void test_gpu_fused_equals_gpu_separate(void)
{
    snn_neuron_config cfg[3];
    configs(cfg);
    for (int s = 0; s < SHAPES; s++)
        for (int c = 0; c < 3; c++)
            for (int res = 0; res < 2; res++) {
                result a = run(SNN_CUDA, false, shapes[s], res, &cfg[c]);
                result b = run(SNN_CUDA, true, shapes[s], res, &cfg[c]);
                const bool summed = chunked(shapes[s].dim[0]);
                const bool ok = a.n == b.n && bits(a.spikes, b.spikes, a.n) &&
                                bits(a.activity, b.activity, a.planes) && bits(a.rm, b.rm, a.C) &&
                                bits(a.rv, b.rv, a.C) && same(a.dx, b.dx, a.n, summed) &&
                                same(a.dgamma, b.dgamma, a.C, summed) &&
                                same(a.dbeta, b.dbeta, a.C, summed) &&
                                same(a.dres, b.dres, a.n, summed);
                if (!ok)
                    fprintf(stderr, "  shape %d, config %d, residual %d: fused != separate on "
                            "the GPU\n", s, c, res);
                CHECK(ok);
                result_free(&a), result_free(&b);
            }
}

/* The repeated stem on `dev`: x (N, C, H, W) of shapes[s] without T, the input of T =
 * shapes[s].dim[0] steps; fused, or batch-norm -> repeat -> neurons; L = sum(S * R). */
static result run_repeat(snn_device dev, bool fused, int s, const snn_neuron_config *cfg)
{
    const snn_shape out = shapes[s];
    const int T = (int)out.dim[0];
    const int64_t C = out.dim[2];
    const snn_shape image = SNN_SHAPE(out.dim[1], C, out.dim[3], out.dim[4]);
    result r = {0};
    CHECK_OK(snn_step_begin());
    snn_tensor *x = step_tensor(image, -1.5f, 2.5f, 31, dev, true);
    snn_tensor *gamma = step_tensor(SNN_SHAPE(C), 0.5f, 1.5f, 32, dev, true);
    snn_tensor *beta = step_tensor(SNN_SHAPE(C), -0.3f, 0.6f, 33, dev, true);
    snn_tensor *rm = owned(SNN_SHAPE(C), -0.2f, 0.2f, 35, dev);
    snn_tensor *rv = owned(SNN_SHAPE(C), 0.5f, 2.0f, 36, dev);
    snn_tensor *act = NULL, *spikes;
    if (fused) {
        spikes = snn_batchnorm_neuron_repeat(x, gamma, beta, rm, rv, 0.1f, 1e-5f, T, cfg, &act);
    } else {
        snn_tensor *y = snn_batchnorm2d(x, gamma, beta, rm, rv, true, 0.1f, 1e-5f);
        spikes = snn_neuron_multistep(snn_repeat_time(y, T), cfg, NULL, &act);
    }
    CHECK(spikes != NULL);
    if (spikes) {
        snn_tensor *R = step_tensor(out, -1.0f, 1.0f, 37, dev, false);
        CHECK_OK(snn_backward(snn_sum_all(snn_mul(spikes, R))));
        r = take(x->numel, spikes, act, rm, rv, x, gamma, beta, NULL);
        /* a case that can fail: some spikes, not all (r.n is x's elements, T times fewer) */
        int64_t fired = 0;
        for (int64_t i = 0; i < spikes->numel; i++) fired += r.spikes[i] != 0.0f;
        CHECK(fired > 0 && fired < spikes->numel);
    }
    snn_step_end();
    snn_tensor_free(rm), snn_tensor_free(rv);
    return r;
}

static void test_gpu_repeat_equals_gpu_separate(void)
{
    snn_neuron_config cfg[3];
    configs(cfg);
    for (int s = 0; s < SHAPES; s++)
        for (int c = 0; c < 3; c++) {
            result a = run_repeat(SNN_CUDA, false, s, &cfg[c]);
            result b = run_repeat(SNN_CUDA, true, s, &cfg[c]);
            const int64_t T = shapes[s].dim[0], spikes = T * a.n; /* T steps of x's elements */
            const bool summed = chunked(T);
            const bool ok = a.n == b.n && bits(a.spikes, b.spikes, spikes) &&
                            bits(a.activity, b.activity, a.planes) && bits(a.rm, b.rm, a.C) &&
                            bits(a.rv, b.rv, a.C) && same(a.dx, b.dx, a.n, summed) &&
                            same(a.dgamma, b.dgamma, a.C, summed) &&
                            same(a.dbeta, b.dbeta, a.C, summed);
            if (!ok)
                fprintf(stderr, "  shape %d, config %d: the repeated stem != the separate ops "
                        "on the GPU\n", s, c);
            CHECK(ok);
            result_free(&a), result_free(&b);
        }
}

/* The carrying variants on the GPU against the separate ops ending in
 * snn_neuron_multistep_carry / _state, bit for bit. Carry: two calls on one state (the second
 * starts from what the first left), each call's L = sum(S R) backpropagated. State: one call
 * from a random V_in that requires grad, L = sum(S R) (seeds 1: the one-pass kernel),
 * sum(V_out R_v) (2: the one-pass kernel from dL/dV_last) or both (3: the one-pass kernel with
 * both, one recurrence where the unfused op runs two: its gradients equal to rounding, the
 * scratch path's at T = 17 bit for bit). Gradients of x, gamma, beta, the residual and V_in;
 * the state left. */
typedef struct carry_result {
    int64_t n, m, C;
    float *spikes, *state, *dx, *dgamma, *dbeta, *dres, *dv_in;
} carry_result;

static void carry_result_free(carry_result *r)
{
    free(r->spikes), free(r->state), free(r->dx), free(r->dgamma), free(r->dbeta);
    free(r->dres), free(r->dv_in);
}

static carry_result run_carrying(bool fused, bool differentiable, snn_shape shape,
                                 bool with_residual, const snn_neuron_config *cfg, int seeds)
{
    const snn_device dev = SNN_CUDA;
    const int64_t C = shape.dim[2];
    int64_t m = 1;
    for (int d = 1; d < shape.ndim; d++) m *= shape.dim[d];
    carry_result r = {0};
    CHECK_OK(snn_step_begin());
    snn_tensor *gamma = step_tensor(SNN_SHAPE(C), 0.5f, 1.5f, 72, dev, true);
    snn_tensor *beta = step_tensor(SNN_SHAPE(C), -0.3f, 0.6f, 73, dev, true);
    snn_tensor *rm = owned(SNN_SHAPE(C), -0.2f, 0.2f, 75, dev);
    snn_tensor *rv = owned(SNN_SHAPE(C), 0.5f, 2.0f, 76, dev);
    snn_tensor *state = owned(SNN_SHAPE(m), -0.5f, 0.9f, 77, dev); /* OWNED: the carry's */
    snn_tensor *v_in = step_tensor(SNN_SHAPE(m), -0.5f, 0.9f, 77, dev, true);
    snn_tensor *x = NULL, *res = NULL, *s = NULL, *v_out = NULL;
    for (int call = 0; call < (differentiable ? 1 : 2); call++) {
        x = step_tensor(shape, -1.5f, 2.5f, 80 + (uint64_t)call, dev, true);
        res = with_residual ? step_tensor(shape, 0.0f, 1.0f, 82 + (uint64_t)call, dev, true) : NULL;
        snn_tensor *y = NULL;
        if (!fused) {
            y = snn_batchnorm2d(x, gamma, beta, rm, rv, true, 0.1f, 1e-5f);
            if (y && res) y = snn_add_into(y, res);
        }
        if (differentiable)
            s = fused ? snn_batchnorm_neuron_state(x, gamma, beta, rm, rv, 0.1f, 1e-5f, res, cfg,
                                                   v_in, &v_out, NULL)
                      : snn_neuron_multistep_state(y, cfg, NULL, v_in, NULL, &v_out, NULL, NULL);
        else
            s = fused ? snn_batchnorm_neuron_carry(x, gamma, beta, rm, rv, 0.1f, 1e-5f, res, cfg,
                                                   state, NULL)
                      : snn_neuron_multistep_carry(y, cfg, NULL, state, NULL, NULL);
        CHECK(s && (!differentiable || v_out));
        if (!s || (differentiable && !v_out)) break;
        snn_tensor *loss = snn_sum_all(snn_mul(s, step_tensor(shape, -1, 1, 84, dev, false)));
        if (differentiable) {
            snn_tensor *from_v =
                snn_sum_all(snn_mul(v_out, step_tensor(SNN_SHAPE(m), -1, 1, 85, dev, false)));
            loss = seeds == 3 ? snn_add(loss, from_v) : seeds == 2 ? from_v : loss;
        }
        CHECK_OK(snn_backward(loss));
    }
    if (s) {
        r.n = s->numel, r.m = m, r.C = C;
        r.spikes = test_to_host(s), r.state = test_to_host(differentiable ? v_out : state);
        r.dx = test_to_host(x->grad), r.dgamma = test_to_host(gamma->grad);
        r.dbeta = test_to_host(beta->grad), r.dres = res ? test_to_host(res->grad) : NULL;
        r.dv_in = differentiable ? test_to_host(v_in->grad) : NULL;
    }
    snn_step_end();
    snn_tensor_free(rm), snn_tensor_free(rv), snn_tensor_free(state);
    return r;
}

/* Bit for bit, or (summed) to 1e-5 of the gradient's largest magnitude: a sum of two terms
 * added in another order differs in the last bits, and batch-norm's backward carries that into
 * dgamma and dbeta through sums over the plane. */
static bool same(const float *a, const float *b, int64_t n, bool summed)
{
    if (!summed || !a || !b) return bits(a, b, n);
    double scale = 0.0;
    for (int64_t i = 0; i < n; i++) scale = fmax(scale, fabs((double)a[i]));
    return test_worst_ratio(b, a, (long)n, 1e-5 * fmax(scale, 1e-3), 1e-5, NULL) <= 1.0;
}

static void test_gpu_carrying_equals_gpu_separate(void)
{
    snn_neuron_config cfg[3];
    configs(cfg);
    /* T = 1 and 3 (the one-pass kernel's 4-step instance), 6 (8-step), 17 (16-step, two
     * chunks), 66 (the scratch path) */
    const snn_shape carry_shapes[5] = {{5, {1, 2, 4, 5, 5}}, shapes[1], shapes[3], shapes[5],
                                       shapes[6]};
    for (int s = 0; s < 5; s++)
        for (int c = 0; c < 3; c++)
            for (int res = 0; res < 2; res++)
                for (int mode = 0; mode < 4; mode++) { /* 0: carry; 1..3: state, seeds = mode */
                    carry_result a = run_carrying(false, mode > 0, carry_shapes[s], res, &cfg[c],
                                                  mode);
                    carry_result b = run_carrying(true, mode > 0, carry_shapes[s], res, &cfg[c],
                                                  mode);
                    const int64_t T = carry_shapes[s].dim[0];
                    const bool summed = (mode == 3 && T <= SNN_NEURON_BN_BACKWARD_MAX_T) ||
                                        chunked(T);
                    const bool ok = a.n == b.n && a.n > 0 && bits(a.spikes, b.spikes, a.n) &&
                                    bits(a.state, b.state, a.m) &&
                                    same(a.dx, b.dx, a.n, summed) &&
                                    same(a.dgamma, b.dgamma, a.C, summed) &&
                                    same(a.dbeta, b.dbeta, a.C, summed) &&
                                    same(a.dres, b.dres, a.n, summed) &&
                                    same(a.dv_in, b.dv_in, a.m, summed);
                    if (!ok)
                        fprintf(stderr, "  shape %d, config %d, residual %d, mode %d: fused "
                                "carrying op != separate on the GPU\n", s, c, res, mode);
                    CHECK(ok);
                    carry_result_free(&a), carry_result_free(&b);
                }
}

static void test_gpu_against_cpu(void)
{
    snn_neuron_config cfg[3];
    configs(cfg);
    for (int s = 0; s < SHAPES; s++)
        for (int c = 0; c < 3; c++) {
            result g = run(SNN_CUDA, true, shapes[s], true, &cfg[c]);
            result h = run(SNN_CPU, true, shapes[s], true, &cfg[c]);
            if (!g.spikes || !h.spikes) {
                CHECK(false);
                continue;
            }
            int64_t differ = 0, fired = 0;
            for (int64_t i = 0; i < g.n; i++) {
                differ += g.spikes[i] != h.spikes[i];
                fired += h.spikes[i] != 0.0f;
            }
            if ((double)differ > 1e-3 * (double)g.n)
                fprintf(stderr, "  shape %d config %d: %lld of %lld spikes differ\n", s, c,
                        (long long)differ, (long long)g.n);
            CHECK((double)differ <= 1e-3 * (double)g.n);
            CHECK(fired > 0 && fired < g.n);
            double scale = 0.0;
            for (int64_t k = 0; k < g.C; k++) scale = fmax(scale, fabs((double)h.dbeta[k]));
            for (int64_t k = 0; k < g.C; k++) {
                CHECK_CLOSE(g.rm[k], h.rm[k], 1e-6, 1e-5);
                CHECK_CLOSE(g.rv[k], h.rv[k], 1e-6, 1e-5);
                CHECK_CLOSE(g.dbeta[k], h.dbeta[k], 1e-3 * scale + 1e-6, 1e-3);
            }
            result_free(&g), result_free(&h);
        }
}

/* snn_neuron_multistep_residual on the GPU (inference): the bits of the add, then the neurons. */
static void test_gpu_residual_op(void)
{
    snn_neuron_config cfg[3];
    configs(cfg);
    for (int s = 0; s < SHAPES; s++)
        for (int c = 0; c < 3; c++) {
            CHECK_OK(snn_step_begin());
            snn_no_grad_begin();
            snn_tensor *x = step_tensor(shapes[s], -0.5f, 1.5f, 41, SNN_CUDA, false);
            snn_tensor *r = step_tensor(shapes[s], 0.0f, 1.0f, 42, SNN_CUDA, false);
            snn_tensor *act_got = NULL, *act_want = NULL;
            snn_tensor *got = snn_neuron_multistep_residual(x, r, &cfg[c], &act_got);
            snn_tensor *want = snn_neuron_multistep(snn_add_into(x, r), &cfg[c], NULL, &act_want);
            snn_no_grad_end();
            CHECK(got && want && act_got && act_want);
            if (got && want && act_got && act_want) {
                float *a = test_to_host(got), *b = test_to_host(want);
                float *aa = test_to_host(act_got), *ab = test_to_host(act_want);
                if (!bits(a, b, got->numel) || !bits(aa, ab, act_got->numel))
                    fprintf(stderr, "  shape %d config %d: residual op != add + neurons\n", s, c);
                CHECK(bits(a, b, got->numel) && bits(aa, ab, act_got->numel));
                free(a), free(b), free(aa), free(ab);
            }
            snn_step_end();
        }
}

/* Turns the fusion rules of model m on or off (its option fuse). */
static void set_fusion(snn_module *m, bool on)
{
    snn_model_options o = snn_model_options_of(m);
    o.fuse = on;
    CHECK_OK(snn_model_set_options(m, &o));
}

/* One fp32 step of a small ResNet-18 on the GPU, fusion on or off: loss and every gradient. */
static float step(snn_module *m, bool fusion, float **grads, int *count)
{
    set_fusion(m, fusion);
    snn_rng rng;
    snn_rng_seed(&rng, 5);
    float *xh = malloc(4 * 3 * 16 * 16 * sizeof *xh);
    for (int i = 0; i < 4 * 3 * 16 * 16; i++) xh[i] = snn_rng_uniform(&rng) * 3.0f - 1.0f;
    const float labels_host[4] = {1, 7, 4, 0};
    CHECK_OK(snn_step_begin());
    snn_module_zero_grad(m);
    snn_tensor *x = snn_from_host(SNN_SHAPE(4, 3, 16, 16), xh, SNN_CUDA);
    snn_tensor *logits = snn_module_forward(m, x);
    snn_tensor *loss = logits ? snn_cross_entropy(logits, snn_from_host(SNN_SHAPE(4), labels_host,
                                                                        SNN_CUDA))
                              : NULL;
    float value = NAN;
    CHECK(loss != NULL);
    if (loss) {
        CHECK_OK(snn_backward(loss));
        CHECK_OK(snn_tensor_copy_to_host(loss, &value));
    }
    snn_step_end();
    free(xh);
    snn_param_list list;
    CHECK_OK(snn_module_parameters(m, &list));
    *count = 0;
    for (int i = 0; i < list.count; i++)
        if (list.items[i].tensor->grad)
            grads[(*count)++] = test_to_host(list.items[i].tensor->grad);
    snn_param_list_free(&list);
    return value;
}

static void test_model_step_fusion_on_off(void)
{
    snn_model_config c = snn_model_config_default(SNN_MODEL_RESNET18);
    c.width_base = 8, c.time_steps = 2, c.height = c.width = 16;
    snn_rng ra, rb;
    snn_rng_seed(&ra, 3), snn_rng_seed(&rb, 3);
    snn_module *a = snn_model_new(&c, &ra), *b = snn_model_new(&c, &rb);
    CHECK(a && b && snn_module_to(a, SNN_CUDA) == SNN_OK && snn_module_to(b, SNN_CUDA) == SNN_OK);
    float *ga[128], *gb[128];
    int na = 0, nb = 0;
    const float la = step(a, false, ga, &na), lb = step(b, true, gb, &nb);
    CHECK(la == lb && na == nb && na > 0);
    snn_param_list list;
    CHECK_OK(snn_module_parameters(a, &list));
    int differ = 0, k = 0;
    for (int i = 0; i < list.count && k < na && k < nb; i++) {
        if (!list.items[i].tensor->grad) continue;
        if (!bits(ga[k], gb[k], list.items[i].tensor->numel) && differ++ < 3)
            fprintf(stderr, "  %s: gradient differs with fusion on\n", list.items[i].name);
        k++;
    }
    CHECK(differ == 0);
    /* inference: the blocks' output neurons add the residual as they load and each conv ->
     * batch-norm pair is one op (fusion on) */
    snn_module_train(a, false);
    float *logits[2] = {NULL, NULL};
    int64_t n_logits = 0;
    for (int fusion = 0; fusion < 2; fusion++) {
        set_fusion(a, fusion);
        CHECK_OK(snn_step_begin());
        snn_no_grad_begin();
        snn_tensor *x = step_tensor(SNN_SHAPE(4, 3, 16, 16), -1.0f, 2.0f, 43, SNN_CUDA, false);
        snn_tensor *y = snn_module_forward(a, x);
        snn_no_grad_end();
        CHECK(y != NULL);
        if (y) logits[fusion] = test_to_host(y), n_logits = y->numel;
        snn_step_end();
    }
    CHECK(logits[0] && logits[1] && bits(logits[0], logits[1], n_logits));
    free(logits[0]), free(logits[1]);
    for (int i = 0; i < na; i++) free(ga[i]);
    for (int i = 0; i < nb; i++) free(gb[i]);
    snn_param_list_free(&list);
    snn_module_free(a), snn_module_free(b);
}

/* 7. TF32 and BF16 training: the batch-norm's backward takes the sums the neuron kernel made
 * (snn_bn_neuron_folds_sums; their order of addition is the kernel's, test_cuda_bn_sums), so
 * the gradients of x, gamma and beta equal the fp32 run's (batch-norm's own pass) to 1e-5 of
 * their largest magnitude; the forward, which the precision does not touch here (no conv), bit
 * for bit. Shapes the kernel makes the sums for (planes of 64) and not (49, T = 6). */
static void test_bf16_sums_from_the_neuron_kernel(void)
{
    snn_neuron_config cfg[3];
    configs(cfg);
    const int use[3] = {0, 1, 3}; /* shapes[]: T = 4, planes of 64; T = 3, 49; T = 6 */
    for (int u = 0; u < 3; u++)
        for (int c = 0; c < 2; c++)
            for (int res = 0; res < 2; res++) {
                const snn_shape shape = shapes[use[u]];
                result a = run(SNN_CUDA, true, shape, res, &cfg[c]);
                /* TF32 for the residual cases, BF16 for the others: the same path */
                CHECK_OK(snn_set_precision(res ? SNN_PRECISION_TF32 : SNN_PRECISION_BF16));
                result b = run(SNN_CUDA, true, shape, res, &cfg[c]);
                CHECK_OK(snn_set_precision(SNN_PRECISION_FP32));
                const bool ok = a.n == b.n && bits(a.spikes, b.spikes, a.n) &&
                                bits(a.rm, b.rm, a.C) && same(a.dx, b.dx, a.n, true) &&
                                same(a.dgamma, b.dgamma, a.C, true) &&
                                same(a.dbeta, b.dbeta, a.C, true) && bits(a.dres, b.dres, a.n);
                if (!ok)
                    fprintf(stderr, "  shape %d, config %d, residual %d: tf32/bf16 != fp32\n",
                            use[u], c, res);
                CHECK(ok);
                result_free(&a), result_free(&b);
            }
}

/* 8. A conv before the op, in BF16 training: the op leaves dL/dy (y, the conv's output) for
 * the conv to make as its channels-last copy loads it (autograd/grad_deferred.c,
 * conv2d_backward_bn_dout). The same step with y kept for the user (retain_grad, which keeps
 * the op from leaving it) makes dL/dy in place first, the old way: the gradients of the conv's
 * input and weight, gamma and beta are the same. Also where y has a second reader that runs
 * its backward after the op's (the record is then made by snn_grad_for before that reader
 * adds its share), and on a 4x4 plane, whose conv takes another path (made by the conv's
 * backward before its kernels run). snn_grad_deferred_taken counts the records a conv took:
 * one, on the 32x32 plane with y's one reader, none else. */
typedef struct conv_step {
    float *dx, *dw, *dgamma, *dbeta;
    int64_t nx, nw, C;
    int64_t taken;
} conv_step;

static conv_step run_conv_bn(int H, bool keep, bool second_reader)
{
    const int64_t T = 2, N = 4, C = 64;
    snn_neuron_config cfg[3];
    configs(cfg);
    const snn_shape shape = SNN_SHAPE(T, N, C, H, H);
    conv_step r = {0};
    CHECK_OK(snn_step_begin());
    snn_tensor *x = step_tensor(shape, 0.0f, 1.0f, 31, SNN_CUDA, true);
    snn_tensor *w = step_tensor(SNN_SHAPE(C, C, 3, 3), -0.1f, 0.1f, 32, SNN_CUDA, true);
    snn_tensor *gamma = step_tensor(SNN_SHAPE(C), 0.5f, 1.5f, 33, SNN_CUDA, true);
    snn_tensor *beta = step_tensor(SNN_SHAPE(C), -0.3f, 0.6f, 34, SNN_CUDA, true);
    snn_tensor *rm = owned(SNN_SHAPE(C), -0.2f, 0.2f, 35, SNN_CUDA);
    snn_tensor *rv = owned(SNN_SHAPE(C), 0.5f, 2.0f, 36, SNN_CUDA);
    snn_tensor *R = step_tensor(shape, -1.0f, 1.0f, 37, SNN_CUDA, false);
    snn_tensor *y = snn_conv2d(x, w, NULL, 1, 1);
    CHECK(y != NULL);
    if (!y) return r;
    y->retain_grad = keep;
    /* the second reader is recorded first, so its backward runs after the op's */
    snn_tensor *other = second_reader ? snn_sum_all(snn_mul(y, R)) : NULL;
    snn_tensor *s = snn_batchnorm_neuron(y, gamma, beta, rm, rv, 0.1f, 1e-5f, NULL, &cfg[0],
                                         NULL);
    CHECK(s != NULL);
    snn_tensor *loss = s ? snn_sum_all(snn_mul(s, R)) : NULL;
    if (loss && other) loss = snn_add(loss, other);
    const int64_t before = snn_grad_deferred_taken();
    if (loss) CHECK_OK(snn_backward(loss));
    r.taken = snn_grad_deferred_taken() - before;
    r.nx = x->numel, r.nw = w->numel, r.C = C;
    r.dx = test_to_host(x->grad), r.dw = test_to_host(w->grad);
    r.dgamma = test_to_host(gamma->grad), r.dbeta = test_to_host(beta->grad);
    snn_step_end();
    snn_tensor_free(rm), snn_tensor_free(rv);
    return r;
}

/* equal values (a -0 and a +0 compare equal: a gradient written over dout or added to zeros) */
static bool equal(const float *a, const float *b, int64_t n)
{
    if (!a || !b) return false;
    for (int64_t i = 0; i < n; i++)
        if (!(a[i] == b[i])) return false;
    return true;
}

static void test_conv_takes_the_batchnorm_dx(void)
{
    CHECK_OK(snn_set_precision(SNN_PRECISION_BF16));
    const int planes[2] = {32, 4};
    for (int p = 0; p < 2; p++)
        for (int second = 0; second < 2; second++) {
            conv_step left = run_conv_bn(planes[p], false, second);
            conv_step kept = run_conv_bn(planes[p], true, second);
            const bool ok = equal(left.dx, kept.dx, left.nx) && equal(left.dw, kept.dw, left.nw) &&
                            equal(left.dgamma, kept.dgamma, left.C) &&
                            equal(left.dbeta, kept.dbeta, left.C);
            const int64_t want = p == 0 && !second ? 1 : 0;
            if (!ok || left.taken != want || kept.taken != 0)
                fprintf(stderr, "  %dx%d plane, second reader %d: gradients %s, taken %lld "
                        "(want %lld) and %lld kept\n", planes[p], planes[p], second,
                        ok ? "equal" : "DIFFER", (long long)left.taken, (long long)want,
                        (long long)kept.taken);
            CHECK(ok);
            CHECK(left.taken == want && kept.taken == 0);
            free(left.dx), free(left.dw), free(left.dgamma), free(left.dbeta);
            free(kept.dx), free(kept.dw), free(kept.dgamma), free(kept.dbeta);
        }
    CHECK_OK(snn_set_precision(SNN_PRECISION_FP32));
}

int main(void)
{
    test_require_cuda();
    RUN(test_gpu_fused_equals_gpu_separate);
    RUN(test_gpu_carrying_equals_gpu_separate);
    RUN(test_gpu_against_cpu);
    RUN(test_gpu_residual_op);
    RUN(test_gpu_repeat_equals_gpu_separate);
    RUN(test_model_step_fusion_on_off);
    RUN(test_bf16_sums_from_the_neuron_kernel);
    RUN(test_conv_takes_the_batchnorm_dx);
    return test_finish();
}
