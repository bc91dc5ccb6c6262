/*
 * sparse_conv.c - the CPU sparse conv kernels: channel-compacted GEMM and event-driven.
 *
 * Both compute, per image n (one (t, n) plane stack), for the active channels A(n) only:
 *
 *   y[n, o, p] = bias[o] + sum_{c in A(n), kh, kw} w[o, c, kh, kw] x[n, c, p*s - pad + (kh, kw)]
 *
 * Weights come prepared twice (snn_sparse_prepare_weights): wt (C_in*KH*KW, C_out), row k =
 * (c*KH + kh)*KW + kw holding w[:, c, kh, kw] C_out contiguous, for the event path; then the same
 * cut into tiles of 32 output channels, (C_out / 32, K, 32), for the GEMM path, so one tile's
 * rows are one contiguous block (a row-gather from (K, C_out) at a 2 KiB stride missed cache on
 * every row: 512-channel layers read the weights from L3 once per image). Each image's result
 * is built transposed, yT (P, C_out) with P = H_out * W_out, so the innermost loops run over
 * C_out, and is transposed into y at the end (16 x 16 blocks in AVX-512 registers).
 *
 * GEMM path. im2col over the active channels only: col (K', P) with K' = KH*KW*|A| rows, in
 * ascending k. Then yT (P, C_out) += col^T (P, K') x wt[rows of A] (K', C_out), by an 8 x 32
 * register tile (AVX-512: 16 accumulators) that broadcasts col[k', p] and streams a wt row.
 * Work: C_out * K' * P multiply-adds instead of C_out * K * P; traffic: col K' * P floats
 * written and read, wt rows of the active channels read once per 8 output positions.
 *
 * Event path. For each spike x[n, c, iy, ix] != 0 and each tap (kh, kw) that lands on an output
 * (oy, ox) = ((iy + pad - kh) / s, (ix + pad - kw) / s), add x * wt[(c, kh, kw), :] to the row
 * (oy, ox) of a transposed accumulator. Work: spikes * KH*KW * C_out adds, independent of the
 * silent inputs; it wins when the active channels themselves are sparse (low firing rates).
 * Planes up to 64 wide take the banded form (sparse_conv_banded.c): a band of a
 * few output rows at a time, its accumulator in L1, spikes found by 64-bit row masks, the band
 * transposed into y at once; wider planes the first form, a whole image's yT (P, C_out).
 * Measured on a 2-core Zen 4 (bench_sparse 2 16 9), the banded form is about 1.3x (3x3 stride 1)
 * to 3x (1x1 stride 2) faster at 5 % firing; what is left is mostly the scattered
 * read-modify-writes themselves (about 1.2 ns per 16 floats, near this core's store rate).
 *
 * Exactness (why sparse == dense bit for bit on {0, 1} inputs). A term w * 0 adds exactly +-0
 * to a partial sum that is never -0, so dropping it changes nothing, PROVIDED the remaining
 * terms are summed in the same grouping. The dense path (conv2d.c + gemm.c) sums each output in
 * ascending k but in K slices: the blocked SGEMM cuts K = C_in*KH*KW into k_slices = ceil(K /
 * 512) equal slices, sums each slice from zero in a register (one FMA per k) and adds it to the
 * output; a small product takes the unpacked path, one slice (kernels/cpu/gemm.h,
 * snn_gemm_k_slice_cpu, states the grouping for a shape; the kernels ask it). Both sparse
 * kernels keep exactly that: terms in ascending k within a slice, a fresh partial sum per slice,
 * added to yT in slice order. For x in {0, 1}, x * w is exact, so FMA or multiply-then-add give
 * the same partial sums; for other values (SEW's residual sums of spikes, ST-BIF's +-theta) the
 * kernels also round as the dense path does - one FMA per term where gemm.c's blocked path uses
 * FMA, multiply-then-add where it does not (its unpacked path) - so the equality holds for any
 * input whose zeros are the skipped ones. tests/test_sparse.c checks the equality bitwise.
 *
 * Threads: images are independent; each OpenMP thread takes whole images with its own slice of
 * one scratch allocation: col (K, P), yT (P, C_out) and a slice partial (P, C_out) - for the
 * banded form one band's accumulator and partial, plus the row masks (C_in, H) - and the list of
 * active channels. With fewer images than threads (batch 1 x T = 4: 4 images, 16 threads) each
 * image is cut into parts - runs of output rows (whole bands) times runs of 32 output channels
 * (make_split) - and a thread takes a part: its own im2col or row masks for the input rows its
 * output rows read, its own accumulator (rows, channels), written into its block of y. Every
 * output is still summed by one thread in the order above, so the result does not depend on
 * the split or on the thread count. The team is one thread or all of them (cpu_threads.h).
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include <omp.h>

#if defined(__AVX512F__) || defined(__BMI2__)
#include <immintrin.h>
#endif

#include "sparse.h"
#include "sparse_cpu.h"
#include "tensor/arena.h"
#include "kernels/cpu/cpu_threads.h"
#include "tensor/error.h"
#include "kernels/cpu/gemm.h"

/* conv2d.c takes images in groups so that a group's SGEMM is at least 256 columns wide. */
#define DENSE_GROUP_COLUMNS 256

