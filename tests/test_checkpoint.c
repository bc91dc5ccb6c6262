/*
 * test_checkpoint.c - safetensors checkpoints (nn/checkpoint_save.c, nn/checkpoint_load.c,
 * nn/json.c).
 *
 *   - round trip: values bit-exact (signed zero, subnormals, infinities, NaN payloads), the
 *     exact header bytes, metadata returned as written, names that need JSON escapes;
 *   - every kind of bad file (truncated, header length past the end, bad JSON, wrong dtype,
 *     wrong shape, missing / extra tensors, overlapping, out-of-bounds or gapped offsets, ...)
 *     gives SNN_ERR_FORMAT or SNN_ERR_IO with a message naming the file (and the tensor), and
 *     leaves the destination tensors exactly as they were;
 *   - a save that fails (out of memory at each allocation in turn, the temp path blocked, a
 *     write that hits the file-size limit half-way) leaves the previous checkpoint intact and no
 *     temp file behind;
 *   - a child process saving an 8 MB checkpoint in a loop is killed with SIGKILL at random
 *     moments: the file on disk is always one complete checkpoint, old or new.
 * Run: ctest --test-dir build -R '^checkpoint$'   (or build/bin/test_checkpoint)
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "snn.h"
#include "tensor/error.h"
#include "test.h"

static char dir[64];      /* a fresh temp directory for this run */

static void path_in_dir(char *out, size_t size, const char *name)
{
    snprintf(out, size, "%s/%s", dir, name);
}

static bool file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* The whole file in an snn_alloc'd buffer (free with snn_free(p, *len ? *len : 1, SNN_CPU)). */
static char *read_file(const char *path, size_t *len)
{
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *data = snn_alloc(n > 0 ? (size_t)n : 1, SNN_CPU);
    if (data && n > 0 && fread(data, 1, (size_t)n, f) != (size_t)n) n = 0;
    fclose(f);
    *len = (size_t)n;
    return data;
}

static void free_file(char *data, size_t len) { snn_free(data, len ? len : 1, SNN_CPU); }

static bool same_file(const char *path, const char *want, size_t want_len)
{
    size_t len;
    char *data = read_file(path, &len);
    bool same = data && len == want_len && memcmp(data, want, len) == 0;
    free_file(data, len);
    return same;
}

/* Writes the 8-byte length (header_len, or strlen(header) when negative), header, data. */
static void write_raw(const char *path, const char *header, const void *data, size_t data_len,
                      long long header_len)
{
    FILE *f = fopen(path, "wb");
    SNN_ASSERT(f);
    uint64_t n = header_len >= 0 ? (uint64_t)header_len : strlen(header);
    unsigned char len[8];
    for (int i = 0; i < 8; i++) len[i] = (unsigned char)(n >> (8 * i));
    fwrite(len, 1, 8, f);
    fwrite(header, 1, strlen(header), f);
    if (data_len) fwrite(data, 1, data_len, f);
    fclose(f);
}

static snn_tensor *tensor_filled(snn_shape shape, float start)
{
    snn_tensor *t = snn_tensor_new(shape, SNN_CPU);
    SNN_ASSERT(t);
    for (int64_t i = 0; i < t->numel; i++) t->data[i] = start + (float)i;
    return t;
}

static void fill(snn_tensor *t, float v)
{
    for (int64_t i = 0; i < t->numel; i++) t->data[i] = v;
}

static bool all_equal(const snn_tensor *t, float v)
{
    for (int64_t i = 0; i < t->numel; i++)
        if (t->data[i] != v) return false;
    return true;
}

static snn_named_param named(const char *name, snn_tensor *t)
{
    snn_named_param p = {.tensor = t, .trainable = true};
    snprintf(p.name, sizeof p.name, "%s", name);
    return p;
}

/* ---- round trip ---------------------------------------------------------------------------- */

