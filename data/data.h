/**
 * @file
 * data.h - data sets and the batch loader of snn.c: Fashion-MNIST / MNIST (IDX, plain or .gz)
 * and CIFAR-10 / CIFAR-100 (binary version, straight from the .tar.gz or from the extracted
 * folder), the event-camera sets N-MNIST, DVS128 Gesture and CIFAR10-DVS (integrated into T
 * frames of 2 polarity channels; docs/events.md), the spike-train audio sets SHD and SSC (T
 * frames of 700 cochlea channels, read from HDF5 by libsnn_data_hdf5; docs/shd.md), then seeded
 * shuffling, per-channel normalisation, augmentation and a prefetch thread.
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
 *   2. else, when SNN_DATA_DIR is set: `$SNN_DATA_DIR/<name>` if that exists, else $SNN_DATA_DIR;
 *   3. else the default folder: `/usr/share/datasets/<name>` (fashion-mnist comes from the
 *      Debian package dataset-fashion-mnist; mnist from the same layout).
 * `<name>` is "fashion-mnist", "mnist", "cifar10" or "cifar100". In a folder the IDX files are
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

#include "../tensor/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The most channels an image has (normalisation arrays are this long). */
#define SNN_DATA_MAX_CHANNELS 4

/** Which part of a data set. */
typedef enum snn_split {
    SNN_SPLIT_TRAIN = 0,  /**< the training set */
    SNN_SPLIT_TEST = 1,   /**< the test set */
} snn_split;

/* ---------------------------------------------------------------------------------------------
 * Data sets: every image and label in host memory, as the files store them (uint8).
 * ------------------------------------------------------------------------------------------- */

/** A loaded data set; owns its arrays (snn_dataset_free). */
typedef struct snn_dataset {
    uint8_t *images;       /**< (count, channels, height, width), pixels 0..255; event sets:
                                (count, time_steps, channels, height, width), event counts 0..255 */
    uint8_t *labels;       /**< (count), class indices in [0, classes) */
    int64_t count;         /**< number of samples */
    int channels;          /**< C: 1 (MNIST), 3 (CIFAR) or 2 (event polarities) */
    int height;            /**< H */
    int width;             /**< W */
    int classes;           /**< number of classes */
    int time_steps;        /**< event sets: frames T per sample; 0 for still images */
    char name[32];         /**< "fashion-mnist", "cifar10", "nmnist", ... */
} snn_dataset;

/**
 * Loads one split of a data set. name: "fashion-mnist", "mnist", "cifar10", "cifar100" (the
 * 100 fine labels) or "cifar100-coarse" (the 20 coarse labels). path: a folder or archive, or
 * NULL for the search order above. split: train or test. On success *out owns the images and
 * labels (snn_dataset_free); on error (see Errors above; a file not found is SNN_ERR_IO with a
 * hint) *out is zeroed and holds nothing.
 */
snn_status snn_dataset_load(const char *name, const char *path, snn_split split,
                            snn_dataset *out);
/** Releases what a load took and zeroes *ds. A zeroed data set is a no-op. */
void snn_dataset_free(snn_dataset *ds);
/** Bytes of one sample of `ds`: channels * height * width (times time_steps for event sets). */
int64_t snn_dataset_image_bytes(const snn_dataset *ds);
/** Writes into mean[] and std[] the usual per-channel mean and std (in [0, 1] pixel units) of
 * the data set `ds` names, for the loader's normalisation; (0.5, 0.5) for a name it does not
 * know. */
void snn_dataset_default_norm(const snn_dataset *ds, float mean[SNN_DATA_MAX_CHANNELS],
                              float std[SNN_DATA_MAX_CHANNELS]);
/** Measures into mean[] and std[] the per-channel mean and std of the pixels of `ds` (in
 * [0, 1] units) over the whole set (std 1 for a constant channel). */
void snn_dataset_measure_norm(const snn_dataset *ds, float mean[SNN_DATA_MAX_CHANNELS],
                              float std[SNN_DATA_MAX_CHANNELS]);

