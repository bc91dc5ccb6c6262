/*
 * test_data_loader.c - the batch loader: the shuffle is a permutation and reproducible from the
 * seed, drop_last, normalisation values, crop and flip on a tiny image and on a 28x28 one
 * (padding 2, the Fashion-MNIST recipe) against hand-worked values, prefetch giving bit-identical batches to the synchronous path, resume by seek, batches
 * to tensors, bad configs and allocation failures.
 *
 *     ctest -R data_loader --output-on-failure
 */
#define _XOPEN_SOURCE 700
#include "test.h"
#include "test_data_util.h"

#include <math.h>

#include "data/data_internal.h"

/* A set whose image i has every pixel = i (so a batch tells which samples it holds). */
static snn_dataset make_indexed(int64_t n, int channels, int height, int width)
{
    snn_dataset ds;
    CHECK_OK(snn_dataset_alloc(&ds, "indexed", n, channels, height, width, 10));
    int64_t bytes = snn_dataset_image_bytes(&ds);
    for (int64_t i = 0; i < n; i++) {
        memset(ds.images + i * bytes, (int)(i % 256), (size_t)bytes);
        ds.labels[i] = (uint8_t)(i % 10);
    }
    return ds;
}

/* Sample index of image k of a batch (pixel / 255 with mean 0, std 1). */
static int sample_of(const snn_batch *b, int k)
{
    size_t floats = (size_t)b->channels * (size_t)b->height * (size_t)b->width;
    return (int)lroundf(b->images[(size_t)k * floats] * 255.0f);
}

static void test_shuffle_is_permutation(void)
{
    enum { N = 103, B = 16 };
    snn_dataset ds = make_indexed(N, 1, 2, 3);
    snn_loader_config cfg = snn_loader_config_default();
    cfg.batch_size = B;
    cfg.seed = 7;
    snn_loader *l = snn_loader_new(&ds, &cfg);
    CHECK(l != NULL);
    if (!l) return;
    CHECK(snn_loader_num_batches(l) == (N + B - 1) / B);
    int order[2][N];
    for (int epoch = 0; epoch < 2; epoch++) {
        int seen[N] = {0}, at = 0, batches = 0;
        snn_batch b;
        while (snn_loader_next(l, &b)) {
            CHECK(b.epoch == epoch && b.index == batches);
            CHECK(b.count == (batches < N / B ? B : N % B));
            for (int k = 0; k < b.count; k++) {
                int i = sample_of(&b, k);
                CHECK(i >= 0 && i < N);
                if (i >= 0 && i < N) seen[i]++;
                if (at < N) order[epoch][at++] = i;
                CHECK(b.labels[k] == (float)(i % 10)); /* labels follow their images */
            }
            batches++;
        }
        CHECK(b.count == 0);
        CHECK(batches == (N + B - 1) / B);
        for (int i = 0; i < N; i++) CHECK(seen[i] == 1);
    }
    /* Shuffled (not the identity) and different in each epoch. */
    int identity = 1, same = 1;
    for (int i = 0; i < N; i++) {
        identity &= order[0][i] == i;
        same &= order[0][i] == order[1][i];
    }
    CHECK(!identity);
    CHECK(!same);
    snn_loader_free(l);

    /* The same seed gives the same order; another seed another. */
    for (int seed = 7; seed <= 8; seed++) {
        cfg.seed = (uint64_t)seed;
        l = snn_loader_new(&ds, &cfg);
        snn_batch b;
        int equal = 1, at = 0;
        while (snn_loader_next(l, &b))
            for (int k = 0; k < b.count; k++) equal &= sample_of(&b, k) == order[0][at++];
        CHECK(equal == (seed == 7));
        snn_loader_free(l);
    }

    /* No shuffle: the identity. */
    cfg.shuffle = false;
    l = snn_loader_new(&ds, &cfg);
    snn_batch b;
    int at = 0, in_order = 1;
    while (snn_loader_next(l, &b))
        for (int k = 0; k < b.count; k++) in_order &= sample_of(&b, k) == at++;
    CHECK(in_order && at == N);
    snn_loader_free(l);
    snn_dataset_free(&ds);
}

