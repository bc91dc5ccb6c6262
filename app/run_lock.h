/*
 * run_lock.h - one run per output folder: snn-train holds <out>/snn-train.lock while it runs,
 * so that a second run into the same folder is refused with a message naming the first,
 * instead of both running to the end with their metrics interleaved and the last rename of
 * checkpoint.safetensors winning.
 *
 * The lock is flock(2) on that file, not the file's existence: the kernel drops an flock when
 * its process ends, however it ends (exit, a signal, SIGKILL, the OOM killer), so a lock left
 * by a dead run is never held and the next run takes it over without anyone cleaning up. The
 * file says who holds it (pid, host, start time, command) for the message the second run
 * prints, and is removed at a clean exit.
 *
 * Two details that make this correct rather than nearly so:
 *   - open, then lock, then check that the path still names the file we locked: a run that
 *     unlinks the lock between our open and our flock would otherwise leave us holding a lock
 *     on a file nobody else can see;
 *   - where flock is not supported (some network file systems return ENOLCK or EOPNOTSUPP)
 *     the pid in the file decides: on the same host, kill(pid, 0) tells whether it still runs;
 *     from another host a holder cannot be checked and the run goes ahead with a warning.
 * A run also checks, before it writes its outputs (run_lock_verify), that the folder and the
 * lock are still there and still its own: a folder removed mid-run is made again (with a
 * warning) rather than losing the epoch, and a folder taken over by another run stops this one.
 */
#ifndef SNN_APP_RUN_LOCK_H
#define SNN_APP_RUN_LOCK_H

/* The lock file's name in the output folder. */
#define RUN_LOCK_NAME "snn-train.lock"

/* Locks the output folder `dir` (which must exist) for the rest of the process, recording
 * argv as the holder's command; the lock is released at exit. 0 on success, else 1 with a
 * message naming the holder. */
int run_lock_folder(const char *program, const char *dir, int argc, char **argv);

/* Before writing outputs: the folder and the lock must still be there and ours. A folder
 * removed during the run is made again and the lock taken again (a warning says so); a lock
 * now held by another run is an error. 0 when the outputs can be written (also when no lock
 * is held), else 1 (printed). */
int run_lock_verify(void);

#endif /* SNN_APP_RUN_LOCK_H */
