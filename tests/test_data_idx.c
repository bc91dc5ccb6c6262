/*
 * test_data_idx.c - the IDX reader (MNIST / Fashion-MNIST): the real Fashion-MNIST files when
 * installed, small synthetic files (plain and gzip) written to a temp folder, where the files
 * are looked for (argument, SNN_DATA_DIR), and every kind of bad file, each of which must give
 * SNN_ERR_IO or SNN_ERR_FORMAT naming the file, leave the data set empty and leak nothing.
 *
 *     ctest -R data_idx --output-on-failure
 */
#define _XOPEN_SOURCE 700
#include "test.h"
#include "test_data_util.h"

#include "data/data_internal.h"

#define FMNIST_DIR "/usr/share/datasets/fashion-mnist"

/* ---- synthetic IDX files -------------------------------------------------------------------- */

enum { N = 7, H = 5, W = 4 };

/* An IDX header + payload in buf; returns its size. */
static size_t make_idx(unsigned char *buf, unsigned char type, int ndim, const unsigned *dims,
                       const unsigned char *payload, size_t payload_bytes)
{
    size_t n = 0;
    buf[n++] = 0;
    buf[n++] = 0;
    buf[n++] = type;
    buf[n++] = (unsigned char)ndim;
    for (int i = 0; i < ndim; i++) {
        buf[n++] = (unsigned char)(dims[i] >> 24);
        buf[n++] = (unsigned char)(dims[i] >> 16);
        buf[n++] = (unsigned char)(dims[i] >> 8);
        buf[n++] = (unsigned char)dims[i];
    }
    memcpy(buf + n, payload, payload_bytes);
    return n + payload_bytes;
}

static unsigned char pixels[N * H * W];
static unsigned char labels[N];
static unsigned char image_file[16 + N * H * W + 64];
static unsigned char label_file[16 + N + 64];
static size_t image_file_bytes, label_file_bytes;

static void make_synthetic(void)
{
    for (int i = 0; i < N * H * W; i++) pixels[i] = (unsigned char)(i * 7 + 3);
    for (int i = 0; i < N; i++) labels[i] = (unsigned char)((i * 3) % 10);
    unsigned image_dims[3] = {N, H, W}, label_dims[1] = {N};
    image_file_bytes = make_idx(image_file, 0x08, 3, image_dims, pixels, sizeof pixels);
    label_file_bytes = make_idx(label_file, 0x08, 1, label_dims, labels, sizeof labels);
}

/* Writes the train files of a synthetic set into dir, gzip or plain. */
static void write_set(const char *dir, int gzip, const unsigned char *img, size_t img_bytes,
                      const unsigned char *lab, size_t lab_bytes)
{
    char path[1024];
    if (gzip) {
        write_gz(tmp_path(path, dir, "train-images-idx3-ubyte.gz"), img, img_bytes);
        write_gz(tmp_path(path, dir, "train-labels-idx1-ubyte.gz"), lab, lab_bytes);
    } else {
        write_bytes(tmp_path(path, dir, "train-images-idx3-ubyte"), img, img_bytes);
        write_bytes(tmp_path(path, dir, "train-labels-idx1-ubyte"), lab, lab_bytes);
    }
}

static void check_synthetic(const snn_dataset *ds)
{
    CHECK(ds->count == N);
    CHECK(ds->channels == 1 && ds->height == H && ds->width == W);
    CHECK(ds->classes == 10);
    CHECK(ds->images && memcmp(ds->images, pixels, sizeof pixels) == 0);
    CHECK(ds->labels && memcmp(ds->labels, labels, sizeof labels) == 0);
}

static void test_synthetic_plain_and_gzip(void)
{
    for (int gzip = 0; gzip < 2; gzip++) {
        char dir[64];
        tmp_dir_make(dir);
        write_set(dir, gzip, image_file, image_file_bytes, label_file, label_file_bytes);
        snn_dataset ds;
        CHECK_OK(snn_dataset_load("mnist", dir, SNN_SPLIT_TRAIN, &ds));
        check_synthetic(&ds);
        CHECK(strcmp(ds.name, "mnist") == 0);
        snn_dataset_free(&ds);
        CHECK(dataset_is_empty(&ds));
        snn_dataset_free(&ds); /* a freed (zeroed) set frees again harmlessly */
        tmp_dir_remove(dir);
    }
}