static void test_drop_last(void)
{
    enum { N = 103, B = 16 };
    snn_dataset ds = make_indexed(N, 1, 2, 2);
    snn_loader_config cfg = snn_loader_config_default();
    cfg.batch_size = B;
    cfg.drop_last = true;
    cfg.prefetch = false;
    snn_loader *l = snn_loader_new(&ds, &cfg);
    CHECK(snn_loader_num_batches(l) == N / B);
    snn_batch b;
    int batches = 0, samples = 0, seen[N] = {0};
    while (snn_loader_next(l, &b)) {
        CHECK(b.count == B);
        for (int k = 0; k < b.count; k++) seen[sample_of(&b, k)]++;
        batches++;
        samples += b.count;
    }
    CHECK(batches == N / B && samples == N / B * B);
    for (int i = 0; i < N; i++) CHECK(seen[i] <= 1);
    snn_loader_free(l);
    snn_dataset_free(&ds);
}

static void test_normalisation(void)
{
    /* 3 channels with different statistics; pixel values 0, 1, ..., chosen per channel. */
    snn_dataset ds;
    CHECK_OK(snn_dataset_alloc(&ds, "norm", 1, 3, 2, 2, 10));
    const uint8_t values[12] = {0, 255, 128, 7, 10, 20, 30, 40, 200, 100, 50, 25};
    memcpy(ds.images, values, sizeof values);
    ds.labels[0] = 3;
    snn_loader_config cfg = snn_loader_config_default();
    cfg.batch_size = 1;
    cfg.shuffle = false;
    const float mean[3] = {0.5f, 0.25f, 0.125f}, std[3] = {0.25f, 0.5f, 2.0f};
    for (int c = 0; c < 3; c++) {
        cfg.mean[c] = mean[c];
        cfg.std[c] = std[c];
    }
    snn_loader *l = snn_loader_new(&ds, &cfg);
    snn_batch b;
    CHECK(snn_loader_next(l, &b));
    CHECK(b.count == 1 && b.channels == 3 && b.height == 2 && b.width == 2);
    for (int i = 0; i < 12; i++) {
        int c = i / 4;
        double want = (values[i] / 255.0 - (double)mean[c]) / (double)std[c];
        CHECK_CLOSE(b.images[i], want, 1e-6, 1e-6);
    }
    CHECK(b.labels[0] == 3.0f);
    snn_loader_free(l);

    /* measure_norm on a set of known pixels: channel 0 holds {0, 255, 128, 7}. */
    float m[SNN_DATA_MAX_CHANNELS], s[SNN_DATA_MAX_CHANNELS];
    snn_dataset_measure_norm(&ds, m, s);
    double m0 = (0 + 255 + 128 + 7) / 4.0 / 255.0;
    double v0 = 0;
    for (int i = 0; i < 4; i++) v0 += (values[i] / 255.0 - m0) * (values[i] / 255.0 - m0) / 4;
    CHECK_CLOSE(m[0], m0, 1e-6, 0);
    CHECK_CLOSE(s[0], sqrt(v0), 1e-6, 0);
    snn_dataset_free(&ds);
}

/* Crop and flip of a 1 x 3 x 4 image with padding 1, worked by hand. */
static void test_crop_flip_by_hand(void)
{
    /* Image (values 1..12 so that 0 is the padding):
     *      1  2  3  4
     *      5  6  7  8
     *      9 10 11 12                                                          */
    uint8_t img[12];
    for (int i = 0; i < 12; i++) img[i] = (uint8_t)(i + 1);
    snn_norm_table lut;
    const float mean[1] = {0.0f}, std[1] = {1.0f / 255.0f}; /* output = pixel value */
    snn_norm_table_init(&lut, 1, mean, std);
    float out[12];

    /* dy = 0, dx = 0: shifted down-right by one, zeros enter at the top and left. */
    snn_augment_apply(out, img, 1, 3, 4, 1, (snn_augment){.dy = 0, .dx = 0, .flip = false}, &lut);
    const float want_00[12] = {0, 0, 0, 0, 0, 1, 2, 3, 0, 5, 6, 7};
    CHECK_ALL_CLOSE(out, want_00, 12, 1e-4, 0);

    /* dy = 2, dx = 1: shifted up by one; columns unchanged. */
    snn_augment_apply(out, img, 1, 3, 4, 1, (snn_augment){.dy = 2, .dx = 1, .flip = false}, &lut);
    const float want_21[12] = {5, 6, 7, 8, 9, 10, 11, 12, 0, 0, 0, 0};
    CHECK_ALL_CLOSE(out, want_21, 12, 1e-4, 0);

    /* Centre + flip: each row reversed. */
    snn_augment_apply(out, img, 1, 3, 4, 1, (snn_augment){.dy = 1, .dx = 1, .flip = true}, &lut);
    const float want_flip[12] = {4, 3, 2, 1, 8, 7, 6, 5, 12, 11, 10, 9};
    CHECK_ALL_CLOSE(out, want_flip, 12, 1e-4, 0);

    /* dy = 1, dx = 2 then flip: crop rows are "2 3 4 0", mirrored "0 4 3 2". */
    snn_augment_apply(out, img, 1, 3, 4, 1, (snn_augment){.dy = 1, .dx = 2, .flip = true}, &lut);
    const float want_12f[12] = {0, 4, 3, 2, 0, 8, 7, 6, 0, 12, 11, 10};
    CHECK_ALL_CLOSE(out, want_12f, 12, 1e-4, 0);

    /* Padding larger than the image: dx = 0 with padding 5 shifts everything out. */
    snn_augment_apply(out, img, 1, 3, 4, 5, (snn_augment){.dy = 5, .dx = 0, .flip = false}, &lut);
    for (int i = 0; i < 12; i++) CHECK(out[i] == 0.0f);
}

