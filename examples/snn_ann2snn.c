/*
 * snn_ann2snn.c - snn-ann2snn: train (or load) a quantized ANN, convert it to an ST-BIF spiking
 * network (snn_ann_to_snn, nn/ann2snn.c) and show that the SNN reproduces it as T grows.
 *
 *   build/bin/snn-ann2snn                          # Fashion-MNIST CNN, 4 levels, CPU
 *   build/bin/snn-ann2snn --relu-baseline          # also train the ReLU ANN: what quantizing costs
 *   build/bin/snn-ann2snn --model resnet18 --dataset cifar10 --data runs/fmnist-cifar --device cuda
 *   build/bin/snn-ann2snn --checkpoint runs/ann2snn-fashion-mnist-cnn/qann.safetensors
 *
 * 1. trains the QANN (qclip activations with --levels levels and learned steps; Adam with a
 *    cosine schedule) and saves it, or loads one (from here or snn-train --neuron qclip);
 *    with --relu-baseline trains the same model with ReLU activations too;
 * 2. evaluates the QANN on the test split, keeping every logit;
 * 3. converts it and runs the SNN for each T of --steps and for the bound T* the conversion
 *    derives (docs/ann2snn.md): accuracy, agreement of its predictions with the QANN's, the
 *    share of images whose summed logits equal the QANN's (to 1e-5), the largest |summed logit -
 *    QANN logit|, spikes per neuron per image; writes results.csv and accuracy_vs_T.svg to --out;
 * 4. sparsifies the SNN at T* (snn_sparsify; its spikes are -theta, 0 and +theta) and checks that
 *    the sparse SNN predicts exactly what the dense one does.
 * Before any of it runs, the memory of each part - the QANN's training step, the SNN's
 * evaluation at the largest T, the sparse pass at T* - is estimated (nn/model_memory.c,
 * sparse/sparse_memory.c) against what the device has: a size that cannot fit is refused with
 * both numbers and the flag to change, and the sparse pass calibrates with as many images per
 * forward as fit. Each part's step arena is given its estimated size up front.
 * Lines starting with "check:" state each target and PASS or MISS.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "app/evaluate.h"
#include "app/options.h"
#include "app/program.h"
#include "app/run_memory.h"
#include "snn.h"

typedef struct options {
    const char *dataset, *data, *model, *device, *out, *checkpoint, *steps;
    int levels, epochs, batch_size, width, hidden, seed, threads, limit_train, limit_test, augment;
    float lr;
    bool symmetric, relu_baseline, no_sparse;
} options;

/* ---- training ----------------------------------------------------------------------------- */

/* Adam with a cosine schedule, cross-entropy on the logits; one progress line per epoch.
 * Returns 0, or 1 with a message printed. */
