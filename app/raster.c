/*
 * raster.c - write_raster() of raster.h: one test image forward, each neuron layer's spikes
 * sampled into rows, drawn as an SVG raster (snn_svg_raster).
 */
#include "app/raster.h"

#include <stdlib.h>

#include "app/evaluate.h"

snn_status write_raster(const char *path, snn_module *model, const snn_dataset *ds,
                        const snn_loader_config *norm, snn_device device, int per_layer)
{
    snn_loader_config cfg = *norm;
    cfg.batch_size = 1;
    cfg.shuffle = false;
    cfg.random_crop = cfg.horizontal_flip = false;
    cfg.prefetch = false;
    snn_loader *loader = snn_loader_new(ds, &cfg);
    if (!loader) return snn_last_status();
    snn_module *layers[MAX_LAYERS];
    const char *names[MAX_LAYERS];
    int n_layers = snn_model_neuron_layers(model, layers, names, MAX_LAYERS);
    const snn_model_config *config = snn_model_config_of(model);
    int T = config ? config->time_steps : 1;
    int total = n_layers * per_layer;
    float *raster = calloc((size_t)T * (size_t)total, sizeof *raster);
    int starts[MAX_LAYERS];
    snn_status status = SNN_OK;
    snn_batch batch;
    snn_module_train(model, false);
    snn_no_grad_begin();
    if (raster && snn_loader_next(loader, &batch)) {
        snn_step_begin();
        snn_tensor *x, *y;
        status = snn_batch_to_device(&batch, device, &x, &y);
        if (status == SNN_OK && !snn_module_forward(model, x)) status = snn_last_status();
        int row = 0;
        for (int l = 0; l < n_layers && status == SNN_OK; l++) {
            starts[l] = row;
            snn_tensor *s = snn_neuron_layer_last_spikes(layers[l]); /* (T, 1, ...) */
            if (!s) continue;
            int64_t per_step = s->numel / T;
            float *host = malloc((size_t)s->numel * sizeof *host);
            if (!host) break;
            snn_tensor_copy_to_host(s, host);
            for (int k = 0; k < per_layer; k++) {
                int64_t idx = per_step > per_layer ? (int64_t)k * per_step / per_layer
                                                   : k % per_step;
                for (int t = 0; t < T; t++)
                    raster[(size_t)t * (size_t)total + (size_t)row] = host[t * per_step + idx];
                row++;
            }
            free(host);
        }
        snn_step_end();
        if (status == SNN_OK)
            status = snn_svg_raster(path, "Spikes of one test image (rows: neurons sampled from "
                                    "each layer)", raster, T, total, starts, names, n_layers);
    }
    snn_no_grad_end();
    free(raster);
    snn_loader_free(loader);
    return status;
}
