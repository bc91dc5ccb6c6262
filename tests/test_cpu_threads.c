/*
 * test_cpu_threads.c - the CPU thread rule (kernels/cpu/cpu_threads.h) and what the kernels promise
 * under it. Run: ctest -R cpu_threads.
 *
 *   rule        snn_cpu_threads is 1 below a grain of work, the configured count from one grain
 *               on, 1 inside a parallel region, and never anything in between;
 *   steady team no kernel runs a team smaller than the configured one: GCC's OpenMP ends the
 *               surplus threads of its pool at a smaller team and starts new ones at the next
 *               full one, which is what made batch 1 slow at 16 threads (docs/sparse.md, 7b).
 *               A probe region after each kernel counts the distinct threads it has seen (a
 *               new thread has fresh thread-local storage): the count must stay the team's;
 *   same bits   at 2, 3 and 8 threads, at sizes below and above a grain, the threaded kernels
 *               give the bits of 1 thread: the dense conv's forward (whole groups per thread,
 *               and groups split over threads) and its dx, the sparse convs (GEMM, banded event,
 *               whole-image event; rows and channels split over threads), the LIF / PLIF /
 *               ST-BIF kernels forward and backward (PLIF's dw included) and the sum of
 *               squares; the dense conv's dweight (a sum over workers) repeats its bits;
 *   gemm parts  snn_gemm_part_cpu's parts tile C and give the whole product's bits.
 * The machine may have fewer cores than threads: correctness does not depend on them.
 */
#include <string.h>

#include <omp.h>

#include "kernels/neuron_kernels.h"
#include "neurons/neurons.h"
#include "sparse/sparse.h"
#include "kernels/cpu/cpu_threads.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/kernels_cpu.h"
#include "test.h"

static const int thread_counts[] = {2, 3, 8};
#define N_COUNTS (int)(sizeof thread_counts / sizeof thread_counts[0])

static float *floats(int64_t n)
{
    float *p = snn_alloc((size_t)(n > 0 ? n : 1) * sizeof *p, SNN_CPU);
    if (!p) {
        fprintf(stderr, "test_cpu_threads: out of memory\n");
        exit(1);
    }
    memset(p, 0, (size_t)(n > 0 ? n : 1) * sizeof *p);
    return p;
}

static void free_floats(float *p, int64_t n) { snn_free(p, (size_t)(n > 0 ? n : 1) * sizeof *p, SNN_CPU); }

static void fill_normal(float *p, int64_t n, snn_rng *rng)
{
    for (int64_t i = 0; i < n; i++) p[i] = snn_rng_normal(rng);
}

/* Spikes in {0, 1} at `rate`, a few planes silent; activity (N, C) their counts. */
static void fill_spikes(float *x, float *act, int N, int C, int64_t HW, float rate, snn_rng *rng)
{
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++) {
            float *p = x + ((int64_t)n * C + c) * HW;
            const bool silent = snn_rng_uniform(rng) < 0.2f;
            float count = 0.0f;
            for (int64_t i = 0; i < HW; i++) {
                p[i] = !silent && snn_rng_uniform(rng) < rate ? 1.0f : 0.0f;
                count += p[i];
            }
            act[(int64_t)n * C + c] = count;
        }
}

/* ---- the rule ------------------------------------------------------------------------------ */

