/*
 * test_nir.c - NIR round trips on the CPU: a model is exported (snn_nir_write: batch-norm
 * folded, neurons mapped to NIR's LIF / IF at dt = 1, max-pool as SumPool2d + Threshold,
 * residual sums as converging edges), read back (snn_nir_read) and run; the logits must be the
 * model's. Covers the spiking CNN with LIF, IF and ParametricLIF, the CNN on 34x34 event
 * frames, the DVS net, the spiking ResNet-18 and SEW-ResNet-18 (width 4), the SEW-ResNet-34 and
 * the spiking ResNet-50 (width 2; its bottleneck blocks, 1x1 / 3x3 / 1x1 with sn3 taking the
 * residual sum), with batch-norm statistics made non-trivial; and the refusals: soft reset,
 * ST-BIF, ALIF, an ANN activation (ReLU), a file that is not HDF5 and a missing file. Skipped (77) in a
 * build without HDF5.
 *
 *     ctest -R nir --output-on-failure
 */
#include "test.h"

#ifndef SNN_WITH_NIR
int main(void)
{
    fprintf(stderr, "skipped: built without HDF5 (install libhdf5-dev for NIR)\n");
    return 77;
}
#else
#include <string.h>
#include <unistd.h>

#include "nir/nir.h"
#include "snn.h"

static char path[256];
static float conv_gain = 3.0f; /* how much the convs' initial weights are scaled up */
static float bn_shift = 0.0f;  /* added to every batch-norm shift (beta) */

/* Gives every batch-norm non-trivial running statistics and affine parameters, so that folding
 * them into the convs is tested, and returns the model in eval mode. */
static void perturb_batchnorms(snn_module *m, snn_rng *rng)
{
    snn_param_list list;
    if (snn_module_parameters(m, &list) != SNN_OK) return;
    for (int i = 0; i < list.count; i++) {
        snn_tensor *t = list.items[i].tensor;
        const char *name = list.items[i].name;
        size_t len = strlen(name);
        bool mean = len > 12 && strcmp(name + len - 12, "running_mean") == 0;
        bool var = len > 11 && strcmp(name + len - 11, "running_var") == 0;
        bool bn_w = strstr(name, "bn") && len > 6 && strcmp(name + len - 6, "weight") == 0;
        bool bn_b = strstr(name, "bn") && len > 4 && strcmp(name + len - 4, "bias") == 0;
        bool fc_w = strstr(name, "fc") && len > 6 && strcmp(name + len - 6, "weight") == 0;
        bool conv_w = t->shape.ndim == 4;
        if (!mean && !var && !bn_w && !bn_b && !fc_w && !conv_w) continue;
        float *host = malloc((size_t)t->numel * sizeof *host);
        snn_tensor_copy_to_host(t, host);
        for (int64_t k = 0; k < t->numel; k++) {
            /* strong enough that spikes reach the output */
            float u = snn_rng_uniform(rng);
            host[k] = mean ? 0.2f * (u - 0.5f) : var ? 0.5f + u : bn_w ? 1.0f + 2.0f * u
                    : bn_b ? bn_shift + 0.5f * u : conv_w ? conv_gain * host[k] : 8.0f * host[k];
        }
        snn_tensor_copy_from_host(t, host);
        free(host);
    }
    snn_param_list_free(&list);
    snn_module_train(m, false);
}

/* Runs model and its NIR copy on x (host values of `shape`); returns the max |difference|. */
static double spread; /* how much the model's logits differ between samples */

