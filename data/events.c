/*
 * events.c - what every event-camera data set shares: growable event lists, the integration of
 * a sample's events into T frames of 2 polarity channels, the data sets by name, and the
 * N-MNIST zip writer (snn-make-nmnist and the tests).
 *
 * Frame integration (snn_events_to_frames), as SpikingJelly's integrate_events_by_fixed_frames_
 * number with split_by = 'number' or 'time' (learned from its documentation; written here from
 * the definition). For n events e_0 .. e_{n-1} of one sample and T frames:
 *
 *   by number   d = floor(n / T); event k goes to frame min(floor(k / d), T - 1)
 *               (d = 0, fewer events than frames: all of them go to the last frame)
 *   by time     t0 = min t, t1 = max t, d = floor((t1 - t0) / T) microseconds;
 *               event k goes to frame min(floor((t_k - t0) / d), T - 1)   (d = 0: the last)
 *
 * so in both modes the remainder (n mod T events, or the last (t1 - t0) mod T microseconds and
 * t1 itself) lands in the last frame, and no event is dropped. frame[t][p][y / k][x / k] counts
 * the events of frame t, polarity p, in the k x k block of pixels (downsampling by k sums, as
 * tonic's Downsample followed by ToFrame), saturating at 255 (the frames are stored as bytes).
 * The network sees the counts themselves (the loader's default normalisation for these sets is
 * mean 0, std 1/255, so x = count).
 *
 * Cost: one pass over the events and one over the frames; a frame set takes T * 2 * H * W bytes
 * per sample (N-MNIST, T = 10: 23 KB; DVS Gesture 128x128, T = 16: 512 KB).
 */
#include <string.h>

#include "data_internal.h"
#include "tensor/error.h"

snn_event_frames snn_event_frames_default(void)
{
    return (snn_event_frames){.frames = 10, .split_by = SNN_SPLIT_BY_NUMBER, .downsample = 1};
}

const char *snn_event_split_name(snn_event_split split)
{
    return split == SNN_SPLIT_BY_TIME ? "time" : "number";
}

snn_status snn_event_split_parse(const char *name, snn_event_split *out)
{
    if (name && strcmp(name, "number") == 0) *out = SNN_SPLIT_BY_NUMBER;
    else if (name && strcmp(name, "time") == 0) *out = SNN_SPLIT_BY_TIME;
    else
        return snn_error(SNN_ERR_ARGUMENT, "bad event split '%s' (expected number or time)",
                         name ? name : "(null)");
    return SNN_OK;
}

snn_status snn_event_frames_check(const char *fn, const snn_event_frames *f)
{
    if (!f) return snn_error(SNN_ERR_ARGUMENT, "%s: bad argument 'frames' (got NULL)", fn);
    if (f->frames < 1 || f->frames > 1024)
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad argument 'frames.frames' (expected 1..1024, "
                         "got %d)", fn, f->frames);
    if (f->split_by != SNN_SPLIT_BY_NUMBER && f->split_by != SNN_SPLIT_BY_TIME)
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad argument 'frames.split_by' (expected "
                         "SNN_SPLIT_BY_NUMBER or SNN_SPLIT_BY_TIME, got %d)", fn, (int)f->split_by);
    if (f->downsample < 1 || f->downsample > 64)
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad argument 'frames.downsample' (expected "
                         "1..64, got %d)", fn, f->downsample);
    return SNN_OK;
}

int64_t snn_event_frame_bytes(const snn_event_frames *f, int height, int width)
{
    int64_t h = (height + f->downsample - 1) / f->downsample;
    int64_t w = (width + f->downsample - 1) / f->downsample;
    return (int64_t)f->frames * 2 * h * w;
}

/* ---- event lists ---------------------------------------------------------------------------- */

