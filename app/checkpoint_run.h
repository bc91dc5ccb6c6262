/*
 * checkpoint_run.h - the common start of the programs that run a trained checkpoint (snn-eval,
 * snn-sparse, bench_sparse_threads): the device, the model loaded from the checkpoint, its
 * test split checked against the model's input and classes, a memory check, and the loader
 * configuration (no shuffle, no augmentation, the model's normalisation).
 */
#ifndef SNN_APP_CHECKPOINT_RUN_H
#define SNN_APP_CHECKPOINT_RUN_H

#include "snn.h"

typedef struct checkpoint_run {
    snn_device device;
    snn_module *model;
    snn_metadata meta;
    const snn_model_config *config;
    const char *dataset;       /* the flag's, or the one the checkpoint was trained on */
    snn_dataset test;          /* owns the images */
    snn_dataset view;          /* test, possibly shortened to --limit-test */
    snn_loader_config loader;  /* no shuffle, no augmentation, the model's normalisation */
} checkpoint_run;

/* Opens *r: device, model from the checkpoint, its test split (the flag's `dataset`, else the
 * one in the checkpoint's metadata), and the loader configuration; `threads` CPU threads.
 * Returns 0, or the program's exit code (2: bad flags, 1: a failure) with a message printed
 * and nothing held. */
int checkpoint_run_open(checkpoint_run *r, const char *program, const char *checkpoint,
                        const char *device_name, const char *dataset, const char *data,
                        int batch_size, int limit, int threads);

/* Frees what checkpoint_run_open holds and shuts the library down. */
void checkpoint_run_close(checkpoint_run *r);

#endif /* SNN_APP_CHECKPOINT_RUN_H */
