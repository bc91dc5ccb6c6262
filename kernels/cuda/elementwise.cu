/*
 * elementwise.cu - CUDA kernels for fill, axpy, lerp, unary ops and broadcasting binary ops.
 * They must match kernels/cpu/elementwise.c (snn_*_cpu of the same names) element for element.
 *
 * All of them are memory-bound one-pass loops: one thread per element in a grid-stride loop
 * (64-bit indices), so the cost is the bytes moved, stated at each kernel. An H100 moves about
 * 3 TB/s, so a 4M-element unary forward (32 MB) takes ~11 us.
 *
 * Broadcasting (numpy rules, shapes right-aligned, padded to out.ndim; snn_broadcast in
 * kernels.h): out element i has coordinates c[d]; it reads a at sum_d c[d] stride_a[d] and b at
 * sum_d c[d] stride_b[d], where a stride is 0 along a broadcast dim. The backward of a
 * broadcast operand sums dout over the dims where it was stretched. The CPU does that as a
 * serial scatter; here it is a gather, one thread (or one block, when the sum is long) per
 * element of the operand, summing its out elements in a fixed order: deterministic, no atomics.
 */
#include "cuda_common.cuh"
#include "kernels/elementwise_math.h"
#include "kernels_cuda.h"

/* ---- fill, axpy, lerp ------------------------------------------------------------------------ */

/* out[i] = value.  Traffic: 4 B written per element.  CPU: snn_fill_cpu. */
static __global__ void fill_forward_kernel(float *out, float value, int64_t n)
{
    SNN_GRID_STRIDE_LOOP(i, n) out[i] = value;
}

/* Zero, the common case (every gradient buffer starts as zeros: autograd/tape.c), is all-zero
 * bytes, which cudaMemsetAsync writes with the driver's wide stores: the BF16 ResNet-18 step's
 * ~330 gradient fills ran at well under half their bytes' bandwidth in the kernel above
 * (docs/benchmarks.md, "Where a step's time goes"). */
extern "C" void snn_fill_cuda(float *out, float value, int64_t n)
{
    if (n <= 0) return;
    if (value == 0.0f && !signbit(value)) {
        SNN_CUDA_CHECK(cudaMemsetAsync(out, 0, (size_t)n * sizeof(float), snn_cuda_stream()));
        return;
    }
    SNN_CUDA_LAUNCH(fill_forward_kernel, snn_cuda_grid(n, SNN_CUDA_BLOCK), SNN_CUDA_BLOCK, 0,
                    out, value, n);
}

/* y[i] += alpha x[i].  Traffic: 8 B read, 4 B written.  CPU: snn_axpy_cpu. */
static __global__ void axpy_forward_kernel(float *y, float alpha, const float *x, int64_t n)
{
    SNN_GRID_STRIDE_LOOP(i, n) y[i] += alpha * x[i];
}

extern "C" void snn_axpy_cuda(float *y, float alpha, const float *x, int64_t n)
{
    if (n <= 0) return;
    SNN_CUDA_LAUNCH(axpy_forward_kernel, snn_cuda_grid(n, SNN_CUDA_BLOCK), SNN_CUDA_BLOCK, 0, y,
                    alpha, x, n);
}

/* y[i] += weight (x[i] - y[i]) (the GPU may fuse it into one fma: a rounding less than the
 * CPU; y == x still stays exact).  Traffic: 8 B read, 4 B written.  CPU: snn_lerp_cpu. */
static __global__ void lerp_kernel(float *y, const float *x, float weight, int64_t n)
{
    SNN_GRID_STRIDE_LOOP(i, n) y[i] += weight * (x[i] - y[i]);
}

extern "C" void snn_lerp_cuda(float *y, const float *x, float weight, int64_t n)
{
    if (n <= 0) return;
    SNN_CUDA_LAUNCH(lerp_kernel, snn_cuda_grid(n, SNN_CUDA_BLOCK), SNN_CUDA_BLOCK, 0, y, x,
                    weight, n);
}

/* ---- unary ----------------------------------------------------------------------------------- */

/* out[i] = op(x[i]).  Traffic: 4 B read, 4 B written.  CPU: snn_unary_forward_cpu.
 * `op` is the same for every thread, so the switch never diverges. */
static __global__ void unary_forward_kernel(snn_unary_op op, float *out, const float *x,
                                            float param, int64_t n)
{
    SNN_GRID_STRIDE_LOOP(i, n) out[i] = snn_unary_value(op, x[i], param);
}

extern "C" void snn_unary_forward_cuda(snn_unary_op op, float *out, const float *x, float param,
                                       int64_t n)
{
    if (n <= 0) return;
    SNN_CUDA_LAUNCH(unary_forward_kernel, snn_cuda_grid(n, SNN_CUDA_BLOCK), SNN_CUDA_BLOCK, 0, op,
                    out, x, param, n);
}

