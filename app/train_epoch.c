/*
 * train_epoch.c - one training epoch of snn-train (app/train_epoch.h): the loop over batches
 * with the forward, the loss (cross-entropy, MSE or TET, plus the activity penalty), backward
 * in the run's train mode (BPTT, online SLTT through app/train_online.c, time checkpoints
 * through app/train_segments.c, or a data-parallel rank's), --clip-grad, the optimizer and
 * --ema steps, the progress line, --step-log, --checkpoint-every, and the stops: a loss that
 * is not finite, a signal (app/run_signals.h), a checkpoint that could not be written.
 */
#define _DEFAULT_SOURCE /* isatty */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "app/program.h"
#include "app/run_signals.h"
#include "app/train_dist.h"
#include "app/train_epoch.h"
#include "app/train_online.h"
#include "app/train_segments.h"
#include "snn.h"

/* ---- one training epoch ------------------------------------------------------------------- */

/* done / total: batches of this run's part of the epoch; images_before: images of the epoch
 * that an earlier run did (a resumed epoch), left out of the rate */
static void progress(const char *phase, int64_t epoch, int epochs, int64_t done, int64_t total,
                     const epoch_stats *s, double elapsed, bool tty, bool final, int64_t images_before)
{
    double rate = elapsed > 0 ? (double)(s->images - images_before) / elapsed : 0.0;
    double eta = done > 0 ? elapsed * (double)(total - done) / (double)done : 0.0;
    double loss = s->seen ? s->loss_sum / (double)s->seen : (double)NAN;
    double acc = s->seen ? 100.0 * (double)s->correct / (double)s->seen : (double)NAN;
    char clip[96] = ""; /* --clip-grad: the mean norm before clipping, how often it cut, and
                         * the steps left out for a gradient that was not finite */
    char skipped[40] = "";
    if (s->skipped)
        snprintf(skipped, sizeof skipped, ", %lld skipped: not finite", (long long)s->skipped);
    if (s->grad_norms || s->skipped)
        snprintf(clip, sizeof clip, " |grad| %.3g (%.0f%% clipped%s)",
                 s->grad_norms ? s->grad_norm_sum / (double)s->grad_norms : 0.0,
                 s->grad_norms ? 100.0 * (double)s->clipped / (double)s->grad_norms : 0.0, skipped);
    if (tty) {
        int filled = total ? (int)(30 * done / total) : 30;
        fprintf(stderr, "\r%s %lld/%d [%.*s%*s] %3d%% loss %.4f acc %5.2f%%%s %6.0f img/s ETA %02d:%02d ",
                phase, (long long)epoch + 1, epochs, filled, "==============================",
                30 - filled, "", total ? (int)(100 * done / total) : 100, loss, acc, clip, rate,
                (int)eta / 60, (int)eta % 60);
        if (final) fputc('\n', stderr);
    } else {
        fprintf(stderr, "%s %lld/%d batch %lld/%lld loss %.4f acc %.2f%%%s %.0f img/s ETA %ds\n", phase,
                (long long)epoch + 1, epochs, (long long)done, (long long)total, loss, acc, clip, rate,
                (int)eta);
    }
}

/* --step-log: one line "step,loss,lr" each time the loss is read (rank 0) */
static void append_step_log(const char *path, int64_t step, float loss, float lr)
{
    FILE *f = fopen(path, "a");
    if (!f) return;
    fprintf(f, "%lld,%.9g,%.9g\n", (long long)step, (double)loss, (double)lr);
    fclose(f);
}

/* Whether a signal asks the run to stop (app/run_signals.h): at once in a one-process run; in a
 * data-parallel run only where the ranks agreed to (`agreed`), so that all stop together. */
static bool stopping(const snn_dist *dist, bool agreed) { return dist ? agreed : run_stop_requested(); }

