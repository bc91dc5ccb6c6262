/*
 * zip_write.c - writes a ZIP archive (the mirror of zip.c): for each member a local header and
 * its raw-deflate data (method 8), then the central directory and the end record. Used by
 * snn-make-nmnist (an N-MNIST look-alike Train.zip / Test.zip) and by the tests that build event
 * archives of their own. Members are compressed whole in memory, so every size and the CRC-32
 * are known before the local header is written (no data descriptors). At most 65534 members.
 * The archive is written to "<path>.tmp" and renamed at close, so it appears whole or not at all.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "data_internal.h"
#include "tensor/error.h"

static void put16(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static void put32(uint8_t *p, uint32_t v)
{
    put16(p, v & 0xFFFF);
    put16(p + 2, v >> 16);
}

snn_status snn_zip_writer_open(snn_zip_writer *w, const char *path)
{
    memset(w, 0, sizeof *w);
    snprintf(w->path, sizeof w->path, "%s", path);
    int n = snprintf(w->tmp_path, sizeof w->tmp_path, "%s.tmp", path);
    if (n < 0 || (size_t)n >= sizeof w->tmp_path)
        return snn_error(SNN_ERR_ARGUMENT, "snn_zip_writer_open: path '%s' too long", path);
    w->file = fopen(w->tmp_path, "wb");
    if (!w->file) return snn_error(SNN_ERR_IO, "cannot create '%s': %s", w->tmp_path, strerror(errno));
    return SNN_OK;
}

static snn_status write_all(snn_zip_writer *w, const void *data, size_t n)
{
    if (n && fwrite(data, 1, n, w->file) != n)
        return snn_error(SNN_ERR_IO, "'%s': write error: %s", w->tmp_path, strerror(errno));
    w->offset += n;
    return SNN_OK;
}

snn_status snn_zip_writer_add(snn_zip_writer *w, const char *name, const void *data, size_t size)
{
    size_t name_len = strlen(name);
    if (name_len == 0 || name_len >= sizeof w->entries[0].name || size >= ((size_t)1 << 31))
        return snn_error(SNN_ERR_ARGUMENT, "snn_zip_writer_add: bad member '%s' (expected a "
                         "name of 1..%zu characters and less than 2 GiB)", name,
                         sizeof w->entries[0].name - 1);
    if (w->offset >= ((uint64_t)1 << 32) - 1 || w->count >= 65534)
        return snn_error(SNN_ERR_ARGUMENT, "snn_zip_writer_add: '%s' is full (a plain zip holds "
                         "fewer than 65535 members and 4 GiB)", w->path);
    if (w->count == w->capacity) {
        int64_t grown = w->capacity ? 2 * w->capacity : 64;
        snn_zip_entry *e = snn_alloc((size_t)grown * sizeof *e, SNN_CPU);
        if (!e) return snn_error(SNN_ERR_MEMORY, "snn_zip_writer_add: out of memory");
        if (w->count) memcpy(e, w->entries, (size_t)w->count * sizeof *e);
        snn_free(w->entries, (size_t)w->capacity * sizeof *e, SNN_CPU);
        w->entries = e;
        w->capacity = grown;
    }
    /* Deflate the whole member (raw: windowBits -15, no wrapper). */
    z_stream s;
    memset(&s, 0, sizeof s);
    s.zalloc = snn_zlib_alloc;
    s.zfree = snn_zlib_free;
    if (deflateInit2(&s, Z_DEFAULT_COMPRESSION, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return snn_error(SNN_ERR_MEMORY, "snn_zip_writer_add: cannot start deflate");
    size_t bound = (size_t)deflateBound(&s, (uLong)size);
    uint8_t *packed = snn_alloc(bound, SNN_CPU);
    if (!packed) {
        deflateEnd(&s);
        return snn_error(SNN_ERR_MEMORY, "snn_zip_writer_add: out of memory for '%s'", name);
    }
    s.next_in = (Bytef *)data;
    s.avail_in = (uInt)size;
    s.next_out = packed;
    s.avail_out = (uInt)bound;
    int ret = deflate(&s, Z_FINISH);
    size_t compressed = s.total_out;
    deflateEnd(&s);
    snn_status st = SNN_OK;
    if (ret != Z_STREAM_END)
        st = snn_error(SNN_ERR_IO, "snn_zip_writer_add: deflate of '%s' failed (zlib %d)", name, ret);

    snn_zip_entry *e = &w->entries[w->count];
    memset(e, 0, sizeof *e);
    memcpy(e->name, name, name_len + 1);
    e->method = 8;
    e->crc = (uint32_t)crc32(crc32(0L, Z_NULL, 0), data, (uInt)size);
    e->compressed = (uint32_t)compressed;
    e->size = (uint32_t)size;
    e->offset = w->offset;
    uint8_t h[30] = {0};
    put32(h, 0x04034b50u);
    put16(h + 4, 20);          /* version needed: 2.0 (deflate) */
    put16(h + 8, e->method);
    put32(h + 14, e->crc);
    put32(h + 18, e->compressed);
    put32(h + 22, e->size);
    put16(h + 26, (uint32_t)name_len);
    if (st == SNN_OK) st = write_all(w, h, sizeof h);
    if (st == SNN_OK) st = write_all(w, name, name_len);
    if (st == SNN_OK) st = write_all(w, packed, compressed);
    snn_free(packed, bound, SNN_CPU);
    if (st == SNN_OK) w->count++;
    return st;
}

snn_status snn_zip_writer_close(snn_zip_writer *w)
{
    snn_status st = SNN_OK;
    uint64_t dir_start = w->offset;
    for (int64_t i = 0; i < w->count && st == SNN_OK; i++) {
        const snn_zip_entry *e = &w->entries[i];
        size_t name_len = strlen(e->name);
        uint8_t r[46] = {0};
        put32(r, 0x02014b50u);
        put16(r + 4, 20);      /* made by: MS-DOS/FAT attributes, spec 2.0 */
        put16(r + 6, 20);
        put16(r + 10, e->method);
        put32(r + 16, e->crc);
        put32(r + 20, e->compressed);
        put32(r + 24, e->size);
        put16(r + 28, (uint32_t)name_len);
        put32(r + 42, (uint32_t)e->offset);
        st = write_all(w, r, sizeof r);
        if (st == SNN_OK) st = write_all(w, e->name, name_len);
    }
    uint8_t end[22] = {0};
    put32(end, 0x06054b50u);
    put16(end + 8, (uint32_t)w->count);
    put16(end + 10, (uint32_t)w->count);
    put32(end + 12, (uint32_t)(w->offset - dir_start));
    put32(end + 16, (uint32_t)dir_start);
    if (st == SNN_OK) st = write_all(w, end, sizeof end);
    if (fclose(w->file) != 0 && st == SNN_OK)
        st = snn_error(SNN_ERR_IO, "'%s': close failed: %s", w->tmp_path, strerror(errno));
    w->file = NULL;
    if (st == SNN_OK && rename(w->tmp_path, w->path) != 0)
        st = snn_error(SNN_ERR_IO, "cannot rename '%s' to '%s': %s", w->tmp_path, w->path,
                       strerror(errno));
    if (st != SNN_OK) remove(w->tmp_path);
    snn_zip_writer_abort(w);
    return st;
}

void snn_zip_writer_abort(snn_zip_writer *w)
{
    if (w->file) {
        fclose(w->file);
        remove(w->tmp_path);
    }
    snn_free(w->entries, (size_t)w->capacity * sizeof *w->entries, SNN_CPU);
    w->entries = NULL;
    w->file = NULL;
    w->count = w->capacity = 0;
}
