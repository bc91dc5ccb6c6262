/*
 * gemm_blocking.h - what the blocked CPU SGEMM's two files share (internal): the register tile
 * and cache block sizes, and the packing that lays blocks out for the micro-kernel.
 *
 *   gemm.c       the micro-kernels and the drivers (the loop nest of the Goto / BLIS scheme)
 *   gemm_pack.c  packing op(A) and op(B) blocks into micro-panels, and the per-thread buffers
 *                that hold them
 *
 * Both must agree on MR, NR, KC, MC and NC: the packed layout is the micro-kernel's read order.
 */
#ifndef SNN_GEMM_BLOCKING_H
#define SNN_GEMM_BLOCKING_H

#include <stdbool.h>
#include <stddef.h>


/* ---------------------------------------------------------------------------------------------
 * Tile and block sizes.
 *
 * MR x NR is the register tile of C the micro-kernel keeps in vector registers for the whole
 * KC-long sum. It must (1) fit the register file with room for the B row and an A broadcast,
 * (2) hold enough independent accumulators to cover the FMA latency (4 cycles x 2 pipes = 8 in
 * flight on Zen 4 and Skylake-X), and (3) load as little as possible per FMA.
 *
 * The block sizes were tuned on the CPU snn.c is developed on (AMD EPYC Zen 4: 32 KiB L1d and
 * 1 MiB L2 per core, 32 MiB shared L3; sweep of KC 192-1024, MC 48-192, NC 1024-4096 on
 * 1024^3 and 2048^3, one thread). With KC = 512: one A micro-panel (MR, KC) is 16 KiB and sits
 * in L1 while it meets the B micro-panels; the packed A block (MC, KC) is 192 KiB and the
 * B micro-panel (KC, NR) 64 KiB, both in L2; the packed B panel (KC, NC) is 4 MiB, in L3.
 * A long KC matters most: C is loaded and stored once per KC slice, and slices of 512 made
 * 1024^3 about 15 % faster than slices of 256. Override with -DSNN_GEMM_KC=... to re-tune.
 * ------------------------------------------------------------------------------------------- */

#if defined(__AVX512F__)
/* 8 x 32: 8 rows x 2 zmm = 16 accumulators + 2 B vectors + 1 broadcast = 19 of 32 zmm.
 * Per k step: 2 loads of B, 8 broadcasts of A (folded into the FMA as {1to16} operands) and
 * 16 FMAs; Zen 4 issues one zmm FMA and two loads per cycle, so the FMAs stay the limit.
 * 16 accumulators cover the FMA latency twice over. 12 x 32 (24 accumulators) was as fast on
 * square matrices, but conv channel counts are multiples of 8 and 32: with MR = 8 a C_out = 64
 * layer fills every tile (MR = 12 pads 64 rows to 72), worth ~20 % on those SGEMMs. */
#define MR 8
#define NR 32
#elif defined(__AVX2__) && defined(__FMA__)
/* 6 x 16: 6 rows x 2 ymm = 12 accumulators + 2 B vectors + 1 broadcast = 15 of 16 ymm. */
#define MR 6
#define NR 16
#else
/* Portable: a 4 x 8 tile in plain C. With SSE2 only (16 registers of 4 floats) its 8 vector
 * accumulators stay in registers; 4 x 16 would need all 16 and spills, 6x slower. */
#define MR 4
#define NR 8
#endif

#ifndef SNN_GEMM_KC
#define SNN_GEMM_KC 512
#endif
#ifndef SNN_GEMM_MC
#define SNN_GEMM_MC (MR * 12)
#endif
#ifndef SNN_GEMM_NC
#define SNN_GEMM_NC (NR * 64)
#endif
#define KC SNN_GEMM_KC
#define MC SNN_GEMM_MC /* a multiple of MR */
#define NC SNN_GEMM_NC /* a multiple of NR */

static inline int min_int(int a, int b) { return a < b ? a : b; }

/* op(A)[i0 : i0+mc, p0 : p0+kc] -> dst as ceil(mc / MR) micro-panels, each (kc, MR) */
void snn_gemm_pack_a_cpu(bool trans_a, const float *A, int lda, int i0, int p0, int mc, int kc,
                         float *restrict dst);
/* op(B)[p0 : p0+kc, j0 : j0+nc] -> dst as ceil(nc / NR) micro-panels, each (kc, NR) */
void snn_gemm_pack_b_cpu(bool trans_b, const float *B, int ldb, int p0, int j0, int kc, int nc,
                         float *restrict dst);
/* The calling thread's packing buffer (PACK_FLOATS floats: Ap (MC, KC) then Bp (KC, NC)), or
 * NULL when memory (or the slot table) ran out. */
#define PACK_FLOATS ((size_t)MC * KC + (size_t)KC * NC)
float *snn_gemm_pack_buffer_cpu(void);

#endif /* SNN_GEMM_BLOCKING_H */
