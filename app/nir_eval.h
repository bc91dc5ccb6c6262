/*
 * nir_eval.h - snn-eval --nir FILE: a NIR graph (written by snn.c or by another framework) on
 * the test split of a data set, Fashion-MNIST by default: accuracy, loss and speed, with the
 * predictions on request. A graph whose Input is flat (F) gets the images flattened (a 1x28x28
 * image for 784 features). Its own flags (--help lists them); docs/nir.md describes it.
 */
#ifndef SNN_APP_NIR_EVAL_H
#define SNN_APP_NIR_EVAL_H

#include <stdbool.h>

/* True when the command line holds --nir: snn-eval then runs nir_eval_main instead. */
bool nir_eval_wanted(int argc, char **argv);

/* snn-eval --nir: parses argv (its own flags), evaluates, prints; returns the exit code (0, 1
 * for a failure, 2 for a bad command line). */
int nir_eval_main(const char *program, int argc, char **argv);

#endif /* SNN_APP_NIR_EVAL_H */
