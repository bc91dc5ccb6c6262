/*
 * dataset.c - snn_dataset: load by name (finding the files), free, and the small helpers the
 * readers share (allocation that cleans up after itself, paths, normalisation statistics).
 *
 * Where files are looked for (see data.h): the `path` argument; else $SNN_DATA_DIR/<name> when
 * that folder exists, else $SNN_DATA_DIR; else /usr/share/datasets/<name>.
 * Every error message is prefixed with the call, "snn_dataset_load("cifar10", train): ...".
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "data_internal.h"
#include "tensor/error.h"

#define DEFAULT_ROOT "/usr/share/datasets"

/* ---- helpers ------------------------------------------------------------------------------- */

snn_status snn_dataset_alloc(snn_dataset *out, const char *name, int64_t count, int channels,
                             int height, int width, int classes)
{
    memset(out, 0, sizeof *out);
    size_t image_bytes = (size_t)channels * (size_t)height * (size_t)width;
    out->images = snn_alloc((size_t)count * image_bytes, SNN_CPU);
    out->labels = snn_alloc((size_t)count, SNN_CPU);
    if (!out->images || !out->labels) {
        snn_free(out->images, (size_t)count * image_bytes, SNN_CPU);
        snn_free(out->labels, (size_t)count, SNN_CPU);
        memset(out, 0, sizeof *out);
        return snn_error(SNN_ERR_MEMORY, "%s: out of memory for %lld images of %zu bytes", name,
                         (long long)count, image_bytes);
    }
    out->count = count;
    out->channels = channels;
    out->height = height;
    out->width = width;
    out->classes = classes;
    snprintf(out->name, sizeof out->name, "%s", name);
    return SNN_OK;
}

int64_t snn_dataset_image_bytes(const snn_dataset *ds)
{
    int64_t frames = ds->time_steps > 0 ? ds->time_steps : 1;
    return frames * ds->channels * ds->height * ds->width;
}

void snn_dataset_free(snn_dataset *ds)
{
    if (!ds) return;
    if (ds->images) snn_free(ds->images, (size_t)(ds->count * snn_dataset_image_bytes(ds)), SNN_CPU);
    if (ds->labels) snn_free(ds->labels, (size_t)ds->count, SNN_CPU);
    memset(ds, 0, sizeof *ds);
}

snn_status snn_path_join(char *buf, size_t size, const char *dir, const char *file)
{
    size_t dl = strlen(dir);
    bool slash = dl > 0 && dir[dl - 1] == '/';
    int n = snprintf(buf, size, "%s%s%s", dir, slash || dl == 0 ? "" : "/", file);
    if (n < 0 || (size_t)n >= size)
        return snn_error(SNN_ERR_ARGUMENT, "path '%s/%s' too long (expected < %zu characters)",
                         dir, file, size);
    return SNN_OK;
}

bool snn_path_is_dir(const char *path)
{
    struct stat info;
    return stat(path, &info) == 0 && S_ISDIR(info.st_mode);
}

bool snn_path_exists(const char *path)
{
    struct stat info;
    return stat(path, &info) == 0;
}

/* ---- loading by name ----------------------------------------------------------------------- */

snn_status snn_dataset_locate(const char *folder, const char *path, char *where, size_t size)
{
    /* Where to look: the argument, else $SNN_DATA_DIR[/<folder>], else the default root. */
    const char *env = getenv("SNN_DATA_DIR");
    snn_status st = SNN_OK;
    if (path) {
        snprintf(where, size, "%s", path);
    } else if (env && env[0]) {
        st = snn_path_join(where, size, env, folder);
        if (st == SNN_OK && !snn_path_exists(where)) snprintf(where, size, "%s", env);
    } else {
        st = snn_path_join(where, size, DEFAULT_ROOT, folder);
    }
    return st;
}

typedef enum kind { KIND_IDX, KIND_CIFAR10, KIND_CIFAR100, KIND_CIFAR100_COARSE } kind;

static const struct {
    const char *name;    /* what the caller passes */
    const char *folder;  /* its folder under SNN_DATA_DIR or the default root */
    kind kind;
} known[] = {
    {"fashion-mnist", "fashion-mnist", KIND_IDX},
    {"mnist", "mnist", KIND_IDX},
    {"cifar10", "cifar10", KIND_CIFAR10},
    {"cifar100", "cifar100", KIND_CIFAR100},
    {"cifar100-coarse", "cifar100", KIND_CIFAR100_COARSE},
};
#define N_KNOWN ((int)(sizeof known / sizeof known[0]))

/* Re-issues the pending message with the call in front, adding a hint to "file not found". */
static snn_status wrap_error(snn_status st, const char *name, snn_split split, bool defaulted)
{
    char inner[1024];
    snprintf(inner, sizeof inner, "%s", snn_last_error());
    const char *hint = "";
    if (st == SNN_ERR_IO && defaulted)
        hint = strcmp(name, "fashion-mnist") == 0
                   ? "; hint: install the Debian package dataset-fashion-mnist, set SNN_DATA_DIR "
                     "or pass a path"
                   : "; hint: set SNN_DATA_DIR or pass a path";
    return snn_error(st, "snn_dataset_load(\"%s\", %s): %s%s", name,
                     split == SNN_SPLIT_TRAIN ? "train" : "test", inner, hint);
}

