/*
 * program.h - small services the programs share: a monotonic clock for timings, making an
 * output folder (one level under an existing parent, or with its missing parents), and the
 * check that what a program printed to standard output was all written.
 */
#ifndef SNN_APP_PROGRAM_H
#define SNN_APP_PROGRAM_H

/* Seconds on the monotonic clock (differences only: its origin is arbitrary). */
double now_seconds(void);

/* mkdir for one level under an existing parent; an existing folder is fine. 0 on success, else
 * 1 with a message (a file in the way, or why mkdir failed). */
int make_dir(const char *path);

/* The output folder `path` that option `flag` of `program` names, with every missing folder
 * above it (mkdir -p); existing folders are fine. 0 on success, else 1 with a message naming
 * the program, the flag, the path and the folder that could not be made ("snn-train: --out
 * a/b: cannot create folder 'a': a file of that name is in the way"). */
int make_dirs(const char *program, const char *flag, const char *path);

/* For a program whose results go to standard output: 0 when they were all written, else 1
 * with a message (a full disk or a closed pipe must not look like success). */
int finish_stdout(const char *program);

#endif /* SNN_APP_PROGRAM_H */
