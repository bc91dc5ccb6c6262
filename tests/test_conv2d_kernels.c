/*
 * test_conv2d_kernels.c - the conv2d kernels called directly, on what a parity check between
 * two tables cannot show: a case worked by hand, run on the reference kernels
 * (kernels/ref/conv2d.c, direct loops) and the fast CPU ones (kernels/cpu/conv2d.c: im2col +
 * SGEMM), forward and backward, accumulation and NULL gradients included; and the fast
 * kernels giving the same bits when the same call runs again.
 *
 * The two tables' agreement over every shape the fast kernels special-case (strides 1-3,
 * padding, 1x1 / 3x3 / 5x5 / 3x1 windows, images grouped into one SGEMM, the 1x1 path without
 * im2col, every NULL gradient, accumulation into gradients that hold values) is checked by the
 * parity harness, tests/test_backend_ops.c; the same bits at any thread count by
 * tests/test_cpu_threads.c.
 *
 * Run: ctest -R conv2d_kernels --output-on-failure   (or build/bin/test_conv2d_kernels)
 */
#include <stdbool.h>
#include <string.h>

#include "tensor/error.h"
#include "kernels/cpu/kernels_cpu.h"
#include "kernels/ref/kernels_ref.h"
#include "test.h"

static snn_conv2d_dims make_dims(int N, int C_in, int H, int W, int C_out, int KH, int KW,
                                 int stride, int pad)
{
    snn_conv2d_dims d = {N, C_in, H, W, C_out, KH, KW, stride, pad, 0, 0};
    d.H_out = (H + 2 * pad - KH) / stride + 1;
    d.W_out = (W + 2 * pad - KW) / stride + 1;
    return d;
}

/* One input plane 3x3, one 2x2 filter, stride 1, no padding, worked by hand:
 *   x = [1 2 3; 4 5 6; 7 8 9], w = [1 0; 0 -1], bias 0.5
 *   out[i, j] = x[i, j] - x[i+1, j+1] + 0.5 = -4 + 0.5 everywhere = [-3.5 -3.5; -3.5 -3.5]
 * Backward with dout = [1 2; 3 4]:
 *   dbias = 10
 *   dw[a, b] = sum_{i,j} dout[i, j] x[i+a, j+b]:
 *              dw[0,0] = 1+4+12+20 = 37, dw[0,1] = 2+6+15+24 = 47,
 *              dw[1,0] = 4+10+21+32 = 67, dw[1,1] = 5+12+24+36 = 77
 *   dx[p, q] = sum dout[i, j] w[p-i, q-j]: + dout at its own position, - dout one step up-left:
 *              dx = [1 2 0; 3 4-1 -2; 0 -3 -4] = [1 2 0; 3 3 -2; 0 -3 -4]
 * Backward adds into what the gradients hold (a second call doubles them) and skips a NULL
 * gradient. */
