/*
 * idx.c - the IDX file format of MNIST and Fashion-MNIST, and the data sets made from it.
 *
 * An IDX file (http://yann.lecun.com/exdb/mnist/, "FILE FORMATS") is
 *
 *     offset 0   2 zero bytes
 *     offset 2   element type: 0x08 unsigned byte (the only one MNIST uses; also 0x09 int8,
 *                0x0B int16, 0x0C int32, 0x0D float32, 0x0E float64)
 *     offset 3   number of dimensions d
 *     offset 4   d sizes, each a big-endian uint32
 *     then       the elements, last dimension fastest (row-major), nothing after them
 *
 * so labels are "00 00 08 01 | N | N bytes" and images "00 00 08 03 | N | 28 | 28 | N*784 bytes".
 * The files usually come gzip-compressed (*.gz); snn_stream inflates them on the fly.
 * Every check here names the file and what it expected, and a failure takes nothing.
 *
 * Run the tests: ctest -R data_idx.
 */
#include <stdio.h>
#include <string.h>

#include "data_internal.h"
#include "tensor/error.h"

/* An image side longer than this is not an MNIST-style file (and would overflow int). */
#define IDX_MAX_DIM (1 << 16)

static uint32_t read_be32(const uint8_t *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

snn_status snn_idx_read(snn_stream *s, int ndim, snn_idx *out)
{
    memset(out, 0, sizeof *out);
    SNN_ASSERT(ndim >= 1 && ndim <= 4);
    uint8_t magic[4];
    snn_status st = snn_stream_read_exact(s, magic, sizeof magic, "IDX magic number");
    if (st != SNN_OK) return st;
    if (magic[0] != 0 || magic[1] != 0)
        return snn_error(SNN_ERR_FORMAT,
                         "'%s': not an IDX file (expected the magic to start with 00 00, got "
                         "%02x %02x)",
                         s->name, magic[0], magic[1]);
    if (magic[2] != 0x08)
        return snn_error(SNN_ERR_FORMAT,
                         "'%s': IDX element type 0x%02x (expected 0x08, unsigned bytes)", s->name,
                         magic[2]);
    if (magic[3] != ndim)
        return snn_error(SNN_ERR_FORMAT,
                         "'%s': IDX file with %d dimensions (expected %d: %s)", s->name, magic[3],
                         ndim, ndim == 1 ? "a label file" : "an image file (N, H, W)");

    uint8_t sizes[16];
    st = snn_stream_read_exact(s, sizes, (size_t)ndim * 4, "IDX dimension sizes");
    if (st != SNN_OK) return st;
    uint64_t bytes = 1;
    for (int i = 0; i < ndim; i++) {
        uint32_t d = read_be32(sizes + 4 * i);
        if (d == 0 || (i > 0 && d > IDX_MAX_DIM))
            return snn_error(SNN_ERR_FORMAT,
                             "'%s': IDX dimension %d is %u (expected 1..%u)", s->name, i, d,
                             i > 0 ? (unsigned)IDX_MAX_DIM : 0xFFFFFFFFu);
        out->dim[i] = d;
        if (d > SNN_DATA_MAX_BYTES / bytes) /* i.e. bytes * d > the cap, without overflow */
            return snn_error(SNN_ERR_FORMAT,
                             "'%s': IDX header announces more than %llu bytes (expected a "
                             "plausible size)",
                             s->name, (unsigned long long)SNN_DATA_MAX_BYTES);
        bytes *= d;
    }
    out->ndim = ndim;
    out->bytes = bytes;
    st = snn_stream_read_alloc(s, bytes, &out->data, "IDX data the header announces");
    if (st == SNN_OK) st = snn_stream_expect_end(s, "the elements the IDX header announces");
    if (st != SNN_OK) snn_idx_free(out);
    return st;
}

void snn_idx_free(snn_idx *idx)
{
    if (idx->data) snn_free(idx->data, (size_t)idx->bytes, SNN_CPU);
    memset(idx, 0, sizeof *idx);
}

snn_status snn_mnist_from_idx(const char *name, snn_idx *images, snn_idx *labels,
                              const char *source, snn_dataset *out)
{
    memset(out, 0, sizeof *out);
    if (images->ndim != 3 || labels->ndim != 1)
        return snn_error(SNN_ERR_FORMAT, "%s: expected 3-D images and 1-D labels", source);
    if (images->dim[0] != labels->dim[0])
        return snn_error(SNN_ERR_FORMAT,
                         "%s: the image file holds %lld images but the label file %lld labels "
                         "(expected the same count)",
                         source, (long long)images->dim[0], (long long)labels->dim[0]);
    const int classes = 10;
    for (int64_t i = 0; i < labels->dim[0]; i++) {
        if (labels->data[i] >= classes)
            return snn_error(SNN_ERR_FORMAT,
                             "%s: label %d of sample %lld is out of range (expected 0..%d)",
                             source, labels->data[i], (long long)i, classes - 1);
    }
    snprintf(out->name, sizeof out->name, "%s", name);
    out->channels = 1;
    out->height = (int)images->dim[1];
    out->width = (int)images->dim[2];
    out->classes = classes;
    /* Take the buffers over instead of copying: IDX images are already (N, 1, H, W). */
    out->images = images->data;
    out->labels = labels->data;
    out->count = images->dim[0];
    images->data = NULL;
    labels->data = NULL;
    images->bytes = labels->bytes = 0;
    return SNN_OK;
}

/* "<dir>/<stem>.gz", else "<dir>/<stem>"; IO error naming both when neither exists. */
static snn_status open_idx(snn_stream *s, const char *dir, const char *stem)
{
    char gz_name[128], gz_path[1024], plain_path[1024];
    snprintf(gz_name, sizeof gz_name, "%s.gz", stem);
    snn_status st = snn_path_join(gz_path, sizeof gz_path, dir, gz_name);
    if (st == SNN_OK) st = snn_path_join(plain_path, sizeof plain_path, dir, stem);
    if (st != SNN_OK) return st;
    const char *path = snn_path_exists(gz_path) ? gz_path : plain_path;
    if (!snn_path_exists(path))
        return snn_error(SNN_ERR_IO, "cannot open '%s' (nor '%s'): no such file", gz_path,
                         plain_path);
    return snn_stream_open_file(s, path);
}

static snn_status read_idx_file(const char *dir, const char *stem, int ndim, snn_idx *out)
{
    snn_stream s;
    snn_status st = open_idx(&s, dir, stem);
    if (st != SNN_OK) return st;
    st = snn_idx_read(&s, ndim, out);
    snn_stream_close(&s);
    return st;
}

snn_status snn_mnist_load(const char *name, const char *dir, snn_split split, snn_dataset *out)
{
    memset(out, 0, sizeof *out);
    const char *prefix = split == SNN_SPLIT_TRAIN ? "train" : "t10k";
    char image_stem[64], label_stem[64];
    snprintf(image_stem, sizeof image_stem, "%s-images-idx3-ubyte", prefix);
    snprintf(label_stem, sizeof label_stem, "%s-labels-idx1-ubyte", prefix);

    snn_idx images, labels;
    memset(&images, 0, sizeof images);
    memset(&labels, 0, sizeof labels);
    snn_status st = read_idx_file(dir, image_stem, 3, &images);
    if (st == SNN_OK) st = read_idx_file(dir, label_stem, 1, &labels);
    if (st == SNN_OK) {
        char source[1200];
        snprintf(source, sizeof source, "'%s/%s' and '%s'", dir, image_stem, label_stem);
        st = snn_mnist_from_idx(name, &images, &labels, source, out);
    }
    snn_idx_free(&images);
    snn_idx_free(&labels);
    return st;
}
