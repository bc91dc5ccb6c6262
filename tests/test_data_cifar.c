/*
 * test_data_cifar.c - CIFAR-10 / CIFAR-100 binary, from archives and folders this test writes
 * itself (no copy of CIFAR is reachable here): a tiny tar builder below makes the archives
 * independently of data/'s own writer. Covers member order, path forms, CIFAR-100 fine and
 * coarse labels, the writer round trip, every bad archive (missing, misplaced, duplicate or
 * wrongly sized members, labels out of range, bad checksums, truncation, corrupt gzip) and
 * allocation failures.
 *
 *     ctest -R data_cifar --output-on-failure
 */
#define _XOPEN_SOURCE 700
#include "test.h"
#include "test_data_util.h"

#include "data/data_internal.h"

#define PIXELS 3072

/* ---- a tar builder of the test's own ------------------------------------------------------ */

typedef struct tarbuf {
    unsigned char *data;
    size_t size, cap;
} tarbuf;

static void tar_put(tarbuf *t, const void *p, size_t n)
{
    if (t->size + n > t->cap) {
        t->cap = (t->size + n) * 2 + 4096;
        t->data = realloc(t->data, t->cap);
    }
    memcpy(t->data + t->size, p, n);
    t->size += n;
}

/* One member. style 0: POSIX magic "ustar\0" "00"; 1: GNU magic "ustar  \0"; 2: POSIX with the
 * folder part of the path in the prefix field (offset 345), as tar does for long paths. */
static void tar_add(tarbuf *t, const char *name, const void *data, size_t n, char type, int gnu)
{
    unsigned char h[512] = {0};
    const char *slash = strrchr(name, '/');
    if (gnu == 2 && slash && slash[1]) {
        memcpy(h + 345, name, (size_t)(slash - name));
        memcpy(h, slash + 1, strlen(slash + 1));
    } else {
        memcpy(h, name, strlen(name));
    }
    snprintf((char *)h + 100, 8, "%07o", 0644);
    snprintf((char *)h + 108, 8, "%07o", 1000);
    snprintf((char *)h + 116, 8, "%07o", 1000);
    snprintf((char *)h + 124, 12, "%011o", (unsigned)n);
    snprintf((char *)h + 136, 12, "%011o", 1234567u);
    h[156] = (unsigned char)type;
    if (gnu == 1) memcpy(h + 257, "ustar  ", 8);
    else memcpy(h + 257, "ustar\0" "00", 8);
    memset(h + 148, ' ', 8);
    unsigned sum = 0;
    for (int i = 0; i < 512; i++) sum += h[i];
    snprintf((char *)h + 148, 8, "%06o", sum);
    tar_put(t, h, 512);
    if (n) tar_put(t, data, n);
    unsigned char zeros[512] = {0};
    if (n % 512) tar_put(t, zeros, 512 - n % 512);
}

static void tar_end(tarbuf *t)
{
    unsigned char zeros[1024] = {0};
    tar_put(t, zeros, sizeof zeros);
}

/* ---- synthetic CIFAR records ---------------------------------------------------------------- */

/* Record r of a set: label bytes then pixels with a pattern unique to (seed, r). */
static void make_records(unsigned char *out, int count, int label_bytes, int seed, int classes)
{
    for (int r = 0; r < count; r++) {
        unsigned char *rec = out + (size_t)r * (size_t)(label_bytes + PIXELS);
        if (label_bytes == 1) {
            rec[0] = (unsigned char)((seed + r) % classes);
        } else {
            rec[0] = (unsigned char)((seed + r) % 20);        /* coarse */
            rec[1] = (unsigned char)((seed * 7 + r) % 100);   /* fine */
        }
        for (int i = 0; i < PIXELS; i++)
            rec[label_bytes + i] = (unsigned char)(i * 3 + r * 17 + seed * 101);
    }
}