static void test_rule(void)
{
    const int saved = snn_get_num_threads();
    const int counts[] = {1, 2, 3, 8};
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
        const int T = counts[i];
        snn_set_num_threads(T);
        CHECK(snn_cpu_threads(0) == 1);
        CHECK(snn_cpu_threads(SNN_CPU_GRAIN - 1) == 1);
        CHECK(snn_cpu_threads(SNN_CPU_GRAIN) == T);
        CHECK(snn_cpu_threads(INT64_MAX) == T);
        /* 1 or T, nothing in between, for any work */
        bool only_one_or_all = true;
        for (int64_t work = 1; work < 64 * (int64_t)SNN_CPU_GRAIN; work = work * 3 / 2 + 1) {
            const int n = snn_cpu_threads(work);
            only_one_or_all &= n == 1 || n == T;
            only_one_or_all &= (n == T) == (work >= SNN_CPU_GRAIN || T == 1);
        }
        CHECK(only_one_or_all);
        /* inside an active region: 1 (a nested region would get one thread anyway) */
        int inside = -1;
#pragma omp parallel num_threads(2)
        {
#pragma omp master
            inside = snn_cpu_threads(INT64_MAX);
        }
        CHECK(inside == 1);
    }
    /* the grain is about 10-30 us of streaming work on one core: tens of thousands of elements */
    CHECK(SNN_CPU_GRAIN >= 8192 && SNN_CPU_GRAIN <= 262144);
    snn_set_num_threads(saved);
}

/* ---- the team stays the same --------------------------------------------------------------- */

static _Thread_local bool probe_seen; /* fresh (false) in every new thread */
static int probe_threads;             /* distinct threads the probes have met */

/* A region on the whole configured team; returns the distinct threads met so far. */
static int probe(void)
{
#pragma omp parallel
    {
        if (!probe_seen) {
            probe_seen = true;
#pragma omp atomic
            probe_threads++;
        }
    }
    return probe_threads;
}

/* Runs the kernels of a batch-1 spiking ResNet layer (T = 4 images) at a small and a large size,
 * probing after each: the count of threads must stay at the team's. */
static void check_steady_team(int T, snn_rng *rng)
{
    snn_set_num_threads(T);
    const int base = probe();   /* the team now, plus threads met before (other team sizes) */
    bool steady = true;
    const int sizes[][4] = {{4, 8, 8, 8}, {4, 64, 32, 32}, {4, 256, 8, 8}}; /* N, C, H, W */
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        const int N = sizes[s][0], C = sizes[s][1], H = sizes[s][2], W = sizes[s][3];
        const int64_t n = (int64_t)N * C * H * W;
        float *x = floats(n), *y = floats(n), *act = floats((int64_t)N * C);
        float *w = floats((int64_t)C * C * 9), *b = floats(C);
        fill_spikes(x, act, N, C, (int64_t)H * W, 0.1f, rng);
        fill_normal(w, (int64_t)C * C * 9, rng);
        snn_conv2d_dims d = {N, C, H, W, C, 3, 3, 1, 1, H, W};
        size_t ws = snn_conv2d_workspace_bytes_cpu(&d);
        float *workspace = snn_alloc(ws ? ws : 1, SNN_CPU);
        snn_conv2d_forward_cpu(y, x, w, b, &d, workspace);
        steady &= probe() == base;
        const size_t nwt = snn_sparse_weights_floats(C, C, 3, 3);
        float *wt = floats((int64_t)nwt);
        snn_sparse_prepare_weights(wt, w, C, C, 3, 3);
        CHECK_OK(snn_sparse_conv2d_cpu(y, x, wt, b, &d, act, SNN_SPARSE_EVENT));
        steady &= probe() == base;
        CHECK_OK(snn_sparse_conv2d_cpu(y, x, wt, b, &d, act, SNN_SPARSE_GEMM));
        steady &= probe() == base;
        /* the neuron, the batch-norm, the residual add and a pool of the same tensor */
        snn_neuron_config cfg = snn_neuron_config_default(SNN_NEURON_LIF);
        snn_neuron_params p = snn_neuron_params_from(&cfg);
        snn_neuron_dims nd = {4, N / 4, C, (int64_t)H * W};
        snn_neuron_kernels_cpu.lif_forward(x, NULL, NULL, NULL, act, y, NULL, NULL, NULL, &p, &nd);
        steady &= probe() == base;
        float *mean = floats(C), *var = floats(C);
        for (int c = 0; c < C; c++) var[c] = 1.0f;
        snn_batchnorm_forward_eval_cpu(y, x, NULL, NULL, mean, var, N, C, H * W, 1e-5f);
        steady &= probe() == base;
        snn_broadcast bc;
        memset(&bc, 0, sizeof bc);
        bc.numel = n;
        bc.same_shape = true;
        snn_binary_forward_cpu(SNN_BINARY_ADD, y, x, y, &bc);
        steady &= probe() == base;
        snn_pool2d_dims pd = {N, C, H, W, 2, 2, 0, H / 2, W / 2};
        int32_t *argmax = snn_alloc((size_t)(n / 4) * sizeof *argmax, SNN_CPU);
        snn_max_pool2d_forward_cpu(x, argmax, y, &pd);
        steady &= probe() == base;
        snn_free(argmax, (size_t)(n / 4) * sizeof *argmax, SNN_CPU);
        free_floats(mean, C);
        free_floats(var, C);
        free_floats(wt, (int64_t)nwt);
        snn_free(workspace, ws ? ws : 1, SNN_CPU);
        free_floats(x, n);
        free_floats(y, n);
        free_floats(act, (int64_t)N * C);
        free_floats(w, (int64_t)C * C * 9);
        free_floats(b, C);
    }
    if (!steady)
        fprintf(stderr, "  %d threads: a kernel ran a smaller team (threads met: %d, then %d)\n",
                T, base, probe_threads);
    CHECK(steady);
}