const char *snn_sparse_path_name(snn_sparse_path path)
{
    switch (path) {
    case SNN_SPARSE_AUTO: return "auto";
    case SNN_SPARSE_DENSE: return "dense";
    case SNN_SPARSE_GEMM: return "gemm";
    case SNN_SPARSE_EVENT: return "event";
    case SNN_SPARSE_EVENT_SMEM: return "event-smem";
    }
    return "?";
}

#define TILE_P 8    /* output positions per tile */
#define TILE_O 32   /* output channels per tile */

size_t snn_sparse_weights_floats(int C_out, int C_in, int KH, int KW)
{
    const size_t K = (size_t)C_in * KH * KW, tiles = (size_t)(C_out + TILE_O - 1) / TILE_O;
    return K * (size_t)C_out + tiles * K * TILE_O;
}

void snn_sparse_prepare_weights(float *wt, const float *w, int C_out, int C_in, int KH, int KW)
{
    const int64_t K = (int64_t)C_in * KH * KW;
    /* (K, C_out) for the event path */
    for (int o = 0; o < C_out; o++)
        for (int64_t k = 0; k < K; k++) wt[k * C_out + o] = w[(int64_t)o * K + k];
    /* (C_out / 32, K, 32) for the GEMM path, zero-padded: one tile's rows are contiguous */
    float *tiled = wt + K * C_out;
    for (int o0 = 0; o0 < C_out; o0 += TILE_O)
        for (int64_t k = 0; k < K; k++)
            for (int j = 0; j < TILE_O; j++)
                tiled[((int64_t)(o0 / TILE_O) * K + k) * TILE_O + j] =
                    o0 + j < C_out ? w[(int64_t)(o0 + j) * K + k] : 0.0f;
}

/* The blocked SGEMM's micro-kernel adds each term with one FMA when the build has FMA
 * instructions (gemm.c: AVX-512 or AVX2 + FMA); its unpacked path, and the portable
 * micro-kernel, multiply then add (ISO C mode: no contraction). */
#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#define DENSE_BLOCKED_FUSED true
#else
#define DENSE_BLOCKED_FUSED false
#endif

/* The length of the dense path's K slices for image n: conv2d.c groups G images, the group of
 * image n has `count` images, and its SGEMM is (C_out, count*P, K), whose grouping of the sum
 * snn_gemm_k_slice_cpu states (0: the unpacked path, one sequential multiply-then-add sum).
 * *fused: whether that SGEMM adds each term with an FMA. */
static int64_t dense_slice(const snn_conv2d_dims *d, int n, bool *fused)
{
    const int64_t K = (int64_t)d->C_in * d->KH * d->KW, P = (int64_t)d->H_out * d->W_out;
    int64_t G = P >= DENSE_GROUP_COLUMNS / 2 ? 1 : (DENSE_GROUP_COLUMNS + P - 1) / P;
    if (G > d->N) G = d->N > 0 ? d->N : 1;
    int64_t n0 = n / G * G, count = d->N - n0 < G ? d->N - n0 : G;
    int slice = snn_gemm_k_slice_cpu(d->C_out, (int)(count * P), (int)K);
    *fused = slice > 0 && DENSE_BLOCKED_FUSED;
    return slice > 0 ? slice : K;
}

/* Active channels of image n: from its activity row, or by scanning its planes. */
static int active_channels(const float *x, const float *activity, const snn_conv2d_dims *d, int n,
                           int *list)
{
    int count = 0;
    const int64_t plane = (int64_t)d->H * d->W;
    for (int c = 0; c < d->C_in; c++) {
        bool on;
        if (activity) {
            on = activity[(int64_t)n * d->C_in + c] != 0.0f;
        } else {
            const float *xp = x + ((int64_t)n * d->C_in + c) * plane;
            on = false;
            for (int64_t i = 0; i < plane && !on; i++) on = xp[i] != 0.0f;
        }
        if (on) list[count++] = c;
    }
    return count;
}