/* Through the loader: every augmented image is one of the 2 (2p+1)^2 crops/flips, all of them
 * occur, and about half are flipped. */
static void test_augmentation_distribution(void)
{
    enum { H = 3, W = 4, P = 1, N = 50, EPOCHS = 20 };
    snn_dataset ds;
    CHECK_OK(snn_dataset_alloc(&ds, "tiny", N, 1, H, W, 10));
    for (int64_t n = 0; n < N; n++)
        for (int i = 0; i < H * W; i++) ds.images[n * H * W + i] = (uint8_t)(i + 1);
    memset(ds.labels, 0, N);
    snn_loader_config cfg = snn_loader_config_default();
    cfg.batch_size = 8;
    cfg.random_crop = true;
    cfg.crop_padding = P;
    cfg.horizontal_flip = true;
    cfg.std[0] = 1.0f / 255.0f;
    snn_loader *l = snn_loader_new(&ds, &cfg);
    snn_norm_table lut;
    snn_norm_table_init(&lut, 1, cfg.mean, cfg.std);
    /* All candidates, worked out with the by-hand-tested apply. */
    enum { CANDIDATES = 2 * (2 * P + 1) * (2 * P + 1) };
    float cand[CANDIDATES][H * W];
    int hits[CANDIDATES] = {0};
    int k = 0;
    for (int flip = 0; flip < 2; flip++)
        for (int dy = 0; dy <= 2 * P; dy++)
            for (int dx = 0; dx <= 2 * P; dx++)
                snn_augment_apply(cand[k++], ds.images, 1, H, W, P,
                                  (snn_augment){.dy = dy, .dx = dx, .flip = flip != 0}, &lut);
    int total = 0, unmatched = 0, flipped = 0;
    for (int e = 0; e < EPOCHS; e++) {
        snn_batch b;
        while (snn_loader_next(l, &b)) {
            for (int s = 0; s < b.count; s++) {
                int match = -1;
                for (int c = 0; c < CANDIDATES && match < 0; c++)
                    if (memcmp(cand[c], b.images + s * H * W, sizeof cand[c]) == 0) match = c;
                if (match < 0) unmatched++;
                else hits[match]++;
                flipped += match >= CANDIDATES / 2;
                total++;
            }
        }
    }
    CHECK(unmatched == 0);
    CHECK(total == N * EPOCHS);
    /* Each of the 18 outcomes expected 1000/18 = 55 times: all must occur. */
    for (int c = 0; c < CANDIDATES; c++) CHECK(hits[c] > 20);
    CHECK(flipped > total * 2 / 5 && flipped < total * 3 / 5);
    snn_loader_free(l);
    snn_dataset_free(&ds);
}

/*
 * The 28x28 recipe (snn-train --augment 1 --crop-padding 2 on Fashion-MNIST): a 1 x 28 x 28
 * image whose pixel (y, x) is 1 + x + 2y (so 0 is the padding and every pixel says where it
 * came from), padding 2, worked by hand at a few pixels of each case; then through the loader,
 * every image is one of the 2 x 5 x 5 crops and flips, and all of them occur.
 */
