/*
 * conv2d.c - 2-D convolution on the CPU as im2col + SGEMM (forward and backward).
 *
 * Dims (snn_conv2d_dims in kernels.h): N images, C_in -> C_out channels, H x W input,
 * KH x KW kernel, one stride and one zero padding for both axes, H_out x W_out output.
 * Short names below: CK = C_in * KH * KW (one output's receptive field), P = H_out * W_out.
 *
 * The op is cross-correlation, as PyTorch's Conv2d:
 *
 *   out[n, co, oh, ow] = bias[co] + sum_{ci, kh, kw} weight[co, ci, kh, kw]
 *                                   * x[n, ci, oh * stride - pad + kh, ow * stride - pad + kw]
 *
 * with x read as 0 outside the image. Its gradients are
 *
 *   dweight[co, ci, kh, kw] += sum_{n, oh, ow} dout[n, co, oh, ow] * x[n, ci, ih, iw]
 *   dx[n, ci, ih, iw]       += sum_{co, kh, kw} weight[co, ci, kh, kw] * dout[n, co, oh, ow]
 *   dbias[co]               += sum_{n, oh, ow} dout[n, co, oh, ow]
 *
 * (ih = oh * stride - pad + kh, iw likewise). Backward ACCUMULATES and skips a NULL output,
 * except that a conv that keeps its shape takes dx == dout (snn_conv2d_dx_over_dout_cpu): each
 * group's dx is then written, once both SGEMMs have read that group's dout.
 *
 * im2col. For one image, the column matrix col (CK, P) holds in row r = (ci * KH + kh) * KW + kw
 * and column p = oh * W_out + ow the input value weight[:, ci, kh, kw] meets at output (oh, ow):
 *
 *   col[(ci, kh, kw), (oh, ow)] = x[n, ci, oh * stride - pad + kh, ow * stride - pad + kw]  (or 0)
 *
 * The weight (C_out, C_in, KH, KW) is already the matrix (C_out, CK) with the same row order, so
 *
 *   forward   out_n (C_out, P) = weight (C_out, CK) x col_n (CK, P)          one SGEMM
 *   backward  dweight (C_out, CK) += dout_n (C_out, P) x col_n^T (P, CK)      SGEMM, trans_b
 *             dcol_n (CK, P) = weight^T (CK, C_out) x dout_n (C_out, P)      SGEMM, trans_a,
 *             dx_n += col2im(dcol_n): each dcol entry added back where im2col read it.
 *
 * A 1x1, stride 1, pad 0 conv needs no im2col: x_n (C_in, H*W) already is col_n (when images
 * run one per SGEMM; the grouped path below copies them side by side like any other conv).
 *
 * Small outputs (late ResNet layers have P = 16 or 64) make thin SGEMMs, so images are taken in
 * groups of G: col (CK, G*P) holds the columns of G images side by side (column g * P + p), one
 * SGEMM covers the group, and a scratch (C_out, G*P) is scattered to / gathered from the
 * (N, C_out, P) layout of out and dout. G = 1 (no scratch) once P is wide enough on its own.
 *
 * Threads. Every region runs on one thread or on the whole configured team, never a smaller
 * team (kernels/cpu/cpu_threads.h: a smaller team makes GCC's OpenMP end threads and start them
 * again). With at least as many groups as threads, each thread takes a contiguous run of
 * groups and its own slice of the workspace, and calls the single-threaded SGEMM (a batch of
 * 128 images keeps 2-64 threads busy without any synchronisation). With fewer groups than
 * threads (batch 1 x T = 4 is 4 images; 16 threads) the forward splits each group over
 * parts = threads / groups threads: first all threads build the groups' columns (rows of col
 * shared out evenly), then, after a barrier, thread t computes part t % parts of group
 * t / parts's SGEMM (snn_gemm_part_cpu: a rectangle of output channels x positions, each output
 * summed exactly as the whole SGEMM sums it) and scatters and biases its rectangle. No sum
 * changes order, so the forward gives the same bits on every path and at any thread count
 * (tests/test_cpu_threads.c). A forward under one grain of work (cpu_threads.h) runs on one
 * thread.
 * Backward: dweight is a sum over all images: worker 0 (of min(groups, threads) workers) adds
 * straight into dweight, every other worker into a private (C_out, CK) partial, and the
 * partials are added in worker order at the end, so the result is deterministic for a given
 * thread count and nothing races; dx is one group's, and does not depend on the threads.
 *
 * Memory traffic per image: im2col writes CK * P floats (KH * KW times the input for stride 1),
 * the SGEMM reads them once per C_out block; forward arithmetic is C_out * CK * P FMAs, backward
 * twice that.
 *
 * Test: tests/test_conv2d_kernels.c (against direct 7-loop convolutions).
 * Bench: bench/bench_conv2d.c.
 */