/* The outputs ow in [*lo, *hi) read a real input column for tap kw; the rest read padding. */
static void valid_range(int W, int W_out, int stride, int pad, int kw, int *lo, int *hi)
{
    int first = pad - kw;
    *lo = first > 0 ? (first + stride - 1) / stride : 0;
    int last = W - 1 + pad - kw;
    *hi = last < 0 ? 0 : last / stride + 1;
    if (*hi > W_out) *hi = W_out;
    if (*lo > *hi) *lo = *hi;
}

/* col (n_active*KH*KW, np) <- im2col of the active channels of one image xn (C_in, H, W), for
 * the output rows oy0 .. oy1-1 only (np = (oy1 - oy0) * W_out positions). */
static void im2col_active(float *col, const float *xn, const int *list, int n_active,
                          const snn_conv2d_dims *d, int oy0, int oy1)
{
    const int64_t P = (int64_t)(oy1 - oy0) * d->W_out;
    for (int a = 0; a < n_active; a++) {
        const float *plane = xn + (int64_t)list[a] * d->H * d->W;  /* (H, W) */
        for (int kh = 0; kh < d->KH; kh++) {
            for (int kw = 0; kw < d->KW; kw++) {
                float *row = col + ((int64_t)(a * d->KH + kh) * d->KW + kw) * P;  /* (P) */
                int lo, hi;
                valid_range(d->W, d->W_out, d->stride, d->pad, kw, &lo, &hi);
                for (int oh = oy0; oh < oy1; oh++) {
                    float *dst = row + (int64_t)(oh - oy0) * d->W_out;
                    int ih = oh * d->stride - d->pad + kh;
                    if (ih < 0 || ih >= d->H) {
                        memset(dst, 0, (size_t)d->W_out * sizeof *dst);
                        continue;
                    }
                    const float *src = plane + (int64_t)ih * d->W - d->pad + kw;
                    for (int ow = 0; ow < lo; ow++) dst[ow] = 0.0f;
                    for (int ow = lo; ow < hi; ow++) dst[ow] = src[(int64_t)ow * d->stride];
                    for (int ow = hi; ow < d->W_out; ow++) dst[ow] = 0.0f;
                }
            }
        }
    }
}

/* yT[p0 : p0+mp, o0 : o0+mo] += sum over the col rows r0..r1 (ascending) of
 * col[r, p] * tile[krow[r], o - o0], the partial sum started from zero. tile (K, 32): the
 * weights of output channels o0 .. o0+31, one row per k. */
static void gemm_tile(float *restrict yT, int C_out, const float *restrict col, int64_t P,
                      const float *restrict tile, const int64_t *restrict krow, int64_t r0,
                      int64_t r1, int64_t p0, int mp, int o0, int mo, bool fused)
{
#if defined(__AVX512F__)
    if (fused && mp == TILE_P && mo == TILE_O) {
        __m512 acc0[TILE_P], acc1[TILE_P];
        for (int i = 0; i < TILE_P; i++) acc0[i] = acc1[i] = _mm512_setzero_ps();
        for (int64_t r = r0; r < r1; r++) {
            const float *wr = tile + krow[r] * TILE_O;
            const float *cr = col + r * P + p0;
            __m512 w0 = _mm512_loadu_ps(wr), w1 = _mm512_loadu_ps(wr + 16);
#pragma GCC unroll 8
            for (int i = 0; i < TILE_P; i++) {
                __m512 c = _mm512_set1_ps(cr[i]);
                acc0[i] = _mm512_fmadd_ps(c, w0, acc0[i]);
                acc1[i] = _mm512_fmadd_ps(c, w1, acc1[i]);
            }
        }
        for (int i = 0; i < TILE_P; i++) {
            float *yr = yT + (p0 + i) * C_out + o0;
            _mm512_storeu_ps(yr, _mm512_add_ps(_mm512_loadu_ps(yr), acc0[i]));
            _mm512_storeu_ps(yr + 16, _mm512_add_ps(_mm512_loadu_ps(yr + 16), acc1[i]));
        }
        return;
    }
    if (fused && mp == TILE_P && mo == TILE_O / 2) {   /* C_out = 16, or a last half tile */
        __m512 acc0[TILE_P];
        for (int i = 0; i < TILE_P; i++) acc0[i] = _mm512_setzero_ps();
        for (int64_t r = r0; r < r1; r++) {
            const float *cr = col + r * P + p0;
            __m512 w0 = _mm512_loadu_ps(tile + krow[r] * TILE_O);
#pragma GCC unroll 8
            for (int i = 0; i < TILE_P; i++) acc0[i] = _mm512_fmadd_ps(_mm512_set1_ps(cr[i]), w0, acc0[i]);
        }
        for (int i = 0; i < TILE_P; i++) {
            float *yr = yT + (p0 + i) * C_out + o0;
            _mm512_storeu_ps(yr, _mm512_add_ps(_mm512_loadu_ps(yr), acc0[i]));
        }
        return;
    }
#endif
    float acc[TILE_P][TILE_O];
    for (int i = 0; i < mp; i++)
        for (int j = 0; j < mo; j++) acc[i][j] = 0.0f;
    for (int64_t r = r0; r < r1; r++) {
        const float *wr = tile + krow[r] * TILE_O;
        const float *cr = col + r * P + p0;
        for (int i = 0; i < mp; i++) {
            float c = cr[i];
            if (fused) {
                for (int j = 0; j < mo; j++) acc[i][j] = fmaf(c, wr[j], acc[i][j]);
            } else {
                for (int j = 0; j < mo; j++) acc[i][j] += c * wr[j];
            }
        }
    }
    for (int i = 0; i < mp; i++) {
        float *yr = yT + (p0 + i) * C_out + o0;
        for (int j = 0; j < mo; j++) yr[j] += acc[i][j];
    }
}