/**
 * Writes train and test sets (3 x 32 x 32, 10 classes) as a cifar-10-binary.tar.gz look-alike:
 * cifar-10-batches-bin/{data_batch_1..5.bin, test_batch.bin, batches.meta.txt}, the train set
 * split into 5 nearly equal batches; written to `archive_path`. class_names: 10 strings for
 * batches.meta.txt, or NULL for "class_0".. The file is written to a temporary name and renamed,
 * so it appears whole or not. SNN_ERR_ARGUMENT for sets that are not 3x32x32 with 10 classes or
 * a bad path, SNN_ERR_IO naming the file, SNN_ERR_MEMORY.
 */
snn_status snn_dataset_write_cifar10(const char *archive_path, const snn_dataset *train,
                                     const snn_dataset *test, const char *const *class_names);

/* ---------------------------------------------------------------------------------------------
 * The loader
 * ------------------------------------------------------------------------------------------- */

/**
 * How a loader makes batches of float images (N, C, H, W) and float labels (N), in host memory;
 * start from snn_loader_config_default().
 *
 * Order and augmentation depend only on (seed, epoch, position), never on thread timing: the
 * epoch's permutation is a Fisher-Yates shuffle drawn from an snn_rng seeded with (seed, epoch),
 * and each sample's crop offset and flip come from an snn_rng seeded with (seed, epoch, position).
 * With prefetch on, a background thread makes the next batch while the caller uses the current
 * one (double buffering); the batches are bit-identical to prefetch off.
 */
typedef struct snn_loader_config {
    int batch_size;          /**< default 128 */
    bool shuffle;            /**< default true */
    uint64_t seed;           /**< default 0 */
    bool drop_last;          /**< drop a last batch smaller than batch_size; default false */
    /** x = (pixel / 255 - mean[c]) / std[c]; default mean 0, std 1 (just pixel / 255). */
    float mean[SNN_DATA_MAX_CHANNELS];
    float std[SNN_DATA_MAX_CHANNELS];  /**< per channel, > 0; see mean */
    /** Random crop of the original size out of the image padded with `crop_padding` black pixels
     * (value 0 before normalisation) on each side, as torchvision's RandomCrop(size, padding=4);
     * default false. */
    bool random_crop;
    int crop_padding;        /**< default 4 */
    bool horizontal_flip;    /**< mirror left-right with probability 1/2; default false */
    /** Random erasing: with this probability a random rectangle of 2-33% of the image (aspect
     * 0.3-3.3) is set to 0 after normalisation, the mean (data/augment.c); default 0 (off). */
    float erase_probability;
    bool prefetch;           /**< background thread; default true */
    /** Data-parallel sharding (distributed/, docs/distributed.md): this loader is rank `shard` of
     * `shards` (0 or 1 shards: unsharded, the default). Batch b is then the rank's slice of
     * global batch b, which holds batch_size * shards samples of the epoch's order
     * (snn_shard_slice): the ranks' batches side by side are the batch an unsharded loader
     * with batch_size * shards gives, samples and augmentation alike. */
    int shard;
    int shards;              /**< see shard */
} snn_loader_config;

/** One batch, owned by the loader. */
typedef struct snn_batch {
    const float *images;     /**< (count, channels, height, width); valid until the next call;
                                  event sets: (time_steps, count, channels, height, width) */
    const float *labels;     /**< (count), class indices as floats (autograd.h's convention) */
    int count;               /**< N, samples in this batch (0 at the end of an epoch) */
    int channels;            /**< C */
    int height;              /**< H */
    int width;               /**< W */
    int time_steps;          /**< event sets: T (the images are time-major); 0 otherwise */
    int64_t epoch;           /**< which epoch and which batch of it this is */
    int64_t index;           /**< the batch's number within its epoch, from 0 */
    int global_count;        /**< samples in the global batch this one is a slice of (sharded
                                  loaders; else equal to count) */
} snn_batch;

/** A batch loader over one data set (opaque). */
typedef struct snn_loader snn_loader;

