/*
 * bench_dist.c - data-parallel scaling on the GPUs of one host: training throughput of a
 * spiking network on 1 GPU without NCCL and on N GPUs with it, the communication the backward
 * pass does not hide, and NCCL's all-reduce bandwidth for the model's gradient buffer.
 *
 *   build/bin/bench_dist --plain  [--model resnet18] [--T 4] [--batch 128] [--steps 30]
 *   build/bin/bench_dist --gpus 4 [--model resnet18] [--T 4] [--batch 128] [--steps 30]
 *                                 [--bucket-mb 25]
 *
 * --model takes any of snn-train's models (cnn, resnet18, sew-resnet18, ...): the CNN at 28x28x1,
 * the others at 32x32x3 (CIFAR). --bucket-mb sets the gradient bucket (snn_dist_config's
 * bucket_bytes, 25 MiB by default): smaller buckets start their all-reduce earlier in the backward
 * but each pays NCCL's fixed cost; one bucket larger than the model sends everything at the end.
 *
 * --gpus N starts N ranks of this program (the snn-train launcher, distributed/launch.c); --batch is
 * per GPU, so the global batch is N x batch. Each rank trains on its own random images (their
 * values do not change the work of a dense network): 3 warm-up steps, then
 *   throughput   `steps` steps queued without a host synchronisation, timed from one device
 *                synchronisation to the next: images/s = steps x batch x N / seconds;
 *   exposed      10 more steps, each synchronised: the mean step time, and the mean time from
 *                the end of the backward pass to the end of its gradient all-reduce
 *                (snn_dist_exposed_ms): communication not hidden behind the backward;
 *   all-reduce   20 all-reduces of a buffer of the model's parameter count in floats, alone:
 *                bus bandwidth = 2 (N - 1) / N x bytes / time (NCCL's own definition, what
 *                each GPU sends and receives in a ring).
 * Rank 0 prints one line, and a RESULT line that tools/gpu/dist.sh (stage scaling) tabulates.
 *
 * Napkin math (spiking ResNet-18, 11.2 M parameters): the all-reduce moves 2 (N - 1) / N x
 * 44.7 MB per GPU and step; at ~150-350 GB/s of NVLink bus bandwidth that is 0.1-0.3 ms for
 * N = 2, against ~75 ms of compute per step at batch 128, T = 4 (docs/benchmarks.md): even
 * fully exposed it would cost < 0.5 %.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "snn.h"
#include "app/options.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct bench_options {
    const char *model;
    snn_model_kind kind;     /* of model, checked by parse */
    int gpus, T, batch, steps;
    float bucket_mb;
    bool plain;
} bench_options;

/* 0, or the exit code: 2 for a bad command line (said), -1 after --help (exit 0). */
static int parse(int argc, char **argv, bench_options *o)
{
    option table[] = {
        {"--plain", OPT_FLAG, &o->plain, "one GPU without NCCL (the baseline)"},
        {"--gpus", OPT_INT, &o->gpus, "ranks on this host's GPUs, one process each"},
        {"--model", OPT_STRING, &o->model, "any of snn-train's models (cnn at 28x28x1, the others at 32x32x3)"},
        {"--T", OPT_INT, &o->T, "time steps"},
        {"--batch", OPT_INT, &o->batch, "images per GPU"},
        {"--steps", OPT_INT, &o->steps, "timed steps"},
        {"--bucket-mb", OPT_FLOAT, &o->bucket_mb, "gradient bucket size in MiB (snn_dist_config.bucket_bytes)"},
    };
    int parsed = parse_options(argc, argv, "Data-parallel scaling: img/s, exposed communication and "
                               "all-reduce bandwidth on N GPUs.", table,
                               (int)(sizeof table / sizeof table[0]));
    if (parsed) return parsed == 2 ? -1 : 2;
    if (snn_model_kind_parse(o->model, &o->kind) != SNN_OK) {
        fprintf(stderr, "bench_dist: --model: %s\n", snn_last_error());
        return 2;
    }
    if (o->T < 1 || o->batch < 1 || o->steps < 1 || o->gpus < 0 || !(o->bucket_mb > 0.0f)) {
        fprintf(stderr, "bench_dist: bad --T %d, --batch %d, --steps %d, --gpus %d or --bucket-mb "
                "%g (expected >= 1, >= 1, >= 1, >= 0, > 0)\n", o->T, o->batch, o->steps, o->gpus,
                (double)o->bucket_mb);
        return 2;
    }
    return 0;
}

