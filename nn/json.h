/*
 * json.h - a small, strict JSON reader for safetensors headers (internal to nn/).
 *
 * A safetensors header is one JSON object: tensor name -> {"dtype", "shape", "data_offsets"},
 * plus an optional "__metadata__" object of strings. So this reader knows exactly four kinds of
 * value: objects, arrays, strings and integers. Anything else (fractions, exponents, true, false,
 * null) is an error, as are duplicate keys in an object, invalid UTF-8, raw control characters in
 * strings, "\u0000" escapes (names are C strings), nesting deeper than SNN_JSON_MAX_DEPTH and
 * anything but whitespace after the root value. A file is untrusted input: every read is
 * bounds-checked and the recursion is depth-limited, so a hostile header gives a message, never a
 * crash.
 *
 *     snn_json_doc doc;
 *     if (snn_json_parse(&doc, text, len, "model.safetensors") != SNN_OK) ... snn_last_error()
 *     const snn_json_node *root = snn_json_root(&doc);           // an object
 *     for (const snn_json_node *m = snn_json_first(&doc, root); m; m = snn_json_next(&doc, m))
 *         printf("%s\n", m->key);
 *     snn_json_free(&doc);
 *
 * Errors read "<what>: bad JSON header at byte 17: expected ':' after the key \"a\"", where
 * <what> is the caller's description (usually the file name).
 * The document is a flat array of nodes linked by index (first child, next sibling), with all
 * decoded strings in one buffer of the text's size (a decoded string is never longer than its
 * JSON spelling), so parsing makes two or three allocations, whatever the input.
 */
#ifndef SNN_NN_JSON_H
#define SNN_NN_JSON_H

#include <stddef.h>
#include <stdint.h>

#include "tensor/tensor.h"

#define SNN_JSON_MAX_DEPTH 16

typedef enum snn_json_type {
    SNN_JSON_OBJECT,
    SNN_JSON_ARRAY,
    SNN_JSON_STRING,
    SNN_JSON_INTEGER,
} snn_json_type;

typedef struct snn_json_node {
    snn_json_type type;
    int first_child;      /* index of the first member / element, -1 if none */
    int next_sibling;     /* index of the next member / element of the parent, -1 if last */
    int count;            /* number of members / elements (objects and arrays) */
    const char *key;      /* object members: the decoded key, NUL-terminated; else NULL */
    size_t key_len;
    const char *string;   /* strings: the decoded value, NUL-terminated; else NULL */
    size_t string_len;
    int64_t integer;      /* integers: the value */
    size_t begin, end;    /* byte span of the value in the source text: text[begin, end) */
} snn_json_node;

typedef struct snn_json_doc {
    snn_json_node *nodes; /* nodes[0] is the root */
    int count, capacity;
    char *strings;        /* decoded keys and strings, each NUL-terminated */
    size_t strings_size, strings_used;
} snn_json_doc;

/* Parses text[0, len) (need not be NUL-terminated). On failure the doc is left empty (nothing
 * to free) and the status is SNN_ERR_FORMAT (bad text) or SNN_ERR_MEMORY. */
snn_status snn_json_parse(snn_json_doc *doc, const char *text, size_t len, const char *what);
/* Frees what snn_json_parse allocated; an empty or zeroed doc is a no-op. */
void snn_json_free(snn_json_doc *doc);

const snn_json_node *snn_json_root(const snn_json_doc *doc);
/* Iteration over the members of an object or the elements of an array. */
const snn_json_node *snn_json_first(const snn_json_doc *doc, const snn_json_node *node);
const snn_json_node *snn_json_next(const snn_json_doc *doc, const snn_json_node *node);
/* The member of an object called `key`, or NULL. */
const snn_json_node *snn_json_get(const snn_json_doc *doc, const snn_json_node *object,
                                  const char *key);

/* Writing JSON strings (for the header writer): the length of `s` as a JSON string literal,
 * quotes included, and the literal itself written at dst (no NUL added); returns the end. */
size_t snn_json_string_length(const char *s);
char *snn_json_write_string(char *dst, const char *s);

#endif /* SNN_NN_JSON_H */
