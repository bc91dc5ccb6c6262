/*
 * tar_write.c - writes a gzip-compressed POSIX ustar archive (the mirror of tar.c): one
 * 512-byte header per member (octal fields, checksum), the data padded to 512, two zero blocks.
 * Used by snn_dataset_write_cifar10 and by the tests that build archives of their own.
 */
#include <stdio.h>
#include <string.h>

#include "data_internal.h"
#include "tensor/error.h"

#define TAR_BLOCK 512

snn_status snn_tar_writer_open(snn_tar_writer *w, const char *path)
{
    memset(w, 0, sizeof *w);
    snn_status st = snn_gz_writer_open(&w->gz, path, Z_DEFAULT_COMPRESSION);
    w->open = st == SNN_OK;
    return st;
}

/* Octal, zero-padded to len - 1 digits, NUL-terminated, as GNU tar writes it. */
static void put_octal(uint8_t *field, int len, uint64_t v)
{
    char tmp[32];
    snprintf(tmp, sizeof tmp, "%0*llo", len - 1, (unsigned long long)v);
    memcpy(field, tmp, (size_t)len - 1);
    field[len - 1] = '\0';
}

static snn_status write_header(snn_tar_writer *w, const char *name, uint64_t size, char type)
{
    size_t len = strlen(name);
    if (len == 0 || len > 100)
        return snn_error(SNN_ERR_ARGUMENT,
                         "snn_tar_writer: bad member name '%s' (expected 1..100 characters)",
                         name);
    if (size >= (uint64_t)1 << 33) /* 11 octal digits */
        return snn_error(SNN_ERR_ARGUMENT, "snn_tar_writer: member '%s' too large", name);
    uint8_t h[TAR_BLOCK];
    memset(h, 0, sizeof h);
    memcpy(h, name, len);
    put_octal(h + 100, 8, type == '5' ? 0755 : 0644);   /* mode */
    put_octal(h + 108, 8, 0);                           /* uid */
    put_octal(h + 116, 8, 0);                           /* gid */
    put_octal(h + 124, 12, size);
    put_octal(h + 136, 12, 0);                          /* mtime: fixed, for identical output */
    h[156] = (uint8_t)type;
    memcpy(h + 257, "ustar", 6);                        /* POSIX magic with its NUL */
    memcpy(h + 263, "00", 2);                           /* version */
    memset(h + 148, ' ', 8);
    unsigned sum = 0;
    for (int i = 0; i < TAR_BLOCK; i++) sum += h[i];
    /* Checksum: 6 octal digits, NUL, space. */
    char tmp[16];
    snprintf(tmp, sizeof tmp, "%06o", sum);
    memcpy(h + 148, tmp, 6);
    h[154] = '\0';
    h[155] = ' ';
    return snn_gz_writer_write(&w->gz, h, sizeof h);
}

snn_status snn_tar_writer_dir(snn_tar_writer *w, const char *name)
{
    return write_header(w, name, 0, '5');
}

snn_status snn_tar_writer_file(snn_tar_writer *w, const char *name, const void *data,
                               uint64_t size)
{
    snn_status st = write_header(w, name, size, '0');
    if (st == SNN_OK && size) st = snn_gz_writer_write(&w->gz, data, (size_t)size);
    static const uint8_t zeros[TAR_BLOCK];
    size_t pad = (size_t)((TAR_BLOCK - size % TAR_BLOCK) % TAR_BLOCK);
    if (st == SNN_OK && pad) st = snn_gz_writer_write(&w->gz, zeros, pad);
    return st;
}

snn_status snn_tar_writer_close(snn_tar_writer *w)
{
    if (!w->open) return SNN_OK;
    static const uint8_t zeros[2 * TAR_BLOCK];
    snn_status st = snn_gz_writer_write(&w->gz, zeros, sizeof zeros);
    w->open = false;
    if (st != SNN_OK) {
        snn_gz_writer_abort(&w->gz);
        return st;
    }
    return snn_gz_writer_close(&w->gz);
}

void snn_tar_writer_abort(snn_tar_writer *w)
{
    if (w->open) snn_gz_writer_abort(&w->gz);
    w->open = false;
}
