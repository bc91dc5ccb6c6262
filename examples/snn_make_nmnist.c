/*
 * snn_make_nmnist.c - snn-make-nmnist: turns Fashion-MNIST into an N-MNIST-format event data
 * set, so the event readers, the frame integration and a spiking network trained on events can
 * be run end to end here, where no DVS recording is reachable.
 *
 * N-MNIST was made by filming MNIST digits on a monitor with an event camera that moved in
 * three quick saccades (Orchard et al. 2015). This program fakes that camera:
 *   - each 28 x 28 image sits on a 34 x 34 sensor and is moved along a triangle of three
 *     saccades, A (1, 1) -> B (5, 3) -> C (1, 5) -> A, each saccade 10 steps of 10 ms (300 ms
 *     in all, like N-MNIST), the image drawn at sub-pixel offsets by bilinear interpolation;
 *   - each pixel behaves as a DVS pixel: it remembers the intensity at its last event and
 *     emits an ON event each time the intensity (in [0, 1]) has risen by the contrast threshold
 *     C = 0.15 since then, an OFF event each time it has fallen by C (its memory moves by C per
 *     event); the first view sets the memories and emits nothing;
 *   - the events of a step carry that step's time plus the pixel's rank within the step
 *     (microseconds), so time stamps are distinct and increasing.
 * The output has N-MNIST's layout and format (data/event_nmnist.c): OUT/Train.zip holding
 * Train/<label>/<index>.bin and OUT/Test.zip holding Test/<label>/<index>.bin.
 *
 *     snn-make-nmnist [-i FASHION_MNIST_DIR] [-o OUT_DIR] [--limit-train N] [--limit-test N]
 *     snn-make-nmnist -o runs/fm-events && snn-train --dataset nmnist --data runs/fm-events
 *
 * The whole of Fashion-MNIST makes about 870 MB of zips (70,000 samples of about 3,700 events)
 * and holds a split's events in memory while it writes (16 bytes an event: about 3.6 GB for
 * the training split). Before it writes anything it says how much, estimated from the events
 * of the first images; --limit-train and --limit-test make less. OUT_DIR defaults to
 * runs/fm-nmnist (runs/ made if needed).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "data/data.h"
#include "tensor/tensor.h"

#define SIDE 34
#define STEPS_PER_SACCADE 10
#define STEP_US 10000
#define CONTRAST 0.15f

/* image (28 x 28 bytes) drawn at offset (ox, oy) on the sensor, bilinear: out (34 x 34) */
static void render(float *out, const uint8_t *image, int h, int w, float ox, float oy)
{
    for (int y = 0; y < SIDE; y++) {
        for (int x = 0; x < SIDE; x++) {
            /* sensor pixel (x, y) sees image point (x - ox, y - oy) */
            float u = (float)x - ox, v = (float)y - oy;
            int u0 = (int)floorf(u), v0 = (int)floorf(v);
            float fu = u - (float)u0, fv = v - (float)v0, sum = 0.0f;
            for (int dy = 0; dy < 2; dy++) {
                for (int dx = 0; dx < 2; dx++) {
                    int iu = u0 + dx, iv = v0 + dy;
                    if (iu < 0 || iv < 0 || iu >= w || iv >= h) continue;
                    float weight = (dx ? fu : 1.0f - fu) * (dy ? fv : 1.0f - fv);
                    sum += weight * (float)image[iv * w + iu] / 255.0f;
                }
            }
            out[y * SIDE + x] = sum;
        }
    }
}

typedef struct event_buffer {
    snn_event *items;
    int64_t count, capacity;
} event_buffer;

static int push(event_buffer *b, snn_event e)
{
    if (b->count == b->capacity) {
        int64_t grown = b->capacity ? 2 * b->capacity : 1 << 16;
        snn_event *items = realloc(b->items, (size_t)grown * sizeof *items);
        if (!items) return 1;
        b->items = items;
        b->capacity = grown;
    }
    b->items[b->count++] = e;
    return 0;
}

