/*
 * qclip.cu - the quantized clip activation (QCLIP) on the GPU: the port of the two kernels of
 * qclip.c (snn_qclip_forward_cpu / snn_qclip_backward_cpu), same signatures, same equations
 * (neuron_math.h). Test: tests/test_cuda_ann2snn.c (on the GPU machine: ctest -R cuda_ann2snn).
 *
 *   forward   y = s clip(floor(x/s + 1/2), A_min, A_max),  s = max(step[0], 1e-6)
 *   backward  dx += dy where A_min <= x/s <= A_max
 *             dstep += g sum dy (floor(x/s + 1/2) - x/s inside, A_min below, A_max above)
 *
 * The forward is a division, an add, a floor, two compares and a multiply, each rounded once
 * (the _rn intrinsics say so): the CPU's bits. dx is a copy of dy or nothing: the CPU's bits.
 * dstep is a sum over every element: each block adds its partial sum (a fixed tree, in double)
 * to one double in the context's scratch with an atomicAdd, then a one-thread kernel scales it
 * into dstep, as PLIF's dw (lif.cu); the order of the blocks' arrival varies, so it matches the
 * CPU's (64 fixed slices in double) to rounding, not bitwise. The step is read on the device:
 * no host sync.
 * Memory traffic per element: forward reads x, writes y (8 B); backward reads dy and x, reads +
 * writes dx (16 B).
 */
#include "neuron_cuda.cuh"

/* CPU: snn_qclip_forward_cpu. */
static __global__ void qclip_forward_kernel(float *__restrict__ y, const float *__restrict__ x,
                                            const float *__restrict__ step, snn_neuron_params p,
                                            int64_t n)
{
    const float s = snn_qclip_step_value(step[0]);
    SNN_GRID_STRIDE_LOOP(i, n) y[i] = __fmul_rn(s, snn_qclip_level(&p, __fdiv_rn(x[i], s)));
}

extern "C" void snn_qclip_forward_cuda(float *y, const float *x, const float *step,
                                       const snn_neuron_params *p, int64_t n)
{
    if (n <= 0) return;
    SNN_CUDA_LAUNCH(qclip_forward_kernel, snn_cuda_grid(n, SNN_CUDA_BLOCK), SNN_CUDA_BLOCK, 0, y,
                    x, step, *p, n);
}

/* CPU: snn_qclip_backward_cpu. dx (may be NULL) += dy inside the range; with ds_sum != NULL
 * (dstep wanted) adds this block's sum of dy dy/ds, in double, to *ds_sum. */
static __global__ void qclip_backward_kernel(float *__restrict__ dx, double *__restrict__ ds_sum,
                                             const float *__restrict__ dy,
                                             const float *__restrict__ x,
                                             const float *__restrict__ step, snn_neuron_params p,
                                             int64_t n)
{
    const float s = snn_qclip_step_value(step[0]);
    double acc = 0.0; /* this thread's share of sum dy dy/ds */
    SNN_GRID_STRIDE_LOOP(i, n) {
        const float r = __fdiv_rn(x[i], s);
        const float g = dy[i];
        if (dx && snn_qclip_passes(&p, r)) dx[i] += g;
        if (ds_sum) acc += (double)g * (double)snn_qclip_dy_ds(&p, r);
    }
    if (ds_sum) { /* a kernel argument: uniform, so every thread of the block reaches the sum */
        const double block = snn_block_sum(acc);
        if (threadIdx.x == 0 && block != 0.0) atomicAdd(ds_sum, block);
    }
}

/* dstep[0] += g * sum, rounded once to float as the CPU does. */
static __global__ void qclip_dstep_finish_kernel(float *dstep, const double *ds_sum,
                                                 float grad_scale)
{
    dstep[0] += (float)(ds_sum[0] * (double)grad_scale);
}

extern "C" void snn_qclip_backward_cuda(float *dx, float *dstep, const float *dy, const float *x,
                                        const float *step, const snn_neuron_params *p,
                                        float grad_scale, int64_t n)
{
    double *ds_sum = NULL;
    if (dstep) {
        ds_sum = (double *)snn_cuda_scratch(sizeof *ds_sum);
        SNN_CUDA_CHECK(cudaMemsetAsync(ds_sum, 0, sizeof *ds_sum, snn_cuda_stream()));
    }
    if (n > 0)
        SNN_CUDA_LAUNCH(qclip_backward_kernel, snn_cuda_grid(n, SNN_CUDA_BLOCK), SNN_CUDA_BLOCK,
                        0, dx, ds_sum, dy, x, step, *p, n);
    if (dstep) SNN_CUDA_LAUNCH(qclip_dstep_finish_kernel, 1, 1, 0, dstep, ds_sum, grad_scale);
}
