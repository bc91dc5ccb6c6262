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
 *     inactive file cache are reclaimed before the limit kills anything. For cgroup v1 the same
 *     walk with memory.limit_in_bytes - (memory.usage_in_bytes - total_inactive_file).
 *
 * The smallest of these is what is available.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "host_memory.h"

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

/* Headroom under a cgroup limit in `dir` (v2 file names when v2, else v1) and the limit; 0
 * when no limit. */
static int cgroup_headroom(const char *dir, int v2, size_t *out, size_t *limit_out)
{
    char path[832];
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
    *limit_out = limit;
    return 1;
}

/* The tightest headroom (and its limit) over `base` + `rel` and each folder above it up to
 * `base`. */
static int headroom_up(const char *base, const char *rel, int v2, size_t *best, size_t *limit)
{
    char dir[768];
    snprintf(dir, sizeof dir, "%s%s", base, strcmp(rel, "/") ? rel : "");
    size_t base_len = strlen(base), headroom = 0, this_limit = 0;
    int found = 0;
    for (;;) {
        if (cgroup_headroom(dir, v2, &headroom, &this_limit) && (!found || headroom < *best))
            *best = headroom, *limit = this_limit, found = 1;
        char *slash = strrchr(dir, '/');
        if (strlen(dir) <= base_len || !slash || (size_t)(slash - dir) < base_len) break;
        *slash = '\0';
    }
    return found;
}

/* The tightest cgroup headroom of this process and the limit it is under; 0 when no memory
 * limit applies. The process's
 * cgroup comes from /proc/self/cgroup: "0::<path>" for v2, "<n>:memory:<path>" (or a list of
 * controllers that includes memory) for v1, which wins where both appear (hybrid systems keep
 * the memory controller on v1). */
static int cgroup_available(size_t *out, size_t *limit)
{
    FILE *f = fopen("/proc/self/cgroup", "r");
    if (!f) return 0;
    char line[512], v2_path[512] = "", v1_path[512] = "";
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        char *first = strchr(line, ':'), *second = first ? strchr(first + 1, ':') : NULL;
        if (!first || !second) continue;
        *second = '\0';
        const char *controllers = first + 1, *path = second + 1;
        if (strncmp(line, "0:", 2) == 0 && controllers[0] == '\0') {
            snprintf(v2_path, sizeof v2_path, "%s", path);
            continue;
        }
        /* v1: is "memory" one of the comma-separated controllers? */
        for (const char *c = controllers; *c;) {
            size_t n = strcspn(c, ",");
            if (n == 6 && strncmp(c, "memory", 6) == 0) snprintf(v1_path, sizeof v1_path, "%s", path);
            c += n + (c[n] == ',');
        }
    }
    fclose(f);
    size_t best = 0;
    int found = v1_path[0] ? headroom_up("/sys/fs/cgroup/memory", v1_path, 0, &best, limit)
                           : v2_path[0] ? headroom_up("/sys/fs/cgroup", v2_path, 1, &best, limit) : 0;
    if (found) *out = best;
    return found;
}

int snn_memory_info_cpu(size_t *available, size_t *total)
{
    size_t avail = 0, all = 0, limited = 0, limit = 0;
    if (!read_keyed("/proc/meminfo", "MemAvailable", 1024, &avail) ||
        !read_keyed("/proc/meminfo", "MemTotal", 1024, &all))
        return -1;
    if (cgroup_available(&limited, &limit) && limited < avail) {
        avail = limited;
        if (limit < all) all = limit; /* "of N" then names the limit the job runs under */
    }
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