/* CIFAR-10: train batch k (1..5) has batch_sizes[k-1] records, test has 3. */
static const int batch_sizes[5] = {3, 2, 4, 1, 2};
enum { TRAIN10 = 12, TEST10 = 3 };
static unsigned char batches[5][4 * (1 + PIXELS)];
static unsigned char test10[TEST10 * (1 + PIXELS)];

static void make_cifar10_files(void)
{
    for (int k = 0; k < 5; k++) make_records(batches[k], batch_sizes[k], 1, 10 * (k + 1), 10);
    make_records(test10, TEST10, 1, 77, 10);
}

static void check_cifar10_train(const snn_dataset *ds)
{
    CHECK(ds->count == TRAIN10);
    CHECK(ds->channels == 3 && ds->height == 32 && ds->width == 32 && ds->classes == 10);
    CHECK(strcmp(ds->name, "cifar10") == 0);
    if (ds->count != TRAIN10 || !ds->images) return;
    int64_t at = 0;
    for (int k = 0; k < 5; k++) {
        for (int r = 0; r < batch_sizes[k]; r++, at++) {
            const unsigned char *rec = batches[k] + (size_t)r * (1 + PIXELS);
            CHECK(ds->labels[at] == rec[0]);
            CHECK(memcmp(ds->images + at * PIXELS, rec + 1, PIXELS) == 0);
        }
    }
}

static void check_cifar10_test(const snn_dataset *ds)
{
    CHECK(ds->count == TEST10);
    if (ds->count != TEST10 || !ds->images) return;
    for (int r = 0; r < TEST10; r++) {
        const unsigned char *rec = test10 + (size_t)r * (1 + PIXELS);
        CHECK(ds->labels[r] == rec[0]);
        CHECK(memcmp(ds->images + r * PIXELS, rec + 1, PIXELS) == 0);
    }
}

/* The members in the shuffled order of the real archive, plus meta and readme. */
static void build_cifar10_tar(tarbuf *t, int gnu)
{
    memset(t, 0, sizeof *t);
    static const int order[5] = {1, 3, 4, 2, 5};
    tar_add(t, "cifar-10-batches-bin/", NULL, 0, '5', gnu);
    for (int i = 0; i < 5; i++) {
        int k = order[i];
        char name[64];
        snprintf(name, sizeof name, "cifar-10-batches-bin/data_batch_%d.bin", k);
        tar_add(t, name, batches[k - 1], (size_t)batch_sizes[k - 1] * (1 + PIXELS), '0', gnu);
        if (i == 1) tar_add(t, "cifar-10-batches-bin/batches.meta.txt", "airplane\n", 9, '0', gnu);
        if (i == 2) tar_add(t, "cifar-10-batches-bin/test_batch.bin", test10, sizeof test10, '0',
                            gnu);
    }
    tar_add(t, "cifar-10-batches-bin/readme.html", "<html></html>", 13, '0', gnu);
    tar_end(t);
}

/* ---- good archives and folders -------------------------------------------------------------- */

static void test_cifar10_archive(void)
{
    for (int gnu = 0; gnu < 3; gnu++) {
        char dir[64], path[1024];
        tmp_dir_make(dir);
        tarbuf t;
        build_cifar10_tar(&t, gnu);
        write_gz(tmp_path(path, dir, "cifar-10-binary.tar.gz"), t.data, t.size);
        snn_dataset ds;
        /* The archive itself ... */
        CHECK_OK(snn_dataset_load("cifar10", path, SNN_SPLIT_TRAIN, &ds));
        check_cifar10_train(&ds);
        snn_dataset_free(&ds);
        /* ... or the folder holding it. */
        CHECK_OK(snn_dataset_load("cifar10", dir, SNN_SPLIT_TEST, &ds));
        check_cifar10_test(&ds);
        snn_dataset_free(&ds);
        /* An uncompressed .tar works as well (the stream sees no gzip magic). */
        write_bytes(tmp_path(path, dir, "plain.tar"), t.data, t.size);
        CHECK_OK(snn_dataset_load("cifar10", path, SNN_SPLIT_TRAIN, &ds));
        check_cifar10_train(&ds);
        snn_dataset_free(&ds);
        free(t.data);
        tmp_dir_remove(dir);
    }
}