static int train(snn_module *model, snn_loader *loader, const options *o, snn_device device,
                 const char *what)
{
    snn_optimizer *opt = snn_adam_new(model, o->lr, 0.0f, false);
    if (!opt) {
        fprintf(stderr, "snn-ann2snn: optimizer: %s\n", snn_last_error());
        return 1;
    }
    const int64_t per_epoch = snn_loader_num_batches(loader);
    const snn_schedule schedule = {.kind = SNN_SCHEDULE_COSINE, .base_lr = o->lr,
                                   .total_steps = per_epoch * o->epochs};
    const int log_every = device == SNN_CUDA ? 20 : 1; /* reading the loss syncs the GPU */
    float *pred = malloc((size_t)o->batch_size * sizeof *pred);
    snn_status st = SNN_OK;
    bool diverged = false;
    snn_module_train(model, true);
    for (int epoch = 0; pred && st == SNN_OK && !diverged && epoch < o->epochs; epoch++) {
        double loss_sum = 0.0, t0 = now_seconds();
        int64_t seen = 0, correct = 0, done = 0;
        snn_batch batch;
        while (st == SNN_OK && !diverged && snn_loader_next(loader, &batch)) {
            snn_optimizer_set_lr(opt, snn_schedule_lr(&schedule, snn_optimizer_steps(opt)));
            snn_step_begin();
            snn_module_zero_grad(model);
            snn_tensor *x, *y, *out = NULL, *loss = NULL;
            st = snn_batch_to_device(&batch, device, &x, &y);
            if (st == SNN_OK) out = snn_module_forward(model, x);
            if (out) loss = snn_cross_entropy(out, y);
            st = loss ? snn_backward(loss) : snn_last_status();
            if (st == SNN_OK && done++ % log_every == 0) {
                float value = snn_tensor_item(loss);
                if (!isfinite(value)) {
                    fprintf(stderr, "snn-ann2snn: %s: the loss became %g; hint: lower --lr\n", what,
                            (double)value);
                    diverged = true;
                }
                snn_tensor_copy_to_host(snn_argmax(out), pred);
                for (int i = 0; i < batch.count; i++) correct += pred[i] == batch.labels[i];
                loss_sum += (double)value * batch.count;
                seen += batch.count;
            }
            if (st == SNN_OK && !diverged) st = snn_optimizer_step(opt);
            snn_step_end();
        }
        snn_synchronize(device);
        if (st == SNN_OK && !diverged)
            fprintf(stderr, "%s epoch %d/%d: train loss %.4f acc %.2f%% (%.1f s)\n", what,
                    epoch + 1, o->epochs, loss_sum / (double)(seen ? seen : 1),
                    100.0 * (double)correct / (double)(seen ? seen : 1), now_seconds() - t0);
    }
    if (!pred) fprintf(stderr, "snn-ann2snn: out of host memory\n");
    else if (st != SNN_OK) fprintf(stderr, "snn-ann2snn: %s training: %s\n", what, snn_last_error());
    free(pred);
    snn_optimizer_free(opt);
    return !pred || st != SNN_OK || diverged;
}

/* ---- evaluation --------------------------------------------------------------------------- */

typedef struct set_run {
    float *logits;            /* (count, classes) */
    int *pred;                /* (count) */
    int64_t count, correct;
    double seconds;
    double spikes, neuron_steps; /* nonzero neuron outputs and neuron-steps, over the set */
} set_run;

/* The model (eval mode, no tape) over the whole loader: every logit and prediction. */
static snn_status run_set(snn_module *model, snn_loader *loader, snn_device device, int classes,
                          set_run *r)
{
    snn_module *layers[MAX_LAYERS];
    const char *names[MAX_LAYERS];
    const int n_layers = snn_model_neuron_layers(model, layers, names, MAX_LAYERS);
    snn_module_train(model, false);
    snn_no_grad_begin();
    snn_status st = SNN_OK;
    snn_batch batch;
    r->count = r->correct = 0;
    r->spikes = r->neuron_steps = 0.0;
    const double t0 = now_seconds();
    while (st == SNN_OK && snn_loader_next(loader, &batch)) {
        snn_step_begin();
        snn_tensor *x, *y, *logits = NULL;
        st = snn_batch_to_device(&batch, device, &x, &y);
        if (st == SNN_OK && !(logits = snn_module_forward(model, x))) st = snn_last_status();
        if (st == SNN_OK) st = snn_tensor_copy_to_host(logits, r->logits + r->count * classes);
        for (int l = 0; st == SNN_OK && l < n_layers; l++) {
            snn_tensor *s = snn_neuron_layer_last_spikes(layers[l]);
            const float rate = snn_neuron_layer_firing_rate(layers[l]);
            if (s && rate >= 0.0f) {
                r->spikes += (double)rate * (double)s->numel;
                r->neuron_steps += (double)s->numel;
            }
        }
        snn_step_end();
        for (int i = 0; st == SNN_OK && i < batch.count; i++) {
            const float *row = r->logits + (r->count + i) * classes;
            int best = 0;
            for (int k = 1; k < classes; k++)
                if (row[k] > row[best]) best = k;
            r->pred[r->count + i] = best;
            r->correct += best == (int)batch.labels[i];
        }
        if (st == SNN_OK) r->count += batch.count;
    }
    snn_synchronize(device);
    r->seconds = now_seconds() - t0;
    snn_no_grad_end();
    return st;
}

static double percent(int64_t a, int64_t b) { return b ? 100.0 * (double)a / (double)b : 0.0; }

