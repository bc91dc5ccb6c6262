/*
 * gradcheck.c - checks an op's backward against central finite differences.
 *
 * For a fixed random R of the output's shape, L(x) = sum(f(x) * R) is a scalar whose gradient
 * involves every output element. Backward gives dL/dx in one pass; the check then nudges each
 * input element by +-eps and compares (L(x + eps e_i) - L(x - eps e_i)) / 2 eps, with L summed in
 * double. Kernels run in float32, so the difference quotient carries about 1e-7 / eps of
 * relative rounding noise: eps = 1e-2..1e-3 and tolerances of ~1e-2 are the honest range.
 * Ops with kinks (relu, max-pool) need inputs away from the kinks (the caller picks them).
 */
#include <math.h>
#include <string.h>

#include "autograd.h"
#include "tensor/error.h"

static double weighted_sum(const snn_tensor *out, const float *r)
{
    double acc = 0.0;
    for (int64_t i = 0; i < out->numel; i++) acc += (double)out->data[i] * (double)r[i];
    return acc;
}

/* L at the current inputs, evaluated in no-grad mode inside a step of its own. */
static int evaluate(snn_gradcheck_fn f, snn_tensor **inputs, void *ctx, const float *r,
                    double *loss)
{
    snn_step_begin();
    snn_no_grad_begin();
    snn_tensor *out = f(inputs, ctx);
    snn_no_grad_end();
    int ok = out != NULL;
    if (ok) *loss = weighted_sum(out, r);
    snn_step_end();
    return ok;
}

snn_status snn_gradcheck(const char *name, snn_gradcheck_fn f, int n_inputs, snn_tensor **inputs,
                         void *ctx, snn_gradcheck_options opt)
{
    const char *fn = "snn_gradcheck";
    for (int i = 0; i < n_inputs; i++) {
        if (snn_check_tensor(fn, "inputs[i]", inputs[i])) return snn_last_status();
        if (inputs[i]->device != SNN_CPU)
            return snn_error(SNN_ERR_ARGUMENT, "%s(%s): bad argument 'inputs[%d]' (expected a cpu "
                             "tensor, got %s)", fn, name, i, snn_device_name(inputs[i]->device));
    }

    /* Analytic gradients: one forward and backward, copied out before the step closes. */
    float *analytic[SNN_MAX_NODE_INPUTS * 4] = {0};
    SNN_ASSERT(n_inputs <= SNN_MAX_NODE_INPUTS * 4);
    float *r = NULL;
    int64_t out_numel = 0;
    snn_status status = SNN_OK;
    snn_rng rng;
    snn_rng_seed(&rng, opt.seed);

    snn_step_begin();
    snn_tensor *out = f(inputs, ctx);
    if (!out) {
        snn_step_end();
        return snn_last_status();
    }
    out_numel = out->numel;
    r = snn_alloc((size_t)out_numel * sizeof *r, SNN_CPU);
    SNN_ASSERT(r);
    for (int64_t i = 0; i < out_numel; i++) r[i] = snn_rng_normal(&rng);
    snn_tensor *seed = snn_from_host(out->shape, r, SNN_CPU);
    if (!out->requires_grad) {
        snn_step_end();
        snn_free(r, (size_t)out_numel * sizeof *r, SNN_CPU);
        return snn_error(SNN_ERR_ARGUMENT, "%s(%s): the output does not require grad; hint: set "
                         "requires_grad on the inputs to check", fn, name);
    }
    status = snn_backward_from(out, seed);
    for (int i = 0; i < n_inputs && status == SNN_OK; i++) {
        if (!inputs[i]->requires_grad) continue;
        size_t bytes = (size_t)inputs[i]->numel * sizeof(float);
        analytic[i] = snn_alloc(bytes, SNN_CPU);
        SNN_ASSERT(analytic[i]);
        if (inputs[i]->grad) memcpy(analytic[i], inputs[i]->grad->data, bytes);
        else memset(analytic[i], 0, bytes); /* no path from this input: gradient is zero */
        inputs[i]->grad = NULL; /* it lived in this step */
    }
    snn_step_end();

    /* Numeric gradients, element by element. */
    double worst = 0.0;
    int worst_input = -1;
    int64_t worst_index = -1;
    double worst_numeric = 0.0, worst_analytic = 0.0;
    for (int i = 0; i < n_inputs && status == SNN_OK; i++) {
        if (!analytic[i]) continue;
        float *x = inputs[i]->data;
        for (int64_t j = 0; j < inputs[i]->numel; j++) {
            float orig = x[j];
            double plus = 0.0, minus = 0.0;
            x[j] = orig + opt.eps;
            int ok = evaluate(f, inputs, ctx, r, &plus);
            x[j] = orig - opt.eps;
            ok = ok && evaluate(f, inputs, ctx, r, &minus);
            x[j] = orig;
            if (!ok) {
                status = snn_last_status();
                break;
            }
            /* divide by the step actually taken: orig +- eps is rounded to float */
            double h = (double)(orig + opt.eps) - (double)(orig - opt.eps);
            double numeric = (plus - minus) / h;
            double got = (double)analytic[i][j];
            double ratio = fabs(numeric - got) / ((double)opt.atol + (double)opt.rtol * fabs(numeric));
            if (opt.verbose && !(ratio <= 1.0))
                fprintf(stderr, "gradcheck %s: input %d [%lld]: numeric %.7g analytic %.7g\n", name,
                        i, (long long)j, numeric, got);
            if (!(ratio <= worst)) {
                worst = isnan(ratio) ? (double)INFINITY : ratio;
                worst_input = i;
                worst_index = j;
                worst_numeric = numeric;
                worst_analytic = got;
            }
        }
    }

    for (int i = 0; i < n_inputs; i++)
        if (analytic[i]) snn_free(analytic[i], (size_t)inputs[i]->numel * sizeof(float), SNN_CPU);
    snn_free(r, (size_t)out_numel * sizeof *r, SNN_CPU);
    if (status != SNN_OK) return status;
    if (!(worst <= 1.0))
        return snn_error(SNN_ERR_NUMERIC, "%s(%s): input %d element %lld: numeric %.7g vs analytic "
                         "%.7g (atol %g, rtol %g, eps %g)", fn, name, worst_input,
                         (long long)worst_index, worst_numeric, worst_analytic, (double)opt.atol,
                         (double)opt.rtol, (double)opt.eps);
    return SNN_OK;
}
