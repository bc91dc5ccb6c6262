/*
 * test_cuda_memory_estimate.c - snn_model_memory_estimate (nn/model_memory.c) on the GPU: the
 * CPU test (test_memory_estimate) run with device memory.
 *   - first, on a fresh context, one run as snn-train does it (the arena given exactly the
 *     estimated step): the drop of cudaMemGetInfo's free memory over the run (weights,
 *     gradients, Adam, the arena, the reduction scratch, cuBLAS and its workspace, the kernels
 *     loaded on first use) must stay within the estimate's total, whose fixed part carries
 *     a 256 MiB margin for what CUDA takes outside snn_alloc;
 *   - then, per case: parameters exactly, the step never below the arena's measured high-water
 *     mark plus the step pool's blocks (the gradients of activations) and at most STEP_SLACK
 *     above it; the pool's part alone never below what the pool reserved. Three cases run in
 *     TF32 and BF16: the conv workspace depends on the precision (BF16's im2col column matrix
 *     is bf16, half the bytes of fp32's; the implicit-GEMM layers need none), and the estimate
 *     asks the device's table for it under the precision set when it is computed. Two steps
 *     through time too (snn_model_memory_estimate_through_time): an online step in BF16 with
 *     the conv outputs kept as bf16, and BPTT in segments of 4 steps; and an OTTT step (the
 *     input traces of every conv and linear layer).
 * Its printed table is summed up in docs/benchmarks.md ("Memory estimate against the measured
 * step"), in full in docs/log/benchmarks-2026.md. Skipped (77) without a GPU.
 * Run: ctest --test-dir build -R cuda_memory_estimate --output-on-failure
 */
#include "memory_probe.h"
#include "test.h"

#define STEP_SLACK 1.05

static void test_total_as_snn_train(void)
{
    probe_case pc = probe_make("resnet18 w32 T4 N64 adam", SNN_MODEL_RESNET18, 32, 4, 64, true, 2);
    probe_result r;
    bool ok = probe_run(&pc, SNN_CUDA, true, &r);
    CHECK(ok);
    if (!ok) {
        fprintf(stderr, "  %s\n", snn_last_error());
        return;
    }
    char b[3][32];
    fprintf(stderr, "  %s: estimated total %s, the device's free memory dropped by %s "
            "(margin %s)\n", pc.name, probe_mib(r.estimate.total, b[0], 32),
            probe_mib(r.device_used, b[1], 32), probe_mib(r.estimate.total - r.device_used, b[2], 32));
    CHECK(r.device_used > 0.0 && r.device_used <= r.estimate.total);
}