static double round_trip(snn_module *model, snn_shape shape, const float *x, int *same_argmax)
{
    CHECK_OK(snn_nir_write(path, model));
    snn_module *graph = snn_nir_read(path, 0, SNN_CPU);
    CHECK(graph != NULL);
    if (!graph) {
        fprintf(stderr, "  %s\n", snn_last_error());
        return 1e9;
    }
    snn_no_grad_begin();
    snn_step_begin();
    snn_tensor *input = snn_from_host(shape, x, SNN_CPU);
    snn_tensor *a = snn_module_forward(model, input), *b = snn_module_forward(graph, input);
    double worst = 1e9;
    *same_argmax = 0;
    CHECK(a && b && a->numel == b->numel);
    if (a && b && a->numel == b->numel) {
        float *ha = malloc((size_t)a->numel * sizeof *ha), *hb = malloc((size_t)b->numel * sizeof *hb);
        snn_tensor_copy_to_host(a, ha);
        snn_tensor_copy_to_host(b, hb);
        worst = 0.0;
        for (int64_t i = 0; i < a->numel; i++) {
            double d = fabs((double)ha[i] - (double)hb[i]);
            if (d > worst) worst = d;
        }
        int64_t classes = a->shape.dim[1];
        spread = 0.0;
        for (int64_t i = classes; i < a->numel; i++)
            spread = fmax(spread, fabs((double)ha[i] - (double)ha[i % classes]));
        *same_argmax = 1;
        for (int64_t n = 0; n < a->shape.dim[0]; n++) {
            int64_t ia = 0, ib = 0;
            for (int64_t k = 1; k < classes; k++) {
                if (ha[n * classes + k] > ha[n * classes + ia]) ia = k;
                if (hb[n * classes + k] > hb[n * classes + ib]) ib = k;
            }
            *same_argmax &= ia == ib;
        }
        free(ha);
        free(hb);
    } else {
        fprintf(stderr, "  %s\n", snn_last_error());
    }
    snn_step_end();
    snn_no_grad_end();
    snn_module_free(graph);
    return worst;
}

static void check_model(const char *what, snn_model_config c, uint64_t seed)
{
    snn_rng rng;
    snn_rng_seed(&rng, seed);
    snn_module *model = snn_model_new(&c, &rng);
    CHECK(model != NULL);
    if (!model) return;
    perturb_batchnorms(model, &rng);
    const int N = 3;
    bool events = c.encoding == SNN_ENCODING_EVENTS;
    snn_shape shape = events ? SNN_SHAPE(c.time_steps, N, c.in_channels, c.height, c.width)
                             : SNN_SHAPE(N, c.in_channels, c.height, c.width);
    int64_t numel = 1;
    for (int d = 0; d < shape.ndim; d++) numel *= shape.dim[d];
    float *x = malloc((size_t)numel * sizeof *x);
    for (int64_t i = 0; i < numel; i++)
        x[i] = events ? (float)(snn_rng_below(&rng, 4)) : 2.0f * snn_rng_uniform(&rng);
    int same = 0;
    double worst = round_trip(model, shape, x, &same);
    fprintf(stderr, "  %-34s max |logit difference| %.2e (logits vary by %.3f between samples), "
            "same predictions: %s\n", what, worst, spread, same ? "yes" : "no");
    CHECK(worst < 1e-4);
    CHECK(spread > 1e-2); /* spikes reached the output: the comparison is not of biases alone */
    CHECK(same);
    free(x);
    snn_module_free(model);
}

static void test_cnn_neurons(void)
{
    snn_model_config c = snn_model_config_default(SNN_MODEL_SPIKING_CNN);
    c.width_base = 6, c.hidden = 24, c.time_steps = 4;
    check_model("cnn, LIF (decay_input)", c, 1);
    c.neuron.decay_input = false;
    c.neuron.tau = 3.0f;
    check_model("cnn, LIF (no decay_input, tau 3)", c, 2);
    c.neuron = snn_neuron_config_default(SNN_NEURON_IF);
    c.neuron.v_threshold = 0.7f;
    check_model("cnn, IF (V_th 0.7)", c, 3);
    c.neuron = snn_neuron_config_default(SNN_NEURON_PLIF);
    check_model("cnn, ParametricLIF", c, 4);
    c = snn_model_config_default(SNN_MODEL_SPIKING_CNN);
    c.width_base = 4, c.hidden = 16, c.time_steps = 3, c.in_channels = 2, c.height = c.width = 34;
    c.encoding = SNN_ENCODING_EVENTS;
    check_model("cnn, 34x34 event frames", c, 5);
}

