/*
 * loader.c - from a data set to batches: seeded shuffle, batching, drop_last, augmentation and
 * normalisation (augment.c), with a background thread that makes the next batch while the
 * caller trains on the current one.
 *
 * Reproducibility. Batch b of epoch e holds the samples at positions [b B, b B + count) of the
 * epoch's order, a Fisher-Yates shuffle drawn from snn_rng seeded by (seed, epoch); each sample's
 * crop and flip come from (seed, epoch, position) (snn_augment_draw). Nothing depends on which
 * thread made a batch or when, so prefetch on and off give bit-identical batches, and a run
 * resumed with snn_loader_seek(e, b) sees exactly what the uninterrupted run saw.
 *
 * Sharding (data-parallel training, one loader per rank): every rank draws the same epoch order
 * and takes its slice of each global batch of B * shards positions (snn_shard_slice). Since
 * augmentation follows the position, not the rank, the ranks together see exactly the batches
 * of one unsharded loader with batch size B * shards.
 *
 * Double buffering. Two slots of (B, C, H, W) floats + (B) labels. The caller holds one (the
 * batch snn_loader_next returned); the worker fills the other with the batch after it. The
 * next call waits for the worker (normally it is long done), hands its slot over and sets the
 * worker on the slot the caller just gave back:
 *
 *     caller:  [ use slot 0 ........ ] next [ use slot 1 ........ ] next [ use slot 0 ...
 *     worker:  [ fill slot 1 ]  idle         [ fill slot 0 ]  idle        [ fill slot 1 ]
 *
 * The producer state (the epoch's order) is touched only by whoever makes a batch, and the
 * caller never makes one while the worker runs, so it needs no lock. Memory: 2 B C H W floats
 * plus 8 bytes per sample for the order.
 */
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "data_internal.h"
#include "tensor/error.h"
#include "kernels/kernels.h"

typedef struct slot {
    float *images;           /* (B, C, H, W) */
    float *labels;           /* (B) */
    int count;
    int global_count;         /* of the global batch this slot is a slice of */
    int64_t epoch, index;
} slot;

struct snn_loader {
    const snn_dataset *ds;
    snn_loader_config cfg;
    snn_norm_table lut;
    int64_t batches;          /* per epoch */
    int64_t sample_floats;    /* C H W */
    int n_slots;              /* 2 with prefetch, 1 without */
    slot slots[2];

    /* Producer state: the order of samples in epoch `order_epoch` (-1: none yet). */
    int64_t *order;           /* (count) */
    int64_t order_epoch;

    /* Where the next snn_loader_next reads. */
    int64_t epoch, batch;

    /* The worker and its one job: fill slots[job_slot] with batch (job_epoch, job_batch). */
    bool thread_running;
    pthread_t thread;
    pthread_mutex_t mutex;
    pthread_cond_t cond;
    bool job_queued;          /* set by the caller, cleared by the worker when it starts */
    bool job_busy;            /* the worker is making it */
    bool job_valid;           /* a job was submitted and not yet taken by the caller */
    bool quit;
    int job_slot;
    int64_t job_epoch, job_batch;
};

/* ---- making a batch (runs on the worker, or on the caller without prefetch) ---------------- */

static void ensure_order(snn_loader *l, int64_t epoch)
{
    if (l->order_epoch == epoch || (!l->cfg.shuffle && l->order_epoch >= 0)) return;
    const int64_t n = l->ds->count;
    for (int64_t i = 0; i < n; i++) l->order[i] = i;
    if (l->cfg.shuffle) {
        snn_rng rng;
        snn_rng_seed(&rng, snn_hash64(l->cfg.seed) ^ snn_hash64((uint64_t)epoch + 1));
        /* Fisher-Yates: position i takes a uniformly chosen sample among those not yet placed. */
        for (int64_t i = n - 1; i > 0; i--) {
            int64_t j = (int64_t)snn_rng_below(&rng, (uint64_t)i + 1);
            int64_t t = l->order[i];
            l->order[i] = l->order[j];
            l->order[j] = t;
        }
    }
    l->order_epoch = epoch;
}