/* Scratch of one worker, carved out of one allocation. */
typedef struct worker {
    float *col;      /* (K, np) */
    float *yT;       /* (np, oc) */
    float *part;     /* (np, oc): a slice's partial sums (event path) */
    int *list;       /* (C_in) active channels */
    int64_t *krow;   /* (K) wt row of each col row */
} worker;

static size_t round_up(size_t bytes) { return (bytes + 63) / 64 * 64; }

/* yT (np, oc) of one part of image xn by the GEMM path: output rows oy0 .. oy1-1 (np = their
 * positions) and channels o0 .. o0+oc-1 (o0 a multiple of 32). */
static void image_gemm(worker *wk, const float *xn, const float *wt, const snn_conv2d_dims *d,
                       int n_active, int64_t slice, bool fused, int oy0, int oy1, int o0, int oc)
{
    const int64_t np = (int64_t)(oy1 - oy0) * d->W_out;
    const int KK = d->KH * d->KW;
    const int64_t rows = (int64_t)n_active * KK;
    im2col_active(wk->col, xn, wk->list, n_active, d, oy0, oy1);
    for (int a = 0; a < n_active; a++)
        for (int t = 0; t < KK; t++) wk->krow[(int64_t)a * KK + t] = (int64_t)wk->list[a] * KK + t;
    /* the col rows of each dense K slice form one contiguous run [r0, r1) */
    for (int64_t r0 = 0; r0 < rows;) {
        int64_t k_end = (wk->krow[r0] / slice + 1) * slice, r1 = r0;  /* end of r0's slice */
        while (r1 < rows && wk->krow[r1] < k_end) r1++;
        /* o outer, p inner: the (r1 - r0, 32) strip of wt a column of tiles reads stays in L2
         * while every position meets it (p outer streamed all of wt once per 8 positions) */
        const int64_t K = (int64_t)d->C_in * KK;
        const float *tiled = wt + K * d->C_out;   /* (C_out / 32, K, 32) */
        for (int o = o0; o < o0 + oc; o += TILE_O) {
            int mo = o0 + oc - o < TILE_O ? o0 + oc - o : TILE_O;
            const float *tile = tiled + (int64_t)(o / TILE_O) * K * TILE_O;
            for (int64_t p0 = 0; p0 < np; p0 += TILE_P) {
                int mp = np - p0 < TILE_P ? (int)(np - p0) : TILE_P;
                gemm_tile(wk->yT, oc, wk->col, np, tile, wk->krow, r0, r1, p0, mp, o - o0, mo,
                          fused);
            }
        }
        r0 = r1;
    }
}

/* part (np, oc) += the events of channel c whose tap index t = kh*KW + kw is in [t0, t1) and
 * that land on the output rows oy0 .. oy1-1, channels o0 .. o0+oc-1. */