static void write_cifar10_folder(const char *folder)
{
    char path[1024];
    for (int k = 0; k < 5; k++) {
        char name[64];
        snprintf(name, sizeof name, "data_batch_%d.bin", k + 1);
        write_bytes(tmp_path(path, folder, name), batches[k],
                    (size_t)batch_sizes[k] * (1 + PIXELS));
    }
    write_bytes(tmp_path(path, folder, "test_batch.bin"), test10, sizeof test10);
}

static void test_cifar10_folder(void)
{
    char dir[64], folder[1024];
    tmp_dir_make(dir);
    mkdir(tmp_path(folder, dir, "cifar-10-batches-bin"), 0700);
    write_cifar10_folder(folder);
    snn_dataset ds;
    /* The folder holding cifar-10-batches-bin/ ... */
    CHECK_OK(snn_dataset_load("cifar10", dir, SNN_SPLIT_TRAIN, &ds));
    check_cifar10_train(&ds);
    snn_dataset_free(&ds);
    /* ... or cifar-10-batches-bin/ itself. */
    CHECK_OK(snn_dataset_load("cifar10", folder, SNN_SPLIT_TEST, &ds));
    check_cifar10_test(&ds);
    snn_dataset_free(&ds);
    /* Through SNN_DATA_DIR/cifar10. */
    char root[64], sub[1024];
    tmp_dir_make(root);
    mkdir(tmp_path(sub, root, "cifar10"), 0700);
    write_cifar10_folder(sub);
    setenv("SNN_DATA_DIR", root, 1);
    CHECK_OK(snn_dataset_load("cifar10", NULL, SNN_SPLIT_TRAIN, &ds));
    check_cifar10_train(&ds);
    snn_dataset_free(&ds);
    unsetenv("SNN_DATA_DIR");
    tmp_dir_remove(root);
    tmp_dir_remove(dir);
}

enum { TRAIN100 = 5, TEST100 = 2 };
static unsigned char train100[TRAIN100 * (2 + PIXELS)];
static unsigned char test100[TEST100 * (2 + PIXELS)];

static void test_cifar100(void)
{
    make_records(train100, TRAIN100, 2, 5, 100);
    make_records(test100, TEST100, 2, 9, 100);
    char dir[64], path[1024];
    tmp_dir_make(dir);
    tarbuf t = {0};
    tar_add(&t, "cifar-100-binary/", NULL, 0, '5', 0);
    tar_add(&t, "cifar-100-binary/coarse_label_names.txt", "x\n", 2, '0', 0);
    tar_add(&t, "cifar-100-binary/test.bin", test100, sizeof test100, '0', 0);
    tar_add(&t, "cifar-100-binary/train.bin", train100, sizeof train100, '0', 0);
    tar_end(&t);
    write_gz(tmp_path(path, dir, "cifar-100-binary.tar.gz"), t.data, t.size);
    free(t.data);

    for (int coarse = 0; coarse < 2; coarse++) {
        snn_dataset ds;
        const char *name = coarse ? "cifar100-coarse" : "cifar100";
        CHECK_OK(snn_dataset_load(name, dir, SNN_SPLIT_TRAIN, &ds));
        CHECK(ds.count == TRAIN100 && ds.classes == (coarse ? 20 : 100));
        CHECK(strcmp(ds.name, name) == 0);
        for (int r = 0; r < TRAIN100 && ds.count == TRAIN100; r++) {
            const unsigned char *rec = train100 + (size_t)r * (2 + PIXELS);
            CHECK(ds.labels[r] == rec[coarse ? 0 : 1]);
            CHECK(memcmp(ds.images + r * PIXELS, rec + 2, PIXELS) == 0);
        }
        snn_dataset_free(&ds);
        CHECK_OK(snn_dataset_load(name, dir, SNN_SPLIT_TEST, &ds));
        CHECK(ds.count == TEST100);
        snn_dataset_free(&ds);
    }
    /* The extracted folder. */
    char folder[1024];
    mkdir(tmp_path(folder, dir, "cifar-100-binary"), 0700);
    write_bytes(tmp_path(path, folder, "train.bin"), train100, sizeof train100);
    write_bytes(tmp_path(path, folder, "test.bin"), test100, sizeof test100);
    remove(tmp_path(path, dir, "cifar-100-binary.tar.gz"));
    snn_dataset ds;
    CHECK_OK(snn_dataset_load("cifar100", dir, SNN_SPLIT_TRAIN, &ds));
    CHECK(ds.count == TRAIN100 && ds.labels && ds.labels[1] == train100[(2 + PIXELS) + 1]);
    snn_dataset_free(&ds);
    tmp_dir_remove(dir);
}

