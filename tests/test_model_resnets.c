/*
 * test_model_resnets.c - the ResNet builders of nn/model_resnet.c: ResNet-18, -34, -50 and their
 * SEW variants.
 *
 *   - parameter counts at width 64 with the CIFAR stem and 10 classes equal torchvision's
 *     resnet18/34/50 with num_classes = 10 less the stem difference (7x7 -> 3x3 conv:
 *     3 x 64 x (49 - 9) = 7680): 11,173,962, 21,282,122 and 23,520,842; SEW adds none;
 *   - the parameter names of a bottleneck block follow torchvision (conv1..conv3, bn1..bn3,
 *     downsample.0/1), the shapes of its convs (1x1, 3x3 with the stride, 1x1 to 4x wider);
 *   - neuron layers: 1 + 2 per basic block (+1 per SEW downsample), 1 + 3 per bottleneck;
 *   - a forward and backward at width 4 on 8x8 images, T = 2: logits (N, classes), finite, every
 *     trainable parameter reached by the gradient;
 *   - names round-trip through snn_model_kind_name / snn_model_kind_parse (checkpoints store it).
 * The golden check against PyTorch is test_model_resnet50.c. Run: ctest -R model_resnets
 */
#include <math.h>
#include <string.h>

#include "snn.h"
#include "test.h"

typedef struct kind_case {
    snn_model_kind kind;
    const char *name;
    int64_t params_w64;      /* trainable parameters at width 64, 3x32x32, 10 classes */
    int neurons;             /* neuron layers */
} kind_case;

static const kind_case kinds[] = {
    {SNN_MODEL_RESNET18, "resnet18", 11173962, 17},
    {SNN_MODEL_SEW_RESNET18, "sew-resnet18", 11173962, 20},
    {SNN_MODEL_RESNET34, "resnet34", 21282122, 33},
    {SNN_MODEL_SEW_RESNET34, "sew-resnet34", 21282122, 36},
    {SNN_MODEL_RESNET50, "resnet50", 23520842, 49},
    {SNN_MODEL_SEW_RESNET50, "sew-resnet50", 23520842, 53},
};

static void test_parameter_counts(void)
{
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        snn_model_config cfg = snn_model_config_default(kinds[i].kind);
        snn_rng rng;
        snn_rng_seed(&rng, 1);
        snn_module *m = snn_model_new(&cfg, &rng);
        CHECK(m != NULL);
        if (!m) continue;
        const int64_t n = snn_module_num_parameters(m);
        if (n != kinds[i].params_w64)
            fprintf(stderr, "  %s: %lld parameters, want %lld\n", kinds[i].name, (long long)n,
                    (long long)kinds[i].params_w64);
        CHECK(n == kinds[i].params_w64);
        snn_module *layers[64];
        const char *names[64];
        CHECK(snn_model_neuron_layers(m, layers, names, 64) == kinds[i].neurons);
        snn_module_free(m);
    }
}

/* The shape of a named parameter, or ndim 0 when missing. */
static snn_shape param_shape(snn_module *m, const char *name)
{
    snn_param_list list;
    snn_shape shape = {0};
    if (snn_module_parameters(m, &list) != SNN_OK) return shape;
    for (int i = 0; i < list.count; i++)
        if (!strcmp(list.items[i].name, name)) shape = list.items[i].tensor->shape;
    snn_param_list_free(&list);
    return shape;
}

static bool shape_is(snn_shape s, int d0, int d1, int d2, int d3)
{
    return s.ndim == 4 && s.dim[0] == d0 && s.dim[1] == d1 && s.dim[2] == d2 && s.dim[3] == d3;
}

