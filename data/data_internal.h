/*
 * data_internal.h - the pieces data/ is built from (private to data/, its tests and fuzzers).
 *
 *   gzip_stream.c  snn_stream: bytes from a file or memory, inflated on the fly when gzip;
 *                  snn_gz_writer: deflate to a file
 *   idx.c          the IDX format (MNIST, Fashion-MNIST) and the MNIST-style data set
 *   tar.c          a streaming ustar reader (headers, checksums, regular files)
 *   tar_write.c    a ustar writer on top of snn_gz_writer
 *   cifar.c        CIFAR-10/100 binary records, from a .tar.gz or a folder
 *   augment.c      one sample to floats: crop with padding, flip, normalise
 *   zip.c          a ZIP archive reader (stored and deflated members); zip_write.c its mirror
 *   events.c       event lists, frame integration, the event data sets by name
 *   event_nmnist.c N-MNIST: the 40-bit .bin format, from Train.zip/Test.zip or folders
 *   event_aedat.c  AEDAT 3.1 polarity packets, AEDAT 2.0 (CIFAR10-DVS), DVS Gesture label CSVs
 *   event_dvs.c    DVS128 Gesture (tar.gz or folder) and CIFAR10-DVS (class zips or folders)
 *
 * Functions that fail store a message naming the file (snn_stream.name) and return a status.
 */
#ifndef SNN_DATA_INTERNAL_H
#define SNN_DATA_INTERNAL_H

#include <stdio.h>
#include <zlib.h>

#include "data.h"

/* ---- snn_stream (gzip_stream.c) ------------------------------------------------------------ */

#define SNN_STREAM_CHUNK (256 * 1024)
/* No single IDX payload or tar member is believed when it claims more than this. */
#define SNN_DATA_MAX_BYTES ((uint64_t)1 << 34)

typedef struct snn_stream {
    char name[512];          /* the file (or label) every message names */
    FILE *file;              /* NULL when reading from memory */
    uint8_t *chunk;          /* (SNN_STREAM_CHUNK) raw bytes read from the file */
    const uint8_t *raw;      /* unread raw bytes: in chunk, or the caller's memory */
    size_t raw_left;
    bool raw_end;            /* the file or memory has nothing more to give */
    bool gzip;               /* the data starts with the gzip magic 1f 8b */
    bool z_ready;            /* inflateInit2 succeeded (so inflateEnd is due) */
    bool done;               /* all data delivered */
    z_stream z;
    uint64_t position;       /* bytes delivered to the reader so far */
} snn_stream;

snn_status snn_stream_open_file(snn_stream *s, const char *path);
/* Reads `size` bytes at `data` (not copied; must outlive the stream); `name` labels messages. */
snn_status snn_stream_open_memory(snn_stream *s, const void *data, size_t size, const char *name);
void snn_stream_close(snn_stream *s);
/* Up to n bytes; *got < n only at the end of the data. Errors: corrupt or truncated gzip, I/O. */
snn_status snn_stream_read(snn_stream *s, void *buf, size_t n, size_t *got);
/* Exactly n bytes, else SNN_ERR_FORMAT "truncated ... expected <what>". */
snn_status snn_stream_read_exact(snn_stream *s, void *buf, size_t n, const char *what);
/* Exactly n bytes into a new snn_alloc block of n bytes (*out; free with snn_free(*out, n)). The
 * block grows as bytes arrive, so a header that lies about n cannot make us allocate it all. */
snn_status snn_stream_read_alloc(snn_stream *s, uint64_t n, uint8_t **out, const char *what);
/* Everything left (at most `limit` bytes, else SNN_ERR_FORMAT): *out holds *size bytes in a block
 * of *capacity bytes (free with snn_free(*out, *capacity)). */
snn_status snn_stream_read_all(snn_stream *s, uint64_t limit, uint8_t **out, uint64_t *size,
                               uint64_t *capacity);
snn_status snn_stream_skip(snn_stream *s, uint64_t n, const char *what);
/* Reads and drops the rest (so that a gzip trailer's CRC-32 and length get checked). */
snn_status snn_stream_drain(snn_stream *s);
/* SNN_OK when the data has ended; SNN_ERR_FORMAT naming `what` when bytes remain. */
snn_status snn_stream_expect_end(snn_stream *s, const char *what);

/* zlib's allocator hooks, routed through snn_alloc (so the failure hook reaches zlib too). */
void *snn_zlib_alloc(void *opaque, unsigned items, unsigned size);
void snn_zlib_free(void *opaque, void *p);

typedef struct snn_gz_writer {
    char path[512];
    FILE *file;
    uint8_t *chunk;          /* (SNN_STREAM_CHUNK) deflated bytes waiting for fwrite */
    bool z_ready;
    z_stream z;
} snn_gz_writer;

