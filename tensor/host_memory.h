/*
 * host_memory.h - the memory entries of the CPU kernel tables (host_memory.c, memory_info.c),
 * shared by the reference and the fast table (internal).
 */
#ifndef SNN_HOST_MEMORY_H
#define SNN_HOST_MEMORY_H

#include <stddef.h>

#include "kernels/kernels.h"

void *snn_host_alloc(size_t bytes);
void snn_host_free(void *p);
void snn_host_copy(void *dst, const void *src, size_t bytes, snn_copy_kind kind);
void snn_host_synchronize(void);
/* what the host can still give: MemAvailable, capped by a cgroup limit (memory_info.c) */
int snn_memory_info_cpu(size_t *available, size_t *total);

#endif /* SNN_HOST_MEMORY_H */
