/*
 * shd_hdf5.c - snn_spike_dataset_load: the SHD / SSC files (HDF5, as published by Cramer et
 * al. 2020) into a framed data set. The one file of data/ that needs the HDF5 C library, built
 * into its own library, libsnn_data_hdf5 (data/CMakeLists.txt): with HDF5 it reads; built
 * without, the same function returns SNN_ERR_UNSUPPORTED, "built without HDF5", so a program
 * links either way and says why it cannot read the file.
 *
 * The layout (one file per split: shd_train.h5, shd_test.h5; ssc_train/valid/test.h5):
 *
 *   /spikes/times   (samples) variable-length float arrays: spike times in seconds
 *   /spikes/units   (samples) variable-length integer arrays: the channel of each spike, 0..699
 *   /labels         (samples) integers: the class, 0..19 (SHD) or 0..34 (SSC)
 *   /extra/...      speaker, keys, meta_info: not read
 *
 * Reading. HDF5 converts whatever the file stores (float16/32/64 times, any integer width of
 * units and labels) into double and int64 on the way in, so no value is clipped before it is
 * checked. Samples are read in blocks of BLOCK, each block checked and framed at once, so the
 * memory held is the frames plus one block of spikes (the SSC training file holds some 10^8
 * spikes: reading it whole as double + int64 would take gigabytes). Any error frees everything:
 * nothing half-loaded.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "data/data_internal.h"
#include "tensor/error.h"

#define FN "snn_spike_dataset_load"

static const char *split_name(snn_split split)
{
    return split == SNN_SPLIT_TRAIN ? "train" : "test";
}

#ifndef SNN_DATA_WITH_HDF5

snn_status snn_spike_dataset_load(const char *name, const char *path, snn_split split,
                                  const snn_spike_frames *frames, snn_dataset *out,
                                  int64_t *dropped)
{
    (void)path, (void)frames;
    if (out) memset(out, 0, sizeof *out);
    if (dropped) *dropped = 0;
    return snn_error(SNN_ERR_UNSUPPORTED, FN "(\"%s\", %s): snn.c was built without HDF5, which "
                     "the SHD / SSC files need (hint: install the HDF5 C library, Debian "
                     "libhdf5-dev, and configure again)", name ? name : "(null)",
                     split_name(split));
}

#else

#include <hdf5.h>

#define BLOCK 256 /* samples read, checked and framed at a time */

static void reclaim(hid_t type, hid_t space, void *buf)
{
#if H5_VERSION_GE(1, 12, 0)
    H5Treclaim(type, space, H5P_DEFAULT, buf);
#else
    H5Dvlen_reclaim(type, space, H5P_DEFAULT, buf);
#endif
}

/* What one open file holds. */
typedef struct spike_file {
    const char *path;
    hid_t file, times, units, labels;
    int64_t samples;
} spike_file;

static void close_file(spike_file *f)
{
    if (f->labels >= 0) H5Dclose(f->labels);
    if (f->units >= 0) H5Dclose(f->units);
    if (f->times >= 0) H5Dclose(f->times);
    if (f->file >= 0) H5Fclose(f->file);
    f->file = f->times = f->units = f->labels = -1;
}

/* Opens dataset `name` (a path from the root), which must be one-dimensional with elements of
 * class `cls` (for a variable-length one: whose base type has class `base`); *n = its length. */