static void channel_events(float *restrict part, const float *plane, const float *wt, int c,
                           int t0, int t1, const snn_conv2d_dims *d, bool fused, int oy0, int oy1,
                           int o0, int oc)
{
    const int C_out = d->C_out, KK = d->KH * d->KW, s = d->stride;
    const float *wc = wt + (int64_t)c * KK * C_out + o0;   /* (KK, C_out): this channel's columns */
    /* the input rows some tap of the rows oy0 .. oy1-1 reads: iy = oy * s - pad + kh */
    int iy_lo = oy0 * s - d->pad, iy_hi = (oy1 - 1) * s - d->pad + d->KH - 1;
    if (iy_lo < 0) iy_lo = 0;
    if (iy_hi > d->H - 1) iy_hi = d->H - 1;
    for (int iy = iy_lo; iy <= iy_hi; iy++) {
        const float *xr = plane + (int64_t)iy * d->W;
        for (int ix = 0; ix < d->W; ix++) {
            const float v = xr[ix];
            if (v == 0.0f) continue;
            /* taps in ascending t; kh, kw stepped along without divisions */
            int kh = t0 / d->KW, kw = t0 % d->KW;
            for (int t = t0; t < t1; t++) {
                int ny = iy + d->pad - kh, nx = ix + d->pad - kw;   /* = oy * s, ox * s */
                if (++kw == d->KW) kw = 0, kh++;
                if (ny < 0 || nx < 0) continue;
                int oy = ny, ox = nx;
                if (s != 1) {
                    if (ny % s || nx % s) continue;
                    oy = ny / s, ox = nx / s;
                }
                if (oy < oy0 || oy >= oy1 || ox >= d->W_out) continue;
                float *restrict o = part + ((int64_t)(oy - oy0) * d->W_out + ox) * oc;
                const float *restrict w = wc + (int64_t)t * C_out;
                if (v == 1.0f) {
                    for (int j = 0; j < oc; j++) o[j] += w[j];     /* a spike: add the column */
                } else {
                    /* any other value: round as the dense path does */
                    if (fused) {
                        for (int j = 0; j < oc; j++) o[j] = fmaf(v, w[j], o[j]);
                    } else {
                        for (int j = 0; j < oc; j++) o[j] += v * w[j];
                    }
                }
            }
        }
    }
}

/* yT (np, oc) of one part of image xn by the event path (rows oy0 .. oy1-1, channels o0 ..
 * o0+oc-1). For one output, the loops above meet its terms in ascending (c, kh, kw) - c outer,
 * then iy (ascending kh), then ix (ascending kw) - which is the dense k order; a slice's partial
 * sum is built in `part` from zero and added to yT. */
static void image_events(worker *wk, const float *xn, const float *wt, const snn_conv2d_dims *d,
                         int n_active, int64_t slice, bool fused, int oy0, int oy1, int o0, int oc)
{
    const int64_t np = (int64_t)(oy1 - oy0) * d->W_out;
    const int KK = d->KH * d->KW;
    const int64_t K = (int64_t)d->C_in * KK;
    const size_t bytes = (size_t)(np * oc) * sizeof(float);
    const bool one_slice = slice >= K;
    float *part = one_slice ? wk->yT : wk->part; /* one slice: its partial is the result */
    int a = 0;
    for (int64_t k0 = 0; k0 < K && a < n_active; k0 += slice) {
        int64_t k1 = k0 + slice < K ? k0 + slice : K;
        if (!one_slice) memset(part, 0, bytes);
        bool any = false;
        while (a < n_active && (int64_t)wk->list[a] * KK < k1) {
            int c = wk->list[a];
            int64_t c0 = (int64_t)c * KK;
            int t0 = c0 < k0 ? (int)(k0 - c0) : 0;
            int t1 = c0 + KK > k1 ? (int)(k1 - c0) : KK;
            channel_events(part, xn + (int64_t)c * d->H * d->W, wt, c, t0, t1, d, fused, oy0, oy1,
                           o0, oc);
            any = true;
            if (c0 + KK > k1) break;   /* the channel goes on in the next slice */
            a++;
        }
        if (!one_slice && any)
            for (int64_t i = 0; i < np * oc; i++) wk->yT[i] += part[i];
    }
}

