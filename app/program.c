/*
 * program.c - the clock, the output folder and the checked standard output of program.h.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include "app/program.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int make_dir(const char *path)
{
    struct stat st;
    if (mkdir(path, 0755) == 0) return 0;
    if (errno == EEXIST && stat(path, &st) == 0 && S_ISDIR(st.st_mode)) return 0;
    if (errno == EEXIST)
        fprintf(stderr, "cannot use '%s' as a folder: a file of that name is in the way\n", path);
    else
        fprintf(stderr, "cannot create folder '%s': %s\n", path, strerror(errno));
    return 1;
}

int finish_stdout(const char *program)
{
    if (fflush(stdout) == 0 && !ferror(stdout)) return 0;
    fprintf(stderr, "%s: cannot write the results to standard output: %s\n", program,
            errno ? strerror(errno) : "write error");
    return 1;
}
