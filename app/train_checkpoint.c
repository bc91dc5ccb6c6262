/*
 * train_checkpoint.c - snn-train's checkpoint, best weights, stop on a signal and --resume
 * (train_checkpoint.h).
 */
#define _POSIX_C_SOURCE 200809L /* access */
#include "app/train_checkpoint.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "app/run_lock.h"
#include "app/run_signals.h"
#include "app/train_resume.h"

snn_module *train_eval_model(const train_state *run)
{
    return run->ema ? snn_ema_model(run->ema) : run->model;
}

/* train_checkpoint.h: the metadata of the run's position, then the file */
int save_checkpoint(const char *out_dir, const train_state *run, const train_options *o,
                    int64_t epoch, int64_t batches, const epoch_stats *st, int64_t images)
{
    char path[1024];
    const double test_accuracy = run->last_accuracy;
    snn_module *model = run->model;
    snn_metadata meta = {0};
    snn_metadata_set(&meta, "snn.train.epochs_done", "%lld",
                     (long long)(batches < 0 ? epoch + 1 : epoch));
    snn_metadata_set(&meta, "snn.train.dataset", "%s", o->dataset);
    snn_metadata_set(&meta, "snn.train.optimizer", "%s", o->optimizer);
    snn_metadata_set(&meta, "snn.train.activity_penalty", "%g", (double)o->activity_penalty);
    snn_event_split split = SNN_SPLIT_BY_NUMBER;
    snn_event_split_parse(o->split_by, &split); /* checked before the data were loaded */
    snn_metadata_set(&meta, "snn.train.frames", "%s,%d", snn_event_split_name(split),
                     o->downsample);
    if (snn_dataset_is_spike_audio(o->dataset)) /* shd / ssc: --max-time (0: 1 s), --binarize */
        snn_metadata_set(&meta, "snn.train.spike_frames", "%.9g,%d", (double)o->max_time,
                         (int)o->binarize);
    if (test_accuracy >= 0.0)
        snn_metadata_set(&meta, "snn.train.test_accuracy", "%.6f", test_accuracy);
    snn_metadata_set(&meta, "snn.model.rng", "%llu",
                     (unsigned long long)snn_model_rng_state(model));
    if (batches >= 0) {
        snn_metadata_set(&meta, "snn.train.batches_done", "%lld", (long long)batches);
        snn_metadata_set(&meta, "snn.train.position", "batch size %d, %lld images, seed %d",
                         o->batch_size * o->world_size, (long long)images, o->seed);
        snn_metadata_set(&meta, "snn.train.epoch_stats", "%.17g %lld %lld %lld %.17g",
                         st->loss_sum, (long long)st->correct, (long long)st->seen,
                         (long long)st->images, st->seconds);
    }
    /* the best evaluation so far survives a resume (%.17g: read back as the same double, so a
     * resumed run ties and breaks ties exactly as an unbroken one) */
    if (run->best_epoch > 0) {
        snn_metadata_set(&meta, "snn.train.best_epoch", "%lld", (long long)run->best_epoch);
        snn_metadata_set(&meta, "snn.train.best_accuracy", "%.17g", run->best_accuracy);
    }
    /* the training configuration, which --resume restores (app/train_resume.h) */
    if (train_flags_to_metadata(o, &meta) != SNN_OK) {
        fprintf(stderr, "snn-train: checkpoint: %s\n", snn_last_error());
        return 1;
    }
    if (run->ema) { /* the decay a resumed run must share, and the average's own random stream */
        char decay[32];
        snn_metadata_set(&meta, "snn.train.ema", "%s",
                         option_float_text(snn_ema_decay(run->ema), decay, sizeof decay));
        snn_metadata_set(&meta, "snn.ema.rng", "%llu",
                         (unsigned long long)snn_model_rng_state(snn_ema_model(run->ema)));
    }
    snprintf(path, sizeof path, "%s/checkpoint.safetensors", out_dir);
    if (run_lock_verify()) return 1;
    /* with --ema the average's tensors ride along under "ema." names */
    snn_param_list average = {0};
    snn_status saved = run->ema ? snn_ema_state(run->ema, &average) : SNN_OK;
    if (saved == SNN_OK) saved = snn_checkpoint_save_extra(path, model, run->opt, &average, &meta);
    snn_param_list_free(&average);
    if (saved != SNN_OK) {
        fprintf(stderr, "snn-train: checkpoint: %s\n", snn_last_error());
        return 1;
    }
    return 0;
}

int save_best(const char *out_dir, train_state *run, const train_options *o, int64_t epoch,
              double accuracy)
{
    char path[1024];
    snn_metadata meta = {0};
    snn_metadata_set(&meta, "snn.train.best_epoch", "%lld", (long long)epoch + 1);
    snn_metadata_set(&meta, "snn.train.best_accuracy", "%.17g", accuracy);
    snn_metadata_set(&meta, "snn.train.dataset", "%s", o->dataset);
    snn_event_split split = SNN_SPLIT_BY_NUMBER;
    snn_event_split_parse(o->split_by, &split);
    snn_metadata_set(&meta, "snn.train.frames", "%s,%d", snn_event_split_name(split),
                     o->downsample);
    if (snn_dataset_is_spike_audio(o->dataset)) /* shd / ssc: --max-time (0: 1 s), --binarize */
        snn_metadata_set(&meta, "snn.train.spike_frames", "%.9g,%d", (double)o->max_time,
                         (int)o->binarize);
    /* snn-sparse's CSV names the penalty the weights were trained under */
    snn_metadata_set(&meta, "snn.train.activity_penalty", "%g", (double)o->activity_penalty);
    char decay[32];
    if (run->ema)
        snn_metadata_set(&meta, "snn.train.weights", "moving average (--ema %s)",
                         option_float_text(snn_ema_decay(run->ema), decay, sizeof decay));
    else
        snn_metadata_set(&meta, "snn.train.weights", "trained");
    snprintf(path, sizeof path, "%s/best.safetensors", out_dir);
    if (run_lock_verify()) return 1;
    if (snn_checkpoint_save(path, train_eval_model(run), NULL, &meta) != SNN_OK) {
        fprintf(stderr, "snn-train: best: %s\n", snn_last_error());
        return 1;
    }
    run->best_epoch = epoch + 1;
    run->best_accuracy = accuracy;
    return 0;
}