static void test_steady_team(void)
{
    const int saved = snn_get_num_threads();
    snn_rng rng;
    snn_rng_seed(&rng, 7);
    for (int i = 0; i < N_COUNTS; i++) check_steady_team(thread_counts[i], &rng);
    snn_set_num_threads(saved);
}

/* ---- dense conv ------------------------------------------------------------------------------ */

/* forward out and backward dx, dweight of one shape at `threads` threads */
static void conv_run(const snn_conv2d_dims *d, int threads, const float *x, const float *w,
                     const float *bias, const float *dout, float *out, float *dx, float *dw)
{
    snn_set_num_threads(threads);
    size_t ws = snn_conv2d_workspace_bytes_cpu(d);
    float *workspace = snn_alloc(ws ? ws : 1, SNN_CPU);
    CHECK(workspace != NULL);
    snn_conv2d_forward_cpu(out, x, w, bias, d, workspace);
    memset(dx, 0, (size_t)d->N * d->C_in * d->H * d->W * sizeof *dx);
    memset(dw, 0, (size_t)d->C_out * d->C_in * d->KH * d->KW * sizeof *dw);
    snn_conv2d_backward_cpu(dx, dw, NULL, dout, x, w, d, workspace);
    snn_free(workspace, ws ? ws : 1, SNN_CPU);
}