static void make_batch(snn_loader *l, slot *s, int64_t epoch, int64_t index)
{
    const snn_dataset *ds = l->ds;
    const snn_loader_config *cfg = &l->cfg;
    ensure_order(l, epoch);
    int64_t first, count, global;
    snn_shard_slice(ds->count, cfg->batch_size, cfg->shard, cfg->shards, index, &first, &count,
                    &global);
    SNN_ASSERT(count > 0 && count <= cfg->batch_size);
    const int64_t image_bytes = snn_dataset_image_bytes(ds);
    /* Event sets hold T frames per sample and are batched time-major, (T, count, C, H, W), the
     * layout the multi-step layers take; each frame of a sample gets the same crop and flip. */
    const int T = ds->time_steps > 0 ? ds->time_steps : 1;
    const int64_t frame = (int64_t)ds->channels * ds->height * ds->width;
    for (int64_t i = 0; i < count; i++) {
        const int64_t position = first + i;
        const int64_t sample = l->order[position];
        snn_augment aug = snn_augment_draw(cfg->seed, epoch, position, cfg->crop_padding,
                                           cfg->random_crop, cfg->horizontal_flip);
        snn_erase_draw(cfg->seed, epoch, position, cfg->erase_probability, ds->height, ds->width,
                       &aug);
        for (int t = 0; t < T; t++)
            snn_augment_apply(s->images + ((int64_t)t * count + i) * frame,
                              ds->images + sample * image_bytes + t * frame, ds->channels,
                              ds->height, ds->width, cfg->crop_padding, aug, &l->lut);
        s->labels[i] = (float)ds->labels[sample];
    }
    s->count = (int)count;
    s->global_count = (int)global;
    s->epoch = epoch;
    s->index = index;
}

static void *worker_main(void *arg)
{
    snn_loader *l = arg;
    pthread_mutex_lock(&l->mutex);
    for (;;) {
        while (!l->job_queued && !l->quit) pthread_cond_wait(&l->cond, &l->mutex);
        if (l->quit) break;
        l->job_queued = false;
        l->job_busy = true;
        int which = l->job_slot;
        int64_t epoch = l->job_epoch, index = l->job_batch;
        pthread_mutex_unlock(&l->mutex);
        make_batch(l, &l->slots[which], epoch, index);
        pthread_mutex_lock(&l->mutex);
        l->job_busy = false;
        pthread_cond_broadcast(&l->cond);
    }
    pthread_mutex_unlock(&l->mutex);
    return NULL;
}

/* Blocks until the worker has no job queued or running. */
static void wait_idle(snn_loader *l)
{
    pthread_mutex_lock(&l->mutex);
    while (l->job_queued || l->job_busy) pthread_cond_wait(&l->cond, &l->mutex);
    pthread_mutex_unlock(&l->mutex);
}

static void submit(snn_loader *l, int which, int64_t epoch, int64_t index)
{
    pthread_mutex_lock(&l->mutex);
    SNN_ASSERT(!l->job_queued && !l->job_busy);
    l->job_slot = which;
    l->job_epoch = epoch;
    l->job_batch = index;
    l->job_queued = true;
    l->job_valid = true;
    pthread_cond_broadcast(&l->cond);
    pthread_mutex_unlock(&l->mutex);
}

/* ---- sharding -------------------------------------------------------------------------------- */

void snn_shard_slice(int64_t count, int batch, int shard, int shards, int64_t index,
                     int64_t *first, int64_t *n, int64_t *global)
{
    if (shards < 1) shards = 1, shard = 0;
    const int64_t size = (int64_t)batch * shards;      /* a full global batch */
    const int64_t start = index * size;
    int64_t g = count - start;
    if (g > size) g = size;
    if (g < 0) g = 0;
    /* rank r: [r g / S, (r + 1) g / S); for a full batch r g / S = r B exactly */
    const int64_t lo = shard * g / shards, hi = (shard + 1) * g / shards;
    *first = start + lo;
    *n = hi - lo;
    *global = g;
}

int64_t snn_shard_batches(int64_t count, int batch, int shards, bool drop_last)
{
    if (shards < 1) shards = 1;
    const int64_t size = (int64_t)batch * shards;
    const int64_t full = count / size, rest = count % size;
    return full + (rest > 0 && !drop_last && rest >= shards ? 1 : 0);
}

/* ---- public API ---------------------------------------------------------------------------- */

snn_loader_config snn_loader_config_default(void)
{
    snn_loader_config c;
    memset(&c, 0, sizeof c);
    c.batch_size = 128;
    c.shuffle = true;
    for (int i = 0; i < SNN_DATA_MAX_CHANNELS; i++) {
        c.mean[i] = 0.0f;
        c.std[i] = 1.0f;
    }
    c.crop_padding = 4;
    c.prefetch = true;
    return c;
}

