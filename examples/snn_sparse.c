/*
 * snn_sparse.c - snn-sparse: the dense-vs-sparse comparison of a trained checkpoint.
 *
 *   build/bin/snn-sparse --checkpoint runs/fashion-mnist-cnn/checkpoint.safetensors
 *                        [--device cpu|cuda] [--limit-test N] [--calib-batches 8] [--T 16]
 *                        [--passes 3] [--csv results.csv]
 *
 * 1. runs the test set with the dense model and keeps every prediction;
 * 2. snn_sparsify with the first --calib-batches batches of the test split (calibration only
 *    measures firing and timings: it changes no output) - prints the decision table; the pass
 *    is sized first (snn_sparsify_memory_estimate): a calibration batch too large for the
 *    device at this T runs in slices of fewer images, and one image too many is refused;
 * 3. runs the test set again with the sparse convs, prints both accuracies and whether every
 *    prediction is identical, and the per-layer table with the run-time counters;
 * 4. end to end, dense (the swapped layers switched off) against sparse: latency of one image
 *    (batch 1), throughput at the calibration batch, and the whole test-set pass;
 * 5. the synaptic operations of every layer over the test set, counted in one more dense pass
 *    (docs/synops.md; --synops-csv FILE writes them as CSV), and for each swapped conv the
 *    share of the dense work its spikes need beside the speed-up its sparse kernels measured.
 * Timing is the same for both sides: every figure is the best of several runs after a warm-up
 * (the prediction passes of 1 and 3 warm the test-set timings; never a cold pass against a warm
 * one), and the table states device, precision, batch, T and threads.
 * On CUDA the swapped layers run sparse/sparse_conv.cu where calibration timed it faster than the
 * dense conv (a build without SNN_CUDA runs them dense there).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/checkpoint_run.h"
#include "app/options.h"
#include "app/program.h"
#include "app/run_memory.h"
#include "app/synops_report.h"
#include "snn.h"
#ifdef SNN_WITH_CUDA
#include "tensor/cuda_options.h"
#endif

/* Runs the loader through the model without a tape; predictions into pred (count of them). */
static snn_status predict(snn_module *model, snn_loader *loader, snn_device device, float *pred,
                          float *labels, int64_t cap, int64_t *count, double *seconds)
{
    snn_no_grad_begin();
    snn_batch batch;
    snn_status st = SNN_OK;
    *count = 0;
    double t0 = now_seconds();
    while (st == SNN_OK && snn_loader_next(loader, &batch)) {
        snn_step_begin();
        snn_tensor *x, *y;
        st = snn_batch_to_device(&batch, device, &x, &y);
        snn_tensor *logits = st == SNN_OK ? snn_module_forward(model, x) : NULL;
        snn_tensor *am = logits ? snn_argmax(logits) : NULL;
        if (!am) st = snn_last_status();
        if (st == SNN_OK && *count + batch.count <= cap) {
            snn_tensor_copy_to_host(am, pred + *count);
            memcpy(labels + *count, batch.labels, (size_t)batch.count * sizeof *labels);
            *count += batch.count;
        }
        snn_step_end();
    }
    snn_synchronize(device);
    *seconds = now_seconds() - t0;
    snn_no_grad_end();
    return st;
}

/* Seconds of the best of `passes` test-set passes (forwards only, as predict runs them; run
 * after predict, which warmed everything up). */
static double time_passes(snn_module *model, const snn_dataset *view, const snn_loader_config *lc,
                          snn_device device, int passes)
{
    double best = -1.0;
    snn_no_grad_begin();
    for (int r = 0; r < passes; r++) {
        snn_loader *loader = snn_loader_new(view, lc);
        if (!loader) break;
        snn_batch batch;
        bool ok = true;
        double t0 = now_seconds();
        while (ok && snn_loader_next(loader, &batch)) {
            snn_step_begin();
            snn_tensor *x, *y;
            ok = snn_batch_to_device(&batch, device, &x, &y) == SNN_OK &&
                 snn_module_forward(model, x) != NULL;
            snn_step_end();
        }
        snn_synchronize(device);
        double t = now_seconds() - t0;
        snn_loader_free(loader);
        if (!ok) {
            best = -1.0;
            break;
        }
        if (best < 0.0 || t < best) best = t;
    }
    snn_no_grad_end();
    return best;
}

