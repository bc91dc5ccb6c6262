/*
 * image_layout.h - reading (N, C, H, W) or (T, N, C, H, W) inputs (internal to autograd/).
 *
 * Stateless image ops (conv, pooling, batch-norm) fold time into the batch: a 5-D input is
 * processed as (T*N, C, H, W) and the output keeps the leading (T, N) dims.
 */
#ifndef SNN_IMAGE_LAYOUT_H
#define SNN_IMAGE_LAYOUT_H

#include "tensor/error.h"
#include "tensor/tensor.h"

typedef struct image_layout {
    int N, C, H, W;       /* N = T*N for 5-D input */
    int time_steps;       /* T for 5-D input, 0 for 4-D */
} image_layout;

/* image_layout_read without the check that x holds values (x not NULL): for an op that reads
 * spikes kept as bits too */
static inline int image_layout_of(const char *fn, const char *arg, const snn_tensor *x,
                                  image_layout *l)
{
    const int64_t *d = x->shape.dim;
    if (x->shape.ndim == 4) {
        *l = (image_layout){(int)d[0], (int)d[1], (int)d[2], (int)d[3], 0};
    } else if (x->shape.ndim == 5) {
        *l = (image_layout){(int)(d[0] * d[1]), (int)d[2], (int)d[3], (int)d[4], (int)d[0]};
    } else {
        char buf[96];
        snn_error(SNN_ERR_ARGUMENT, "%s: bad argument '%s' (expected 4-D (N, C, H, W) or 5-D "
                  "(T, N, C, H, W), got %d-D %s)", fn, arg, x->shape.ndim,
                  snn_shape_str(x->shape, buf, sizeof buf));
        return 1;
    }
    return 0;
}

static inline int image_layout_read(const char *fn, const char *arg, const snn_tensor *x,
                                    image_layout *l)
{
    return snn_check_tensor(fn, arg, x) || image_layout_of(fn, arg, x, l);
}

/* The output shape for C channels of H x W, with x's leading dims. */
static inline snn_shape image_layout_shape(const image_layout *l, int C, int H, int W)
{
    if (l->time_steps)
        return SNN_SHAPE(l->time_steps, l->N / l->time_steps, C, H, W);
    return SNN_SHAPE(l->N, C, H, W);
}

#endif /* SNN_IMAGE_LAYOUT_H */