static void test_conv_bits(void)
{
    const int saved = snn_get_num_threads();
    /* N, C_in, H, W, C_out, K, stride, pad: small (under a grain: one thread) and large, the
     * 4 images of batch 1 x T = 4 (fewer groups than 8 threads: split), 1x1 direct, stride 2,
     * 4x4 outputs (one group of all images), edge tiles, and 9 images (whole groups) */
    const int shapes[][8] = {
        {4, 3, 6, 6, 5, 3, 1, 1},     {1, 4, 5, 5, 3, 1, 1, 0},   {4, 64, 16, 16, 64, 3, 1, 1},
        {4, 3, 32, 32, 64, 3, 1, 1},  {4, 64, 16, 16, 128, 1, 1, 0}, {4, 64, 16, 16, 128, 3, 2, 1},
        {4, 128, 4, 4, 128, 3, 1, 1}, {3, 40, 12, 12, 44, 3, 1, 1}, {9, 32, 16, 16, 32, 3, 1, 1},
        {2, 32, 8, 8, 48, 1, 2, 0},
    };
    snn_rng rng;
    snn_rng_seed(&rng, 11);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int *v = shapes[s];
        const int H_out = (v[2] + 2 * v[7] - v[5]) / v[6] + 1, W_out = (v[3] + 2 * v[7] - v[5]) / v[6] + 1;
        const snn_conv2d_dims d = {v[0], v[1], v[2], v[3], v[4], v[5], v[5], v[6], v[7], H_out, W_out};
        const int64_t nx = (int64_t)d.N * d.C_in * d.H * d.W, nw = (int64_t)d.C_out * d.C_in * d.KH * d.KW;
        const int64_t ny = (int64_t)d.N * d.C_out * H_out * W_out;
        float *x = floats(nx), *w = floats(nw), *bias = floats(d.C_out), *dout = floats(ny);
        fill_normal(x, nx, &rng);
        fill_normal(w, nw, &rng);
        fill_normal(bias, d.C_out, &rng);
        fill_normal(dout, ny, &rng);
        float *out1 = floats(ny), *dx1 = floats(nx), *dw1 = floats(nw);
        float *out = floats(ny), *dx = floats(nx), *dw = floats(nw), *dw_again = floats(nw);
        conv_run(&d, 1, x, w, bias, dout, out1, dx1, dw1);
        for (int i = 0; i < N_COUNTS; i++) {
            conv_run(&d, thread_counts[i], x, w, bias, dout, out, dx, dw);
            bool fwd = test_same_bits(out, out1, ny), bwd = test_same_bits(dx, dx1, nx);
            memcpy(dw_again, dw, (size_t)nw * sizeof *dw);
            conv_run(&d, thread_counts[i], x, w, bias, dout, out, dx, dw);
            bool repeat = test_same_bits(dw, dw_again, nw);
            if (!fwd || !bwd || !repeat)
                fprintf(stderr, "  conv shape %zu, %d threads: forward %s, dx %s, dweight %s\n", s,
                        thread_counts[i], fwd ? "same" : "DIFFERS", bwd ? "same" : "DIFFERS",
                        repeat ? "repeats" : "DOES NOT REPEAT");
            CHECK(fwd && bwd && repeat);
            /* dweight sums the workers' partials: the 1-thread value to rounding */
            CHECK_ALL_CLOSE(dw, dw1, nw, 1e-4, 1e-4);
        }
        free_floats(x, nx);
        free_floats(w, nw);
        free_floats(bias, d.C_out);
        free_floats(dout, ny);
        free_floats(out1, ny);
        free_floats(dx1, nx);
        free_floats(dw1, nw);
        free_floats(out, ny);
        free_floats(dx, nx);
        free_floats(dw, nw);
        free_floats(dw_again, nw);
    }
    snn_set_num_threads(saved);
}

/* ---- sparse convs ------------------------------------------------------------------------- */

