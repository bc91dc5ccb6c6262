#define _GNU_SOURCE /* memfd_create */
/*
 * fuzz_safetensors.c - libFuzzer target for the checkpoint reader, the parser most exposed to
 * files from other people: nn/json.c (the strict JSON reader of the header), nn/checkpoint_load.c
 * (snn_safetensors_load), nn/metadata.c and nn/model_io.c (snn_checkpoint_read_metadata,
 * snn_checkpoint_load, snn_checkpoint_load_model).
 *
 * The input is a whole file. Each run
 *   1. parses the input as JSON text and walks the document it gives;
 *   2. puts the input in an in-memory file (memfd) and reads it as a checkpoint: its metadata;
 *      its tensors into a fixed list (names and shapes of the seeds, extra tensors allowed);
 *      and the model its metadata describe, with its Adam state when the file holds one (the
 *      library refuses a model larger than the file before building it, so any input is safe).
 * Properties checked on top of "no crash, no sanitizer report": a failed call leaves a message;
 * a failed load leaves the destination tensors untouched; a parsed JSON document is linked
 * consistently; nothing is still allocated afterwards (snn_live_bytes).
 *
 *     .ci/fuzz.sh            (builds with clang, writes seed checkpoints, runs every target)
 * Seeds: fuzz/make_seeds.c writes real checkpoints; tests/ref/tiny_resnet.safetensors too.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "nn/json.h"
#include "snn.h"
#include "tensor/error.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A failed call must say why. */
static void check_failure_has_message(snn_status status)
{
    if (status != SNN_OK) SNN_ASSERT(snn_last_error()[0] != '\0');
    snn_clear_error();
}

/* 1. the JSON reader alone: every node's links stay inside the document, and the decoded
 *    strings are NUL-terminated at their stated length (\u0000 is refused, so no NUL inside). */
static void fuzz_json(const uint8_t *data, size_t size)
{
    snn_json_doc doc;
    snn_status status = snn_json_parse(&doc, (const char *)data, size, "fuzz");
    check_failure_has_message(status);
    if (status != SNN_OK) {
        SNN_ASSERT(doc.nodes == NULL && doc.strings == NULL && doc.count == 0);
        return;
    }
    SNN_ASSERT(doc.count >= 1 && snn_json_root(&doc) == &doc.nodes[0]);
    for (int i = 0; i < doc.count; i++) {
        const snn_json_node *n = &doc.nodes[i];
        SNN_ASSERT(n->first_child < doc.count && n->next_sibling < doc.count);
        SNN_ASSERT(n->begin <= n->end && n->end <= size);
        if (n->key) SNN_ASSERT(strlen(n->key) == n->key_len);
        if (n->type == SNN_JSON_STRING) SNN_ASSERT(strlen(n->string) == n->string_len);
        if (n->type == SNN_JSON_OBJECT || n->type == SNN_JSON_ARRAY) {
            int count = 0;
            for (const snn_json_node *c = snn_json_first(&doc, n); c; c = snn_json_next(&doc, c)) {
                SNN_ASSERT(c > n && (n->type == SNN_JSON_ARRAY) == (c->key == NULL));
                count++;
            }
            SNN_ASSERT(count == n->count);
        }
    }
    snn_json_free(&doc);
}

/* 2a. tensors by name into a fixed list; on failure every destination keeps its values. */
static void fuzz_tensor_list(const char *path)
{
    static const struct {
        const char *name;
        snn_shape shape;
    } wanted[] = {
        {"conv1.weight", SNN_SHAPE(4, 3, 3, 3)},   /* tests/ref/tiny_resnet.safetensors */
        {"fc.bias", SNN_SHAPE(10)},
        {"bn1.running_var", SNN_SHAPE(4)},
    };
    enum { N = sizeof wanted / sizeof wanted[0] };
    const float sentinel = 1234.5f;
    snn_named_param items[N];
    memset(items, 0, sizeof items);
    for (int i = 0; i < N; i++) {
        snprintf(items[i].name, sizeof items[i].name, "%s", wanted[i].name);
        items[i].tensor = snn_tensor_new(wanted[i].shape, SNN_CPU);
        SNN_ASSERT(items[i].tensor);
        snn_tensor_fill(items[i].tensor, sentinel);
    }
    snn_param_list list = {items, N};
    char *metadata = NULL;
    size_t metadata_len = 0;
    snn_status status = snn_safetensors_load(path, &list, true, &metadata, &metadata_len);
    check_failure_has_message(status);
    if (status != SNN_OK) {
        SNN_ASSERT(metadata == NULL);
        for (int i = 0; i < N; i++)
            for (int64_t j = 0; j < items[i].tensor->numel; j++)
                SNN_ASSERT(items[i].tensor->data[j] == sentinel);
    } else if (metadata) {
        SNN_ASSERT(strlen(metadata) == metadata_len);
        snn_free(metadata, metadata_len + 1, SNN_CPU);
    }
    for (int i = 0; i < N; i++) snn_tensor_free(items[i].tensor);
}

/* 2b. the checkpoint as a model: its metadata, the configuration they describe (checked, and
 *     compared with the file's size before anything is built), the model, its state; then the
 *     optimizer's state into that model when the file says it holds one. */
static void fuzz_model(const char *path)
{
    snn_metadata meta;
    snn_module *model = snn_checkpoint_load_model(path, SNN_CPU, &meta);
    check_failure_has_message(model ? SNN_OK : SNN_ERR_FORMAT);
    if (!model) return;
    if (snn_metadata_get(&meta, "snn.optimizer.steps")) {
        snn_optimizer *opt = snn_adam_new(model, 1e-3f, 0.0f, false);
        SNN_ASSERT(opt);
        check_failure_has_message(snn_checkpoint_load(path, model, opt));
        snn_optimizer_free(opt);
    }
    snn_module_free(model);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int fd = -1;
    static char path[64];
    if (fd < 0) {
        fd = memfd_create("fuzz_safetensors", MFD_CLOEXEC);
        SNN_ASSERT(fd >= 0);
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    }
    fuzz_json(data, size);

    SNN_ASSERT(ftruncate(fd, 0) == 0);
    SNN_ASSERT(size == 0 || pwrite(fd, data, size, 0) == (ssize_t)size);
    fuzz_tensor_list(path);
    fuzz_model(path);
    SNN_ASSERT(snn_live_bytes(SNN_CPU) == 0);
    return 0;
}