static snn_status open_dataset(const spike_file *f, const char *name, H5T_class_t cls,
                               H5T_class_t base, const char *expected, hid_t *out, int64_t *n)
{
    *out = -1;
    if (H5Lexists(f->file, name, H5P_DEFAULT) <= 0)
        return snn_error(SNN_ERR_FORMAT, "%s: no dataset '%s' (expected %s)", f->path, name,
                         expected);
    hid_t d = H5Dopen2(f->file, name, H5P_DEFAULT);
    if (d < 0)
        return snn_error(SNN_ERR_FORMAT, "%s: '%s' is not a dataset (expected %s)", f->path,
                         name, expected);
    hid_t type = H5Dget_type(d), space = H5Dget_space(d);
    hid_t super = type >= 0 && H5Tget_class(type) == H5T_VLEN ? H5Tget_super(type) : -1;
    bool ok = type >= 0 && H5Tget_class(type) == cls &&
              (cls != H5T_VLEN || (super >= 0 && H5Tget_class(super) == base)) && space >= 0 &&
              H5Sget_simple_extent_ndims(space) == 1;
    hsize_t dims[1] = {0};
    if (ok) H5Sget_simple_extent_dims(space, dims, NULL);
    if (super >= 0) H5Tclose(super);
    if (space >= 0) H5Sclose(space);
    if (type >= 0) H5Tclose(type);
    if (!ok) {
        H5Dclose(d);
        return snn_error(SNN_ERR_FORMAT, "%s: dataset '%s' is not %s", f->path, name, expected);
    }
    *out = d;
    *n = (int64_t)dims[0];
    return SNN_OK;
}

static snn_status open_file(spike_file *f, const char *path)
{
    *f = (spike_file){.path = path, .file = -1, .times = -1, .units = -1, .labels = -1};
    FILE *probe = fopen(path, "rb");
    if (!probe) return snn_error(SNN_ERR_IO, "cannot open '%s'", path);
    fclose(probe);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL); /* errors are ours to word */
    f->file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f->file < 0)
        return snn_error(SNN_ERR_FORMAT, "%s: not an HDF5 file (expected SHD / SSC's layout: "
                         "spikes/times, spikes/units, labels; gunzip the .h5.gz first)", path);
    if (H5Lexists(f->file, "spikes", H5P_DEFAULT) <= 0)
        return snn_error(SNN_ERR_FORMAT, "%s: no group 'spikes' (expected spikes/times and "
                         "spikes/units)", path);
    int64_t n_times = 0, n_units = 0, n_labels = 0;
    snn_status st = open_dataset(f, "spikes/times", H5T_VLEN, H5T_FLOAT,
                                 "one variable-length float array per sample", &f->times,
                                 &n_times);
    if (st == SNN_OK)
        st = open_dataset(f, "spikes/units", H5T_VLEN, H5T_INTEGER,
                          "one variable-length integer array per sample", &f->units, &n_units);
    if (st == SNN_OK)
        st = open_dataset(f, "labels", H5T_INTEGER, H5T_NO_CLASS, "one integer per sample",
                          &f->labels, &n_labels);
    if (st != SNN_OK) return st;
    if (n_times != n_units)
        return snn_error(SNN_ERR_FORMAT, "%s: dataset 'spikes/units' holds %lld samples, "
                         "'spikes/times' %lld (expected one of each per sample)", path,
                         (long long)n_units, (long long)n_times);
    if (n_labels != n_times)
        return snn_error(SNN_ERR_FORMAT, "%s: dataset 'labels' holds %lld labels for %lld "
                         "samples (expected one per sample)", path, (long long)n_labels,
                         (long long)n_times);
    if (n_times < 1) return snn_error(SNN_ERR_FORMAT, "%s: no samples (expected >= 1)", path);
    f->samples = n_times;
    return SNN_OK;
}

/* Reads elements [first, first + n) of the one-dimensional dataset d as `mem` into buf. */
static bool read_block(hid_t d, hid_t mem, int64_t first, int64_t n, void *buf, hid_t *mspace)
{
    hid_t fspace = H5Dget_space(d);
    hsize_t start[1] = {(hsize_t)first}, count[1] = {(hsize_t)n};
    *mspace = H5Screate_simple(1, count, NULL);
    bool ok = fspace >= 0 && *mspace >= 0 &&
              H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start, NULL, count, NULL) >= 0 &&
              H5Dread(d, mem, *mspace, fspace, H5P_DEFAULT, buf) >= 0;
    if (fspace >= 0) H5Sclose(fspace);
    return ok;
}

