/*
 * test_optim.c - the optimizers (nn/optim.c): SGD (plain, momentum, Nesterov, weight decay),
 * Adam and AdamW against values worked out by hand (and, for the longer runs, with the PyTorch
 * formulas evaluated in double precision: the numbers below; AdamW also under a changing lr, as
 * a schedule drives it), parameters without a gradient, the named state, and a bit-exact resume
 * through a checkpoint.
 * Run: ctest --test-dir build -R '^optim$'   (or build/bin/test_optim)
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "snn.h"
#include "tensor/error.h"
#include "test.h"

static const snn_module_ops test_ops = {.kind = "Test"};

static const float w0[3] = {1.0f, -2.0f, 0.5f};
static const float g0[3] = {0.5f, 0.25f, -1.0f};

static snn_tensor *tensor_of(int n, const float *values)
{
    snn_tensor *t = snn_tensor_new(SNN_SHAPE(n), SNN_CPU);
    SNN_ASSERT(t);
    snn_tensor_copy_from_host(t, values);
    return t;
}

/* net: "w" (3, trainable), "fc.weight" (2, trainable), "fc.bias" (1, trainable),
 * "fc.running_mean" (2, a buffer: never trained) */
static snn_module *make_net(void)
{
    snn_module *net = snn_module_new(&test_ops, NULL);
    snn_module *fc = snn_module_new(&test_ops, NULL);
    SNN_ASSERT(net && fc);
    snn_module_add_param(net, "w", tensor_of(3, w0), true);
    snn_module_add_param(fc, "weight", tensor_of(2, (const float[]){0.25f, -0.75f}), true);
    snn_module_add_param(fc, "bias", tensor_of(1, (const float[]){0.3f}), true);
    snn_module_add_param(fc, "running_mean", tensor_of(2, (const float[]){5.0f, 6.0f}), false);
    CHECK_OK(snn_module_add(net, "fc", fc));
    return net;
}

static snn_tensor *param(snn_module *net, int which)
{
    snn_module *fc = snn_module_child(net, "fc");
    return which == 0 ? net->params[0].tensor : fc->params[which - 1].tensor;
}

static void set_grad(snn_tensor *t, const float *values)
{
    CHECK_OK(snn_tensor_copy_from_host(snn_tensor_grad(t), values));
}

static void check_values(const snn_tensor *t, const double *want, double rtol)
{
    for (int i = 0; i < t->numel; i++) CHECK_CLOSE(t->data[i], want[i], 1e-7, rtol);
}

/* Runs `steps` updates of `w` with the constant gradient g0 (the other parameters get none). */
static void run_constant(snn_optimizer *opt, snn_module *net, int steps)
{
    set_grad(param(net, 0), g0);
    for (int s = 0; s < steps; s++) CHECK_OK(snn_optimizer_step(opt));
}

static void test_sgd_plain(void)
{
    snn_module *net = make_net();
    snn_optimizer *opt = snn_sgd_new(net, 0.1f, 0.0f, 0.0f, false);
    CHECK(opt != NULL);
    /* w -= 0.1 g per step: [1, -2, 0.5] - 2 * 0.1 * [0.5, 0.25, -1] */
    run_constant(opt, net, 2);
    check_values(param(net, 0), (const double[]){0.9, -2.05, 0.7}, 1e-6);
    CHECK(snn_optimizer_steps(opt) == 2);
    /* plain SGD keeps no state */
    snn_param_list state;
    CHECK_OK(snn_optimizer_state(opt, &state));
    CHECK(state.count == 0 && state.items == NULL);
    snn_param_list_free(&state);
    snn_optimizer_free(opt);
    snn_module_free(net);
}

static void test_sgd_momentum(void)
{
    snn_module *net = make_net();
    snn_optimizer *opt = snn_sgd_new(net, 0.1f, 0.9f, 0.0f, false);
    /* buf_1 = g, buf_2 = 1.9 g, buf_3 = 2.71 g; w = w0 - 0.1 (1 + 1.9 + 2.71) g = w0 - 0.561 g */
    run_constant(opt, net, 3);
    check_values(param(net, 0), (const double[]){0.7195, -2.14025, 1.061}, 1e-6);
    snn_param_list state;
    CHECK_OK(snn_optimizer_state(opt, &state));
    CHECK(state.count == 3); /* one buffer per trainable parameter; none for running_mean */
    CHECK(strcmp(state.items[0].name, "momentum_buffer.w") == 0);
    CHECK(strcmp(state.items[1].name, "momentum_buffer.fc.weight") == 0);
    CHECK(strcmp(state.items[2].name, "momentum_buffer.fc.bias") == 0);
    check_values(state.items[0].tensor, (const double[]){2.71 * 0.5, 2.71 * 0.25, -2.71}, 1e-6);
    snn_param_list_free(&state);
    snn_optimizer_free(opt);
    snn_module_free(net);
}

