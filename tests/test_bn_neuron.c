/*
 * test_bn_neuron.c - snn_batchnorm_neuron (neurons/bn_neuron.c): a training-mode batch-norm, an
 * optional residual add and IF / LIF neurons as one node, against the separate ops
 * snn_batchnorm2d -> snn_add_into -> snn_neuron_multistep, bit for bit: spikes, activity,
 * running statistics, and the gradients of x, gamma, beta and the residual for
 * L = sum(S * R) with a fixed random R. Then the arguments it refuses, and the models: one
 * training step of a ResNet, a SEW ResNet and the CNN with fusion on and off (the model
 * option fuse, snn_model_set_options) gives the same logits, loss, gradients and running
 * statistics, and the fused step records the fused nodes. The repeated stem
 * (snn_batchnorm_neuron_repeat) against snn_batchnorm2d -> snn_repeat_time ->
 * snn_neuron_multistep, bit for bit (the models run it on the GPU alone: its rule wants a
 * one-pass backward). The carrying variants: test_bn_neuron_carry.c.
 * Run: ctest -R bn_neuron
 */
#include "bn_neuron_check.h"

typedef struct path_result {
    snn_tensor *spikes, *activity;
    snn_tensor *running_mean, *running_var;
    snn_tensor *x, *gamma, *beta, *residual; /* leaves, with their gradients */
} path_result;

/* One path on fresh leaves from the same seeds; fused or the separate ops. */
static path_result run_path(bool fused, snn_shape shape, bool with_residual,
                            const snn_neuron_config *cfg)
{
    const int64_t C = shape.dim[2];
    path_result r;
    r.x = uniform(shape, -1.5f, 2.5f, 11, true);
    r.gamma = uniform(SNN_SHAPE(C), 0.5f, 1.5f, 12, true);
    r.beta = uniform(SNN_SHAPE(C), -0.3f, 0.6f, 13, true);
    r.residual = with_residual ? uniform(shape, 0.0f, 1.0f, 14, true) : NULL;
    snn_tensor *rm0 = uniform(SNN_SHAPE(C), -0.2f, 0.2f, 15, false);
    snn_tensor *rv0 = uniform(SNN_SHAPE(C), 0.5f, 2.0f, 16, false);
    r.running_mean = owned_copy(rm0);
    r.running_var = owned_copy(rv0);
    r.activity = NULL;
    if (fused) {
        r.spikes = snn_batchnorm_neuron(r.x, r.gamma, r.beta, r.running_mean, r.running_var, 0.1f,
                                        1e-5f, r.residual, cfg, &r.activity);
    } else {
        snn_tensor *y = snn_batchnorm2d(r.x, r.gamma, r.beta, r.running_mean, r.running_var, true,
                                        0.1f, 1e-5f);
        if (r.residual) y = snn_add_into(y, r.residual);
        r.spikes = snn_neuron_multistep(y, cfg, NULL, &r.activity);
    }
    snn_tensor *R = uniform(shape, -1.0f, 1.0f, 17, false);
    if (r.spikes) CHECK_OK(snn_backward(snn_sum_all(snn_mul(r.spikes, R))));
    return r;
}

/* The fused path b against the separate ops' path a, bit for bit, on a case that can fail:
 * some spikes but not all (unless `any_rate`), and gradients that are not 0. `what` names the
 * case. Frees both paths' running statistics. */
static void check_paths_same(path_result *a, path_result *b, bool with_residual, bool any_rate,
                             const char *what)
{
    const bool ok = a->spikes && b->spikes && same(a->spikes, b->spikes) &&
                    same(a->activity, b->activity) && BN_SIDE_SAME(*a, *b, with_residual);
    if (!ok) fprintf(stderr, "  %s: the fused op differs from the separate ops\n", what);
    CHECK(ok);
    if (b->spikes) {
        const double rate = mean_of(b->spikes);
        if (!any_rate && !(rate > 0.005 && rate < 0.98))
            fprintf(stderr, "  %s: firing rate %.3f\n", what, rate);
        CHECK(any_rate || (rate > 0.005 && rate < 0.98));
        CHECK(b->x->grad && mean_of(b->x->grad) != 0.0 && b->gamma->grad &&
              b->gamma->grad->data[0] != 0.0f);
    }
    snn_tensor_free(a->running_mean), snn_tensor_free(a->running_var);
    snn_tensor_free(b->running_mean), snn_tensor_free(b->running_var);
}

