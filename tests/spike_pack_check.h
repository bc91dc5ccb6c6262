/*
 * spike_pack_check.h - what test_spike_pack.c (CPU) and test_cuda_spike_pack.c check of spikes
 * kept as bits (autograd/spike_pack.c; the model option pack_spikes, snn_model_set_options):
 *
 *   1. the kernels: pack_bits on 0 / 1 floats gives the reference's words (kernels/ref/bits.c:
 *      bit i % 32 of word i / 32, the unused bits of the last word 0), writes no word past them,
 *      and unpack_bits gives the floats back
 *      bit for bit, at lengths around the 32-element word; and the bits the fused batch-norm ->
 *      neuron op writes beside its spikes are those words too;
 *   2. a training step of small ResNets (basic blocks, SEW, bottlenecks; 8x8 and 9x9 images),
 *      with the fused batch-norm -> neuron ops and without, packing on and off: the same loss,
 *      every gradient and every parameter after the step (the running statistics) bit for
 *      bit, with the expected number of neuron layers holding bits at the end of the forward;
 *   3. conv outputs kept as bf16 (autograd/bf16_keep.c; the model option keep_bf16): the
 *      rounding kernels against values rounded by hand, the refusals, and a training step with
 *      the option on and off, the same bits where the conv outputs are bf16 numbers already.
 */
#ifndef SNN_SPIKE_PACK_CHECK_H
#define SNN_SPIKE_PACK_CHECK_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "snn.h"
#include "tensor/arena.h"
#include "kernels/kernels.h"
#include "kernels/ref/kernels_ref.h"
#include "test.h"

/* ---- 1. the kernels ---------------------------------------------------------------------- */

static void check_pack_kernels(snn_device dev)
{
    static const int64_t lengths[] = {1, 5, 31, 32, 33, 64, 95, 1000, 4099, 70001};
    const snn_kernels *k = snn_kernels_for(dev);
    CHECK(k && k->pack_bits && k->unpack_bits);
    if (!k) return;
    snn_rng rng;
    snn_rng_seed(&rng, 17);
    for (size_t c = 0; c < sizeof lengths / sizeof *lengths; c++) {
        const int64_t n = lengths[c], words = (n + 31) / 32;
        float *x = malloc((size_t)n * sizeof *x), *back = malloc((size_t)n * sizeof *back);
        uint32_t *want = calloc((size_t)words, sizeof *want);
        uint32_t *got = malloc((size_t)words * sizeof *got);
        int ones = 0;
        for (int64_t i = 0; i < n; i++) {
            /* about a fifth fire, and the last element always does (the partial word) */
            x[i] = snn_rng_uniform(&rng) < 0.2f || i == n - 1 ? 1.0f : 0.0f;
            ones += x[i] != 0.0f;
        }
        snn_pack_bits_ref(want, x, n);
        CHECK(ones > 0);
        CHECK_OK(snn_step_begin());
        float *xd = snn_step_alloc("test", (size_t)n * sizeof(float), dev);
        float *backd = snn_step_alloc("test", (size_t)n * sizeof(float), dev);
        uint32_t *bitsd = snn_step_alloc("test", (size_t)(words + 1) * sizeof(uint32_t), dev);
        CHECK(xd && backd && bitsd);
        if (xd && backd && bitsd) {
            k->copy(xd, x, (size_t)n * sizeof(float), SNN_COPY_HOST_TO_DEVICE);
            /* a guard word after the last: the kernel writes exactly `words` words */
            const uint32_t guard = 0xa5a5a5a5u;
            k->copy(bitsd + words, &guard, sizeof guard, SNN_COPY_HOST_TO_DEVICE);
            k->pack_bits(bitsd, xd, n);
            k->unpack_bits(backd, bitsd, n);
            uint32_t after = 0;
            k->copy(got, bitsd, (size_t)words * sizeof(uint32_t), SNN_COPY_DEVICE_TO_HOST);
            k->copy(&after, bitsd + words, sizeof after, SNN_COPY_DEVICE_TO_HOST);
            k->copy(back, backd, (size_t)n * sizeof(float), SNN_COPY_DEVICE_TO_HOST);
            k->synchronize();
            CHECK(memcmp(got, want, (size_t)words * sizeof(uint32_t)) == 0);
            CHECK(after == guard);
            CHECK(test_same_bits(back, x, (long)n));
        }
        snn_step_end();
        free(x), free(back), free(want), free(got);
    }
}

