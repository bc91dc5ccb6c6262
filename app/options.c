/*
 * options.c - parse_options (options.h): argv against a table of flags, the --help that prints
 * the table with each flag's current value as its default, and the nearest-name suggestions
 * of its messages.
 */
#include "app/options.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* argv[0] without its folders: "snn-train", as the messages name the program */
static const char *program_name(const char *argv0)
{
    const char *slash = strrchr(argv0, '/');
    return slash ? slash + 1 : argv0;
}

static bool is_positional(const option *o) { return o->name[0] != '-'; }

/* usage line, summary, then one line per flag: name, help, [default] */
static void print_help(FILE *out, const char *program, const char *summary, const option *opts,
                       int n)
{
    fprintf(out, "usage: %s [options]", program);
    for (int i = 0; i < n; i++)
        if (is_positional(&opts[i])) fprintf(out, " [%s]", opts[i].name);
    fprintf(out, "\n%s\n\noptions (default in brackets):\n", summary);
    for (int i = 0; i < n; i++) {
        char def[96] = "";
        const void *v = opts[i].value;
        switch (opts[i].type) {
        case OPT_INT: snprintf(def, sizeof def, "%d", *(const int *)v); break;
        case OPT_FLOAT: snprintf(def, sizeof def, "%g", (double)*(const float *)v); break;
        case OPT_STRING: {
            const char *s = *(const char *const *)v;
            snprintf(def, sizeof def, "%s", s ? s : "none");
            break;
        }
        case OPT_FLAG: snprintf(def, sizeof def, "%s", *(const bool *)v ? "on" : "off"); break;
        }
        fprintf(out, "  %-18s %s [%s]\n", opts[i].name, opts[i].help, def);
    }
    fprintf(out, "  %-18s show this help\n", "--help");
}

/* The edit distance of a and b (each cut to 63 characters): insertions, deletions,
 * substitutions and swaps of two neighbours ("lfi" -> "lif") cost 1 each (the optimal string
 * alignment distance), over three rows of the table. */
static int edit_distance(const char *a, const char *b)
{
    int la = (int)strlen(a), lb = (int)strlen(b);
    if (la > 63) la = 63;
    if (lb > 63) lb = 63;
    int rows[3][64], *before = rows[0], *above = rows[1], *row = rows[2];
    for (int j = 0; j <= lb; j++) above[j] = j;
    for (int i = 1; i <= la; i++) {
        row[0] = i;
        for (int j = 1; j <= lb; j++) {
            int best = above[j - 1] + (a[i - 1] != b[j - 1]);
            if (above[j] + 1 < best) best = above[j] + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                before[j - 2] + 1 < best)
                best = before[j - 2] + 1;
            row[j] = best;
        }
        int *spare = before;
        before = above, above = row, row = spare;
    }
    return above[lb];
}

int option_nearest(const char *word, const char *const *words, int n)
{
    const int length = (int)strlen(word);
    if (length < 4) return -1; /* "gpu" is one edit from "cpu": too short to guess */
    int best = -1, best_distance = 0, best_gap = 0;
    for (int i = 0; i < n; i++) {
        int d = edit_distance(word, words[i]), gap = abs((int)strlen(words[i]) - length);
        if (best < 0 || d < best_distance || (d == best_distance && gap < best_gap))
            best = i, best_distance = d, best_gap = gap;
    }
    int limit = length / 3 > 2 ? length / 3 : 2;
    return best >= 0 && best_distance <= limit ? best : -1;
}

option *option_find(option *opts, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (strcmp(opts[i].name, name) == 0) return &opts[i];
    return NULL;
}

int option_bad_choice(const char *program, const char *flag, const char *value,
                      const char *const *choices, int n)
{
    fprintf(stderr, "%s: %s %s: expected ", program, flag, value);
    for (int i = 0; i < n; i++)
        fprintf(stderr, "%s%s", choices[i], i + 2 < n ? ", " : i + 1 < n ? " or " : "");
    int near = option_nearest(value, choices, n);
    if (near >= 0) fprintf(stderr, "; did you mean '%s'?", choices[near]);
    fputc('\n', stderr);
    return 2;
}

const char *option_float_text(float x, char *buf, size_t size)
{
    for (int digits = 1; digits < 9; digits++) {
        snprintf(buf, size, "%.*g", digits, (double)x);
        if (strtof(buf, NULL) == x) return buf;
    }
    snprintf(buf, size, "%.9g", (double)x); /* always reads back */
    return buf;
}

const char *option_text(const option *o, char *buf, size_t size)
{
    switch (o->type) {
    case OPT_INT: snprintf(buf, size, "%d", *(const int *)o->value); break;
    case OPT_FLOAT: option_float_text(*(const float *)o->value, buf, size); break;
    case OPT_STRING: {
        const char *s = *(const char *const *)o->value;
        snprintf(buf, size, "%s", s ? s : "");
        break;
    }
    case OPT_FLAG: snprintf(buf, size, "%s", *(const bool *)o->value ? "on" : "off"); break;
    }
    return buf;
}

