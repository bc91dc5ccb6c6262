/*
 * test_bn_neuron_carry.c - the carrying variants of the fused batch-norm -> neuron op
 * (neurons/bn_neuron_carry.c): snn_batchnorm_neuron_carry (SLTT's constant state, which
 * advances in the op's backward) and snn_batchnorm_neuron_state (the time checkpoints' differentiable
 * state) against the same ops ending in snn_neuron_multistep_carry / _state, bit for bit, the
 * state and dL/dV_in included (the state op also with x kept as bf16, as a model's conv output
 * may be); the carry op's deferred state and its refusals; then a CNN whose layers carry
 * their state, with fusion on and off: the same step.
 * Run: ctest -R bn_neuron_carry
 */
#include "bn_neuron_check.h"
#include "tensor/arena.h"
#include "tensor/error.h"

/* What a carrying path leaves: spikes of each call, the state, and the leaves' gradients. */
typedef struct carry_result {
    snn_tensor *spikes[2];   /* the two calls' (carry) or the one call's (state) */
    snn_tensor *v_state;     /* OWNED: the state left (carry); v_out (state) */
    snn_tensor *x, *gamma, *beta, *residual, *v_in;
    snn_tensor *running_mean, *running_var;
} carry_result;

/* Two calls of the carry op (fused) or of batch-norm -> add -> snn_neuron_multistep_carry, on
 * one OWNED state started at V_reset, each call's L = sum(S * R) backpropagated at once (as
 * SLTT does). The second call starts from the state the first left. */
static carry_result run_carry(bool fused, snn_shape shape, bool with_residual,
                              const snn_neuron_config *cfg)
{
    const int64_t C = shape.dim[2], per_step = snn_shape_numel(shape) / shape.dim[0];
    carry_result r = {0};
    r.gamma = uniform(SNN_SHAPE(C), 0.5f, 1.5f, 42, true);
    r.beta = uniform(SNN_SHAPE(C), -0.3f, 0.6f, 43, true);
    r.running_mean = owned_copy(uniform(SNN_SHAPE(C), -0.2f, 0.2f, 45, false));
    r.running_var = owned_copy(uniform(SNN_SHAPE(C), 0.5f, 2.0f, 46, false));
    r.v_state = snn_tensor_new(SNN_SHAPE(per_step), SNN_CPU);
    CHECK_OK(snn_tensor_fill(r.v_state, cfg->reset == SNN_RESET_SOFT ? 0.0f : cfg->v_reset));
    for (int call = 0; call < 2; call++) {
        r.x = uniform(shape, -1.5f, 2.5f, 50 + (uint64_t)call, true);
        r.residual = with_residual ? uniform(shape, 0.0f, 1.0f, 52 + (uint64_t)call, true) : NULL;
        if (fused) {
            r.spikes[call] = snn_batchnorm_neuron_carry(r.x, r.gamma, r.beta, r.running_mean,
                                                        r.running_var, 0.1f, 1e-5f, r.residual,
                                                        cfg, r.v_state, NULL);
        } else {
            snn_tensor *y = snn_batchnorm2d(r.x, r.gamma, r.beta, r.running_mean, r.running_var,
                                            true, 0.1f, 1e-5f);
            if (y && r.residual) y = snn_add_into(y, r.residual);
            r.spikes[call] = y ? snn_neuron_multistep_carry(y, cfg, NULL, r.v_state, NULL, NULL)
                               : NULL;
        }
        snn_tensor *R = uniform(shape, -1.0f, 1.0f, 54 + (uint64_t)call, false);
        if (r.spikes[call]) CHECK_OK(snn_backward(snn_sum_all(snn_mul(r.spikes[call], R))));
    }
    return r;
}

/* x as a conv output kept as bf16 would be: from the step pool, rounded (its bits beside it);
 * `keep` gives its floats back once `op` has read them, so that backward reads the bits. */
static snn_tensor *bf16_input(snn_shape shape)
{
    const snn_tensor *values = uniform(shape, -1.5f, 2.5f, 61, false);
    snn_tensor *x = snn_step_pooled_tensor("test", shape, SNN_CPU);
    SNN_ASSERT(x && values);
    memcpy(x->data, values->data, (size_t)x->numel * sizeof(float));
    x->requires_grad = true;
    CHECK_OK(snn_values_round_bf16(x));
    return x;
}