static void test_sgd_nesterov(void)
{
    snn_module *net = make_net();
    snn_optimizer *opt = snn_sgd_new(net, 0.1f, 0.9f, 0.0f, true);
    /* step: w -= lr (g + 0.9 buf): 1.9 g then 2.71 g, so w0 - 0.1 * 4.61 g */
    run_constant(opt, net, 2);
    check_values(param(net, 0), (const double[]){0.7695, -2.11525, 0.961}, 1e-6);
    snn_optimizer_free(opt);
    snn_module_free(net);
}

static void test_sgd_weight_decay(void)
{
    snn_module *net = make_net();
    snn_optimizer *opt = snn_sgd_new(net, 0.1f, 0.9f, 0.01f, false);
    run_constant(opt, net, 3);
    check_values(param(net, 0),
                 (const double[]){0.7141347489999998, -2.1289196230000003, 1.0577174995}, 1e-5);
    snn_optimizer_free(opt);
    net = (snn_module_free(net), make_net());
    opt = snn_sgd_new(net, 0.1f, 0.9f, 0.01f, true);
    run_constant(opt, net, 3);
    check_values(param(net, 0), (const double[]){0.590209958191, -2.184807273757, 1.2994923364705},
                 1e-5);
    snn_optimizer_free(opt);
    snn_module_free(net);
}

static void test_adam(void)
{
    /* constant g: m_hat = g and v_hat = g^2 exactly, so every step moves lr * sign(g) */
    snn_module *net = make_net();
    snn_optimizer *opt = snn_adam_new(net, 0.01f, 0.0f, false);
    CHECK(opt != NULL);
    run_constant(opt, net, 3);
    check_values(param(net, 0), (const double[]){0.97, -2.03, 0.53}, 1e-6);
    snn_optimizer_free(opt);
    snn_module_free(net);

    /* coupled weight decay 0.1 */
    net = make_net();
    opt = snn_adam_new(net, 0.01f, 0.1f, false);
    run_constant(opt, net, 3);
    check_values(param(net, 0),
                 (const double[]){0.9700016073598313, -2.029978664845341, 0.5299989883299411},
                 1e-5);
    snn_optimizer_free(opt);
    snn_module_free(net);

    /* changing gradients exercise the bias corrections; the state is checked too */
    static const float gs[3][3] = {{0.5f, 0.25f, -1.0f}, {-0.3f, 0.1f, 2.0f}, {0.05f, -0.4f, 0.7f}};
    net = make_net();
    opt = snn_adam_new(net, 0.01f, 0.0f, false);
    for (int s = 0; s < 3; s++) {
        set_grad(param(net, 0), gs[s]);
        CHECK_OK(snn_optimizer_step(opt));
    }
    check_values(param(net, 0),
                 (const double[]){0.9860639105575424, -2.0175611372430193, 0.5017288461207342},
                 1e-5);
    snn_param_list state;
    CHECK_OK(snn_optimizer_state(opt, &state));
    CHECK(state.count == 6);
    CHECK(strcmp(state.items[0].name, "exp_avg.w") == 0);
    CHECK(strcmp(state.items[1].name, "exp_avg_sq.w") == 0);
    CHECK(strcmp(state.items[4].name, "exp_avg.fc.bias") == 0);
    CHECK(strcmp(state.items[5].name, "exp_avg_sq.fc.bias") == 0);
    check_values(state.items[0].tensor, (const double[]){0.0185, -0.01075, 0.169}, 1e-5);
    check_values(state.items[1].tensor,
                 (const double[]){0.00034191025, 0.0002323650625, 0.005484001}, 1e-5);
    snn_param_list_free(&state);
    snn_optimizer_free(opt);
    snn_module_free(net);
}

