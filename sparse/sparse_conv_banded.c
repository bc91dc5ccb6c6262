/*
 * sparse_conv_banded.c - the CPU event path a band of output rows at a time (planes up to 64
 * wide; sparse_conv.c holds the rest of the CPU sparse conv and its exactness argument).
 *
 * The whole-image form of sparse_conv.c scatters into a whole image's yT (P, C_out): zeroed,
 * added to slice by slice and transposed as a whole, passes over P * C_out floats whatever the
 * firing rate, with the
 * scattered adds landing anywhere in a buffer that lives in L2, and a data-dependent branch per
 * input element to find the spikes. The banded form computes a band of a few output rows at a
 * time, so the accumulator (band positions, C_out) stays in L1 (about 16 KiB), and finds the
 * spikes with bit masks:
 *
 *   1. masks: for each active channel and each input row some output reads, a 64-bit mask of
 *      the nonzero elements, bit ix + pad for column ix (one AVX-512 compare per 16 elements).
 *   2. per band, per K slice, per active channel (ascending), the channel's terms that land in
 *      the band. Stride 1, spike by spike: each row's set bits once, then the spike's taps, kh
 *      picking the output row oy = iy + pad - kh and kw the output ox = ix + pad - kw (for one
 *      output: rows in ascending iy = ascending kh, spikes in ascending ix = ascending kw).
 *      Stride s > 1, tap by tap: for t = (kh, kw) ascending and each output row oy, the input row
 *      iy = oy*s - pad + kh; its mask shifted right by kw and cut to every s-th bit (pext) has bit
 *      ox where x[iy, ox*s - pad + kw] != 0. Either way, per term: acc[oy, ox, :] +=
 *      x * wt[(c, t), :] (one FMA, or multiply-then-add, per 16 channels).
 *   3. the band is transposed into y (C_out, P) by 16 x 16 register blocks, the bias added.
 *
 * Order: for one output the terms of a channel come in ascending t, channels ascending, slices
 * in order, each slice from zero (the first slice with terms straight into the zeroed
 * accumulator, 0 + s being s; later ones in `part`, then added) - the dense grouping again. Rows
 * that no output reads (1x1 stride 2: the odd rows; the odd columns drop out in the extract) are
 * never scanned. Work: spikes * taps * C_out / 16 vector read-modify-writes in L1, plus H*W / 16
 * compares per active channel, plus P * C_out floats zeroed and transposed in L1 (y itself is
 * written once). Needs W + pad <= 64 and W_out <= 64 (one word per row); wider planes take the
 * whole-image form. Profiled (64->64 32x32, 5 % firing, one thread): about 55-60 % of the time in the
 * read-modify-writes, 10 % in the transposes (the writes of y), the rest loop control, zeroing
 * and scanning x; bands of 2048 or 8192 floats were no faster. */

#include <math.h>
#include <string.h>

#if defined(__AVX512F__) || defined(__BMI2__)
#include <immintrin.h>
#endif

#include "sparse_cpu.h"

#define BAND_FLOATS 4096   /* one band's accumulator: 16 KiB, half of a 32 KiB L1 */

#if defined(__GNUC__)
#define ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define ALWAYS_INLINE inline
#endif

/* One 64-bit word per row holds bit ix + pad for every column, every output column fits a word,
 * and a shift by kw stays below 64. */
bool snn_sparse_band_fits(const snn_conv2d_dims *d)
{
    return d->W >= 1 && d->W + d->pad <= 64 && d->W_out <= 64 && d->KW <= 64;
}

/* Output rows per band: the accumulator within BAND_FLOATS, at least one row. */
int snn_sparse_band_rows(const snn_conv2d_dims *d)
{
    int64_t per_row = (int64_t)d->W_out * d->C_out;
    int64_t rows = per_row > 0 ? BAND_FLOATS / per_row : 1;
    if (rows < 1) rows = 1;
    if (d->W_out > 0 && rows * d->W_out < 16)   /* whole 16 x 16 transpose blocks (4x4 planes) */
        rows = (16 + d->W_out - 1) / d->W_out;
    if (rows > d->H_out) rows = d->H_out;
    return (int)rows;
}

