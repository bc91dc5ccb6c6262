/*
 * gzip_stream.c - a byte stream that reads a file or a memory block and, when the bytes start
 * with the gzip magic (1f 8b), inflates them on the fly; and its mirror, a gzip file writer.
 *
 * Every reader in data/ (IDX, tar, CIFAR records) pulls bytes through snn_stream_read, so they
 * handle plain and compressed files alike and never see the whole compressed file in memory:
 * raw bytes come in chunks of SNN_STREAM_CHUNK, inflate() turns them into the caller's buffer.
 *
 * What can go wrong, and what the caller hears (always naming the file):
 *   - the file cannot be opened or read          -> SNN_ERR_IO with strerror
 *   - the deflate data is invalid or its CRC-32 / length trailer disagrees
 *                                                -> SNN_ERR_FORMAT "corrupt gzip data (zlib: ...)"
 *   - the compressed data stops before the end   -> SNN_ERR_FORMAT "truncated gzip data"
 * Concatenated gzip members (gzip a; gzip b; cat) are read as one stream, as gunzip does;
 * bytes after the last member that are not another member are ignored, as gunzip does.
 * zlib allocates through snn_zlib_alloc, so snn_alloc_fail_after reaches it too.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "data_internal.h"
#include "tensor/error.h"

/* ---- zlib allocator: a 16-byte header in front of each block remembers its size ------------- */

#define ZLIB_HEADER 16

void *snn_zlib_alloc(void *opaque, unsigned items, unsigned size)
{
    (void)opaque;
    size_t bytes = (size_t)items * size + ZLIB_HEADER;
    uint8_t *p = snn_alloc(bytes, SNN_CPU);
    if (!p) return Z_NULL;
    memcpy(p, &bytes, sizeof bytes);
    return p + ZLIB_HEADER;
}

void snn_zlib_free(void *opaque, void *p)
{
    (void)opaque;
    if (!p) return;
    uint8_t *block = (uint8_t *)p - ZLIB_HEADER;
    size_t bytes;
    memcpy(&bytes, block, sizeof bytes);
    snn_free(block, bytes, SNN_CPU);
}

/* ---- reading ------------------------------------------------------------------------------- */

static void set_name(char *dst, size_t size, const char *name)
{
    snprintf(dst, size, "%s", name ? name : "(unnamed)");
}

/* Makes raw bytes available (raw_left > 0) unless the source is exhausted (raw_end). */
static snn_status refill(snn_stream *s)
{
    if (s->raw_left > 0 || s->raw_end) return SNN_OK;
    if (!s->file) {
        s->raw_end = true;
        return SNN_OK;
    }
    size_t n = fread(s->chunk, 1, SNN_STREAM_CHUNK, s->file);
    if (n == 0) {
        if (ferror(s->file))
            return snn_error(SNN_ERR_IO, "'%s': read error: %s", s->name, strerror(errno));
        s->raw_end = true;
    }
    s->raw = s->chunk;
    s->raw_left = n;
    return SNN_OK;
}

/* Looks at the first two bytes; starts inflate when they are the gzip magic. */
static snn_status start(snn_stream *s)
{
    snn_status st = refill(s);
    if (st != SNN_OK) return st;
    s->gzip = s->raw_left >= 2 && s->raw[0] == 0x1f && s->raw[1] == 0x8b;
    if (!s->gzip) return SNN_OK;
    memset(&s->z, 0, sizeof s->z);
    s->z.zalloc = snn_zlib_alloc;
    s->z.zfree = snn_zlib_free;
    /* 16 + MAX_WBITS: expect the gzip wrapper and check its CRC-32 and length. */
    int ret = inflateInit2(&s->z, 16 + MAX_WBITS);
    if (ret != Z_OK) {
        return snn_error(ret == Z_MEM_ERROR ? SNN_ERR_MEMORY : SNN_ERR_FORMAT,
                         "'%s': cannot start gzip decoding (zlib error %d)", s->name, ret);
    }
    s->z_ready = true;
    return SNN_OK;
}

