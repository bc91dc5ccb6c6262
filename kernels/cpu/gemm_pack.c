/*
 * gemm_pack.c - packing for the blocked CPU SGEMM (gemm.c): copies of op(A) and op(B) blocks
 * laid out in exactly the order the micro-kernel reads them, and the per-thread buffers that
 * hold them.
 *
 * Packing copies each block once into a contiguous, aligned buffer, so the micro-kernel streams
 * unit-stride memory whatever the transposes and leading dimensions were, and blocks past the
 * matrix edge are zero-padded so that the micro-kernel always computes a full tile. Copies
 * only: no arithmetic happens here, so packing never changes a result.
 *
 * Memory traffic: each packed float is read once from A or B and written once to the buffer;
 * A is packed ceil(N / NC) times and B once per thread that shares its columns (gemm.c).
 *
 * Packing buffers: one per live thread, allocated with snn_alloc on first use and kept between
 * calls (a training step calls the SGEMM hundreds of times), handed to the next new thread when
 * its thread exits; see snn_gemm_release_cpu. Without a buffer the blocked path still sums in
 * the same slices with the same roundings (slowly, gemm.c), so no result depends on memory.
 */
#include <stdatomic.h>
#include <stdint.h>
#include <threads.h>

#include "kernels/kernels.h"
#include "gemm.h"
#include "gemm_blocking.h"

/* ---------------------------------------------------------------------------------------------
 * Packing.
 * ------------------------------------------------------------------------------------------- */

/* op(A)[i0 : i0+mc, p0 : p0+kc] -> dst as ceil(mc / MR) micro-panels, each (kc, MR): for every
 * k step the MR values of one column of op(A), rows past mc padded with zeros. */
void snn_gemm_pack_a_cpu(bool trans_a, const float *A, int lda, int i0, int p0, int mc, int kc,
                   float *restrict dst)
{
    for (int ir = 0; ir < mc; ir += MR) {
        int mr = min_int(MR, mc - ir);
        if (!trans_a) {
            /* A is (M, K): row i of op(A) is contiguous, so read MR rows side by side. */
            const float *src = A + (int64_t)(i0 + ir) * lda + p0;
            for (int p = 0; p < kc; p++) {
                for (int r = 0; r < mr; r++) dst[p * MR + r] = src[(int64_t)r * lda + p];
                for (int r = mr; r < MR; r++) dst[p * MR + r] = 0.0f;
            }
        } else {
            /* A is (K, M): the MR values of one k step are contiguous. */
            for (int p = 0; p < kc; p++) {
                const float *src = A + (int64_t)(p0 + p) * lda + i0 + ir;
                for (int r = 0; r < mr; r++) dst[p * MR + r] = src[r];
                for (int r = mr; r < MR; r++) dst[p * MR + r] = 0.0f;
            }
        }
        dst += (int64_t)MR * kc;
    }
}

/* op(B)[p0 : p0+kc, j0 : j0+nc] -> dst as ceil(nc / NR) micro-panels, each (kc, NR): for every
 * k step NR consecutive values of one row of op(B), columns past nc padded with zeros. */
void snn_gemm_pack_b_cpu(bool trans_b, const float *B, int ldb, int p0, int j0, int kc, int nc,
                   float *restrict dst)
{
    for (int jr = 0; jr < nc; jr += NR) {
        int nr = min_int(NR, nc - jr);
        if (!trans_b) {
            /* B is (K, N): one k step of the panel is a contiguous run of a row. */
            for (int p = 0; p < kc; p++) {
                const float *src = B + (int64_t)(p0 + p) * ldb + j0 + jr;
                for (int j = 0; j < nr; j++) dst[p * NR + j] = src[j];
                for (int j = nr; j < NR; j++) dst[p * NR + j] = 0.0f;
            }
        } else {
            /* B is (N, K): column j of op(B) is row j of B. A transpose, done 16 k steps at a
             * time so that the (16, NR) piece of dst being written stays in L1 while the nr
             * rows are read, each in a unit-stride run of 16. */
            for (int pb = 0; pb < kc; pb += 16) {
                int pn = min_int(16, kc - pb);
                for (int j = 0; j < nr; j++) {
                    const float *src = B + (int64_t)(j0 + jr + j) * ldb + p0 + pb;
                    for (int p = 0; p < pn; p++) dst[(pb + p) * NR + j] = src[p];
                }
                for (int j = nr; j < NR; j++)
                    for (int p = 0; p < pn; p++) dst[(pb + p) * NR + j] = 0.0f;
            }
        }
        dst += (int64_t)NR * kc;
    }
}

