/*
 * test_data_shd.c - the SHD / SSC reader (data/shd.c, data/hdf5/shd_hdf5.c) on files this test
 * writes itself with the HDF5 C API in the published layout (spikes/times and spikes/units as
 * variable-length arrays, labels, an extra group), since the real sets cannot be downloaded
 * here: frames checked against counts worked out by hand (spikes on bin edges, after max_time,
 * binarised, pooled, saturated), labels, the loader's time-major batches in order; every bad
 * file (a missing group or dataset, times and units of different lengths, a unit out of range,
 * times going back, negative or NaN times, too few labels, a label out of range, not HDF5, a
 * missing or still gzipped file) failing with a message naming the file, the dataset and the
 * sample, and nothing loaded; and a file written by h5py as the public files are
 * (tests/shd/shd_h5py.py, float16 and float32 times) read back, when /usr/bin/python3 has h5py.
 * Through snn-train: the default model (rsnn), bad paths naming the file, a convolutional model
 * and --augment 1 refused, and rsnn learning 5 synthetic classes (band sweeps in noise) from
 * such files to more than 60% test accuracy (86% measured; chance 20%).
 *
 * The framing test needs no HDF5; the file tests report skipped (77) in a build without it,
 * after checking the reader says "built without HDF5".
 *
 *     ctest -R data_shd --output-on-failure
 */
#define _XOPEN_SOURCE 700
#include <math.h>
#include <sys/wait.h>

#include "test.h"
#include "test_data_util.h"

static int message_has(const char *needle)
{
    if (strstr(snn_last_error(), needle)) return 1;
    fprintf(stderr, "  message lacks '%s': %s\n", needle, snn_last_error());
    return 0;
}

/* ---- framing, no file ------------------------------------------------------------------------ */

static void test_framing(void)
{
    /* T = 4 over 1 s: bins [0, .25) [.25, .5) [.5, .75) [.75, 1) */
    const double t[] = {0.0, 0.2499, 0.25, 0.5, 0.5, 0.74, 0.75, 0.999, 1.0, 1.5};
    const int64_t u[] = {0, 0, 0, 3, 3, 699, 5, 4, 1, 2};
    snn_spike_frames f = snn_spike_frames_default();
    CHECK(f.frames == 100 && f.max_time == 1.0 && !f.binarize && f.pool == 1);
    f.frames = 4;
    uint8_t frames[4 * 700];
    memset(frames, 7, sizeof frames);
    CHECK(snn_spikes_to_frames(frames, t, u, 10, 700, &f) == 2); /* 1.0 and 1.5 dropped */
    int total = 0;
    for (int i = 0; i < 4 * 700; i++) total += frames[i];
    CHECK(total == 8);
    CHECK(frames[0 * 700 + 0] == 2); /* 0.0 and 0.2499 */
    CHECK(frames[1 * 700 + 0] == 1); /* 0.25 sits on the edge: the upper bin */
    CHECK(frames[2 * 700 + 3] == 2);
    CHECK(frames[2 * 700 + 699] == 1);
    CHECK(frames[3 * 700 + 5] == 1 && frames[3 * 700 + 4] == 1);

    f.binarize = true; /* counts clipped to 1 */
    snn_spikes_to_frames(frames, t, u, 10, 700, &f);
    CHECK(frames[0] == 1 && frames[2 * 700 + 3] == 1 && frames[1 * 700 + 0] == 1);

    f.binarize = false;
    f.pool = 2; /* 350 channels: 4 and 5 -> 2, 699 -> 349 */
    uint8_t pooled[4 * 350];
    CHECK(snn_spikes_to_frames(pooled, t, u, 10, 700, &f) == 2);
    CHECK(pooled[3 * 350 + 2] == 2);
    CHECK(pooled[2 * 350 + 1] == 2 && pooled[2 * 350 + 349] == 1 && pooled[0] == 2);
    f.pool = 3; /* ceil(700 / 3) = 234: channel 699 -> 233 */
    uint8_t pooled3[4 * 234];
    snn_spikes_to_frames(pooled3, t, u, 10, 700, &f);
    CHECK(pooled3[2 * 234 + 233] == 1 && pooled3[2 * 234 + 1] == 2);

    /* t = 0.3 of T = 10 bins of 0.1 s: 0.3 / 0.1 is 2.999..., 0.3 * 10 is 3: bin 3 */
    f = snn_spike_frames_default();
    f.frames = 10;
    const double edge[] = {0.3, 0.7, 0.9999999};
    const int64_t edge_units[] = {1, 1, 1};
    uint8_t ten[10 * 700];
    CHECK(snn_spikes_to_frames(ten, edge, edge_units, 3, 700, &f) == 0);
    CHECK(ten[3 * 700 + 1] == 1 && ten[2 * 700 + 1] == 0 && ten[7 * 700 + 1] == 1 &&
          ten[9 * 700 + 1] == 1);

    /* max_time 0.5 s, T = 2: 0.25 -> bin 1, 0.5 dropped; 300 spikes saturate at 255 */
    f.frames = 2;
    f.max_time = 0.5;
    double many[300];
    int64_t many_units[300];
    for (int i = 0; i < 300; i++) many[i] = 0.1, many_units[i] = 9;
    uint8_t two[2 * 700];
    CHECK(snn_spikes_to_frames(two, many, many_units, 300, 700, &f) == 0);
    CHECK(two[9] == 255);
    CHECK(snn_spikes_to_frames(two, t, u, 10, 700, &f) == 7); /* 0.5 0.5 0.74 .. 1.5 */
    CHECK(two[1 * 700 + 0] == 1 && two[0] == 2);

    CHECK(snn_dataset_is_spike_audio("shd") && snn_dataset_is_spike_audio("ssc"));
    CHECK(!snn_dataset_is_spike_audio("nmnist") && !snn_dataset_is_spike_audio(NULL));
}

