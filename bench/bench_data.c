/*
 * bench_data.c - how fast data/ turns stored images into training batches.
 *
 *     build/bin/bench_data [CIFAR_DIR_OR_ARCHIVE]
 *
 * 1. Loading: Fashion-MNIST train (two .gz IDX files) and, when given, a CIFAR-10-format archive
 *    (e.g. the output of snn-make-cifar), in seconds and MB/s of decoded bytes.
 * 2. Loader throughput in images/s on CIFAR-sized images (3 x 32 x 32; the given archive or 50000
 *    random images), batch 128, for: normalise only / + random crop (pad 4) + flip, each without
 *    and with the prefetch thread, and with prefetch while the caller also copies each batch
 *    out (a stand-in for the host-to-device copy of a training step), and with a simulated
 *    2 ms GPU training step per batch (the caller sleeps), where "wait ms" shows whether the step ever waits for data.
 *
 * Napkin math: one CIFAR image is 3072 output floats = 12 KiB written, 3 KiB read; at the
 * 20,000 images/s the GPU needs that is ~250 MB/s, far below memory bandwidth, so the loop is
 * bound by per-pixel work (one table lookup per value). The target is > 20,000 images/s.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "data/data.h"
#include "tensor/tensor.h"
#include "bench_usage.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static float staging[128 * 3 * 32 * 32]; /* the caller's copy of one batch */

/* Runs `epochs` epochs; returns images/s. consume: copy every float of each batch out.
 * step_ms: then sleep that long, a stand-in for a GPU training step (the host thread waits). *wait_ms: the mean time per
 * batch the caller spent inside snn_loader_next (what a training step would wait for data). */
static double run(const snn_dataset *ds, const snn_loader_config *cfg, int epochs, int consume,
                  double step_ms, double *wait_ms, double *checksum)
{
    snn_loader *l = snn_loader_new(ds, cfg);
    if (!l) {
        fprintf(stderr, "bench_data: %s\n", snn_last_error());
        return 0.0;
    }
    int64_t images = 0;
    float sum = 0.0f;
    double t0 = now(), waited = 0.0;
    int64_t batches = 0;
    for (int e = 0; e < epochs; e++) {
        snn_batch b;
        for (;;) {
            double w0 = now();
            bool more = snn_loader_next(l, &b);
            waited += now() - w0;
            if (!more) break;
            batches++;
            images += b.count;
            if (consume) {
                /* Copy the batch out, as snn_batch_to_device does into pinned/device memory. */
                size_t n = (size_t)b.count * (size_t)(b.channels * b.height * b.width);
                memcpy(staging, b.images, n * sizeof(float));
                sum += staging[n - 1];
            } else {
                sum += b.images[0];
            }
            if (step_ms > 0.0) {
                /* The host side of a GPU step mostly waits for the device: sleep. */
                struct timespec step = {0, (long)(step_ms * 1e6)};
                nanosleep(&step, NULL);
            }
        }
    }
    double seconds = now() - t0;
    *wait_ms = batches ? waited / (double)batches * 1e3 : 0.0;
    snn_loader_free(l);
    *checksum += (double)sum;
    return (double)images / seconds;
}

