/*
 * test_data_events.c - the event-camera data sets, from files this test writes itself out of
 * known event lists (none of the real sets is reachable here), so every frame can be checked by
 * hand: frame integration by number and by time (remainder in the last frame), downsampling,
 * saturation; the N-MNIST 40-bit format from a zip and from folders; DVS Gesture's AEDAT 3.1
 * recordings cut by their label files, from a tar.gz and from a folder; CIFAR10-DVS's AEDAT 2.0
 * recordings from class zips with the 90/10 split; the loader's time-major batches; and bad
 * files (wrong sizes, pixels off the sensor, corrupt zips, missing label files) failing with a
 * message naming the file and leaving nothing loaded.
 *
 *     ctest -R data_events --output-on-failure
 */
#define _XOPEN_SOURCE 700
#include "test.h"
#include "test_data_util.h"

#include "data/data_internal.h"

#define EV(t_, x_, y_, p_) ((snn_event){.t = (t_), .x = (x_), .y = (y_), .p = (p_)})

static char dir[64];

static uint8_t frame_at(const uint8_t *frames, int H, int W, int t, int p, int y, int x)
{
    return frames[((t * 2 + p) * H + y) * W + x];
}

static int message_has(const char *needle)
{
    if (strstr(snn_last_error(), needle)) return 1;
    fprintf(stderr, "  message '%s' lacks '%s'\n", snn_last_error(), needle);
    return 0;
}

/* ---- frame integration ------------------------------------------------------------------- */

static void test_frames_by_number(void)
{
    /* 7 events, T = 3: 2 per frame, the 7th (the remainder) in the last frame */
    snn_event e[7] = {EV(0, 0, 0, 0), EV(5, 1, 0, 1), EV(9, 2, 1, 0), EV(10, 2, 1, 0),
                      EV(20, 3, 2, 1), EV(21, 3, 2, 1), EV(22, 0, 3, 0)};
    snn_event_frames f = {.frames = 3, .split_by = SNN_SPLIT_BY_NUMBER, .downsample = 1};
    uint8_t fr[3 * 2 * 4 * 4];
    snn_events_to_frames(fr, e, 7, 4, 4, &f);
    int total = 0;
    for (size_t i = 0; i < sizeof fr; i++) total += fr[i];
    CHECK(total == 7);
    CHECK(frame_at(fr, 4, 4, 0, 0, 0, 0) == 1 && frame_at(fr, 4, 4, 0, 1, 0, 1) == 1);
    CHECK(frame_at(fr, 4, 4, 1, 0, 1, 2) == 2);
    CHECK(frame_at(fr, 4, 4, 2, 1, 2, 3) == 2 && frame_at(fr, 4, 4, 2, 0, 3, 0) == 1);
    /* fewer events than frames: all in the last frame */
    snn_events_to_frames(fr, e, 2, 4, 4, &f);
    CHECK(frame_at(fr, 4, 4, 2, 0, 0, 0) == 1 && frame_at(fr, 4, 4, 2, 1, 0, 1) == 1);
    CHECK(frame_at(fr, 4, 4, 0, 0, 0, 0) == 0);
}

