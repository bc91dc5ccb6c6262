/**
 * @file
 * synops.h - synaptic operations (SynOps) and the energy estimate SNN papers compare models by,
 * counted from the inputs a model's conv and linear layers really received. Included by
 * nn/nn.h; docs/synops.md says what the numbers mean and what they leave out.
 *
 *     snn_synops *count = snn_synops_new(net);     // arms the count on the model
 *     ... eval forwards (snn_module_forward) over the test set ...
 *     int n;
 *     const snn_synops_layer *layers = snn_synops_layers(count, &n);
 *     snn_synops_layer total = snn_synops_total(count);
 *     printf("%.3g AC, %.3g pJ per image\n", total.ac / (double)total.samples,
 *            snn_synops_energy_pj(&total) / (double)total.samples);
 *     snn_synops_free(count);                      // disarms it
 *
 * What is counted, per layer and forward, from the input x the layer got (all its time steps):
 *   - the fan-out of an input element: how many outputs it feeds. A linear layer: out_features.
 *     A recurrent layer (snn_recurrent_layer_new, F neurons): its product S[t-1] W_rec^T reads
 *     the layer's own spikes of steps 0..T-2, each fanned out to F; its ANN equivalent is that
 *     product on real values at every step (an RNN over the same T steps).
 *     A conv: C_out fh(h) fw(w), where fh(h) counts the output rows whose window covers input
 *     row h (fewer at the edges, where windows reach into the padding), fw(w) likewise.
 *   - a layer is spike-fed when every value it received was a spike count: 0 or 1 from a
 *     neuron, or 0, 1, 2, ... from a SEW block's sum of spike trains. Its accumulates are
 *         AC = sum over inputs of x fan-out(x)          (each spike adds one weight per target)
 *   - any other layer (the stem conv of direct encoding, the classifier after an average pool,
 *     an ANN) does multiply-accumulates on every input, zero or not:
 *         MAC = sum over inputs of fan-out(x)           (= the dense ops of that input)
 *   - the ANN equivalent: the same layer run once per sample (T = 1) on real values, every
 *     input a MAC: samples x C_in x (the fan-outs of one plane summed).
 *   - energy at 45 nm (Horowitz, ISSCC 2014): SNN_SYNOPS_AC_PJ per AC, SNN_SYNOPS_MAC_PJ per MAC.
 * Not counted: bias adds, batch-norm (in evaluation it folds into the conv's weights), neuron
 * updates, pooling, residual sums, and memory traffic, which dominates a real chip's energy.
 *
 * How. snn_synops_new points the model's plan at the count; from then on every forward of one
 * of its Conv2d or Linear layers (on its own or inside a fused op) hands its input here before
 * it runs. The input is read on the host: a CPU tensor in place, a CUDA tensor copied over in
 * slices of at most 16 MiB, so counting on a GPU costs a copy of every such input (and a wait
 * for it: do not count while a snn_forward_graph records).
 */
#ifndef SNN_NN_SYNOPS_H
#define SNN_NN_SYNOPS_H

#include <stdbool.h>
#include <stdint.h>

#include "module.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Energy of one accumulate (a 32-bit float add) at 45 nm, in picojoules (Horowitz, ISSCC
 * 2014, the figure SNN papers use). */
#define SNN_SYNOPS_AC_PJ 0.9
/** Energy of one multiply-accumulate (a 32-bit float multiply and add) at 45 nm, in pJ. */
#define SNN_SYNOPS_MAC_PJ 4.6

/** What one conv or linear layer did over the forwards counted (all sums over them). Counts
 * are doubles: exact integers up to 2^53. */
