/*
 * run_memory.c - the size check of run_memory.h: what a run needs (the model's estimate, the
 * data batches) against what the device and the host can give, and the message that refuses a
 * size that cannot fit, with the largest batch that would.
 */
#include "app/run_memory.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "812.4 MiB", "3.21 GiB", "1.49 TiB" into buf */
static const char *run_bytes(double bytes, char *buf, size_t size)
{
    if (bytes < 1073741824.0) snprintf(buf, size, "%.1f MiB", bytes / 1048576.0);
    else if (bytes < 1099511627776.0) snprintf(buf, size, "%.2f GiB", bytes / 1073741824.0);
    else snprintf(buf, size, "%.2f TiB", bytes / 1099511627776.0);
    return buf;
}

/* SNN_MEMORY_LIMIT in bytes, or 0 when unset or unreadable (a warning says so). */
static double run_memory_limit(const char *program)
{
    const char *v = getenv("SNN_MEMORY_LIMIT");
    if (!v || !*v) return 0.0;
    char *end = NULL;
    double x = strtod(v, &end);
    double unit = 1.0;
    if (end && *end) {
        switch (*end) {
        case 'k': case 'K': unit = 1024.0; break;
        case 'm': case 'M': unit = 1048576.0; break;
        case 'g': case 'G': unit = 1073741824.0; break;
        case 't': case 'T': unit = 1099511627776.0; break;
        default: unit = -1.0;
        }
        if (unit > 0 && end[1] && strcmp(end + 1, "B") && strcmp(end + 1, "iB")) unit = -1.0;
    }
    if (!(x > 0) || unit < 0) {
        fprintf(stderr, "%s: warning: ignoring SNN_MEMORY_LIMIT='%s' (expected bytes, e.g. "
                "8G or 512M)\n", program, v);
        return 0.0;
    }
    return x * unit;
}

/* What `device` can give: the device's answer, capped by SNN_MEMORY_LIMIT (*capped says
 * whether the cap applied). -1 when unknown. */
static double run_memory_available(const char *program, snn_device device, double *total,
                                   bool *capped)
{
    size_t avail = 0, size = 0;
    double limit = run_memory_limit(program);
    *capped = false;
    if (snn_device_memory(device, &avail, &size) != SNN_OK) {
        *total = limit;
        *capped = limit > 0;
        return limit > 0 ? limit : -1.0;
    }
    *total = (double)size;
    *capped = limit > 0 && limit < (double)avail;
    return *capped ? limit : (double)avail;
}

/* The images one step holds at batch size `batch`. */
static int run_step_batch(const run_memory_request *r, int batch)
{
    return r->images > 0 && r->images < batch ? (int)r->images : batch;
}

/* The model's estimate for one step of `batch` images, with the options the run will have. */
static snn_status run_estimate(const run_memory_request *r, int batch, snn_memory_estimate *out)
{
    snn_model_options options = snn_model_options_default(r->device);
    if (r->unfused) options.fuse = false;
    options.keep_bf16 = r->keep_bf16;
    if (r->carry != SNN_CARRY_NONE)
        return snn_model_memory_estimate_through_time(&r->config, &options, r->carry, r->steps,
                                                      r->traces, run_step_batch(r, batch),
                                                      r->device, r->optimizer_states, out);
    return snn_model_memory_estimate_with(&r->config, &options, run_step_batch(r, batch),
                                          r->device, r->training, r->optimizer_states, out);
}

/* The largest batch size <= r->batch_size whose estimate fits `usable` on the device and
 * `host_usable` on the host; 0 when not even one image fits. */
