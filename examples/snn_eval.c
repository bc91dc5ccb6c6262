/*
 * snn_eval.c - snn-eval: loads a checkpoint written by snn-train and reports test accuracy,
 * the firing rate of every neuron layer and the confusion matrix.
 *
 *   build/bin/snn-eval --checkpoint runs/fashion-mnist-cnn/checkpoint.safetensors
 *   build/bin/snn-eval runs/fashion-mnist-cnn          (a run's folder: its checkpoint)
 *   build/bin/snn-eval --checkpoint runs/fashion-mnist-cnn/best.safetensors
 *   build/bin/snn-eval --checkpoint runs/fashion-mnist-cnn/best.safetensors --kernels ref
 *   build/bin/snn-eval --nir model.nir --T 4     (a NIR graph instead: app/nir_eval.h)
 *
 * It prints the model's configuration as the checkpoint holds it (neuron and its constants,
 * surrogate, T, encoding; app/run_config.h) above the results, and below them the synaptic
 * operations of each layer over the test set with an energy estimate (docs/synops.md;
 * --synops-csv FILE writes them as CSV too).
 *
 * A checkpoint of snn-train --ema holds the trained weights and their moving average
 * ("ema.<name>" tensors, nn/ema.c): the average is what snn-train evaluated, so it is what
 * snn-eval evaluates too, unless --raw-weights asks for the trained ones. best.safetensors
 * holds one set, the one that scored best (its metadata say which, and from which epoch).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "app/checkpoint_run.h"
#include "app/evaluate.h"
#include "app/nir_eval.h"
#include "app/options.h"
#include "app/program.h"
#include "app/run_config.h"
#include "app/synops_report.h"
#include "snn.h"

int main(int argc, char **argv)
{
    if (nir_eval_wanted(argc, argv)) return nir_eval_main("snn-eval", argc, argv);
    const char *checkpoint = NULL, *dataset = NULL, *data = NULL, *device_name = "cpu";
    const char *precision_name = "fp32";
    const char *kernels = NULL; /* the library's choice: $SNN_KERNELS, else fast */
    const char *predictions = NULL, *synops_csv = NULL;
    int batch_size = 256, limit = 0, threads = 0;
    bool raw_weights = false;
    const char *nir_file = NULL; /* --nir runs nir_eval_main above; listed for --help */
    option table[] = {
        {"--checkpoint", OPT_STRING, &checkpoint,
         "checkpoint written by snn-train, or a run's folder: its checkpoint.safetensors "
         "(required)"},
        {"CHECKPOINT", OPT_STRING, &checkpoint, "the same as --checkpoint"},
        {"--dataset", OPT_STRING, &dataset, "data set (default: the one the checkpoint was trained on)"},
        {"--data", OPT_STRING, &data, "folder or archive of the data set"},
        {"--device", OPT_STRING, &device_name, "cpu, cuda"},
        {"--precision", OPT_STRING, &precision_name, "cuda: fp32, tf32 or bf16 convs and GEMMs"},
        {"--kernels", OPT_STRING, &kernels,
         "cpu: fast or ref (the plain-loop reference kernels, slower); none: $SNN_KERNELS, "
         "else fast"},
        {"--batch-size", OPT_INT, &batch_size, "batch size"},
        {"--limit-test", OPT_INT, &limit, "use only the first N test images (0: all)"},
        {"--threads", OPT_INT, &threads, "CPU threads (0: all cores)"},
        {"--predictions", OPT_STRING, &predictions, "write each test image's predicted class to this file, one a line"},
        {"--synops-csv", OPT_STRING, &synops_csv,
         "also write the synaptic operations and energy per layer to this CSV file"},
        {"--raw-weights", OPT_FLAG, &raw_weights, "a checkpoint of snn-train --ema: evaluate the trained weights, not their moving average"},
        {"--nir", OPT_STRING, &nir_file, "evaluate this NIR graph instead of a checkpoint (--nir FILE --help: its flags)"},
    };
    int parsed = parse_options(argc, argv, "Evaluates a checkpoint on the test split.", table,
                               (int)(sizeof table / sizeof table[0]));
    if (parsed) return parsed == 2 ? 0 : 2;
    char checkpoint_file[1024]; /* a run's folder: the checkpoint in it */
    if (checkpoint &&
        checkpoint_in_folder("snn-eval", &checkpoint, checkpoint_file, sizeof checkpoint_file))
        return 1;
    snn_precision precision;
    static const char *const precisions[] = {"fp32", "tf32", "bf16"};
    if (snn_precision_parse(precision_name, &precision) != SNN_OK)
        return option_bad_choice("snn-eval", "--precision", precision_name, precisions, 3);
    if (snn_set_precision(precision) != SNN_OK) {
        fprintf(stderr, "snn-eval: --precision %s: %s\n", precision_name, snn_last_error());
        return 2;
    }
    if (precision != SNN_PRECISION_FP32 && strcmp(device_name, "cuda") != 0) {
        fprintf(stderr, "snn-eval: --precision %s needs --device cuda (the cpu kernels are fp32)\n",
                precision_name);
        return 2;
    }
    if (run_kernels_select("snn-eval", kernels, device_name)) return 2;
    checkpoint_run run;
    int status = checkpoint_run_open(&run, "snn-eval", checkpoint, device_name, dataset, data,
                                     batch_size, limit, threads);
    if (status) return status;
    const snn_model_config *c = run.config;
    snn_device device = run.device;
    snn_module *model = run.model;
    /* which weights: the moving average where the checkpoint has one (the model was loaded with
     * the trained weights; the average replaces them), or what best.safetensors says it holds */
    char weights[300] = "";
    const char *ema = snn_metadata_get(&run.meta, "snn.train.ema");
    const char *kept = snn_metadata_get(&run.meta, "snn.train.weights");
    const char *best = snn_metadata_get(&run.meta, "snn.train.best_epoch");
    if (ema && !raw_weights) {
        if (snn_checkpoint_load_prefixed(checkpoint, model, SNN_EMA_PREFIX) != SNN_OK) {
            fprintf(stderr, "snn-eval: %s\n", snn_last_error());
            checkpoint_run_close(&run);
            return 1;
        }
        snprintf(weights, sizeof weights, "moving average (--ema %s); --raw-weights for the "
                 "trained ones", ema);
    } else if (ema) {
        snprintf(weights, sizeof weights, "trained (--raw-weights; the checkpoint also holds their "
                 "moving average, --ema %s)", ema);
    } else if (kept && best) {
        snprintf(weights, sizeof weights, "%s, of epoch %s (the best test accuracy of the run)",
                 kept, best);
    }
    if (raw_weights && !ema)
        fprintf(stderr, "snn-eval: note: --raw-weights: %s holds no moving average; evaluating "
                "the weights it holds\n", checkpoint);
    snn_loader *loader = snn_loader_new(&run.view, &run.loader);
    if (!loader) {
        fprintf(stderr, "snn-eval: %s\n", snn_last_error());
        status = 1;
    }
    eval_result r = {0};
    int64_t confusion[100 * 100] = {0};
    if (c->classes <= 100) r.confusion = confusion;
    if (predictions && !(r.predictions = fopen(predictions, "w"))) {
        fprintf(stderr, "snn-eval: cannot write '%s': %s\n", predictions, strerror(errno));
        status = 1;
    }
    snn_synops *synops = snn_synops_new(model); /* counts what the evaluation's layers do */
    if (!synops) {
        fprintf(stderr, "snn-eval: %s\n", snn_last_error());
        status = 1;
    }
    double t0 = now_seconds();
    if (loader && synops && evaluate(model, loader, device, &r) != SNN_OK) {
        fprintf(stderr, "snn-eval: %s\n", snn_last_error());
        status = 1;
    }
    if (loader && status == 0) {
        double seconds = now_seconds() - t0;
        printf("checkpoint  %s (%s, T=%d, %s neurons)\n", checkpoint, snn_model_kind_name(c->kind),
               c->time_steps, snn_neuron_kind_name(c->neuron.kind));
        run_config_print_model(stdout, "", model); /* the configuration the checkpoint holds */
        run_config_print_device(stdout, "", device, precision);
        if (weights[0]) printf("weights     %s\n", weights);
        if (device == SNN_CUDA) printf("precision   %s\n", snn_precision_name(precision));
        printf("test set    %s, %lld images, %.1f s on %s (%.0f img/s; counting the synaptic "
               "operations took %.2f s of it)\n", run.dataset, (long long)r.total, seconds,
               snn_device_name(device), (double)r.total / seconds, snn_synops_seconds(synops));
        printf("accuracy    %.2f%%   loss %.4f\n\nfiring rate per neuron layer:\n",
               100.0 * eval_accuracy(&r), r.loss_sum / (double)r.total);
        for (int l = 0; l < r.n_layers; l++)
            printf("  %-28s %.4f\n", r.layer_names[l], r.elements[l] > 0 ? r.spikes[l] / r.elements[l] : 0.0);
        if (snn_synops_status(synops) != SNN_OK) {
            fprintf(stderr, "snn-eval: %s\n", snn_last_error());
            status = 1;
        } else {
            synops_print(stdout, synops);
            if (synops_csv && synops_write_csv("snn-eval", synops_csv, synops)) status = 1;
        }
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
    if (r.predictions) fclose(r.predictions);
    snn_synops_free(synops);
    snn_loader_free(loader);
    if (status == 0) status = finish_stdout("snn-eval");
    checkpoint_run_close(&run);
    return status;
}
