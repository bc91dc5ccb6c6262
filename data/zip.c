/*
 * zip.c - a reader for ZIP archives (PKWARE APPNOTE 6.3), enough for the archives the event
 * data sets are distributed in: N-MNIST's Train.zip / Test.zip and CIFAR10-DVS's per-class
 * airplane.zip .. truck.zip. Members are "stored" (method 0) or "deflated" (method 8, raw
 * deflate through zlib); ZIP64, encryption and multi-disk archives are refused by name.
 *
 * A ZIP archive is read from its end, where the directory of members is:
 *
 *     [local header 1][data 1] ... [local header n][data n]
 *     [central directory: one 46-byte record + name per member][end record: 22 bytes + comment]
 *
 *     end of central directory (EOCD)     central directory record          local header
 *     0  u32 0x06054b50 signature         0  u32 0x02014b50 signature       0  u32 0x04034b50
 *     8  u16 entries on this disk         10 u16 method                     26 u16 name length
 *     10 u16 entries in all               16 u32 CRC-32                     28 u16 extra length
 *     12 u32 directory size               20 u32 compressed size            30 name, extra, data
 *     16 u32 directory offset             24 u32 uncompressed size
 *     20 u16 comment length               28 u16 name length, 30 extra, 32 comment length
 *                                         42 u32 offset of the local header, 46 name
 *
 * All numbers are little-endian. The EOCD is found by scanning back over at most 64 KiB of
 * comment. Sizes and the CRC-32 come from the central directory (a local header may defer them
 * to a data descriptor); each member read is inflated whole and its CRC-32 and size checked.
 * Every offset is checked against the archive's size before it is followed, so a corrupt or
 * hostile archive gives an error naming the archive and the member, never a read out of bounds.
 */
#define _POSIX_C_SOURCE 200809L /* fseeko, ftello */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>

#include "data_internal.h"
#include "tensor/error.h"

#define EOCD_SIGNATURE 0x06054b50u
#define CENTRAL_SIGNATURE 0x02014b50u
#define LOCAL_SIGNATURE 0x04034b50u
#define EOCD_BYTES 22
#define CENTRAL_BYTES 46
#define LOCAL_BYTES 30
/* A member is not believed when it claims more than this uncompressed (N-MNIST members are
 * a few KiB; a CIFAR10-DVS recording a few MiB). */
#define ZIP_MAX_MEMBER ((uint64_t)1 << 31)

static uint16_t le16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* n bytes at `offset` of the archive into buf; SNN_ERR_FORMAT when they are not all there. */
static snn_status read_at(snn_zip *z, uint64_t offset, void *buf, size_t n, const char *what)
{
    if (offset > z->size || n > z->size - offset)
        return snn_error(SNN_ERR_FORMAT,
                         "'%s': truncated or corrupt zip archive (expected %zu bytes of %s at "
                         "offset %llu, the archive has %llu)",
                         z->name, n, what, (unsigned long long)offset,
                         (unsigned long long)z->size);
    if (z->data) {
        memcpy(buf, z->data + offset, n);
        return SNN_OK;
    }
    if (fseeko(z->file, (off_t)offset, SEEK_SET) != 0 || fread(buf, 1, n, z->file) != n)
        return snn_error(SNN_ERR_IO, "'%s': read error at offset %llu: %s", z->name,
                         (unsigned long long)offset, strerror(errno));
    return SNN_OK;
}

/* Finds the end record: the last "PK\5\6" whose comment length reaches the end exactly. */
static snn_status find_eocd(snn_zip *z, uint8_t eocd[EOCD_BYTES])
{
    if (z->size < EOCD_BYTES)
        return snn_error(SNN_ERR_FORMAT,
                         "'%s': not a zip archive (%llu bytes; expected at least the %d-byte end "
                         "record)",
                         z->name, (unsigned long long)z->size, EOCD_BYTES);
    uint64_t span = z->size < EOCD_BYTES + 65535u ? z->size : EOCD_BYTES + 65535u;
    uint8_t tail[EOCD_BYTES + 65535];
    snn_status st = read_at(z, z->size - span, tail, (size_t)span, "the end of the archive");
    if (st != SNN_OK) return st;
    for (uint64_t at = span - EOCD_BYTES + 1; at-- > 0;) {
        const uint8_t *p = tail + at;
        if (le32(p) == EOCD_SIGNATURE && at + EOCD_BYTES + le16(p + 20) == span) {
            memcpy(eocd, p, EOCD_BYTES);
            return SNN_OK;
        }
    }
    return snn_error(SNN_ERR_FORMAT,
                     "'%s': not a zip archive (expected the end-of-central-directory record "
                     "PK\\5\\6 within the last 64 KiB)",
                     z->name);
}

