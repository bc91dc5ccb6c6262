/*
 * sparse_conv_event.cu - the event-driven sparse conv on the GPU: only the nonzero inputs,
 * output-stationary; with its weight rows read from L1/L2, or staged in shared memory (the
 * EVENT_SMEM path). The GEMM path over the active channels, the weight transpose and the entry
 * points are in sparse_conv.cu; both paths sum the same terms in the same order, so they are
 * bitwise equal (tests/test_cuda_sparse.c).
 *
 *   y[n, o, p] = bias[o] + sum over nonzero x[n, c, window(p, t)], c ascending, t = (kh, kw)
 *                ascending, of x * wt[(c, t), o]
 *
 * One block = one image n, EV_PB consecutive output positions and a tile of 32 OJ output channels
 * (o0 .. o0 + 32 OJ: all of C_out when it fits and the grid is full, else split over o_blocks
 * blocks - C_out > 512, or a small batch whose images alone would leave SMs idle); the block
 * stages the input
 * rows those positions read, for a chunk of its active channels at a time, in shared memory
 * (coalesced along w; each channel's slice padded to an odd number of floats, so 32 lanes
 * reading 32 channels at one offset hit 32 banks), and one 64-bit mask per staged row of which
 * columns are nonzero (a warp ballot per 32 columns, bit iw + pad). A warp owns PW positions; a
 * lane owns output channels o0 + lane + 32 j (j < OJ), accumulators in registers (blocks of
 * other channel tiles stage the same rows and list the same terms: the split trades that
 * repeated bookkeeping for parallelism, and each block's weight rows shrink to 32 OJ floats,
 * which L1 holds better). For one position,
 * the lanes take 32 channels at once and each reads its KH KW-bit mask of nonzero taps off KH
 * row masks (a shift and an AND per row); a warp prefix sum of their counts writes the group's
 * nonzero (channel, tap) terms, in ascending order, into the warp's buffer; then the warp adds
 * x * wt[(c, t), :] (one coalesced C_out-float row) for each term, loading the rows of a batch
 * of terms before any of their FMAs, so that several loads are in flight instead of one
 * dependent load per term. The outputs go through shared memory to be written along p.
 * Work: one row of C_out FMAs per nonzero (input, tap) pair: firing rate x the dense FMAs, plus
 * KH mask reads per (active channel, position). Traffic: each FMA reads 4 B of
 * wt (L1 when the layer's weight fits, L2 otherwise) - no reuse across positions, which is why
 * this path wins at low firing rates and the GEMM path of sparse_conv.cu (reuse across 16-128
 * positions) above them.
 * Order: the same ascending (c, kh, kw) with one fmaf per nonzero term as the GEMM kernel, so
 * the two are bitwise equal; each output is summed by one lane of one block whatever the split.
 */
#include <stdint.h>

#include "kernels/cuda/cuda_common.cuh"
#include "sparse_conv_cuda.cuh"

#define EV_WARPS (SP_THREADS / 32)
#define EV_SMEM_BYTES (47 * 1024)    /* per block: dynamic, under the 48 KiB default with the static */

/* Rows of x one block reads: its positions span at most this many output rows. */
static int event_input_rows(const snn_conv2d_dims *d, int PB)
{
    const int out_rows = (PB + d->W_out - 2) / d->W_out + 1;
    int rows = (out_rows - 1) * d->stride + d->KH;
    return rows < d->H ? rows : d->H;
}

