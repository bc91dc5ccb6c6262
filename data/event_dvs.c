/*
 * event_dvs.c - the two 128 x 128 DVS data sets: DVS128 Gesture and CIFAR10-DVS.
 *
 * DVS128 Gesture (Amir et al., CVPR 2017): 29 subjects x 3 lighting conditions, 11 hand and arm
 * gestures. Distributed as DvsGesture.tar.gz holding DvsGesture/:
 *     userNN_<lighting>.aedat          one recording (AEDAT 3.1, event_aedat.c)
 *     userNN_<lighting>_labels.csv     the gestures in it: class, start and end time
 *     trials_to_train.txt, trials_to_test.txt   which recordings form each split (users 1-23
 *                                      train, 24-29 test), one file name per line
 * Each labelled gesture is one sample: the events with start <= t < end. The archive is read
 * twice without unpacking it: first the small files (labels, split lists), then each recording
 * of the split, cut into its gestures and integrated into frames on the fly (a recording is
 * held in memory only while it is cut). Samples come in the order of the split list, then of
 * the label file.
 *
 * CIFAR10-DVS (Li et al., Front. Neurosci. 2017): 10000 CIFAR-10 images moved on a monitor and
 * filmed by a DVS128, 1000 per class. Distributed as airplane.zip .. truck.zip, each holding
 * that class's recordings cifar10_<class>_<number>.aedat (AEDAT 2.0). No official split: as
 * SpikingJelly's usual split_to_train_test_set(0.9), train = the first 90% of each class by
 * recording number, test = the rest. Read from the zips or from extracted <class>/ folders.
 */
#define _POSIX_C_SOURCE 200809L /* opendir, readdir */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#include "data_internal.h"
#include "tensor/error.h"

#define DVS_SIDE 128
#define MAX_TRIALS 1024
#define SMALL_FILE ((uint64_t)1 << 24) /* labels and split lists are read whole, up to 16 MiB */

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

/* ---- DVS Gesture ------------------------------------------------------------------------------ */

typedef struct trial {
    char name[128];                 /* "user01_fluorescent.aedat" */
    snn_gesture_label *labels;      /* (n_labels) */
    int n_labels;
    int64_t first;                  /* index of its first sample in the data set */
    bool found;
} trial;

typedef struct gesture_state {
    trial trials[MAX_TRIALS];
    int n_trials;
    bool have_list;
    /* label files seen before we know which trials we want: kept by stem */
    struct {
        char stem[128];
        snn_gesture_label *labels;
        int n;
    } files[MAX_TRIALS];
    int n_files;
} gesture_state;

static void gesture_state_free(gesture_state *g)
{
    for (int i = 0; i < g->n_files; i++)
        snn_free(g->files[i].labels, (size_t)g->files[i].n * sizeof *g->files[i].labels, SNN_CPU);
    g->n_files = 0;
}

/* Takes a split list's lines (file names) as trials. */
static snn_status parse_trials(gesture_state *g, const uint8_t *text, uint64_t size,
                               const char *source)
{
    const char *p = (const char *)text, *end = p + size;
    g->n_trials = 0;
    while (p < end) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        if (!eol) eol = end;
        const char *a = p, *b = eol;
        p = eol < end ? eol + 1 : end;
        while (a < b && (*a == ' ' || *a == '\t' || *a == '\r')) a++;
        while (b > a && (b[-1] == ' ' || b[-1] == '\t' || b[-1] == '\r')) b--;
        if (a == b) continue;
        if (g->n_trials == MAX_TRIALS || (size_t)(b - a) >= sizeof g->trials[0].name)
            return snn_error(SNN_ERR_FORMAT, "%s: more than %d names or a name over %zu "
                             "characters (expected DVS Gesture's list of recordings)", source,
                             MAX_TRIALS, sizeof g->trials[0].name - 1);
        trial *t = &g->trials[g->n_trials++];
        memset(t, 0, sizeof *t);
        memcpy(t->name, a, (size_t)(b - a));
        t->name[b - a] = '\0';
        if (!ends_with(t->name, ".aedat"))
            return snn_error(SNN_ERR_FORMAT, "%s: '%s' is not a recording (expected names "
                             "userNN_<lighting>.aedat)", source, t->name);
    }
    if (g->n_trials == 0)
        return snn_error(SNN_ERR_FORMAT, "%s: empty (expected the names of the recordings of "
                         "the split)", source);
    g->have_list = true;
    return SNN_OK;
}

