/*
 * comm_nccl.c - the communicator backend for CUDA tensors: NCCL (ncclAllReduce, ncclAllGather,
 * ncclBroadcast), the library every multi-GPU framework uses. Built only when CMake finds NCCL
 * (SNN_NCCL); comm.c is the one file that knows.
 *
 * Streams. snn.c queues all its work on one compute stream (kernels/cuda/cuda_context.cu). Every
 * NCCL call here goes on one side stream, so collectives of this communicator never run
 * concurrently with each other, in the order the host issued them (the same on every rank):
 *   - "in order" collectives (sync-BN statistics, broadcasts, host reductions):
 *         compute --event--> side: NCCL op --event--> compute
 *     the compute stream's later work waits for the result;
 *   - gradient buckets (allreduce_side): compute --event--> side: ncclAllReduce, and the
 *     compute stream goes on with the backward; join_side makes it wait for all of them before
 *     the optimizer step. That is the overlap of communication with the backward pass.
 * No host synchronisation anywhere in a step.
 *
 * Faults (docs/distributed.md). A watchdog thread, every 100 ms:
 *   - watches the rendezvous sockets: a rank that dies closes them (the kernel does it for a
 *     killed process); one that leaves in order sends a goodbye byte first. A connection that
 *     closes without goodbye means the rank failed or was killed;
 *   - asks ncclCommGetAsyncError for errors NCCL found in the background;
 *   - checks that the newest collective completes within the timeout once the host has
 *     stopped issuing new ones (a rank that hangs).
 * On any of these it prints which and why, aborts the communicator (ncclCommAbort, which also
 * frees kernels spinning on a dead peer) and ends the process with exit code
 * SNN_DIST_EXIT_PEER: its own socket closes, so the fault travels through rank 0 to every
 * rank within a few polling periods. Checkpoints are written atomically (nn/checkpoint_save.c), so
 * ending at any point leaves the last one intact. An alarm(30) ends the process even if the
 * abort itself were to hang.
 *
 * NVLink multicast (NVLS) is left to NCCL's environment (NCCL_NVLS_ENABLE): this file never
 * sets or unsets a variable.
 *
 * Test: tests/test_multigpu_train.c (2 GPUs), tests/test_cuda_dist_smoke.c (1 GPU, world 1).
 */
#define _GNU_SOURCE /* MSG_DONTWAIT with glibc in C11 mode */
#include <cuda_runtime.h>
#include <errno.h>
#include <nccl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "dist_internal.h"
#include "tensor/cuda_options.h"
#include "tensor/error.h"

#define WATCH_PERIOD_MS 100
#define GOODBYE 'B'

struct snn_comm {
    ncclComm_t nccl;             /* NULL until ncclCommInitRank returns and once destroyed; the
                                    main thread sets it, the watchdog reads it, under comm_lock */
    pthread_mutex_t comm_lock;
    int rank, world, device;
    double timeout_s;
    cudaStream_t compute, side;
    cudaEvent_t to_side, to_compute;   /* ordering (no timing) */
    cudaEvent_t backward_done, comm_done; /* timing: exposed communication of the last join */
    float *barrier;                    /* (1) on the device */
    snn_dist_link *link;
    /* the watchdog */
    pthread_t thread;
    bool thread_running;
    atomic_int stop;
    pthread_mutex_t progress_lock;
    cudaEvent_t progress;              /* recorded after the newest collective */
    double issued_at;                  /* when it was issued; 0: nothing issued yet */
};

static ncclDataType_t nccl_type(snn_comm_type t)
{
    return t == SNN_COMM_FLOAT ? ncclFloat : t == SNN_COMM_DOUBLE ? ncclDouble : ncclUint8;
}

static snn_status cuda_error(const char *what, cudaError_t e)
{
    return snn_error(SNN_ERR_STATE, "nccl backend: %s failed: %s", what, cudaGetErrorString(e));
}

static snn_status nccl_error(snn_comm *c, const char *what, ncclResult_t r)
{
    ncclComm_t comm = c ? c->nccl : NULL; /* the main thread's own field */
    return snn_error(SNN_ERR_IO, "nccl backend: rank %d: %s failed: %s (%s)", c ? c->rank : -1,
                     what, ncclGetErrorString(r), comm ? ncclGetLastError(comm) : "");
}

