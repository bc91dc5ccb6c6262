/*
 * chan_merge.h - the merge of two groups' (count, mean, M2) statistics (T. Chan, G. Golub,
 * R. LeVeque, 1979), no large sums subtracted (internal):
 *
 *     delta = mean_b - mean_a,  n = n_a + n_b,  mean = mean_a + delta n_b / n,
 *     M2 = M2_a + M2_b + delta^2 n_a n_b / n
 *
 * One definition for the CPU batch-norm (batchnorm.c: the ranks' merge of sync-BN) and the
 * CUDA one (batchnorm_sync.cu: the ranks' merge; batchnorm_common.cuh: a channel's segments),
 * so the three merges are one expression: with n_a = 0 the merge is exact, which is why the
 * sync-BN pieces with one rank give the fused kernels' bits.
 */
#ifndef SNN_CHAN_MERGE_H
#define SNN_CHAN_MERGE_H

#ifdef __CUDACC__
#define SNN_CHAN_HD __host__ __device__
#else
#define SNN_CHAN_HD
#endif

/* (n_a, mean, M2) becomes the statistics of both groups; group b has n_b > 0 values. */
SNN_CHAN_HD static inline void snn_chan_merge(double *n_a, double *mean, double *M2, double n_b,
                                              double mean_b, double M2_b)
{
    const double n = *n_a + n_b;
    const double delta = mean_b - *mean;
    *mean += delta * (n_b / n);
    *M2 += M2_b + delta * delta * (*n_a * n_b / n);
    *n_a = n;
}

#endif /* SNN_CHAN_MERGE_H */