/* Bits i (i < n <= 64) set where row[i] != 0 (NaN counts as nonzero, as in the whole-image form). */
static uint64_t nonzero_bits(const float *row, int n)
{
    uint64_t m = 0;
#if defined(__AVX512F__)
    for (int i = 0; i < n; i += 16) {
        int left = n - i < 16 ? n - i : 16;
        __mmask16 k = (__mmask16)((1u << left) - 1u);
        __m512 v = _mm512_maskz_loadu_ps(k, row + i);
        m |= (uint64_t)_mm512_mask_cmp_ps_mask(k, v, _mm512_setzero_ps(), _CMP_NEQ_UQ) << i;
    }
#else
    for (int i = 0; i < n; i++)
        if (!(row[i] == 0.0f)) m |= (uint64_t)1 << i;
#endif
    return m;
}

/* Every s-th bit of m (bits 0, s, 2s, ...) packed into the low bits; every_s has those bits. */
static inline uint64_t every_sth_bit(uint64_t m, int s, uint64_t every_s)
{
#if defined(__BMI2__)
    (void)s;
    return _pext_u64(m, every_s);
#else
    uint64_t r = 0;
    m &= every_s;
    while (m) {
        int b = __builtin_ctzll(m);
        m &= m - 1;
        r |= (uint64_t)1 << (b / s);
    }
    return r;
#endif
}

/* o[0 : C_out] += v * w[0 : C_out], rounded as the dense path does (one FMA per term when fused,
 * else multiply then add). For v = 1 both are the plain add o + w. */
static inline void add_column(float *restrict o, const float *restrict w, float v, int C_out,
                              bool fused)
{
#if defined(__AVX512F__)
    const __m512 vv = _mm512_set1_ps(v);
    int j = 0;
    if (fused) {
        for (; j + 64 <= C_out; j += 64) {   /* 4 independent vectors per trip */
            __m512 o0 = _mm512_fmadd_ps(vv, _mm512_loadu_ps(w + j), _mm512_loadu_ps(o + j));
            __m512 o1 = _mm512_fmadd_ps(vv, _mm512_loadu_ps(w + j + 16), _mm512_loadu_ps(o + j + 16));
            __m512 o2 = _mm512_fmadd_ps(vv, _mm512_loadu_ps(w + j + 32), _mm512_loadu_ps(o + j + 32));
            __m512 o3 = _mm512_fmadd_ps(vv, _mm512_loadu_ps(w + j + 48), _mm512_loadu_ps(o + j + 48));
            _mm512_storeu_ps(o + j, o0);
            _mm512_storeu_ps(o + j + 16, o1);
            _mm512_storeu_ps(o + j + 32, o2);
            _mm512_storeu_ps(o + j + 48, o3);
        }
        for (; j + 16 <= C_out; j += 16)
            _mm512_storeu_ps(o + j, _mm512_fmadd_ps(vv, _mm512_loadu_ps(w + j), _mm512_loadu_ps(o + j)));
    } else {
        for (; j + 16 <= C_out; j += 16)
            _mm512_storeu_ps(o + j, _mm512_add_ps(_mm512_loadu_ps(o + j),
                                                  _mm512_mul_ps(vv, _mm512_loadu_ps(w + j))));
    }
    if (j < C_out) {   /* C_out not a multiple of 16: a masked tail */
        __mmask16 k = (__mmask16)((1u << (C_out - j)) - 1u);
        __m512 ov = _mm512_maskz_loadu_ps(k, o + j), wv = _mm512_maskz_loadu_ps(k, w + j);
        ov = fused ? _mm512_fmadd_ps(vv, wv, ov) : _mm512_add_ps(ov, _mm512_mul_ps(vv, wv));
        _mm512_mask_storeu_ps(o + j, k, ov);
    }
#else
    if (fused) {
        for (int j = 0; j < C_out; j++) o[j] = fmaf(v, w[j], o[j]);
    } else {
        for (int j = 0; j < C_out; j++) o[j] += v * w[j];
    }
#endif
}

/* Stride 1: dst (nb rows of W_out positions, oc) += the terms of channel c (plane (H, W),
 * row masks (H), bit j = column j - pad) with tap index t in [t0, t1), for the output rows oy0 ..
 * oy0+nb-1 and the oc channels whose weight columns start at wc (rows C_out apart). Spike by
 * spike: one pass over a row's set bits, then every tap of the spike: kh picks the output row
 * oy = iy + pad - kh, kw the output ox = j - kw. For one output, rows come in ascending iy
 * (= ascending kh) and, within a row, spikes in ascending j (= ascending kw).
 * (Stride 2 the same way measured slower than tap by tap, below.) */
