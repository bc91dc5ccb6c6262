/*
 * bench_train_step.c - one training step of a spiking network, and inference latency, on a
 * device: the numbers that say whether snn.c trains as fast as the Python stacks.
 *
 *   build/bin/bench_train_step [--device cuda] [--model resnet18|sew-resnet18|cnn] [--T 4]
 *                              [--batch 64,128] [--steps 20] [--width 64]
 *                              [--neuron lif|relu|stbif|...] [--infer-batch 1,64]
 * --neuron relu is the same model as an ANN (T = 1): the baseline of the ANN vs SNN profile
 * (docs/ann2snn.md).
 *
 * For each batch size: median ms per step (forward, backward, Adam update; timed with the
 * device synchronised around each step), images per second (counting each image once, not T
 * times), and the peak device memory snn.c held. Then inference (eval mode, no tape) latency at
 * batch 1 and throughput at batch 64. Inputs are random normal images; their values do not
 * change the work of a dense network.
 *
 * Napkin math (spiking ResNet-18, CIFAR stem, 32x32, width 64): ~0.56 GFLOP per image per time
 * step forward, x3 for forward + backward, so B = 64, T = 4 is ~430 GFLOP per step: ~6.5 ms at
 * the H100's 67 TFLOP/s fp32 peak, ~0.9 ms at its ~500 TFLOP/s dense TF32 rate.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "snn.h"
#ifdef SNN_WITH_CUDA
#include "tensor/cuda_options.h"
#endif

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int compare_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, compare_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Median seconds of `steps` timed calls after 3 warm-ups; train: forward+backward+update. */
static double time_steps(snn_module *model, snn_optimizer *opt, snn_device device, int batch,
                         int steps, bool train, const snn_model_config *c, snn_rng *rng)
{
    size_t n = (size_t)batch * (size_t)(c->in_channels * c->height * c->width);
    float *images = malloc(n * sizeof *images), *labels = malloc((size_t)batch * sizeof *labels);
    for (size_t i = 0; i < n; i++) images[i] = snn_rng_normal(rng);
    for (int i = 0; i < batch; i++) labels[i] = (float)(i % c->classes);
    double *times = malloc((size_t)steps * sizeof *times);
    snn_module_train(model, train);
    if (!train) snn_no_grad_begin();
    for (int s = -3; s < steps; s++) {
        snn_synchronize(device);
        double t0 = now();
        snn_step_begin();
        snn_tensor *x = snn_from_host(SNN_SHAPE(batch, c->in_channels, c->height, c->width), images, device);
        snn_tensor *y = snn_from_host(SNN_SHAPE(batch), labels, device);
        snn_synchronize(device); /* the upload is the data loader's cost, not the step's */
        t0 = now();
        if (train) snn_module_zero_grad(model);
        snn_tensor *out = snn_module_forward(model, x);
        if (train) {
            snn_tensor *loss = snn_cross_entropy(out, y);
            if (!loss || snn_backward(loss) != SNN_OK || snn_optimizer_step(opt) != SNN_OK) {
                fprintf(stderr, "bench_train_step: %s\n", snn_last_error());
                exit(1);
            }
        } else if (!out) {
            fprintf(stderr, "bench_train_step: %s\n", snn_last_error());
            exit(1);
        }
        snn_synchronize(device);
        double t = now() - t0;
        snn_step_end();
        if (s >= 0) times[s] = t;
    }
    if (!train) snn_no_grad_end();
    double m = median(times, steps);
    free(times);
    free(images);
    free(labels);
    return m;
}

