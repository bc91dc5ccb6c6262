/*
 * test_model_plan.c - the execution plan a model owns (nn/plan.h): its options, the fusion
 * rules (nn/fusion_rules.c) and snn_model_explain (nn/plan.c), on the CPU:
 *
 *   1. the default options follow the kernel set (fast: fuse and pack_spikes on; reference:
 *      both off; CUDA: on), a model's options are its own (set, read back, NULL for the
 *      defaults, two models apart), and every module of the model's tree points to its plan;
 *   2. the options decide what runs: in one training step of a small ResNet-18, fuse on records
 *      the fused batch-norm -> neuron node for every neuron but the stem's and fuse off none,
 *      and pack_spikes on keeps spikes as bits and off as floats;
 *   3. snn_model_explain on a traced forward names each layer by its dotted path, the op and
 *      kernel it ran and the rule that fused it: the CNN and the ResNet in training, the ResNet
 *      in evaluation (conv -> bn and + -> neuron), with fuse off no rule; a trace holds one
 *      forward; without a trace it says how to make one; bad arguments are refused, naming them.
 * Run: ctest --test-dir build -R model_plan
 */
#include <string.h>

#include "snn.h"
#include "nn/nn_internal.h"
#include "test.h"

/* The explain output of `model` as text (static storage, up to 64 KB). */
static const char *explain_text(snn_module *model)
{
    static char text[65536];
    text[0] = '\0';
    FILE *f = tmpfile();
    CHECK(f != NULL);
    if (!f) return text;
    CHECK_OK(snn_model_explain(model, f));
    rewind(f);
    const size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    fclose(f);
    return text;
}

/* Whether every module under m points to `plan`. */
static bool tree_points_to(const snn_module *m, const struct snn_plan *plan)
{
    if (m->plan != plan) return false;
    for (int i = 0; i < m->n_children; i++)
        if (!tree_points_to(m->children[i], plan)) return false;
    return true;
}

static snn_module *small_resnet(uint64_t seed)
{
    snn_model_config c = snn_model_config_default(SNN_MODEL_RESNET18);
    c.width_base = 4, c.time_steps = 2, c.height = c.width = 8;
    snn_rng rng;
    snn_rng_seed(&rng, seed);
    return snn_model_new(&c, &rng);
}

/* One forward of `m` on a random batch of 2 images (training with a tape, or evaluation
 * without), traced when `trace`; the loss's backward in training. Returns the number of tape
 * nodes of op `op` (training) or 0. *packed: neuron layers whose spikes were bits at the end of
 * the forward. */
static int run_step(snn_module *m, bool training, bool trace, const char *op, int *packed)
{
    const snn_model_config *c = snn_model_config_of(m);
    snn_rng rng;
    snn_rng_seed(&rng, 7);
    snn_tensor *x = snn_tensor_new(SNN_SHAPE(2, c->in_channels, c->height, c->width), SNN_CPU);
    snn_tensor_normal_(x, &rng, 0.5f, 1.0f);
    const float labels[2] = {3, 1};
    snn_module_train(m, training);
    if (trace) CHECK_OK(snn_model_trace_plan(m));
    if (!training) snn_no_grad_begin();
    CHECK_OK(snn_step_begin());
    if (training) snn_module_zero_grad(m);
    snn_tensor *logits = snn_module_forward(m, x);
    CHECK(logits != NULL);
    int nodes = 0;
    if (packed) {
        snn_module *layers[64];
        const char *names[64];
        const int n = snn_model_neuron_layers(m, layers, names, 64);
        *packed = 0;
        for (int l = 0; l < n; l++) {
            const snn_tensor *s = snn_neuron_layer_last_spikes(layers[l]);
            *packed += s && s->spike_bits && !s->data;
        }
    }
    if (logits && training) {
        snn_tensor *loss = snn_cross_entropy(logits, snn_from_host(SNN_SHAPE(2), labels, SNN_CPU));
        for (const snn_node *node = loss ? loss->grad_fn : NULL; node; node = node->prev)
            nodes += strcmp(node->op, op) == 0;
        CHECK(loss && snn_backward(loss) == SNN_OK);
    }
    snn_step_end();
    if (!training) snn_no_grad_end();
    snn_tensor_free(x);
    return nodes;
}

/* ---- 1. options ---------------------------------------------------------------------------- */

