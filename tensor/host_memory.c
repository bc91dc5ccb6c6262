/*
 * host_memory.c - host memory as the kernel tables see it: 64-byte aligned blocks (a cache
 * line, and the widest vector load), copies by memcpy, nothing to wait for. The reference and
 * the fast CPU tables share these functions, so a tensor made under one kernel set can be read,
 * written and freed under the other.
 */
#include <stdlib.h>
#include <string.h>

#include "host_memory.h"

void *snn_host_alloc(size_t bytes) { return aligned_alloc(64, (bytes + 63) / 64 * 64); }

void snn_host_free(void *p) { free(p); }

void snn_host_copy(void *dst, const void *src, size_t bytes, snn_copy_kind kind)
{
    (void)kind; /* on the host every copy is host to host */
    memcpy(dst, src, bytes);
}

void snn_host_synchronize(void) {}