static void test_frames_by_time(void)
{
    /* t in [100, 110], T = 3: windows of floor(10 / 3) = 3 us: [100,103) [103,106) [106,110] */
    snn_event e[6] = {EV(100, 0, 0, 1), EV(102, 0, 0, 1), EV(103, 1, 1, 0),
                      EV(105, 1, 1, 0), EV(106, 2, 2, 1), EV(110, 3, 3, 0)};
    snn_event_frames f = {.frames = 3, .split_by = SNN_SPLIT_BY_TIME, .downsample = 1};
    uint8_t fr[3 * 2 * 4 * 4];
    snn_events_to_frames(fr, e, 6, 4, 4, &f);
    CHECK(frame_at(fr, 4, 4, 0, 1, 0, 0) == 2);
    CHECK(frame_at(fr, 4, 4, 1, 0, 1, 1) == 2);
    CHECK(frame_at(fr, 4, 4, 2, 1, 2, 2) == 1 && frame_at(fr, 4, 4, 2, 0, 3, 3) == 1);
    /* downsample by 2 (4x4 -> 2x2): pixels (0,0) (1,1) share block (0,0) */
    f.downsample = 2;
    uint8_t small[3 * 2 * 2 * 2];
    snn_events_to_frames(small, e, 6, 4, 4, &f);
    CHECK(frame_at(small, 2, 2, 0, 1, 0, 0) == 2 && frame_at(small, 2, 2, 1, 0, 0, 0) == 2);
    CHECK(frame_at(small, 2, 2, 2, 1, 1, 1) == 1 && frame_at(small, 2, 2, 2, 0, 1, 1) == 1);
    /* saturation at 255 */
    snn_event many[300];
    for (int i = 0; i < 300; i++) many[i] = EV(i, 1, 1, 1);
    f.frames = 1;
    f.downsample = 1;
    uint8_t one[2 * 4 * 4];
    snn_events_to_frames(one, many, 300, 4, 4, &f);
    CHECK(frame_at(one, 4, 4, 0, 1, 1, 1) == 255);
}

/* ---- N-MNIST --------------------------------------------------------------------------------- */

static void test_nmnist_codec(void)
{
    snn_event e[3] = {EV(0, 0, 0, 0), EV(0x7FFFFF, 33, 12, 1), EV(0x12345, 5, 33, 0)};
    uint8_t bytes[15];
    snn_nmnist_encode(bytes, e, 3);
    CHECK(bytes[5] == 33 && bytes[6] == 12 && bytes[7] == 0xFF && bytes[8] == 0xFF && bytes[9] == 0xFF);
    snn_event_list l = {0};
    CHECK_OK(snn_nmnist_decode(bytes, 15, "x.bin", &l));
    CHECK(l.count == 3 && l.items[1].t == 0x7FFFFF && l.items[1].p == 1 && l.items[2].t == 0x12345);
    l.count = 0;
    CHECK(snn_nmnist_decode(bytes, 14, "x.bin", &l) == SNN_ERR_FORMAT && message_has("x.bin") &&
          message_has("multiple of 5"));
    bytes[10] = 34; /* x off the 34 x 34 sensor */
    CHECK(snn_nmnist_decode(bytes, 15, "x.bin", &l) == SNN_ERR_FORMAT && message_has("34"));
    snn_event_list_free(&l);
}

/* Three samples: (digit 3: 4 events), (digit 1: 2 events), (digit 3: 1 event). */
static const snn_event nm_events[7] = {EV(10, 1, 2, 1), EV(20, 1, 2, 1), EV(30, 33, 33, 0),
                                       EV(40, 0, 0, 0), EV(5, 7, 8, 1), EV(6, 7, 8, 0),
                                       EV(99, 4, 4, 1)};
static const int64_t nm_offsets[4] = {0, 4, 6, 7};
static const uint8_t nm_labels[3] = {3, 1, 3};

static void check_nmnist_set(const snn_dataset *ds)
{
    CHECK(ds->count == 3 && ds->time_steps == 2 && ds->channels == 2 && ds->height == 34 &&
          ds->width == 34 && ds->classes == 10);
    if (ds->count != 3) return;
    /* sorted by file name: 00000.bin (3), 00001.bin (1), 00002.bin (3) */
    CHECK(ds->labels[0] == 3 && ds->labels[1] == 1 && ds->labels[2] == 3);
    const int64_t bytes = snn_dataset_image_bytes(ds);
    const uint8_t *s0 = ds->images, *s1 = ds->images + bytes, *s2 = ds->images + 2 * bytes;
    /* by number, T = 2: sample 0 (4 events) -> 2 + 2 */
    CHECK(frame_at(s0, 34, 34, 0, 1, 2, 1) == 2);
    CHECK(frame_at(s0, 34, 34, 1, 0, 33, 33) == 1 && frame_at(s0, 34, 34, 1, 0, 0, 0) == 1);
    CHECK(frame_at(s1, 34, 34, 0, 1, 8, 7) == 1 && frame_at(s1, 34, 34, 1, 0, 8, 7) == 1);
    CHECK(frame_at(s2, 34, 34, 1, 1, 4, 4) == 1); /* 1 event < T: the last frame */
    int total = 0;
    for (int64_t i = 0; i < 3 * bytes; i++) total += ds->images[i];
    CHECK(total == 7);
}

