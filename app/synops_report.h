/*
 * synops_report.h - what snn-eval and snn-sparse print of a SynOps count (nn/synops.h): the
 * per-layer table with the energy estimate, the same as a CSV file, and snn-sparse's table of
 * the work the spikes need beside the speed-up the sparse convs measured. docs/synops.md says
 * what the columns mean.
 */
#ifndef SNN_APP_SYNOPS_REPORT_H
#define SNN_APP_SYNOPS_REPORT_H

#include <stdio.h>

#include "snn.h"

/* Prints, per image, each counted layer's input (spikes or real values, shape, T, the input's
 * firing rate), AC, MAC, the ANN equivalent's MAC and both energies, then the total. */
void synops_print(FILE *out, const snn_synops *count);

/* Writes the same table to the CSV file `path` (a header, one row per layer, a "total" row):
 * whole-set counts and per-image values. 0, or 1 with a message that names `program`, the
 * option --synops-csv and the path. */
int synops_write_csv(const char *program, const char *path, const snn_synops *count);

/* snn-sparse: for each conv the sparse pass swapped (report), the share of the dense run's
 * synaptic work its spikes need (AC / dense ops, from the count), the speed-up that share
 * would allow (its inverse), and the speed-ups calibration measured: the best sparse kernel's
 * and the chosen path's, and how much of the bound the chosen one reaches. */
void synops_print_sparse(FILE *out, const snn_synops *count, const snn_sparse_report *report);

#endif /* SNN_APP_SYNOPS_REPORT_H */
