/*
 * test_memory_estimate.c - snn_model_memory_estimate (nn/model_memory.c) against what one step
 * really takes on the CPU, for the CNN, the ResNet-18, -34 and -50 (plain and SEW), the DVS net
 * and the recurrent SNN (training: LIF and ALIF recurrent layers), direct, Poisson and event-frame
 * input, IF / LIF / PLIF / ST-BIF and the ANN activations ReLU / QCLIP, the CNNs with dropout,
 * cross-entropy and MSE, SGD (with and without momentum) and Adam, training and evaluation, and
 * the networks snn_ann_to_snn converts from QANNs (first-step encoding, evaluation), conv
 * outputs kept as bf16 (option keep_bf16), and steps through time (online and checkpointed:
 * snn_model_memory_estimate_through_time, run as app/train_online.c and app/train_segments.c
 * run them):
 *   - parameters (count and bytes) exactly;
 *   - the step: never below the arena's measured high-water mark plus the bytes the step pool
 *     reserved for the gradients of activations, and at most STEP_SLACK above it (the table
 *     printed here: docs/log/benchmarks-2026.md, summed up in docs/benchmarks.md); the pool's
 *     part alone never below what the pool reserved;
 *   - everything else the run holds (gradients, optimizer state, GEMM buffers, structs, the
 *     carried state) within the estimate's parameters + gradients + optimizer + state +
 *     overhead;
 *   - absurd sizes give absurd (not wrapped) numbers, and bad arguments are refused.
 * The same probe runs on the GPU in test_cuda_memory_estimate.
 * Run: ctest --test-dir build -R memory_estimate --output-on-failure
 */
#include "memory_probe.h"
#include "test.h"

/* How far above the measured step the estimate may be. It is an upper bound by design (every
 * allocation rounded up, the largest workspace added on top of everything); more than this
 * means an op saves less than nn/model_memory.c thinks: follow it there. */
#define STEP_SLACK 1.05

static probe_case cases[48];
static int n_cases;

static void add(probe_case c) { cases[n_cases++] = c; }