static void throughput_table(const char *title, const snn_dataset *ds, int epochs)
{
    printf("\n%s: %lld images of %d x %d x %d, batch 128, %d epochs\n", title,
           (long long)ds->count, ds->channels, ds->height, ds->width, epochs);
    printf("| %-44s | %10s | %8s | %8s | %8s |\n", "configuration", "images/s", "ms/batch",
           "wait ms", "MB/s out");
    printf("|----------------------------------------------|------------|----------|----------|"
           "----------|\n");
    struct {
        const char *name;
        int augment, prefetch, consume;
        double step_ms;
    } rows[] = {
        {"normalise, no prefetch", 0, 0, 0, 0.0},
        {"normalise, prefetch", 0, 1, 0, 0.0},
        {"crop(4) + flip + normalise, no prefetch", 1, 0, 0, 0.0},
        {"crop(4) + flip + normalise, prefetch", 1, 1, 0, 0.0},
        {"crop + flip, prefetch, caller copies out", 1, 1, 1, 0.0},
        {"crop + flip, no prefetch, 2 ms step", 1, 0, 1, 2.0},
        {"crop + flip, prefetch, 2 ms step", 1, 1, 1, 2.0},
    };
    double checksum = 0.0;
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        snn_loader_config cfg = snn_loader_config_default();
        cfg.batch_size = 128;
        cfg.seed = 1;
        cfg.random_crop = rows[r].augment != 0;
        cfg.horizontal_flip = rows[r].augment != 0;
        cfg.prefetch = rows[r].prefetch != 0;
        snn_dataset_default_norm(ds, cfg.mean, cfg.std);
        double wait_ms = 0.0;
        double ips = run(ds, &cfg, epochs, rows[r].consume, rows[r].step_ms, &wait_ms, &checksum);
        double floats = (double)snn_dataset_image_bytes(ds);
        printf("| %-44s | %10.0f | %8.3f | %8.3f | %8.0f |\n", rows[r].name, ips,
               ips > 0.0 ? 128.0 / ips * 1e3 : 0.0, wait_ms, ips * floats * 4.0 / 1e6);
    }
    printf("(checksum %.3g)\n", checksum);
}

int main(int argc, char **argv)
{
    bench_usage(argc, argv, "[CIFAR_DIR_OR_ARCHIVE]   (loading, normalisation and the loader's batches on the CPU)");
    printf("bench_data: data loading on the CPU\n");

    /* 1. Loading. */
    printf("\n| %-44s | %8s | %10s |\n", "load", "seconds", "MB/s");
    printf("|----------------------------------------------|----------|------------|\n");
    snn_dataset fm;
    double t0 = now();
    if (snn_dataset_load("fashion-mnist", NULL, SNN_SPLIT_TRAIN, &fm) == SNN_OK) {
        double s = now() - t0;
        double mb = (double)(fm.count * snn_dataset_image_bytes(&fm) + fm.count) / 1e6;
        printf("| %-44s | %8.3f | %10.1f |\n", "fashion-mnist train (60000 x 28 x 28, .gz)", s,
               mb / s);
    } else {
        printf("| %-44s | %8s | %10s |\n", "fashion-mnist: not found", "-", "-");
        fprintf(stderr, "%s\n", snn_last_error());
    }
    snn_dataset cifar;
    memset(&cifar, 0, sizeof cifar);
    if (argc > 1) {
        t0 = now();
        if (snn_dataset_load("cifar10", argv[1], SNN_SPLIT_TRAIN, &cifar) == SNN_OK) {
            double s = now() - t0;
            double mb = (double)(cifar.count * snn_dataset_image_bytes(&cifar)) / 1e6;
            printf("| %-44s | %8.3f | %10.1f |\n", "cifar10-format train (.tar.gz)", s, mb / s);
        } else {
            fprintf(stderr, "bench_data: %s\n", snn_last_error());
        }
    }
    if (!cifar.images) {
        /* 50000 random CIFAR-sized images. */
        {
            cifar.count = 50000;
            cifar.channels = 3;
            cifar.height = cifar.width = 32;
            cifar.classes = 10;
            snprintf(cifar.name, sizeof cifar.name, "cifar10");
            cifar.images = snn_alloc((size_t)cifar.count * 3072, SNN_CPU);
            cifar.labels = snn_alloc((size_t)cifar.count, SNN_CPU);
            if (!cifar.images || !cifar.labels) return 1;
            snn_rng rng;
            snn_rng_seed(&rng, 3);
            for (int64_t i = 0; i < cifar.count * 3072; i += 8) {
                uint64_t x = snn_rng_u64(&rng);
                memcpy(cifar.images + i, &x, 8);
            }
            for (int64_t i = 0; i < cifar.count; i++)
                cifar.labels[i] = (uint8_t)snn_rng_below(&rng, 10);
        }
    }

    /* 2. Throughput. */
    throughput_table("CIFAR-sized", &cifar, 2);
    if (fm.images) throughput_table("Fashion-MNIST", &fm, 2);
    snn_dataset_free(&cifar);
    snn_dataset_free(&fm);
    snn_shutdown();
    return 0;
}
