/*
 * conv2d_args.h - the argument checks the conv ops share (internal to autograd/): fn_conv2d.c
 * defines snn_conv2d_prepare, fn_conv2d_bn_eval.c calls it too.
 */
#ifndef SNN_CONV2D_ARGS_H
#define SNN_CONV2D_ARGS_H

#include "image_layout.h"
#include "kernels/kernels.h"

/* Checks x (N, C, H, W) or (T, N, C, H, W), w (C_out, C, KH, KW), b (C_out) or NULL, stride
 * and pad, and fills *l and *dims; the device's kernels, or NULL with the error set. x may be
 * spikes kept as bits where bits_ok. */
const snn_kernels *snn_conv2d_prepare(const char *fn, snn_tensor *x, snn_tensor *w,
                                      snn_tensor *b, int stride, int pad, bool bits_ok,
                                      image_layout *l, snn_conv2d_dims *dims);

#endif /* SNN_CONV2D_ARGS_H */
