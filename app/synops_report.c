/*
 * synops_report.c - the printouts of synops_report.h: a SynOps count as a table, as CSV, and
 * beside snn-sparse's measured speed-ups.
 */
#include <errno.h>
#include <string.h>

#include "app/synops_report.h"

/* "1.23 M": 3 significant digits and a prefix (k, M, G, T), for counts per image. */
static const char *count_str(double v, char *buf, size_t size)
{
    static const char *prefix[] = {"", " k", " M", " G", " T"};
    int p = 0;
    while (v >= 999.5 && p < 4) v /= 1000.0, p++;
    snprintf(buf, size, "%.3g%s", v, prefix[p]);
    return buf;
}

/* "spikes 32x14x14" or "real 784": what the layer took, one sample at one step */
static const char *input_str(const snn_synops_layer *l, char *buf, size_t size)
{
    const char *what = l->spikes ? "spikes" : "real";
    if (l->kernel) snprintf(buf, size, "%s %dx%dx%d", what, l->in_channels, l->height, l->width);
    else snprintf(buf, size, "%s %d", what, l->in_channels);
    return buf;
}

static void print_row(FILE *out, const snn_synops_layer *l, double samples, bool total)
{
    char input[48] = "", ac[24], mac[24], ann[24], fires[16] = "-";
    if (!total) input_str(l, input, sizeof input);
    if (!total && l->spikes && l->inputs > 0.0)
        snprintf(fires, sizeof fires, "%.4f", l->input_sum / l->inputs);
    fprintf(out, "  %-22s %-16s %2lld %6s %8s %8s %8s %8.4g %8.4g\n", l->name, input,
            (long long)l->steps, fires, count_str(l->ac / samples, ac, sizeof ac),
            count_str(l->mac / samples, mac, sizeof mac),
            count_str(l->ann_mac / samples, ann, sizeof ann),
            1e-6 * snn_synops_energy_pj(l) / samples, 1e-6 * snn_synops_ann_energy_pj(l) / samples);
}

void synops_print(FILE *out, const snn_synops *count)
{
    int n = 0;
    const snn_synops_layer *layers = snn_synops_layers(count, &n);
    const snn_synops_layer total = snn_synops_total(count);
    if (n == 0 || total.samples < 1) {
        fprintf(out, "\nsynaptic operations: no conv or linear layer ran\n");
        return;
    }
    const double samples = (double)total.samples;
    fprintf(out, "\nsynaptic operations per image, over %lld images (docs/synops.md):\n"
            "AC = input spikes x fan-out, MAC = every real input x fan-out; the ANN equivalent "
            "runs\neach layer once (T = 1), all MAC\n", (long long)total.samples);
    fprintf(out, "  %-22s %-16s %2s %6s %8s %8s %8s %8s %8s\n", "layer", "input (C H W)", "T",
            "fires", "AC", "MAC", "ANN MAC", "SNN uJ", "ANN uJ");
    for (int i = 0; i < n; i++) print_row(out, &layers[i], samples, false);
    print_row(out, &total, samples, true);
    const double snn_pj = snn_synops_energy_pj(&total), ann_pj = snn_synops_ann_energy_pj(&total);
    fprintf(out, "energy per image at 45 nm (%.1f pJ per AC, %.1f pJ per MAC; Horowitz, ISSCC "
            "2014):\nSNN %.4g uJ, ANN %.4g uJ (%.3gx the ANN's); synapses only: no memory "
            "traffic, neuron updates\nor batch-norm\n", SNN_SYNOPS_AC_PJ, SNN_SYNOPS_MAC_PJ,
            1e-6 * snn_pj / samples, 1e-6 * ann_pj / samples, ann_pj > 0.0 ? snn_pj / ann_pj : 0.0);
}