/* One image's summed SNN logits equal its QANN logits: within 1e-5 of the largest |QANN logit|
 * (at least 1), the float rounding of summing the same terms in another order. An image off by
 * more has had some neuron's pre-activation land on the other side of a level boundary. */
static bool logits_equal(const float *snn, const float *qann, int classes)
{
    double scale = 1.0;
    for (int k = 0; k < classes; k++) scale = fmax(scale, fabs((double)qann[k]));
    for (int k = 0; k < classes; k++)
        if (!(fabs((double)snn[k] - (double)qann[k]) <= 1e-5 * scale)) return false;
    return true;
}

/* ---- memory ------------------------------------------------------------------------------- */

/* The configuration of the network snn_ann_to_snn makes from a QANN of configuration `q`, run at
 * T steps (what nn/ann2snn.c sets), for the memory estimates. */
static snn_model_config converted_config(const snn_model_config *q, int T)
{
    snn_model_config c = *q;
    c.neuron = snn_neuron_config_default(SNN_NEURON_STBIF);
    c.neuron.levels = q->neuron.levels;
    c.neuron.symmetric = q->neuron.symmetric;
    c.neuron.surrogate = q->neuron.surrogate;
    c.encoding = SNN_ENCODING_FIRST_STEP;
    c.time_steps = T;
    return c;
}

/* Before anything long runs: the QANN's training (unless loaded), the SNN's evaluation at the
 * largest T and the sparse pass at T* must fit the device (the QANN is allocated already).
 * On a long T the last two are what is large: a ResNet-18 at T = 64 and batch 64 holds ~29 GB
 * in one evaluation step. Sets *calib_images to the images per calibration forward that fit.
 * Returns 0, or 2 with the refusal printed. */
static int check_memory(const options *o, snn_device device, const snn_model_config *qc,
                        int T_max, int bound, const snn_dataset *train_set,
                        const snn_dataset *test, int *calib_images)
{
    const double image_bytes = 4.0 * ((double)test->channels * test->height * test->width + 1.0);
    const double per_image = 2.0 * 2.0 * image_bytes; /* two loaders, two batch slots each */
    const double data = per_image * o->batch_size;
    char flags[96];
    snprintf(flags, sizeof flags, qc->kind == SNN_MODEL_SPIKING_CNN ? "--width or --hidden"
                                                                     : "--width");
    snn_memory_estimate e;
    if (!o->checkpoint) { /* Adam: two states per weight */
        run_memory_request train = {"snn-ann2snn", "training the QANN", flags, *qc,
                                    o->batch_size, train_set->count, device, true, 2, data, 0.0,
                                    false, false, SNN_CARRY_NONE, 0, false};
        if (snn_model_memory_estimate(qc, 1, device, false, 0, &e) == SNN_OK)
            train.held = e.parameters; /* the QANN exists */
        if (run_memory_check(&train, per_image, &e)) return 2;
    }
    run_memory_request eval = {"snn-ann2snn", "evaluating the converted SNN",
                               "the largest of --steps (T* is always run)",
                               converted_config(qc, T_max), o->batch_size, test->count, device,
                               false, 0, data, 0.0, false, false, SNN_CARRY_NONE, 0, false};
    if (run_memory_check(&eval, per_image, &e)) return 2;
    *calib_images = 0;
    if (o->no_sparse) return 0;
    const int batch = test->count < o->batch_size ? (int)test->count : o->batch_size;
    const snn_model_config at_bound = converted_config(qc, bound);
    *calib_images = run_memory_sparse_images("snn-ann2snn", &at_bound, batch, device, 0.0,
                                             "--no-sparse skips the sparse pass (T* comes from "
                                             "the model's depth and --levels)");
    return *calib_images > 0 ? 0 : 2;
}

/* The step arena of `device` in one block of the estimated step of `config` at `batch`
 * (evaluation), or of the sparse pass when `sparse`: the step then needs no growth (on CUDA
 * no block added beside the one held). The check above made sure it fits. */
static snn_status reserve_step(const snn_model_config *config, int batch, snn_device device,
                               bool sparse)
{
    snn_memory_estimate e;
    snn_status st = sparse ? snn_sparsify_memory_estimate(config, batch, device, &e)
                           : snn_model_memory_estimate(config, batch, device, false, 0, &e);
    return st == SNN_OK ? snn_step_reserve(device, (size_t)e.step) : st;
}

