/*
 * snn_make_cifar.c - snn-make-cifar: turns Fashion-MNIST into a CIFAR-10-format archive, so the
 * CIFAR code path and the spiking ResNet can be trained end to end on real images here, where
 * no copy of CIFAR is reachable.
 *
 * Each 28 x 28 grey image is padded with 2 black pixels on every side to 32 x 32 and copied into
 * the red, green and blue planes; labels stay 0..9. The output has the layout of the real
 * cifar-10-binary.tar.gz (see data/cifar.c): cifar-10-batches-bin/data_batch_1..5.bin (60000
 * train images, 12000 each), test_batch.bin (10000), batches.meta.txt (the class names).
 *
 *     snn-make-cifar [-i FASHION_MNIST_DIR] [-o OUT.tar.gz]
 *     snn-make-cifar -o /tmp/fm/cifar-10-binary.tar.gz
 *     # then: snn_dataset_load("cifar10", "/tmp/fm", SNN_SPLIT_TRAIN, &ds)
 *
 * Input: -i, else $SNN_DATA_DIR, else /usr/share/datasets/fashion-mnist (as snn_dataset_load).
 * Output: -o, default ./cifar-10-binary.tar.gz.
 */
#include <stdio.h>
#include <string.h>
#include <errno.h>
#include <sys/stat.h>

#include "app/run_signals.h"
#include "data/data.h"
#include "tensor/tensor.h"

#define SIDE 32

static const char *const class_names[10] = {
    "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
    "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot",
};

/* dst (count, 3, 32, 32) <- src (count, 1, h, w) centred with zero borders, grey to RGB. */
static snn_status to_cifar_shape(const snn_dataset *src, snn_dataset *dst)
{
    memset(dst, 0, sizeof *dst);
    if (src->channels != 1 || src->height > SIDE || src->width > SIDE) {
        fprintf(stderr, "snn-make-cifar: expected 1-channel images of at most %dx%d, got %dx%dx%d\n",
                SIDE, SIDE, src->channels, src->height, src->width);
        return SNN_ERR_FORMAT;
    }
    size_t bytes = (size_t)src->count * 3 * SIDE * SIDE;
    dst->images = snn_alloc(bytes, SNN_CPU);
    dst->labels = snn_alloc((size_t)src->count, SNN_CPU);
    if (!dst->images || !dst->labels) {
        snn_free(dst->images, bytes, SNN_CPU);
        snn_free(dst->labels, (size_t)src->count, SNN_CPU);
        memset(dst, 0, sizeof *dst);
        fprintf(stderr, "snn-make-cifar: out of memory\n");
        return SNN_ERR_MEMORY;
    }
    memset(dst->images, 0, bytes);
    memcpy(dst->labels, src->labels, (size_t)src->count);
    dst->count = src->count;
    dst->channels = 3;
    dst->height = dst->width = SIDE;
    dst->classes = src->classes;
    snprintf(dst->name, sizeof dst->name, "cifar10");
    const int top = (SIDE - src->height) / 2, left = (SIDE - src->width) / 2;
    for (int64_t n = 0; n < src->count; n++) {
        const uint8_t *in = src->images + n * src->height * src->width;   // (H, W)
        uint8_t *out = dst->images + n * 3 * SIDE * SIDE;                 // (3, 32, 32)
        for (int y = 0; y < src->height; y++) {
            uint8_t *row = out + (top + y) * SIDE + left;
            memcpy(row, in + y * src->width, (size_t)src->width);
            memcpy(row + SIDE * SIDE, row, (size_t)src->width);           // green
            memcpy(row + 2 * SIDE * SIDE, row, (size_t)src->width);       // blue
        }
    }
    return SNN_OK;
}

static void usage(void)
{
    fprintf(stderr, "usage: snn-make-cifar [-i FASHION_MNIST_DIR] [-o OUT.tar.gz]\n");
}

int main(int argc, char **argv)
{
    const char *input = NULL, *output = "cifar-10-binary.tar.gz";
    run_signals_ignore_file_size(); /* a file-size limit: EFBIG and a message, not a core dump */
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-i") == 0 && i + 1 < argc) {
            input = argv[++i];
        } else if (strcmp(argv[i], "-o") == 0 && i + 1 < argc) {
            output = argv[++i];
        } else {
            usage();
            return strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0 ? 0 : 2;
        }
    }
    /* the archive is written beside the output and renamed over it: never over a device, a
     * pipe or a folder (as root, `-o /dev/full` would otherwise replace the device node) */
    struct stat existing;
    if (stat(output, &existing) == 0 && !S_ISREG(existing.st_mode)) {
        fprintf(stderr, "snn-make-cifar: '%s' exists and is not a regular file; refusing to "
                "replace it\nhint: -o names the archive to write, e.g. -o runs/fmnist-cifar/"
                "cifar-10-binary.tar.gz\n", output);
        return 1;
    }
    /* create the output's folder (one level, like snn-train's --out) so that
     * `-o runs/fmnist-cifar/cifar-10-binary.tar.gz` works on a fresh checkout */
    char folder[1024];
    snprintf(folder, sizeof folder, "%s", output);
    char *slash = strrchr(folder, '/');
    if (slash && slash != folder) {
        *slash = '\0';
        if (mkdir(folder, 0755) != 0 && errno != EEXIST) {
            fprintf(stderr, "snn-make-cifar: cannot create folder '%s': %s\n", folder, strerror(errno));
            return 1;
        }
    }
    snn_dataset grey[2], rgb[2];
    memset(grey, 0, sizeof grey);
    memset(rgb, 0, sizeof rgb);
    int rc = 1;
    for (int s = 0; s < 2; s++) {
        snn_split split = s == 0 ? SNN_SPLIT_TRAIN : SNN_SPLIT_TEST;
        if (snn_dataset_load("fashion-mnist", input, split, &grey[s]) != SNN_OK) {
            fprintf(stderr, "snn-make-cifar: %s\n", snn_last_error());
            goto done;
        }
        if (to_cifar_shape(&grey[s], &rgb[s]) != SNN_OK) goto done;
        snn_dataset_free(&grey[s]);
    }
    if (snn_dataset_write_cifar10(output, &rgb[0], &rgb[1], class_names) != SNN_OK) {
        fprintf(stderr, "snn-make-cifar: %s\n", snn_last_error());
        goto done;
    }
    printf("wrote %s: %lld train + %lld test images, 3 x 32 x 32, 10 classes\n", output,
           (long long)rgb[0].count, (long long)rgb[1].count);
    rc = 0;
done:
    for (int s = 0; s < 2; s++) {
        snn_dataset_free(&grey[s]);
        snn_dataset_free(&rgb[s]);
    }
    snn_shutdown();
    return rc;
}
