/*
 * test_cuda_neuron_ops.c - the neuron ops on CUDA against the CPU, through the public API: the
 * multi-step op snn_neuron_multistep with backward through the tape, the single-step API
 * snn_neuron_step over 5 calls carrying the state, and snn_heaviside, for all 84 neuron
 * configurations. The kernels are checked against the reference by the parity harness
 * (tests/test_cuda_backend_ops.c); this test's harness is cuda_neuron_parity.h, whose
 * tolerances are the harness's: spikes and activity bit for bit, gradients within 1e-5 of the
 * tensor's scale, PLIF's dw against the sum of its terms. Without a GPU it exits 77 (skipped).
 * Run on the GPU machine: ctest -R cuda_neuron_ops --output-on-failure
 */
#include "cuda_neuron_parity.h"

/* ---------------------------------------------------------------------------------------------
 * 2. The public op, both devices, backward through the tape
 * ------------------------------------------------------------------------------------------- */

#define OP_MAX 4096 /* elements of the largest op-level shape */

typedef struct op_result {
    float spike[OP_MAX], activity[OP_MAX], dx[OP_MAX];
    float dw;
    bool ok;
} op_result;

/* snn_neuron_multistep on `device`: x (OWNED, requires grad) with its gradient pre-filled with
 * dx0, PLIF's w with its gradient pre-filled with 0.25; backward seeded with r. */
static void run_op(op_result *res, snn_device device, const snn_neuron_config *c, float tau0,
                   snn_shape shape, const float *x_host, const float *r, const float *dx0)
{
    const bool plif = c->kind == SNN_NEURON_PLIF;
    memset(res, 0, sizeof *res);
    snn_tensor *x = must(snn_tensor_new(shape, device));
    CHECK_OK(snn_tensor_copy_from_host(x, x_host));
    x->requires_grad = true;
    CHECK_OK(snn_tensor_copy_from_host(must(snn_tensor_grad(x)), dx0));
    snn_tensor *w = NULL;
    if (plif) {
        w = must(snn_plif_param_new(tau0, device));
        CHECK_OK(snn_tensor_fill(must(snn_tensor_grad(w)), 0.25f));
    }

    /* one step per device: snn_backward walks the whole tape of the open steps */
    CHECK_OK(snn_step_begin());
    snn_tensor *activity = NULL;
    snn_tensor *s = snn_neuron_multistep(x, c, w, &activity);
    CHECK(s != NULL && activity != NULL);
    if (s && activity) {
        CHECK_OK(snn_tensor_copy_to_host(s, res->spike));
        CHECK_OK(snn_tensor_copy_to_host(activity, res->activity));
        CHECK_OK(snn_backward_from(s, must(snn_from_host(shape, r, device))));
        CHECK_OK(snn_tensor_copy_to_host(x->grad, res->dx));
        if (w) res->dw = snn_tensor_item(w->grad);
        res->ok = true;
    } else {
        fprintf(stderr, "%s: snn_neuron_multistep on %s: %s\n", label, snn_device_name(device),
                snn_last_error());
    }
    snn_step_end();
    snn_tensor_free(w);
    snn_tensor_free(x);
}

static op_result op_cpu, op_gpu; /* static: ~50 KB each */

static void check_op(const snn_neuron_config *c, float tau0, snn_shape shape)
{
    cases++;
    const int64_t n = snn_shape_numel(shape);
    const int64_t acts = shape.dim[0] * shape.dim[1] * (shape.ndim >= 3 ? shape.dim[2] : 1);
    if (n > OP_MAX) {
        fprintf(stderr, "%s: shape too large for OP_MAX\n", label);
        exit(EXIT_FAILURE);
    }
    static float x[OP_MAX], r[OP_MAX], dx0[OP_MAX];
    fill_currents(x, n, c);
    fill_normal(r, n);
    fill_uniform(dx0, n, -1.0f, 1.0f);
    run_op(&op_cpu, SNN_CPU, c, tau0, shape, x, r, dx0);
    run_op(&op_gpu, SNN_CUDA, c, tau0, shape, x, r, dx0);
    if (!op_cpu.ok || !op_gpu.ok) return;
    check_bits("op spike", op_gpu.spike, op_cpu.spike, n);
    check_bits("op activity", op_gpu.activity, op_cpu.activity, acts);
    check_close("op x.grad", op_gpu.dx, op_cpu.dx, n, GRAD_RTOL);
    if (c->kind == SNN_NEURON_PLIF) {
        const snn_neuron_dims d = {shape.dim[0], shape.dim[1], shape.ndim >= 3 ? shape.dim[2] : 1,
                                   n / acts};
        check_dw(op_gpu.dw, op_cpu.dw, plif_dw_scale_of(c, &d, x, r, tau0));
    }
}