static void test_round_trip(void)
{
    char path[128];
    path_in_dir(path, sizeof path, "round.safetensors");
    snn_tensor *a = tensor_filled(SNN_SHAPE(2, 3), 1.0f);
    snn_tensor *b = tensor_filled(SNN_SHAPE(4), -2.5f);
    /* values whose bits a sloppy writer would change */
    const uint32_t special[6] = {0x80000000u /* -0 */, 0x00000001u /* smallest subnormal */,
                                 0x7f800000u /* +inf */, 0xff800000u /* -inf */,
                                 0x7fc12345u /* NaN with payload */, 0x3f800001u};
    memcpy(a->data, special, sizeof special);
    snn_named_param items[2] = {named("a", a), named("b", b)};
    snn_param_list list = {items, 2};
    CHECK_OK(snn_safetensors_save(path, &list, "{\"k\":\"v\"}"));

    /* the exact bytes: length, header padded with spaces to a multiple of 8, data */
    const char *want = "{\"__metadata__\":{\"k\":\"v\"},"
                       "\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
                       "\"b\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[24,40]}}";
    size_t len;
    char *bytes = read_file(path, &len);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = (n << 8) | (unsigned char)bytes[i];
    CHECK(n % 8 == 0 && n >= strlen(want) && n < strlen(want) + 8);
    CHECK(len == 8 + n + 40);
    CHECK(memcmp(bytes + 8, want, strlen(want)) == 0);
    for (size_t i = strlen(want); i < n; i++) CHECK(bytes[8 + i] == ' ');
    CHECK(memcmp(bytes + 8 + n, a->data, 24) == 0);
    CHECK(memcmp(bytes + 8 + n + 24, b->data, 16) == 0);
    free_file(bytes, len);

    /* load into other tensors, listed in another order */
    snn_tensor *a2 = snn_tensor_new(SNN_SHAPE(2, 3), SNN_CPU);
    snn_tensor *b2 = snn_tensor_new(SNN_SHAPE(4), SNN_CPU);
    snn_named_param back[2] = {named("b", b2), named("a", a2)};
    snn_param_list back_list = {back, 2};
    char *meta = NULL;
    size_t meta_len = 0;
    CHECK_OK(snn_safetensors_load(path, &back_list, false, &meta, &meta_len));
    CHECK(memcmp(a2->data, a->data, 24) == 0);
    CHECK(memcmp(b2->data, b->data, 16) == 0);
    CHECK(meta && meta_len == 9 && strcmp(meta, "{\"k\":\"v\"}") == 0);
    snn_free(meta, meta_len + 1, SNN_CPU);

    /* a subset needs allow_extra */
    snn_param_list only_b = {back, 1};
    fill(b2, 0.0f);
    CHECK(snn_safetensors_load(path, &only_b, false, NULL, NULL) == SNN_ERR_FORMAT);
    CHECK(strstr(snn_last_error(), "'a'") && strstr(snn_last_error(), "allow_extra"));
    CHECK(all_equal(b2, 0.0f));
    CHECK_OK(snn_safetensors_load(path, &only_b, true, NULL, NULL));
    CHECK(memcmp(b2->data, b->data, 16) == 0);
    /* an empty list reads just the metadata (what snn_checkpoint_read_metadata does) */
    snn_param_list none = {NULL, 0};
    CHECK_OK(snn_safetensors_load(path, &none, true, &meta, &meta_len));
    CHECK(meta && strcmp(meta, "{\"k\":\"v\"}") == 0);
    snn_free(meta, meta_len + 1, SNN_CPU);

    /* metadata as written (whitespace, escapes and UTF-8 kept); none -> NULL */
    const char *rich = "  { \"epoch\" : \"3\", \"note\": \"a \\\"q\\\" \\\\ \\n \\u00e9 \xc3\xa9\" } ";
    CHECK_OK(snn_safetensors_save(path, &list, rich));
    CHECK_OK(snn_safetensors_load(path, &list, false, &meta, &meta_len));
    CHECK(meta && strncmp(meta, rich + 2, meta_len) == 0 && meta_len == strlen(rich) - 3);
    snn_free(meta, meta_len + 1, SNN_CPU);
    CHECK_OK(snn_safetensors_save(path, &list, NULL));
    meta = (char *)1;
    CHECK_OK(snn_safetensors_load(path, &list, false, &meta, &meta_len));
    CHECK(meta == NULL && meta_len == 0);

    /* names that need escaping, and an empty file of tensors */
    snn_named_param odd[2] = {named("we\"ird\\name\n\x01", a), named("caf\xc3\xa9.w", b)};
    snn_param_list odd_list = {odd, 2};
    CHECK_OK(snn_safetensors_save(path, &odd_list, NULL));
    odd[0].tensor = a2;
    odd[1].tensor = b2;
    fill(a2, 0.0f);
    fill(b2, 0.0f);
    CHECK_OK(snn_safetensors_load(path, &odd_list, false, NULL, NULL));
    CHECK(memcmp(a2->data, a->data, 24) == 0 && memcmp(b2->data, b->data, 16) == 0);
    CHECK_OK(snn_safetensors_save(path, &none, NULL));
    CHECK_OK(snn_safetensors_load(path, &none, false, NULL, NULL));

    /* a header as another writer might lay it out: fields reordered, blanks, metadata last */
    const float data[10] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
    write_raw(path, "{ \"b\" : {\"data_offsets\": [24, 40], \"shape\": [4], \"dtype\": \"F32\"},\n"
                    "  \"a\": {\"shape\": [2, 3], \"dtype\": \"F32\", \"data_offsets\": [0, 24]},\n"
                    "  \"__metadata__\": {\"format\": \"pt\"} }\n   ",
              data, sizeof data, -1);
    CHECK_OK(snn_safetensors_load(path, &list, false, &meta, &meta_len));
    CHECK(a->data[0] == 0.0f && a->data[5] == 5.0f && b->data[0] == 6.0f && b->data[3] == 9.0f);
    CHECK(meta && strcmp(meta, "{\"format\": \"pt\"}") == 0);
    snn_free(meta, meta_len + 1, SNN_CPU);

    /* \u escapes in names, a surrogate pair included, decode to UTF-8 */
    write_raw(path, "{\"\\ud83d\\ude00\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
                    "\"caf\\u00e9\\/\\t\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[24,40]}}",
              data, sizeof data, -1);
    snn_named_param unicode[2] = {named("\xf0\x9f\x98\x80", a2), named("caf\xc3\xa9/\t", b2)};
    snn_param_list unicode_list = {unicode, 2};
    fill(a2, -1.0f);
    fill(b2, -1.0f);
    CHECK_OK(snn_safetensors_load(path, &unicode_list, false, NULL, NULL));
    CHECK(a2->data[1] == 1.0f && b2->data[0] == 6.0f);

    snn_tensor_free(a);
    snn_tensor_free(b);
    snn_tensor_free(a2);
    snn_tensor_free(b2);
    unlink(path);
}