/* y[o, p0 + i] = acc[i, o] (+ bias[o]) for i < np, o < C_out: acc (np, C_out), y (C_out, P). */
void snn_sparse_store_transposed(float *y, int64_t P, int64_t p0, int np, const float *acc,
                                 int C_out, const float *bias)
{
    int i0 = 0;
#if defined(__AVX512F__)
    /* 16 x 16 blocks in registers: 16 rows of 16 channels in, 16 rows of 16 positions out */
    for (; i0 + 16 <= np; i0 += 16) {
        int o0 = 0;
        for (; o0 + 16 <= C_out; o0 += 16) {
            __m512 r[16], t[16];
            for (int i = 0; i < 16; i++) r[i] = _mm512_loadu_ps(acc + (int64_t)(i0 + i) * C_out + o0);
            for (int i = 0; i < 16; i += 2) {   /* per 128-bit lane: a0 b0 a1 b1 | a2 b2 a3 b3 */
                t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
                t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
            }
            for (int i = 0; i < 16; i += 4) {   /* r[i + k], lane L: column 4L + k of rows i..i+3 */
                r[i] = _mm512_shuffle_ps(t[i], t[i + 2], 0x44);
                r[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], 0xEE);
                r[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0x44);
                r[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
            }
            for (int k = 0; k < 4; k++) {       /* gather lane L of r[k], r[4+k], r[8+k], r[12+k] */
                __m512 a = _mm512_shuffle_f32x4(r[k], r[4 + k], 0x88);      /* lanes 0, 2 */
                __m512 b = _mm512_shuffle_f32x4(r[8 + k], r[12 + k], 0x88);
                __m512 c = _mm512_shuffle_f32x4(r[k], r[4 + k], 0xDD);      /* lanes 1, 3 */
                __m512 e = _mm512_shuffle_f32x4(r[8 + k], r[12 + k], 0xDD);
                t[k] = _mm512_shuffle_f32x4(a, b, 0x88);        /* column k */
                t[8 + k] = _mm512_shuffle_f32x4(a, b, 0xDD);    /* column 8 + k */
                t[4 + k] = _mm512_shuffle_f32x4(c, e, 0x88);    /* column 4 + k */
                t[12 + k] = _mm512_shuffle_f32x4(c, e, 0xDD);   /* column 12 + k */
            }
            float *yp = y + (int64_t)o0 * P + p0 + i0;   /* one pointer stepped by P: 16 would spill */
            if (bias) {
                for (int j = 0; j < 16; j++, yp += P)
                    _mm512_storeu_ps(yp, _mm512_add_ps(t[j], _mm512_set1_ps(bias[o0 + j])));
            } else {
                for (int j = 0; j < 16; j++, yp += P) _mm512_storeu_ps(yp, t[j]);
            }
        }
        for (int o = o0; o < C_out; o++)   /* channels past the last 16-block */
            for (int i = i0; i < i0 + 16; i++) {
                float v = acc[(int64_t)i * C_out + o];
                y[(int64_t)o * P + p0 + i] = bias ? v + bias[o] : v;
            }
    }
#endif
    for (int o = 0; o < C_out && i0 < np; o++)   /* positions past the last 16-block */
        for (int i = i0; i < np; i++) {
            float v = acc[(int64_t)i * C_out + o];
            y[(int64_t)o * P + p0 + i] = bias ? v + bias[o] : v;
        }
}

/* How one call shares its work among threads. With at least as many images as threads, a task
 * is an image. With fewer (batch 1 x T = 4 is 4 images), each image is cut into
 * row_parts x ch_parts parts: output rows in runs of whole row units (the banded path's bands,
 * or rows of at least 32 positions) and output channels in runs of whole 32-channel tiles. Each
 * output is still summed by one thread in the one order, so every split gives the same bits. */
typedef struct sparse_split {
    int team;          /* OpenMP threads: 1, or the configured count (kernels/cpu/cpu_threads.h) */
    int row_unit;      /* output rows per row unit */
    int row_units;     /* ceil(H_out / row_unit) */
    int row_parts;     /* row ranges per image */
    int ch_parts;      /* channel ranges per image */
    int part_rows;     /* the most output rows a part has */
    int part_channels; /* the most output channels a part has */
} sparse_split;

