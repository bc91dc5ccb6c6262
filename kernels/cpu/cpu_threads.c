/*
 * cpu_threads.c - the CPU thread rule (one thread, or the whole team) and the fixed-slice sum
 * that gives the same bits on any team. cpu_threads.h says why the rule is what it is.
 */
#include <omp.h>

#include "cpu_threads.h"

int snn_cpu_threads(int64_t work)
{
    if (omp_in_parallel() || work < SNN_CPU_GRAIN) return 1;
    return omp_get_max_threads();
}

double snn_cpu_sum_slices(int64_t n, int64_t work,
                          double (*slice_sum)(void *ctx, int64_t begin, int64_t end), void *ctx)
{
    double part[SNN_CPU_SUM_SLICES];
#pragma omp parallel for schedule(static) num_threads(snn_cpu_threads(work))
    for (int s = 0; s < SNN_CPU_SUM_SLICES; s++)
        part[s] = slice_sum(ctx, n * s / SNN_CPU_SUM_SLICES, n * (s + 1) / SNN_CPU_SUM_SLICES);
    double sum = 0.0;
    for (int s = 0; s < SNN_CPU_SUM_SLICES; s++) sum += part[s];
    return sum;
}
