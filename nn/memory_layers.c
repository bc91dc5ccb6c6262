/*
 * memory_layers.c - the memory estimate's layers (internal; nn/memory_layers.h): for each layer
 * of the models, what its ops allocate, in the order they do it (autograd/fn_*.c,
 * neurons/neuron_op.c, neurons/bn_neuron.c), told to nn/memory_walk.c's accounting. The model
 * walks (nn/model_memory.c, and an rsnn's in nn/model_rsnn.c) string these together.
 *
 * Test: tests/test_memory_estimate.c (through snn_model_memory_estimate).
 */
#include "memory_layers.h"
#include "tensor/error.h"

int snn_walk_conv(snn_walk *w, int in, double images, int cin, int cout, int k, int stride,
                  int pad, int *h, int *wd)
{
    int ho = (*h + 2 * pad - k) / stride + 1, wo = (*wd + 2 * pad - k) / stride + 1;
    snn_walk_param(w, (double)cout * cin * k * k, true);
    if (w->traces) w->trace_numel += images * cin * *h * *wd; /* OTTT: its input's trace */
    int out = snn_walk_conv_output(w, images * cout * ho * wo, in);
    /* the same workspace serves forward and backward; ask the device for sizes its planning
     * arithmetic (int fields) is made for, else take the im2col matrix (C_in K K, images
     * H_out W_out) as the size: a size that large is refused whatever the exact number. On
     * CUDA the size depends on the precision and conv path set now (BF16's im2col matrix is
     * bf16, the implicit-GEMM layers need none), so estimate after snn_set_precision, as the
     * programs do. */
    double ws = 4.0 * cin * k * k * images * ho * wo, ws_consuming = -1.0;
    if (w->k && w->k->conv2d_workspace_bytes && images <= (double)(1 << 24) && ws < 1e12) {
        snn_conv2d_dims d = {(int)images, cin, *h, *wd, cout, k, k, stride, pad, ho, wo};
        ws = (double)w->k->conv2d_workspace_bytes(&d);
        /* dx written over dy (autograd/fn_conv2d.c): the input's gradient takes no block */
        if (out >= 0 && !w->traces && w->k->conv2d_dx_over_dout)
            w->hand_over[out] = w->k->conv2d_dx_over_dout(&d);
        /* the backward consumes dy where nothing else reads it (its gradient not retained,
         * decided when the largest scratch is read): a workspace that may be smaller */
        if (out >= 0 && w->k->conv2d_backward_consuming_workspace_bytes)
            ws_consuming = (double)w->k->conv2d_backward_consuming_workspace_bytes(&d);
    }
    ws = snn_walk_round_up(ws, w->align);
    if (ws > w->workspace) w->workspace = ws;
    /* the workspace, and x unpacked if it is bits by then, on a device whose conv kernels do
     * not read bits (the CPU; on CUDA only the NCHW implicit GEMM, which TF32 and BF16 take for
     * no conv fed by spikes, since the channels-last kernel comes first); with OTTT's trace
     * the backward reads the trace, not x */
    const bool reads_bits = w->k && w->k->conv2d_backward_bits;
    snn_walk_backward_scratch(w, ws, reads_bits || w->traces ? -1 : in, -1);
    if (ws_consuming >= 0.0)
        snn_walk_backward_scratch_consuming(w, out,
                                            snn_walk_round_up(ws_consuming, w->align));
    if (w->device + ws > w->forward_peak) w->forward_peak = w->device + ws;
    *h = ho, *wd = wo;
    return out;
}

int snn_walk_batchnorm(snn_walk *w, int in, double numel, int channels)
{
    if (w->converted) { /* FirstStepBias: the folded shift, added into a new tensor */
        snn_walk_param(w, channels, true);
        return snn_walk_output(w, numel, in, -1);
    }
    snn_walk_param(w, 2.0 * channels, true);   /* weight, bias */
    snn_walk_param(w, 2.0 * channels + 1.0, false); /* running mean, var; batches */
    /* evaluation: the conv before it writes the batch-norm's output where the rule conv -> bn
     * runs them as one op (nn/fusion_rules.c), else the batch-norm writes its own */
    if (!w->training) return w->conv_bn_fused ? in : snn_walk_output(w, numel, in, -1);
    snn_walk_bf16_round(w, in);      /* a conv's output kept as bf16: its copy, made first */
    int out = snn_walk_output(w, numel, in, -1);
    snn_walk_alloc(w, channels);     /* batch mean, 1 / std */
    snn_walk_alloc(w, channels);
    snn_walk_backward_scratch(w, 0.0, in, -1); /* x unpacked if kept as bf16 */
    snn_walk_bf16_done(w, in);
    return out;
}

