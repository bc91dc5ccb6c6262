/*
 * options.h - a program's command line as a table (snn-train, snn-eval, snn-sparse, the
 * benchmarks with named flags): each entry names a flag, its type, the variable it sets and a
 * line of help. parse_options reads argv against the table; --help prints the table with each
 * flag's default read from its variable, so the help cannot disagree with the code.
 *
 * Every message about a bad command line names the program, the flag and the value it got
 * ("snn-train: --batch-size 0: expected an integer >= 1"); an unknown flag, or a name that is
 * not one of a flag's choices, comes with the nearest known one ("did you mean '--epochs'?").
 */
#ifndef SNN_APP_OPTIONS_H
#define SNN_APP_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>

typedef enum option_type { OPT_INT, OPT_FLOAT, OPT_STRING, OPT_FLAG } option_type;

typedef struct option {
    const char *name;        /* "--epochs"; a name without the leading '-' ("CHECKPOINT") is a
                                positional argument: a word of argv that is not a flag sets it
                                (OPT_STRING only) */
    option_type type;
    void *value;             /* int*, float*, const char**, bool* */
    const char *help;
} option;

/* Reads argv[1..] against opts[0..n): a flag sets its bool, any other option takes the next
 * word. Returns 0 on success, 1 on a bad command line (message printed, naming the option and
 * what it expects; an unknown flag with the nearest known one), 2 when --help or -h was shown
 * (usage, `summary`, then the table). */
int parse_options(int argc, char **argv, const char *summary, option *opts, int n);

/* parse_options that also says which entries the command line named: given[i] (n of them)
 * becomes true for each opts[i] it did, false for the others. */
int parse_options_given(int argc, char **argv, const char *summary, option *opts, int n,
                        bool *given);

/* The entry of opts[0..n) named `name`, or NULL. */
option *option_find(option *opts, int n, const char *name);

/* The value of `o` as text into buf: an integer, the shortest decimal text that reads back as
 * the same float ("0.9", not "0.899999976"), the string ("" for none), or "on" / "off". */
const char *option_text(const option *o, char *buf, size_t size);

/* The shortest decimal text that strtof reads back as x. */
const char *option_float_text(float x, char *buf, size_t size);

/* Sets the value of `o` from `text` as the command line would (a string option keeps the
 * pointer: `text` must outlive it; a flag takes "on" or "off"). 0, or 1 when text is no value
 * of o's type (o is then unchanged). */
int option_set_text(option *o, const char *text);

/* Whether `text` read as o's type is the value o holds. */
bool option_equals_text(const option *o, const char *text);

/* The index of the word of words[0..n) nearest to `word` by edit distance (insertions,
 * deletions, substitutions and swaps of neighbours; on a tie, the one nearest in length), or
 * -1 when none is near enough to be what was meant (at most 2 edits, or a third of the word's
 * length) or the word is too short to guess from (under 4 characters). */
int option_nearest(const char *word, const char *const *words, int n);

/* For a value that is none of a flag's choices: prints "<program>: <flag> <value>: expected
 * a, b or c" and, where one is near, "; did you mean 'b'?". Returns 2, the exit code of a bad
 * command line. */
int option_bad_choice(const char *program, const char *flag, const char *value,
                      const char *const *choices, int n);

#endif /* SNN_APP_OPTIONS_H */