/** The defaults listed in snn_loader_config. */
snn_loader_config snn_loader_config_default(void);
/** A loader over `ds`, which must outlive it, making batches as `config` (copied) says. It
 * starts at epoch 0, batch 0, and owns its buffers and thread (snn_loader_free). NULL on error:
 * SNN_ERR_ARGUMENT naming the bad field, SNN_ERR_MEMORY (or no thread). */
snn_loader *snn_loader_new(const snn_dataset *ds, const snn_loader_config *config);
/** Stops the thread of `loader` and frees everything it holds (not the data set). NULL is a
 * no-op. */
void snn_loader_free(snn_loader *loader);
/** Batches per epoch of `loader` (counting a short last one unless drop_last). */
int64_t snn_loader_num_batches(const snn_loader *loader);
/** Moves `loader` to epoch `epoch`, batch `batch` (to resume from a checkpoint).
 * SNN_ERR_ARGUMENT for a NULL loader or a negative or out-of-range position. */
snn_status snn_loader_seek(snn_loader *loader, int64_t epoch, int64_t batch);
/**
 * Fills *batch with the next batch of the current epoch of `loader` and returns true; at the
 * end of the epoch returns false (batch->count = 0) and moves to batch 0 of the next epoch. The
 * batch's arrays belong to the loader and stay valid until the next call.
 */
bool snn_loader_next(snn_loader *loader, snn_batch *batch);
/** Where the next call to snn_loader_next will read, into *epoch and *batch: save these in a
 * checkpoint. */
void snn_loader_position(const snn_loader *loader, int64_t *epoch, int64_t *batch);

/**
 * Sharding, as a pure function of the sizes (the loader uses it; tests check it). With `count`
 * samples per epoch, `batch` per rank and `shards` ranks, global batch `index` covers positions
 * [index * batch * shards, + g) of the epoch's order, g = batch * shards except for a short
 * last one; rank r (`shard`) takes its positions [r g / shards, (r + 1) g / shards): `batch`
 * each for a full global batch, and as even a split as can be for the short one. *first is the
 * slice's first position in the epoch's order, *n its length, *global = g.
 */
void snn_shard_slice(int64_t count, int batch, int shard, int shards, int64_t index,
                     int64_t *first, int64_t *n, int64_t *global);
/** Global batches per epoch: ceil(count / (batch * shards)), without a short last one when
 * drop_last or when it holds fewer samples than there are ranks (one would get none). */
int64_t snn_shard_batches(int64_t count, int batch, int shards, bool drop_last);

/** Copies `batch` into two STEP tensors on `device` (inside a step): *images (count, C, H, W),
 * or (T, count, C, H, W) for an event set, and *labels (count). SNN_ERR_ARGUMENT for a NULL or
 * empty batch, or as snn_from_host. */
snn_status snn_batch_to_device(const snn_batch *batch, snn_device device, snn_tensor **images,
                               snn_tensor **labels);

/* ---------------------------------------------------------------------------------------------
 * Event-camera data sets (data/events.c, event_nmnist.c, event_aedat.c, event_dvs.c;
 * docs/events.md). A DVS camera reports events (t, x, y, polarity) instead of frames; a sample
 * becomes T frames of 2 channels (OFF = 0, ON = 1), each pixel counting the events that fell
 * into its frame (saturating at 255), as SpikingJelly's integrate-by-fixed-frames-number:
 *   split by number: the events are cut into T slices of floor(n / T) events in file order,
 *                    the remainder (n mod T events) going to the last frame;
 *   split by time:   [t_min, t_max] is cut into T windows of floor((t_max - t_min) / T)
 *                    microseconds, the last window taking everything up to t_max.
 * Names: "nmnist" (34x34, 10 classes), "dvs-gesture" (128x128, 11), "cifar10-dvs" (128x128, 10).
 * ------------------------------------------------------------------------------------------- */

/** How a sample's events are cut into frames (see above). */
typedef enum snn_event_split {
    SNN_SPLIT_BY_NUMBER = 0,   /**< T slices of equal event counts, in file order */
    SNN_SPLIT_BY_TIME = 1,     /**< T windows of equal duration */
} snn_event_split;