static void test_memory_stream(void)
{
    /* The same parser on memory, plain and gzip (compressed here with zlib's compress API). */
    snn_stream s;
    snn_idx idx;
    CHECK_OK(snn_stream_open_memory(&s, image_file, image_file_bytes, "memory"));
    CHECK_OK(snn_idx_read(&s, 3, &idx));
    CHECK(idx.ndim == 3 && idx.dim[0] == N && idx.dim[1] == H && idx.dim[2] == W);
    CHECK(idx.data && memcmp(idx.data, pixels, sizeof pixels) == 0);
    snn_idx_free(&idx);
    snn_stream_close(&s);
    CHECK(snn_live_bytes(SNN_CPU) == 0);
}

/* Two gzip members back to back read as one stream, as gunzip does. */
static void test_concatenated_gzip(void)
{
    char dir[64], path[1024], part[1024];
    tmp_dir_make(dir);
    size_t half = image_file_bytes / 2;
    write_gz(tmp_path(part, dir, "a.gz"), image_file, half);
    size_t a_bytes;
    unsigned char *a = read_bytes(part, &a_bytes);
    write_gz(tmp_path(part, dir, "b.gz"), image_file + half, image_file_bytes - half);
    size_t b_bytes;
    unsigned char *b = read_bytes(part, &b_bytes);
    unsigned char *both = malloc(a_bytes + b_bytes);
    memcpy(both, a, a_bytes);
    memcpy(both + a_bytes, b, b_bytes);
    write_bytes(tmp_path(path, dir, "train-images-idx3-ubyte.gz"), both, a_bytes + b_bytes);
    write_gz(tmp_path(path, dir, "train-labels-idx1-ubyte.gz"), label_file, label_file_bytes);
    snn_dataset ds;
    CHECK_OK(snn_dataset_load("fashion-mnist", dir, SNN_SPLIT_TRAIN, &ds));
    check_synthetic(&ds);
    snn_dataset_free(&ds);
    free(a);
    free(b);
    free(both);
    tmp_dir_remove(dir);
}

/* ---- where files are looked for ------------------------------------------------------------- */

static void test_search_order(void)
{
    char root[64], sub[1024];
    tmp_dir_make(root);
    write_set(root, 1, image_file, image_file_bytes, label_file, label_file_bytes);

    /* $SNN_DATA_DIR itself when it has no <name> subfolder. */
    setenv("SNN_DATA_DIR", root, 1);
    snn_dataset ds;
    CHECK_OK(snn_dataset_load("mnist", NULL, SNN_SPLIT_TRAIN, &ds));
    check_synthetic(&ds);
    snn_dataset_free(&ds);

    /* $SNN_DATA_DIR/<name> wins over $SNN_DATA_DIR: give the subfolder different labels. */
    mkdir(tmp_path(sub, root, "mnist"), 0700);
    unsigned char other[sizeof label_file];
    memcpy(other, label_file, label_file_bytes);
    other[8] = 9; /* first label */
    write_set(sub, 0, image_file, image_file_bytes, other, label_file_bytes);
    CHECK_OK(snn_dataset_load("mnist", NULL, SNN_SPLIT_TRAIN, &ds));
    CHECK(ds.count == N && ds.labels && ds.labels[0] == 9);
    snn_dataset_free(&ds);

    /* The path argument wins over the environment. */
    CHECK_OK(snn_dataset_load("mnist", root, SNN_SPLIT_TRAIN, &ds));
    CHECK(ds.count == N && ds.labels && ds.labels[0] == labels[0]);
    snn_dataset_free(&ds);

    /* A missing file under $SNN_DATA_DIR: IO error naming the file. */
    CHECK(snn_dataset_load("mnist", NULL, SNN_SPLIT_TEST, &ds) == SNN_ERR_IO);
    CHECK(strstr(snn_last_error(), "t10k-images-idx3-ubyte") != NULL);
    CHECK(strstr(snn_last_error(), "SNN_DATA_DIR") != NULL); /* the hint */
    CHECK(dataset_is_empty(&ds));
    unsetenv("SNN_DATA_DIR");
    tmp_dir_remove(root);
}

