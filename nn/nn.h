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
 * Learnable synaptic delays (nn/layer_delay.c; DCLS-Delays, Hammouamri et al., ICLR 2024).
 *
 *     snn_module *fc = snn_delay_linear_new(I, O, 25, &rng);        // delays 0..24 steps
 *     for (epoch ...) {
 *         snn_delay_linear_set_sigma(fc, 12.5f + (0.5f - 12.5f) * epoch / (epochs - 1));
 *         ... forward (T, N, I) -> (T, N, O), backward, snn_optimizer_step(opt) ...
 *         snn_delay_linear_clamp(fc);                                // d back into [0, 24]
 *     }
 *     snn_delay_linear_round(fc);                                    // integer delays: a delay line
 * ------------------------------------------------------------------------------------------- */

/** The sigma snn_delay_linear_round sets: exp(-1 / (2 sigma^2)) = exp(-200) is 0 in float, so
 * a synapse at an integer delay has exactly one non-zero tap. */
#define SNN_DELAY_SIGMA_ROUND 0.05f

/** DelayLinear: x (T, N, in) -> y (T, N, out), y = snn_temporal_conv(x, snn_delay_kernel(w, d,
 * sigma, max_delay)): each synapse (o, i) has a weight w[o, i] ~ U(+-1/sqrt(in)) and a real
 * delay d[o, i] ~ U(0, max_delay - 1), in steps; max_delay (>= 1) taps. Parameters "w" and "d"
 * (out, in), both trainable. sigma starts at max(max_delay / 2, 0.5). */
snn_module *snn_delay_linear_new(int in_features, int out_features, int max_delay, snn_rng *rng);
/** Sets the Gaussian width (> 0, finite) of the DelayLinear `m`: anneal it from max_delay / 2
 * toward 0.5 over training. SNN_ERR_ARGUMENT for a bad sigma or a module of another kind. */
snn_status snn_delay_linear_set_sigma(snn_module *m, float sigma);
/** The current sigma of the DelayLinear `m`, or -1 (error set) for another kind. */
float snn_delay_linear_sigma(const snn_module *m);
/** Clamps every delay of the DelayLinear `m` into [0, max_delay - 1]: call it after each
 * optimizer step. Goes through the host (out * in floats; on CUDA it waits for the stream). */
snn_status snn_delay_linear_clamp(snn_module *m);
/** For inference: clamps and rounds every delay to the nearest integer (ties to even) and sets
 * sigma to SNN_DELAY_SIGMA_ROUND, so the layer is a pure delay line, y[t, o] = sum_i w[o, i]
 * x[t - d[o, i], i]. Its delays then get no gradient. */
snn_status snn_delay_linear_round(snn_module *m);

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