/* The bits the fused batch-norm -> neuron op writes beside its spikes (lif_bn_forward's
 * spike_bits: on CUDA a warp ballot where a step's N C H W elements are whole words, else a
 * pack pass) are the spikes' own bits, as a plain loop packs them. */
static void check_fused_bits(snn_device dev)
{
    static const snn_shape shapes[2] = {{5, {3, 4, 8, 4, 4}},   /* 512 a step: ballot */
                                        {5, {3, 3, 5, 3, 3}}};  /* 135 a step: a pass */
    snn_neuron_config cfg = snn_neuron_config_default(SNN_NEURON_LIF);
    snn_rng rng;
    snn_rng_seed(&rng, 29);
    for (int k = 0; k < 2; k++) {
        const int64_t n = snn_shape_numel(shapes[k]), C = shapes[k].dim[2], words = (n + 31) / 32;
        float *xh = malloc((size_t)n * sizeof *xh), *ones = malloc((size_t)C * sizeof *ones);
        for (int64_t i = 0; i < n; i++) xh[i] = 3.0f * snn_rng_uniform(&rng) - 1.0f;
        for (int64_t c = 0; c < C; c++) ones[c] = 1.0f;
        CHECK_OK(snn_step_begin());
        snn_tensor *x = snn_from_host(shapes[k], xh, dev);
        snn_tensor *gamma = snn_from_host(SNN_SHAPE(C), ones, dev);
        snn_tensor *var = snn_from_host(SNN_SHAPE(C), ones, dev);
        snn_tensor *beta = snn_zeros(SNN_SHAPE(C), dev), *mean = snn_zeros(SNN_SHAPE(C), dev);
        x->requires_grad = true; /* a tape: the spikes come from the pool, with their bits */
        snn_tensor *s = snn_batchnorm_neuron(x, gamma, beta, mean, var, 0.1f, 1e-5f, NULL, &cfg,
                                             NULL);
        CHECK(s && s->spikes && s->data && s->spike_bits);
        if (s && s->data && s->spike_bits) {
            float *sh = malloc((size_t)n * sizeof *sh);
            uint32_t *want = calloc((size_t)words, sizeof *want);
            uint32_t *got = malloc((size_t)words * sizeof *got);
            CHECK_OK(snn_tensor_copy_to_host(s, sh));
            const snn_kernels *kt = snn_kernels_for(dev);
            kt->copy(got, s->spike_bits, (size_t)words * sizeof *got, SNN_COPY_DEVICE_TO_HOST);
            kt->synchronize();
            int ones_seen = 0;
            for (int64_t i = 0; i < n; i++) {
                if (sh[i] != 0.0f) want[i / 32] |= 1u << (i % 32);
                ones_seen += sh[i] != 0.0f;
            }
            CHECK(ones_seen > 0 && ones_seen < n);
            CHECK(memcmp(got, want, (size_t)words * sizeof *got) == 0);
            free(sh), free(want), free(got);
        }
        snn_step_end();
        free(xh), free(ones);
    }
}

/* ---- 2. a model's training step, packing on and off -------------------------------------- */

typedef struct pack_step {
    float loss;
    int packed_layers;   /* neuron layers whose spikes were bits when the forward ended */
    int n;               /* host copies of every parameter, then every gradient, in order */
    float *values[512];
    int64_t numel[512];
} pack_step;

/* Every conv weight (4-D parameter) rounded to a multiple of 1/16, and the input to multiples
 * of 1/4: each conv output is then a multiple of 1/64 below 4 in magnitude (or of 1/16, fed by
 * spikes), which bf16's 8 bits hold exactly for these small nets (autograd/bf16_keep.c). */