static void test_bad_arguments(void)
{
    snn_dataset ds;
    CHECK(snn_dataset_load("imagenet", "/tmp", SNN_SPLIT_TRAIN, &ds) == SNN_ERR_ARGUMENT);
    CHECK(strstr(snn_last_error(), "imagenet") != NULL);
    CHECK(snn_dataset_load(NULL, NULL, SNN_SPLIT_TRAIN, &ds) == SNN_ERR_ARGUMENT);
    CHECK(snn_dataset_load("mnist", "/tmp", (snn_split)7, &ds) == SNN_ERR_ARGUMENT);
    CHECK(snn_dataset_load("mnist", NULL, SNN_SPLIT_TRAIN, NULL) == SNN_ERR_ARGUMENT);
    CHECK(dataset_is_empty(&ds));
}

/* ---- bad files: each one a status, a message naming the file and what was expected ---------- */

typedef struct bad_case {
    const char *what;
    int gzip;
    snn_status want;
    const char *file_in_message;  /* a part of the message that must appear */
    const char *expect_in_message;
} bad_case;

/* Loads dir, checks the error, the message, the empty set and no leak. */
static void expect_failure(const char *dir, const bad_case *c)
{
    size_t live = snn_live_bytes(SNN_CPU);
    snn_dataset ds;
    memset(&ds, 0xAB, sizeof ds); /* garbage in: a failed load must still zero it */
    snn_status st = snn_dataset_load("fashion-mnist", dir, SNN_SPLIT_TRAIN, &ds);
    CHECK(st == c->want);
    CHECK(dataset_is_empty(&ds));
    CHECK(snn_live_bytes(SNN_CPU) == live);
    const char *msg = snn_last_error();
    if (st != c->want || !strstr(msg, c->file_in_message) || !strstr(msg, c->expect_in_message)) {
        fprintf(stderr, "  case '%s': status %d (want %d), message: %s\n", c->what, (int)st,
                (int)c->want, msg);
        CHECK(strstr(msg, c->file_in_message) != NULL);
        CHECK(strstr(msg, c->expect_in_message) != NULL);
    }
}

static void test_bad_files(void)
{
    unsigned char img[sizeof image_file + 64], lab[sizeof label_file + 64];
    const char *images_gz = "train-images-idx3-ubyte.gz";

    /* Missing files. */
    {
        char dir[64];
        tmp_dir_make(dir);
        bad_case c = {"missing", 1, SNN_ERR_IO, "train-images-idx3-ubyte", "cannot open"};
        expect_failure(dir, &c);
        /* Images present, labels missing: the images already read must be freed. */
        char path[1024];
        write_gz(tmp_path(path, dir, images_gz), image_file, image_file_bytes);
        bad_case c2 = {"labels missing", 1, SNN_ERR_IO, "train-labels-idx1-ubyte", "cannot open"};
        expect_failure(dir, &c2);
        tmp_dir_remove(dir);
    }

    /* Header problems, each written gzip-compressed. */
    struct {
        bad_case c;
        int offset;           /* byte of the image file to change, -1: none */
        unsigned char value;
        int cut;              /* bytes to drop from the end of the payload (negative: add) */
        int labels_offset;    /* byte of the label file to change, -1: none */
        unsigned char labels_value;
    } cases[] = {
        {{"magic not 00 00", 1, SNN_ERR_FORMAT, images_gz, "not an IDX file"}, 0, 0x1F, 0, -1, 0},
        {{"float elements", 1, SNN_ERR_FORMAT, images_gz, "expected 0x08"}, 2, 0x0D, 0, -1, 0},
        {{"wrong rank", 1, SNN_ERR_FORMAT, images_gz, "expected 3"}, 3, 2, 0, -1, 0},
        {{"zero dimension", 1, SNN_ERR_FORMAT, images_gz, "expected 1.."}, 11, 0, 0, -1, 0},
        {{"payload short", 1, SNN_ERR_FORMAT, images_gz, "truncated"}, -1, 0, 5, -1, 0},
        {{"payload long", 1, SNN_ERR_FORMAT, images_gz, "expected the data to end"}, -1, 0, -3,
         -1, 0},
        {{"huge header", 1, SNN_ERR_FORMAT, images_gz, "truncated"}, 4, 0x01, 0, -1, 0},
        {{"label count differs", 1, SNN_ERR_FORMAT, "train-images-idx3-ubyte",
          "expected the same count"}, -1, 0, 0, 7, N - 1},
        {{"label out of range", 1, SNN_ERR_FORMAT, "train-labels-idx1-ubyte", "expected 0..9"},
         -1, 0, 0, 8 + 3, 10},
        {{"label file is images", 1, SNN_ERR_FORMAT, "train-labels-idx1-ubyte", "expected 1"},
         -1, 0, 0, 3, 3},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char dir[64], path[1024];
        tmp_dir_make(dir);
        memcpy(img, image_file, image_file_bytes);
        memcpy(lab, label_file, label_file_bytes);
        size_t img_bytes = image_file_bytes, lab_bytes = label_file_bytes;
        if (cases[i].offset >= 0) img[cases[i].offset] = cases[i].value;
        if (cases[i].cut > 0) img_bytes -= (size_t)cases[i].cut;
        if (cases[i].cut < 0) {
            memset(img + img_bytes, 0, (size_t)-cases[i].cut);
            img_bytes += (size_t)-cases[i].cut;
        }
        if (cases[i].labels_offset == 7) lab_bytes -= 1; /* header says N - 1, one byte less */
        if (cases[i].labels_offset >= 0) lab[cases[i].labels_offset] = cases[i].labels_value;
        write_gz(tmp_path(path, dir, images_gz), img, img_bytes);
        write_gz(tmp_path(path, dir, "train-labels-idx1-ubyte.gz"), lab, lab_bytes);
        expect_failure(dir, &cases[i].c);
        tmp_dir_remove(dir);
    }
}

