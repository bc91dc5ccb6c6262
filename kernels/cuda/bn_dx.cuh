/*
 * bn_dx.cuh - a training batch-norm's input gradient, one element at a time: the expression
 * that batchnorm.cu's in-place backward writes and that the channels-last conv's copy of its
 * dout (conv2d_nhwc.cu, snn_bn_dout) computes as it loads, so that both give the same float.
 *
 *   dx = a (dy - c0 - (x - mean) c1) + base,   a = gamma invstd,
 *   c0 = sum dy / M,  c1 = (sum dy (x - mean)) invstd^2 / M       (per channel, M values)
 *
 * (batchnorm.cu's header derives it.) The roundings are written out (bn_dx_value) rather than
 * left to the compiler, which fuses a multiply and an add into one rounding as it sees fit in
 * each kernel: two kernels with the same source line need not give the same bits.
 * Also the two ways backward reads x: fp32 values, or a conv output kept as bf16 bits.
 */
#ifndef SNN_BN_DX_CUH
#define SNN_BN_DX_CUH

#include <stdint.h>

/* A batch-norm's input x as backward reads it: fp32 values (bn_x_f32), or a conv output kept
 * as bfloat16 bits (bn_x_bf16, autograd/bf16_keep.c), read without a copy. */
struct bn_x_f32 {
    const float *p;
    __device__ __forceinline__ float operator[](int64_t at) const { return p[at]; }
};
struct bn_x_bf16 {
    const uint16_t *p;
    __device__ __forceinline__ float operator[](int64_t at) const
    {
        return __uint_as_float((uint32_t)p[at] << 16); /* exact: bf16 is fp32's top half */
    }
};

/* (c0, c1) of a channel from its sums in double: sum dy, sum dy (x - mean), over M values */
static __device__ __forceinline__ float2 bn_dx_coef(double sum_dy, double sum_dy_dev, int64_t M,
                                                    float invstd)
{
    const double sum_dy_xhat = sum_dy_dev * (double)invstd;
    return make_float2((float)(sum_dy / (double)M),
                       (float)(sum_dy_xhat / (double)M * (double)invstd));
}

/* base + a (dy - c0 - (x - m) c1), rounded as: t = dy - c0, u = x - m, r = t - u c1 in one
 * rounding (a fused multiply-add), then base + a r in one rounding. base is 0 for the
 * in-place backward (dx replaces dy): fma(a, r, 0) gives +0 where a r is -0. */
static __device__ __forceinline__ float bn_dx_value(float base, float a, float dy, float x,
                                                    float m, float c0, float c1)
{
    const float t = __fsub_rn(dy, c0), u = __fsub_rn(x, m);
    return __fmaf_rn(a, __fmaf_rn(-u, c1, t), base);
}

#endif /* SNN_BN_DX_CUH */