static void test_nmnist_zip_and_folder(void)
{
    char path[1024];
    CHECK_OK(snn_nmnist_write_zip(tmp_path(path, dir, "Train.zip"), "Train", nm_events,
                                  nm_offsets, nm_labels, 3));
    snn_event_frames f = {.frames = 2, .split_by = SNN_SPLIT_BY_NUMBER, .downsample = 1};
    snn_dataset ds;
    CHECK_OK(snn_event_dataset_load("nmnist", dir, SNN_SPLIT_TRAIN, &f, &ds));
    check_nmnist_set(&ds);
    snn_dataset_free(&ds);
    /* the zip itself as the path */
    CHECK_OK(snn_event_dataset_load("nmnist", path, SNN_SPLIT_TRAIN, &f, &ds));
    CHECK(ds.count == 3);
    snn_dataset_free(&ds);
    /* no Test.zip: an I/O error naming what was expected */
    CHECK(snn_event_dataset_load("nmnist", dir, SNN_SPLIT_TEST, &f, &ds) == SNN_ERR_IO &&
          message_has("Test.zip") && dataset_is_empty(&ds));

    /* the extracted folders give the same set */
    char folder[256], sub[512];
    snprintf(folder, sizeof folder, "%s/ex", dir);
    mkdir(folder, 0755);
    snprintf(sub, sizeof sub, "%s/Train", folder);
    mkdir(sub, 0755);
    for (int i = 0; i < 3; i++) {
        char d[600], file[700];
        snprintf(d, sizeof d, "%s/%d", sub, nm_labels[i]);
        mkdir(d, 0755);
        snprintf(file, sizeof file, "%s/%05d.bin", d, i);
        uint8_t bytes[40];
        snn_nmnist_encode(bytes, nm_events + nm_offsets[i], nm_offsets[i + 1] - nm_offsets[i]);
        write_bytes(file, bytes, (size_t)(5 * (nm_offsets[i + 1] - nm_offsets[i])));
    }
    CHECK_OK(snn_event_dataset_load("nmnist", folder, SNN_SPLIT_TRAIN, &f, &ds));
    check_nmnist_set(&ds);
    snn_dataset_free(&ds);
    /* a .bin whose size is not a multiple of 5: the file is named, nothing is held */
    char bad[700];
    snprintf(bad, sizeof bad, "%s/1/00009.bin", sub);
    write_bytes(bad, "abcdefg", 7);
    CHECK(snn_event_dataset_load("nmnist", folder, SNN_SPLIT_TRAIN, &f, &ds) == SNN_ERR_FORMAT &&
          message_has("00009.bin") && dataset_is_empty(&ds));
}