static void make_cases(void)
{
    probe_case c = probe_make("cnn w32 T2 N16 adam", SNN_MODEL_SPIKING_CNN, 32, 2, 16, true, 2);
    add(c);
    c = probe_make("cnn w8 T4 N8 plif mse sgd", SNN_MODEL_SPIKING_CNN, 8, 4, 8, true, 0);
    c.config.hidden = 16;
    c.config.neuron = snn_neuron_config_default(SNN_NEURON_PLIF);
    c.config.spiking_readout = true;
    add(c);
    c = probe_make("cnn w16 T3 N4 poisson if", SNN_MODEL_SPIKING_CNN, 16, 3, 4, true, 1);
    c.config.encoding = SNN_ENCODING_POISSON;
    c.config.neuron = snn_neuron_config_default(SNN_NEURON_IF);
    add(c);
    add(probe_make("resnet18 w4 T2 N4 adam", SNN_MODEL_RESNET18, 4, 2, 4, true, 2));
    add(probe_make("sew-resnet18 w4 T2 N4 sgd", SNN_MODEL_SEW_RESNET18, 4, 2, 4, true, 1));
    c = probe_make("resnet18 w8 T1 N2 poisson", SNN_MODEL_RESNET18, 8, 1, 2, true, 2);
    c.config.encoding = SNN_ENCODING_POISSON;
    add(c);
    c = probe_make("cnn 34x34 events w8 T3 N4", SNN_MODEL_SPIKING_CNN, 8, 3, 4, true, 2);
    c.config.encoding = SNN_ENCODING_EVENTS;
    c.config.in_channels = 2, c.config.height = c.config.width = 34, c.config.hidden = 32;
    add(c);
    c = probe_make("dvsnet 64x64 w4 T2 N2 sgd", SNN_MODEL_DVS_NET, 4, 2, 2, true, 1);
    c.config.height = c.config.width = 64, c.config.hidden = 32;
    add(c);
    add(probe_make("cnn w32 T2 N64 eval", SNN_MODEL_SPIKING_CNN, 32, 2, 64, false, 0));
    add(probe_make("sew-resnet18 w4 T2 N8 eval", SNN_MODEL_SEW_RESNET18, 4, 2, 8, false, 0));
    /* the deeper ResNets: more basic blocks, and bottlenecks (1x1, 3x3, 1x1 to 4x the planes) */
    add(probe_make("resnet34 w4 T2 N2 sgd", SNN_MODEL_RESNET34, 4, 2, 2, true, 1));
    add(probe_make("sew-resnet34 w2 T2 N4 eval", SNN_MODEL_SEW_RESNET34, 2, 2, 4, false, 0));
    add(probe_make("resnet50 w4 T2 N2 adam", SNN_MODEL_RESNET50, 4, 2, 2, true, 2));
    add(probe_make("sew-resnet50 w2 T2 N2 sgd", SNN_MODEL_SEW_RESNET50, 2, 2, 2, true, 0));
    add(probe_make("resnet50 w2 T1 N4 eval", SNN_MODEL_RESNET50, 2, 1, 4, false, 0));
    /* the ANN activations (T = 1): an output each, QCLIP's step a parameter; and ST-BIF */
    c = probe_make("cnn w16 T1 N8 relu adam", SNN_MODEL_SPIKING_CNN, 16, 1, 8, true, 2);
    c.config.neuron = snn_neuron_config_default(SNN_NEURON_RELU);
    add(c);
    c = probe_make("resnet18 w4 T1 N4 qclip sgd", SNN_MODEL_RESNET18, 4, 1, 4, true, 1);
    c.config.neuron = snn_neuron_config_default(SNN_NEURON_QCLIP);
    add(c);
    c = probe_make("sew-resnet50 w2 T1 qclip eval", SNN_MODEL_SEW_RESNET50, 2, 1, 2, false, 0);
    c.config.neuron = snn_neuron_config_default(SNN_NEURON_QCLIP);
    add(c);
    c = probe_make("resnet18 w4 T2 N2 stbif adam", SNN_MODEL_RESNET18, 4, 2, 2, true, 2);
    c.config.neuron = snn_neuron_config_default(SNN_NEURON_STBIF);
    add(c);
    /* dropout in the classifier (a mask per sample shared over T, and the product); none in eval */
    c = probe_make("cnn w16 T3 N8 dropout adam", SNN_MODEL_SPIKING_CNN, 16, 3, 8, true, 2);
    c.config.dropout = 0.5f;
    add(c);
    c = probe_make("dvsnet 64x64 w4 T2 N2 dropout sgd", SNN_MODEL_DVS_NET, 4, 2, 2, true, 1);
    c.config.height = c.config.width = 64, c.config.hidden = 32, c.config.dropout = 0.2f;
    add(c);
    c = probe_make("cnn w16 T2 N16 dropout eval", SNN_MODEL_SPIKING_CNN, 16, 2, 16, false, 0);
    c.config.dropout = 0.5f;
    add(c);
    c = probe_make("resnet18 w4 T2 N4 dropout adam", SNN_MODEL_RESNET18, 4, 2, 4, true, 2);
    c.config.dropout = 0.3f;
    add(c);
    /* the recurrent SNN (nn/model_rsnn.c): its recurrent layers' spikes, H (ALIF: and the
     * thresholds) and BPTT scratch (snn_walk_recurrent, nn/memory_walk.c) */
    c = probe_make("rsnn h32 T28 N8 lif adam", SNN_MODEL_RSNN, 1, 28, 8, true, 2);
    c.config.hidden = 32;
    add(c);
    c = probe_make("rsnn h32 x3 T28 N8 alif sgd", SNN_MODEL_RSNN, 1, 28, 8, true, 1);
    c.config.hidden = 32, c.config.layers = 3;
    c.config.neuron = snn_neuron_config_default(SNN_NEURON_ALIF);
    add(c);
    c = probe_make("rsnn h32 x2 T28 N8 dropout adam", SNN_MODEL_RSNN, 1, 28, 8, true, 2);
    c.config.hidden = 32, c.config.layers = 2, c.config.dropout = 0.3f;
    add(c);
    /* steps through time (snn_model_memory_estimate_through_time): online (SLTT, one step's
     * graph at a time) and BPTT in segments, the fused carrying ops (IF / LIF after a
     * batch-norm) and the unfused ones (PLIF, ALIF: two states), a last segment shorter */
    static const snn_model_options unfused = {.fuse = false, .pack_spikes = true};
    static const struct {
        const char *name;
        snn_model_kind kind;
        int width, T, N, optimizer_states;
        snn_neuron_kind neuron;
        snn_state_carry carry;
        int steps;
        const snn_model_options *options;
        bool traces; /* OTTT */
    } through_time[] = {
        {"resnet18 w4 T4 N4 sltt adam", SNN_MODEL_RESNET18, 4, 4, 4, 2, SNN_NEURON_LIF,
         SNN_CARRY_CONSTANT, 1, NULL, false},
        {"cnn w16 T4 N8 sltt plif sgd", SNN_MODEL_SPIKING_CNN, 16, 4, 8, 1, SNN_NEURON_PLIF,
         SNN_CARRY_CONSTANT, 1, NULL, false},
        {"resnet18 w4 T4 N4 ottt adam", SNN_MODEL_RESNET18, 4, 4, 4, 2, SNN_NEURON_LIF,
         SNN_CARRY_CONSTANT, 1, NULL, true},
        {"cnn w16 T4 N8 ottt sgd", SNN_MODEL_SPIKING_CNN, 16, 4, 8, 1, SNN_NEURON_LIF,
         SNN_CARRY_CONSTANT, 1, NULL, true},
        {"resnet18 w4 T4 N4 seg 2 adam", SNN_MODEL_RESNET18, 4, 4, 4, 2, SNN_NEURON_LIF,
         SNN_CARRY_DIFFERENTIABLE, 2, NULL, false},
        {"resnet18 w4 T3 N2 seg 3 sgd", SNN_MODEL_RESNET18, 4, 3, 2, 0, SNN_NEURON_LIF,
         SNN_CARRY_DIFFERENTIABLE, 3, NULL, false},
        {"cnn w16 T6 N4 seg 4 alif adam", SNN_MODEL_SPIKING_CNN, 16, 6, 4, 2, SNN_NEURON_ALIF,
         SNN_CARRY_DIFFERENTIABLE, 4, NULL, false},
        {"cnn w16 T6 N4 seg 4 unfused", SNN_MODEL_SPIKING_CNN, 16, 6, 4, 2, SNN_NEURON_LIF,
         SNN_CARRY_DIFFERENTIABLE, 4, &unfused, false},
        {"resnet18 w4 T8 N4 seg 3 adam", SNN_MODEL_RESNET18, 4, 8, 4, 2, SNN_NEURON_LIF,
         SNN_CARRY_DIFFERENTIABLE, 3, NULL, false},
    };
    for (size_t i = 0; i < sizeof through_time / sizeof through_time[0]; i++) {
        c = probe_make(through_time[i].name, through_time[i].kind, through_time[i].width,
                       through_time[i].T, through_time[i].N, true,
                       through_time[i].optimizer_states);
        c.config.neuron = snn_neuron_config_default(through_time[i].neuron);
        c.carry = through_time[i].carry, c.steps = through_time[i].steps;
        c.options = through_time[i].options;
        c.traces = through_time[i].traces;
        add(c);
    }
    /* converted from QANNs (nn/ann2snn.c): first-step input and biases, running max-pools */
    static const struct { const char *name; snn_model_kind kind; int width, T, N; } conv[] = {
        {"converted cnn w8 T9 N4", SNN_MODEL_SPIKING_CNN, 8, 9, 4},
        {"converted resnet18 w4 T5 N2", SNN_MODEL_RESNET18, 4, 5, 2},
        {"converted sew-resnet18 w2 T3 N3", SNN_MODEL_SEW_RESNET18, 2, 3, 3},
        {"converted resnet50 w2 T2 N2", SNN_MODEL_RESNET50, 2, 2, 2},
    };
    for (size_t i = 0; i < sizeof conv / sizeof conv[0]; i++) {
        c = probe_make(conv[i].name, conv[i].kind, conv[i].width, conv[i].T, conv[i].N, false, 0);
        c.config.neuron = snn_neuron_config_default(SNN_NEURON_STBIF);
        c.config.neuron.levels = 4;
        c.config.encoding = SNN_ENCODING_FIRST_STEP;
        add(c);
    }
}

