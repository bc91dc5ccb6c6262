/*
 * raster.h - the spike raster of one image (snn-train's raster.svg): which neurons of each
 * layer fired at which time step.
 */
#ifndef SNN_APP_RASTER_H
#define SNN_APP_RASTER_H

#include "snn.h"

/* Writes to `path` the spike raster of the first image of `ds` (normalised as `norm` says):
 * up to `per_layer` neurons from each neuron layer, evenly spaced over the layer, one row
 * each, one column per time step. The model is left in eval mode. SNN_OK or the error. */
snn_status write_raster(const char *path, snn_module *model, const snn_dataset *ds,
                        const snn_loader_config *norm, snn_device device, int per_layer);

#endif /* SNN_APP_RASTER_H */
