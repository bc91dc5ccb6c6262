/*
 * bench_sparse_threads.c - batch-1 latency of a spiking ResNet-18 on the CPU, dense against
 * sparse (the sparse pass, sparse/), at each thread count: the table of docs/sparse.md section
 * 7b in one command.
 *
 *   build/bin/bench_sparse_threads --checkpoint runs/r18/best.safetensors [--data DIR]
 *                                  [--threads 1,2,4,8,16] [--reps 10] [--calib-batches 2]
 *   build/bin/bench_sparse_threads            (no checkpoint: random weights and images)
 *
 * It does what `snn-sparse --device cpu --limit-test 128 --calib-batches 2 --reps 5 --threads N`
 * did for section 7b, once per thread count, on one loaded model: set the threads, calibrate
 * (snn_sparsify with the one-sample round, so batch 1 runs the paths timed at one sample, at
 * this thread count: each row's choices are its own, as a separate snn-sparse run's were), then
 * time one image's forward with the swapped convs off (dense) and on (sparse), best and median
 * of --reps after a warm-up. "same" says whether the sparse logits equal the dense ones bit for
 * bit and both equal those of the first row (the CPU path promises both at any thread count).
 * Without --checkpoint the model is a width --width ResNet-18 of random weights fed random
 * images, its batch-norm statistics taken from 60 training-mode forwards of them (otherwise
 * the spikes die out after a few layers): it runs the same kernels, but its firing is not a
 * trained net's.
 *
 * The last two columns time OpenMP itself at that thread count: "fork us" an empty parallel
 * region on the whole team, back to back (what each region of a forward costs beyond its work),
 * and "resize us" a pair of regions of t and t/2 threads: GCC's runtime ends the threads a
 * smaller team leaves out and starts new ones for the next full team, which the kernels no
 * longer cause (kernels/cpu/cpu_threads.h) but the old convs' one-thread-per-image teams did.
 *
 * Napkin math: batch 1 x T = 4 is 4 images; the width-64 ResNet-18's convs are ~0.56 G
 * multiply-adds per image (bench_train_step.c), 2.2 G for the forward, ~25-50 ms on one core;
 * the sparse convs do about the firing rate of that (3-13 %), so at 16 threads the neurons,
 * batch-norms and adds (a few hundred thousand floats each, ~50 regions) and their fork/join
 * costs are a real share of the sparse forward.
 */
#include <omp.h>
#include <string.h>

#include "app/checkpoint_run.h"
#include "app/options.h"
#include "app/program.h"
#include "sparse/sparse.h"
#include "bench_stats.h"

/* Seconds of one forward of x: best and median of `reps` after one warm-up; logits (classes
 * floats) of the last run into *logits_out. */
static void time_forward(snn_module *model, snn_tensor *x, int reps, double *best, double *median,
                         float *logits_out)
{
    double *t = malloc((size_t)reps * sizeof *t);
    *best = *median = -1.0;
    if (!t) return;
    snn_no_grad_begin();
    for (int r = 0; r <= reps; r++) {
        snn_step_begin();
        double t0 = now_seconds();
        snn_tensor *y = snn_module_forward(model, x);
        double dt = now_seconds() - t0;
        if (y && r == reps) snn_tensor_copy_to_host(y, logits_out);
        snn_step_end();
        if (!y) {
            snn_no_grad_end();
            free(t);
            return;
        }
        if (r > 0) t[r - 1] = dt;
    }
    snn_no_grad_end();
    *median = bench_median(t, reps);
    *best = t[0];
    free(t);
}

/* Microseconds of an empty region on `threads` threads (median of 1000, after 100), and of a
 * pair of regions of `threads` and threads / 2. */
static void time_openmp(int threads, double *fork_us, double *resize_us)
{
    enum { WARM = 100, RUNS = 1000 };
    static double t[RUNS];
    for (int pass = 0; pass < 2; pass++) {
        for (int r = -WARM; r < RUNS; r++) {
            double t0 = omp_get_wtime();
#pragma omp parallel num_threads(threads)
            {
                if (omp_get_thread_num() < 0) printf("never\n"); /* a body the compiler keeps */
            }
            if (pass == 1) {
#pragma omp parallel num_threads(threads / 2 > 0 ? threads / 2 : 1)
                {
                    if (omp_get_thread_num() < 0) printf("never\n");
                }
            }
            if (r >= 0) t[r] = omp_get_wtime() - t0;
        }
        *(pass ? resize_us : fork_us) = 1e6 * bench_median(t, RUNS);
    }
}