/* ---- bad files ----------------------------------------------------------------------------- */

typedef struct bad_case {
    const char *what;
    const char *header;
    size_t data_len;          /* bytes of data after the header */
    long long header_len;     /* the length written in the prefix; -1: the true one */
    snn_status status;
    const char *needle;       /* must appear in the message */
} bad_case;

#define A_OK "\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]}"
#define B_OK "\"b\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[24,40]}"
#define GOOD "{" A_OK "," B_OK "}"

static const bad_case bad_cases[] = {
    {"trailing comma", "{" A_OK "," B_OK ",}", 40, -1, SNN_ERR_FORMAT, "expected a string key"},
    {"unterminated string", "{\"a\":{\"dtype\":\"F32", 40, -1, SNN_ERR_FORMAT, "unterminated"},
    {"fraction", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2.0,3],\"data_offsets\":[0,24]}," B_OK "}",
     40, -1, SNN_ERR_FORMAT, "only integers"},
    {"exponent", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2e0,3],\"data_offsets\":[0,24]}," B_OK "}",
     40, -1, SNN_ERR_FORMAT, "only integers"},
    {"true", "{\"a\":true}", 0, -1, SNN_ERR_FORMAT, "true, false and null"},
    {"bad escape", "{\"a\\q\":1}", 0, -1, SNN_ERR_FORMAT, "unknown escape"},
    {"raw control character", "{\"a\tb\":1}", 0, -1, SNN_ERR_FORMAT, "raw control character"},
    {"invalid UTF-8", "{\"\xff\":1}", 0, -1, SNN_ERR_FORMAT, "invalid UTF-8"},
    {"overlong UTF-8", "{\"\xc0\xaf\":1}", 0, -1, SNN_ERR_FORMAT, "invalid UTF-8"},
    {"NUL escape", "{\"a\\u0000\":1}", 0, -1, SNN_ERR_FORMAT, "\\u0000"},
    {"lone surrogate", "{\"\\udc00\":1}", 0, -1, SNN_ERR_FORMAT, "surrogate"},
    {"deep nesting", "{\"a\":[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]}", 0, -1, SNN_ERR_FORMAT,
     "nesting deeper"},
    {"duplicate key", "{" A_OK "," B_OK "," A_OK "}", 40, -1, SNN_ERR_FORMAT,
     "duplicate key \"a\""},
    {"leading zero", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[00,24]}," B_OK "}",
     40, -1, SNN_ERR_FORMAT, "leading zeros"},
    {"integer overflow", "{\"a\":{\"dtype\":\"F32\",\"shape\":[99999999999999999999]}}", 0, -1,
     SNN_ERR_FORMAT, "64-bit range"},
    {"data after the JSON", GOOD " x", 40, -1, SNN_ERR_FORMAT, "unexpected data after"},
    {"empty header", "  ", 40, -1, SNN_ERR_FORMAT, "expected a value"},
    {"not an object", "[1,2]", 0, -1, SNN_ERR_FORMAT, "not a JSON object"},
    {"wrong dtype", "{\"a\":{\"dtype\":\"F16\",\"shape\":[2,3],\"data_offsets\":[0,12]}," B_OK "}",
     28, -1, SNN_ERR_FORMAT, "tensor 'a' has dtype \"F16\""},
    {"wrong shape", "{\"a\":{\"dtype\":\"F32\",\"shape\":[3,2],\"data_offsets\":[0,24]}," B_OK "}",
     40, -1, SNN_ERR_FORMAT, "tensor 'a' has shape [3, 2] in the file, expected [2, 3]"},
    {"wrong rank", "{\"a\":{\"dtype\":\"F32\",\"shape\":[6],\"data_offsets\":[0,24]}," B_OK "}",
     40, -1, SNN_ERR_FORMAT, "tensor 'a' has shape [6]"},
    {"missing tensor", "{" A_OK "}", 24, -1, SNN_ERR_FORMAT, "no tensor 'b'"},
    {"extra tensor", "{" A_OK "," B_OK ",\"c\":{\"dtype\":\"F32\",\"shape\":[1],"
     "\"data_offsets\":[40,44]}}", 44, -1, SNN_ERR_FORMAT, "e.g. 'c'"},
    {"overlapping offsets", "{" A_OK ",\"b\":{\"dtype\":\"F32\",\"shape\":[4],"
     "\"data_offsets\":[16,32]}}", 32, -1, SNN_ERR_FORMAT, "'a' [0, 24] and 'b' [16, 32] overlap"},
    {"offsets out of bounds", GOOD, 32, -1, SNN_ERR_FORMAT, "of tensor 'b' are out of bounds"},
    {"huge offsets", "{" A_OK ",\"b\":{\"dtype\":\"F32\",\"shape\":[4],"
     "\"data_offsets\":[24,9223372036854775807]}}", 40, -1, SNN_ERR_FORMAT, "out of bounds"},
    {"reversed offsets", "{" A_OK ",\"b\":{\"dtype\":\"F32\",\"shape\":[4],"
     "\"data_offsets\":[40,24]}}", 40, -1, SNN_ERR_FORMAT, "out of bounds"},
    {"size mismatch", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,20]}," B_OK "}",
     40, -1, SNN_ERR_FORMAT, "span 20 bytes"},
    {"gap", "{" A_OK ",\"b\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[28,44]}}", 44, -1,
     SNN_ERR_FORMAT, "gap"},
    {"trailing bytes", GOOD, 44, -1, SNN_ERR_FORMAT, "trailing bytes"},
    {"negative dimension", "{\"a\":{\"dtype\":\"F32\",\"shape\":[-2,3],\"data_offsets\":[0,24]}," B_OK
     "}", 40, -1, SNN_ERR_FORMAT, "non-negative"},
    {"shape overflow", "{\"a\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904,4],"
     "\"data_offsets\":[0,24]}," B_OK "}", 40, -1, SNN_ERR_FORMAT, "more elements"},
    {"unknown field", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24],\"x\":1},"
     B_OK "}", 40, -1, SNN_ERR_FORMAT, "unknown field \"x\""},
    {"missing field", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2,3]}," B_OK "}", 40, -1,
     SNN_ERR_FORMAT, "no \"data_offsets\""},
    {"entry not an object", "{\"a\":[1]," B_OK "}", 40, -1, SNN_ERR_FORMAT, "not a JSON object"},
    {"metadata not an object", "{\"__metadata__\":\"x\"," A_OK "," B_OK "}", 40, -1,
     SNN_ERR_FORMAT, "__metadata__ is not a JSON object"},
    {"metadata value not a string", "{\"__metadata__\":{\"k\":1}," A_OK "," B_OK "}", 40, -1,
     SNN_ERR_FORMAT, "\"k\" is not a string"},
    {"header length past the end", GOOD, 40, (long long)sizeof GOOD - 1 + 41, SNN_ERR_FORMAT,
     "header length"},
    {"header length enormous", GOOD, 40, 1ll << 40, SNN_ERR_FORMAT, "header length"},
    {"header length zero", GOOD, 40, 0, SNN_ERR_FORMAT, "at least"},
};

