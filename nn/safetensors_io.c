/*
 * safetensors_io.c - the small pieces both checkpoint_save.c and checkpoint_load.c use: byte
 * order, complete reads and writes, and the check of a list of named tensors. See
 * safetensors.h for the file format.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "json.h"
#include "safetensors.h"
#include "nn.h"
#include "tensor/error.h"


bool snn_st_host_is_little_endian(void)
{
    const uint32_t one = 1;
    unsigned char first;
    memcpy(&first, &one, 1);
    return first == 1;
}

void snn_st_swap_bytes_4(void *data, size_t count)
{
    unsigned char *b = data;
    for (size_t i = 0; i < count; i++, b += 4) {
        unsigned char t0 = b[0], t1 = b[1];
        b[0] = b[3];
        b[1] = b[2];
        b[2] = t1;
        b[3] = t0;
    }
}

int snn_st_write_all(int fd, const void *data, size_t n)
{
    const char *p = data;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

int snn_st_read_all_at(int fd, void *data, size_t n, uint64_t offset)
{
    char *p = data;
    while (n > 0) {
        ssize_t r = pread(fd, p, n, (off_t)offset);
        if (r < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        if (r == 0) {
            errno = 0;
            return -1;
        }
        p += r;
        n -= (size_t)r;
        offset += (uint64_t)r;
    }
    return 0;
}

const char *snn_st_io_reason(void) { return errno ? strerror(errno) : "unexpected end of file"; }

/* ---- argument checks shared by save and load ---------------------------------------------- */

static int compare_name_ptrs(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

snn_status snn_st_check_list(const char *fn, const snn_param_list *tensors)
{
    if (!tensors)
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad argument 'tensors' (got NULL)", fn);
    if (tensors->count < 0 || (tensors->count > 0 && !tensors->items))
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad argument 'tensors' (expected count >= 0 and "
                         "items for each, got count %d, items %p)", fn, tensors->count,
                         (void *)tensors->items);
    for (int i = 0; i < tensors->count; i++) {
        const snn_named_param *p = &tensors->items[i];
        if (p->name[0] == '\0' || strcmp(p->name, "__metadata__") == 0)
            return snn_error(SNN_ERR_ARGUMENT, "%s: bad argument 'tensors' (item %d has the name "
                             "'%s', which cannot name a tensor)", fn, i, p->name);
        if (!p->tensor)
            return snn_error(SNN_ERR_ARGUMENT, "%s: bad argument 'tensors' (tensor '%s' is NULL)",
                             fn, p->name);
    }
    if (tensors->count < 2) return SNN_OK;
    size_t bytes = (size_t)tensors->count * sizeof(const char *);
    const char **names = snn_alloc(bytes, SNN_CPU);
    if (!names) return snn_error(SNN_ERR_MEMORY, "%s: out of host memory", fn);
    for (int i = 0; i < tensors->count; i++) names[i] = tensors->items[i].name;
    qsort(names, (size_t)tensors->count, sizeof *names, compare_name_ptrs);
    snn_status status = SNN_OK;
    for (int i = 1; i < tensors->count; i++) {
        if (strcmp(names[i - 1], names[i]) == 0) {
            status = snn_error(SNN_ERR_ARGUMENT, "%s: bad argument 'tensors' (the name '%s' "
                               "appears twice)", fn, names[i]);
            break;
        }
    }
    snn_free(names, bytes, SNN_CPU);
    return status;
}