static sparse_split make_split(const snn_conv2d_dims *d, bool banded, int band_rows)
{
    sparse_split sp;
    /* units of work: every input element is looked at, every output element written */
    const int64_t work = (int64_t)d->N * ((int64_t)d->C_in * d->H * d->W +
                                          (int64_t)d->C_out * d->H_out * d->W_out);
    sp.team = snn_cpu_threads(work);
    sp.row_unit = banded ? band_rows : d->W_out > 0 ? (32 + d->W_out - 1) / d->W_out : 1;
    if (sp.row_unit > d->H_out) sp.row_unit = d->H_out > 0 ? d->H_out : 1;
    sp.row_units = d->H_out > 0 ? (d->H_out + sp.row_unit - 1) / sp.row_unit : 1;
    sp.row_parts = sp.ch_parts = 1;
    const int parts = d->N < sp.team ? sp.team / d->N : 1;   /* threads per image */
    const int ch_units = (d->C_out + TILE_O - 1) / TILE_O;
    /* the grid of at most `parts` parts whose largest part holds the fewest units; ties: more
     * row parts (a channel part scans all of its rows' spikes again) */
    int64_t best = INT64_MAX;
    for (int cp = 1; cp <= parts && cp <= ch_units; cp++) {
        int rp = parts / cp < sp.row_units ? parts / cp : sp.row_units;
        int64_t most = (int64_t)((sp.row_units + rp - 1) / rp) * ((ch_units + cp - 1) / cp);
        if (most < best) best = most, sp.row_parts = rp, sp.ch_parts = cp;
    }
    sp.part_rows = (sp.row_units + sp.row_parts - 1) / sp.row_parts * sp.row_unit;
    if (sp.part_rows > d->H_out) sp.part_rows = d->H_out;
    sp.part_channels = (ch_units + sp.ch_parts - 1) / sp.ch_parts * TILE_O;
    if (sp.part_channels > d->C_out) sp.part_channels = d->C_out;
    return sp;
}

/* Part `index` of row_parts x ch_parts: output rows [*oy0, *oy1), channels [*o0, *o0 + *oc). */
static void split_part(const sparse_split *sp, const snn_conv2d_dims *d, int index, int *oy0,
                       int *oy1, int *o0, int *oc)
{
    const int r = index / sp->ch_parts, c = index % sp->ch_parts;
    const int ch_units = (d->C_out + TILE_O - 1) / TILE_O;
    const int u0 = sp->row_units * r / sp->row_parts, u1 = sp->row_units * (r + 1) / sp->row_parts;
    const int t0 = ch_units * c / sp->ch_parts, t1 = ch_units * (c + 1) / sp->ch_parts;
    *oy0 = u0 * sp->row_unit;
    *oy1 = u1 * sp->row_unit < d->H_out ? u1 * sp->row_unit : d->H_out;
    *o0 = t0 * TILE_O;
    *oc = (t1 * TILE_O < d->C_out ? t1 * TILE_O : d->C_out) - *o0;
}

