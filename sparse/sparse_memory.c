/*
 * sparse_memory.c - snn_sparsify_memory_estimate: the bytes the sparse pass needs, from the
 * model's configuration alone, so that a program can size its calibration (the images per
 * forward, snn_sparse_options.max_images) or refuse before running it (snn-ann2snn, snn-sparse)
 * instead of meeting an out-of-memory error halfway.
 *
 * What the pass holds (sparsify.c, sparse_module.c), on top of the model:
 *
 *   find        one forward of ONE image with a tape (grad mode). A tape keeps what backward
 *               would need (ST-BIF's membranes, ...): measured at 1.3x the evaluation forward
 *               for a converted ResNet-18; bounded here by twice the evaluation step of one
 *               image. (It once ran the whole first batch: ~30 GB for a converted
 *               ResNet-18 at T = 51 and 64 images.)
 *   calibrate   each batch, or each slice of max_images of its images, without a tape, in a
 *               step of its own: the evaluation step (snn_model_memory_estimate), and at each
 *               swapped conv one sparse kernel's output beside the dense one, given back before
 *               the next kernel runs: at most the step's largest tensor; on the CPU also the
 *               sparse kernel's per-thread scratch (a column matrix and two output tiles per
 *               thread, at most twice the dense conv's workspace while there are at least as
 *               many images as threads; with fewer, each thread holds one part of an image's -
 *               megabytes at most, well under what the calibration batches need - so the
 *               batch's bound covers the one-sample round too); on CUDA the host copies the
 *               statistics are read from (activity, input, dense and sparse output of one conv:
 *               at most four times the largest tensor, in host memory).
 *   weights     each swapped conv keeps its weight prepared: on the host plain and in tiles of
 *               32 output channels (twice the weight), on CUDA also transposed on the device
 *               (once): at most that many times the model's parameters, counted in `overhead`.
 *
 * tests/test_sparse_memory.c checks it against the pass measured on the CPU.
 */
#include <string.h>

#include "sparse.h"
#include "tensor/error.h"

snn_status snn_sparsify_memory_estimate(const snn_model_config *config, int images,
                                        snn_device device, snn_memory_estimate *out)
{
    const char *fn = "snn_sparsify_memory_estimate";
    if (!config || !out)
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad argument '%s' (got NULL)", fn,
                         config ? "out" : "config");
    if (images < 1) {
        memset(out, 0, sizeof *out);
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad argument 'images' (expected >= 1, got %d)",
                         fn, images);
    }
    snn_memory_estimate one;
    snn_status st = snn_model_memory_estimate(config, images, device, false, 0, out);
    if (st == SNN_OK) st = snn_model_memory_estimate(config, 1, device, false, 0, &one);
    if (st != SNN_OK) return st;
    const bool cpu = device == SNN_CPU;
    const double calibrate = out->step + out->largest_tensor + (cpu ? 2.0 * out->workspace : 0.0);
    const double find = 2.0 * one.step;
    out->step = calibrate > find ? calibrate : find;
    out->overhead += (cpu ? 2.0 : 1.0) * out->parameters;
    out->total = out->parameters + out->gradients + out->optimizer + out->step + out->overhead;
    out->host = cpu ? out->total : out->host + 4.0 * out->largest_tensor + 2.0 * out->parameters;
    return SNN_OK;
}