static void test_zip_corruption(void)
{
    char path[1024];
    CHECK_OK(snn_nmnist_write_zip(tmp_path(path, dir, "c.zip"), "Test", nm_events, nm_offsets,
                                  nm_labels, 3));
    size_t n;
    unsigned char *bytes = read_bytes(path, &n);
    snn_event_frames f = snn_event_frames_default();
    snn_zip z;
    snn_dataset ds;
    CHECK_OK(snn_zip_open_memory(&z, bytes, n, "mem.zip"));
    CHECK(z.count == 3);
    CHECK_OK(snn_nmnist_read_zip(&z, SNN_SPLIT_TEST, &f, &ds));
    CHECK(ds.count == 3 && ds.time_steps == 10);
    snn_dataset_free(&ds);
    CHECK(snn_nmnist_read_zip(&z, SNN_SPLIT_TRAIN, &f, &ds) == SNN_ERR_FORMAT &&
          message_has("Train/<digit>") && dataset_is_empty(&ds));
    snn_zip_close(&z);
    /* a flipped byte in the first member's data: CRC-32 or inflate catches it */
    bytes[50] ^= 0x55; /* local header 30 + name 16: byte 50 is compressed data */
    CHECK_OK(snn_zip_open_memory(&z, bytes, n, "mem.zip"));
    CHECK(snn_nmnist_read_zip(&z, SNN_SPLIT_TEST, &f, &ds) == SNN_ERR_FORMAT &&
          message_has("mem.zip") && dataset_is_empty(&ds));
    snn_zip_close(&z);
    /* truncated: no end record */
    CHECK(snn_zip_open_memory(&z, bytes, n - 30, "cut.zip") == SNN_ERR_FORMAT &&
          message_has("cut.zip"));
    free(bytes);
}

/* ---- AEDAT 3.1 / DVS Gesture ------------------------------------------------------------------ */

static void put_le32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* An AEDAT 3.1 file: header, then one polarity packet with the events (all valid) and one
 * packet of another type that must be skipped. Returns the size; buf must be large enough. */
static size_t make_aedat3(uint8_t *buf, const snn_event *e, int n, uint32_t overflow)
{
    const char *header = "#!AER-DAT3.1\r\n#Format: RAW\r\n#!END-HEADER\r\n";
    size_t at = strlen(header);
    memcpy(buf, header, at);
    uint8_t *h = buf + at;
    memset(h, 0, 28);
    h[0] = 1; /* polarity */
    put_le32(h + 4, 8);
    put_le32(h + 12, overflow);
    put_le32(h + 16, (uint32_t)n);
    put_le32(h + 20, (uint32_t)n);
    put_le32(h + 24, (uint32_t)n);
    at += 28;
    for (int i = 0; i < n; i++) {
        uint32_t word = 1u | (uint32_t)e[i].p << 1 | (uint32_t)e[i].y << 2 | (uint32_t)e[i].x << 17;
        put_le32(buf + at, word);
        put_le32(buf + at + 4, (uint32_t)(e[i].t & 0x7FFFFFFF));
        at += 8;
    }
    /* a special-event packet (type 0) of 2 x 8 bytes */
    h = buf + at;
    memset(h, 0, 28 + 16);
    put_le32(h + 4, 8);
    put_le32(h + 16, 2);
    put_le32(h + 20, 2);
    return at + 28 + 16;
}

static const snn_event g_events[6] = {EV(1000, 10, 20, 1), EV(1500, 10, 20, 1),
                                      EV(2000, 127, 0, 0), EV(5000, 0, 127, 1),
                                      EV(5100, 64, 64, 0), EV(9000, 1, 1, 1)};
static const char g_labels_csv[] = "class,startTime_usec,endTime_usec\r\n3,1000,2001\r\n11,5000,6000\r\n";

static void check_gesture_set(const snn_dataset *ds)
{
    /* 2 gestures: class 3 -> label 2 (3 events), class 11 -> label 10 (2 events); 9000 in none */
    CHECK(ds->count == 2 && ds->height == 64 && ds->width == 64 && ds->classes == 11);
    if (ds->count != 2) return;
    CHECK(ds->labels[0] == 2 && ds->labels[1] == 10);
    const int64_t bytes = snn_dataset_image_bytes(ds);
    const uint8_t *s0 = ds->images, *s1 = ds->images + bytes;
    /* downsample 2, T = 1 */
    CHECK(frame_at(s0, 64, 64, 0, 1, 10, 5) == 2 && frame_at(s0, 64, 64, 0, 0, 0, 63) == 1);
    CHECK(frame_at(s1, 64, 64, 0, 1, 63, 0) == 1 && frame_at(s1, 64, 64, 0, 0, 32, 32) == 1);
    int total = 0;
    for (int64_t i = 0; i < 2 * bytes; i++) total += ds->images[i];
    CHECK(total == 5);
}

