/*
 * test_cuda_sparse.c - the CUDA sparse conv (sparse/sparse_conv.cu) and sparsified models on the
 * GPU. Skipped (exit 77) without a GPU.
 *
 * Kernels: random {0, 1} inputs with whole channels silent (then SEW's residual sums {1, 2, 3}
 * and ST-BIF's signed spikes +-theta in their place); the three CUDA sparse kernels (GEMM,
 * event-driven, event-driven with weights staged in shared memory) must equal a host reference
 * that sums every output in plain k order with fmaf BIT FOR BIT (the kernels keep that order and
 * skipping a zero term is exact; the output starts as NaN, so every entry must be written), and
 * agree with the dense CUDA conv (cuBLAS, its own order) within |diff| <= 1e-4 + 1e-4 |dense|.
 * Shapes: 3x3 stride 1 and 2, 1x1 stride 2, 5x5, 4x4 and 7x7 outputs, C_out not a multiple of the
 * tile, all-zero and all-active, ResNet-50's wide 1x1 convs (C_out 1024, 2048: the event kernel
 * splits the output channels over blocks; C_in 2048) and single images (channel tiles split
 * further to fill the GPU).
 * Models: the spiking CNN, spiking ResNet-18 and SEW-ResNet-18 on CUDA, sparsified (the swapped
 * set as on the CPU), give the same logits bit for bit on the GEMM and both event paths, the dense
 * model's predictions, and logits within that tolerance but
 * for at most a quarter of them: the two summation orders may flip a spike whose membrane
 * potential sits within rounding of the threshold, which moves some logits further. The
 * (SEW-)ResNet-50 (52 swapped convs) is checked for the bitwise agreement of the sparse paths
 * only: 49 neuron layers deep, a flipped spike can move a random net's argmax.
 */
#include <math.h>
#include <string.h>

#include "snn.h"
#include "sparse/sparse.h"
#include "sparse/sparse_module.h"
#include "test.h"

#ifdef SNN_WITH_CUDA

typedef struct conv_case {
    int N, C_in, H, C_out, k, stride, pad;
    double p_silent, rate;
} conv_case;

/* 0: spikes {0, 1}; 1: SEW residual sums {0, 1, 2, 3}; 2: ST-BIF's signed spikes {0, +-0.37}.
 * The kernels multiply every nonzero input by its weight with one fmaf, like the reference, so
 * all three must match it bit for bit (a skipped zero adds +-0 to a sum that is never -0). */
static int spike_values;

