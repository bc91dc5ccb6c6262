/*
 * nir_eval.c - snn-eval --nir (nir_eval.h): reads the graph with snn_nir_load, loads the test
 * split, checks that the graph's Input takes its samples (flattened for a flat Input) and its
 * Output has one value per class, and runs evaluate() (app/evaluate.h) on the Output's mean
 * over the T steps, as snn-eval does for a checkpoint.
 */
#include "app/nir_eval.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/evaluate.h"
#include "app/options.h"
#include "app/program.h"
#include "app/run_config.h"
#include "snn.h"
#ifdef SNN_WITH_NIR
#include "nir/nir.h"
#endif

bool nir_eval_wanted(int argc, char **argv)
{
    for (int a = 1; a < argc; a++)
        if (strcmp(argv[a], "--nir") == 0) return true;
    return false;
}

#ifndef SNN_WITH_NIR
int nir_eval_main(const char *program, int argc, char **argv)
{
    (void)argc, (void)argv;
    fprintf(stderr, "%s: --nir: this build has no NIR support (it needs the HDF5 C library, "
            "Debian libhdf5-dev)\n", program);
    return 2;
}
#else

static const char *shape_text(snn_shape s, char *buf, size_t size)
{
    int used = snprintf(buf, size, "(");
    for (int d = 0; d < s.ndim && used > 0 && (size_t)used < size; d++)
        used += snprintf(buf + used, size - (size_t)used, d ? ", %lld" : "%lld",
                         (long long)s.dim[d]);
    if (used > 0 && (size_t)used < size) snprintf(buf + used, size - (size_t)used, ")");
    return buf;
}

/* Whether the graph takes the set's samples: as they are (C, H, W), or flattened (C*H*W);
 * 0, or 2 with a message. */
static int check_fit(const char *program, const snn_nir_info *info, const snn_dataset *set,
                     bool *flatten)
{
    char buf[96];
    const int64_t features = (int64_t)set->channels * set->height * set->width;
    const snn_shape image = SNN_SHAPE(set->channels, set->height, set->width);
    *flatten = info->input.ndim == 1 && info->input.dim[0] == features;
    if (!*flatten && !snn_shape_equal(info->input, image)) {
        fprintf(stderr, "%s: the graph's Input takes samples of shape %s; %s has %dx%dx%d images "
                "(%lld values)\n", program, shape_text(info->input, buf, sizeof buf), set->name,
                set->channels, set->height, set->width, (long long)features);
        return 2;
    }
    if (info->output.ndim != 1 || info->output.dim[0] != set->classes) {
        fprintf(stderr, "%s: the graph's Output has shape %s; %s has %d classes (expected one "
                "value per class)\n", program, shape_text(info->output, buf, sizeof buf),
                set->name, set->classes);
        return 2;
    }
    if (set->time_steps == 0 && info->time_steps < 1) {
        fprintf(stderr, "%s: --T: the graph does not say how many steps to run each image (its "
                "file has no time_steps); give --T\n", program);
        return 2;
    }
    return 0;
}