/* snn_dataset_write_cifar10 -> snn_dataset_load gives back the same sets. */
static void test_writer_round_trip(void)
{
    char dir[64], path[1024];
    tmp_dir_make(dir);
    snn_dataset train, test;
    /* Build the sets by loading the hand-made archive, then write them with the library. */
    tarbuf t;
    build_cifar10_tar(&t, 0);
    write_gz(tmp_path(path, dir, "in.tar.gz"), t.data, t.size);
    free(t.data);
    CHECK_OK(snn_dataset_load("cifar10", path, SNN_SPLIT_TRAIN, &train));
    CHECK_OK(snn_dataset_load("cifar10", path, SNN_SPLIT_TEST, &test));
    const char *names[10] = {"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"};
    CHECK_OK(snn_dataset_write_cifar10(tmp_path(path, dir, "out.tar.gz"), &train, &test, names));
    snn_dataset back;
    CHECK_OK(snn_dataset_load("cifar10", path, SNN_SPLIT_TRAIN, &back));
    check_cifar10_train(&back);
    snn_dataset_free(&back);
    CHECK_OK(snn_dataset_load("cifar10", path, SNN_SPLIT_TEST, &back));
    check_cifar10_test(&back);
    snn_dataset_free(&back);
    /* The layout: tar lists the members a real archive has. */
    snn_stream s;
    CHECK_OK(snn_stream_open_file(&s, path));
    snn_tar tar;
    snn_tar_init(&tar, &s);
    int members = 0, meta_ok = 0;
    for (;;) {
        snn_tar_member m;
        bool end;
        if (snn_tar_next(&tar, &m, &end) != SNN_OK || end) break;
        members++;
        if (strcmp(m.name, "cifar-10-batches-bin/batches.meta.txt") == 0) {
            char text[64] = {0};
            CHECK(m.size < sizeof text);
            if (m.size < sizeof text) CHECK_OK(snn_tar_read(&tar, text, (size_t)m.size));
            meta_ok = strncmp(text, "a\nb\nc\n", 6) == 0;
        }
    }
    snn_stream_close(&s);
    CHECK(members == 8); /* folder, meta, 5 train batches, test batch */
    CHECK(meta_ok);
    /* Bad arguments: 1-channel images. */
    snn_dataset gray = train;
    gray.channels = 1;
    CHECK(snn_dataset_write_cifar10(path, &gray, &test, NULL) == SNN_ERR_ARGUMENT);
    snn_dataset_free(&train);
    snn_dataset_free(&test);
    tmp_dir_remove(dir);
}

/* ---- bad archives --------------------------------------------------------------------------- */

static void expect_failure(const char *name, const char *path, snn_split split, snn_status want,
                           const char *needle1, const char *needle2)
{
    size_t live = snn_live_bytes(SNN_CPU);
    snn_dataset ds;
    memset(&ds, 0x5A, sizeof ds);
    snn_status st = snn_dataset_load(name, path, split, &ds);
    CHECK(st == want);
    CHECK(dataset_is_empty(&ds));
    CHECK(snn_live_bytes(SNN_CPU) == live);
    const char *msg = snn_last_error();
    bool ok = st == want && strstr(msg, needle1) && strstr(msg, needle2);
    if (!ok) fprintf(stderr, "  status %d (want %d), message: %s\n", (int)st, (int)want, msg);
    CHECK(strstr(msg, needle1) != NULL);
    CHECK(strstr(msg, needle2) != NULL);
}