static void quantize_conv_weights(snn_module *m)
{
    snn_param_list list;
    CHECK_OK(snn_module_parameters(m, &list));
    for (int i = 0; i < list.count; i++) {
        snn_tensor *p = list.items[i].tensor;
        if (p->shape.ndim != 4) continue;
        float *h = test_to_host(p);
        for (int64_t e = 0; e < p->numel; e++) h[e] = roundf(16.0f * h[e]) / 16.0f;
        CHECK_OK(snn_tensor_copy_from_host(p, h));
        free(h);
    }
    snn_param_list_free(&list);
}

/* One training step of model c on dev with `options` changed by `set` (fuse, pack_spikes,
 * keep_bf16 where set[i] >= 0), the conv weights and input quantized when `quantize`. */
static pack_step run_step_with(snn_model_config c, snn_device dev, const int set[3], bool quantize)
{
    pack_step r = {0};
    snn_rng rng;
    snn_rng_seed(&rng, 11);
    snn_module *m = snn_model_new(&c, &rng);
    CHECK(m != NULL);
    if (!m) return r;
    if (dev != SNN_CPU) CHECK_OK(snn_module_to(m, dev));
    if (quantize) quantize_conv_weights(m);
    snn_module_train(m, true);
    snn_model_options options = snn_model_options_of(m);
    if (set[0] >= 0) options.fuse = set[0];
    if (set[1] >= 0) options.pack_spikes = set[1];
    if (set[2] >= 0) options.keep_bf16 = set[2];
    CHECK_OK(snn_model_set_options(m, &options));
    const int N = 3;
    const int64_t n_in = (int64_t)N * c.in_channels * c.height * c.width;
    float *xh = malloc((size_t)n_in * sizeof *xh);
    for (int64_t i = 0; i < n_in; i++) xh[i] = 3.0f * snn_rng_uniform(&rng) - 1.0f;
    if (quantize)
        for (int64_t i = 0; i < n_in; i++) xh[i] = roundf(4.0f * xh[i]) / 4.0f;
    const float labels[3] = {1, 7, 4};
    CHECK_OK(snn_step_begin());
    snn_module_zero_grad(m);
    snn_tensor *x = snn_from_host(SNN_SHAPE(N, c.in_channels, c.height, c.width), xh, dev);
    snn_tensor *logits = snn_module_forward(m, x);
    snn_module *layers[64];
    const char *names[64];
    const int n_layers = snn_model_neuron_layers(m, layers, names, 64);
    for (int l = 0; l < n_layers; l++) {
        const snn_tensor *s = snn_neuron_layer_last_spikes(layers[l]);
        r.packed_layers += s && s->spike_bits && !s->data;
    }
    snn_tensor *loss = logits ? snn_cross_entropy(logits, snn_from_host(SNN_SHAPE(N), labels, dev))
                              : NULL;
    CHECK(loss != NULL);
    if (!loss) fprintf(stderr, "  %s\n", snn_last_error());
    if (loss) {
        CHECK_OK(snn_backward(loss));
        CHECK_OK(snn_tensor_copy_to_host(loss, &r.loss));
    }
    snn_step_end();
    snn_param_list list;
    CHECK_OK(snn_module_parameters(m, &list));
    for (int i = 0; i < list.count && r.n + 2 <= 512; i++) {
        const snn_tensor *p = list.items[i].tensor;
        r.values[r.n] = test_to_host(p), r.numel[r.n++] = p->numel;
        if (p->grad) r.values[r.n] = test_to_host(p->grad), r.numel[r.n++] = p->numel;
    }
    snn_param_list_free(&list);
    snn_module_free(m);
    free(xh);
    return r;
}

static pack_step run_pack_step(snn_model_config c, snn_device dev, bool fusion, bool packing)
{
    const int set[3] = {fusion, packing, -1};
    return run_step_with(c, dev, set, false);
}

static void pack_step_free(pack_step *r)
{
    for (int i = 0; i < r->n; i++) free(r->values[i]);
}

