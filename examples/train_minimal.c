/*
 * train_minimal.c - the smallest complete training program, for reading: one epoch of a spiking
 * CNN on Fashion-MNIST, then its test accuracy. docs/tutorial.md walks through it line by line;
 * snn-train (examples/snn_train.c) is the full program with options, metrics and checkpoints.
 *
 *     build/bin/train-minimal            # about a minute on 2 CPU cores
 *
 * Glossary: T time steps, N batch, C channels, H x W image.
 */
#include <stdio.h>

#include "snn.h"

/* One pass over a loader; returns the accuracy. In training mode it also learns. */
static double run_epoch(snn_module *net, snn_optimizer *opt, snn_loader *loader, bool train)
{
    int64_t correct = 0, seen = 0;
    float predicted[256];
    snn_batch batch;
    snn_module_train(net, train);          /* batch-norm: batch statistics or running ones */
    if (!train) snn_no_grad_begin();       /* evaluation records no tape */
    while (snn_loader_next(loader, &batch)) {
        snn_step_begin();                  /* every tensor of this step lives until step_end */
        snn_tensor *images, *labels;       /* (N, 1, 28, 28) and (N) */
        snn_batch_to_device(&batch, SNN_CPU, &images, &labels);
        snn_tensor *logits = snn_module_forward(net, images);   /* (N, 10): mean over T */
        snn_tensor *loss = snn_cross_entropy(logits, labels);
        if (!loss) {
            fprintf(stderr, "train-minimal: %s\n", snn_last_error());
            snn_step_end();
            break;
        }
        if (train) {
            snn_module_zero_grad(net);
            snn_backward(loss);            /* BPTT through every neuron layer */
            snn_optimizer_step(opt);
        }
        snn_tensor_copy_to_host(snn_argmax(logits), predicted);
        for (int i = 0; i < batch.count; i++) correct += predicted[i] == batch.labels[i];
        seen += batch.count;
        snn_step_end();                    /* ...and here they are all released at once */
    }
    if (!train) snn_no_grad_end();
    return seen ? (double)correct / (double)seen : 0.0;
}

int main(void)
{
    /* the data: Fashion-MNIST from /usr/share/datasets (or $SNN_DATA_DIR) */
    snn_dataset train_set, test_set;
    if (snn_dataset_load("fashion-mnist", NULL, SNN_SPLIT_TRAIN, &train_set) != SNN_OK ||
        snn_dataset_load("fashion-mnist", NULL, SNN_SPLIT_TEST, &test_set) != SNN_OK) {
        fprintf(stderr, "train-minimal: %s\n", snn_last_error());
        return 1;
    }
    snn_loader_config lc = snn_loader_config_default();   /* batch 128, shuffled */
    snn_dataset_default_norm(&train_set, lc.mean, lc.std);
    snn_loader *train = snn_loader_new(&train_set, &lc);
    lc.shuffle = false;
    snn_loader *test = snn_loader_new(&test_set, &lc);

    /* the network: conv-BN-LIF-pool x2, fc-LIF, fc; LIF neurons with the ATan surrogate, T = 2 */
    snn_rng rng;
    snn_rng_seed(&rng, 0);
    snn_model_config cfg = snn_model_config_default(SNN_MODEL_SPIKING_CNN);
    cfg.time_steps = 2;
    snn_module *net = snn_model_new(&cfg, &rng);
    snn_module_print(net, stdout);
    snn_optimizer *opt = snn_adam_new(net, 1e-3f, 0.0f, false);

    double train_acc = run_epoch(net, opt, train, true);
    double test_acc = run_epoch(net, opt, test, false);
    printf("one epoch: train accuracy %.2f%%, test accuracy %.2f%%\n", 100 * train_acc, 100 * test_acc);

    snn_optimizer_free(opt);
    snn_module_free(net);
    snn_loader_free(test);
    snn_loader_free(train);
    snn_dataset_free(&test_set);
    snn_dataset_free(&train_set);
    snn_shutdown();
    return 0;
}