void train_out_dir(const train_options *o, char *buf, size_t size)
{
    if (o->out) {
        snprintf(buf, size, "%s", o->out);
    } else if (o->resume) {
        const char *slash = strrchr(o->resume, '/');
        if (!slash) snprintf(buf, size, ".");
        else if (slash == o->resume) snprintf(buf, size, "/");
        else snprintf(buf, size, "%.*s", (int)(slash - o->resume), o->resume);
    } else {
        snprintf(buf, size, "runs/%s-%s", o->dataset, o->model);
    }
}

int train_out_check(const char *out_dir, const train_options *o)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/checkpoint.safetensors", out_dir);
    if (o->resume || o->overwrite || access(path, F_OK) != 0) return 0;
    fprintf(stderr, "snn-train: %s%s holds the checkpoint of another run; a new run would "
            "replace it, its best.safetensors and its metrics\nhint: continue that run with "
            "--resume %s, start over in this folder with --overwrite, or give another --out\n",
            o->out ? "--out " : "the output folder ", out_dir, path);
    return 2;
}

int stop_on_signal(const char *out_dir, const train_state *run, const train_options *o,
                   int64_t epoch, const epoch_stats *st, int64_t images, int64_t steps_per_epoch,
                   int64_t steps_at_start)
{
    snn_optimizer *opt = run->opt;
    const char *sig = run_signal_name(run_stop_signal);
    char path[1024];
    snprintf(path, sizeof path, "%s/checkpoint.safetensors", out_dir);
    if (snn_optimizer_steps(opt) == steps_at_start) {
        fprintf(stderr, "\nsnn-train: %s: stopped before the first step of this run; nothing new "
                "to save%s%s\n", sig, o->resume ? ", continue with --resume " : "",
                o->resume ? o->resume : "");
        return RUN_EXIT_STOPPED;
    }
    if (save_checkpoint(out_dir, run, o, epoch, st->batches, st, images)) return 1;
    if (st->batches < steps_per_epoch)
        fprintf(stderr, "\nsnn-train: %s: stopped in epoch %lld after batch %lld of %lld (step "
                "%lld); checkpoint saved\n", sig, (long long)epoch + 1, (long long)st->batches,
                (long long)steps_per_epoch, (long long)snn_optimizer_steps(opt));
    else
        fprintf(stderr, "\nsnn-train: %s: stopped after training epoch %lld, before its evaluation "
                "(step %lld); checkpoint saved\n", sig, (long long)epoch + 1,
                (long long)snn_optimizer_steps(opt));
    fprintf(stderr, "snn-train: continue with --resume %s (it restores the training flags)\n",
            path);
    return RUN_EXIT_STOPPED;
}

int train_resume_read(train_options *o, snn_metadata *meta, snn_model_config *config,
                      train_start *start)
{
    if (snn_checkpoint_read_metadata(o->resume, meta) != SNN_OK ||
        snn_model_config_from_metadata(meta, config) != SNN_OK) {
        fprintf(stderr, "snn-train: --resume: %s\n", snn_last_error());
        return 1;
    }
    const char *e = snn_metadata_get(meta, "snn.train.epochs_done");
    if (!e) {
        fprintf(stderr, "snn-train: --resume %s: not a training checkpoint (no "
                "snn.train.epochs_done)\n", o->resume);
        return 2;
    }
    start->epoch = strtoll(e, NULL, 10);
    /* the flags it was trained with (optimizer, --ema, ...) are checked by train_resume_flags */
    start->has_ema = snn_metadata_get(meta, "snn.train.ema") != NULL;
    const char *acc = snn_metadata_get(meta, "snn.train.test_accuracy");
    if (acc) start->accuracy = strtod(acc, NULL);
    const char *best = snn_metadata_get(meta, "snn.train.best_epoch");
    const char *best_acc = snn_metadata_get(meta, "snn.train.best_accuracy");
    if (best && best_acc) {
        start->best_epoch = strtoll(best, NULL, 10);
        start->best_accuracy = strtod(best_acc, NULL);
    }
    const char *b = snn_metadata_get(meta, "snn.train.batches_done");
    const char *stats = snn_metadata_get(meta, "snn.train.epoch_stats");
    epoch_stats *r = &start->resumed;
    long long correct = 0, seen = 0, images = 0;
    if (b && (!stats || sscanf(stats, "%lg %lld %lld %lld %lg", &r->loss_sum, &correct, &seen,
                               &images, &r->seconds) != 5)) {
        fprintf(stderr, "snn-train: --resume %s: bad snn.train.epoch_stats in a mid-epoch "
                "checkpoint\n", o->resume);
        return 2;
    }
    if (b) start->batch = strtoll(b, NULL, 10);
    r->correct = correct, r->seen = seen, r->images = images;
    return 0;
}