static void test_crop_flip_28x28(void)
{
    enum { H = 28, W = 28, P = 2, N = 64, EPOCHS = 10 };
    uint8_t img[H * W];
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) img[y * W + x] = (uint8_t)(1 + x + 2 * y);
    snn_norm_table lut;
    const float mean[1] = {0.0f}, std[1] = {1.0f / 255.0f}; /* output = pixel value */
    snn_norm_table_init(&lut, 1, mean, std);
    float out[H * W];
    /* out's pixel (y, x) as the integer it stands for (pixel / 255 * 255 is off by an ulp) */
#define AT(y, x) lroundf(out[(y) * W + (x)])

    /* dy = dx = 0: shifted down-right by 2: out[y][x] = img[y - 2][x - 2] */
    snn_augment_apply(out, img, 1, H, W, P, (snn_augment){.dy = 0, .dx = 0, .flip = false}, &lut);
    CHECK(AT(0, 5) == 0 && AT(1, 27) == 0 && AT(5, 0) == 0 && AT(27, 1) == 0); /* padding */
    CHECK(AT(2, 2) == 1);                    /* img[0][0] = 1 */
    CHECK(AT(27, 27) == 76);                 /* img[25][25] = 1 + 25 + 50 */
    CHECK(AT(10, 3) == 1 + 1 + 2 * 8);       /* img[8][1] = 18 */

    /* dy = dx = 4: shifted up-left by 2: out[y][x] = img[y + 2][x + 2] */
    snn_augment_apply(out, img, 1, H, W, P, (snn_augment){.dy = 4, .dx = 4, .flip = false}, &lut);
    CHECK(AT(0, 0) == 7 && AT(25, 25) == 82); /* img[2][2], img[27][27] */
    CHECK(AT(26, 0) == 0 && AT(0, 26) == 0 && AT(27, 27) == 0);

    /* centre (dy = dx = 2) and flip: out[y][x] = img[y][27 - x] */
    snn_augment_apply(out, img, 1, H, W, P, (snn_augment){.dy = 2, .dx = 2, .flip = true}, &lut);
    CHECK(AT(0, 0) == 28 && AT(5, 3) == 35 && AT(27, 27) == 55); /* img[0][27], [5][24], [27][0] */

    /* dy = 1, dx = 3, then flip: crop[y][x] = img[y - 1][x + 1], out[y][x] = crop[y][27 - x]
     * = img[y - 1][28 - x] */
    snn_augment_apply(out, img, 1, H, W, P, (snn_augment){.dy = 1, .dx = 3, .flip = true}, &lut);
    CHECK(AT(0, 10) == 0 && AT(1, 0) == 0);  /* row -1, column 28: padding */
    CHECK(AT(1, 1) == 28 && AT(10, 5) == 42); /* img[0][27]; img[9][23] = 1 + 23 + 18 */
#undef AT

    /* through the loader */
    snn_dataset ds;
    CHECK_OK(snn_dataset_alloc(&ds, "28x28", N, 1, H, W, 10));
    for (int64_t n = 0; n < N; n++) memcpy(ds.images + n * H * W, img, sizeof img);
    memset(ds.labels, 0, N);
    snn_loader_config cfg = snn_loader_config_default();
    cfg.batch_size = 16;
    cfg.random_crop = true;
    cfg.crop_padding = P;
    cfg.horizontal_flip = true;
    cfg.std[0] = 1.0f / 255.0f;
    snn_loader *l = snn_loader_new(&ds, &cfg);
    CHECK(l != NULL);
    enum { CANDIDATES = 2 * (2 * P + 1) * (2 * P + 1) };
    static float cand[CANDIDATES][H * W];
    int hits[CANDIDATES] = {0}, k = 0, total = 0, unmatched = 0;
    for (int flip = 0; flip < 2; flip++)
        for (int dy = 0; dy <= 2 * P; dy++)
            for (int dx = 0; dx <= 2 * P; dx++)
                snn_augment_apply(cand[k++], img, 1, H, W, P, (snn_augment){.dy = dy, .dx = dx, .flip = flip != 0}, &lut);
    for (int e = 0; l && e < EPOCHS; e++) {
        snn_batch b;
        while (snn_loader_next(l, &b)) {
            for (int i = 0; i < b.count; i++, total++) {
                int match = -1;
                for (int c = 0; c < CANDIDATES && match < 0; c++)
                    if (memcmp(cand[c], b.images + (size_t)i * H * W, sizeof cand[c]) == 0) match = c;
                if (match < 0) unmatched++;
                else hits[match]++;
            }
        }
    }
    CHECK(total == N * EPOCHS && unmatched == 0);
    int missing = 0; /* 640 draws of 50 outcomes: each expected ~13 times */
    for (int c = 0; c < CANDIDATES; c++) missing += hits[c] == 0;
    CHECK(missing == 0);
    snn_loader_free(l);
    snn_dataset_free(&ds);
}