int nir_eval_main(const char *program, int argc, char **argv)
{
    const char *file = NULL, *dataset = "fashion-mnist", *data = NULL, *device_name = "cpu";
    const char *kernels = NULL, *predictions = NULL, *dt_text = NULL, *norm = "auto";
    int batch_size = 256, limit = 0, threads = 0, time_steps = 0;
    option table[] = {
        {"--nir", OPT_STRING, &file, "the NIR graph to evaluate (HDF5, as nir.write and "
         "snn-export-nir write it)"},
        {"--T", OPT_INT, &time_steps, "time steps per image (0: the file's metadata)"},
        {"--dt", OPT_STRING, &dt_text, "the Euler time step in the graph's unit (none: the "
         "file's metadata dt)"},
        {"--dataset", OPT_STRING, &dataset, "data set"},
        {"--data", OPT_STRING, &data, "folder or archive of the data set"},
        {"--device", OPT_STRING, &device_name, "cpu, cuda"},
        {"--kernels", OPT_STRING, &kernels, "cpu: fast or ref; none: $SNN_KERNELS, else fast"},
        {"--batch-size", OPT_INT, &batch_size, "batch size"},
        {"--limit-test", OPT_INT, &limit, "use only the first N test images (0: all)"},
        {"--threads", OPT_INT, &threads, "CPU threads (0: all cores)"},
        {"--predictions", OPT_STRING, &predictions, "write each test image's predicted class "
         "to this file, one a line"},
        {"--norm", OPT_STRING, &norm, "input scaling: dataset (snn-train's per-channel mean and "
         "std), none (pixels in [0, 1]), auto (dataset for a graph snn.c wrote, else none)"},
    };
    int parsed = parse_options(argc, argv, "Evaluates a NIR graph on the test split (the Output "
                               "node's mean over T is the logits).", table,
                               (int)(sizeof table / sizeof table[0]));
    if (parsed) return parsed == 2 ? 0 : 2;
    snn_nir_options options = snn_nir_options_default();
    options.time_steps = time_steps;
    if (dt_text) {
        char *end = NULL;
        options.dt = strtod(dt_text, &end);
        if (*dt_text == '\0' || *end || !(options.dt > 0.0)) {
            fprintf(stderr, "%s: --dt expects a time step > 0, got '%s'\n", program, dt_text);
            return 2;
        }
    }
    if (!file || batch_size < 1 || limit < 0 || time_steps < 0 ||
        (strcmp(norm, "auto") && strcmp(norm, "dataset") && strcmp(norm, "none"))) {
        fprintf(stderr, "%s: %s; see --help\n", program, !file ? "--nir needs a file"
                : strcmp(norm, "auto") && strcmp(norm, "dataset") && strcmp(norm, "none")
                    ? "--norm expects auto, dataset or none"
                    : "--batch-size must be >= 1, --limit-test and --T >= 0");
        return 2;
    }
    if (snn_device_parse(device_name, &options.device) != SNN_OK) {
        fprintf(stderr, "%s: --device: %s\n", program, snn_last_error());
        return 2;
    }
    if (options.device == SNN_CUDA && !snn_cuda_available()) {
        fprintf(stderr, "%s: --device cuda: no CUDA device or no CUDA backend in this build\n",
                program);
        return 2;
    }
    if (run_kernels_select(program, kernels, device_name)) return 2;
    snn_set_num_threads(threads);
    snn_module *graph = snn_nir_load(file, &options);
    snn_nir_info info;
    if (!graph || snn_nir_graph_info(graph, &info) != SNN_OK) {
        fprintf(stderr, "%s: %s\n", program, snn_last_error());
        snn_module_free(graph);
        snn_shutdown();
        return 1;
    }
    /* event sets: T frames a sample (the graph's T, else the readers' default 10) */
    snn_event_frames frames = {info.time_steps > 0 ? info.time_steps : 10, SNN_SPLIT_BY_NUMBER, 1};
    snn_dataset test;
    if (snn_dataset_load_frames(dataset, data, SNN_SPLIT_TEST, &frames, &test) != SNN_OK) {
        fprintf(stderr, "%s: %s\n", program, snn_last_error());
        snn_module_free(graph);
        snn_shutdown();
        return 1;
    }
    snn_dataset view = test;
    if (limit && limit < view.count) view.count = limit;
    bool flatten = false;
    int status = check_fit(program, &info, &view, &flatten);
    snn_module *model = graph;
    if (status == 0 && flatten) { /* (N, C, H, W) -> (N, C*H*W), (T, N, ...) likewise */
        snn_module *sequence = snn_sequential_new();
        snn_status st = sequence ? snn_module_add(sequence, "flatten",
                                                  snn_flatten_new(view.time_steps ? 2 : 1, -1))
                                 : snn_last_status();
        if (st == SNN_OK) {
            st = snn_module_add(sequence, "graph", graph); /* the sequence owns it, or freed it */
            graph = NULL;
        }
        model = st == SNN_OK ? sequence : NULL;
        if (st != SNN_OK) {
            fprintf(stderr, "%s: %s\n", program, snn_last_error());
            snn_module_free(sequence);
            snn_module_free(graph);
            status = 1;
        }
    }
    snn_loader_config loader_config = snn_loader_config_default();
    loader_config.batch_size = batch_size;
    loader_config.shuffle = false;
    bool normalise = strcmp(norm, "dataset") == 0 ||
                     (strcmp(norm, "auto") == 0 && strcmp(info.source, "snn.c") == 0);
    if (normalise) snn_dataset_default_norm(&view, loader_config.mean, loader_config.std);
    snn_loader *loader = status == 0 ? snn_loader_new(&view, &loader_config) : NULL;
    if (status == 0 && !loader) {
        fprintf(stderr, "%s: %s\n", program, snn_last_error());
        status = 1;
    }
    eval_result r = {0};
    if (status == 0 && predictions && !(r.predictions = fopen(predictions, "w"))) {
        fprintf(stderr, "%s: cannot write '%s': %s\n", program, predictions, strerror(errno));
        status = 1;
    }
    double t0 = now_seconds();
    if (status == 0 && evaluate(model, loader, options.device, &r) != SNN_OK) {
        fprintf(stderr, "%s: %s\n", program, snn_last_error());
        status = 1;
    }
    if (status == 0) {
        double seconds = now_seconds() - t0;
        char in[96], out[96];
        printf("graph       %s (%d nodes, %d edges%s%s%s)\n", file, info.nodes, info.edges,
               info.back_edges ? ", recurrent" : "", info.source[0] ? ", written by " : "",
               info.source);
        if (info.dt > 0.0) printf("dt          %g (%s)\n", info.dt, info.dt_from_file ? "the file's"
                                  : "--dt");
        printf("time steps  %d%s\n", view.time_steps ? view.time_steps : info.time_steps,
               view.time_steps ? " event frames" : time_steps ? " (--T)" : " (the file's)");
        printf("input       %s%s, %s\n", shape_text(info.input, in, sizeof in),
               flatten ? " (the images flattened)" : "", normalise ? "normalised as snn-train does"
               : "pixels in [0, 1]");
        printf("output      %s, its mean over the steps is the logits\n",
               shape_text(info.output, out, sizeof out));
        run_config_print_device(stdout, "", options.device, SNN_PRECISION_FP32);
        printf("test set    %s, %lld images, %.1f s on %s (%.0f img/s)\n", view.name,
               (long long)r.total, seconds, snn_device_name(options.device),
               (double)r.total / seconds);
        printf("accuracy    %.2f%%   loss %.4f\n", 100.0 * eval_accuracy(&r),
               r.total ? r.loss_sum / (double)r.total : 0.0);
    }
    if (r.predictions) fclose(r.predictions);
    snn_loader_free(loader);
    snn_module_free(model);
    snn_dataset_free(&test);
    if (status == 0) status = finish_stdout(program);
    snn_shutdown();
    return status;
}
#endif