/* One small file of the data set (by base name): a split list or a label file. */
static snn_status take_small_file(gesture_state *g, const char *base, const uint8_t *data,
                                  uint64_t size, const char *source, snn_split split)
{
    const char *list = split == SNN_SPLIT_TRAIN ? "trials_to_train.txt" : "trials_to_test.txt";
    if (strcmp(base, list) == 0) return parse_trials(g, data, size, source);
    if (!ends_with(base, "_labels.csv")) return SNN_OK;
    if (g->n_files == MAX_TRIALS || strlen(base) >= sizeof g->files[0].stem + 11)
        return snn_error(SNN_ERR_FORMAT, "%s: too many label files or too long a name", source);
    snn_gesture_label *labels;
    int n;
    snn_status st = snn_gesture_labels_parse(data, size, source, &labels, &n);
    if (st != SNN_OK) return st;
    size_t stem_len = strlen(base) - strlen("_labels.csv");
    memcpy(g->files[g->n_files].stem, base, stem_len);
    g->files[g->n_files].stem[stem_len] = '\0';
    g->files[g->n_files].labels = labels;
    g->files[g->n_files].n = n;
    g->n_files++;
    return SNN_OK;
}

/* After the small files: every listed trial needs its label file; counts the samples. */
static snn_status plan_samples(gesture_state *g, const char *origin, snn_split split,
                               int64_t *total)
{
    if (!g->have_list)
        return snn_error(SNN_ERR_FORMAT, "'%s': no %s (expected DVS Gesture's split lists "
                         "beside the recordings)", origin,
                         split == SNN_SPLIT_TRAIN ? "trials_to_train.txt" : "trials_to_test.txt");
    *total = 0;
    for (int i = 0; i < g->n_trials; i++) {
        trial *t = &g->trials[i];
        char stem[128];
        snprintf(stem, sizeof stem, "%.*s", (int)(strlen(t->name) - strlen(".aedat")), t->name);
        for (int k = 0; k < g->n_files && !t->labels; k++)
            if (strcmp(g->files[k].stem, stem) == 0) {
                t->labels = g->files[k].labels;
                t->n_labels = g->files[k].n;
            }
        if (!t->labels)
            return snn_error(SNN_ERR_FORMAT, "'%s': no %s_labels.csv for the listed recording "
                             "'%s'", origin, stem, t->name);
        t->first = *total;
        *total += t->n_labels;
    }
    return SNN_OK;
}

/* Decodes one recording and cuts it into its gestures' frames. */
static snn_status cut_recording(trial *t, const uint8_t *data, uint64_t size, const char *source,
                                const snn_event_frames *f, snn_dataset *out)
{
    if (t->found) return snn_error(SNN_ERR_FORMAT, "%s appears twice (expected it once)", source);
    t->found = true;
    snn_event_list all = {0}, one = {0};
    snn_status st = snn_aedat3_decode(data, size, source, DVS_SIDE, DVS_SIDE, &all);
    const int64_t bytes = snn_event_frame_bytes(f, DVS_SIDE, DVS_SIDE);
    for (int k = 0; k < t->n_labels && st == SNN_OK; k++) {
        const snn_gesture_label *g = &t->labels[k];
        one.count = 0;
        for (int64_t i = 0; i < all.count && st == SNN_OK; i++)
            if (all.items[i].t >= g->start && all.items[i].t < g->end)
                st = snn_event_list_push(&one, all.items[i], source);
        if (st != SNN_OK) break;
        int64_t sample = t->first + k;
        snn_events_to_frames(out->images + sample * bytes, one.items, one.count, DVS_SIDE,
                             DVS_SIDE, f);
        out->labels[sample] = (uint8_t)g->label;
    }
    snn_event_list_free(&all);
    snn_event_list_free(&one);
    return st;
}

static trial *find_trial(gesture_state *g, const char *base)
{
    for (int i = 0; i < g->n_trials; i++)
        if (strcmp(g->trials[i].name, base) == 0) return &g->trials[i];
    return NULL;
}

static snn_status open_source(snn_stream *s, const char *path, const void *data, size_t size)
{
    return path ? snn_stream_open_file(s, path) : snn_stream_open_memory(s, data, size, "(memory)");
}

