/**
 * @file
 * checkpoint.h - checkpoints: safetensors files (which PyTorch opens with
 * safetensors.torch.load_file), their string metadata, and whole-model checkpoints that hold
 * the configuration, the parameters, the optimizer's state and the program's own keys.
 * Included by nn/nn.h.
 *
 *     snn_checkpoint_save("run/last.safetensors", net, opt, &metadata);     // atomic
 *     snn_module *again = snn_checkpoint_load_model("run/last.safetensors", SNN_CPU, NULL);
 */
#ifndef SNN_NN_CHECKPOINT_H
#define SNN_NN_CHECKPOINT_H

#include <stddef.h>

#include "models.h"
#include "optim.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------------
 * Checkpoints (nn/checkpoint_save.c, nn/checkpoint_load.c): safetensors files, written
 * atomically, validated on load.
 * ------------------------------------------------------------------------------------------- */

/** Writes `tensors` (any device; the caller keeps them) and string metadata to `path` via a
 * temp file, fsync and rename, so `path` holds the old file or the new one, never a part.
 * metadata_json is a JSON object of string values, or NULL. SNN_ERR_ARGUMENT (a NULL or empty
 * path, a bad list: NULL tensors, empty or duplicate names), SNN_ERR_IO naming the file,
 * SNN_ERR_MEMORY; on error the old file is intact and no temp file is left. */
snn_status snn_safetensors_save(const char *path, const snn_param_list *tensors,
                                const char *metadata_json);
/** A batch-norm layer's count of training batches (its buffer "num_batches_tracked") where the
 * file predates the count: 2^24, a layer trained as long as a float32 count can tell, whose
 * running statistics move by its momentum (nn/layer_norm.c). */
#define SNN_BN_LONG_TRAINED 16777216.0f

/** Loads the file at `path` into the existing `tensors` (any device) by name: each must be in
 * the file with the same shape, as F32, except a batch-norm count ("num_batches_tracked", or a
 * name ending ".num_batches_tracked"), which checkpoints written before batch-norm counted its
 * batches lack: it is then set to SNN_BN_LONG_TRAINED. Tensors in the file but not in the list
 * are an error unless allow_extra. When metadata_json is not NULL it receives the __metadata__
 * object as NUL-terminated JSON text allocated with snn_alloc (free with snn_free(p,
 * *metadata_len + 1)), or NULL when the file has none; metadata_len may be NULL. The whole
 * file is validated first (header length, JSON, dtypes, shapes, offsets that tile the data
 * section): on any error no tensor is changed. SNN_ERR_ARGUMENT (bad path or list),
 * SNN_ERR_IO (cannot open or read), SNN_ERR_FORMAT (anything wrong in the file; the message
 * names the file and the tensor), SNN_ERR_MEMORY. */
snn_status snn_safetensors_load(const char *path, const snn_param_list *tensors, bool allow_extra,
                                char **metadata_json, size_t *metadata_len);

/* ---------------------------------------------------------------------------------------------
 * Checkpoint metadata and whole-model checkpoints (nn/metadata.c, nn/model_io.c)
 *
 * A model checkpoint is one safetensors file holding every parameter and buffer under its
 * dotted name, the optimizer's state ("exp_avg.<name>", ...), and string metadata: the model's
 * configuration ("snn.model.*") and whatever the training program adds (epoch, RNG state...).
 * ------------------------------------------------------------------------------------------- */

/** The most keys an snn_metadata holds. */
#define SNN_METADATA_MAX 48

/** A flat string -> string map, what a checkpoint's __metadata__ holds. Zero it to start. */
typedef struct snn_metadata {
    int count;                            /**< keys in use */
    char keys[SNN_METADATA_MAX][48];      /**< NUL-terminated, at most 47 bytes */
    char values[SNN_METADATA_MAX][256];   /**< NUL-terminated, at most 255 bytes */
} snn_metadata;

/** Sets (or replaces) `key` in `m` to the printf-formatted value `fmt`, .... SNN_ERR_ARGUMENT
 * when m is full or the key or value is too long (m is then unchanged). */
