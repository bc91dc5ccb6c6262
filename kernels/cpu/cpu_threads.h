/*
 * cpu_threads.h - how many OpenMP threads a CPU parallel region runs on, and sums that give the
 * same bits on any of them (internal; defined in cpu_threads.c).
 *
 * The rule: a region whose work is below one grain runs on its caller alone; any larger region
 * runs on the whole configured team (snn_get_num_threads()). Nothing in between:
 *
 *     #pragma omp parallel for num_threads(snn_cpu_threads(n))
 *
 * Why not the work-sized team min(T, work / grain) one might expect. GCC's OpenMP runtime
 * (libgomp) keeps one pool of threads, sized by the last team. A team smaller than the last one
 * makes the surplus threads exit, and the next larger team creates them again (team.c,
 * gomp_team_start: "those that aren't part of the team will exit"). Measured here (GCC 12):
 * alternating 16- and 4-thread regions started 12 new threads per pair, 2,404 threads in 200
 * pairs; 16 and 1 started none (a 1-thread region never touches the pool). So every region of
 * a net must use the same team, or none: at batch 1 the convs used to run on a team of 4
 * (one per image) between 16-thread neuron and batch-norm regions, and paid thread creation
 * at every switch (docs/sparse.md, 7b). A region given the whole team is never slower than one
 * given fewer of its threads (the fork and the join barrier are paid either way), so the only
 * choice left is: one thread, or all of them.
 *
 * The grain. Forking a spinning team and meeting at its barrier costs about 1-5 us on a
 * multi-core host and more on a loaded VM; below that much work a region is faster on one
 * thread. SNN_CPU_GRAIN is 32,768 units of streaming work (a unit is one element read and
 * written with a few flops, 0.3-1 ns on one core: a grain is 10-30 us), so a region forks only
 * when its work is several times what the fork costs. A kernel whose element costs more counts
 * more units per element: a neuron counts T steps per element, a pool its window, a conv one
 * unit per SNN_CPU_FMAS_PER_UNIT multiply-adds.
 *
 * Determinism. The team size is 1 or the configured count, so a kernel's split depends on the
 * shape and the configured count only. The kernels that sum across threads do not use OpenMP's
 * `reduction` (its combining order follows the threads' arrival): they sum SNN_CPU_SUM_SLICES
 * fixed slices of the input in order and then the slices in order (snn_cpu_sum_slices; used by
 * kernels/cpu/reduce.c, kernels/cpu/lif.c, neurons/qclip.c), so their result does not depend on the
 * thread count at all.
 *
 * Tests: tests/test_cpu_threads.c (the rule; no region changes the team size; every threaded
 * kernel gives the 1-thread bits at 2, 3 and 8 threads).
 */
#ifndef SNN_CPU_THREADS_H
#define SNN_CPU_THREADS_H

#include <stdint.h>

/* Units of streaming work (about 10-30 us on one core) below which a region runs on one thread. */
#define SNN_CPU_GRAIN 32768

/* Multiply-adds of a blocked SGEMM per unit of work: one core does 30-100 GFMA/s, so 32 FMAs
 * take about as long as streaming one element. */
#define SNN_CPU_FMAS_PER_UNIT 32

/* Threads for a parallel region over `work` units: 1 when work < SNN_CPU_GRAIN (or when called
 * inside a parallel region, where nested regions get one thread anyway), else the configured
 * count. */
int snn_cpu_threads(int64_t work);

/* Slices of a snn_cpu_sum_slices sum: fixed, so that the order of its additions is too. */
#define SNN_CPU_SUM_SLICES 256

/* The sum over items [0, n) as SNN_CPU_SUM_SLICES fixed slices: slice s is
 * slice_sum(ctx, n * s / SLICES, n * (s + 1) / SLICES) (which may also write per-item results),
 * the slices run on snn_cpu_threads(work) threads, and their sums are added in
 * slice order in double. The same bits for any thread count. */
double snn_cpu_sum_slices(int64_t n, int64_t work,
                          double (*slice_sum)(void *ctx, int64_t begin, int64_t end), void *ctx);

#endif /* SNN_CPU_THREADS_H */
