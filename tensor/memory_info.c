/*
 * memory_info.c - how many bytes a device can still give: snn_device_memory, and the CPU entry
 * of the kernel table behind it (the CUDA one is cudaMemGetInfo, in backend_cuda.cu).
 *
 * Programs ask before they allocate a model and its training step (nn/model_memory.c estimates
 * those bytes), so that a size that cannot fit is refused with a message instead of ending in
 * the kernel's OOM killer. On Linux with overcommit, malloc of more than the machine has often
 * succeeds; the process is killed later, when it first touches the pages. So asking malloc
 * is no test, and the answer has to come from the kernel's own accounting:
 *
 *   - /proc/meminfo MemAvailable: the kernel's estimate of what can be allocated without
 *     swapping (free memory plus the page cache and slab it can reclaim). Swap is not counted:
 *     a training step that runs from swap is too slow to be what anybody asked for.
 *   - the memory cgroup of the process (containers, batch schedulers, systemd slices): a job
 *     limited to 16 GiB on a 512 GiB node is killed at 16 GiB, whatever MemAvailable says. For
 *     cgroup v2 every level from the process's cgroup up to the root with a memory.max is
 *     checked, the headroom being memory.max - (memory.current - inactive_file), since pages of
 *     inactive file cache are reclaimed before the limit kills anything. For cgroup v1 the one
 *     memory controller's memory.limit_in_bytes - memory.usage_in_bytes (less total_inactive_file).
 *
 * The smallest of these is what is available.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "kernels_cpu.h"

/* The number after `key` in a "key value" or "key: value kB" text file (meminfo, memory.stat),
 * times `unit`; 0 when the file or the key is missing. */
static int read_keyed(const char *path, const char *key, size_t unit, size_t *out)
{
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char line[256];
    size_t key_len = strlen(key);
    int found = 0;
    while (!found && fgets(line, sizeof line, f)) {
        if (strncmp(line, key, key_len) != 0 || (line[key_len] != ':' && line[key_len] != ' '))
            continue;
        char *end = NULL;
        unsigned long long v = strtoull(line + key_len + 1, &end, 10);
        if (end != line + key_len + 1) {
            *out = (size_t)v * unit;
            found = 1;
        }
    }
    fclose(f);
    return found;
}

/* The single number in a file such as memory.max ("max" or missing: 0). */
static int read_number(const char *path, size_t *out)
{
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    unsigned long long v = 0;
    int ok = fscanf(f, "%llu", &v) == 1;
    fclose(f);
    if (ok) *out = (size_t)v;
    return ok;
}

/* Headroom under a cgroup limit in `dir` (v2 file names when v2, else v1); 0 when no limit. */
static int cgroup_headroom(const char *dir, int v2, size_t *out)
{
    char path[768];
    size_t limit = 0, usage = 0, inactive = 0;
    snprintf(path, sizeof path, "%s/%s", dir, v2 ? "memory.max" : "memory.limit_in_bytes");
    if (!read_number(path, &limit)) return 0;
    if (!v2 && limit >= ((size_t)1 << 60)) return 0; /* v1 writes "no limit" as a huge number */
    snprintf(path, sizeof path, "%s/%s", dir, v2 ? "memory.current" : "memory.usage_in_bytes");
    if (!read_number(path, &usage)) return 0;
    snprintf(path, sizeof path, "%s/memory.stat", dir);
    read_keyed(path, v2 ? "inactive_file" : "total_inactive_file", 1, &inactive);
    usage = inactive < usage ? usage - inactive : 0;
    *out = usage < limit ? limit - usage : 0;
    return 1;
}

/* The tightest cgroup headroom of this process; 0 when no memory limit applies. */
static int cgroup_available(size_t *out)
{
    FILE *f = fopen("/proc/self/cgroup", "r");
    char line[512], rel[512] = "";
    int v1 = 0;
    while (f && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        if (strncmp(line, "0::", 3) == 0) snprintf(rel, sizeof rel, "%s", line + 3);
        else if (strstr(line, ":memory:")) v1 = 1;
    }
    if (f) fclose(f);
    int found = 0;
    size_t best = 0, headroom = 0;
    if (v1) {
        if (cgroup_headroom("/sys/fs/cgroup/memory", 0, &headroom)) best = headroom, found = 1;
    } else {
        /* v2: from the process's cgroup up to the root of the (namespaced) hierarchy */
        char dir[600];
        snprintf(dir, sizeof dir, "/sys/fs/cgroup%s", strcmp(rel, "/") ? rel : "");
        for (;;) {
            if (cgroup_headroom(dir, 1, &headroom) && (!found || headroom < best))
                best = headroom, found = 1;
            char *slash = strrchr(dir, '/');
            if (!slash || slash - dir <= (long)strlen("/sys/fs/cgroup")) break;
            *slash = '\0';
        }
        if (cgroup_headroom("/sys/fs/cgroup", 1, &headroom) && (!found || headroom < best))
            best = headroom, found = 1;
    }
    if (found) *out = best;
    return found;
}

int snn_memory_info_cpu(size_t *available, size_t *total)
{
    size_t avail = 0, all = 0, limited = 0;
    if (!read_keyed("/proc/meminfo", "MemAvailable", 1024, &avail) ||
        !read_keyed("/proc/meminfo", "MemTotal", 1024, &all))
        return -1;
    if (cgroup_available(&limited) && limited < avail) avail = limited;
    *available = avail;
    *total = all;
    return 0;
}

snn_status snn_device_memory(snn_device device, size_t *available, size_t *total)
{
    const char *fn = "snn_device_memory";
    if (!available || !total)
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad argument '%s' (got NULL)", fn,
                         available ? "total" : "available");
    *available = *total = 0;
    const snn_kernels *k = snn_kernels_or_error(fn, device);
    if (!k) return snn_last_status();
    if (!k->memory_info || k->memory_info(available, total) != 0)
        return snn_error(SNN_ERR_UNSUPPORTED, "%s: the %s backend cannot tell how much memory it "
                         "has (%s)", fn, snn_device_name(device),
                         device == SNN_CPU ? "no /proc/meminfo" : "cudaMemGetInfo failed");
    return SNN_OK;
}
