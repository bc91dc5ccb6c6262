/*
 * event_nmnist.c - N-MNIST (Orchard et al. 2015, "Converting static image datasets to spiking
 * neuromorphic datasets using saccades"): MNIST digits filmed by an ATIS camera moving in three
 * saccades; 34 x 34 pixels, 2 polarities, ~300 ms per sample, 60000 train + 10000 test.
 *
 * The binary format: one file per sample, a plain sequence of 40-bit (5-byte) events,
 *
 *     byte 0      x address (pixels, 0..33)
 *     byte 1      y address
 *     byte 2      bit 7: polarity (1 ON, 0 OFF); bits 6..0: timestamp bits 22..16
 *     bytes 3, 4  timestamp bits 15..0 (big-endian)          timestamp in microseconds
 *
 * Distributed as Train.zip and Test.zip holding Train/<digit>/<id>.bin and Test/<digit>/<id>.bin;
 * read here straight from the zip (zip.c) or from the extracted folders. Samples are taken in
 * the order of their file names (then paths), so the zip and the folder give the same data set.
 */
#define _POSIX_C_SOURCE 200809L /* opendir, readdir */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#include "data_internal.h"
#include "tensor/error.h"

#define NMNIST_SIDE 34

snn_status snn_nmnist_decode(const uint8_t *data, uint64_t size, const char *source,
                             snn_event_list *out)
{
    if (size % 5 != 0)
        return snn_error(SNN_ERR_FORMAT,
                         "%s: %llu bytes (expected a multiple of 5: N-MNIST's 40-bit events)",
                         source, (unsigned long long)size);
    for (uint64_t i = 0; i < size / 5; i++) {
        const uint8_t *b = data + 5 * i;
        snn_event e = {.x = b[0], .y = b[1], .p = (uint8_t)(b[2] >> 7)};
        e.t = (int64_t)((uint32_t)(b[2] & 0x7F) << 16 | (uint32_t)b[3] << 8 | b[4]);
        if (e.x >= NMNIST_SIDE || e.y >= NMNIST_SIDE)
            return snn_error(SNN_ERR_FORMAT,
                             "%s: event %llu at pixel (%u, %u) (expected x, y < %d: N-MNIST's "
                             "34 x 34 sensor)",
                             source, (unsigned long long)i, e.x, e.y, NMNIST_SIDE);
        snn_status st = snn_event_list_push(out, e, source);
        if (st != SNN_OK) return st;
    }
    return SNN_OK;
}

void snn_nmnist_encode(uint8_t *out, const snn_event *events, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        const snn_event *e = &events[i];
        uint32_t t = (uint32_t)e->t & 0x7FFFFF;
        out[5 * i + 0] = (uint8_t)e->x;
        out[5 * i + 1] = (uint8_t)e->y;
        out[5 * i + 2] = (uint8_t)((e->p ? 0x80 : 0) | t >> 16);
        out[5 * i + 3] = (uint8_t)(t >> 8);
        out[5 * i + 4] = (uint8_t)t;
    }
}

/* ---- which files belong to a split ---------------------------------------------------------- */

typedef struct sample_ref {
    char path[300];      /* member name or file path: the sort key and what messages name */
    int64_t member;      /* zip member index, -1 for a file */
    int label;
} sample_ref;

/* By file name first (N-MNIST's ids number the samples across the digit folders, so this is
 * the original order with the classes interleaved, and a prefix of the set holds every class),
 * then by the whole path. */
static int compare_refs(const void *a, const void *b)
{
    const char *pa = ((const sample_ref *)a)->path, *pb = ((const sample_ref *)b)->path;
    const char *ba = strrchr(pa, '/'), *bb = strrchr(pb, '/');
    int by_name = strcmp(ba ? ba + 1 : pa, bb ? bb + 1 : pb);
    return by_name ? by_name : strcmp(pa, pb);
}

static const char *split_folder(snn_split split) { return split == SNN_SPLIT_TRAIN ? "Train" : "Test"; }

