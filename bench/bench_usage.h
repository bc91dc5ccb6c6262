/*
 * bench_usage.h - `--help` for the benchmark programs that take positional arguments (threads,
 * images, a path). Each passes its usage; when any argument is --help or -h the program prints
 * it and exits 0 before measuring anything (a benchmark that took --help for a thread count ran
 * for minutes). Benchmarks with named options use the examples' option table instead
 * (app/options.h: parse_options, which prints --help from the table).
 */
#ifndef SNN_BENCH_USAGE_H
#define SNN_BENCH_USAGE_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static inline void bench_usage(int argc, char **argv, const char *usage)
{
    for (int a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "--help") || !strcmp(argv[a], "-h")) {
            printf("usage: %s %s\n", argv[0], usage);
            exit(0);
        }
    }
}

/* A positional count (threads, images, reps): a whole number >= 1, or exit 2 naming it. */
static inline int bench_count(const char *text, const char *what, const char *program)
{
    char *end = NULL;
    long v = strtol(text, &end, 10);
    if (!end || *end || end == text || v < 1 || v > 1 << 20) {
        fprintf(stderr, "%s: bad %s '%s' (expected a whole number >= 1); see --help\n", program,
                what, text);
        exit(2);
    }
    return (int)v;
}
#endif /* SNN_BENCH_USAGE_H */
