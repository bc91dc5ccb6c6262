/**
 * @file
 * sparse.h - sparse execution of trained spiking nets: the pass that swaps every spike-fed
 * Conv2d for a SparseConv2d, and the sparse conv kernels it runs (docs/sparse.md).
 *
 * Why it works. A conv fed by spikes multiplies its weights by inputs in {0, 1}, and in trained
 * nets most inputs are 0 (3-13 % are ones in snn.c's trained width-64 ResNet-18), and for one
 * image at one step a whole input channel is often silent (3-73 % of the planes there, more
 * after training with the activity penalty). So per (t, n) image the conv only needs the
 * channels that fired:
 *
 *   y[o, p] = sum_{c in active(t, n)} sum_{kh, kw} w[o, c, kh, kw] x[c, p + (kh, kw)]
 *
 * which is the dense GEMM over K' = KH * KW * |active| rows instead of KH * KW * C_in. The
 * neuron kernel already counts spikes per (t, n, c) plane as it writes them (its "activity",
 * neurons.h), so the list of active channels costs one read of a (T*N, C) table, no scan.
 *
 *     snn_module *net = snn_checkpoint_load_model(path, SNN_CPU, NULL);
 *     snn_tensor *calib[8] = {...};                 // (N, C, H, W) images on the model's device
 *     snn_sparse_report report;
 *     snn_sparsify(net, calib, 8, NULL, &report);   // swaps, calibrates, prints the table
 *     snn_no_grad_begin(); ... snn_module_forward(net, x) ... snn_no_grad_end();
 *
 * Exactness: see docs/sparse.md. On the CPU the sparse kernels sum the surviving terms in the
 * same order and in the same K slices as the dense im2col + SGEMM path, so for {0, 1} inputs
 * the sparse output equals the dense output bit for bit.
 *
 * CUDA (SNN_CUDA builds): sparse_conv.cu has the same two paths (an implicit GEMM over the
 * active channels, and an event-driven kernel, also in a variant with its weight rows staged in
 * shared memory), listing the active channels on the device with
 * no host sync; both sum in plain k order, so they agree with the dense cuBLAS conv within fp32
 * rounding (a different order), not bitwise. Without SNN_CUDA a SparseConv2d on the GPU runs
 * the dense conv.
 */
#ifndef SNN_SPARSE_H
#define SNN_SPARSE_H

#include <stdbool.h>
#include <stdio.h>

#include "../nn/nn.h"
#include "../kernels/kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/** How a SparseConv2d runs. */
typedef enum snn_sparse_path {
    SNN_SPARSE_AUTO = 0,   /**< options only: decide by the calibration timings */
    SNN_SPARSE_DENSE,      /**< the dense conv (snn_conv2d), as before the swap */
    SNN_SPARSE_GEMM,       /**< channel-compacted im2col + GEMM over the active channels */
    SNN_SPARSE_EVENT,      /**< event-driven: one weight column (C_out contiguous) per spike */
    SNN_SPARSE_EVENT_SMEM, /**< CUDA: the event path with each chunk's weight rows staged in
                                shared memory (the CPU runs its event path) */
} snn_sparse_path;

/** "auto", "dense", "gemm", "event" or "event-smem" (a static string). */
const char *snn_sparse_path_name(snn_sparse_path path);

/* ---------------------------------------------------------------------------------------------
 * Kernels (CPU). Weights are prepared once into wt: (C_in * KH * KW, C_out), row k = (c, kh, kw)
 * holding w[:, c, kh, kw] (one channel's KH*KW rows contiguous, each C_out wide), followed by
 * the same in tiles of 32 output channels (C_out / 32, K, 32).
 * ------------------------------------------------------------------------------------------- */

/** Floats the prepared weights take: K*C_out for (K, C_out), then ceil(C_out/32)*K*32 for the
 * same in tiles of 32 output channels (K = C_in*KH*KW). */
size_t snn_sparse_weights_floats(int C_out, int C_in, int KH, int KW);
/** wt (snn_sparse_weights_floats floats) <- w (C_out, C_in, KH, KW), both host memory of the
 * caller. */
void snn_sparse_prepare_weights(float *wt, const float *w, int C_out, int C_in, int KH, int KW);

/** y (N, C_out, H_out, W_out) = conv(x (N, C_in, H, W), w) + bias over the active channels only.
 * activity: (N, C_in) per-plane spike counts (a channel is active where its count is nonzero),
 * or NULL to find the active channels by scanning x. bias may be NULL. d: the conv's sizes
 * (snn_conv2d_dims of kernels/kernels.h, installed beside this header). path: GEMM or EVENT.
 * All pointers are the caller's host memory. Inputs must be zero in the planes the activity
 * marks silent. SNN_ERR_MEMORY if the scratch cannot be had. Threads: one image per OpenMP
 * task; with fewer images than threads, one part of an image (output rows x 32-channel tiles)
 * per task. The output does not depend on the thread count. */