/* True for "<anything/>Train/<digit>/<name>.bin" (folder compared without case); *label = digit. */
static bool member_matches(const char *name, snn_split split, int *label)
{
    size_t len = strlen(name);
    if (len < 4 || strcmp(name + len - 4, ".bin") != 0) return false;
    const char *last = strrchr(name, '/');
    if (!last || last - name < 2 || last[-2] != '/' || last[-1] < '0' || last[-1] > '9') return false;
    const char *folder = split_folder(split);
    size_t flen = strlen(folder);
    const char *start = last - 2 - flen;
    if (start < name || (start > name && start[-1] != '/')) return false;
    for (size_t i = 0; i < flen; i++) {
        char c = start[i];
        if (c >= 'A' && c <= 'Z') c = (char)(c - 'A' + 'a');
        char want = folder[i] >= 'A' && folder[i] <= 'Z' ? (char)(folder[i] - 'A' + 'a') : folder[i];
        if (c != want) return false;
    }
    *label = last[-1] - '0';
    return true;
}

/* Decodes each referenced sample into its frames; refs are sorted already. */
static snn_status build(snn_zip *z, const sample_ref *refs, int64_t n, const char *origin,
                        const snn_event_frames *f, snn_dataset *out)
{
    if (n == 0)
        return snn_error(SNN_ERR_FORMAT, "'%s' holds no samples (expected N-MNIST's "
                         "<Train|Test>/<digit>/<id>.bin files)", origin);
    snn_status st = snn_event_dataset_alloc(out, "nmnist", n, f, NMNIST_SIDE, NMNIST_SIDE, 10);
    if (st != SNN_OK) return st;
    const int64_t bytes = snn_event_frame_bytes(f, NMNIST_SIDE, NMNIST_SIDE);
    snn_event_list events = {0};
    for (int64_t i = 0; i < n && st == SNN_OK; i++) {
        uint8_t *data = NULL;
        uint64_t size = 0;
        char source[1400];
        if (z) {
            snprintf(source, sizeof source, "'%s' member '%s'", z->name, refs[i].path);
            st = snn_zip_read(z, refs[i].member, &data, &size);
        } else {
            snprintf(source, sizeof source, "'%s'", refs[i].path);
            snn_stream s;
            uint64_t capacity = 0;
            st = snn_stream_open_file(&s, refs[i].path);
            if (st == SNN_OK) {
                st = snn_stream_read_all(&s, SNN_EVENTS_MAX, &data, &size, &capacity);
                snn_stream_close(&s);
            }
            /* read_all's block is `capacity` bytes: copy into the size + 1 convention */
            if (st == SNN_OK) {
                uint8_t *exact = snn_alloc((size_t)size + 1, SNN_CPU);
                if (exact) memcpy(exact, data, (size_t)size);
                else st = snn_error(SNN_ERR_MEMORY, "%s: out of memory", source);
                snn_free(data, (size_t)capacity, SNN_CPU);
                data = exact;
            }
        }
        events.count = 0;
        if (st == SNN_OK) st = snn_nmnist_decode(data, size, source, &events);
        if (data) snn_free(data, (size_t)size + 1, SNN_CPU);
        if (st != SNN_OK) break;
        snn_events_to_frames(out->images + i * bytes, events.items, events.count, NMNIST_SIDE,
                             NMNIST_SIDE, f);
        out->labels[i] = (uint8_t)refs[i].label;
    }
    snn_event_list_free(&events);
    if (st != SNN_OK) snn_dataset_free(out);
    return st;
}

snn_status snn_nmnist_read_zip(snn_zip *z, snn_split split, const snn_event_frames *f,
                               snn_dataset *out)
{
    memset(out, 0, sizeof *out);
    sample_ref *refs = snn_alloc((size_t)(z->count + 1) * sizeof *refs, SNN_CPU);
    if (!refs) return snn_error(SNN_ERR_MEMORY, "'%s': out of memory", z->name);
    int64_t n = 0;
    for (int64_t i = 0; i < z->count; i++) {
        int label;
        if (!member_matches(z->entries[i].name, split, &label)) continue;
        snprintf(refs[n].path, sizeof refs[n].path, "%s", z->entries[i].name);
        refs[n].member = i;
        refs[n].label = label;
        n++;
    }
    qsort(refs, (size_t)n, sizeof *refs, compare_refs);
    snn_status st = n ? build(z, refs, n, z->name, f, out)
                      : snn_error(SNN_ERR_FORMAT, "'%s' has no member %s/<digit>/<id>.bin "
                                  "(expected N-MNIST's %s.zip layout)", z->name,
                                  split_folder(split), split_folder(split));
    snn_free(refs, (size_t)(z->count + 1) * sizeof *refs, SNN_CPU);
    return st;
}

