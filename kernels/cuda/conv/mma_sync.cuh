/*
 * mma_sync.cuh - the warp-level tensor-core instructions the two implicit-GEMM convolutions
 * (conv2d_igemm.cu, conv2d_nhwc.cu) are built from, as one-line wrappers of their PTX
 * (internal; CUDA sources only):
 *
 *   cp_async4 / cp_async16    asynchronous copy global -> shared of 4 or 16 bytes; valid = false
 *                             writes zeros and reads nothing (a padding pixel costs no branch);
 *   cp_async_commit / _wait   close a group of copies / wait until at most PENDING are in flight;
 *   ldmatrix_x4(_trans)       four 8x8 matrices of 16-bit elements from shared memory into the
 *                             fragment registers of mma (transposed: column-major blocks);
 *   mma_bf16 / mma_tf32       d (16x8 fp32) += a b, m16n8k16 bf16 or m16n8k8 TF32.
 *
 * Fragment layouts: PTX ISA, "Matrix Fragments for mma.m16n8k16" (.bf16) and "mma.m16n8k8"
 * (.tf32); each kernel's comment says how its shared-memory tiles map onto them.
 */
#ifndef SNN_MMA_SYNC_CUH
#define SNN_MMA_SYNC_CUH

#include <stdint.h>

static __device__ __forceinline__ uint32_t smem_address(const void *p)
{
    return (uint32_t)__cvta_generic_to_shared(p);
}

/* 4 bytes through L1 (.ca: the NCHW kernel's gathers reread neighbouring pixels) */
static __device__ __forceinline__ void cp_async4(void *dst, const void *src, bool valid)
{
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_address(dst)),
                 "l"(src), "r"(valid ? 4 : 0));
}

/* 16 bytes through L2 only (.cg) */
static __device__ __forceinline__ void cp_async16(void *dst, const void *src, bool valid)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_address(dst)),
                 "l"(src), "r"(valid ? 16 : 0));
}

static __device__ __forceinline__ void cp_async_commit()
{
    asm volatile("cp.async.commit_group;\n" ::);
}

template <int PENDING> static __device__ __forceinline__ void cp_async_wait()
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(PENDING));
}

/* Lanes 8 i .. 8 i + 7 give the row addresses (16 bytes each) of matrix i; register i receives,
 * per lane l, row l / 4, columns 2 (l % 4) and +1 (with .trans: column l / 4, rows 2 (l % 4)
 * and +1). */
static __device__ __forceinline__ void ldmatrix_x4(uint32_t *r, const void *row)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_address(row)));
}
static __device__ __forceinline__ void ldmatrix_x4_trans(uint32_t *r, const void *row)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_address(row)));
}

/* d (16x8, fp32) += a (16x8 tf32, row-major) b (8x8 tf32, column-major) */
static __device__ __forceinline__ void mma_tf32(float *d, const uint32_t *a, const uint32_t *b)
{
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

/* d (16x8, fp32) += a (16x16 bf16, row-major) b (16x8 bf16, column-major) */
static __device__ __forceinline__ void mma_bf16(float *d, const uint32_t *a, const uint32_t *b)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

#endif /* SNN_MMA_SYNC_CUH */
