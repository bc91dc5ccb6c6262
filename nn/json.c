/*
 * json.c - the strict JSON reader of json.h: recursive descent over a byte buffer.
 *
 * Grammar accepted (RFC 8259 restricted to what a safetensors header holds):
 *     value   = object | array | string | integer
 *     object  = '{' [ string ':' value { ',' string ':' value } ] '}'      (keys unique)
 *     array   = '[' [ value { ',' value } ] ']'
 *     integer = [ '-' ] ( '0' | [1-9][0-9]* )                              (fits in int64)
 *     string  = '"' { UTF-8 char >= 0x20 except '"' '\' | escape } '"'
 *     escape  = '\' ( '"' | '\' | '/' | 'b' | 'f' | 'n' | 'r' | 't' | 'u' 4 hex digits )
 * with whitespace (space, tab, CR, LF) allowed between tokens and after the root value (the
 * safetensors writer pads the header with spaces).
 *
 * Safety: the reader never looks past text[len); recursion stops at SNN_JSON_MAX_DEPTH; the node
 * count is capped at SNN_JSON_MAX_NODES, so a hostile header of L bytes costs at most
 * L bytes of strings and 1M nodes of memory. Tested through tests/test_checkpoint.c and fuzzed by
 * fuzz/fuzz_safetensors.c (.ci/fuzz.sh).
 *
 * Why not a JSON library (Debian's cJSON, say): this reader needs no dependency, its limits
 * (depth 16, 1 << 20 values, and the 100,000,000-byte header cap of checkpoint_load.c) bound
 * any input's cost by construction, and it accepts only what a safetensors header holds; the
 * fuzzer runs it on every CI run. docs/architecture.md, "Modules and models", records this.
 */
#include "json.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/error.h"

#define SNN_JSON_MAX_NODES (1 << 20)

typedef struct parser {
    const char *text;
    size_t len, pos;
    const char *what;     /* for messages: the file name */
    snn_json_doc *doc;
    int depth;
} parser;

