/*
 * test_activity_penalty.c - the activity penalty (nn/activity_penalty.c) and its op, the per-plane
 * L2 norm of spikes (neurons/plane_norm.c), on the CPU.
 *
 *   1. snn_spike_plane_norms on spikes {0, 1} with silent planes: y = sqrt(count) exactly, and the
 *      backward's closed form dx = dy x / y (0 on silent planes), on (T, N, C, H, W), (T, N, F)
 *      and ST-BIF-like values {-theta, 0, theta};
 *   2. the same op against central finite differences (gradcheck) on smooth inputs;
 *   3. through a LIF layer: penalty -> spikes -> membrane. With T = 1 the gradient on the input
 *      current has the closed form dL/dX = S / ||S_g|| * g'(H - V_th) / tau (the surrogate's
 *      slope, H = X / tau): the penalty is differentiable through the neuron's spike output;
 *   4. snn_activity_penalty on a spiking ResNet-18 and a spiking CNN with a spiking readout: the
 *      value equals the formula recomputed from each layer's spikes (the readout left out), the
 *      backward reaches the parameters (a batch-norm shift), and calling it before any forward
 *      is an error.
 * Run: ctest --test-dir build -R activity_penalty
 */
#include <math.h>
#include <string.h>

#include "snn.h"
#include "nn/nn_internal.h"
#include "test.h"

/* x (planes, plane) spikes, each plane silent with probability 0.3, else firing at 0.3; value
 * v for a spike (1: binary; theta: ST-BIF-like, signs random when signed_values). */
static void fill_planes(float *x, int64_t planes, int64_t plane, float v, bool signed_values,
                        snn_rng *rng)
{
    for (int64_t g = 0; g < planes; g++) {
        const bool silent = snn_rng_uniform(rng) < 0.3f;
        for (int64_t p = 0; p < plane; p++) {
            float s = !silent && snn_rng_uniform(rng) < 0.3f ? v : 0.0f;
            if (signed_values && snn_rng_uniform(rng) < 0.5f) s = -s;
            x[g * plane + p] = s;
        }
    }
}

static void check_closed_form(snn_shape shape, int64_t planes, float v, bool signed_values)
{
    snn_rng rng;
    snn_rng_seed(&rng, 11);
    snn_tensor *x = snn_tensor_new(shape, SNN_CPU);
    CHECK(x != NULL);
    if (!x) return;
    const int64_t plane = x->numel / planes;
    fill_planes(x->data, planes, plane, v, signed_values, &rng);
    x->requires_grad = true;
    float *dy = malloc((size_t)planes * sizeof *dy);
    for (int64_t g = 0; g < planes; g++) dy[g] = snn_rng_normal(&rng);
    snn_step_begin();
    snn_tensor *y = snn_spike_plane_norms(x);
    CHECK(y != NULL && y->numel == planes);
    snn_tensor *seed = y ? snn_from_host(y->shape, dy, SNN_CPU) : NULL;
    if (y && seed) {
        int64_t silent = 0;
        for (int64_t g = 0; g < planes; g++) {
            float sum = 0.0f;   /* count * v^2, exact for these values */
            for (int64_t p = 0; p < plane; p++) sum += x->data[g * plane + p] * x->data[g * plane + p];
            silent += sum == 0.0f;
            CHECK(y->data[g] == sqrtf(sum));
        }
        CHECK(silent > 0 && silent < planes);   /* both kinds of plane are exercised */
        CHECK_OK(snn_backward_from(y, seed));
        CHECK(x->grad != NULL);
        for (int64_t g = 0; x->grad && g < planes; g++)
            for (int64_t p = 0; p < plane; p++) {
                const float xi = x->data[g * plane + p];
                const float want = y->data[g] > 0.0f ? dy[g] / y->data[g] * xi : 0.0f;
                CHECK_CLOSE(x->grad->data[g * plane + p], want, 1e-7, 1e-6);
            }
    }
    snn_step_end();
    free(dy);
    snn_tensor_free(x);
}