/* The <digit>/<id>.bin files under dir, for the 10 digits. */
static snn_status read_folder(const char *dir, const snn_event_frames *f, snn_dataset *out)
{
    int64_t n = 0, capacity = 1024;
    sample_ref *refs = snn_alloc((size_t)capacity * sizeof *refs, SNN_CPU);
    if (!refs) return snn_error(SNN_ERR_MEMORY, "'%s': out of memory", dir);
    snn_status st = SNN_OK;
    for (int digit = 0; digit < 10 && st == SNN_OK; digit++) {
        char sub[1024], digit_name[4] = {(char)('0' + digit), '\0'};
        st = snn_path_join(sub, sizeof sub, dir, digit_name);
        if (st != SNN_OK) break;
        DIR *d = opendir(sub);
        if (!d) continue;
        struct dirent *entry;
        while (st == SNN_OK && (entry = readdir(d)) != NULL) {
            size_t len = strlen(entry->d_name);
            if (len < 4 || strcmp(entry->d_name + len - 4, ".bin") != 0) continue;
            if (n == capacity) {
                sample_ref *grown = snn_alloc((size_t)capacity * 2 * sizeof *grown, SNN_CPU);
                if (!grown) {
                    st = snn_error(SNN_ERR_MEMORY, "'%s': out of memory", dir);
                    break;
                }
                memcpy(grown, refs, (size_t)n * sizeof *refs);
                snn_free(refs, (size_t)capacity * sizeof *refs, SNN_CPU);
                refs = grown;
                capacity *= 2;
            }
            int w = snprintf(refs[n].path, sizeof refs[n].path, "%s/%s", sub, entry->d_name);
            if (w < 0 || (size_t)w >= sizeof refs[n].path) {
                st = snn_error(SNN_ERR_ARGUMENT, "'%s/%s': path too long", sub, entry->d_name);
                break;
            }
            refs[n].member = -1;
            refs[n].label = digit;
            n++;
        }
        closedir(d);
    }
    if (st == SNN_OK) {
        qsort(refs, (size_t)n, sizeof *refs, compare_refs);
        st = build(NULL, refs, n, dir, f, out);
    }
    snn_free(refs, (size_t)capacity * sizeof *refs, SNN_CPU);
    return st;
}

snn_status snn_nmnist_load(const char *path, snn_split split, const snn_event_frames *f,
                           snn_dataset *out)
{
    memset(out, 0, sizeof *out);
    const char *folder = split_folder(split);
    char candidate[1024], zip_name[16];
    snprintf(zip_name, sizeof zip_name, "%s.zip", folder);
    if (!snn_path_exists(path))
        return snn_error(SNN_ERR_IO, "cannot open '%s': no such file or folder (expected "
                         "N-MNIST's %s or a folder holding it or %s/)", path, zip_name, folder);
    const char *zip_path = NULL;
    if (!snn_path_is_dir(path)) zip_path = path;
    snn_status st = snn_path_join(candidate, sizeof candidate, path, zip_name);
    if (st != SNN_OK) return st;
    if (!zip_path && snn_path_exists(candidate)) zip_path = candidate;
    if (zip_path) {
        snn_zip z;
        st = snn_zip_open_file(&z, zip_path);
        if (st != SNN_OK) return st;
        st = snn_nmnist_read_zip(&z, split, f, out);
        snn_zip_close(&z);
        return st;
    }
    st = snn_path_join(candidate, sizeof candidate, path, folder);
    if (st != SNN_OK) return st;
    if (snn_path_is_dir(candidate)) return read_folder(candidate, f, out);
    return snn_error(SNN_ERR_IO, "'%s' holds neither %s nor %s/ (expected N-MNIST as "
                     "distributed; to make an N-MNIST-format set from Fashion-MNIST run "
                     "snn-make-nmnist)", path, zip_name, folder);
}