/* gzip damage: a cut-off file and a flipped byte in the compressed data. */
static void test_bad_gzip(void)
{
    char dir[64], path[1024];
    tmp_dir_make(dir);
    /* Incompressible-ish payload, so the compressed stream is long enough to cut and damage. */
    enum { BIG_N = 50 };
    static unsigned char big[16 + BIG_N * 28 * 28];
    static unsigned char payload[BIG_N * 28 * 28];
    uint64_t x = 12345;
    for (size_t i = 0; i < sizeof payload; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        payload[i] = (unsigned char)(x >> 56);
    }
    unsigned dims[3] = {BIG_N, 28, 28};
    size_t big_bytes = make_idx(big, 0x08, 3, dims, payload, sizeof payload);
    unsigned char lab[8 + BIG_N];
    unsigned ldims[1] = {BIG_N};
    unsigned char lpayload[BIG_N] = {0};
    size_t lab_bytes = make_idx(lab, 0x08, 1, ldims, lpayload, BIG_N);
    write_gz(tmp_path(path, dir, "train-labels-idx1-ubyte.gz"), lab, lab_bytes);
    write_gz(tmp_path(path, dir, "train-images-idx3-ubyte.gz"), big, big_bytes);
    size_t gz_bytes;
    unsigned char *gz = read_bytes(path, &gz_bytes);

    /* Sanity: intact, it loads. */
    snn_dataset ds;
    CHECK_OK(snn_dataset_load("fashion-mnist", dir, SNN_SPLIT_TRAIN, &ds));
    CHECK(ds.count == BIG_N && ds.images && memcmp(ds.images, payload, sizeof payload) == 0);
    snn_dataset_free(&ds);

    /* Cut at several places: always "truncated gzip" (or the gzip trailer missing). */
    size_t cuts[] = {gz_bytes / 2, gz_bytes - 4, gz_bytes - 1, 11};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        write_bytes(path, gz, cuts[i]);
        bad_case c = {"truncated gzip", 1, SNN_ERR_FORMAT, "train-images-idx3-ubyte.gz",
                      "truncated gzip"};
        expect_failure(dir, &c);
    }
    /* A flipped byte in the middle: invalid deflate data or a CRC mismatch. */
    unsigned char *bad = malloc(gz_bytes);
    memcpy(bad, gz, gz_bytes);
    bad[gz_bytes / 2] ^= 0xFF;
    write_bytes(path, bad, gz_bytes);
    bad_case c = {"corrupt gzip", 1, SNN_ERR_FORMAT, "train-images-idx3-ubyte.gz", "corrupt gzip"};
    expect_failure(dir, &c);
    /* A damaged CRC-32 in the trailer alone. */
    memcpy(bad, gz, gz_bytes);
    bad[gz_bytes - 6] ^= 0x01;
    write_bytes(path, bad, gz_bytes);
    bad_case c2 = {"bad crc", 1, SNN_ERR_FORMAT, "train-images-idx3-ubyte.gz", "corrupt gzip"};
    expect_failure(dir, &c2);
    free(bad);
    free(gz);
    tmp_dir_remove(dir);
}