/* One training step on the rank's images; the all-reduce when d is not NULL. */
static snn_status step(snn_module *model, snn_optimizer *opt, snn_dist *d, const float *images,
                       const float *labels, const snn_model_config *c, int batch)
{
    snn_step_begin();
    snn_module_zero_grad(model);
    snn_tensor *x = snn_from_host(SNN_SHAPE(batch, c->in_channels, c->height, c->width), images, SNN_CUDA);
    snn_tensor *y = snn_from_host(SNN_SHAPE(batch), labels, SNN_CUDA);
    snn_tensor *loss = snn_cross_entropy(snn_module_forward(model, x), y);
    snn_status st = !loss ? snn_last_status()
                          : d ? snn_dist_backward(d, loss, batch, batch * snn_dist_world_size(d))
                              : snn_backward(loss);
    if (st == SNN_OK) st = snn_optimizer_step(opt);
    snn_step_end();
    return st;
}

static int run_rank(const bench_options *o, snn_dist *d)
{
    const snn_model_kind kind = o->kind;
    snn_model_config c = snn_model_config_default(kind);
    c.time_steps = o->T;
    c.classes = 10;
    if (kind == SNN_MODEL_SPIKING_CNN) c.in_channels = 1, c.height = 28, c.width = 28;
    else c.in_channels = 3, c.height = 32, c.width = 32;
    snn_rng rng;
    snn_rng_seed(&rng, 1);
    snn_module *model = snn_model_new(&c, &rng);
    if (!model || snn_module_to(model, SNN_CUDA) != SNN_OK) return 1;
    snn_optimizer *opt = snn_adam_new(model, 1e-3f, 0.0f, false);
    if (!opt || (d && snn_dist_attach(d, model) != SNN_OK)) return 1;
    const int rank = snn_dist_rank(d), world = snn_dist_world_size(d);
    const size_t per = (size_t)c.in_channels * c.height * c.width;
    float *images = malloc((size_t)o->batch * per * sizeof *images);
    float *labels = malloc((size_t)o->batch * sizeof *labels);
    snn_rng_seed(&rng, 100 + (uint64_t)rank);
    for (size_t i = 0; i < (size_t)o->batch * per; i++) images[i] = snn_rng_normal(&rng);
    for (int i = 0; i < o->batch; i++) labels[i] = (float)(i % c.classes);

    snn_status st = SNN_OK;
    for (int s = 0; s < 3 && st == SNN_OK; s++) st = step(model, opt, d, images, labels, &c, o->batch);
    snn_synchronize(SNN_CUDA);
    double t0 = now();
    for (int s = 0; s < o->steps && st == SNN_OK; s++)
        st = step(model, opt, d, images, labels, &c, o->batch);
    snn_synchronize(SNN_CUDA);
    double seconds = now() - t0;
    const double images_per_s = (double)o->steps * o->batch * world / seconds;

    /* exposed communication, step by step */
    const int probes = 10;
    double step_ms = 0.0, exposed_ms = 0.0;
    for (int s = 0; s < probes && st == SNN_OK; s++) {
        double a = now();
        st = step(model, opt, d, images, labels, &c, o->batch);
        double e = d ? snn_dist_exposed_ms(d) : 0.0; /* waits for the device */
        snn_synchronize(SNN_CUDA);
        step_ms += 1e3 * (now() - a) / probes;
        exposed_ms += (e > 0 ? e : 0.0) / probes;
    }

    /* the all-reduce alone, on a buffer the size of the gradients */
    const int64_t n = snn_module_num_parameters(model);
    double allreduce_ms = 0.0, bus_gbs = 0.0;
    if (d && st == SNN_OK) {
        snn_tensor *grads = snn_tensor_new(SNN_SHAPE(n), SNN_CUDA); /* zeros */
        float *buf = grads ? grads->data : NULL;
        if (!buf) st = SNN_ERR_MEMORY;
        for (int i = 0; i < 3 && st == SNN_OK; i++) st = snn_dist_allreduce(d, buf, n);
        snn_synchronize(SNN_CUDA);
        double a = now();
        const int reps = 20;
        for (int i = 0; i < reps && st == SNN_OK; i++) st = snn_dist_allreduce(d, buf, n);
        snn_synchronize(SNN_CUDA);
        allreduce_ms = 1e3 * (now() - a) / reps;
        if (world > 1)
            bus_gbs = 2.0 * (world - 1) / world * (double)n * 4.0 / (allreduce_ms * 1e-3) / 1e9;
        snn_tensor_free(grads);
    }
    if (st != SNN_OK) {
        fprintf(stderr, "bench_dist: rank %d: %s\n", rank, snn_last_error());
    } else if (rank == 0) {
        printf("bench_dist: %s T=%d batch %d/GPU x %d GPU(s) (%s, buckets of %g MiB): %.1f img/s | "
               "step %.2f ms (synced) | exposed comm %.3f ms/step (%.2f%%) | all-reduce of %.1fM "
               "floats (%.1f MB): %.3f ms, bus %.1f GB/s\n", o->model, o->T, o->batch, world,
               d ? snn_dist_backend(d) : "plain, no NCCL", (double)o->bucket_mb, images_per_s, step_ms,
               exposed_ms, 100.0 * exposed_ms / step_ms, (double)n / 1e6, (double)n * 4.0 / 1e6,
               allreduce_ms, bus_gbs);
        printf("RESULT model=%s T=%d batch=%d gpus=%d mode=%s bucket_mb=%g img_s=%.1f step_ms=%.3f "
               "exposed_ms=%.4f allreduce_ms=%.4f busbw_gbs=%.1f\n", o->model, o->T, o->batch,
               world, d ? "nccl" : "plain", (double)o->bucket_mb, images_per_s, step_ms, exposed_ms,
               allreduce_ms, bus_gbs);
        fflush(stdout);
    }
    free(images);
    free(labels);
    snn_optimizer_free(opt);
    snn_module_free(model);
    return st == SNN_OK ? 0 : 1;
}