static int run_memory_largest_batch(const run_memory_request *r, double usable, double host_usable,
                                    double host_per_image)
{
    int lo = 0, hi = r->batch_size;
    while (lo < hi) {
        int mid = lo + (hi - lo + 1) / 2;
        snn_memory_estimate e;
        double host_extra = r->host_extra - host_per_image * (r->batch_size - mid);
        bool fits = run_estimate(r, mid, &e) == SNN_OK &&
                    e.total - r->held + (r->device == SNN_CPU ? host_extra : 0.0) <= usable &&
                    e.host - (r->device == SNN_CPU ? r->held : 0.0) + host_extra <= host_usable;
        if (fits) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

/* run_memory.h: 0 when it fits (or the device cannot tell), else 2 with the refusal printed */
int run_memory_check(const run_memory_request *r, double host_per_image,
                     snn_memory_estimate *out)
{
    const char *p = r->program, *dev = snn_device_name(r->device);
    if (run_estimate(r, r->batch_size, out) != SNN_OK) {
        fprintf(stderr, "%s: %s\n", p, snn_last_error());
        return 2;
    }
    double total = 0.0, host_total = 0.0;
    bool capped = false, host_capped = false;
    double avail = run_memory_available(p, r->device, &total, &capped);
    double host_avail = avail;
    host_total = total, host_capped = capped;
    if (r->device != SNN_CPU)
        host_avail = run_memory_available(p, SNN_CPU, &host_total, &host_capped);
    double need = out->total - r->held + (r->device == SNN_CPU ? r->host_extra : 0.0);
    double host_need = out->host - (r->device == SNN_CPU ? r->held : 0.0) + r->host_extra;
    bool device_ok = avail < 0 || need <= RUN_MEMORY_USABLE * avail;
    bool host_ok = host_avail < 0 || host_need <= RUN_MEMORY_USABLE * host_avail;
    if (avail < 0 || host_avail < 0)
        fprintf(stderr, "%s: note: cannot tell how much %s memory is available (%s); the sizes "
                "are not checked\n", p, avail < 0 ? dev : "host", snn_last_error());
    char b[8][32], steps[64];
    /* how the step spans time: all T at once, or one call of 1 or K steps at a time */
    if (r->carry == SNN_CARRY_CONSTANT)
        snprintf(steps, sizeof steps, "T=%d, online: 1 step a call", r->config.time_steps);
    else if (r->carry == SNN_CARRY_DIFFERENTIABLE)
        snprintf(steps, sizeof steps, "T=%d in segments of %d", r->config.time_steps, r->steps);
    else
        snprintf(steps, sizeof steps, "T=%d", r->config.time_steps);
    if (device_ok && host_ok) {
        if (avail >= 0)
            fprintf(stderr, "%s: memory: %s: about %s of %s memory for the model and one step "
                    "(%s; %s available%s)\n", p, r->what, run_bytes(need, b[0], 32), dev, steps,
                    run_bytes(avail, b[1], 32), capped ? " under SNN_MEMORY_LIMIT" : "");
        return 0;
    }
    bool on_device = !device_ok;
    double n = on_device ? need : host_need, a = on_device ? avail : host_avail;
    double t = on_device ? total : host_total;
    bool cap = on_device ? capped : host_capped;
    const char *where = on_device && r->device != SNN_CPU ? "the GPU" : "this machine";
    /* the data batches and files are host memory: named when the host is what is short */
    const bool host_files = r->host_extra > 0 && (!on_device || r->device == SNN_CPU);
    fprintf(stderr, "%s: %s %s at --batch-size %d needs about %s of %s memory, but %s has %s "
            "available (%s%s); refusing before allocating anything.\n"
            "  weights %s, gradients and optimizer state %s, one step (%s) %s, fixed %s%s%s\n",
            p, r->what, snn_model_kind_name(r->config.kind), r->batch_size,
            run_bytes(n, b[0], 32), on_device ? dev : "host", where, run_bytes(a, b[1], 32),
            cap ? "SNN_MEMORY_LIMIT; it has " : "of ", run_bytes(t, b[2], 32),
            run_bytes(out->parameters, b[3], 32),
            run_bytes(out->gradients + out->optimizer, b[4], 32), steps,
            run_bytes(out->step + out->state, b[5], 32), run_bytes(out->overhead, b[6], 32),
            host_files ? ", data batches and files " : "",
            host_files ? run_bytes(r->host_extra, b[7], 32) : "");
    int best = run_memory_largest_batch(r, RUN_MEMORY_USABLE * avail,
                                        RUN_MEMORY_USABLE * host_avail, host_per_image);
    if (best > 0)
        fprintf(stderr, "hint: the largest --batch-size that fits is about %d%s%s\n", best,
                r->size_flags ? "; or lower " : "", r->size_flags ? r->size_flags : "");
    else
        fprintf(stderr, "hint: not even --batch-size 1 fits%s%s\n",
                r->size_flags ? ": lower " : "", r->size_flags ? r->size_flags : "");
    return 2;
}

/* run_memory.h: the images per calibration forward that fit, or 0 with the refusal printed */
int run_memory_sparse_images(const char *program, const snn_model_config *config, int batch,
                             snn_device device, double held, const char *hint)
{
    const char *dev = snn_device_name(device);
    char b[4][32];
    double total = 0.0, host_total = 0.0;
    bool capped = false, host_capped = false;
    double avail = run_memory_available(program, device, &total, &capped);
    double host_avail = device == SNN_CPU ? avail : run_memory_available(program, SNN_CPU,
                                                                         &host_total, &host_capped);
    if (device == SNN_CPU) host_total = total, host_capped = capped;
    snn_memory_estimate e;
    if (snn_sparsify_memory_estimate(config, batch, device, &e) != SNN_OK) {
        fprintf(stderr, "%s: %s\n", program, snn_last_error());
        return 0;
    }
    if (avail < 0 || host_avail < 0) {
        fprintf(stderr, "%s: note: cannot tell how much %s memory is available (%s); the sparse "
                "pass's size is not checked\n", program, avail < 0 ? dev : "host",
                snn_last_error());
        return batch;
    }
    /* the largest images per forward that fit both, by bisection (the estimate grows with it) */
    int lo = 0, hi = batch;
    double need_lo = 0.0;
    while (lo < hi) {
        int mid = lo + (hi - lo + 1) / 2;
        snn_memory_estimate m;
        bool fits = snn_sparsify_memory_estimate(config, mid, device, &m) == SNN_OK &&
                    m.total - held <= RUN_MEMORY_USABLE * avail &&
                    m.host - (device == SNN_CPU ? held : 0.0) <= RUN_MEMORY_USABLE * host_avail;
        if (fits) lo = mid, need_lo = m.total - held;
        else hi = mid - 1;
    }
    if (lo == batch) {
        fprintf(stderr, "%s: memory: the sparse pass at T = %d takes about %s of %s memory (%s "
                "available%s)\n", program, config->time_steps, run_bytes(need_lo, b[0], 32), dev,
                run_bytes(avail, b[1], 32), capped ? " under SNN_MEMORY_LIMIT" : "");
        return batch;
    }
    if (lo > 0) {
        fprintf(stderr, "%s: memory: a calibration batch of %d images at T = %d needs about %s "
                "of %s memory, %s is available%s: calibration runs %d images at a time (about "
                "%s)\n",
                program, batch, config->time_steps, run_bytes(e.total - held, b[0], 32), dev,
                run_bytes(avail, b[1], 32), capped ? " under SNN_MEMORY_LIMIT" : "", lo,
                run_bytes(need_lo, b[2], 32));
        return lo;
    }
    snn_memory_estimate one;
    snn_sparsify_memory_estimate(config, 1, device, &one);
    const bool on_device = one.total - held > RUN_MEMORY_USABLE * avail;
    fprintf(stderr, "%s: the sparse pass at T = %d needs about %s of %s memory even at one image "
            "per calibration forward, but %s has %s available (%s%s); refusing before running "
            "it.\nhint: %s\n", program, config->time_steps,
            run_bytes(on_device ? one.total - held : one.host, b[0], 32),
            on_device ? dev : "host", on_device && device != SNN_CPU ? "the GPU" : "this machine",
            run_bytes(on_device ? avail : host_avail, b[1], 32),
            (on_device ? capped : host_capped) ? "SNN_MEMORY_LIMIT; it has " : "of ",
            run_bytes(on_device ? total : host_total, b[2], 32), hint);
    return 0;
}
