/*
 * launch.c - snn-train --gpus N: one process per GPU on this host, started and watched here.
 *
 * The launcher opens a listening socket on a loopback port first, then forks and re-executes
 * the program N times (/proc/self/exe, the same arguments less --gpus N). Each child inherits
 * the environment unchanged (NCCL's variables included) plus the torchrun-style variables
 * RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, and SNN_DIST_INIT=tcp://127.0.0.1:PORT;
 * rank 0 also inherits the listening socket (SNN_DIST_LISTEN_FD), so no other program can take
 * the port between the launcher's choice and rank 0's start. From there on the children are
 * ordinary ranks, exactly as under torchrun or srun (distributed/env.c).
 *
 * Watching: the launcher waits for its children. When one fails (a non-zero exit) or is
 * killed, it names it; the other ranks notice on their own within a fraction of a second (the
 * NCCL watchdog, or the TCP backend's next collective) and stop with exit code
 * SNN_DIST_EXIT_PEER. Ranks still running 5 s later get SIGTERM, and SIGKILL 10 s after that,
 * so a launcher never waits forever. Children die with the launcher (PR_SET_PDEATHSIG), and
 * SIGINT / SIGTERM sent to the launcher are passed on to them.
 *
 * Test: tests/test_dist_train.c (CPU ranks), tests/test_multigpu_train.c (GPUs).
 */
#define _GNU_SOURCE /* strsignal, prctl */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include "dist_internal.h"

#define MAX_RANKS 1024

static pid_t children[MAX_RANKS];
static int n_children;

static void forward_signal(int sig)
{
    for (int i = 0; i < n_children; i++)
        if (children[i] > 0) kill(children[i], sig);
}

static void describe(int status, char *buf, size_t size, int *code)
{
    if (WIFEXITED(status)) {
        *code = WEXITSTATUS(status);
        snprintf(buf, size, "exited with code %d%s", *code,
                 *code == SNN_DIST_EXIT_PEER ? " (it stopped because another rank failed)" : "");
    } else if (WIFSIGNALED(status)) {
        *code = 128 + WTERMSIG(status);
        snprintf(buf, size, "was killed by signal %d (%s)", WTERMSIG(status),
                 strsignal(WTERMSIG(status)));
    } else {
        *code = 1;
        snprintf(buf, size, "ended in an unknown way (status %d)", status);
    }
}