/* The loss and every tensor of the two steps the same bits; else what differs, named by `what`. */
static void check_same_steps(const pack_step *off, const pack_step *on, snn_model_kind kind,
                             int fusion, int time_steps, const char *what)
{
    CHECK(off->loss == on->loss && off->n == on->n && off->n > 0);
    int differ = 0;
    for (int i = 0; i < off->n && i < on->n; i++)
        if (off->numel[i] != on->numel[i] ||
            !test_same_bits(off->values[i], on->values[i], (long)off->numel[i]))
            differ++;
    if (differ)
        fprintf(stderr, "  %s, fusion %d, T %d: %d of %d tensors differ with %s\n",
                snn_model_kind_name(kind), fusion, time_steps, differ, off->n, what);
    CHECK(differ == 0);
}

/* Every case: packing off and on give the same bits; on packs `packed` layers. */
static void check_models_packing(snn_device dev, int time_steps)
{
    const struct { snn_model_kind kind; int packed, size; } cases[4] = {
        /* all 17 neuron layers but the last block's output, which feeds the pool, not a conv */
        {SNN_MODEL_RESNET18, 16, 8},
        /* 9x9 images: layers of N C H W not a multiple of 32 elements, where the CUDA fused
         * neuron packs its bits in a pass after its kernel instead of by warp ballots */
        {SNN_MODEL_RESNET18, 16, 9},
        /* SEW: the stem's and each block's first; block outputs and shortcuts feed sums */
        {SNN_MODEL_SEW_RESNET18, 9, 8},
        /* bottlenecks: all 49 but the last block's output */
        {SNN_MODEL_RESNET50, 48, 8},
    };
    for (int k = 0; k < 4; k++)
        for (int fusion = 0; fusion < 2; fusion++) {
            snn_model_config c = snn_model_config_default(cases[k].kind);
            c.width_base = cases[k].kind == SNN_MODEL_RESNET50 ? 2 : 4;
            c.time_steps = time_steps, c.height = c.width = cases[k].size;
            pack_step off = run_pack_step(c, dev, fusion, false);
            pack_step on = run_pack_step(c, dev, fusion, true);
            CHECK(off.packed_layers == 0);
            if (on.packed_layers != cases[k].packed)
                fprintf(stderr, "  %s, fusion %d: %d layers packed, want %d\n",
                        snn_model_kind_name(cases[k].kind), fusion, on.packed_layers,
                        cases[k].packed);
            CHECK(on.packed_layers == cases[k].packed);
            check_same_steps(&off, &on, cases[k].kind, fusion, time_steps, "packing");
            pack_step_free(&off), pack_step_free(&on);
        }
}

/* ---- 3. conv outputs kept as bf16 (autograd/bf16_keep.c) --------------------------------- */

/* The rounding by hand: ties go to the even neighbour, halfway values above a tie up, past the
 * largest bf16 to infinity; x is rewritten with the rounded values, the bits kept beside. */
static void check_bf16_kernels(snn_device dev)
{
    const float in[8] = {1.0f + 1.0f / 256.0f,          /* tie, even neighbour below: 1 */
                         1.0f + 3.0f / 256.0f,          /* tie, odd below: up to 1 + 4/256 */
                         1.0f + 1.0f / 256.0f + 1e-7f,  /* just above a tie: up */
                         -0.1f,                         /* 0xbdcccccd -> 0xbdcd */
                         3.4e38f,                       /* past 0x7f7f's upper half: inf */
                         -0.0f, 65504.0f, 1e-40f};      /* 65504 = 0x477fe000 -> 0x4780 */
    const uint16_t bits[8] = {0x3f80, 0x3f82, 0x3f81, 0xbdcd, 0x7f80, 0x8000, 0x4780, 0x0001};
    const float out[8] = {1.0f, 1.0f + 4.0f / 256.0f, 1.0f + 2.0f / 256.0f, -0.10009765625f,
                          INFINITY, -0.0f, 65536.0f, snn_bf16_value(0x0001)};
    const snn_kernels *k = snn_kernels_for(dev);
    snn_tensor *x = snn_tensor_new(SNN_SHAPE(8), dev);
    CHECK_OK(snn_tensor_copy_from_host(x, in));
    uint16_t *b = k->device_alloc(8 * sizeof(uint16_t));
    k->round_bf16(x->data, b, 8);
    uint16_t got[8];
    k->copy(got, b, sizeof got, SNN_COPY_DEVICE_TO_HOST);
    float *xv = test_to_host(x);
    for (int i = 0; i < 8; i++) {
        CHECK(got[i] == bits[i]);
        CHECK(test_same_bits(&xv[i], &out[i], 1));
    }
    /* unpack gives the rounded values back */
    k->fill(x->data, 0.0f, 8);
    k->unpack_bf16(x->data, b, 8);
    free(xv);
    xv = test_to_host(x);
    CHECK(test_same_bits(xv, out, 8));
    free(xv);
    k->device_free(b);
    snn_tensor_free(x);
}