/* One case: the estimate against the measured step, printed as a row of the table. */
static void check_case(const probe_case *pc)
{
    probe_result r;
    bool ok = probe_run(pc, SNN_CPU, false, &r);
    CHECK(ok);
    if (!ok) {
        fprintf(stderr, "  %s: %s\n", pc->name, snn_last_error());
        return;
    }
    const snn_memory_estimate *e = &r.estimate;
    double rest = e->parameters + e->gradients + e->optimizer + e->state + e->overhead;
    char b[6][32];
    fprintf(stderr, "  %-28s %8lld %11s %11s %6.3f %10s %10s %10s %10s\n", pc->name,
            (long long)r.parameter_count, probe_mib(e->step, b[0], 32), probe_mib(r.step, b[1], 32),
            e->step / r.step, probe_mib(e->gradient_pool, b[4], 32),
            probe_mib(r.pool, b[5], 32),
            probe_mib(rest, b[2], 32), probe_mib(r.owned, b[3], 32));
    if (getenv("PROBE_DEBUG")) fprintf(stderr, "    DBG step %.0f / %.0f pool %.0f / %.0f\n", e->step, r.step, e->gradient_pool, r.pool);
    CHECK(r.parameter_count == e->parameter_count);
    CHECK(r.parameters == e->parameters);
    CHECK(r.step > 0 && e->step >= r.step);
    CHECK(e->step <= STEP_SLACK * r.step);
    CHECK(e->gradient_pool >= r.pool);
    CHECK(pc->training ? r.pool > 0 : r.pool == 0 && e->gradient_pool == 0);
    CHECK(r.owned <= rest);
    CHECK(e->total >= r.step + r.owned);
    CHECK(e->host == e->total); /* on the CPU the host holds it all */
}