int main(int argc, char **argv)
{
    bench_options o = {"resnet18", SNN_MODEL_RESNET18, 0, 4, 128, 30, 25.0f, false};
    int parsed = parse(argc, argv, &o);
    if (parsed) return parsed < 0 ? 0 : 2;
    if (!snn_cuda_available()) {
        fprintf(stderr, "bench_dist: needs a GPU\n");
        return 0;
    }
    snn_dist_env env;
    if (snn_dist_env_read(NULL, NULL, NULL, &env) != SNN_OK) {
        fprintf(stderr, "bench_dist: %s\n", snn_last_error());
        return 2;
    }
    if (!o.plain && env.world_size == 0) {
        if (!snn_dist_nccl_compiled()) {
            fprintf(stderr, "bench_dist: this build has no NCCL; only --plain runs\n");
            return 0;
        }
        return snn_dist_launch(o.gpus > 0 ? o.gpus : 1, argc, argv, "--gpus");
    }
    snn_dist *d = NULL;
    if (!o.plain) {
        snn_dist_config c = snn_dist_config_default();
        c.rank = env.rank, c.world_size = env.world_size, c.local_rank = env.local_rank;
        c.init = env.init, c.device = SNN_CUDA;
        c.bucket_bytes = (size_t)((double)o.bucket_mb * (double)(1 << 20));
        d = snn_dist_new(&c);
        if (!d) {
            fprintf(stderr, "bench_dist: rank %d: %s\n", env.rank, snn_last_error());
            return 1;
        }
    }
    int code = run_rank(&o, d);
    if (code == 0) snn_dist_free(d);
    else snn_dist_abort(d);
    snn_shutdown();
    return code;
}