int main(int argc, char **argv)
{
    const char *device_name = snn_cuda_available() ? "cuda" : "cpu", *model_name = "resnet18";
    const char *batches = "64,128", *neuron = "lif", *infer_batches = "1,64";
    int T = 4, steps = 20, width = 0, infer = 1, tf32 = 0;
    for (int a = 1; a < argc; a += 2) {
        if (!strcmp(argv[a], "--no-infer")) { /* training steps only (for profilers) */
            infer = 0;
            a--;
            continue;
        }
        if (!strcmp(argv[a], "--tf32")) { /* cuBLAS on TF32 tensor cores (fp32 by default) */
#ifdef SNN_WITH_CUDA
            snn_cuda_set_tf32(true);
            tf32 = 1;
#endif
            a--;
            continue;
        }
        if (a + 1 >= argc) break;
        if (!strcmp(argv[a], "--device")) device_name = argv[a + 1];
        else if (!strcmp(argv[a], "--model")) model_name = argv[a + 1];
        else if (!strcmp(argv[a], "--T")) T = atoi(argv[a + 1]);
        else if (!strcmp(argv[a], "--batch")) batches = argv[a + 1];
        else if (!strcmp(argv[a], "--steps")) steps = atoi(argv[a + 1]);
        else if (!strcmp(argv[a], "--width")) width = atoi(argv[a + 1]);
        else if (!strcmp(argv[a], "--neuron")) neuron = argv[a + 1]; /* relu: the ANN, T = 1 */
        else if (!strcmp(argv[a], "--infer-batch")) infer_batches = argv[a + 1];
        else {
            fprintf(stderr, "usage: %s [--device D] [--model M] [--T T] [--batch B1,B2] [--steps S] [--width W] [--neuron lif|relu|stbif|...] [--infer-batch B1,B2] [--no-infer] [--tf32]\n", argv[0]);
            return 2;
        }
    }
    snn_device device;
    snn_model_kind kind;
    snn_neuron_kind neuron_kind;
    if (snn_device_parse(device_name, &device) != SNN_OK || snn_model_kind_parse(model_name, &kind) != SNN_OK ||
        snn_neuron_kind_parse(neuron, &neuron_kind) != SNN_OK) {
        fprintf(stderr, "bench_train_step: %s\n", snn_last_error());
        return 2;
    }
    if (device == SNN_CUDA && !snn_cuda_available()) {
        printf("bench_train_step: no CUDA device\n");
        return 0;
    }
    snn_rng rng;
    snn_rng_seed(&rng, 0);
    snn_model_config c = snn_model_config_default(kind);
    c.neuron = snn_neuron_config_default(neuron_kind);
    c.neuron.surrogate = snn_surrogate_default(SNN_SURROGATE_ATAN);
    if (snn_neuron_is_ann(neuron_kind)) T = 1; /* an ANN: one pass */
    c.time_steps = T;
    if (width) c.width_base = width;
    snn_module *model = snn_model_new(&c, &rng);
    if (!model || snn_module_to(model, device) != SNN_OK) {
        fprintf(stderr, "bench_train_step: %s\n", snn_last_error());
        return 1;
    }
    snn_optimizer *opt = snn_adam_new(model, 1e-3f, 0.0f, false);
    printf("%s, T=%d, width %d, %lld parameters, device %s, %s neurons, Adam, GEMMs in %s\n",
           model_name, T, c.width_base, (long long)snn_module_num_parameters(model), device_name,
           neuron, tf32 ? "TF32" : "fp32");
    printf("| phase | batch | ms / step | images / s | peak device MB |\n|---|---:|---:|---:|---:|\n");
    char list[64];
    snprintf(list, sizeof list, "%s", batches);
    for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
        int batch = atoi(tok);
        double t = time_steps(model, opt, device, batch, steps, true, &c, &rng);
        printf("| train | %d | %.2f | %.0f | %.0f |\n", batch, 1e3 * t, batch / t,
               (double)snn_peak_bytes(device) / 1e6);
    }
    snprintf(list, sizeof list, "%s", infer_batches);
    for (char *tok = strtok(list, ","); infer && tok; tok = strtok(NULL, ",")) {
        int batch = atoi(tok);
        double t = time_steps(model, opt, device, batch, steps, false, &c, &rng);
        printf("| infer | %d | %.2f | %.0f | %.0f |\n", batch, 1e3 * t, batch / t,
               (double)snn_peak_bytes(device) / 1e6);
    }
    snn_optimizer_free(opt);
    snn_module_free(model);
    snn_shutdown();
    return 0;
}
