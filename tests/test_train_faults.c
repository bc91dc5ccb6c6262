#define _DEFAULT_SOURCE /* mkdtemp, waitid, nanosleep */
/*
 * test_train_faults.c - the programs when a long job goes wrong, as a user or a batch scheduler
 * makes it go wrong (issue 19; the list of faults and what each program does is in
 * docs/long-runs.md):
 *   - SIGTERM at a random moment: snn-train finishes the step, saves, exits 75, and the resumed
 *     run ends bit-identical to an unbroken one (checkpoint and metrics);
 *   - SIGKILL after a --checkpoint-every checkpoint: the resumed run ends bit-identical too, and
 *     the dead run's lock is taken over as stale; likewise with --ema (the weights' moving
 *     average resumes from mid-epoch);
 *   - a second signal ends the process at once (killed by it), leaving the last checkpoint;
 *   - a second run into a folder in use is refused, naming the first;
 *   - sizes that cannot fit are refused before anything is allocated, with both numbers;
 *   - outputs that cannot be written (a file where the folder or a parent of it should be, a
 *     file-size limit as a full disk, standard output on /dev/full, a folder removed mid-run)
 *     give a clear message and leave the previous checkpoint as it was; missing parents of
 *     --out are made.
 * Everything runs without root and without mounting anything. Runs are tiny (width 8, 320
 * images) so that the test takes seconds; skipped (77) without Fashion-MNIST.
 * Run: ctest --test-dir build -R train_faults --output-on-failure
 */
#include <sys/stat.h>

#include "program_runner.h"
#include "snn.h"
#include "test.h"

#define COMMON "--T 2 --width 8 --hidden 32 --batch-size 32 --limit-train 320 --limit-test 64 --threads 1"

static char straight[400]; /* the unbroken two-epoch run everything is compared with */
static double train_seconds = 1.0; /* how long it trained here: the range of the random SIGTERM */

static double seconds_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void path_of(char *buf, size_t size, const char *dir, const char *file)
{
    snprintf(buf, size, "%s/%s", dir, file);
}

/* The first five columns of each metrics.csv row (epoch, losses, accuracies): timing aside,
 * what a resumed run must reproduce exactly. */
static int same_metrics(const char *dir_a, const char *dir_b)
{
    char pa[600], pb[600], la[8192], lb[8192];
    path_of(pa, sizeof pa, dir_a, "metrics.csv");
    path_of(pb, sizeof pb, dir_b, "metrics.csv");
    FILE *a = fopen(pa, "r"), *b = fopen(pb, "r");
    int same = a && b, rows = 0;
    while (same) {
        char *ra = fgets(la, sizeof la, a), *rb = fgets(lb, sizeof lb, b);
        if (!ra || !rb) {
            same = !ra && !rb;
            break;
        }
        char *end = la;
        for (int c = 0; c < 5 && end; c++) end = strchr(end + 1, ',');
        size_t n = end ? (size_t)(end - la) : strlen(la);
        same = strncmp(la, lb, n) == 0;
        rows++;
    }
    if (a) fclose(a);
    if (b) fclose(b);
    if (!same) fprintf(stderr, "  metrics differ between %s and %s\n", pa, pb);
    return same && rows == 3; /* header + two epochs */
}

static int same_checkpoint(const char *dir_a, const char *dir_b)
{
    char pa[600], pb[600];
    path_of(pa, sizeof pa, dir_a, "checkpoint.safetensors");
    path_of(pb, sizeof pb, dir_b, "checkpoint.safetensors");
    return same_file(pa, pb);
}

