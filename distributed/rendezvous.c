/*
 * rendezvous.c - how the ranks of a job find each other, and the sockets they keep.
 *
 *   tcp://HOST:PORT   rank 0 listens on PORT (all interfaces); every other rank connects to
 *                     HOST:PORT, retrying until rank 0 is up or the timeout passes.
 *   file:PATH         rank 0 listens on a free port and writes "snn-rendezvous 1 WORLD HOST
 *                     PORT" to PATH (a temporary name, then rename: readers never see half a
 *                     line); the others wait for the file, then connect as above. Rank 0
 *                     removes PATH once everyone is in, and refuses to start when PATH exists
 *                     (a crashed run left it, or another job uses it).
 *   snn-train --gpus  the launcher listens on a loopback port before it starts the ranks and
 *                     passes that socket to rank 0 (SNN_DIST_LISTEN_FD), so there is no race
 *                     for the port.
 *
 * Handshake on each connection: the rank sends {magic, version, rank, world, blob size}; rank 0
 * checks that the rank is new and in range and that the world sizes agree, then answers
 * {magic, status, blob}. The blob is NCCL's unique id (128 bytes): the only thing NCCL needs
 * to bootstrap its own connections. The sockets stay open for the whole run (dist_internal.h).
 *
 * Test: tests/test_dist.c (ctest -R dist) runs both kinds with forked ranks.
 */
#define _GNU_SOURCE /* MSG_NOSIGNAL, getaddrinfo with glibc in C11 mode */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "dist_internal.h"
#include "tensor/error.h"

#define RDV_MAGIC 0x534e4e44u /* "SNND" */
#define RDV_VERSION 1u

typedef struct hello {
    uint32_t magic, version;
    int32_t rank, world;
    uint64_t blob_bytes;
} hello;

typedef struct reply {
    uint32_t magic;
    int32_t status; /* 0 ok; else a reason below, and the connection is closed */
    int32_t world;
    int32_t reserved;
} reply;

enum { REPLY_OK, REPLY_WORLD, REPLY_RANK, REPLY_BLOB };

double snn_dist_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Waits until fd is ready for `events` or the deadline passes: 1 ready, 0 timed out, -1 error. */
static int wait_fd(int fd, short events, double deadline)
{
    for (;;) {
        double left = deadline - snn_dist_now();
        if (left <= 0) return 0;
        struct pollfd p = {fd, events, 0};
        int ms = left > 1e6 ? 1000000000 : (int)(left * 1000.0) + 1;
        int n = poll(&p, 1, ms);
        if (n > 0) return 1;
        if (n < 0 && errno != EINTR) return -1;
    }
}

snn_status snn_dist_send(int fd, const void *p, size_t n, double deadline, int peer)
{
    const char *c = p;
    while (n > 0) {
        int ready = wait_fd(fd, POLLOUT, deadline);
        if (ready <= 0)
            return snn_error(SNN_ERR_IO, "sending to rank %d: %s", peer,
                             ready == 0 ? "timed out (it stopped reading)" : strerror(errno));
        ssize_t k = send(fd, c, n, MSG_NOSIGNAL);
        if (k < 0) {
            if (errno == EINTR || errno == EAGAIN) continue;
            return snn_error(SNN_ERR_IO, "sending to rank %d: %s (it exited or was killed?)", peer,
                             strerror(errno));
        }
        c += k;
        n -= (size_t)k;
    }
    return SNN_OK;
}

snn_status snn_dist_recv(int fd, void *p, size_t n, double deadline, int peer)
{
    char *c = p;
    while (n > 0) {
        int ready = wait_fd(fd, POLLIN, deadline);
        if (ready <= 0)
            return snn_error(SNN_ERR_IO, "waiting for rank %d: %s", peer,
                             ready == 0 ? "timed out (it is stuck or far behind)" : strerror(errno));
        ssize_t k = recv(fd, c, n, 0);
        if (k == 0)
            return snn_error(SNN_ERR_IO, "rank %d closed its connection: it exited or was killed",
                             peer);
        if (k < 0) {
            if (errno == EINTR || errno == EAGAIN) continue;
            return snn_error(SNN_ERR_IO, "receiving from rank %d: %s", peer, strerror(errno));
        }
        c += k;
        n -= (size_t)k;
    }
    return SNN_OK;
}

static void tune_socket(int fd)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one); /* small messages go at once */
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
}

/* A listening socket on `port` (0: any free one) of every interface, IPv6 with IPv4 mapped
 * when the system has IPv6. -1 with a message on failure. */
