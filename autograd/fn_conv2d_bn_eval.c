/*
 * fn_conv2d_bn_eval.c - a conv and the eval-mode batch-norm after it as one op, for inference
 * (the fusion rule conv -> bn of nn/fusion_rules.c):
 *
 *   y = gamma (conv2d(x, w, b) - running_mean) / sqrt(running_var + eps) + beta
 *
 * run by the device's conv2d_forward_bn_eval kernel: the bits of the conv followed by the
 * eval-mode batch-norm, which a device may fuse (CUDA's channels-last conv applies the
 * batch-norm in its epilogue, saving a pass over the output). Without a tape only: when a
 * gradient is wanted it is the two recorded ops, snn_conv2d then snn_batchnorm2d in eval mode.
 */
#include "autograd.h"
#include "conv2d_args.h"
#include "tensor/arena.h"
#include "tensor/error.h"
#include "kernels/kernels.h"

snn_tensor *snn_conv2d_batchnorm_eval(snn_tensor *x, snn_tensor *w, snn_tensor *b,
                                      snn_tensor *gamma, snn_tensor *beta,
                                      snn_tensor *running_mean, snn_tensor *running_var,
                                      float eps, int stride, int pad)
{
    const char *fn = "snn_conv2d_batchnorm_eval";
    snn_tensor *inputs[5] = {x, w, b, gamma, beta};
    if (snn_should_record(5, inputs)) /* a gradient wanted: the two recorded ops */
        return snn_batchnorm2d(snn_conv2d(x, w, b, stride, pad), gamma, beta, running_mean,
                               running_var, false, 0.0f, eps);
    image_layout l;
    snn_conv2d_dims d;
    const snn_kernels *k = snn_conv2d_prepare(fn, x, w, b, stride, pad, false, &l, &d);
    if (!k) return NULL;
    SNN_REQUIRE_KERNEL(k, fn, conv2d_forward_bn_eval);
    const char *names[4] = {"gamma", "beta", "running_mean", "running_var"};
    snn_tensor *params[4] = {gamma, beta, running_mean, running_var};
    for (int i = 0; i < 4; i++)
        if (snn_check_rank(fn, names[i], params[i], 1, "(C_out)") ||
            snn_check_dim(fn, names[i], params[i], 0, d.C_out, "C_out (output channels)") ||
            snn_check_same_device(fn, "input", x, names[i], params[i]))
            return NULL;
    if (!(eps > 0.0f))
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument 'eps' (expected > 0, got %g)",
                              fn, (double)eps);
    snn_shape shape = image_layout_shape(&l, d.C_out, d.H_out, d.W_out);
    snn_tensor *y = snn_step_tensor(fn, shape, x->device);
    if (!y) return NULL;
    snn_step_scratch mark = snn_step_scratch_mark(x->device);
    float *workspace = snn_step_alloc(fn, k->conv2d_workspace_bytes(&d), x->device);
    if (!workspace) return NULL;
    const snn_bn_eval bn = {gamma->data, beta->data, running_mean->data, running_var->data, eps};
    k->conv2d_forward_bn_eval(y->data, x->data, w->data, b ? b->data : NULL, &bn, &d, workspace);
    snn_step_scratch_release(x->device, mark);
    return y;
}
