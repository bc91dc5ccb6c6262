#define _DEFAULT_SOURCE /* mkdtemp */
/*
 * test_checkpoint_hostile.c - checkpoints written by someone else, and the regressions of what
 * fuzzing the checkpoint reader turned up (fuzz/fuzz_safetensors.c, .ci/fuzz.sh):
 *
 *   - a model checkpoint whose metadata describe a huge model (width 2^30, 30000, hidden 2e9,
 *     a 2^30 x 2^30 input): snn_checkpoint_load_model used to compute the CNN's flattened size
 *     in int (signed overflow, undefined behaviour) and to allocate the model before reading a
 *     tensor (a 4 KB file asked for 32 GB or 64 GB). It must now refuse each file with
 *     SNN_ERR_FORMAT naming it, allocating next to nothing;
 *   - a model that fits the configuration limits but not the file is refused the same way, with
 *     the inner message quoted whole (wrapping snn_last_error() into a new message garbled it:
 *     vsnprintf read the buffer it was writing);
 *   - a shape whose bytes wrap a size_t (2^31 x 2^31 floats = 2^64 bytes) used to allocate a
 *     wrapped size and fill 2^62 floats into it; snn_tensor_new and snn_empty refuse it;
 *   - the model-size count that makes the refusal possible (snn_model_param_floats, computed
 *     from the configuration) agrees with the models the builders make, for every kind.
 * Run: ctest --test-dir build -R checkpoint_hostile --output-on-failure
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "nn/model_internal.h"
#include "snn.h"
#include "test.h"

static char dir[64];

/* A checkpoint holding no tensor, only the metadata of `config` (which need not be buildable). */
static void write_config_only(const char *path, const snn_model_config *config)
{
    snn_metadata meta = {0};
    CHECK_OK(snn_model_config_to_metadata(config, &meta));
    size_t len = 0;
    char *json = snn_metadata_to_json(&meta, &len);
    CHECK(json != NULL);
    snn_param_list none = {NULL, 0};
    CHECK_OK(snn_safetensors_save(path, &none, json));
    snn_free(json, len + 1, SNN_CPU);
}

/* snn_checkpoint_load_model must refuse the file with SNN_ERR_FORMAT, naming it, and take no
 * more than a little host memory on the way. */
static void check_refused(const char *name, const snn_model_config *config, const char *why)
{
    char path[128];
    snprintf(path, sizeof path, "%s/%s.safetensors", dir, name);
    write_config_only(path, config);
    size_t peak_before = snn_peak_bytes(SNN_CPU), live_before = snn_live_bytes(SNN_CPU);
    snn_module *model = snn_checkpoint_load_model(path, SNN_CPU, NULL);
    CHECK(model == NULL);
    snn_module_free(model);
    CHECK(snn_last_status() == SNN_ERR_FORMAT);
    CHECK(strstr(snn_last_error(), path) != NULL);
    if (!strstr(snn_last_error(), why)) {
        fprintf(stderr, "  %s: message lacks '%s': %s\n", name, why, snn_last_error());
        CHECK(0);
    }
    /* the high-water mark moved by less than 1 MiB above what was live before */
    size_t peak = snn_peak_bytes(SNN_CPU);
    CHECK(peak <= peak_before || peak - live_before < (1u << 20));
    snn_clear_error();
    unlink(path);
}

static snn_model_config tiny_cnn(void)
{
    snn_model_config c = snn_model_config_default(SNN_MODEL_SPIKING_CNN);
    c.height = c.width = 8;
    c.width_base = 2;
    c.hidden = 4;
    c.classes = 3;
    return c;
}

static void test_huge_models_are_refused(void)
{
    snn_model_config c = tiny_cnn();
    c.width_base = 1 << 30;            /* was: signed overflow in width * (H/4) * (W/4) */
    check_refused("width_2_30", &c, "width_base");
    c = tiny_cnn();
    c.width_base = 30000;              /* was: 32 GB allocated for conv2 */
    check_refused("width_30000", &c, "more than the file");
    c = tiny_cnn();
    c.hidden = 2000000000;             /* was: 64 GB allocated for fc1 */
    check_refused("hidden_2e9", &c, "hidden");
    c = tiny_cnn();
    c.height = c.width = 1 << 30;      /* was: signed overflow in the flattened size */
    check_refused("input_2_30", &c, "input");
    /* within every limit, but a ResNet-18 of width 1024 needs ~11 GB: not in a 1 KB file */
    c = snn_model_config_default(SNN_MODEL_RESNET18);
    c.width_base = 1024;
    check_refused("resnet_1024", &c, "more than the file");
    /* the CNN's flattened features must fit an int even when each size is within its limit */
    c = tiny_cnn();
    c.width_base = 1 << 16;
    c.height = c.width = 1 << 12;
    const char *flat = "flattened features, width_base x height x width after its pools, must "
                       "be 1 .. 2^31 - 1";
    check_refused("cnn_flat", &c, flat);
    /* the DVS net stops after 8 blocks: a 65536-wide frame is still 256 wide there */
    c = snn_model_config_default(SNN_MODEL_DVS_NET);
    c.width_base = 1 << 16;
    c.height = c.width = 1 << 16;
    check_refused("dvsnet_flat", &c, flat);
    /* nor may a side reach 0 before the other is down to 4 (fc1 would take nothing) */
    c = snn_model_config_default(SNN_MODEL_DVS_NET);
    c.height = 40, c.width = 12;
    check_refused("dvsnet_empty", &c, flat);
}