static ALWAYS_INLINE void band_channel_s1_body(float *restrict dst, const float *plane,
                                               const uint64_t *masks, const float *wc, int t0,
                                               int t1, int oy0, int nb, const snn_conv2d_dims *d,
                                               int oc, bool fused)
{
    const int C_out = d->C_out, KW = d->KW, W = d->W, W_out = d->W_out, pad = d->pad;
    const int kh_first = t0 / KW, kh_last = (t1 - 1) / KW;
    /* the input rows that reach the band: iy = oy - pad + kh */
    int iy_lo = oy0 - pad + kh_first, iy_hi = oy0 + nb - 1 - pad + kh_last;
    if (iy_lo < 0) iy_lo = 0;
    if (iy_hi > d->H - 1) iy_hi = d->H - 1;
    for (int iy = iy_lo; iy <= iy_hi; iy++) {
        uint64_t m = masks[iy];
        if (!m) continue;
        /* kh with oy = iy + pad - kh inside the band */
        int kh_lo = iy + pad - (oy0 + nb - 1), kh_hi = iy + pad - oy0;
        if (kh_lo < kh_first) kh_lo = kh_first;
        if (kh_hi > kh_last) kh_hi = kh_last;
        const float *xr = plane + (int64_t)iy * W;   /* (W) */
        while (m) {
            const int j = __builtin_ctzll(m);      /* column j - pad */
            m &= m - 1;
            const float v = xr[j - pad];
            for (int kh = kh_lo; kh <= kh_hi; kh++) {
                float *orow = dst + (int64_t)(iy + pad - kh - oy0) * W_out * oc;
                int kw_lo = kh == kh_first ? t0 - kh * KW : 0;
                int kw_hi = kh == kh_last ? t1 - 1 - kh * KW : KW - 1;
                if (kw_lo < j - W_out + 1) kw_lo = j - W_out + 1;   /* ox = j - kw < W_out */
                if (kw_hi > j) kw_hi = j;                           /* ox >= 0 */
                for (int kw = kw_lo; kw <= kw_hi; kw++)
                    add_column(orow + (int64_t)(j - kw) * oc, wc + (int64_t)(kh * KW + kw) * C_out,
                               v, oc, fused);
            }
        }
    }
}

/* band_channel_s1_body twice, with `fused` a constant: the rounding choice leaves the inner loop
 * (measured: about 10 % off the event time of the 3x3 layers) */
static void band_channel_s1(float *restrict dst, const float *plane, const uint64_t *masks,
                            const float *wc, int t0, int t1, int oy0, int nb,
                            const snn_conv2d_dims *d, int oc, bool fused)
{
    if (fused) band_channel_s1_body(dst, plane, masks, wc, t0, t1, oy0, nb, d, oc, true);
    else band_channel_s1_body(dst, plane, masks, wc, t0, t1, oy0, nb, d, oc, false);
}

/* Stride > 1: dst (nb rows of W_out positions, oc) += the terms of channel c (plane (H, W),
 * row masks (H)) with tap index t in [t0, t1), for the output rows oy0 .. oy0+nb-1 and the oc
 * channels whose weight columns start at wc (rows C_out apart), tap by tap:
 * the row mask shifted by kw and cut to every s-th bit has bit ox where output ox reads a spike.
 * Columns that no output reads (1x1 stride 2: the odd ones) are never visited. */
static ALWAYS_INLINE void band_channel_taps_body(float *restrict dst, const float *plane,
                                                 const uint64_t *masks, const float *wc, int t0,
                                                 int t1, int oy0, int nb, const snn_conv2d_dims *d,
                                                 int oc, bool fused, uint64_t out_bits,
                                                 uint64_t every_s)
{
    const int C_out = d->C_out, s = d->stride, W = d->W, W_out = d->W_out;
    for (int t = t0; t < t1; t++) {
        const int kh = t / d->KW, kw = t % d->KW;
        const float *w = wc + (int64_t)t * C_out;   /* (C_out): this tap's column */
        for (int r = 0; r < nb; r++) {
            const int iy = (oy0 + r) * s - d->pad + kh;
            if (iy < 0 || iy >= d->H) continue;
            uint64_t m = masks[iy] >> kw;   /* bit j: column j - pad + kw */
            if (s != 1) m = every_sth_bit(m, s, every_s);   /* bit ox: column ox*s - pad + kw */
            m &= out_bits;
            const float *xr = plane + (int64_t)iy * W;      /* (W) */
            float *orow = dst + (int64_t)r * W_out * oc; /* (W_out, oc) */
            while (m) {
                const int ox = __builtin_ctzll(m);
                m &= m - 1;
                add_column(orow + (int64_t)ox * oc, w, xr[ox * s - d->pad + kw], oc, fused);
            }
        }
    }
}