/* ---------------------------------------------------------------------------------------------
 * 3. The single-step API, both devices: T calls of snn_neuron_step carrying the state (the
 *    kernels with T = 1, V_init / A_init and V_last aliasing or not as single_step.c chooses),
 *    loss = sum_t sum(S[t] R[t]) on the tape, backward into pre-filled gradients of every x[t]
 *    (through V from step to step: the dV_init path) and of PLIF's w.
 * ------------------------------------------------------------------------------------------- */

enum { SS_T = 5, SS_N = 3, SS_C = 4, SS_PLANE = 5, SS_M = SS_N * SS_C * SS_PLANE };

typedef struct step_result {
    float spike[SS_T][SS_M], activity[SS_T][SS_N * SS_C], dx[SS_T][SS_M];
    float dw;
    bool ok;
} step_result;

static void run_steps(step_result *res, snn_device device, const snn_neuron_config *c,
                      float tau0, const float (*x_host)[SS_M], const float (*r)[SS_M],
                      const float (*dx0)[SS_M])
{
    memset(res, 0, sizeof *res);
    snn_tensor *x[SS_T];
    for (int t = 0; t < SS_T; t++) {
        x[t] = must(snn_tensor_new(SNN_SHAPE(SS_N, SS_C, SS_PLANE), device));
        CHECK_OK(snn_tensor_copy_from_host(x[t], x_host[t]));
        x[t]->requires_grad = true;
        CHECK_OK(snn_tensor_copy_from_host(must(snn_tensor_grad(x[t])), dx0[t]));
    }
    snn_tensor *w = NULL;
    if (c->kind == SNN_NEURON_PLIF) {
        w = must(snn_plif_param_new(tau0, device));
        CHECK_OK(snn_tensor_fill(must(snn_tensor_grad(w)), 0.25f));
    }
    CHECK_OK(snn_step_begin());
    snn_neuron_state state;
    snn_neuron_state_reset(&state);
    snn_tensor *loss = NULL;
    bool ok = true;
    for (int t = 0; t < SS_T && ok; t++) {
        snn_tensor *act = NULL;
        snn_tensor *s = snn_neuron_step(x[t], c, w, &state, &act);
        ok = s && act;
        if (!ok) break;
        CHECK_OK(snn_tensor_copy_to_host(s, res->spike[t]));
        CHECK_OK(snn_tensor_copy_to_host(act, res->activity[t]));
        snn_tensor *rt = must(snn_from_host(SNN_SHAPE(SS_N, SS_C, SS_PLANE), r[t], device));
        snn_tensor *term = snn_sum_all(snn_mul(s, rt));
        loss = loss ? snn_add(loss, term) : term;
        ok = loss != NULL;
    }
    CHECK(ok);
    if (ok) {
        CHECK_OK(snn_backward(loss));
        for (int t = 0; t < SS_T; t++) CHECK_OK(snn_tensor_copy_to_host(x[t]->grad, res->dx[t]));
        if (w) res->dw = snn_tensor_item(w->grad);
        res->ok = true;
    } else {
        fprintf(stderr, "%s: snn_neuron_step on %s: %s\n", label, snn_device_name(device),
                snn_last_error());
    }
    snn_step_end();
    snn_tensor_free(w);
    for (int t = 0; t < SS_T; t++) snn_tensor_free(x[t]);
}

static step_result step_cpu, step_gpu;

