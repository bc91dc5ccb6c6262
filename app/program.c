/*
 * program.c - the clock, the output folders and the checked standard output of program.h.
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

/* mkdir for one folder; 0 when it is there now, else errno (EEXIST: a file in the way) */
static int make_one(const char *path)
{
    struct stat st;
    if (mkdir(path, 0755) == 0) return 0;
    int error = errno;
    if (error == EEXIST) return stat(path, &st) == 0 && S_ISDIR(st.st_mode) ? 0 : EEXIST;
    return error;
}

int make_dirs(const char *program, const char *flag, const char *path)
{
    char prefix[4096];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof prefix) {
        fprintf(stderr, "%s: %s '%s': expected a folder name of 1 to %zu characters\n", program,
                flag, path, sizeof prefix - 1);
        return 1;
    }
    /* each folder from the top down: "a", "a/b", "a/b/c" (a leading '/' is no folder of its own) */
    for (size_t end = 1; end <= n; end++) {
        if (end < n && path[end] != '/') continue;
        if (path[end - 1] == '/') continue; /* "a//b" */
        memcpy(prefix, path, end);
        prefix[end] = '\0';
        int error = make_one(prefix);
        if (error == EEXIST) {
            fprintf(stderr, "%s: %s %s: cannot create folder '%s': a file of that name is in the "
                    "way\n", program, flag, path, prefix);
            return 1;
        }
        if (error) {
            fprintf(stderr, "%s: %s %s: cannot create folder '%s': %s\n", program, flag, path,
                    prefix, strerror(error));
            return 1;
        }
    }
    return 0;
}

int finish_stdout(const char *program)
{
    if (fflush(stdout) == 0 && !ferror(stdout)) return 0;
    fprintf(stderr, "%s: cannot write the results to standard output: %s\n", program,
            errno ? strerror(errno) : "write error");
    return 1;
}