snn_status snn_stream_open_file(snn_stream *s, const char *path)
{
    memset(s, 0, sizeof *s);
    set_name(s->name, sizeof s->name, path);
    s->file = fopen(path, "rb");
    if (!s->file)
        return snn_error(SNN_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    s->chunk = snn_alloc(SNN_STREAM_CHUNK, SNN_CPU);
    if (!s->chunk) {
        snn_stream_close(s);
        return snn_error(SNN_ERR_MEMORY, "'%s': out of memory for a %d-byte read buffer", path,
                         SNN_STREAM_CHUNK);
    }
    snn_status st = start(s);
    if (st != SNN_OK) snn_stream_close(s);
    return st;
}

snn_status snn_stream_open_memory(snn_stream *s, const void *data, size_t size, const char *name)
{
    memset(s, 0, sizeof *s);
    set_name(s->name, sizeof s->name, name);
    s->raw = data;
    s->raw_left = data ? size : 0;
    snn_status st = start(s);
    if (st != SNN_OK) snn_stream_close(s);
    return st;
}

void snn_stream_close(snn_stream *s)
{
    if (s->z_ready) inflateEnd(&s->z);
    if (s->file) fclose(s->file);
    snn_free(s->chunk, SNN_STREAM_CHUNK, SNN_CPU);
    memset(s, 0, sizeof *s);
}

/* After a gzip member ends: another member follows only if the next bytes are the magic. */
static snn_status next_member(snn_stream *s)
{
    snn_status st = refill(s);
    if (st != SNN_OK) return st;
    if (s->raw_left >= 2 && s->raw[0] == 0x1f && s->raw[1] == 0x8b) {
        inflateReset(&s->z);
        return SNN_OK;
    }
    s->done = true; /* end of data, or trailing garbage that gunzip ignores too */
    return SNN_OK;
}

static snn_status inflate_some(snn_stream *s, uint8_t *out, size_t n, size_t *got)
{
    *got = 0;
    while (*got < n && !s->done) {
        snn_status st = refill(s);
        if (st != SNN_OK) return st;
        /* inflate counts in uInt; feed at most 1 GiB at a time. */
        size_t in_now = s->raw_left < (1u << 30) ? s->raw_left : (1u << 30);
        size_t out_now = n - *got < (1u << 30) ? n - *got : (1u << 30);
        s->z.next_in = (Bytef *)s->raw;
        s->z.avail_in = (uInt)in_now;
        s->z.next_out = out + *got;
        s->z.avail_out = (uInt)out_now;
        int ret = inflate(&s->z, Z_NO_FLUSH);
        size_t used = in_now - s->z.avail_in;
        size_t made = out_now - s->z.avail_out;
        s->raw += used;
        s->raw_left -= used;
        *got += made;
        if (ret == Z_STREAM_END) {
            st = next_member(s);
            if (st != SNN_OK) return st;
        } else if (ret == Z_DATA_ERROR || ret == Z_NEED_DICT) {
            return snn_error(SNN_ERR_FORMAT,
                             "'%s': corrupt gzip data after %llu bytes of output (zlib: %s); "
                             "expected a valid gzip file",
                             s->name, (unsigned long long)(s->position + *got),
                             s->z.msg ? s->z.msg : "invalid data");
        } else if (ret == Z_MEM_ERROR) {
            return snn_error(SNN_ERR_MEMORY, "'%s': out of memory while inflating", s->name);
        } else if (ret != Z_OK && ret != Z_BUF_ERROR) {
            return snn_error(SNN_ERR_FORMAT, "'%s': gzip decoding failed (zlib error %d)",
                             s->name, ret);
        } else if (used == 0 && made == 0) {
            /* No progress although refill() gave input if there was any: the compressed data
             * has run out before the end of the gzip member. */
            if (s->raw_left == 0)
                return snn_error(SNN_ERR_FORMAT,
                                 "'%s': truncated gzip data (the compressed stream ends after "
                                 "%llu bytes of output; expected its end marker and trailer)",
                                 s->name, (unsigned long long)(s->position + *got));
            return snn_error(SNN_ERR_FORMAT, "'%s': gzip decoding made no progress (zlib %d)",
                             s->name, ret);
        }
    }
    return SNN_OK;
}

snn_status snn_stream_read(snn_stream *s, void *buf, size_t n, size_t *got)
{
    uint8_t *out = buf;
    *got = 0;
    snn_status st = SNN_OK;
    if (s->gzip) {
        st = inflate_some(s, out, n, got);
    } else {
        while (*got < n) {
            st = refill(s);
            if (st != SNN_OK || s->raw_left == 0) break;
            size_t take = n - *got < s->raw_left ? n - *got : s->raw_left;
            memcpy(out + *got, s->raw, take);
            s->raw += take;
            s->raw_left -= take;
            *got += take;
        }
        if (*got < n && st == SNN_OK) s->done = true;
    }
    s->position += *got;
    return st;
}

snn_status snn_stream_read_exact(snn_stream *s, void *buf, size_t n, const char *what)
{
    size_t got;
    uint64_t before = s->position;
    snn_status st = snn_stream_read(s, buf, n, &got);
    if (st != SNN_OK) return st;
    if (got < n)
        return snn_error(SNN_ERR_FORMAT,
                         "'%s': truncated: expected %zu bytes of %s at offset %llu, the data "
                         "ends after %zu",
                         s->name, n, what, (unsigned long long)before, got);
    return SNN_OK;
}

snn_status snn_stream_read_alloc(snn_stream *s, uint64_t n, uint8_t **out, const char *what)
{
    *out = NULL;
    if (n > SNN_DATA_MAX_BYTES)
        return snn_error(SNN_ERR_FORMAT, "'%s': %s claims %llu bytes (expected at most %llu)",
                         s->name, what, (unsigned long long)n,
                         (unsigned long long)SNN_DATA_MAX_BYTES);
    /* Grow by doubling from 1 MiB: a lying header costs at most twice the real data. */
    uint64_t capacity = n < (1u << 20) ? n : (1u << 20);
    uint64_t have = 0;
    uint8_t *buf = snn_alloc((size_t)capacity, SNN_CPU);
    if (!buf) goto out_of_memory;
    uint64_t start_position = s->position;
    while (have < n) {
        if (have == capacity) {
            uint64_t bigger = capacity * 2 < n ? capacity * 2 : n;
            uint8_t *grown = snn_alloc((size_t)bigger, SNN_CPU);
            if (!grown) {
                snn_free(buf, (size_t)capacity, SNN_CPU);
                goto out_of_memory;
            }
            memcpy(grown, buf, (size_t)have);
            snn_free(buf, (size_t)capacity, SNN_CPU);
            buf = grown;
            capacity = bigger;
        }
        size_t want = (size_t)(capacity - have), got;
        snn_status st = snn_stream_read(s, buf + have, want, &got);
        have += got;
        if (st == SNN_OK && got < want) {
            st = snn_error(SNN_ERR_FORMAT,
                           "'%s': truncated: expected %llu bytes of %s at offset %llu, the data "
                           "ends after %llu",
                           s->name, (unsigned long long)n, what,
                           (unsigned long long)start_position, (unsigned long long)have);
        }
        if (st != SNN_OK) {
            snn_free(buf, (size_t)capacity, SNN_CPU);
            return st;
        }
    }
    SNN_ASSERT(capacity == n);
    *out = buf;
    return SNN_OK;
out_of_memory:
    return snn_error(SNN_ERR_MEMORY, "'%s': out of memory for %llu bytes of %s", s->name,
                     (unsigned long long)n, what);
}

snn_status snn_stream_read_all(snn_stream *s, uint64_t limit, uint8_t **out, uint64_t *size,
                               uint64_t *capacity)
{
    *out = NULL;
    *size = *capacity = 0;
    uint64_t cap = 1u << 20, have = 0;
    uint8_t *buf = snn_alloc((size_t)cap, SNN_CPU);
    if (!buf) return snn_error(SNN_ERR_MEMORY, "'%s': out of memory reading the file", s->name);
    for (;;) {
        if (have == cap) {
            if (cap > limit) {
                snn_free(buf, (size_t)cap, SNN_CPU);
                return snn_error(SNN_ERR_FORMAT, "'%s': more than %llu bytes (expected less)",
                                 s->name, (unsigned long long)limit);
            }
            uint8_t *grown = snn_alloc((size_t)cap * 2, SNN_CPU);
            if (!grown) {
                snn_free(buf, (size_t)cap, SNN_CPU);
                return snn_error(SNN_ERR_MEMORY, "'%s': out of memory reading the file", s->name);
            }
            memcpy(grown, buf, (size_t)have);
            snn_free(buf, (size_t)cap, SNN_CPU);
            buf = grown;
            cap *= 2;
        }
        size_t got;
        snn_status st = snn_stream_read(s, buf + have, (size_t)(cap - have), &got);
        if (st != SNN_OK) {
            snn_free(buf, (size_t)cap, SNN_CPU);
            return st;
        }
        have += got;
        if (have < cap) break; /* a short read only happens at the end */
    }
    if (have > limit) {
        snn_free(buf, (size_t)cap, SNN_CPU);
        return snn_error(SNN_ERR_FORMAT, "'%s': more than %llu bytes (expected less)", s->name,
                         (unsigned long long)limit);
    }
    *out = buf;
    *size = have;
    *capacity = cap;
    return SNN_OK;
}

snn_status snn_stream_skip(snn_stream *s, uint64_t n, const char *what)
{
    uint8_t scratch[4096];
    while (n > 0) {
        size_t want = n < sizeof scratch ? (size_t)n : sizeof scratch;
        snn_status st = snn_stream_read_exact(s, scratch, want, what);
        if (st != SNN_OK) return st;
        n -= want;
    }
    return SNN_OK;
}

snn_status snn_stream_drain(snn_stream *s)
{
    uint8_t scratch[4096];
    size_t got;
    do {
        snn_status st = snn_stream_read(s, scratch, sizeof scratch, &got);
        if (st != SNN_OK) return st;
    } while (got == sizeof scratch);
    return SNN_OK;
}

snn_status snn_stream_expect_end(snn_stream *s, const char *what)
{
    uint8_t extra[256];
    size_t got;
    uint64_t at = s->position;
    snn_status st = snn_stream_read(s, extra, sizeof extra, &got);
    if (st != SNN_OK) return st;
    if (got == 0) return SNN_OK;
    return snn_error(SNN_ERR_FORMAT,
                     "'%s': %s bytes after offset %llu (expected the data to end with %s)",
                     s->name, got == sizeof extra ? "extra" : "stray", (unsigned long long)at,
                     what);
}

/* ---- writing ------------------------------------------------------------------------------- */

snn_status snn_gz_writer_open(snn_gz_writer *w, const char *path, int level)
{
    memset(w, 0, sizeof *w);
    set_name(w->path, sizeof w->path, path);
    w->chunk = snn_alloc(SNN_STREAM_CHUNK, SNN_CPU);
    if (!w->chunk) return snn_error(SNN_ERR_MEMORY, "'%s': out of memory for a write buffer", path);
    w->z.zalloc = snn_zlib_alloc;
    w->z.zfree = snn_zlib_free;
    /* 16 + MAX_WBITS: write the gzip wrapper (header, CRC-32, length). */
    int ret = deflateInit2(&w->z, level, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
    if (ret != Z_OK) {
        snn_gz_writer_abort(w);
        return snn_error(ret == Z_MEM_ERROR ? SNN_ERR_MEMORY : SNN_ERR_ARGUMENT,
                         "'%s': cannot start gzip compression (zlib error %d)", path, ret);
    }
    w->z_ready = true;
    w->file = fopen(path, "wb");
    if (!w->file) {
        int err = errno;
        snn_gz_writer_abort(w);
        return snn_error(SNN_ERR_IO, "cannot create '%s': %s", path, strerror(err));
    }
    return SNN_OK;
}

static snn_status deflate_run(snn_gz_writer *w, int flush)
{
    for (;;) {
        w->z.next_out = w->chunk;
        w->z.avail_out = SNN_STREAM_CHUNK;
        int ret = deflate(&w->z, flush);
        size_t made = SNN_STREAM_CHUNK - w->z.avail_out;
        if (made && fwrite(w->chunk, 1, made, w->file) != made)
            return snn_error(SNN_ERR_IO, "'%s': write error: %s", w->path, strerror(errno));
        if (ret == Z_STREAM_END) return SNN_OK;
        if (ret != Z_OK && ret != Z_BUF_ERROR)
            return snn_error(SNN_ERR_IO, "'%s': gzip compression failed (zlib error %d)",
                             w->path, ret);
        /* Done with this input when deflate left room in the output. */
        if (flush == Z_NO_FLUSH && w->z.avail_in == 0 && w->z.avail_out > 0) return SNN_OK;
    }
}

snn_status snn_gz_writer_write(snn_gz_writer *w, const void *data, size_t n)
{
    const uint8_t *p = data;
    while (n > 0) {
        size_t now = n < (1u << 30) ? n : (1u << 30);
        w->z.next_in = (Bytef *)p;
        w->z.avail_in = (uInt)now;
        snn_status st = deflate_run(w, Z_NO_FLUSH);
        if (st != SNN_OK) return st;
        p += now;
        n -= now;
    }
    return SNN_OK;
}

snn_status snn_gz_writer_close(snn_gz_writer *w)
{
    w->z.next_in = NULL;
    w->z.avail_in = 0;
    snn_status st = deflate_run(w, Z_FINISH);
    if (st == SNN_OK && fflush(w->file) != 0)
        st = snn_error(SNN_ERR_IO, "'%s': write error: %s", w->path, strerror(errno));
    FILE *f = w->file;
    w->file = NULL;
    if (fclose(f) != 0 && st == SNN_OK)
        st = snn_error(SNN_ERR_IO, "'%s': close failed: %s", w->path, strerror(errno));
    snn_gz_writer_abort(w);
    return st;
}

void snn_gz_writer_abort(snn_gz_writer *w)
{
    if (w->z_ready) deflateEnd(&w->z);
    if (w->file) fclose(w->file);
    snn_free(w->chunk, SNN_STREAM_CHUNK, SNN_CPU);
    w->chunk = NULL;
    w->file = NULL;
    w->z_ready = false;
}