static snn_status read_directory(snn_zip *z)
{
    uint8_t eocd[EOCD_BYTES];
    snn_status st = find_eocd(z, eocd);
    if (st != SNN_OK) return st;
    uint16_t disk_entries = le16(eocd + 8), entries = le16(eocd + 10);
    uint32_t dir_size = le32(eocd + 12), dir_offset = le32(eocd + 16);
    if (entries == 0xFFFF || dir_size == 0xFFFFFFFFu || dir_offset == 0xFFFFFFFFu)
        return snn_error(SNN_ERR_FORMAT, "'%s': a ZIP64 archive (expected a plain zip archive of "
                         "fewer than 65535 members and 4 GiB; hint: extract it and pass the "
                         "folder)", z->name);
    if (disk_entries != entries || le16(eocd + 4) != 0 || le16(eocd + 6) != 0)
        return snn_error(SNN_ERR_FORMAT, "'%s': a multi-disk zip archive (expected one file)",
                         z->name);
    if ((uint64_t)dir_offset + dir_size > z->size)
        return snn_error(SNN_ERR_FORMAT,
                         "'%s': corrupt zip archive (its directory of %u bytes at offset %u runs "
                         "past the end, %llu bytes)",
                         z->name, dir_size, dir_offset, (unsigned long long)z->size);
    /* Each record is at least 46 bytes: a lying count cannot make us allocate much. */
    if ((uint64_t)entries * CENTRAL_BYTES > dir_size)
        return snn_error(SNN_ERR_FORMAT,
                         "'%s': corrupt zip directory (%u members cannot fit in %u bytes)",
                         z->name, entries, dir_size);
    uint8_t *dir = snn_alloc((size_t)dir_size + 1, SNN_CPU);
    z->entries = snn_alloc((size_t)(entries ? entries : 1) * sizeof *z->entries, SNN_CPU);
    if (!dir || !z->entries) {
        snn_free(dir, (size_t)dir_size + 1, SNN_CPU);
        return snn_error(SNN_ERR_MEMORY, "'%s': out of memory for a %u-byte zip directory",
                         z->name, dir_size);
    }
    z->capacity = entries ? entries : 1;
    st = read_at(z, dir_offset, dir, dir_size, "the central directory");
    uint64_t at = 0;
    for (int i = 0; i < entries && st == SNN_OK; i++) {
        const uint8_t *r = dir + at;
        if (dir_size - at < CENTRAL_BYTES || le32(r) != CENTRAL_SIGNATURE) {
            st = snn_error(SNN_ERR_FORMAT,
                           "'%s': corrupt zip directory (expected record %d of %u at directory "
                           "offset %llu)",
                           z->name, i, entries, (unsigned long long)at);
            break;
        }
        uint16_t flags = le16(r + 8), name_len = le16(r + 28);
        uint64_t record = (uint64_t)CENTRAL_BYTES + name_len + le16(r + 30) + le16(r + 32);
        if (record > dir_size - at) {
            st = snn_error(SNN_ERR_FORMAT, "'%s': corrupt zip directory (record %d runs past "
                           "its end)", z->name, i);
            break;
        }
        snn_zip_entry *e = &z->entries[i];
        memset(e, 0, sizeof *e);
        size_t keep = name_len < sizeof e->name - 1 ? name_len : sizeof e->name - 1;
        memcpy(e->name, r + CENTRAL_BYTES, keep);
        e->name[keep] = '\0';
        e->method = le16(r + 10);
        e->crc = le32(r + 16);
        e->compressed = le32(r + 20);
        e->size = le32(r + 24);
        e->offset = le32(r + 42);
        e->encrypted = (flags & 1) != 0;
        z->count = i + 1;
        at += record;
    }
    snn_free(dir, (size_t)dir_size + 1, SNN_CPU);
    return st;
}

static snn_status open_common(snn_zip *z)
{
    snn_status st = read_directory(z);
    if (st != SNN_OK) snn_zip_close(z);
    return st;
}