/* One pass over the archive: pass 0 takes the small files, pass 1 the recordings. */
static snn_status tar_pass(gesture_state *g, int pass, const char *path, const void *data,
                           size_t size, snn_split split, const snn_event_frames *f,
                           snn_dataset *out)
{
    snn_stream s;
    snn_status st = open_source(&s, path, data, size);
    if (st != SNN_OK) return st;
    snn_tar tar;
    snn_tar_init(&tar, &s);
    for (;;) {
        snn_tar_member m;
        bool end;
        st = snn_tar_next(&tar, &m, &end);
        if (st != SNN_OK || end) break;
        if (m.type != '0') continue;
        const char *base = base_name(m.name);
        bool small = pass == 0 && (ends_with(base, "_labels.csv") || ends_with(base, ".txt"));
        trial *t = pass == 1 && ends_with(base, ".aedat") ? find_trial(g, base) : NULL;
        if (!small && !t) continue;
        if (small && m.size > SMALL_FILE) continue; /* not one of ours */
        char source[1400];
        snprintf(source, sizeof source, "'%s' member '%s'", s.name, m.name);
        uint8_t *bytes = NULL;
        st = snn_stream_read_alloc(&s, m.size, &bytes, t ? "a DVS Gesture recording"
                                                         : "a label or split file");
        if (st != SNN_OK) break;
        tar.left -= m.size;
        if (small) st = take_small_file(g, base, bytes, m.size, source, split);
        else st = cut_recording(t, bytes, m.size, source, f, out);
        snn_free(bytes, (size_t)m.size, SNN_CPU);
        if (st != SNN_OK) break;
    }
    if (st == SNN_OK) st = snn_stream_drain(&s); /* let the gzip trailer's CRC vouch for it */
    snn_stream_close(&s);
    return st;
}

static snn_status check_found(gesture_state *g, const char *origin)
{
    for (int i = 0; i < g->n_trials; i++)
        if (!g->trials[i].found)
            return snn_error(SNN_ERR_FORMAT, "'%s': no recording '%s' (the split list names it)",
                             origin, g->trials[i].name);
    return SNN_OK;
}

snn_status snn_dvs_gesture_read_tar(const char *path, const void *data, size_t size,
                                    snn_split split, const snn_event_frames *f, snn_dataset *out)
{
    memset(out, 0, sizeof *out);
    gesture_state *g = snn_alloc(sizeof *g, SNN_CPU);
    if (!g) return snn_error(SNN_ERR_MEMORY, "snn_dvs_gesture_read_tar: out of memory");
    memset(g, 0, sizeof *g);
    const char *origin = path ? path : "(memory)";
    int64_t total = 0;
    snn_status st = tar_pass(g, 0, path, data, size, split, f, out);
    if (st == SNN_OK) st = plan_samples(g, origin, split, &total);
    if (st == SNN_OK && total > 0)
        st = snn_event_dataset_alloc(out, "dvs-gesture", total, f, DVS_SIDE, DVS_SIDE, 11);
    if (st == SNN_OK) st = tar_pass(g, 1, path, data, size, split, f, out);
    if (st == SNN_OK) st = check_found(g, origin);
    if (st != SNN_OK) snn_dataset_free(out);
    gesture_state_free(g);
    snn_free(g, sizeof *g, SNN_CPU);
    return st;
}

/* A whole file into a block of *size + 1 bytes (free with snn_free(*out, *size + 1)). */
static snn_status read_file(const char *path, uint64_t limit, uint8_t **out, uint64_t *size)
{
    snn_stream s;
    uint64_t capacity;
    uint8_t *buf;
    *out = NULL;
    snn_status st = snn_stream_open_file(&s, path);
    if (st != SNN_OK) return st;
    st = snn_stream_read_all(&s, limit, &buf, size, &capacity);
    snn_stream_close(&s);
    if (st != SNN_OK) return st;
    *out = snn_alloc((size_t)*size + 1, SNN_CPU);
    if (*out) memcpy(*out, buf, (size_t)*size);
    snn_free(buf, (size_t)capacity, SNN_CPU);
    return *out ? SNN_OK : snn_error(SNN_ERR_MEMORY, "'%s': out of memory", path);
}

