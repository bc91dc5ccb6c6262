/*
 * cpu_peak.h - the float32 peak of this CPU, for the "% of peak" columns of bench_gemm and
 * bench_conv2d (header-only, static functions; included by one bench program at a time).
 *
 * Napkin math:  peak = threads x clock x FLOPs per cycle per core.
 *   - clock: measured with a chain of dependent integer adds (one add retires per cycle, so
 *     adds per second = cycles per second, boost clock included), best of 10 runs;
 *   - FLOPs per cycle: assumed from the ISA the bench was built for. AMD Zen 4 (the dev/CI
 *     EPYC) has two 256-bit FMA pipes: 2 x 8 lanes x 2 FLOPs = 32 per cycle, and an AVX-512 FMA
 *     runs as two 256-bit halves, so AVX-512 does not double it. (An Intel server core with two
 *     512-bit FMA units reaches 64; the check below catches that case.)
 *   - check: a loop of independent vector FMAs on every thread measures what the FMA units
 *     really deliver; if it beats the assumed peak by more than 10 % the assumption was wrong
 *     and the measured figure is used instead.
 */
#ifndef SNN_BENCH_CPU_PEAK_H
#define SNN_BENCH_CPU_PEAK_H

#include <omp.h>
#include <stdio.h>

#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif

typedef struct cpu_peak {
    double clock_ghz;         /* measured; 0 when not measurable here */
    int flops_per_cycle;      /* per core, assumed from the ISA */
    double assumed_gflops;    /* threads x clock x flops_per_cycle */
    double fma_loop_gflops;   /* measured with the FMA loop on `threads` threads */
    double peak_gflops;       /* the figure the benches divide by */
    int threads;
    const char *isa;
} cpu_peak;

/* Cycles per second of the calling core: 4 dependent adds per iteration, 1 cycle each. The
 * best of 10 short runs, so that a run the OS interrupted (the machine is shared) is dropped. */
static double peak_measure_clock_ghz(void)
{
#if defined(__x86_64__) && defined(__GNUC__)
    const long iterations = 25000000;
    double best = 0.0;
    for (int run = 0; run < 10; run++) {
        long x = 0;
        double t = omp_get_wtime();
        for (long i = 0; i < iterations; i++)
            __asm__ volatile("add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0" : "+r"(x));
        t = omp_get_wtime() - t;
        double ghz = 4.0 * (double)iterations / t * 1e-9;
        if (ghz > best) best = ghz;
    }
    return best;
#else
    return 0.0;
#endif
}

/* FLOPs one thread does in `iterations` rounds of 12 independent vector FMAs (12 chains hide
 * the 4-cycle FMA latency on 2 pipes); the result is returned so nothing is optimised away. */
static float peak_fma_loop(long iterations, double *flops)
{
#if defined(__AVX512F__)
    __m512 acc[12], x = _mm512_set1_ps(0.999999f), y = _mm512_set1_ps(1e-7f);
    for (int i = 0; i < 12; i++) acc[i] = _mm512_set1_ps((float)i);
    for (long it = 0; it < iterations; it++) {
#pragma GCC unroll 12
        for (int i = 0; i < 12; i++) acc[i] = _mm512_fmadd_ps(acc[i], x, y);
    }
    for (int i = 1; i < 12; i++) acc[0] = _mm512_add_ps(acc[0], acc[i]);
    *flops = (double)iterations * 12 * 16 * 2;
    return _mm512_reduce_add_ps(acc[0]);
#elif defined(__AVX2__) && defined(__FMA__)
    __m256 acc[12], x = _mm256_set1_ps(0.999999f), y = _mm256_set1_ps(1e-7f);
    for (int i = 0; i < 12; i++) acc[i] = _mm256_set1_ps((float)i);
    for (long it = 0; it < iterations; it++) {
#pragma GCC unroll 12
        for (int i = 0; i < 12; i++) acc[i] = _mm256_fmadd_ps(acc[i], x, y);
    }
    float out[8], sum = 0.0f;
    for (int i = 1; i < 12; i++) acc[0] = _mm256_add_ps(acc[0], acc[i]);
    _mm256_storeu_ps(out, acc[0]);
    for (int i = 0; i < 8; i++) sum += out[i];
    *flops = (double)iterations * 12 * 8 * 2;
    return sum;
#else
    float acc[12], sum = 0.0f;
    for (int i = 0; i < 12; i++) acc[i] = (float)i;
    for (long it = 0; it < iterations; it++)
        for (int i = 0; i < 12; i++) acc[i] = acc[i] * 0.999999f + 1e-7f;
    for (int i = 0; i < 12; i++) sum += acc[i];
    *flops = (double)iterations * 12 * 2;
    return sum;
#endif
}

static volatile float peak_sink;

static cpu_peak cpu_peak_measure(int threads)
{
    cpu_peak p;
    p.threads = threads;
#if defined(__AVX512F__)
    p.isa = "AVX-512";
    p.flops_per_cycle = 32;
#elif defined(__AVX2__) && defined(__FMA__)
    p.isa = "AVX2+FMA";
    p.flops_per_cycle = 32;
#else
    p.isa = "scalar";
    p.flops_per_cycle = 2;
#endif
    p.clock_ghz = peak_measure_clock_ghz();
    p.assumed_gflops = threads * p.clock_ghz * p.flops_per_cycle;

    p.fma_loop_gflops = 0.0;
    for (int run = 0; run < 10; run++) { /* best of 10, as for the clock */
        double flops_total = 0.0, t = omp_get_wtime();
        float sink = 0.0f;
#pragma omp parallel num_threads(threads) reduction(+ : flops_total, sink)
        {
            double flops = 0.0;
            sink += peak_fma_loop(6000000, &flops);
            flops_total += flops;
        }
        t = omp_get_wtime() - t;
        peak_sink = sink; /* keeps the loop's result alive */
        if (flops_total / t * 1e-9 > p.fma_loop_gflops) p.fma_loop_gflops = flops_total / t * 1e-9;
    }
    p.peak_gflops = p.assumed_gflops;
    if (p.fma_loop_gflops > 1.1 * p.assumed_gflops) p.peak_gflops = p.fma_loop_gflops;
    return p;
}

static void cpu_peak_print(const cpu_peak *p)
{
    printf("peak: %d threads x %.2f GHz (measured, dependent-add chain) x %d FLOP/cycle (%s, "
           "assumed: 2 x 256-bit FMA pipes) = %.1f GFLOP/s\n",
           p->threads, p->clock_ghz, p->flops_per_cycle, p->isa, p->assumed_gflops);
    printf("      FMA loop on %d threads measures %.1f GFLOP/s; %% of peak below is of %.1f\n",
           p->threads, p->fma_loop_gflops, p->peak_gflops);
}

#endif /* SNN_BENCH_CPU_PEAK_H */