snn_status snn_event_list_push(snn_event_list *l, snn_event e, const char *source)
{
    if (l->count == l->capacity) {
        if (l->capacity >= SNN_EVENTS_MAX)
            return snn_error(SNN_ERR_FORMAT, "%s: more than %lld events (expected fewer in one "
                             "recording)", source, (long long)SNN_EVENTS_MAX);
        int64_t grown = l->capacity ? 2 * l->capacity : 4096;
        snn_event *items = snn_alloc((size_t)grown * sizeof *items, SNN_CPU);
        if (!items)
            return snn_error(SNN_ERR_MEMORY, "%s: out of memory for %lld events", source,
                             (long long)grown);
        if (l->count) memcpy(items, l->items, (size_t)l->count * sizeof *items);
        snn_free(l->items, (size_t)l->capacity * sizeof *items, SNN_CPU);
        l->items = items;
        l->capacity = grown;
    }
    l->items[l->count++] = e;
    return SNN_OK;
}

void snn_event_list_free(snn_event_list *l)
{
    snn_free(l->items, (size_t)l->capacity * sizeof *l->items, SNN_CPU);
    memset(l, 0, sizeof *l);
}

/* ---- frames ---------------------------------------------------------------------------------- */

void snn_events_to_frames(uint8_t *frames, const snn_event *events, int64_t n, int height,
                          int width, const snn_event_frames *config)
{
    const int T = config->frames, k = config->downsample;
    const int H = (height + k - 1) / k, W = (width + k - 1) / k;
    memset(frames, 0, (size_t)T * 2 * (size_t)H * (size_t)W); // (T, 2, H, W)
    if (n <= 0) return;
    int64_t t0 = events[0].t, t1 = events[0].t;
    for (int64_t i = 1; i < n; i++) {
        if (events[i].t < t0) t0 = events[i].t;
        if (events[i].t > t1) t1 = events[i].t;
    }
    const int64_t per_frame = config->split_by == SNN_SPLIT_BY_NUMBER ? n / T : (t1 - t0) / T;
    for (int64_t i = 0; i < n; i++) {
        const snn_event *e = &events[i];
        if (e->x >= width || e->y >= height || e->p > 1) continue;
        int64_t where = config->split_by == SNN_SPLIT_BY_NUMBER ? i : e->t - t0;
        int64_t f = per_frame > 0 ? where / per_frame : T - 1;
        if (f > T - 1) f = T - 1;
        uint8_t *pixel = frames + ((f * 2 + e->p) * H + e->y / k) * (int64_t)W + e->x / k;
        if (*pixel < 255) (*pixel)++;
    }
}

/* ---- the data sets by name ------------------------------------------------------------------- */

static const char *const event_names[] = {"nmnist", "dvs-gesture", "cifar10-dvs"};

bool snn_dataset_is_event(const char *name)
{
    for (size_t i = 0; name && i < sizeof event_names / sizeof event_names[0]; i++)
        if (strcmp(name, event_names[i]) == 0) return true;
    return false;
}

snn_status snn_event_dataset_load(const char *name, const char *path, snn_split split,
                                  const snn_event_frames *frames, snn_dataset *out)
{
    const char *fn = "snn_event_dataset_load";
    if (!out) return snn_error(SNN_ERR_ARGUMENT, "%s: bad argument 'out' (got NULL)", fn);
    memset(out, 0, sizeof *out);
    snn_event_frames f = frames ? *frames : snn_event_frames_default();
    if (snn_event_frames_check(fn, &f) != SNN_OK) return SNN_ERR_ARGUMENT;
    if (!snn_dataset_is_event(name))
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad argument 'name' (expected \"nmnist\", "
                         "\"dvs-gesture\" or \"cifar10-dvs\", got \"%s\")", fn,
                         name ? name : "(null)");
    if (split != SNN_SPLIT_TRAIN && split != SNN_SPLIT_TEST)
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad argument 'split' (got %d)", fn, (int)split);
    char where[1024];
    snn_status st = snn_dataset_locate(name, path, where, sizeof where);
    if (st == SNN_OK) {
        if (strcmp(name, "nmnist") == 0) st = snn_nmnist_load(where, split, &f, out);
        else if (strcmp(name, "dvs-gesture") == 0) st = snn_dvs_gesture_load(where, split, &f, out);
        else st = snn_cifar10dvs_load(where, split, &f, out);
    }
    if (st != SNN_OK) {
        SNN_ASSERT(out->images == NULL && out->labels == NULL); /* nothing half-loaded */
        char inner[1024];
        snprintf(inner, sizeof inner, "%s", snn_last_error());
        return snn_error(st, "%s(\"%s\", %s): %s", fn, name,
                         split == SNN_SPLIT_TRAIN ? "train" : "test", inner);
    }
    return SNN_OK;
}