static void check_case(conv_case cc, uint64_t seed)
{
    snn_rng rng;
    snn_rng_seed(&rng, seed);
    snn_conv2d_dims d = {cc.N, cc.C_in, cc.H, cc.H, cc.C_out, cc.k, cc.k, cc.stride, cc.pad, 0, 0};
    d.H_out = d.W_out = (cc.H + 2 * cc.pad - cc.k) / cc.stride + 1;
    const int HW = cc.H * cc.H, KK = cc.k * cc.k, P = d.H_out * d.W_out;
    const int64_t nx = (int64_t)cc.N * cc.C_in * HW, nw = (int64_t)cc.C_out * cc.C_in * KK;
    const int64_t ny = (int64_t)cc.N * cc.C_out * P;
    float *x = snn_alloc((size_t)nx * sizeof *x, SNN_CPU);
    float *act = snn_alloc((size_t)cc.N * cc.C_in * sizeof *act, SNN_CPU);
    float *w = snn_alloc((size_t)nw * sizeof *w, SNN_CPU);
    float *ref = snn_alloc((size_t)ny * sizeof *ref, SNN_CPU);
    float *got = snn_alloc((size_t)ny * sizeof *got, SNN_CPU);
    float *dense = snn_alloc((size_t)ny * sizeof *dense, SNN_CPU);
    for (int n = 0; n < cc.N; n++) {
        for (int c = 0; c < cc.C_in; c++) {
            bool silent = (double)snn_rng_uniform(&rng) < cc.p_silent;
            int count = 0;
            for (int i = 0; i < HW; i++) {
                float v = !silent && (double)snn_rng_uniform(&rng) < cc.rate ? 1.0f : 0.0f;
                if (v != 0.0f && spike_values == 1) v = (float)(1 + snn_rng_below(&rng, 3));
                if (v != 0.0f && spike_values == 2) v = snn_rng_below(&rng, 2) ? 0.37f : -0.37f;
                x[((int64_t)n * cc.C_in + c) * HW + i] = v;
                count += v != 0.0f;
            }
            act[n * cc.C_in + c] = (float)count;
        }
    }
    for (int64_t i = 0; i < nw; i++) w[i] = snn_rng_normal(&rng) * 0.1f;
    /* host reference: plain k order, one fmaf per term */
    for (int n = 0; n < cc.N; n++)
        for (int o = 0; o < cc.C_out; o++)
            for (int p = 0; p < P; p++) {
                int oh = p / d.W_out, ow = p % d.W_out;
                float acc = 0.0f;
                for (int c = 0; c < cc.C_in; c++)
                    for (int t = 0; t < KK; t++) {
                        int ih = oh * cc.stride - cc.pad + t / cc.k, iw = ow * cc.stride - cc.pad + t % cc.k;
                        if (ih < 0 || ih >= cc.H || iw < 0 || iw >= cc.H) continue;
                        acc = fmaf(x[((int64_t)n * cc.C_in + c) * HW + ih * cc.H + iw],
                                   w[((int64_t)o * cc.C_in + c) * KK + t], acc);
                    }
                ref[((int64_t)n * cc.C_out + o) * P + p] = acc;
            }
    snn_step_begin();
    snn_no_grad_begin();
    snn_tensor *tx = snn_from_host(SNN_SHAPE(cc.N, cc.C_in, cc.H, cc.H), x, SNN_CUDA);
    snn_tensor *tw = snn_from_host(SNN_SHAPE(cc.C_out, cc.C_in, cc.k, cc.k), w, SNN_CUDA);
    snn_tensor *ta = snn_from_host(SNN_SHAPE(cc.N, cc.C_in), act, SNN_CUDA);
    snn_tensor *ty = snn_empty(SNN_SHAPE(cc.N, cc.C_out, d.H_out, d.W_out), SNN_CUDA);
    snn_tensor *td = snn_conv2d(tx, tw, NULL, cc.stride, cc.pad);
    CHECK(tx && tw && ta && ty && td);
    if (tx && tw && ta && ty && td) {
        CHECK_OK(snn_tensor_copy_to_host(td, dense));
        for (int path = SNN_SPARSE_GEMM; path <= SNN_SPARSE_EVENT_SMEM; path++) {
            CHECK_OK(snn_tensor_fill(ty, NAN));   /* every output must be written */
            CHECK_OK(snn_sparse_conv2d_cuda(ty->data, tx->data, tw->data, NULL, &d, ta->data,
                                            (snn_sparse_path)path));
            CHECK_OK(snn_tensor_copy_to_host(ty, got));
            bool same = memcmp(got, ref, (size_t)ny * sizeof *got) == 0;
            if (!same)
                fprintf(stderr, "  %s: case N%d C%d H%d > %d k%d s%d differs from the k-order "
                        "reference\n", snn_sparse_path_name((snn_sparse_path)path), cc.N, cc.C_in,
                        cc.H, cc.C_out, cc.k, cc.stride);
            CHECK(same);
            CHECK_ALL_CLOSE(got, dense, ny, 1e-4, 1e-4);
        }
    }
    snn_no_grad_end();
    snn_step_end();
    snn_free(x, (size_t)nx * sizeof *x, SNN_CPU);
    snn_free(act, (size_t)cc.N * cc.C_in * sizeof *act, SNN_CPU);
    snn_free(w, (size_t)nw * sizeof *w, SNN_CPU);
    snn_free(ref, (size_t)ny * sizeof *ref, SNN_CPU);
    snn_free(got, (size_t)ny * sizeof *got, SNN_CPU);
    snn_free(dense, (size_t)ny * sizeof *dense, SNN_CPU);
}