static void test_bottleneck_layout(void)
{
    snn_model_config cfg = snn_model_config_default(SNN_MODEL_RESNET50);
    cfg.width_base = 4;
    snn_rng rng;
    snn_rng_seed(&rng, 2);
    snn_module *m = snn_model_new(&cfg, &rng);
    CHECK(m != NULL);
    if (!m) return;
    /* layer1.0: 4 -> 4 (1x1) -> 4 (3x3) -> 16 (1x1), shortcut 4 -> 16 (width changes) */
    CHECK(shape_is(param_shape(m, "layer1.0.conv1.weight"), 4, 4, 1, 1));
    CHECK(shape_is(param_shape(m, "layer1.0.conv2.weight"), 4, 4, 3, 3));
    CHECK(shape_is(param_shape(m, "layer1.0.conv3.weight"), 16, 4, 1, 1));
    CHECK(shape_is(param_shape(m, "layer1.0.downsample.0.weight"), 16, 4, 1, 1));
    CHECK(param_shape(m, "layer1.1.downsample.0.weight").ndim == 0);
    /* layer3.5 exists (6 blocks), layer4.2 is the last block: 128 -> 32 -> 32 -> 128 */
    CHECK(shape_is(param_shape(m, "layer3.5.conv3.weight"), 64, 16, 1, 1));
    CHECK(shape_is(param_shape(m, "layer4.2.conv1.weight"), 32, 128, 1, 1));
    CHECK(param_shape(m, "layer4.3.conv1.weight").ndim == 0);
    snn_shape fc = param_shape(m, "fc.weight");
    CHECK(fc.ndim == 2 && fc.dim[0] == 10 && fc.dim[1] == 128);
    snn_shape bn = param_shape(m, "layer2.0.bn3.bias");
    CHECK(bn.ndim == 1 && bn.dim[0] == 32);
    snn_module_free(m);
}

static void test_forward_backward(void)
{
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        snn_model_config cfg = snn_model_config_default(kinds[i].kind);
        cfg.width_base = 4, cfg.height = cfg.width = 8, cfg.time_steps = 2;
        snn_rng rng;
        snn_rng_seed(&rng, 3);
        snn_module *m = snn_model_new(&cfg, &rng);
        CHECK(m != NULL);
        if (!m) continue;
        snn_tensor *x = snn_tensor_new(SNN_SHAPE(2, 3, 8, 8), SNN_CPU);
        snn_tensor_normal_(x, &rng, 0.0f, 2.0f);
        const float labels_host[2] = {1, 7};
        snn_step_begin();
        snn_module_zero_grad(m);
        snn_tensor *logits = snn_module_forward(m, x);
        CHECK(logits && logits->shape.ndim == 2 && logits->shape.dim[0] == 2 &&
              logits->shape.dim[1] == 10);
        snn_tensor *labels = snn_from_host(SNN_SHAPE(2), labels_host, SNN_CPU);
        snn_tensor *loss = logits ? snn_cross_entropy(logits, labels) : NULL;
        CHECK(loss && isfinite(snn_tensor_item(loss)));
        if (loss) {
            CHECK_OK(snn_backward(loss));
            snn_param_list list;
            CHECK_OK(snn_module_parameters(m, &list));
            int without = 0;
            for (int p = 0; p < list.count; p++)
                without += list.items[p].trainable && !list.items[p].tensor->grad;
            if (without) fprintf(stderr, "  %s: %d parameters without a gradient\n", kinds[i].name, without);
            CHECK(without == 0);
            snn_param_list_free(&list);
        }
        snn_step_end();
        snn_tensor_free(x);
        snn_module_free(m);
    }
}

static void test_names(void)
{
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        snn_model_kind k = SNN_MODEL_SPIKING_CNN;
        CHECK(!strcmp(snn_model_kind_name(kinds[i].kind), kinds[i].name));
        CHECK_OK(snn_model_kind_parse(kinds[i].name, &k));
        CHECK(k == kinds[i].kind);
    }
    snn_model_kind k;
    CHECK(snn_model_kind_parse("resnet101", &k) == SNN_ERR_ARGUMENT);
    snn_clear_error();
}

int main(void)
{
    snn_set_num_threads(2);
    RUN(test_parameter_counts);
    RUN(test_bottleneck_layout);
    RUN(test_forward_backward);
    RUN(test_names);
    return test_finish();
}
