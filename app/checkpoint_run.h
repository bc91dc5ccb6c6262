/*
 * checkpoint_run.h - the common start of the programs that run a trained checkpoint (snn-eval,
 * snn-sparse, bench_sparse_threads): the device, the model loaded from the checkpoint, its
 * test split checked against the model's input and classes, a memory check, and the loader
 * configuration (no shuffle, no augmentation, the model's normalisation).
 */
#ifndef SNN_APP_CHECKPOINT_RUN_H
#define SNN_APP_CHECKPOINT_RUN_H

#include <stddef.h>

#include "snn.h"

typedef struct checkpoint_run {
    snn_device device;
    snn_module *model;
    snn_metadata meta;
    const snn_model_config *config;
    const char *dataset;       /* the flag's, or the one the checkpoint was trained on */
    char checkpoint[1024];     /* the file read (a run's folder: the checkpoint in it) */
    snn_dataset test;          /* owns the images */
    snn_dataset view;          /* test, possibly shortened to --limit-test */
    snn_loader_config loader;  /* no shuffle, no augmentation, the model's normalisation */
} checkpoint_run;

/* A checkpoint named by a run's folder: *path (a folder of snn-train, "runs/fashion-mnist-cnn")
 * becomes <folder>/checkpoint.safetensors, written into buf, with a note on standard error
 * that says so. The checkpoint, not best.safetensors: it is the run as it stands (the last
 * epoch, whose test accuracy metrics.csv and snn-train printed last), every run that finished
 * an epoch or was stopped has one, and it holds the moving average of --ema runs beside the
 * trained weights; best.safetensors is named in the note, to be given by its path. A path that
 * is not a folder is left as it is. 0, or 1 with a message for a folder without a checkpoint. */
int checkpoint_in_folder(const char *program, const char **path, char *buf, size_t size);

/* Opens *r: device, model from the checkpoint (a file, or a run's folder: checkpoint_in_folder), its test split (the flag's `dataset`, else the
 * one in the checkpoint's metadata), and the loader configuration; `threads` CPU threads.
 * Returns 0, or the program's exit code (2: bad flags, 1: a failure) with a message printed
 * and nothing held. */
int checkpoint_run_open(checkpoint_run *r, const char *program, const char *checkpoint,
                        const char *device_name, const char *dataset, const char *data,
                        int batch_size, int limit, int threads);

/* Frees what checkpoint_run_open holds and shuts the library down. */
void checkpoint_run_close(checkpoint_run *r);

#endif /* SNN_APP_CHECKPOINT_RUN_H */
