/*
 * sparse_cpu.h - what the CPU sparse conv's two files share (internal to sparse/):
 * sparse_conv.c (weights, active channels, the GEMM path, the whole-image event path and the
 * driver snn_sparse_conv2d_cpu) and sparse_conv_banded.c (the event path a band of output rows
 * at a time, for planes up to 64 wide).
 */
#ifndef SNN_SPARSE_CPU_H
#define SNN_SPARSE_CPU_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/kernels.h"

/* y[o, p0 + i] = acc[i, o] (+ bias[o]) for i < np, o < C_out: acc (np, C_out), y (C_out, P);
 * 16 x 16 blocks in AVX-512 registers where available. */
void snn_sparse_store_transposed(float *y, int64_t P, int64_t p0, int np, const float *acc,
                                 int C_out, const float *bias);

/* Whether a layer's planes suit the banded event path (one 64-bit word per input row). */
bool snn_sparse_band_fits(const snn_conv2d_dims *d);
/* Output rows per band: the accumulator within 16 KiB, at least one row. */
int snn_sparse_band_rows(const snn_conv2d_dims *d);
/* Output rows [oy_begin, oy_end) (whole bands from oy_begin) and channels [o0, o0 + oc) of
 * y_n (C_out, P), image n, by the banded event path, bias included. acc, part (rows * W_out,
 * oc); masks (C_in, H); row_read (H): whether some output reads input row iy; list: the
 * n_active active channels ascending; slice, fused: the dense SGEMM's K grouping and rounding.
 * The whole image is oy_begin = 0, oy_end = H_out, o0 = 0, oc = C_out. */
void snn_sparse_events_banded(float *yn, float *acc, float *part, uint64_t *masks,
                              const unsigned char *row_read, const int *list, int n_active,
                              const float *xn, const float *wt, const float *bias,
                              const snn_conv2d_dims *d, int64_t slice, bool fused, int rows,
                              int oy_begin, int oy_end, int o0, int oc);

#endif /* SNN_SPARSE_CPU_H */