static void test_straight_run(void)
{
    char args[1600];
    snprintf(straight, sizeof straight, "%s/straight", tmp);
    snprintf(args, sizeof args, COMMON " --epochs 2 --out %s", straight);
    pid_t pid = spawn(TRAIN, args, "straight.txt");
    CHECK(pid > 0 && wait_for_log(pid, "straight.txt", "steps/epoch", 120.0));
    double t0 = seconds_now();
    CHECK(reap(pid) == 0);
    train_seconds = seconds_now() - t0;
    char lock[600];
    path_of(lock, sizeof lock, straight, "snn-train.lock");
    CHECK(access(lock, F_OK) != 0); /* a clean exit removes its lock */
    /* --checkpoint-every only writes files: the run is the same */
    char every[400];
    snprintf(every, sizeof every, "%s/every", tmp);
    snprintf(args, sizeof args, COMMON " --epochs 2 --checkpoint-every 3 --out %s", every);
    CHECK(run(TRAIN " %s", args) == 0);
    CHECK(same_checkpoint(straight, every) && same_metrics(straight, every));
}

/* SIGTERM at a random moment of the run, then --resume: bit-identical to the unbroken run. */
static void test_sigterm_then_resume(void)
{
    char dir[400], args[1600];
    snprintf(dir, sizeof dir, "%s/sigterm", tmp);
    unsigned seed = (unsigned)time(NULL) ^ (unsigned)getpid();
    srand(seed);
    int code = 0;
    double delay = 0.0;
    /* anywhere in the time the unbroken run trained; a delay it outlives is tried again, shorter */
    for (int attempt = 0; attempt < 6; attempt++) {
        snprintf(args, sizeof args, "rm -rf %s %s/sigterm.txt", dir, tmp);
        CHECK(system(args) == 0);
        snprintf(args, sizeof args, COMMON " --epochs 2 --out %s", dir);
        pid_t pid = spawn(TRAIN, args, "sigterm.txt");
        CHECK(pid > 0 && wait_for_log(pid, "sigterm.txt", "steps/epoch", 120.0));
        delay = (double)rand() / RAND_MAX * train_seconds / (attempt + 1);
        struct timespec pause = {(time_t)delay, (long)((delay - (double)(time_t)delay) * 1e9)};
        nanosleep(&pause, NULL);
        kill(pid, SIGTERM);
        code = reap(pid);
        /* too late (the run had finished) or too early (before its first step: it says there
         * is nothing to save, and there is nothing to resume): another go */
        if (code != 0 && !log_has("sigterm.txt", "before the first step")) break;
    }
    fprintf(stderr, "  SIGTERM %.3f s into training (seed %u): exit %d\n", delay, seed, code);
    CHECK(code == 75);
    CHECK(log_has("sigterm.txt", "SIGTERM: stopped") && log_has("sigterm.txt", "--resume"));
    if (log_has("sigterm.txt", "stopped in epoch")) fprintf(stderr, "  (stopped mid-epoch)\n");
    else if (log_has("sigterm.txt", "before its evaluation")) fprintf(stderr, "  (stopped before an evaluation)\n");
    else fprintf(stderr, "  (stopped at an epoch's end)\n");
    snprintf(args, sizeof args, COMMON " --epochs 2 --out %s --resume %s/checkpoint.safetensors", dir, dir);
    CHECK(run(TRAIN " %s", args) == 0 && output_contains("resumed from"));
    CHECK(same_checkpoint(straight, dir));
    CHECK(same_metrics(straight, dir));
}

/* SIGKILL (no grace at all) once a mid-epoch checkpoint exists: resuming from it ends
 * bit-identical to `unbroken` (run with the same `flags`), and the dead run's lock is found
 * stale. */
