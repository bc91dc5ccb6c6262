/*
 * sparse_module.h - the SparseConv2d module's state, shared by sparse_module.c (the module:
 * forward, calibration measurements, prepared weights) and sparsify.c (the pass that creates
 * the modules, decides their paths and reports). Internal to sparse/.
 */
#ifndef SNN_SPARSE_MODULE_H
#define SNN_SPARSE_MODULE_H

#include "nn/nn_internal.h"
#include "sparse.h"

/* A conv fed by a chain of residual sums (SEW) reads the union of up to this many neurons. */
#define SNN_SPARSE_MAX_SOURCES 8

/* What one calibration round measured of a layer: seconds summed over the round's batches. */
typedef struct sparse_timings {
    double dense_s, gemm_s, event_s, event_smem_s;   /* event_smem_s: CUDA only, else 0 */
    int batches;                 /* 0: the round was not made */
    int images;                  /* fewest T*N images of one of its batches */
} sparse_timings;

typedef struct sparse_impl {
    snn_conv_impl conv;          /* geometry, as the Conv2d had it */
    snn_module *sources[SNN_SPARSE_MAX_SOURCES];  /* neuron layers whose activities mask the input: one, */
    int n_sources;                     /* or the operands of residual sums (their union) */
    float *wt;                   /* (C_in*K*K, C_out) prepared weights, host */
    size_t wt_floats;
    float *wt_device;            /* (C_in*K*K, C_out) on the GPU when the weight is there */
    size_t wt_device_floats;
    /* Two calibration rounds: the calibration batches (at_batch), then one sample of each
     * (at_one: T images in a multi-step net). Each picks a path; a batch nearer one sample than
     * the calibration batch on a log scale runs path_one, any other batch path. */
    sparse_timings at_batch, at_one;
    snn_sparse_path path, path_one;
    bool calibrating;
    bool calibrating_one;        /* the one-sample round: timings only, no statistics */
    bool disabled;               /* snn_sparse_enable(model, false): dense for comparisons */
    int active_limit;            /* mean active channels per image above this: dense */
    /* calibration statistics (the batch round) */
    int64_t *hist;               /* (C_in + 1): images with that many active channels */
    double nonzero, inputs, silent, planes;
    int H, W;
    double max_diff;
    long long sparse_calls, fallbacks;
    char name[128], source_name[128];
} sparse_impl;

/* A SparseConv2d for a conv of geometry c, reading n_sources activities (filled in by the
 * caller), with its host buffers allocated and no parameters yet; NULL with a message on
 * failure. */
snn_module *snn_sparse_module_new(const snn_conv_impl *c, int n_sources);
/* The module's prepared weights from its weight tensor (params[0]): wt on the host, and
 * wt_device too when the weight lives on the GPU. */
snn_status snn_sparse_module_prepare(snn_module *m);

#endif /* SNN_SPARSE_MODULE_H */