static void test_kernel(void)
{
    const conv_case cases[] = {
        {3, 16, 8, 32, 3, 1, 1, 0.6, 0.1},
        {2, 64, 16, 64, 3, 1, 1, 0.6, 0.05},
        {5, 64, 8, 128, 3, 2, 1, 0.7, 0.1},     /* 4x4 outputs */
        {5, 64, 8, 128, 1, 2, 0, 0.7, 0.1},     /* 1x1 stride 2 */
        {3, 24, 7, 40, 3, 1, 1, 0.5, 0.2},      /* 7x7, C_out 40 */
        {2, 512, 4, 512, 3, 1, 1, 0.7, 0.1},    /* layer4 */
        {4, 32, 8, 64, 3, 1, 1, 1.0, 0.1},      /* all zero */
        {3, 32, 8, 64, 3, 1, 1, 0.0, 1.0},      /* all active */
        {2, 256, 32, 64, 3, 1, 1, 0.3, 0.1},    /* event: the channels staged in chunks */
        {2, 64, 32, 128, 3, 2, 1, 0.5, 0.05},   /* stride 2 on 32x32 */
        {2, 128, 4, 1024, 1, 1, 0, 0.5, 0.1},   /* 1x1 to 1024 channels: C_out split over blocks */
        {1, 256, 4, 2048, 1, 1, 0, 0.8, 0.05},  /* ResNet-50 layer4 conv3, one image */
        {1, 64, 8, 256, 3, 1, 1, 0.6, 0.1},     /* one image: channel tiles split to fill the GPU */
        {1, 32, 32, 64, 1, 2, 0, 0.5, 0.1},     /* 1x1 stride 2 downsample, one image */
        {2, 64, 8, 256, 5, 1, 2, 0.5, 0.2},     /* 5x5: event-smem's tile halved to 32 channels */
        {1, 200, 16, 300, 3, 1, 1, 0.6, 0.1},   /* C_out 300: a partial last tile of every kind */
        {2, 2048, 4, 512, 1, 1, 0, 0.8, 0.05},  /* C_in 2048: a long list, event-smem chunks */
    };
    for (spike_values = 0; spike_values <= 2; spike_values++)
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
            check_case(cases[i], 300 + i + 50 * (size_t)spike_values);
    spike_values = 0;
}

/* Sets the one-sample path of every SparseConv2d of m (sparse_module.h). */
static void set_path_one(snn_module *m, snn_sparse_path path)
{
    if (snn_is_sparse_conv(m)) ((sparse_impl *)m->impl)->path_one = path;
    for (int i = 0; i < m->n_children; i++) set_path_one(m->children[i], path);
}

