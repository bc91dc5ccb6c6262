/*
 * train_segments.h - one BPTT training step with checkpoints over time: the T steps run
 * forward in segments of K without a tape, keeping only the neurons' state at each segment's
 * start; backward recomputes one segment at a time, from the last, with its tape
 * (docs/temporal.md). snn-train's --time-checkpoint K and bench_train_step's run it.
 */
#ifndef SNN_APP_TRAIN_SEGMENTS_H
#define SNN_APP_TRAIN_SEGMENTS_H

#include "snn.h"

typedef struct train_segments_options {
    int segment;             /* K: time steps per segment, 1 .. T */
    float label_smoothing;   /* of the cross-entropy of the time-mean logits */
} train_segments_options;

/* What segments cannot run: a model whose state lives outside its neuron layers (the recurrent
 * layers), event or converted inputs. SNN_OK or SNN_ERR_ARGUMENT naming `prog`. */
snn_status train_segments_check(const char *prog, snn_module *model, int segment);

/* One step on images x (N, C, H, W), labels y (N), inside the caller's step (as
 * train_online_step): zero_grad, the forward in segments, the loss CE(mean_t o[t], y), and its
 * backward segment by segment; the parameters' gradients are BPTT's through all T steps (each
 * segment's batch-norm statistics are over its K steps, as if it were the whole sequence).
 * Batch-norm's running statistics and the model's random stream end as one forward over the
 * segments leaves them. *logits (N, classes) and *loss: STEP tensors of the caller's step. */
snn_status train_segments_step(snn_module *model, snn_tensor *x, snn_tensor *y,
                               const train_segments_options *o, snn_tensor **logits,
                               snn_tensor **loss);

#endif /* SNN_APP_TRAIN_SEGMENTS_H */
