/*
 * bench_gemm.c - speed of the CPU SGEMM (kernels/cpu/gemm.c) against the plain triple loop and the
 * CPU's peak. Not a test: it checks the fast kernel against the naive one first, then prints a
 * table (shape, ms, GFLOP/s, % of peak, speed-up over the naive loop).
 *
 *   build/bin/bench_gemm [threads]      (default 2 threads, the dev/CI machine's 2 cores)
 *
 * Napkin math: an (M, N, K) product is 2 M N K FLOPs (one multiply and one add per term).
 * Peak is threads x clock x FLOPs per cycle, see cpu_peak.h. The naive loop is timed once per
 * shape (it is slow) and only up to 1024^3; the fast kernel takes the best of at least 5 runs
 * (more, up to half a second) after a warm-up call (which also allocates the packing buffers).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <omp.h>

#include "cpu_peak.h"
#include "kernels/cpu/kernels_cpu.h"
#include "kernels/ref/kernels_ref.h"
#include "bench_usage.h"

typedef struct shape {
    int M, N, K;
    bool trans_a, trans_b;
    const char *what;
} shape;

static const shape shapes[] = {
    {128, 128, 128, false, false, "square"},
    {256, 256, 256, false, false, "square"},
    {512, 512, 512, false, false, "square"},
    {1024, 1024, 1024, false, false, "square"},
    {2048, 2048, 2048, false, false, "square"},
    {1024, 1024, 1024, true, false, "square, A^T"},
    {1024, 1024, 1024, false, true, "square, B^T"},
    {1024, 1024, 1024, true, true, "square, A^T B^T"},
    {64, 1024, 576, false, false, "conv fwd 64->64 32x32"},
    {512, 256, 4608, false, false, "conv fwd 512 4x4 x16 img"},
    {64, 576, 1024, false, true, "conv dW 64->64 32x32"},
    {576, 1024, 64, true, false, "conv dcol 64->64 32x32"},
    {256, 4096, 512, false, false, "linear"},
};

static float *alloc_random(size_t n, snn_rng *rng)
{
    float *p = snn_alloc(n * sizeof *p, SNN_CPU);
    if (!p) {
        fprintf(stderr, "bench_gemm: out of memory\n");
        exit(EXIT_FAILURE);
    }
    for (size_t i = 0; i < n; i++) p[i] = 2.0f * snn_rng_uniform(rng) - 1.0f;
    return p;
}

/* Best of at least `reps` timed runs, more while under half a second has been spent, in
 * seconds. The dev machine is shared: the best run is the one nobody else interrupted. */
static double time_fast(const shape *s, const float *A, const float *B, float *C, int reps)
{
    int lda = s->trans_a ? s->M : s->K, ldb = s->trans_b ? s->K : s->N;
    double best = INFINITY, start = omp_get_wtime();
    for (int r = 0; r < reps || (omp_get_wtime() - start < 0.5 && r < 1000); r++) {
        double t = omp_get_wtime();
        snn_gemm_cpu(s->trans_a, s->trans_b, s->M, s->N, s->K, 1.0f, A, lda, B, ldb, 0.0f, C,
                     s->N);
        t = omp_get_wtime() - t;
        if (t < best) best = t;
    }
    return best;
}

int main(int argc, char **argv)
{
    bench_usage(argc, argv, "[threads]   (default 2)");
    int threads = argc > 1 ? bench_count(argv[1], "threads", "bench_gemm") : 2;
    snn_set_num_threads(threads);
    cpu_peak peak = cpu_peak_measure(threads);
    printf("bench_gemm: C = A B, float32, row-major, %d OpenMP threads\n", threads);
    cpu_peak_print(&peak);

    snn_rng rng;
    snn_rng_seed(&rng, 1);

    /* correctness first: fast vs naive on an odd shape */
    {
        shape s = {301, 257, 419, true, false, "check"};
        float *A = alloc_random((size_t)s.M * s.K, &rng), *B = alloc_random((size_t)s.K * s.N, &rng);
        float *C1 = alloc_random((size_t)s.M * s.N, &rng), *C2 = alloc_random((size_t)s.M * s.N, &rng);
        snn_gemm_cpu(true, false, s.M, s.N, s.K, 1.0f, A, s.M, B, s.N, 0.0f, C1, s.N);
        snn_gemm_ref(true, false, s.M, s.N, s.K, 1.0f, A, s.M, B, s.N, 0.0f, C2, s.N);
        double worst = 0.0;
        for (size_t i = 0; i < (size_t)s.M * s.N; i++)
            worst = fmax(worst, fabs((double)C1[i] - (double)C2[i]));
        printf("check: max |fast - naive| = %.2e on (%d, %d, %d) A^T  %s\n\n", worst, s.M, s.N,
               s.K, worst < 1e-3 ? "ok" : "MISMATCH");
        snn_free(A, (size_t)s.M * s.K * sizeof *A, SNN_CPU);
        snn_free(B, (size_t)s.K * s.N * sizeof *B, SNN_CPU);
        snn_free(C1, (size_t)s.M * s.N * sizeof *C1, SNN_CPU);
        snn_free(C2, (size_t)s.M * s.N * sizeof *C2, SNN_CPU);
        if (worst >= 1e-3) return EXIT_FAILURE;
    }

    printf("| %-26s | %-16s | %9s | %8s | %6s | %9s | %8s |\n", "shape", "M x N x K", "ms",
           "GFLOP/s", "% peak", "naive ms", "speed-up");
    printf("|%s|%s|%s|%s|%s|%s|%s|\n", "----------------------------", "------------------",
           "-----------", "----------", "--------", "-----------", "----------");
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const shape *s = &shapes[i];
        size_t a_n = (size_t)s->M * s->K, b_n = (size_t)s->K * s->N, c_n = (size_t)s->M * s->N;
        float *A = alloc_random(a_n, &rng), *B = alloc_random(b_n, &rng), *C = alloc_random(c_n, &rng);
        double flops = 2.0 * s->M * s->N * s->K;
        time_fast(s, A, B, C, 1); /* warm-up */
        int reps = 5;
        double fast = time_fast(s, A, B, C, reps);
        double gflops = flops / fast * 1e-9;

        char naive_ms[32] = "-", speedup[32] = "-";
        if (flops <= 2.2e9) {
            int lda = s->trans_a ? s->M : s->K, ldb = s->trans_b ? s->K : s->N;
            double t = omp_get_wtime();
            snn_gemm_ref(s->trans_a, s->trans_b, s->M, s->N, s->K, 1.0f, A, lda, B, ldb, 0.0f,
                         C, s->N);
            t = omp_get_wtime() - t;
            snprintf(naive_ms, sizeof naive_ms, "%.1f", t * 1e3);
            snprintf(speedup, sizeof speedup, "%.0fx", t / fast);
        }
        char dims[48];
        snprintf(dims, sizeof dims, "%dx%dx%d", s->M, s->N, s->K);
        printf("| %-26s | %-16s | %9.3f | %8.1f | %5.1f%% | %9s | %8s |\n", s->what, dims,
               fast * 1e3, gflops, 100.0 * gflops / peak.peak_gflops, naive_ms, speedup);
        fflush(stdout);
        snn_free(A, a_n * sizeof *A, SNN_CPU);
        snn_free(B, b_n * sizeof *B, SNN_CPU);
        snn_free(C, c_n * sizeof *C, SNN_CPU);
    }
    printf("\nnaive = snn_gemm_ref (kernels/ref/gemm.c), the plain triple loop: one thread.\n");
    snn_shutdown();
    return EXIT_SUCCESS;
}