/* Shared memory of one event block (EV_SMEM_BYTES): the list (C_in ints, rounded up to 4), one
 * term buffer per warp (32 KH KW ints: a group's worth), the row masks (chunk, mask_words) as
 * 64-bit words, the staged rows (chunk, slice) floats (both strides odd), and with SW the
 * chunk's weight rows for the block's channel tile, (chunk, KH KW, tile_c) floats. At the end the
 * output tile (32 OJ channels at most, PB + 1) reuses everything after the list.
 * Grid: N * o_blocks * p_blocks blocks, block b = (n o_blocks + ob) p_blocks + pb.
 * SW (staged weights, the EVENT_SMEM path): each chunk also copies its channels' KH KW rows of
 * the tile from wt into shared memory (coalesced, once per block), and the terms read them there:
 * a row fetched once serves every position of the block, where without SW every nonzero term
 * reads its row from L1/L2 (4 B per FMA). It pays when the block's positions reuse the rows
 * (denser planes, wide blocks) and the layer's weight does not stay in L1; it costs a copy of
 * all KH KW rows of every active channel, used or not, and smaller chunks (more passes). */
template <int OJ, int PW, int KS, bool SW>
static __global__ void __launch_bounds__(SP_THREADS)
sparse_conv_event_kernel(float *__restrict__ y, const float *__restrict__ x,
                         const float *__restrict__ wt, const float *__restrict__ bias,
                         const float *__restrict__ activity, snn_conv2d_dims d, int p_blocks,
                         int o_blocks, int slice, int mask_words, int chunk)
{
    constexpr int PB = PW * EV_WARPS;                 /* positions per block */
    /* nonzero terms whose weight loads are issued together: 16 loads in flight per lane
     * (8 for OJ = 1), which bounds the registers they take */
    constexpr int EV_BATCH = OJ >= 16 ? 1 : OJ >= 8 ? 2 : OJ >= 4 ? 4 : 8;
    extern __shared__ __align__(16) float ev_smem[];
    int *list = (int *)ev_smem;                       /* C_in: the active channels */
    const int list_floats = (d.C_in + 3) & ~3;

    const int KH = KS ? KS : d.KH, KW = KS ? KS : d.KW, KK = KH * KW;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int p0 = (blockIdx.x % p_blocks) * PB, block_no = blockIdx.x / p_blocks;
    const int n = block_no / o_blocks, o0 = (block_no % o_blocks) * 32 * OJ;  /* channel tile */
    const int tile_c = min(32 * OJ, d.C_out - o0);                           /* its width */
    const int term_cap = 32 * (KS ? KS * KS : d.KH * d.KW);   /* one group of 32 channels */
    int *terms = (int *)(ev_smem + list_floats) + warp * term_cap;  /* this warp's term buffer */
    const int terms_floats = (EV_WARPS * term_cap + 1) & ~1;   /* keeps the masks 8-B aligned */
    unsigned long long *row_bits = (unsigned long long *)(ev_smem + list_floats + terms_floats);
    float *stage = ev_smem + list_floats + terms_floats + 2 * chunk * mask_words; /* (chunk, slice) */
    float *w_stage = stage + chunk * slice;           /* SW: (chunk, KK, tile_c) */
    const int P = d.H_out * d.W_out, HW = d.H * d.W;
    const int count = sparse_active_channels(list, activity, n, d.C_in);

    /* the input rows of this block's positions, clamped to the image */
    const int p_last = min(p0 + PB, P) - 1;
    const int row0 = max((p0 / d.W_out) * d.stride - d.pad, 0);
    const int row1 = min((p_last / d.W_out) * d.stride - d.pad + KH - 1, d.H - 1);
    const int rows = row1 - row0 + 1;
    const unsigned tap_row = (1u << KW) - 1u;

    float acc[PW][OJ];
#pragma unroll
    for (int i = 0; i < PW; i++)
#pragma unroll
        for (int j = 0; j < OJ; j++) acc[i][j] = 0.0f;

    for (int a0 = 0; a0 < count; a0 += chunk) {
        const int ca = min(chunk, count - a0);
        __syncthreads();   /* the previous chunk's stage is no longer read */
        for (int i = tid; i < ca * rows * d.W; i += SP_THREADS) {
            const int a = i / (rows * d.W), rw = i - a * rows * d.W;
            stage[a * slice + rw] = x[((size_t)n * d.C_in + list[a0 + a]) * HW +
                                      (size_t)row0 * d.W + rw];
        }
        if (SW) {   /* the chunk's weight rows of this tile, row r = a KK + t */
            for (int i = tid; i < ca * KK * tile_c; i += SP_THREADS) {
                const int r = i / tile_c, o = i - r * tile_c;
                const int a = r / KK, t = r - a * KK;
                w_stage[i] = __ldg(wt + ((size_t)list[a0 + a] * KK + t) * d.C_out + o0 + o);
            }
        }
        __syncthreads();
        /* row_bits[a][r] bit (iw + pad) = x[a, row0 + r, iw] != 0: one warp per staged row */
        for (int q = warp; q < ca * rows; q += EV_WARPS) {
            const int a = q / rows, r = q - a * rows;
            unsigned long long bits = 0;
            for (int w0 = 0; w0 < d.W; w0 += 32) {
                const bool on = w0 + lane < d.W && stage[a * slice + r * d.W + w0 + lane] != 0.0f;
                bits |= (unsigned long long)__ballot_sync(0xffffffffu, on) << (w0 + d.pad);
            }
            if (lane == 0) row_bits[a * mask_words + r] = bits;
        }
        __syncthreads();
#pragma unroll
        for (int i = 0; i < PW; i++) {
            const int p = p0 + warp + EV_WARPS * i;
            if (p >= P) break;
            const int oh = p / d.W_out, ow = p - oh * d.W_out;
            const int ih0 = oh * d.stride - d.pad, iw0 = ow * d.stride - d.pad;
            const int shift = ow * d.stride;          /* = iw0 + pad: bit of tap column 0 */
            const float *s_pos = stage - row0 * d.W + ih0 * d.W + iw0;  /* tap (0, 0) of plane 0 */
            for (int g = 0; g < ca; g += 32) {
                /* 1. lane: channel a0 + g + lane; its nonzero taps as a KH KW-bit mask */
                unsigned taps = 0;
                if (g + lane < ca) {
                    const unsigned long long *bits_c = row_bits + (g + lane) * mask_words;
#pragma unroll
                    for (int kh = 0; kh < KH; kh++) {
                        const int ih = ih0 + kh;
                        if (ih < 0 || ih >= d.H) continue;
                        const unsigned cols = (unsigned)(bits_c[ih - row0] >> shift) & tap_row;
                        taps |= cols << (kh * KW);
                    }
                }
                /* 2. the group's nonzero (channel, tap) terms into the warp's buffer, in
                 *    ascending (channel, tap): an exclusive prefix of the lanes' counts */
                const int mine = __popc(taps);
                int before = mine;
#pragma unroll
                for (int step = 1; step < 32; step <<= 1) {
                    const int up = __shfl_up_sync(0xffffffffu, before, step);
                    if (lane >= step) before += up;
                }
                const int total = __shfl_sync(0xffffffffu, before, 31);
                before -= mine;
                while (taps) {
                    const int t = __ffs(taps) - 1;
                    taps &= taps - 1;
                    terms[before++] = ((g + lane) << 5) | t;
                }
                __syncwarp();
                /* 3. the terms, EV_BATCH at a time: every weight load of a batch is issued
                 *    before its FMAs, which then run in the terms' order */
                for (int k = 0; k < total; k += EV_BATCH) {
                    float v[EV_BATCH], w[EV_BATCH][OJ];
#pragma unroll
                    for (int u = 0; u < EV_BATCH; u++) {
                        v[u] = 0.0f;
#pragma unroll
                        for (int j = 0; j < OJ; j++) w[u][j] = 0.0f;
                        if (k + u < total) {
                            const int term = terms[k + u];
                            const int a = term >> 5, t = term & 31;
                            const int kh = t / KW, kw = t - kh * KW;
                            v[u] = s_pos[a * slice + kh * d.W + kw];
                            const float *w_row =
                                SW ? w_stage + (a * KK + t) * tile_c
                                   : wt + ((size_t)list[a0 + a] * KK + t) * d.C_out + o0;
#pragma unroll
                            for (int j = 0; j < OJ; j++) {
                                const int o = lane + 32 * j;   /* in the tile */
                                if (o < tile_c) w[u][j] = SW ? w_row[o] : __ldg(w_row + o);
                            }
                        }
                    }
#pragma unroll
                    for (int u = 0; u < EV_BATCH; u++)
                        if (k + u < total)
#pragma unroll
                            for (int j = 0; j < OJ; j++) acc[i][j] = fmaf(v[u], w[u][j], acc[i][j]);
                }
                __syncwarp();   /* the buffer is rewritten by the next group */
            }
        }
    }

    /* out tile (tile_c, PB + 1) through shared memory (the +1 keeps the lanes' stores on 32
     * banks), then written along p */
    __syncthreads();
    float *out_tile = ev_smem + list_floats;   /* over the masks and the stage: all read */
#pragma unroll
    for (int i = 0; i < PW; i++)
#pragma unroll
        for (int j = 0; j < OJ; j++) {
            const int o = lane + 32 * j;
            if (o < tile_c) out_tile[o * (PB + 1) + warp + EV_WARPS * i] = acc[i][j];
        }
    __syncthreads();
    for (int i = tid; i < tile_c * PB; i += SP_THREADS) {
        const int o = i / PB, pp = i - o * PB, p = p0 + pp;
        if (p < P)
            y[((size_t)n * d.C_out + o0 + o) * P + p] =
                out_tile[o * (PB + 1) + pp] + (bias ? bias[o0 + o] : 0.0f);
    }
}