#include <stdint.h>
#include <string.h>

#include <omp.h>

#include "cpu_threads.h"
#include "tensor/error.h"
#include "gemm.h"
#include "kernels_cpu.h"

/* A group's SGEMM should be at least this many columns wide (4 NR-wide micro-panels of the
 * AVX-512 SGEMM), so 4x4 and 8x8 outputs are batched 16 and 4 images at a time. */
#define GROUP_COLUMNS 256

/* How one call is split up; a pure function of the dims and the thread count, so that
 * snn_conv2d_workspace_bytes_cpu and the kernels agree. */
typedef struct conv_plan {
    int64_t CK;           /* C_in * KH * KW: rows of col */
    int64_t P;            /* H_out * W_out: columns of col per image */
    int G;                /* images per group */
    int groups;           /* ceil(N / G) */
    int threads;          /* workers, min(groups, team), each with its own workspace slice */
    int team;             /* OpenMP threads of a parallel region: the configured count */
    bool direct;          /* 1x1 stride 1 pad 0, one image per group: x is col */
    size_t col_floats;    /* per worker: col (CK, G*P), 0 when direct */
    size_t tmp_floats;    /* per worker: out/dout scratch (C_out, G*P), 0 when G == 1 */
    size_t slice_floats;  /* per worker: col + tmp, rounded to 64 bytes */
    size_t dw_floats;     /* per worker after the first: a dweight partial (C_out, CK) */
} conv_plan;

static size_t round_up_16(size_t n) { return (n + 15) / 16 * 16; } /* 16 floats = 64 bytes */

static conv_plan make_plan(const snn_conv2d_dims *d)
{
    conv_plan plan;
    plan.CK = (int64_t)d->C_in * d->KH * d->KW;
    plan.P = (int64_t)d->H_out * d->W_out;
    plan.G = plan.P >= GROUP_COLUMNS / 2 ? 1 : (int)((GROUP_COLUMNS + plan.P - 1) / plan.P);
    if (plan.G > d->N) plan.G = d->N > 0 ? d->N : 1;
    plan.groups = d->N > 0 ? (d->N + plan.G - 1) / plan.G : 0;
    plan.team = omp_in_parallel() ? 1 : omp_get_max_threads();
    plan.threads = plan.groups < plan.team ? plan.groups : plan.team;
    if (plan.threads < 1) plan.threads = 1;
    plan.direct = d->KH == 1 && d->KW == 1 && d->stride == 1 && d->pad == 0 && plan.G == 1;
    int64_t cols = plan.G * plan.P;
    plan.col_floats = plan.direct ? 0 : round_up_16((size_t)(plan.CK * cols));
    plan.tmp_floats = plan.G == 1 ? 0 : round_up_16((size_t)((int64_t)d->C_out * cols));
    plan.slice_floats = plan.col_floats + plan.tmp_floats;
    plan.dw_floats = round_up_16((size_t)((int64_t)d->C_out * plan.CK));
    return plan;
}

/* Workspace: one slice per worker (col, plus the scatter/gather scratch when G > 1) and one
 * dweight partial per worker after the first. It depends on the OpenMP thread count, so query
 * it right before the call, as the op layer does. Example, 2 threads, 64 -> 64 channels 3x3
 * at 32x32: 2 x (576 x 1024) + (64 x 576) floats = 4.9 MB. */
size_t snn_conv2d_workspace_bytes_cpu(const snn_conv2d_dims *d)
{
    conv_plan plan = make_plan(d);
    size_t floats = (size_t)plan.threads * plan.slice_floats +
                    (size_t)(plan.threads - 1) * plan.dw_floats;
    return floats * sizeof(float);
}

/* ---------------------------------------------------------------------------------------------
 * im2col / col2im for the images n0 .. n0+count-1 into / from col (CK, count*P).
 * ------------------------------------------------------------------------------------------- */

/* The outputs ow in [*lo, *hi) read a real input column iw = ow * stride - pad + kw in [0, W);
 * the others read padding. */