snn_status snn_sparse_conv2d_cpu(float *y, const float *x, const float *wt, const float *bias,
                                 const snn_conv2d_dims *d, const float *activity,
                                 snn_sparse_path path)
{
    if (path == SNN_SPARSE_EVENT_SMEM) path = SNN_SPARSE_EVENT;   /* a CUDA variant of it */
    SNN_ASSERT(path == SNN_SPARSE_GEMM || path == SNN_SPARSE_EVENT);
    if (d->N <= 0) return SNN_OK;
    const int64_t P = (int64_t)d->H_out * d->W_out, K = (int64_t)d->C_in * d->KH * d->KW;
    const bool banded = path == SNN_SPARSE_EVENT && snn_sparse_band_fits(d);
    const int rows = banded ? snn_sparse_band_rows(d) : 0;
    const sparse_split sp = make_split(d, banded, rows);
    const int parts = sp.row_parts * sp.ch_parts, tasks = d->N * parts;
    /* a part's positions: the whole image's, a run of its rows, or one band at a time */
    const int64_t part_P = (int64_t)(banded ? rows : sp.part_rows) * d->W_out;
    const size_t col_bytes =
        path == SNN_SPARSE_GEMM ? round_up((size_t)(K * part_P) * sizeof(float)) : 0;
    /* yT (part_P, channels), or with bands the accumulator of one band */
    const size_t y_bytes = round_up((size_t)(part_P * sp.part_channels) * sizeof(float));
    const size_t part_bytes = path == SNN_SPARSE_EVENT ? y_bytes : 0;
    const size_t list_bytes = round_up((size_t)d->C_in * sizeof(int));
    const size_t krow_bytes = path == SNN_SPARSE_GEMM ? round_up((size_t)K * sizeof(int64_t)) : 0;
    const size_t mask_bytes = banded ? round_up((size_t)d->C_in * (size_t)d->H * sizeof(uint64_t)) : 0;
    const size_t per_worker = col_bytes + y_bytes + part_bytes + list_bytes + krow_bytes + mask_bytes;
    const size_t shared_bytes = banded ? round_up((size_t)d->H) : 0;   /* row_read (H) */
    /* one slice per thread of the team: a dynamic schedule hands tasks to any of them */
    const size_t total = shared_bytes + per_worker * (size_t)sp.team;
    /* Scratch from the step arena when a step is open (as the dense conv's workspace): a fresh
     * heap block per call came back from the kernel as new pages, whose faults cost as much as a
     * whole 1x1 layer at low firing (and the GEMM path's col buffer, megabytes, every call).
     * The arena is not thread-safe: a call from inside a parallel region takes the heap. */
    const bool in_step = snn_step_depth() > 0 && !omp_in_parallel();
    snn_step_scratch mark = {0};
    if (in_step) mark = snn_step_scratch_mark(SNN_CPU);
    char *scratch = in_step ? snn_step_alloc("snn_sparse_conv2d_cpu", total, SNN_CPU)
                            : snn_alloc(total, SNN_CPU);
    if (!scratch) {
        if (in_step) snn_step_scratch_release(SNN_CPU, mark);
        return snn_error(SNN_ERR_MEMORY, "snn_sparse_conv2d_cpu: out of host memory (%zu bytes of "
                         "scratch)", total);
    }
    /* row_read[iy]: some output row oy and tap kh read input row iy = oy*s - pad + kh */
    unsigned char *row_read = (unsigned char *)scratch;
    if (banded) {
        memset(row_read, 0, (size_t)d->H);
        for (int oy = 0; oy < d->H_out; oy++)
            for (int kh = 0; kh < d->KH; kh++) {
                int iy = oy * d->stride - d->pad + kh;
                if (iy >= 0 && iy < d->H) row_read[iy] = 1;
            }
    }

    /* one task per image, or per part of an image (make_split); the team is 1 or all threads,
     * and a thread past the last task just meets the others at the end */
#pragma omp parallel for num_threads(sp.team) schedule(dynamic, 1)
    for (int task = 0; task < tasks; task++) {
        const int n = task / parts;
        int oy0, oy1, o0, oc;
        split_part(&sp, d, task % parts, &oy0, &oy1, &o0, &oc);
        char *base = scratch + shared_bytes + per_worker * (size_t)omp_get_thread_num();
        worker wk = {(float *)base, (float *)(base + col_bytes),
                     (float *)(base + col_bytes + y_bytes),
                     (int *)(base + col_bytes + y_bytes + part_bytes),
                     (int64_t *)(base + col_bytes + y_bytes + part_bytes + list_bytes)};
        uint64_t *masks = (uint64_t *)(base + col_bytes + y_bytes + part_bytes + list_bytes +
                                       krow_bytes);   /* (C_in, H) */
        const float *xn = x + (int64_t)n * d->C_in * d->H * d->W;      /* (C_in, H, W) */
        float *yn = y + (int64_t)n * d->C_out * P;                       /* (C_out, P) */
        int n_active = active_channels(x, activity, d, n, wk.list);
        bool fused;
        int64_t slice = dense_slice(d, n, &fused);
        if (banded) {   /* writes its part of y_n itself, bias included */
            snn_sparse_events_banded(yn, wk.yT, wk.part, masks, row_read, wk.list, n_active, xn,
                                     wt, bias, d, slice, fused, rows, oy0, oy1, o0, oc);
            continue;
        }
        const int64_t np = (int64_t)(oy1 - oy0) * d->W_out;
        memset(wk.yT, 0, (size_t)(np * oc) * sizeof(float));
        if (n_active > 0) {
            if (path == SNN_SPARSE_GEMM)
                image_gemm(&wk, xn, wt, d, n_active, slice, fused, oy0, oy1, o0, oc);
            else
                image_events(&wk, xn, wt, d, n_active, slice, fused, oy0, oy1, o0, oc);
        }
        /* its part of y_n (C_out, P) = yT^T (+ bias, added last as the dense path does), by
         * 16 x 16 blocks: the block's 16 rows of yT (16 * oc floats) stay in L1 while 16 runs
         * of 64 bytes of y are written (a whole-column walk of yT was slower than the event
         * pass itself) */
        snn_sparse_store_transposed(yn + (int64_t)o0 * P, P, (int64_t)oy0 * d->W_out, (int)np,
                                    wk.yT, oc, bias ? bias + o0 : NULL);
    }
    if (in_step) snn_step_scratch_release(SNN_CPU, mark);
    else snn_free(scratch, total, SNN_CPU);
    return SNN_OK;
}
