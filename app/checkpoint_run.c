/*
 * checkpoint_run.c - checkpoint_in_folder and checkpoint_run_open / _close of
 * checkpoint_run.h.
 */
#define _POSIX_C_SOURCE 200809L /* access, stat */
#include "app/checkpoint_run.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "app/options.h"
#include "app/run_memory.h"

int checkpoint_in_folder(const char *program, const char **path, char *buf, size_t size)
{
    struct stat st;
    if (stat(*path, &st) != 0 || !S_ISDIR(st.st_mode)) return 0; /* a file (or an error later) */
    const char *folder = *path;
    size_t n = strlen(folder);
    while (n > 1 && folder[n - 1] == '/') n--;
    snprintf(buf, size, "%.*s/checkpoint.safetensors", (int)n, folder);
    if (access(buf, F_OK) != 0) {
        fprintf(stderr, "%s: %s is a folder without a checkpoint.safetensors; give the file to "
                "read (e.g. %.*s/best.safetensors)\n", program, folder, (int)n, folder);
        return 1;
    }
    fprintf(stderr, "%s: %s is a run's folder: reading its checkpoint.safetensors (the last "
            "epoch; %.*s/best.safetensors holds the best one)\n", program, folder, (int)n, folder);
    *path = buf;
    return 0;
}

int checkpoint_run_open(checkpoint_run *r, const char *program, const char *checkpoint,
                        const char *device_name, const char *dataset, const char *data,
                        int batch_size, int limit, int threads)
{
    memset(r, 0, sizeof *r);
    if (!checkpoint) {
        fprintf(stderr, "%s: --checkpoint is required; see --help\n", program);
        return 2;
    }
    int bad = 0;
    if (batch_size < 1) {
        fprintf(stderr, "%s: --batch-size %d: expected an integer >= 1\n", program, batch_size);
        bad = 2;
    }
    if (limit < 0) {
        fprintf(stderr, "%s: --limit-test %d: expected an integer >= 0\n", program, limit);
        bad = 2;
    }
    if (threads < 0) {
        fprintf(stderr, "%s: --threads %d: expected an integer >= 0\n", program, threads);
        bad = 2;
    }
    static const char *const devices[] = {"cpu", "cuda"};
    if (snn_device_parse(device_name, &r->device) != SNN_OK) {
        snn_clear_error();
        bad = option_bad_choice(program, "--device", device_name, devices, 2);
    }
    if (bad) return bad;
    if (checkpoint_in_folder(program, &checkpoint, r->checkpoint, sizeof r->checkpoint)) return 1;
    if (checkpoint != r->checkpoint)
        snprintf(r->checkpoint, sizeof r->checkpoint, "%s", checkpoint);
    if (r->device == SNN_CUDA && !snn_cuda_available()) {
        fprintf(stderr, "%s: --device cuda: no CUDA device or no CUDA backend in this build\n",
                program);
        return 2;
    }
    snn_set_num_threads(threads);
    r->model = snn_checkpoint_load_model(checkpoint, r->device, &r->meta);
    if (!r->model) {
        fprintf(stderr, "%s: %s\n", program, snn_last_error());
        return 1;
    }
    r->config = snn_model_config_of(r->model);
    r->dataset = dataset ? dataset : snn_metadata_get(&r->meta, "snn.train.dataset");
    if (!r->dataset) r->dataset = "fashion-mnist";
    /* event sets: the frames the model was trained on (T, split mode, downsampling) */
    snn_event_frames frames = {r->config->time_steps, SNN_SPLIT_BY_NUMBER, 1};
    const char *f = snn_metadata_get(&r->meta, "snn.train.frames");
    char split[16] = "";
    if (f && sscanf(f, "%15[a-z],%d", split, &frames.downsample) == 2)
        snn_event_split_parse(split, &frames.split_by);
    /* shd / ssc: frames over the recorded --max-time, binarised or not, channels pooled by
     * the recorded --downsample */
    snn_status loaded;
    if (snn_dataset_is_spike_audio(r->dataset)) {
        snn_spike_frames spikes = snn_spike_frames_default();
        spikes.frames = frames.frames;
        spikes.pool = frames.downsample;
        double max_time = 0.0;
        int binarize = 0;
        const char *s = snn_metadata_get(&r->meta, "snn.train.spike_frames");
        if (s && sscanf(s, "%lf,%d", &max_time, &binarize) == 2) {
            if (max_time > 0.0) spikes.max_time = max_time;
            spikes.binarize = binarize != 0;
        }
        loaded = snn_spike_dataset_load(r->dataset, data, SNN_SPLIT_TEST, &spikes, &r->test, NULL);
    } else {
        loaded = snn_dataset_load_frames(r->dataset, data, SNN_SPLIT_TEST, &frames, &r->test);
    }
    if (loaded != SNN_OK) {
        fprintf(stderr, "%s: %s\n", program, snn_last_error());
        snn_module_free(r->model);
        return 1;
    }
    r->view = r->test;
    if (limit && limit < r->view.count) r->view.count = limit;
    const snn_model_config *c = r->config;
    if (r->view.channels != c->in_channels || r->view.height != c->height ||
        r->view.width != c->width || r->view.classes != c->classes) {
        fprintf(stderr, "%s: the model takes %dx%dx%d images and %d classes; %s has %dx%dx%d "
                "and %d\n", program, c->in_channels, c->height, c->width, c->classes, r->dataset,
                r->view.channels, r->view.height, r->view.width, r->view.classes);
        snn_dataset_free(&r->test);
        snn_module_free(r->model);
        return 2;
    }
    /* the evaluation's step and batches must fit (the model is already loaded) */
    double image_bytes = 4.0 * ((double)c->in_channels * c->height * c->width *
                                (r->view.time_steps > 0 ? r->view.time_steps : 1) + 1.0);
    run_memory_request request = {program, "evaluating", NULL, *c, batch_size, r->view.count,
                                  r->device, false, 0, 2.0 * image_bytes * batch_size, 0.0,
                                  false, false, SNN_CARRY_NONE, 0, false};
    snn_memory_estimate memory;
    if (snn_model_memory_estimate(c, 1, r->device, false, 0, &memory) == SNN_OK)
        request.held = memory.parameters;
    if (run_memory_check(&request, 2.0 * image_bytes, &memory)) {
        snn_dataset_free(&r->test);
        snn_module_free(r->model);
        snn_shutdown();
        return 2;
    }
    r->loader = snn_loader_config_default();
    r->loader.batch_size = batch_size;
    r->loader.shuffle = false;
    snn_dataset_default_norm(&r->view, r->loader.mean, r->loader.std);
    if (c->encoding == SNN_ENCODING_POISSON) /* spikes need pixel intensities in [0, 1] */
        for (int k = 0; k < SNN_DATA_MAX_CHANNELS; k++)
            r->loader.mean[k] = 0.0f, r->loader.std[k] = 1.0f;
    return 0;
}

void checkpoint_run_close(checkpoint_run *r)
{
    snn_dataset_free(&r->test);
    snn_module_free(r->model);
    snn_shutdown();
}
