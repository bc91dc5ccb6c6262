/*
 * test_data_util.h - small file helpers shared by the tests of data/ (test_data_*.c):
 * a temporary folder that is removed at the end, and writers for plain and gzip files.
 * The test programs define _XOPEN_SOURCE 700 before any include (mkdtemp, nftw, setenv).
 */
#ifndef SNN_TEST_DATA_UTIL_H
#define SNN_TEST_DATA_UTIL_H

#include <ftw.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "data/data.h"

/* Makes /tmp/snn_data_XXXXXX into dir (at least 64 bytes); aborts the test if it cannot. */
static inline void tmp_dir_make(char *dir)
{
    strcpy(dir, "/tmp/snn_data_XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        exit(EXIT_FAILURE);
    }
}

static inline int tmp_dir_remove_one(const char *path, const struct stat *sb, int flag,
                                     struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

/* Removes the folder and everything in it. */
static inline void tmp_dir_remove(const char *dir)
{
    nftw(dir, tmp_dir_remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* dir + "/" + name into buf (1024 bytes). */
static inline const char *tmp_path(char *buf, const char *dir, const char *name)
{
    size_t used = strlen(dir);
    memcpy(buf, dir, used + 1);
    if (used + 1 + strlen(name) < 1024) {
        buf[used] = '/';
        strcpy(buf + used + 1, name);
    }
    return buf;
}

static inline void write_bytes(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, n, f) != n || fclose(f) != 0) {
        perror(path);
        exit(EXIT_FAILURE);
    }
}

/* gzip-compressed with zlib's own gz writer (independent of data/'s writer). */
static inline void write_gz(const char *path, const void *data, size_t n)
{
    gzFile f = gzopen(path, "wb");
    if (!f || (n && gzwrite(f, data, (unsigned)n) != (int)n) || gzclose(f) != Z_OK) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(EXIT_FAILURE);
    }
}

/* The whole file in a malloc'd buffer (the caller frees); *n its size. */
static inline unsigned char *read_bytes(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        exit(EXIT_FAILURE);
    }
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc((size_t)size + 1);
    if (!buf || fread(buf, 1, (size_t)size, f) != (size_t)size) exit(EXIT_FAILURE);
    fclose(f);
    *n = (size_t)size;
    return buf;
}

/* True when a data set is fully empty (what every failed load must leave). */
static inline int dataset_is_empty(const snn_dataset *ds)
{
    return ds->images == NULL && ds->labels == NULL && ds->count == 0;
}

#endif /* SNN_TEST_DATA_UTIL_H */