static void test_bad_files(void)
{
    char path[128];
    path_in_dir(path, sizeof path, "bad.safetensors");
    const float data[11] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    snn_tensor *a = snn_tensor_new(SNN_SHAPE(2, 3), SNN_CPU);
    snn_tensor *b = snn_tensor_new(SNN_SHAPE(4), SNN_CPU);
    snn_named_param items[2] = {named("a", a), named("b", b)};
    snn_param_list list = {items, 2};

    /* the control: the good file loads */
    write_raw(path, GOOD, data, 40, -1);
    CHECK_OK(snn_safetensors_load(path, &list, false, NULL, NULL));
    CHECK(a->data[5] == 5.0f && b->data[3] == 9.0f);

    for (size_t i = 0; i < sizeof bad_cases / sizeof bad_cases[0]; i++) {
        const bad_case *c = &bad_cases[i];
        write_raw(path, c->header, data, c->data_len, c->header_len);
        fill(a, 777.0f);
        fill(b, 777.0f);
        char *meta = NULL;
        size_t meta_len = 0;
        snn_status s = snn_safetensors_load(path, &list, false, &meta, &meta_len);
        const char *msg = snn_last_error();
        bool ok = s == c->status && strstr(msg, path) && strstr(msg, c->needle) &&
                  all_equal(a, 777.0f) && all_equal(b, 777.0f) && meta == NULL;
        CHECK(ok);
        if (!ok) fprintf(stderr, "  case '%s': status %d, message: %s\n", c->what, (int)s, msg);
    }

    /* truncated files: empty, a partial length prefix, a good file cut short */
    FILE *f = fopen(path, "wb");
    fclose(f);
    CHECK(snn_safetensors_load(path, &list, false, NULL, NULL) == SNN_ERR_FORMAT);
    CHECK(strstr(snn_last_error(), "truncated") && strstr(snn_last_error(), path));
    write_raw(path, GOOD, data, 40, -1);
    size_t len;
    char *bytes = read_file(path, &len);
    const size_t cuts[] = {5, 8, 30, len - 40, len - 1};
    for (size_t k = 0; k < sizeof cuts / sizeof cuts[0]; k++) {
        f = fopen(path, "wb");
        fwrite(bytes, 1, cuts[k], f);
        fclose(f);
        fill(a, 777.0f);
        CHECK(snn_safetensors_load(path, &list, false, NULL, NULL) == SNN_ERR_FORMAT);
        CHECK(strstr(snn_last_error(), path) != NULL);
        CHECK(all_equal(a, 777.0f) && all_equal(b, 777.0f));
    }
    free_file(bytes, len);

    /* not there, or not a file */
    char missing[160];
    path_in_dir(missing, sizeof missing, "no-such.safetensors");
    CHECK(snn_safetensors_load(missing, &list, false, NULL, NULL) == SNN_ERR_IO);
    CHECK(strstr(snn_last_error(), missing) && strstr(snn_last_error(), strerror(ENOENT)));
    CHECK(snn_safetensors_load(dir, &list, false, NULL, NULL) != SNN_OK);
    CHECK(strstr(snn_last_error(), dir) != NULL);
    CHECK(all_equal(a, 777.0f) && all_equal(b, 777.0f));

    /* a header of a million values: refused by the node limit, not by running out of memory */
    size_t big_len = 2400000;
    char *big = snn_alloc(big_len + 1, SNN_CPU);
    memcpy(big, "{\"a\":[", 6);
    size_t at = 6;
    while (at + 4 < big_len) {
        memcpy(big + at, "0,", 2);
        at += 2;
    }
    memcpy(big + at, "0]}", 4);
    write_raw(path, big, data, 0, -1);
    snn_free(big, big_len + 1, SNN_CPU);
    CHECK(snn_safetensors_load(path, &list, false, NULL, NULL) == SNN_ERR_FORMAT);
    CHECK(strstr(snn_last_error(), "too many values") && strstr(snn_last_error(), path));
    CHECK(all_equal(a, 777.0f) && all_equal(b, 777.0f));

    /* bad arguments */
    CHECK(snn_safetensors_load(NULL, &list, false, NULL, NULL) == SNN_ERR_ARGUMENT);
    CHECK(snn_safetensors_load(path, NULL, false, NULL, NULL) == SNN_ERR_ARGUMENT);
    snn_named_param twice[2] = {named("a", a), named("a", b)};
    snn_param_list twice_list = {twice, 2};
    CHECK(snn_safetensors_load(path, &twice_list, false, NULL, NULL) == SNN_ERR_ARGUMENT);
    CHECK(strstr(snn_last_error(), "appears twice") != NULL);

    snn_tensor_free(a);
    snn_tensor_free(b);
    unlink(path);
}