/* What a carrying layer (w->carry, nn/layer_neuron.c) adds, for `numel` elements over the
 * walk's T steps: its state (m = numel / T values, and as many again for ALIF's and ST-BIF's
 * second state), OWNED and kept across steps; an online step's copy of the state that entered
 * where backward reads it (`copy_in`: PLIF, ST-BIF; neurons/carry.c); a segment's state in and
 * out as STEP tensors and their gradients. */
static void carried_state(snn_walk *w, const snn_neuron_config *n, double numel, bool copy_in,
                          bool fused)
{
    if (w->carry == SNN_CARRY_NONE || snn_neuron_is_ann(n->kind)) return;
    /* the state ops' nodes beyond the plain op's one: the fused op's batch-norm part (and X,
     * a view), the node for each state that leaves (the carry op has the plain op's one) */
    const bool differentiable = w->carry == SNN_CARRY_DIFFERENTIABLE;
    const double second = n->kind == SNN_NEURON_ALIF || n->kind == SNN_NEURON_STBIF ? 1.0 : 0.0;
    if (fused && differentiable) w->host += snn_walk_node_bytes() + snn_walk_struct_bytes();
    if (differentiable) w->host += (1.0 + second) * snn_walk_node_bytes();
    /* and the gradients' structs those nodes make in backward: the fused op's X, and for each
     * state the gradients of V_in and V_out (their data is the step pool's, below) */
    const double states = n->kind == SNN_NEURON_ALIF || n->kind == SNN_NEURON_STBIF ? 2.0 : 1.0;
    if (differentiable)
        w->host += ((fused ? 1.0 : 0.0) + 2.0 * states) * snn_walk_struct_bytes();
    const double m = numel / w->T;
    w->state += states * m;
    w->state_bytes += states * snn_walk_round_up(4.0 * m, w->align);
    for (int i = 0; i < (int)states; i++) {
        SNN_ASSERT(w->states < WALK_MAX_STATES);
        w->state_node[w->states] = w->nodes; /* the neuron op, recorded next */
        w->state_numel[w->states++] = m;
    }
    if (w->carry == SNN_CARRY_CONSTANT) {
        if (copy_in) snn_walk_constant(w, m);
        return;
    }
    /* V_in's copy and V_out; their gradients come from the step pool (the replay takes V_out's
     * seeds when backward starts, and V_in's gradient at the layer's node: state_node) */
    for (int i = 0; i < (int)(2.0 * states); i++) snn_walk_constant(w, m);
}

int snn_walk_neuron(snn_walk *w, int in, const snn_neuron_config *n, double numel, double planes,
                    int channels)
{
    if (n->kind == SNN_NEURON_PLIF || n->kind == SNN_NEURON_QCLIP) snn_walk_param(w, 1.0, true);
    /* the ANN activations (snn_relu, snn_qclip): their output alone, no activity, no state */
    if (snn_neuron_is_ann(n->kind)) return snn_walk_output(w, numel, in, -1);
    carried_state(w, n, numel, n->kind == SNN_NEURON_PLIF || n->kind == SNN_NEURON_STBIF, false);
    const bool binary = snn_neuron_spikes_are_binary(n->kind);
    int out = binary ? snn_walk_spikes_output(w, numel, in, -1)  /* spikes */
                     : snn_walk_output(w, numel, in, -1);
    snn_walk_constant(w, planes * channels);     /* spike counts per (t, n, c) plane */
    snn_walk_backward_scratch(w, 0.0, out, -1);  /* BPTT reads the spikes */
    if (w->training) { /* H[t] for backward: IF and LIF keep it in their input's memory, a view
                        * (the builders' neurons consume their inputs: neuron_op.c), except
                        * the state op (neurons/carry.c), which writes it apart */
        if ((n->kind == SNN_NEURON_IF || n->kind == SNN_NEURON_LIF) &&
            w->carry == SNN_CARRY_DIFFERENTIABLE)
            snn_walk_constant(w, numel);
        else if (n->kind == SNN_NEURON_IF || n->kind == SNN_NEURON_LIF)
            w->host += snn_walk_struct_bytes();
        else if (n->kind == SNN_NEURON_ALIF) /* H and the threshold of every step */
            snn_walk_constant(w, 2.0 * numel);
        else snn_walk_constant(w, numel);
    }
    return out;
}