/* Random erasing by hand: the rectangle is 0 in every channel after crop and flip, the rest is
 * what the same crop gives without it. */
static void test_erase_apply(void)
{
    uint8_t img[2 * 3 * 4];
    for (int i = 0; i < 24; i++) img[i] = (uint8_t)(i + 1);
    snn_norm_table lut;
    const float mean[2] = {0.0f, 0.0f}, std[2] = {1.0f / 255.0f, 1.0f / 255.0f};
    snn_norm_table_init(&lut, 2, mean, std);
    float out[24];
    /* no crop shift (padding 0), no flip; rows 1..2, columns 1..2 erased in both channels */
    snn_augment_apply(out, img, 2, 3, 4, 0,
                      (snn_augment){.erase_y = 1, .erase_x = 1, .erase_h = 2, .erase_w = 2}, &lut);
    const float want[24] = {1, 2, 3, 4, 5, 0, 0, 8, 9, 0, 0, 12,
                            13, 14, 15, 16, 17, 0, 0, 20, 21, 0, 0, 24};
    CHECK_ALL_CLOSE(out, want, 24, 1e-4, 0);
    /* after the flip: the erased columns are those of the output, not of the source */
    snn_augment_apply(out, img, 2, 3, 4, 0, (snn_augment){.flip = true, .erase_h = 1, .erase_w = 1},
                      &lut);
    const float want_flip[24] = {0, 3, 2, 1, 8, 7, 6, 5, 12, 11, 10, 9,
                                 0, 15, 14, 13, 20, 19, 18, 17, 24, 23, 22, 21};
    CHECK_ALL_CLOSE(out, want_flip, 24, 1e-4, 0);
}

/* The erase draws: about a fraction p of the samples, each rectangle inside the image with an
 * area of 2-33% (up to rounding) and an aspect ratio in [0.3, 3.3] (up to rounding); p = 0 draws
 * nothing; the crop and flip of a sample are the same with erasing on or off. */
static void test_erase_distribution(void)
{
    enum { H = 28, W = 28, DRAWS = 20000 };
    int erased = 0, bad = 0, small = 0, large = 0;
    for (int i = 0; i < DRAWS; i++) {
        snn_augment a = snn_augment_draw(7, 3, i, 2, true, true), b = a;
        snn_erase_draw(7, 3, i, 0.5f, H, W, &b);
        bad += a.dy != b.dy || a.dx != b.dx || a.flip != b.flip;
        if (b.erase_h == 0) continue;
        erased++;
        const double area = (double)b.erase_h * b.erase_w / (H * W);
        bad += b.erase_y < 0 || b.erase_x < 0 || b.erase_y + b.erase_h > H || b.erase_x + b.erase_w > W;
        bad += area < 0.015 || area > 0.36; /* 0.02..0.33, h and w rounded */
        bad += (double)b.erase_h / b.erase_w < 0.25 || (double)b.erase_h / b.erase_w > 4.0;
        small += area < 0.1;
        large += area > 0.25;
        snn_augment off = a;
        snn_erase_draw(7, 3, i, 0.0f, H, W, &off);
        bad += off.erase_h != 0;
    }
    fprintf(stderr, "  random erasing, p = 0.5: %d of %d erased; %d under 10%%, %d over 25%% of "
            "the image\n", erased, DRAWS, small, large);
    CHECK(bad == 0);
    CHECK(erased > 0.48 * DRAWS && erased < 0.52 * DRAWS);
    CHECK(small > 0 && large > 0); /* the whole range of areas occurs */
}