static void test_defaults_and_ownership(void)
{
    const snn_kernel_set before = snn_get_kernels();
    CHECK_OK(snn_set_kernels(SNN_KERNELS_FAST));
    snn_model_options o = snn_model_options_default(SNN_CPU);
    CHECK(o.fuse && o.pack_spikes && !o.keep_bf16);
    o = snn_model_options_default(SNN_CUDA);
    CHECK(o.fuse && o.pack_spikes && !o.keep_bf16); /* a trade the program asks for */
    CHECK_OK(snn_set_kernels(SNN_KERNELS_REF));
    o = snn_model_options_default(SNN_CPU);
    CHECK(!o.fuse && !o.pack_spikes);
    o = snn_model_options_default(SNN_CUDA); /* the kernel set is the CPU's */
    CHECK(o.fuse && o.pack_spikes);

    snn_module *a = small_resnet(1), *b = small_resnet(1);
    CHECK(a && b);
    if (!a || !b) return;
    /* unset, a model follows the kernel set of the moment */
    o = snn_model_options_of(a);
    CHECK(!o.fuse && !o.pack_spikes);
    CHECK_OK(snn_set_kernels(SNN_KERNELS_FAST));
    o = snn_model_options_of(a);
    CHECK(o.fuse && o.pack_spikes);
    /* set: the model's own, whatever the kernel set, and not the other model's */
    const snn_model_options floats = {.fuse = true, .pack_spikes = false};
    CHECK_OK(snn_model_set_options(a, &floats));
    CHECK_OK(snn_set_kernels(SNN_KERNELS_REF));
    o = snn_model_options_of(a);
    CHECK(o.fuse && !o.pack_spikes);
    o = snn_model_options_of(b);
    CHECK(!o.fuse && !o.pack_spikes);
    CHECK_OK(snn_set_kernels(SNN_KERNELS_FAST));
    CHECK_OK(snn_model_set_options(a, NULL)); /* back to the defaults */
    o = snn_model_options_of(a);
    CHECK(o.fuse && o.pack_spikes);
    /* every module of the tree reads the model's plan, and only its own model's */
    CHECK(a->plan != NULL && b->plan != NULL && a->plan != b->plan);
    CHECK(tree_points_to(a, a->plan) && tree_points_to(b, b->plan));
    /* a module outside any model runs with the defaults; only models take options */
    snn_module *seq = snn_sequential_new();
    CHECK(seq && seq->plan == NULL);
    o = snn_model_options_of(seq);
    CHECK(o.fuse && o.pack_spikes);
    CHECK(snn_model_set_options(seq, &floats) == SNN_ERR_ARGUMENT);
    CHECK(strstr(snn_last_error(), "snn_model_set_options") &&
          strstr(snn_last_error(), "'model'") && strstr(snn_last_error(), "Sequential"));
    CHECK(snn_model_set_options(NULL, &floats) == SNN_ERR_ARGUMENT);
    CHECK(snn_model_trace_plan(seq) == SNN_ERR_ARGUMENT);
    CHECK(snn_model_explain(seq, stdout) == SNN_ERR_ARGUMENT);
    CHECK(snn_model_explain(a, NULL) == SNN_ERR_ARGUMENT && strstr(snn_last_error(), "'out'"));
    snn_clear_error();
    snn_module_free(seq);
    snn_module_free(a), snn_module_free(b);
    CHECK_OK(snn_set_kernels(before));
}

/* ---- 2. what the options change ------------------------------------------------------------ */

static void test_options_decide_what_runs(void)
{
    snn_module *m = small_resnet(2);
    CHECK(m != NULL);
    if (!m) return;
    const snn_model_options cases[3] = {{true, true, false}, {false, true, false}, {true, false, false}};
    for (int k = 0; k < 3; k++) {
        CHECK_OK(snn_model_set_options(m, &cases[k]));
        int packed = -1;
        const int fused = run_step(m, true, false, "snn_batchnorm_neuron", &packed);
        const int shortcut = run_step(m, true, false, "snn_batchnorm_neuron_bn_residual", NULL);
        /* every neuron but the stem's follows a training-mode batch-norm; the three
         * downsampling blocks' tails make their shortcut's batch-norm output too */
        CHECK(fused == (cases[k].fuse ? 13 : 0) && shortcut == (cases[k].fuse ? 3 : 0));
        /* all but the last block's output, which feeds the pool, not a conv */
        CHECK(packed == (cases[k].pack_spikes ? 16 : 0));
    }
    snn_module_free(m);
}

/* ---- 3. explain ---------------------------------------------------------------------------- */

static void test_explain_cnn_training(void)
{
    snn_model_config c = snn_model_config_default(SNN_MODEL_SPIKING_CNN);
    c.width_base = 4, c.hidden = 8, c.time_steps = 2;
    snn_rng rng;
    snn_rng_seed(&rng, 3);
    snn_module *m = snn_model_new(&c, &rng);
    CHECK(m != NULL);
    if (!m) return;
    /* without a trace: the options, the rules, and how to trace */
    const char *text = explain_text(m);
    CHECK(strstr(text, "no forward traced") && strstr(text, "snn_model_trace_plan"));
    CHECK(strstr(text, "bn -> neuron (training)") && strstr(text, "fuse on"));
    run_step(m, true, true, "", NULL);
    text = explain_text(m);
    if (!strstr(text, "bn2 -> sn2")) fprintf(stderr, "%s", text);
    CHECK(strstr(text, "training, a tape, on cpu with the fast kernels"));
    CHECK(strstr(text, "conv1 ") && strstr(text, "Conv2d 3x3, stride 1"));
    CHECK(strstr(text, "im2col + blocked SGEMM"));
    CHECK(strstr(text, "[2, 1, 28, 28] -> [2, 4, 28, 28]"));  /* conv1 runs once on N images */
    /* its batch-norm too, repeated over T for the neurons: the rule that reads the one output
     * at each step (bn -> neuron (repeated stem)) wants a one-pass backward, which the CPU has
     * not (its CUDA side: tests/test_cuda_bn_neuron.c) */
    char sn1[128]; /* the layer column is 38 wide */
    snprintf(sn1, sizeof sn1, "%-38s [2, 2, 4, 28, 28] -> [2, 2, 4, 28, 28]", "sn1");
    CHECK(strstr(text, sn1));
    CHECK(!strstr(text, "fused: snn_batchnorm_neuron_repeat"));
    /* conv2's batch-norm and neuron ran as one op, by its rule */
    CHECK(strstr(text, "bn2 -> sn2") && strstr(text, "fused: snn_batchnorm_neuron"));
    CHECK(strstr(text, "rule \"bn -> neuron (training)\""));
    CHECK(strstr(text, "fc2 ") && strstr(text, "pool2 ") && strstr(text, "flatten "));
    CHECK(strstr(text, "1. 0 times, 2. 1 time, 3. 0 times, 4. 0 times, 5. 0 times"));
    /* the trace held one forward: an untraced step leaves it as it was */
    run_step(m, true, false, "", NULL);
    CHECK(!m->plan->tracing && strcmp(explain_text(m), text) == 0);
    snn_module_free(m);
}