/* Every allocation made while loading can fail: an error, nothing changed, nothing leaked. */
static void test_load_out_of_memory(void)
{
    char path[128];
    path_in_dir(path, sizeof path, "oom.safetensors");
    snn_tensor *a = tensor_filled(SNN_SHAPE(2, 3), 1.0f);
    snn_tensor *b = tensor_filled(SNN_SHAPE(4), 10.0f);
    snn_named_param items[2] = {named("a", a), named("b", b)};
    snn_param_list list = {items, 2};
    CHECK_OK(snn_safetensors_save(path, &list, "{\"k\":\"v\"}"));
    int failures = 0;
    for (uint64_t n = 1; n < 50; n++) {
        fill(a, 777.0f);
        fill(b, 777.0f);
        char *meta = NULL;
        size_t meta_len = 0;
        snn_alloc_fail_after(n);
        snn_status s = snn_safetensors_load(path, &list, false, &meta, &meta_len);
        snn_alloc_fail_after(0);
        if (s == SNN_OK) {
            CHECK(a->data[0] == 1.0f && b->data[3] == 13.0f && meta != NULL);
            snn_free(meta, meta_len + 1, SNN_CPU);
            break;
        }
        failures++;
        CHECK(s == SNN_ERR_MEMORY && meta == NULL);
        CHECK(all_equal(a, 777.0f) && all_equal(b, 777.0f));
    }
    CHECK(failures >= 4);
    snn_tensor_free(a);
    snn_tensor_free(b);
    unlink(path);
}

