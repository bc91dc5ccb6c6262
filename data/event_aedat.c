/*
 * event_aedat.c - the AEDAT formats of iniVation's (and jAER's) DVS cameras, as the DVS128
 * Gesture and CIFAR10-DVS data sets store them, and DVS Gesture's label files.
 *
 * Every AEDAT file opens with ASCII header lines that start with '#', the first one naming the
 * version ("#!AER-DAT3.1\r\n", "#!AER-DAT2.0\r\n"); AEDAT 3.x ends the header with
 * "#!END-HEADER\r\n", AEDAT 2.0 simply stops writing '#' lines. Then binary data:
 *
 * AEDAT 3.1 (DVS Gesture): packets, each a 28-byte little-endian header and its events
 *     0  int16 eventType (1: polarity)      12 int32 eventTSOverflow
 *     2  int16 eventSource                  16 int32 eventCapacity (events stored)
 *     4  int32 eventSize (bytes per event)  20 int32 eventNumber (events in use)
 *     8  int32 eventTSOffset                24 int32 eventValid
 *   then eventCapacity * eventSize bytes. A polarity event is 8 bytes: uint32 data, int32 time,
 *     data bit 0 valid, bit 1 polarity, bits 2..16 y, bits 17..31 x;
 *     time in microseconds = eventTSOverflow << 31 | timestamp.
 *   Other packet types (special events, IMU, frames) are skipped; so are invalid events.
 *
 * AEDAT 2.0 (CIFAR10-DVS, recorded with a DVS128 in jAER): 8 bytes per event, big-endian
 *     uint32 address, uint32 timestamp (microseconds); address bit 0 polarity, bits 1..7 column,
 *     bits 8..14 row. The recordings are mapped to images as SpikingJelly does:
 *     x = 127 - row, y = 127 - column, p = 1 - bit 0 (so the frames match its CIFAR10DVS).
 *
 * DVS Gesture labels (userNN_<lighting>_labels.csv): a header line
 *     "class,startTime_usec,endTime_usec", then one gesture per line, class 1..11; a gesture is
 *     the events with start <= t < end of the recording.
 *
 * Everything is bounds-checked against the data's size; errors name the file and the offset.
 */
#include <stdlib.h>
#include <string.h>

#include "data_internal.h"
#include "tensor/error.h"

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

snn_status snn_aedat_header(const uint8_t *data, uint64_t size, const char *source,
                            const char *version, uint64_t *offset)
{
    static const char magic[] = "#!AER-DAT";
    const size_t mlen = sizeof magic - 1, vlen = strlen(version);
    if (size < mlen + vlen || memcmp(data, magic, mlen) != 0 ||
        memcmp(data + mlen, version, vlen) != 0) {
        char got[16] = "";
        for (size_t i = 0; i < 12 && i < size; i++)
            got[i] = data[i] >= 0x20 && data[i] < 0x7F ? (char)data[i] : '?';
        return snn_error(SNN_ERR_FORMAT, "%s: not an AEDAT %s file (expected the first line "
                         "\"#!AER-DAT%s\", got \"%s\")", source, version, version, got);
    }
    const bool v3 = version[0] == '3';
    uint64_t at = 0;
    while (at < size && data[at] == '#') {
        const uint8_t *nl = memchr(data + at, '\n', (size_t)(size - at));
        if (!nl)
            return snn_error(SNN_ERR_FORMAT, "%s: truncated AEDAT header (a '#' line at offset "
                             "%llu has no end)", source, (unsigned long long)at);
        bool end = v3 && (uint64_t)(nl - (data + at)) >= 12 &&
                   memcmp(data + at, "#!END-HEADER", 12) == 0;
        at = (uint64_t)(nl - data) + 1;
        if (end) break;
    }
    *offset = at;
    return SNN_OK;
}

snn_status snn_aedat3_decode(const uint8_t *data, uint64_t size, const char *source, int width,
                             int height, snn_event_list *out)
{
    uint64_t at;
    snn_status st = snn_aedat_header(data, size, source, "3.1", &at);
    if (st != SNN_OK) return st;
    while (at < size) {
        if (size - at < 28)
            return snn_error(SNN_ERR_FORMAT, "%s: truncated AEDAT 3.1 packet header at offset "
                             "%llu (expected 28 bytes, %llu left)", source,
                             (unsigned long long)at, (unsigned long long)(size - at));
        const uint8_t *h = data + at;
        int type = (int)(int16_t)(h[0] | h[1] << 8);
        uint32_t event_size = le32(h + 4), overflow = le32(h + 12);
        uint32_t capacity = le32(h + 16), number = le32(h + 20);
        if (event_size == 0 || event_size > 4096 || capacity > (1u << 30) || number > capacity)
            return snn_error(SNN_ERR_FORMAT, "%s: bad AEDAT 3.1 packet header at offset %llu "
                             "(event size %u, capacity %u, number %u; expected 1..4096 bytes "
                             "and number <= capacity)", source, (unsigned long long)at,
                             event_size, capacity, number);
        uint64_t bytes = (uint64_t)capacity * event_size;
        at += 28;
        if (bytes > size - at)
            return snn_error(SNN_ERR_FORMAT, "%s: truncated AEDAT 3.1 packet at offset %llu "
                             "(expected %llu bytes of events, %llu left)", source,
                             (unsigned long long)(at - 28), (unsigned long long)bytes,
                             (unsigned long long)(size - at));
        if (type == 1) { /* polarity events */
            if (event_size < 8)
                return snn_error(SNN_ERR_FORMAT, "%s: polarity packet at offset %llu with "
                                 "%u-byte events (expected 8)", source,
                                 (unsigned long long)(at - 28), event_size);
            for (uint32_t i = 0; i < number; i++) {
                const uint8_t *e = data + at + (uint64_t)i * event_size;
                uint32_t word = le32(e);
                if (!(word & 1)) continue; /* not valid */
                snn_event ev = {.p = (uint8_t)(word >> 1 & 1), .y = (uint16_t)(word >> 2 & 0x7FFF),
                                .x = (uint16_t)(word >> 17 & 0x7FFF)};
                ev.t = (int64_t)((uint64_t)overflow << 31 | le32(e + 4));
                if (ev.x >= width || ev.y >= height)
                    return snn_error(SNN_ERR_FORMAT, "%s: event at pixel (%u, %u) in the packet "
                                     "at offset %llu (expected a %d x %d sensor)", source, ev.x,
                                     ev.y, (unsigned long long)(at - 28), width, height);
                st = snn_event_list_push(out, ev, source);
                if (st != SNN_OK) return st;
            }
        }
        at += bytes;
    }
    return SNN_OK;
}

