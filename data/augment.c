/*
 * augment.c - one sample from uint8 (C, H, W) to normalised float (C, H, W), with the two
 * standard CIFAR augmentations:
 *
 *   random crop:  pad the image with `p` black pixels on every side (H + 2p, W + 2p) and cut the
 *                 original size out at a random offset (dy, dx), each uniform in [0, 2p]:
 *                     crop[y][x] = img[y + dy - p][x + dx - p]   (0 outside the image)
 *   flip:         with probability 1/2, mirror left-right after the crop:
 *                     out[y][x] = crop[y][W - 1 - x]
 *   normalise:    out = (v / 255 - mean[c]) / std[c], read from a 256-entry table per channel, so
 *                 a padded pixel becomes (0 - mean[c]) / std[c], as torchvision's
 *                 RandomCrop(32, padding=4) -> RandomHorizontalFlip -> ToTensor -> Normalize.
 *   erase:        random erasing (Zhong et al. 2020, "Random Erasing Data Augmentation"): with
 *                 probability p, a rectangle of area s H W and aspect ratio r = h / w, with
 *                     s ~ U(0.02, 0.33),   log r ~ U(log 0.3, log 3.3),
 *                     h = round(sqrt(s H W r)),  w = round(sqrt(s H W / r)),
 *                 placed uniformly where it fits (h < H, w < W; up to 10 draws, else nothing), is
 *                 set to 0 in every channel after normalisation: the data set's mean, as
 *                 torchvision's RandomErasing(p, value=0) after Normalize.
 *
 * The random draws of a sample depend on (seed, epoch, position in the epoch) only, so the same
 * batch comes out whichever thread makes it and whenever. Cost: one table load and one store
 * per output value, C*H*W of them (3072 for CIFAR); reads 1 byte, writes 4 bytes per value.
 */
#include <math.h>
#include <string.h>

#include "data_internal.h"
#include "kernels/kernels.h"

void snn_norm_table_init(snn_norm_table *lut, int channels, const float *mean, const float *std)
{
    memset(lut, 0, sizeof *lut);
    for (int c = 0; c < channels && c < SNN_DATA_MAX_CHANNELS; c++) {
        for (int v = 0; v < 256; v++) {
            /* The same float expression a reader would write: ((v / 255) - mean) / std. */
            float x = (float)v / 255.0f;
            lut->value[c][v] = (x - mean[c]) / std[c];
        }
    }
}

snn_augment snn_augment_draw(uint64_t seed, int64_t epoch, int64_t position, int padding,
                             bool crop, bool flip)
{
    snn_augment aug = {padding, padding, false, 0, 0, 0, 0}; /* no crop: the centre, i.e. the image itself */
    if (!crop && !flip) return aug;
    /* A key that mixes all three numbers, then a fresh generator for this one sample. The salt
     * keeps these streams apart from the shuffle's, which is seeded from (seed, epoch). */
    uint64_t key = snn_hash64(seed ^ 0x5A3F1C2E4B6D7A89ull);
    key = snn_hash64(key ^ (uint64_t)epoch);
    key = snn_hash64(key ^ (uint64_t)position);
    snn_rng rng;
    snn_rng_seed(&rng, key);
    if (crop) {
        aug.dy = (int)snn_rng_below(&rng, (uint64_t)(2 * padding + 1));
        aug.dx = (int)snn_rng_below(&rng, (uint64_t)(2 * padding + 1));
    }
    if (flip) aug.flip = (snn_rng_u64(&rng) >> 63) != 0;
    return aug;
}

void snn_erase_draw(uint64_t seed, int64_t epoch, int64_t position, float probability,
                    int height, int width, snn_augment *aug)
{
    aug->erase_y = aug->erase_x = aug->erase_h = aug->erase_w = 0;
    if (!(probability > 0.0f)) return;
    /* Its own salt: the crop/flip stream of the same sample stays what it was without erasing. */
    uint64_t key = snn_hash64(seed ^ 0xC3A5C85C97CB3127ull);
    key = snn_hash64(key ^ (uint64_t)epoch);
    key = snn_hash64(key ^ (uint64_t)position);
    snn_rng rng;
    snn_rng_seed(&rng, key);
    if (snn_rng_uniform(&rng) >= probability) return;
    const double area = (double)height * width;
    const double log_lo = log(0.3), log_hi = log(3.3);
    for (int attempt = 0; attempt < 10; attempt++) {
        const double s = 0.02 + (0.33 - 0.02) * (double)snn_rng_uniform(&rng);
        const double r = exp(log_lo + (log_hi - log_lo) * (double)snn_rng_uniform(&rng));
        const int h = (int)lround(sqrt(s * area * r)), w = (int)lround(sqrt(s * area / r));
        if (h < 1 || w < 1 || h >= height || w >= width) continue;
        aug->erase_h = h, aug->erase_w = w;
        aug->erase_y = (int)snn_rng_below(&rng, (uint64_t)(height - h + 1));
        aug->erase_x = (int)snn_rng_below(&rng, (uint64_t)(width - w + 1));
        return;
    }
}

static int max_int(int a, int b) { return a > b ? a : b; }
static int min_int(int a, int b) { return a < b ? a : b; }

void snn_augment_apply(float *out, const uint8_t *src, int channels, int height, int width,
                       int padding, snn_augment aug, const snn_norm_table *lut)
{
    const int shift_y = aug.dy - padding, shift_x = aug.dx - padding;
    /* Columns of the crop that fall inside the image: crop column x reads image column
     * x + shift_x, valid for x in [x_lo, x_hi). */
    const int x_lo = min_int(width, max_int(0, -shift_x));
    const int x_hi = max_int(x_lo, min_int(width, width - shift_x));
    for (int c = 0; c < channels; c++) {
        const float *table = lut->value[c];
        const float pad = table[0];
        const uint8_t *plane = src + (size_t)c * height * width;   // (H, W)
        float *o = out + (size_t)c * height * width;              // (H, W)
        for (int y = 0; y < height; y++) {
            float *row_out = o + (size_t)y * width;
            const int sy = y + shift_y;
            if (sy < 0 || sy >= height) {
                for (int x = 0; x < width; x++) row_out[x] = pad;
                continue;
            }
            const uint8_t *row = plane + (size_t)sy * width; /* row[x + shift_x] = crop[y][x] */
            if (!aug.flip) {
                for (int x = 0; x < x_lo; x++) row_out[x] = pad;
                for (int x = x_lo; x < x_hi; x++) row_out[x] = table[row[x + shift_x]];
                for (int x = x_hi; x < width; x++) row_out[x] = pad;
            } else {
                /* out[x] = crop[W - 1 - x]: crop column x lands at W - 1 - x. */
                for (int x = 0; x < x_lo; x++) row_out[width - 1 - x] = pad;
                for (int x = x_lo; x < x_hi; x++) row_out[width - 1 - x] = table[row[x + shift_x]];
                for (int x = x_hi; x < width; x++) row_out[width - 1 - x] = pad;
            }
        }
        for (int y = aug.erase_y; y < aug.erase_y + aug.erase_h; y++)
            memset(o + (size_t)y * width + aug.erase_x, 0, (size_t)aug.erase_w * sizeof *o);
    }
}