static int listen_on(int port, int backlog)
{
    int fd = socket(AF_INET6, SOCK_STREAM, 0);
    int one = 1, zero = 0;
    if (fd >= 0) {
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
        struct sockaddr_in6 a;
        memset(&a, 0, sizeof a);
        a.sin6_family = AF_INET6;
        a.sin6_addr = in6addr_any;
        a.sin6_port = htons((uint16_t)port);
        if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && listen(fd, backlog) == 0) return fd;
        close(fd);
    }
    fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) {
        snn_error(SNN_ERR_IO, "rendezvous: cannot make a socket: %s", strerror(errno));
        return -1;
    }
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    a.sin_port = htons((uint16_t)port);
    if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, backlog) != 0) {
        snn_error(SNN_ERR_IO, "rendezvous: rank 0 cannot listen on port %d: %s; hint: another "
                  "job or a previous run holds it; pick another port", port, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

static int bound_port(int fd)
{
    struct sockaddr_storage a;
    socklen_t len = sizeof a;
    if (getsockname(fd, (struct sockaddr *)&a, &len) != 0) return -1;
    if (a.ss_family == AF_INET6) return ntohs(((struct sockaddr_in6 *)&a)->sin6_port);
    return ntohs(((struct sockaddr_in *)&a)->sin_port);
}

/* Connects to host:port, retrying refused or unreachable attempts until the deadline. */
static int connect_to(const char *host, int port, double deadline, int rank)
{
    char service[16];
    snprintf(service, sizeof service, "%d", port);
    const char *why = "no attempt finished";
    char whybuf[600];
    while (snn_dist_now() < deadline) {
        struct addrinfo hints, *res = NULL;
        memset(&hints, 0, sizeof hints);
        hints.ai_family = AF_UNSPEC;
        hints.ai_socktype = SOCK_STREAM;
        int gai = getaddrinfo(host, service, &hints, &res);
        if (gai != 0) {
            snprintf(whybuf, sizeof whybuf, "cannot resolve '%s': %s", host, gai_strerror(gai));
            why = whybuf;
            sleep_ms(200);
            continue;
        }
        for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
            int fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
            if (fd < 0) continue;
            int flags = fcntl(fd, F_GETFL, 0);
            fcntl(fd, F_SETFL, flags | O_NONBLOCK);
            int rc = connect(fd, ai->ai_addr, ai->ai_addrlen);
            if (rc != 0 && errno == EINPROGRESS && wait_fd(fd, POLLOUT, deadline) == 1) {
                int err = 0;
                socklen_t len = sizeof err;
                getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
                rc = err ? -1 : 0;
                errno = err;
            }
            if (rc == 0) {
                fcntl(fd, F_SETFL, flags);
                tune_socket(fd);
                freeaddrinfo(res);
                return fd;
            }
            snprintf(whybuf, sizeof whybuf, "%s", strerror(errno));
            why = whybuf;
            close(fd);
        }
        freeaddrinfo(res);
        sleep_ms(100); /* rank 0 is probably not listening yet */
    }
    snn_error(SNN_ERR_IO, "rendezvous: rank %d could not reach rank 0 at %s:%d before the "
              "timeout (%s); hint: is rank 0 running, and is HOST its address as seen from here?",
              rank, host, port, why);
    return -1;
}

/* ---- rank 0 ------------------------------------------------------------------------------- */

static snn_status serve(int listen_fd, snn_dist_link *link, double deadline, const void *blob,
                        size_t blob_bytes)
{
    int joined = 0;
    while (joined < link->world - 1) {
        int ready = wait_fd(listen_fd, POLLIN, deadline);
        if (ready <= 0) {
            char missing[256] = "";
            size_t used = 0;
            for (int r = 1; r < link->world && used + 12 < sizeof missing; r++)
                if (link->fds[r] < 0)
                    used += (size_t)snprintf(missing + used, sizeof missing - used, " %d", r);
            return snn_error(SNN_ERR_IO, "rendezvous: rank 0 waited for %d rank(s) that never "
                             "came (missing:%s); hint: start every rank with the same --init and "
                             "WORLD_SIZE=%d", link->world - 1 - joined, missing, link->world);
        }
        int fd = accept(listen_fd, NULL, NULL);
        if (fd < 0) continue;
        tune_socket(fd);
        hello h;
        if (snn_dist_recv(fd, &h, sizeof h, deadline, -1) != SNN_OK || h.magic != RDV_MAGIC ||
            h.version != RDV_VERSION) {
            close(fd); /* not one of ours (a port scan, another program) */
            continue;
        }
        reply rp = {RDV_MAGIC, REPLY_OK, link->world, 0};
        if (h.world != link->world) rp.status = REPLY_WORLD;
        else if (h.rank < 1 || h.rank >= link->world || link->fds[h.rank] >= 0) rp.status = REPLY_RANK;
        else if (h.blob_bytes != blob_bytes) rp.status = REPLY_BLOB;
        snn_status st = snn_dist_send(fd, &rp, sizeof rp, deadline, h.rank);
        if (st == SNN_OK && rp.status == REPLY_OK && blob_bytes)
            st = snn_dist_send(fd, blob, blob_bytes, deadline, h.rank);
        if (st != SNN_OK || rp.status != REPLY_OK) {
            close(fd);
            if (rp.status == REPLY_WORLD)
                return snn_error(SNN_ERR_ARGUMENT, "rendezvous: rank %d says the world has %d "
                                 "ranks, rank 0 says %d; hint: give every rank the same "
                                 "WORLD_SIZE", h.rank, h.world, link->world);
            if (rp.status == REPLY_RANK)
                return snn_error(SNN_ERR_ARGUMENT, "rendezvous: a second rank %d (or a rank out "
                                 "of 1..%d) joined; hint: give each process its own RANK",
                                 h.rank, link->world - 1);
            if (rp.status == REPLY_BLOB)
                return snn_error(SNN_ERR_ARGUMENT, "rendezvous: rank %d runs another backend "
                                 "(id of %llu bytes, rank 0's has %zu); hint: the same "
                                 "--device everywhere", h.rank,
                                 (unsigned long long)h.blob_bytes, blob_bytes);
            return st;
        }
        link->fds[h.rank] = fd;
        joined++;
    }
    return SNN_OK;
}

/* file: write "snn-rendezvous 1 WORLD HOST PORT" atomically. */
static snn_status publish(const char *path, int world, int port)
{
    char host[256];
    const char *override = getenv("SNN_DIST_HOST");
    if (override && *override) snprintf(host, sizeof host, "%s", override);
    else if (gethostname(host, sizeof host) != 0) snprintf(host, sizeof host, "localhost");
    host[sizeof host - 1] = '\0';
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.%d.tmp", path, (int)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f)
        return snn_error(SNN_ERR_IO, "rendezvous: rank 0 cannot write '%s': %s", tmp,
                         strerror(errno));
    fprintf(f, "snn-rendezvous 1 %d %s %d\n", world, host, port);
    bool ok = fflush(f) == 0 && fsync(fileno(f)) == 0;
    ok = fclose(f) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) {
        unlink(tmp);
        return snn_error(SNN_ERR_IO, "rendezvous: rank 0 cannot write '%s': %s", path,
                         strerror(errno));
    }
    return SNN_OK;
}