static void test_dvs_gesture(void)
{
    uint8_t rec[512];
    size_t rec_size = make_aedat3(rec, g_events, 6, 0);
    snn_event_list l = {0};
    CHECK_OK(snn_aedat3_decode(rec, rec_size, "r.aedat", 128, 128, &l));
    CHECK(l.count == 6 && l.items[2].x == 127 && l.items[3].y == 127 && l.items[5].t == 9000);
    snn_event_list_free(&l);
    uint8_t rec2[512];
    size_t rec2_size = make_aedat3(rec2, g_events, 1, 2); /* overflow 2: t = 2 << 31 | 1000 */
    CHECK_OK(snn_aedat3_decode(rec2, rec2_size, "r.aedat", 128, 128, &l));
    CHECK(l.count == 1 && l.items[0].t == ((int64_t)2 << 31 | 1000));
    snn_event_list_free(&l);
    CHECK(snn_aedat3_decode(rec, rec_size - 3, "r.aedat", 128, 128, &l) == SNN_ERR_FORMAT &&
          message_has("r.aedat"));
    snn_event_list_free(&l);
    CHECK(snn_aedat3_decode((const uint8_t *)"#!AER-DAT2.0\r\n", 14, "v2.aedat", 128, 128, &l) ==
              SNN_ERR_FORMAT && message_has("AEDAT 3.1"));

    /* the archive as distributed: DvsGesture/ with recordings, labels and split lists */
    char path[1024];
    snn_tar_writer w;
    CHECK_OK(snn_tar_writer_open(&w, tmp_path(path, dir, "DvsGesture.tar.gz")));
    CHECK_OK(snn_tar_writer_dir(&w, "DvsGesture/"));
    CHECK_OK(snn_tar_writer_file(&w, "DvsGesture/trials_to_test.txt", "user24_led.aedat\n", 17));
    CHECK_OK(snn_tar_writer_file(&w, "DvsGesture/trials_to_train.txt", "user01_led.aedat\r\n", 18));
    CHECK_OK(snn_tar_writer_file(&w, "DvsGesture/user01_led.aedat", rec, rec_size));
    CHECK_OK(snn_tar_writer_file(&w, "DvsGesture/user01_led_labels.csv", g_labels_csv,
                                 strlen(g_labels_csv)));
    CHECK_OK(snn_tar_writer_close(&w));
    snn_event_frames f = {.frames = 1, .split_by = SNN_SPLIT_BY_TIME, .downsample = 2};
    snn_dataset ds;
    CHECK_OK(snn_event_dataset_load("dvs-gesture", dir, SNN_SPLIT_TRAIN, &f, &ds));
    check_gesture_set(&ds);
    snn_dataset_free(&ds);
    /* the test list names a recording the archive lacks */
    CHECK(snn_event_dataset_load("dvs-gesture", path, SNN_SPLIT_TEST, &f, &ds) == SNN_ERR_FORMAT &&
          message_has("user24_led") && dataset_is_empty(&ds));

    /* the extracted folder */
    char folder[256], file[512];
    snprintf(folder, sizeof folder, "%s/g", dir);
    mkdir(folder, 0755);
    snprintf(file, sizeof file, "%s/DvsGesture", folder);
    mkdir(file, 0755);
    snprintf(file, sizeof file, "%s/DvsGesture/trials_to_train.txt", folder);
    write_bytes(file, "user01_led.aedat\n", 17);
    snprintf(file, sizeof file, "%s/DvsGesture/user01_led.aedat", folder);
    write_bytes(file, rec, rec_size);
    CHECK(snn_event_dataset_load("dvs-gesture", folder, SNN_SPLIT_TRAIN, &f, &ds) == SNN_ERR_IO &&
          message_has("user01_led_labels.csv") && dataset_is_empty(&ds));
    snprintf(file, sizeof file, "%s/DvsGesture/user01_led_labels.csv", folder);
    write_bytes(file, g_labels_csv, strlen(g_labels_csv));
    CHECK_OK(snn_event_dataset_load("dvs-gesture", folder, SNN_SPLIT_TRAIN, &f, &ds));
    check_gesture_set(&ds);
    snn_dataset_free(&ds);
    /* a bad label line is named */
    write_bytes(file, "class,a,b\n12,1,2\n", 17);
    CHECK(snn_event_dataset_load("dvs-gesture", folder, SNN_SPLIT_TRAIN, &f, &ds) ==
              SNN_ERR_FORMAT && message_has("line 2") && dataset_is_empty(&ds));
}

