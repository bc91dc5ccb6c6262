/*
 * evaluate.h - a model over a whole test set, in eval mode and without a tape: accuracy, the
 * summed cross-entropy, the firing rate of every neuron layer and, optionally, a confusion
 * matrix and one predicted class per line (snn-train after each epoch, snn-eval).
 */
#ifndef SNN_APP_EVALUATE_H
#define SNN_APP_EVALUATE_H

#include <signal.h>
#include <stdint.h>
#include <stdio.h>

#include "snn.h"

/* The most neuron layers whose firing rates a program reports. */
#define MAX_LAYERS 64

typedef struct eval_result {
    int64_t correct, total;
    double loss_sum;                      /* cross-entropy summed over samples */
    int n_layers;
    const char *layer_names[MAX_LAYERS];
    double spikes[MAX_LAYERS];            /* spike count per layer over the set */
    double elements[MAX_LAYERS];          /* neuron-steps per layer over the set */
    int classes;
    int64_t *confusion;                   /* (classes, classes): [true][predicted], optional */
    FILE *predictions;                    /* optional: one predicted class per line */
} eval_result;

/* correct / total, or 0 for an empty set. */
double eval_accuracy(const eval_result *r);

/* A program that stops on signals (app/run_signals.h) points this at its flag: evaluate() then
 * returns between two batches once it is set, and the program drops that partial result. */
extern volatile sig_atomic_t *evaluate_stop_flag;

/* Runs the model over the whole loader in eval mode without a tape, adding into *r (zero it
 * first); the model is left in eval mode. Returns SNN_OK or the first error. */
snn_status evaluate(snn_module *model, snn_loader *loader, snn_device device, eval_result *r);

#endif /* SNN_APP_EVALUATE_H */