static void valid_range(int W, int W_out, int stride, int pad, int kw, int *lo, int *hi)
{
    int first = pad - kw; /* ow * stride must reach this */
    *lo = first > 0 ? (first + stride - 1) / stride : 0;
    int last = W - 1 + pad - kw; /* ow * stride must not pass this */
    *hi = last < 0 ? 0 : last / stride + 1;
    if (*hi > W_out) *hi = W_out;
    if (*lo > *hi) *lo = *hi;
}

/* Rows [r0, r1) of col (CK, count*P), row r = (ci * KH + kh) * KW + kw. */
static void im2col_rows(float *col, const float *x, int n0, int count, const snn_conv2d_dims *d,
                        int64_t r0, int64_t r1)
{
    const int64_t P = (int64_t)d->H_out * d->W_out, cols = count * P;
    for (int64_t r = r0; r < r1; r++) {
        const int ci = (int)(r / (d->KH * d->KW)), kh = (int)(r / d->KW % d->KH),
                  kw = (int)(r % d->KW);
        float *row = col + r * cols; /* (count*P) */
        int lo, hi;
        valid_range(d->W, d->W_out, d->stride, d->pad, kw, &lo, &hi);
        for (int g = 0; g < count; g++) {
            const float *plane = x + ((int64_t)(n0 + g) * d->C_in + ci) * d->H * d->W;
            for (int oh = 0; oh < d->H_out; oh++) {
                float *dst = row + g * P + (int64_t)oh * d->W_out; /* (W_out) */
                int ih = oh * d->stride - d->pad + kh;
                if (ih < 0 || ih >= d->H) {
                    memset(dst, 0, (size_t)d->W_out * sizeof *dst);
                    continue;
                }
                const float *src = plane + (int64_t)ih * d->W - d->pad + kw; /* at ow=0 */
                for (int ow = 0; ow < lo; ow++) dst[ow] = 0.0f;
                if (d->stride == 1) {
                    memcpy(dst + lo, src + lo, (size_t)(hi - lo) * sizeof *dst);
                } else {
                    for (int ow = lo; ow < hi; ow++) dst[ow] = src[(int64_t)ow * d->stride];
                }
                for (int ow = hi; ow < d->W_out; ow++) dst[ow] = 0.0f;
            }
        }
    }
}

static void im2col(float *col, const float *x, int n0, int count, const snn_conv2d_dims *d)
{
    im2col_rows(col, x, n0, count, d, 0, (int64_t)d->C_in * d->KH * d->KW);
}

/* dx[n0 .. n0+count-1] += col2im(dcol): the exact transpose of im2col (padding reads dropped). */
static void col2im_add(float *dx, const float *dcol, int n0, int count, const snn_conv2d_dims *d)
{
    const int64_t P = (int64_t)d->H_out * d->W_out, cols = count * P;
    for (int ci = 0; ci < d->C_in; ci++) {
        for (int kh = 0; kh < d->KH; kh++) {
            for (int kw = 0; kw < d->KW; kw++) {
                const float *row = dcol + ((int64_t)(ci * d->KH + kh) * d->KW + kw) * cols;
                int lo, hi;
                valid_range(d->W, d->W_out, d->stride, d->pad, kw, &lo, &hi);
                for (int g = 0; g < count; g++) {
                    float *plane = dx + ((int64_t)(n0 + g) * d->C_in + ci) * d->H * d->W;
                    for (int oh = 0; oh < d->H_out; oh++) {
                        int ih = oh * d->stride - d->pad + kh;
                        if (ih < 0 || ih >= d->H) continue;
                        const float *src = row + g * P + (int64_t)oh * d->W_out; /* (W_out) */
                        float *dst = plane + (int64_t)ih * d->W - d->pad + kw;    /* at ow=0 */
                        if (d->stride == 1) {
                            for (int ow = lo; ow < hi; ow++) dst[ow] += src[ow];
                        } else {
                            for (int ow = lo; ow < hi; ow++) dst[(int64_t)ow * d->stride] += src[ow];
                        }
                    }
                }
            }
        }
    }
}

/* ---------------------------------------------------------------------------------------------
 * Forward.
 * ------------------------------------------------------------------------------------------- */

typedef void (*gemm_fn)(bool, bool, int, int, int, float, const float *, int, const float *, int,
                        float, float *, int);

