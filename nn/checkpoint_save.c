/*
 * checkpoint_save.c - snn_safetensors_save: a safetensors file (format in safetensors.h),
 * written so that a crash at any moment leaves either the old or the new file.
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
#include "safetensors.h"
#include "nn.h"
#include "tensor/error.h"


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
    if (snn_st_write_all(fd, length, sizeof length) || snn_st_write_all(fd, header->data, header->len))
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
            if (!little_endian) snn_st_swap_bytes_4(scratch, (size_t)t->numel);
            host = scratch;
        }
        if (snn_st_write_all(fd, host, bytes)) return -1;
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
    if (snn_st_check_list(fn, tensors) != SNN_OK) return snn_last_status();
    size_t meta_begin = 0, meta_end = 0;
    if (metadata_json && check_metadata(fn, metadata_json, &meta_begin, &meta_end) != SNN_OK)
        return snn_last_status();

    /* everything that can run out of memory happens before the temp file exists */
    const bool little_endian = snn_st_host_is_little_endian();
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
