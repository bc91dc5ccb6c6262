/*
 * model_kinds.c - the models snn_model_new builds, one row each: the name programs and
 * checkpoints call it by, whether it is a ResNet (the CNNs and the rsnn are the others), its
 * builder, and the floats its parameters and buffers take (computed from a configuration,
 * before anything is built); and which modules are models. snn_model_new (model.c) reads the row of config.kind.
 */
#include <string.h>

#include "model_internal.h"
#include "tensor/error.h"

const snn_model_kind_info snn_model_kinds[SNN_MODEL_KIND_COUNT] = {
    [SNN_MODEL_SPIKING_CNN] = {"cnn", false, snn_spiking_cnn_new, snn_spiking_cnn_param_floats},
    [SNN_MODEL_DVS_NET] = {"dvsnet", false, snn_dvs_net_new, snn_dvs_net_param_floats},
    [SNN_MODEL_RESNET18] = {"resnet18", true, snn_resnet_new, snn_resnet_param_floats},
    [SNN_MODEL_SEW_RESNET18] = {"sew-resnet18", true, snn_resnet_new, snn_resnet_param_floats},
    [SNN_MODEL_RESNET34] = {"resnet34", true, snn_resnet_new, snn_resnet_param_floats},
    [SNN_MODEL_SEW_RESNET34] = {"sew-resnet34", true, snn_resnet_new, snn_resnet_param_floats},
    [SNN_MODEL_RESNET50] = {"resnet50", true, snn_resnet_new, snn_resnet_param_floats},
    [SNN_MODEL_SEW_RESNET50] = {"sew-resnet50", true, snn_resnet_new, snn_resnet_param_floats},
    [SNN_MODEL_RSNN] = {"rsnn", false, snn_rsnn_new, snn_rsnn_param_floats},
};

const char *snn_model_kind_name(snn_model_kind kind)
{
    return (unsigned)kind < SNN_MODEL_KIND_COUNT ? snn_model_kinds[kind].name : "unknown";
}

snn_status snn_model_kind_parse(const char *name, snn_model_kind *out)
{
    for (int k = 0; name && k < SNN_MODEL_KIND_COUNT; k++) {
        if (strcmp(name, snn_model_kinds[k].name) == 0) {
            *out = (snn_model_kind)k;
            return SNN_OK;
        }
    }
    return snn_error(SNN_ERR_ARGUMENT, "bad model '%s' (expected cnn, resnet18, sew-resnet18, "
                     "dvsnet, resnet34, sew-resnet34, resnet50, sew-resnet50 or rsnn)",
                     name ? name : "(null)");
}

const snn_model_config *snn_model_config_of(const snn_module *model)
{
    if (!model || (model->ops != &snn_cnn_model_ops && model->ops != &snn_dvs_model_ops &&
                   model->ops != &snn_resnet_model_ops && model->ops != &snn_rsnn_model_ops))
        return NULL;
    return &((const snn_model_impl *)model->impl)->config;
}

double snn_model_param_floats(const snn_model_config *config)
{
    if (!config) {
        snn_error(SNN_ERR_ARGUMENT, "snn_model_new: bad argument 'config' (got NULL)");
        return -1.0;
    }
    if (snn_model_config_check(config) != SNN_OK) return -1.0;
    return snn_model_kinds[config->kind].param_floats(config);
}