static void kill_then_resume(const char *flags, const char *unbroken, const char *name)
{
    char dir[400], args[1600], ckpt[600];
    snprintf(dir, sizeof dir, "%s/%s", tmp, name);
    path_of(ckpt, sizeof ckpt, dir, "checkpoint.safetensors");
    snprintf(args, sizeof args, COMMON "%s --epochs 2 --checkpoint-every 4 --out %s", flags, dir);
    pid_t pid = spawn(TRAIN, args, "killed.txt");
    CHECK(pid > 0 && wait_for_log(pid, "killed.txt", "steps/epoch", 120.0));
    struct timespec pause = {0, 5 * 1000 * 1000};
    for (int i = 0; i < 24000 && access(ckpt, F_OK) != 0; i++) nanosleep(&pause, NULL);
    kill(pid, SIGKILL);
    int code = reap(pid);
    CHECK(code == 128 + SIGKILL || code == 0);
    snprintf(args, sizeof args, COMMON "%s --epochs 2 --out %s --resume %s", flags, dir, ckpt);
    CHECK(run(TRAIN " %s", args) == 0);
    CHECK(code == 0 || output_contains("was stale"));
    CHECK(same_checkpoint(unbroken, dir));
    CHECK(same_metrics(unbroken, dir));
}

static void test_kill_then_resume(void) { kill_then_resume("", straight, "killed"); }

/* The same with --ema: the moving average (saved as "ema." tensors) resumes mid-epoch exactly. */
static void test_kill_then_resume_ema(void)
{
    char unbroken[400], args[1600];
    snprintf(unbroken, sizeof unbroken, "%s/straight_ema", tmp);
    snprintf(args, sizeof args, COMMON " --ema 0.9 --epochs 2 --out %s", unbroken);
    CHECK(run(TRAIN " %s", args) == 0 && output_contains("(EMA weights)"));
    kill_then_resume(" --ema 0.9", unbroken, "killed_ema");
}

/* Two signals: the second one ends the run at once, killed by it, without a new checkpoint. */
static void test_second_signal(void)
{
    char dir[400], args[1600];
    snprintf(dir, sizeof dir, "%s/twice", tmp);
    snprintf(args, sizeof args, COMMON " --epochs 20 --out %s", dir);
    pid_t pid = spawn(TRAIN, args, "twice.txt");
    CHECK(pid > 0 && wait_for_log(pid, "twice.txt", "steps/epoch", 120.0));
    /* stopped, both signals wait; on SIGCONT they arrive back to back, in either order (each
     * may go to another thread), and the one handled second kills the process */
    kill(pid, SIGSTOP);
    kill(pid, SIGINT);
    kill(pid, SIGTERM);
    kill(pid, SIGCONT);
    int code = reap(pid);
    fprintf(stderr, "  exit %d (killed by %s)\n", code, code == 128 + SIGINT ? "SIGINT" : "SIGTERM?");
    CHECK(code == 128 + SIGINT || code == 128 + SIGTERM);
    char ckpt[600];
    path_of(ckpt, sizeof ckpt, dir, "checkpoint.safetensors");
    CHECK(access(ckpt, F_OK) != 0 || log_has("twice.txt", "epoch 1:"));
}

/* One run per output folder: a second is refused naming the first; a dead one's lock is stale. */
static void test_folder_lock(void)
{
    char dir[400], args[1600], lock[600];
    snprintf(dir, sizeof dir, "%s/locked", tmp);
    path_of(lock, sizeof lock, dir, "snn-train.lock");
    snprintf(args, sizeof args, COMMON " --epochs 50 --out %s", dir);
    pid_t first = spawn(TRAIN, args, "first.txt");
    CHECK(first > 0 && wait_for_log(first, "first.txt", "steps/epoch", 120.0));
    kill(first, SIGSTOP);
    /* --overwrite: the first run may have written a checkpoint before it was stopped */
    snprintf(args, sizeof args, COMMON " --epochs 1 --overwrite --out %s", dir);
    CHECK(run(TRAIN " %s", args) == 1);
    char holder[64];
    snprintf(holder, sizeof holder, "in use by another run (pid %ld", (long)first);
    CHECK(output_contains(holder) && output_contains("--out"));
    kill(first, SIGKILL);
    kill(first, SIGCONT);
    CHECK(reap(first) == 128 + SIGKILL);
    CHECK(access(lock, F_OK) == 0); /* left behind, but no longer held */
    CHECK(run(TRAIN " %s", args) == 0 && output_contains("was stale"));
    CHECK(access(lock, F_OK) != 0);
}