bool snn_walk_fuses(const snn_walk *w, const snn_neuron_config *n)
{
    return w->training && w->fusion && snn_neuron_takes_bn_input(n->kind);
}

int snn_walk_bn_neuron(snn_walk *w, int in, int residual, bool residual_bn,
                       const snn_neuron_config *n, double numel, double in_numel, double planes,
                       int channels)
{
    carried_state(w, n, numel, false, true); /* the carry op advances the state in backward */
    snn_walk_param(w, 2.0 * channels, true);   /* weight, bias */
    snn_walk_param(w, 2.0 * channels + 1.0, false); /* running mean, var; batches */
    /* a conv's output kept as bf16: its copy, made first; the op reads its bits, so its
     * floats are back in the pool before the spikes are made (nn/module.c,
     * nn/model_resnet.c) */
    snn_walk_bf16_round(w, in);
    snn_walk_bf16_done(w, in);
    if (residual_bn) { /* the residual a batch-norm's output of `residual`, never stored; a
                        * conv output kept as bf16 is kept before the op, which reads its bits */
        snn_walk_param(w, 2.0 * channels, true);
        snn_walk_param(w, 2.0 * channels + 1.0, false);
        snn_walk_bf16_round(w, residual);
        snn_walk_bf16_done(w, residual);
    }
    int out = snn_walk_spikes_output(w, numel, in, residual); /* spikes */
    snn_walk_constant(w, planes * channels);           /* spike counts per (t, n, c) plane */
    w->device += snn_walk_bits_bytes(w, numel); /* the spikes' bits, made with them (training) */
    w->bits_made[out] = true;
    w->pooled_untaped[out] = true; /* its spikes come from the pool, with a tape or not */
    for (int bn = 0; bn < (residual_bn ? 2 : 1); bn++) { /* x's batch-norm (and residual's) */
        snn_walk_alloc(w, 6.0 * channels);             /* (count, mean, M2) per channel, doubles */
        snn_walk_alloc(w, channels), snn_walk_alloc(w, channels); /* mean, 1 / std */
    }
    /* backward: dL/dX (in's shape) in in's gradient, which the batch-norm's backward then
     * replaces in place (else in scratch), and H where the device has no one-pass kernel
     * (which then reads the spikes, unpacked if they are bits by then). The kernels read in
     * as it was kept (floats or bf16) and a packed residual as bits. The repeated stem fuses
     * only with a one-pass kernel (its rule). */
    SNN_ASSERT(in_numel == numel || w->one_pass_backward);
    const bool in_place = w->k && w->k->batchnorm_backward_in_place;
    /* the one-pass kernel writes dL/dX over dL/dS: the spikes' gradient becomes in's (not
     * for the differentiable state op, whose three nodes keep X's gradient of their own:
     * neurons/bn_neuron_carry.c) */
    if (out >= 0 && in_place && w->one_pass_backward && in_numel == numel &&
        w->carry != SNN_CARRY_DIFFERENTIABLE)
        w->hand_over[out] = true;
    double scratch = in_place ? 0.0 : snn_walk_round_up(4.0 * in_numel, w->align);
    if (!w->one_pass_backward) scratch += snn_walk_round_up(4.0 * numel, w->align);
    /* TF32 / BF16: the batch-norm's sums, (C, 3) doubles, which the one-pass kernel makes,
     * kept to the step's end where the conv before takes dL/dx (autograd/grad_deferred.c):
     * 0.1 MB for a ResNet-18 in all, counted as held from here on, since a backward moment
     * before the last (a conv's workspace, the largest once the convs consume dL/dy) holds
     * those of every layer after it */
    if (w->bn_sums_fold && in_place && w->training)
        w->device += snn_walk_round_up(24.0 * channels, w->align);
    snn_walk_backward_scratch(w, scratch, w->one_pass_backward ? -1 : out, in_place ? -1 : in);
    return out;
}

