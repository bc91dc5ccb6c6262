/*
 * data.h - data sets and the batch loader of snn.c: Fashion-MNIST / MNIST (IDX, plain or .gz)
 * and CIFAR-10 / CIFAR-100 (binary version, straight from the .tar.gz or from the extracted
 * folder), then seeded shuffling, per-channel normalisation, augmentation and a prefetch thread.
 *
 * Glossary: N samples (or batch size), C channels, H height, W width.
 *
 * Worked example (train loop skeleton):
 *
 *     snn_dataset train;
 *     if (snn_dataset_load("fashion-mnist", NULL, SNN_SPLIT_TRAIN, &train) != SNN_OK) {
 *         fprintf(stderr, "%s\n", snn_last_error());
 *         return 1;
 *     }
 *     snn_loader_config cfg = snn_loader_config_default();
 *     cfg.batch_size = 128;
 *     cfg.seed = 42;
 *     snn_dataset_default_norm(&train, cfg.mean, cfg.std);
 *     snn_loader *loader = snn_loader_new(&train, &cfg);
 *     for (int64_t epoch = 0; epoch < 10; epoch++) {
 *         snn_batch batch;
 *         while (snn_loader_next(loader, &batch)) {           // false at the end of the epoch
 *             snn_step_begin();
 *             snn_tensor *x, *y;                               // (N, C, H, W) and (N)
 *             snn_batch_to_device(&batch, SNN_CUDA, &x, &y);
 *             ... forward, loss, backward, optimizer ...
 *             snn_step_end();
 *         }
 *     }
 *     snn_loader_free(loader);
 *     snn_dataset_free(&train);
 *
 * Where the files are looked for (first match wins):
 *   1. the `path` argument of snn_dataset_load, when not NULL (a folder, or for CIFAR also the
 *      .tar.gz file itself);
 *   2. else, when SNN_DATA_DIR is set: $SNN_DATA_DIR/<name> if that exists, else $SNN_DATA_DIR;
 *   3. else the default folder: /usr/share/datasets/<name> (fashion-mnist comes from the Debian
 *      package dataset-fashion-mnist; mnist from the same layout).
 * <name> is "fashion-mnist", "mnist", "cifar10" or "cifar100". In a folder the IDX files are
 * looked for as train-images-idx3-ubyte.gz (then without .gz), and CIFAR as
 * cifar-10-binary.tar.gz / cifar-100-binary.tar.gz, then the extracted cifar-10-batches-bin/ or
 * cifar-100-binary/, then the batch files directly in the folder.
 *
 * Errors: every loader returns SNN_OK, SNN_ERR_IO (a file cannot be opened or read) or
 * SNN_ERR_FORMAT (the bytes are not what the format says: wrong magic, truncated or corrupt gzip,
 * sizes that do not match the header, a label out of range, a tar member missing or misplaced),
 * SNN_ERR_MEMORY or SNN_ERR_ARGUMENT, with a message in snn_last_error() naming the file and what
 * was expected. On any error the output data set is left empty and nothing is held.
 */
#ifndef SNN_DATA_H
#define SNN_DATA_H

#include <stdbool.h>
#include <stdint.h>

#include "tensor/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SNN_DATA_MAX_CHANNELS 4

typedef enum snn_split { SNN_SPLIT_TRAIN = 0, SNN_SPLIT_TEST = 1 } snn_split;

/* ---------------------------------------------------------------------------------------------
 * Data sets: every image and label in host memory, as the files store them (uint8).
 * ------------------------------------------------------------------------------------------- */

typedef struct snn_dataset {
    uint8_t *images;       /* (count, channels, height, width), pixels 0..255 */
    uint8_t *labels;       /* (count), class indices in [0, classes) */
    int64_t count;
    int channels, height, width;
    int classes;
    char name[32];         /* "fashion-mnist", "cifar10", ... */
} snn_dataset;

/*
 * Loads one split of a data set. name: "fashion-mnist", "mnist", "cifar10", "cifar100" (the
 * 100 fine labels) or "cifar100-coarse" (the 20 coarse labels). path: a folder or archive, or
 * NULL for the search order above. On error *out is zeroed and holds nothing.
 */
snn_status snn_dataset_load(const char *name, const char *path, snn_split split,
                            snn_dataset *out);
/* Releases what a load took and zeroes *ds. A zeroed data set is a no-op. */
void snn_dataset_free(snn_dataset *ds);
/* Bytes of one image: channels * height * width. */
int64_t snn_dataset_image_bytes(const snn_dataset *ds);
/* The usual per-channel mean and std (in [0, 1] pixel units) of the named data set, for the
 * loader's normalisation; (0.5, 0.5) for a name it does not know. */
void snn_dataset_default_norm(const snn_dataset *ds, float mean[SNN_DATA_MAX_CHANNELS],
                              float std[SNN_DATA_MAX_CHANNELS]);
/* Measures the per-channel mean and std of the pixels (in [0, 1] units) over the whole set. */
void snn_dataset_measure_norm(const snn_dataset *ds, float mean[SNN_DATA_MAX_CHANNELS],
                              float std[SNN_DATA_MAX_CHANNELS]);

