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
 *   leaves the previous one, and the output-folder lock (app/run_lock.h) is an flock the kernel
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
#ifndef SNN_APP_RUN_SIGNALS_H
#define SNN_APP_RUN_SIGNALS_H

#include <signal.h>

#define RUN_EXIT_STOPPED 75

/* 0, or the number of the first SIGINT / SIGTERM received (set by the handler). */
extern volatile sig_atomic_t run_stop_signal;

/* Installs the handlers: SIGINT and SIGTERM ask to stop, SIGXFSZ is ignored. Call once, early
 * in main. */
void run_signals_install(void);

/* Ignores SIGXFSZ only (programs that have nothing to checkpoint keep the default SIGINT). */
void run_signals_ignore_file_size(void);

/* Whether a SIGINT or SIGTERM came. */
int run_stop_requested(void);

/* "SIGINT", "SIGTERM", or "a signal". */
const char *run_signal_name(int sig);

#endif /* SNN_APP_RUN_SIGNALS_H */
