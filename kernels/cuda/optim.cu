/*
 * optim.cu - fused CUDA optimizer updates: one kernel reads a parameter, its gradient and its
 * state once and writes the new parameter and state. Must match kernels/cpu/optim.c
 * (snn_sgd_update_cpu, snn_adam_update_cpu); the float expressions are the same, in the same
 * order (the GPU may fuse a multiply-add, a difference of one rounding).
 *
 * SGD (torch.optim.SGD):
 *     g = grad + wd p;  buf = first_step ? g : momentum buf + (1 - dampening) g
 *     p -= lr (nesterov ? g + momentum buf : buf)          (no buffer when momentum = 0)
 * Adam / AdamW (torch.optim.Adam / AdamW), bc1 = 1 - beta1^t, bc2 = 1 - beta2^t:
 *     AdamW: p *= 1 - lr wd;  Adam: g = grad + wd p
 *     m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g^2
 *     p -= (lr / bc1) m / (sqrt(v) / sqrt(bc2) + eps)
 *
 * Memory traffic per element: SGD 8 B read + 4 B written (12 B + 8 B with momentum); Adam
 * 16 B read + 12 B written. Bandwidth-bound: a 11M-parameter ResNet-18 Adam step moves
 * ~310 MB, ~0.1 ms on an H100.
 */
#include "cuda_common.cuh"
#include "tensor/error.h"
#include "kernels_cuda.h"

/* p -= lr (grad + wd p), no state.  CPU: snn_sgd_update_cpu with momentum = 0. */
static __global__ void sgd_update_plain_kernel(float *p, const float *grad, int64_t n, float lr,
                                               float wd)
{
    SNN_GRID_STRIDE_LOOP(i, n) p[i] -= lr * (grad[i] + wd * p[i]);
}

/* Momentum SGD, see the file comment.  CPU: snn_sgd_update_cpu. */
static __global__ void sgd_update_momentum_kernel(float *p, float *velocity, const float *grad,
                                                  int64_t n, float lr, float wd, float mu,
                                                  float keep, bool first, bool nesterov)
{
    SNN_GRID_STRIDE_LOOP(i, n) {
        const float g = grad[i] + wd * p[i];
        const float buf = first ? g : mu * velocity[i] + keep * g;
        velocity[i] = buf;
        p[i] -= lr * (nesterov ? g + mu * buf : buf);
    }
}

extern "C" void snn_sgd_update_cuda(float *p, float *velocity, const float *grad, int64_t n,
                                    const snn_sgd_params *hp)
{
    if (n <= 0) return;
    const unsigned grid = snn_cuda_grid(n, SNN_CUDA_BLOCK);
    if (hp->momentum == 0.0f) {
        SNN_CUDA_LAUNCH(sgd_update_plain_kernel, grid, SNN_CUDA_BLOCK, 0, p, grad, n, hp->lr,
                        hp->weight_decay);
        return;
    }
    SNN_CUDA_LAUNCH(sgd_update_momentum_kernel, grid, SNN_CUDA_BLOCK, 0, p, velocity, grad, n,
                    hp->lr, hp->weight_decay, hp->momentum, 1.0f - hp->dampening, hp->first_step,
                    hp->nesterov);
}

/* The per-call constants of Adam / AdamW (file comment), computed on the host exactly as
 * optim.c computes them: step = lr / bc1, shrink = 1 - lr wd (AdamW) or 1, wd_grad = wd
 * (Adam) or 0. */
struct adam_consts {
    float b1, b2, eps, step, sqrt_bc2, shrink, wd_grad;
};

static adam_consts adam_consts_for(const snn_adam_params *hp, float bias_correction1,
                                   float bias_correction2)
{
    adam_consts k;
    k.b1 = hp->beta1;
    k.b2 = hp->beta2;
    k.eps = hp->eps;
    k.step = hp->lr / bias_correction1;
    k.sqrt_bc2 = sqrtf(bias_correction2);
    k.shrink = hp->decoupled ? 1.0f - hp->lr * hp->weight_decay : 1.0f;
    k.wd_grad = hp->decoupled ? 0.0f : hp->weight_decay;
    return k;
}