static void test_adamw(void)
{
    /* decoupled: w *= 1 - lr wd, then w -= lr sign(g) (constant g) */
    snn_module *net = make_net();
    snn_optimizer *opt = snn_adam_new(net, 0.01f, 0.1f, true);
    run_constant(opt, net, 2);
    check_values(param(net, 0), (const double[]){0.978011, -2.015992, 0.5189905}, 1e-6);
    snn_optimizer_free(opt);
    snn_module_free(net);

    static const float gs[3][3] = {{0.5f, 0.25f, -1.0f}, {-0.3f, 0.1f, 2.0f}, {0.05f, -0.4f, 0.7f}};
    net = make_net();
    opt = snn_adam_new(net, 0.01f, 0.1f, true);
    for (int s = 0; s < 3; s++) {
        set_grad(param(net, 0), gs[s]);
        CHECK_OK(snn_optimizer_step(opt));
    }
    check_values(param(net, 0),
                 (const double[]){0.9830888145374485, -2.011538159492245, 0.5002140166561814},
                 1e-5);
    snn_optimizer_free(opt);
    snn_module_free(net);
}

/* AdamW against torch.optim.AdamW's documented algorithm, evaluated in double by hand (a
 * Python script of the loop below; the gradients and rates are the float values the test
 * feeds in). PyTorch's algorithm, with lr the rate of this step (what a scheduler set):
 *
 *     for t = 1, 2, ...:
 *         p = p - lr * wd * p                       decoupled decay, BEFORE the Adam update,
 *                                                   from the step's lr (not the base lr)
 *         m = beta1 m + (1 - beta1) g
 *         v = beta2 v + (1 - beta2) g^2
 *         m_hat = m / (1 - beta1^t),  v_hat = v / (1 - beta2^t)
 *         p = p - lr * m_hat / (sqrt(v_hat) + eps)
 *
 * with beta1 0.9, beta2 0.999, eps 1e-8. wd = 0.5 and lr 0.1, 0.05, 0.025 (a schedule halving
 * it) make the decay term 5%, 2.5%, 1.25% of p: an implementation that decays after the
 * update, with the base lr, or couples the decay into g (Adam: p ends at 0.84099, -1.82522,
 * 0.56003) misses these values by far more than float rounding. */
static void test_adamw_pytorch_algorithm(void)
{
    static const float gs[3][3] = {{0.5f, 0.25f, -1.0f}, {-0.3f, 0.1f, 2.0f}, {0.05f, -0.4f, 0.7f}};
    static const float lrs[3] = {0.1f, 0.05f, 0.025f};
    snn_module *net = make_net();
    snn_optimizer *opt = snn_adam_new(net, lrs[0], 0.5f, true);
    CHECK(opt != NULL);
    if (!opt) {
        snn_module_free(net);
        return;
    }
    for (int s = 0; s < 3; s++) {
        snn_optimizer_set_lr(opt, lrs[s]);
        set_grad(param(net, 0), gs[s]);
        CHECK_OK(snn_optimizer_step(opt));
    }
    check_values(param(net, 0),
                 (const double[]){0.803882636667513, -1.9664306092158192, 0.5240155290601008},
                 2e-6);
    snn_param_list state;
    CHECK_OK(snn_optimizer_state(opt, &state));
    if (state.count == 6) {
        /* m and v do not see the decay (it acts on p alone) */
        check_values(state.items[0].tensor,
                     (const double[]){0.0184999990016222, -0.010750000461935992, 0.16899999880790706},
                     1e-6);
        check_values(state.items[1].tensor,
                     (const double[]){0.00034191025721991107, 0.00023236506756609703,
                                      0.005484000983310704},
                     1e-6);
    }
    CHECK(state.count == 6);
    snn_param_list_free(&state);
    /* the parameters that got no gradient are not decayed either (PyTorch skips them whole) */
    CHECK(param(net, 1)->data[0] == 0.25f && param(net, 2)->data[0] == 0.3f);
    snn_optimizer_free(opt);
    snn_module_free(net);
}

/* A parameter whose .grad is NULL is skipped (value and state untouched) and does not count
 * the step: its first update later is a first step (SGD buffer = g, Adam t = 1). Buffers are
 * never updated, even with a gradient. */