/* ---- failed saves -------------------------------------------------------------------------- */

static void tmp_path_of(char *out, size_t size, const char *path, long pid)
{
    snprintf(out, size, "%s.tmp.%ld", path, pid);
}

static void test_failed_saves(void)
{
    char path[128], tmp[160];
    path_in_dir(path, sizeof path, "keep.safetensors");
    tmp_path_of(tmp, sizeof tmp, path, (long)getpid());
    snn_tensor *t = tensor_filled(SNN_SHAPE(128, 128), 0.0f); /* 64 KB */
    snn_named_param items[1] = {named("t", t)};
    snn_param_list list = {items, 1};
    CHECK_OK(snn_safetensors_save(path, &list, "{\"v\":\"old\"}"));
    size_t old_len;
    char *old = read_file(path, &old_len);
    fill(t, 5.0f);

    /* out of memory at each allocation in turn */
    int failures = 0;
    for (uint64_t n = 1; n < 50; n++) {
        snn_alloc_fail_after(n);
        snn_status s = snn_safetensors_save(path, &list, "{\"v\":\"new\"}");
        snn_alloc_fail_after(0);
        if (s == SNN_OK) break;
        failures++;
        CHECK(s == SNN_ERR_MEMORY);
        CHECK(same_file(path, old, old_len));
        CHECK(!file_exists(tmp));
    }
    CHECK(failures >= 3);
    CHECK(!same_file(path, old, old_len));
    CHECK(!file_exists(tmp));
    CHECK_OK(snn_safetensors_save(path, &list, NULL)); /* back to a known "old" */
    free_file(old, old_len);
    old = read_file(path, &old_len);
    fill(t, 6.0f);

    /* the temp path cannot be created (a directory sits there: this fails even for root) */
    CHECK(mkdir(tmp, 0700) == 0);
    CHECK(snn_safetensors_save(path, &list, NULL) == SNN_ERR_IO);
    CHECK(strstr(snn_last_error(), path) && strstr(snn_last_error(), strerror(EISDIR)));
    CHECK(same_file(path, old, old_len));
    rmdir(tmp);

    /* the disk "fills up" half-way through the data: the file-size limit makes write() fail
     * with EFBIG after 16 KB of the 64 KB */
    struct rlimit saved, small;
    getrlimit(RLIMIT_FSIZE, &saved);
    small = saved;
    small.rlim_cur = 16384;
    void (*old_handler)(int) = signal(SIGXFSZ, SIG_IGN);
    CHECK(setrlimit(RLIMIT_FSIZE, &small) == 0);
    snn_status s = snn_safetensors_save(path, &list, NULL);
    setrlimit(RLIMIT_FSIZE, &saved);
    signal(SIGXFSZ, old_handler);
    CHECK(s == SNN_ERR_IO);
    CHECK(strstr(snn_last_error(), path) && strstr(snn_last_error(), strerror(EFBIG)));
    CHECK(strstr(snn_last_error(), "unchanged") != NULL);
    CHECK(same_file(path, old, old_len));
    CHECK(!file_exists(tmp));

    /* a directory that does not exist */
    char nowhere[160];
    path_in_dir(nowhere, sizeof nowhere, "no/such/dir/x.safetensors");
    CHECK(snn_safetensors_save(nowhere, &list, NULL) == SNN_ERR_IO);
    CHECK(strstr(snn_last_error(), nowhere) && strstr(snn_last_error(), strerror(ENOENT)));

    /* a read-only directory (only meaningful when not root: root writes anyway) */
    if (geteuid() != 0) {
        char ro[128], ro_file[160];
        path_in_dir(ro, sizeof ro, "readonly");
        snprintf(ro_file, sizeof ro_file, "%s/x.safetensors", ro);
        mkdir(ro, 0700);
        CHECK_OK(snn_safetensors_save(ro_file, &list, NULL));
        chmod(ro, 0500);
        fill(t, 7.0f);
        CHECK(snn_safetensors_save(ro_file, &list, NULL) == SNN_ERR_IO);
        chmod(ro, 0700);
        fill(t, 0.0f);
        snn_param_list check = list;
        CHECK_OK(snn_safetensors_load(ro_file, &check, false, NULL, NULL));
        CHECK(all_equal(t, 6.0f));
        unlink(ro_file);
        rmdir(ro);
    }

    /* bad arguments write nothing */
    CHECK(snn_safetensors_save(NULL, &list, NULL) == SNN_ERR_ARGUMENT);
    CHECK(snn_safetensors_save("", &list, NULL) == SNN_ERR_ARGUMENT);
    CHECK(snn_safetensors_save(path, NULL, NULL) == SNN_ERR_ARGUMENT);
    snn_named_param twice[2] = {named("t", t), named("t", t)};
    snn_param_list twice_list = {twice, 2};
    CHECK(snn_safetensors_save(path, &twice_list, NULL) == SNN_ERR_ARGUMENT);
    CHECK(strstr(snn_last_error(), "'t' appears twice") != NULL);
    snn_named_param reserved[1] = {named("__metadata__", t)};
    snn_param_list reserved_list = {reserved, 1};
    CHECK(snn_safetensors_save(path, &reserved_list, NULL) == SNN_ERR_ARGUMENT);
    snn_named_param null_tensor[1] = {named("x", NULL)};
    snn_param_list null_list = {null_tensor, 1};
    CHECK(snn_safetensors_save(path, &null_list, NULL) == SNN_ERR_ARGUMENT);
    CHECK(snn_safetensors_save(path, &list, "[\"not an object\"]") == SNN_ERR_ARGUMENT);
    CHECK(snn_safetensors_save(path, &list, "{\"epoch\": 3}") == SNN_ERR_ARGUMENT);
    CHECK(strstr(snn_last_error(), "\"epoch\"") != NULL);
    CHECK(snn_safetensors_save(path, &list, "{\"a\":\"1\",}") == SNN_ERR_ARGUMENT);
    CHECK(strstr(snn_last_error(), "metadata_json") != NULL);
    CHECK(same_file(path, old, old_len));
    CHECK(!file_exists(tmp));

    free_file(old, old_len);
    snn_tensor_free(t);
    unlink(path);
}