static void band_channel_taps(float *restrict dst, const float *plane, const uint64_t *masks,
                              const float *wc, int t0, int t1, int oy0, int nb,
                              const snn_conv2d_dims *d, int oc, bool fused, uint64_t out_bits,
                              uint64_t every_s)
{
    if (fused)
        band_channel_taps_body(dst, plane, masks, wc, t0, t1, oy0, nb, d, oc, true, out_bits,
                               every_s);
    else
        band_channel_taps_body(dst, plane, masks, wc, t0, t1, oy0, nb, d, oc, false, out_bits,
                               every_s);
}

/* The output rows [oy_begin, oy_end) (whole bands from oy_begin) and channels [o0, o0 + oc) of
 * y_n (C_out, P), image n, by the banded event path, bias included. acc, part (band, oc);
 * masks (C_in, H); row_read (H): whether some output reads input row iy. */
void snn_sparse_events_banded(float *yn, float *acc, float *part, uint64_t *masks,
                              const unsigned char *row_read, const int *list, int n_active,
                              const float *xn, const float *wt, const float *bias,
                              const snn_conv2d_dims *d, int64_t slice, bool fused, int rows,
                              int oy_begin, int oy_end, int o0, int oc)
{
    const int KK = d->KH * d->KW, C_out = d->C_out, W_out = d->W_out, H = d->H;
    const int64_t K = (int64_t)d->C_in * KK, P = (int64_t)d->H_out * W_out;
    const int64_t plane_size = (int64_t)H * d->W;
    const uint64_t out_bits = W_out >= 64 ? ~(uint64_t)0 : ((uint64_t)1 << W_out) - 1;
    uint64_t every_s = 0;
    for (int b = 0; b < 64; b += d->stride) every_s |= (uint64_t)1 << b;
    /* 1. row masks, bit ix + pad, of the input rows the output rows read (iy = oy*s - pad + kh);
     * rows nobody reads stay 0 and are never looked at, rows outside the range are not read */
    int iy_lo = oy_begin * d->stride - d->pad, iy_hi = (oy_end - 1) * d->stride - d->pad + d->KH - 1;
    if (iy_lo < 0) iy_lo = 0;
    if (iy_hi > H - 1) iy_hi = H - 1;
    for (int a = 0; a < n_active; a++) {
        const float *plane = xn + (int64_t)list[a] * plane_size;
        for (int iy = iy_lo; iy <= iy_hi; iy++)
            masks[(int64_t)a * H + iy] =
                row_read[iy] ? nonzero_bits(plane + (int64_t)iy * d->W, d->W) << d->pad : 0;
    }
    /* 2, 3. band by band */
    for (int oy0 = oy_begin; oy0 < oy_end; oy0 += rows) {
        const int nb = oy_end - oy0 < rows ? oy_end - oy0 : rows;
        const int np = nb * W_out;
        const size_t bytes = (size_t)np * (size_t)oc * sizeof(float);
        memset(acc, 0, bytes);
        bool acc_used = false;   /* a slice summed straight into acc: 0 + s is s */
        int a = 0;
        for (int64_t k0 = 0; k0 < K && a < n_active; k0 += slice) {
            const int64_t k1 = k0 + slice < K ? k0 + slice : K;
            float *dst = acc_used ? part : acc;   /* a later slice: its own partial from zero */
            bool any = false;
            while (a < n_active && (int64_t)list[a] * KK < k1) {
                const int c = list[a];
                const int64_t c0 = (int64_t)c * KK;
                const int t0 = c0 < k0 ? (int)(k0 - c0) : 0;
                const int t1 = c0 + KK > k1 ? (int)(k1 - c0) : KK;
                if (!any && dst == part) memset(part, 0, bytes);
                any = true;
                if (d->stride == 1)
                    band_channel_s1(dst, xn + (int64_t)c * plane_size, masks + (int64_t)a * H,
                                    wt + c0 * C_out + o0, t0, t1, oy0, nb, d, oc, fused);
                else
                    band_channel_taps(dst, xn + (int64_t)c * plane_size, masks + (int64_t)a * H,
                                      wt + c0 * C_out + o0, t0, t1, oy0, nb, d, oc, fused,
                                      out_bits, every_s);
                if (c0 + KK > k1) break;   /* the channel goes on in the next slice */
                a++;
            }
            if (any && dst == part)
                for (int64_t i = 0; i < (int64_t)np * oc; i++) acc[i] += part[i];
            acc_used |= any;
        }
        snn_sparse_store_transposed(yn + (int64_t)o0 * P, P, (int64_t)oy0 * W_out, np, acc, oc,
                                    bias ? bias + o0 : NULL);
    }
}
