/*
 * test_cuda_rsnn.c - the recurrent SNN (nn/model_rsnn.c) on CUDA against the same model on the
 * CPU: for images read as rows and as pixels, the logits, the per-step outputs (the readout's
 * U[t]), the loss and every parameter's gradient agree within float tolerance (the sums run in
 * another order on the GPU; a spike that flips on a near-threshold membrane would show as a
 * large difference, so the inputs are drawn once and the thresholds left at 1).
 * Exits 77 (skipped) without a GPU.
 * Run: ctest -R '^cuda_rsnn$', or build/bin/test_cuda_rsnn.
 */
#include "test.h"

#include "nn/nn.h"

#define MAX_FLOATS 300000

/* logits, steps, loss and gradients of `m` on `device` for the host image x, into out[] in that
 * order; how many floats (0 on failure) */
static int64_t run_on(snn_module *m, snn_device device, const float *x, snn_shape shape,
                      float *out)
{
    static const float labels[4] = {0, 3, 9, 1};
    int64_t at = 0;
    snn_module_zero_grad(m);
    snn_step_begin();
    snn_tensor *xt = snn_from_host(shape, x, device);
    snn_tensor *y = snn_from_host(SNN_SHAPE(4), labels, device);
    snn_tensor *steps = snn_model_forward_steps(m, xt);
    snn_tensor *logits = snn_module_forward(m, xt);
    snn_tensor *loss = logits ? snn_cross_entropy(logits, y) : NULL;
    bool ok = steps && loss && snn_backward(loss) == SNN_OK;
    if (!ok) fprintf(stderr, "  %s\n", snn_last_error());
    CHECK(ok);
    if (ok) {
        snn_tensor_copy_to_host(logits, out + at), at += logits->numel;
        snn_tensor_copy_to_host(steps, out + at), at += steps->numel;
        snn_tensor_copy_to_host(loss, out + at), at += 1;
        snn_param_list list;
        CHECK_OK(snn_module_parameters(m, &list));
        for (int i = 0; i < list.count; i++) {
            const snn_tensor *g = list.items[i].tensor->grad;
            CHECK(g != NULL && at + g->numel <= MAX_FLOATS);
            if (!g || at + g->numel > MAX_FLOATS) continue;
            snn_tensor_copy_to_host(g, out + at), at += g->numel;
        }
        snn_param_list_free(&list);
    }
    snn_step_end();
    return ok ? at : 0;
}

static void check_parity(snn_encoding encoding)
{
    snn_model_config c = snn_model_config_default(SNN_MODEL_RSNN);
    c.hidden = 64, c.layers = 2, c.encoding = encoding;
    c.time_steps = encoding == SNN_ENCODING_ROWS ? 28 : 784;
    snn_rng rng;
    snn_rng_seed(&rng, 1);
    snn_module *m = snn_model_new(&c, &rng);
    CHECK(m != NULL);
    if (!m) return;
    static float x[4 * 28 * 28], cpu[MAX_FLOATS], gpu[MAX_FLOATS];
    snn_rng_seed(&rng, 2);
    for (int i = 0; i < 4 * 28 * 28; i++) x[i] = 3.0f * snn_rng_uniform(&rng) - 0.5f;
    const snn_shape shape = SNN_SHAPE(4, 1, 28, 28);
    const int64_t n_cpu = run_on(m, SNN_CPU, x, shape, cpu);
    CHECK_OK(snn_module_to(m, SNN_CUDA));
    const int64_t n_gpu = run_on(m, SNN_CUDA, x, shape, gpu);
    CHECK(n_cpu > 0 && n_cpu == n_gpu);
    if (n_cpu > 0 && n_cpu == n_gpu) CHECK_ALL_CLOSE(gpu, cpu, n_cpu, 1e-4, 1e-3);
    snn_module_free(m);
}

static void test_rows_on_cuda(void) { check_parity(SNN_ENCODING_ROWS); }
static void test_pixels_on_cuda(void) { check_parity(SNN_ENCODING_PIXELS); }

int main(void)
{
    test_require_cuda();
    RUN(test_rows_on_cuda);
    RUN(test_pixels_on_cuda);
    return test_finish();
}
