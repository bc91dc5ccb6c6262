/*
 * snn_common.h - pieces the example programs share (snn-train, snn-eval, snn-sparse):
 * command-line options from a table, evaluation over a data set with firing rates and a
 * confusion matrix, and the spike raster of one image. Plain library use, nothing internal.
 */
#ifndef SNN_EXAMPLES_COMMON_H
#define SNN_EXAMPLES_COMMON_H

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "run_memory.h"
#include "snn.h"

#define UNUSED __attribute__((unused))

/* ---- options ------------------------------------------------------------------------------ */

typedef enum option_type { OPT_INT, OPT_FLOAT, OPT_STRING, OPT_FLAG } option_type;

typedef struct option {
    const char *name;        /* "--epochs" */
    option_type type;
    void *value;             /* int*, float*, const char**, bool* */
    const char *help;
} option;

static UNUSED void print_help(FILE *out, const char *program, const char *summary,
                              const option *opts, int n)
{
    fprintf(out, "usage: %s [options]\n%s\n\noptions (default in brackets):\n", program, summary);
    for (int i = 0; i < n; i++) {
        char def[96] = "";
        switch (opts[i].type) {
        case OPT_INT: snprintf(def, sizeof def, "%d", *(int *)opts[i].value); break;
        case OPT_FLOAT: snprintf(def, sizeof def, "%g", (double)*(float *)opts[i].value); break;
        case OPT_STRING: snprintf(def, sizeof def, "%s", *(const char **)opts[i].value ?
                                  *(const char **)opts[i].value : "none"); break;
        case OPT_FLAG: snprintf(def, sizeof def, "%s", *(bool *)opts[i].value ? "on" : "off"); break;
        }
        fprintf(out, "  %-18s %s [%s]\n", opts[i].name, opts[i].help, def);
    }
    fprintf(out, "  %-18s show this help\n", "--help");
}

/* Returns 0 on success, 1 on a bad command line (message printed), 2 when --help was shown. */
static UNUSED int parse_options(int argc, char **argv, const char *summary, option *opts, int n)
{
    for (int a = 1; a < argc; a++) {
        if (strcmp(argv[a], "--help") == 0 || strcmp(argv[a], "-h") == 0) {
            print_help(stdout, argv[0], summary, opts, n);
            return 2;
        }
        int i = 0;
        while (i < n && strcmp(argv[a], opts[i].name) != 0) i++;
        if (i == n) {
            fprintf(stderr, "%s: unknown option '%s'; see --help\n", argv[0], argv[a]);
            return 1;
        }
        if (opts[i].type == OPT_FLAG) {
            *(bool *)opts[i].value = true;
            continue;
        }
        if (a + 1 >= argc) {
            fprintf(stderr, "%s: option '%s' needs a value; see --help\n", argv[0], argv[a]);
            return 1;
        }
        const char *v = argv[++a];
        char *end = NULL;
        errno = 0;
        if (opts[i].type == OPT_INT) {
            long x = strtol(v, &end, 10);
            if (*v == '\0' || *end || errno || x < -2147483647L || x > 2147483647L) {
                fprintf(stderr, "%s: option '%s' expects an integer, got '%s'\n", argv[0], opts[i].name, v);
                return 1;
            }
            *(int *)opts[i].value = (int)x;
        } else if (opts[i].type == OPT_FLOAT) {
            float x = strtof(v, &end);
            if (*v == '\0' || *end || errno) {
                fprintf(stderr, "%s: option '%s' expects a number, got '%s'\n", argv[0], opts[i].name, v);
                return 1;
            }
            *(float *)opts[i].value = x;
        } else {
            *(const char **)opts[i].value = v;
        }
    }
    return 0;
}

static UNUSED double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* mkdir -p for one level under an existing parent; 0 on success. */
static UNUSED int make_dir(const char *path)
{
    struct stat st;
    if (mkdir(path, 0755) == 0) return 0;
    if (errno == EEXIST && stat(path, &st) == 0 && S_ISDIR(st.st_mode)) return 0;
    if (errno == EEXIST) fprintf(stderr, "cannot use '%s' as a folder: a file of that name is in the way\n", path);
    else fprintf(stderr, "cannot create folder '%s': %s\n", path, strerror(errno));
    return 1;
}

/* ---- a checkpoint and the test split it is evaluated on ----------------------------------- */

typedef struct checkpoint_run {
    snn_device device;
    snn_module *model;
    snn_metadata meta;
    const snn_model_config *config;
    const char *dataset;       /* the flag's, or the one the checkpoint was trained on */
    snn_dataset test;          /* owns the images */
    snn_dataset view;          /* test, possibly shortened to --limit-test */
    snn_loader_config loader;  /* no shuffle, no augmentation, the model's normalisation */
} checkpoint_run;