/* The checks of one sample's spikes, each naming the file, the dataset and the sample. */
static snn_status check_sample(const char *path, int64_t sample, const hvl_t *times,
                               const hvl_t *units)
{
    if (times->len != units->len)
        return snn_error(SNN_ERR_FORMAT, "%s: sample %lld: dataset 'spikes/times' holds %zu "
                         "spikes, 'spikes/units' %zu (expected one unit per spike time)", path,
                         (long long)sample, times->len, units->len);
    const double *t = times->p;
    const int64_t *u = units->p;
    for (size_t i = 0; i < times->len; i++) {
        if (u[i] < 0 || u[i] >= SNN_SPIKE_AUDIO_CHANNELS)
            return snn_error(SNN_ERR_FORMAT, "%s: dataset 'spikes/units', sample %lld, spike "
                             "%zu: unit %lld (expected 0..%d)", path, (long long)sample, i,
                             (long long)u[i], SNN_SPIKE_AUDIO_CHANNELS - 1);
        if (!isfinite(t[i]) || t[i] < 0.0)
            return snn_error(SNN_ERR_FORMAT, "%s: dataset 'spikes/times', sample %lld, spike "
                             "%zu: time %g (expected a finite number of seconds >= 0)", path,
                             (long long)sample, i, t[i]);
        if (i > 0 && t[i] < t[i - 1])
            return snn_error(SNN_ERR_FORMAT, "%s: dataset 'spikes/times', sample %lld, spike "
                             "%zu: time %.9g goes back from %.9g (expected non-decreasing "
                             "times)", path, (long long)sample, i, t[i], t[i - 1]);
    }
    return SNN_OK;
}

/* Checks the labels of the whole file, then reads, checks and frames its samples by blocks. */
static snn_status read_samples(spike_file *f, const char *name, int classes,
                               const snn_spike_frames *frames, snn_dataset *out,
                               int64_t *dropped)
{
    int64_t *labels = snn_alloc((size_t)f->samples * sizeof *labels, SNN_CPU);
    if (!labels) return snn_error(SNN_ERR_MEMORY, "%s: out of memory for the labels", f->path);
    snn_status st = SNN_OK;
    if (H5Dread(f->labels, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, labels) < 0)
        st = snn_error(SNN_ERR_FORMAT, "%s: cannot read dataset 'labels'", f->path);
    for (int64_t i = 0; st == SNN_OK && i < f->samples; i++)
        if (labels[i] < 0 || labels[i] >= classes)
            st = snn_error(SNN_ERR_FORMAT, "%s: dataset 'labels', sample %lld: label %lld "
                           "(expected 0..%d: %s has %d classes)", f->path, (long long)i,
                           (long long)labels[i], classes - 1, name, classes);
    if (st == SNN_OK) st = snn_spike_dataset_alloc(out, name, f->samples, frames, classes);
    hvl_t *times = NULL, *units = NULL;
    hid_t time_type = H5Tvlen_create(H5T_NATIVE_DOUBLE);
    hid_t unit_type = H5Tvlen_create(H5T_NATIVE_INT64);
    if (st == SNN_OK) {
        times = snn_alloc(BLOCK * sizeof *times, SNN_CPU);
        units = snn_alloc(BLOCK * sizeof *units, SNN_CPU);
        if (!times || !units || time_type < 0 || unit_type < 0)
            st = snn_error(SNN_ERR_MEMORY, "%s: out of memory for a block of samples", f->path);
    }
    const int64_t sample_bytes = snn_dataset_image_bytes(out);
    for (int64_t first = 0; st == SNN_OK && first < f->samples; first += BLOCK) {
        const int64_t n = f->samples - first < BLOCK ? f->samples - first : BLOCK;
        memset(times, 0, BLOCK * sizeof *times);
        memset(units, 0, BLOCK * sizeof *units);
        hid_t time_space = -1, unit_space = -1;
        bool ok_times = read_block(f->times, time_type, first, n, times, &time_space);
        bool ok_units = ok_times && read_block(f->units, unit_type, first, n, units, &unit_space);
        if (!ok_times || !ok_units)
            st = snn_error(SNN_ERR_FORMAT, "%s: cannot read dataset '%s', samples %lld..%lld",
                           f->path, ok_times ? "spikes/units" : "spikes/times",
                           (long long)first, (long long)(first + n - 1));
        for (int64_t i = 0; st == SNN_OK && i < n; i++) {
            st = check_sample(f->path, first + i, &times[i], &units[i]);
            if (st != SNN_OK) break;
            *dropped += snn_spikes_to_frames(out->images + (first + i) * sample_bytes,
                                             times[i].p, units[i].p, (int64_t)times[i].len,
                                             SNN_SPIKE_AUDIO_CHANNELS, frames);
            out->labels[first + i] = (uint8_t)labels[first + i];
        }
        if (time_space >= 0) reclaim(time_type, time_space, times), H5Sclose(time_space);
        if (unit_space >= 0) reclaim(unit_type, unit_space, units), H5Sclose(unit_space);
    }
    if (time_type >= 0) H5Tclose(time_type);
    if (unit_type >= 0) H5Tclose(unit_type);
    snn_free(times, BLOCK * sizeof *times, SNN_CPU);
    snn_free(units, BLOCK * sizeof *units, SNN_CPU);
    snn_free(labels, (size_t)f->samples * sizeof *labels, SNN_CPU);
    if (st != SNN_OK) snn_dataset_free(out);
    return st;
}