snn_status snn_gz_writer_open(snn_gz_writer *w, const char *path, int level);
snn_status snn_gz_writer_write(snn_gz_writer *w, const void *data, size_t n);
/* Finishes the gzip stream and closes the file; always releases everything. */
snn_status snn_gz_writer_close(snn_gz_writer *w);
/* Releases everything without finishing (after an error). */
void snn_gz_writer_abort(snn_gz_writer *w);

/* ---- IDX (idx.c) ---------------------------------------------------------------------------- */

typedef struct snn_idx {
    uint8_t *data;           /* (dim[0], ..., dim[ndim-1]) unsigned bytes */
    uint64_t bytes;
    int ndim;
    int64_t dim[4];
} snn_idx;

/* Reads an IDX file of unsigned bytes with `ndim` dimensions (1 for labels, 3 for images),
 * checking the magic, the dimensions and that the payload has exactly the announced size. */
snn_status snn_idx_read(snn_stream *s, int ndim, snn_idx *out);
void snn_idx_free(snn_idx *idx);
/* Loads "<dir>/<prefix>-images-idx3-ubyte[.gz]" and labels into an MNIST-style data set. */
snn_status snn_mnist_load(const char *name, const char *dir, snn_split split, snn_dataset *out);
/* The data set from already-read images (N, H, W) and labels (N); checks they agree. Takes
 * nothing from the idx structs on error. `source` names the files for messages. */
snn_status snn_mnist_from_idx(const char *name, snn_idx *images, snn_idx *labels,
                              const char *source, snn_dataset *out);

/* ---- tar (tar.c) ---------------------------------------------------------------------------- */

typedef struct snn_tar_member {
    char name[260];          /* ustar prefix + "/" + name, NUL-terminated */
    uint64_t size;           /* bytes of data */
    char type;               /* '0' regular file (also '\0'), '5' directory, ... */
    uint64_t offset;         /* where its header starts in the uncompressed archive */
} snn_tar_member;

typedef struct snn_tar {
    snn_stream *stream;
    uint64_t left;           /* unread data bytes of the current member */
    uint64_t padding;        /* zero bytes after the data, up to the next 512 boundary */
    bool ended;
} snn_tar;

void snn_tar_init(snn_tar *t, snn_stream *s);
/* The next member's header, after skipping what is left of the current one. *end = true at the
 * end of the archive (two zero blocks, or the data ending on a block boundary). */
snn_status snn_tar_next(snn_tar *t, snn_tar_member *m, bool *end);
/* Exactly n bytes of the current member (n <= what is left). */
snn_status snn_tar_read(snn_tar *t, void *buf, size_t n);

typedef struct snn_tar_writer {
    snn_gz_writer gz;
    bool open;
} snn_tar_writer;

snn_status snn_tar_writer_open(snn_tar_writer *w, const char *path);
snn_status snn_tar_writer_dir(snn_tar_writer *w, const char *name);
/* One regular file, written whole. */
snn_status snn_tar_writer_file(snn_tar_writer *w, const char *name, const void *data,
                               uint64_t size);
/* Writes the end-of-archive blocks and closes; always releases everything. */
snn_status snn_tar_writer_close(snn_tar_writer *w);
void snn_tar_writer_abort(snn_tar_writer *w);

/* ---- CIFAR (cifar.c) ------------------------------------------------------------------------ */

typedef enum snn_cifar_kind { SNN_CIFAR10 = 0, SNN_CIFAR100 = 1 } snn_cifar_kind;

/* From a stream holding cifar-10-binary.tar.gz or cifar-100-binary.tar.gz. */
snn_status snn_cifar_read_archive(snn_stream *s, snn_cifar_kind kind, bool coarse,
                                  snn_split split, snn_dataset *out);
/* Resolves `path` (an archive, a folder holding the archive, the extracted folder, or a folder
 * holding the extracted folder) and loads. */
snn_status snn_cifar_load(const char *path, snn_cifar_kind kind, bool coarse, snn_split split,
                          snn_dataset *out);
/* Records of one batch file (bytes, a multiple of the record size) -> a data set. */
snn_status snn_cifar_from_records(const uint8_t *records, uint64_t bytes, snn_cifar_kind kind,
                                  bool coarse, const char *source, snn_dataset *out);

/* ---- one sample (augment.c) ----------------------------------------------------------------- */

/* lut[c][v] = (v / 255 - mean[c]) / std[c]: the normalised value of pixel v in channel c. */
typedef struct snn_norm_table {
    float value[SNN_DATA_MAX_CHANNELS][256];
} snn_norm_table;