/* One call of the state op (fused) or of batch-norm -> add -> snn_neuron_multistep_state from
 * a random V_in that requires grad; L = sum(S * R) and / or sum(V_out * R_v) (`seeds`: bit 0
 * the spikes', bit 1 the state's), so that either node may run alone or both. With `bf16`, x's
 * values are rounded to bf16, and the fused op's x is kept as bf16 after its forward (its
 * backward reads the bits: bn_part_backward in neurons/bn_neuron_carry.c, and the kernels'
 * x_bf16). */
static carry_result run_state(bool fused, snn_shape shape, bool with_residual,
                              const snn_neuron_config *cfg, int seeds, bool bf16)
{
    const int64_t C = shape.dim[2], per_step = snn_shape_numel(shape) / shape.dim[0];
    carry_result r = {0};
    r.x = bf16 ? bf16_input(shape) : uniform(shape, -1.5f, 2.5f, 61, true);
    r.gamma = uniform(SNN_SHAPE(C), 0.5f, 1.5f, 62, true);
    r.beta = uniform(SNN_SHAPE(C), -0.3f, 0.6f, 63, true);
    r.residual = with_residual ? uniform(shape, 0.0f, 1.0f, 64, true) : NULL;
    r.running_mean = owned_copy(uniform(SNN_SHAPE(C), -0.2f, 0.2f, 65, false));
    r.running_var = owned_copy(uniform(SNN_SHAPE(C), 0.5f, 2.0f, 66, false));
    r.v_in = uniform(SNN_SHAPE(per_step), -0.5f, 0.9f, 67, true);
    snn_tensor *v_out = NULL;
    if (fused) {
        r.spikes[0] = snn_batchnorm_neuron_state(r.x, r.gamma, r.beta, r.running_mean,
                                                 r.running_var, 0.1f, 1e-5f, r.residual, cfg,
                                                 r.v_in, &v_out, NULL);
        if (bf16) {
            CHECK_OK(snn_values_keep_bf16(r.x));
            CHECK(r.x->data == NULL && r.x->bf16 != NULL);
        }
    } else {
        snn_tensor *y = snn_batchnorm2d(r.x, r.gamma, r.beta, r.running_mean, r.running_var, true,
                                        0.1f, 1e-5f);
        if (y && r.residual) y = snn_add_into(y, r.residual);
        r.spikes[0] = y ? snn_neuron_multistep_state(y, cfg, NULL, r.v_in, NULL, &v_out, NULL,
                                                     NULL)
                        : NULL;
    }
    if (r.spikes[0] && v_out) {
        snn_tensor *R = uniform(shape, -1.0f, 1.0f, 68, false);
        snn_tensor *R_v = uniform(v_out->shape, -1.0f, 1.0f, 69, false);
        snn_tensor *from_s = snn_sum_all(snn_mul(r.spikes[0], R));
        snn_tensor *from_v = snn_sum_all(snn_mul(v_out, R_v));
        snn_tensor *loss = seeds == 3 ? snn_add(from_s, from_v) : seeds == 1 ? from_s : from_v;
        CHECK_OK(snn_backward(loss));
        r.v_state = owned_copy(v_out);
    }
    return r;
}

static void carry_result_free(carry_result *r)
{
    snn_tensor_free(r->v_state);
    snn_tensor_free(r->running_mean), snn_tensor_free(r->running_var);
}

/* The fused carrying ops equal the separate ops bit for bit on the fast CPU kernels: spikes,
 * the state left, running statistics, and the gradients of x, gamma, beta, the residual and
 * (state op) V_in; IF and LIF, with and without a residual, T = 1 and T = 3. */