/* ---- AEDAT 2.0 / CIFAR10-DVS ------------------------------------------------------------------- */

static void put_be32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (24 - 8 * i));
}

/* A DVS128 AEDAT 2.0 recording: events given as raw (column, row, polarity bit). */
static size_t make_aedat2(uint8_t *buf, const int (*raw)[3], int n)
{
    const char *header = "#!AER-DAT2.0\r\n# This is a raw AE data file\r\n";
    size_t at = strlen(header);
    memcpy(buf, header, at);
    for (int i = 0; i < n; i++) {
        put_be32(buf + at, (uint32_t)(raw[i][1] << 8 | raw[i][0] << 1 | raw[i][2]));
        put_be32(buf + at + 4, (uint32_t)(100 * i));
        at += 8;
    }
    return at;
}

static void test_cifar10_dvs(void)
{
    /* column 5, row 9, bit 1 -> x = 127 - 9, y = 127 - 5, p = 0 */
    const int raw[2][3] = {{5, 9, 1}, {0, 127, 0}};
    uint8_t rec[256];
    size_t size = make_aedat2(rec, raw, 2);
    snn_event_list l = {0};
    CHECK_OK(snn_aedat2_decode(rec, size, "c.aedat", &l));
    CHECK(l.count == 2 && l.items[0].x == 118 && l.items[0].y == 122 && l.items[0].p == 0);
    CHECK(l.items[1].x == 0 && l.items[1].y == 127 && l.items[1].p == 1 && l.items[1].t == 100);
    snn_event_list_free(&l);
    CHECK(snn_aedat2_decode(rec, size - 1, "c.aedat", &l) == SNN_ERR_FORMAT &&
          message_has("multiple of 8"));
    snn_event_list_free(&l);

    /* 10 class zips of 2 recordings each (numbers 1 and 10: natural order, not text order) */
    const char *classes[10] = {"airplane", "automobile", "bird", "cat", "deer",
                               "dog", "frog", "horse", "ship", "truck"};
    char folder[256];
    snprintf(folder, sizeof folder, "%s/c10dvs", dir);
    mkdir(folder, 0755);
    for (int c = 0; c < 10; c++) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s.zip", folder, classes[c]);
        snn_zip_writer w;
        CHECK_OK(snn_zip_writer_open(&w, path));
        for (int k = 0; k < 2; k++) {
            int number = k ? 1 : 10;
            const int one[1][3] = {{c, number, 0}};
            uint8_t buf[128];
            size_t n = make_aedat2(buf, one, 1);
            char name[96];
            snprintf(name, sizeof name, "%s/cifar10_%s_%d.aedat", classes[c], classes[c], number);
            CHECK_OK(snn_zip_writer_add(&w, name, buf, n));
        }
        CHECK_OK(snn_zip_writer_close(&w));
    }
    snn_event_frames f = {.frames = 1, .split_by = SNN_SPLIT_BY_NUMBER, .downsample = 1};
    snn_dataset train, test;
    CHECK_OK(snn_event_dataset_load("cifar10-dvs", folder, SNN_SPLIT_TRAIN, &f, &train));
    CHECK_OK(snn_event_dataset_load("cifar10-dvs", folder, SNN_SPLIT_TEST, &f, &test));
    /* per class 2 * 9 / 10 = 1 train (recording 1), 1 test (recording 10) */
    CHECK(train.count == 10 && test.count == 10);
    for (int c = 0; c < 10 && train.count == 10 && test.count == 10; c++) {
        CHECK(train.labels[c] == c && test.labels[c] == c);
        const int64_t bytes = snn_dataset_image_bytes(&train);
        /* raw column c, row 1 (train) or 10 (test), bit 0 -> x = 127 - row, y = 127 - c, p 1 */
        CHECK(frame_at(train.images + c * bytes, 128, 128, 0, 1, 127 - c, 126) == 1);
        CHECK(frame_at(test.images + c * bytes, 128, 128, 0, 1, 127 - c, 117) == 1);
    }
    snn_dataset_free(&train);
    snn_dataset_free(&test);
    /* a missing class is named */
    char gone[512];
    snprintf(gone, sizeof gone, "%s/truck.zip", folder);
    remove(gone);
    CHECK(snn_event_dataset_load("cifar10-dvs", folder, SNN_SPLIT_TRAIN, &f, &train) ==
              SNN_ERR_IO && message_has("truck.zip") && dataset_is_empty(&train));
}