static void check_single_step(const snn_neuron_config *c, float tau0)
{
    cases++;
    static float x[SS_T][SS_M], r[SS_T][SS_M], dx0[SS_T][SS_M];
    fill_currents(&x[0][0], SS_T * SS_M, c);
    fill_normal(&r[0][0], SS_T * SS_M);
    fill_uniform(&dx0[0][0], SS_T * SS_M, -1.0f, 1.0f);
    run_steps(&step_cpu, SNN_CPU, c, tau0, (const float (*)[SS_M])x, (const float (*)[SS_M])r,
              (const float (*)[SS_M])dx0);
    run_steps(&step_gpu, SNN_CUDA, c, tau0, (const float (*)[SS_M])x, (const float (*)[SS_M])r,
              (const float (*)[SS_M])dx0);
    if (!step_cpu.ok || !step_gpu.ok) return;
    check_bits("step spike", &step_gpu.spike[0][0], &step_cpu.spike[0][0], SS_T * SS_M);
    check_bits("step activity", &step_gpu.activity[0][0], &step_cpu.activity[0][0],
               SS_T * SS_N * SS_C);
    check_close("step x.grad", &step_gpu.dx[0][0], &step_cpu.dx[0][0], SS_T * SS_M, GRAD_RTOL);
    if (c->kind == SNN_NEURON_PLIF) {
        /* the single-step chain is the multi-step BPTT written out: the same terms */
        const snn_neuron_dims d = {SS_T, SS_N, SS_C, SS_PLANE};
        check_dw(step_gpu.dw, step_cpu.dw, plif_dw_scale_of(c, &d, &x[0][0], &r[0][0], tau0));
    }
}

static void op_on_two_shapes(const snn_neuron_config *c, float tau0, int index)
{
    (void)index;
    memcpy(base_label, label, sizeof base_label);
    snprintf(label, sizeof label, "op %.300s on (4, 3, 5, 7, 7)", base_label);
    check_op(c, tau0, SNN_SHAPE(4, 3, 5, 7, 7));
    snprintf(label, sizeof label, "op %.300s on (8, 2, 33)", base_label);
    check_op(c, tau0, SNN_SHAPE(8, 2, 33));
}

static void single_step_config(const snn_neuron_config *c, float tau0, int index)
{
    (void)index;
    memcpy(base_label, label, sizeof base_label);
    snprintf(label, sizeof label, "single-step %.300s on %d x (3, 4, 5)", base_label, SS_T);
    check_single_step(c, tau0);
}

static void test_heaviside_op(void)
{
    enum { n = 3 * 257 };
    static float x[n], r[n], y[2][n], gx[2][n];
    fill_normal(x, n);
    for (int i = 0; i < n; i += 5) x[i] = 0.0f;
    fill_normal(r, n);
    snprintf(label, sizeof label, "snn_heaviside (3, 257), atan");
    for (int dev = 0; dev < 2; dev++) {
        const snn_device device = dev ? SNN_CUDA : SNN_CPU;
        CHECK_OK(snn_step_begin());
        snn_tensor *xt = must(snn_from_host(SNN_SHAPE(3, 257), x, device));
        xt->requires_grad = true;
        snn_tensor *yt = snn_heaviside(xt, snn_surrogate_default(SNN_SURROGATE_ATAN));
        CHECK(yt != NULL);
        if (yt) {
            CHECK_OK(snn_tensor_copy_to_host(yt, y[dev]));
            CHECK_OK(snn_backward_from(yt, must(snn_from_host(SNN_SHAPE(3, 257), r, device))));
            CHECK_OK(snn_tensor_copy_to_host(xt->grad, gx[dev]));
        }
        snn_step_end();
    }
    check_bits("snn_heaviside y", y[1], y[0], n);
    check_close("snn_heaviside x.grad", gx[1], gx[0], n, GRAD_RTOL);
}

static void test_op_all_configs(void) { for_each_config(op_on_two_shapes); }

static void test_single_step_all_configs(void) { for_each_config(single_step_config); }

int main(void)
{
    if (neuron_parity_begin()) return test_finish();
    RUN(test_op_all_configs);
    RUN(test_single_step_all_configs);
    RUN(test_heaviside_op);
    fprintf(stderr, "%d cases\n", cases);
    return test_finish();
}
