/*
 * run_signals.c - the handlers of run_signals.h: the first SIGINT / SIGTERM sets a flag, the
 * second kills the process with the default action; SIGXFSZ is ignored.
 */
#define _DEFAULT_SOURCE /* SA_RESTART */
#include "app/run_signals.h"

#include <stdatomic.h>
#include <string.h>

/* 0, or the number of the first SIGINT / SIGTERM received. */
volatile sig_atomic_t run_stop_signal;
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

void run_signals_install(void)
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

void run_signals_ignore_file_size(void)
{
    struct sigaction ignore;
    memset(&ignore, 0, sizeof ignore);
    ignore.sa_handler = SIG_IGN;
    sigemptyset(&ignore.sa_mask);
    sigaction(SIGXFSZ, &ignore, NULL);
}

int run_stop_requested(void) { return run_stop_signal != 0; }

const char *run_signal_name(int sig)
{
    return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "a signal";
}