/* file: wait for the file, then read rank 0's address from it. */
static snn_status read_published(const char *path, int world, double deadline, char *host,
                                 size_t host_size, int *port)
{
    while (snn_dist_now() < deadline) {
        FILE *f = fopen(path, "r");
        if (f) {
            int version = 0, w = 0;
            char h[256];
            int n = fscanf(f, "snn-rendezvous %d %d %255s %d", &version, &w, h, port);
            fclose(f);
            if (n != 4 || version != 1)
                return snn_error(SNN_ERR_FORMAT, "rendezvous: '%s' is not a rendezvous file of "
                                 "snn.c; hint: remove it, or pick another --init file:PATH", path);
            if (w != world)
                return snn_error(SNN_ERR_ARGUMENT, "rendezvous: '%s' is for a world of %d ranks, "
                                 "this rank has WORLD_SIZE=%d; hint: a stale file of another run? "
                                 "remove it", path, w, world);
            snprintf(host, host_size, "%s", h);
            return SNN_OK;
        }
        sleep_ms(50);
    }
    return snn_error(SNN_ERR_IO, "rendezvous: '%s' did not appear before the timeout; hint: is "
                     "rank 0 running, and do all ranks see the same file system?", path);
}

static int inherited_listen_fd(void)
{
    const char *v = getenv("SNN_DIST_LISTEN_FD");
    if (!v || !*v) return -1;
    char *end = NULL;
    long fd = strtol(v, &end, 10);
    if (*end || fd < 0 || fd > 65535 || fcntl((int)fd, F_GETFD) < 0) return -1;
    return (int)fd;
}

