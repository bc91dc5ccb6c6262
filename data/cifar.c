/*
 * cifar.c - CIFAR-10 and CIFAR-100, "binary version" (https://www.cs.toronto.edu/~kriz/cifar.html),
 * read straight from the .tar.gz through tar.c + gzip_stream.c, or from the extracted folder.
 *
 * A batch file is a plain sequence of fixed-size records, one per 32x32 colour image:
 *
 *     CIFAR-10   <1 byte label 0..9>                          <3072 pixel bytes>   3073 bytes
 *     CIFAR-100  <1 byte coarse label 0..19> <1 byte fine 0..99> <3072 pixel bytes> 3074 bytes
 *
 * The 3072 pixel bytes are the red plane (32 rows of 32), then green, then blue: already the
 * (C, H, W) layout snn.c uses, so a record's pixels are copied as they are.
 *
 * Layout of the archives (member order inside the .tar.gz does not matter):
 *
 *     cifar-10-binary.tar.gz    cifar-10-batches-bin/data_batch_1.bin .. data_batch_5.bin  train
 *                               cifar-10-batches-bin/test_batch.bin                        test
 *                               (batches.meta.txt, readme.html: ignored)
 *     cifar-100-binary.tar.gz   cifar-100-binary/train.bin                                 train
 *                               cifar-100-binary/test.bin                                  test
 *
 * A real CIFAR batch holds 10000 records, but any positive multiple of the record size is
 * accepted, so tests and snn-make-cifar can write small or differently sized sets.
 * Everything is checked: each expected member present once and where the layout says, sizes a
 * multiple of the record, every label in range. A failure frees all it took.
 */
#include <string.h>
#include <sys/stat.h>

#include "data_internal.h"
#include "tensor/error.h"

#define CIFAR_PIXELS 3072
#define CIFAR_MAX_PARTS 5

typedef struct cifar_layout {
    const char *archive;              /* file name of the .tar.gz */
    const char *folder;               /* the folder inside it */
    const char *train[CIFAR_MAX_PARTS];
    int n_train;
    const char *test;
    int label_bytes;                  /* 1 (CIFAR-10) or 2 (coarse, fine) */
} cifar_layout;

static const cifar_layout layouts[2] = {
    [SNN_CIFAR10] = {"cifar-10-binary.tar.gz", "cifar-10-batches-bin",
                     {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin",
                      "data_batch_4.bin", "data_batch_5.bin"},
                     5, "test_batch.bin", 1},
    [SNN_CIFAR100] = {"cifar-100-binary.tar.gz", "cifar-100-binary", {"train.bin"}, 1,
                      "test.bin", 2},
};

/* One batch file's raw records, in a block of `capacity` bytes. */
typedef struct cifar_part {
    uint8_t *data;
    uint64_t bytes, capacity;
    char source[1400];                /* "archive:member" or the file path, for messages */
} cifar_part;

static int record_bytes(snn_cifar_kind kind) { return layouts[kind].label_bytes + CIFAR_PIXELS; }

static void free_parts(cifar_part *parts, int n)
{
    for (int i = 0; i < n; i++) {
        snn_free(parts[i].data, (size_t)parts[i].capacity, SNN_CPU);
        parts[i].data = NULL;
    }
}

static snn_status check_size(const char *source, uint64_t bytes, snn_cifar_kind kind)
{
    uint64_t rec = (uint64_t)record_bytes(kind);
    if (bytes == 0 || bytes % rec != 0)
        return snn_error(SNN_ERR_FORMAT,
                         "%s: %llu bytes (expected a positive multiple of the %llu-byte "
                         "%s record)",
                         source, (unsigned long long)bytes, (unsigned long long)rec,
                         kind == SNN_CIFAR10 ? "CIFAR-10" : "CIFAR-100");
    return SNN_OK;
}