static void test_estimate_against_measured(void)
{
    make_cases();
    fprintf(stderr, "  %-28s %8s %11s %11s %6s %10s %10s %10s %10s\n", "case (cpu, 2 threads)",
            "params", "step est.", "step meas.", "ratio", "pool est.", "pool meas.", "rest est.",
            "rest meas.");
    for (int i = 0; i < n_cases; i++) check_case(&cases[i]);
}

/* Spikes kept as floats (the model option pack_spikes off), with and without the batch-norm
 * -> neuron fusion (option fuse): the estimate follows, and packing is what takes the step
 * down. */
static void test_estimate_spikes_as_floats(void)
{
    static const snn_model_options floats_fused = {.fuse = true, .pack_spikes = false};
    static const snn_model_options floats_unfused = {.fuse = false, .pack_spikes = false};
    probe_case c[3] = {
        probe_make("resnet18 floats", SNN_MODEL_RESNET18, 4, 2, 4, true, 2),
        probe_make("resnet18 floats unfused", SNN_MODEL_RESNET18, 4, 2, 4, true, 2),
        probe_make("resnet50 floats", SNN_MODEL_RESNET50, 4, 2, 2, true, 2),
    };
    for (int i = 0; i < 3; i++) {
        c[i].options = i == 1 ? &floats_unfused : &floats_fused;
        check_case(&c[i]);
    }
    snn_memory_estimate floats, bits;
    CHECK_OK(snn_model_memory_estimate_with(&c[0].config, &floats_fused, 64, SNN_CPU, true, 2,
                                            &floats));
    CHECK_OK(snn_model_memory_estimate(&c[0].config, 64, SNN_CPU, true, 2, &bits));
    CHECK(bits.step < 0.8 * floats.step);
}

/* Conv outputs kept as bf16 (the model option keep_bf16, snn-train --keep-bf16, off by default;
 * here on the CPU): the estimate follows, the fused and the unfused batch-norms, and the step
 * holds less. */
static void test_estimate_bf16_kept(void)
{
    static const snn_model_options kept = {.fuse = true, .pack_spikes = true, .keep_bf16 = true};
    static const snn_model_options kept_unfused = {.fuse = false, .pack_spikes = true,
                                                   .keep_bf16 = true};
    probe_case c[3] = {
        probe_make("resnet18 bf16 kept", SNN_MODEL_RESNET18, 4, 2, 4, true, 2),
        probe_make("sew-resnet18 bf16 unfused", SNN_MODEL_SEW_RESNET18, 4, 2, 4, true, 1),
        probe_make("cnn w16 T2 N8 bf16 kept", SNN_MODEL_SPIKING_CNN, 16, 2, 8, true, 2),
    };
    for (int i = 0; i < 3; i++) {
        c[i].options = i == 1 ? &kept_unfused : &kept;
        check_case(&c[i]);
    }
    /* ResNet-18 width 16 at T = 4 on 32 x 32 images: the conv outputs are half the arena, so
     * halving them takes the step down by more than a tenth (the pool keeps its size) */
    snn_model_config r = c[0].config;
    r.width_base = 16, r.time_steps = 4, r.height = r.width = 32, r.in_channels = 3;
    snn_memory_estimate fp32, bf16;
    CHECK_OK(snn_model_memory_estimate(&r, 64, SNN_CPU, true, 2, &fp32));
    CHECK_OK(snn_model_memory_estimate_with(&r, &kept, 64, SNN_CPU, true, 2, &bf16));
    CHECK(bf16.step < 0.9 * fp32.step);
}