/* snn_values_round_bf16 and snn_values_keep_bf16 take only a conv output from the pool, in
 * that order, and name what they were given */
static void check_bf16_refusals(snn_device dev)
{
    snn_tensor *owned = snn_tensor_new(SNN_SHAPE(4), dev);
    CHECK(snn_values_round_bf16(owned) == SNN_ERR_ARGUMENT &&
          strstr(snn_last_error(), "snn_values_round_bf16: bad argument 't'") &&
          strstr(snn_last_error(), "not from the step pool"));
    CHECK_OK(snn_step_begin());
    snn_tensor *w = snn_tensor_new(SNN_SHAPE(2, 1, 3, 3), dev);
    snn_tensor *in = snn_tensor_new(SNN_SHAPE(1, 1, 4, 4), dev);
    snn_tensor_fill(w, 0.25f), snn_tensor_fill(in, 1.0f);
    snn_tensor *y = snn_conv2d_to_pool(in, w, NULL, 1, 1);
    CHECK(y && y->pooled && y->data);
    CHECK(snn_values_keep_bf16(y) == SNN_ERR_ARGUMENT &&
          strstr(snn_last_error(), "rounded by snn_values_round_bf16 first"));
    CHECK_OK(snn_values_round_bf16(y));
    CHECK_OK(snn_values_keep_bf16(y));
    CHECK(y->data == NULL && y->bf16 != NULL);
    CHECK_OK(snn_values_keep_bf16(y)); /* kept already: nothing to do */
    /* a forward op given it afterwards refuses it */
    CHECK(snn_relu(y) == NULL && strstr(snn_last_error(), "snn_relu"));
    snn_step_end();
    snn_tensor_free(w), snn_tensor_free(in), snn_tensor_free(owned);
}

/* A training step of small ResNets with conv outputs kept as bf16 and without, fused and not:
 * with the conv weights and the input quantized so that every conv output is a bf16 number
 * already, the two give the same loss, gradients and running statistics bit for bit (backward
 * reads the bf16 copies: the fused ops' kernels their bits, the plain batch-norm them
 * unpacked); without, the rounding shows, and stays within bf16's precision. */
static void check_models_bf16_kept(snn_device dev, int time_steps)
{
    const snn_model_kind kinds[2] = {SNN_MODEL_RESNET18, SNN_MODEL_SEW_RESNET18};
    for (int k = 0; k < 2; k++)
        for (int fusion = 0; fusion < 2; fusion++) {
            snn_model_config c = snn_model_config_default(kinds[k]);
            c.width_base = 4, c.time_steps = time_steps, c.height = c.width = 8;
            const int off_set[3] = {fusion, 1, 0}, on_set[3] = {fusion, 1, 1};
            pack_step off = run_step_with(c, dev, off_set, true);
            pack_step on = run_step_with(c, dev, on_set, true);
            check_same_steps(&off, &on, kinds[k], fusion, time_steps, "bf16 kept");
            pack_step_free(&off), pack_step_free(&on);
            /* unquantized: the conv outputs are rounded, the loss moves by bf16's precision */
            off = run_step_with(c, dev, off_set, false);
            on = run_step_with(c, dev, on_set, false);
            CHECK(off.loss != on.loss && fabsf(off.loss - on.loss) < 0.02f * fabsf(off.loss));
            pack_step_free(&off), pack_step_free(&on);
        }
}

#endif /* SNN_SPIKE_PACK_CHECK_H */
