/*
 * run_config.c - --kernels and the printed configuration of run_config.h.
 */
#include "app/run_config.h"

#include <string.h>

#include "app/options.h"

int run_kernels_select(const char *program, const char *kernels, const char *device_name)
{
    if (!kernels) return 0; /* the library's choice stands */
    snn_kernel_set set;
    if (snn_kernel_set_parse(kernels, &set) != SNN_OK) {
        static const char *const sets[] = {"fast", "ref"};
        snn_clear_error();
        return option_bad_choice(program, "--kernels", kernels, sets, 2);
    }
    snn_device device;
    if (set == SNN_KERNELS_REF && snn_device_parse(device_name, &device) == SNN_OK &&
        device == SNN_CUDA) {
        fprintf(stderr, "%s: --kernels ref runs the reference kernels, which are CPU code; they "
                "cannot run with --device cuda\nhint: drop --kernels ref, or use --device cpu\n",
                program);
        return 2;
    }
    snn_clear_error(); /* a bad device name is the program's to report */
    if (snn_set_kernels(set) != SNN_OK) {
        fprintf(stderr, "%s: --kernels: %s\n", program, snn_last_error());
        return 2;
    }
    return 0;
}

static const char *encoding_name(snn_encoding e)
{
    switch (e) {
    case SNN_ENCODING_DIRECT: return "direct (the image repeated over T)";
    case SNN_ENCODING_POISSON: return "poisson (rate-coded spikes)";
    case SNN_ENCODING_EVENTS: return "event frames";
    case SNN_ENCODING_FIRST_STEP: return "first step (a converted ST-BIF network)";
    case SNN_ENCODING_ROWS: return "rows (an image read row by row, T = H)";
    case SNN_ENCODING_PIXELS: return "pixels (an image read pixel by pixel, T = H*W)";
    }
    return "unknown";
}

/* "tau 2, v_th 1, hard reset to 0, ..." for the spiking kinds; the levels for the others */
static void neuron_text(const snn_neuron_config *n, char *buf, size_t size)
{
    const char *kind = snn_neuron_kind_name(n->kind);
    char reset[64];
    if (n->reset == SNN_RESET_HARD)
        snprintf(reset, sizeof reset, "hard reset to %g", (double)n->v_reset);
    else
        snprintf(reset, sizeof reset, "soft reset (subtract v_th)");
    const char *detach = n->detach_reset ? "on" : "off";
    int a_min = 0, a_max = 0;
    switch (n->kind) {
    case SNN_NEURON_IF:
        snprintf(buf, size, "%s: v_th %g, %s, detach_reset %s", kind, (double)n->v_threshold,
                 reset, detach);
        return;
    case SNN_NEURON_LIF:
    case SNN_NEURON_PLIF:
        snprintf(buf, size, "%s: %s %g, v_th %g, %s, detach_reset %s, decay_input %s", kind,
                 n->kind == SNN_NEURON_PLIF ? "tau (initial, learned)" : "tau", (double)n->tau,
                 (double)n->v_threshold, reset, detach, n->decay_input ? "on" : "off");
        return;
    case SNN_NEURON_ALIF:
        snprintf(buf, size, "%s: tau %g, v_th %g + beta %g A (tau_adapt %g), %s, detach_reset %s, "
                 "decay_input %s", kind, (double)n->tau, (double)n->v_threshold, (double)n->beta,
                 (double)n->tau_adapt, reset, detach, n->decay_input ? "on" : "off");
        return;
    case SNN_NEURON_STBIF:
        snn_stbif_bounds(n, &a_min, &a_max);
        snprintf(buf, size, "%s: theta %g, %d levels (spike count in [%d, %d]), detach_reset %s",
                 kind, (double)n->theta, n->levels, a_min, a_max, detach);
        return;
    case SNN_NEURON_QCLIP:
        snn_stbif_bounds(n, &a_min, &a_max);
        snprintf(buf, size, "%s: an ANN (T = 1), %d levels in [%d, %d] of a learned step "
                 "(initial %g)", kind, n->levels, a_min, a_max, (double)n->theta);
        return;
    case SNN_NEURON_RELU:
        snprintf(buf, size, "%s: an ANN (T = 1), no spikes", kind);
        return;
    case SNN_NEURON_COUNT: break; /* not a kind */
    }
    snprintf(buf, size, "%s", kind);
}

void run_config_print_model(FILE *out, const char *indent, snn_module *model)
{
    const snn_model_config *c = snn_model_config_of(model);
    if (!c) return;
    char size[96] = "";
    snprintf(size, sizeof size, ", width %d", c->width_base);
    if (c->kind == SNN_MODEL_SPIKING_CNN || c->kind == SNN_MODEL_DVS_NET)
        snprintf(size + strlen(size), sizeof size - strlen(size), ", hidden %d", c->hidden);
    if (c->kind == SNN_MODEL_RSNN) /* no convs: its width is its recurrent layers' */
        snprintf(size, sizeof size, ", %d recurrent layer%s of %d", c->layers,
                 c->layers == 1 ? "" : "s", c->hidden);
    char extras[96] = "";
    if (c->dropout > 0.0f)
        snprintf(extras, sizeof extras, ", dropout %g", (double)c->dropout);
    if (c->spiking_readout)
        snprintf(extras + strlen(extras), sizeof extras - strlen(extras), ", spiking readout");
    fprintf(out, "%s%-12s%s%s, %dx%dx%d images, %d classes%s, %lld parameters\n",
            indent, "model", snn_model_kind_name(c->kind), size, c->in_channels,
            c->height, c->width, c->classes, extras,
            (long long)snn_module_num_parameters(model));
    char neuron[256];
    neuron_text(&c->neuron, neuron, sizeof neuron);
    fprintf(out, "%s%-12s%s\n", indent, "neurons", neuron);
    if (!snn_neuron_is_ann(c->neuron.kind))
        fprintf(out, "%s%-12s%s, alpha %g\n", indent, "surrogate",
                snn_surrogate_name(c->neuron.surrogate.kind), (double)c->neuron.surrogate.alpha);
    fprintf(out, "%s%-12sT = %d, encoding %s\n", indent, "time steps", c->time_steps,
            encoding_name(c->encoding));
}

void run_config_print_device(FILE *out, const char *indent, snn_device device,
                             snn_precision precision)
{
    const char *kernels = device == SNN_CUDA ? "cuda"
                                             : snn_kernel_set_name(snn_get_kernels());
    fprintf(out, "%s%-12s%s, %s, %s kernels, %d CPU threads\n", indent, "device",
            snn_device_name(device), snn_precision_name(precision), kernels,
            snn_get_num_threads());
}