/* Records of n parts -> one data set, checking every label. */
static snn_status assemble(cifar_part *parts, int n, snn_cifar_kind kind, bool coarse,
                           snn_dataset *out)
{
    const int rec = record_bytes(kind);
    const int classes = kind == SNN_CIFAR10 ? 10 : coarse ? 20 : 100;
    /* CIFAR-100: byte 0 is the coarse label, byte 1 the fine one. */
    const int label_at = kind == SNN_CIFAR100 && !coarse ? 1 : 0;
    int64_t total = 0;
    for (int i = 0; i < n; i++) total += (int64_t)(parts[i].bytes / (uint64_t)rec);
    const char *name = kind == SNN_CIFAR10 ? "cifar10" : coarse ? "cifar100-coarse" : "cifar100";
    snn_status st = snn_dataset_alloc(out, name, total, 3, 32, 32, classes);
    if (st != SNN_OK) return st;
    int64_t at = 0;
    for (int i = 0; i < n; i++) {
        int64_t records = (int64_t)(parts[i].bytes / (uint64_t)rec);
        for (int64_t r = 0; r < records; r++, at++) {
            const uint8_t *src = parts[i].data + r * rec;
            int label = src[label_at];
            if (label >= classes) {
                snn_dataset_free(out);
                return snn_error(SNN_ERR_FORMAT,
                                 "%s: %s label %d of record %lld is out of range (expected "
                                 "0..%d)",
                                 parts[i].source,
                                 kind == SNN_CIFAR10 ? "the" : coarse ? "the coarse" : "the fine",
                                 label, (long long)r, classes - 1);
            }
            out->labels[at] = (uint8_t)label;
            memcpy(out->images + at * CIFAR_PIXELS, src + layouts[kind].label_bytes,
                   CIFAR_PIXELS);
        }
    }
    return SNN_OK;
}

snn_status snn_cifar_from_records(const uint8_t *records, uint64_t bytes, snn_cifar_kind kind,
                                  bool coarse, const char *source, snn_dataset *out)
{
    memset(out, 0, sizeof *out);
    snn_status st = check_size(source, bytes, kind);
    if (st != SNN_OK) return st;
    cifar_part part = {.data = (uint8_t *)records, .bytes = bytes};
    snprintf(part.source, sizeof part.source, "%s", source);
    return assemble(&part, 1, kind, coarse, out);
}

