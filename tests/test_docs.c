/*
 * test_docs.c - the code the docs quote is the code in the tree. A fenced block in a markdown
 * file under docs/ (or README.md) that follows a line
 *
 *     <!-- quote: examples/train_minimal.c -->
 *
 * must appear in that file: each of its lines, leading and trailing blanks ignored, in the same
 * order (lines of the file may sit between them, so a quote can skip what it does not explain,
 * with "..." lines in the block standing for the skipped part). A quote that drifts from its
 * file fails here, naming the doc, the line and the file.
 *
 *     ctest --test-dir build -R docs --output-on-failure
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"

#define MAX_LINES 4096
#define MAX_LINE 512

typedef struct text {
    int n;
    char line[MAX_LINES][MAX_LINE];
} text;

/* s without leading and trailing blanks, in place */
static char *trim(char *s)
{
    while (isspace((unsigned char)*s)) s++;
    size_t n = strlen(s);
    while (n > 0 && isspace((unsigned char)s[n - 1])) s[--n] = '\0';
    return s;
}

static int read_text(const char *path, text *t)
{
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char buf[MAX_LINE];
    t->n = 0;
    while (t->n < MAX_LINES && fgets(buf, sizeof buf, f)) {
        snprintf(t->line[t->n], MAX_LINE, "%s", trim(buf));
        t->n++;
    }
    fclose(f);
    return 0;
}

static text doc, source; /* static: two 2 MB buffers */

/* Checks the quote block starting at doc line `first` (after the ``` line) against `path`;
 * returns the number of quotes checked (1) or 0 on failure, having printed why. */
static int check_quote(const char *doc_path, int marker, const char *path, int *next)
{
    if (read_text(path, &source) != 0) {
        printf("  %s:%d quotes %s, which cannot be read\n", doc_path, marker + 1, path);
        return 0;
    }
    int i = marker + 1;
    if (i >= doc.n || strncmp(doc.line[i], "```", 3) != 0) {
        printf("  %s:%d: a quote marker must be followed by a ``` block\n", doc_path, marker + 1);
        return 0;
    }
    int at = 0, lines = 0;
    for (i++; i < doc.n && strncmp(doc.line[i], "```", 3) != 0; i++) {
        const char *want = doc.line[i];
        if (!*want || strcmp(want, "...") == 0) continue;
        while (at < source.n && strcmp(source.line[at], want) != 0) at++;
        if (at == source.n) {
            printf("  %s:%d: \"%s\" is not in %s (in this order)\n", doc_path, i + 1, want, path);
            return 0;
        }
        at++;
        lines++;
    }
    *next = i;
    if (lines == 0) {
        printf("  %s:%d: an empty quote of %s\n", doc_path, marker + 1, path);
        return 0;
    }
    return 1;
}

static int check_doc(const char *doc_path, int *quotes)
{
    if (read_text(doc_path, &doc) != 0) {
        printf("  cannot read %s\n", doc_path);
        return 1;
    }
    int failures = 0;
    for (int i = 0; i < doc.n; i++) {
        char path[MAX_LINE];
        if (sscanf(doc.line[i], "<!-- quote: %511s -->", path) != 1) continue;
        int next = i;
        if (check_quote(doc_path, i, path, &next)) (*quotes)++;
        else failures++;
        i = next;
    }
    return failures;
}

static void test_quotes_match_their_files(void)
{
    const char *docs[] = {"README.md", "docs/tutorial.md", "docs/neurons.md",
                          "docs/architecture.md", "docs/nir.md", "docs/temporal.md"};
    int quotes = 0, failures = 0;
    for (size_t d = 0; d < sizeof docs / sizeof docs[0]; d++) {
        FILE *f = fopen(docs[d], "r");
        if (!f) continue; /* a doc that does not exist (yet) quotes nothing */
        fclose(f);
        failures += check_doc(docs[d], &quotes);
    }
    printf("  %d quotes checked\n", quotes);
    CHECK(failures == 0);
    CHECK(quotes > 0); /* the tutorial quotes the code it walks through */
}

int main(void)
{
    RUN(test_quotes_match_their_files);
    return test_finish();
}