/* "1,2,4,8" -> counts (at most max); returns how many, 0 for a bad or too long list. */
static int parse_counts(const char *text, int *counts, int max)
{
    int n = 0;
    for (const char *p = text; *p;) {
        char *end;
        if (n == max) return 0;
        long v = strtol(p, &end, 10);
        if (end == p || v < 1 || v > 1024) return 0;
        counts[n++] = (int)v;
        p = *end == ',' ? end + 1 : end;
        if (*end && *end != ',') return 0;
    }
    return n;
}

int main(int argc, char **argv)
{
    const char *checkpoint = NULL, *dataset = NULL, *data = NULL, *thread_list = NULL;
    int batch_size = 64, limit = 128, calib_batches = 2, reps = 10, width = 64;
    option table[] = {
        {"--checkpoint", OPT_STRING, &checkpoint, "a trained ResNet-18 (snn-train); none: random weights"},
        {"--dataset", OPT_STRING, &dataset, "data set (default: the one the checkpoint was trained on)"},
        {"--data", OPT_STRING, &data, "folder or archive of the data set"},
        {"--threads", OPT_STRING, &thread_list, "thread counts, e.g. 1,2,4,8,16 (default: 1, 2, 4, ... up to the host's CPUs, and the CPUs)"},
        {"--reps", OPT_INT, &reps, "timed forwards per side and thread count (best and median)"},
        {"--calib-batches", OPT_INT, &calib_batches, "calibration batches (as snn-sparse)"},
        {"--batch-size", OPT_INT, &batch_size, "images per calibration batch"},
        {"--limit-test", OPT_INT, &limit, "test images loaded (the calibration batches come from them)"},
        {"--width", OPT_INT, &width, "without a checkpoint: the ResNet-18's width"},
    };
    int parsed = parse_options(argc, argv,
                               "Batch-1 latency of a spiking ResNet-18 on the CPU, dense vs sparse, "
                               "by thread count (docs/sparse.md, 7b).",
                               table, (int)(sizeof table / sizeof table[0]));
    if (parsed) return parsed == 2 ? 0 : 2;
    int counts[32], n_counts = 0;
    const int cpus = omp_get_num_procs();
    if (thread_list) {
        n_counts = parse_counts(thread_list, counts, 32);
    } else {
        for (int t = 1; t < cpus && n_counts < 31; t *= 2) counts[n_counts++] = t;
        counts[n_counts++] = cpus;
    }
    const char *bad = !n_counts                              ? "--threads (a list like 1,2,4 of 1-1024)"
                      : reps < 1                              ? "--reps (>= 1)"
                      : calib_batches < 1 || calib_batches > 64 ? "--calib-batches (1-64)"
                      : batch_size < 1                        ? "--batch-size (>= 1)"
                      : limit < 0                             ? "--limit-test (>= 0)"
                      : width < 1                             ? "--width (>= 1)"
                                                              : NULL;
    if (bad) {
        fprintf(stderr, "bench_sparse_threads: bad %s; see --help\n", bad);
        return 2;
    }

    /* the model and the calibration batches (OWNED), as snn-sparse takes them */
    checkpoint_run run;
    memset(&run, 0, sizeof run);
    snn_module *model = NULL;
    snn_model_config config;
    snn_tensor *calib[64] = {0};
    int n_calib = 0;
    snn_rng rng;
    snn_rng_seed(&rng, 1);
    if (checkpoint) {
        int st = checkpoint_run_open(&run, "bench_sparse_threads", checkpoint, "cpu", dataset, data,
                                     batch_size, limit, 0);
        if (st) return st;
        model = run.model;
        config = *run.config;
        snn_loader *loader = snn_loader_new(&run.view, &run.loader);
        snn_batch batch;
        while (loader && n_calib < calib_batches && snn_loader_next(loader, &batch)) {
            snn_tensor *t = snn_tensor_new(SNN_SHAPE(batch.count, batch.channels, batch.height,
                                                     batch.width), SNN_CPU);
            if (!t || snn_tensor_copy_from_host(t, batch.images) != SNN_OK) {
                snn_tensor_free(t);
                break;
            }
            calib[n_calib++] = t;
        }
        snn_loader_free(loader);
    } else {
        config = snn_model_config_default(SNN_MODEL_RESNET18);
        config.width_base = width;
        model = snn_model_new(&config, &rng);
        for (int b = 0; model && b < calib_batches; b++) {
            snn_tensor *t = snn_tensor_new(SNN_SHAPE(batch_size, config.in_channels, config.height,
                                                     config.width), SNN_CPU);
            if (!t) break;
            for (int64_t i = 0; i < t->numel; i++) t->data[i] = snn_rng_normal(&rng);
            calib[n_calib++] = t;
        }
        /* running statistics of every batch-norm from training-mode forwards of two images
         * (momentum 0.1: 60 passes leave 0.2 % of the initial mean 0, variance 1), so that the
         * eval-mode layers see normalised inputs and keep firing */
        snn_tensor *two = snn_tensor_new(SNN_SHAPE(2, config.in_channels, config.height, config.width),
                                         SNN_CPU);
        snn_module_train(model, true);
        snn_no_grad_begin();
        for (int pass = 0; model && two && pass < 60; pass++) {
            for (int64_t i = 0; i < two->numel; i++) two->data[i] = snn_rng_normal(&rng);
            snn_step_begin();
            snn_module_forward(model, two);
            snn_step_end();
        }
        snn_no_grad_end();
        snn_tensor_free(two);
    }
    if (!model || n_calib == 0) {
        fprintf(stderr, "bench_sparse_threads: %s\n", snn_last_status() != SNN_OK ?
                snn_last_error() : "no calibration batch");
        for (int i = 0; i < n_calib; i++) snn_tensor_free(calib[i]);
        if (checkpoint) checkpoint_run_close(&run);
        else snn_module_free(model), snn_shutdown();
        return 1;
    }
    snn_module_train(model, false);
    snn_tensor *one = snn_tensor_new(SNN_SHAPE(1, config.in_channels, config.height, config.width),
                                     SNN_CPU);
    if (one) memcpy(one->data, calib[0]->data, (size_t)one->numel * sizeof(float));
    float *logits = malloc(4 * (size_t)config.classes * sizeof *logits);   /* dense, sparse, first */
    printf("bench_sparse_threads: %s, spiking ResNet-18 width %d, T = %d, %s neurons; batch 1 "
           "(T = %d images per conv); host: %d CPUs; calibration %d batch(es) of %lld; best / "
           "median of %d forwards\n\n", checkpoint ? checkpoint : "random weights, random images",
           config.width_base, config.time_steps, snn_neuron_kind_name(config.neuron.kind),
           config.time_steps, cpus, n_calib, (long long)calib[0]->shape.dim[0], reps);
    printf("%7s %19s %19s %8s %10s %5s %8s %9s\n", "threads", "dense ms (best/med)",
           "sparse ms (best/med)", "x (best)", "convs @1", "same", "fork us", "resize us");
    int status = one && logits ? 0 : 1;
    bool have_first = false;
    for (int i = 0; status == 0 && i < n_counts; i++) {
        const int t = counts[i];
        snn_set_num_threads(t);
        snn_sparse_options so = snn_sparse_options_default();
        so.quiet = true;
        so.one_sample = true;
        snn_sparse_report report;
        if (snn_sparsify(model, calib, n_calib, &so, &report) != SNN_OK) {
            status = 1;
            break;
        }
        int sparse_at_one = 0;
        double fire = 0.0;
        for (int l = 0; l < report.count; l++) {
            sparse_at_one += report.layers[l].path_one != SNN_SPARSE_DENSE;
            fire += report.layers[l].firing_rate;
        }
        double dense_best, dense_med, sparse_best, sparse_med, fork_us = 0.0, resize_us = 0.0;
        snn_sparse_enable(model, false);
        time_forward(model, one, reps, &dense_best, &dense_med, logits);
        snn_sparse_enable(model, true);
        time_forward(model, one, reps, &sparse_best, &sparse_med, logits + config.classes);
        if (dense_best < 0.0 || sparse_best < 0.0) {
            status = 1;
            break;
        }
        const size_t bytes = (size_t)config.classes * sizeof *logits;
        if (!have_first) memcpy(logits + 2 * config.classes, logits, bytes), have_first = true;
        const bool same = !memcmp(logits, logits + config.classes, bytes) &&
                          !memcmp(logits, logits + 2 * config.classes, bytes);
        time_openmp(t, &fork_us, &resize_us);
        char convs[16];
        snprintf(convs, sizeof convs, "%d/%d", sparse_at_one, report.count);
        printf("%7d %9.3f /%8.3f %9.3f /%8.3f %7.2fx %10s %5s %8.1f %9.1f%s\n", t, 1e3 * dense_best,
               1e3 * dense_med, 1e3 * sparse_best, 1e3 * sparse_med, dense_best / sparse_best,
               convs, same ? "yes" : "NO", fork_us, resize_us,
               t > cpus ? "  (more threads than CPUs)" : "");
        if (i == 0)
            printf("        (swapped convs' inputs fire at %.2f %% on average)\n",
                   report.count ? 100.0 * fire / report.count : 0.0);
        fflush(stdout);
    }
    if (status) fprintf(stderr, "bench_sparse_threads: %s\n", snn_last_error());
    free(logits);
    snn_tensor_free(one);
    for (int i = 0; i < n_calib; i++) snn_tensor_free(calib[i]);
    if (status == 0) status = finish_stdout("bench_sparse_threads");
    if (checkpoint) {
        checkpoint_run_close(&run);
    } else {
        snn_module_free(model);
        snn_shutdown();
    }
    return status;
}