static void test_absurd_and_bad_sizes(void)
{
    snn_model_config c = snn_model_config_default(SNN_MODEL_SPIKING_CNN);
    c.width_base = 100000;
    snn_memory_estimate e;
    CHECK_OK(snn_model_memory_estimate(&c, 128, SNN_CPU, true, 2, &e));
    /* conv2 alone holds 100000 x 100000 x 3 x 3 floats: the 360 GB of the report */
    CHECK(e.parameters > 3.6e11 && e.total > 4.0 * 3.6e11);
    c.width_base = 2147483647;
    CHECK_OK(snn_model_memory_estimate(&c, 2147483647, SNN_CPU, true, 2, &e));
    CHECK(e.total > 1e22 && isfinite(e.total));
    /* resnet widths shift by 3: the largest accepted one still gives a finite answer */
    snn_model_config r = snn_model_config_default(SNN_MODEL_RESNET18);
    r.width_base = 1 << 27;
    r.time_steps = 1024;
    CHECK_OK(snn_model_memory_estimate(&r, 1 << 20, SNN_CPU, true, 2, &e));
    CHECK(e.total > 1e20 && isfinite(e.total));
    r.width_base = (1 << 27) + 1;
    CHECK(snn_model_memory_estimate(&r, 1, SNN_CPU, true, 2, &e) == SNN_ERR_ARGUMENT);
    c.width_base = 32;
    CHECK(snn_model_memory_estimate(&c, 0, SNN_CPU, true, 2, &e) == SNN_ERR_ARGUMENT);
    CHECK(strstr(snn_last_error(), "batch 0") != NULL);
    c.time_steps = 0;
    CHECK(snn_model_memory_estimate(&c, 1, SNN_CPU, true, 2, &e) == SNN_ERR_ARGUMENT);
    CHECK(snn_model_memory_estimate(NULL, 1, SNN_CPU, true, 2, &e) == SNN_ERR_ARGUMENT);
    /* a converted network runs inference only: its training is refused, not guessed */
    snn_model_config fs = snn_model_config_default(SNN_MODEL_SPIKING_CNN);
    fs.encoding = SNN_ENCODING_FIRST_STEP;
    fs.neuron = snn_neuron_config_default(SNN_NEURON_STBIF);
    CHECK(snn_model_memory_estimate(&fs, 1, SNN_CPU, true, 0, &e) == SNN_ERR_UNSUPPORTED);
    CHECK(strstr(snn_last_error(), "converted") != NULL);
    CHECK_OK(snn_model_memory_estimate(&fs, 1, SNN_CPU, false, 0, &e));
    /* the step grows with the batch and with T; evaluation needs less than training */
    snn_model_config d = snn_model_config_default(SNN_MODEL_SPIKING_CNN);
    snn_memory_estimate a, b, t, ev;
    CHECK_OK(snn_model_memory_estimate(&d, 64, SNN_CPU, true, 2, &a));
    CHECK_OK(snn_model_memory_estimate(&d, 128, SNN_CPU, true, 2, &b));
    d.time_steps = 8;
    CHECK_OK(snn_model_memory_estimate(&d, 64, SNN_CPU, true, 2, &t));
    CHECK_OK(snn_model_memory_estimate(&d, 64, SNN_CPU, false, 0, &ev));
    CHECK(b.step > 1.9 * a.step - a.workspace && t.step > a.step && ev.step < t.step);
    CHECK(ev.gradients == 0.0 && ev.optimizer == 0.0);
    /* steps through time: online at T = 8 holds less than BPTT, and K = 2 segments more than
     * online and less than BPTT; each has its state (BPTT's is 0) */
    snn_memory_estimate on, seg, ottt;
    CHECK_OK(snn_model_memory_estimate_through_time(&d, NULL, SNN_CARRY_CONSTANT, 1, false, 64,
                                                    SNN_CPU, 2, &on));
    CHECK_OK(snn_model_memory_estimate_through_time(&d, NULL, SNN_CARRY_DIFFERENTIABLE, 2, false,
                                                    64, SNN_CPU, 2, &seg));
    CHECK(on.step < seg.step && seg.step < t.step && t.state == 0.0);
    CHECK(on.state > 0.0 && on.state == seg.state && on.parameters == t.parameters);
    /* OTTT: a trace of each synaptic layer's input besides the neurons' states */
    CHECK_OK(snn_model_memory_estimate_through_time(&d, NULL, SNN_CARRY_CONSTANT, 1, true, 64,
                                                    SNN_CPU, 2, &ottt));
    CHECK(ottt.state > on.state && ottt.step == on.step);
    /* bad carries and step counts are refused, named */
    CHECK(snn_model_memory_estimate_through_time(&d, NULL, SNN_CARRY_NONE, 1, false, 64, SNN_CPU,
                                                 2, &on) == SNN_ERR_ARGUMENT);
    CHECK(strstr(snn_last_error(), "'carry'") != NULL);
    CHECK(snn_model_memory_estimate_through_time(&d, NULL, SNN_CARRY_CONSTANT, 2, false, 64,
                                                 SNN_CPU, 2, &on) == SNN_ERR_ARGUMENT);
    CHECK(strstr(snn_last_error(), "'steps'") != NULL);
    CHECK(snn_model_memory_estimate_through_time(&d, NULL, SNN_CARRY_DIFFERENTIABLE, 9, false, 64,
                                                 SNN_CPU, 2, &on) == SNN_ERR_ARGUMENT);
    CHECK(snn_model_memory_estimate_through_time(&d, NULL, SNN_CARRY_DIFFERENTIABLE, 2, true, 64,
                                                 SNN_CPU, 2, &on) == SNN_ERR_ARGUMENT);
    CHECK(strstr(snn_last_error(), "'traces'") != NULL);
    CHECK(snn_model_memory_estimate_through_time(&fs, NULL, SNN_CARRY_CONSTANT, 1, false, 1,
                                                 SNN_CPU, 2, &on) == SNN_ERR_UNSUPPORTED);
    CHECK(snn_model_memory_estimate_through_time(NULL, NULL, SNN_CARRY_CONSTANT, 1, false, 1,
                                                 SNN_CPU, 2, &on) == SNN_ERR_ARGUMENT);
}