static snn_status read_gesture_folder(const char *dir, snn_split split, const snn_event_frames *f,
                                      snn_dataset *out)
{
    gesture_state *g = snn_alloc(sizeof *g, SNN_CPU);
    if (!g) return snn_error(SNN_ERR_MEMORY, "snn_dvs_gesture_load: out of memory");
    memset(g, 0, sizeof *g);
    const char *list = split == SNN_SPLIT_TRAIN ? "trials_to_train.txt" : "trials_to_test.txt";
    char path[1200];
    uint8_t *bytes = NULL;
    uint64_t size = 0;
    int64_t total = 0;
    snn_status st = snn_path_join(path, sizeof path, dir, list);
    if (st == SNN_OK) st = read_file(path, SMALL_FILE, &bytes, &size);
    if (st == SNN_OK) st = take_small_file(g, list, bytes, size, path, split);
    if (bytes) snn_free(bytes, (size_t)size + 1, SNN_CPU);
    for (int i = 0; i < g->n_trials && st == SNN_OK; i++) {
        char name[160];
        snprintf(name, sizeof name, "%.*s_labels.csv",
                 (int)(strlen(g->trials[i].name) - strlen(".aedat")), g->trials[i].name);
        st = snn_path_join(path, sizeof path, dir, name);
        if (st == SNN_OK) st = read_file(path, SMALL_FILE, &bytes, &size);
        if (st == SNN_OK) st = take_small_file(g, name, bytes, size, path, split);
        if (bytes) snn_free(bytes, (size_t)size + 1, SNN_CPU);
        bytes = NULL;
    }
    if (st == SNN_OK) st = plan_samples(g, dir, split, &total);
    if (st == SNN_OK) st = snn_event_dataset_alloc(out, "dvs-gesture", total, f, DVS_SIDE, DVS_SIDE, 11);
    for (int i = 0; i < g->n_trials && st == SNN_OK; i++) {
        st = snn_path_join(path, sizeof path, dir, g->trials[i].name);
        if (st == SNN_OK) st = read_file(path, (uint64_t)1 << 33, &bytes, &size);
        char source[1300];
        snprintf(source, sizeof source, "'%s'", path);
        if (st == SNN_OK) st = cut_recording(&g->trials[i], bytes, size, source, f, out);
        if (bytes) snn_free(bytes, (size_t)size + 1, SNN_CPU);
        bytes = NULL;
    }
    if (st != SNN_OK) snn_dataset_free(out);
    gesture_state_free(g);
    snn_free(g, sizeof *g, SNN_CPU);
    return st;
}

snn_status snn_dvs_gesture_load(const char *path, snn_split split, const snn_event_frames *f,
                                snn_dataset *out)
{
    memset(out, 0, sizeof *out);
    const char *archives[] = {"DvsGesture.tar.gz", "DvsGesture.tar"};
    char candidate[1024];
    if (!snn_path_exists(path))
        return snn_error(SNN_ERR_IO, "cannot open '%s': no such file or folder (expected "
                         "DvsGesture.tar.gz or a folder holding it or DvsGesture/)", path);
    if (!snn_path_is_dir(path)) return snn_dvs_gesture_read_tar(path, NULL, 0, split, f, out);
    for (int i = 0; i < 2; i++) {
        snn_status st = snn_path_join(candidate, sizeof candidate, path, archives[i]);
        if (st != SNN_OK) return st;
        if (snn_path_exists(candidate))
            return snn_dvs_gesture_read_tar(candidate, NULL, 0, split, f, out);
    }
    snn_status st = snn_path_join(candidate, sizeof candidate, path, "DvsGesture");
    if (st != SNN_OK) return st;
    if (snn_path_is_dir(candidate)) return read_gesture_folder(candidate, split, f, out);
    return read_gesture_folder(path, split, f, out);
}

/* ---- CIFAR10-DVS ------------------------------------------------------------------------------ */

static const char *const cifar_classes[10] = {"airplane", "automobile", "bird", "cat", "deer",
                                              "dog", "frog", "horse", "ship", "truck"};

typedef struct recording {
    char path[300];      /* member name or file path */
    int zip;             /* index into the zips, -1 for a file */
    int64_t member;
    int label;
    int64_t number;      /* the <number> of cifar10_<class>_<number>.aedat; -1 if none */
} recording;

static int64_t recording_number(const char *name)
{
    size_t len = strlen(name);
    if (len < 7) return -1;
    const char *end = name + len - 6; /* ".aedat" */
    const char *p = end;
    while (p > name && p[-1] >= '0' && p[-1] <= '9') p--;
    if (p == end || end - p > 12) return -1;
    int64_t v = 0;
    for (; p < end; p++) v = v * 10 + (*p - '0');
    return v;
}