static void test_sizes_refused(void)
{
    char dir[400], args[1600], ckpt[600];
    snprintf(dir, sizeof dir, "%s/huge", tmp);
    path_of(ckpt, sizeof ckpt, dir, "checkpoint.safetensors");
    /* 1.5 TiB: more than any machine this runs on */
    snprintf(args, sizeof args, COMMON " --width 100000 --out %s", dir);
    CHECK(run(TRAIN " %s", args) == 2);
    CHECK(output_contains("needs about 1.44 TiB") && output_contains("available") &&
          output_contains("not even --batch-size 1 fits") && output_contains("--width (100000)"));
    /* under a cap: the batch that fits is named */
    snprintf(args, sizeof args, "SNN_MEMORY_LIMIT=256M " TRAIN " " COMMON " --width 256 --batch-size 4096 "
             "--limit-train 8192 --out %s", dir);
    CHECK(run("%s", args) == 2);
    CHECK(output_contains("SNN_MEMORY_LIMIT") && output_contains("the largest --batch-size that fits is about"));
    CHECK(access(ckpt, F_OK) != 0);
    /* snn-eval: the batch of an evaluation */
    snprintf(args, sizeof args, "--checkpoint %s/checkpoint.safetensors --batch-size 100000000 "
             "--limit-test 64", straight);
    CHECK(run(EVAL " %s", args) == 2 && output_contains("evaluating cnn at --batch-size 100000000"));
    snprintf(args, sizeof args, "SNN_MEMORY_LIMIT=lots " EVAL " --checkpoint %s/checkpoint.safetensors "
             "--limit-test 64", straight);
    CHECK(run("%s", args) == 0 && output_contains("ignoring SNN_MEMORY_LIMIT='lots'"));
}