int option_set_text(option *o, const char *text)
{
    char *end = NULL;
    errno = 0;
    switch (o->type) {
    case OPT_INT: {
        long x = strtol(text, &end, 10);
        if (*text == '\0' || *end || errno || x < -2147483647L || x > 2147483647L) return 1;
        *(int *)o->value = (int)x;
        return 0;
    }
    case OPT_FLOAT: {
        float x = strtof(text, &end);
        if (*text == '\0' || *end || errno) return 1;
        *(float *)o->value = x;
        return 0;
    }
    case OPT_STRING: *(const char **)o->value = text; return 0;
    case OPT_FLAG:
        if (strcmp(text, "on") && strcmp(text, "off")) return 1;
        *(bool *)o->value = strcmp(text, "on") == 0;
        return 0;
    }
    return 1;
}

bool option_equals_text(const option *o, const char *text)
{
    union { int i; float f; const char *s; bool b; } read;
    option copy = *o;
    copy.value = &read;
    if (option_set_text(&copy, text)) return false;
    switch (o->type) {
    case OPT_INT: return read.i == *(const int *)o->value;
    case OPT_FLOAT: return read.f == *(const float *)o->value;
    case OPT_STRING: {
        const char *s = *(const char *const *)o->value;
        return strcmp(read.s, s ? s : "") == 0;
    }
    case OPT_FLAG: return read.b == *(const bool *)o->value;
    }
    return false;
}

/* An argv word that names no flag: the message, with the nearest flag where one is near. */
static void unknown_option(const char *program, const char *word, const option *opts, int n)
{
    const char *eq = strchr(word, '=');
    for (int i = 0; eq && i < n; i++) /* --epochs=3: a known flag with its value attached */
        if (strncmp(word, opts[i].name, (size_t)(eq - word)) == 0 &&
            opts[i].name[eq - word] == '\0') {
            fprintf(stderr, "%s: unknown option '%s'; give the value as the next word: %s %s\n",
                    program, word, opts[i].name, eq + 1);
            return;
        }
    const char *names[128];
    int count = 0;
    for (int i = 0; i < n && count < 127; i++)
        if (!is_positional(&opts[i])) names[count++] = opts[i].name;
    names[count++] = "--help";
    int near = word[0] == '-' ? option_nearest(word, names, count) : -1;
    if (near >= 0)
        fprintf(stderr, "%s: unknown option '%s'; did you mean '%s'? (see --help)\n", program,
                word, names[near]);
    else
        fprintf(stderr, "%s: unknown option '%s'; see --help\n", program, word);
}

int parse_options_given(int argc, char **argv, const char *summary, option *opts, int n,
                        bool *given)
{
    const char *program = program_name(argv[0]);
    if (given) memset(given, 0, (size_t)n * sizeof *given);
    int positionals = 0; /* positional arguments read so far */
    for (int a = 1; a < argc; a++) {
        if (strcmp(argv[a], "--help") == 0 || strcmp(argv[a], "-h") == 0) {
            print_help(stdout, argv[0], summary, opts, n);
            return 2;
        }
        int i = 0;
        while (i < n && strcmp(argv[a], opts[i].name) != 0) i++;
        if (i == n && argv[a][0] != '-') { /* a word that is no flag: the next positional */
            int seen = 0;
            for (i = 0; i < n; i++)
                if (is_positional(&opts[i]) && seen++ == positionals) break;
            if (i < n) {
                *(const char **)opts[i].value = argv[a];
                if (given) given[i] = true;
                positionals++;
                continue;
            }
            if (positionals) {
                fprintf(stderr, "%s: unexpected argument '%s': it takes %d without a flag; see "
                        "--help\n", program, argv[a], positionals);
                return 1;
            }
        }
        if (i == n) {
            unknown_option(program, argv[a], opts, n);
            return 1;
        }
        if (given) given[i] = true;
        if (opts[i].type == OPT_FLAG) {
            *(bool *)opts[i].value = true;
            continue;
        }
        if (a + 1 >= argc) {
            fprintf(stderr, "%s: %s needs a value; see --help\n", program, argv[a]);
            return 1;
        }
        const char *v = argv[++a];
        if (option_set_text(&opts[i], v)) {
            fprintf(stderr, "%s: %s %s: expected %s\n", program, opts[i].name, v,
                    opts[i].type == OPT_INT ? "an integer" : "a number");
            return 1;
        }
    }
    return 0;
}

int parse_options(int argc, char **argv, const char *summary, option *opts, int n)
{
    return parse_options_given(argc, argv, summary, opts, n, NULL);
}