snn_status snn_sparse_conv2d_cpu(float *y, const float *x, const float *wt, const float *bias,
                                 const snn_conv2d_dims *d, const float *activity,
                                 snn_sparse_path path);

/** The same on the GPU (sparse/sparse_conv.cu; SNN_WITH_CUDA builds only): x, w in the original
 * (C_out, C_in, KH, KW) layout, bias and activity (N, C_in) all device pointers; call inside a
 * step (the transposed weight is scratch from the step arena). path GEMM: an implicit GEMM over
 * the active channels; EVENT: only the nonzero inputs, one C_out row of FMAs each; EVENT_SMEM:
 * the same with the rows staged in shared memory. All sum in ascending (c, kh, kw) order, so
 * they equal each other bit for bit. No host sync: each block
 * lists its image's active channels itself. SNN_ERR_UNSUPPORTED for a layer the kernels do not
 * cover (GEMM: channel list over 48 KiB of shared memory; EVENT: > 32 taps, W + 2 pad > 64).
 * The event kernel splits C_out over blocks (512 channels at most per block, fewer at small
 * batches), so any C_out runs. */
snn_status snn_sparse_conv2d_cuda(float *y, const float *x, const float *w, const float *bias,
                                  const snn_conv2d_dims *d, const float *activity,
                                  snn_sparse_path path);
/** The same with the weight already transposed to wt (C_in KH KW, C_out) on the device, as
 * snn_sparse_transpose_weights_cuda makes it (a SparseConv2d keeps one, so inference does not
 * transpose on every call); needs no step. */
snn_status snn_sparse_conv2d_prepared_cuda(float *y, const float *x, const float *wt,
                                           const float *bias, const snn_conv2d_dims *d,
                                           const float *activity, snn_sparse_path path);
/** wt (K, C_out) <- w (C_out, K) transposed, both device pointers; queued on the stream. */
void snn_sparse_transpose_weights_cuda(float *wt, const float *w, int C_out, int64_t K);

/* ---------------------------------------------------------------------------------------------
 * The pass
 * ------------------------------------------------------------------------------------------- */

/** How snn_sparsify decides; start from snn_sparse_options_default(). */
typedef struct snn_sparse_options {
    double max_ratio;          /**< go sparse only where sparse ms < max_ratio * dense ms (0.8) */
    snn_sparse_path force;     /**< AUTO: decide by timing; GEMM/EVENT/DENSE: that path for all */
    bool allow_event;          /**< consider the event-driven kernel too (true) */
    FILE *log;                 /**< where the decision table goes (stdout); NULL-able via quiet */
    bool quiet;                /**< print nothing */
    int max_images;            /**< calibration runs at most this many images of a batch per
                                    forward, each slice a step of its own (0: whole batches).
                                    A no-grad step holds the whole forward until it ends, so this
                                    bounds the pass's memory (snn_sparsify_memory_estimate);
                                    timings and statistics add up over the slices. The
                                    timings (and the batch size that counts as the calibrated
                                    one, for the one-sample rule) are then those of a slice. */
    bool one_sample;           /**< then time each layer again on one sample of each batch and
                                    choose the path of batches nearer one sample (true) */
} snn_sparse_options;

/** The defaults listed in snn_sparse_options. */
snn_sparse_options snn_sparse_options_default(void);

/** The most swapped convs a report lists (ResNet-50 has 52 spike-fed convs). */
#define SNN_SPARSE_MAX_LAYERS 64

/** What calibration measured for one swapped conv (times are per calibration batch, ms). */
typedef struct snn_sparse_layer_report {
    char name[128];            /**< "layer1.0.conv1": the module path, unchanged by the swap */
    char source[128];          /**< the neuron layer(s) whose activity it reads: "layer1.0.sn1",
                                  "layer1.0.sn2+sn1" for a residual sum (the union) */
    int C_in;                  /**< input channels */
    int C_out;                 /**< output channels */
    int kernel;                /**< kernel size (square) */
    int stride;                /**< stride */
    int H;                     /**< input plane height */
    int W;                     /**< input plane width */
    double firing_rate;        /**< nonzero inputs / inputs */
    double silent_planes;      /**< fraction of (image, channel) planes with no spike */
    int active_p95;            /**< 95th percentile of active channels per image */
    double dense_ms;           /**< dense conv, mean over calibration batches; 0 if not timed */
    double gemm_ms;            /**< the GEMM path, as dense_ms */
    double event_ms;           /**< the event path, as dense_ms */
    double event_smem_ms;      /**< the event-smem path, as dense_ms (CUDA only; 0 on the CPU) */
    double max_abs_diff;       /**< max |sparse - dense| over calibration, both sparse kernels */
    snn_sparse_path path;      /**< chosen */
    int one_images;            /**< images of the one-sample round (T; 0: not made) */
    double one_dense_ms;       /**< dense conv at one sample, mean over that round */
    double one_best_ms;        /**< the fastest sparse kernel at one sample */
    snn_sparse_path path_one;  /**< chosen for batches nearer one sample than the calibration
                                  batch on a log scale (images^2 < calibrated x one_images) */
    long long sparse_calls;    /**< after calibration: batches run sparse */
    long long fallbacks;       /**< after calibration: batches denser than calibrated, run dense */
} snn_sparse_layer_report;