#define CUDA_TRY(call)                                                                     \
    do {                                                                                   \
        cudaError_t e_ = (call);                                                           \
        if (e_ != cudaSuccess) return cuda_error(#call, e_);                               \
    } while (0)

#define NCCL_TRY(c, call)                                                                  \
    do {                                                                                   \
        ncclResult_t r_ = (call);                                                          \
        if (r_ != ncclSuccess) return nccl_error((c), #call, r_);                          \
    } while (0)

/* The GPU of a rank: its local rank, or GPU 0 when the launcher left one visible (Slurm's
 * --gpus-per-task binds each task to its own GPU that way). */
static snn_status select_device(int local_rank, int *device)
{
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count < 1)
        return snn_error(SNN_ERR_UNSUPPORTED, "nccl backend: no CUDA device is visible");
    if (count > 1 && local_rank >= count)
        return snn_error(SNN_ERR_ARGUMENT, "nccl backend: local rank %d needs GPU %d, but only %d "
                         "are visible; hint: start at most %d ranks per host", local_rank,
                         local_rank, count, count);
    *device = count == 1 ? 0 : local_rank;
    CUDA_TRY(cudaSetDevice(*device));
    return SNN_OK;
}

static snn_status nccl_make_id(void *id, int local_rank)
{
    int device;
    if (select_device(local_rank, &device) != SNN_OK) return snn_last_status();
    NCCL_TRY(NULL, ncclGetUniqueId((ncclUniqueId *)id));
    return SNN_OK;
}

/* ---- the watchdog ------------------------------------------------------------------------- */

static void fault(snn_comm *c, const char *what)
{
    fprintf(stderr, "snn.c dist: rank %d: %s; aborting NCCL and stopping (exit code %d)\n",
            c->rank, what, SNN_DIST_EXIT_PEER);
    fflush(stderr);
    alarm(30); /* the default action of SIGALRM ends the process should the abort hang */
    pthread_mutex_lock(&c->comm_lock);
    ncclComm_t comm = c->nccl;
    pthread_mutex_unlock(&c->comm_lock);
    if (comm) ncclCommAbort(comm);
    _exit(SNN_DIST_EXIT_PEER);
}

static void *watchdog_main(void *arg)
{
    snn_comm *c = arg;
    cudaSetDevice(c->device); /* the current device is per thread */
    const int world = c->link->world;
    struct pollfd *watch = calloc((size_t)world, sizeof *watch);
    int *peer = calloc((size_t)world, sizeof *peer);
    if (!watch || !peer) {
        fprintf(stderr, "snn.c dist: rank %d: no memory for the watchdog; faults of other ranks "
                "will only show as a timeout\n", c->rank);
        free(watch);
        free(peer);
        return NULL;
    }
    int n = 0;
    for (int r = 0; r < world; r++)
        if (c->link->fds[r] >= 0) {
            watch[n] = (struct pollfd){c->link->fds[r], POLLIN, 0};
            peer[n++] = r;
        }
    while (!atomic_load(&c->stop)) {
        int ready = poll(watch, (nfds_t)n, WATCH_PERIOD_MS);
        if (atomic_load(&c->stop)) break;
        for (int i = 0; ready > 0 && i < n; i++) {
            if (watch[i].fd < 0 || !watch[i].revents) continue;
            char byte = 0;
            ssize_t k = recv(watch[i].fd, &byte, 1, MSG_DONTWAIT);
            if (k == 1 && byte == GOODBYE) {
                watch[i].fd = -1; /* left in order: its closing is no fault */
            } else if (k == 0 || (k < 0 && errno != EAGAIN && errno != EINTR)) {
                char what[160];
                snprintf(what, sizeof what, "rank %d left without finishing (it failed or was "
                         "killed: see its own messages)", peer[i]);
                fault(c, what);
            }
        }
        ncclResult_t async = ncclSuccess;
        char what[300] = "";
        pthread_mutex_lock(&c->comm_lock); /* the communicator cannot be destroyed meanwhile */
        if (c->nccl && ncclCommGetAsyncError(c->nccl, &async) == ncclSuccess &&
            async != ncclSuccess && async != ncclInProgress)
            snprintf(what, sizeof what, "NCCL reported an error: %s (%s)",
                     ncclGetErrorString(async), ncclGetLastError(c->nccl));
        pthread_mutex_unlock(&c->comm_lock);
        if (what[0]) fault(c, what);
        pthread_mutex_lock(&c->progress_lock);
        double issued = c->issued_at;
        bool stuck = issued > 0 && snn_dist_now() - issued > c->timeout_s &&
                     cudaEventQuery(c->progress) == cudaErrorNotReady;
        pthread_mutex_unlock(&c->progress_lock);
        if (stuck) {
            snprintf(what, sizeof what, "a collective made no progress for %.0f s (the timeout): "
                     "a rank hangs, or is gone without closing its connection", c->timeout_s);
            fault(c, what);
        }
    }
    free(watch);
    free(peer);
    return NULL;
}

/* After a collective is queued on the side stream: the watchdog's timeout runs from now. */
static snn_status note_progress(snn_comm *c)
{
    pthread_mutex_lock(&c->progress_lock);
    cudaError_t e = cudaEventRecord(c->progress, c->side);
    c->issued_at = snn_dist_now();
    pthread_mutex_unlock(&c->progress_lock);
    return e == cudaSuccess ? SNN_OK : cuda_error("cudaEventRecord(progress)", e);
}

/* ---- collectives ---------------------------------------------------------------------------- */

/* side waits for the compute stream's queued work */
static snn_status side_after_compute(snn_comm *c)
{
    CUDA_TRY(cudaEventRecord(c->to_side, c->compute));
    CUDA_TRY(cudaStreamWaitEvent(c->side, c->to_side, 0));
    return SNN_OK;
}

/* the compute stream's later work waits for the side stream's queued work */
static snn_status compute_after_side(snn_comm *c)
{
    CUDA_TRY(cudaEventRecord(c->to_compute, c->side));
    CUDA_TRY(cudaStreamWaitEvent(c->compute, c->to_compute, 0));
    return SNN_OK;
}

static snn_status nccl_allreduce(snn_comm *c, void *buf, size_t count, snn_comm_type t)
{
    if (t == SNN_COMM_BYTE) return snn_error(SNN_ERR_ARGUMENT, "nccl backend: cannot sum bytes");
    if (side_after_compute(c) != SNN_OK) return snn_last_status();
    NCCL_TRY(c, ncclAllReduce(buf, buf, count, nccl_type(t), ncclSum, c->nccl, c->side));
    if (note_progress(c) != SNN_OK) return snn_last_status();
    return compute_after_side(c);
}

static snn_status nccl_allgather(snn_comm *c, void *recv, const void *send, size_t count,
                                 snn_comm_type t)
{
    if (side_after_compute(c) != SNN_OK) return snn_last_status();
    NCCL_TRY(c, ncclAllGather(send, recv, count, nccl_type(t), c->nccl, c->side));
    if (note_progress(c) != SNN_OK) return snn_last_status();
    return compute_after_side(c);
}

static snn_status nccl_broadcast(snn_comm *c, void *buf, size_t count, snn_comm_type t)
{
    if (side_after_compute(c) != SNN_OK) return snn_last_status();
    NCCL_TRY(c, ncclBroadcast(buf, buf, count, nccl_type(t), 0, c->nccl, c->side));
    if (note_progress(c) != SNN_OK) return snn_last_status();
    return compute_after_side(c);
}

static snn_status nccl_side(snn_comm *c, float *buf, size_t count)
{
    if (side_after_compute(c) != SNN_OK) return snn_last_status();
    NCCL_TRY(c, ncclAllReduce(buf, buf, count, ncclFloat, ncclSum, c->nccl, c->side));
    return note_progress(c);
}

static snn_status nccl_join(snn_comm *c)
{
    /* two timing events per step (a few microseconds), read only by nccl_exposed_ms */
    CUDA_TRY(cudaEventRecord(c->backward_done, c->compute));
    CUDA_TRY(cudaEventRecord(c->comm_done, c->side));
    return compute_after_side(c);
}

static double nccl_exposed_ms(snn_comm *c)
{
    float ms = 0.0f;
    if (cudaEventSynchronize(c->comm_done) != cudaSuccess ||
        cudaEventSynchronize(c->backward_done) != cudaSuccess ||
        cudaEventElapsedTime(&ms, c->backward_done, c->comm_done) != cudaSuccess)
        return -1.0;
    return ms > 0.0f ? (double)ms : 0.0;
}

/* ---- open and close ----------------------------------------------------------------------- */

static void destroy_cuda(snn_comm *c)
{
    cudaEvent_t events[] = {c->to_side, c->to_compute, c->backward_done, c->comm_done, c->progress};
    for (size_t i = 0; i < sizeof events / sizeof events[0]; i++)
        if (events[i]) cudaEventDestroy(events[i]);
    if (c->side) cudaStreamDestroy(c->side);
    if (c->barrier) snn_free(c->barrier, sizeof(float), SNN_CUDA);
}

static void stop_watchdog(snn_comm *c)
{
    if (!c->thread_running) return;
    atomic_store(&c->stop, 1);
    pthread_join(c->thread, NULL);
    c->thread_running = false;
}

static void release(snn_comm *c, bool goodbye)
{
    stop_watchdog(c);
    if (goodbye) {
        const char bye = GOODBYE;
        for (int r = 0; r < c->link->world; r++)
            if (c->link->fds[r] >= 0) (void)!send(c->link->fds[r], &bye, 1, MSG_NOSIGNAL);
    }
    snn_dist_link_close(c->link);
    destroy_cuda(c);
    pthread_mutex_destroy(&c->progress_lock);
    pthread_mutex_destroy(&c->comm_lock);
    snn_free(c, sizeof *c, SNN_CPU);
}

static snn_status setup_cuda(snn_comm *c)
{
    CUDA_TRY(cudaStreamCreateWithFlags(&c->side, cudaStreamNonBlocking));
    CUDA_TRY(cudaEventCreateWithFlags(&c->to_side, cudaEventDisableTiming));
    CUDA_TRY(cudaEventCreateWithFlags(&c->to_compute, cudaEventDisableTiming));
    CUDA_TRY(cudaEventCreateWithFlags(&c->progress, cudaEventDisableTiming));
    CUDA_TRY(cudaEventCreate(&c->backward_done));
    CUDA_TRY(cudaEventCreate(&c->comm_done));
    c->compute = (cudaStream_t)snn_cuda_stream();
    c->barrier = snn_alloc(sizeof(float), SNN_CUDA);
    if (!c->barrier) return snn_error(SNN_ERR_MEMORY, "nccl backend: out of device memory");
    return SNN_OK;
}

static snn_comm *nccl_open(const void *id, snn_dist_link *link, int rank, int world,
                           int local_rank, double timeout_s)
{
    snn_comm *c = snn_alloc(sizeof *c, SNN_CPU);
    if (!c) {
        snn_dist_link_close(link);
        return snn_error_null(SNN_ERR_MEMORY, "nccl backend: out of host memory");
    }
    memset(c, 0, sizeof *c);
    atomic_init(&c->stop, 0);
    pthread_mutex_init(&c->progress_lock, NULL);
    pthread_mutex_init(&c->comm_lock, NULL);
    c->rank = rank;
    c->world = world;
    c->timeout_s = timeout_s;
    c->link = link;
    snn_status st = select_device(local_rank, &c->device);
    if (st == SNN_OK) st = setup_cuda(c);
    /* the watchdog first: a rank that dies during ncclCommInitRank must not hang the others */
    if (st == SNN_OK) {
        if (pthread_create(&c->thread, NULL, watchdog_main, c) != 0)
            st = snn_error(SNN_ERR_STATE, "nccl backend: cannot start the watchdog thread");
        else
            c->thread_running = true;
    }
    if (st == SNN_OK) {
        ncclComm_t comm = NULL;
        ncclUniqueId uid;
        memcpy(&uid, id, sizeof uid);
        ncclResult_t r = ncclCommInitRank(&comm, world, uid, rank);
        if (r != ncclSuccess) {
            st = nccl_error(c, "ncclCommInitRank", r);
        } else {
            pthread_mutex_lock(&c->comm_lock);
            c->nccl = comm;
            pthread_mutex_unlock(&c->comm_lock);
        }
    }
    if (st != SNN_OK) {
        release(c, false);
        return NULL;
    }
    return c;
}

/* The communicator, taken from the watchdog's reach (NULL when there is none). */
static ncclComm_t take_comm(snn_comm *c)
{
    pthread_mutex_lock(&c->comm_lock);
    ncclComm_t comm = c->nccl;
    c->nccl = NULL;
    pthread_mutex_unlock(&c->comm_lock);
    return comm;
}

static void nccl_abort(snn_comm *c)
{
    if (!c) return;
    stop_watchdog(c);
    ncclComm_t comm = take_comm(c);
    if (comm) ncclCommAbort(comm);
    release(c, false);
}

static void nccl_close(snn_comm *c)
{
    if (!c) return;
    /* a barrier: every rank is done with its collectives before anyone tears down */
    snn_status st = cudaMemsetAsync(c->barrier, 0, sizeof(float), c->compute) == cudaSuccess
                        ? nccl_allreduce(c, c->barrier, 1, SNN_COMM_FLOAT)
                        : cuda_error("cudaMemsetAsync", cudaErrorUnknown);
    if (st == SNN_OK && cudaStreamSynchronize(c->compute) != cudaSuccess)
        st = cuda_error("cudaStreamSynchronize", cudaErrorUnknown);
    if (st != SNN_OK) {
        fprintf(stderr, "snn.c dist: rank %d: leaving without the closing barrier: %s\n", c->rank,
                snn_last_error());
        nccl_abort(c);
        return;
    }
    /* The watchdog keeps watching the sockets while the communicator is finalised (a peer that
     * dies now still ends this rank), but no longer touches the communicator. */
    ncclComm_t comm = take_comm(c);
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 14, 0)
    ncclCommFinalize(comm); /* blocking communicator: returns once its work is flushed */
#endif
    ncclCommDestroy(comm);
    release(c, true);
}

const snn_comm_backend snn_comm_nccl = {
    .name = "nccl",
    .device = SNN_CUDA,
    .id_bytes = sizeof(ncclUniqueId),
    .make_id = nccl_make_id,
    .open = nccl_open,
    .close = nccl_close,
    .abort = nccl_abort,
    .allreduce_sum = nccl_allreduce,
    .allgather = nccl_allgather,
    .broadcast = nccl_broadcast,
    .allreduce_side = nccl_side,
    .join_side = nccl_join,
    .exposed_ms = nccl_exposed_ms,
};
