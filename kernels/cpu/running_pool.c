/*
 * running_pool.c - the fast CPU kernels of the running max-pool of converted SNNs
 * (snn_running_max_pool2d, neurons/running_pool.c derives the forward and its backward):
 *   S[t] = S[t-1] + x[t];  M[t] = max over the window of S[t];  y[t] = M[t] - M[t-1]
 * OpenMP over the planes. Reference: kernels/ref/running_pool.c. CUDA twin:
 * kernels/cuda/running_pool.cu.
 * Memory traffic per step: forward reads x, writes y and, in grad mode, a 4-byte argmax per
 * output; backward reads dy twice and argmax, and updates dx.
 */
#include "cpu_threads.h"
#include "neuron_cpu.h"

void snn_running_max_pool_forward_cpu(float *y, int32_t *argmax, const float *x,
                                      const snn_running_pool_dims *d)
{
    const int64_t in_step = d->planes * d->H * d->W;                  /* x: (T, planes, H, W) */
    const int64_t out_step = d->planes * d->H_out * d->W_out;         /* y: (T, planes, Ho, Wo) */
    const int K = d->K, KK = d->K * d->K;
    const int64_t work = d->T * in_step;   /* each input element is read once per step */
#pragma omp parallel for schedule(static) num_threads(snn_cpu_threads(work))
    for (int64_t q = 0; q < d->planes; q++) {
        for (int oh = 0; oh < d->H_out; oh++) {
            for (int ow = 0; ow < d->W_out; ow++) {
                const int64_t in0 = (q * d->H + (int64_t)oh * d->stride) * d->W + (int64_t)ow * d->stride;
                const int64_t out0 = (q * d->H_out + oh) * d->W_out + ow;
                float sum[SNN_RUNNING_POOL_MAX_WINDOW] = {0}; /* S of the window's elements */
                float prev = 0.0f;                            /* M[t-1] */
                for (int64_t t = 0; t < d->T; t++) {
                    const float *xt = x + t * in_step + in0;  /* (K, K) window at row stride W */
                    for (int kh = 0; kh < K; kh++)
                        for (int kw = 0; kw < K; kw++) sum[kh * K + kw] += xt[(int64_t)kh * d->W + kw];
                    int best = 0;
                    for (int e = 1; e < KK; e++)
                        if (sum[e] > sum[best]) best = e;     /* the first maximum wins */
                    y[t * out_step + out0] = sum[best] - prev;
                    prev = sum[best];
                    if (argmax) argmax[t * out_step + out0] = best;
                }
            }
        }
    }
}

void snn_running_max_pool_backward_cpu(float *dx, const float *dy, const int32_t *argmax,
                                       const snn_running_pool_dims *d)
{
    const int64_t in_step = d->planes * d->H * d->W, out_step = d->planes * d->H_out * d->W_out;
    const int K = d->K, KK = d->K * d->K;
    const int64_t work = d->T * in_step;   /* each input element is read once per step */
#pragma omp parallel for schedule(static) num_threads(snn_cpu_threads(work))
    for (int64_t q = 0; q < d->planes; q++) {
        for (int oh = 0; oh < d->H_out; oh++) {
            for (int ow = 0; ow < d->W_out; ow++) {
                const int64_t in0 = (q * d->H + (int64_t)oh * d->stride) * d->W + (int64_t)ow * d->stride;
                const int64_t out0 = (q * d->H_out + oh) * d->W_out + ow;
                float g[SNN_RUNNING_POOL_MAX_WINDOW] = {0};   /* sum over t' >= t of dL/dS[t'] */
                for (int64_t t = d->T - 1; t >= 0; t--) {
                    const float next = t + 1 < d->T ? dy[(t + 1) * out_step + out0] : 0.0f;
                    g[argmax[t * out_step + out0]] += dy[t * out_step + out0] - next;
                    float *dxt = dx + t * in_step + in0;      /* (K, K) window at row stride W */
                    for (int e = 0; e < KK; e++) dxt[(int64_t)(e / K) * d->W + e % K] += g[e];
                }
            }
        }
    }
}