/** How an event set becomes frames; start from snn_event_frames_default(). */
typedef struct snn_event_frames {
    int frames;                /**< T, frames per sample; default 10 */
    snn_event_split split_by;  /**< default SNN_SPLIT_BY_NUMBER */
    int downsample;            /**< k: a frame pixel sums k x k sensor pixels (size ceil(H / k));
                                    default 1 */
} snn_event_frames;

/** One event. */
typedef struct snn_event {
    int64_t t;                 /**< time in microseconds */
    uint16_t x;                /**< pixel column */
    uint16_t y;                /**< pixel row */
    uint8_t p;                 /**< polarity: 0 (OFF) or 1 (ON) */
} snn_event;

/** The defaults listed in snn_event_frames. */
snn_event_frames snn_event_frames_default(void);
/** Parses `name` ("number" or "time") into *out; SNN_ERR_ARGUMENT with a message otherwise. */
snn_status snn_event_split_parse(const char *name, snn_event_split *out);
/** The name of `split`: "number" or "time". */
const char *snn_event_split_name(snn_event_split split);
/** True when `name` is one of the event-camera data sets above ("nmnist", "dvs-gesture",
 * "cifar10-dvs"); false otherwise, NULL included. */
bool snn_dataset_is_event(const char *name);
/** Loads one split of an event data set as frames (frames NULL: the defaults). Files are looked
 * for as snn_dataset_load does (path, `$SNN_DATA_DIR[/<name>]`, `/usr/share/datasets/<name>`):
 *   nmnist       Train.zip / Test.zip as distributed, or the extracted Train/ and Test/ folders
 *                (`<digit>/<id>.bin`); the path may also be the zip itself
 *   dvs-gesture  DvsGesture.tar.gz (or .tar) as distributed, or the extracted DvsGesture/
 *                folder: `userNN_<lighting>.aedat` (AEDAT 3.1) with its `_labels.csv`,
 *                the split from trials_to_train.txt / trials_to_test.txt
 *   cifar10-dvs  the per-class airplane.zip .. truck.zip as distributed (AEDAT 2.0 recordings),
 *                or extracted class folders; train = the first 90% of each class by recording
 *                number, test = the last 10%
 * On success *out owns the frames (count, T, 2, H, W) and labels (snn_dataset_free); on error
 * (a bad name, split or frames config: SNN_ERR_ARGUMENT; not found: SNN_ERR_IO; a broken file:
 * SNN_ERR_FORMAT; SNN_ERR_MEMORY) *out is zeroed and holds nothing. snn_dataset_load() takes
 * these names too (with the default frames). */
snn_status snn_event_dataset_load(const char *name, const char *path, snn_split split,
                                  const snn_event_frames *frames, snn_dataset *out);
/** snn_event_dataset_load for an event set's `name` (with `frames`), snn_dataset_load for any
 * other (`frames` unused); errors and ownership as those. */
snn_status snn_dataset_load_frames(const char *name, const char *path, snn_split split,
                                   const snn_event_frames *frames, snn_dataset *out);
/** Writes into `frames` (T, 2, ceil(H / k), ceil(W / k)) bytes the integration (as above, with
 * `config`) of the `n` events at `events` of a height x width sensor; events outside the sensor
 * are an error the readers catch first, here skipped. */
void snn_events_to_frames(uint8_t *frames, const snn_event *events, int64_t n, int height,
                          int width, const snn_event_frames *config);

/** Writes an N-MNIST look-alike zip at `path`: members `<folder>/<label>/<index>.bin` (e.g.
 * "Train/3/00017.bin"), sample i (of `samples`, label labels[i]) holding
 * events[offsets[i] .. offsets[i + 1]) in N-MNIST's 40-bit format (x, y < 256, t < 2^23 us).
 * Written to a temporary name and renamed: it appears whole or not. SNN_ERR_ARGUMENT for NULL
 * arguments or an event out of the format's range, SNN_ERR_IO, SNN_ERR_MEMORY. */
snn_status snn_nmnist_write_zip(const char *path, const char *folder, const snn_event *events,
                                const int64_t *offsets, const uint8_t *labels, int64_t samples);

