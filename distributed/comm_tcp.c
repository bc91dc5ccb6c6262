/*
 * comm_tcp.c - the communicator backend for CPU tensors: collectives over the sockets the
 * rendezvous left between rank 0 and each other rank (a star).
 *
 * NCCL handles only GPU memory; this backend lets the same data-parallel code train on CPUs
 * and, above all, lets CI test the launcher, the sharding, the buckets, sync-BN, the
 * checkpoint rules and the fault handling on machines without a GPU. It is simple rather than
 * fast: rank 0 gathers every rank's buffer, adds them in rank order and sends the sum back
 * (2 (W - 1) buffer transfers through rank 0, against NCCL's ring with 2 (W - 1) / W per rank).
 * Adding in rank order makes the sums the same on every run.
 *
 * Every message starts with a header {op, type, count, sequence number}; rank 0 checks that
 * every rank is in the same collective, so ranks that lose step say so instead of corrupting
 * data. A rank that dies closes its sockets: the others' next collective fails at once with a
 * message naming it, and a rank that stops answering fails them after the timeout.
 *
 * Test: tests/test_dist.c (ctest -R dist).
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "dist_internal.h"
#include "tensor/error.h"

enum { OP_ALLREDUCE = 1, OP_ALLGATHER, OP_BROADCAST };

static const char *op_name(uint32_t op)
{
    return op == OP_ALLREDUCE ? "all-reduce" : op == OP_ALLGATHER ? "all-gather" : op == OP_BROADCAST ? "broadcast" : "?";
}

typedef struct header {
    uint32_t op, type;
    uint64_t count, seq;
} header;

struct snn_comm {
    snn_dist_link *link;
    int rank, world;
    double timeout_s;
    uint64_t seq;          /* collectives so far: every rank counts the same */
    char *scratch;         /* rank 0: one rank's incoming buffer */
    size_t scratch_bytes;
};

static snn_status need_scratch(snn_comm *c, size_t bytes)
{
    if (bytes <= c->scratch_bytes) return SNN_OK;
    snn_free(c->scratch, c->scratch_bytes, SNN_CPU);
    c->scratch = snn_alloc(bytes, SNN_CPU);
    c->scratch_bytes = c->scratch ? bytes : 0;
    return c->scratch ? SNN_OK : snn_error(SNN_ERR_MEMORY, "tcp backend: out of host memory");
}

/* Rank 0: reads rank r's header and checks that it is in the same collective. */
static snn_status expect(snn_comm *c, int r, header want, double deadline)
{
    header got;
    snn_status st = snn_dist_recv(c->link->fds[r], &got, sizeof got, deadline, r);
    if (st != SNN_OK) return st;
    if (got.op != want.op || got.type != want.type || got.count != want.count || got.seq != want.seq)
        return snn_error(SNN_ERR_STATE, "tcp backend: rank %d is in collective #%llu (%s of %llu "
                         "values), rank 0 in #%llu (%s of %llu): the ranks lost step", r,
                         (unsigned long long)got.seq, op_name(got.op), (unsigned long long)got.count,
                         (unsigned long long)want.seq, op_name(want.op),
                         (unsigned long long)want.count);
    return SNN_OK;
}

static void add_into(void *acc, const void *x, size_t count, snn_comm_type t)
{
    if (t == SNN_COMM_FLOAT) {
        float *a = acc;
        const float *b = x;
        for (size_t i = 0; i < count; i++) a[i] += b[i];
    } else {
        double *a = acc;
        const double *b = x;
        for (size_t i = 0; i < count; i++) a[i] += b[i];
    }
}

static snn_status tcp_allreduce(snn_comm *c, void *buf, size_t count, snn_comm_type t)
{
    if (t == SNN_COMM_BYTE) return snn_error(SNN_ERR_ARGUMENT, "tcp backend: cannot sum bytes");
    const size_t bytes = count * snn_comm_type_size(t);
    const double deadline = snn_dist_now() + c->timeout_s;
    header h = {OP_ALLREDUCE, (uint32_t)t, count, c->seq++};
    if (c->world == 1) return SNN_OK;
    snn_status st = SNN_OK;
    if (c->rank != 0) {
        st = snn_dist_send(c->link->fds[0], &h, sizeof h, deadline, 0);
        if (st == SNN_OK) st = snn_dist_send(c->link->fds[0], buf, bytes, deadline, 0);
        if (st == SNN_OK) st = snn_dist_recv(c->link->fds[0], buf, bytes, deadline, 0);
        return st;
    }
    st = need_scratch(c, bytes);
    for (int r = 1; r < c->world && st == SNN_OK; r++) { /* sum = ((x0 + x1) + x2) + ... */
        st = expect(c, r, h, deadline);
        if (st == SNN_OK) st = snn_dist_recv(c->link->fds[r], c->scratch, bytes, deadline, r);
        if (st == SNN_OK) add_into(buf, c->scratch, count, t);
    }
    for (int r = 1; r < c->world && st == SNN_OK; r++)
        st = snn_dist_send(c->link->fds[r], buf, bytes, deadline, r);
    return st;
}