template <int OJ, int PW, bool SW>
static void launch_event_kernel(size_t bytes, float *y, const float *x, const float *wt,
                                const float *bias, const float *activity,
                                const snn_conv2d_dims *d, int slice, int mask_words, int chunk)
{
    constexpr int PB = PW * EV_WARPS;
    const int P = d->H_out * d->W_out, p_blocks = (P + PB - 1) / PB;
    const int o_blocks = (d->C_out + 32 * OJ - 1) / (32 * OJ);
    const unsigned blocks = (unsigned)((int64_t)d->N * o_blocks * p_blocks);
    void (*kernel)(float *, const float *, const float *, const float *, const float *,
                   snn_conv2d_dims, int, int, int, int, int) = sparse_conv_event_kernel<OJ, PW, 0, SW>;
    if (d->KH == 3 && d->KW == 3) kernel = sparse_conv_event_kernel<OJ, PW, 3, SW>;
    else if (d->KH == 1 && d->KW == 1) kernel = sparse_conv_event_kernel<OJ, PW, 1, SW>;
    SNN_CUDA_LAUNCH(kernel, blocks, SP_THREADS, bytes, y, x, wt, bias, activity, *d, p_blocks,
                    o_blocks, slice, mask_words, chunk);
}

/* The channel tile of the event kernel, as OJ (32 OJ channels per block, OJ in 1, 2, 4, 8, 16):
 * all of C_out when it fits in 16 x 32, else 512 at a time; then halved (down to 64 channels)
 * while the grid has fewer blocks than two per SM, so that a small batch still fills the GPU. */