snn_status snn_dist_rendezvous(const snn_dist_init *init, int rank, int world, double timeout_s,
                               void *blob, size_t blob_bytes, snn_dist_link **out)
{
    *out = NULL;
    if (world < 1 || rank < 0 || rank >= world)
        return snn_error(SNN_ERR_ARGUMENT, "snn_dist_rendezvous: bad rank %d of world %d", rank,
                         world);
    snn_dist_link *link = snn_alloc(sizeof *link, SNN_CPU);
    int *fds = snn_alloc((size_t)world * sizeof *fds, SNN_CPU);
    if (!link || !fds) {
        snn_free(link, sizeof *link, SNN_CPU);
        snn_free(fds, (size_t)world * sizeof *fds, SNN_CPU);
        return snn_error(SNN_ERR_MEMORY, "snn_dist_rendezvous: out of host memory");
    }
    for (int r = 0; r < world; r++) fds[r] = -1;
    *link = (snn_dist_link){rank, world, fds};
    /* the launcher's listening socket: rank 0 takes it, the others must not keep it */
    int inherited = inherited_listen_fd();
    if (inherited >= 0 && (rank != 0 || world == 1)) {
        close(inherited);
        inherited = -1;
    }
    unsetenv("SNN_DIST_LISTEN_FD");
    if (world == 1) {
        *out = link;
        return SNN_OK;
    }
    const double deadline = snn_dist_now() + timeout_s;
    snn_status st = SNN_OK;
    if (rank == 0) {
        int fd = inherited;
        if (fd < 0) {
            if (init->kind == SNN_DIST_INIT_TCP && init->port == 0)
                st = snn_error(SNN_ERR_ARGUMENT, "rendezvous: tcp://%s:0 has no port; hint: pick "
                               "a free port, e.g. tcp://%s:29500", init->host, init->host);
            else if (init->kind == SNN_DIST_INIT_FILE && access(init->path, F_OK) == 0)
                st = snn_error(SNN_ERR_ARGUMENT, "rendezvous: '%s' already exists (left by a run "
                               "that crashed, or used by another job); hint: remove it or pick "
                               "another --init file:PATH", init->path);
            if (st == SNN_OK) {
                fd = listen_on(init->kind == SNN_DIST_INIT_TCP ? init->port : 0, world);
                if (fd < 0) st = snn_last_status();
            }
        }
        if (st == SNN_OK && init->kind == SNN_DIST_INIT_FILE && inherited < 0)
            st = publish(init->path, world, bound_port(fd));
        if (st == SNN_OK) st = serve(fd, link, deadline, blob, blob_bytes);
        if (init->kind == SNN_DIST_INIT_FILE && inherited < 0 && fd >= 0) unlink(init->path);
        if (fd >= 0) close(fd);
    } else {
        char host[256];
        int port = init->port;
        snprintf(host, sizeof host, "%s", init->host);
        if (init->kind == SNN_DIST_INIT_FILE)
            st = read_published(init->path, world, deadline, host, sizeof host, &port);
        int fd = st == SNN_OK ? connect_to(host, port, deadline, rank) : -1;
        if (st == SNN_OK && fd < 0) st = snn_last_status();
        if (st == SNN_OK) {
            fds[0] = fd;
            hello h = {RDV_MAGIC, RDV_VERSION, rank, world, (uint64_t)blob_bytes};
            reply rp;
            st = snn_dist_send(fd, &h, sizeof h, deadline, 0);
            if (st == SNN_OK) st = snn_dist_recv(fd, &rp, sizeof rp, deadline, 0);
            if (st == SNN_OK && (rp.magic != RDV_MAGIC || rp.status != REPLY_OK))
                st = snn_error(SNN_ERR_ARGUMENT, "rendezvous: rank 0 turned rank %d away (%s)",
                               rank, rp.status == REPLY_WORLD ? "it has another world size"
                               : rp.status == REPLY_RANK ? "a rank with this number is already in"
                               : rp.status == REPLY_BLOB ? "it runs another backend"
                               : "an answer that is not snn.c's");
            if (st == SNN_OK && blob_bytes) st = snn_dist_recv(fd, blob, blob_bytes, deadline, 0);
        }
    }
    if (st != SNN_OK) {
        snn_dist_link_close(link);
        return st;
    }
    *out = link;
    return SNN_OK;
}

void snn_dist_link_close(snn_dist_link *link)
{
    if (!link) return;
    for (int r = 0; r < link->world; r++)
        if (link->fds[r] >= 0) close(link->fds[r]);
    snn_free(link->fds, (size_t)link->world * sizeof *link->fds, SNN_CPU);
    snn_free(link, sizeof *link, SNN_CPU);
}