/* One element's update, the one expression both Adam kernels use.  CPU: snn_adam_update_cpu. */
static __device__ __forceinline__ void adam_element(float *p, float *m, float *v,
                                                    const float *grad, int64_t i,
                                                    const adam_consts &k)
{
    const float pi = p[i] * k.shrink;
    const float g = grad[i] + k.wd_grad * pi;
    const float mi = k.b1 * m[i] + (1.0f - k.b1) * g;
    const float vi = k.b2 * v[i] + (1.0f - k.b2) * (g * g);
    m[i] = mi;
    v[i] = vi;
    p[i] = pi - k.step * (mi / (sqrtf(vi) / k.sqrt_bc2 + k.eps));
}

static __global__ void adam_update_kernel(float *p, float *m, float *v, const float *grad,
                                          int64_t n, adam_consts k)
{
    SNN_GRID_STRIDE_LOOP(i, n) adam_element(p, m, v, grad, i, k);
}

/* Many tensors in one launch: a block updates ADAM_CHUNK elements of one tensor, the tensor
 * found from the blocks' running count (block0). The 124 tensors of a ResNet-18 took 124
 * launches of a few microseconds each: the launches, not the ~310 MB, were the cost
 * (docs/benchmarks.md, "Where a step's time goes"). The arguments travel in the kernel's parameter space
 * (__grid_constant__: indexed in place, not copied to local memory), ~2.4 KB of the 4 KB. */
#define ADAM_MANY 32
#define ADAM_CHUNK 4096
struct adam_many_args {
    float *p[ADAM_MANY], *m[ADAM_MANY], *v[ADAM_MANY];
    const float *grad[ADAM_MANY];
    int64_t n[ADAM_MANY];
    adam_consts k[ADAM_MANY];
    int64_t block0[ADAM_MANY + 1]; /* first block of tensor t; block0[count]: all the blocks */
    int count;
};
static_assert(sizeof(adam_many_args) <= 4096, "kernel parameters are limited to 4 KB");

static __global__ void adam_update_many_kernel(const __grid_constant__ adam_many_args a)
{
    int t = 0;
    while (t + 1 < a.count && (int64_t)blockIdx.x >= a.block0[t + 1]) t++;
    const int64_t begin = ((int64_t)blockIdx.x - a.block0[t]) * ADAM_CHUNK;
    const int64_t end = begin + ADAM_CHUNK < a.n[t] ? begin + ADAM_CHUNK : a.n[t];
    for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x)
        adam_element(a.p[t], a.m[t], a.v[t], a.grad[t], i, a.k[t]);
}

extern "C" void snn_adam_update_many_cuda(const snn_adam_tensor *tensors, int count,
                                          const snn_adam_params *hp)
{
    adam_many_args a;
    int i = 0;
    while (i < count) {
        a.count = 0;
        a.block0[0] = 0;
        for (; i < count && a.count < ADAM_MANY; i++) {
            const snn_adam_tensor *x = &tensors[i];
            if (x->n <= 0) continue;
            const int t = a.count++;
            a.p[t] = x->p, a.m[t] = x->m, a.v[t] = x->v, a.grad[t] = x->grad, a.n[t] = x->n;
            a.k[t] = adam_consts_for(hp, x->bias_correction1, x->bias_correction2);
            a.block0[t + 1] = a.block0[t] + (x->n + ADAM_CHUNK - 1) / ADAM_CHUNK;
        }
        if (a.count == 0) continue;
        const int64_t blocks = a.block0[a.count];
        SNN_ASSERT(blocks < INT32_MAX);
        SNN_CUDA_LAUNCH(adam_update_many_kernel, (unsigned)blocks, SNN_CUDA_BLOCK, 0, a);
    }
}

extern "C" void snn_adam_update_cuda(float *p, float *m, float *v, const float *grad, int64_t n,
                                     const snn_adam_params *hp)
{
    if (n <= 0) return;
    SNN_CUDA_LAUNCH(adam_update_kernel, snn_cuda_grid(n, SNN_CUDA_BLOCK), SNN_CUDA_BLOCK, 0, p, m,
                    v, grad, n, adam_consts_for(hp, hp->bias_correction1, hp->bias_correction2));
}