/* Every allocation of a load, made to fail in turn: a clean SNN_ERR_MEMORY and no leak. */
static void test_allocation_failures(void)
{
    char dir[64];
    tmp_dir_make(dir);
    write_set(dir, 1, image_file, image_file_bytes, label_file, label_file_bytes);
    int failures_seen = 0;
    for (uint64_t k = 1; k < 200; k++) {
        size_t live = snn_live_bytes(SNN_CPU);
        snn_dataset ds;
        snn_alloc_fail_after(k);
        snn_status st = snn_dataset_load("mnist", dir, SNN_SPLIT_TRAIN, &ds);
        snn_alloc_fail_after(0);
        if (st == SNN_OK) {
            check_synthetic(&ds);
            snn_dataset_free(&ds);
            break;
        }
        failures_seen++;
        CHECK(st == SNN_ERR_MEMORY);
        CHECK(dataset_is_empty(&ds));
        CHECK(snn_live_bytes(SNN_CPU) == live);
    }
    CHECK(failures_seen >= 4); /* read buffers, zlib state, payloads: several allocations */
    tmp_dir_remove(dir);
}

/* ---- the real Fashion-MNIST ----------------------------------------------------------------- */

static void test_real_fashion_mnist(void)
{
    char probe[256];
    snprintf(probe, sizeof probe, "%s/train-images-idx3-ubyte.gz", FMNIST_DIR);
    if (access(probe, R_OK) != 0) {
        fprintf(stderr, "  (Fashion-MNIST not installed at %s: skipped)\n", FMNIST_DIR);
        return;
    }
    snn_dataset train, test;
    CHECK_OK(snn_dataset_load("fashion-mnist", FMNIST_DIR, SNN_SPLIT_TRAIN, &train));
    CHECK_OK(snn_dataset_load("fashion-mnist", FMNIST_DIR, SNN_SPLIT_TEST, &test));
    CHECK(train.count == 60000 && test.count == 10000);
    CHECK(train.channels == 1 && train.height == 28 && train.width == 28);
    CHECK(test.channels == 1 && test.height == 28 && test.width == 28);
    CHECK(train.classes == 10);
    /* First labels of both files: 9 (ankle boot). */
    CHECK(train.labels && train.labels[0] == 9);
    CHECK(test.labels && test.labels[0] == 9);
    int counts[10] = {0};
    for (int64_t i = 0; i < train.count; i++) {
        CHECK(train.labels[i] < 10);
        if (train.labels[i] < 10) counts[train.labels[i]]++;
    }
    for (int c = 0; c < 10; c++) CHECK(counts[c] == 6000); /* balanced classes */
    float mean[SNN_DATA_MAX_CHANNELS], std[SNN_DATA_MAX_CHANNELS];
    snn_dataset_measure_norm(&train, mean, std);
    CHECK_CLOSE(mean[0], 0.2860, 0.001, 0.0);
    CHECK_CLOSE(std[0], 0.3530, 0.001, 0.0);
    snn_dataset_free(&train);
    snn_dataset_free(&test);
}

int main(void)
{
    unsetenv("SNN_DATA_DIR");
    make_synthetic();
    RUN(test_synthetic_plain_and_gzip);
    RUN(test_memory_stream);
    RUN(test_concatenated_gzip);
    RUN(test_search_order);
    RUN(test_bad_arguments);
    RUN(test_bad_files);
    RUN(test_bad_gzip);
    RUN(test_allocation_failures);
    RUN(test_real_fashion_mnist);
    return test_finish();
}
