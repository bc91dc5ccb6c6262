/*
 * run_lock.c - the output folder's lock of run_lock.h: flock(2) on <out>/snn-train.lock, the
 * holder's description written into it, the check that the path still names the locked file,
 * and the fallback on the recorded pid where the file system cannot lock.
 */
#define _DEFAULT_SOURCE /* flock, gethostname */
#include "app/run_lock.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

typedef struct run_lock {
    int fd;                   /* -1: not held */
    char dir[1024], path[1100];
    const char *program;
    dev_t dev;
    ino_t ino;
    char command[512];
} run_lock;

static run_lock the_run_lock = {.fd = -1};

/* The holder's description from the file (first line "pid N"), into `who`; its pid or 0. */
static long run_lock_holder(int fd, char *who, size_t size)
{
    char text[1024] = "";
    ssize_t n = pread(fd, text, sizeof text - 1, 0);
    text[n > 0 ? n : 0] = '\0';
    long pid = 0;
    char host[256] = "?", started[64] = "?", command[512] = "?";
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        if (sscanf(line, "pid %ld", &pid) == 1) continue;
        if (strncmp(line, "host ", 5) == 0) snprintf(host, sizeof host, "%s", line + 5);
        else if (strncmp(line, "started ", 8) == 0)
            snprintf(started, sizeof started, "%s", line + 8);
        else if (strncmp(line, "command ", 8) == 0)
            snprintf(command, sizeof command, "%s", line + 8);
    }
    snprintf(who, size, "pid %ld on %s, started %s: %s", pid, host, started, command);
    return pid;
}

/* Takes the lock file in the already existing folder. 0: held; 1: busy or failed (printed). */
static int run_lock_take(run_lock *l)
{
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    for (int attempt = 0; attempt < 8; attempt++) {
        int fd = open(l->path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0) {
            int e = errno;
            fprintf(stderr, "%s: cannot write into the output folder '%s': creating '%s' failed "
                    "(%s)\nhint: choose a folder you can write to with --out\n", l->program, l->dir,
                    l->path, strerror(e));
            return 1;
        }
        char who[1400];
        bool locked = flock(fd, LOCK_EX | LOCK_NB) == 0;
        if (!locked && (errno == EWOULDBLOCK || errno == EINTR)) {
            run_lock_holder(fd, who, sizeof who);
            fprintf(stderr, "%s: the output folder '%s' is in use by another run (%s)\nhint: wait "
                    "for it to finish, stop it, or choose another --out\n", l->program, l->dir,
                    who);
            close(fd);
            return 1;
        }
        if (!locked) {
            /* no flock here: the recorded pid decides, on this host */
            int e = errno;
            long pid = run_lock_holder(fd, who, sizeof who);
            char mine[300];
            snprintf(mine, sizeof mine, " on %s,", host);
            bool same_host = strstr(who, mine) != NULL;
            if (pid > 0 && pid != (long)getpid() && same_host &&
                (kill((pid_t)pid, 0) == 0 || errno == EPERM)) {
                fprintf(stderr, "%s: the output folder '%s' is in use by another run (%s)\nhint: "
                        "wait for it to finish, stop it, or choose another --out\n", l->program,
                        l->dir, who);
                close(fd);
                return 1;
            }
            if (pid > 0 && !same_host)
                fprintf(stderr, "%s: warning: this file system cannot lock files (%s) and '%s' "
                        "names a run on another host (%s); going ahead\n", l->program,
                        strerror(e), l->path, who);
        }
        /* the path must still name the file we hold (a run ending right now removes it) */
        struct stat held, named;
        if (fstat(fd, &held) != 0 || stat(l->path, &named) != 0 || held.st_dev != named.st_dev ||
            held.st_ino != named.st_ino) {
            close(fd);
            continue;
        }
        long previous = run_lock_holder(fd, who, sizeof who);
        if (previous > 0 && previous != (long)getpid())
            fprintf(stderr, "%s: the lock of an earlier run in '%s' was stale (%s); taken over\n",
                    l->program, l->dir, who);
        char started[64];
        time_t now = time(NULL);
        strftime(started, sizeof started, "%Y-%m-%d %H:%M:%S", localtime(&now));
        char text[1400];
        int len = snprintf(text, sizeof text, "pid %ld\nhost %s\nstarted %s\ncommand %s\n",
                           (long)getpid(), host, started, l->command);
        if (ftruncate(fd, 0) != 0 || pwrite(fd, text, (size_t)len, 0) != len) {
            int e = errno;
            fprintf(stderr, "%s: cannot write '%s' (%s)\nhint: make room in the output folder's "
                    "file system, or choose another --out\n", l->program, l->path,
                    e ? strerror(e) : "short write");
            unlink(l->path); /* ours: we hold its lock */
            close(fd);
            return 1;
        }
        l->fd = fd;
        l->dev = held.st_dev;
        l->ino = held.st_ino;
        return 0;
    }
    fprintf(stderr, "%s: '%s' keeps changing under this run; another program is removing it\n",
            l->program, l->path);
    return 1;
}

/* atexit: removes the lock file if it is still ours, and lets go of it. */
static void run_lock_release(void)
{
    run_lock *l = &the_run_lock;
    if (l->fd < 0) return;
    struct stat named;
    if (stat(l->path, &named) == 0 && named.st_dev == l->dev && named.st_ino == l->ino)
        unlink(l->path);
    close(l->fd);
    l->fd = -1;
}

int run_lock_folder(const char *program, const char *dir, int argc, char **argv)
{
    run_lock *l = &the_run_lock;
    l->program = program;
    snprintf(l->dir, sizeof l->dir, "%s", dir);
    snprintf(l->path, sizeof l->path, "%s/%s", dir, RUN_LOCK_NAME);
    size_t used = 0;
    for (int a = 0; a < argc && used + 2 < sizeof l->command; a++) {
        int n = snprintf(l->command + used, sizeof l->command - used, "%s%s", a ? " " : "",
                         argv[a]);
        if (n < 0) break;
        used += (size_t)n;
    }
    if (used >= sizeof l->command) used = sizeof l->command - 1;
    for (size_t i = 0; i < used; i++)
        if (l->command[i] == '\n') l->command[i] = ' ';
    if (run_lock_take(l)) return 1;
    atexit(run_lock_release);
    return 0;
}

int run_lock_verify(void)
{
    run_lock *l = &the_run_lock;
    if (l->fd < 0) return 0;
    struct stat named;
    if (stat(l->path, &named) == 0 && named.st_dev == l->dev && named.st_ino == l->ino) return 0;
    struct stat folder;
    bool folder_gone = stat(l->dir, &folder) != 0;
    if (folder_gone && mkdir(l->dir, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "%s: the output folder '%s' was removed during the run and cannot be "
                "made again (%s)\n", l->program, l->dir, strerror(errno));
        return 1;
    }
    fprintf(stderr, "%s: warning: %s during the run; %s\n", l->program,
            folder_gone ? "the output folder was removed" : "the lock file was removed or replaced",
            folder_gone ? "made it again, with what this run writes from now on"
                        : "taking it again");
    close(l->fd);
    l->fd = -1;
    return run_lock_take(l);
}