snn_status snn_zip_open_file(snn_zip *z, const char *path)
{
    memset(z, 0, sizeof *z);
    snprintf(z->name, sizeof z->name, "%s", path);
    z->file = fopen(path, "rb");
    if (!z->file) return snn_error(SNN_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    off_t end = -1;
    if (fseeko(z->file, 0, SEEK_END) == 0) end = ftello(z->file);
    if (end < 0) {
        snn_status st = snn_error(SNN_ERR_IO, "'%s': cannot find the file's size: %s", path,
                                  strerror(errno));
        snn_zip_close(z);
        return st;
    }
    z->size = (uint64_t)end;
    return open_common(z);
}

snn_status snn_zip_open_memory(snn_zip *z, const void *data, size_t size, const char *name)
{
    memset(z, 0, sizeof *z);
    snprintf(z->name, sizeof z->name, "%s", name ? name : "(memory)");
    z->data = data ? data : (const uint8_t *)"";
    z->size = data ? size : 0;
    return open_common(z);
}

void snn_zip_close(snn_zip *z)
{
    if (z->file) fclose(z->file);
    snn_free(z->entries, (size_t)z->capacity * sizeof *z->entries, SNN_CPU);
    memset(z, 0, sizeof *z);
}

/* Inflates `compressed` raw-deflate bytes into out (exactly `size` bytes expected). */
static snn_status inflate_member(snn_zip *z, const snn_zip_entry *e, const uint8_t *in,
                                 uint8_t *out)
{
    z_stream s;
    memset(&s, 0, sizeof s);
    s.zalloc = snn_zlib_alloc;
    s.zfree = snn_zlib_free;
    int ret = inflateInit2(&s, -MAX_WBITS); /* raw deflate: no zlib or gzip wrapper */
    if (ret != Z_OK)
        return snn_error(ret == Z_MEM_ERROR ? SNN_ERR_MEMORY : SNN_ERR_FORMAT,
                         "'%s' member '%s': cannot start inflating (zlib error %d)", z->name,
                         e->name, ret);
    s.next_in = (Bytef *)in;
    s.avail_in = e->compressed;
    s.next_out = out;
    s.avail_out = e->size;
    ret = inflate(&s, Z_FINISH);
    uint64_t made = s.total_out;
    inflateEnd(&s);
    if (ret == Z_STREAM_END && made == e->size) return SNN_OK;
    if (ret == Z_MEM_ERROR)
        return snn_error(SNN_ERR_MEMORY, "'%s' member '%s': out of memory while inflating",
                         z->name, e->name);
    return snn_error(SNN_ERR_FORMAT,
                     "'%s' member '%s': corrupt deflate data (zlib %d: %s; expected %u bytes, "
                     "made %llu)",
                     z->name, e->name, ret, s.msg ? s.msg : "data ends early or runs long",
                     e->size, (unsigned long long)made);
}

snn_status snn_zip_read(snn_zip *z, int64_t index, uint8_t **out, uint64_t *size)
{
    *out = NULL;
    *size = 0;
    SNN_ASSERT(index >= 0 && index < z->count);
    const snn_zip_entry *e = &z->entries[index];
    if (e->encrypted)
        return snn_error(SNN_ERR_FORMAT, "'%s' member '%s' is encrypted (expected plain data)",
                         z->name, e->name);
    if (e->method != 0 && e->method != 8)
        return snn_error(SNN_ERR_FORMAT,
                         "'%s' member '%s': compression method %u (expected 0 stored or 8 "
                         "deflated)",
                         z->name, e->name, e->method);
    /* deflate expands at most 1032:1, so a larger claim is a lie we need not allocate for */
    if (e->size > ZIP_MAX_MEMBER || (e->method == 0 && e->compressed != e->size) ||
        (e->method == 8 && e->size > (uint64_t)e->compressed * 1032 + 64))
        return snn_error(SNN_ERR_FORMAT, "'%s' member '%s': implausible sizes (%u compressed, "
                         "%u uncompressed)", z->name, e->name, e->compressed, e->size);
    uint8_t local[LOCAL_BYTES];
    snn_status st = read_at(z, e->offset, local, LOCAL_BYTES, "a local file header");
    if (st != SNN_OK) return st;
    if (le32(local) != LOCAL_SIGNATURE)
        return snn_error(SNN_ERR_FORMAT,
                         "'%s' member '%s': no local header at offset %llu (expected the "
                         "signature PK\\3\\4)",
                         z->name, e->name, (unsigned long long)e->offset);
    uint64_t data_at = e->offset + LOCAL_BYTES + le16(local + 26) + le16(local + 28);
    /* The compressed bytes are checked to lie inside the archive before one is allocated. */
    if (data_at > z->size || e->compressed > z->size - data_at)
        return snn_error(SNN_ERR_FORMAT,
                         "'%s' member '%s': its %u bytes of data run past the end of the "
                         "archive",
                         z->name, e->name, e->compressed);
    uint8_t *data = snn_alloc((size_t)e->size + 1, SNN_CPU);
    uint8_t *packed = e->method == 8 ? snn_alloc((size_t)e->compressed + 1, SNN_CPU) : data;
    if (!data || !packed) {
        snn_free(data, (size_t)e->size + 1, SNN_CPU);
        if (e->method == 8) snn_free(packed, (size_t)e->compressed + 1, SNN_CPU);
        return snn_error(SNN_ERR_MEMORY, "'%s' member '%s': out of memory for %u bytes",
                         z->name, e->name, e->size);
    }
    st = read_at(z, data_at, packed, e->compressed, "member data");
    if (st == SNN_OK && e->method == 8) st = inflate_member(z, e, packed, data);
    if (e->method == 8) snn_free(packed, (size_t)e->compressed + 1, SNN_CPU);
    if (st == SNN_OK) {
        uint32_t crc = (uint32_t)crc32(0L, Z_NULL, 0);
        crc = (uint32_t)crc32(crc, data, e->size);
        if (crc != e->crc)
            st = snn_error(SNN_ERR_FORMAT,
                           "'%s' member '%s': CRC-32 %08x does not match the directory's %08x "
                           "(expected an intact archive)",
                           z->name, e->name, crc, e->crc);
    }
    if (st != SNN_OK) {
        snn_free(data, (size_t)e->size + 1, SNN_CPU);
        return st;
    }
    *out = data;
    *size = e->size;
    return SNN_OK;
}
