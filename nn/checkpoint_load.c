/*
 * checkpoint_load.c - snn_safetensors_load: reads a safetensors file (format in safetensors.h)
 * into existing tensors, validating everything before it touches one.
 *
 * Loading validates the file size against the header length, the JSON (json.c: strict,
 * bounded, depth-limited), every entry's dtype, shape and offsets, that the offsets tile the data
 * section exactly, duplicate keys, missing tensors and unexpected ones. Then it reads the wanted
 * tensors into one host buffer, and only then copies them into the destinations, so a bad or
 * truncated file changes nothing. Every message names the file and, where there is one, the
 * tensor.
 *
 * One tensor may be missing: a batch-norm layer's count of training batches
 * ("<layer>.num_batches_tracked"), which files written before batch-norm counted its batches
 * (nn/layer_norm.c) do not hold. It is set to SNN_BN_LONG_TRAINED, so that such a checkpoint
 * resumes as it always did: its running statistics move by the layer's momentum.
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
    if (snn_st_read_all_at(st->fd, length, sizeof length, 0))
        return snn_error(SNN_ERR_IO, "%s: cannot read '%s': %s", load_fn, st->path, snn_st_io_reason());
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
    if (snn_st_read_all_at(st->fd, st->header, (size_t)n, 8))
        return snn_error(SNN_ERR_IO, "%s: cannot read '%s': %s", load_fn, st->path, snn_st_io_reason());

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

/* The entry named `name`, or NULL. */
static entry *find_entry(const load_state *st, const char *name)
{
    entry **found = st->n_entries ? bsearch(name, st->by_name, (size_t)st->n_entries,
                                            sizeof *st->by_name, compare_name_to_entry)
                                  : NULL;
    return found ? *found : NULL;
}

/* A batch-norm layer's count of training batches, which files written before batch-norm
 * counted them lack (SNN_BN_LONG_TRAINED stands in for it: checkpoint.h). */
static bool is_batch_count(const char *name)
{
    const char *count = "num_batches_tracked";
    size_t n = strlen(name), c = strlen(count);
    return n >= c && strcmp(name + n - c, count) == 0 && (n == c || name[n - c - 1] == '.');
}

/* Matches the destination tensors against the entries: presence, shape, extras. */
static snn_status match(load_state *st, const snn_param_list *tensors, bool allow_extra)
{
    for (int i = 0; i < tensors->count; i++) {
        const snn_named_param *p = &tensors->items[i];
        entry *e = find_entry(st, p->name);
        if (!e && is_batch_count(p->name)) continue; /* an older file: read_data fills it */
        if (!e)
            return bad(st, "no tensor '%s' in the file (it holds %d tensors)", p->name,
                       st->n_entries);
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
        const entry *e = find_entry(st, tensors->items[i].name);
        if (!e) { /* a batch-norm count the file predates: filled below */
            at += (size_t)tensors->items[i].tensor->numel * sizeof(float);
            continue;
        }
        size_t bytes = (size_t)(e->end - e->begin);
        if (bytes && snn_st_read_all_at(st->fd, (char *)st->data + at, bytes, data_start + e->begin))
            return snn_error(SNN_ERR_IO, "%s: cannot read tensor '%s' from '%s': %s", load_fn,
                             e->name, st->path, snn_st_io_reason());
        at += bytes;
    }
    if (!snn_st_host_is_little_endian()) snn_st_swap_bytes_4(st->data, total / sizeof(float));
    /* the batch-norm counts the file predates (match let only those through) */
    float *values = st->data;
    for (int i = 0; i < tensors->count; i++) {
        int64_t n = tensors->items[i].tensor->numel;
        if (!find_entry(st, tensors->items[i].name))
            for (int64_t k = 0; k < n; k++) values[k] = SNN_BN_LONG_TRAINED;
        values += n;
    }
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
    if (snn_st_check_list(load_fn, tensors) != SNN_OK) return snn_last_status();

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