static int rank_of(pid_t pid)
{
    for (int i = 0; i < n_children; i++)
        if (children[i] == pid) return i;
    return -1;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Reaps children until none is left or `deadline` passes; returns how many are left. */
static int reap_until(double deadline, int *left, const char *program)
{
    while (*left > 0 && snn_dist_now() < deadline) {
        int status;
        pid_t pid = waitpid(-1, &status, WNOHANG);
        if (pid > 0) {
            int r = rank_of(pid);
            if (r >= 0) {
                char how[160];
                int code;
                describe(status, how, sizeof how, &code);
                if (code != 0) fprintf(stderr, "%s: rank %d %s\n", program, r, how);
                children[r] = 0;
                (*left)--;
            }
        } else {
            sleep_ms(20);
        }
    }
    return *left;
}

int snn_dist_launch(int n_ranks, int argc, char **argv, const char *drop_option)
{
    const char *program = argc > 0 ? argv[0] : "snn";
    if (n_ranks < 1 || n_ranks > MAX_RANKS) {
        fprintf(stderr, "%s: bad number of ranks %d (expected 1..%d)\n", program, n_ranks, MAX_RANKS);
        return 2;
    }
    /* the rendezvous socket, held open from now until rank 0 takes it */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    socklen_t len = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, n_ranks) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
        fprintf(stderr, "%s: cannot open a loopback port for the ranks to meet: %s\n", program,
                strerror(errno));
        if (fd >= 0) close(fd);
        return 1;
    }
    const int port = ntohs(a.sin_port);

    char **child_argv = calloc((size_t)argc + 1, sizeof *child_argv);
    if (!child_argv) {
        close(fd);
        fprintf(stderr, "%s: out of memory\n", program);
        return 1;
    }
    int k = 0;
    for (int i = 0; i < argc; i++) {
        if (drop_option && strcmp(argv[i], drop_option) == 0) {
            i++; /* and its value */
            continue;
        }
        child_argv[k++] = argv[i];
    }
    child_argv[k] = NULL;

    struct sigaction forward, old_int, old_term;
    memset(&forward, 0, sizeof forward);
    forward.sa_handler = forward_signal;
    sigemptyset(&forward.sa_mask);
    sigaction(SIGINT, &forward, &old_int);
    sigaction(SIGTERM, &forward, &old_term);

    fflush(NULL); /* nothing buffered may be written twice by the children */
    const pid_t parent = getpid();
    n_children = 0;
    int code = 0;
    for (int r = 0; r < n_ranks; r++) {
        pid_t pid = fork();
        if (pid < 0) {
            fprintf(stderr, "%s: cannot start rank %d: %s\n", program, r, strerror(errno));
            code = 1;
            break;
        }
        if (pid == 0) {
            signal(SIGINT, SIG_DFL);
            signal(SIGTERM, SIG_DFL);
#ifdef __linux__
            prctl(PR_SET_PDEATHSIG, SIGTERM); /* the launcher gone: the rank goes too */
#endif
            if (getppid() != parent) _exit(1);
            char value[64];
            snprintf(value, sizeof value, "%d", r);
            setenv("RANK", value, 1);
            setenv("LOCAL_RANK", value, 1);
            snprintf(value, sizeof value, "%d", n_ranks);
            setenv("WORLD_SIZE", value, 1);
            setenv("LOCAL_WORLD_SIZE", value, 1);
            snprintf(value, sizeof value, "tcp://127.0.0.1:%d", port);
            setenv("SNN_DIST_INIT", value, 1);
            if (r == 0) {
                snprintf(value, sizeof value, "%d", fd);
                setenv("SNN_DIST_LISTEN_FD", value, 1);
            } else {
                close(fd);
                unsetenv("SNN_DIST_LISTEN_FD");
            }
            execv("/proc/self/exe", child_argv);
            execvp(child_argv[0], child_argv);
            fprintf(stderr, "%s: rank %d: cannot run %s: %s\n", program, r, child_argv[0],
                    strerror(errno));
            _exit(127);
        }
        children[n_children++] = pid;
    }
    close(fd);
    free(child_argv);

    /* Wait for every rank; after the first failure, give the others 5 s to stop on their own.
     * The exit code is the root cause's: a rank killed by a signal, else one that failed by
     * itself, before ranks that only stopped because another failed. */
    int left = n_children, cause_rank = -1, cause_rank_class = 0;
    double deadline = code ? snn_dist_now() : 1e300; /* a rank could not start: stop at once */
    while (left > 0 && snn_dist_now() < deadline) {
        int status;
        pid_t pid = waitpid(-1, &status, deadline < 1e299 ? WNOHANG : 0);
        if (pid < 0 && errno == EINTR) continue;
        if (pid < 0) break;
        if (pid == 0) {
            sleep_ms(20);
            continue;
        }
        int r = rank_of(pid);
        if (r < 0) continue;
        children[r] = 0;
        left--;
        char how[160];
        int c;
        describe(status, how, sizeof how, &c);
        if (c == 0) continue;
        /* 3: killed by a signal, 2: failed by itself, 1: stopped because another failed */
        int cls = WIFSIGNALED(status) ? 3 : c == SNN_DIST_EXIT_PEER ? 1 : 2;
        if (cause_rank < 0) {
            fprintf(stderr, "%s: rank %d %s; stopping the other %d rank(s)\n", program, r, how,
                    left);
            deadline = snn_dist_now() + 5.0;
        } else {
            fprintf(stderr, "%s: rank %d %s\n", program, r, how);
        }
        if (cls > cause_rank_class) {
            cause_rank = r;
            cause_rank_class = cls;
            code = c;
        }
    }
    if (left > 0) {
        forward_signal(SIGTERM);
        if (reap_until(snn_dist_now() + 10.0, &left, program) > 0) {
            forward_signal(SIGKILL);
            reap_until(snn_dist_now() + 10.0, &left, program);
        }
    }
    n_children = 0;
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    return code;
}