/* The group's SGEMM wrote rows [r.m0, r.m1) x columns [r.n0, r.n1) of its result: with G > 1
 * that is tmp (C_out, count*P), whose column g*P + p goes to out[n0 + g, co, p]; then the bias
 * is added there (after the sum, as a separate add: the sparse convs add it the same way). */
static void finish_rect(float *out, const float *tmp, const float *bias, const snn_conv2d_dims *d,
                        const conv_plan *plan, int n0, int count, snn_gemm_rect r)
{
    const int64_t P = plan->P, cols = count * P;
    for (int co = r.m0; co < r.m1; co++) {
        for (int64_t j = r.n0; j < r.n1;) {
            /* the columns of one image: [j, end) of image g at positions p0 .. */
            const int64_t g = j / P, p0 = j % P, end = (g + 1) * P < r.n1 ? (g + 1) * P : r.n1;
            float *o = out + ((n0 + g) * d->C_out + co) * P + p0; /* (end - j) */
            if (plan->G > 1) memcpy(o, tmp + co * cols + j, (size_t)(end - j) * sizeof *o);
            if (bias)
                for (int64_t p = 0; p < end - j; p++) o[p] += bias[co];
            j = end;
        }
    }
}

/* Part `part` of `parts` of group `group`'s output, its columns already in col (the worker's
 * slice). parts == 1: the whole group with `gemm` (serial or threaded); else the rectangle
 * snn_gemm_part_cpu gives that part. */
static void forward_part(float *out, const float *x, const float *weight, const float *bias,
                         const snn_conv2d_dims *d, const conv_plan *plan, int group, int part,
                         int parts, float *slice, gemm_fn gemm)
{
    const int n0 = group * plan->G;
    const int count = d->N - n0 < plan->G ? d->N - n0 : plan->G;
    const int P = (int)plan->P, cols = count * P, CK = (int)plan->CK;
    float *tmp = slice + plan->col_floats;    /* (C_out, count*P), when G > 1 */
    /* direct: x_n is col; G == 1: out_n (C_out, P) is the SGEMM's C, written in place */
    const float *b_matrix = plan->direct ? x + (int64_t)n0 * d->C_in * P : slice;
    float *c_matrix = plan->G == 1 ? out + (int64_t)n0 * d->C_out * P : tmp;

    /* c (C_out, count*P) = weight (C_out, CK) x col (CK, count*P) */
    snn_gemm_rect r = {0, d->C_out, 0, cols};
    if (parts == 1)
        gemm(false, false, d->C_out, cols, CK, 1.0f, weight, CK, b_matrix, cols, 0.0f, c_matrix, cols);
    else
        snn_gemm_part_cpu(false, false, d->C_out, cols, CK, 1.0f, weight, CK, b_matrix, cols, 0.0f,
                          c_matrix, cols, part, parts, &r);
    if (r.m0 < r.m1 && r.n0 < r.n1 && (plan->G > 1 || bias)) finish_rect(out, tmp, bias, d, plan, n0, count, r);
}

/* out for the images of group `group`, using one worker's slice (col, tmp). */
static void forward_group(float *out, const float *x, const float *weight, const float *bias,
                          const snn_conv2d_dims *d, const conv_plan *plan, int group,
                          float *slice, gemm_fn gemm)
{
    const int n0 = group * plan->G;
    if (!plan->direct) im2col(slice, x, n0, d->N - n0 < plan->G ? d->N - n0 : plan->G, d);
    forward_part(out, x, weight, bias, d, plan, group, 0, 1, slice, gemm);
}

/* Splits `groups` into `parts` contiguous runs; run `index` is [*begin, *end). */
static void split_groups(int groups, int parts, int index, int *begin, int *end)
{
    int base = groups / parts, extra = groups % parts;
    *begin = index * base + (index < extra ? index : extra);
    *end = *begin + base + (index < extra ? 1 : 0);
}

/* Fewer groups than threads: all `team` threads build every group's columns, then each takes
 * one part of one group's SGEMM (group t / parts, part t % parts). Group g's col and tmp are
 * worker slice g (plan.threads = groups slices). */