static void test_skip_null_grad(void)
{
    snn_module *net = make_net();
    snn_optimizer *opt = snn_adam_new(net, 0.01f, 0.0f, false);
    set_grad(param(net, 0), g0);
    set_grad(param(net, 3), (const float[]){1.0f, 1.0f}); /* running_mean: not trainable */
    CHECK(param(net, 1)->grad == NULL && param(net, 2)->grad == NULL);
    CHECK_OK(snn_optimizer_step(opt));
    CHECK(param(net, 1)->data[0] == 0.25f && param(net, 1)->data[1] == -0.75f);
    CHECK(param(net, 2)->data[0] == 0.3f);
    CHECK(param(net, 3)->data[0] == 5.0f && param(net, 3)->data[1] == 6.0f);
    snn_param_list state;
    CHECK_OK(snn_optimizer_state(opt, &state));
    CHECK(state.items[4].tensor->data[0] == 0.0f && state.items[5].tensor->data[0] == 0.0f);
    snn_param_list_free(&state);
    /* the bias gets its first gradient at the optimizer's second step: t = 1 for it, so it
     * moves by lr * sign(g); with t = 2 it would move by 0.744 lr */
    set_grad(param(net, 2), (const float[]){-4.0f});
    CHECK_OK(snn_optimizer_step(opt));
    CHECK_CLOSE(param(net, 2)->data[0], 0.31, 1e-7, 1e-6);
    CHECK(snn_optimizer_steps(opt) == 2);
    snn_optimizer_free(opt);

    /* SGD with momentum: the first update of a late parameter initialises its buffer to g */
    opt = snn_sgd_new(net, 0.1f, 0.9f, 0.0f, false);
    set_grad(param(net, 2), (const float[]){0.0f});
    snn_tensor_free(param(net, 1)->grad);
    param(net, 1)->grad = NULL;
    CHECK_OK(snn_optimizer_step(opt));
    set_grad(param(net, 1), (const float[]){1.0f, -1.0f});
    CHECK_OK(snn_optimizer_step(opt));
    CHECK_CLOSE(param(net, 1)->data[0], 0.15, 1e-7, 1e-6);
    CHECK_CLOSE(param(net, 1)->data[1], -0.65, 1e-7, 1e-6);
    snn_optimizer_free(opt);
    snn_module_free(net);
}

static void test_lr_and_arguments(void)
{
    snn_module *net = make_net();
    snn_optimizer *opt = snn_sgd_new(net, 0.1f, 0.0f, 0.0f, false);
    CHECK(snn_optimizer_lr(opt) == 0.1f);
    snn_optimizer_set_lr(opt, 0.5f);
    CHECK(snn_optimizer_lr(opt) == 0.5f);
    run_constant(opt, net, 1);
    check_values(param(net, 0), (const double[]){0.75, -2.125, 1.0}, 1e-6);
    snn_optimizer_set_steps(opt, 7);
    CHECK(snn_optimizer_steps(opt) == 7);
    snn_optimizer_free(opt);
    snn_optimizer_free(NULL);

    CHECK(snn_sgd_new(net, -0.1f, 0.0f, 0.0f, false) == NULL);
    CHECK(strstr(snn_last_error(), "'lr'") != NULL);
    CHECK(snn_sgd_new(net, 0.1f, 1.5f, 0.0f, false) == NULL);
    CHECK(strstr(snn_last_error(), "'momentum'") != NULL);
    CHECK(snn_sgd_new(net, 0.1f, 0.0f, 0.0f, true) == NULL);
    CHECK(strstr(snn_last_error(), "'nesterov'") != NULL);
    CHECK(snn_sgd_new(net, 0.1f, 0.0f, -1.0f, false) == NULL);
    CHECK(strstr(snn_last_error(), "'weight_decay'") != NULL);
    CHECK(snn_adam_new(net, NAN, 0.0f, false) == NULL);
    CHECK(snn_adam_new(NULL, 0.1f, 0.0f, false) == NULL);
    CHECK(strstr(snn_last_error(), "'module'") != NULL);
    CHECK(snn_optimizer_step(NULL) == SNN_ERR_ARGUMENT);

    /* a gradient of the wrong size is refused before anything changes */
    opt = snn_adam_new(net, 0.01f, 0.0f, false);
    set_grad(param(net, 0), g0);
    snn_tensor *bad = snn_tensor_new(SNN_SHAPE(5), SNN_CPU);
    param(net, 2)->grad = bad;
    CHECK(snn_optimizer_step(opt) == SNN_ERR_STATE);
    CHECK(strstr(snn_last_error(), "fc.bias") != NULL);
    CHECK(param(net, 0)->data[0] == 0.75f);
    CHECK(snn_optimizer_steps(opt) == 0);
    snn_optimizer_free(opt);
    snn_module_free(net);
}