snn_status snn_dataset_load_frames(const char *name, const char *path, snn_split split,
                                   const snn_event_frames *frames, snn_dataset *out)
{
    if (snn_dataset_is_event(name)) return snn_event_dataset_load(name, path, split, frames, out);
    return snn_dataset_load(name, path, split, out);
}

snn_status snn_event_dataset_alloc(snn_dataset *out, const char *name, int64_t count,
                                   const snn_event_frames *f, int height, int width, int classes)
{
    memset(out, 0, sizeof *out);
    const int k = f->downsample;
    const int64_t bytes = snn_event_frame_bytes(f, height, width);
    out->images = snn_alloc((size_t)(count * bytes), SNN_CPU);
    out->labels = snn_alloc((size_t)count, SNN_CPU);
    if (!out->images || !out->labels) {
        snn_free(out->images, (size_t)(count * bytes), SNN_CPU);
        snn_free(out->labels, (size_t)count, SNN_CPU);
        memset(out, 0, sizeof *out);
        return snn_error(SNN_ERR_MEMORY, "%s: out of memory for %lld samples of %lld bytes of "
                         "frames; hint: fewer frames or a larger downsample", name,
                         (long long)count, (long long)bytes);
    }
    out->count = count;
    out->time_steps = f->frames;
    out->channels = 2;
    out->height = (height + k - 1) / k;
    out->width = (width + k - 1) / k;
    out->classes = classes;
    snprintf(out->name, sizeof out->name, "%s", name);
    return SNN_OK;
}

/* ---- writing N-MNIST ------------------------------------------------------------------------- */

snn_status snn_nmnist_write_zip(const char *path, const char *folder, const snn_event *events,
                                const int64_t *offsets, const uint8_t *labels, int64_t samples)
{
    const char *fn = "snn_nmnist_write_zip";
    if (!path || !folder || (!events && samples > 0) || !offsets || !labels || samples < 0)
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad argument (got NULL or a negative count)", fn);
    int64_t longest = 0;
    for (int64_t i = 0; i < samples; i++) {
        int64_t n = offsets[i + 1] - offsets[i];
        if (n < 0 || labels[i] > 9)
            return snn_error(SNN_ERR_ARGUMENT, "%s: sample %lld has %lld events and label %d "
                             "(expected >= 0 and 0..9)", fn, (long long)i, (long long)n, labels[i]);
        for (int64_t j = offsets[i]; j < offsets[i + 1]; j++) {
            const snn_event *e = &events[j];
            if (e->x > 255 || e->y > 255 || e->p > 1 || e->t < 0 || e->t >= (1 << 23))
                return snn_error(SNN_ERR_ARGUMENT, "%s: event %lld of sample %lld (x %u, y %u, "
                                 "p %u, t %lld) does not fit N-MNIST's 40 bits (x, y < 256, "
                                 "p 0/1, 0 <= t < 2^23)", fn, (long long)(j - offsets[i]),
                                 (long long)i, e->x, e->y, e->p, (long long)e->t);
        }
        if (n > longest) longest = n;
    }
    uint8_t *buf = snn_alloc((size_t)(5 * longest + 1), SNN_CPU);
    if (!buf) return snn_error(SNN_ERR_MEMORY, "%s: out of memory", fn);
    snn_zip_writer w;
    snn_status st = snn_zip_writer_open(&w, path);
    for (int64_t i = 0; i < samples && st == SNN_OK; i++) {
        int64_t n = offsets[i + 1] - offsets[i];
        snn_nmnist_encode(buf, events + offsets[i], n);
        char name[128];
        snprintf(name, sizeof name, "%s/%d/%05lld.bin", folder, labels[i], (long long)i);
        st = snn_zip_writer_add(&w, name, buf, (size_t)(5 * n));
    }
    if (st == SNN_OK) st = snn_zip_writer_close(&w);
    else snn_zip_writer_abort(&w);
    snn_free(buf, (size_t)(5 * longest + 1), SNN_CPU);
    return st;
}