static void test_plane_norm_closed_form(void)
{
    check_closed_form(SNN_SHAPE(2, 3, 4, 3, 5), 2 * 3 * 4, 1.0f, false);   /* conv planes */
    check_closed_form(SNN_SHAPE(3, 4, 9), 3 * 4 * 9, 1.0f, false);         /* fc: planes of 1 */
    check_closed_form(SNN_SHAPE(2, 2, 3, 6, 6), 2 * 2 * 3, 0.5f, true);    /* ST-BIF +-theta */
    check_closed_form(SNN_SHAPE(5, 7), 5 * 7, 1.0f, false);                /* (T, N) */
}

static snn_tensor *norms_fn(snn_tensor *const *in, void *ctx)
{
    (void)ctx;
    return snn_spike_plane_norms(in[0]);
}

static void test_plane_norm_gradcheck(void)
{
    snn_rng rng;
    snn_rng_seed(&rng, 5);
    snn_step_begin();
    snn_tensor *x = snn_empty(SNN_SHAPE(2, 2, 3, 4, 4), SNN_CPU);
    CHECK(x != NULL);
    if (x) {
        snn_tensor_normal_(x, &rng, 0.3f, 1.0f);
        x->requires_grad = true;
        snn_gradcheck_options o = {1e-3f, 1e-3f, 1e-2f, 3, false};
        CHECK_OK(snn_gradcheck("snn_spike_plane_norms", norms_fn, 1, &x, NULL, o));
    }
    snn_step_end();
}

/* T = 1 LIF: H = X / tau, S = H >= V_th; L = sum_g ||S_g||. dL/dX = S/||S_g|| g'(H - V_th) / tau. */
static void test_through_lif(void)
{
    const int N = 2, C = 3, HW = 16;
    snn_neuron_config cfg = snn_neuron_config_default(SNN_NEURON_LIF);
    cfg.surrogate = snn_surrogate_default(SNN_SURROGATE_ATAN);
    snn_rng rng;
    snn_rng_seed(&rng, 3);
    snn_tensor *x = snn_tensor_new(SNN_SHAPE(1, N, C, 4, 4), SNN_CPU);
    CHECK(x != NULL);
    if (!x) return;
    /* currents around the threshold (H = X / 2 crosses 1 at X = 2), channel 1 silent */
    for (int64_t i = 0; i < x->numel; i++) {
        const int c = (int)(i / HW) % C;
        x->data[i] = c == 1 ? -1.0f : 2.0f + 1.5f * snn_rng_normal(&rng);
    }
    x->requires_grad = true;
    snn_step_begin();
    snn_tensor *s = snn_neuron_multistep(x, &cfg, NULL, NULL);
    snn_tensor *y = s ? snn_spike_plane_norms(s) : NULL;
    snn_tensor *loss = y ? snn_sum_all(y) : NULL;
    CHECK(loss != NULL);
    if (loss) {
        CHECK_OK(snn_backward(loss));
        int fired = 0;
        for (int g = 0; g < N * C; g++) {
            for (int p = 0; p < HW; p++) {
                const int64_t i = (int64_t)g * HW + p;
                const float h = x->data[i] / cfg.tau;
                const float spike = h >= cfg.v_threshold ? 1.0f : 0.0f;
                CHECK(s->data[i] == spike);
                fired += spike != 0.0f;
                const float ds = y->data[g] > 0.0f ? spike / y->data[g] : 0.0f;
                const float want = ds * snn_surrogate_grad(cfg.surrogate, h - cfg.v_threshold) / cfg.tau;
                CHECK_CLOSE(x->grad->data[i], want, 1e-7, 1e-5);
                if (g % C == 1) CHECK(x->grad->data[i] == 0.0f);   /* silent plane: no push */
            }
        }
        CHECK(fired > 0);
    }
    snn_step_end();
    snn_tensor_free(x);
}

/* Element i of CPU spikes, read from the floats or from the bits snn_spikes_pack kept. */
static float spike_at(const snn_tensor *s, int64_t i)
{
    if (s->data) return s->data[i];
    return (float)((s->spike_bits[i / 32] >> (i % 32)) & 1u);
}