static void test_sparse_bits(void)
{
    const int saved = snn_get_num_threads();
    /* N, C_in, H (= W), C_out, K, stride, pad: small, the batch-1 ResNet-18 layers (4 images),
     * C_out not a multiple of 32, 1x1 stride 2, and planes over 64 wide (whole-image event) */
    const int shapes[][7] = {
        {1, 4, 6, 8, 3, 1, 1},    {4, 64, 32, 64, 3, 1, 1},  {4, 64, 32, 128, 3, 2, 1},
        {4, 64, 32, 128, 1, 2, 0}, {4, 128, 16, 128, 3, 1, 1}, {4, 256, 8, 256, 3, 1, 1},
        {4, 512, 4, 512, 3, 1, 1}, {2, 48, 12, 80, 3, 1, 1},   {1, 8, 80, 40, 3, 1, 1},
        {2, 8, 70, 16, 3, 2, 1},
    };
    snn_rng rng;
    snn_rng_seed(&rng, 13);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int *v = shapes[s];
        const int H_out = (v[2] + 2 * v[6] - v[4]) / v[5] + 1;
        const snn_conv2d_dims d = {v[0], v[1], v[2], v[2], v[3], v[4], v[4], v[5], v[6], H_out, H_out};
        const int64_t nx = (int64_t)d.N * d.C_in * d.H * d.W, nw = (int64_t)d.C_out * d.C_in * d.KH * d.KW;
        const int64_t ny = (int64_t)d.N * d.C_out * H_out * H_out;
        float *x = floats(nx), *act = floats((int64_t)d.N * d.C_in), *w = floats(nw);
        float *bias = floats(d.C_out);
        fill_spikes(x, act, d.N, d.C_in, (int64_t)d.H * d.W, 0.08f, &rng);
        fill_normal(w, nw, &rng);
        fill_normal(bias, d.C_out, &rng);
        const size_t nwt = snn_sparse_weights_floats(d.C_out, d.C_in, d.KH, d.KW);
        float *wt = floats((int64_t)nwt);
        snn_sparse_prepare_weights(wt, w, d.C_out, d.C_in, d.KH, d.KW);
        float *dense = floats(ny), *ref = floats(ny), *y = floats(ny);
        snn_set_num_threads(1);
        size_t ws = snn_conv2d_workspace_bytes_cpu(&d);
        float *workspace = snn_alloc(ws ? ws : 1, SNN_CPU);
        snn_conv2d_forward_cpu(dense, x, w, bias, &d, workspace);
        snn_free(workspace, ws ? ws : 1, SNN_CPU);
        for (int path = SNN_SPARSE_GEMM; path <= SNN_SPARSE_EVENT; path++) {
            snn_set_num_threads(1);
            CHECK_OK(snn_sparse_conv2d_cpu(ref, x, wt, bias, &d, act, (snn_sparse_path)path));
            CHECK(test_same_bits(ref, dense, ny));   /* sparse == dense (docs/sparse.md, section 2) */
            for (int i = 0; i < N_COUNTS; i++) {
                snn_set_num_threads(thread_counts[i]);
                memset(y, 0xff, (size_t)ny * sizeof *y);   /* NaN: every output must be written */
                CHECK_OK(snn_sparse_conv2d_cpu(y, x, wt, bias, &d, act, (snn_sparse_path)path));
                const bool same = test_same_bits(y, ref, ny);
                if (!same)
                    fprintf(stderr, "  sparse shape %zu, %s path, %d threads: differs from 1 thread\n",
                            s, snn_sparse_path_name((snn_sparse_path)path), thread_counts[i]);
                CHECK(same);
            }
        }
        free_floats(x, nx);
        free_floats(act, (int64_t)d.N * d.C_in);
        free_floats(w, nw);
        free_floats(bias, d.C_out);
        free_floats(wt, (int64_t)nwt);
        free_floats(dense, ny);
        free_floats(ref, ny);
        free_floats(y, ny);
    }
    snn_set_num_threads(saved);
}

/* ---- neurons --------------------------------------------------------------------------------- */

typedef struct neuron_out {
    float *spike, *h, *v_last, *activity, *dx, *dv_init, dw;
} neuron_out;

static void neuron_run(snn_neuron_kind kind, const snn_neuron_dims *d, int threads, const float *x,
                       const float *dspike, const float *w, neuron_out *o)
{
    snn_set_num_threads(threads);
    snn_neuron_config cfg = snn_neuron_config_default(kind);
    snn_neuron_params p = snn_neuron_params_from(&cfg);
    const snn_neuron_kernels *k = &snn_neuron_kernels_cpu;
    const int64_t M = snn_neuron_dims_step(d);
    memset(o->dx, 0, (size_t)(d->T * M) * sizeof *o->dx);
    memset(o->dv_init, 0, (size_t)M * sizeof *o->dv_init);
    o->dw = 0.0f;
    if (kind == SNN_NEURON_STBIF) {
        k->stbif_forward(o->spike, o->h, o->v_last, NULL, o->activity, x, NULL, NULL, NULL, &p, d);
        k->stbif_backward(o->dx, o->dv_init, NULL, dspike, NULL, o->h, o->spike, x, NULL, NULL,
                          NULL, &p, d);
    } else {
        k->lif_forward(o->spike, o->h, o->v_last, NULL, o->activity, x, NULL, NULL, w, &p, d);
        k->lif_backward(o->dx, o->dv_init, kind == SNN_NEURON_PLIF ? &o->dw : NULL, dspike, NULL,
                        o->h, o->spike, x, NULL, NULL, w, &p, d);
    }
}