static void test_carrying_same_bits_as_separate_ops(void)
{
    const snn_shape shapes[2] = {SNN_SHAPE(1, 2, 3, 4, 5), SNN_SHAPE(3, 2, 2, 15, 20)};
    snn_neuron_config cfgs[3];
    cfgs[0] = snn_neuron_config_default(SNN_NEURON_LIF);
    cfgs[0].surrogate = snn_surrogate_default(SNN_SURROGATE_ATAN);
    cfgs[1] = snn_neuron_config_default(SNN_NEURON_IF);
    cfgs[1].reset = SNN_RESET_SOFT;
    cfgs[2] = snn_neuron_config_default(SNN_NEURON_LIF);
    cfgs[2].v_reset = -0.5f;
    int cases = 0;
    for (int s = 0; s < 2; s++)
        for (int c = 0; c < 3; c++)
            for (int res = 0; res < 2; res++) {
                snn_step_begin();
                carry_result a = run_carry(false, shapes[s], res, &cfgs[c]);
                carry_result b = run_carry(true, shapes[s], res, &cfgs[c]);
                bool ok = a.spikes[1] && b.spikes[1] && same(a.spikes[0], b.spikes[0]) &&
                          same(a.spikes[1], b.spikes[1]) && same(a.v_state, b.v_state) &&
                          BN_SIDE_SAME(a, b, res);
                if (!ok)
                    fprintf(stderr, "  carry: shape %d, config %d, residual %d: the fused op "
                            "differs from the separate ops\n", s, c, res);
                CHECK(ok);
                /* cases that can fail: spikes in the second call, a state not at V_reset */
                if (b.spikes[1]) {
                    const double rate = mean_of(b.spikes[1]);
                    CHECK(rate > 0.005 && rate < 0.98);
                    CHECK(mean_of(b.v_state) != 0.0 && b.x->grad && mean_of(b.x->grad) != 0.0);
                }
                carry_result_free(&a), carry_result_free(&b);
                snn_step_end();
                for (int seeds = 1; seeds <= 4; seeds++) { /* 4: seeds 3, x kept as bf16 */
                    snn_step_begin();
                    const bool bf16 = seeds == 4;
                    a = run_state(false, shapes[s], res, &cfgs[c], bf16 ? 3 : seeds, bf16);
                    b = run_state(true, shapes[s], res, &cfgs[c], bf16 ? 3 : seeds, bf16);
                    ok = a.v_state && b.v_state && same(a.spikes[0], b.spikes[0]) &&
                         same(a.v_state, b.v_state) && grads_same(a.v_in, b.v_in) &&
                         BN_SIDE_SAME(a, b, res);
                    if (!ok)
                        fprintf(stderr, "  state: shape %d, config %d, residual %d, seeds %d: the "
                                "fused op differs from the separate ops\n", s, c, res, seeds);
                    CHECK(ok);
                    if (b.v_in->grad) CHECK(mean_of(b.v_in->grad) != 0.0);
                    carry_result_free(&a), carry_result_free(&b);
                    snn_step_end();
                }
                cases++;
            }
    CHECK(cases == 12);
    /* the state is checked as the carrying neuron op checks it, naming the op and argument */
    snn_step_begin();
    const snn_shape shape = SNN_SHAPE(2, 2, 3, 4, 4);
    snn_tensor *x = uniform(shape, -1, 1, 1, true);
    snn_tensor *g = uniform(SNN_SHAPE(3), 0.5f, 1.5f, 2, true);
    snn_tensor *b = uniform(SNN_SHAPE(3), -0.5f, 0.5f, 3, true);
    snn_tensor *rm = uniform(SNN_SHAPE(3), 0, 0, 4, false);
    snn_tensor *rv = uniform(SNN_SHAPE(3), 1, 1, 5, false);
    snn_tensor *short_state = uniform(SNN_SHAPE(2 * 3 * 4 * 3), 0, 0, 6, false);
    snn_neuron_config lif = snn_neuron_config_default(SNN_NEURON_LIF);
    CHECK(snn_batchnorm_neuron_carry(x, g, b, rm, rv, 0.1f, 1e-5f, NULL, &lif, short_state,
                                     NULL) == NULL);
    CHECK(strstr(snn_last_error(), "snn_batchnorm_neuron_carry") &&
          strstr(snn_last_error(), "'v_state'"));
    snn_clear_error();
    snn_tensor *v_out = NULL;
    CHECK(snn_batchnorm_neuron_state(x, g, b, rm, rv, 0.1f, 1e-5f, NULL, &lif, short_state,
                                     &v_out, NULL) == NULL && v_out == NULL);
    CHECK(strstr(snn_last_error(), "snn_batchnorm_neuron_state") &&
          strstr(snn_last_error(), "'v_in'"));
    snn_clear_error();
    snn_step_end();
}

/* With a tape the carry op's state advances in its backward, not its forward: after the
 * forward the state is the one that entered and the op is counted as pending; after the
 * backward it is the state a forward without a tape leaves, and the count is back. A call on
 * a pending state is refused; a backward whose state was forgotten (reset) fails. */