static int compare_recordings(const void *a, const void *b)
{
    const recording *x = a, *y = b;
    if (x->label != y->label) return x->label < y->label ? -1 : 1;
    if (x->number != y->number) return x->number < y->number ? -1 : 1;
    return strcmp(x->path, y->path);
}

/* Sorts the recordings, keeps the split's part of each class and decodes it. */
static snn_status build_cifar(snn_zip *zips, recording *recs, int64_t n, const char *origin,
                              snn_split split, const snn_event_frames *f, snn_dataset *out)
{
    qsort(recs, (size_t)n, sizeof *recs, compare_recordings);
    int64_t per_class[10] = {0}, seen[10] = {0}, total = 0;
    for (int64_t i = 0; i < n; i++) per_class[recs[i].label]++;
    for (int c = 0; c < 10; c++) {
        int64_t train = per_class[c] * 9 / 10;
        total += split == SNN_SPLIT_TRAIN ? train : per_class[c] - train;
    }
    if (total == 0)
        return snn_error(SNN_ERR_FORMAT, "'%s': no recording for the %s split (expected "
                         "cifar10_<class>_<number>.aedat files)", origin,
                         split == SNN_SPLIT_TRAIN ? "train" : "test");
    snn_status st = snn_event_dataset_alloc(out, "cifar10-dvs", total, f, DVS_SIDE, DVS_SIDE, 10);
    if (st != SNN_OK) return st;
    const int64_t bytes = snn_event_frame_bytes(f, DVS_SIDE, DVS_SIDE);
    snn_event_list events = {0};
    int64_t at = 0;
    for (int64_t i = 0; i < n && st == SNN_OK; i++) {
        const recording *r = &recs[i];
        int64_t rank = seen[r->label]++, train = per_class[r->label] * 9 / 10;
        if ((split == SNN_SPLIT_TRAIN) != (rank < train)) continue;
        uint8_t *data = NULL;
        uint64_t size = 0;
        char source[1400];
        if (r->zip >= 0) {
            snprintf(source, sizeof source, "'%s' member '%s'", zips[r->zip].name, r->path);
            st = snn_zip_read(&zips[r->zip], r->member, &data, &size);
        } else {
            snprintf(source, sizeof source, "'%s'", r->path);
            st = read_file(r->path, (uint64_t)1 << 31, &data, &size);
        }
        events.count = 0;
        if (st == SNN_OK) st = snn_aedat2_decode(data, size, source, &events);
        if (data) snn_free(data, (size_t)size + 1, SNN_CPU);
        if (st != SNN_OK) break;
        snn_events_to_frames(out->images + at * bytes, events.items, events.count, DVS_SIDE,
                             DVS_SIDE, f);
        out->labels[at++] = (uint8_t)r->label;
    }
    snn_event_list_free(&events);
    if (st != SNN_OK) snn_dataset_free(out);
    return st;
}

snn_status snn_cifar10dvs_read_zips(snn_zip *zips, const int *labels, int n, snn_split split,
                                    const snn_event_frames *f, snn_dataset *out)
{
    memset(out, 0, sizeof *out);
    int64_t total = 0;
    for (int z = 0; z < n; z++) total += zips[z].count;
    recording *recs = snn_alloc((size_t)(total + 1) * sizeof *recs, SNN_CPU);
    if (!recs) return snn_error(SNN_ERR_MEMORY, "snn_cifar10dvs_read_zips: out of memory");
    int64_t k = 0;
    for (int z = 0; z < n; z++) {
        SNN_ASSERT(labels[z] >= 0 && labels[z] < 10);
        for (int64_t i = 0; i < zips[z].count; i++) {
            const char *name = zips[z].entries[i].name;
            if (!ends_with(name, ".aedat")) continue;
            recording *r = &recs[k++];
            snprintf(r->path, sizeof r->path, "%s", name);
            r->zip = z;
            r->member = i;
            r->label = labels[z];
            r->number = recording_number(name);
        }
    }
    snn_status st = build_cifar(zips, recs, k, n > 0 ? zips[0].name : "(none)", split, f, out);
    snn_free(recs, (size_t)(total + 1) * sizeof *recs, SNN_CPU);
    return st;
}