/* The formula of activity_penalty.c recomputed from the spikes of `layers` (host copies). */
static double penalty_by_hand(snn_module **layers, int n)
{
    double total = 0.0;
    int used = 0;
    for (int l = 0; l < n; l++) {
        snn_tensor *s = snn_neuron_layer_last_spikes(layers[l]);
        if (!s) continue;
        const int nd = s->shape.ndim;
        int64_t planes = 1;
        for (int d = 0; d < nd && d < 3; d++) planes *= s->shape.dim[d];
        const int64_t plane = s->numel / planes;
        double sum = 0.0;
        for (int64_t g = 0; g < planes; g++) {
            double sq = 0.0;
            for (int64_t p = 0; p < plane; p++)
                sq += (double)spike_at(s, g * plane + p) * (double)spike_at(s, g * plane + p);
            sum += sqrt(sq / (double)plane);
        }
        total += sum / (double)planes;
        used++;
    }
    return used ? total : 0.0;
}

static void check_model_penalty(snn_model_config cfg, int images, bool readout_left_out)
{
    snn_rng rng;
    snn_rng_seed(&rng, 21);
    snn_module *m = snn_model_new(&cfg, &rng);
    CHECK(m != NULL);
    if (!m) return;
    /* before any forward: an error, not a zero */
    snn_step_begin();
    CHECK(snn_activity_penalty(m) == NULL && snn_last_status() == SNN_ERR_STATE);
    snn_clear_error();
    snn_step_end();

    snn_tensor *x = snn_tensor_new(SNN_SHAPE(images, cfg.in_channels, cfg.height, cfg.width), SNN_CPU);
    snn_tensor_normal_(x, &rng, 0.0f, 1.0f);
    snn_module *layers[64];
    const char *names[64];
    int n = snn_model_neuron_layers(m, layers, names, 64);
    snn_module_train(m, true);
    snn_step_begin();
    snn_module_zero_grad(m);
    snn_tensor *out = snn_module_forward(m, x);
    snn_tensor *pen = out ? snn_activity_penalty(m) : NULL;
    CHECK(pen != NULL && pen->numel == 1);
    /* a ResNet keeps most layers' spikes as bits by now (the model option pack_spikes): the
     * penalty reads them all the same */
    int packed = 0;
    for (int l = 0; l < n; l++) {
        snn_tensor *s = snn_neuron_layer_last_spikes(layers[l]);
        packed += s && s->spike_bits && !s->data;
    }
    CHECK(cfg.kind == SNN_MODEL_RESNET18 ? packed > 0 : packed == 0);
    if (pen) {
        const double want = penalty_by_hand(layers, readout_left_out ? n - 1 : n);
        CHECK(want > 0.0 && want < (double)(readout_left_out ? n - 1 : n));
        CHECK_CLOSE(pen->data[0], want, 1e-6, 1e-5);
        CHECK_OK(snn_backward(pen));
        /* the gradient reaches a batch-norm shift through the surrogate */
        snn_param_list params;
        CHECK_OK(snn_module_parameters(m, &params));
        double g2 = 0.0;
        for (int i = 0; i < params.count; i++) {
            if (strcmp(params.items[i].name, "bn1.bias") || !params.items[i].tensor->grad) continue;
            for (int64_t k = 0; k < params.items[i].tensor->numel; k++)
                g2 += (double)params.items[i].tensor->grad->data[k] * (double)params.items[i].tensor->grad->data[k];
        }
        CHECK(g2 > 0.0);
        snn_param_list_free(&params);
    }
    snn_step_end();
    snn_tensor_free(x);
    snn_module_free(m);
}

static void test_model_penalty(void)
{
    snn_model_config res = snn_model_config_default(SNN_MODEL_RESNET18);
    res.width_base = 4, res.height = res.width = 8, res.time_steps = 2;
    check_model_penalty(res, 2, false);
    snn_model_config cnn = snn_model_config_default(SNN_MODEL_SPIKING_CNN);
    cnn.width_base = 4, cnn.hidden = 16, cnn.time_steps = 2, cnn.spiking_readout = true;
    check_model_penalty(cnn, 3, true);
}

int main(void)
{
    snn_set_num_threads(2);
    RUN(test_plane_norm_closed_form);
    RUN(test_plane_norm_gradcheck);
    RUN(test_through_lif);
    RUN(test_model_penalty);
    return test_finish();
}