/* Collects `epochs` epochs of batches (images then labels) into one malloc'd array. */
static float *collect(const snn_dataset *ds, const snn_loader_config *cfg, int epochs, size_t *n)
{
    snn_loader *l = snn_loader_new(ds, cfg);
    if (!l) return NULL;
    size_t floats = (size_t)snn_dataset_image_bytes(ds);
    size_t cap = (size_t)epochs * (size_t)ds->count * (floats + 1), used = 0;
    float *all = malloc(cap * sizeof *all);
    for (int e = 0; e < epochs; e++) {
        snn_batch b;
        while (snn_loader_next(l, &b)) {
            memcpy(all + used, b.images, (size_t)b.count * floats * sizeof(float));
            used += (size_t)b.count * floats;
            memcpy(all + used, b.labels, (size_t)b.count * sizeof(float));
            used += (size_t)b.count;
        }
    }
    snn_loader_free(l);
    *n = used;
    return all;
}

static snn_dataset make_random(int64_t n, int c, int h, int w, uint64_t seed)
{
    snn_dataset ds;
    CHECK_OK(snn_dataset_alloc(&ds, "random", n, c, h, w, 10));
    snn_rng rng;
    snn_rng_seed(&rng, seed);
    for (int64_t i = 0; i < n * c * h * w; i++) ds.images[i] = (uint8_t)snn_rng_u64(&rng);
    for (int64_t i = 0; i < n; i++) ds.labels[i] = (uint8_t)snn_rng_below(&rng, 10);
    return ds;
}

static void test_prefetch_matches_sync(void)
{
    snn_dataset ds = make_random(300, 3, 8, 8, 99);
    snn_loader_config cfg = snn_loader_config_default();
    cfg.batch_size = 32;
    cfg.seed = 1234;
    cfg.random_crop = true;
    cfg.horizontal_flip = true;
    cfg.crop_padding = 2;
    snn_dataset_measure_norm(&ds, cfg.mean, cfg.std);
    size_t n_sync, n_pre;
    cfg.prefetch = false;
    float *sync = collect(&ds, &cfg, 3, &n_sync);
    cfg.prefetch = true;
    float *pre = collect(&ds, &cfg, 3, &n_pre);
    CHECK(sync && pre && n_sync == n_pre && n_sync == 3 * 300 * (3 * 64 + 1));
    CHECK(sync && pre && memcmp(sync, pre, n_sync * sizeof(float)) == 0);
    free(sync);
    free(pre);
    snn_dataset_free(&ds);
}

/* A run resumed at (epoch 1, batch 3) sees what the uninterrupted run saw from there. */
static void test_resume(void)
{
    snn_dataset ds = make_random(100, 1, 6, 6, 5);
    snn_loader_config cfg = snn_loader_config_default();
    cfg.batch_size = 16;
    cfg.seed = 77;
    cfg.random_crop = true;
    cfg.horizontal_flip = true;
    for (int prefetch = 0; prefetch < 2; prefetch++) {
        cfg.prefetch = prefetch != 0;
        snn_loader *a = snn_loader_new(&ds, &cfg);
        snn_loader *r = snn_loader_new(&ds, &cfg);
        snn_batch b;
        /* The reference runs epoch 0 to the end, then epoch 1 up to batch 3. */
        while (snn_loader_next(a, &b)) {
        }
        for (int i = 0; i < 3; i++) CHECK(snn_loader_next(a, &b));
        int64_t e, bi;
        snn_loader_position(a, &e, &bi);
        CHECK(e == 1 && bi == 3);
        /* The resumed loader jumps there, after having read a batch elsewhere. */
        CHECK(snn_loader_next(r, &b));
        CHECK_OK(snn_loader_seek(r, e, bi));
        int compared = 0, equal = 1;
        for (;;) {
            snn_batch x, y;
            bool more_a = snn_loader_next(a, &x), more_r = snn_loader_next(r, &y);
            CHECK(more_a == more_r);
            if (!more_a || !more_r) break;
            equal &= x.count == y.count && x.epoch == y.epoch && x.index == y.index &&
                     memcmp(x.images, y.images, (size_t)x.count * 36 * sizeof(float)) == 0 &&
                     memcmp(x.labels, y.labels, (size_t)x.count * sizeof(float)) == 0;
            compared++;
        }
        CHECK(equal);
        CHECK(compared == 7 - 3);
        snn_loader_position(r, &e, &bi);
        CHECK(e == 2 && bi == 0); /* moved on to the next epoch */
        CHECK(snn_loader_seek(r, -1, 0) == SNN_ERR_ARGUMENT);
        CHECK(snn_loader_seek(r, 0, 8) == SNN_ERR_ARGUMENT);
        snn_loader_free(a);
        snn_loader_free(r);
    }
    snn_dataset_free(&ds);
}