/* Doubles the recording list. */
static snn_status list_grow(recording **recs, int64_t *capacity, int64_t n)
{
    recording *grown = snn_alloc((size_t)*capacity * 2 * sizeof *grown, SNN_CPU);
    if (!grown) return snn_error(SNN_ERR_MEMORY, "CIFAR10-DVS: out of memory for the file list");
    memcpy(grown, *recs, (size_t)n * sizeof *grown);
    snn_free(*recs, (size_t)*capacity * sizeof *grown, SNN_CPU);
    *recs = grown;
    *capacity *= 2;
    return SNN_OK;
}

/* Appends the .aedat files of folder `dir` as recordings of class `label`. */
static snn_status list_folder(const char *dir, int label, recording **recs, int64_t *n,
                              int64_t *capacity)
{
    DIR *d = opendir(dir);
    if (!d) return snn_error(SNN_ERR_IO, "cannot open the folder '%s'", dir);
    snn_status st = SNN_OK;
    struct dirent *entry;
    while (st == SNN_OK && (entry = readdir(d)) != NULL) {
        if (!ends_with(entry->d_name, ".aedat")) continue;
        if (*n == *capacity && (st = list_grow(recs, capacity, *n)) != SNN_OK) break;
        recording *r = &(*recs)[(*n)++];
        int w = snprintf(r->path, sizeof r->path, "%s/%s", dir, entry->d_name);
        if (w < 0 || (size_t)w >= sizeof r->path)
            st = snn_error(SNN_ERR_ARGUMENT, "'%s/%s': path too long", dir, entry->d_name);
        r->zip = -1;
        r->member = -1;
        r->label = label;
        r->number = recording_number(entry->d_name);
    }
    closedir(d);
    return st;
}

/* "<class>.zip" or the extracted "<class>/" folder for each of the 10 classes. */
snn_status snn_cifar10dvs_load(const char *path, snn_split split, const snn_event_frames *f,
                               snn_dataset *out)
{
    memset(out, 0, sizeof *out);
    if (!snn_path_is_dir(path))
        return snn_error(SNN_ERR_IO, "'%s' is not a folder (expected the folder holding "
                         "CIFAR10-DVS's airplane.zip .. truck.zip or airplane/ .. truck/)", path);
    snn_zip zips[10];
    memset(zips, 0, sizeof zips);
    int n_zips = 0;
    int64_t n = 0, capacity = 1024;
    recording *recs = snn_alloc((size_t)capacity * sizeof *recs, SNN_CPU);
    snn_status st = recs ? SNN_OK : snn_error(SNN_ERR_MEMORY, "snn_cifar10dvs_load: out of memory");
    for (int c = 0; c < 10 && st == SNN_OK; c++) {
        char zip_name[32], candidate[1200];
        snprintf(zip_name, sizeof zip_name, "%s.zip", cifar_classes[c]);
        st = snn_path_join(candidate, sizeof candidate, path, zip_name);
        if (st != SNN_OK) break;
        if (snn_path_exists(candidate)) {
            st = snn_zip_open_file(&zips[n_zips], candidate);
            if (st != SNN_OK) break;
            snn_zip *z = &zips[n_zips];
            for (int64_t i = 0; i < z->count && st == SNN_OK; i++) {
                if (!ends_with(z->entries[i].name, ".aedat")) continue;
                if (n == capacity) st = list_grow(&recs, &capacity, n);
                if (st != SNN_OK) break;
                recording *r = &recs[n++];
                snprintf(r->path, sizeof r->path, "%s", z->entries[i].name);
                r->zip = n_zips;
                r->member = i;
                r->label = c;
                r->number = recording_number(z->entries[i].name);
            }
            n_zips++;
            continue;
        }
        st = snn_path_join(candidate, sizeof candidate, path, cifar_classes[c]);
        if (st != SNN_OK) break;
        if (!snn_path_is_dir(candidate)) {
            st = snn_error(SNN_ERR_IO, "'%s' holds neither %s nor %s/ (expected CIFAR10-DVS as "
                           "distributed: one zip of AEDAT recordings per class)", path, zip_name,
                           cifar_classes[c]);
            break;
        }
        st = list_folder(candidate, c, &recs, &n, &capacity);
    }
    if (st == SNN_OK) st = build_cifar(zips, recs, n, path, split, f, out);
    for (int i = 0; i < n_zips; i++) snn_zip_close(&zips[i]);
    snn_free(recs, (size_t)capacity * sizeof *recs, SNN_CPU);
    return st;
}