/* ---------------------------------------------------------------------------------------------
 * Per-thread packing buffers.
 *
 * Each thread that runs the blocked path holds one slot of a static table, found through a
 * thread-local pointer; the slot's buffer is allocated with snn_alloc on first use and kept.
 * The table (not the thread) owns the memory, so snn_gemm_release_cpu can free every buffer at
 * shutdown (the first buffer taken registers it with snn_on_shutdown, kernels/kernels.h), and a
 * thread simply allocates again on its next call.
 *
 * When a thread exits, its slot goes back to the table (a C11 tss destructor), buffer and all,
 * and the next new thread takes it over. This matters: OpenMP runtimes end and start threads
 * whenever the team size changes (libgomp lets the surplus threads of a 16-thread team exit
 * when a 3-thread team runs, and starts new ones for the next 16-thread team). Slots once
 * handed out for good ran out after ~20 such switches; the threads past the table then took
 * the unpacked path, which rounds differently, so a result depended on the history of thread
 * counts (and every dead thread left its 4 MiB buffer behind). Now the table only needs one
 * slot per thread alive at once.
 * ------------------------------------------------------------------------------------------- */

#define MAX_SLOTS 256

typedef struct pack_slot {
    float *buffer;      /* PACK_FLOATS floats, or NULL */
    atomic_bool taken;  /* held by a live thread */
} pack_slot;

static pack_slot slots[MAX_SLOTS];
static _Thread_local pack_slot *my_slot;
static tss_t slot_key;          /* its destructor returns a thread's slot when the thread exits */
static bool slot_key_ok;
static once_flag slot_key_once = ONCE_FLAG_INIT;

static void return_slot(void *slot)
{
    /* release: the buffer pointer this thread wrote is seen by the next owner */
    atomic_store_explicit(&((pack_slot *)slot)->taken, false, memory_order_release);
}

static void make_slot_key(void)
{
    slot_key_ok = tss_create(&slot_key, return_slot) == thrd_success;
}

/* The calling thread's packing buffer, or NULL when memory (or the slot table) ran out. */
float *snn_gemm_pack_buffer_cpu(void)
{
    if (!my_slot) {
        call_once(&slot_key_once, make_slot_key);
        if (!slot_key_ok) return NULL; /* a slot could never come back: do not take one */
        for (int s = 0; s < MAX_SLOTS && !my_slot; s++) {
            bool expected = false;
            if (atomic_compare_exchange_strong_explicit(&slots[s].taken, &expected, true,
                                                        memory_order_acquire,
                                                        memory_order_relaxed))
                my_slot = &slots[s];
        }
        if (!my_slot) return NULL;
        if (tss_set(slot_key, my_slot) != thrd_success) {
            return_slot(my_slot);
            my_slot = NULL;
            return NULL;
        }
    }
    if (!my_slot->buffer) {
        my_slot->buffer = snn_alloc(PACK_FLOATS * sizeof(float), SNN_CPU);
        snn_on_shutdown(snn_gemm_release_cpu); /* once per run: registering twice is once */
    }
    return my_slot->buffer;
}

size_t snn_gemm_pack_bytes_cpu(void) { return PACK_FLOATS * sizeof(float); }

/* Called at shutdown, when no SGEMM runs: slots stay with their threads, buffers are freed. */
void snn_gemm_release_cpu(void)
{
    for (int s = 0; s < MAX_SLOTS; s++) {
        if (!slots[s].buffer) continue;
        snn_free(slots[s].buffer, PACK_FLOATS * sizeof(float), SNN_CPU);
        slots[s].buffer = NULL;
    }
}