/* Stores "<what>: bad JSON header at byte <pos>: <message>" and returns SNN_ERR_FORMAT. */
static snn_status fail(parser *p, const char *fmt, ...) SNN_PRINTF_LIKE(2, 3);
static snn_status fail(parser *p, const char *fmt, ...)
{
    char message[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    return snn_error(SNN_ERR_FORMAT, "%s: bad JSON header at byte %zu: %s", p->what, p->pos,
                     message);
}

/* A printable description of the byte at the cursor, for "unexpected ..." messages. */
static const char *describe_here(const parser *p, char *buf, size_t size)
{
    if (p->pos >= p->len) return "the end of the header";
    unsigned char c = (unsigned char)p->text[p->pos];
    if (c >= 0x20 && c < 0x7f) snprintf(buf, size, "'%c'", c);
    else snprintf(buf, size, "byte 0x%02x", c);
    return buf;
}

static void skip_whitespace(parser *p)
{
    while (p->pos < p->len) {
        char c = p->text[p->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
        p->pos++;
    }
}

/* Appends a zeroed node; returns its index, or -1 with the error set. */
static int new_node(parser *p, snn_json_type type)
{
    snn_json_doc *doc = p->doc;
    if (doc->count == doc->capacity) {
        if (doc->capacity >= SNN_JSON_MAX_NODES) {
            fail(p, "too many values (a header may hold at most %d)", SNN_JSON_MAX_NODES);
            return -1;
        }
        int capacity = doc->capacity ? 2 * doc->capacity : 64;
        snn_json_node *nodes = snn_alloc((size_t)capacity * sizeof *nodes, SNN_CPU);
        if (!nodes) {
            snn_error(SNN_ERR_MEMORY, "%s: out of memory reading the JSON header (%d values)",
                      p->what, capacity);
            return -1;
        }
        if (doc->count) memcpy(nodes, doc->nodes, (size_t)doc->count * sizeof *nodes);
        snn_free(doc->nodes, (size_t)doc->capacity * sizeof *nodes, SNN_CPU);
        doc->nodes = nodes;
        doc->capacity = capacity;
    }
    int index = doc->count++;
    snn_json_node *node = &doc->nodes[index];
    memset(node, 0, sizeof *node);
    node->type = type;
    node->first_child = -1;
    node->next_sibling = -1;
    node->begin = p->pos;
    return index;
}

/* ---- strings ------------------------------------------------------------------------------ */

static int hex_value(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Reads the 4 hex digits after "\u" at p->pos; -1 (error set) if they are not there. */
static long read_hex4(parser *p)
{
    if (p->len - p->pos < 4) {
        fail(p, "truncated \\u escape");
        return -1;
    }
    long value = 0;
    for (int i = 0; i < 4; i++) {
        int h = hex_value(p->text[p->pos + (size_t)i]);
        if (h < 0) {
            fail(p, "bad \\u escape (expected 4 hex digits)");
            return -1;
        }
        value = value * 16 + h;
    }
    p->pos += 4;
    return value;
}

static char *put_utf8(char *out, unsigned long cp)
{
    if (cp < 0x80) {
        *out++ = (char)cp;
    } else if (cp < 0x800) {
        *out++ = (char)(0xC0 | (cp >> 6));
        *out++ = (char)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        *out++ = (char)(0xE0 | (cp >> 12));
        *out++ = (char)(0x80 | ((cp >> 6) & 0x3F));
        *out++ = (char)(0x80 | (cp & 0x3F));
    } else {
        *out++ = (char)(0xF0 | (cp >> 18));
        *out++ = (char)(0x80 | ((cp >> 12) & 0x3F));
        *out++ = (char)(0x80 | ((cp >> 6) & 0x3F));
        *out++ = (char)(0x80 | (cp & 0x3F));
    }
    return out;
}

/* Length of the valid UTF-8 sequence starting at s[0] (a byte >= 0x80) within n bytes, or 0.
 * Rejects overlong forms, surrogates and code points above U+10FFFF (RFC 3629 table). */
static size_t utf8_sequence(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    size_t need;
    unsigned char lo = 0x80, hi = 0xBF;   /* allowed range of the second byte */
    if (c >= 0xC2 && c <= 0xDF) need = 2;
    else if (c == 0xE0) { need = 3; lo = 0xA0; }
    else if (c >= 0xE1 && c <= 0xEC) need = 3;
    else if (c == 0xED) { need = 3; hi = 0x9F; }
    else if (c >= 0xEE && c <= 0xEF) need = 3;
    else if (c == 0xF0) { need = 4; lo = 0x90; }
    else if (c >= 0xF1 && c <= 0xF3) need = 4;
    else if (c == 0xF4) { need = 4; hi = 0x8F; }
    else return 0;
    if (n < need) return 0;
    if (s[1] < lo || s[1] > hi) return 0;
    for (size_t i = 2; i < need; i++)
        if (s[i] < 0x80 || s[i] > 0xBF) return 0;
    return need;
}

/* Parses a string literal at p->pos (which holds '"') into the doc's string buffer. */
static snn_status parse_string(parser *p, const char **out, size_t *out_len)
{
    snn_json_doc *doc = p->doc;
    char *start = doc->strings + doc->strings_used;
    char *w = start;
    p->pos++; /* the opening quote */
    for (;;) {
        if (p->pos >= p->len) return fail(p, "unterminated string");
        unsigned char c = (unsigned char)p->text[p->pos];
        if (c == '"') {
            p->pos++;
            break;
        }
        if (c < 0x20) return fail(p, "raw control character 0x%02x in a string (escape it)", c);
        if (c == '\\') {
            p->pos++;
            if (p->pos >= p->len) return fail(p, "unterminated string");
            char e = p->text[p->pos++];
            switch (e) {
            case '"': *w++ = '"'; break;
            case '\\': *w++ = '\\'; break;
            case '/': *w++ = '/'; break;
            case 'b': *w++ = '\b'; break;
            case 'f': *w++ = '\f'; break;
            case 'n': *w++ = '\n'; break;
            case 'r': *w++ = '\r'; break;
            case 't': *w++ = '\t'; break;
            case 'u': {
                long cp = read_hex4(p);
                if (cp < 0) return SNN_ERR_FORMAT;
                if (cp == 0) return fail(p, "\\u0000 is not allowed in a name or value");
                if (cp >= 0xDC00 && cp <= 0xDFFF) return fail(p, "lone low surrogate \\u%04lx", cp);
                if (cp >= 0xD800 && cp <= 0xDBFF) {
                    /* a high surrogate must be followed by an escaped low surrogate */
                    if (p->len - p->pos < 2 || p->text[p->pos] != '\\' ||
                        p->text[p->pos + 1] != 'u')
                        return fail(p, "high surrogate \\u%04lx without a low surrogate", cp);
                    p->pos += 2;
                    long low = read_hex4(p);
                    if (low < 0) return SNN_ERR_FORMAT;
                    if (low < 0xDC00 || low > 0xDFFF)
                        return fail(p, "high surrogate \\u%04lx followed by \\u%04lx", cp, low);
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
                }
                /* the escape took >= 6 bytes and its UTF-8 takes <= 4: the buffer keeps up */
                w = put_utf8(w, (unsigned long)cp);
                break;
            }
            default:
                p->pos--;
                return fail(p, "unknown escape '\\%c'", e >= 0x20 && e < 0x7f ? e : '?');
            }
            continue;
        }
        if (c < 0x80) {
            *w++ = (char)c;
            p->pos++;
            continue;
        }
        size_t n = utf8_sequence((const unsigned char *)p->text + p->pos, p->len - p->pos);
        if (!n) return fail(p, "invalid UTF-8 in a string");
        memcpy(w, p->text + p->pos, n);
        w += n;
        p->pos += n;
    }
    *w++ = '\0';
    /* decoded bytes + NUL <= the literal's bytes, so the buffer of len + 1 never overflows */
    SNN_ASSERT((size_t)(w - doc->strings) <= doc->strings_size);
    *out = start;
    *out_len = (size_t)(w - start) - 1;
    doc->strings_used = (size_t)(w - doc->strings);
    return SNN_OK;
}

/* ---- values ------------------------------------------------------------------------------- */

static int parse_value(parser *p);

static int parse_integer(parser *p)
{
    int index = new_node(p, SNN_JSON_INTEGER);
    if (index < 0) return -1;
    bool negative = false;
    if (p->text[p->pos] == '-') {
        negative = true;
        p->pos++;
    }
    if (p->pos >= p->len || p->text[p->pos] < '0' || p->text[p->pos] > '9') {
        fail(p, "expected a digit after '-'");
        return -1;
    }
    if (p->text[p->pos] == '0' && p->pos + 1 < p->len && p->text[p->pos + 1] >= '0' &&
        p->text[p->pos + 1] <= '9') {
        fail(p, "leading zeros are not allowed in a number");
        return -1;
    }
    /* accumulate the magnitude; -2^63 is the one value whose magnitude exceeds INT64_MAX */
    const uint64_t limit = negative ? (uint64_t)INT64_MAX + 1u : (uint64_t)INT64_MAX;
    uint64_t magnitude = 0;
    while (p->pos < p->len && p->text[p->pos] >= '0' && p->text[p->pos] <= '9') {
        uint64_t digit = (uint64_t)(p->text[p->pos] - '0');
        if (magnitude > (limit - digit) / 10) {
            fail(p, "integer out of the 64-bit range");
            return -1;
        }
        magnitude = magnitude * 10 + digit;
        p->pos++;
    }
    if (p->pos < p->len &&
        (p->text[p->pos] == '.' || p->text[p->pos] == 'e' || p->text[p->pos] == 'E')) {
        fail(p, "only integers are allowed here (got a fraction or an exponent)");
        return -1;
    }
    snn_json_node *node = &p->doc->nodes[index];
    node->integer = negative ? (int64_t)(0u - magnitude) : (int64_t)magnitude;
    node->end = p->pos;
    return index;
}

typedef struct key_ref {
    const char *key;
    size_t len;
} key_ref;

static int compare_keys(const void *a, const void *b)
{
    const key_ref *x = a, *y = b;
    if (x->len != y->len) return x->len < y->len ? -1 : 1;
    return memcmp(x->key, y->key, x->len);
}

/* JSON allows duplicate keys; a checkpoint must not have them (which one would win?). Sorting
 * the keys finds a duplicate in O(n log n), so a header with 100k tensors still loads fast. */
static snn_status check_unique_keys(parser *p, int object)
{
    const snn_json_node *obj = &p->doc->nodes[object];
    if (obj->count < 2) return SNN_OK;
    size_t bytes = (size_t)obj->count * sizeof(key_ref);
    key_ref *keys = snn_alloc(bytes, SNN_CPU);
    if (!keys)
        return snn_error(SNN_ERR_MEMORY, "%s: out of memory checking %d keys of the JSON header",
                         p->what, obj->count);
    int n = 0;
    for (int i = obj->first_child; i >= 0; i = p->doc->nodes[i].next_sibling)
        keys[n++] = (key_ref){p->doc->nodes[i].key, p->doc->nodes[i].key_len};
    qsort(keys, (size_t)n, sizeof *keys, compare_keys);
    snn_status status = SNN_OK;
    for (int i = 1; i < n && status == SNN_OK; i++) {
        if (compare_keys(&keys[i - 1], &keys[i]) == 0) {
            size_t saved = p->pos;
            p->pos = obj->begin;
            status = fail(p, "duplicate key \"%.80s\" in this object", keys[i].key);
            p->pos = saved;
        }
    }
    snn_free(keys, bytes, SNN_CPU);
    return status;
}

static int parse_container(parser *p, bool is_object)
{
    if (p->depth >= SNN_JSON_MAX_DEPTH) {
        fail(p, "nesting deeper than %d levels", SNN_JSON_MAX_DEPTH);
        return -1;
    }
    int index = new_node(p, is_object ? SNN_JSON_OBJECT : SNN_JSON_ARRAY);
    if (index < 0) return -1;
    const char close = is_object ? '}' : ']';
    char where[16];
    p->depth++;
    p->pos++; /* '{' or '[' */
    skip_whitespace(p);
    int last = -1, count = 0;
    if (p->pos < p->len && p->text[p->pos] == close) {
        p->pos++;
    } else {
        for (;;) {
            const char *key = NULL;
            size_t key_len = 0;
            if (is_object) {
                if (p->pos >= p->len || p->text[p->pos] != '"') {
                    fail(p, "expected a string key, got %s", describe_here(p, where, sizeof where));
                    return -1;
                }
                if (parse_string(p, &key, &key_len) != SNN_OK) return -1;
                skip_whitespace(p);
                if (p->pos >= p->len || p->text[p->pos] != ':') {
                    fail(p, "expected ':' after the key \"%.80s\", got %s", key,
                         describe_here(p, where, sizeof where));
                    return -1;
                }
                p->pos++;
                skip_whitespace(p);
            }
            int child = parse_value(p);
            if (child < 0) return -1;
            p->doc->nodes[child].key = key;
            p->doc->nodes[child].key_len = key_len;
            if (last < 0) p->doc->nodes[index].first_child = child;
            else p->doc->nodes[last].next_sibling = child;
            last = child;
            count++;
            skip_whitespace(p);
            if (p->pos < p->len && p->text[p->pos] == ',') {
                p->pos++;
                skip_whitespace(p);
                continue;
            }
            if (p->pos < p->len && p->text[p->pos] == close) {
                p->pos++;
                break;
            }
            fail(p, "expected ',' or '%c', got %s", close, describe_here(p, where, sizeof where));
            return -1;
        }
    }
    p->depth--;
    snn_json_node *node = &p->doc->nodes[index];
    node->count = count;
    node->end = p->pos;
    if (is_object && check_unique_keys(p, index) != SNN_OK) return -1;
    return index;
}

/* Parses one value at p->pos (whitespace already skipped); returns its node index or -1. */
static int parse_value(parser *p)
{
    char where[16];
    if (p->pos >= p->len) {
        fail(p, "expected a value, got the end of the header");
        return -1;
    }
    char c = p->text[p->pos];
    if (c == '{' || c == '[') return parse_container(p, c == '{');
    if (c == '-' || (c >= '0' && c <= '9')) return parse_integer(p);
    if (c == '"') {
        int index = new_node(p, SNN_JSON_STRING);
        if (index < 0) return -1;
        const char *s;
        size_t n;
        if (parse_string(p, &s, &n) != SNN_OK) return -1;
        snn_json_node *node = &p->doc->nodes[index];
        node->string = s;
        node->string_len = n;
        node->end = p->pos;
        return index;
    }
    if (c == 't' || c == 'f' || c == 'n') {
        fail(p, "true, false and null are not allowed in a safetensors header");
        return -1;
    }
    fail(p, "expected a value, got %s", describe_here(p, where, sizeof where));
    return -1;
}

/* ---- public ------------------------------------------------------------------------------- */

void snn_json_free(snn_json_doc *doc)
{
    if (!doc) return;
    snn_free(doc->nodes, (size_t)doc->capacity * sizeof *doc->nodes, SNN_CPU);
    snn_free(doc->strings, doc->strings_size, SNN_CPU);
    memset(doc, 0, sizeof *doc);
}

snn_status snn_json_parse(snn_json_doc *doc, const char *text, size_t len, const char *what)
{
    SNN_ASSERT(doc && (text || len == 0));
    memset(doc, 0, sizeof *doc);
    if (!what) what = "JSON";
    parser p = {.text = text, .len = len, .pos = 0, .what = what, .doc = doc, .depth = 0};
    doc->strings_size = len + 1;
    doc->strings = snn_alloc(doc->strings_size, SNN_CPU);
    if (!doc->strings) {
        doc->strings_size = 0;
        return snn_error(SNN_ERR_MEMORY, "%s: out of memory for a JSON header of %zu bytes", what,
                         len);
    }
    skip_whitespace(&p);
    int root = parse_value(&p);
    if (root >= 0) {
        skip_whitespace(&p);
        if (p.pos != len) {
            fail(&p, "unexpected data after the JSON value");
            root = -1;
        }
    }
    if (root < 0) {
        snn_json_free(doc);
        return snn_last_status();
    }
    SNN_ASSERT(root == 0);
    return SNN_OK;
}

const snn_json_node *snn_json_root(const snn_json_doc *doc)
{
    return doc && doc->count > 0 ? &doc->nodes[0] : NULL;
}

const snn_json_node *snn_json_first(const snn_json_doc *doc, const snn_json_node *node)
{
    if (!node || node->first_child < 0) return NULL;
    return &doc->nodes[node->first_child];
}

const snn_json_node *snn_json_next(const snn_json_doc *doc, const snn_json_node *node)
{
    if (!node || node->next_sibling < 0) return NULL;
    return &doc->nodes[node->next_sibling];
}

const snn_json_node *snn_json_get(const snn_json_doc *doc, const snn_json_node *object,
                                  const char *key)
{
    if (!object || object->type != SNN_JSON_OBJECT) return NULL;
    size_t n = strlen(key);
    for (const snn_json_node *m = snn_json_first(doc, object); m; m = snn_json_next(doc, m))
        if (m->key_len == n && memcmp(m->key, key, n) == 0) return m;
    return NULL;
}

/* ---- writing ------------------------------------------------------------------------------ */

size_t snn_json_string_length(const char *s)
{
    size_t n = 2; /* the quotes */
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c == '"' || *c == '\\' || *c == '\n' || *c == '\r' || *c == '\t' || *c == '\b' ||
            *c == '\f')
            n += 2;
        else if (*c < 0x20)
            n += 6; /* \u00XX */
        else
            n += 1;
    }
    return n;
}

char *snn_json_write_string(char *dst, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    *dst++ = '"';
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        char e = 0;
        switch (*c) {
        case '"': e = '"'; break;
        case '\\': e = '\\'; break;
        case '\n': e = 'n'; break;
        case '\r': e = 'r'; break;
        case '\t': e = 't'; break;
        case '\b': e = 'b'; break;
        case '\f': e = 'f'; break;
        default: break;
        }
        if (e) {
            *dst++ = '\\';
            *dst++ = e;
        } else if (*c < 0x20) {
            *dst++ = '\\';
            *dst++ = 'u';
            *dst++ = '0';
            *dst++ = '0';
            *dst++ = hex[*c >> 4];
            *dst++ = hex[*c & 15];
        } else {
            *dst++ = (char)*c;
        }
    }
    *dst++ = '"';
    return dst;
}