#ifndef SNN_TEST_HDF5

int main(void)
{
    RUN(test_framing);
    snn_dataset ds;
    CHECK(snn_spike_dataset_load("shd", "/nonexistent", SNN_SPLIT_TRAIN, NULL, &ds, NULL) ==
          SNN_ERR_UNSUPPORTED);
    CHECK(message_has("built without HDF5") && ds.images == NULL);
    int code = test_finish();
    if (code != EXIT_SUCCESS) return code;
    fprintf(stderr, "skipped: the file tests need the HDF5 C library (Debian libhdf5-dev)\n");
    return 77;
}

#else

#include <hdf5.h>

static char dir[64];

/* ---- writing files in the layout ------------------------------------------------------------- */

#define MAX_SAMPLES 8

/* A split to write: per sample its times and units (lengths may differ: a bad file), labels,
 * and parts to leave out. */
typedef struct split_spec {
    int samples;
    const float *times[MAX_SAMPLES];
    int n_times[MAX_SAMPLES];
    const int *units[MAX_SAMPLES];
    int n_units[MAX_SAMPLES];
    const int *labels;
    int n_labels;
    bool no_spikes, no_times, no_units, no_labels;
} split_spec;

/* One variable-length dataset `name` of `samples` arrays in `where`. */
static void write_vlen(hid_t where, const char *name, hid_t file_base, hid_t mem_base,
                       const void *const *data, const int *lens, int samples)
{
    hvl_t rows[MAX_SAMPLES];
    for (int i = 0; i < samples; i++) rows[i] = (hvl_t){(size_t)lens[i], (void *)data[i]};
    hsize_t dims[1] = {(hsize_t)samples};
    hid_t file_type = H5Tvlen_create(file_base), mem_type = H5Tvlen_create(mem_base);
    hid_t space = H5Screate_simple(1, dims, NULL);
    hid_t d = H5Dcreate2(where, name, file_type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    CHECK(d >= 0 && H5Dwrite(d, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, rows) >= 0);
    H5Dclose(d);
    H5Sclose(space);
    H5Tclose(file_type);
    H5Tclose(mem_type);
}

static void write_ints(hid_t where, const char *name, hid_t file_type, const int *v, int n)
{
    hsize_t dims[1] = {(hsize_t)n};
    hid_t space = H5Screate_simple(1, dims, NULL);
    hid_t d = H5Dcreate2(where, name, file_type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    CHECK(d >= 0 && H5Dwrite(d, H5T_NATIVE_INT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) >= 0);
    H5Dclose(d);
    H5Sclose(space);
}

/* Writes `s` as the published files are: times float32, units uint16, labels uint8, plus
 * extra/speaker. */
static void write_split(const char *path, const split_spec *s)
{
    hid_t file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    CHECK(file >= 0);
    uint16_t units16[MAX_SAMPLES][128];
    const void *units[MAX_SAMPLES], *times[MAX_SAMPLES];
    for (int i = 0; i < s->samples; i++) {
        for (int k = 0; k < s->n_units[i] && k < 128; k++) units16[i][k] = (uint16_t)s->units[i][k];
        units[i] = units16[i];
        times[i] = s->times[i];
    }
    if (!s->no_spikes) {
        hid_t spikes = H5Gcreate2(file, "spikes", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        if (!s->no_times)
            write_vlen(spikes, "times", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, times, s->n_times,
                       s->samples);
        if (!s->no_units)
            write_vlen(spikes, "units", H5T_STD_U16LE, H5T_NATIVE_UINT16, units, s->n_units,
                       s->samples);
        H5Gclose(spikes);
    }
    if (!s->no_labels) write_ints(file, "labels", H5T_STD_U8LE, s->labels, s->n_labels);
    hid_t extra = H5Gcreate2(file, "extra", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    int speakers[MAX_SAMPLES] = {0};
    write_ints(extra, "speaker", H5T_STD_U16LE, speakers, s->samples);
    H5Gclose(extra);
    CHECK(H5Fclose(file) >= 0);
}

/* Three samples of T = 4 bins over 1 s (the default max_time), worked out by hand:
 *   sample 0: 0.0 u0, 0.25 u0 (edge: bin 1), 0.5 u4, 0.5 u5, 1.0 u1 (dropped)  label 3
 *   sample 1: no spikes                                                         label 0
 *   sample 2: 0.1 u699, 0.2 u699, 0.8 u10, 2.0 u2 (dropped)                     label 19 */
static const float t0[] = {0.0f, 0.25f, 0.5f, 0.5f, 1.0f}, t2[] = {0.1f, 0.2f, 0.8f, 2.0f};
static const int u0[] = {0, 0, 4, 5, 1}, u2[] = {699, 699, 10, 2};
static const int good_labels[] = {3, 0, 19};

static split_spec good_split(void)
{
    split_spec s = {.samples = 3, .labels = good_labels, .n_labels = 3};
    s.times[0] = t0, s.n_times[0] = 5, s.units[0] = u0, s.n_units[0] = 5;
    s.times[1] = t0, s.n_times[1] = 0, s.units[1] = u0, s.n_units[1] = 0;
    s.times[2] = t2, s.n_times[2] = 4, s.units[2] = u2, s.n_units[2] = 4;
    return s;
}

static uint8_t at(const snn_dataset *ds, int64_t sample, int t, int c)
{
    return ds->images[(sample * ds->time_steps + t) * ds->width + c];
}

static void test_read_split(void)
{
    char folder[1024], path[1024];
    tmp_path(folder, dir, "shd");
    CHECK(mkdir(folder, 0700) == 0);
    split_spec s = good_split();
    write_split(tmp_path(path, folder, "shd_train.h5"), &s);
    s.samples = 1, s.n_labels = 1; /* the test split: sample 0 alone */
    write_split(tmp_path(path, folder, "shd_test.h5"), &s);

    snn_spike_frames f = snn_spike_frames_default();
    f.frames = 4;
    snn_dataset ds;
    int64_t dropped = -1;
    CHECK_OK(snn_spike_dataset_load("shd", folder, SNN_SPLIT_TRAIN, &f, &ds, &dropped));
    CHECK(ds.count == 3 && ds.time_steps == 4 && ds.channels == 1 && ds.height == 1 &&
          ds.width == 700 && ds.classes == 20 && strcmp(ds.name, "shd") == 0);
    CHECK(dropped == 2);
    CHECK(ds.labels[0] == 3 && ds.labels[1] == 0 && ds.labels[2] == 19);
    int total = 0;
    for (int64_t i = 0; i < ds.count * snn_dataset_image_bytes(&ds); i++) total += ds.images[i];
    CHECK(total == 7);
    CHECK(at(&ds, 0, 0, 0) == 1 && at(&ds, 0, 1, 0) == 1 && at(&ds, 0, 2, 4) == 1 &&
          at(&ds, 0, 2, 5) == 1);
    CHECK(at(&ds, 2, 0, 699) == 2 && at(&ds, 2, 3, 10) == 1);

    /* the loader: (T, N, 1, 1, 700) batches, counts as they are (mean 0, std 1/255) */
    snn_loader_config lc = snn_loader_config_default();
    lc.batch_size = 2;
    lc.shuffle = false;
    lc.prefetch = false;
    snn_dataset_default_norm(&ds, lc.mean, lc.std);
    snn_loader *loader = snn_loader_new(&ds, &lc);
    CHECK(loader && snn_loader_num_batches(loader) == 2);
    snn_batch b;
    CHECK(snn_loader_next(loader, &b) && b.count == 2 && b.time_steps == 4 && b.width == 700);
    /* element (t, n, c) at (t * N + n) * 700 + c */
    CHECK_CLOSE(b.images[(1 * 2 + 0) * 700 + 0], 1.0f, 1e-5, 1e-5);
    CHECK_CLOSE(b.images[(0 * 2 + 0) * 700 + 0], 1.0f, 1e-5, 1e-5);
    CHECK_CLOSE(b.images[(2 * 2 + 0) * 700 + 5], 1.0f, 1e-5, 1e-5);
    CHECK(b.images[(2 * 2 + 1) * 700 + 5] == 0.0f);
    CHECK(b.labels[0] == 3.0f && b.labels[1] == 0.0f);
    CHECK(snn_loader_next(loader, &b) && b.count == 1 && b.labels[0] == 19.0f);
    CHECK_CLOSE(b.images[(0 * 1 + 0) * 700 + 699], 2.0f, 1e-5, 1e-5);
    CHECK_CLOSE(b.images[(3 * 1 + 0) * 700 + 10], 1.0f, 1e-5, 1e-5);
    CHECK(!snn_loader_next(loader, &b));
    snn_loader_free(loader);
    snn_dataset_free(&ds);

    /* pooled by 2, binarised, over 0.5 s in 2 bins: sample 2's 699s -> channel 349, 1 */
    f = (snn_spike_frames){.frames = 2, .max_time = 0.5, .binarize = true, .pool = 2};
    CHECK_OK(snn_spike_dataset_load("shd", folder, SNN_SPLIT_TRAIN, &f, &ds, &dropped));
    CHECK(ds.width == 350 && ds.time_steps == 2 && dropped == 5); /* 0.5 0.5 1.0; 0.8 2.0 */
    CHECK(at(&ds, 2, 0, 349) == 1 && at(&ds, 0, 0, 0) == 1 && at(&ds, 0, 1, 0) == 1);
    CHECK(at(&ds, 0, 1, 2) == 0);
    snn_dataset_free(&ds);

    /* the test split, and a file path instead of a folder */
    CHECK_OK(snn_spike_dataset_load("shd", folder, SNN_SPLIT_TEST, NULL, &ds, NULL));
    CHECK(ds.count == 1 && ds.time_steps == 100 && ds.labels[0] == 3);
    CHECK(at(&ds, 0, 25, 0) == 1 && at(&ds, 0, 50, 4) == 1); /* 0.25 s, 0.5 s at 10 ms */
    snn_dataset_free(&ds);
    CHECK_OK(snn_spike_dataset_load("ssc", tmp_path(path, folder, "shd_train.h5"),
                                    SNN_SPLIT_TRAIN, NULL, &ds, NULL));
    CHECK(ds.count == 3 && ds.classes == 35 && strcmp(ds.name, "ssc") == 0);
    snn_dataset_free(&ds);

    /* bad arguments */
    f = snn_spike_frames_default();
    f.max_time = 0.0;
    CHECK(snn_spike_dataset_load("shd", folder, SNN_SPLIT_TRAIN, &f, &ds, NULL) ==
          SNN_ERR_ARGUMENT);
    CHECK(message_has("frames.max_time") && ds.images == NULL);
    CHECK(snn_spike_dataset_load("nmnist", folder, SNN_SPLIT_TRAIN, NULL, &ds, NULL) ==
          SNN_ERR_ARGUMENT);
    CHECK(message_has("'name'"));
}

/* Writes `s` as bad.h5, loads it as SHD: expects SNN_ERR_FORMAT (or `status`), a message with
 * the file and each of the needles, and nothing loaded. */
static void expect_bad(const split_spec *s, snn_status status, const char *a, const char *b,
                       const char *c)
{
    char path[1024];
    tmp_path(path, dir, "bad.h5");
    if (s) write_split(path, s);
    snn_dataset ds;
    int64_t dropped = 99;
    CHECK(snn_spike_dataset_load("shd", path, SNN_SPLIT_TRAIN, NULL, &ds, &dropped) == status);
    CHECK(message_has(path) && message_has("snn_spike_dataset_load(\"shd\", train)"));
    if (a) CHECK(message_has(a));
    if (b) CHECK(message_has(b));
    if (c) CHECK(message_has(c));
    CHECK(ds.images == NULL && ds.labels == NULL && ds.count == 0 && dropped == 0);
}

static void test_bad_files(void)
{
    split_spec s = good_split();
    s.no_spikes = true;
    expect_bad(&s, SNN_ERR_FORMAT, "no group 'spikes'", NULL, NULL);
    s = good_split(), s.no_times = true;
    expect_bad(&s, SNN_ERR_FORMAT, "no dataset 'spikes/times'", NULL, NULL);
    s = good_split(), s.no_units = true;
    expect_bad(&s, SNN_ERR_FORMAT, "no dataset 'spikes/units'", NULL, NULL);
    s = good_split(), s.no_labels = true;
    expect_bad(&s, SNN_ERR_FORMAT, "no dataset 'labels'", NULL, NULL);

    s = good_split(), s.n_units[2] = 3; /* 4 times, 3 units */
    expect_bad(&s, SNN_ERR_FORMAT, "sample 2", "'spikes/times' holds 4", "'spikes/units' 3");
    static const int bad_unit[] = {0, 0, 4, 700, 1};
    s = good_split(), s.units[0] = bad_unit;
    expect_bad(&s, SNN_ERR_FORMAT, "dataset 'spikes/units', sample 0", "spike 3", "unit 700");
    static const float back[] = {0.1f, 0.3f, 0.2f, 0.5f};
    s = good_split(), s.times[2] = back;
    expect_bad(&s, SNN_ERR_FORMAT, "dataset 'spikes/times', sample 2", "spike 2", "goes back");
    static const float negative[] = {-0.5f, 0.25f, 0.5f, 0.5f, 1.0f};
    s = good_split(), s.times[0] = negative;
    expect_bad(&s, SNN_ERR_FORMAT, "dataset 'spikes/times', sample 0", "spike 0", "-0.5");
    const float not_a_number[] = {0.1f, NAN, 0.8f, 2.0f};
    s = good_split(), s.times[2] = not_a_number;
    expect_bad(&s, SNN_ERR_FORMAT, "dataset 'spikes/times', sample 2", "spike 1", "nan");
    const float infinite[] = {0.1f, 0.2f, 0.8f, INFINITY};
    s = good_split(), s.times[2] = infinite;
    expect_bad(&s, SNN_ERR_FORMAT, "dataset 'spikes/times', sample 2", "spike 3", "inf");

    s = good_split(), s.n_labels = 2;
    expect_bad(&s, SNN_ERR_FORMAT, "dataset 'labels' holds 2 labels for 3 samples", NULL, NULL);
    static const int label_20[] = {3, 0, 20};
    s = good_split(), s.labels = label_20;
    expect_bad(&s, SNN_ERR_FORMAT, "dataset 'labels', sample 2", "label 20", "0..19");
    s = good_split(), s.samples = 0, s.n_labels = 0;
    expect_bad(&s, SNN_ERR_FORMAT, "no samples", NULL, NULL);

    char path[1024];
    write_bytes(tmp_path(path, dir, "bad.h5"), "not an HDF5 file at all", 23);
    expect_bad(NULL, SNN_ERR_FORMAT, "not an HDF5 file", NULL, NULL);
    remove(path);
    expect_bad(NULL, SNN_ERR_IO, "cannot open", NULL, NULL);

    /* a folder without the split's file; one holding it still gzipped */
    char folder[1024];
    tmp_path(folder, dir, "empty");
    CHECK(mkdir(folder, 0700) == 0);
    snn_dataset ds;
    CHECK(snn_spike_dataset_load("ssc", folder, SNN_SPLIT_TEST, NULL, &ds, NULL) == SNN_ERR_IO);
    CHECK(message_has("ssc_test.h5") && message_has(folder) && ds.images == NULL);
    write_gz(tmp_path(path, folder, "ssc_test.h5.gz"), "x", 1);
    CHECK(snn_spike_dataset_load("ssc", folder, SNN_SPLIT_TEST, NULL, &ds, NULL) == SNN_ERR_IO);
    CHECK(message_has("gunzip") && message_has("ssc_test.h5.gz"));
}

/* ---- a file written by h5py, as the public ones ---------------------------------------------- */

static void check_h5py_file(const char *path)
{
    snn_spike_frames f = snn_spike_frames_default();
    f.frames = 8; /* bins of 1/8 s: spike k of sample i, at (k + i) / 64 s, in bin (k + i) / 8 */
    snn_dataset ds;
    int64_t dropped = 0;
    CHECK_OK(snn_spike_dataset_load("shd", path, SNN_SPLIT_TRAIN, &f, &ds, &dropped));
    if (ds.count != 5) {
        CHECK(ds.count == 5);
        snn_dataset_free(&ds);
        return;
    }
    uint8_t want[8 * 700];
    int64_t want_dropped = 0;
    bool same = true;
    for (int i = 0; i < 5; i++) {
        memset(want, 0, sizeof want);
        for (int k = 0; k < 70 + i; k++) {
            if (k + i >= 64) { /* at or after 1 s */
                want_dropped++;
                continue;
            }
            want[(k + i) / 8 * 700 + (37 * k + 11 * i) % 700]++;
        }
        same = same && memcmp(ds.images + i * 8 * 700, want, sizeof want) == 0;
        CHECK(ds.labels[i] == i % 20);
    }
    CHECK(same);
    CHECK(dropped == want_dropped);
    snn_dataset_free(&ds);
}

static void test_h5py_layout(void)
{
    if (system("/usr/bin/python3 -c 'import h5py, numpy' 2>/dev/null") != 0) {
        fprintf(stderr, "  skipped: needs /usr/bin/python3 with h5py and numpy (Debian "
                "python3-h5py)\n");
        return;
    }
    static const char *const dtypes[] = {"float16", "float32"};
    for (int d = 0; d < 2; d++) {
        char path[1024], command[2200];
        char name[32];
        snprintf(name, sizeof name, "h5py_%s.h5", dtypes[d]);
        tmp_path(path, dir, name);
        snprintf(command, sizeof command, "/usr/bin/python3 tests/shd/shd_h5py.py %s %s", path,
                 dtypes[d]);
        CHECK(system(command) == 0);
        check_h5py_file(path);
    }
}

/* ---- snn-train --dataset shd / ssc ----------------------------------------------------------- */

/* Runs snn-train with `args`, its output in dir/train.txt; the exit status. */
static int train(const char *args)
{
    char cmd[3000];
    snprintf(cmd, sizeof cmd, SNN_BIN_DIR "/snn-train --threads 1 %s > %s/train.txt "
             "2>&1", args, dir);
    int status = system(cmd);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static int train_said(const char *needle)
{
    char path[1024];
    size_t n = 0;
    char *text = (char *)read_bytes(tmp_path(path, dir, "train.txt"), &n);
    text[n] = '\0'; /* read_bytes leaves room for it */
    int found = strstr(text, needle) != NULL;
    if (!found) fprintf(stderr, "  snn-train's output lacks '%s': %s\n", needle, text);
    free(text);
    return found;
}

static void test_snn_train(void)
{
    char folder[1024], args[2600];
    tmp_path(folder, dir, "shd"); /* test_read_split wrote shd_train.h5 and shd_test.h5 there */
    /* the default model, rsnn, trains an epoch on the three samples and tests on the one */
    snprintf(args, sizeof args, "--dataset shd --data %s --T 8 --batch-size 2 --epochs 1 "
             "--out %s/rsnn", folder, dir);
    CHECK(train(args) == 0 && train_said("rsnn") && train_said("2 spikes at or after"));
    snprintf(args, sizeof args, "--dataset shd --model cnn --data %s/nowhere --out %s/run", dir,
             dir);
    CHECK(train(args) == 1 && train_said("nowhere") && train_said("cannot open"));
    snprintf(args, sizeof args, "--dataset ssc --model cnn --data %s --out %s/run", folder, dir);
    CHECK(train(args) == 1 && train_said("ssc_train.h5"));
    snprintf(args, sizeof args, "--dataset shd --model cnn --augment 1 --data %s --out %s/run",
             folder, dir);
    CHECK(train(args) == 2 && train_said("--augment 1") && train_said("spike trains"));
    CHECK(train("--dataset shd --model cnn --max-time -1") == 2 && train_said("--max-time -1"));
    snprintf(args, sizeof args, "--dataset shd --model cnn --data %s --out %s/run", folder, dir);
    CHECK(train(args) == 2 && train_said("--model cnn takes images") && train_said("rsnn"));
}

/* ---- learning: the pipeline carries what tells the classes apart ----------------------------- */

/* A split of n samples of 5 classes: class c sweeps up a band of channels from 100 c over
 * 0..0.9 s (50 spikes), over 100 noise spikes anywhere up to 1.1 s, as a digit's formants
 * would; times sorted, float32 as published. */
static void write_synthetic(const char *path, int n, uint64_t seed)
{
    snn_rng rng;
    snn_rng_seed(&rng, seed);
    enum { SWEEP = 50, NOISE = 100, SPIKES = SWEEP + NOISE };
    float *times = malloc((size_t)n * SPIKES * sizeof *times);
    uint16_t *units = malloc((size_t)n * SPIKES * sizeof *units);
    int *labels = malloc((size_t)n * sizeof *labels);
    hvl_t *t_rows = malloc((size_t)n * sizeof *t_rows);
    hvl_t *u_rows = malloc((size_t)n * sizeof *u_rows);
    for (int i = 0; i < n; i++) {
        float *t = times + (size_t)i * SPIKES;
        uint16_t *u = units + (size_t)i * SPIKES;
        labels[i] = (int)snn_rng_below(&rng, 5);
        for (int k = 0; k < SPIKES; k++) {
            t[k] = k < SWEEP ? 0.9f * snn_rng_uniform(&rng) : 1.1f * snn_rng_uniform(&rng);
            u[k] = (uint16_t)(k < SWEEP ? 100 * labels[i] + (int)(t[k] * 80.0f)
                                        : (int)snn_rng_below(&rng, 700));
        }
        for (int k = 1; k < SPIKES; k++) /* insertion sort by time, units along */
            for (int j = k; j > 0 && t[j] < t[j - 1]; j--) {
                float tt = t[j];
                t[j] = t[j - 1], t[j - 1] = tt;
                uint16_t uu = u[j];
                u[j] = u[j - 1], u[j - 1] = uu;
            }
        t_rows[i] = (hvl_t){SPIKES, t};
        u_rows[i] = (hvl_t){SPIKES, u};
    }
    hid_t file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hid_t spikes = H5Gcreate2(file, "spikes", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    hsize_t dims[1] = {(hsize_t)n};
    hid_t space = H5Screate_simple(1, dims, NULL);
    hid_t tf = H5Tvlen_create(H5T_IEEE_F32LE), tm = H5Tvlen_create(H5T_NATIVE_FLOAT);
    hid_t uf = H5Tvlen_create(H5T_STD_U16LE), um = H5Tvlen_create(H5T_NATIVE_UINT16);
    hid_t d = H5Dcreate2(spikes, "times", tf, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    CHECK(H5Dwrite(d, tm, H5S_ALL, H5S_ALL, H5P_DEFAULT, t_rows) >= 0);
    H5Dclose(d);
    d = H5Dcreate2(spikes, "units", uf, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    CHECK(H5Dwrite(d, um, H5S_ALL, H5S_ALL, H5P_DEFAULT, u_rows) >= 0);
    H5Dclose(d);
    write_ints(file, "labels", H5T_STD_U8LE, labels, n);
    H5Tclose(tf), H5Tclose(tm), H5Tclose(uf), H5Tclose(um);
    H5Sclose(space);
    H5Gclose(spikes);
    CHECK(H5Fclose(file) >= 0);
    free(times), free(units), free(labels), free(t_rows), free(u_rows);
}

/* The test accuracy of the last "epoch N: ... test loss L acc A%" line snn-train printed. */
static double last_test_accuracy(void)
{
    char path[1024];
    size_t n = 0;
    char *text = (char *)read_bytes(tmp_path(path, dir, "train.txt"), &n);
    text[n] = '\0';
    double accuracy = -1.0;
    for (char *at = strstr(text, "test loss"); at; at = strstr(at + 1, "test loss")) {
        char *acc = strstr(at, " acc ");
        if (acc) accuracy = strtod(acc + 5, NULL);
    }
    free(text);
    return accuracy;
}

static void test_rsnn_learns(void)
{
    char folder[1024], path[1024], args[2600];
    tmp_path(folder, dir, "synthetic");
    CHECK(mkdir(folder, 0700) == 0);
    write_synthetic(tmp_path(path, folder, "shd_train.h5"), 400, 1);
    write_synthetic(tmp_path(path, folder, "shd_test.h5"), 100, 2);
    /* measured: 86% test accuracy after 3 epochs (chance 20%), 3 s on one thread of the CI box */
    snprintf(args, sizeof args, "--dataset shd --data %s --T 20 --lr 1e-2 --batch-size 50 "
             "--epochs 3 --out %s/learn", folder, dir);
    CHECK(train(args) == 0);
    double accuracy = last_test_accuracy();
    fprintf(stderr, "  rsnn on 5 synthetic classes: %.2f%% test accuracy\n", accuracy);
    CHECK(accuracy > 60.0);
}

/* --max-time and --binarize are recorded: --resume refuses another value and keeps them,
 * snn-eval frames the test split with them (the model's accuracy there is the run's). */
static void test_resume_and_eval(void)
{
    char folder[1024], args[2600];
    tmp_path(folder, dir, "synthetic"); /* test_rsnn_learns wrote it */
    snprintf(args, sizeof args, "--dataset shd --data %s --T 10 --lr 1e-2 --batch-size 50 "
             "--max-time 0.8 --binarize --epochs 1 --out %s/resume", folder, dir);
    CHECK(train(args) == 0 && train_said("--max-time 0.8 s left out"));
    double trained = last_test_accuracy();
    snprintf(args, sizeof args, "--resume %s/resume/checkpoint.safetensors --data %s "
             "--max-time 0.9 --epochs 2", dir, folder);
    CHECK(train(args) == 2 && train_said("--max-time 0.9 (the checkpoint was trained with 0.8)"));
    snprintf(args, sizeof args, "--resume %s/resume/checkpoint.safetensors --data %s --epochs 2",
             dir, folder);
    CHECK(train(args) == 0 && train_said("--max-time 0.8 s left out"));
    double resumed = last_test_accuracy();
    char cmd[3000], path[1024];
    snprintf(cmd, sizeof cmd, SNN_BIN_DIR "/snn-eval --checkpoint %s/resume --data %s "
             "--threads 1 > %s/train.txt 2>&1", dir, folder, dir);
    CHECK(system(cmd) == 0);
    size_t n = 0;
    char *text = (char *)read_bytes(tmp_path(path, dir, "train.txt"), &n);
    text[n] = '\0';
    char want[64];
    snprintf(want, sizeof want, "%.2f%%", resumed); /* the same frames: the same accuracy */
    if (!strstr(text, want)) fprintf(stderr, "  snn-eval's output lacks %s: %s\n", want, text);
    CHECK(strstr(text, want) != NULL);
    free(text);
    CHECK(trained >= 0.0 && resumed >= 0.0);
}

int main(void)
{
    tmp_dir_make(dir);
    RUN(test_framing);
    RUN(test_read_split);
    RUN(test_bad_files);
    RUN(test_h5py_layout);
    RUN(test_snn_train);
    RUN(test_rsnn_learns);
    RUN(test_resume_and_eval);
    tmp_dir_remove(dir);
    return test_finish();
}

#endif /* SNN_TEST_HDF5 */