static void csv_row(FILE *f, const snn_synops_layer *l, double samples, bool total)
{
    const double e = snn_synops_energy_pj(l), ann = snn_synops_ann_energy_pj(l);
    char rate[24] = ""; /* spikes per input element: for spike-fed layers only */
    if (!total && l->spikes && l->inputs > 0.0)
        snprintf(rate, sizeof rate, "%.6f", l->input_sum / l->inputs);
    fprintf(f, "%s,%s,%s,%d,%d,%d,%d,%d,%d,%d,%lld,%lld,%s,%.0f,%.0f,%.0f,%.0f,%.6g,%.6g,"
            "%.6g,%.6g,%.6g,%.6g,%.6g\n",
            l->name, total ? "" : l->kind, total ? "" : l->spikes ? "spikes" : "real",
            l->in_channels, l->out_channels, l->kernel, l->stride, l->pad, l->height, l->width,
            (long long)l->steps, (long long)l->samples, rate, l->ac, l->mac, l->dense_ops,
            l->ann_mac, e, ann, l->ac / samples, l->mac / samples, l->ann_mac / samples,
            1e-6 * e / samples, 1e-6 * ann / samples);
}

int synops_write_csv(const char *program, const char *path, const snn_synops *count)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "%s: --synops-csv: cannot write '%s': %s\n", program, path,
                strerror(errno));
        return 1;
    }
    int n = 0;
    const snn_synops_layer *layers = snn_synops_layers(count, &n);
    const snn_synops_layer total = snn_synops_total(count);
    const double samples = total.samples > 0 ? (double)total.samples : 1.0;
    fprintf(f, "layer,kind,input,in_channels,out_channels,kernel,stride,pad,height,width,steps,"
               "samples,input_rate,ac,mac,dense_ops,ann_mac,energy_pj,ann_energy_pj,"
               "ac_per_image,mac_per_image,ann_mac_per_image,energy_uj_per_image,"
               "ann_energy_uj_per_image\n");
    for (int i = 0; i < n; i++) csv_row(f, &layers[i], samples, false);
    csv_row(f, &total, samples, true);
    if (ferror(f) | fclose(f)) {
        fprintf(stderr, "%s: --synops-csv: could not write all of '%s'\n", program, path);
        return 1;
    }
    return 0;
}

/* The milliseconds calibration measured for `path` (0: not timed). */
static double path_ms(const snn_sparse_layer_report *r, snn_sparse_path path)
{
    switch (path) {
    case SNN_SPARSE_GEMM: return r->gemm_ms;
    case SNN_SPARSE_EVENT: return r->event_ms;
    case SNN_SPARSE_EVENT_SMEM: return r->event_smem_ms;
    default: return r->dense_ms;
    }
}

void synops_print_sparse(FILE *out, const snn_synops *count, const snn_sparse_report *report)
{
    int n = 0;
    const snn_synops_layer *layers = snn_synops_layers(count, &n);
    fprintf(out, "\nspike work beside the sparse speed-up, per swapped conv (docs/synops.md):\n"
            "  work: the share of the dense run's synaptic ops the spikes need (AC / dense ops,\n"
            "  over the test set); bound: 1 / work, the most skipping zeros can give;\n"
            "  measured: dense ms / sparse ms at calibration, of the best kernel and of the "
            "path chosen\n");
    fprintf(out, "  %-22s %7s %8s %11s %12s %-10s %8s\n", "layer", "work", "bound",
            "best kernel", "chosen", "path", "of bound");
    for (int i = 0; i < report->count; i++) {
        const snn_sparse_layer_report *r = &report->layers[i];
        const snn_synops_layer *l = NULL;
        for (int j = 0; j < n && !l; j++)
            if (strcmp(layers[j].name, r->name) == 0) l = &layers[j];
        double best = 0.0;
        const double kernels[3] = {r->gemm_ms, r->event_ms, r->event_smem_ms};
        for (int k = 0; k < 3; k++)
            if (kernels[k] > 0.0 && (best == 0.0 || kernels[k] < best)) best = kernels[k];
        const double chosen_ms = path_ms(r, r->path);
        const double chosen = chosen_ms > 0.0 ? r->dense_ms / chosen_ms : 0.0;
        const double work = l ? snn_synops_work_fraction(l) : 0.0;
        char bound[16] = "-", of_bound[16] = "-";
        if (work > 0.0) {
            snprintf(bound, sizeof bound, "%.2fx", 1.0 / work);
            snprintf(of_bound, sizeof of_bound, "%.0f%%", 100.0 * chosen * work);
        }
        fprintf(out, "  %-22s %7.4f %8s %10.2fx %11.2fx %-10s %8s\n", r->name, work, bound,
                best > 0.0 ? r->dense_ms / best : 0.0, chosen, snn_sparse_path_name(r->path),
                of_bound);
    }
}