/* Every allocation of snn_adam_new can fail: it returns NULL, sets a message, leaks nothing. */
static void test_out_of_memory(void)
{
    snn_module *net = make_net();
    int failures = 0;
    for (uint64_t n = 1; n < 100; n++) {
        snn_alloc_fail_after(n);
        snn_optimizer *opt = snn_adam_new(net, 0.01f, 0.0f, false);
        snn_alloc_fail_after(0);
        if (opt) {
            snn_optimizer_free(opt);
            break;
        }
        failures++;
        CHECK(snn_last_status() == SNN_ERR_MEMORY);
    }
    CHECK(failures >= 5);
    snn_module_free(net);
}

/* Two Adam steps, a checkpoint of parameters + state, a fresh model and optimizer loaded from
 * it: the third step must then agree bit for bit with an uninterrupted run. */
static void test_resume_bit_exact(void)
{
    static const float gs[4][3] = {
        {0.5f, 0.25f, -1.0f}, {-0.3f, 0.1f, 2.0f}, {0.05f, -0.4f, 0.7f}, {1.5f, -0.2f, 0.01f}};
    static const float gb[4][2] = {{0.1f, 0.2f}, {-0.3f, 0.4f}, {0.5f, -0.6f}, {0.7f, 0.8f}};
    char path[64];
    snprintf(path, sizeof path, "/tmp/snn_test_optim_%ld.safetensors", (long)getpid());

    snn_module *a = make_net();
    snn_optimizer *oa = snn_adam_new(a, 0.01f, 0.05f, true);
    for (int s = 0; s < 2; s++) {
        set_grad(param(a, 0), gs[s]);
        set_grad(param(a, 1), gb[s]);
        CHECK_OK(snn_optimizer_step(oa));
    }
    snn_param_list params, state;
    CHECK_OK(snn_module_parameters(a, &params));
    CHECK_OK(snn_optimizer_state(oa, &state));
    snn_named_param items[16];
    int n = 0;
    for (int i = 0; i < params.count; i++) items[n++] = params.items[i];
    for (int i = 0; i < state.count; i++) items[n++] = state.items[i];
    snn_param_list all = {items, n};
    CHECK_OK(snn_safetensors_save(path, &all, "{\"steps\":\"2\"}"));
    snn_param_list_free(&params);
    snn_param_list_free(&state);

    /* a fresh model with other values, and a fresh optimizer */
    snn_module *b = make_net();
    param(b, 0)->data[0] = 42.0f;
    snn_optimizer *ob = snn_adam_new(b, 0.01f, 0.05f, true);
    CHECK_OK(snn_module_parameters(b, &params));
    CHECK_OK(snn_optimizer_state(ob, &state));
    n = 0;
    for (int i = 0; i < params.count; i++) items[n++] = params.items[i];
    for (int i = 0; i < state.count; i++) items[n++] = state.items[i];
    all = (snn_param_list){items, n};
    char *meta = NULL;
    size_t meta_len = 0;
    CHECK_OK(snn_safetensors_load(path, &all, false, &meta, &meta_len));
    CHECK(meta && strcmp(meta, "{\"steps\":\"2\"}") == 0);
    snn_free(meta, meta_len + 1, SNN_CPU);
    snn_optimizer_set_steps(ob, 2);
    snn_param_list_free(&params);
    snn_param_list_free(&state);

    for (int s = 2; s < 4; s++) {
        set_grad(param(a, 0), gs[s]);
        set_grad(param(a, 1), gb[s]);
        set_grad(param(b, 0), gs[s]);
        set_grad(param(b, 1), gb[s]);
        CHECK_OK(snn_optimizer_step(oa));
        CHECK_OK(snn_optimizer_step(ob));
    }
    for (int p = 0; p < 4; p++)
        CHECK(memcmp(param(a, p)->data, param(b, p)->data,
                     (size_t)param(a, p)->numel * sizeof(float)) == 0);
    CHECK(snn_optimizer_steps(ob) == 4);
    snn_optimizer_free(oa);
    snn_optimizer_free(ob);
    snn_module_free(a);
    snn_module_free(b);
    unlink(path);
}

int main(void)
{
    RUN(test_sgd_plain);
    RUN(test_sgd_momentum);
    RUN(test_sgd_nesterov);
    RUN(test_sgd_weight_decay);
    RUN(test_adam);
    RUN(test_adamw);
    RUN(test_adamw_pytorch_algorithm);
    RUN(test_skip_null_grad);
    RUN(test_lr_and_arguments);
    RUN(test_out_of_memory);
    RUN(test_resume_bit_exact);
    return test_finish();
}
