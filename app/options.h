/*
 * options.h - a program's command line as a table (snn-train, snn-eval, snn-sparse, the
 * benchmarks with named flags): each entry names a flag, its type, the variable it sets and a
 * line of help. parse_options reads argv against the table; --help prints the table with each
 * flag's default read from its variable, so the help cannot disagree with the code.
 */
#ifndef SNN_APP_OPTIONS_H
#define SNN_APP_OPTIONS_H

#include <stdbool.h>

typedef enum option_type { OPT_INT, OPT_FLOAT, OPT_STRING, OPT_FLAG } option_type;

typedef struct option {
    const char *name;        /* "--epochs" */
    option_type type;
    void *value;             /* int*, float*, const char**, bool* */
    const char *help;
} option;

/* Reads argv[1..] against opts[0..n): a flag sets its bool, any other option takes the next
 * word. Returns 0 on success, 1 on a bad command line (message printed, naming the option and
 * what it expects), 2 when --help or -h was shown (usage, `summary`, then the table). */
int parse_options(int argc, char **argv, const char *summary, option *opts, int n);

#endif /* SNN_APP_OPTIONS_H */