static void test_same_bits_as_separate_ops(void)
{
    /* planes of 20 (several a chunk of lif.c), of 300 (a plane over two chunks), of 1 */
    const snn_shape shapes[3] = {SNN_SHAPE(3, 2, 3, 4, 5), SNN_SHAPE(2, 2, 2, 15, 20),
                                 SNN_SHAPE(4, 5, 6, 1, 1)};
    snn_neuron_config cfgs[5];
    cfgs[0] = snn_neuron_config_default(SNN_NEURON_LIF);
    cfgs[0].surrogate = snn_surrogate_default(SNN_SURROGATE_ATAN);
    cfgs[1] = snn_neuron_config_default(SNN_NEURON_IF);
    cfgs[2] = snn_neuron_config_default(SNN_NEURON_LIF);
    cfgs[2].reset = SNN_RESET_SOFT;
    cfgs[2].decay_input = false;
    cfgs[3] = snn_neuron_config_default(SNN_NEURON_LIF);
    cfgs[3].v_reset = -0.5f;
    cfgs[3].detach_reset = true;
    cfgs[4] = snn_neuron_config_default(SNN_NEURON_IF);
    cfgs[4].surrogate = snn_surrogate_default(SNN_SURROGATE_PIECEWISE_QUADRATIC);
    int cases = 0;
    for (int s = 0; s < 3; s++)
        for (int c = 0; c < 5; c++)
            for (int res = 0; res < 2; res++) {
                snn_step_begin();
                path_result a = run_path(false, shapes[s], res, &cfgs[c]);
                path_result b = run_path(true, shapes[s], res, &cfgs[c]);
                char what[96];
                snprintf(what, sizeof what, "shape %d, neuron config %d, residual %d", s, c, res);
                check_paths_same(&a, &b, res, false, what);
                snn_step_end();
                cases++;
            }
    CHECK(cases == 30);
}

/* ---- the repeated stem: snn_batchnorm_neuron_repeat ------------------------------------------ */

/* One path of the repeated stem on fresh leaves, x (N, C, H, W) the input of T steps: the
 * fused op, or batch-norm -> repeat -> neurons; L = sum(S * R) backpropagated. */
static path_result run_repeat(bool fused, snn_shape shape, int T, const snn_neuron_config *cfg)
{
    const int64_t C = shape.dim[1];
    path_result r;
    r.x = uniform(shape, -1.5f, 2.5f, 21, true);
    r.gamma = uniform(SNN_SHAPE(C), 0.5f, 1.5f, 22, true);
    r.beta = uniform(SNN_SHAPE(C), -0.3f, 0.6f, 23, true);
    r.residual = NULL;
    snn_tensor *rm0 = uniform(SNN_SHAPE(C), -0.2f, 0.2f, 25, false);
    snn_tensor *rv0 = uniform(SNN_SHAPE(C), 0.5f, 2.0f, 26, false);
    r.running_mean = owned_copy(rm0);
    r.running_var = owned_copy(rv0);
    r.activity = NULL;
    if (fused) {
        r.spikes = snn_batchnorm_neuron_repeat(r.x, r.gamma, r.beta, r.running_mean,
                                               r.running_var, 0.1f, 1e-5f, T, cfg, &r.activity);
    } else {
        snn_tensor *y = snn_batchnorm2d(r.x, r.gamma, r.beta, r.running_mean, r.running_var, true,
                                        0.1f, 1e-5f);
        r.spikes = snn_neuron_multistep(snn_repeat_time(y, T), cfg, NULL, &r.activity);
    }
    const snn_shape out = SNN_SHAPE(T, shape.dim[0], C, shape.dim[2], shape.dim[3]);
    CHECK(r.spikes && snn_shape_equal(r.spikes->shape, out));
    snn_tensor *R = uniform(out, -1.0f, 1.0f, 27, false);
    if (r.spikes) CHECK_OK(snn_backward(snn_sum_all(snn_mul(r.spikes, R))));
    return r;
}

