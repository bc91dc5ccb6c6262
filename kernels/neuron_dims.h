/*
 * neuron_dims.h - how every neuron kernel sees its tensors (internal): the dims of a
 * multi-step input and the element each index names.
 *
 * A neuron layer's input x is (T, N, C, ...) and its state, spikes and gradients have x's
 * shape. The kernels view each as (T, M), M = N * C * plane elements per time step, channel c
 * of sample n owning the `plane` contiguous elements that start at (n * C + c) * plane: so
 * element i of step t is x[t * M + i], and its channel is (i / plane) % C. Activity, the spike
 * count per plane, is (T, N * C): activity[t * N*C + n*C + c] = the nonzero outputs of that
 * plane at step t.
 */
#ifndef SNN_NEURON_DIMS_H
#define SNN_NEURON_DIMS_H

#include <stdint.h>

typedef struct snn_neuron_dims {
    int64_t T;      /* time steps (1 for the single-step API) */
    int64_t N;      /* batch */
    int64_t C;      /* channels (dim 2 of a (T, N, C, ...) input; 1 for (T, N)) */
    int64_t plane;  /* elements per (n, c): H * W, or 1 */
} snn_neuron_dims;

/* Elements per time step: M = N * C * plane. */
static inline int64_t snn_neuron_dims_step(const snn_neuron_dims *d)
{
    return d->N * d->C * d->plane;
}

#endif /* SNN_NEURON_DIMS_H */
