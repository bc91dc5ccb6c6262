/*
 * snn_eval.c - snn-eval: loads a checkpoint written by snn-train and reports test accuracy,
 * the firing rate of every neuron layer and the confusion matrix.
 *
 *   build/bin/snn-eval --checkpoint runs/fashion-mnist-cnn/checkpoint.safetensors
 */
#include "snn_common.h"

int main(int argc, char **argv)
{
    const char *checkpoint = NULL, *dataset = NULL, *data = NULL, *device_name = "cpu";
    int batch_size = 256, limit = 0, threads = 0;
    option table[] = {
        {"--checkpoint", OPT_STRING, &checkpoint, "checkpoint written by snn-train (required)"},
        {"--dataset", OPT_STRING, &dataset, "data set (default: the one the checkpoint was trained on)"},
        {"--data", OPT_STRING, &data, "folder or archive of the data set"},
        {"--device", OPT_STRING, &device_name, "cpu, cuda"},
        {"--batch-size", OPT_INT, &batch_size, "batch size"},
        {"--limit-test", OPT_INT, &limit, "use only the first N test images (0: all)"},
        {"--threads", OPT_INT, &threads, "CPU threads (0: all cores)"},
    };
    int parsed = parse_options(argc, argv, "Evaluates a checkpoint on the test split.", table,
                               (int)(sizeof table / sizeof table[0]));
    if (parsed) return parsed == 2 ? 0 : 2;
    if (!checkpoint) {
        fprintf(stderr, "snn-eval: --checkpoint is required; see --help\n");
        return 2;
    }
    snn_device device;
    if (snn_device_parse(device_name, &device) != SNN_OK || batch_size < 1 || limit < 0) {
        fprintf(stderr, "snn-eval: bad --device, --batch-size or --limit-test: %s\n", snn_last_error());
        return 2;
    }
    if (device == SNN_CUDA && !snn_cuda_available()) {
        fprintf(stderr, "snn-eval: --device cuda: no CUDA device or no CUDA backend in this build\n");
        return 2;
    }
    snn_set_num_threads(threads);
    snn_metadata meta;
    snn_module *model = snn_checkpoint_load_model(checkpoint, device, &meta);
    if (!model) {
        fprintf(stderr, "snn-eval: %s\n", snn_last_error());
        return 1;
    }
    if (!dataset) dataset = snn_metadata_get(&meta, "snn.train.dataset");
    if (!dataset) dataset = "fashion-mnist";
    snn_dataset test;
    if (snn_dataset_load(dataset, data, SNN_SPLIT_TEST, &test) != SNN_OK) {
        fprintf(stderr, "snn-eval: %s\n", snn_last_error());
        snn_module_free(model);
        return 1;
    }
    snn_dataset view = test;
    if (limit && limit < view.count) view.count = limit;
    const snn_model_config *c = snn_model_config_of(model);
    int status = 0;
    if (view.channels != c->in_channels || view.height != c->height || view.width != c->width ||
        view.classes != c->classes) {
        fprintf(stderr, "snn-eval: the model takes %dx%dx%d images and %d classes; %s has %dx%dx%d "
                "and %d\n", c->in_channels, c->height, c->width, c->classes, dataset, view.channels,
                view.height, view.width, view.classes);
        status = 2;
    }
    snn_loader_config lc = snn_loader_config_default();
    lc.batch_size = batch_size;
    lc.shuffle = false;
    snn_dataset_default_norm(&view, lc.mean, lc.std);
    if (c->encoding == SNN_ENCODING_POISSON)
        for (int k = 0; k < SNN_DATA_MAX_CHANNELS; k++) lc.mean[k] = 0.0f, lc.std[k] = 1.0f;
    snn_loader *loader = status ? NULL : snn_loader_new(&view, &lc);
    eval_result r = {0};
    int64_t confusion[100 * 100] = {0};
    if (c->classes <= 100) r.confusion = confusion;
    double t0 = now_seconds();
    if (loader && evaluate(model, loader, device, &r) != SNN_OK) {
        fprintf(stderr, "snn-eval: %s\n", snn_last_error());
        status = 1;
    }
    if (loader && status == 0) {
        double seconds = now_seconds() - t0;
        printf("checkpoint  %s (%s, T=%d, %s neurons)\n", checkpoint, snn_model_kind_name(c->kind),
               c->time_steps, snn_neuron_kind_name(c->neuron.kind));
        printf("test set    %s, %lld images, %.1f s on %s (%.0f img/s)\n", dataset, (long long)r.total,
               seconds, snn_device_name(device), (double)r.total / seconds);
        printf("accuracy    %.2f%%   loss %.4f\n\nfiring rate per neuron layer:\n",
               100.0 * eval_accuracy(&r), r.loss_sum / (double)r.total);
        for (int l = 0; l < r.n_layers; l++)
            printf("  %-28s %.4f\n", r.layer_names[l], r.elements[l] > 0 ? r.spikes[l] / r.elements[l] : 0.0);
        if (r.confusion && c->classes <= 20) {
            printf("\nconfusion matrix (rows: true class, columns: predicted):\n      ");
            for (int j = 0; j < c->classes; j++) printf("%6d", j);
            printf("\n");
            for (int i = 0; i < c->classes; i++) {
                printf("%6d", i);
                for (int j = 0; j < c->classes; j++) printf("%6lld", (long long)confusion[i * c->classes + j]);
                printf("\n");
            }
        }
    }
    snn_loader_free(loader);
    snn_dataset_free(&test);
    snn_module_free(model);
    snn_shutdown();
    return status;
}