static void test_repeat_same_bits_as_separate_ops(void)
{
    const snn_shape shapes[3] = {SNN_SHAPE(2, 3, 4, 5), SNN_SHAPE(2, 2, 15, 20),
                                 SNN_SHAPE(5, 6, 1, 1)};
    const int steps[3] = {1, 3, 17};
    snn_neuron_config cfgs[3];
    cfgs[0] = snn_neuron_config_default(SNN_NEURON_LIF);
    cfgs[1] = snn_neuron_config_default(SNN_NEURON_IF);
    cfgs[1].surrogate = snn_surrogate_default(SNN_SURROGATE_ATAN);
    cfgs[2] = snn_neuron_config_default(SNN_NEURON_LIF);
    cfgs[2].reset = SNN_RESET_SOFT;
    cfgs[2].detach_reset = true;
    for (int s = 0; s < 3; s++)
        for (int t = 0; t < 3; t++)
            for (int c = 0; c < 3; c++) {
                snn_step_begin();
                path_result a = run_repeat(false, shapes[s], steps[t], &cfgs[c]);
                path_result b = run_repeat(true, shapes[s], steps[t], &cfgs[c]);
                char what[96];
                snprintf(what, sizeof what, "repeated stem, shape %d, T = %d, neuron config %d",
                         s, steps[t], c);
                /* one step of a few elements may not fire at all */
                check_paths_same(&a, &b, false, steps[t] == 1, what);
                snn_step_end();
            }
}

static void expect_refused(snn_tensor *got, const char *arg)
{
    CHECK(got == NULL);
    const char *msg = snn_last_error();
    const bool named = strstr(msg, "snn_batchnorm_neuron") && strstr(msg, arg);
    if (!named) fprintf(stderr, "  message without '%s': %s\n", arg, msg);
    CHECK(named);
    snn_clear_error();
}

static void test_refused_arguments(void)
{
    snn_step_begin();
    const snn_shape shape = SNN_SHAPE(2, 2, 3, 4, 4);
    snn_tensor *x = uniform(shape, -1, 1, 1, true);
    snn_tensor *g = uniform(SNN_SHAPE(3), 0.5f, 1.5f, 2, true);
    snn_tensor *b = uniform(SNN_SHAPE(3), -0.5f, 0.5f, 3, true);
    snn_tensor *rm = uniform(SNN_SHAPE(3), 0, 0, 4, false);
    snn_tensor *rv = uniform(SNN_SHAPE(3), 1, 1, 5, false);
    snn_neuron_config lif = snn_neuron_config_default(SNN_NEURON_LIF);
    snn_neuron_config plif = snn_neuron_config_default(SNN_NEURON_PLIF);
    expect_refused(snn_batchnorm_neuron(x, g, b, rm, rv, 0.1f, 1e-5f, NULL, &plif, NULL), "'cfg'");
    snn_tensor *flat = uniform(SNN_SHAPE(4, 3, 4, 4), -1, 1, 6, true);
    expect_refused(snn_batchnorm_neuron(flat, g, b, rm, rv, 0.1f, 1e-5f, NULL, &lif, NULL), "'x'");
    snn_tensor *short_gamma = uniform(SNN_SHAPE(2), 0.5f, 1.5f, 7, true);
    expect_refused(snn_batchnorm_neuron(x, short_gamma, b, rm, rv, 0.1f, 1e-5f, NULL, &lif, NULL),
                   "gamma");
    snn_tensor *res = uniform(SNN_SHAPE(2, 2, 3, 4, 5), 0, 1, 8, true);
    expect_refused(snn_batchnorm_neuron(x, g, b, rm, rv, 0.1f, 1e-5f, res, &lif, NULL),
                   "residual");
    expect_refused(snn_batchnorm_neuron(x, g, b, rm, rv, 0.1f, 0.0f, NULL, &lif, NULL), "eps");
    /* the repeated stem: one image step (N, C, H, W), 1..1024 steps, IF / LIF */
    snn_tensor *image = uniform(SNN_SHAPE(2, 3, 4, 4), -1, 1, 9, true);
    expect_refused(snn_batchnorm_neuron_repeat(x, g, b, rm, rv, 0.1f, 1e-5f, 2, &lif, NULL),
                   "(N, C, H, W)");
    expect_refused(snn_batchnorm_neuron_repeat(image, g, b, rm, rv, 0.1f, 1e-5f, 0, &lif, NULL),
                   "'time_steps'");
    expect_refused(snn_batchnorm_neuron_repeat(image, g, b, rm, rv, 0.1f, 1e-5f, 2, &plif, NULL),
                   "'cfg'");
    expect_refused(snn_batchnorm_neuron_repeat(image, short_gamma, b, rm, rv, 0.1f, 1e-5f, 2,
                                               &lif, NULL),
                   "gamma");
    /* the residual made by a batch-norm: rx as x, the second batch-norm's tensors and
     * constants named as r's */
    const snn_batchnorm_args bn = {g, b, rm, rv, 0.1f, 1e-5f};
    snn_tensor *rx = uniform(shape, -1, 1, 10, true);
    snn_tensor *rg = uniform(SNN_SHAPE(3), 0.5f, 1.5f, 11, true);
    const snn_batchnorm_args r = {rg, b, rm, rv, 0.1f, 1e-5f};
    snn_batchnorm_args r_short = r, r_eps = r;
    r_short.gamma = short_gamma, r_eps.eps = 0.0f;
    expect_refused(snn_batchnorm_neuron_bn_residual(x, &bn, res, &r, &lif, NULL), "'rx'");
    expect_refused(snn_batchnorm_neuron_bn_residual(x, &bn, rx, &r_short, &lif, NULL),
                   "r->gamma");
    expect_refused(snn_batchnorm_neuron_bn_residual(x, &bn, rx, &r_eps, &lif, NULL), "r->eps");
    expect_refused(snn_batchnorm_neuron_bn_residual(x, &bn, rx, NULL, &lif, NULL), "'r'");
    expect_refused(snn_batchnorm_neuron_bn_residual(x, &bn, rx, &r, &plif, NULL), "'cfg'");
    snn_step_end();
}