/* The batch files one split needs. */
static int split_files(snn_cifar_kind kind, snn_split split, const char **files)
{
    const cifar_layout *L = &layouts[kind];
    if (split == SNN_SPLIT_TEST) {
        files[0] = L->test;
        return 1;
    }
    for (int i = 0; i < L->n_train; i++) files[i] = L->train[i];
    return L->n_train;
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

snn_status snn_cifar_read_archive(snn_stream *s, snn_cifar_kind kind, bool coarse,
                                  snn_split split, snn_dataset *out)
{
    memset(out, 0, sizeof *out);
    const cifar_layout *L = &layouts[kind];
    const char *files[CIFAR_MAX_PARTS];
    int n = split_files(kind, split, files);
    cifar_part parts[CIFAR_MAX_PARTS];
    memset(parts, 0, sizeof parts);
    char misplaced[sizeof ((snn_tar_member *)0)->name] = "";

    snn_tar tar;
    snn_tar_init(&tar, s);
    snn_status st = SNN_OK;
    for (;;) {
        snn_tar_member m;
        bool end;
        st = snn_tar_next(&tar, &m, &end);
        if (st != SNN_OK || end) break;
        if (m.type != '0') continue;
        const char *name = m.name;
        while (name[0] == '.' && name[1] == '/') name += 2;
        const char *dir_end = strchr(name, '/');
        for (int k = 0; k < n; k++) {
            bool here = dir_end && (size_t)(dir_end - name) == strlen(L->folder) &&
                        strncmp(name, L->folder, strlen(L->folder)) == 0 &&
                        strcmp(dir_end + 1, files[k]) == 0;
            if (!here) {
                if (strcmp(base_name(name), files[k]) == 0 && !misplaced[0])
                    snprintf(misplaced, sizeof misplaced, "%s", m.name);
                continue;
            }
            snprintf(parts[k].source, sizeof parts[k].source, "'%s' member '%s'", s->name,
                     m.name);
            if (parts[k].data) {
                st = snn_error(SNN_ERR_FORMAT, "%s appears twice (expected it once)",
                               parts[k].source);
                break;
            }
            st = check_size(parts[k].source, m.size, kind);
            if (st != SNN_OK) break;
            st = snn_stream_read_alloc(s, m.size, &parts[k].data, "a CIFAR batch file");
            if (st != SNN_OK) break;
            tar.left -= m.size;
            parts[k].bytes = parts[k].capacity = m.size;
        }
        if (st != SNN_OK) break;
    }
    /* Past the end-of-archive blocks (GNU tar pads to 10 KiB): read on to the gzip trailer so
     * that its CRC-32 vouches for every byte we took. */
    if (st == SNN_OK) st = snn_stream_drain(s);
    for (int k = 0; k < n && st == SNN_OK; k++) {
        if (parts[k].data) continue;
        char hint[400] = "";
        if (misplaced[0])
            snprintf(hint, sizeof hint, "; found '%s' instead, which is not where the layout "
                     "puts it", misplaced);
        st = snn_error(SNN_ERR_FORMAT,
                       "'%s': no member '%s/%s' (expected the layout of %s: the batch files "
                       "in the folder %s/)%s",
                       s->name, L->folder, files[k], L->archive, L->folder, hint);
    }
    if (st == SNN_OK) st = assemble(parts, n, kind, coarse, out);
    free_parts(parts, n);
    return st;
}

static snn_status read_archive_file(const char *path, snn_cifar_kind kind, bool coarse,
                                    snn_split split, snn_dataset *out)
{
    snn_stream s;
    snn_status st = snn_stream_open_file(&s, path);
    if (st != SNN_OK) return st;
    st = snn_cifar_read_archive(&s, kind, coarse, split, out);
    snn_stream_close(&s);
    return st;
}

/* Batch files straight from a folder (plain or gzip-compressed files both work). */
static snn_status read_folder(const char *dir, snn_cifar_kind kind, bool coarse, snn_split split,
                              snn_dataset *out)
{
    memset(out, 0, sizeof *out);
    const char *files[CIFAR_MAX_PARTS];
    int n = split_files(kind, split, files);
    cifar_part parts[CIFAR_MAX_PARTS];
    memset(parts, 0, sizeof parts);
    snn_status st = SNN_OK;
    for (int k = 0; k < n && st == SNN_OK; k++) {
        char path[1024];
        st = snn_path_join(path, sizeof path, dir, files[k]);
        if (st != SNN_OK) break;
        snn_stream s;
        st = snn_stream_open_file(&s, path);
        if (st != SNN_OK) break;
        snprintf(parts[k].source, sizeof parts[k].source, "'%s'", path);
        st = snn_stream_read_all(&s, SNN_DATA_MAX_BYTES, &parts[k].data, &parts[k].bytes,
                                 &parts[k].capacity);
        snn_stream_close(&s);
        if (st == SNN_OK) st = check_size(parts[k].source, parts[k].bytes, kind);
    }
    if (st == SNN_OK) st = assemble(parts, n, kind, coarse, out);
    free_parts(parts, n);
    return st;
}

snn_status snn_cifar_load(const char *path, snn_cifar_kind kind, bool coarse, snn_split split,
                          snn_dataset *out)
{
    memset(out, 0, sizeof *out);
    const cifar_layout *L = &layouts[kind];
    struct stat info;
    if (stat(path, &info) != 0)
        return snn_error(SNN_ERR_IO, "cannot open '%s': no such file or folder (expected %s "
                         "or a folder holding it or %s/)",
                         path, L->archive, L->folder);
    if (!S_ISDIR(info.st_mode)) return read_archive_file(path, kind, coarse, split, out);

    char candidate[1024];
    snn_status st = snn_path_join(candidate, sizeof candidate, path, L->archive);
    if (st != SNN_OK) return st;
    if (snn_path_exists(candidate)) return read_archive_file(candidate, kind, coarse, split, out);
    st = snn_path_join(candidate, sizeof candidate, path, L->folder);
    if (st != SNN_OK) return st;
    if (snn_path_is_dir(candidate)) return read_folder(candidate, kind, coarse, split, out);
    st = snn_path_join(candidate, sizeof candidate, path, split == SNN_SPLIT_TEST ? L->test
                                                                                : L->train[0]);
    if (st != SNN_OK) return st;
    if (snn_path_exists(candidate)) return read_folder(path, kind, coarse, split, out);
    return snn_error(SNN_ERR_IO,
                     "'%s' holds neither %s nor %s/ nor its batch files (expected the %s binary "
                     "version from https://www.cs.toronto.edu/~kriz/cifar.html; for a "
                     "CIFAR-format set made from Fashion-MNIST run snn-make-cifar)",
                     path, L->archive, L->folder, kind == SNN_CIFAR10 ? "CIFAR-10" : "CIFAR-100");
}