/* The common start of snn-eval and snn-sparse: device, model from the checkpoint, its test split
 * (checked against the model's input and classes), and the loader configuration. Returns 0, or
 * the program's exit code (2: bad flags, 1: a failure) with a message printed and nothing held. */
static UNUSED int checkpoint_run_open(checkpoint_run *r, const char *program, const char *checkpoint,
                                      const char *device_name, const char *dataset,
                                      const char *data, int batch_size, int limit, int threads)
{
    memset(r, 0, sizeof *r);
    if (!checkpoint) {
        fprintf(stderr, "%s: --checkpoint is required; see --help\n", program);
        return 2;
    }
    if (snn_device_parse(device_name, &r->device) != SNN_OK || batch_size < 1 || limit < 0) {
        fprintf(stderr, "%s: bad --device, --batch-size or --limit-test: %s\n", program,
                snn_last_status() != SNN_OK ? snn_last_error() : "must be >= 1 and >= 0");
        return 2;
    }
    if (r->device == SNN_CUDA && !snn_cuda_available()) {
        fprintf(stderr, "%s: --device cuda: no CUDA device or no CUDA backend in this build\n", program);
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
    if (snn_dataset_load_frames(r->dataset, data, SNN_SPLIT_TEST, &frames, &r->test) != SNN_OK) {
        fprintf(stderr, "%s: %s\n", program, snn_last_error());
        snn_module_free(r->model);
        return 1;
    }
    r->view = r->test;
    if (limit && limit < r->view.count) r->view.count = limit;
    const snn_model_config *c = r->config;
    if (r->view.channels != c->in_channels || r->view.height != c->height ||
        r->view.width != c->width || r->view.classes != c->classes) {
        fprintf(stderr, "%s: the model takes %dx%dx%d images and %d classes; %s has %dx%dx%d and %d\n",
                program, c->in_channels, c->height, c->width, c->classes, r->dataset,
                r->view.channels, r->view.height, r->view.width, r->view.classes);
        snn_dataset_free(&r->test);
        snn_module_free(r->model);
        return 2;
    }
    /* the evaluation's step and batches must fit (the model is already loaded) */
    double image_bytes = 4.0 * ((double)c->in_channels * c->height * c->width *
                                (r->view.time_steps > 0 ? r->view.time_steps : 1) + 1.0);
    run_memory_request request = {program, "evaluating", NULL, *c, batch_size, r->view.count,
                                  r->device, false, 0, 2.0 * image_bytes * batch_size, 0.0};
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
        for (int k = 0; k < SNN_DATA_MAX_CHANNELS; k++) r->loader.mean[k] = 0.0f, r->loader.std[k] = 1.0f;
    return 0;
}

/* A program whose results go to standard output: 0 when they were all written, else 1 with a
 * message (a full disk or a closed pipe must not look like success). */
static UNUSED int finish_stdout(const char *program)
{
    if (fflush(stdout) == 0 && !ferror(stdout)) return 0;
    fprintf(stderr, "%s: cannot write the results to standard output: %s\n", program,
            errno ? strerror(errno) : "write error");
    return 1;
}

static UNUSED void checkpoint_run_close(checkpoint_run *r)
{
    snn_dataset_free(&r->test);
    snn_module_free(r->model);
    snn_shutdown();
}

/* ---- evaluation --------------------------------------------------------------------------- */

#define MAX_LAYERS 64

typedef struct eval_result {
    int64_t correct, total;
    double loss_sum;                      /* cross-entropy summed over samples */
    int n_layers;
    const char *layer_names[MAX_LAYERS];
    double spikes[MAX_LAYERS];            /* spike count per layer over the set */
    double elements[MAX_LAYERS];          /* neuron-steps per layer over the set */
    int classes;
    int64_t *confusion;                   /* (classes, classes): [true][predicted], optional */
    FILE *predictions;                    /* optional: one predicted class per line */
} eval_result;

static UNUSED double eval_accuracy(const eval_result *r)
{
    return r->total ? (double)r->correct / (double)r->total : 0.0;
}

/* A program that stops on signals (run_signals.h) points this at its flag: evaluate() then
 * returns between two batches once it is set, and the program drops that partial result. */
static UNUSED volatile sig_atomic_t *evaluate_stop_flag;

/* Runs the model over the whole loader in eval mode without a tape; the model is left in eval
 * mode. Returns SNN_OK or the first error. */
static UNUSED snn_status evaluate(snn_module *model, snn_loader *loader, snn_device device,
                                  eval_result *r)
{
    snn_module *layers[MAX_LAYERS];
    r->n_layers = snn_model_neuron_layers(model, layers, r->layer_names, MAX_LAYERS);
    const snn_model_config *config = snn_model_config_of(model);
    r->classes = config ? config->classes : 0;
    snn_module_train(model, false);
    snn_no_grad_begin();
    snn_batch batch;
    snn_status status = SNN_OK;
    float *pred = NULL, *lab = NULL;
    int cap = 0;
    while (status == SNN_OK && !(evaluate_stop_flag && *evaluate_stop_flag) &&
           snn_loader_next(loader, &batch)) {
        snn_step_begin();
        snn_tensor *x, *y;
        status = snn_batch_to_device(&batch, device, &x, &y);
        snn_tensor *logits = status == SNN_OK ? snn_module_forward(model, x) : NULL;
        snn_tensor *loss = logits ? snn_cross_entropy(logits, y) : NULL;
        snn_tensor *am = logits ? snn_argmax(logits) : NULL;
        if (!am || !loss) {
            status = snn_last_status();
            snn_step_end();
            break;
        }
        if (batch.count > cap) {
            snn_free(pred, (size_t)cap * sizeof *pred, SNN_CPU);
            cap = batch.count;
            pred = snn_alloc((size_t)cap * sizeof *pred, SNN_CPU);
            if (!pred) {
                cap = 0;
                status = SNN_ERR_MEMORY;
                fprintf(stderr, "evaluate: out of host memory for %d predictions\n", batch.count);
                snn_step_end();
                break;
            }
        }
        lab = (float *)batch.labels;
        snn_tensor_copy_to_host(am, pred);
        r->loss_sum += (double)snn_tensor_item(loss) * batch.count;
        for (int i = 0; i < batch.count; i++) {
            if (r->predictions) fprintf(r->predictions, "%d\n", (int)pred[i]);
            r->correct += pred[i] == lab[i];
            if (r->confusion) r->confusion[(int)lab[i] * r->classes + (int)pred[i]]++;
        }
        r->total += batch.count;
        for (int l = 0; l < r->n_layers; l++) {
            snn_tensor *s = snn_neuron_layer_last_spikes(layers[l]);
            float rate = snn_neuron_layer_firing_rate(layers[l]);
            if (s && rate >= 0.0f) {
                r->spikes[l] += (double)rate * (double)s->numel;
                r->elements[l] += (double)s->numel;
            }
        }
        snn_step_end();
    }
    snn_free(pred, (size_t)cap * sizeof *pred, SNN_CPU);
    snn_no_grad_end();
    return status;
}

/* Writes the spike raster of the loader's first image: up to `per_layer` neurons from each
 * neuron layer, evenly spaced over the layer. */
static UNUSED snn_status write_raster(const char *path, snn_module *model, const snn_dataset *ds,
                                      const snn_loader_config *norm, snn_device device, int per_layer)
{
    snn_loader_config cfg = *norm;
    cfg.batch_size = 1;
    cfg.shuffle = false;
    cfg.random_crop = cfg.horizontal_flip = false;
    cfg.prefetch = false;
    snn_loader *loader = snn_loader_new(ds, &cfg);
    if (!loader) return snn_last_status();
    snn_module *layers[MAX_LAYERS];
    const char *names[MAX_LAYERS];
    int n_layers = snn_model_neuron_layers(model, layers, names, MAX_LAYERS);
    const snn_model_config *config = snn_model_config_of(model);
    int T = config ? config->time_steps : 1;
    int total = n_layers * per_layer;
    float *raster = calloc((size_t)T * (size_t)total, sizeof *raster);
    int starts[MAX_LAYERS];
    snn_status status = SNN_OK;
    snn_batch batch;
    snn_module_train(model, false);
    snn_no_grad_begin();
    if (raster && snn_loader_next(loader, &batch)) {
        snn_step_begin();
        snn_tensor *x, *y;
        status = snn_batch_to_device(&batch, device, &x, &y);
        if (status == SNN_OK && !snn_module_forward(model, x)) status = snn_last_status();
        int row = 0;
        for (int l = 0; l < n_layers && status == SNN_OK; l++) {
            starts[l] = row;
            snn_tensor *s = snn_neuron_layer_last_spikes(layers[l]); /* (T, 1, ...) */
            if (!s) continue;
            int64_t per_step = s->numel / T;
            float *host = malloc((size_t)s->numel * sizeof *host);
            if (!host) break;
            snn_tensor_copy_to_host(s, host);
            for (int k = 0; k < per_layer; k++) {
                int64_t idx = per_step > per_layer ? (int64_t)k * per_step / per_layer : k % per_step;
                for (int t = 0; t < T; t++) raster[(size_t)t * (size_t)total + (size_t)row] = host[t * per_step + idx];
                row++;
            }
            free(host);
        }
        snn_step_end();
        if (status == SNN_OK)
            status = snn_svg_raster(path, "Spikes of one test image (rows: neurons sampled from each layer)",
                                    raster, T, total, starts, names, n_layers);
    }
    snn_no_grad_end();
    free(raster);
    snn_loader_free(loader);
    return status;
}

#endif /* SNN_EXAMPLES_COMMON_H */