static snn_status check_config(const snn_dataset *ds, const snn_loader_config *c)
{
    const char *fn = "snn_loader_new";
    if (!ds || !ds->images || !ds->labels || ds->count <= 0)
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad argument 'dataset' (expected a loaded data "
                         "set, got %s)", fn, ds ? "an empty one" : "NULL");
    if (ds->channels < 1 || ds->channels > SNN_DATA_MAX_CHANNELS)
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad argument 'dataset' (expected 1..%d channels, "
                         "got %d)", fn, SNN_DATA_MAX_CHANNELS, ds->channels);
    if (!c) return snn_error(SNN_ERR_ARGUMENT, "%s: bad argument 'config' (got NULL)", fn);
    if (c->batch_size < 1)
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad argument 'config.batch_size' (expected >= 1, "
                         "got %d)", fn, c->batch_size);
    if (c->shards < 0 || c->shard < 0 || c->shard >= (c->shards > 1 ? c->shards : 1))
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad argument 'config.shard' (expected shard in "
                         "0..shards-1 and shards >= 0, got shard %d of %d)", fn, c->shard,
                         c->shards);
    const int shards = c->shards > 1 ? c->shards : 1;
    if (c->drop_last && (int64_t)c->batch_size * shards > ds->count)
        return snn_error(SNN_ERR_ARGUMENT,
                         "%s: bad argument 'config.batch_size' (expected <= %lld samples with "
                         "drop_last, got %d x %d shards: no batch would be left)",
                         fn, (long long)ds->count, c->batch_size, shards);
    if (snn_shard_batches(ds->count, c->batch_size, shards, c->drop_last) < 1)
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad argument 'dataset' (expected at least one "
                         "sample per shard, got %lld samples for %d shards)", fn,
                         (long long)ds->count, shards);
    if (c->random_crop && (c->crop_padding < 0 || c->crop_padding > 1024))
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad argument 'config.crop_padding' (expected "
                         "0..1024, got %d)", fn, c->crop_padding);
    if (!(c->erase_probability >= 0.0f && c->erase_probability <= 1.0f))
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad argument 'config.erase_probability' "
                         "(expected 0..1, got %g)", fn, (double)c->erase_probability);
    for (int ch = 0; ch < ds->channels; ch++) {
        if (!(c->std[ch] > 0.0f) || !isfinite(c->std[ch]) || !isfinite(c->mean[ch]))
            return snn_error(SNN_ERR_ARGUMENT, "%s: bad argument 'config.std[%d]' (expected a "
                             "finite std > 0 and finite mean, got mean %g std %g)",
                             fn, ch, (double)c->mean[ch], (double)c->std[ch]);
    }
    return SNN_OK;
}

snn_loader *snn_loader_new(const snn_dataset *ds, const snn_loader_config *config)
{
    if (check_config(ds, config) != SNN_OK) return NULL;
    snn_loader *l = snn_alloc(sizeof *l, SNN_CPU);
    if (!l) return snn_error_null(SNN_ERR_MEMORY, "snn_loader_new: out of memory");
    memset(l, 0, sizeof *l);
    l->ds = ds;
    l->cfg = *config;
    if (!l->cfg.random_crop) l->cfg.crop_padding = 0;
    snn_norm_table_init(&l->lut, ds->channels, l->cfg.mean, l->cfg.std);
    const int64_t b = l->cfg.batch_size;
    l->batches = snn_shard_batches(ds->count, l->cfg.batch_size, l->cfg.shards, l->cfg.drop_last);
    l->sample_floats = snn_dataset_image_bytes(ds);
    l->order_epoch = -1;
    l->n_slots = l->cfg.prefetch ? 2 : 1;

    bool ok = (l->order = snn_alloc((size_t)ds->count * sizeof *l->order, SNN_CPU)) != NULL;
    for (int i = 0; i < l->n_slots && ok; i++) {
        l->slots[i].images = snn_alloc((size_t)(b * l->sample_floats) * sizeof(float), SNN_CPU);
        l->slots[i].labels = snn_alloc((size_t)b * sizeof(float), SNN_CPU);
        ok = l->slots[i].images && l->slots[i].labels;
    }
    if (!ok) {
        snn_loader_free(l);
        return snn_error_null(SNN_ERR_MEMORY, "snn_loader_new: out of memory for batches of %d",
                              config->batch_size);
    }
    if (l->cfg.prefetch) {
        pthread_mutex_init(&l->mutex, NULL);
        pthread_cond_init(&l->cond, NULL);
        if (pthread_create(&l->thread, NULL, worker_main, l) != 0) {
            pthread_mutex_destroy(&l->mutex);
            pthread_cond_destroy(&l->cond);
            snn_loader_free(l);
            return snn_error_null(SNN_ERR_MEMORY, "snn_loader_new: cannot start the prefetch "
                                  "thread; hint: set config.prefetch = false");
        }
        l->thread_running = true;
    }
    return l;
}

