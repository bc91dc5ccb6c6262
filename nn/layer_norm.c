/*
 * layer_norm.c - the BatchNorm2d layer: gamma (weight) = 1, beta (bias) = 0, running_mean = 0,
 * running_var = 1, num_batches_tracked = 0, momentum 0.1, eps 1e-5 (PyTorch's defaults and
 * parameter names). In time-folded multi-step use (T*N images) the statistics cover all time
 * steps, as in SpikingJelly's SeqToANNContainer(BatchNorm2d).
 *
 * How far the running statistics move: an average of the first batches, then exponential
 * -----------------------------------------------------------------------------------------
 * Each training batch moves the running statistics toward its own by a factor m:
 *     running <- (1 - m) running + m batch
 * With m fixed at momentum (0.1), the starting values (mean 0, variance 1) still weigh
 * (1 - momentum)^n after n batches: 19% after 16. A short run then evaluates with a variance
 * far above the layers' real one, the evaluation-mode batch-norm shrinks the currents and the
 * neurons behind it go silent: `snn-train --epochs 1 --limit-train 2000` (16 steps) reached
 * 52% training accuracy and 9.5% test accuracy, with its last hidden layer firing 0.000.
 * So the factor of the n-th batch (n counted from 0: num_batches_tracked before it) is
 *     m = max(momentum, 1 / (n + 1))
 * the first batch replaces the starting values, the next ones are averaged in with equal
 * weights (1/2, 1/3, ...: PyTorch's momentum=None, a plain mean of the batches seen) until
 * 1 / (n + 1) falls below momentum (the 10th batch at 0.1), and from there on the average is
 * the exponential one it always was. A long run changes only in the weights its first ten
 * batches keep (0.9^(n - 10) of the statistics: nothing measurable after an epoch).
 *
 * num_batches_tracked is a buffer, as in PyTorch (float32 here: exact up to 2^24 batches), so
 * a checkpoint carries it and --resume continues bit-exactly. A checkpoint written before it
 * existed lacks it; loading fills it with SNN_BN_LONG_TRAINED (nn/checkpoint_load.c), and such
 * a layer moves by momentum, as it did. The count is kept on the host as well: m is an argument
 * of the op, and reading a device tensor at every step would stall the GPU. It is read from the
 * buffer at the layer's first training forward and written back (a fill: no synchronisation)
 * at each one after it; a checkpoint loaded into a layer that has already trained therefore
 * leaves the layer's own count in use (load before training, as snn-train does).
 */
#include "nn.h"
#include "nn_internal.h"
#include "tensor/error.h"

enum { BN_WEIGHT, BN_BIAS, BN_RUNNING_MEAN, BN_RUNNING_VAR, BN_BATCHES_TRACKED, BN_TENSORS };

float snn_batchnorm_train_momentum(snn_module *bn)
{
    snn_batchnorm_impl *b = bn->impl;
    snn_tensor *tracked = bn->params[BN_BATCHES_TRACKED].tensor;
    if (!b->tracked_known) {
        float count = -1.0f;
        if (snn_tensor_copy_to_host(tracked, &count) != SNN_OK) snn_clear_error();
        /* a count no training could leave (negative, NaN, a hostile file): long trained */
        b->batches_tracked = count >= 0.0f && count <= SNN_BN_LONG_TRAINED
                                 ? (int64_t)count : (int64_t)SNN_BN_LONG_TRAINED;
        b->tracked_known = true;
    }
    double average = 1.0 / (double)(b->batches_tracked + 1);
    b->batches_tracked++;
    if (snn_tensor_fill(tracked, (float)b->batches_tracked) != SNN_OK) snn_clear_error();
    return average > (double)b->momentum ? (float)average : b->momentum;
}

static snn_tensor *bn_forward(snn_module *m, snn_tensor *x)
{
    snn_batchnorm_impl *b = m->impl;
    float momentum = m->training ? snn_batchnorm_train_momentum(m) : b->momentum;
    return snn_batchnorm2d(x, m->params[BN_WEIGHT].tensor, m->params[BN_BIAS].tensor,
                           m->params[BN_RUNNING_MEAN].tensor, m->params[BN_RUNNING_VAR].tensor,
                           m->training, momentum, b->eps);
}

static void bn_free(snn_module *m) { snn_free(m->impl, sizeof(snn_batchnorm_impl), SNN_CPU); }

const snn_module_ops snn_batchnorm2d_ops = {"BatchNorm2d", bn_forward, bn_free, NULL};

snn_module *snn_batchnorm2d_new(int channels)
{
    if (channels < 1)
        return snn_error_null(SNN_ERR_ARGUMENT, "snn_batchnorm2d_new: bad argument 'channels' "
                              "(expected >= 1, got %d)", channels);
    snn_batchnorm_impl *b = snn_alloc(sizeof *b, SNN_CPU);
    if (!b) return snn_error_null(SNN_ERR_MEMORY, "snn_batchnorm2d_new: out of host memory");
    *b = (snn_batchnorm_impl){.momentum = 0.1f, .eps = 1e-5f};
    snn_module *m = snn_module_new(&snn_batchnorm2d_ops, b);
    if (!m) {
        snn_free(b, sizeof *b, SNN_CPU);
        return NULL;
    }
    const char *names[BN_TENSORS] = {"weight", "bias", "running_mean", "running_var",
                                     "num_batches_tracked"};
    float init[BN_TENSORS] = {1.0f, 0.0f, 0.0f, 1.0f, 0.0f};
    for (int i = 0; i < BN_TENSORS; i++) {
        snn_tensor *t = snn_tensor_new(i == BN_BATCHES_TRACKED ? SNN_SHAPE(1) : SNN_SHAPE(channels),
                                       SNN_CPU);
        if (!t) {
            snn_module_free(m);
            return NULL;
        }
        snn_tensor_fill(t, init[i]);
        snn_module_add_param(m, names[i], t, i < BN_RUNNING_MEAN);
    }
    return m;
}