int snn_walk_bn_then_neuron(snn_walk *w, int in, const snn_neuron_config *n, double numel,
                            double planes, int channels)
{
    if (snn_walk_fuses(w, n))
        return snn_walk_bn_neuron(w, in, -1, false, n, numel, numel, planes, channels);
    const int x = snn_walk_batchnorm(w, in, numel, channels);
    return snn_walk_neuron(w, x, n, numel, planes, channels);
}

int snn_walk_max_pool(snn_walk *w, int in, double out_numel)
{
    int out = snn_walk_output(w, out_numel, in, -1);
    /* the int32 argmax (a running max-pool's: only for a tape) */
    if (!w->converted || w->training) snn_walk_alloc(w, out_numel);
    return out;
}

int snn_walk_linear(snn_walk *w, int in, double rows, double in_features, int out_features)
{
    snn_walk_param(w, in_features * out_features + out_features, true);
    if (w->traces) w->trace_numel += rows * in_features; /* OTTT: its input's trace */
    int out = snn_walk_output(w, rows * out_features, in, -1);
    if (w->converted) out = snn_walk_output(w, rows * out_features, out, -1); /* + b at t = 0 */
    return out;
}

/* Dropout shared over T (snn_dropout_shared) on (T, N, F) with `per_sample` = F: in training
 * the mask (N, F), drawn once for all T steps, and the product x * mask (a node; the mask gets
 * no gradient); in evaluation the op returns its input, allocating nothing. */
int snn_walk_dropout(snn_walk *w, int in, double T, double N, double per_sample)
{
    if (!w->training) return in;
    snn_walk_constant(w, N * per_sample);
    return snn_walk_output(w, T * N * per_sample, in, -1);
}

int snn_walk_classifier(snn_walk *w, int x, const snn_model_config *c, double T, double N,
                        double flat)
{
    const double TN = T * N;
    const bool dropout_layers = c->dropout > 0.0f;
    x = snn_walk_view(w, TN * flat, x);
    if (dropout_layers) x = snn_walk_dropout(w, x, T, N, flat);
    x = snn_walk_linear(w, x, TN, flat, c->hidden);
    x = snn_walk_neuron(w, x, &c->neuron, TN * c->hidden, TN, c->hidden);
    if (dropout_layers) x = snn_walk_dropout(w, x, T, N, c->hidden);
    x = snn_walk_linear(w, x, TN, c->hidden, c->classes);
    if (c->spiking_readout) x = snn_walk_neuron(w, x, &c->neuron, TN * c->classes, TN, c->classes);
    return x;
}

int snn_walk_recurrent(snn_walk *w, int in, const snn_neuron_config *n, double T, double N,
                       double F)
{
    const double numel = T * N * F;
    const double step = snn_walk_round_up(4.0 * N * F, w->align); /* one (N, F) scratch */
    const bool alif = n->kind == SNN_NEURON_ALIF;
    snn_walk_param(w, F * F, true);                     /* w_rec */
    int out = snn_walk_spikes_output(w, numel, in, -1); /* the spikes; w_rec gets no pooled
                                                         * gradient (a parameter's is OWNED) */
    snn_walk_constant(w, numel);                        /* spike counts (T N, F) */
    if (w->training) snn_walk_constant(w, alif ? 2.0 * numel : numel); /* H (and th) */
    /* forward scratch, given back as the op returns: I[t] and V (and A) */
    const double forward = (alif ? 3.0 : 2.0) * step;
    if (w->device + forward > w->forward_peak) w->forward_peak = w->device + forward;
    /* backward scratch: G_I (T, N, F), G_S, two G_V (and two G_A); the spikes unpacked there if
     * they were kept as bits */
    const double backward = snn_walk_round_up(4.0 * numel, w->align) + (alif ? 5.0 : 3.0) * step;
    snn_walk_backward_scratch(w, backward, out, -1);
    return out;
}
