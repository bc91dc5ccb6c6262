/*
 * checkpoint.c - safetensors files: written atomically, validated completely before loading.
 *
 * The format (https://github.com/huggingface/safetensors), so that PyTorch users can open a
 * snn.c checkpoint with safetensors.torch.load_file():
 *
 *     bytes [0, 8)        N, the header length, unsigned 64-bit little-endian
 *     bytes [8, 8 + N)    a JSON object, padded with spaces so that 8 + N is a multiple of 8:
 *                           {"__metadata__": {"key": "value", ...},           (optional)
 *                            "conv1.weight": {"dtype": "F32", "shape": [32, 1, 3, 3],
 *                                             "data_offsets": [0, 1152]}, ...}
 *     bytes [8 + N, end)  the data section: each tensor's floats, little-endian, row-major, at
 *                         [begin, end) relative to the section's start
 *
 * Offsets must tile the data section exactly: sorted by begin, the first starts at 0, each
 * starts where the previous one ends, the last ends at the end of the file, and every
 * end - begin = numel * 4. snn.c writes and reads F32 only.
 *
 * Loading validates everything before it touches a destination tensor: the file size against
 * the header length, the JSON (json.c: strict, bounded, depth-limited), every entry's dtype,
 * shape and offsets, the tiling above, duplicate keys, missing tensors and unexpected ones. Then
 * it reads the wanted tensors into one host buffer, and only then copies them into the
 * destinations, so a bad or truncated file changes nothing. Every message names the file and,
 * where there is one, the tensor.
 *
 * Why saving goes through a temp file, fsync, rename and a directory fsync
 * -------------------------------------------------------------------------
 * A checkpoint is only useful if a crash can never destroy it, and the moment of danger is
 * exactly while the next one is being written. Consider what each step buys:
 *
 *   1. Write "<path>.tmp.<pid>", never <path> itself. Writing in place, a crash half-way leaves
 *      a file that is part new, part old or truncated: the last good checkpoint is gone. The pid
 *      keeps two processes saving to the same path from writing into one temp file. The temp
 *      file sits in the same directory, because rename is atomic only within one file system.
 *   2. fsync the temp file. write() only puts data in the kernel's page cache. If the process
 *      is killed (SIGKILL, OOM killer, a crash), the kernel still holds that data and writes it
 *      out later, so process death alone needs no fsync. Power loss or a kernel panic is
 *      different: the page cache is lost, and file systems may commit the metadata of the
 *      rename below (journaled, written early) before the file's data blocks (delayed
 *      allocation). After reboot <path> would then name a zero-length or zero-filled file:
 *      exactly the ext4 data-loss reports of 2009. Forcing the data to stable storage before
 *      the rename closes that window: by the time any name points at the new file, its bytes
 *      are on the disk.
 *   3. rename(temp, path). POSIX makes rename atomic: every observer, and the file system after
 *      a crash, sees <path> as either the complete old file or the complete new file, never a
 *      mixture and never missing.
 *   4. fsync the directory. The rename changed the directory, and that change is itself only
 *      in memory until the directory is synced. Without this, a power loss right after we
 *      return SNN_OK can bring back the old checkpoint; the program has already been told the
 *      new one is safe (and may report progress, or delete an older file, on that basis).
 *      A file system that cannot sync directories (EINVAL) is accepted as is.
 *
 * Any failure before the rename (no memory, no space, a read-only directory, a write error)
 * closes and removes the temp file and leaves <path> untouched. A process killed mid-save can
 * leave a stale temp file behind; it is never read, and the next save with the same pid
 * replaces it. tests/test_checkpoint.c kills a saving child with SIGKILL at random moments and
 * checks that the file on disk is always one complete checkpoint (this exercises steps 1 and 3;
 * steps 2 and 4 protect against power loss, which a test cannot pull the plug on).
 *
 * Test: tests/test_checkpoint.c (ctest -R checkpoint).
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "json.h"
#include "nn.h"
#include "tensor/error.h"

/* The upstream safetensors reader refuses headers above 100 MB; so do we. */
#define SNN_SAFETENSORS_MAX_HEADER 100000000ull

static bool host_is_little_endian(void)
{
    const uint32_t one = 1;
    unsigned char first;
    memcpy(&first, &one, 1);
    return first == 1;
}

