/*
 * safetensors.h - what nn/checkpoint_save.c and nn/checkpoint_load.c share (internal).
 *
 * The format (https://github.com/huggingface/safetensors), so that PyTorch users can open a
 * snn.c checkpoint with safetensors.torch.load_file():
 *
 *     bytes [0, 8)        N, the header length, unsigned 64-bit little-endian
 *     bytes [8, 8 + N)    a JSON object, padded with spaces so that 8 + N is a multiple of 8:
 *                           {"__metadata__": {"key": "value", ...},           (optional)
 *                            "conv1.weight": {"dtype": "F32", "shape": [32, 1, 3, 3],
 *                                             "data_offsets": [0, 1152]}, ...}
 *     bytes [8 + N, end)  the data section: each tensor's floats, little-endian, row-major, at
 *                         [begin, end) relative to the section's start
 *
 * Offsets must tile the data section exactly: sorted by begin, the first starts at 0, each
 * starts where the previous one ends, the last ends at the end of the file, and every
 * end - begin = numel * 4. snn.c writes and reads F32 only.
 */
#ifndef SNN_SAFETENSORS_H
#define SNN_SAFETENSORS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nn.h"

/* The upstream safetensors reader refuses headers above 100 MB; so do we. */
#define SNN_SAFETENSORS_MAX_HEADER 100000000ull

bool snn_st_host_is_little_endian(void);
/* Reverses the bytes of `count` 4-byte words in place (big-endian hosts). */
void snn_st_swap_bytes_4(void *data, size_t count);
/* Writes all n bytes, retrying partial writes and EINTR; -1 with errno set on failure. */
int snn_st_write_all(int fd, const void *data, size_t n);
/* Reads exactly n bytes at `offset`; -1 on failure (errno 0 for an unexpected end of file). */
int snn_st_read_all_at(int fd, void *data, size_t n, uint64_t offset);
/* strerror(errno), or "unexpected end of file" when errno is 0. */
const char *snn_st_io_reason(void);
/* The list must hold non-NULL tensors with distinct, non-empty names (no "__metadata__"). */
snn_status snn_st_check_list(const char *fn, const snn_param_list *tensors);

#endif /* SNN_SAFETENSORS_H */
