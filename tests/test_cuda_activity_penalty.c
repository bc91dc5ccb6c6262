/*
 * test_cuda_activity_penalty.c - the activity penalty's op on the GPU: snn_spike_plane_norms on
 * CUDA tensors, backward through the tape, gives the CPU's values (bit for bit: the norms of
 * spikes are whole-number sums) and gradients. Its kernels (kernels/cuda/plane_norm.cu) are
 * checked against the reference (kernels/ref/plane_norm.c) by the parity harness,
 * tests/test_cuda_backend_ops.c: planes of 1, 31 and 32 (the thread-per-plane / warp-per-plane
 * switch), 49, 37 x 41, 64, 1024, with spikes, ST-BIF-like {-0.5, 0, 0.5} and normal values, and
 * silent planes. Skipped (exit 77) without a GPU.
 * Run on the GPU machine: ctest -R cuda_activity_penalty --output-on-failure
 */
#include "cuda_neuron_parity.h"

typedef struct plane_case {
    int64_t planes, plane;
    int values;   /* 0: spikes {0, 1}; 1: {-0.5, 0, 0.5}; 2: normal */
} plane_case;

static void fill(float *x, const plane_case *pc)
{
    for (int64_t g = 0; g < pc->planes; g++) {
        const bool silent = snn_rng_uniform(&rng) < 0.3f;
        for (int64_t p = 0; p < pc->plane; p++) {
            float v = 0.0f;
            if (!silent) {
                if (pc->values == 2) v = snn_rng_normal(&rng);
                else if (snn_rng_uniform(&rng) < 0.2f)
                    v = pc->values == 0 ? 1.0f : (snn_rng_uniform(&rng) < 0.5f ? 0.5f : -0.5f);
            }
            x[g * pc->plane + p] = v;
        }
    }
}

static void test_op(void)
{
    snprintf(label, sizeof label, "snn_spike_plane_norms");
    const plane_case pc = {2 * 3 * 4, 9 * 9, 0};
    float *x = malloc((size_t)(pc.planes * pc.plane) * sizeof *x);
    fill(x, &pc);
    float y[2][24], dx[2][24 * 81];
    for (int dev = 0; dev < 2; dev++) {
        const snn_device device = dev ? SNN_CUDA : SNN_CPU;
        snn_tensor *t = snn_tensor_new(SNN_SHAPE(2, 3, 4, 9, 9), device);
        CHECK(t && snn_tensor_copy_from_host(t, x) == SNN_OK);
        if (!t) continue;
        t->requires_grad = true;
        snn_step_begin();
        snn_tensor *norms = snn_spike_plane_norms(t);
        snn_tensor *loss = norms ? snn_sum_all(snn_square(norms)) : NULL;   /* d/dnorm = 2 norm */
        CHECK(loss != NULL);
        if (loss) {
            CHECK_OK(snn_backward(loss));
            CHECK_OK(snn_tensor_copy_to_host(norms, y[dev]));
            CHECK_OK(snn_tensor_copy_to_host(t->grad, dx[dev]));
        }
        snn_step_end();
        snn_tensor_free(t);
    }
    check_bits("norms", y[1], y[0], pc.planes);
    check_close("dx", dx[1], dx[0], pc.planes * pc.plane, GRAD_RTOL);
    free(x);
}

int main(void)
{
    (void)cases, (void)base_label; /* the configuration matrix's: not used here */
    if (neuron_parity_begin()) return test_finish();
    CHECK(gpu->plane_norm_forward && gpu->plane_norm_backward);
    RUN(test_op);
    return test_finish();
}
