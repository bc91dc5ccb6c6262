/*
 * cifar_write.c - writes data sets in the layout of cifar-10-binary.tar.gz (see cifar.c), so
 * that a set made here (snn-make-cifar turns Fashion-MNIST into one) goes through exactly the
 * reader a real CIFAR-10 download would:
 *
 *     cifar-10-batches-bin/                 directory entry
 *     cifar-10-batches-bin/batches.meta.txt the class names, one a line
 *     cifar-10-batches-bin/data_batch_1.bin .. data_batch_5.bin   the train set in 5 parts
 *     cifar-10-batches-bin/test_batch.bin   the test set
 *
 * each .bin a sequence of 3073-byte records <label> <1024 red> <1024 green> <1024 blue>.
 * The archive is written to "<path>.tmp" and renamed over `path` only when complete.
 */
#include <stdio.h>
#include <string.h>

#include "data_internal.h"
#include "tensor/error.h"

#define CIFAR_PIXELS 3072
#define CIFAR_RECORD (1 + CIFAR_PIXELS)

static snn_status check_set(const char *arg, const snn_dataset *ds, int64_t min_count)
{
    const char *fn = "snn_dataset_write_cifar10";
    if (!ds || !ds->images || !ds->labels)
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad argument '%s' (expected a loaded data set)",
                         fn, arg);
    if (ds->channels != 3 || ds->height != 32 || ds->width != 32)
        return snn_error(SNN_ERR_ARGUMENT,
                         "%s: bad argument '%s' (expected 3 x 32 x 32 images, got %d x %d x %d); "
                         "hint: pad and replicate the channels first, as snn-make-cifar does",
                         fn, arg, ds->channels, ds->height, ds->width);
    if (ds->count < min_count)
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad argument '%s' (expected >= %lld images, "
                         "got %lld)", fn, arg, (long long)min_count, (long long)ds->count);
    for (int64_t i = 0; i < ds->count; i++)
        if (ds->labels[i] >= 10)
            return snn_error(SNN_ERR_ARGUMENT,
                             "%s: bad argument '%s' (expected labels 0..9, got %d at %lld)", fn,
                             arg, ds->labels[i], (long long)i);
    return SNN_OK;
}

/* Records [first, first + count) of ds as one member. */
static snn_status write_batch(snn_tar_writer *w, const char *member, const snn_dataset *ds,
                              int64_t first, int64_t count)
{
    size_t bytes = (size_t)count * CIFAR_RECORD;
    uint8_t *records = snn_alloc(bytes, SNN_CPU); // (count, 3073)
    if (!records)
        return snn_error(SNN_ERR_MEMORY, "snn_dataset_write_cifar10: out of memory for '%s'",
                         member);
    for (int64_t i = 0; i < count; i++) {
        uint8_t *r = records + i * CIFAR_RECORD;
        r[0] = ds->labels[first + i];
        memcpy(r + 1, ds->images + (first + i) * CIFAR_PIXELS, CIFAR_PIXELS);
    }
    snn_status st = snn_tar_writer_file(w, member, records, bytes);
    snn_free(records, bytes, SNN_CPU);
    return st;
}

snn_status snn_dataset_write_cifar10(const char *archive_path, const snn_dataset *train,
                                     const snn_dataset *test, const char *const *class_names)
{
    if (!archive_path)
        return snn_error(SNN_ERR_ARGUMENT,
                         "snn_dataset_write_cifar10: bad argument 'archive_path' (got NULL)");
    snn_status st = check_set("train", train, 5);
    if (st == SNN_OK) st = check_set("test", test, 1);
    if (st != SNN_OK) return st;

    char tmp[1024];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", archive_path) >= (int)sizeof tmp)
        return snn_error(SNN_ERR_ARGUMENT, "snn_dataset_write_cifar10: path too long");
    snn_tar_writer w;
    st = snn_tar_writer_open(&w, tmp);
    if (st != SNN_OK) return st;

    char meta[1024] = "";
    size_t used = 0;
    for (int c = 0; c < 10; c++) {
        int n = class_names ? snprintf(meta + used, sizeof meta - used, "%s\n", class_names[c])
                            : snprintf(meta + used, sizeof meta - used, "class_%d\n", c);
        if (n > 0 && used + (size_t)n < sizeof meta) used += (size_t)n;
    }
    st = snn_tar_writer_dir(&w, "cifar-10-batches-bin/");
    if (st == SNN_OK)
        st = snn_tar_writer_file(&w, "cifar-10-batches-bin/batches.meta.txt", meta, used);
    for (int k = 0; k < 5 && st == SNN_OK; k++) {
        /* Batch k holds records [k N / 5, (k + 1) N / 5): sizes differ by at most one. */
        int64_t first = k * train->count / 5, last = (k + 1) * train->count / 5;
        char member[64];
        snprintf(member, sizeof member, "cifar-10-batches-bin/data_batch_%d.bin", k + 1);
        st = write_batch(&w, member, train, first, last - first);
    }
    if (st == SNN_OK)
        st = write_batch(&w, "cifar-10-batches-bin/test_batch.bin", test, 0, test->count);
    if (st != SNN_OK) {
        snn_tar_writer_abort(&w);
        remove(tmp);
        return st;
    }
    st = snn_tar_writer_close(&w);
    if (st == SNN_OK && rename(tmp, archive_path) != 0)
        st = snn_error(SNN_ERR_IO, "snn_dataset_write_cifar10: cannot rename '%s' to '%s'", tmp,
                       archive_path);
    if (st != SNN_OK) remove(tmp);
    return st;
}