/* dx[i] += dout[i] op'(x[i]).  Traffic: 16 B read (dout, x, out, dx), 4 B written.
 * CPU: snn_unary_backward_cpu. */
static __global__ void unary_backward_kernel(snn_unary_op op, float *dx, const float *dout,
                                             const float *x, const float *out, float param,
                                             int64_t n)
{
    SNN_GRID_STRIDE_LOOP(i, n) dx[i] += dout[i] * snn_unary_derivative(op, x[i], out[i], param);
}

extern "C" void snn_unary_backward_cuda(snn_unary_op op, float *dx, const float *dout,
                                        const float *x, const float *out, float param, int64_t n)
{
    if (n <= 0 || !dx) return;
    SNN_CUDA_LAUNCH(unary_backward_kernel, snn_cuda_grid(n, SNN_CUDA_BLOCK), SNN_CUDA_BLOCK, 0,
                    op, dx, dout, x, out, param, n);
}

/* ---- binary ---------------------------------------------------------------------------------- */

/* out[i] = a[i] op b[i] for same shapes.  Traffic: 8 B read, 4 B written. */
static __global__ void binary_forward_same_kernel(snn_binary_op op, float *out, const float *a,
                                                  const float *b, int64_t n)
{
    SNN_GRID_STRIDE_LOOP(i, n) out[i] = snn_binary_value(op, a[i], b[i]);
}

/* out[i] = a[ia(i)] op b[ib(i)] with broadcast offsets.  Traffic: 4 B written per output; a
 * and b are read through the cache (a broadcast operand is re-read, mostly from L1/L2).
 * CPU: snn_binary_forward_cpu. */
static __global__ void binary_forward_broadcast_kernel(snn_binary_op op, float *out, const float *a,
                                                       const float *b, snn_broadcast bc)
{
    SNN_GRID_STRIDE_LOOP(i, bc.numel) {
        int64_t rest = i, ia = 0, ib = 0;
        for (int d = bc.out.ndim - 1; d >= 0; d--) {
            const int64_t coord = rest % bc.out.dim[d];
            rest /= bc.out.dim[d];
            ia += coord * bc.stride_a[d];
            ib += coord * bc.stride_b[d];
        }
        out[i] = snn_binary_value(op, a[ia], b[ib]);
    }
}

extern "C" void snn_binary_forward_cuda(snn_binary_op op, float *out, const float *a,
                                        const float *b, const snn_broadcast *bc)
{
    const int64_t n = bc->numel;
    if (n <= 0) return;
    const unsigned grid = snn_cuda_grid(n, SNN_CUDA_BLOCK);
    if (bc->same_shape)
        SNN_CUDA_LAUNCH(binary_forward_same_kernel, grid, SNN_CUDA_BLOCK, 0, op, out, a, b, n);
    else
        SNN_CUDA_LAUNCH(binary_forward_broadcast_kernel, grid, SNN_CUDA_BLOCK, 0, op, out, a, b,
                        *bc);
}

/* da[i] += dout[i] d/da, db[i] += dout[i] d/db for same shapes (NULL skips).
 * Traffic: 12 B read + 4-8 B read-modify-write per element.  CPU: snn_binary_backward_cpu. */
static __global__ void binary_backward_same_kernel(snn_binary_op op, float *da, float *db,
                                                   const float *dout, const float *a,
                                                   const float *b, int64_t n)
{
    SNN_GRID_STRIDE_LOOP(i, n) {
        float dda, ddb;
        snn_binary_derivatives(op, a[i], b[i], &dda, &ddb);
        if (da) da[i] += dout[i] * dda;
        if (db) db[i] += dout[i] * ddb;
    }
}

/*
 * The gather plan for one broadcast operand t (a or b): its element j holds the coordinates
 * c[d] = (j / stride_t[d]) % out.dim[d] along every dim it spans (t is contiguous, so its
 * strides are its own row-major strides, 0 where stretched), and it received every out element
 * that agrees with those and runs freely over the `reduced` dims (stride 0, out.dim > 1):
 * R = product of those dims terms, summed in row-major order of the reduced coordinates.
 */
typedef struct broadcast_gather {
    snn_broadcast bc;
    int64_t stride_t[SNN_MAX_DIMS]; /* = bc.stride_a or bc.stride_b */
    int reduced[SNN_MAX_DIMS];      /* the reduced dims, outermost first */
    int nreduced;
    int64_t terms;                  /* R: out elements per element of t */
    int64_t numel_t;
    int which;                      /* 0: t is a (d/da), 1: t is b (d/db) */
} broadcast_gather;

