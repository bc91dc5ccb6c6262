/*
 * tar.c - a streaming reader for ustar archives (POSIX.1-1988 "ustar" and GNU tar's variant),
 * enough to read cifar-10-binary.tar.gz member by member without unpacking it to disk.
 *
 * A tar archive is a sequence of 512-byte blocks: for each member a header block, then its data
 * padded with zeros to a multiple of 512; the archive ends with two all-zero blocks.
 * The header fields used here (offsets in bytes, numbers are octal ASCII):
 *
 *     0    name[100]      the path (NUL-terminated unless it fills the field)
 *     124  size[12]       data bytes (GNU: base-256 binary when the top bit of byte 0 is set)
 *     148  chksum[8]      sum of all 512 header bytes, counting these 8 as spaces
 *     156  typeflag       '0' or NUL regular file, '5' directory, 'x'/'g' pax headers, ...
 *     257  magic[6]       "ustar\0" (POSIX) or "ustar " (GNU, with version " \0")
 *     345  prefix[155]    POSIX: the path is prefix + "/" + name
 *
 * Every header's checksum is verified (the unsigned sum; old tars used a signed one, accepted
 * too), so a corrupt or misaligned archive stops with a message naming the offset.
 * The reader never seeks: skipping a member reads and drops its bytes, which is what a gzip
 * stream allows.
 */
#include <string.h>

#include "data_internal.h"
#include "tensor/error.h"

#define TAR_BLOCK 512

void snn_tar_init(snn_tar *t, snn_stream *s)
{
    memset(t, 0, sizeof *t);
    t->stream = s;
}

/* Octal ASCII (leading spaces, ending at NUL or space), or GNU base-256; false if malformed. */
static bool parse_number(const uint8_t *field, int len, uint64_t *out)
{
    uint64_t v = 0;
    if (field[0] & 0x80) {
        /* base-256: the remaining bits, big-endian; we take up to 8 bytes of magnitude. */
        if (field[0] != 0x80) return false; /* negative or too big */
        for (int i = 1; i < len; i++) {
            if (v >> 56) return false;
            v = (v << 8) | field[i];
        }
        *out = v;
        return true;
    }
    int i = 0;
    while (i < len && field[i] == ' ') i++;
    int digits = 0;
    for (; i < len && field[i] >= '0' && field[i] <= '7'; i++, digits++) {
        if (v >> 60) return false;
        v = v * 8 + (uint64_t)(field[i] - '0');
    }
    /* After the digits only terminators may follow. */
    for (; i < len; i++)
        if (field[i] != ' ' && field[i] != '\0') return false;
    *out = v;
    return digits > 0;
}

static bool all_zero(const uint8_t *block)
{
    for (int i = 0; i < TAR_BLOCK; i++)
        if (block[i]) return false;
    return true;
}

static void copy_field(char *dst, const uint8_t *field, int len)
{
    int n = 0;
    while (n < len && field[n]) n++;
    memcpy(dst, field, (size_t)n);
    dst[n] = '\0';
}

snn_status snn_tar_next(snn_tar *t, snn_tar_member *m, bool *end)
{
    snn_stream *s = t->stream;
    memset(m, 0, sizeof *m);
    *end = false;
    if (t->ended) {
        *end = true;
        return SNN_OK;
    }
    /* Drop whatever the caller did not read of the previous member, then its padding. */
    snn_status st = snn_stream_skip(s, t->left + t->padding, "tar member data and padding");
    if (st != SNN_OK) return st;
    t->left = t->padding = 0;

    uint8_t block[TAR_BLOCK];
    uint64_t offset = s->position;
    size_t got;
    st = snn_stream_read(s, block, TAR_BLOCK, &got);
    if (st != SNN_OK) return st;
    if (got == 0 && offset > 0) { /* ends on a block boundary without the zero blocks: accept */
        t->ended = *end = true;
        return SNN_OK;
    }
    if (got < TAR_BLOCK)
        return snn_error(SNN_ERR_FORMAT,
                         "'%s': truncated tar archive (expected a 512-byte header at offset "
                         "%llu, got %zu bytes)",
                         s->name, (unsigned long long)offset, got);
    if (all_zero(block)) {
        t->ended = *end = true;
        return SNN_OK;
    }

    uint64_t stored;
    if (!parse_number(block + 148, 8, &stored))
        return snn_error(SNN_ERR_FORMAT,
                         "'%s': not a tar archive (expected an octal checksum in the header at "
                         "offset %llu)",
                         s->name, (unsigned long long)offset);
    uint64_t sum_unsigned = 0;
    int64_t sum_signed = 0;
    for (int i = 0; i < TAR_BLOCK; i++) {
        uint8_t b = (i >= 148 && i < 156) ? (uint8_t)' ' : block[i];
        sum_unsigned += b;
        sum_signed += (int8_t)b;
    }
    if (stored != sum_unsigned && (int64_t)stored != sum_signed)
        return snn_error(SNN_ERR_FORMAT,
                         "'%s': bad tar header checksum at offset %llu (the header says %llu, "
                         "its bytes sum to %llu)",
                         s->name, (unsigned long long)offset, (unsigned long long)stored,
                         (unsigned long long)sum_unsigned);
    if (memcmp(block + 257, "ustar", 5) != 0)
        return snn_error(SNN_ERR_FORMAT,
                         "'%s': tar header at offset %llu is not ustar (expected the magic "
                         "\"ustar\" at byte 257)",
                         s->name, (unsigned long long)offset);
    if (!parse_number(block + 124, 12, &m->size) || m->size > SNN_DATA_MAX_BYTES)
        return snn_error(SNN_ERR_FORMAT,
                         "'%s': bad size field in the tar header at offset %llu", s->name,
                         (unsigned long long)offset);

    /* POSIX ustar ("ustar\0"): a non-empty prefix goes in front of the name. */
    char name[101], prefix[156];
    copy_field(name, block, 100);
    copy_field(prefix, block + 345, 155);
    if (block[262] == '\0' && prefix[0])
        snprintf(m->name, sizeof m->name, "%s/%s", prefix, name);
    else
        snprintf(m->name, sizeof m->name, "%s", name);
    m->type = block[156] ? (char)block[156] : '0';
    m->offset = offset;
    /* Only regular files and pax/GNU extension headers carry data; a directory's size is 0. */
    bool has_data = m->type != '5' && m->type != '1' && m->type != '2' && m->type != '3' &&
                    m->type != '4' && m->type != '6';
    t->left = has_data ? m->size : 0;
    t->padding = has_data ? (TAR_BLOCK - m->size % TAR_BLOCK) % TAR_BLOCK : 0;
    return SNN_OK;
}

snn_status snn_tar_read(snn_tar *t, void *buf, size_t n)
{
    SNN_ASSERT(n <= t->left);
    snn_status st = snn_stream_read_exact(t->stream, buf, n, "tar member data");
    if (st == SNN_OK) t->left -= n;
    return st;
}