static void test_carry_state_advances_in_backward(void)
{
    const snn_shape shape = SNN_SHAPE(2, 2, 3, 5, 4);
    const int64_t per_step = snn_shape_numel(shape) / shape.dim[0];
    snn_neuron_config lif = snn_neuron_config_default(SNN_NEURON_LIF);
    snn_tensor *v_taped = snn_tensor_new(SNN_SHAPE(per_step), SNN_CPU);
    snn_tensor *v_plain = snn_tensor_new(SNN_SHAPE(per_step), SNN_CPU);
    snn_step_begin();
    snn_tensor *stats[4]; /* running mean and variance of each run */
    for (int i = 0; i < 4; i++) stats[i] = owned_copy(uniform(SNN_SHAPE(3), 0.5f, 1.0f, 7, false));
    snn_tensor *x = uniform(shape, -1.0f, 2.5f, 8, true);
    snn_tensor *g = uniform(SNN_SHAPE(3), 0.5f, 1.5f, 9, true);
    snn_tensor *b = uniform(SNN_SHAPE(3), 0.0f, 0.6f, 10, true);
    snn_tensor *v_start = uniform(SNN_SHAPE(per_step), -0.3f, 0.8f, 11, false);
    CHECK_OK(snn_tensor_copy(v_taped, v_start));
    CHECK_OK(snn_tensor_copy(v_plain, v_start));
    snn_no_grad_begin();
    snn_tensor *s_plain = snn_batchnorm_neuron_carry(x, g, b, stats[0], stats[1], 0.1f, 1e-5f,
                                                     NULL, &lif, v_plain, NULL);
    snn_no_grad_end();
    const int pending = snn_batchnorm_neuron_carry_pending();
    snn_tensor *s_taped = snn_batchnorm_neuron_carry(x, g, b, stats[2], stats[3], 0.1f, 1e-5f,
                                                     NULL, &lif, v_taped, NULL);
    CHECK(s_plain && s_taped && same(s_plain, s_taped));
    CHECK(same(v_taped, v_start) && !same(v_plain, v_start));
    CHECK(snn_batchnorm_neuron_carry_pending() == pending + 1);
    /* a second call before that backward would start from the unadvanced state: refused */
    CHECK(snn_batchnorm_neuron_carry(x, g, b, stats[2], stats[3], 0.1f, 1e-5f, NULL, &lif,
                                     v_taped, NULL) == NULL);
    CHECK(snn_last_status() == SNN_ERR_STATE && strstr(snn_last_error(), "'v_state'"));
    snn_clear_error();
    if (s_taped) CHECK_OK(snn_backward(snn_sum_all(s_taped)));
    CHECK(same(v_taped, v_plain));
    CHECK(snn_batchnorm_neuron_carry_pending() == pending);
    snn_step_end();
    /* a state reset (forgotten) before the backward: the backward fails, naming why */
    snn_step_begin();
    x = uniform(shape, -1.0f, 2.5f, 8, true);
    g = uniform(SNN_SHAPE(3), 0.5f, 1.5f, 9, true);
    b = uniform(SNN_SHAPE(3), 0.0f, 0.6f, 10, true);
    s_taped = snn_batchnorm_neuron_carry(x, g, b, stats[2], stats[3], 0.1f, 1e-5f, NULL, &lif,
                                         v_taped, NULL);
    CHECK(s_taped && snn_batchnorm_neuron_carry_pending() == pending + 1);
    snn_batchnorm_neuron_carry_forget(v_taped);
    CHECK(snn_batchnorm_neuron_carry_pending() == pending);
    CHECK(s_taped && snn_backward(snn_sum_all(s_taped)) == SNN_ERR_STATE);
    CHECK(strstr(snn_last_error(), "reset or freed"));
    snn_clear_error();
    snn_step_end();
    snn_tensor_free(v_taped), snn_tensor_free(v_plain);
    for (int i = 0; i < 4; i++) snn_tensor_free(stats[i]);
}

/* A CNN whose neuron layers carry their state (SLTT's constant, time checkpoints'
 * differentiable), two training forwards (the second from the state the first left), each
 * backpropagated, with fusion on and off: the same losses, parameter gradients, running
 * statistics, carried states and (differentiable) dL/dV_in of every layer; the fused run records
 * the carrying variant's nodes. */
#define CARRY_LAYERS 8
typedef struct carry_step_result {
    snn_module *model;   /* owns the tensors of params */
    float loss[2];
    int fused_nodes;
    snn_param_list params;
    int layers;
    snn_tensor *state[CARRY_LAYERS], *dv_in[CARRY_LAYERS]; /* OWNED copies */
} carry_step_result;