/* The file of `split` in `where`: the folder's <name>_<split>.h5, or `where` itself. */
static snn_status split_file(const char *name, const char *where, snn_split split, char *file,
                             size_t size)
{
    if (!snn_path_is_dir(where)) {
        snprintf(file, size, "%s", where);
        return SNN_OK;
    }
    char base[64];
    snprintf(base, sizeof base, "%s_%s.h5", name, split_name(split));
    snn_status st = snn_path_join(file, size, where, base);
    if (st != SNN_OK || snn_path_exists(file)) return st;
    char gz[1200];
    snprintf(gz, sizeof gz, "%.1100s.gz", file);
    if (snn_path_exists(gz))
        return snn_error(SNN_ERR_IO, "cannot open '%s' (found '%s': hint: gunzip it first)",
                         file, gz);
    return snn_error(SNN_ERR_IO, "cannot open '%s' (expected %s in the folder, as published "
                     "at https://zenkelab.org/datasets/, gunzipped)", file, base);
}

snn_status snn_spike_dataset_load(const char *name, const char *path, snn_split split,
                                  const snn_spike_frames *frames, snn_dataset *out,
                                  int64_t *dropped)
{
    if (!out) return snn_error(SNN_ERR_ARGUMENT, FN ": bad argument 'out' (got NULL)");
    memset(out, 0, sizeof *out);
    if (dropped) *dropped = 0;
    snn_spike_frames f = frames ? *frames : snn_spike_frames_default();
    if (snn_spike_frames_check(FN, &f) != SNN_OK) return SNN_ERR_ARGUMENT;
    if (!snn_dataset_is_spike_audio(name))
        return snn_error(SNN_ERR_ARGUMENT, FN ": bad argument 'name' (expected \"shd\" or "
                         "\"ssc\", got \"%s\")", name ? name : "(null)");
    if (split != SNN_SPLIT_TRAIN && split != SNN_SPLIT_TEST)
        return snn_error(SNN_ERR_ARGUMENT, FN ": bad argument 'split' (expected "
                         "SNN_SPLIT_TRAIN or SNN_SPLIT_TEST, got %d)", (int)split);
    const int classes = strcmp(name, "shd") == 0 ? 20 : 35;
    char where[1024], file[1100];
    int64_t lost = 0;
    spike_file sf = {.file = -1, .times = -1, .units = -1, .labels = -1};
    snn_status st = snn_dataset_locate(name, path, where, sizeof where);
    if (st == SNN_OK) st = split_file(name, where, split, file, sizeof file);
    if (st == SNN_OK) st = open_file(&sf, file);
    if (st == SNN_OK) st = read_samples(&sf, name, classes, &f, out, &lost);
    close_file(&sf);
    if (st != SNN_OK) {
        SNN_ASSERT(out->images == NULL && out->labels == NULL); /* nothing half-loaded */
        char inner[1024];
        snprintf(inner, sizeof inner, "%s", snn_last_error());
        return snn_error(st, FN "(\"%s\", %s): %s", name, split_name(split), inner);
    }
    if (dropped) *dropped = lost;
    return SNN_OK;
}

#endif /* SNN_DATA_WITH_HDF5 */
