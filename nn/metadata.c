/*
 * metadata.c - a flat string -> string map, and its JSON form for safetensors' __metadata__.
 *
 * The JSON side is deliberately narrow: one object whose values are all strings, as the
 * safetensors format specifies for __metadata__. Strings are escaped and unescaped for '"',
 * '\\' and control characters (\n, \t, \uXXXX below 0x80); anything else is an error.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "nn.h"
#include "tensor/error.h"

snn_status snn_metadata_set(snn_metadata *m, const char *key, const char *fmt, ...)
{
    if (strlen(key) >= sizeof m->keys[0])
        return snn_error(SNN_ERR_ARGUMENT, "snn_metadata_set: key '%s' is too long", key);
    int i = 0;
    while (i < m->count && strcmp(m->keys[i], key) != 0) i++;
    if (i == SNN_METADATA_MAX)
        return snn_error(SNN_ERR_ARGUMENT, "snn_metadata_set: more than %d keys", SNN_METADATA_MAX);
    char value[sizeof m->values[0]];
    va_list args;
    va_start(args, fmt);
    int n = vsnprintf(value, sizeof value, fmt, args);
    va_end(args);
    if (n < 0 || (size_t)n >= sizeof value)
        return snn_error(SNN_ERR_ARGUMENT, "snn_metadata_set: the value of '%s' is too long", key);
    snprintf(m->keys[i], sizeof m->keys[i], "%s", key);
    memcpy(m->values[i], value, (size_t)n + 1);
    if (i == m->count) m->count++;
    return SNN_OK;
}

const char *snn_metadata_get(const snn_metadata *m, const char *key)
{
    for (int i = 0; i < m->count; i++)
        if (strcmp(m->keys[i], key) == 0) return m->values[i];
    return NULL;
}

/* Appends s as a JSON string literal; returns the new length (may exceed cap: then retry). */
static size_t put_string(char *out, size_t at, size_t cap, const char *s)
{
    if (at < cap) out[at] = '"';
    at++;
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        char esc[8];
        if (c == '"' || c == '\\') snprintf(esc, sizeof esc, "\\%c", c);
        else if (c < 0x20) snprintf(esc, sizeof esc, "\\u%04x", c);
        else esc[0] = (char)c, esc[1] = '\0';
        for (char *e = esc; *e; e++, at++)
            if (at < cap) out[at] = *e;
    }
    if (at < cap) out[at] = '"';
    return at + 1;
}

char *snn_metadata_to_json(const snn_metadata *m, size_t *len)
{
    size_t cap = 64;
    for (int i = 0; i < m->count; i++) cap += 6 * (strlen(m->keys[i]) + strlen(m->values[i])) + 8;
    char *out = snn_alloc(cap + 1, SNN_CPU);
    if (!out) return snn_error_null(SNN_ERR_MEMORY, "snn_metadata_to_json: out of host memory");
    size_t at = 0;
    out[at++] = '{';
    for (int i = 0; i < m->count; i++) {
        if (i) out[at++] = ',';
        at = put_string(out, at, cap, m->keys[i]);
        out[at++] = ':';
        at = put_string(out, at, cap, m->values[i]);
    }
    out[at++] = '}';
    SNN_ASSERT(at <= cap);
    out[at] = '\0';
    /* report the allocation's size so the caller frees exactly what was taken */
    *len = cap;
    return out;
}

/* Reads a JSON string literal at *p into buf; returns 0 on success. */
static int get_string(const char **p, const char *end, char *buf, size_t size)
{
    const char *s = *p;
    if (s >= end || *s != '"') return 1;
    s++;
    size_t n = 0;
    while (s < end && *s != '"') {
        char c = *s++;
        if (c == '\\') {
            if (s >= end) return 1;
            char e = *s++;
            if (e == 'n') c = '\n';
            else if (e == 't') c = '\t';
            else if (e == 'r') c = '\r';
            else if (e == '"' || e == '\\' || e == '/') c = e;
            else if (e == 'u') {
                if (end - s < 4) return 1;
                unsigned v = 0;
                for (int k = 0; k < 4; k++) {
                    char h = s[k];
                    v = v * 16 + (unsigned)(h >= '0' && h <= '9' ? h - '0'
                                          : h >= 'a' && h <= 'f' ? h - 'a' + 10
                                          : h >= 'A' && h <= 'F' ? h - 'A' + 10 : 99);
                }
                if (v >= 0x80) return 1;
                s += 4;
                c = (char)v;
            } else {
                return 1;
            }
        } else if ((unsigned char)c < 0x20) {
            return 1;
        }
        if (n + 1 >= size) return 1;
        buf[n++] = c;
    }
    if (s >= end) return 1;
    buf[n] = '\0';
    *p = s + 1;
    return 0;
}

static const char *skip_space(const char *p, const char *end)
{
    while (p < end && (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r')) p++;
    return p;
}

snn_status snn_metadata_from_json(const char *json, size_t len, snn_metadata *out)
{
    const char *fn = "snn_metadata_from_json";
    memset(out, 0, sizeof *out);
    const char *p = skip_space(json, json + len), *end = json + len;
    if (p >= end || *p++ != '{') return snn_error(SNN_ERR_FORMAT, "%s: expected a JSON object", fn);
    p = skip_space(p, end);
    if (p < end && *p == '}') return SNN_OK;
    for (;;) {
        char key[sizeof out->keys[0]], value[sizeof out->values[0]];
        p = skip_space(p, end);
        if (get_string(&p, end, key, sizeof key))
            return snn_error(SNN_ERR_FORMAT, "%s: bad or too long key at offset %td", fn, p - json);
        p = skip_space(p, end);
        if (p >= end || *p++ != ':')
            return snn_error(SNN_ERR_FORMAT, "%s: expected ':' after key '%s'", fn, key);
        p = skip_space(p, end);
        if (get_string(&p, end, value, sizeof value))
            return snn_error(SNN_ERR_FORMAT, "%s: the value of '%s' is not a string of at most %zu "
                             "bytes", fn, key, sizeof value - 1);
        if (snn_metadata_set(out, key, "%s", value) != SNN_OK) return SNN_ERR_FORMAT;
        p = skip_space(p, end);
        if (p < end && *p == ',') {
            p++;
            continue;
        }
        if (p < end && *p == '}') return SNN_OK;
        return snn_error(SNN_ERR_FORMAT, "%s: expected ',' or '}' after '%s'", fn, key);
    }
}