snn_status snn_aedat2_decode(const uint8_t *data, uint64_t size, const char *source,
                             snn_event_list *out)
{
    uint64_t at;
    snn_status st = snn_aedat_header(data, size, source, "2.0", &at);
    if (st != SNN_OK) return st;
    if ((size - at) % 8 != 0)
        return snn_error(SNN_ERR_FORMAT, "%s: %llu bytes of events after the header (expected a "
                         "multiple of 8: address and timestamp per event)", source,
                         (unsigned long long)(size - at));
    for (; at < size; at += 8) {
        uint32_t address = be32(data + at);
        int column = (int)(address >> 1 & 0x7F), row = (int)(address >> 8 & 0x7F);
        snn_event ev = {.t = be32(data + at + 4), .x = (uint16_t)(127 - row),
                        .y = (uint16_t)(127 - column), .p = (uint8_t)(1 - (address & 1))};
        st = snn_event_list_push(out, ev, source);
        if (st != SNN_OK) return st;
    }
    return SNN_OK;
}

/* A non-negative decimal integer at *p (up to `end`); false when there is none or it overflows. */
static bool parse_int(const char **p, const char *end, int64_t *out)
{
    const char *s = *p;
    int64_t v = 0;
    int digits = 0;
    while (s < end && (*s == ' ' || *s == '\t')) s++;
    for (; s < end && *s >= '0' && *s <= '9'; s++, digits++) {
        if (v > (INT64_MAX - 9) / 10) return false;
        v = v * 10 + (*s - '0');
    }
    while (s < end && (*s == ' ' || *s == '\t')) s++;
    *p = s;
    *out = v;
    return digits > 0;
}

snn_status snn_gesture_labels_parse(const uint8_t *text, uint64_t size, const char *source,
                                    snn_gesture_label **out, int *count)
{
    *out = NULL;
    *count = 0;
    /* at most one label per line: count the lines to size the block */
    int64_t lines = 1;
    for (uint64_t i = 0; i < size; i++) lines += text[i] == '\n';
    if (lines > 1000000)
        return snn_error(SNN_ERR_FORMAT, "%s: %lld lines (expected a short label file)", source,
                         (long long)lines);
    snn_gesture_label *labels = snn_alloc((size_t)lines * sizeof *labels, SNN_CPU);
    if (!labels) return snn_error(SNN_ERR_MEMORY, "%s: out of memory", source);
    const char *p = (const char *)text, *end = p + size;
    int n = 0, line = 0;
    snn_status st = SNN_OK;
    while (p < end && st == SNN_OK) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        if (!eol) eol = end;
        const char *stop = eol;
        if (stop > p && stop[-1] == '\r') stop--;
        line++;
        const char *q = p;
        p = eol < end ? eol + 1 : end;
        while (q < stop && (*q == ' ' || *q == '\t')) q++;
        if (q == stop) continue;                                    /* empty line */
        if (line == 1 && (*q < '0' || *q > '9')) continue;          /* the header */
        int64_t cls, start, stop_t;
        bool ok = parse_int(&q, stop, &cls) && q < stop && *q++ == ',' &&
                  parse_int(&q, stop, &start) && q < stop && *q++ == ',' &&
                  parse_int(&q, stop, &stop_t) && q == stop;
        if (!ok || cls < 1 || cls > 11 || stop_t <= start)
            st = snn_error(SNN_ERR_FORMAT, "%s: line %d is not \"class,startTime_usec,"
                           "endTime_usec\" with class 1..11 and start < end", source, line);
        else
            labels[n++] = (snn_gesture_label){(int)cls - 1, start, stop_t};
    }
    if (st != SNN_OK || n == 0) {
        snn_free(labels, (size_t)lines * sizeof *labels, SNN_CPU);
        if (st == SNN_OK)
            st = snn_error(SNN_ERR_FORMAT, "%s: no gesture (expected lines \"class,"
                           "startTime_usec,endTime_usec\")", source);
        return st;
    }
    /* hand back a block of exactly n entries */
    snn_gesture_label *exact = snn_alloc((size_t)n * sizeof *exact, SNN_CPU);
    if (exact) memcpy(exact, labels, (size_t)n * sizeof *exact);
    snn_free(labels, (size_t)lines * sizeof *labels, SNN_CPU);
    if (!exact) return snn_error(SNN_ERR_MEMORY, "%s: out of memory", source);
    *out = exact;
    *count = n;
    return SNN_OK;
}
