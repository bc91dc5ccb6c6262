/*
 * dist_internal.h - the pieces of distributed/ that its files share (internal header): the links the
 * rendezvous leaves between rank 0 and every other rank, deadline-bound socket I/O, and the
 * communicator backends' table (comm.c dispatches on it; comm_nccl.c and comm_tcp.c fill it).
 */
#ifndef SNN_DIST_INTERNAL_H
#define SNN_DIST_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dist.h"

/* ---- the star of sockets the rendezvous leaves (rendezvous.c) ------------------------------
 *
 * Rank 0 holds one connection to every other rank; each other rank holds one to rank 0. The
 * TCP backend moves its data over them; the NCCL backend only watches them: a peer that dies
 * closes its end, which the others see at once (docs/distributed.md, "Faults"). */
typedef struct snn_dist_link {
    int rank, world;
    int *fds;              /* (world) rank 0: fds[r] is rank r's socket, fds[0] = -1;
                              others: fds[0] is the socket to rank 0, the rest -1 */
} snn_dist_link;

/* Meets the other ranks: rank 0 listens (on init's port, or on the socket snn_dist_launch
 * passed down in SNN_DIST_LISTEN_FD; with file: on a free port it writes into the file), the
 * others connect, retrying until timeout_s. Rank 0 hands `blob` (blob_bytes, the same size on
 * every rank: NCCL's unique id) to every rank. World size 1 meets nobody. */
snn_status snn_dist_rendezvous(const snn_dist_init *init, int rank, int world, double timeout_s,
                               void *blob, size_t blob_bytes, snn_dist_link **out);
/* Closes the sockets. NULL is a no-op. */
void snn_dist_link_close(snn_dist_link *link);

/* Seconds on a monotonic clock. */
double snn_dist_now(void);
/* Sends / receives exactly n bytes on a socket before `deadline` (snn_dist_now() time).
 * SNN_ERR_IO naming `peer` when it closed its end, failed, or the deadline passed. */
snn_status snn_dist_send(int fd, const void *p, size_t n, double deadline, int peer);
snn_status snn_dist_recv(int fd, void *p, size_t n, double deadline, int peer);

/* ---- communicator backends (comm.c) ------------------------------------------------------ */

typedef enum snn_comm_type { SNN_COMM_FLOAT, SNN_COMM_DOUBLE, SNN_COMM_BYTE } snn_comm_type;

static inline size_t snn_comm_type_size(snn_comm_type t)
{
    return t == SNN_COMM_FLOAT ? 4 : t == SNN_COMM_DOUBLE ? 8 : 1;
}

typedef struct snn_comm snn_comm;  /* a backend's own state */

/*
 * Every collective is called by every rank in the same order. Buffers are memory of the
 * backend's device (CUDA for NCCL, host for TCP). "In order" means: after all device work
 * queued so far, and before any queued after the call returns (the NCCL backend runs every
 * collective on one side stream, tied to the compute stream with events).
 */
typedef struct snn_comm_backend {
    const char *name;
    snn_device device;
    size_t id_bytes;    /* what rank 0 makes before the rendezvous and hands to all (0: none) */
    snn_status (*make_id)(void *id, int local_rank);
    /* Joins with the id from the rendezvous; takes over `link` (closes it in close). */
    snn_comm *(*open)(const void *id, snn_dist_link *link, int rank, int world, int local_rank,
                      double timeout_s);
    /* orderly: every rank calls it after its last collective */
    void (*close)(snn_comm *c);
    /* at once, after a failure: no waiting for the others, no goodbye (they see it leave) */
    void (*abort)(snn_comm *c);
    snn_status (*allreduce_sum)(snn_comm *c, void *buf, size_t count, snn_comm_type t);
    snn_status (*allgather)(snn_comm *c, void *recv, const void *send, size_t count,
                            snn_comm_type t);
    snn_status (*broadcast)(snn_comm *c, void *buf, size_t count, snn_comm_type t); /* from 0 */
    /* Gradient buckets: sum `buf` once the device work queued so far is done, without making
     * later work wait (the NCCL side stream); join_side makes later work wait for all of them.
     * A backend without a side stream does them in order. */
    snn_status (*allreduce_side)(snn_comm *c, float *buf, size_t count);
    snn_status (*join_side)(snn_comm *c);
    /* exposed communication of the last join, in ms, or -1 (profiling off or not supported) */
    double (*exposed_ms)(snn_comm *c);
} snn_comm_backend;

extern const snn_comm_backend snn_comm_tcp;
#ifdef SNN_WITH_NCCL
extern const snn_comm_backend snn_comm_nccl;
#endif

/* ---- the group (comm.c) and the reducer (reducer.c) --------------------------------------- */

typedef struct snn_reducer snn_reducer;

struct snn_dist {
    snn_dist_config config;
    const snn_comm_backend *backend;
    snn_comm *comm;
    snn_reducer *reducer;       /* after snn_dist_attach */
    snn_batchnorm_sync bn_sync;
    void *staging;              /* device memory for host collectives, kept between calls */
    size_t staging_bytes;
};

/* reducer.c: the gradient buffer and the buckets of one attached model */
snn_reducer *snn_reducer_new(snn_dist *d, snn_module *model);
void snn_reducer_free(snn_reducer *r);
snn_status snn_reducer_backward(snn_reducer *r, snn_tensor *loss, float weight);

#endif /* SNN_DIST_INTERNAL_H */