static void swap_bytes_4(void *data, size_t count)
{
    unsigned char *b = data;
    for (size_t i = 0; i < count; i++, b += 4) {
        unsigned char t0 = b[0], t1 = b[1];
        b[0] = b[3];
        b[1] = b[2];
        b[2] = t1;
        b[3] = t0;
    }
}

/* Writes all n bytes, retrying partial writes and EINTR; -1 with errno set on failure. */
static int write_all(int fd, const void *data, size_t n)
{
    const char *p = data;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Reads exactly n bytes at `offset`; -1 on failure (errno 0 for an unexpected end of file). */
static int read_all_at(int fd, void *data, size_t n, uint64_t offset)
{
    char *p = data;
    while (n > 0) {
        ssize_t r = pread(fd, p, n, (off_t)offset);
        if (r < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        if (r == 0) {
            errno = 0;
            return -1;
        }
        p += r;
        n -= (size_t)r;
        offset += (uint64_t)r;
    }
    return 0;
}

static const char *io_reason(void) { return errno ? strerror(errno) : "unexpected end of file"; }

/* ---- argument checks shared by save and load ---------------------------------------------- */

static int compare_name_ptrs(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The list must hold non-NULL tensors with distinct, non-empty names (no "__metadata__"). */
static snn_status check_list(const char *fn, const snn_param_list *tensors)
{
    if (!tensors)
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad argument 'tensors' (got NULL)", fn);
    if (tensors->count < 0 || (tensors->count > 0 && !tensors->items))
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad argument 'tensors' (expected count >= 0 and "
                         "items for each, got count %d, items %p)", fn, tensors->count,
                         (void *)tensors->items);
    for (int i = 0; i < tensors->count; i++) {
        const snn_named_param *p = &tensors->items[i];
        if (p->name[0] == '\0' || strcmp(p->name, "__metadata__") == 0)
            return snn_error(SNN_ERR_ARGUMENT, "%s: bad argument 'tensors' (item %d has the name "
                             "'%s', which cannot name a tensor)", fn, i, p->name);
        if (!p->tensor)
            return snn_error(SNN_ERR_ARGUMENT, "%s: bad argument 'tensors' (tensor '%s' is NULL)",
                             fn, p->name);
    }
    if (tensors->count < 2) return SNN_OK;
    size_t bytes = (size_t)tensors->count * sizeof(const char *);
    const char **names = snn_alloc(bytes, SNN_CPU);
    if (!names) return snn_error(SNN_ERR_MEMORY, "%s: out of host memory", fn);
    for (int i = 0; i < tensors->count; i++) names[i] = tensors->items[i].name;
    qsort(names, (size_t)tensors->count, sizeof *names, compare_name_ptrs);
    snn_status status = SNN_OK;
    for (int i = 1; i < tensors->count; i++) {
        if (strcmp(names[i - 1], names[i]) == 0) {
            status = snn_error(SNN_ERR_ARGUMENT, "%s: bad argument 'tensors' (the name '%s' "
                               "appears twice)", fn, names[i]);
            break;
        }
    }
    snn_free(names, bytes, SNN_CPU);
    return status;
}

/* ---- saving ------------------------------------------------------------------------------- */

/* A growable byte buffer for the header. */
typedef struct buffer {
    char *data;
    size_t len, cap;
} buffer;

static bool buffer_reserve(buffer *b, size_t extra)
{
    if (b->len + extra <= b->cap) return true;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + extra) cap *= 2;
    char *data = snn_alloc(cap, SNN_CPU);
    if (!data) return false;
    if (b->len) memcpy(data, b->data, b->len);
    snn_free(b->data, b->cap, SNN_CPU);
    b->data = data;
    b->cap = cap;
    return true;
}

static bool buffer_append(buffer *b, const char *s, size_t n)
{
    if (!buffer_reserve(b, n)) return false;
    memcpy(b->data + b->len, s, n);
    b->len += n;
    return true;
}

static bool buffer_append_str(buffer *b, const char *s) { return buffer_append(b, s, strlen(s)); }

static bool buffer_append_json_string(buffer *b, const char *s)
{
    size_t n = snn_json_string_length(s);
    if (!buffer_reserve(b, n)) return false;
    char *end = snn_json_write_string(b->data + b->len, s);
    SNN_ASSERT((size_t)(end - (b->data + b->len)) == n);
    b->len += n;
    return true;
}

static void buffer_free(buffer *b)
{
    snn_free(b->data, b->cap, SNN_CPU);
    memset(b, 0, sizeof *b);
}

/* The metadata argument must be a JSON object whose values are all strings (the format's
 * rule); on success *begin, *end delimit the object in the text (surrounding blanks dropped). */
static snn_status check_metadata(const char *fn, const char *json, size_t *begin, size_t *end)
{
    char what[96];
    snprintf(what, sizeof what, "%s: argument 'metadata_json'", fn);
    snn_json_doc doc;
    if (snn_json_parse(&doc, json, strlen(json), what) != SNN_OK) {
        if (snn_last_status() != SNN_ERR_FORMAT) return snn_last_status();
        /* bad JSON handed in by the caller is a bad argument, not a bad file */
        char message[512];
        snprintf(message, sizeof message, "%s", snn_last_error());
        return snn_error(SNN_ERR_ARGUMENT, "%s", message);
    }
    const snn_json_node *root = snn_json_root(&doc);
    snn_status status = SNN_OK;
    if (root->type != SNN_JSON_OBJECT) {
        status = snn_error(SNN_ERR_ARGUMENT, "%s: bad argument 'metadata_json' (expected a JSON "
                           "object of strings, got another JSON value)", fn);
    } else {
        for (const snn_json_node *m = snn_json_first(&doc, root); m; m = snn_json_next(&doc, m)) {
            if (m->type != SNN_JSON_STRING) {
                status = snn_error(SNN_ERR_ARGUMENT, "%s: bad argument 'metadata_json' (the value "
                                   "of \"%.80s\" must be a string, as safetensors requires)", fn,
                                   m->key);
                break;
            }
        }
    }
    *begin = root->begin;
    *end = root->end;
    snn_json_free(&doc);
    return status;
}

/* Builds the padded header; offsets follow the list order. */
static snn_status build_header(const char *fn, const snn_param_list *tensors,
                               const char *metadata, size_t meta_begin, size_t meta_end,
                               buffer *out)
{
    bool ok = buffer_append_str(out, "{");
    if (metadata) {
        ok = ok && buffer_append_str(out, "\"__metadata__\":") &&
             buffer_append(out, metadata + meta_begin, meta_end - meta_begin);
        if (tensors->count > 0) ok = ok && buffer_append_str(out, ",");
    }
    uint64_t offset = 0;
    for (int i = 0; i < tensors->count && ok; i++) {
        const snn_tensor *t = tensors->items[i].tensor;
        char field[64];
        ok = buffer_append_json_string(out, tensors->items[i].name) &&
             buffer_append_str(out, ":{\"dtype\":\"F32\",\"shape\":[");
        for (int d = 0; d < t->shape.ndim && ok; d++) {
            snprintf(field, sizeof field, d ? ",%lld" : "%lld", (long long)t->shape.dim[d]);
            ok = buffer_append_str(out, field);
        }
        uint64_t bytes = (uint64_t)t->numel * sizeof(float);
        snprintf(field, sizeof field, "],\"data_offsets\":[%llu,%llu]}",
                 (unsigned long long)offset, (unsigned long long)(offset + bytes));
        ok = ok && buffer_append_str(out, field);
        if (i + 1 < tensors->count) ok = ok && buffer_append_str(out, ",");
        offset += bytes;
    }
    ok = ok && buffer_append_str(out, "}");
    /* spaces up to a multiple of 8, so the data section starts 8-byte aligned in the file */
    while (ok && out->len % 8 != 0) ok = buffer_append_str(out, " ");
    if (!ok) return snn_error(SNN_ERR_MEMORY, "%s: out of host memory for the header", fn);
    return SNN_OK;
}

/* The directory holding `path` ("." when it has no slash; "/" for "/file") into an
 * snn_alloc'd string of *size bytes; made before the rename so that nothing can fail after it
 * but the sync itself. */
static char *directory_of(const char *path, size_t *size)
{
    const char *slash = strrchr(path, '/');
    size_t n = slash ? (size_t)(slash - path) : 1;
    if (slash && n == 0) n = 1;
    char *dir = snn_alloc(n + 1, SNN_CPU);
    if (!dir) return NULL;
    if (slash) memcpy(dir, path, n);
    else dir[0] = '.';
    dir[n] = '\0';
    *size = n + 1;
    return dir;
}

/* fsyncs the directory so that the rename itself survives a power loss. */
static snn_status sync_directory(const char *fn, const char *path, const char *dir)
{
    snn_status status = SNN_OK;
    int fd = open(dir, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || (fsync(fd) != 0 && errno != EINVAL)) {
        status = snn_error(SNN_ERR_IO, "%s: '%s' was written but its directory '%s' could not be "
                           "synced (%s); the new file may not survive a power loss", fn, path,
                           dir, strerror(errno));
    }
    if (fd >= 0) close(fd);
    return status;
}

/* Writes the length, header and data into the open temp file; -1 with errno on failure. */
static int write_file(int fd, const buffer *header, const snn_param_list *tensors,
                      float *scratch, bool little_endian)
{
    unsigned char length[8];
    uint64_t n = header->len;
    for (int i = 0; i < 8; i++) length[i] = (unsigned char)(n >> (8 * i));
    if (write_all(fd, length, sizeof length) || write_all(fd, header->data, header->len))
        return -1;
    for (int i = 0; i < tensors->count; i++) {
        const snn_tensor *t = tensors->items[i].tensor;
        size_t bytes = (size_t)t->numel * sizeof(float);
        const float *host = t->data;
        if (t->device != SNN_CPU || !little_endian) {
            if (snn_tensor_copy_to_host(t, scratch) != SNN_OK) {
                errno = EIO;
                return -1;
            }
            if (!little_endian) swap_bytes_4(scratch, (size_t)t->numel);
            host = scratch;
        }
        if (write_all(fd, host, bytes)) return -1;
    }
    return 0;
}

snn_status snn_safetensors_save(const char *path, const snn_param_list *tensors,
                                const char *metadata_json)
{
    const char *fn = "snn_safetensors_save";
    if (!path || !path[0])
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad argument 'path' (got %s)", fn,
                         path ? "an empty string" : "NULL");
    if (check_list(fn, tensors) != SNN_OK) return snn_last_status();
    size_t meta_begin = 0, meta_end = 0;
    if (metadata_json && check_metadata(fn, metadata_json, &meta_begin, &meta_end) != SNN_OK)
        return snn_last_status();

    /* everything that can run out of memory happens before the temp file exists */
    const bool little_endian = host_is_little_endian();
    size_t scratch_bytes = 0;
    for (int i = 0; i < tensors->count; i++) {
        const snn_tensor *t = tensors->items[i].tensor;
        size_t bytes = (size_t)t->numel * sizeof(float);
        if ((t->device != SNN_CPU || !little_endian) && bytes > scratch_bytes)
            scratch_bytes = bytes;
    }
    buffer header = {0};
    size_t tmp_size = strlen(path) + 32, dir_size = 0;
    char *tmp = snn_alloc(tmp_size, SNN_CPU);
    char *dir = directory_of(path, &dir_size);
    float *scratch = scratch_bytes ? snn_alloc(scratch_bytes, SNN_CPU) : NULL;
    snn_status status = SNN_OK;
    if (!tmp || !dir || (scratch_bytes && !scratch))
        status = snn_error(SNN_ERR_MEMORY, "%s: out of host memory saving '%s'", fn, path);
    if (status == SNN_OK)
        status = build_header(fn, tensors, metadata_json, meta_begin, meta_end, &header);

    if (status == SNN_OK) {
        snprintf(tmp, tmp_size, "%s.tmp.%ld", path, (long)getpid());
        int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
        const char *failed_at = NULL;
        if (fd < 0) failed_at = "creating";
        else if (write_file(fd, &header, tensors, scratch, little_endian)) failed_at = "writing";
        else if (fsync(fd) != 0) failed_at = "syncing"; /* data on disk before any name points at it */
        int saved_errno = errno;
        if (fd >= 0 && close(fd) != 0 && !failed_at) {
            failed_at = "closing";
            saved_errno = errno;
        }
        if (!failed_at && rename(tmp, path) != 0) {
            failed_at = "renaming";
            saved_errno = errno;
        }
        if (failed_at) {
            if (fd >= 0) unlink(tmp);
            status = snn_error(SNN_ERR_IO, "%s: cannot save '%s': %s the temporary file '%s' "
                               "failed (%s); '%s' is unchanged", fn, path, failed_at,
                               tmp, strerror(saved_errno), path);
        } else {
            status = sync_directory(fn, path, dir);
        }
    }
    buffer_free(&header);
    snn_free(scratch, scratch_bytes, SNN_CPU);
    snn_free(dir, dir_size, SNN_CPU);
    snn_free(tmp, tmp_size, SNN_CPU);
    return status;
}

/* ---- loading ------------------------------------------------------------------------------ */

/* One tensor entry of the header, after validation. */
typedef struct entry {
    const char *name;
    const snn_json_node *shape;    /* the "shape" array */
    int64_t numel;
    uint64_t begin, end;           /* relative to the data section */
    int dest;                      /* index in the destination list, -1 if not wanted */
} entry;

typedef struct load_state {
    const char *path;
    int fd;
    uint64_t file_size, header_len, data_size;
    char *header;
    snn_json_doc doc;
    const snn_json_node *metadata;
    entry *entries;
    int n_entries;
    entry **by_name;               /* entries sorted by name */
    entry **by_offset;             /* entries sorted by (begin, end) */
    float *data;                   /* the wanted tensors, packed in destination order */
    size_t data_bytes;
} load_state;

static const char *load_fn = "snn_safetensors_load";

/* "[2, 3]" from a validated shape array. */
static const char *json_shape_str(const load_state *st, const snn_json_node *shape, char *buf,
                                  size_t size)
{
    size_t at = 0;
    int n = snprintf(buf, size, "[");
    at = n > 0 ? (size_t)n : 0;
    for (const snn_json_node *d = snn_json_first(&st->doc, shape); d && at < size;
         d = snn_json_next(&st->doc, d)) {
        n = snprintf(buf + at, size - at, "%s%lld", d == snn_json_first(&st->doc, shape) ? "" : ", ",
                     (long long)d->integer);
        at += n > 0 ? (size_t)n : 0;
    }
    if (at < size) snprintf(buf + at, size - at, "]");
    return buf;
}

static snn_status bad(const load_state *st, const char *fmt, ...) SNN_PRINTF_LIKE(2, 3);
static snn_status bad(const load_state *st, const char *fmt, ...)
{
    char message[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    return snn_error(SNN_ERR_FORMAT, "%s: '%s': %s", load_fn, st->path, message);
}

/* Validates one "name": {"dtype", "shape", "data_offsets"} entry into *e. */
static snn_status read_entry(load_state *st, const snn_json_node *m, entry *e)
{
    const char *name = m->key;
    if (m->type != SNN_JSON_OBJECT)
        return bad(st, "the entry of tensor '%s' is not a JSON object", name);
    const snn_json_node *dtype = NULL, *shape = NULL, *offsets = NULL;
    for (const snn_json_node *f = snn_json_first(&st->doc, m); f; f = snn_json_next(&st->doc, f)) {
        if (strcmp(f->key, "dtype") == 0) dtype = f;
        else if (strcmp(f->key, "shape") == 0) shape = f;
        else if (strcmp(f->key, "data_offsets") == 0) offsets = f;
        else return bad(st, "tensor '%s' has an unknown field \"%.40s\"", name, f->key);
    }
    if (!dtype || !shape || !offsets)
        return bad(st, "tensor '%s' has no \"%s\" field", name,
                   !dtype ? "dtype" : !shape ? "shape" : "data_offsets");
    if (dtype->type != SNN_JSON_STRING)
        return bad(st, "the dtype of tensor '%s' is not a string", name);
    if (strcmp(dtype->string, "F32") != 0)
        return bad(st, "tensor '%s' has dtype \"%.16s\"; snn.c reads only F32 (float32)", name,
                   dtype->string);
    if (shape->type != SNN_JSON_ARRAY)
        return bad(st, "the shape of tensor '%s' is not an array of integers", name);
    int64_t numel = 1;
    for (const snn_json_node *d = snn_json_first(&st->doc, shape); d;
         d = snn_json_next(&st->doc, d)) {
        if (d->type != SNN_JSON_INTEGER || d->integer < 0)
            return bad(st, "the shape of tensor '%s' holds something other than a non-negative "
                       "integer", name);
        /* numel * 4 bytes must fit in int64: the data section cannot be larger anyway */
        if (d->integer > 0 && numel > INT64_MAX / 4 / d->integer)
            return bad(st, "the shape of tensor '%s' has more elements than any file can hold",
                       name);
        numel *= d->integer;
    }
    if (offsets->type != SNN_JSON_ARRAY || offsets->count != 2)
        return bad(st, "the data_offsets of tensor '%s' are not an array [begin, end]", name);
    const snn_json_node *b = snn_json_first(&st->doc, offsets), *en = snn_json_next(&st->doc, b);
    if (b->type != SNN_JSON_INTEGER || en->type != SNN_JSON_INTEGER || b->integer < 0 ||
        en->integer < 0)
        return bad(st, "the data_offsets of tensor '%s' are not two non-negative integers", name);
    e->name = name;
    e->shape = shape;
    e->numel = numel;
    e->begin = (uint64_t)b->integer;
    e->end = (uint64_t)en->integer;
    e->dest = -1;
    if (e->begin > e->end || e->end > st->data_size)
        return bad(st, "the data_offsets [%llu, %llu] of tensor '%s' are out of bounds (the data "
                   "section holds %llu bytes)", (unsigned long long)e->begin,
                   (unsigned long long)e->end, name, (unsigned long long)st->data_size);
    char s[96];
    if (e->end - e->begin != (uint64_t)numel * 4u)
        return bad(st, "tensor '%s' has shape %s (%lld floats, %llu bytes) but its data_offsets "
                   "[%llu, %llu] span %llu bytes", name, json_shape_str(st, shape, s, sizeof s),
                   (long long)numel, (unsigned long long)numel * 4u,
                   (unsigned long long)e->begin, (unsigned long long)e->end,
                   (unsigned long long)(e->end - e->begin));
    return SNN_OK;
}

static int compare_by_offset(const void *a, const void *b)
{
    const entry *x = *(const entry *const *)a, *y = *(const entry *const *)b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return 0;
}

static int compare_by_name(const void *a, const void *b)
{
    return strcmp((*(const entry *const *)a)->name, (*(const entry *const *)b)->name);
}

static int compare_name_to_entry(const void *key, const void *e)
{
    return strcmp((const char *)key, (*(const entry *const *)e)->name);
}

/* Reads the length prefix and the header, parses it and validates every entry. */
static snn_status read_header(load_state *st)
{
    struct stat info;
    if (fstat(st->fd, &info) != 0)
        return snn_error(SNN_ERR_IO, "%s: cannot read '%s': %s", load_fn, st->path,
                         strerror(errno));
    if (!S_ISREG(info.st_mode)) return bad(st, "not a regular file");
    st->file_size = (uint64_t)info.st_size;
    if (st->file_size < 8)
        return bad(st, "truncated: the file has %llu bytes, but a safetensors file starts with "
                   "an 8-byte header length", (unsigned long long)st->file_size);
    unsigned char length[8];
    if (read_all_at(st->fd, length, sizeof length, 0))
        return snn_error(SNN_ERR_IO, "%s: cannot read '%s': %s", load_fn, st->path, io_reason());
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = (n << 8) | length[i];
    if (n > st->file_size - 8)
        return bad(st, "the header length is %llu bytes but only %llu bytes follow it: the file "
                   "is truncated or not a safetensors file", (unsigned long long)n,
                   (unsigned long long)(st->file_size - 8));
    if (n > SNN_SAFETENSORS_MAX_HEADER)
        return bad(st, "the header length %llu is above the limit of %llu bytes",
                   (unsigned long long)n, SNN_SAFETENSORS_MAX_HEADER);
    if (n < 2) return bad(st, "the header length is %llu; a header is at least \"{}\"",
                          (unsigned long long)n);
    st->header_len = n;
    st->data_size = st->file_size - 8 - n;
    st->header = snn_alloc((size_t)n, SNN_CPU);
    if (!st->header)
        return snn_error(SNN_ERR_MEMORY, "%s: out of host memory for the %llu-byte header of '%s'",
                         load_fn, (unsigned long long)n, st->path);
    if (read_all_at(st->fd, st->header, (size_t)n, 8))
        return snn_error(SNN_ERR_IO, "%s: cannot read '%s': %s", load_fn, st->path, io_reason());

    char what[600];
    snprintf(what, sizeof what, "%s: '%s'", load_fn, st->path);
    if (snn_json_parse(&st->doc, st->header, (size_t)n, what) != SNN_OK) return snn_last_status();
    const snn_json_node *root = snn_json_root(&st->doc);
    if (root->type != SNN_JSON_OBJECT) return bad(st, "the header is not a JSON object");

    int n_entries = root->count;
    for (const snn_json_node *m = snn_json_first(&st->doc, root); m; m = snn_json_next(&st->doc, m)) {
        if (strcmp(m->key, "__metadata__") != 0) continue;
        if (m->type != SNN_JSON_OBJECT) return bad(st, "__metadata__ is not a JSON object");
        for (const snn_json_node *v = snn_json_first(&st->doc, m); v; v = snn_json_next(&st->doc, v))
            if (v->type != SNN_JSON_STRING)
                return bad(st, "the __metadata__ value of \"%.80s\" is not a string", v->key);
        st->metadata = m;
        n_entries--;
    }
    st->n_entries = n_entries; /* before allocating: load_state_free frees by this count */
    if (n_entries > 0) {
        st->entries = snn_alloc((size_t)n_entries * sizeof *st->entries, SNN_CPU);
        st->by_name = snn_alloc((size_t)n_entries * sizeof *st->by_name, SNN_CPU);
        st->by_offset = snn_alloc((size_t)n_entries * sizeof *st->by_offset, SNN_CPU);
        if (!st->entries || !st->by_name || !st->by_offset)
            return snn_error(SNN_ERR_MEMORY, "%s: out of host memory for the %d entries of '%s'",
                             load_fn, n_entries, st->path);
    }
    int i = 0;
    for (const snn_json_node *m = snn_json_first(&st->doc, root); m; m = snn_json_next(&st->doc, m)) {
        if (m == st->metadata) continue;
        if (read_entry(st, m, &st->entries[i]) != SNN_OK) return snn_last_status();
        st->by_name[i] = st->by_offset[i] = &st->entries[i];
        i++;
    }
    SNN_ASSERT(i == n_entries);

    /* the entries must tile the data section: no gap, no overlap, nothing left over */
    if (n_entries > 1)
        qsort(st->by_offset, (size_t)n_entries, sizeof *st->by_offset, compare_by_offset);
    uint64_t at = 0;
    const entry *prev = NULL;
    for (i = 0; i < n_entries; i++) {
        const entry *e = st->by_offset[i];
        if (e->begin < at)
            return bad(st, "tensors '%s' [%llu, %llu] and '%s' [%llu, %llu] overlap", prev->name,
                       (unsigned long long)prev->begin, (unsigned long long)prev->end, e->name,
                       (unsigned long long)e->begin, (unsigned long long)e->end);
        if (e->begin > at)
            return bad(st, "the data section has a gap: bytes [%llu, %llu) belong to no tensor "
                       "(before tensor '%s')", (unsigned long long)at,
                       (unsigned long long)e->begin, e->name);
        at = e->end;
        prev = e;
    }
    if (at != st->data_size)
        return bad(st, "the tensors cover %llu bytes but the data section holds %llu: the file "
                   "has trailing bytes", (unsigned long long)at,
                   (unsigned long long)st->data_size);
    if (n_entries > 1) qsort(st->by_name, (size_t)n_entries, sizeof *st->by_name, compare_by_name);
    return SNN_OK;
}

/* Matches the destination tensors against the entries: presence, shape, extras. */
static snn_status match(load_state *st, const snn_param_list *tensors, bool allow_extra)
{
    for (int i = 0; i < tensors->count; i++) {
        const snn_named_param *p = &tensors->items[i];
        entry **found = st->n_entries ? bsearch(p->name, st->by_name, (size_t)st->n_entries,
                                                sizeof *st->by_name, compare_name_to_entry)
                                      : NULL;
        if (!found)
            return bad(st, "no tensor '%s' in the file (it holds %d tensors)", p->name,
                       st->n_entries);
        entry *e = *found;
        const snn_tensor *t = p->tensor;
        bool same = e->shape->count == t->shape.ndim;
        int d = 0;
        for (const snn_json_node *n = snn_json_first(&st->doc, e->shape); n && same;
             n = snn_json_next(&st->doc, n), d++)
            same = n->integer == t->shape.dim[d];
        if (!same) {
            char want[96], got[96];
            return bad(st, "tensor '%s' has shape %s in the file, expected %s", p->name,
                       json_shape_str(st, e->shape, got, sizeof got),
                       snn_shape_str(t->shape, want, sizeof want));
        }
        e->dest = i;
    }
    if (!allow_extra) {
        int extra = 0;
        const char *first = NULL;
        for (int i = 0; i < st->n_entries; i++) {
            if (st->by_name[i]->dest >= 0) continue;
            if (!first) first = st->by_name[i]->name;
            extra++;
        }
        if (extra)
            return bad(st, "the file holds %d tensor%s not asked for, e.g. '%s'; hint: pass "
                       "allow_extra to ignore them", extra, extra == 1 ? "" : "s", first);
    }
    return SNN_OK;
}

/* Reads every wanted tensor into one host buffer, packed in destination order. */
static snn_status read_data(load_state *st, const snn_param_list *tensors)
{
    size_t total = 0;
    for (int i = 0; i < tensors->count; i++)
        total += (size_t)tensors->items[i].tensor->numel * sizeof(float);
    if (total == 0) return SNN_OK;
    st->data = snn_alloc(total, SNN_CPU);
    if (!st->data)
        return snn_error(SNN_ERR_MEMORY, "%s: out of host memory for the %zu bytes of tensors in "
                         "'%s'", load_fn, total, st->path);
    st->data_bytes = total;
    const uint64_t data_start = 8 + st->header_len;
    size_t at = 0;
    for (int i = 0; i < tensors->count; i++) {
        entry **found = bsearch(tensors->items[i].name, st->by_name, (size_t)st->n_entries,
                                sizeof *st->by_name, compare_name_to_entry);
        SNN_ASSERT(found);
        const entry *e = *found;
        size_t bytes = (size_t)(e->end - e->begin);
        if (bytes && read_all_at(st->fd, (char *)st->data + at, bytes, data_start + e->begin))
            return snn_error(SNN_ERR_IO, "%s: cannot read tensor '%s' from '%s': %s", load_fn,
                             e->name, st->path, io_reason());
        at += bytes;
    }
    if (!host_is_little_endian()) swap_bytes_4(st->data, total / sizeof(float));
    return SNN_OK;
}

static void load_state_free(load_state *st)
{
    size_t n = (size_t)st->n_entries;
    snn_free(st->data, st->data_bytes, SNN_CPU);
    snn_free(st->by_offset, n * sizeof *st->by_offset, SNN_CPU);
    snn_free(st->by_name, n * sizeof *st->by_name, SNN_CPU);
    snn_free(st->entries, n * sizeof *st->entries, SNN_CPU);
    snn_json_free(&st->doc);
    snn_free(st->header, (size_t)st->header_len, SNN_CPU);
    if (st->fd >= 0) close(st->fd);
}

snn_status snn_safetensors_load(const char *path, const snn_param_list *tensors, bool allow_extra,
                                char **metadata_json, size_t *metadata_len)
{
    if (metadata_json) *metadata_json = NULL;
    if (metadata_len) *metadata_len = 0;
    if (!path || !path[0])
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad argument 'path' (got %s)", load_fn,
                         path ? "an empty string" : "NULL");
    if (check_list(load_fn, tensors) != SNN_OK) return snn_last_status();

    load_state st = {.path = path, .fd = -1};
    st.fd = open(path, O_RDONLY | O_CLOEXEC);
    if (st.fd < 0)
        return snn_error(SNN_ERR_IO, "%s: cannot open '%s': %s", load_fn, path, strerror(errno));
    snn_status status = read_header(&st);
    if (status == SNN_OK) status = match(&st, tensors, allow_extra);
    if (status == SNN_OK) status = read_data(&st, tensors);

    /* the metadata copy is the last thing that can fail before the tensors change */
    char *meta = NULL;
    size_t meta_len = 0;
    if (status == SNN_OK && metadata_json && st.metadata) {
        meta_len = st.metadata->end - st.metadata->begin;
        meta = snn_alloc(meta_len + 1, SNN_CPU);
        if (!meta) {
            status = snn_error(SNN_ERR_MEMORY, "%s: out of host memory for the metadata of '%s'",
                               load_fn, path);
        } else {
            memcpy(meta, st.header + st.metadata->begin, meta_len);
            meta[meta_len] = '\0';
        }
    }

    /* everything is validated and in memory: now, and only now, change the tensors */
    size_t at = 0;
    for (int i = 0; status == SNN_OK && i < tensors->count; i++) {
        snn_tensor *t = tensors->items[i].tensor;
        if (t->numel && snn_tensor_copy_from_host(t, (const float *)((char *)st.data + at)) != SNN_OK) {
            char cause[256];
            snprintf(cause, sizeof cause, "%s", snn_last_error());
            status = snn_error(snn_last_status(), "%s: copying tensor '%s' of '%s' failed: %s",
                               load_fn, tensors->items[i].name, path, cause);
        }
        at += (size_t)t->numel * sizeof(float);
    }
    if (status == SNN_OK && meta) {
        *metadata_json = meta;
        if (metadata_len) *metadata_len = meta_len;
        meta = NULL;
    }
    snn_free(meta, meta_len + 1, SNN_CPU);
    load_state_free(&st);
    return status;
}