/* ---- the loader ---------------------------------------------------------------------------- */

static void test_loader_time_major(void)
{
    char path[1024];
    CHECK_OK(snn_nmnist_write_zip(tmp_path(path, dir, "Train.zip"), "Train", nm_events,
                                  nm_offsets, nm_labels, 3));
    snn_dataset ds;
    snn_event_frames f = {.frames = 2, .split_by = SNN_SPLIT_BY_NUMBER, .downsample = 1};
    CHECK_OK(snn_dataset_load_frames("nmnist", dir, SNN_SPLIT_TRAIN, &f, &ds));
    snn_loader_config cfg = snn_loader_config_default();
    cfg.batch_size = 2;
    cfg.shuffle = false;
    cfg.prefetch = false;
    snn_dataset_default_norm(&ds, cfg.mean, cfg.std); /* x = the event count */
    snn_loader *loader = snn_loader_new(&ds, &cfg);
    snn_batch b;
    CHECK(loader && snn_loader_next(loader, &b));
    CHECK(b.time_steps == 2 && b.count == 2 && b.channels == 2);
    /* (T, N, C, H, W): [t][n=0] is sample 0 (4 events): frame 0 has 2 ON events at (y 2, x 1),
     * frame 1 an OFF event at (33, 33); [t=1][n=1] is sample 1's OFF event at (8, 7) */
    const int64_t plane = 34 * 34, frame = 2 * plane;
    CHECK_CLOSE(b.images[(0 * 2 + 0) * frame + 1 * plane + 2 * 34 + 1], 2.0, 1e-5, 0);
    CHECK_CLOSE(b.images[(1 * 2 + 0) * frame + 0 * plane + 33 * 34 + 33], 1.0, 1e-5, 0);
    CHECK_CLOSE(b.images[(1 * 2 + 1) * frame + 0 * plane + 8 * 34 + 7], 1.0, 1e-5, 0);
    snn_step_begin();
    snn_tensor *x, *y;
    CHECK_OK(snn_batch_to_device(&b, SNN_CPU, &x, &y));
    CHECK(x && x->shape.ndim == 5 && x->shape.dim[0] == 2 && x->shape.dim[1] == 2);
    snn_step_end();
    snn_loader_free(loader);
    snn_dataset_free(&ds);
}

int main(void)
{
    tmp_dir_make(dir);
    RUN(test_frames_by_number);
    RUN(test_frames_by_time);
    RUN(test_nmnist_codec);
    RUN(test_nmnist_zip_and_folder);
    RUN(test_zip_corruption);
    RUN(test_dvs_gesture);
    RUN(test_cifar10_dvs);
    RUN(test_loader_time_major);
    tmp_dir_remove(dir);
    return test_finish();
}