static void test_device_memory(void)
{
    size_t avail = 0, total = 0;
    CHECK_OK(snn_device_memory(SNN_CPU, &avail, &total));
    CHECK(total > 0 && avail > 0 && avail <= total);
    CHECK(snn_device_memory(SNN_CPU, NULL, &total) == SNN_ERR_ARGUMENT);
    if (!snn_cuda_available()) {
        CHECK(snn_device_memory(SNN_CUDA, &avail, &total) == SNN_ERR_UNSUPPORTED);
        CHECK(avail == 0 && total == 0);
    }
}

static void test_step_reserve(void)
{
    /* a reserved block is kept by the first step, which then needs no growth */
    CHECK_OK(snn_step_reserve(SNN_CPU, 3u << 20));
    CHECK(snn_arena_reserved_bytes(SNN_CPU) == 3u << 20);
    CHECK_OK(snn_step_reserve(SNN_CPU, 1u << 20)); /* smaller: nothing changes */
    CHECK(snn_arena_reserved_bytes(SNN_CPU) == 3u << 20);
    snn_step_begin();
    CHECK(snn_step_reserve(SNN_CPU, 1u << 20) == SNN_ERR_STATE);
    CHECK(snn_zeros(SNN_SHAPE(1000), SNN_CPU) != NULL);
    snn_step_end();
    CHECK(snn_arena_reserved_bytes(SNN_CPU) == 3u << 20);
    CHECK(snn_step_peak_bytes(SNN_CPU) >= 4000 && snn_step_peak_bytes(SNN_CPU) < 8192);
    /* a block that cannot be had is a clear error, and the arena is left empty */
    snn_alloc_fail_after(1);
    CHECK(snn_step_reserve(SNN_CPU, 5u << 20) == SNN_ERR_MEMORY);
    snn_alloc_fail_after(0);
    CHECK(strstr(snn_last_error(), "snn_step_reserve") != NULL);
    CHECK(snn_arena_reserved_bytes(SNN_CPU) == 0);
    snn_shutdown();
}

int main(void)
{
    snn_set_num_threads(2); /* the CPU conv workspace depends on the thread count */
    RUN(test_device_memory);
    RUN(test_step_reserve);
    RUN(test_absurd_and_bad_sizes);
    RUN(test_estimate_against_measured);
    RUN(test_estimate_spikes_as_floats);
    RUN(test_estimate_bf16_kept);
    return test_finish();
}
