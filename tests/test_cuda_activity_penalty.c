/*
 * test_cuda_activity_penalty.c - the CUDA twins of the activity penalty's op (kernels/cuda/plane_norm.cu)
 * against the CPU reference (neurons/plane_norm.c), and the op and the penalty on the GPU.
 * Skipped (exit 77) without a GPU.
 *
 *   1. kernels, through the neuron tables (harness: cuda_neuron_parity.h), on planes of 49, 1,
 *      1517 (37 x 41: several warps' strides), 31 and 32 (the two sides of the thread-per-plane
 *      / warp-per-plane switch), 1024 (32 x 32), each with spikes {0, 1} and silent planes:
 *      the norms bit for bit (integer sums are exact in any order); ST-BIF-like {-theta, 0,
 *      theta} and normal values: norms within 1e-5 relative. Backward: dx pre-filled with the
 *      same random values on both sides (it accumulates), |got - want| <= 1e-5 (|want| +
 *      max|want|) (nvcc may contract dx += s x into an fma), silent planes untouched;
 *   2. snn_spike_plane_norms on CUDA tensors, backward through the tape: the same values (bit
 *      for bit, spikes) and gradients as on the CPU.
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

static void test_kernels(void)
{
    const int64_t planes_of[6][2] = {{4 * 3 * 5, 49}, {8 * 2 * 33, 1}, {3 * 2 * 3, 37 * 41},
                                     {2 * 3 * 7, 31}, {2 * 3 * 7, 32}, {4 * 2 * 8, 1024}};
    for (int s = 0; s < 6; s++)
        for (int values = 0; values < 3; values++) {
            plane_case pc = {planes_of[s][0], planes_of[s][1], values};
            const int64_t n = pc.planes * pc.plane;
            snprintf(label, sizeof label, "plane_norm planes %lld x %lld, values %d",
                     (long long)pc.planes, (long long)pc.plane, values);
            snn_step_begin();
            float *x = host_floats(n), *dy = host_floats(pc.planes), *dx0 = host_floats(n);
            fill(x, &pc);
            for (int64_t g = 0; g < pc.planes; g++) dy[g] = snn_rng_normal(&rng);
            for (int64_t i = 0; i < n; i++) dx0[i] = snn_rng_normal(&rng);
            float *y_c = host_floats(pc.planes), *dx_c = copy_of(dx0, n);
            cpu->plane_norm_forward(y_c, x, pc.planes, pc.plane);
            cpu->plane_norm_backward(dx_c, dy, x, y_c, pc.planes, pc.plane);
            float *x_g = dev_from(x, n), *y_g = dev_full(pc.planes, NAN);
            float *dy_g = dev_from(dy, pc.planes), *dx_g = dev_from(dx0, n);
            gpu->plane_norm_forward(y_g, x_g, pc.planes, pc.plane);
            float *y = download(y_g, pc.planes);
            if (values == 0) check_bits("norm", y, y_c, pc.planes);
            else check_close("norm", y, y_c, pc.planes, GRAD_RTOL);   /* orders differ */
            /* backward from the CPU's norms on both sides, so the check is of the kernel alone */
            float *yc_g = dev_from(y_c, pc.planes);
            gpu->plane_norm_backward(dx_g, dy_g, x_g, yc_g, pc.planes, pc.plane);
            float *dx = download(dx_g, n);
            check_close("dx", dx, dx_c, n, GRAD_RTOL);
            for (int64_t g = 0; g < pc.planes; g++)   /* silent planes keep their gradient */
                if (y_c[g] == 0.0f)
                    check_bits("dx of a silent plane", dx + g * pc.plane, dx0 + g * pc.plane, pc.plane);
            cases++;
            snn_step_end();
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
    (void)base_label;   /* the harness's, for the neuron tests' labels */
    if (neuron_parity_begin()) return test_finish();
    CHECK(gpu->plane_norm_forward && gpu->plane_norm_backward);
    RUN(test_kernels);
    RUN(test_op);
    fprintf(stderr, "%d cases\n", cases);
    return test_finish();
}
