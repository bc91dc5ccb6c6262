/*
 * bench_recurrent.c - one training pass (forward + BPTT backward) of a recurrent spiking layer,
 * snn_recurrent_multistep (neurons/recurrent.c), at the sizes of the sequence tasks:
 *   T = 28,  N = 128, F = 256   sequential Fashion-MNIST by rows (one recurrent layer)
 *   T = 784, N = 128, F = 128   by pixels
 *   T = 100, N = 256, F = 512   an SHD-sized layer (100 frames of 10 ms)
 * for LIF and ALIF. bench/torch_recurrent.py times the same layer written as a PyTorch loop
 * (autograd through T steps), to run beside it in the same call.
 *
 * Work per step: the recurrent product S[t-1] W_rec^T (2 N F^2 FLOP forward, twice that in
 * backward: G_I W_rec and dW_rec += G_I^T S) and the neuron update (N F elements). At these
 * sizes the products are small GEMMs (N x F x F) issued T times in sequence: the step time is
 * bound by launches and by the sequential dependence through time, not by FLOPs or bytes; the
 * table prints the FLOP rate to show how far from either floor that is.
 *
 *   build/bin/bench_recurrent [--device cuda|cpu] [--steps 10]
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "snn.h"
#include "app/options.h"
#include "bench_stats.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Median seconds of `steps` forward + backward passes after 2 warm-ups. */
static double time_layer(snn_device device, snn_neuron_kind kind, int T, int N, int F, int steps)
{
    snn_rng rng;
    snn_rng_seed(&rng, 1);
    const size_t nx = (size_t)T * N * F;
    float *x_host = malloc(nx * sizeof *x_host), *w_host = malloc((size_t)F * F * sizeof(float));
    for (size_t i = 0; i < nx; i++) x_host[i] = 0.3f + 0.5f * snn_rng_normal(&rng);
    for (int i = 0; i < F * F; i++) w_host[i] = 0.5f * snn_rng_normal(&rng) / (float)F;
    snn_tensor *w = snn_tensor_new(SNN_SHAPE(F, F), device); /* OWNED: a layer's weights */
    if (!w || snn_tensor_copy_from_host(w, w_host) != SNN_OK) {
        fprintf(stderr, "bench_recurrent: %s\n", snn_last_error());
        exit(1);
    }
    w->requires_grad = true;
    snn_neuron_config cfg = snn_neuron_config_default(kind);
    cfg.surrogate = snn_surrogate_default(SNN_SURROGATE_ATAN);
    double *times = malloc((size_t)steps * sizeof *times);
    for (int s = -2; s < steps; s++) {
        snn_step_begin();
        snn_tensor *x = snn_from_host(SNN_SHAPE(T, N, F), x_host, device);
        x->requires_grad = true;
        snn_synchronize(device);
        const double t0 = now_s();
        snn_tensor *spikes = snn_recurrent_multistep(x, w, &cfg, NULL);
        if (!spikes || snn_backward(snn_sum_all(spikes)) != SNN_OK) {
            fprintf(stderr, "bench_recurrent: %s\n", snn_last_error());
            exit(1);
        }
        snn_synchronize(device);
        if (s >= 0) times[s] = now_s() - t0;
        snn_step_end();
    }
    double m = bench_median(times, steps);
    free(times);
    free(x_host);
    free(w_host);
    snn_tensor_free(w);
    return m;
}

int main(int argc, char **argv)
{
    const char *device_name = snn_cuda_available() ? "cuda" : "cpu";
    int steps = 10;
    option table[] = {
        {"--device", OPT_STRING, &device_name, "cpu, cuda"},
        {"--steps", OPT_INT, &steps, "timed passes per row (median)"},
    };
    int parsed = parse_options(argc, argv, "Forward + backward of a recurrent spiking layer.",
                               table, (int)(sizeof table / sizeof table[0]));
    if (parsed) return parsed == 2 ? 0 : 2;
    snn_device device = strcmp(device_name, "cuda") == 0 ? SNN_CUDA : SNN_CPU;
    if (steps < 1 || (device == SNN_CUDA && !snn_cuda_available())) {
        fprintf(stderr, "bench_recurrent: bad --steps %d or no CUDA device\n", steps);
        return 2;
    }
    const int shapes[3][3] = {{28, 128, 256}, {784, 128, 128}, {100, 256, 512}};
    const snn_neuron_kind kinds[2] = {SNN_NEURON_LIF, SNN_NEURON_ALIF};
    printf("recurrent spiking layer, forward + BPTT backward, device %s\n", device_name);
    printf("| neuron | T | N | F | ms / pass | us / time step | GFLOP/s of the products |\n"
           "|---|---:|---:|---:|---:|---:|---:|\n");
    for (int k = 0; k < 2; k++) {
        for (int i = 0; i < 3; i++) {
            const int T = shapes[i][0], N = shapes[i][1], F = shapes[i][2];
            if (device == SNN_CPU && T * N * F > 28 * 128 * 256) continue; /* minutes on a CPU */
            const double t = time_layer(device, kinds[k], T, N, F, steps);
            const double flop = 6.0 * T * (double)N * F * F; /* 2 N F^2 forward, 4 backward */
            printf("| %s | %d | %d | %d | %.2f | %.1f | %.0f |\n", snn_neuron_kind_name(kinds[k]),
                   T, N, F, 1e3 * t, 1e6 * t / T, flop / t / 1e9);
            fflush(stdout);
        }
    }
    snn_shutdown();
    return 0;
}