static int event_tile_oj(const snn_conv2d_dims *d)
{
    int oj = 1;
    while (oj < 16 && 32 * oj < d->C_out) oj *= 2;
    const int64_t want = 2 * (int64_t)snn_cuda_sm_count();
    const int P = d->H_out * d->W_out;
    for (;;) {
        const int PB = (oj > 8 ? 2 : 4) * EV_WARPS, p_blocks = (P + PB - 1) / PB;
        const int64_t blocks = (int64_t)d->N * p_blocks * ((d->C_out + 32 * oj - 1) / (32 * oj));
        if (blocks >= want || oj <= 2) return oj;
        oj /= 2;
    }
}

/* The event kernel's shared-memory plan for a channel tile of 32 OJ: the staged rows per chunk;
 * chunk = 0 when it does not fit. */
typedef struct event_plan {
    int OJ, PB, slice, mask_words, chunk;
} event_plan;

static event_plan plan_event(const snn_conv2d_dims *d, int OJ, bool staged)
{
    event_plan e = {OJ, (OJ > 8 ? 2 : 4) * EV_WARPS, 0, 0, 0};
    const int P = d->H_out * d->W_out, p_blocks = (P + e.PB - 1) / e.PB;
    const int o_blocks = (d->C_out + 32 * OJ - 1) / (32 * OJ);
    const int tile_c = d->C_out < 32 * OJ ? d->C_out : 32 * OJ;
    const int rows = event_input_rows(d, e.PB);
    e.slice = (rows * d->W) | 1;                       /* odd: conflict-free lanes */
    e.mask_words = rows | 1;
    const size_t list_floats = (size_t)((d->C_in + 3) & ~3);
    const size_t terms_floats = (size_t)((EV_WARPS * 32 * d->KH * d->KW + 1) & ~1);
    if ((list_floats + terms_floats) * sizeof(float) >= EV_SMEM_BYTES) return e;
    const size_t budget = EV_SMEM_BYTES / sizeof(float) - list_floats - terms_floats;
    const size_t per_channel = (size_t)(e.slice + 2 * e.mask_words) +
                               (staged ? (size_t)d->KH * d->KW * tile_c : 0);
    int chunk = (int)(budget / per_channel);
    if (chunk > d->C_in) chunk = d->C_in;
    if (chunk >= 1 && (size_t)tile_c * (e.PB + 1) <= budget &&
        (int64_t)d->N * o_blocks * p_blocks <= 0x7fffffff)
        e.chunk = chunk;
    return e;
}