snn_status train_epoch(train_state *run, const snn_schedule *schedule, snn_loader *loader,
                       const train_options *o, snn_device device, snn_dist *dist, int64_t epoch,
                       epoch_stats *st, const char *out_dir, int64_t images)
{
    snn_module *model = run->model;
    snn_optimizer *opt = run->opt;
    bool tty = isatty(STDERR_FILENO), rank0 = train_dist_rank0(dist);
    int64_t total = snn_loader_num_batches(loader), done = 0, at_epoch = 0;
    snn_loader_position(loader, &at_epoch, &done); /* > 0 when resuming mid-epoch */
    const int64_t first = done, images_before = st->images;
    int64_t next_plain = total / 10 > 0 ? total / 10 : 1;
    next_plain *= done / next_plain + 1;
    const snn_model_config *config = snn_model_config_of(model);
    bool mse = strcmp(o->loss, "mse") == 0, tet = strcmp(o->loss, "tet") == 0;
    const bool online = train_options_online(o);
    const train_online_options online_options = {.backward_steps = o->sltt_k,
                                                 .label_smoothing = o->label_smoothing,
                                                 .seed = (uint64_t)o->seed,
                                                 .traces = strcmp(o->train_mode, "ottt") == 0};
    const train_segments_options segment_options = {.segment = o->time_checkpoint,
                                                    .label_smoothing = o->label_smoothing};
    double start = now_seconds(), start0 = start, last_draw = 0.0;
    float *pred = malloc((size_t)o->batch_size * sizeof *pred);
    snn_status status = SNN_OK;
    snn_batch batch;
    if (!pred) {
        fprintf(stderr, "snn-train: out of host memory for %d predictions\n", o->batch_size);
        return SNN_ERR_MEMORY;
    }
    snn_module_train(model, true);
    /* A signal stops the loop after the step it found running. The ranks of a data-parallel run
     * must all stop at the same step: they agree at each loss read (train_dist_read). */
    bool agreed_stop = false;
    while (!stopping(dist, agreed_stop) && snn_loader_next(loader, &batch)) {
        snn_optimizer_set_lr(opt, snn_schedule_lr(schedule, snn_optimizer_steps(opt)));
        snn_step_begin();
        snn_module_zero_grad(model);
        snn_tensor *x, *y, *loss = NULL;
        status = snn_batch_to_device(&batch, device, &x, &y);
        snn_tensor *out = NULL;
        if (status == SNN_OK && online) {
            /* SLTT: forward and backward one time step at a time (app/train_online.c) */
            status = train_online_step(model, x, y, snn_optimizer_steps(opt), &online_options,
                                       &out, &loss);
        } else if (status == SNN_OK && o->time_checkpoint > 0) {
            /* BPTT in segments recomputed in backward (app/train_segments.c) */
            status = train_segments_step(model, x, y, &segment_options, &out, &loss);
        } else if (status == SNN_OK && tet) {
            /* TET: the loss sees every step's output; predictions are still their mean over T */
            snn_tensor *steps = snn_model_forward_steps(model, x); // (T, N, classes)
            out = steps ? snn_mean(steps, 0, false) : NULL;
            if (out) loss = snn_tet_loss(steps, y, o->tet_lambda, SNN_TET_PHI, o->label_smoothing);
        } else if (status == SNN_OK) {
            out = snn_module_forward(model, x); // (N, classes), the mean over T
            if (out && mse) loss = snn_mse_loss(out, snn_one_hot(y, config->classes));
            else if (out) loss = snn_cross_entropy_smooth(out, y, o->label_smoothing);
        }
        /* --activity-penalty: loss + LAMBDA * penalty is what is minimised; loss alone is logged */
        snn_tensor *penalty = loss && o->activity_penalty > 0.0f ? snn_activity_penalty(model) : NULL;
        snn_tensor *objective = penalty ? snn_add(loss, snn_scale(penalty, o->activity_penalty)) : loss;
        if (!objective) loss = NULL;
        if (online || o->time_checkpoint > 0) {
            /* backward ran inside train_online_step / train_segments_step */
        } else if (loss) {
            status = dist ? snn_dist_backward(dist, objective, batch.count, batch.global_count)
                          : snn_backward(objective);
        } else {
            status = snn_last_status();
        }
        /* Reading the loss synchronises with the device: only every log_every steps. */
        bool read = status == SNN_OK && (done % o->log_every == 0 || done + 1 == total);
        if (read) {
            float value = snn_tensor_item(loss);
            snn_tensor *am = snn_argmax(out);
            snn_tensor_copy_to_host(am, pred);
            int64_t correct = 0, count = batch.count;
            for (int i = 0; i < batch.count; i++) correct += pred[i] == batch.labels[i];
            agreed_stop = run_stop_requested();
            status = train_dist_read(dist, &value, &correct, &count, &agreed_stop); /* global */
            if (status == SNN_OK && !isfinite(value)) {
                st->diverged = true;
                snn_step_end();
                if (rank0)
                    fprintf(stderr, "\nsnn-train: the loss became %g at epoch %lld, batch %lld; stopping. "
                            "The last checkpoint is kept as it was.\nhint: lower --lr (now %g) or use "
                            "--schedule cosine --warmup 200\n", (double)value, (long long)epoch + 1,
                            (long long)done, (double)snn_optimizer_lr(opt));
                break;
            }
            st->correct += correct;
            st->loss_sum += (double)value * (double)count;
            st->seen += count;
            if (penalty) st->penalty_sum += (double)snn_tensor_item(penalty) * (double)count; /* this rank's */
            if (o->step_log && rank0)
                append_step_log(o->step_log, snn_optimizer_steps(opt), value, snn_optimizer_lr(opt));
        }
        /* --clip-grad: after backward (and a data-parallel run's all-reduce: every rank sees the
         * same sums and clips alike), in every train mode; reads the norm back, one host sync.
         * A gradient that overflowed (through hundreds of steps of a recurrent layer) has no
         * finite norm and no direction worth a step: the step is left out, as a loss scaler
         * leaves out an fp16 step that overflowed, and counted; the weights stay finite */
        bool take_step = true;
        if (status == SNN_OK && o->clip_grad > 0.0f) {
            float norm = 0.0f;
            status = snn_clip_grad_norm(model, o->clip_grad, &norm);
            take_step = isfinite(norm);
            if (take_step) {
                st->grad_norm_sum += (double)norm;
                st->grad_norms++;
                st->clipped += o->clip_grad / (norm + 1e-6f) < 1.0f;
            } else {
                st->skipped++;
            }
        }
        if (status == SNN_OK && take_step) status = snn_optimizer_step(opt);
        /* --ema: the average follows every step (every rank alike: their weights are equal) */
        if (status == SNN_OK && take_step && run->ema)
            status = snn_ema_update(run->ema, model, snn_optimizer_steps(opt));
        snn_step_end();
        if (status == SNN_OK) status = train_dist_after_step(dist, model);
        if (status != SNN_OK) break;
        if (o->explain && rank0 && snn_optimizer_steps(opt) == 1) { /* the traced first step */
            if (tty) fputc('\n', stderr);
            status = snn_model_explain(model, stderr);
            if (status != SNN_OK) break;
        }
        st->images += batch.global_count;
        done++;
        st->batches = done;
        double elapsed = now_seconds() - start0;
        if (rank0 && (tty ? elapsed - last_draw > 0.25 : done >= next_plain)) {
            progress("train", epoch, o->epochs, done - first, total - first, st, elapsed, tty, false,
                     images_before);
            last_draw = elapsed;
            if (!tty) next_plain += total / 10 > 0 ? total / 10 : 1;
        }
        if (rank0 && o->checkpoint_every && snn_optimizer_steps(opt) % o->checkpoint_every == 0 &&
            done < total && !stopping(dist, agreed_stop)) {
            st->seconds += now_seconds() - start, start = now_seconds();
            if (save_checkpoint(out_dir, run, o, epoch, done, st, images)) {
                st->save_failed = true;
                break;
            }
        }
    }
    snn_synchronize(device);
    st->seconds += now_seconds() - start;
    st->batches = done;
    if (status == SNN_OK && !st->diverged && !st->save_failed && !stopping(dist, agreed_stop) &&
        rank0)
        progress("train", epoch, o->epochs, done - first, total - first, st, now_seconds() - start0,
                 tty, true, images_before);
    free(pred);
    return status;
}