/* A CIFAR-10 archive built by `build` into dir/name, then loaded: must fail as told. */
typedef void (*builder)(tarbuf *t);

static void add_batches_except(tarbuf *t, int skip)
{
    for (int k = 1; k <= 5; k++) {
        if (k == skip) continue;
        char name[64];
        snprintf(name, sizeof name, "cifar-10-batches-bin/data_batch_%d.bin", k);
        tar_add(t, name, batches[k - 1], (size_t)batch_sizes[k - 1] * (1 + PIXELS), '0', 0);
    }
    tar_add(t, "cifar-10-batches-bin/test_batch.bin", test10, sizeof test10, '0', 0);
}

static void build_missing(tarbuf *t) { add_batches_except(t, 4); tar_end(t); }

static void build_misplaced(tarbuf *t)
{
    add_batches_except(t, 2);
    tar_add(t, "data_batch_2.bin", batches[1], (size_t)batch_sizes[1] * (1 + PIXELS), '0', 0);
    tar_end(t);
}

static void build_duplicate(tarbuf *t)
{
    add_batches_except(t, 0);
    tar_add(t, "cifar-10-batches-bin/data_batch_3.bin", batches[2],
            (size_t)batch_sizes[2] * (1 + PIXELS), '0', 0);
    tar_end(t);
}

static void build_bad_size(tarbuf *t)
{
    add_batches_except(t, 5);
    tar_add(t, "cifar-10-batches-bin/data_batch_5.bin", batches[4], 1 + PIXELS + 100, '0', 0);
    tar_end(t);
}

static void build_bad_label(tarbuf *t)
{
    static unsigned char bad[4 * (1 + PIXELS)];
    memcpy(bad, batches[2], sizeof bad);
    bad[(size_t)2 * (1 + PIXELS)] = 10; /* record 2 */
    add_batches_except(t, 3);
    tar_add(t, "cifar-10-batches-bin/data_batch_3.bin", bad, (size_t)batch_sizes[2] * (1 + PIXELS),
            '0', 0);
    tar_end(t);
}

static void build_bad_checksum(tarbuf *t)
{
    add_batches_except(t, 0);
    tar_end(t);
    t->data[512 + 3 * (1 + PIXELS) + 512 - 3 * (1 + PIXELS) % 512 + 10] ^= 1; /* 2nd header */
}

static void build_not_ustar(tarbuf *t)
{
    add_batches_except(t, 0);
    tar_end(t);
    memcpy(t->data + 257, "xxxxx", 5);
    /* Fix the checksum so that only the magic is wrong. */
    memset(t->data + 148, ' ', 8);
    unsigned sum = 0;
    for (int i = 0; i < 512; i++) sum += t->data[i];
    snprintf((char *)t->data + 148, 8, "%06o", sum);
}

static void build_cut_inside(tarbuf *t)
{
    add_batches_except(t, 0);
    tar_end(t);
    t->size = 512 + 1000; /* the first member's data stops early; the gzip itself is fine */
}

static void build_not_tar(tarbuf *t)
{
    const char *text = "this is a text file, not a tar archive\n";
    tar_put(t, text, strlen(text));
}

