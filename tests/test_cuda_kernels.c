/*
 * test_cuda_kernels.c - the CUDA kernel table (kernels/cuda/) on what a parity check against
 * the reference cannot show: the table is complete; copies between host and device and on the
 * device, and fill, are exact; lerp leaves y == x exactly y; adam_update_many gives the bits of
 * one adam_update per tensor (more tensors than one launch takes, an empty one, each at its own
 * step). Every entry's agreement with the reference kernels (kernels/ref/), in fp32, TF32 and
 * BF16, over shapes that span blocks, chunks and segments, is checked by the parity harness,
 * tests/test_cuda_backend_ops.c; test_cuda_layers.c has the ops composed of kernels.
 *
 * Without a GPU the test exits 77, which ctest reports as skipped (never as passed).
 * Run on the GPU machine: ctest -R cuda_kernels --output-on-failure
 * (and compute-sanitizer --tool memcheck build/bin/test_cuda_kernels).
 */
#include "cuda_parity.h"

static void test_table_complete(void)
{
#define HAS(entry) CHECK(gpu->entry != NULL)
    CHECK(gpu->name && strcmp(gpu->name, "cuda") == 0);
    HAS(device_alloc); HAS(device_free); HAS(copy); HAS(synchronize); HAS(memory_info);
    HAS(fill); HAS(axpy); HAS(lerp); HAS(pack_bits); HAS(unpack_bits); HAS(unary_forward);
    HAS(unary_backward); HAS(binary_forward); HAS(binary_backward); HAS(sum_dim);
    HAS(expand_dim); HAS(gemm); HAS(bias_forward); HAS(bias_backward);
    HAS(conv2d_workspace_bytes); HAS(conv2d_forward); HAS(conv2d_backward);
    HAS(conv2d_forward_bits); HAS(conv2d_reads_bits); HAS(conv2d_backward_bits);
    HAS(conv2d_dx_over_dout); HAS(conv2d_backward_consuming);
    HAS(conv2d_backward_consuming_workspace_bytes); HAS(conv2d_forward_bn_eval);
    HAS(max_pool2d_forward);
    HAS(max_pool2d_backward);
    HAS(avg_pool2d_forward); HAS(avg_pool2d_backward); HAS(batchnorm_forward_train);
    HAS(batchnorm_forward_eval); HAS(batchnorm_backward); HAS(batchnorm_stats);
    HAS(batchnorm_stats_merge); HAS(batchnorm_normalise); HAS(batchnorm_backward_sums);
    HAS(batchnorm_backward_apply); HAS(log_softmax_forward);
    HAS(log_softmax_backward); HAS(nll_forward); HAS(nll_backward); HAS(one_hot);
    HAS(argmax_rows); HAS(dropout_mask); HAS(sgd_update); HAS(adam_update); HAS(adam_update_many);
    HAS(sumsq_and_finite); HAS(poisson_encode);
#undef HAS
}

static void test_copy_and_fill(void)
{
    const size_t n = 1000003;
    float *h = random_host(n, -1.0f, 1.0f);
    float *d1 = dev_copy(h, n);
    float *d2 = dev_floats(n);
    gpu->copy(d2, d1, n * sizeof *h, SNN_COPY_DEVICE_TO_DEVICE);
    expect_exact("copy host -> device -> device -> host", d2, h, n * sizeof *h);

    float *want = host_floats(n);
    for (size_t i = 0; i < n; i++) want[i] = -2.5f;
    gpu->fill(d2, -2.5f, (int64_t)n);
    expect_exact("fill", d2, want, n * sizeof *want);
    gpu->synchronize();
    release_all();
}

/* lerp (the weights' moving average), y += w (x - y): where y == x, y stays exactly y */
static void test_lerp_keeps_equal_values(void)
{
    const size_t n = (1u << 20) + 3;
    float *x = random_host(n, -1.0f, 1.0f), *y = random_host(n, -1.0f, 1.0f);
    for (size_t i = 0; i < n; i += 7) x[i] = y[i];
    float *dx = dev_copy(x, n), *dy = dev_copy(y, n);
    const float weights[3] = {0.001f, 0.37f, 9.0f / 11.0f};
    for (int w = 0; w < 3; w++) gpu->lerp(dy, dx, weights[w], (int64_t)n);
    float *back = host_floats(n);
    download(back, dy, n * sizeof *back);
    gpu->synchronize();
    int moved = 0;
    for (size_t i = 0; i < n; i += 7) moved += back[i] != x[i];
    CHECK(moved == 0);
    release_all();
}

/* adam_update_many against one adam_update per tensor on the GPU, bit for bit: sizes around the
 * 4096-element block chunk, an empty tensor, each tensor at its own step count, and more
 * tensors than one launch takes (32). */
static void adam_many_case(bool decoupled, int count)
{
    char what[96];
    const int64_t sizes[6] = {1, 4095, 4096, 4097, 100003, 0};
    snn_adam_params hp = {1e-3f, 0.9f, 0.999f, 1e-8f, 1e-2f, decoupled, 0.0f, 0.0f};
    snn_adam_tensor *many = tracked_alloc((size_t)count * sizeof *many, SNN_CPU);
    float **one = tracked_alloc((size_t)count * 3 * sizeof *one, SNN_CPU);
    for (int i = 0; i < count; i++) {
        const size_t n = (size_t)sizes[i % 6];
        const size_t alloc = n ? n : 1;
        float *p = random_host(alloc, -1.0f, 1.0f), *g = random_host(alloc, -1.0f, 1.0f);
        float *m = random_host(alloc, -0.1f, 0.1f), *v = random_host(alloc, 0.0f, 0.01f);
        const int t = 1 + 7 * i;
        const float bc1 = 1.0f - powf(hp.beta1, (float)t), bc2 = 1.0f - powf(hp.beta2, (float)t);
        many[i] = (snn_adam_tensor){dev_copy(p, alloc), dev_copy(m, alloc), dev_copy(v, alloc),
                                    dev_copy(g, alloc), (int64_t)n, bc1, bc2};
        /* the same tensor again, for one adam_update call each */
        one[3 * i] = dev_copy(p, alloc), one[3 * i + 1] = dev_copy(m, alloc);
        one[3 * i + 2] = dev_copy(v, alloc);
        snn_adam_params each = hp;
        each.bias_correction1 = bc1, each.bias_correction2 = bc2;
        gpu->adam_update(one[3 * i], one[3 * i + 1], one[3 * i + 2], many[i].grad, (int64_t)n,
                         &each);
    }
    gpu->adam_update_many(many, count, &hp);
    for (int i = 0; i < count; i++) {
        const size_t n = (size_t)many[i].n;
        if (n == 0) continue;
        float *got = host_floats(n);
        const float *dev[3] = {many[i].p, many[i].m, many[i].v};
        for (int k = 0; k < 3; k++) {
            download(got, one[3 * i + k], n * sizeof(float));
            snprintf(what, sizeof what, "adam_update_many = adam_update (%c) tensor %d of %d, "
                     "n %zu", "pmv"[k], i, count, n);
            expect_exact(what, dev[k], got, n * sizeof(float));
        }
    }
    release_all();
}

static void test_adam_many_is_adam(void)
{
    adam_many_case(false, 6);
    adam_many_case(true, 40);
}

int main(void)
{
    parity_begin();
    RUN(test_table_complete);
    RUN(test_copy_and_fill);
    RUN(test_lerp_keeps_equal_values);
    RUN(test_adam_many_is_adam);
    return test_finish();
}