/* ---- SIGKILL during saves ------------------------------------------------------------------ */

#define KILL_ROUNDS 24
#define KILL_FLOATS (2 * 1024 * 1024) /* 8 MB per checkpoint */

/* The child: saves checkpoints whose every float, and whose metadata, hold the same number,
 * first + 0, first + 1, ... until it is killed. */
static void saving_child(const char *path, const snn_param_list *list, float first)
{
    /* the tensors are the parent's (copied by fork): the child allocates and threads nothing,
     * since an OpenMP runtime is not safe to use in a forked child */
    for (float v = first;; v += 1.0f) {
        fill(list->items[0].tensor, v);
        fill(list->items[1].tensor, v);
        char meta[64];
        snprintf(meta, sizeof meta, "{\"value\":\"%.0f\"}", (double)v);
        if (snn_safetensors_save(path, list, meta) != SNN_OK) _exit(3);
    }
}

static void test_kill_during_save(void)
{
    char path[128];
    path_in_dir(path, sizeof path, "killed.safetensors");
    snn_tensor *t = snn_tensor_new(SNN_SHAPE(KILL_FLOATS), SNN_CPU);
    snn_tensor *u = snn_tensor_new(SNN_SHAPE(1000), SNN_CPU);
    snn_named_param items[2] = {named("big", t), named("small", u)};
    snn_param_list list = {items, 2};
    CHECK_OK(snn_safetensors_save(path, &list, "{\"value\":\"0\"}"));

    snn_rng rng;
    uint64_t seed = (uint64_t)time(NULL) ^ (uint64_t)getpid();
    snn_rng_seed(&rng, seed);
    float last = 0.0f;
    int changed = 0, interrupted = 0;
    for (int round = 0; round < KILL_ROUNDS; round++) {
        float first = (float)(round + 1) * 10000.0f;
        fflush(stderr);
        pid_t child = fork();
        CHECK(child >= 0);
        if (child < 0) break;
        if (child == 0) saving_child(path, &list, first);
        /* kill it 1..120 ms in: before, during or after some save */
        long ms = 1 + (long)snn_rng_below(&rng, 120);
        struct timespec nap = {ms / 1000, (ms % 1000) * 1000000L};
        nanosleep(&nap, NULL);
        kill(child, SIGKILL);
        int status = 0;
        waitpid(child, &status, 0);
        CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL); /* it never failed a save */

        /* the file must be one complete checkpoint: every float equal to its metadata value */
        fill(t, -1.0f);
        char *meta = NULL;
        size_t meta_len = 0;
        snn_status s = snn_safetensors_load(path, &list, false, &meta, &meta_len);
        CHECK(s == SNN_OK);
        if (s != SNN_OK) {
            fprintf(stderr, "  round %d (seed %llu): %s\n", round, (unsigned long long)seed,
                    snn_last_error());
            break;
        }
        float v = t->data[0];
        char want[64];
        snprintf(want, sizeof want, "{\"value\":\"%.0f\"}", (double)v);
        CHECK(all_equal(t, v) && all_equal(u, v));
        CHECK(meta && strcmp(meta, want) == 0);
        snn_free(meta, meta_len + 1, SNN_CPU);
        /* either the previous round's file survived or this child's save completed */
        CHECK(v == last || (v >= first && v < first + 10000.0f));
        changed += v != last;
        last = v;
        /* the killed child may leave its temp file: stale, never read; the caller cleans up */
        char tmp[160];
        tmp_path_of(tmp, sizeof tmp, path, (long)child);
        interrupted += file_exists(tmp);
        unlink(tmp);
    }
    /* "interrupted": the child died with its temp file written part-way (the case that matters) */
    fprintf(stderr, "       %d rounds: killed mid-save in %d, checkpoint replaced in %d (seed %llu)\n",
            KILL_ROUNDS, interrupted, changed, (unsigned long long)seed);
    CHECK(interrupted > 0);
    snn_tensor_free(t);
    snn_tensor_free(u);
    unlink(path);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/snn_test_checkpoint_XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return EXIT_FAILURE;
    }
    RUN(test_round_trip);
    RUN(test_bad_files);
    RUN(test_load_out_of_memory);
    RUN(test_failed_saves);
    RUN(test_kill_during_save);
    rmdir(dir);
    return test_finish();
}