static void test_batch_to_device(void)
{
    snn_dataset ds = make_indexed(10, 2, 3, 3);
    snn_loader_config cfg = snn_loader_config_default();
    cfg.batch_size = 4;
    cfg.shuffle = false;
    snn_loader *l = snn_loader_new(&ds, &cfg);
    snn_batch b;
    CHECK(snn_loader_next(l, &b));
    CHECK_OK(snn_step_begin());
    snn_tensor *x = NULL, *y = NULL;
    CHECK_OK(snn_batch_to_device(&b, SNN_CPU, &x, &y));
    CHECK(x && x->shape.ndim == 4 && x->shape.dim[0] == 4 && x->shape.dim[1] == 2 &&
          x->shape.dim[2] == 3 && x->shape.dim[3] == 3);
    CHECK(y && y->shape.ndim == 1 && y->shape.dim[0] == 4);
    CHECK(x && x->lifetime == SNN_STEP && x->device == SNN_CPU);
    if (x && y) {
        CHECK(memcmp(x->data, b.images, 4 * 18 * sizeof(float)) == 0);
        CHECK(y->data[3] == 3.0f);
    }
    snn_step_end();
    snn_loader_free(l);
    snn_dataset_free(&ds);
}

static void test_bad_configs(void)
{
    snn_dataset ds = make_indexed(10, 1, 2, 2);
    snn_loader_config cfg = snn_loader_config_default();
    cfg.batch_size = 0;
    CHECK(snn_loader_new(&ds, &cfg) == NULL);
    CHECK(strstr(snn_last_error(), "batch_size") != NULL);
    cfg = snn_loader_config_default();
    cfg.std[0] = 0.0f;
    CHECK(snn_loader_new(&ds, &cfg) == NULL);
    CHECK(strstr(snn_last_error(), "std") != NULL);
    cfg = snn_loader_config_default();
    cfg.batch_size = 11;
    cfg.drop_last = true;
    CHECK(snn_loader_new(&ds, &cfg) == NULL);
    CHECK(strstr(snn_last_error(), "drop_last") != NULL);
    cfg = snn_loader_config_default();
    cfg.erase_probability = 1.5f;
    CHECK(snn_loader_new(&ds, &cfg) == NULL);
    CHECK(strstr(snn_last_error(), "erase_probability") != NULL);
    cfg = snn_loader_config_default();
    snn_dataset empty;
    memset(&empty, 0, sizeof empty);
    CHECK(snn_loader_new(&empty, &cfg) == NULL);
    CHECK(snn_loader_new(NULL, &cfg) == NULL);
    CHECK(snn_loader_new(&ds, NULL) == NULL);
    snn_loader_free(NULL);
    snn_dataset_free(&ds);
}

static void test_allocation_failures(void)
{
    snn_dataset ds = make_indexed(20, 1, 2, 2);
    snn_loader_config cfg = snn_loader_config_default();
    cfg.batch_size = 8;
    int failures = 0;
    for (uint64_t k = 1; k < 50; k++) {
        size_t live = snn_live_bytes(SNN_CPU);
        snn_alloc_fail_after(k);
        snn_loader *l = snn_loader_new(&ds, &cfg);
        snn_alloc_fail_after(0);
        if (l) {
            snn_batch b;
            CHECK(snn_loader_next(l, &b) && b.count == 8);
            snn_loader_free(l);
            break;
        }
        failures++;
        CHECK(snn_last_status() == SNN_ERR_MEMORY);
        CHECK(snn_live_bytes(SNN_CPU) == live);
    }
    CHECK(failures == 6); /* the loader, the order, 2 x (images, labels) */
    snn_dataset_free(&ds);
}

int main(void)
{
    RUN(test_shuffle_is_permutation);
    RUN(test_drop_last);
    RUN(test_normalisation);
    RUN(test_crop_flip_by_hand);
    RUN(test_augmentation_distribution);
    RUN(test_crop_flip_28x28);
    RUN(test_erase_apply);
    RUN(test_erase_distribution);
    RUN(test_prefetch_matches_sync);
    RUN(test_resume);
    RUN(test_batch_to_device);
    RUN(test_bad_configs);
    RUN(test_allocation_failures);
    return test_finish();
}