void snn_norm_table_init(snn_norm_table *lut, int channels, const float *mean, const float *std);

/* The crop offset and flip of one sample: the crop takes rows [dy, dy + H) and columns
 * [dx, dx + W) of the image padded by `padding` on each side (dy, dx in [0, 2 padding]). After
 * crop and flip, random erasing blanks rows [erase_y, erase_y + erase_h) x columns [erase_x,
 * erase_x + erase_w) of every channel; erase_h == 0 (the zero initialiser): nothing erased. */
typedef struct snn_augment {
    int dy, dx;
    bool flip;
    int erase_y, erase_x, erase_h, erase_w;
} snn_augment;

/* Draws the augmentation of the sample at `position` of epoch `epoch` from (seed, epoch,
 * position) alone. */
snn_augment snn_augment_draw(uint64_t seed, int64_t epoch, int64_t position, int padding,
                             bool crop, bool flip);
/* Draws into *aug the random-erasing rectangle of that sample, with probability `probability`,
 * for (height, width) images (augment.c gives the distribution); a stream of its own, so the crop
 * and flip that snn_augment_draw gives do not change when erasing is turned on. */
void snn_erase_draw(uint64_t seed, int64_t epoch, int64_t position, float probability,
                    int height, int width, snn_augment *aug);
/* out (C, H, W) floats <- src (C, H, W) bytes, cropped (zero padded), flipped, normalised, then
 * the erase rectangle set to 0 (the data set's mean after normalisation). */
void snn_augment_apply(float *out, const uint8_t *src, int channels, int height, int width,
                       int padding, snn_augment aug, const snn_norm_table *lut);

/* ---- zip (zip.c, zip_write.c) --------------------------------------------------------------- */

typedef struct snn_zip_entry {
    char name[260];          /* the member's path inside the archive, NUL-terminated */
    uint16_t method;         /* 0 stored, 8 deflated */
    bool encrypted;
    uint32_t crc, compressed, size;
    uint64_t offset;         /* of its local header */
} snn_zip_entry;

typedef struct snn_zip {
    char name[512];          /* the file (or label) every message names */
    FILE *file;              /* NULL when reading from memory */
    const uint8_t *data;     /* the archive in memory (not owned), or NULL */
    uint64_t size;
    snn_zip_entry *entries;  /* (count) from the central directory, in its order */
    int64_t count, capacity;
} snn_zip;

snn_status snn_zip_open_file(snn_zip *z, const char *path);
snn_status snn_zip_open_memory(snn_zip *z, const void *data, size_t size, const char *name);
void snn_zip_close(snn_zip *z);
/* Member `index`, inflated and CRC-checked, into a new block of *size + 1 bytes (free with
 * snn_free(*out, *size + 1)). */
snn_status snn_zip_read(snn_zip *z, int64_t index, uint8_t **out, uint64_t *size);

typedef struct snn_zip_writer {
    char path[512], tmp_path[520];
    FILE *file;
    uint64_t offset;
    snn_zip_entry *entries;
    int64_t count, capacity;
} snn_zip_writer;

snn_status snn_zip_writer_open(snn_zip_writer *w, const char *path);
snn_status snn_zip_writer_add(snn_zip_writer *w, const char *name, const void *data, size_t size);
/* Writes the directory, closes and renames into place; always releases everything. */
snn_status snn_zip_writer_close(snn_zip_writer *w);
void snn_zip_writer_abort(snn_zip_writer *w);

/* ---- events (events.c, event_nmnist.c, event_aedat.c, event_dvs.c) ---------------------------- */

/* No sample or file is believed when it claims more events than this. */
#define SNN_EVENTS_MAX ((int64_t)1 << 28)

typedef struct snn_event_list {
    snn_event *items;        /* (count) */
    int64_t count, capacity;
} snn_event_list;

/* Appends one event (grows by doubling); SNN_ERR_FORMAT past SNN_EVENTS_MAX naming `source`. */
snn_status snn_event_list_push(snn_event_list *l, snn_event e, const char *source);
void snn_event_list_free(snn_event_list *l);
/* SNN_OK, or SNN_ERR_ARGUMENT naming `fn` and the bad field. */
snn_status snn_event_frames_check(const char *fn, const snn_event_frames *f);
/* Bytes of one sample's frames: T * 2 * ceil(H / k) * ceil(W / k). */
int64_t snn_event_frame_bytes(const snn_event_frames *f, int height, int width);

/* N-MNIST: 5 bytes per event, x = b0, y = b1, p = b2 >> 7, t = (b2 & 0x7F) << 16 | b3 << 8 | b4.
 * Checks the size is a multiple of 5 and every pixel inside the 34 x 34 sensor. */