static void forward_split(float *out, const float *x, const float *weight, const float *bias,
                          const snn_conv2d_dims *d, const conv_plan *plan, float *workspace,
                          int team)
{
    const int parts = team / plan->groups;   /* 1 (3 threads, 2 groups) or more */
#pragma omp parallel num_threads(team)
    {
        const int t = omp_get_thread_num();
        if (!plan->direct) {
            /* rows of all groups' col, (groups * CK) of them, in even runs */
            const int64_t rows = plan->groups * plan->CK;
            const int64_t r0 = rows * t / team, r1 = rows * (t + 1) / team;
            for (int64_t r = r0; r < r1;) {
                const int group = (int)(r / plan->CK);
                const int64_t end = (group + 1) * plan->CK < r1 ? (group + 1) * plan->CK : r1;
                const int n0 = group * plan->G;
                im2col_rows(workspace + (size_t)group * plan->slice_floats, x, n0,
                            d->N - n0 < plan->G ? d->N - n0 : plan->G, d, r - group * plan->CK,
                            end - group * plan->CK);
                r = end;
            }
#pragma omp barrier
        }
        if (t < plan->groups * parts)
            forward_part(out, x, weight, bias, d, plan, t / parts, t % parts, parts,
                         workspace + (size_t)(t / parts) * plan->slice_floats,
                         snn_gemm_serial_cpu);
    }
}

void snn_conv2d_forward_cpu(float *out, const float *x, const float *weight, const float *bias,
                            const snn_conv2d_dims *d, float *workspace)
{
    conv_plan plan = make_plan(d);
    if (plan.groups == 0) return;
    const int64_t fmas = (int64_t)d->N * d->C_out * plan.CK * plan.P;
    const int team = snn_cpu_threads(fmas / SNN_CPU_FMAS_PER_UNIT);
    if (team == 1) {
        for (int group = 0; group < plan.groups; group++)
            forward_group(out, x, weight, bias, d, &plan, group, workspace, snn_gemm_serial_cpu);
        return;
    }
    if (plan.groups < team) {
        forward_split(out, x, weight, bias, d, &plan, workspace, team);
        return;
    }
#pragma omp parallel num_threads(team)
    {
        int t = omp_get_thread_num(), begin, end;
        split_groups(plan.groups, team, t, &begin, &end);
        float *slice = workspace + (size_t)t * plan.slice_floats;
        for (int group = begin; group < end; group++)
            forward_group(out, x, weight, bias, d, &plan, group, slice, snn_gemm_serial_cpu);
    }
}

/* The forward, then the eval-mode batch-norm over its output in place (the CPU has no fused
 * kernel: the batch-norm reads what the conv wrote, as two calls would). */
void snn_conv2d_forward_bn_eval_cpu(float *out, const float *x, const float *weight,
                                    const float *bias, const snn_bn_eval *bn,
                                    const snn_conv2d_dims *d, float *workspace)
{
    snn_conv2d_forward_cpu(out, x, weight, bias, d, workspace);
    snn_batchnorm_forward_eval_cpu(out, out, bn->gamma, bn->beta, bn->running_mean,
                                   bn->running_var, d->N, d->C_out, d->H_out * d->W_out, bn->eps);
}

/* ---------------------------------------------------------------------------------------------
 * Backward.
 * ------------------------------------------------------------------------------------------- */

/* dweight_target (+)= dout_g x col_g^T and dx += col2im(weight^T x dout_g) for one group.
 * `first` is true for the worker's first group when it writes a private partial (beta = 0). */