snn_status snn_dataset_load(const char *name, const char *path, snn_split split,
                            snn_dataset *out)
{
    if (!out)
        return snn_error(SNN_ERR_ARGUMENT, "snn_dataset_load: bad argument 'out' (got NULL)");
    memset(out, 0, sizeof *out);
    if (!name)
        return snn_error(SNN_ERR_ARGUMENT, "snn_dataset_load: bad argument 'name' (got NULL)");
    if (split != SNN_SPLIT_TRAIN && split != SNN_SPLIT_TEST)
        return snn_error(SNN_ERR_ARGUMENT,
                         "snn_dataset_load: bad argument 'split' (expected SNN_SPLIT_TRAIN or "
                         "SNN_SPLIT_TEST, got %d)",
                         (int)split);
    if (snn_dataset_is_event(name)) return snn_event_dataset_load(name, path, split, NULL, out);
    if (snn_dataset_is_spike_audio(name)) /* its reader needs HDF5: libsnn_data_hdf5 */
        return snn_error(SNN_ERR_ARGUMENT, "snn_dataset_load: bad argument 'name' (\"%s\" is a "
                         "spike-train set: load it with snn_spike_dataset_load)", name);
    int which = -1;
    for (int i = 0; i < N_KNOWN; i++)
        if (strcmp(name, known[i].name) == 0) which = i;
    if (which < 0)
        return snn_error(SNN_ERR_ARGUMENT,
                         "snn_dataset_load: bad argument 'name' (expected \"fashion-mnist\", "
                         "\"mnist\", \"cifar10\", \"cifar100\", \"cifar100-coarse\", \"nmnist\", "
                         "\"dvs-gesture\" or \"cifar10-dvs\", got \"%s\")",
                         name);

    char where[1024];
    bool defaulted = path == NULL;
    snn_status st = snn_dataset_locate(known[which].folder, path, where, sizeof where);
    if (st == SNN_OK) {
        switch (known[which].kind) {
        case KIND_IDX: st = snn_mnist_load(name, where, split, out); break;
        case KIND_CIFAR10: st = snn_cifar_load(where, SNN_CIFAR10, false, split, out); break;
        case KIND_CIFAR100: st = snn_cifar_load(where, SNN_CIFAR100, false, split, out); break;
        case KIND_CIFAR100_COARSE:
            st = snn_cifar_load(where, SNN_CIFAR100, true, split, out);
            break;
        }
    }
    if (st != SNN_OK) {
        SNN_ASSERT(out->images == NULL && out->labels == NULL); /* nothing half-loaded */
        return wrap_error(st, name, split, defaulted);
    }
    return SNN_OK;
}

/* ---- normalisation statistics -------------------------------------------------------------- */

void snn_dataset_default_norm(const snn_dataset *ds, float mean[SNN_DATA_MAX_CHANNELS],
                              float std[SNN_DATA_MAX_CHANNELS])
{
    /* The statistics everyone quotes for the training sets, in [0, 1] pixel units. */
    static const struct {
        const char *name;
        float mean[3], std[3];
    } table[] = {
        {"fashion-mnist", {0.2860f}, {0.3530f}},
        {"mnist", {0.1307f}, {0.3081f}},
        {"cifar10", {0.4914f, 0.4822f, 0.4465f}, {0.2470f, 0.2435f, 0.2616f}},
        {"cifar100", {0.5071f, 0.4865f, 0.4409f}, {0.2673f, 0.2564f, 0.2762f}},
        {"cifar100-coarse", {0.5071f, 0.4865f, 0.4409f}, {0.2673f, 0.2564f, 0.2762f}},
    };
    for (int c = 0; c < SNN_DATA_MAX_CHANNELS; c++) {
        mean[c] = 0.5f;
        std[c] = 0.5f;
        /* event frames: the network sees the event counts themselves, x = count */
        if (ds->time_steps > 0) mean[c] = 0.0f, std[c] = 1.0f / 255.0f;
    }
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        if (strcmp(ds->name, table[i].name) != 0) continue;
        for (int c = 0; c < ds->channels && c < 3; c++) {
            mean[c] = table[i].mean[c];
            std[c] = table[i].std[c];
        }
    }
}

void snn_dataset_measure_norm(const snn_dataset *ds, float mean[SNN_DATA_MAX_CHANNELS],
                              float std[SNN_DATA_MAX_CHANNELS])
{
    const int64_t plane = (int64_t)ds->height * ds->width;
    for (int c = 0; c < SNN_DATA_MAX_CHANNELS; c++) {
        mean[c] = 0.0f;
        std[c] = 1.0f;
    }
    for (int c = 0; c < ds->channels && c < SNN_DATA_MAX_CHANNELS; c++) {
        /* Exact integer sums: a histogram of the 256 values. */
        uint64_t histogram[256] = {0};
        /* event sets: every frame of every sample, (count * T) planes per channel */
        const int64_t frames = ds->time_steps > 0 ? ds->time_steps : 1;
        for (int64_t i = 0; i < ds->count * frames; i++) {
            const uint8_t *p = ds->images + (i * ds->channels + c) * plane;
            for (int64_t j = 0; j < plane; j++) histogram[p[j]]++;
        }
        double n = 0.0, sum = 0.0, sum2 = 0.0;
        for (int v = 0; v < 256; v++) {
            double x = v / 255.0;
            n += (double)histogram[v];
            sum += (double)histogram[v] * x;
            sum2 += (double)histogram[v] * x * x;
        }
        if (n == 0.0) continue;
        double m = sum / n, var = sum2 / n - m * m;
        mean[c] = (float)m;
        std[c] = var > 1e-12 ? (float)sqrt(var) : 1.0f;
    }
}
