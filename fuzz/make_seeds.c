/*
 * make_seeds.c - writes real checkpoints into a folder, as seeds for fuzz_safetensors: what
 * snn.c itself writes, so the fuzzer starts from files that load and mutates from there.
 *
 *     build-fuzz/bin/fuzz_make_seeds DIR
 *
 *   cnn-adam.safetensors   a tiny spiking CNN with its Adam state and a model configuration
 *   resnet.safetensors     a narrow spiking ResNet-18 (width 2), no optimizer state
 *   tensors.safetensors    two plain tensors and string metadata that needs JSON escapes
 *   empty.safetensors      no tensors at all ("{}" padded)
 *   config-only.safetensors a model configuration and no tensor (the fuzzer mutates its
 *                          sizes; snn_checkpoint_load_model must refuse what the file cannot hold)
 * (.ci/fuzz.sh adds tests/ref/tiny_resnet.safetensors, written by PyTorch's safetensors.)
 */
#include <stdio.h>

#include "snn.h"

static int failed(const char *what)
{
    fprintf(stderr, "fuzz_make_seeds: %s: %s\n", what, snn_last_error());
    return 1;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: fuzz_make_seeds DIR\n");
        return 2;
    }
    char path[1024];
    snn_rng rng;
    snn_rng_seed(&rng, 1);

    snn_model_config cnn = snn_model_config_default(SNN_MODEL_SPIKING_CNN);
    cnn.height = cnn.width = 8;
    cnn.width_base = 2;
    cnn.hidden = 4;
    cnn.classes = 3;
    cnn.time_steps = 2;
    snn_module *net = snn_model_new(&cnn, &rng);
    snn_optimizer *opt = net ? snn_adam_new(net, 1e-3f, 0.0f, false) : NULL;
    snn_metadata meta = {0};
    snn_metadata_set(&meta, "epoch", "%d", 3);
    snprintf(path, sizeof path, "%s/cnn-adam.safetensors", argv[1]);
    if (!opt || snn_checkpoint_save(path, net, opt, &meta) != SNN_OK) return failed(path);
    snn_optimizer_free(opt);
    snn_module_free(net);

    snn_model_config resnet = snn_model_config_default(SNN_MODEL_RESNET18);
    resnet.in_channels = 1;
    resnet.height = resnet.width = 8;
    resnet.width_base = 2;
    resnet.classes = 2;
    resnet.time_steps = 1;
    net = snn_model_new(&resnet, &rng);
    snprintf(path, sizeof path, "%s/resnet.safetensors", argv[1]);
    if (!net || snn_checkpoint_save(path, net, NULL, NULL) != SNN_OK) return failed(path);
    snn_module_free(net);

    snn_tensor *a = snn_tensor_new(SNN_SHAPE(2, 3), SNN_CPU);
    snn_tensor *b = snn_tensor_new(SNN_SHAPE(4), SNN_CPU);
    if (!a || !b) return failed("snn_tensor_new");
    snn_tensor_normal_(a, &rng, 0.0f, 1.0f);
    snn_tensor_fill(b, -0.0f);
    /* a name with a quote, a backslash and an e-acute, which the header must escape */
    snn_named_param items[2] = {{.name = "layer.weight", .tensor = a},
                                {.name = "b\"\\\u00e9", .tensor = b}};
    snn_param_list list = {items, 2};
    snprintf(path, sizeof path, "%s/tensors.safetensors", argv[1]);
    const char *metadata = "{\"note\":\"tab\\there \\u0001 \\\"q\\\"\",\"k\":\"\"}";
    if (snn_safetensors_save(path, &list, metadata) != SNN_OK) return failed(path);
    snn_param_list none = {NULL, 0};
    snprintf(path, sizeof path, "%s/empty.safetensors", argv[1]);
    if (snn_safetensors_save(path, &none, NULL) != SNN_OK) return failed(path);

    snn_metadata config_only = {0};
    size_t json_len = 0;
    char *json = snn_model_config_to_metadata(&cnn, &config_only) == SNN_OK
                     ? snn_metadata_to_json(&config_only, &json_len)
                     : NULL;
    snprintf(path, sizeof path, "%s/config-only.safetensors", argv[1]);
    if (!json || snn_safetensors_save(path, &none, json) != SNN_OK) return failed(path);
    snn_free(json, json_len + 1, SNN_CPU);
    snn_tensor_free(a);
    snn_tensor_free(b);
    snn_shutdown();
    return 0;
}