/*
 * Writes train and test sets (3 x 32 x 32, 10 classes) as a cifar-10-binary.tar.gz look-alike:
 * cifar-10-batches-bin/{data_batch_1..5.bin, test_batch.bin, batches.meta.txt}, the train set
 * split into 5 nearly equal batches. class_names: 10 strings for batches.meta.txt, or NULL for
 * "class_0".. The file is written to a temporary name and renamed, so it appears whole or not.
 */
snn_status snn_dataset_write_cifar10(const char *archive_path, const snn_dataset *train,
                                     const snn_dataset *test, const char *const *class_names);

/* ---------------------------------------------------------------------------------------------
 * The loader: batches of float images (N, C, H, W) and float labels (N), in host memory.
 *
 * Order and augmentation depend only on (seed, epoch, position), never on thread timing: the
 * epoch's permutation is a Fisher-Yates shuffle drawn from an snn_rng seeded with (seed, epoch),
 * and each sample's crop offset and flip come from an snn_rng seeded with (seed, epoch, position).
 * With prefetch on, a background thread makes the next batch while the caller uses the current
 * one (double buffering); the batches are bit-identical to prefetch off.
 * ------------------------------------------------------------------------------------------- */

typedef struct snn_loader_config {
    int batch_size;          /* default 128 */
    bool shuffle;            /* default true */
    uint64_t seed;           /* default 0 */
    bool drop_last;          /* drop a last batch smaller than batch_size; default false */
    /* x = (pixel / 255 - mean[c]) / std[c]; default mean 0, std 1 (just pixel / 255). */
    float mean[SNN_DATA_MAX_CHANNELS];
    float std[SNN_DATA_MAX_CHANNELS];
    /* Random crop of the original size out of the image padded with `crop_padding` black pixels
     * (value 0 before normalisation) on each side, as torchvision's RandomCrop(size, padding=4). */
    bool random_crop;        /* default false */
    int crop_padding;        /* default 4 */
    bool horizontal_flip;    /* mirror left-right with probability 1/2; default false */
    bool prefetch;           /* background thread; default true */
    /* Data-parallel sharding (dist/, docs/distributed.md): this loader is rank `shard` of
     * `shards` (0 or 1 shards: unsharded, the default). Batch b is then the rank's slice of
     * global batch b, which holds batch_size * shards samples of the epoch's order
     * (snn_shard_slice): the ranks' batches side by side are the batch an unsharded loader
     * with batch_size * shards gives, samples and augmentation alike. */
    int shard, shards;
} snn_loader_config;

typedef struct snn_batch {
    const float *images;     /* (count, channels, height, width); valid until the next call */
    const float *labels;     /* (count), class indices as floats (autograd.h's convention) */
    int count;
    int channels, height, width;
    int64_t epoch;           /* which epoch and which batch of it this is */
    int64_t index;
    int global_count;        /* samples in the global batch this one is a slice of (sharded
                                loaders; else equal to count) */
} snn_batch;

typedef struct snn_loader snn_loader;

snn_loader_config snn_loader_config_default(void);
/* A loader over `ds`, which must outlive it. NULL (message set) on a bad config or no memory.
 * It starts at epoch 0, batch 0. */
snn_loader *snn_loader_new(const snn_dataset *ds, const snn_loader_config *config);
/* Stops the thread and frees everything. NULL is a no-op. */
void snn_loader_free(snn_loader *loader);
/* Batches per epoch (counting a short last one unless drop_last). */
int64_t snn_loader_num_batches(const snn_loader *loader);
/* Moves to epoch `epoch`, batch `batch` (to resume from a checkpoint). */
snn_status snn_loader_seek(snn_loader *loader, int64_t epoch, int64_t batch);
/*
 * Fills *batch with the next batch of the current epoch and returns true; at the end of the
 * epoch returns false (batch->count = 0) and moves to batch 0 of the next epoch.
 */
bool snn_loader_next(snn_loader *loader, snn_batch *batch);
/* Where the next call to snn_loader_next will read: save these in a checkpoint. */
void snn_loader_position(const snn_loader *loader, int64_t *epoch, int64_t *batch);

/*
 * Sharding, as a pure function of the sizes (the loader uses it; tests check it). With `count`
 * samples per epoch, `batch` per rank and `shards` ranks, global batch `index` covers positions
 * [index * batch * shards, + g) of the epoch's order, g = batch * shards except for a short
 * last one; rank r takes its positions [r g / shards, (r + 1) g / shards): `batch` each for a
 * full global batch, and as even a split as can be for the short one. *first is the slice's
 * first position in the epoch's order, *n its length, *global = g.
 */
void snn_shard_slice(int64_t count, int batch, int shard, int shards, int64_t index,
                     int64_t *first, int64_t *n, int64_t *global);
/* Global batches per epoch: ceil(count / (batch * shards)), without a short last one when
 * drop_last or when it holds fewer samples than there are ranks (one would get none). */
int64_t snn_shard_batches(int64_t count, int batch, int shards, bool drop_last);

/* Two STEP tensors on `device`: images (count, C, H, W) and labels (count). */
snn_status snn_batch_to_device(const snn_batch *batch, snn_device device, snn_tensor **images,
                               snn_tensor **labels);

#ifdef __cplusplus
}
#endif

#endif /* SNN_DATA_H */