typedef struct snn_synops_layer {
    char name[112];           /**< dotted module name: "layer1.0.conv1"; "total" for the sum */
    const char *kind;         /**< "Conv2d", "Linear" or "Recurrent" (a static string) */
    int in_channels;          /**< C_in (a linear layer: in_features) */
    int out_channels;         /**< C_out (a linear layer: out_features) */
    int kernel;               /**< a conv's kernel size K (a linear layer: 0) */
    int stride;               /**< a conv's stride (a linear layer: 0) */
    int pad;                  /**< a conv's zero padding (a linear layer: 0) */
    int height;               /**< H of a conv's input, at its last forward (linear: 0) */
    int width;                /**< W of a conv's input, at its last forward (linear: 0) */
    int64_t forwards;         /**< forwards counted */
    int64_t samples;          /**< samples seen: the batch sizes summed, whatever T */
    int64_t steps;            /**< time steps of the last forward's input (1 without a time axis,
                                   e.g. the stem of direct encoding, which runs once) */
    bool spikes;              /**< every input value was a spike count (an integer >= 0): a
                                   spike-fed layer */
    bool binary;              /**< every input value was 0 or 1 (a SEW sum's 2 is not) */
    double inputs;            /**< input elements, all steps */
    double input_sum;         /**< the input values summed: the spikes of a spike-fed layer */
    double dense_ops;         /**< sum over inputs of fan-out: what a dense run of them does */
    double ac;                /**< accumulates: spikes x fan-out (0 unless spike-fed) */
    double mac;               /**< multiply-accumulates: dense_ops (0 when spike-fed) */
    double ann_mac;           /**< the ANN equivalent: one dense pass per sample, T = 1 */
} snn_synops_layer;

/** A SynOps count armed on a model (opaque; nn/synops.c). */
typedef struct snn_synops snn_synops;

/** Arms a count on `model`, a model (made by snn_model_new, snn_ann_to_snn or a checkpoint
 * load) or any module tree: every forward from now on adds the inputs of its Conv2d and Linear
 * layers, until snn_synops_free, which must come before the model is freed. One count per
 * model at a time. Counting reads each input on the host, so it slows a forward (on CUDA by a
 * copy of each input). The numbers describe inference: count evaluation forwards.
 * NULL with SNN_ERR_ARGUMENT for a NULL model or one already counted, SNN_ERR_MEMORY. */
snn_synops *snn_synops_new(snn_module *model);
/** Disarms the count: later forwards are not counted, and what was counted stays readable
 * until snn_synops_free (e.g. across a change to the model, such as snn_sparsify's swaps).
 * NULL, or a count stopped before, is a no-op. */
void snn_synops_stop(snn_synops *s);
/** Disarms the count (snn_synops_stop) and frees it; call it before freeing its model. NULL is
 * a no-op. */
void snn_synops_free(snn_synops *s);
/** SNN_OK, or the first error met while counting (the forward itself goes on; the message is
 * in snn_last_error() after this call, and the counts after it are incomplete). */
snn_status snn_synops_status(const snn_synops *s);
/** The layers counted so far, in the order their first forward ran; *count gets how many. The
 * array belongs to s (valid until the next forward or snn_synops_free). */
const snn_synops_layer *snn_synops_layers(const snn_synops *s, int *count);
/** Every layer's counts summed, named "total"; samples are the first layer's (every layer of
 * one forward sees the same batch), steps the largest. */
snn_synops_layer snn_synops_total(const snn_synops *s);
/** Seconds spent counting (inside forwards), for programs that time a pass with it armed. */
double snn_synops_seconds(const snn_synops *s);
/** The SNN's energy estimate of `layer`, in pJ: ac SNN_SYNOPS_AC_PJ + mac SNN_SYNOPS_MAC_PJ. */
double snn_synops_energy_pj(const snn_synops_layer *layer);
/** The ANN equivalent's energy estimate, in pJ: ann_mac SNN_SYNOPS_MAC_PJ. */
double snn_synops_ann_energy_pj(const snn_synops_layer *layer);
/** The share of the dense synaptic work the spikes need: ac / dense_ops of a spike-fed layer
 * (the input's firing rate, weighted by fan-out); 1 for a real-fed one, 0 with no inputs. Its
 * inverse bounds the speed-up skipping zero inputs can give that layer. */
double snn_synops_work_fraction(const snn_synops_layer *layer);

#ifdef __cplusplus
}
#endif

#endif /* SNN_NN_SYNOPS_H */
