/*
 * snn_nir_info.c - snn-nir-info: what a NIR graph file holds and how snn.c would run it: the
 * time step dt (the file's, or --dt), T, whether the graph is recurrent, every node with its
 * type, input and output shapes and parameters in the order snn.c runs them, and every edge
 * (the back edges of cycles marked). A graph snn.c refuses is printed as far as it reads, then
 * the reason, naming the node (exit 1). docs/nir.md says what is read and how.
 *
 *   build/bin/snn-nir-info ../shared/fixtures/nir/rlif.nir
 *   build/bin/snn-nir-info model.nir --dt 1e-3 --T 25
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/options.h"
#include "app/program.h"
#include "snn.h"
#ifdef SNN_WITH_NIR
#include "nir/nir.h"
#endif

int main(int argc, char **argv)
{
#ifndef SNN_WITH_NIR
    (void)argc;
    (void)argv;
    fprintf(stderr, "snn-nir-info: this build has no NIR support (it needs the HDF5 C library, "
            "Debian libhdf5-dev; configure again once it is installed)\n");
    return 1;
#else
    const char *file = NULL, *dt_text = NULL;
    int time_steps = 0;
    option table[] = {
        {"--file", OPT_STRING, &file, "the NIR graph (HDF5); or give it as the first argument"},
        {"--dt", OPT_STRING, &dt_text, "the time step, in the graph's unit (none: the file's "
         "metadata dt)"},
        {"--T", OPT_INT, &time_steps, "time steps for inputs without a time axis (0: the file's)"},
    };
    /* the file may come first, without a flag: take it out of argv for the table's parser */
    char **args = malloc((size_t)(argc + 1) * sizeof *args);
    if (!args) return 1;
    int count = 0;
    for (int a = 0; a < argc; a++) {
        if (a == 1 && argv[a][0] != '-') file = argv[a];
        else args[count++] = argv[a];
    }
    args[count] = NULL;
    int parsed = parse_options(count, args, "Prints a NIR graph's nodes, shapes, edges and dt "
                               "as snn.c reads it:\n  snn-nir-info FILE [--dt DT] [--T T]", table,
                               (int)(sizeof table / sizeof table[0]));
    free(args);
    if (parsed) return parsed == 2 ? 0 : 2;
    snn_nir_options options = snn_nir_options_default();
    options.time_steps = time_steps;
    if (dt_text) {
        char *end = NULL;
        options.dt = strtod(dt_text, &end);
        if (*dt_text == '\0' || *end || !(options.dt > 0.0)) {
            fprintf(stderr, "snn-nir-info: --dt expects a time step > 0, got '%s'\n", dt_text);
            return 2;
        }
    }
    if (!file || time_steps < 0) {
        fprintf(stderr, "snn-nir-info: %s; see --help\n", file ? "--T must be >= 0"
                : "give the NIR file (snn-nir-info FILE)");
        return 2;
    }
    int status = 0;
    if (snn_nir_describe(file, &options, stdout) != SNN_OK) {
        fflush(stdout);
        fprintf(stderr, "snn-nir-info: %s\n", snn_last_error());
        status = 1;
    }
    if (status == 0) status = finish_stdout("snn-nir-info");
    snn_shutdown();
    return status;
#endif
}