static void test_unwritable_outputs(void)
{
    char args[1600], path[600];
    /* a file where the folder or a parent of it should be: refused before any work, naming
     * the program, the flag and the path */
    snprintf(path, sizeof path, "%s/a-file", tmp);
    FILE *f = fopen(path, "w");
    if (f) fclose(f);
    snprintf(args, sizeof args, COMMON " --out %s", path);
    CHECK(run(TRAIN " %s", args) == 1 && output_contains("a file of that name is in the way"));
    snprintf(args, sizeof args, COMMON " --out %s/a-file/run", tmp);
    char expect[700];
    snprintf(expect, sizeof expect,
             "snn-train: --out %s/a-file/run: cannot create folder '%s/a-file'", tmp, tmp);
    CHECK(run(TRAIN " %s", args) == 1 && output_contains(expect));
    /* missing parents are made, as mkdir -p (they were refused until issue 32) */
    snprintf(args, sizeof args, COMMON " --epochs 1 --out %s/missing/parents/run", tmp);
    CHECK(run(TRAIN " %s", args) == 0);
    snprintf(path, sizeof path, "%s/missing/parents/run/checkpoint.safetensors", tmp);
    CHECK(access(path, R_OK) == 0);
    /* a folder that cannot be written (root writes anywhere: only checked as a user) */
    if (geteuid() != 0) {
        char ro[400];
        snprintf(ro, sizeof ro, "%s/read-only", tmp);
        CHECK(mkdir(ro, 0555) == 0);
        snprintf(args, sizeof args, COMMON " --out %s", ro);
        CHECK(run(TRAIN " %s", args) == 1 && output_contains("cannot write into the output folder"));
        chmod(ro, 0755);
    }
    /* a full disk, as a file-size limit (ulimit -f, 512-byte blocks in sh): the checkpoint cannot
     * be written; the one before is left as it was, and the run says so */
    char dir[400], copy[600], ckpt[600];
    snprintf(dir, sizeof dir, "%s/full", tmp);
    path_of(ckpt, sizeof ckpt, dir, "checkpoint.safetensors");
    snprintf(copy, sizeof copy, "%s/before.safetensors", tmp);
    snprintf(args, sizeof args, COMMON " --epochs 2 --stop-after 1 --out %s", dir);
    CHECK(run(TRAIN " %s", args) == 0);
    snprintf(args, sizeof args, "cp %s %s", ckpt, copy);
    CHECK(system(args) == 0);
    snprintf(args, sizeof args, "ulimit -f 200; exec " TRAIN " " COMMON " --epochs 2 --out %s "
             "--resume %s", dir, ckpt);
    CHECK(run("%s", args) == 1);
    CHECK(output_contains("File too large") && output_contains("is unchanged"));
    CHECK(same_file(ckpt, copy));
    /* resuming again, without the limit, replaces the epoch-2 row the failed run wrote */
    snprintf(args, sizeof args, COMMON " --epochs 2 --out %s --resume %s", dir, ckpt);
    CHECK(run(TRAIN " %s", args) == 0);
    CHECK(same_checkpoint(straight, dir) && same_metrics(straight, dir));
    /* results to a full device */
    snprintf(args, sizeof args, "sh -c '" EVAL " --checkpoint %s --limit-test 64 > /dev/full'", ckpt);
    CHECK(run("%s", args) == 1 && output_contains("cannot write the results"));
    /* a checkpoint to resume from that is gone or cut short */
    snprintf(args, sizeof args, COMMON " --out %s --resume %s/gone.safetensors", dir, tmp);
    CHECK(run(TRAIN " %s", args) == 1 && output_contains("gone.safetensors"));
    snprintf(args, sizeof args, "head -c 5000 %s > %s/cut.safetensors", ckpt, tmp);
    CHECK(system(args) == 0);
    snprintf(args, sizeof args, COMMON " --out %s --resume %s/cut.safetensors", dir, tmp);
    CHECK(run(TRAIN " %s", args) == 1 && output_contains("cut.safetensors"));
    /* snn-make-cifar never renames its archive over something that is not a file */
    snprintf(args, sizeof args, "-o %s", dir);
    CHECK(run(SNN_BIN_DIR "/snn-make-cifar %s", args) == 1 && output_contains("not a regular file"));
}

/* The output folder removed while the run goes on: made again, and the run finishes. */
static void test_folder_removed_mid_run(void)
{
    char dir[400], args[1600], ckpt[600];
    snprintf(dir, sizeof dir, "%s/removed", tmp);
    path_of(ckpt, sizeof ckpt, dir, "checkpoint.safetensors");
    snprintf(args, sizeof args, COMMON " --epochs 2 --out %s", dir);
    pid_t pid = spawn(TRAIN, args, "removed.txt");
    CHECK(pid > 0 && wait_for_log(pid, "removed.txt", "steps/epoch", 120.0));
    kill(pid, SIGSTOP);
    snprintf(args, sizeof args, "rm -rf %s", dir);
    CHECK(system(args) == 0);
    kill(pid, SIGCONT);
    CHECK(reap(pid) == 0);
    CHECK(log_has("removed.txt", "the output folder was removed"));
    CHECK(access(ckpt, F_OK) == 0);
}

int main(void)
{
    if (!fashion_mnist_available()) {
        fprintf(stderr, "skipped: Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)\n");
        return 77;
    }
    if (runner_begin("test_train_faults")) return 1;
    RUN(test_straight_run);
    RUN(test_sigterm_then_resume);
    RUN(test_kill_then_resume);
    RUN(test_kill_then_resume_ema);
    RUN(test_second_signal);
    RUN(test_folder_lock);
    RUN(test_sizes_refused);
    RUN(test_unwritable_outputs);
    RUN(test_folder_removed_mid_run);
    runner_end(test_failures);
    return test_finish();
}