static void test_estimate_against_measured(void)
{
    probe_case cases[24];
    snn_precision precision[24] = {SNN_PRECISION_FP32};
    int n = 0;
    cases[n++] = probe_make("cnn w32 T4 N128 adam", SNN_MODEL_SPIKING_CNN, 32, 4, 128, true, 2);
    cases[n] = probe_make("cnn w128 T4 N128 mse sgd", SNN_MODEL_SPIKING_CNN, 128, 4, 128, true, 1);
    cases[n].config.spiking_readout = true;
    n++;
    cases[n++] = probe_make("resnet18 w64 T4 N32 adam", SNN_MODEL_RESNET18, 64, 4, 32, true, 2);
    cases[n] = probe_make("sew-resnet18 w32 T2 N64 poisson", SNN_MODEL_SEW_RESNET18, 32, 2, 64, true, 1);
    cases[n].config.encoding = SNN_ENCODING_POISSON;
    n++;
    cases[n] = probe_make("dvsnet 128x128 w32 T8 N16 adam", SNN_MODEL_DVS_NET, 32, 8, 16, true, 2);
    n++;
    cases[n] = probe_make("cnn 34x34 events w32 T10 N64", SNN_MODEL_SPIKING_CNN, 32, 10, 64, true,
                          2);
    cases[n].config.encoding = SNN_ENCODING_EVENTS;
    cases[n].config.in_channels = 2, cases[n].config.height = cases[n].config.width = 34;
    n++;
    cases[n++] = probe_make("resnet18 w64 T4 N128 eval", SNN_MODEL_RESNET18, 64, 4, 128, false, 0);
    cases[n++] = probe_make("cnn w32 T4 N1024 eval", SNN_MODEL_SPIKING_CNN, 32, 4, 1024, false, 0);
    cases[n++] = probe_make("resnet50 w16 T2 N32 adam", SNN_MODEL_RESNET50, 16, 2, 32, true, 2);
    cases[n++] = probe_make("sew-resnet34 w32 T2 N32 sgd", SNN_MODEL_SEW_RESNET34, 32, 2, 32, true, 1);
    precision[n] = SNN_PRECISION_BF16;
    cases[n++] = probe_make("resnet18 w64 T4 N32 adam bf16", SNN_MODEL_RESNET18, 64, 4, 32, true, 2);
    precision[n] = SNN_PRECISION_TF32;
    cases[n++] = probe_make("resnet18 w64 T4 N32 adam tf32", SNN_MODEL_RESNET18, 64, 4, 32, true, 2);
    precision[n] = SNN_PRECISION_BF16;
    cases[n] = probe_make("cnn w128 T4 N128 mse sgd bf16", SNN_MODEL_SPIKING_CNN, 128, 4, 128, true, 1);
    cases[n].config.spiking_readout = true;
    n++;
    precision[n] = SNN_PRECISION_BF16;
    cases[n++] = probe_make("resnet18 w64 T4 N128 eval bf16", SNN_MODEL_RESNET18, 64, 4, 128, false, 0);
    cases[n] = probe_make("dvsnet 128x128 w32 T8 N16 dropout", SNN_MODEL_DVS_NET, 32, 8, 16, true, 2);
    cases[n].config.dropout = 0.5f;
    n++;
    /* a ResNet-18 converted from its QANN, at its T* = 51 (4 levels): snn-ann2snn's dense run */
    cases[n] = probe_make("converted resnet18 w64 T51 N8", SNN_MODEL_RESNET18, 64, 51, 8, false, 0);
    cases[n].config.neuron = snn_neuron_config_default(SNN_NEURON_STBIF);
    cases[n].config.neuron.levels = 4;
    cases[n++].config.encoding = SNN_ENCODING_FIRST_STEP;
    /* steps through time: an online step (SLTT: T forwards and backwards of one time step,
     * each layer's state carried), BF16 with the conv outputs kept as bf16 as the benchmark
     * runs it; and BPTT in segments of 4 steps (app/train_segments.c) */
    static snn_model_options keep_bf16;
    keep_bf16 = snn_model_options_default(SNN_CUDA);
    keep_bf16.keep_bf16 = true;
    precision[n] = SNN_PRECISION_BF16;
    cases[n] = probe_make("resnet18 w64 T8 N32 sltt bf16", SNN_MODEL_RESNET18, 64, 8, 32, true, 2);
    cases[n].carry = SNN_CARRY_CONSTANT, cases[n].steps = 1, cases[n++].options = &keep_bf16;
    cases[n] = probe_make("resnet18 w32 T8 N16 seg 4 adam", SNN_MODEL_RESNET18, 32, 8, 16, true, 2);
    cases[n].carry = SNN_CARRY_DIFFERENTIABLE, cases[n++].steps = 4;
    cases[n] = probe_make("resnet18 w32 T4 N16 ottt adam", SNN_MODEL_RESNET18, 32, 4, 16, true, 2);
    cases[n].carry = SNN_CARRY_CONSTANT, cases[n].steps = 1, cases[n++].traces = true;
    fprintf(stderr, "  %-32s %10s %12s %12s %7s %12s %12s\n", "case (cuda)", "params", "step est.",
            "step meas.", "ratio", "pool est.", "pool meas.");
    for (int i = 0; i < n; i++) {
        probe_result r;
        CHECK_OK(snn_set_precision(precision[i])); /* for the estimate and the run alike */
        bool ok = probe_run(&cases[i], SNN_CUDA, false, &r);
        CHECK_OK(snn_set_precision(SNN_PRECISION_FP32));
        CHECK(ok);
        if (!ok) {
            fprintf(stderr, "  %s: %s\n", cases[i].name, snn_last_error());
            continue;
        }
        const snn_memory_estimate *e = &r.estimate;
        char b[4][32];
        fprintf(stderr, "  %-32s %10lld %12s %12s %7.3f %12s %12s\n", cases[i].name,
                (long long)r.parameter_count, probe_mib(e->step, b[0], 32),
                probe_mib(r.step, b[1], 32), e->step / r.step,
                probe_mib(e->gradient_pool, b[2], 32), probe_mib(r.pool, b[3], 32));
        CHECK(r.parameter_count == e->parameter_count);
        CHECK(r.parameters == e->parameters);
        CHECK(r.step > 0 && e->step >= r.step);
        CHECK(e->step <= STEP_SLACK * r.step);
        CHECK(e->gradient_pool >= r.pool);
        CHECK(r.owned <= e->parameters + e->gradients + e->optimizer + e->state + e->overhead);
    }
}

static void test_device_memory(void)
{
    size_t avail = 0, total = 0;
    CHECK_OK(snn_device_memory(SNN_CUDA, &avail, &total));
    CHECK(total > ((size_t)1 << 30) && avail > 0 && avail <= total);
}

int main(void)
{
    test_require_cuda();
    RUN(test_total_as_snn_train); /* first: the context is fresh */
    RUN(test_device_memory);
    RUN(test_estimate_against_measured);
    return test_finish();
}