void snn_loader_free(snn_loader *l)
{
    if (!l) return;
    if (l->thread_running) {
        pthread_mutex_lock(&l->mutex);
        l->quit = true;
        pthread_cond_broadcast(&l->cond);
        pthread_mutex_unlock(&l->mutex);
        pthread_join(l->thread, NULL);
        pthread_mutex_destroy(&l->mutex);
        pthread_cond_destroy(&l->cond);
    }
    const int64_t b = l->cfg.batch_size;
    for (int i = 0; i < 2; i++) {
        snn_free(l->slots[i].images, (size_t)(b * l->sample_floats) * sizeof(float), SNN_CPU);
        snn_free(l->slots[i].labels, (size_t)b * sizeof(float), SNN_CPU);
    }
    snn_free(l->order, (size_t)l->ds->count * sizeof *l->order, SNN_CPU);
    snn_free(l, sizeof *l, SNN_CPU);
}

int64_t snn_loader_num_batches(const snn_loader *l) { return l ? l->batches : 0; }

void snn_loader_position(const snn_loader *l, int64_t *epoch, int64_t *batch)
{
    *epoch = l->epoch;
    *batch = l->batch;
}

snn_status snn_loader_seek(snn_loader *l, int64_t epoch, int64_t batch)
{
    if (!l) return snn_error(SNN_ERR_ARGUMENT, "snn_loader_seek: bad argument 'loader' (got NULL)");
    if (epoch < 0 || batch < 0 || batch > l->batches)
        return snn_error(SNN_ERR_ARGUMENT,
                         "snn_loader_seek: bad position (expected epoch >= 0 and batch in "
                         "0..%lld, got epoch %lld batch %lld)",
                         (long long)l->batches, (long long)epoch, (long long)batch);
    if (l->thread_running) wait_idle(l);
    l->job_valid = false; /* whatever was prefetched is for another position */
    l->epoch = epoch;
    l->batch = batch;
    return SNN_OK;
}

bool snn_loader_next(snn_loader *l, snn_batch *out)
{
    if (!l || !out) {
        snn_error(SNN_ERR_ARGUMENT, "snn_loader_next: bad argument (got NULL)");
        return false;
    }
    memset(out, 0, sizeof *out);
    if (l->batch >= l->batches) {
        l->epoch++;
        l->batch = 0;
        return false;
    }
    slot *ready;
    if (!l->thread_running) {
        ready = &l->slots[0];
        make_batch(l, ready, l->epoch, l->batch);
    } else {
        wait_idle(l);
        int which;
        if (l->job_valid && l->job_epoch == l->epoch && l->job_batch == l->batch) {
            which = l->job_slot;
        } else {
            /* Nothing prefetched for this position (the first call, or after a seek). */
            which = 0;
            submit(l, which, l->epoch, l->batch);
            wait_idle(l);
        }
        ready = &l->slots[which];
        /* Set the worker on the batch after this one, in the other slot. */
        int64_t next_epoch = l->epoch, next_batch = l->batch + 1;
        if (next_batch >= l->batches) {
            next_epoch++;
            next_batch = 0;
        }
        submit(l, 1 - which, next_epoch, next_batch);
    }
    SNN_ASSERT(ready->epoch == l->epoch && ready->index == l->batch);
    out->images = ready->images;
    out->labels = ready->labels;
    out->count = ready->count;
    out->global_count = ready->global_count;
    out->channels = l->ds->channels;
    out->height = l->ds->height;
    out->width = l->ds->width;
    out->time_steps = l->ds->time_steps;
    out->epoch = ready->epoch;
    out->index = ready->index;
    l->batch++;
    return true;
}

snn_status snn_batch_to_device(const snn_batch *batch, snn_device device, snn_tensor **images,
                               snn_tensor **labels)
{
    if (!batch || !images || !labels)
        return snn_error(SNN_ERR_ARGUMENT, "snn_batch_to_device: bad argument (got NULL)");
    *images = *labels = NULL;
    if (batch->count <= 0 || !batch->images)
        return snn_error(SNN_ERR_ARGUMENT, "snn_batch_to_device: bad argument 'batch' (expected a "
                         "batch from snn_loader_next, got an empty one)");
    snn_shape shape = SNN_SHAPE(batch->count, batch->channels, batch->height, batch->width);
    if (batch->time_steps > 0) /* an event set: (T, N, C, H, W) */
        shape = SNN_SHAPE(batch->time_steps, batch->count, batch->channels, batch->height,
                          batch->width);
    snn_tensor *x = snn_from_host(shape, batch->images, device);
    snn_tensor *y = x ? snn_from_host(SNN_SHAPE(batch->count), batch->labels, device) : NULL;
    if (!x || !y) return snn_last_status() != SNN_OK ? snn_last_status() : SNN_ERR_MEMORY;
    *images = x;
    *labels = y;
    return SNN_OK;
}