snn_status snn_nmnist_decode(const uint8_t *data, uint64_t size, const char *source,
                             snn_event_list *out);
/* 5 n bytes into out; the caller checks x, y < 256, t < 2^23, p in {0, 1}. */
void snn_nmnist_encode(uint8_t *out, const snn_event *events, int64_t n);
/* A data set from an N-MNIST zip (members "<Train|Test>/<digit>/<name>.bin"). */
snn_status snn_nmnist_read_zip(snn_zip *z, snn_split split, const snn_event_frames *f,
                               snn_dataset *out);
snn_status snn_nmnist_load(const char *path, snn_split split, const snn_event_frames *f,
                           snn_dataset *out);

/* Skips the '#' header lines of an AEDAT file; *offset = where the binary data starts. Checks
 * the first line is "#!AER-DAT<version>" (version "3.1" or "2.0"). */
snn_status snn_aedat_header(const uint8_t *data, uint64_t size, const char *source,
                            const char *version, uint64_t *offset);
/* AEDAT 3.1: the polarity events (packet type 1, 8 bytes each) of a whole file, valid ones only,
 * every pixel checked against the width x height sensor. */
snn_status snn_aedat3_decode(const uint8_t *data, uint64_t size, const char *source, int width,
                             int height, snn_event_list *out);
/* AEDAT 2.0 as in CIFAR10-DVS: big-endian (address, timestamp) pairs of a DVS128; see the file. */
snn_status snn_aedat2_decode(const uint8_t *data, uint64_t size, const char *source,
                             snn_event_list *out);

/* One gesture of a DVS Gesture recording: events with start <= t < end, class label 0..10. */
typedef struct snn_gesture_label {
    int label;
    int64_t start, end;
} snn_gesture_label;

/* "class,startTime_usec,endTime_usec" then one line per gesture (class 1..11). *out is a new
 * block of *count entries (free with snn_free(*out, *count * sizeof **out); NULL when 0). */
snn_status snn_gesture_labels_parse(const uint8_t *text, uint64_t size, const char *source,
                                    snn_gesture_label **out, int *count);
/* DVS Gesture from a tar (optionally gzip) archive: the file at `path`, or `size` bytes at `data`
 * when path is NULL (read twice: labels and split lists first, then the recordings). */
snn_status snn_dvs_gesture_read_tar(const char *path, const void *data, size_t size,
                                    snn_split split, const snn_event_frames *f, snn_dataset *out);
snn_status snn_dvs_gesture_load(const char *path, snn_split split, const snn_event_frames *f,
                                snn_dataset *out);
/* CIFAR10-DVS from class zips: zips[i] holds the recordings of class labels[i] (0..9). */
snn_status snn_cifar10dvs_read_zips(snn_zip *zips, const int *labels, int n, snn_split split,
                                    const snn_event_frames *f, snn_dataset *out);
snn_status snn_cifar10dvs_load(const char *path, snn_split split, const snn_event_frames *f,
                               snn_dataset *out);

/* ---- helpers (dataset.c) -------------------------------------------------------------------- */

/* Allocates images and labels for `count` samples; zeroes *out on failure (message set). */
snn_status snn_dataset_alloc(snn_dataset *out, const char *name, int64_t count, int channels,
                             int height, int width, int classes);
/* "dir/file" into buf; SNN_ERR_ARGUMENT when it does not fit. */
snn_status snn_path_join(char *buf, size_t size, const char *dir, const char *file);
bool snn_path_is_dir(const char *path);
/* The folder or file to read: `path` when given, else $SNN_DATA_DIR/<folder> when it exists,
 * else $SNN_DATA_DIR, else /usr/share/datasets/<folder>. */
snn_status snn_dataset_locate(const char *folder, const char *path, char *where, size_t size);
/* Allocates an event data set of `count` samples of frames f of a height x width sensor. */
snn_status snn_event_dataset_alloc(snn_dataset *out, const char *name, int64_t count,
                                   const snn_event_frames *f, int height, int width, int classes);
bool snn_path_exists(const char *path);

/* ---- spike-train audio sets (shd.c; the HDF5 reader data/hdf5/shd_hdf5.c) -------------------- */

/* SNN_OK, or SNN_ERR_ARGUMENT naming `fn` and the bad field of `f`. */
snn_status snn_spike_frames_check(const char *fn, const snn_spike_frames *f);
/* Allocates a spike-train data set of `count` (>= 1) samples of T x ceil(700 / pool) frames:
 * channels 1, height 1, width ceil(700 / pool); zeroes *out on failure (message set). */
snn_status snn_spike_dataset_alloc(snn_dataset *out, const char *name, int64_t count,
                                   const snn_spike_frames *f, int classes);

#endif /* SNN_DATA_INTERNAL_H */