/* ---- main --------------------------------------------------------------------------------- */

static int fail(const char *what)
{
    fprintf(stderr, "snn-ann2snn: %s: %s\n", what, snn_last_error());
    return 1;
}

/* "1,2,4" -> sorted unique values in 1..1024, plus `extra`; returns the count. */
static int parse_steps(const char *list, int extra, int *out, int cap)
{
    int n = 0;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", list);
    for (char *tok = strtok(buf, ","); tok && n < cap - 1; tok = strtok(NULL, ",")) {
        int v = atoi(tok);
        if (v < 1 || v > 1024) return -1;
        out[n++] = v;
    }
    if (extra >= 1 && extra <= 1024) out[n++] = extra;
    for (int i = 1; i < n; i++) /* insertion sort, then drop repeats */
        for (int j = i; j > 0 && out[j - 1] > out[j]; j--) {
            int t = out[j];
            out[j] = out[j - 1], out[j - 1] = t;
        }
    int m = 0;
    for (int i = 0; i < n; i++)
        if (!m || out[m - 1] != out[i]) out[m++] = out[i];
    return m;
}

/* Steps 1-4 of the header on loaded data; returns the exit code, having printed why when not
 * 0. Frees what it allocates on every path. */
static int compare(const options *o, snn_device device, snn_model_kind kind,
                   const snn_dataset *train_set, const snn_dataset *test, snn_loader *train_loader,
                   snn_loader *test_loader, const char *out_dir)
{
    char path[1024];
    /* 1. the QANN (and the ReLU ANN) */
    snn_model_config config = snn_model_config_default(kind);
    config.in_channels = train_set->channels, config.height = train_set->height;
    config.width = train_set->width, config.classes = train_set->classes;
    config.time_steps = 1;
    config.hidden = o->hidden;
    if (o->width) config.width_base = o->width;
    config.seed = (uint64_t)o->seed;
    config.neuron = snn_neuron_config_default(SNN_NEURON_QCLIP);
    config.neuron.levels = o->levels;
    config.neuron.symmetric = o->symmetric;
    snn_rng rng;
    snn_rng_seed(&rng, (uint64_t)o->seed);
    snn_module *qann = NULL;
    if (o->checkpoint) {
        qann = snn_checkpoint_load_model(o->checkpoint, device, NULL);
        if (!qann) return fail("--checkpoint");
        config = *snn_model_config_of(qann);
        snn_module *probe = NULL;
        if (config.neuron.kind != SNN_NEURON_QCLIP && !(probe = snn_ann_to_snn(qann, 1))) {
            /* the conversion's own refusal says what the model is and what to train instead */
            fprintf(stderr, "snn-ann2snn: --checkpoint %s: %s\n", o->checkpoint, snn_last_error());
            snn_module_free(qann);
            return 2;
        }
        snn_module_free(probe);
        if (config.in_channels != test->channels || config.height != test->height ||
            config.width != test->width || config.classes != test->classes) {
            fprintf(stderr, "snn-ann2snn: --checkpoint %s is a QANN for %dx%dx%d images and %d "
                    "classes, not for %s (%dx%dx%d, %d classes)\n", o->checkpoint,
                    config.in_channels, config.height, config.width, config.classes, o->dataset,
                    test->channels, test->height, test->width, test->classes);
            snn_module_free(qann);
            return 2;
        }
    }
    if (!qann) {
        qann = snn_model_new(&config, &rng);
        if (!qann || snn_module_to(qann, device) != SNN_OK) {
            snn_module_free(qann);
            return fail("model");
        }
    }
    /* the T* of this model and the list of T to run; then what they need, before training */
    const int bound = snn_ann_to_snn_time_bound(qann);
    int Ts[32];
    const int n_T = parse_steps(o->steps, bound, Ts, 32); /* >= 1: checked in main */
    int calib_images = 0;
    int code = check_memory(o, device, &config, Ts[n_T - 1], bound, train_set, test, &calib_images);
    if (code) {
        snn_module_free(qann);
        return code;
    }
    /* the images one step holds: a batch, or the whole split when it is smaller */
    const int train_batch = train_set->count < o->batch_size ? (int)train_set->count
                                                             : o->batch_size;
    const int test_batch = test->count < o->batch_size ? (int)test->count : o->batch_size;
    if (!o->checkpoint) {
        snn_memory_estimate e;
        if (snn_model_memory_estimate(&config, train_batch, device, true, 2, &e) != SNN_OK ||
            snn_step_reserve(device, (size_t)(e.step - e.gradient_pool)) != SNN_OK) {
            snn_module_free(qann);
            return fail("memory");
        }
        fprintf(stderr, "snn-ann2snn: training the QANN: %s, %d levels%s, on %s (%lld images), %s\n",
                o->model, o->levels, o->symmetric ? " (symmetric)" : "", o->dataset,
                (long long)train_set->count, snn_device_name(device));
        if (train(qann, train_loader, o, device, "QANN")) {
            snn_module_free(qann);
            return 3;
        }
        snn_metadata meta = {0};
        snn_metadata_set(&meta, "snn.train.dataset", "%s", o->dataset);
        snn_metadata_set(&meta, "snn.train.epochs_done", "%d", o->epochs);
        snprintf(path, sizeof path, "%s/qann.safetensors", out_dir);
        if (snn_checkpoint_save(path, qann, NULL, &meta) != SNN_OK) {
            snn_module_free(qann);
            return fail("checkpoint");
        }
    }
    const int classes = config.classes;
    const int64_t n_test = test->count;
    set_run q = {0}, s = {0};
    q.logits = calloc((size_t)(n_test * classes), sizeof(float));
    s.logits = calloc((size_t)(n_test * classes), sizeof(float));
    q.pred = calloc((size_t)n_test, sizeof(int));
    s.pred = calloc((size_t)n_test, sizeof(int));
    int *dense_pred = calloc((size_t)n_test, sizeof(int));
    snn_module *relu = NULL, *snn = NULL;
    int exit_code = 0;
    if (!q.logits || !s.logits || !q.pred || !s.pred || !dense_pred) {
        fprintf(stderr, "snn-ann2snn: out of host memory\n");
        exit_code = 1;
        goto done;
    }

    double relu_acc = -1.0;
    if (o->relu_baseline) {
        snn_model_config rc = config;
        rc.neuron = snn_neuron_config_default(SNN_NEURON_RELU);
        relu = snn_model_new(&rc, &rng);
        if (!relu || snn_module_to(relu, device) != SNN_OK) {
            exit_code = fail("relu model");
            goto done;
        }
        if (train(relu, train_loader, o, device, "ReLU ANN")) {
            exit_code = 3;
            goto done;
        }
        if (run_set(relu, test_loader, device, classes, &s) != SNN_OK) {
            exit_code = fail("evaluation");
            goto done;
        }
        relu_acc = percent(s.correct, s.count);
        snn_module_free(relu);
        relu = NULL;
    }

    /* 2. the QANN on the test split */
    if (run_set(qann, test_loader, device, classes, &q) != SNN_OK) {
        exit_code = fail("evaluation");
        goto done;
    }
    const double q_acc = percent(q.correct, q.count);
    printf("snn-ann2snn: %s on %s, %d levels%s, %s, %lld test images\n", o->model, o->dataset,
           config.neuron.levels, config.neuron.symmetric ? " symmetric" : "", snn_device_name(device),
           (long long)q.count);
    if (relu_acc >= 0.0)
        printf("ReLU ANN accuracy %.2f%%\n", relu_acc);
    printf("QANN accuracy %.2f%% (%.2f s)\n", q_acc, q.seconds);
    if (relu_acc >= 0.0)
        printf("check: QANN (%d levels) within 1 point of the ReLU ANN: %.2f vs %.2f: %s\n",
               config.neuron.levels, q_acc, relu_acc, relu_acc - q_acc <= 1.0 ? "PASS" : "MISS");

    /* 3. the SNN for each T */
    snn = snn_ann_to_snn(qann, Ts[0]);
    if (!snn) {
        exit_code = fail("conversion");
        goto done;
    }
    printf("converted: ST-BIF SNN; derived bound T* = %d steps\n\n", bound);
    printf("| T | SNN accuracy | agreement with QANN | logits exact | max abs(logit diff) | "
           "spikes / neuron | seconds |\n|---:|---:|---:|---:|---:|---:|---:|\n");
    snprintf(path, sizeof path, "%s/results.csv", out_dir);
    FILE *csv = fopen(path, "w");
    if (csv) fprintf(csv, "T,snn_accuracy,agreement,logits_exact,max_logit_diff,spikes_per_neuron,seconds,qann_accuracy\n");
    double xs[32], acc[32], agree[32], qline[32];
    double agree_bound = 0.0, exact_bound = 0.0;
    for (int i = 0; i < n_T && exit_code == 0; i++) {
        const snn_model_config at_T = converted_config(&config, Ts[i]);
        if (snn_model_set_time_steps(snn, Ts[i]) != SNN_OK ||
            reserve_step(&at_T, test_batch, device, false) != SNN_OK ||
            run_set(snn, test_loader, device, classes, &s) != SNN_OK) {
            exit_code = fail("SNN evaluation");
            break;
        }
        int64_t same = 0, exact = 0;
        double worst = 0.0;
        for (int64_t k = 0; k < s.count; k++) {
            same += s.pred[k] == q.pred[k];
            exact += logits_equal(s.logits + k * classes, q.logits + k * classes, classes);
        }
        for (int64_t k = 0; k < s.count * classes; k++) worst = fmax(worst, fabs((double)s.logits[k] - (double)q.logits[k]));
        const double per_neuron = s.neuron_steps > 0 ? s.spikes / s.neuron_steps * Ts[i] : 0.0;
        xs[i] = log2((double)Ts[i]);
        acc[i] = percent(s.correct, s.count);
        agree[i] = percent(same, s.count);
        const double exact_pct = percent(exact, s.count);
        qline[i] = q_acc;
        if (Ts[i] == bound) {
            agree_bound = agree[i];
            exact_bound = exact_pct;
            memcpy(dense_pred, s.pred, (size_t)s.count * sizeof *dense_pred);
        }
        printf("| %d%s | %.2f%% | %.2f%% | %.2f%% | %.3g | %.3f | %.1f |\n", Ts[i],
               Ts[i] == bound ? " (T*)" : "", acc[i], agree[i], exact_pct, worst, per_neuron, s.seconds);
        fflush(stdout);
        if (csv) fprintf(csv, "%d,%.4f,%.4f,%.4f,%.6g,%.4f,%.2f,%.4f\n", Ts[i], acc[i], agree[i],
                         exact_pct, worst, per_neuron, s.seconds, q_acc);
    }
    if (csv) fclose(csv);
    if (exit_code == 0) {
        printf("\ncheck: SNN at T* = %d predicts as the QANN on %.2f%% of the test set (target >= "
               "99.9%%): %s\n", bound, agree_bound, agree_bound >= 99.9 ? "PASS" : "MISS");
        printf("at T* = %d, %.2f%% of the images have every summed logit within 1e-5 of the "
               "QANN's (relative to the image's largest; the rest: a level flipped by rounding)\n",
               bound, exact_bound);
        snn_svg_series series[3] = {{"SNN accuracy", xs, acc, n_T}, {"QANN accuracy", xs, qline, n_T},
                                    {"SNN = QANN (%)", xs, agree, n_T}};
        char title[160];
        snprintf(title, sizeof title, "ST-BIF SNN vs its QANN: %s on %s, %d levels", o->model,
                 o->dataset, config.neuron.levels);
        snprintf(path, sizeof path, "%s/accuracy_vs_T.svg", out_dir);
        if (snn_svg_line_chart(path, title, "log2 T (time steps)", "test set (%)", series, 3) != SNN_OK)
            fprintf(stderr, "snn-ann2snn: %s\n", snn_last_error());
    }

    /* 4. the sparse SNN at T* */
    if (exit_code == 0 && !o->no_sparse) {
        snn_tensor *calib[8] = {0};
        int n_calib = 0;
        /* each calibration batch (or slice of calib_images of its images: check_memory) runs in
         * a step of its own, so the pass takes no more memory with 8 batches than with one */
        snn_batch batch;
        while (n_calib < 8 && snn_loader_next(test_loader, &batch)) {
            calib[n_calib] = snn_tensor_new(SNN_SHAPE(batch.count, batch.channels, batch.height, batch.width), device);
            if (!calib[n_calib] || snn_tensor_copy_from_host(calib[n_calib], batch.images) != SNN_OK) break;
            n_calib++;
        }
        while (snn_loader_next(test_loader, &batch)) {} /* to the end of the epoch */
        snn_sparse_report report;
        snn_sparse_options so = snn_sparse_options_default();
        so.max_images = calib_images;
        const snn_model_config at_bound = converted_config(&config, bound);
        if (snn_model_set_time_steps(snn, bound) != SNN_OK || n_calib == 0 ||
            reserve_step(&at_bound, calib_images, device, true) != SNN_OK ||
            snn_sparsify(snn, calib, n_calib, &so, &report) != SNN_OK ||
            run_set(snn, test_loader, device, classes, &s) != SNN_OK) {
            exit_code = fail("sparse SNN");
        } else {
            int64_t same = 0;
            for (int64_t k = 0; k < s.count; k++) same += s.pred[k] == dense_pred[k];
            snn_sparse_collect(snn, &report);
            printf("sparse SNN at T* = %d: accuracy %.2f%% (%.1f s); %lld of %lld predictions as "
                   "the dense SNN's\n", bound, percent(s.correct, s.count), s.seconds,
                   (long long)same, (long long)s.count);
            printf("check: sparse SNN predictions identical to the dense SNN's: %s\n",
                   same == s.count ? "PASS" : "MISS");
        }
        for (int i = 0; i < 8; i++) snn_tensor_free(calib[i]);
    }
    printf("results: %s/results.csv, %s/accuracy_vs_T.svg\n", out_dir, out_dir);

done:
    free(q.logits), free(s.logits), free(q.pred), free(s.pred), free(dense_pred);
    snn_module_free(snn);
    snn_module_free(relu);
    snn_module_free(qann);
    return exit_code;
}

