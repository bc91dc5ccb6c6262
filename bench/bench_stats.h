/*
 * bench_stats.h - the order statistics the benchmark programs report: timings sorted in place,
 * and their median (the mean of the middle two for an even count). One comparator for all.
 */
#ifndef SNN_BENCH_STATS_H
#define SNN_BENCH_STATS_H
#include <stdlib.h>

static inline int bench_compare_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Sorts v[0 .. n-1] ascending: v[0] is then the best time. */
static inline void bench_sort(double *v, int n)
{
    if (n > 1) qsort(v, (size_t)n, sizeof *v, bench_compare_double);
}

/* Sorts v in place and returns its median (n >= 1). */
static inline double bench_median(double *v, int n)
{
    bench_sort(v, n);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

#endif /* SNN_BENCH_STATS_H */
