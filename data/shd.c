/*
 * shd.c - the spike-train audio sets SHD and SSC (Cramer et al. 2020, "The Heidelberg Spiking
 * Data Sets for the Systematic Evaluation of Spiking Neural Networks") apart from their files:
 * the names, the framing of one sample's spikes into T frames, and the frames config's checks.
 * Reading the HDF5 files is data/hdf5/shd_hdf5.c, a library of its own (libsnn_data_hdf5), so
 * that libsnn_data keeps needing zlib alone; this part needs no HDF5 and is always built.
 *
 * Framing (snn_spikes_to_frames). For the n spikes (t_i seconds, unit u_i) of one sample, T
 * frames over [0, max_time) and a pooling factor k:
 *
 *   f_i = floor(t_i T / max_time)         (t_i in [f dt, (f + 1) dt), dt = max_time / T)
 *   frame[f_i][u_i / k] += 1              for f_i < T; the spikes with f_i >= T are dropped
 *   frame[f][c] = min(frame[f][c], 255)   (1 when binarised)
 *
 * f is computed as t T / max_time rather than t / dt: with dt = 0.1, t = 0.3 gives 2.9999...
 * and would land a spike sitting on an edge in the bin below; t * 10 / 1 gives 3 exactly.
 *
 * Cost: one pass over the spikes and a memset of T * ceil(channels / k) bytes per sample (SHD,
 * T = 100: 70 KB a sample, 583 MB for the 8156 training samples; SSC's 75466: 5.3 GB, so pool
 * or fewer frames there).
 */
#include <math.h>
#include <string.h>

#include "data_internal.h"
#include "tensor/error.h"

snn_spike_frames snn_spike_frames_default(void)
{
    return (snn_spike_frames){.frames = 100, .max_time = 1.0, .binarize = false, .pool = 1};
}

bool snn_dataset_is_spike_audio(const char *name)
{
    return name && (strcmp(name, "shd") == 0 || strcmp(name, "ssc") == 0);
}

snn_status snn_spike_frames_check(const char *fn, const snn_spike_frames *f)
{
    if (!f) return snn_error(SNN_ERR_ARGUMENT, "%s: bad argument 'frames' (got NULL)", fn);
    if (f->frames < 1 || f->frames > 100000)
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad argument 'frames.frames' (expected "
                         "1..100000, got %d)", fn, f->frames);
    if (!(f->max_time > 0.0) || !isfinite(f->max_time))
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad argument 'frames.max_time' (expected a "
                         "finite number of seconds > 0, got %g)", fn, f->max_time);
    if (f->pool < 1 || f->pool > SNN_SPIKE_AUDIO_CHANNELS)
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad argument 'frames.pool' (expected 1..%d, "
                         "got %d)", fn, SNN_SPIKE_AUDIO_CHANNELS, f->pool);
    return SNN_OK;
}

int64_t snn_spikes_to_frames(uint8_t *frames, const double *times, const int64_t *units,
                             int64_t n, int channels, const snn_spike_frames *config)
{
    const int T = config->frames, k = config->pool;
    const int64_t width = (channels + k - 1) / k;
    const uint8_t ceiling = config->binarize ? 1 : 255;
    memset(frames, 0, (size_t)(T * width)); /* (T, width) */
    int64_t dropped = 0;
    for (int64_t i = 0; i < n; i++) {
        const double t = times[i];
        if (!(t >= 0.0) || !isfinite(t) || units[i] < 0 || units[i] >= channels) continue;
        const double where = t * T / config->max_time;
        if (where >= (double)T) { /* at or after max_time */
            dropped++;
            continue;
        }
        uint8_t *count = frames + (int64_t)where * width + units[i] / k;
        if (*count < ceiling) (*count)++;
    }
    return dropped;
}

snn_status snn_spike_dataset_alloc(snn_dataset *out, const char *name, int64_t count,
                                   const snn_spike_frames *f, int classes)
{
    memset(out, 0, sizeof *out);
    const int64_t width = (SNN_SPIKE_AUDIO_CHANNELS + f->pool - 1) / f->pool;
    const int64_t bytes = (int64_t)f->frames * width;
    out->images = snn_alloc((size_t)(count * bytes), SNN_CPU);
    out->labels = snn_alloc((size_t)count, SNN_CPU); /* count >= 1: the reader checks */
    if (!out->images || !out->labels) {
        snn_free(out->images, (size_t)(count * bytes), SNN_CPU);
        snn_free(out->labels, (size_t)count, SNN_CPU);
        memset(out, 0, sizeof *out);
        return snn_error(SNN_ERR_MEMORY, "%s: out of memory for %lld samples of %lld bytes of "
                         "frames; hint: fewer frames (--T) or pool channels (--downsample)",
                         name, (long long)count, (long long)bytes);
    }
    out->count = count;
    out->time_steps = f->frames;
    out->channels = 1;
    out->height = 1;
    out->width = (int)width;
    out->classes = classes;
    snprintf(out->name, sizeof out->name, "%s", name);
    return SNN_OK;
}