static carry_step_result carry_steps(const snn_model_config *c, snn_state_carry mode, bool fusion)
{
    carry_step_result r = {0};
    snn_rng rng;
    snn_rng_seed(&rng, 9);
    snn_module *m = r.model = snn_model_new(c, &rng);
    CHECK(m != NULL);
    if (!m) return r;
    set_fusion(m, fusion);
    CHECK(snn_neuron_layers_set_carry(m, mode) > 0);
    snn_module *layers[CARRY_LAYERS];
    r.layers = snn_neuron_layers_collect(m, layers, CARRY_LAYERS);
    CHECK(r.layers > 0 && r.layers <= CARRY_LAYERS);
    snn_rng_seed(&rng, 5);
    snn_tensor *x = snn_tensor_new(SNN_SHAPE(3, c->in_channels, c->height, c->width), SNN_CPU);
    snn_tensor_normal_(x, &rng, 0.5f, 1.5f);
    const float labels_host[3] = {1, 0, 1};
    for (int call = 0; call < 2; call++) {
        snn_step_begin();
        snn_module_zero_grad(m);
        snn_tensor *logits = snn_module_forward(m, x);
        snn_tensor *labels = snn_from_host(SNN_SHAPE(3), labels_host, SNN_CPU);
        snn_tensor *loss = logits ? snn_cross_entropy(logits, labels) : NULL;
        CHECK(loss != NULL);
        if (loss) {
            /* the carry op's one node, the state op's spikes node */
            r.fused_nodes += count_nodes(loss, mode == SNN_CARRY_CONSTANT
                                                   ? "snn_batchnorm_neuron_carry"
                                                   : "snn_batchnorm_neuron (neurons)");
            CHECK_OK(snn_backward(loss));
            r.loss[call] = loss->data[0];
        }
        for (int l = 0; l < r.layers && l < CARRY_LAYERS && call == 1; l++) {
            const snn_neuron_carried st = snn_neuron_layer_carried(layers[l]);
            r.state[l] = st.v ? owned_copy(st.v) : NULL;
            r.dv_in[l] = st.v_in && st.v_in->grad ? owned_copy(st.v_in->grad) : NULL;
        }
        snn_step_end();
    }
    snn_tensor_free(x);
    CHECK_OK(snn_module_parameters(m, &r.params));
    return r;
}

static void test_models_carrying_same_step(void)
{
    snn_model_config c = snn_model_config_default(SNN_MODEL_SPIKING_CNN);
    c.width_base = 4, c.time_steps = 2, c.hidden = 16, c.classes = 2;
    c.height = c.width = 8;
    const snn_state_carry modes[2] = {SNN_CARRY_CONSTANT, SNN_CARRY_DIFFERENTIABLE};
    for (int k = 0; k < 2; k++) {
        carry_step_result off = carry_steps(&c, modes[k], false);
        carry_step_result on = carry_steps(&c, modes[k], true);
        CHECK(off.fused_nodes == 0 && on.fused_nodes == 2); /* conv2's neurons, each call */
        CHECK(off.loss[0] == on.loss[0] && off.loss[1] == on.loss[1]);
        int differ = 0;
        CHECK(off.params.count == on.params.count);
        for (int i = 0; i < off.params.count && i < on.params.count; i++) {
            const snn_tensor *p = off.params.items[i].tensor, *q = on.params.items[i].tensor;
            if (!same(p, q) || (p->grad != NULL) != (q->grad != NULL) ||
                (p->grad && !same(p->grad, q->grad)))
                differ++;
        }
        for (int l = 0; l < off.layers && l < CARRY_LAYERS; l++) {
            differ += !same(off.state[l], on.state[l]) || !same(off.dv_in[l], on.dv_in[l]);
            /* a differentiable layer's entering state got a gradient */
            if (modes[k] == SNN_CARRY_DIFFERENTIABLE) CHECK(on.dv_in[l] != NULL);
            snn_tensor_free(off.state[l]), snn_tensor_free(on.state[l]);
            snn_tensor_free(off.dv_in[l]), snn_tensor_free(on.dv_in[l]);
        }
        if (differ) fprintf(stderr, "  carry mode %d: %d tensors differ with fusion on\n",
                            (int)modes[k], differ);
        CHECK(differ == 0);
        snn_param_list_free(&off.params), snn_param_list_free(&on.params);
        snn_module_free(off.model), snn_module_free(on.model);
    }
}

int main(void)
{
    RUN(test_carrying_same_bits_as_separate_ops);
    RUN(test_carry_state_advances_in_backward);
    RUN(test_models_carrying_same_step);
    return test_finish();
}