static void test_dvs_and_resnets(void)
{
    snn_model_config c = snn_model_config_default(SNN_MODEL_DVS_NET);
    c.width_base = 4, c.hidden = 16, c.time_steps = 3, c.height = c.width = 32;
    check_model("dvsnet, 32x32 event frames", c, 6);
    c = snn_model_config_default(SNN_MODEL_RESNET18);
    c.width_base = 4, c.time_steps = 3, c.in_channels = 1, c.height = c.width = 16;
    conv_gain = 3.0f, bn_shift = 1.2f; /* deep spiking ResNets need a push to fire at all */
    check_model("spiking ResNet-18 (width 4)", c, 7);
    c.kind = SNN_MODEL_SEW_RESNET18;
    conv_gain = 3.0f, bn_shift = 0.0f;
    check_model("SEW-ResNet-18 (width 4)", c, 8);
    c.kind = SNN_MODEL_SEW_RESNET34, c.width_base = 2;
    check_model("SEW-ResNet-34 (width 2)", c, 10);
    c.kind = SNN_MODEL_RESNET50;
    conv_gain = 3.0f, bn_shift = 1.2f;
    check_model("spiking ResNet-50 (width 2, bottlenecks)", c, 11);
}

static void test_refusals(void)
{
    snn_rng rng;
    snn_rng_seed(&rng, 9);
    snn_model_config c = snn_model_config_default(SNN_MODEL_SPIKING_CNN);
    c.width_base = 2, c.hidden = 4;
    c.neuron.reset = SNN_RESET_SOFT;
    snn_module *m = snn_model_new(&c, &rng);
    CHECK(snn_nir_write(path, m) == SNN_ERR_UNSUPPORTED && strstr(snn_last_error(), "soft reset"));
    snn_module_free(m);
    c.neuron = snn_neuron_config_default(SNN_NEURON_STBIF);
    m = snn_model_new(&c, &rng);
    CHECK(snn_nir_write(path, m) == SNN_ERR_UNSUPPORTED && strstr(snn_last_error(), "ST-BIF"));
    snn_module_free(m);
    c.neuron = snn_neuron_config_default(SNN_NEURON_ALIF); /* NIR has no adaptive threshold */
    m = snn_model_new(&c, &rng);
    CHECK(snn_nir_write(path, m) == SNN_ERR_UNSUPPORTED && strstr(snn_last_error(), "ALIF") &&
          strstr(snn_last_error(), "snn_nir_write: '"));
    snn_module_free(m);
    c.neuron = snn_neuron_config_default(SNN_NEURON_RELU);
    c.time_steps = 1;
    m = snn_model_new(&c, &rng);
    CHECK(snn_nir_write(path, m) == SNN_ERR_UNSUPPORTED && strstr(snn_last_error(), "ANN activation"));
    snn_module_free(m);
    /* not an HDF5 file, and a missing file: NULL with the file named */
    FILE *f = fopen(path, "wb");
    fputs("not hdf5", f);
    fclose(f);
    CHECK(snn_nir_read(path, 4, SNN_CPU) == NULL && strstr(snn_last_error(), path));
    remove(path);
    CHECK(snn_nir_read(path, 4, SNN_CPU) == NULL && strstr(snn_last_error(), path));
}

int main(void)
{
    snprintf(path, sizeof path, "/tmp/snn_test_nir_%d.nir", (int)getpid());
    RUN(test_cnn_neurons);
    RUN(test_dvs_and_resnets);
    RUN(test_refusals);
    remove(path);
    return test_finish();
}
#endif