/* Seconds per forward of x, best of `reps` (after one warm-up). */
static double time_forward(snn_module *model, snn_tensor *x, int reps)
{
    double best = 1e30;
    snn_no_grad_begin();
    for (int r = 0; r <= reps; r++) {
        snn_step_begin();
        double t0 = now_seconds();
        snn_tensor *y = snn_module_forward(model, x);
        snn_synchronize(x->device);
        double t = now_seconds() - t0;
        snn_step_end();
        if (!y) {
            best = -1.0;
            break;
        }
        if (r > 0 && t < best) best = t;
    }
    snn_no_grad_end();
    return best;
}

int main(int argc, char **argv)
{
    const char *checkpoint = NULL, *dataset = NULL, *data = NULL, *device_name = "cpu";
    const char *csv = NULL, *synops_csv = NULL;
    int batch_size = 64, limit = 0, threads = 0, calib_batches = 8, reps = 10, passes = 3, T = 0;
    int one_sample = 1;
    option table[] = {
        {"--checkpoint", OPT_STRING, &checkpoint, "checkpoint written by snn-train (required)"},
        {"--dataset", OPT_STRING, &dataset, "data set (default: the one the checkpoint was trained on)"},
        {"--data", OPT_STRING, &data, "folder or archive of the data set"},
        {"--device", OPT_STRING, &device_name, "cpu, cuda"},
        {"--batch-size", OPT_INT, &batch_size, "batch size of the test runs and the calibration"},
        {"--limit-test", OPT_INT, &limit, "use only the first N test images (0: all)"},
        {"--calib-batches", OPT_INT, &calib_batches, "calibration batches (>= 8 recommended)"},
        {"--reps", OPT_INT, &reps, "repetitions of the latency / throughput timings (best of)"},
        {"--threads", OPT_INT, &threads, "CPU threads (0: all cores)"},
        {"--passes", OPT_INT, &passes, "timed test-set passes, dense and sparse alike (best of; after a warm-up pass)"},
        {"--T", OPT_INT, &T, "run the model at this many time steps (0: the checkpoint's)"},
        {"--csv", OPT_STRING, &csv, "append one line of results (accuracies, firing, silent planes, times) to this CSV file"},
        {"--synops-csv", OPT_STRING, &synops_csv,
         "also write the synaptic operations and energy per layer to this CSV file"},
        {"--one-sample", OPT_INT, &one_sample, "1: also calibrate on one sample per batch and run small batches on the paths it picks; 0: small batches run the batch's paths (CPU) or dense (CUDA), as before 2026-11-26"},
    };
    int parsed = parse_options(argc, argv, "Dense vs sparse execution of a trained checkpoint.",
                               table, (int)(sizeof table / sizeof table[0]));
    if (parsed) return parsed == 2 ? 0 : 2;
    if (calib_batches < 1 || reps < 1 || passes < 1 || T < 0 || (one_sample != 0 && one_sample != 1)) {
        fprintf(stderr, "snn-sparse: --calib-batches, --reps and --passes must be >= 1, --T >= 0, "
                "--one-sample 0 or 1\n");
        return 2;
    }
    checkpoint_run run;
    int status = checkpoint_run_open(&run, "snn-sparse", checkpoint, device_name, dataset, data,
                                     batch_size, limit, threads);
    if (status) return status;
    if (T && snn_model_set_time_steps(run.model, T) != SNN_OK) {
        fprintf(stderr, "snn-sparse: --T: %s\n", snn_last_error());
        checkpoint_run_close(&run);
        return 2;
    }
    const snn_model_config *c = run.config;
    snn_device device = run.device;
    snn_module *model = run.model;
    /* memory (the model is loaded): the evaluation at this T (checkpoint_run_open checked the
     * checkpoint's), and the sparse pass: as many images per calibration forward as fit */
    snn_memory_estimate memory;
    const double params = snn_model_memory_estimate(c, 1, device, false, 0, &memory) == SNN_OK
                              ? memory.parameters : 0.0;
    const double image_bytes = 4.0 * ((double)c->in_channels * c->height * c->width + 1.0);
    run_memory_request request = {"snn-sparse", "evaluating", "--T", *c, batch_size,
                                  run.view.count, device, false, 0,
                                  2.0 * image_bytes * batch_size, params, false, false,
                                  SNN_CARRY_NONE, 0, false};
    const int calib_batch = run.view.count < batch_size ? (int)run.view.count : batch_size;
    int calib_images = 0;
    if ((T && run_memory_check(&request, 2.0 * image_bytes, &memory)) ||
        !(calib_images = run_memory_sparse_images("snn-sparse", c, calib_batch, device, params,
                                                  "lower --T"))) {
        checkpoint_run_close(&run);
        return 2;
    }
    /* what the timings are of: the dense conv's precision (the sparse kernels are fp32) */
    const char *precision = "fp32";
#ifdef SNN_WITH_CUDA
    if (device == SNN_CUDA && snn_cuda_tf32()) precision = "tf32 (dense GEMMs)";
#endif
    snn_dataset view = run.view;
    snn_loader_config lc = run.loader;
    snn_module_train(model, false);
    printf("checkpoint  %s (%s, T=%d, %s neurons), %s, %lld test images, %d threads\n", checkpoint,
           snn_model_kind_name(c->kind), c->time_steps, snn_neuron_kind_name(c->neuron.kind),
           snn_device_name(device), (long long)view.count, snn_get_num_threads());

    const int64_t cap = view.count;
    size_t bytes = (size_t)(cap > 0 ? cap : 1) * sizeof(float);
    float *pred_dense = snn_alloc(bytes, SNN_CPU), *pred_sparse = snn_alloc(bytes, SNN_CPU);
    float *labels = snn_alloc(bytes, SNN_CPU);
    snn_tensor *calib[64] = {0};
    if (calib_batches > 64) calib_batches = 64;
    int n_calib = 0;
    int64_t n_dense = 0, n_sparse = 0;
    double s_dense = 0.0, s_sparse = 0.0, cold_dense = 0.0, cold_sparse = 0.0;

    /* 1. dense: a pass for the predictions (it warms up caches, allocator and clocks), then the
     *    timed passes */
    snn_loader *loader = status ? NULL : snn_loader_new(&view, &lc);
    if (loader && predict(model, loader, device, pred_dense, labels, cap, &n_dense, &cold_dense) != SNN_OK)
        status = 1;
    snn_loader_free(loader);
    if (status == 0 && (s_dense = time_passes(model, &view, &lc, device, passes)) < 0.0) status = 1;
    /* and the synaptic operations, in a pass of their own (counting slows it) */
    snn_synops *synops = status ? NULL : snn_synops_new(model);
    loader = synops ? snn_loader_new(&view, &lc) : NULL;
    double s_count = 0.0;
    int64_t n_count = 0;
    if (!loader ||
        predict(model, loader, device, pred_sparse, labels, cap, &n_count, &s_count) != SNN_OK ||
        snn_synops_status(synops) != SNN_OK)
        status = 1;
    snn_loader_free(loader);
    snn_synops_stop(synops); /* what it counted stays readable; the swaps below are not counted */

    /* 2. calibration batches (OWNED copies) and the swap */
    loader = status ? NULL : snn_loader_new(&view, &lc);
    snn_batch batch;
    while (loader && n_calib < calib_batches && snn_loader_next(loader, &batch)) {
        snn_tensor *t = snn_tensor_new(SNN_SHAPE(batch.count, batch.channels, batch.height,
                                                 batch.width), device);
        if (!t || snn_tensor_copy_from_host(t, batch.images) != SNN_OK) {
            snn_tensor_free(t);
            status = 1;
            break;
        }
        calib[n_calib++] = t;
    }
    snn_loader_free(loader);
    snn_sparse_report report;
    if (status == 0) {
        printf("\ncalibration (%d batches of the test split):\n", n_calib);
        if (n_calib < 8) printf("  (fewer than 8 batches: the decision rests on little data)\n");
        snn_sparse_options so = snn_sparse_options_default();
        so.max_images = calib_images;
        so.one_sample = one_sample != 0;
        if (snn_sparsify(model, calib, n_calib, &so, &report) != SNN_OK) status = 1;
    }

    /* 3. sparse: the same, a prediction pass then the timed passes */
    loader = status ? NULL : snn_loader_new(&view, &lc);
    if (loader && predict(model, loader, device, pred_sparse, labels, cap, &n_sparse, &cold_sparse) != SNN_OK)
        status = 1;
    snn_loader_free(loader);
    if (status == 0 && (s_sparse = time_passes(model, &view, &lc, device, passes)) < 0.0) status = 1;
    int64_t ok_d = 0, ok_s = 0, same = 0;
    double fire = 0.0, silent = 0.0;
    int n_sparse_layers = 0;
    if (status == 0) {
        for (int64_t i = 0; i < n_dense && i < n_sparse; i++) {
            ok_d += pred_dense[i] == labels[i];
            ok_s += pred_sparse[i] == labels[i];
            same += pred_dense[i] == pred_sparse[i];
        }
        printf("\ntest set (best of %d passes after a warm-up pass, each side):\n", passes);
        printf("          dense  accuracy %.2f%%  %.3f s (%.0f img/s; its first pass %.3f s)\n",
               100.0 * (double)ok_d / (double)n_dense, s_dense, (double)n_dense / s_dense, cold_dense);
        printf("          sparse accuracy %.2f%%  %.3f s (%.0f img/s; its first pass %.3f s)  %.2fx\n",
               100.0 * (double)ok_s / (double)n_sparse, s_sparse, (double)n_sparse / s_sparse,
               cold_sparse, s_dense / s_sparse);
        printf("          predictions identical: %s (%lld of %lld)\n",
               same == n_dense && n_dense == n_sparse ? "yes" : "NO", (long long)same, (long long)n_dense);
        snn_sparse_collect(model, &report);
        printf("\nper layer (ms per calibration batch of %d images x T=%d; max|diff| over "
               "calibration):\n", batch_size, c->time_steps);
        snn_sparse_print_report(&report, stdout);
        printf("after calibration:");
        for (int i = 0; i < report.count; i++)
            printf(" %s %lld sparse / %lld fallback;", report.layers[i].name,
                   report.layers[i].sparse_calls, report.layers[i].fallbacks);
        printf("\n");
        for (int i = 0; i < report.count; i++) {
            fire += report.layers[i].firing_rate;
            silent += report.layers[i].silent_planes;
            n_sparse_layers += report.layers[i].path != SNN_SPARSE_DENSE;
        }
        if (report.count) fire /= report.count, silent /= report.count;
        printf("swapped convs: %d, %d of them sparse; their inputs fire at %.2f%% with %.1f%% of the "
               "planes silent (means over the swapped convs)\n", report.count, n_sparse_layers,
               100.0 * fire, 100.0 * silent);
    }

    /* 4. end to end */
    double lat_d = 0.0, lat_s = 0.0, thr_d = 0.0, thr_s = 0.0;
    if (status == 0 && n_calib > 0) {
        snn_tensor *one = NULL, *full = calib[0];
        snn_step_begin();
        snn_tensor *host = snn_to_device(calib[0], SNN_CPU);
        one = host ? snn_from_host(SNN_SHAPE(1, c->in_channels, c->height, c->width), host->data,
                                   device) : NULL;
        if (one) {
            snn_sparse_enable(model, false);
            lat_d = time_forward(model, one, reps), thr_d = time_forward(model, full, reps);
            snn_sparse_enable(model, true);
            lat_s = time_forward(model, one, reps), thr_s = time_forward(model, full, reps);
            printf("\nend to end: %s, %s, T = %d, %d threads; dense vs sparse, best of %d after a "
                   "warm-up (test set: best of %d passes)\n", snn_device_name(device), precision,
                   c->time_steps, snn_get_num_threads(), reps, passes);
            printf("  latency, batch 1:      %8.3f ms  %8.3f ms  (%.2fx)\n", 1e3 * lat_d, 1e3 * lat_s,
                   lat_d / lat_s);
            printf("  throughput, batch %-3lld  %8.0f/s   %8.0f/s  (%.2fx)\n", (long long)full->shape.dim[0],
                   (double)full->shape.dim[0] / thr_d, (double)full->shape.dim[0] / thr_s, thr_d / thr_s);
            printf("  test set, batch %-3d    %8.3f s   %8.3f s   (%.2fx)\n", batch_size, s_dense,
                   s_sparse, s_dense / s_sparse);
        }
        snn_step_end();
    }
    /* 5. the synaptic operations, and the work the spikes need beside the measured speed-ups */
    if (status == 0) {
        synops_print(stdout, synops);
        synops_print_sparse(stdout, synops, &report);
        if (synops_csv && synops_write_csv("snn-sparse", synops_csv, synops)) status = 1;
    }
    if (status == 0 && csv) {
        FILE *f = fopen(csv, "a");
        if (!f) {
            fprintf(stderr, "snn-sparse: cannot append to --csv '%s': %s\n", csv, strerror(errno));
            status = 1;
        } else {
            if (ftell(f) == 0)
                fprintf(f, "checkpoint,model,activity_penalty,device,precision,threads,T,batch,images,"
                           "accuracy_dense,accuracy_sparse,identical,fire,silent,convs,sparse_convs,"
                           "test_dense_s,test_sparse_s,latency_dense_ms,latency_sparse_ms,"
                           "throughput_dense,throughput_sparse\n");
            const char *lambda = snn_metadata_get(&run.meta, "snn.train.activity_penalty");
            const double b = n_calib ? (double)calib[0]->shape.dim[0] : 0.0;
            fprintf(f, "%s,%s,%s,%s,%s,%d,%d,%d,%lld,%.4f,%.4f,%d,%.5f,%.5f,%d,%d,%.4f,%.4f,%.4f,%.4f,"
                    "%.1f,%.1f\n", checkpoint, snn_model_kind_name(c->kind), lambda ? lambda : "0",
                    snn_device_name(device), precision, snn_get_num_threads(), c->time_steps,
                    batch_size, (long long)n_dense, 100.0 * (double)ok_d / (double)n_dense,
                    100.0 * (double)ok_s / (double)n_sparse, same == n_dense && n_dense == n_sparse,
                    100.0 * fire, 100.0 * silent, report.count, n_sparse_layers, s_dense, s_sparse,
                    1e3 * lat_d, 1e3 * lat_s, thr_d > 0 ? b / thr_d : 0.0, thr_s > 0 ? b / thr_s : 0.0);
            fclose(f);
        }
    }
    if (status == 1) fprintf(stderr, "snn-sparse: %s\n", snn_last_error());
    snn_synops_free(synops);
    for (int i = 0; i < n_calib; i++) snn_tensor_free(calib[i]);
    snn_free(pred_dense, bytes, SNN_CPU);
    snn_free(pred_sparse, bytes, SNN_CPU);
    snn_free(labels, bytes, SNN_CPU);
    if (status == 0) status = finish_stdout("snn-sparse");
    checkpoint_run_close(&run);
    return status;
}