static void test_wrapping_shapes_are_refused(void)
{
    const int64_t big = (int64_t)1 << 31;
    snn_tensor *t = snn_tensor_new(SNN_SHAPE(big, big), SNN_CPU);   /* 2^64 bytes: wraps to 0 */
    CHECK(t == NULL && snn_last_status() == SNN_ERR_ARGUMENT);
    CHECK(strstr(snn_last_error(), "more elements than memory can hold") != NULL);
    snn_clear_error();
    t = snn_tensor_new(SNN_SHAPE(big, big, big), SNN_CPU);          /* numel overflows int64 */
    CHECK(t == NULL && snn_last_status() == SNN_ERR_ARGUMENT);
    snn_clear_error();
    /* a zero dim makes any other size fine: nothing is allocated */
    t = snn_tensor_new(SNN_SHAPE(0, big, big), SNN_CPU);
    CHECK(t != NULL && t->numel == 0);
    snn_tensor_free(t);
    CHECK_OK(snn_step_begin());
    CHECK(snn_empty(SNN_SHAPE(big, big), SNN_CPU) == NULL);
    CHECK(snn_last_status() == SNN_ERR_ARGUMENT);
    snn_step_end();
    snn_clear_error();
}

/* The count from the configuration equals what the builder allocates, but for ParametricLIF's
 * one float per neuron layer, which it leaves out (a lower bound is what the refusal needs). */
static void check_count(const snn_model_config *c, const char *what)
{
    snn_rng rng;
    snn_rng_seed(&rng, 3);
    snn_module *m = snn_model_new(c, &rng);
    CHECK(m != NULL);
    if (!m) return;
    snn_param_list list;
    CHECK_OK(snn_module_parameters(m, &list));
    double built = 0.0;
    for (int i = 0; i < list.count; i++) built += (double)list.items[i].tensor->numel;
    snn_param_list_free(&list);
    snn_module *layers[64];
    const char *names[64];
    int neuron_layers = snn_model_neuron_layers(m, layers, names, 64);
    double counted = snn_model_param_floats(c);
    double slack = c->neuron.kind == SNN_NEURON_PLIF ? neuron_layers : 0;
    if (!(counted <= built && built <= counted + slack)) {
        fprintf(stderr, "  %s: counted %.0f floats, the built model holds %.0f\n", what, counted,
                built);
        CHECK(0);
    }
    snn_module_free(m);
}

static void test_param_count_matches_builders(void)
{
    snn_model_config c = tiny_cnn();
    check_count(&c, "cnn 1x8x8 w2");
    c.in_channels = 3, c.height = 12, c.width = 16, c.width_base = 3, c.hidden = 5;
    c.spiking_readout = true;
    check_count(&c, "cnn 3x12x16 w3 readout");
    c.neuron = snn_neuron_config_default(SNN_NEURON_PLIF);
    check_count(&c, "cnn plif");
    c = tiny_cnn();
    c.height = c.width = 34;           /* N-MNIST frames: the pools round down, 34 -> 17 -> 8 */
    check_count(&c, "cnn 34x34");
    c = snn_model_config_default(SNN_MODEL_DVS_NET);
    c.width_base = 2, c.hidden = 4;
    check_count(&c, "dvsnet 2x128x128");
    c.height = 40, c.width = 20;       /* blocks while either side is above 4: 2x1 at the end */
    check_count(&c, "dvsnet 2x40x20");
    snn_model_kind kinds[6] = {SNN_MODEL_RESNET18, SNN_MODEL_SEW_RESNET18, SNN_MODEL_RESNET34,
                               SNN_MODEL_SEW_RESNET34, SNN_MODEL_RESNET50, SNN_MODEL_SEW_RESNET50};
    for (int k = 0; k < 6; k++) {
        for (int w = 1; w <= 2; w++) {
            c = snn_model_config_default(kinds[k]);
            c.in_channels = w, c.height = c.width = 8, c.width_base = w, c.classes = 2 + 3 * w;
            check_count(&c, snn_model_kind_name(kinds[k]));
            c.neuron = snn_neuron_config_default(SNN_NEURON_PLIF);
            check_count(&c, "resnet plif");
        }
    }
    c = snn_model_config_default(SNN_MODEL_RESNET18);
    c.width_base = 0;
    CHECK(snn_model_param_floats(&c) < 0 && snn_last_status() == SNN_ERR_ARGUMENT);
    snn_clear_error();
}

/* A real checkpoint of the same tiny model still loads (the refusal does not overreach). */
static void test_fitting_model_loads(void)
{
    snn_model_config c = tiny_cnn();
    snn_rng rng;
    snn_rng_seed(&rng, 1);
    snn_module *m = snn_model_new(&c, &rng);
    char path[128];
    snprintf(path, sizeof path, "%s/tiny.safetensors", dir);
    CHECK_OK(snn_checkpoint_save(path, m, NULL, NULL));
    snn_module *back = snn_checkpoint_load_model(path, SNN_CPU, NULL);
    CHECK(back != NULL);
    snn_module_free(back);
    snn_module_free(m);
    unlink(path);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/snn_hostile_XXXXXX");
    if (!mkdtemp(dir)) return 1;
    RUN(test_huge_models_are_refused);   /* first: the peak-memory checks want a quiet start */
    RUN(test_wrapping_shapes_are_refused);
    RUN(test_param_count_matches_builders);
    RUN(test_fitting_model_loads);
    rmdir(dir);
    return test_finish();
}