snn_status snn_metadata_set(snn_metadata *m, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/** The value of `key` in `m` (m's storage), or NULL. */
const char *snn_metadata_get(const snn_metadata *m, const char *key);
/** `m` as NUL-terminated JSON object text, allocated with snn_alloc; *len receives the size to
 * free it with: snn_free(p, *len + 1) (the text itself may be shorter). NULL with
 * SNN_ERR_MEMORY. */
char *snn_metadata_to_json(const snn_metadata *m, size_t *len);
/** Parses `len` bytes of `json`, a flat JSON object of strings (what the safetensors
 * __metadata__ holds), into *out. SNN_ERR_FORMAT for anything else (other value types, keys or
 * values too long, more than SNN_METADATA_MAX keys). */
snn_status snn_metadata_from_json(const char *json, size_t len, snn_metadata *out);

/** Adds the model configuration `c` to `m` as "snn.model.*" and "snn.neuron.*" keys.
 * SNN_ERR_ARGUMENT when m has no room. */
snn_status snn_model_config_to_metadata(const snn_model_config *c, snn_metadata *m);
/** Reads a model configuration back from `m` into *c. SNN_ERR_FORMAT naming the first missing
 * or unreadable key. The values are not range-checked here: snn_model_new checks them. */
snn_status snn_model_config_from_metadata(const snn_metadata *m, snn_model_config *c);

/** Writes the parameters and buffers of `model`, the state of `opt` (may be NULL) and
 * `metadata` (may be NULL; the model's configuration and the optimizer's step count are added)
 * to `path`, atomically, as snn_safetensors_save (same errors). */
snn_status snn_checkpoint_save(const char *path, snn_module *model, snn_optimizer *opt,
                               const snn_metadata *metadata);
/** Reads only the metadata of the checkpoint at `path` into *out (to rebuild the model before
 * loading it). Errors as snn_safetensors_load, or SNN_ERR_FORMAT for bad metadata. */
snn_status snn_checkpoint_read_metadata(const char *path, snn_metadata *out);
/** Loads parameters and buffers into `model`, and the optimizer state and step count when opt
 * is not NULL (then the file must hold them; without opt, extra tensors are ignored).
 * Validates everything first: on error nothing is changed. Errors as snn_safetensors_load. */
snn_status snn_checkpoint_load(const char *path, snn_module *model, snn_optimizer *opt);
/** As snn_checkpoint_save, plus the named tensors of `extra` (may be NULL or empty; e.g.
 * snn_ema_state's) after the optimizer's. Their names must differ from the model's and the
 * optimizer's (SNN_ERR_ARGUMENT). */
snn_status snn_checkpoint_save_extra(const char *path, snn_module *model, snn_optimizer *opt,
                                     const snn_param_list *extra, const snn_metadata *metadata);
/** As snn_checkpoint_load, plus the tensors of `extra` (may be NULL), loaded by name. With opt
 * the file must hold exactly the model's, the optimizer's and extra's tensors; without it other
 * tensors are ignored. On error nothing is changed. */
snn_status snn_checkpoint_load_extra(const char *path, snn_module *model, snn_optimizer *opt,
                                     const snn_param_list *extra);
/** Loads into `model` the tensors the checkpoint at `path` holds under `prefix` + their name
 * (SNN_EMA_PREFIX: the averaged weights snn-train --ema saves), ignoring every other tensor.
 * Errors as snn_checkpoint_load (SNN_ERR_FORMAT naming the first missing tensor). */
snn_status snn_checkpoint_load_prefixed(const char *path, snn_module *model, const char *prefix);
/** Builds the model the checkpoint at `path` describes (its "snn.model.*" metadata) on `device`
 * and loads its parameters; fills *metadata (may be NULL) with the file's metadata. The caller
 * owns the model. NULL on error (as snn_safetensors_load; SNN_ERR_FORMAT for a file that is not
 * a model checkpoint). */
snn_module *snn_checkpoint_load_model(const char *path, snn_device device, snn_metadata *metadata);

#ifdef __cplusplus
}
#endif

#endif /* SNN_NN_CHECKPOINT_H */