/* Launches the event kernel; false if the kernel has more than 32 taps, a padded row (W + 2 pad)
 * does not fit the 64-bit row masks, or the staging does not fit. Channel tile from
 * event_tile_oj; staged (weights in shared memory): at most 128 channels, fewer while a chunk
 * would hold under 4 channels. */
bool snn_sparse_event_launch_cuda(float *y, const float *x, const float *wt, const float *bias,
                                  const snn_conv2d_dims *d, const float *activity, bool staged)
{
    if (d->KH * d->KW > 32 || d->W + 2 * d->pad > 64) return false;
    int OJ = event_tile_oj(d);
    if (staged && OJ > 4) OJ = 4;
    event_plan e = plan_event(d, OJ, staged);
    while (staged && e.chunk < 4 && OJ > 1) e = plan_event(d, OJ /= 2, staged);
    if (e.chunk < 1) return false;
    const size_t bytes = EV_SMEM_BYTES;
#define SNN_EVENT_ARGS bytes, y, x, wt, bias, activity, d, e.slice, e.mask_words, e.chunk
    if (staged) {
        switch (OJ) {
        case 1: launch_event_kernel<1, 4, true>(SNN_EVENT_ARGS); break;
        case 2: launch_event_kernel<2, 4, true>(SNN_EVENT_ARGS); break;
        default: launch_event_kernel<4, 4, true>(SNN_EVENT_ARGS); break;
        }
        return true;
    }
    switch (OJ) {
    case 1: launch_event_kernel<1, 4, false>(SNN_EVENT_ARGS); break;
    case 2: launch_event_kernel<2, 4, false>(SNN_EVENT_ARGS); break;
    case 4: launch_event_kernel<4, 4, false>(SNN_EVENT_ARGS); break;
    case 8: launch_event_kernel<8, 4, false>(SNN_EVENT_ARGS); break;
    default: launch_event_kernel<16, 2, false>(SNN_EVENT_ARGS); break;
    }
#undef SNN_EVENT_ARGS
    return true;
}
