/**
 * @file
 * nn.h - everything nn/ offers, in one include: modules and layers (nn/module.h), the model
 * builders, ANN -> SNN conversion and the memory estimate (nn/models.h), the execution plan a
 * model owns: its options, the fusion rules and snn_model_explain (nn/plan.h), optimizers,
 * schedules and weight averaging (nn/optim.h), checkpoints (nn/checkpoint.h); and, here, SVG
 * charts for reports.
 *
 * A module owns its parameters (OWNED tensors) and its children, and maps a STEP tensor to a
 * STEP tensor. Parameters carry dotted names like PyTorch's state_dict keys
 * ("layer1.0.conv1.weight"), which is also how checkpoints name them, so a snn.c checkpoint
 * opens in PyTorch with safetensors.load_file().
 *
 *     snn_rng rng; snn_rng_seed(&rng, 0);
 *     snn_model_config cfg = snn_model_config_default(SNN_MODEL_SPIKING_CNN);
 *     snn_module *net = snn_model_new(&cfg, &rng);
 *     snn_optimizer *opt = snn_adam_new(net, 1e-3f, 0.0f, false);
 *     for (...) {
 *         snn_step_begin();
 *         snn_module_zero_grad(net);
 *         snn_tensor *logits = snn_module_forward(net, images);   // (N, classes)
 *         snn_tensor *loss = snn_cross_entropy(logits, labels);
 *         snn_backward(loss);
 *         snn_optimizer_step(opt);
 *         snn_step_end();
 *     }
 *     snn_optimizer_free(opt);
 *     snn_module_free(net);
 *
 * Dimension glossary: T time steps, N batch, C channels, H, W spatial, F features.
 */
#ifndef SNN_NN_H
#define SNN_NN_H

#include "checkpoint.h"
#include "models.h"
#include "module.h"
#include "optim.h"
#include "plan.h"
#include "synops.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------------
 * SVG charts for reports (nn/svg.c): plain files any browser shows.
 * ------------------------------------------------------------------------------------------- */

/** One line of a chart: n points (x[i], y[i]) under a label (the caller's arrays). */
typedef struct snn_svg_series {
    const char *label;        /**< shown in the legend */
    const double *x;          /**< n x values */
    const double *y;          /**< n y values */
    int n;                    /**< number of points */
} snn_svg_series;

/** Writes a line chart of the first (up to 8) of `n_series` `series` to the SVG file `path`,
 * with a title and axis labels. SNN_ERR_IO naming the path if it cannot be written. */
snn_status snn_svg_line_chart(const char *path, const char *title, const char *x_label,
                              const char *y_label, const snn_svg_series *series, int n_series);

/** Writes a spike raster to the SVG file `path`: one row per neuron, one column per time step,
 * a mark where spikes[t, i] != 0. spikes: (T, neurons) row-major on the host; n_groups groups
 * split the rows into named bands (layers): group g starts at row group_start[g] and is called
 * group_names[g]. SNN_ERR_IO naming the path if it cannot be written. */
snn_status snn_svg_raster(const char *path, const char *title, const float *spikes, int T,
                          int neurons, const int *group_start, const char *const *group_names,
                          int n_groups);

#ifdef __cplusplus
}
#endif

#endif /* SNN_NN_H */
