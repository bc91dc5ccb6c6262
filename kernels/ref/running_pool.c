/*
 * running_pool.c - the reference kernels of the running max-pool of converted SNNs
 * (snn_running_max_pool2d; neurons/running_pool.c derives the forward and its backward).
 * A max-pool of spikes is not the max-pool of their rates, so the converted net pools the
 * running sums and sends on the change of the max: per K x K window (stride >= K, no padding),
 *     S[t] = S[t-1] + x[t] (each window element),  M[t] = max of S[t],  y[t] = M[t] - M[t-1]
 * with S[-1] = 0, M[-1] = 0, the first maximum winning a tie; argmax[t] = a(t), its index.
 * Backward (dy[T] = 0): y[t] reads S[t] at a(t) and S[t-1] at a(t-1), so
 *     dL/dS[t][e] = [e = a(t)] (dy[t] - dy[t+1]),   dx[u][e] += sum over t >= u of dL/dS[t][e]
 * which one pass from t = T-1 down to 0 builds as a running sum g per window element.
 * Memory traffic per step: forward reads x, writes y and the argmax; backward reads dy twice
 * and the argmax, and updates dx.
 */
#include "neuron_ref.h"

/* y, argmax (T, planes, H_out, W_out); x (T, planes, H, W) */
void snn_running_max_pool_forward_ref(float *y, int32_t *argmax, const float *x,
                                      const snn_running_pool_dims *d)
{
    const int64_t in_step = d->planes * d->H * d->W;
    const int64_t out_step = d->planes * d->H_out * d->W_out;
    const int K = d->K;
    for (int64_t q = 0; q < d->planes; q++)
        for (int oh = 0; oh < d->H_out; oh++)
            for (int ow = 0; ow < d->W_out; ow++) {
                const int64_t in0 = (q * d->H + (int64_t)oh * d->stride) * d->W +
                                    (int64_t)ow * d->stride; /* the window's top left */
                const int64_t out0 = (q * d->H_out + oh) * d->W_out + ow;
                float sum[SNN_RUNNING_POOL_MAX_WINDOW] = {0}; /* S of each window element */
                float prev = 0.0f;                            /* M[t-1] */
                for (int64_t t = 0; t < d->T; t++) {
                    for (int e = 0; e < K * K; e++)
                        sum[e] += x[t * in_step + in0 + (int64_t)(e / K) * d->W + e % K];
                    int best = 0;
                    for (int e = 1; e < K * K; e++)
                        if (sum[e] > sum[best]) best = e;
                    y[t * out_step + out0] = sum[best] - prev;
                    prev = sum[best];
                    if (argmax) argmax[t * out_step + out0] = best;
                }
            }
}

/* dx (T, planes, H, W); dy, argmax (T, planes, H_out, W_out) */
void snn_running_max_pool_backward_ref(float *dx, const float *dy, const int32_t *argmax,
                                       const snn_running_pool_dims *d)
{
    const int64_t in_step = d->planes * d->H * d->W;
    const int64_t out_step = d->planes * d->H_out * d->W_out;
    const int K = d->K;
    for (int64_t q = 0; q < d->planes; q++)
        for (int oh = 0; oh < d->H_out; oh++)
            for (int ow = 0; ow < d->W_out; ow++) {
                const int64_t in0 = (q * d->H + (int64_t)oh * d->stride) * d->W +
                                    (int64_t)ow * d->stride;
                const int64_t out0 = (q * d->H_out + oh) * d->W_out + ow;
                float g[SNN_RUNNING_POOL_MAX_WINDOW] = {0}; /* sum over t' >= t of dL/dS[t'] */
                for (int64_t t = d->T - 1; t >= 0; t--) {
                    const float next = t + 1 < d->T ? dy[(t + 1) * out_step + out0] : 0.0f;
                    g[argmax[t * out_step + out0]] += dy[t * out_step + out0] - next;
                    for (int e = 0; e < K * K; e++)
                        dx[t * in_step + in0 + (int64_t)(e / K) * d->W + e % K] += g[e];
                }
            }
}