/** What snn_sparsify did to a model, layer by layer. */
typedef struct snn_sparse_report {
    int count;                             /**< swapped convs */
    snn_sparse_layer_report layers[SNN_SPARSE_MAX_LAYERS];  /**< the first count are filled */
    int convs_seen;                        /**< every Conv2d node in the calibration forward */
    int residual_sum_fed;                  /**< swapped convs fed by a residual sum (SEW): masked by
                                              the union of the operands' activities */
} snn_sparse_report;

/** Finds every Conv2d fed by spikes (one calibration forward with a tape, of the first image of
 * batch 0, walked from the output: conv <- max-pool / flatten / reshape / views / eval dropout /
 * residual sums <- neuron layers), swaps each for a
 * SparseConv2d holding the same weight tensor under the same name, then runs the batches
 * (n_batches >= 1; 8 or more recommended) without a tape - each batch, or each slice of
 * options->max_images of its images, in a step of its own - to time dense and sparse on the real
 * tensors and pick each layer's path; then the first sample of each batch alone, to pick the path
 * that batches nearer one sample than the calibration batch run (a kernel that wins on a batch
 * can lose on one sample). The model is put in eval mode. Must be called in grad
 * mode (it opens and closes its own steps; batches may be OWNED tensors or STEP tensors of an
 * enclosing step). report may be NULL. Calling it again re-calibrates the swapped layers.
 * SNN_ERR_ARGUMENT for a NULL model, no or NULL batches; SNN_ERR_STATE in no-grad mode;
 * SNN_ERR_UNSUPPORTED past SNN_SPARSE_MAX_LAYERS swaps; SNN_ERR_MEMORY; or the error of a
 * forward (a batch of the wrong shape or device). */
snn_status snn_sparsify(snn_module *model, snn_tensor *const *batches, int n_batches,
                        const snn_sparse_options *options, snn_sparse_report *report);

/** What snn_sparsify needs on `device` for a model of `config` (at its time steps) whose
 * calibration forwards take `images` images each (a batch, or options.max_images): fills *out
 * as snn_model_memory_estimate does for an evaluation step, with `step` the pass's largest step
 * (a calibration forward plus one sparse kernel's output and scratch, or the one-image forward
 * with a tape that finds the convs) and `overhead` grown by the prepared weights (sparse_memory.c
 * says how each part is bounded). Needs no model, allocates nothing. SNN_ERR_ARGUMENT for NULL
 * pointers or images < 1; the errors of snn_model_memory_estimate. */
snn_status snn_sparsify_memory_estimate(const snn_model_config *config, int images,
                                        snn_device device, snn_memory_estimate *out);

/** Fills *report from the SparseConv2d modules of `model` (counters since calibration
 * included). */
void snn_sparse_collect(snn_module *model, snn_sparse_report *report);
/** Prints the per-layer table of `report` to `out`. */
void snn_sparse_print_report(const snn_sparse_report *report, FILE *out);
/** Sets every SparseConv2d of `model` to `path` (GEMM, EVENT or DENSE); returns how many. */
int snn_sparse_set_path(snn_module *model, snn_sparse_path path);
/** Turns the sparse paths of every SparseConv2d of `model` off (`on` false: dense conv) or back
 * on, keeping the chosen paths; for dense-vs-sparse comparisons on one model. Returns how
 * many. */
int snn_sparse_enable(snn_module *model, bool on);
/** Re-reads the weights of every SparseConv2d of `model` (after a checkpoint load into a
 * sparsified model). SNN_ERR_MEMORY when the prepared copy cannot be had; NULL model is a
 * no-op. */
snn_status snn_sparse_refresh_weights(snn_module *model);
/** True when `m` is a SparseConv2d module. */
bool snn_is_sparse_conv(const snn_module *m);

#ifdef __cplusplus
}
#endif

#endif /* SNN_SPARSE_H */