static void test_neuron_bits(void)
{
    const int saved = snn_get_num_threads();
    /* T, N, C, plane: small (under a grain), batch-1 ResNet sizes, and planes under a chunk */
    const snn_neuron_dims dims[] = {{4, 1, 3, 25}, {4, 1, 64, 1024}, {4, 1, 512, 16},
                                    {2, 3, 40, 49}, {4, 2, 1000, 1}};
    const snn_neuron_kind kinds[] = {SNN_NEURON_IF, SNN_NEURON_LIF, SNN_NEURON_PLIF, SNN_NEURON_STBIF};
    snn_rng rng;
    snn_rng_seed(&rng, 17);
    const float w = 0.3f;   /* PLIF's parameter */
    for (size_t di = 0; di < sizeof dims / sizeof dims[0]; di++) {
        const snn_neuron_dims *d = &dims[di];
        const int64_t M = snn_neuron_dims_step(d), TM = d->T * M, planes = d->T * d->N * d->C;
        float *x = floats(TM), *dspike = floats(TM);
        fill_normal(x, TM, &rng);
        for (int64_t i = 0; i < TM; i++) x[i] = 0.8f * x[i] + 0.5f;
        fill_normal(dspike, TM, &rng);
        neuron_out r = {floats(TM), floats(TM), floats(M), floats(planes), floats(TM), floats(M), 0};
        neuron_out o = {floats(TM), floats(TM), floats(M), floats(planes), floats(TM), floats(M), 0};
        for (size_t ki = 0; ki < sizeof kinds / sizeof kinds[0]; ki++) {
            neuron_run(kinds[ki], d, 1, x, dspike, &w, &r);
            for (int i = 0; i < N_COUNTS; i++) {
                neuron_run(kinds[ki], d, thread_counts[i], x, dspike, &w, &o);
                const bool same = test_same_bits(o.spike, r.spike, TM) && test_same_bits(o.h, r.h, TM) &&
                                  test_same_bits(o.v_last, r.v_last, M) &&
                                  test_same_bits(o.activity, r.activity, planes) &&
                                  test_same_bits(o.dx, r.dx, TM) && test_same_bits(o.dv_init, r.dv_init, M) &&
                                  memcmp(&o.dw, &r.dw, sizeof o.dw) == 0;
                if (!same)
                    fprintf(stderr, "  %s dims %zu, %d threads: differs from 1 thread (dw %.9g vs %.9g)\n",
                            snn_neuron_kind_name(kinds[ki]), di, thread_counts[i], (double)o.dw,
                            (double)r.dw);
                CHECK(same);
            }
        }
        neuron_out *outs[] = {&r, &o};
        for (int j = 0; j < 2; j++) {
            free_floats(outs[j]->spike, TM);
            free_floats(outs[j]->h, TM);
            free_floats(outs[j]->v_last, M);
            free_floats(outs[j]->activity, planes);
            free_floats(outs[j]->dx, TM);
            free_floats(outs[j]->dv_init, M);
        }
        free_floats(x, TM);
        free_floats(dspike, TM);
    }
    snn_set_num_threads(saved);
}

/* ---- the sum of squares -------------------------------------------------------------------- */

