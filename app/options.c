/*
 * options.c - parse_options (options.h): argv against a table of flags, and the --help that
 * prints the table with each flag's current value as its default.
 */
#include "app/options.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* usage line, summary, then one line per flag: name, help, [default] */
static void print_help(FILE *out, const char *program, const char *summary, const option *opts,
                       int n)
{
    fprintf(out, "usage: %s [options]\n%s\n\noptions (default in brackets):\n", program, summary);
    for (int i = 0; i < n; i++) {
        char def[96] = "";
        const void *v = opts[i].value;
        switch (opts[i].type) {
        case OPT_INT: snprintf(def, sizeof def, "%d", *(const int *)v); break;
        case OPT_FLOAT: snprintf(def, sizeof def, "%g", (double)*(const float *)v); break;
        case OPT_STRING: {
            const char *s = *(const char *const *)v;
            snprintf(def, sizeof def, "%s", s ? s : "none");
            break;
        }
        case OPT_FLAG: snprintf(def, sizeof def, "%s", *(const bool *)v ? "on" : "off"); break;
        }
        fprintf(out, "  %-18s %s [%s]\n", opts[i].name, opts[i].help, def);
    }
    fprintf(out, "  %-18s show this help\n", "--help");
}

int parse_options(int argc, char **argv, const char *summary, option *opts, int n)
{
    for (int a = 1; a < argc; a++) {
        if (strcmp(argv[a], "--help") == 0 || strcmp(argv[a], "-h") == 0) {
            print_help(stdout, argv[0], summary, opts, n);
            return 2;
        }
        int i = 0;
        while (i < n && strcmp(argv[a], opts[i].name) != 0) i++;
        if (i == n) {
            fprintf(stderr, "%s: unknown option '%s'; see --help\n", argv[0], argv[a]);
            return 1;
        }
        if (opts[i].type == OPT_FLAG) {
            *(bool *)opts[i].value = true;
            continue;
        }
        if (a + 1 >= argc) {
            fprintf(stderr, "%s: option '%s' needs a value; see --help\n", argv[0], argv[a]);
            return 1;
        }
        const char *v = argv[++a];
        char *end = NULL;
        errno = 0;
        if (opts[i].type == OPT_INT) {
            long x = strtol(v, &end, 10);
            if (*v == '\0' || *end || errno || x < -2147483647L || x > 2147483647L) {
                fprintf(stderr, "%s: option '%s' expects an integer, got '%s'\n", argv[0],
                        opts[i].name, v);
                return 1;
            }
            *(int *)opts[i].value = (int)x;
        } else if (opts[i].type == OPT_FLOAT) {
            float x = strtof(v, &end);
            if (*v == '\0' || *end || errno) {
                fprintf(stderr, "%s: option '%s' expects a number, got '%s'\n", argv[0],
                        opts[i].name, v);
                return 1;
            }
            *(float *)opts[i].value = x;
        } else {
            *(const char **)opts[i].value = v;
        }
    }
    return 0;
}