static void hand_case(const snn_kernels *k)
{
    snn_conv2d_dims d = make_dims(1, 1, 3, 3, 1, 2, 2, 1, 0);
    const float x[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, w[4] = {1, 0, 0, -1}, bias[1] = {0.5f};
    const float dout[4] = {1, 2, 3, 4};
    const size_t ws = k->conv2d_workspace_bytes(&d);
    float *workspace = snn_alloc(ws ? ws : 1, SNN_CPU);
    SNN_ASSERT(workspace);
    float out[4];
    k->conv2d_forward(out, x, w, bias, &d, workspace);
    for (int i = 0; i < 4; i++) CHECK_CLOSE(out[i], -3.5, 1e-6, 0);

    float dx[9] = {0}, dw[4] = {0}, db[1] = {0};
    k->conv2d_backward(dx, dw, db, dout, x, w, &d, workspace);
    const float want_dx[9] = {1, 2, 0, 3, 3, -2, 0, -3, -4}, want_dw[4] = {37, 47, 67, 77};
    CHECK_ALL_CLOSE(dx, want_dx, 9, 1e-6, 0);
    CHECK_ALL_CLOSE(dw, want_dw, 4, 1e-6, 0);
    CHECK_CLOSE(db[0], 10.0, 1e-6, 0);

    /* again, dweight NULL: dx and dbias double, dweight stays */
    k->conv2d_backward(dx, NULL, db, dout, x, w, &d, workspace);
    for (int i = 0; i < 9; i++) CHECK_CLOSE(dx[i], 2.0 * (double)want_dx[i], 1e-6, 0);
    CHECK_ALL_CLOSE(dw, want_dw, 4, 1e-6, 0);
    CHECK_CLOSE(db[0], 20.0, 1e-6, 0);

    /* the eval-mode batch-norm after the conv: gamma 2, beta 1, mean -3.5, var 4 - eps:
     * 2 (-3.5 + 3.5) / 2 + 1 = 1 */
    const float gamma[1] = {2.0f}, beta[1] = {1.0f}, rmean[1] = {-3.5f}, rvar[1] = {4.0f};
    const snn_bn_eval bn = {gamma, beta, rmean, rvar, 0.0f};
    k->conv2d_forward_bn_eval(out, x, w, bias, &bn, &d, workspace);
    for (int i = 0; i < 4; i++) CHECK_CLOSE(out[i], 1.0, 1e-6, 0);
    snn_free(workspace, ws ? ws : 1, SNN_CPU);
}

static void test_hand_case_reference(void) { hand_case(&snn_kernels_ref); }
static void test_hand_case_fast(void) { hand_case(&snn_kernels_cpu); }

/* The fast kernels give the same bits when the same call runs again (with threads: the
 * dweight partial sums of the workers are added in worker order, not as they finish). */
static void test_fast_repeats_its_bits(void)
{
    const snn_conv2d_dims d = make_dims(4, 32, 14, 14, 64, 3, 3, 1, 1);
    const size_t nx = (size_t)d.N * d.C_in * d.H * d.W, nw = (size_t)d.C_out * d.C_in * 9;
    const size_t nout = (size_t)d.N * d.C_out * d.H_out * d.W_out;
    const size_t total = 3 * (nx + nw + nout);
    float *buf = snn_alloc(total * sizeof *buf, SNN_CPU);
    SNN_ASSERT(buf);
    float *x = buf, *w = x + nx, *dout = w + nw, *dx[2] = {dout + nout, dout + nout + nx};
    float *dw[2] = {dx[1] + nx, dx[1] + nx + nw}, *out[2] = {dw[1] + nw, dw[1] + nw + nout};
    snn_rng rng;
    snn_rng_seed(&rng, 42);
    for (size_t i = 0; i < nx; i++) x[i] = snn_rng_uniform(&rng) < 0.2f ? 1.0f : 0.0f;
    for (size_t i = 0; i < nw; i++) w[i] = 2.0f * snn_rng_uniform(&rng) - 1.0f;
    for (size_t i = 0; i < nout; i++) dout[i] = 2.0f * snn_rng_uniform(&rng) - 1.0f;
    const size_t ws = snn_conv2d_workspace_bytes_cpu(&d);
    float *workspace = snn_alloc(ws ? ws : 1, SNN_CPU);
    SNN_ASSERT(workspace);
    for (int run = 0; run < 2; run++) {
        memset(dx[run], 0, nx * sizeof(float));
        memset(dw[run], 0, nw * sizeof(float));
        snn_conv2d_forward_cpu(out[run], x, w, NULL, &d, workspace);
        snn_conv2d_backward_cpu(dx[run], dw[run], NULL, dout, x, w, &d, workspace);
    }
    CHECK(test_same_bits(out[0], out[1], (long)nout));
    CHECK(test_same_bits(dx[0], dx[1], (long)nx));
    CHECK(test_same_bits(dw[0], dw[1], (long)nw));
    snn_free(workspace, ws ? ws : 1, SNN_CPU);
    snn_free(buf, total * sizeof *buf, SNN_CPU);
}

int main(void)
{
    RUN(test_hand_case_reference);
    RUN(test_hand_case_fast);
    RUN(test_fast_repeats_its_bits);
    return test_finish();
}