static void test_explain_resnet(void)
{
    snn_module *m = small_resnet(4);
    CHECK(m != NULL);
    if (!m) return;
    run_step(m, true, true, "", NULL);
    const char *text = explain_text(m);
    /* training: bn -> + -> neuron fuses in the plain blocks' tails */
    CHECK(strstr(text, "layer1.0.conv1 ") && strstr(text, "layer1.0.bn1 -> sn1"));
    CHECK(strstr(text, "layer1.0.bn2 -> + -> sn2") &&
          strstr(text, "rule \"bn -> + -> neuron (training)\""));
    /* a block that downsamples: its shortcut conv alone, then one op for the tail and the
     * shortcut's batch-norm, whose output the neurons make as they load the conv's */
    if (!strstr(text, "layer2.0.bn2 -> + downsample.1 -> sn2")) fprintf(stderr, "%s", text);
    CHECK(strstr(text, "layer2.0.downsample.0 ") && !strstr(text, "layer2.0.downsample.1 "));
    CHECK(strstr(text, "layer2.0.bn2 -> + downsample.1 -> sn2") &&
          strstr(text, "layer4.0.bn2 -> + downsample.1 -> sn2") &&
          strstr(text, "fused: snn_batchnorm_neuron_bn_residual") &&
          strstr(text, "batch-norm in the same pass, and the shortcut's as it loads"));
    CHECK(strstr(text, "1. 0 times, 2. 8 times, 3. 0 times, 4. 8 times, 5. 0 times"));
    /* evaluation: conv -> bn everywhere, and the sum fused into the block's last neuron */
    run_step(m, false, true, "", NULL);
    text = explain_text(m);
    if (!strstr(text, "layer1.0.+ -> sn2")) fprintf(stderr, "%s", text);
    CHECK(strstr(text, "evaluation, no tape"));
    CHECK(strstr(text, "conv1 -> bn1") && strstr(text, "layer4.1.conv2 -> bn2"));
    CHECK(strstr(text, "fused: snn_conv2d_batchnorm_eval"));
    CHECK(strstr(text, "layer1.0.+ -> sn2") && strstr(text, "rule \"+ -> neuron (no tape)\""));
    /* fuse off: every layer on its own, the residual sums too */
    const snn_model_options plain = {.fuse = false, .pack_spikes = true};
    CHECK_OK(snn_model_set_options(m, &plain));
    run_step(m, true, true, "", NULL);
    text = explain_text(m);
    CHECK(!strstr(text, "fused:") && !strstr(text, "rule \""));
    CHECK(strstr(text, "fuse off, pack_spikes on, keep_bf16 off (set by snn_model_set_options)"));
    CHECK(strstr(text, "layer1.0.bn2 ") && strstr(text, "layer1.0.+ ") &&
          strstr(text, "residual sum"));
    CHECK(strstr(text, "1. 0 times, 2. 0 times, 3. 0 times, 4. 0 times, 5. 0 times"));
    snn_module_free(m);
}

static void test_rules_listed(void)
{
    FILE *f = tmpfile();
    CHECK(f != NULL);
    if (!f) return;
    snn_fusion_rules_print(f);
    rewind(f);
    char text[8192];
    const size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    fclose(f);
    CHECK(snn_fusion_rule_count == 5);
    for (int r = 0; r < snn_fusion_rule_count; r++) CHECK(strstr(text, snn_fusion_rules[r].name));
    CHECK(strstr(text, "Conv2d -> BatchNorm2d") &&
          strstr(text, "BatchNorm2d -> (+ shortcut) -> NeuronLayer") &&
          strstr(text, "sync-BN off"));
}

int main(void)
{
    RUN(test_defaults_and_ownership);
    RUN(test_options_decide_what_runs);
    RUN(test_explain_cnn_training);
    RUN(test_explain_resnet);
    RUN(test_rules_listed);
    return test_finish();
}