/* ---------------------------------------------------------------------------------------------
 * Spike-train audio sets: the Spiking Heidelberg Digits (SHD, 20 classes) and Spiking Speech
 * Commands (SSC, 35 classes) of Cramer et al. 2020 (data/shd.c, data/hdf5/shd_hdf5.c;
 * docs/shd.md). A sample is a list of spikes (t seconds, unit 0..699) of an artificial
 * cochlea's 700 channels; it becomes T frames of ceil(700 / pool) counts:
 *   frame f counts the spikes with f dt <= t < (f + 1) dt, dt = max_time / T, computed as
 *   f = floor(t T / max_time); spikes at or after max_time are dropped (and counted);
 *   channel c goes to c / pool; a count saturates at 255, or at 1 when binarised.
 * The data set holds them as (count, T, 1, 1, ceil(700 / pool)) bytes (channels 1, height 1),
 * so the loader's batches are (T, N, 1, 1, F): the (T, N, F) input of a recurrent network.
 * ------------------------------------------------------------------------------------------- */

/** Input channels of SHD and SSC (the cochlea model's). */
#define SNN_SPIKE_AUDIO_CHANNELS 700

/** How a spike-train set becomes frames; start from snn_spike_frames_default(). */
typedef struct snn_spike_frames {
    int frames;          /**< T, frames per sample; default 100 (10 ms at max_time 1 s) */
    double max_time;     /**< seconds the T frames cover; default 1.0 (SHD's usual cut) */
    bool binarize;       /**< a frame channel is 1 when it holds any spike; default false */
    int pool;            /**< k: a frame channel sums the k input channels c with c / k equal
                              (ceil(700 / k) of them); default 1 */
} snn_spike_frames;

/** The defaults listed in snn_spike_frames. */
snn_spike_frames snn_spike_frames_default(void);
/** True when `name` is a spike-train audio set ("shd" or "ssc"); false otherwise, NULL too. */
bool snn_dataset_is_spike_audio(const char *name);
/**
 * Writes into `frames` (T, ceil(channels / pool)) bytes the framing (above, with `config`) of
 * the `n` spikes (times[i] seconds, units[i]) of one sample of a `channels`-channel set, and
 * returns how many spikes fell at or after max_time (dropped). Spikes with a negative or
 * non-finite time or a unit outside [0, channels) are an error the reader catches first; here
 * they are skipped (and not counted).
 */
int64_t snn_spikes_to_frames(uint8_t *frames, const double *times, const int64_t *units,
                             int64_t n, int channels, const snn_spike_frames *config);
/**
 * Loads one split of "shd" or "ssc" as frames (frames NULL: the defaults) from the HDF5 files
 * as published: `path` (else `$SNN_DATA_DIR[/<name>]`, else `/usr/share/datasets/<name>`) is a
 * folder holding `<name>_train.h5` and `<name>_test.h5`, or one such file. Each file holds the
 * group `spikes` with the variable-length datasets `times` (float seconds, non-decreasing
 * within a sample) and `units` (integers in [0, 700)), and the dataset `labels` (one integer
 * per sample, in [0, 20) for SHD, [0, 35) for SSC); `extra` is ignored. The whole file is
 * checked and every error names the file, the dataset and the sample: a missing group or
 * dataset, times and units of different lengths, a unit out of range, times that go back, a
 * negative or non-finite time, labels that are not one per sample or out of range
 * (SNN_ERR_FORMAT); a missing file (SNN_ERR_IO); a bad name, split or frames
 * (SNN_ERR_ARGUMENT); SNN_ERR_MEMORY. *dropped (when not NULL) receives the number of spikes at
 * or after max_time over the split. On error *out is zeroed and holds nothing.
 *
 * Lives in libsnn_data_hdf5 (part of snn::snn and snn.pc, not of snn_cpu): built without the
 * HDF5 C library it returns SNN_ERR_UNSUPPORTED, "built without HDF5".
 */
snn_status snn_spike_dataset_load(const char *name, const char *path, snn_split split,
                                  const snn_spike_frames *frames, snn_dataset *out,
                                  int64_t *dropped);

#ifdef __cplusplus
}
#endif

#endif /* SNN_DATA_H */