/* snn_neuron_multistep_residual: the spikes and activity of the add, then the neurons; with a
 * tape, those two ops. */
static void test_residual_op(void)
{
    const snn_shape shapes[2] = {SNN_SHAPE(3, 2, 3, 4, 5), SNN_SHAPE(4, 3, 17)};
    snn_neuron_config cfgs[2] = {snn_neuron_config_default(SNN_NEURON_LIF),
                                 snn_neuron_config_default(SNN_NEURON_IF)};
    cfgs[1].reset = SNN_RESET_SOFT;
    for (int s = 0; s < 2; s++)
        for (int c = 0; c < 2; c++) {
            snn_step_begin();
            snn_no_grad_begin();
            snn_tensor *x = uniform(shapes[s], -0.5f, 1.5f, 31, false);
            snn_tensor *r = uniform(shapes[s], 0.0f, 1.0f, 32, false);
            snn_tensor *act_want = NULL, *act_got = NULL;
            snn_tensor *got = snn_neuron_multistep_residual(x, r, &cfgs[c], &act_got);
            snn_tensor *want = snn_neuron_multistep(snn_add_into(x, r), &cfgs[c], NULL, &act_want);
            snn_no_grad_end();
            CHECK(got && want && same(got, want) && same(act_got, act_want));
            if (got) {
                const double rate = mean_of(got);
                CHECK(rate > 0.05 && rate < 0.95);
            }
            snn_step_end();
        }
    /* with a tape: the recorded add and neuron, gradients to both inputs */
    snn_step_begin();
    snn_neuron_config lif = snn_neuron_config_default(SNN_NEURON_LIF);
    snn_tensor *x = uniform(SNN_SHAPE(2, 2, 3, 4, 4), -0.5f, 1.5f, 33, true);
    snn_tensor *r = uniform(SNN_SHAPE(2, 2, 3, 4, 4), 0.0f, 1.0f, 34, true);
    snn_tensor *y = snn_neuron_multistep_residual(snn_scale(x, 1.0f), r, &lif, NULL);
    CHECK(y && y->grad_fn && strcmp(y->grad_fn->op, "neuron") == 0);
    if (y) CHECK_OK(snn_backward(snn_sum_all(y)));
    CHECK(x->grad && r->grad);
    /* a bad config is refused before x is written (the fallback adds into x) */
    snn_tensor *keep = uniform(SNN_SHAPE(2, 2, 3, 4, 4), -0.5f, 1.5f, 33, false);
    snn_tensor *x_before = owned_copy(keep);
    CHECK(snn_neuron_multistep_residual(keep, r, NULL, NULL) == NULL);
    CHECK(strstr(snn_last_error(), "snn_neuron_multistep_residual") &&
          strstr(snn_last_error(), "'cfg'"));
    snn_clear_error();
    CHECK(same(keep, x_before));
    snn_tensor_free(x_before);
    snn_tensor *bad = uniform(SNN_SHAPE(2, 2, 3, 4, 5), 0.0f, 1.0f, 35, false);
    CHECK(snn_neuron_multistep_residual(x, bad, &lif, NULL) == NULL);
    CHECK(strstr(snn_last_error(), "snn_neuron_multistep_residual") != NULL);
    snn_clear_error();
    snn_step_end();
}