int main(int argc, char **argv)
{
    options o = {.dataset = "fashion-mnist", .model = "cnn", .device = "cpu",
                 .steps = "1,2,4,8,16,32,64", .levels = 4, .epochs = 4, .batch_size = 128,
                 .hidden = 128, .augment = -1, .lr = 1e-3f};
    option table[] = {
        {"--dataset", OPT_STRING, &o.dataset, "fashion-mnist, mnist, cifar10, cifar100"},
        {"--data", OPT_STRING, &o.data, "folder or archive of the data set (else $SNN_DATA_DIR, then /usr/share/datasets)"},
        {"--model", OPT_STRING, &o.model, "cnn, resnet18, sew-resnet18, resnet34, sew-resnet34, resnet50, sew-resnet50"},
        {"--levels", OPT_INT, &o.levels, "quantization levels L of the QANN (>= 2)"},
        {"--symmetric", OPT_FLAG, &o.symmetric, "signed levels [-L/2, L/2-1] instead of [0, L-1]"},
        {"--checkpoint", OPT_STRING, &o.checkpoint, "a trained QANN to load instead of training one"},
        {"--epochs", OPT_INT, &o.epochs, "training epochs"},
        {"--batch-size", OPT_INT, &o.batch_size, "batch size (training and evaluation)"},
        {"--lr", OPT_FLOAT, &o.lr, "Adam learning rate (cosine schedule)"},
        {"--width", OPT_INT, &o.width, "channels of the first conv (0: the model's default)"},
        {"--hidden", OPT_INT, &o.hidden, "hidden units of the CNN's first fc"},
        {"--augment", OPT_INT, &o.augment, "random crop + flip: 1 on, 0 off (-1: on for 32x32)"},
        {"--relu-baseline", OPT_FLAG, &o.relu_baseline, "also train the same model with ReLU"},
        {"--steps", OPT_STRING, &o.steps, "time steps T to run the SNN for (T* is added)"},
        {"--no-sparse", OPT_FLAG, &o.no_sparse, "skip the sparse run at T*"},
        {"--device", OPT_STRING, &o.device, "cpu, cuda"},
        {"--seed", OPT_INT, &o.seed, "random seed"},
        {"--threads", OPT_INT, &o.threads, "CPU threads (0: all cores)"},
        {"--limit-train", OPT_INT, &o.limit_train, "use only the first N training images (0: all)"},
        {"--limit-test", OPT_INT, &o.limit_test, "use only the first N test images (0: all)"},
        {"--out", OPT_STRING, &o.out, "output folder (default runs/ann2snn-<dataset>-<model>)"},
    };
    int parsed = parse_options(argc, argv, "Trains a quantized ANN, converts it to an ST-BIF spiking "
                               "network and compares the two for T = 1 .. 64.", table,
                               (int)(sizeof table / sizeof table[0]));
    if (parsed) return parsed == 2 ? 0 : 2;
    snn_device device;
    snn_model_kind kind;
    if (snn_device_parse(o.device, &device) != SNN_OK) return fail("--device");
    if (snn_model_kind_parse(o.model, &kind) != SNN_OK) return fail("--model");
    if (o.levels < 2 || o.epochs < 0 || o.batch_size < 1 || o.hidden < 1 || o.width < 0 ||
        o.limit_train < 0 || o.limit_test < 0 || !(o.lr > 0.0f)) {
        fprintf(stderr, "snn-ann2snn: --levels >= 2, --batch-size and --hidden >= 1, --lr > 0; "
                "--epochs, --width and --limit-* >= 0\n");
        return 2;
    }
    int steps_given[32];
    if (parse_steps(o.steps, 0, steps_given, 32) < 1) { /* before training; compare() adds T* */
        fprintf(stderr, "snn-ann2snn: bad --steps '%s' (expected a list like 1,2,4 of 1..1024)\n", o.steps);
        return 2;
    }
    if (device == SNN_CUDA && !snn_cuda_available()) {
        fprintf(stderr, "snn-ann2snn: --device cuda: no CUDA device or no CUDA backend in this build\n");
        return 2;
    }
    snn_set_num_threads(o.threads);

    /* data */
    snn_dataset train_full, test_full;
    if (snn_dataset_load(o.dataset, o.data, SNN_SPLIT_TRAIN, &train_full) != SNN_OK) return fail("--dataset");
    if (snn_dataset_load(o.dataset, o.data, SNN_SPLIT_TEST, &test_full) != SNN_OK) {
        snn_dataset_free(&train_full);
        return fail("--dataset");
    }
    snn_dataset train_set = train_full, test = test_full;
    if (o.limit_train && o.limit_train < train_set.count) train_set.count = o.limit_train;
    if (o.limit_test && o.limit_test < test.count) test.count = o.limit_test;
    snn_loader_config lc = snn_loader_config_default();
    lc.batch_size = o.batch_size;
    lc.seed = (uint64_t)o.seed;
    lc.random_crop = lc.horizontal_flip = o.augment < 0 ? train_set.height == 32 : o.augment != 0;
    snn_dataset_default_norm(&train_set, lc.mean, lc.std);
    snn_loader_config tc = lc;
    tc.shuffle = false;
    tc.random_crop = tc.horizontal_flip = false;
    snn_loader *train_loader = snn_loader_new(&train_set, &lc);
    snn_loader *test_loader = train_loader ? snn_loader_new(&test, &tc) : NULL;
    char out_dir[512];
    if (o.out) snprintf(out_dir, sizeof out_dir, "%s", o.out);
    else snprintf(out_dir, sizeof out_dir, "runs/ann2snn-%s-%s", o.dataset, o.model);
    int exit_code = 1;
    if (!test_loader) exit_code = fail("loader");
    else if ((o.out || !make_dir("runs")) && !make_dir(out_dir))
        exit_code = compare(&o, device, kind, &train_set, &test, train_loader, test_loader, out_dir);
    snn_loader_free(test_loader);
    snn_loader_free(train_loader);
    snn_dataset_free(&test_full);
    snn_dataset_free(&train_full);
    snn_shutdown();
    return exit_code;
}