/* The events of one image, appended to b. */
static int saccades(event_buffer *b, const uint8_t *image, int h, int w)
{
    static const float path[4][2] = {{1, 1}, {5, 3}, {1, 5}, {1, 1}};
    float memory[SIDE * SIDE], now[SIDE * SIDE];
    render(memory, image, h, w, path[0][0], path[0][1]);
    int64_t step = 0;
    for (int leg = 0; leg < 3; leg++) {
        for (int s = 1; s <= STEPS_PER_SACCADE; s++, step++) {
            float a = (float)s / STEPS_PER_SACCADE;
            float ox = path[leg][0] + a * (path[leg + 1][0] - path[leg][0]);
            float oy = path[leg][1] + a * (path[leg + 1][1] - path[leg][1]);
            render(now, image, h, w, ox, oy);
            int64_t rank = 0;
            for (int i = 0; i < SIDE * SIDE; i++) {
                while (now[i] - memory[i] >= CONTRAST || memory[i] - now[i] >= CONTRAST) {
                    uint8_t on = now[i] > memory[i];
                    memory[i] += on ? CONTRAST : -CONTRAST;
                    snn_event e = {.t = step * STEP_US + rank++, .x = (uint16_t)(i % SIDE),
                                   .y = (uint16_t)(i / SIDE), .p = on};
                    if (rank >= STEP_US || push(b, e)) return 1;
                }
            }
        }
    }
    return 0;
}

static int convert(const snn_dataset *ds, int64_t limit, const char *path, const char *folder)
{
    int64_t n = limit > 0 && limit < ds->count ? limit : ds->count;
    event_buffer b = {0};
    int64_t *offsets = malloc((size_t)(n + 1) * sizeof *offsets);
    if (!offsets) return 1;
    offsets[0] = 0;
    for (int64_t i = 0; i < n; i++) {
        if (saccades(&b, ds->images + i * ds->height * ds->width, ds->height, ds->width)) {
            fprintf(stderr, "snn-make-nmnist: out of memory at image %lld\n", (long long)i);
            free(b.items);
            free(offsets);
            return 1;
        }
        offsets[i + 1] = b.count;
    }
    int rc = 0;
    if (snn_nmnist_write_zip(path, folder, b.items, offsets, ds->labels, n) != SNN_OK) {
        fprintf(stderr, "snn-make-nmnist: %s\n", snn_last_error());
        rc = 1;
    } else {
        printf("wrote %s: %lld samples, %.0f events per sample on average\n", path, (long long)n,
               n ? (double)b.count / (double)n : 0.0);
    }
    free(b.items);
    free(offsets);
    return rc;
}

static void usage(FILE *out)
{
    fprintf(out, "usage: snn-make-nmnist [-i FASHION_MNIST_DIR] [-o OUT_DIR] [--limit-train N] "
                 "[--limit-test N]\n"
                 "Turns Fashion-MNIST into an N-MNIST-format event set: OUT_DIR/Train.zip and "
                 "OUT_DIR/Test.zip\n(default OUT_DIR: runs/fm-nmnist; limits 0: all images). All "
                 "of it is about 870 MB;\n--limit-train N and --limit-test N write fewer "
                 "samples.\n");
}

/* The samples a split writes under `limit` (0: all of them). */
static int64_t samples_of(const snn_dataset *ds, long limit)
{
    return limit > 0 && limit < ds->count ? limit : ds->count;
}

/* Says what the run will write before it writes: the events per sample of the first (up to
 * 100) training images, times the samples. On disk each event takes N-MNIST's 5 bytes, which
 * the zip's deflate brings to about two thirds (Fashion-MNIST: 12.3 kB a sample); in memory,
 * a split's events take sizeof(snn_event) each until its zip is written. */