static snn_status tcp_allgather(snn_comm *c, void *recv, const void *send, size_t count,
                                snn_comm_type t)
{
    const size_t bytes = count * snn_comm_type_size(t);
    const double deadline = snn_dist_now() + c->timeout_s;
    header h = {OP_ALLGATHER, (uint32_t)t, count, c->seq++};
    char *all = recv;
    if (c->rank != 0) {
        snn_status st = snn_dist_send(c->link->fds[0], &h, sizeof h, deadline, 0);
        if (st == SNN_OK) st = snn_dist_send(c->link->fds[0], send, bytes, deadline, 0);
        if (st == SNN_OK) st = snn_dist_recv(c->link->fds[0], all, bytes * (size_t)c->world, deadline, 0);
        return st;
    }
    memmove(all, send, bytes);
    snn_status st = SNN_OK;
    for (int r = 1; r < c->world && st == SNN_OK; r++) {
        st = expect(c, r, h, deadline);
        if (st == SNN_OK) st = snn_dist_recv(c->link->fds[r], all + (size_t)r * bytes, bytes, deadline, r);
    }
    for (int r = 1; r < c->world && st == SNN_OK; r++)
        st = snn_dist_send(c->link->fds[r], all, bytes * (size_t)c->world, deadline, r);
    return st;
}

static snn_status tcp_broadcast(snn_comm *c, void *buf, size_t count, snn_comm_type t)
{
    const size_t bytes = count * snn_comm_type_size(t);
    const double deadline = snn_dist_now() + c->timeout_s;
    header h = {OP_BROADCAST, (uint32_t)t, count, c->seq++};
    snn_status st = SNN_OK;
    if (c->rank == 0) {
        for (int r = 1; r < c->world && st == SNN_OK; r++) {
            st = snn_dist_send(c->link->fds[r], &h, sizeof h, deadline, r);
            if (st == SNN_OK) st = snn_dist_send(c->link->fds[r], buf, bytes, deadline, r);
        }
        return st;
    }
    header got;
    st = snn_dist_recv(c->link->fds[0], &got, sizeof got, deadline, 0);
    if (st == SNN_OK && memcmp(&got, &h, sizeof h) != 0)
        return snn_error(SNN_ERR_STATE, "tcp backend: rank 0 is in collective #%llu (%s), rank %d "
                         "in #%llu (broadcast): the ranks lost step", (unsigned long long)got.seq,
                         op_name(got.op), c->rank, (unsigned long long)h.seq);
    if (st == SNN_OK) st = snn_dist_recv(c->link->fds[0], buf, bytes, deadline, 0);
    return st;
}

static snn_status tcp_side(snn_comm *c, float *buf, size_t count)
{
    return tcp_allreduce(c, buf, count, SNN_COMM_FLOAT); /* no side stream: in order */
}

static snn_status tcp_join(snn_comm *c)
{
    (void)c;
    return SNN_OK;
}

static snn_comm *tcp_open(const void *id, snn_dist_link *link, int rank, int world,
                          int local_rank, double timeout_s)
{
    (void)id;
    (void)local_rank;
    snn_comm *c = snn_alloc(sizeof *c, SNN_CPU);
    if (!c) {
        snn_dist_link_close(link);
        return snn_error_null(SNN_ERR_MEMORY, "tcp backend: out of host memory");
    }
    memset(c, 0, sizeof *c);
    c->link = link;
    c->rank = rank;
    c->world = world;
    c->timeout_s = timeout_s;
    return c;
}

static void tcp_release(snn_comm *c)
{
    snn_dist_link_close(c->link);
    snn_free(c->scratch, c->scratch_bytes, SNN_CPU);
    snn_free(c, sizeof *c, SNN_CPU);
}

static void tcp_close(snn_comm *c)
{
    if (!c) return;
    double one = 1.0; /* a barrier: nobody closes while another still needs it */
    if (tcp_allreduce(c, &one, 1, SNN_COMM_DOUBLE) != SNN_OK)
        fprintf(stderr, "snn.c dist: rank %d: the closing barrier failed: %s\n", c->rank,
                snn_last_error());
    tcp_release(c);
}

static void tcp_abort(snn_comm *c)
{
    if (c) tcp_release(c);
}

const snn_comm_backend snn_comm_tcp = {
    .name = "tcp",
    .device = SNN_CPU,
    .id_bytes = 0,
    .make_id = NULL,
    .open = tcp_open,
    .close = tcp_close,
    .abort = tcp_abort,
    .allreduce_sum = tcp_allreduce,
    .allgather = tcp_allgather,
    .broadcast = tcp_broadcast,
    .allreduce_side = tcp_side,
    .join_side = tcp_join,
    .exposed_ms = NULL,
};