static void test_bad_archives(void)
{
    struct {
        const char *what;
        builder build;
        snn_split split;
        const char *needle;
    } cases[] = {
        {"member missing", build_missing, SNN_SPLIT_TRAIN, "no member 'cifar-10-batches-bin/data_batch_4.bin'"},
        {"member misplaced", build_misplaced, SNN_SPLIT_TRAIN, "found 'data_batch_2.bin'"},
        {"member twice", build_duplicate, SNN_SPLIT_TRAIN, "appears twice"},
        {"size not a record multiple", build_bad_size, SNN_SPLIT_TRAIN, "3073-byte"},
        {"label out of range", build_bad_label, SNN_SPLIT_TRAIN, "label 10 of record 2"},
        {"bad checksum", build_bad_checksum, SNN_SPLIT_TRAIN, "checksum"},
        {"not ustar", build_not_ustar, SNN_SPLIT_TEST, "ustar"},
        {"tar cut inside a member", build_cut_inside, SNN_SPLIT_TRAIN, "truncated"},
        {"not a tar", build_not_tar, SNN_SPLIT_TRAIN, "truncated tar archive"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char dir[64], path[1024];
        tmp_dir_make(dir);
        tarbuf t = {0};
        cases[i].build(&t);
        write_gz(tmp_path(path, dir, "cifar-10-binary.tar.gz"), t.data, t.size);
        free(t.data);
        fprintf(stderr, "  case: %s\n", cases[i].what);
        expect_failure("cifar10", dir, cases[i].split, SNN_ERR_FORMAT, "cifar-10-binary.tar.gz",
                       cases[i].needle);
        tmp_dir_remove(dir);
    }
}

static void test_bad_gzip_and_paths(void)
{
    char dir[64], path[1024];
    tmp_dir_make(dir);
    /* Nothing there. */
    expect_failure("cifar10", dir, SNN_SPLIT_TRAIN, SNN_ERR_IO, dir, "cifar-10-binary.tar.gz");
    tmp_path(path, dir, "nothing.tar.gz");
    expect_failure("cifar10", path, SNN_SPLIT_TRAIN, SNN_ERR_IO, "nothing.tar.gz", "no such");

    tarbuf t;
    build_cifar10_tar(&t, 0);
    write_gz(tmp_path(path, dir, "cifar-10-binary.tar.gz"), t.data, t.size);
    free(t.data);
    size_t n;
    unsigned char *gz = read_bytes(path, &n);
    /* Truncated gzip. */
    write_bytes(path, gz, n * 2 / 3);
    expect_failure("cifar10", dir, SNN_SPLIT_TEST, SNN_ERR_FORMAT, "cifar-10-binary.tar.gz",
                   "truncated gzip");
    /* Damage inside the deflate data: caught by inflate or, when the damaged bits still
     * decode, by the tar checksums or finally the gzip CRC; always a format error. */
    unsigned char *bad = malloc(n);
    memcpy(bad, gz, n);
    for (size_t i = n / 3; i < n / 3 + 8; i++) bad[i] ^= 0x55;
    write_bytes(path, bad, n);
    expect_failure("cifar10", dir, SNN_SPLIT_TRAIN, SNN_ERR_FORMAT, "cifar-10-binary.tar.gz", "");
    /* A wrong CRC-32 in the gzip trailer: the data decodes, the check catches it. */
    memcpy(bad, gz, n);
    bad[n - 7] ^= 0x10;
    write_bytes(path, bad, n);
    expect_failure("cifar10", dir, SNN_SPLIT_TRAIN, SNN_ERR_FORMAT, "cifar-10-binary.tar.gz",
                   "corrupt gzip");
    free(bad);
    free(gz);
    remove(path);

    /* Folder with a wrongly sized file and one missing. */
    char folder[1024];
    mkdir(tmp_path(folder, dir, "cifar-10-batches-bin"), 0700);
    write_cifar10_folder(folder);
    write_bytes(tmp_path(path, folder, "test_batch.bin"), test10, sizeof test10 - 1);
    expect_failure("cifar10", dir, SNN_SPLIT_TEST, SNN_ERR_FORMAT, "test_batch.bin", "multiple");
    remove(tmp_path(path, folder, "data_batch_5.bin"));
    expect_failure("cifar10", dir, SNN_SPLIT_TRAIN, SNN_ERR_IO, "data_batch_5.bin", "cannot open");
    tmp_dir_remove(dir);

    /* CIFAR-100: fine label 100 and coarse label 20 are out of range. */
    tmp_dir_make(dir);
    make_records(train100, TRAIN100, 2, 5, 100);
    train100[2 + PIXELS + 1] = 100; /* fine label of record 1 */
    train100[2 * (2 + PIXELS)] = 20; /* coarse label of record 2 */
    tarbuf t100 = {0};
    tar_add(&t100, "cifar-100-binary/train.bin", train100, sizeof train100, '0', 0);
    tar_end(&t100);
    write_gz(tmp_path(path, dir, "cifar-100-binary.tar.gz"), t100.data, t100.size);
    free(t100.data);
    expect_failure("cifar100", dir, SNN_SPLIT_TRAIN, SNN_ERR_FORMAT, "train.bin",
                   "fine label 100 of record 1");
    expect_failure("cifar100-coarse", dir, SNN_SPLIT_TRAIN, SNN_ERR_FORMAT, "train.bin",
                   "coarse label 20 of record 2");
    /* The test split is not in this archive. */
    expect_failure("cifar100", dir, SNN_SPLIT_TEST, SNN_ERR_FORMAT, "cifar-100-binary.tar.gz",
                   "no member 'cifar-100-binary/test.bin'");
    tmp_dir_remove(dir);
}

static void test_allocation_failures(void)
{
    char dir[64], path[1024];
    tmp_dir_make(dir);
    tarbuf t;
    build_cifar10_tar(&t, 0);
    write_gz(tmp_path(path, dir, "cifar-10-binary.tar.gz"), t.data, t.size);
    free(t.data);
    int failures = 0;
    for (uint64_t k = 1; k < 400; k++) {
        size_t live = snn_live_bytes(SNN_CPU);
        snn_dataset ds;
        snn_alloc_fail_after(k);
        snn_status st = snn_dataset_load("cifar10", dir, SNN_SPLIT_TRAIN, &ds);
        snn_alloc_fail_after(0);
        if (st == SNN_OK) {
            check_cifar10_train(&ds);
            snn_dataset_free(&ds);
            break;
        }
        failures++;
        CHECK(st == SNN_ERR_MEMORY);
        CHECK(dataset_is_empty(&ds));
        CHECK(snn_live_bytes(SNN_CPU) == live);
    }
    CHECK(failures >= 8);

    /* The writer too: every failure is SNN_ERR_MEMORY, frees all and leaves no file behind. */
    snn_dataset train, test;
    CHECK_OK(snn_dataset_load("cifar10", dir, SNN_SPLIT_TRAIN, &train));
    CHECK_OK(snn_dataset_load("cifar10", dir, SNN_SPLIT_TEST, &test));
    tmp_path(path, dir, "out.tar.gz");
    failures = 0;
    for (uint64_t k = 1; k < 100; k++) {
        size_t live = snn_live_bytes(SNN_CPU);
        snn_alloc_fail_after(k);
        snn_status st = snn_dataset_write_cifar10(path, &train, &test, NULL);
        snn_alloc_fail_after(0);
        if (st == SNN_OK) break;
        failures++;
        CHECK(st == SNN_ERR_MEMORY);
        CHECK(snn_live_bytes(SNN_CPU) == live);
        CHECK(access(path, F_OK) != 0);
        char tmp[1100];
        snprintf(tmp, sizeof tmp, "%s.tmp", path);
        CHECK(access(tmp, F_OK) != 0);
    }
    CHECK(failures >= 3);
    snn_dataset back;
    CHECK_OK(snn_dataset_load("cifar10", path, SNN_SPLIT_TRAIN, &back));
    check_cifar10_train(&back);
    snn_dataset_free(&back);
    snn_dataset_free(&train);
    snn_dataset_free(&test);
    tmp_dir_remove(dir);
}

int main(void)
{
    unsetenv("SNN_DATA_DIR");
    make_cifar10_files();
    RUN(test_cifar10_archive);
    RUN(test_cifar10_folder);
    RUN(test_cifar100);
    RUN(test_writer_round_trip);
    RUN(test_bad_archives);
    RUN(test_bad_gzip_and_paths);
    RUN(test_allocation_failures);
    return test_finish();
}