/* Term r (0 <= r < R) of element j of t: dout[i] * d(a op b)/dt at the out element i. */
static __device__ __forceinline__ double gather_term(snn_binary_op op, const broadcast_gather &g,
                                                     const float *dout, const float *a,
                                                     const float *b, int64_t j, int64_t r)
{
    int64_t coord[SNN_MAX_DIMS];
    const int ndim = g.bc.out.ndim;
    for (int d = 0; d < ndim; d++)
        coord[d] = g.stride_t[d] ? (j / g.stride_t[d]) % g.bc.out.dim[d] : 0;
    for (int k = g.nreduced - 1; k >= 0; k--) {
        const int d = g.reduced[k];
        coord[d] = r % g.bc.out.dim[d];
        r /= g.bc.out.dim[d];
    }
    int64_t i = 0, ia = 0, ib = 0;
    for (int d = 0; d < ndim; d++) {
        i = i * g.bc.out.dim[d] + coord[d];
        ia += coord[d] * g.bc.stride_a[d];
        ib += coord[d] * g.bc.stride_b[d];
    }
    float dda, ddb;
    snn_binary_derivatives(op, a[ia], b[ib], &dda, &ddb);
    return (double)(dout[i] * (g.which == 0 ? dda : ddb));
}

/* One thread per element j of t: t[j] += sum_r term(j, r). For short sums (R small).
 * Traffic: R dout reads (plus a, b through the cache) and one read-modify-write per j. */
static __global__ void binary_backward_gather_thread_kernel(snn_binary_op op, float *dt,
                                                            const float *dout, const float *a,
                                                            const float *b, broadcast_gather g)
{
    SNN_GRID_STRIDE_LOOP(j, g.numel_t) {
        double acc = 0.0;
        for (int64_t r = 0; r < g.terms; r++) acc += gather_term(op, g, dout, a, b, j, r);
        dt[j] += (float)acc;
    }
}

/* One block per element j of t, its threads striding over r and meeting in a block sum. For
 * long sums (a bias-like operand stretched over a whole batch). Same traffic as above. */
static __global__ void binary_backward_gather_block_kernel(snn_binary_op op, float *dt,
                                                           const float *dout, const float *a,
                                                           const float *b, broadcast_gather g)
{
    for (int64_t j = blockIdx.x; j < g.numel_t; j += gridDim.x) {
        double acc = 0.0;
        for (int64_t r = threadIdx.x; r < g.terms; r += blockDim.x)
            acc += gather_term(op, g, dout, a, b, j, r);
        acc = snn_block_sum(acc);
        if (threadIdx.x == 0) dt[j] += (float)acc;
    }
}

static void broadcast_backward_one(snn_binary_op op, float *dt, int which, const float *dout,
                                   const float *a, const float *b, const snn_broadcast *bc)
{
    broadcast_gather g;
    g.bc = *bc;
    g.which = which;
    g.numel_t = which == 0 ? bc->numel_a : bc->numel_b;
    g.nreduced = 0;
    g.terms = 1;
    for (int d = 0; d < bc->out.ndim; d++) {
        g.stride_t[d] = which == 0 ? bc->stride_a[d] : bc->stride_b[d];
        if (g.stride_t[d] == 0 && bc->out.dim[d] > 1) {
            g.reduced[g.nreduced++] = d;
            g.terms *= bc->out.dim[d];
        }
    }
    if (g.numel_t <= 0) return;
    /* a long sum gets a block; many short sums get a thread each */
    if (g.terms >= 512) {
        const int64_t cap = (int64_t)snn_cuda_sm_count() * 8;
        const unsigned grid = (unsigned)(g.numel_t < cap ? g.numel_t : cap);
        SNN_CUDA_LAUNCH(binary_backward_gather_block_kernel, grid, 256, 0, op, dt, dout, a, b, g);
    } else {
        SNN_CUDA_LAUNCH(binary_backward_gather_thread_kernel,
                        snn_cuda_grid(g.numel_t, SNN_CUDA_BLOCK), SNN_CUDA_BLOCK, 0, op, dt, dout,
                        a, b, g);
    }
}

extern "C" void snn_binary_backward_cuda(snn_binary_op op, float *da, float *db,
                                         const float *dout, const float *a, const float *b,
                                         const snn_broadcast *bc)
{
    if (bc->numel <= 0 || (!da && !db)) return;
    if (bc->same_shape) {
        SNN_CUDA_LAUNCH(binary_backward_same_kernel, snn_cuda_grid(bc->numel, SNN_CUDA_BLOCK),
                        SNN_CUDA_BLOCK, 0, op, da, db, dout, a, b, bc->numel);
        return;
    }
    if (da) broadcast_backward_one(op, da, 0, dout, a, b, bc);
    if (db) broadcast_backward_one(op, db, 1, dout, a, b, bc);
}