/* dense output of the model on CUDA vs its sparsified output */
static void check_model(snn_model_config cfg, int expect_swapped, int images, bool against_dense)
{
    snn_rng rng;
    snn_rng_seed(&rng, 9);
    snn_module *m = snn_model_new(&cfg, &rng);
    CHECK(m && snn_module_to(m, SNN_CUDA) == SNN_OK);
    if (!m) return;
    snn_module_train(m, false);
    snn_tensor *batches[2];
    for (int i = 0; i < 2; i++) {
        batches[i] = snn_tensor_new(SNN_SHAPE(images, cfg.in_channels, cfg.height, cfg.width), SNN_CUDA);
        snn_tensor_normal_(batches[i], &rng, 0.5f, 1.0f);
    }
    const int64_t out_n = (int64_t)images * cfg.classes;
    float dense_out[64 * 10], sparse_out[64 * 10], event_out[64 * 10], smem_out[64 * 10];
    float *outs[4] = {dense_out, sparse_out, event_out, smem_out};
    for (int pass = 0; pass < 4; pass++) {
        if (pass == 1) {
            snn_sparse_options o = snn_sparse_options_default();
            o.force = SNN_SPARSE_GEMM;
            o.quiet = true;
            snn_sparse_report rep;
            CHECK_OK(snn_sparsify(m, batches, 2, &o, &rep));
            CHECK(rep.count == expect_swapped);
        }
        if (pass == 2) CHECK(snn_sparse_set_path(m, SNN_SPARSE_EVENT) == expect_swapped);
        if (pass == 3) CHECK(snn_sparse_set_path(m, SNN_SPARSE_EVENT_SMEM) == expect_swapped);
        snn_no_grad_begin();
        snn_step_begin();
        snn_tensor *y = snn_module_forward(m, batches[1]);
        CHECK(y && y->numel == out_n);
        if (y) snn_tensor_copy_to_host(y, outs[pass]);
        snn_step_end();
        snn_no_grad_end();
    }
    /* cuBLAS sums in its own order, so a membrane potential within rounding of the threshold
     * can flip one spike between the two runs: most logits agree to 1e-4, and the predictions
     * must agree; a few logits may move by a flipped spike's weight (printed) */
    int off = 0;
    double worst = 0.0;
    for (int64_t i = 0; against_dense && i < out_n; i++) {
        double e = fabs((double)sparse_out[i] - (double)dense_out[i]);
        if (e > worst) worst = e;
        off += e > 1e-4 + 1e-4 * fabs((double)dense_out[i]);
    }
    fprintf(stderr, "  model: %d of %lld logits off by more than 1e-4 (max |diff| %.3g)\n", off,
            (long long)out_n, worst);
    CHECK(off <= out_n / 4);
    for (int i = 0; against_dense && i < images; i++) {
        int a = 0, b = 0;
        for (int k = 1; k < cfg.classes; k++) {
            if (dense_out[i * cfg.classes + k] > dense_out[i * cfg.classes + a]) a = k;
            if (sparse_out[i * cfg.classes + k] > sparse_out[i * cfg.classes + b]) b = k;
        }
        CHECK(a == b);
    }
    /* the sparse paths sum the same terms in the same order: the same logits, bit for bit */
    CHECK(memcmp(event_out, sparse_out, (size_t)out_n * sizeof *event_out) == 0);
    CHECK(memcmp(smem_out, sparse_out, (size_t)out_n * sizeof *smem_out) == 0);
    /* a batch of one sample runs the path of the one-sample round, here the forced one as at
     * the calibration size: every swapped layer runs sparse once more, none falls back; with
     * that round's path dense (set by hand), every one falls back once */
    snn_tensor *one = snn_tensor_new(SNN_SHAPE(1, cfg.in_channels, cfg.height, cfg.width), SNN_CUDA);
    snn_tensor_normal_(one, &rng, 0.5f, 1.0f);
    snn_sparse_report before, after;
    snn_sparse_collect(m, &before);
    for (int round = 0; round < 2; round++) {
        if (round == 1) set_path_one(m, SNN_SPARSE_DENSE);
        snn_no_grad_begin();
        snn_step_begin();
        CHECK(snn_module_forward(m, one) != NULL);
        snn_step_end();
        snn_no_grad_end();
    }
    snn_sparse_collect(m, &after);
    long long fell_back = 0, ran_sparse = 0;
    for (int i = 0; i < after.count; i++) {
        CHECK(after.layers[i].one_images == cfg.time_steps);
        fell_back += after.layers[i].fallbacks - before.layers[i].fallbacks;
        ran_sparse += after.layers[i].sparse_calls - before.layers[i].sparse_calls;
    }
    CHECK(images > 2 && fell_back == expect_swapped && ran_sparse == expect_swapped);
    snn_tensor_free(one);
    for (int i = 0; i < 2; i++) snn_tensor_free(batches[i]);
    snn_module_free(m);
}

static void test_models(void)
{
    snn_model_config cnn = snn_model_config_default(SNN_MODEL_SPIKING_CNN);
    cnn.width_base = 16, cnn.hidden = 32, cnn.time_steps = 2;
    check_model(cnn, 1, 8, true);
    snn_model_config res = snn_model_config_default(SNN_MODEL_RESNET18);
    res.width_base = 8, res.height = res.width = 16, res.time_steps = 2;
    check_model(res, 19, 4, true);
    snn_model_config sew = snn_model_config_default(SNN_MODEL_SEW_RESNET18);
    sew.width_base = 8, sew.height = sew.width = 16, sew.time_steps = 2;
    check_model(sew, 19, 4, true);   /* 10 of them masked by the union of a residual sum's operands */
    snn_model_config r50 = snn_model_config_default(SNN_MODEL_RESNET50);
    r50.width_base = 8, r50.height = r50.width = 16, r50.time_steps = 2;
    check_model(r50, 52, 4, false);
    r50.kind = SNN_MODEL_SEW_RESNET50;
    check_model(r50, 52, 4, false);
}

#endif /* SNN_WITH_CUDA */

int main(void)
{
    test_require_cuda();
#ifdef SNN_WITH_CUDA
    RUN(test_kernel);
    RUN(test_models);
#endif
    return test_finish();
}