/* ---- the models: fusion on and off give the same step --------------------------------------- */

typedef struct step_result {
    snn_tensor *logits;   /* OWNED copy */
    float loss;
    snn_param_list params;
    int fused_nodes;      /* snn_batchnorm_neuron's and _bn_residual's */
    int shortcut_nodes;   /* _bn_residual's: the tails of the downsampling blocks */
    int stem_nodes;       /* the repeated stem's (snn_batchnorm_neuron_repeat) */
} step_result;

static step_result train_step(snn_module *m, const snn_model_config *c, bool fusion)
{
    step_result r = {0};
    set_fusion(m, fusion);
    snn_rng rng;
    snn_rng_seed(&rng, 5);
    snn_tensor *x = snn_tensor_new(SNN_SHAPE(3, c->in_channels, c->height, c->width), SNN_CPU);
    snn_tensor_normal_(x, &rng, 0.5f, 1.5f);
    const float labels_host[3] = {1, 7, 4};
    snn_step_begin();
    snn_module_zero_grad(m);
    snn_tensor *logits = snn_module_forward(m, x);
    snn_tensor *labels = snn_from_host(SNN_SHAPE(3), labels_host, SNN_CPU);
    snn_tensor *loss = logits ? snn_cross_entropy(logits, labels) : NULL;
    CHECK(loss != NULL);
    if (loss) {
        r.shortcut_nodes = count_nodes(loss, "snn_batchnorm_neuron_bn_residual");
        r.fused_nodes = count_nodes(loss, "snn_batchnorm_neuron") + r.shortcut_nodes;
        r.stem_nodes = count_nodes(loss, "snn_batchnorm_neuron_repeat");
        CHECK_OK(snn_backward(loss));
        r.loss = loss->data[0];
        r.logits = owned_copy(logits);
    }
    snn_step_end();
    snn_tensor_free(x);
    CHECK_OK(snn_module_parameters(m, &r.params));
    return r;
}

