/*
 * run_config.h - what a program runs, chosen and said before it runs: the CPU's kernel set from
 * --kernels (the fast kernels or the plain-loop reference, snn_set_kernels), and the model's
 * configuration in a few lines (kind and size, the neuron with every constant, the surrogate
 * and its alpha, T and the encoding) with the device, precision, kernels and threads. snn-train
 * prints them at start-up (with its training lines, app/train_options.h), snn-eval for the
 * model it read from a checkpoint, so a run's numbers never depend on a default unseen.
 */
#ifndef SNN_APP_RUN_CONFIG_H
#define SNN_APP_RUN_CONFIG_H

#include <stdio.h>

#include "snn.h"

/* --kernels `kernels` ("fast" or "ref") for a run on `device_name`: selects the CPU's kernel
 * set; NULL (no --kernels) leaves the library's choice, $SNN_KERNELS or else fast. 0, or 2 (a
 * bad command line) with a message: an unknown set, or ref with --device cuda (the reference
 * kernels run on the CPU only). A device name that does not parse is left to the program's own
 * check. */
int run_kernels_select(const char *program, const char *kernels, const char *device_name);

/* Prints the configuration of `model` (built by snn_model_new or read from a checkpoint), one
 * "<indent><key> <value>" line for each of: model, neurons, surrogate, time steps. */
void run_config_print_model(FILE *out, const char *indent, snn_module *model);

/* Prints one line: the device, its precision, the kernels that run there (on the CPU the set
 * snn_get_kernels names) and the CPU threads. */
void run_config_print_device(FILE *out, const char *indent, snn_device device,
                             snn_precision precision);

#endif /* SNN_APP_RUN_CONFIG_H */
