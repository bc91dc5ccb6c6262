/*
 * run_signals.h - how the example programs take signals, so that a long job survives the ways
 * long jobs end: Ctrl-C, a batch scheduler's SIGTERM before it preempts or times out a job, a
 * file-size limit.
 *
 * SIGINT, SIGTERM: the first one only sets a flag (a volatile sig_atomic_t, the one thing a
 *   handler may safely write); the program looks at it between steps (run_stop_requested),
 *   finishes the step it is in, writes a checkpoint that resumes exactly there, says so and
 *   exits with RUN_EXIT_STOPPED. A second signal means "now": the handler puts the default
 *   action back and raises the signal again, so the process dies at once with the status a
 *   shell expects (130 for SIGINT, 143 for SIGTERM). Nothing is lost that was not already
 *   at risk: checkpoints are written atomically (nn/checkpoint_save.c), so a kill mid-save
 *   leaves the previous one, and the output-folder lock (run_lock.h) is an flock the kernel
 *   drops with the process.
 *   SA_RESTART makes the interrupted system calls (reading data, writing a checkpoint) resume
 *   instead of failing with EINTR. The handler calls only async-signal-safe functions
 *   (sigaction, raise). Which signal is "the second" is decided by a lock-free atomic counter,
 *   not by the flag: a process-directed signal goes to any thread that does not block it (the
 *   loader's prefetch thread, OpenMP workers), so two signals can run their handlers at the
 *   same moment on two threads, and both would find the flag still 0.
 * SIGXFSZ: ignored, so that a write past a file-size limit (ulimit -f, a quota enforced that
 *   way) fails with EFBIG and a message naming the file, instead of killing the process
 *   silently with a core dump.
 *
 * Exit codes shared by the programs: 0 done, 1 a failure (message printed), 2 a bad command
 * line or a size that cannot fit, 3 (snn-train) the loss diverged, RUN_EXIT_STOPPED (75,
 * EX_TEMPFAIL in sysexits.h: "try again later") stopped by a signal after saving a checkpoint.
 */
#ifndef SNN_EXAMPLES_RUN_SIGNALS_H
#define SNN_EXAMPLES_RUN_SIGNALS_H

#if !defined(_DEFAULT_SOURCE)
#error "define _DEFAULT_SOURCE before the first #include (SA_RESTART)"
#endif

#include <signal.h>
#include <stdatomic.h>
#include <string.h>

#define RUN_EXIT_STOPPED 75

/* 0, or the number of the first SIGINT / SIGTERM received. */
static volatile sig_atomic_t run_stop_signal;
/* Signals received so far (lock-free, hence async-signal-safe per C11 7.14.1.1). */
static atomic_int run_signals_received;

static void run_on_signal(int sig)
{
    if (atomic_fetch_add(&run_signals_received, 1) > 0) {
        /* the second signal: die of it now, with the default action */
        struct sigaction dfl;
        memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        sigemptyset(&dfl.sa_mask);
        sigaction(sig, &dfl, NULL);
        raise(sig);
        return;
    }
    run_stop_signal = sig;
}

/* Installs the handlers above; call once, early in main. */
static __attribute__((unused)) void run_signals_install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = run_on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    struct sigaction ignore;
    memset(&ignore, 0, sizeof ignore);
    ignore.sa_handler = SIG_IGN;
    sigemptyset(&ignore.sa_mask);
    sigaction(SIGXFSZ, &ignore, NULL);
    _Static_assert(ATOMIC_INT_LOCK_FREE == 2, "the signal handler needs a lock-free atomic int");
}

/* Ignores SIGXFSZ only (programs that have nothing to checkpoint keep the default SIGINT). */
static __attribute__((unused)) void run_signals_ignore_file_size(void)
{
    struct sigaction ignore;
    memset(&ignore, 0, sizeof ignore);
    ignore.sa_handler = SIG_IGN;
    sigemptyset(&ignore.sa_mask);
    sigaction(SIGXFSZ, &ignore, NULL);
}

static __attribute__((unused)) int run_stop_requested(void) { return run_stop_signal != 0; }

static __attribute__((unused)) const char *run_signal_name(int sig)
{
    return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "a signal";
}

#endif /* SNN_EXAMPLES_RUN_SIGNALS_H */
