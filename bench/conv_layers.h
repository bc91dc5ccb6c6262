/*
 * conv_layers.h - how the benches describe a convolution layer to time (bench_conv2d,
 * bench_sparse): square images and kernels, and the snn_conv2d_dims of a batch of N images.
 */
#ifndef SNN_BENCH_CONV_LAYERS_H
#define SNN_BENCH_CONV_LAYERS_H

#include "kernels/kernels.h"

typedef struct layer {
    const char *name;
    int C_in, H, C_out, K, stride, pad; /* square images and kernels */
} layer;

static inline snn_conv2d_dims layer_dims(int N, const layer *l)
{
    snn_conv2d_dims d = {N, l->C_in, l->H, l->H, l->C_out, l->K, l->K, l->stride, l->pad, 0, 0};
    d.H_out = (l->H + 2 * l->pad - l->K) / l->stride + 1;
    d.W_out = d.H_out;
    return d;
}

#endif /* SNN_BENCH_CONV_LAYERS_H */