static void backward_group(float *dx, float *dweight_target, bool first, const float *dout,
                           const float *x, const float *weight, const snn_conv2d_dims *d,
                           const conv_plan *plan, int group, float *slice, gemm_fn gemm)
{
    const int n0 = group * plan->G;
    const int count = d->N - n0 < plan->G ? d->N - n0 : plan->G;
    const int P = (int)plan->P, cols = count * P, CK = (int)plan->CK;
    float *col = slice;                       /* (CK, count*P): col, then dcol */
    float *tmp = slice + plan->col_floats;    /* (C_out, count*P), when G > 1 */

    /* dout of the group as one (C_out, count*P) matrix */
    const float *dout_g = dout + (int64_t)n0 * d->C_out * P;
    if (plan->G > 1) {
        for (int g = 0; g < count; g++)
            for (int co = 0; co < d->C_out; co++)
                memcpy(tmp + (int64_t)co * cols + (int64_t)g * P,
                       dout + ((int64_t)(n0 + g) * d->C_out + co) * P, (size_t)P * sizeof *tmp);
        dout_g = tmp;
    }

    if (dweight_target) {
        const float *col_g = x + (int64_t)n0 * d->C_in * P; /* direct: x_n is col */
        if (!plan->direct) {
            im2col(col, x, n0, count, d);
            col_g = col;
        }
        /* dweight (C_out, CK) (+)= dout_g (C_out, cols) x col_g^T; col_g is stored (CK, cols) */
        gemm(false, true, d->C_out, CK, cols, 1.0f, dout_g, cols, col_g, cols,
             first ? 0.0f : 1.0f, dweight_target, CK);
    }

    if (dx) {
        /* dx over dout: the group's dout has been read (by both SGEMMs below, or copied into
         * tmp); its dx, the same images' same floats, starts from 0 */
        const bool over = dx == dout;
        if (plan->direct) {
            /* dx_n (C_in, P) += weight^T (C_in, C_out) x dout_n; weight is stored (C_out, C_in) */
            gemm(true, false, CK, P, d->C_out, 1.0f, weight, CK, dout_g, P, 1.0f,
                 dx + (int64_t)n0 * d->C_in * P, P);
        } else {
            /* dcol (CK, cols) = weight^T x dout_g, overwriting col, then scattered into dx */
            gemm(true, false, CK, cols, d->C_out, 1.0f, weight, CK, dout_g, cols, 0.0f, col, cols);
            if (over)
                memset(dx + (int64_t)n0 * d->C_in * d->H * d->W, 0,
                       (size_t)count * d->C_in * d->H * d->W * sizeof *dx);
            col2im_add(dx, col, n0, count, d);
        }
    }
}

/* dx over dout (kernels.h): stride 1 and the shape kept, so a group's dx is its dout's floats;
 * not the direct 1x1 path, whose SGEMM adds into dx while it reads dout */
bool snn_conv2d_dx_over_dout_cpu(const snn_conv2d_dims *d)
{
    return snn_conv2d_keeps_shape(d) && !make_plan(d).direct;
}

void snn_conv2d_backward_cpu(float *dx, float *dweight, float *dbias, const float *dout,
                             const float *x, const float *weight, const snn_conv2d_dims *d,
                             float *workspace)
{
    conv_plan plan = make_plan(d);
    if (plan.groups == 0) return;
    const int64_t P = plan.P;

    /* dbias[co] += sum over images and positions: the bias kernel's per-channel sum, in double
     * and in a fixed order (as the CUDA side), so 10^5-term sums agree to float rounding. */
    if (dbias) snn_bias_backward_cpu(dbias, dout, d->N, d->C_out, P);
    if (!dx && !dweight) return;
    SNN_ASSERT(dx != dout || snn_conv2d_dx_over_dout_cpu(d));

    if (plan.threads == 1) {
        for (int group = 0; group < plan.groups; group++)
            backward_group(dx, dweight, false, dout, x, weight, d, &plan, group, workspace,
                           snn_gemm_cpu);
        return;
    }

    /* Worker 0 accumulates into dweight itself; worker t > 0 into its partial (C_out, CK). The
     * region runs on the whole team (cpu_threads.h); threads past the workers have no groups. */
    float *partials = workspace + (size_t)plan.threads * plan.slice_floats;
#pragma omp parallel num_threads(plan.team)
    {
        int t = omp_get_thread_num(), begin, end;
        if (t < plan.threads) {
            split_groups(plan.groups, plan.threads, t, &begin, &end);
            float *slice = workspace + (size_t)t * plan.slice_floats;
            float *target = NULL;
            if (dweight) target = t == 0 ? dweight : partials + (size_t)(t - 1) * plan.dw_floats;
            for (int group = begin; group < end; group++)
                backward_group(dx, target, t > 0 && group == begin, dout, x, weight, d, &plan,
                               group, slice, snn_gemm_serial_cpu);
        }
    }
    if (dweight) {
        /* dweight += partial_1 + partial_2 + ..., in that order for every element */
        const int64_t count = (int64_t)d->C_out * plan.CK;
#pragma omp parallel for schedule(static) \
    num_threads(snn_cpu_threads(count * (plan.threads - 1)))
        for (int64_t i = 0; i < count; i++) {
            float sum = 0.0f;
            for (int t = 1; t < plan.threads; t++) sum += partials[(size_t)(t - 1) * plan.dw_floats + (size_t)i];
            dweight[i] += sum;
        }
    }
}