static int announce(const snn_dataset *split[2], const long limit[2], const char *output)
{
    const int64_t n[2] = {samples_of(split[0], limit[0]), samples_of(split[1], limit[1])};
    const int64_t probe = split[0]->count < 100 ? split[0]->count : 100;
    event_buffer b = {0};
    for (int64_t i = 0; i < probe; i++) {
        const int64_t plane = (int64_t)split[0]->height * split[0]->width;
        if (saccades(&b, split[0]->images + i * plane, split[0]->height, split[0]->width)) {
            free(b.items);
            fprintf(stderr, "snn-make-nmnist: out of memory\n");
            return 1;
        }
    }
    free(b.items);
    const double per_sample = probe ? (double)b.count / (double)probe : 0.0;
    const double disk = (double)(n[0] + n[1]) * per_sample * 5.0 * (2.0 / 3.0);
    const double memory = (double)(n[0] > n[1] ? n[0] : n[1]) * per_sample * sizeof(snn_event);
    printf("snn-make-nmnist: %lld training and %lld test samples of about %.0f events each: "
           "about %.0f MB\nof zips in %s/, and up to %.1f GB of memory while a split is "
           "written%s\n", (long long)n[0], (long long)n[1], per_sample, disk / 1e6, output,
           memory / 1e9, limit[0] > 0 || limit[1] > 0 ? ""
               : " (--limit-train N and --limit-test N write fewer)");
    fflush(stdout);
    return 0;
}

int main(int argc, char **argv)
{
    const char *input = NULL, *output = NULL; /* default runs/fm-nmnist */
    long limit[2] = {0, 0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return 0;
        }
        if (i + 1 >= argc) {
            usage(stderr);
            return 2;
        }
        if (strcmp(a, "-i") == 0) input = argv[++i];
        else if (strcmp(a, "-o") == 0) output = argv[++i];
        else if (strcmp(a, "--limit-train") == 0) limit[0] = strtol(argv[++i], NULL, 10);
        else if (strcmp(a, "--limit-test") == 0) limit[1] = strtol(argv[++i], NULL, 10);
        else {
            usage(stderr);
            return 2;
        }
    }
    /* both splits first: what they will write is said before anything is */
    snn_dataset ds[2];
    int loaded = 0, rc = 0;
    for (; loaded < 2; loaded++) {
        if (snn_dataset_load("fashion-mnist", input, loaded ? SNN_SPLIT_TEST : SNN_SPLIT_TRAIN,
                             &ds[loaded]) != SNN_OK) {
            fprintf(stderr, "snn-make-nmnist: %s\n", snn_last_error());
            rc = 1;
            break;
        }
        if (ds[loaded].height + 6 > SIDE || ds[loaded].width + 6 > SIDE ||
            ds[loaded].channels != 1) {
            fprintf(stderr, "snn-make-nmnist: expected 1 x 28 x 28 images, got %d x %d x %d\n",
                    ds[loaded].channels, ds[loaded].height, ds[loaded].width);
            snn_dataset_free(&ds[loaded]);
            rc = 1;
            break;
        }
    }
    if (rc == 0 && !output) {
        output = "runs/fm-nmnist";
        if (mkdir("runs", 0755) != 0 && errno != EEXIST) {
            fprintf(stderr, "snn-make-nmnist: cannot create folder 'runs': %s\n", strerror(errno));
            rc = 1;
        }
    }
    if (rc == 0 && mkdir(output, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "snn-make-nmnist: cannot create folder '%s': %s\n", output,
                strerror(errno));
        rc = 1;
    }
    const snn_dataset *splits[2] = {&ds[0], &ds[1]};
    if (rc == 0) rc = announce(splits, limit, output);
    for (int s = 0; s < 2 && rc == 0; s++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", output, s ? "Test.zip" : "Train.zip");
        rc = convert(&ds[s], limit[s], path, s ? "Test" : "Train");
    }
    for (int s = 0; s < loaded; s++) snn_dataset_free(&ds[s]);
    snn_shutdown();
    return rc;
}