static void test_models_same_step(void)
{
    /* shortcut: the tails that make their downsample batch-norm's output themselves */
    const struct { snn_model_kind kind; const char *name; int fused, shortcut; } cases[3] = {
        {SNN_MODEL_RESNET18, "resnet18", 16, 3},    /* every neuron but the stem's (below) */
        {SNN_MODEL_SEW_RESNET18, "sew-resnet18", 19, 0}, /* its shortcut has neurons */
        {SNN_MODEL_SPIKING_CNN, "cnn", 1, 0},       /* conv2's; the classifier has no batch-norm */
    };
    for (int k = 0; k < 3; k++) {
        snn_model_config c = snn_model_config_default(cases[k].kind);
        c.width_base = 4, c.time_steps = 2, c.hidden = 16;
        if (cases[k].kind != SNN_MODEL_SPIKING_CNN) c.height = c.width = 8;
        snn_rng rng_a, rng_b;
        snn_rng_seed(&rng_a, 9);
        snn_rng_seed(&rng_b, 9);
        snn_module *a = snn_model_new(&c, &rng_a), *b = snn_model_new(&c, &rng_b);
        CHECK(a && b);
        if (!a || !b) continue;
        step_result off = train_step(a, &c, false), on = train_step(b, &c, true);
        CHECK(off.fused_nodes == 0 && off.stem_nodes == 0);
        /* the stem's rule wants a one-pass backward, which the CPU has not: the repeat runs
         * (the GPU's side: tests/test_cuda_bn_neuron.c) */
        CHECK(on.stem_nodes == 0);
        if (on.fused_nodes != cases[k].fused)
            fprintf(stderr, "  %s: %d fused nodes, want %d\n", cases[k].name, on.fused_nodes,
                    cases[k].fused);
        CHECK(on.fused_nodes == cases[k].fused);
        CHECK(on.shortcut_nodes == cases[k].shortcut && off.shortcut_nodes == 0);
        CHECK(off.loss == on.loss && same(off.logits, on.logits));
        int differ = 0;
        CHECK(off.params.count == on.params.count);
        for (int i = 0; i < off.params.count && i < on.params.count; i++) {
            const snn_tensor *p = off.params.items[i].tensor, *q = on.params.items[i].tensor;
            /* values: the running statistics moved the same; gradients: the same bits */
            if (!same(p, q) || (p->grad != NULL) != (q->grad != NULL) ||
                (p->grad && !same(p->grad, q->grad))) {
                if (differ++ < 3)
                    fprintf(stderr, "  %s: %s differs with fusion on\n", cases[k].name,
                            off.params.items[i].name);
            }
        }
        CHECK(differ == 0);
        snn_tensor_free(off.logits), snn_tensor_free(on.logits);
        snn_param_list_free(&off.params), snn_param_list_free(&on.params);
        snn_module_free(a), snn_module_free(b);
    }
}

/* Inference: the blocks' output neurons take the residual sum as they load and each conv ->
 * batch-norm pair is one op (fusion on), the same logits and firing rates as the separate ops
 * (off). */
static void test_models_same_eval(void)
{
    const snn_model_kind kinds[2] = {SNN_MODEL_RESNET18, SNN_MODEL_RESNET50};
    for (int k = 0; k < 2; k++) {
        snn_model_config c = snn_model_config_default(kinds[k]);
        c.width_base = 4, c.time_steps = 3, c.height = c.width = 8;
        snn_rng rng;
        snn_rng_seed(&rng, 13);
        snn_module *m = snn_model_new(&c, &rng);
        CHECK(m != NULL);
        if (!m) continue;
        snn_module_train(m, false);
        snn_tensor *x = snn_tensor_new(SNN_SHAPE(2, 3, 8, 8), SNN_CPU);
        snn_tensor_normal_(x, &rng, 0.5f, 1.5f);
        float rate[2][64];
        int layers_seen[2] = {0, 0};
        snn_tensor *logits[2];
        for (int fusion = 0; fusion < 2; fusion++) {
            set_fusion(m, fusion);
            snn_step_begin();
            snn_no_grad_begin();
            snn_tensor *y = snn_module_forward(m, x);
            snn_no_grad_end();
            logits[fusion] = y ? owned_copy(y) : NULL;
            snn_module *layers[64];
            const char *names[64];
            const int n = snn_model_neuron_layers(m, layers, names, 64);
            for (int i = 0; i < n && i < 64; i++)
                rate[fusion][i] = snn_neuron_layer_firing_rate(layers[i]);
            layers_seen[fusion] = n;
            snn_step_end();
        }
        CHECK(logits[0] && logits[1] && same(logits[0], logits[1]));
        CHECK(layers_seen[0] == layers_seen[1] && layers_seen[0] > 10 && layers_seen[0] <= 64);
        for (int i = 0; i < layers_seen[0] && i < 64; i++)
            CHECK(rate[0][i] >= 0.0f && rate[0][i] == rate[1][i]);
        snn_tensor_free(logits[0]), snn_tensor_free(logits[1]), snn_tensor_free(x);
        snn_module_free(m);
    }
}

int main(void)
{
    RUN(test_same_bits_as_separate_ops);
    RUN(test_repeat_same_bits_as_separate_ops);
    RUN(test_refused_arguments);
    RUN(test_residual_op);
    RUN(test_models_same_step);
    RUN(test_models_same_eval);
    return test_finish();
}