static void test_sumsq_bits(void)
{
    const int saved = snn_get_num_threads();
    const int64_t sizes[] = {1000, 3 * (int64_t)SNN_CPU_GRAIN + 17, 1 << 20};
    snn_rng rng;
    snn_rng_seed(&rng, 19);
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        float *x = floats(sizes[s]);
        fill_normal(x, sizes[s], &rng);
        float want[2], got[2];
        snn_set_num_threads(1);
        snn_sumsq_and_finite_cpu(want, x, sizes[s]);
        double exact = 0.0;
        for (int64_t i = 0; i < sizes[s]; i++) exact += (double)x[i] * (double)x[i];
        CHECK_CLOSE(want[0], exact, 0.0, 1e-6);
        CHECK(want[1] == 0.0f);
        for (int i = 0; i < N_COUNTS; i++) {
            snn_set_num_threads(thread_counts[i]);
            snn_sumsq_and_finite_cpu(got, x, sizes[s]);
            CHECK(memcmp(got, want, sizeof got) == 0);
        }
        x[sizes[s] / 2] = NAN;
        snn_sumsq_and_finite_cpu(got, x, sizes[s]);
        CHECK(got[1] == 1.0f);
        free_floats(x, sizes[s]);
    }
    snn_set_num_threads(saved);
}

/* ---- the SGEMM by parts ------------------------------------------------------------------- */

static void test_gemm_parts(void)
{
    const int saved = snn_get_num_threads();
    snn_set_num_threads(1);
    /* M, N, K, trans_a, trans_b: the conv forward's shapes (C_out, positions, C_in K K), a
     * small one (unpacked path: part 0 does it all), edge tiles, transposes */
    const int shapes[][5] = {{64, 1024, 576, 0, 0}, {512, 64, 4608, 0, 0}, {8, 8, 8, 0, 0},
                             {37, 301, 129, 1, 0}, {70, 90, 700, 0, 1}, {2, 1000, 300, 0, 0}};
    const int parts_list[] = {1, 2, 3, 5, 8, 16};
    snn_rng rng;
    snn_rng_seed(&rng, 23);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
        const bool ta = shapes[s][3], tb = shapes[s][4];
        float *A = floats((int64_t)M * K), *B = floats((int64_t)K * N);
        float *want = floats((int64_t)M * N), *C = floats((int64_t)M * N);
        int *hits = snn_alloc((size_t)M * N * sizeof *hits, SNN_CPU);
        fill_normal(A, (int64_t)M * K, &rng);
        fill_normal(B, (int64_t)K * N, &rng);
        const int lda = ta ? M : K, ldb = tb ? K : N;
        snn_gemm_serial_cpu(ta, tb, M, N, K, 1.0f, A, lda, B, ldb, 0.0f, want, N);
        for (size_t pi = 0; pi < sizeof parts_list / sizeof parts_list[0]; pi++) {
            const int parts = parts_list[pi];
            memset(C, 0xff, (size_t)M * N * sizeof *C);
            memset(hits, 0, (size_t)M * N * sizeof *hits);
            for (int part = 0; part < parts; part++) {
                snn_gemm_rect r;
                snn_gemm_part_cpu(ta, tb, M, N, K, 1.0f, A, lda, B, ldb, 0.0f, C, N, part, parts, &r);
                for (int i = r.m0; i < r.m1; i++)
                    for (int j = r.n0; j < r.n1; j++) hits[(int64_t)i * N + j]++;
            }
            bool tiled = true;
            for (int64_t i = 0; i < (int64_t)M * N; i++) tiled &= hits[i] == 1;
            const bool same = test_same_bits(C, want, (int64_t)M * N);
            if (!tiled || !same)
                fprintf(stderr, "  gemm %dx%dx%d in %d parts: %s, %s\n", M, N, K, parts,
                        tiled ? "tiled" : "NOT TILED", same ? "same" : "DIFFERS");
            CHECK(tiled && same);
        }
        free_floats(A, (int64_t)M * K);
        free_floats(B, (int64_t)K * N);
        free_floats(want, (int64_t)M * N);
        free_floats(C, (int64_t)M * N);
        snn_free(hits, (size_t)M * N * sizeof *hits, SNN_CPU);
    }
    snn_set_num_threads(saved);
}

int main(void)
{
    RUN(test_rule);
    RUN(test_steady_team);
    RUN(test_conv_bits);
    RUN(test_sparse_bits);
    RUN(test_neuron_bits);
    RUN(test_sumsq_bits);
    RUN(test_gemm_parts);
    return test_finish();
}
